// cuda_shm.c: the registered CUDA shared memory regions: a srv_shmtab of
// reference-counted regions (shmtab.h) over a list of reference-counted IPC
// mappings, one per (handle, device) (see cuda_shm.h for why), guarded by
// the table's mutex. Without CUDA
// the same list exists but stays empty: Register refuses.
#include "server/sec/cuda_shm.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "server/sec/shmtab.h"

#if INFERD_HAVE_CUDA
#include <cuda.h>  // types only: driver entry points come through the runtime
#include <cuda_runtime_api.h>
#endif

typedef struct ipc_map {
  struct ipc_map *next;
  uint8_t handle[SRV_CUDA_IPC_HANDLE_SIZE];
  int device;
  void *base;      // what cudaIpcOpenMemHandle returned: the allocation's byte 0
  uint64_t size;   // the allocation's size (0: unknown, not checked)
  int regions;     // regions using it; guarded by srv_cuda_shm.tab.mu
} ipc_map;

struct srv_cuda_shm_region {
  srv_shmtab_entry ent;  // first: name, byte_size, refs (see shmtab.h)
  srv_cuda_shm *owner;
  int device;
  ipc_map *map;
};

struct srv_cuda_shm {
  srv_shmtab tab;
  ipc_map *maps;
  int n_devices;
};

#if INFERD_HAVE_CUDA
// The allocation range of a device pointer (cuMemGetAddressRange through the
// runtime, so the server does not link libcuda: a CUDA build must start on
// machines without a driver). 0 when the driver cannot say.
static uint64_t alloc_size(void *p) {
  typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || !fn)
    return 0;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (((range_fn)fn)(&base, &size, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) return 0;
  // the mapping starts at the allocation's base; what lies before p is not ours
  return (uint64_t)(base + size - (CUdeviceptr)(uintptr_t)p);
}
#endif

// Drops one region's use of m; closes it with the last. Called with s->tab.mu held.
static void map_unuse_locked(srv_cuda_shm *s, ipc_map *m) {
  if (--m->regions > 0) return;
  for (ipc_map **pp = &s->maps; *pp; pp = &(*pp)->next)
    if (*pp == m) {
      *pp = m->next;
      break;
    }
#if INFERD_HAVE_CUDA
  int prev = 0;
  cudaGetDevice(&prev);
  if (cudaSetDevice(m->device) == cudaSuccess) cudaIpcCloseMemHandle(m->base);
  cudaSetDevice(prev);
#endif
  free(m);
}

static void region_free(srv_cuda_shm_region *r) {
  if (r->map) {
    pthread_mutex_lock(&r->owner->tab.mu);
    map_unuse_locked(r->owner, r->map);
    pthread_mutex_unlock(&r->owner->tab.mu);
  }
  srv_shmtab_entry_close(&r->ent);
  free(r);
}

static void free_entry(srv_shmtab_entry *e) {
  region_free((srv_cuda_shm_region *)e);
}

void srv_cuda_shm_release(srv_cuda_shm_region *r) {
  if (r && srv_shmtab_unref(&r->ent)) region_free(r);
}

int srv_cuda_shm_create(srv_cuda_shm **out, size_t max_regions, err *e) {
  srv_cuda_shm *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  srv_shmtab_init(&s->tab, max_regions, free_entry);
#if INFERD_HAVE_CUDA
  int n = 0;
  // no driver or no device: an error from the runtime, and no regions
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  s->n_devices = n;
#endif
  *out = s;
  return 0;
}

void srv_cuda_shm_destroy(srv_cuda_shm *s) {
  if (!s) return;
  // held regions still point at s: the caller destroys it after every request is done
  srv_shmtab_close(&s->tab);
  free(s);
}

int srv_cuda_shm_n_devices(const srv_cuda_shm *s) { return s ? s->n_devices : 0; }

int srv_cuda_shm_has(srv_cuda_shm *s, const char *name) {
  return s ? srv_shmtab_has(&s->tab, name) : 0;
}

// Finds or opens the mapping of (handle, device) and counts one more region
// on it. Called with s->tab.mu held: opening under the lock keeps two registers
// of one handle from opening it twice.
static int map_use_locked(srv_cuda_shm *s, const char *name, const uint8_t *handle, int device, ipc_map **out,
                          err *e) {
  for (ipc_map *m = s->maps; m; m = m->next)
    if (m->device == device && memcmp(m->handle, handle, SRV_CUDA_IPC_HANDLE_SIZE) == 0) {
      m->regions++;
      *out = m;
      return 0;
    }
#if INFERD_HAVE_CUDA
  ipc_map *m = calloc(1, sizeof *m);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(m->handle, handle, SRV_CUDA_IPC_HANDLE_SIZE);
  m->device = device;
  int prev = 0;
  cudaGetDevice(&prev);
  cudaError_t rc = cudaSetDevice(device);
  if (rc != cudaSuccess) {
    free(m);
    return err_set(e, ERR_INVALID_ARGUMENT, "cuda shared memory region '%s': failed to set CUDA device to %d: %s", name,
                   device, cudaGetErrorString(rc));
  }
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  rc = cudaIpcOpenMemHandle(&m->base, h, cudaIpcMemLazyEnablePeerAccess);
  if (rc == cudaSuccess) m->size = alloc_size(m->base);
  cudaSetDevice(prev);
  if (rc != cudaSuccess) {
    free(m);
    cudaGetLastError();  // the failed open is not sticky; clear it for this thread's next call
    return err_set(e, ERR_INVALID_ARGUMENT, "cuda shared memory region '%s': failed to open CUDA IPC handle on device %d: %s",
                   name, device, cudaGetErrorString(rc));
  }
  m->regions = 1;
  m->next = s->maps;
  s->maps = m;
  *out = m;
  return 0;
#else
  (void)name, (void)device, (void)out;
  return err_set(e, ERR_INVALID_ARGUMENT, SRV_CUDA_SHM_NO_DEVICE_MSG);
#endif
}

int srv_cuda_shm_register(srv_cuda_shm *s, const char *name, const uint8_t *handle, size_t handle_len,
                          int64_t device_id, uint64_t byte_size, err *e) {
  if (s->n_devices == 0) return err_set(e, ERR_INVALID_ARGUMENT, SRV_CUDA_SHM_NO_DEVICE_MSG);
  if (!name || !*name) return err_set(e, ERR_INVALID_ARGUMENT, "a cuda shared memory region needs a name");
  if (handle_len != SRV_CUDA_IPC_HANDLE_SIZE)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "cuda shared memory region '%s': raw_handle has %zu bytes, a cudaIpcMemHandle_t has %d", name,
                   handle_len, SRV_CUDA_IPC_HANDLE_SIZE);
  if (device_id < 0 || device_id >= s->n_devices)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "cuda shared memory region '%s': device_id %" PRId64 " is not a device of this server (it has %d)",
                   name, device_id, s->n_devices);
  if (byte_size == 0) return err_set(e, ERR_INVALID_ARGUMENT, "cuda shared memory region '%s' has byte_size 0", name);
  srv_cuda_shm_region *r = calloc(1, sizeof *r);
  if (!r || srv_shmtab_entry_init(&r->ent, name, byte_size) != 0) {
    free(r);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  r->owner = s;
  r->device = (int)device_id;
  int rc = 0;
  pthread_mutex_lock(&s->tab.mu);
  if (srv_shmtab_find_locked(&s->tab, name)) {
    rc = err_set(e, ERR_ALREADY_EXISTS, "shared memory region '%s' already in manager", name);
  } else if ((rc = srv_shmtab_check_room_locked(&s->tab, name, "cuda shared memory", e)) != 0) {
    // refused before opening the handle
  } else if ((rc = map_use_locked(s, name, handle, r->device, &r->map, e)) == 0) {
    if (r->map->size && byte_size > r->map->size) {
      rc = err_set(e, ERR_INVALID_ARGUMENT,
                   "cuda shared memory region '%s': byte_size %" PRIu64 " exceeds the %" PRIu64
                   " bytes of the allocation behind the handle",
                   name, byte_size, r->map->size);
      map_unuse_locked(s, r->map);
      r->map = NULL;
    } else {
      (void)srv_shmtab_add_locked(&s->tab, &r->ent, "cuda shared memory", NULL);  // cannot fail: checked under this lock
    }
  }
  pthread_mutex_unlock(&s->tab.mu);
  if (rc) {
    srv_shmtab_entry_close(&r->ent);
    free(r);
  }
  return rc;
}

size_t srv_cuda_shm_unregister(srv_cuda_shm *s, const char *name) {
  return srv_shmtab_unregister(&s->tab, name);
}

void srv_cuda_shm_info_free(srv_cuda_shm_info *info, size_t n) {
  for (size_t i = 0; info && i < n; i++) free(info[i].name);
  free(info);
}

int srv_cuda_shm_status(srv_cuda_shm *s, const char *name, srv_cuda_shm_info **out, size_t *n_out, err *e) {
  srv_shmtab_entry **v;
  size_t n;
  *out = NULL;
  *n_out = 0;
  TRY(srv_shmtab_snapshot(&s->tab, name, &v, &n, e));
  if (n == 0 && name && *name) return err_set(e, ERR_NOT_FOUND, "Unable to find cuda shared memory region: '%s'", name);
  srv_cuda_shm_info *info = n ? calloc(n, sizeof *info) : NULL;
  size_t k = 0;
  int oom = n && !info;
  for (; !oom && k < n; k++) {
    const srv_cuda_shm_region *r = (const srv_cuda_shm_region *)v[k];
    info[k] = (srv_cuda_shm_info){.name = strdup(r->ent.name), .device_id = r->device, .byte_size = r->ent.byte_size};
    oom = !info[k].name;
  }
  srv_shmtab_snapshot_free(&s->tab, v, n);
  if (oom) {
    srv_cuda_shm_info_free(info, k);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  *out = info;
  *n_out = n;
  return 0;
}

int srv_cuda_shm_acquire(srv_cuda_shm *s, const char *name, uint64_t offset, uint64_t size,
                         srv_cuda_shm_region **region, err *e) {
  srv_cuda_shm_region *r = (srv_cuda_shm_region *)srv_shmtab_acquire(&s->tab, name);
  if (!r) return err_set(e, ERR_NOT_FOUND, "Unable to find cuda shared memory region: '%s'", name ? name : "");
  if (srv_shmtab_check_window(&r->ent, "cuda shared memory", offset, size, e) != 0) {
    srv_cuda_shm_release(r);
    return (int)e->code;
  }
  *region = r;
  return 0;
}

int srv_cuda_shm_device(const srv_cuda_shm_region *r) { return r->device; }

void *srv_cuda_shm_dev_ptr(const srv_cuda_shm_region *r, uint64_t offset) {
  return (uint8_t *)r->map->base + offset;
}

// One synchronous copy on the region's device, host to device or back.
static int copy(const srv_cuda_shm_region *r, uint64_t offset, void *host, size_t size, int to_device, err *e) {
#if INFERD_HAVE_CUDA
  if (size == 0) return 0;
  int prev = 0;
  cudaGetDevice(&prev);
  cudaError_t rc = cudaSetDevice(r->device);
  void *dev = srv_cuda_shm_dev_ptr(r, offset);
  if (rc == cudaSuccess)
    rc = to_device ? cudaMemcpy(dev, host, size, cudaMemcpyHostToDevice)
                   : cudaMemcpy(host, dev, size, cudaMemcpyDeviceToHost);
  cudaSetDevice(prev);
  if (rc == cudaSuccess) return 0;
  return err_set(e, ERR_INTERNAL, "cuda shared memory region '%s': copying %zu bytes %s the device failed: %s",
                 r->ent.name, size, to_device ? "to" : "from", cudaGetErrorString(rc));
#else
  (void)r, (void)offset, (void)host, (void)size, (void)to_device;
  return err_set(e, ERR_INTERNAL, SRV_CUDA_SHM_NO_DEVICE_MSG);
#endif
}

int srv_cuda_shm_read(const srv_cuda_shm_region *r, uint64_t offset, void *dst, size_t size, err *e) {
  return copy(r, offset, dst, size, 0, e);
}

int srv_cuda_shm_write(const srv_cuda_shm_region *r, uint64_t offset, const void *src, size_t size, err *e) {
  return copy(r, offset, (void *)src, size, 1, e);
}
