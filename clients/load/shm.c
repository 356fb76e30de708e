// shm.c: POSIX shared memory objects for inferd-load and their registration
// with the server (see shm.h for who owns what and what is left behind).
#include "clients/load/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clients/load/cudart.h"
#include "clients/load/rpc.h"
#include "grpc_service.pb-c.h"

struct ld_shm {
  char *name, *key;  // key: "" for CUDA memory
  size_t size;
  uint8_t *map;       // system: MAP_SHARED over the whole object
  ld_cudart *cuda;    // CUDA: the runtime (borrowed), the allocation and its IPC handle
  void *dptr;
  unsigned char handle[LD_CUDA_IPC_HANDLE_SIZE];
};

// --- one object

static void shm_free(ld_shm *s) {
  free(s->name);
  free(s->key);
  free(s);
}

int ld_shm_create(const char *name, const char *key, size_t size, const void *init, ld_shm **out, err *e) {
  *out = NULL;
  if (!name || !*name || !key || !*key)
    return err_set(e, ERR_INVALID_ARGUMENT, "a shared memory region needs a name and a key");
  if (size == 0 || size > (size_t)INT64_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "shared memory object '%s': size %zu is out of range", key, size);
  ld_shm *s = calloc(1, sizeof *s);
  if (!s || !(s->name = strdup(name)) || !(s->key = strdup(key))) {
    if (s) shm_free(s);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  s->size = size;
  int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    int en = errno;
    shm_free(s);
    return err_set(e, en == EEXIST ? ERR_ALREADY_EXISTS : ERR_INTERNAL, "cannot create shared memory object '%s': %s",
                   key, strerror(en));
  }
  // From here on the object is ours, so every failure unlinks it.
  int rc = 0, en;
  if (ftruncate(fd, (off_t)size) != 0) {
    en = errno;
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot size shared memory object '%s' to %zu bytes: %s", key, size,
                 strerror(en));
  } else if ((en = posix_fallocate(fd, 0, (off_t)size)) != 0) {
    // tmpfs pages are otherwise taken on first touch: a full /dev/shm would
    // then be a SIGBUS in our memcpy or in the server's output write.
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot reserve %zu bytes for shared memory object '%s': %s", size, key,
                 strerror(en));
  } else {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      en = errno;
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot map %zu bytes of shared memory object '%s': %s", size, key,
                   strerror(en));
    } else {
      s->map = p;
    }
  }
  close(fd);  // the mapping keeps the object
  if (rc) {
    shm_unlink(key);
    shm_free(s);
    return rc;
  }
  if (init) memcpy(s->map, init, size);  // otherwise zeros, as ftruncate made them
  *out = s;
  return 0;
}

int ld_shm_create_cuda(const char *name, ld_cudart *cuda, size_t size, const void *init, ld_shm **out, err *e) {
  *out = NULL;
  if (!name || !*name || !cuda) return err_set(e, ERR_INVALID_ARGUMENT, "a CUDA region needs a name and a runtime");
  if (size == 0) return err_set(e, ERR_INVALID_ARGUMENT, "CUDA region '%s': size 0", name);
  ld_shm *s = calloc(1, sizeof *s);
  if (!s || !(s->name = strdup(name)) || !(s->key = strdup(""))) {
    if (s) shm_free(s);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  s->size = size;
  s->cuda = cuda;
  if (ld_cudart_alloc(cuda, size, init, &s->dptr, s->handle, e) != 0) {
    int rc = (int)e->code;
    shm_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void ld_shm_destroy(ld_shm *s) {
  if (!s) return;
  if (s->cuda) {
    ld_cudart_free(s->cuda, s->dptr);
  } else {
    munmap(s->map, s->size);
    shm_unlink(s->key);
  }
  shm_free(s);
}

const char *ld_shm_name(const ld_shm *s) {
  return s->name;
}
const char *ld_shm_key(const ld_shm *s) {
  return s->key;
}
size_t ld_shm_size(const ld_shm *s) {
  return s->size;
}
uint8_t *ld_shm_data(const ld_shm *s) {
  return s->map;
}

int ld_shm_register(grpc_channel *ch, const ld_shm *s, int timeout_ms, err *e) {
  ProtobufCMessage *resp;
  if (s->cuda) {
    Inference__CudaSharedMemoryRegisterRequest c = INFERENCE__CUDA_SHARED_MEMORY_REGISTER_REQUEST__INIT;
    c.name = s->name;
    c.raw_handle.data = (uint8_t *)s->handle;
    c.raw_handle.len = sizeof s->handle;
    c.device_id = ld_cudart_device(s->cuda);
    c.byte_size = s->size;
    TRY(ld_unary(ch, "CudaSharedMemoryRegister", &c.base, &inference__cuda_shared_memory_register_response__descriptor,
                 timeout_ms, &resp, e));
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
  }
  Inference__SystemSharedMemoryRegisterRequest q = INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_REQUEST__INIT;
  q.name = s->name;
  q.key = s->key;
  q.offset = 0;
  q.byte_size = s->size;
  TRY(ld_unary(ch, "SystemSharedMemoryRegister", &q.base,
               &inference__system_shared_memory_register_response__descriptor, timeout_ms, &resp, e));
  protobuf_c_message_free_unpacked(resp, NULL);
  return 0;
}

int ld_shm_unregister(grpc_channel *ch, const ld_shm *s, int timeout_ms, err *e) {
  ProtobufCMessage *resp;
  if (s->cuda) {
    Inference__CudaSharedMemoryUnregisterRequest c = INFERENCE__CUDA_SHARED_MEMORY_UNREGISTER_REQUEST__INIT;
    c.name = s->name;
    TRY(ld_unary(ch, "CudaSharedMemoryUnregister", &c.base,
                 &inference__cuda_shared_memory_unregister_response__descriptor, timeout_ms, &resp, e));
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
  }
  Inference__SystemSharedMemoryUnregisterRequest q = INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_REQUEST__INIT;
  q.name = s->name;
  TRY(ld_unary(ch, "SystemSharedMemoryUnregister", &q.base,
               &inference__system_shared_memory_unregister_response__descriptor, timeout_ms, &resp, e));
  protobuf_c_message_free_unpacked(resp, NULL);
  return 0;
}

// --- every region of one run

struct ld_shm_set {
  ld_shm **objs;  // inputs in shared memory first, then outputs
  size_t n_objs;
  size_t n_registered;  // objs[0..n_registered) are registered: registration goes in order
  ld_region_ref *in_refs;
  size_t n_in;
  ld_output_req *outs;
  char **out_names;  // copies: the set may outlive the model description
  size_t n_out;
};

size_t ld_shm_set_count(const ld_shm_set *s) {
  return s->n_objs;
}
const ld_region_ref *ld_shm_set_inputs(const ld_shm_set *s) {
  return s->in_refs;
}

const ld_output_req *ld_shm_set_outputs(const ld_shm_set *s, size_t *n) {
  *n = s->n_out;
  return s->outs;
}

int ld_shm_set_destroy(ld_shm_set *s, grpc_channel *ch, int timeout_ms, err *e) {
  if (!s) return 0;
  int rc = 0;
  for (size_t i = 0; i < s->n_registered; i++) {
    err ue;
    if (ld_shm_unregister(ch, s->objs[i], timeout_ms, &ue) != 0 && rc == 0) {
      rc = (int)ue.code;
      if (e) *e = ue;
      err_prefix(e, "cannot unregister shared memory region '%s': ", ld_shm_name(s->objs[i]));
    }
  }
  for (size_t i = 0; i < s->n_objs; i++) ld_shm_destroy(s->objs[i]);
  for (size_t i = 0; s->out_names && i < s->n_out; i++) free(s->out_names[i]);
  free(s->out_names);
  free(s->objs);
  free(s->in_refs);
  free(s->outs);
  free(s);
  return rc;
}

// Creates objs[n_objs] as "<prefix>_<what><idx>" (in CUDA memory when cuda) and counts it in.
static int add_object(ld_shm_set *s, ld_cudart *cuda, const char *prefix, const char *what, size_t idx, size_t size,
                      const void *init, err *e) {
  char name[256], key[258];
  int w = snprintf(name, sizeof name, "%s_%s%zu", prefix, what, idx);
  if (w < 0 || (size_t)w >= sizeof name)
    return err_set(e, ERR_INVALID_ARGUMENT, "region prefix '%s' is too long", prefix);
  snprintf(key, sizeof key, "/%s", name);
  if (cuda) TRY(ld_shm_create_cuda(name, cuda, size, init, &s->objs[s->n_objs], e));
  else TRY(ld_shm_create(name, key, size, init, &s->objs[s->n_objs], e));
  s->n_objs++;
  return 0;
}

static int set_fill(ld_shm_set *s, ld_cudart *cuda, grpc_channel *ch, int timeout_ms, const char *prefix,
                    const ld_tensor *in, size_t n_in, const ld_model *m, size_t out_size, err *e) {
  for (size_t i = 0; i < n_in; i++) {
    if (in[i].size == 0) continue;  // nothing to map; stays in the message
    TRY(add_object(s, cuda, prefix, "in", i, in[i].size, in[i].data, e));
    ld_shm *o = s->objs[s->n_objs - 1];
    s->in_refs[i] = (ld_region_ref){ld_shm_name(o), ld_shm_size(o), 0};
  }
  for (size_t k = 0; k < m->n_outputs; k++) {
    TRY(add_object(s, cuda, prefix, "out", k, out_size, NULL, e));
    ld_shm *o = s->objs[s->n_objs - 1];
    if (!(s->out_names[k] = strdup(m->outputs[k].name))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    s->outs[k] = (ld_output_req){s->out_names[k], {ld_shm_name(o), ld_shm_size(o), 0}};
    s->n_out++;
  }
  for (size_t i = 0; i < s->n_objs; i++) {
    const ld_shm *o = s->objs[i];
    int rc = ld_shm_register(ch, o, timeout_ms, e);
    if (rc) {
      // A timed-out call may still have registered it; unregistering an
      // unknown name is harmless, so it is undone like the others.
      if (rc == ERR_DEADLINE_EXCEEDED) s->n_registered++;
      if (cuda)
        err_prefix(e, "cannot register CUDA shared memory region '%s' (device %d, %zu bytes): ", ld_shm_name(o),
                   ld_cudart_device(cuda), ld_shm_size(o));
      else
        err_prefix(e, "cannot register shared memory region '%s' (key '%s', %zu bytes): ", ld_shm_name(o),
                   ld_shm_key(o), ld_shm_size(o));
      return rc;
    }
    s->n_registered++;
  }
  return 0;
}

int ld_shm_set_create(grpc_channel *ch, int timeout_ms, const char *prefix, const ld_tensor *in, size_t n_in,
                      const ld_model *m, size_t out_size, ld_cudart *cuda, ld_shm_set **out, err *e) {
  *out = NULL;
  ld_shm_set *s = calloc(1, sizeof *s);
  size_t cap = n_in + m->n_outputs;
  if (!s || !(s->objs = calloc(cap ? cap : 1, sizeof *s->objs)) ||
      !(s->in_refs = calloc(n_in ? n_in : 1, sizeof *s->in_refs)) ||
      !(s->outs = calloc(m->n_outputs ? m->n_outputs : 1, sizeof *s->outs)) ||
      !(s->out_names = calloc(m->n_outputs ? m->n_outputs : 1, sizeof *s->out_names))) {
    if (s) ld_shm_set_destroy(s, ch, timeout_ms, NULL);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  s->n_in = n_in;
  int rc = set_fill(s, cuda, ch, timeout_ms, prefix, in, n_in, m, out_size, e);
  if (rc) {
    ld_shm_set_destroy(s, ch, timeout_ms, NULL);
    return rc;
  }
  *out = s;
  return 0;
}
