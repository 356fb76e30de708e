// infer.c: ModelInfer. On a CQ thread: unpack, validate against the model's
// config (every mismatch is INVALID_ARGUMENT naming the tensor and what was
// expected), point the engine's input tensors at the received bytes, hand
// the request to the scheduler. On the instance thread: pack each request's
// slice of the batch outputs and reply, then account statistics.
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/utf8.h"
#include "server/obs/log.h"
#include "server/core/order.h"
#include "server/core/request.h"
#include "server/core/server.h"

// --- helpers

static void fmt_dims(char *buf, size_t cap, int leading_batch, int n, const int64_t *dims) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "[");
  if (leading_batch) o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, n ? "-1," : "-1");
  for (int i = 0; i < n && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? "," : "", dims[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

// --- the request's memory
//
// protobuf-c's default unpack makes one malloc per submessage, string, array
// and bytes field (about fifteen for a one-input request), each freed alone
// on the thread that answers; on a loaded server malloc and free were about
// a tenth of a CQ thread's CPU (tests/bench/RESULTS.md, issue 13). A
// request's arena takes them from one block sized from the message instead,
// and is freed whole with the request. A piece over ARENA_BIG (a large
// tensor's bytes, protobuf-c's scan slabs for messages of many fields) gets
// a block of its own that protobuf-c's free really frees, so a message of
// many tiny fields does not keep its parse scratch for the request's life.
#define ARENA_BIG ((size_t)64 << 10)
#define ARENA_SLACK ((size_t)1024)  // beside the bytes: the tree's structs, names and arrays

typedef struct arena_block {
  struct arena_block *prev, *next;  // next only, for the bump chunks
  max_align_t mem[];
} arena_block;

typedef struct srv_arena {
  ProtobufCAllocator pa;  // allocator_data points back here
  uint8_t *cur, *end;     // the bump region: the first block's tail, or the newest chunk's
  arena_block *chunks;    // further bump chunks
  arena_block *big;       // pieces over ARENA_BIG, newest first
  max_align_t mem[];
} srv_arena;

static void *arena_alloc(void *data, size_t n) {
  srv_arena *a = data;
  const size_t align = sizeof(max_align_t);
  if (n > SIZE_MAX / 2) return NULL;
  n = (n + align - 1) & ~(align - 1);
  if (n > ARENA_BIG) {
    arena_block *b = malloc(sizeof *b + n);
    if (!b) return NULL;
    b->prev = NULL;
    b->next = a->big;
    if (a->big) a->big->prev = b;
    a->big = b;
    return b->mem;
  }
  if ((size_t)(a->end - a->cur) < n) {
    size_t cap = n < ARENA_BIG / 4 ? ARENA_BIG / 4 : n;
    arena_block *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->prev = NULL;
    c->next = a->chunks;
    a->chunks = c;
    a->cur = (uint8_t *)c->mem;
    a->end = a->cur + cap;
  }
  void *p = a->cur;
  a->cur += n;
  return p;
}

// Bump pieces go with the arena; big ones now.
static void arena_free(void *data, void *p) {
  srv_arena *a = data;
  if (!p) return;
  for (arena_block *b = a->big; b; b = b->next)
    if ((void *)b->mem == p) {
      if (b->prev) b->prev->next = b->next;
      else a->big = b->next;
      if (b->next) b->next->prev = b->prev;
      free(b);
      return;
    }
}

// An arena whose first block holds `hint` bytes of small pieces.
static srv_arena *arena_create(size_t hint) {
  hint = (hint + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  srv_arena *a = malloc(sizeof *a + hint);
  if (!a) return NULL;
  a->pa = (ProtobufCAllocator){.alloc = arena_alloc, .free = arena_free, .allocator_data = a};
  a->cur = (uint8_t *)a->mem;
  a->end = a->cur + hint;
  a->chunks = a->big = NULL;
  return a;
}

static void arena_destroy(srv_arena *a) {
  if (!a) return;
  for (arena_block *b = a->chunks, *next; b; b = next) next = b->next, free(b);
  for (arena_block *b = a->big, *next; b; b = next) next = b->next, free(b);
  free(a);
}

static void *arena_calloc(srv_arena *a, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = arena_alloc(a, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void srv_infer_request_free(srv_request *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_shm_held; i++) srv_shm_release(r->shm_held[i]);
  free(r->shm_held);
  free(r->shm_out);
  for (size_t i = 0; i < r->n_cuda_held; i++) srv_cuda_shm_release(r->cuda_held[i]);
  free(r->cuda_held);
  for (size_t i = 0; i < r->n_cuda_copies; i++) free(r->cuda_copies[i]);
  free(r->cuda_copies);
  free(r->cuda_in);
  arena_destroy(r->arena);  // msg and inputs with it
  free(r->typed_buf);
  // last: the generation (and the version this request counted on) may be freed from here
  if (r->reg) srv_registry_unref(r->reg, r->model);
  free(r);
}

static void record_failure(srv_version *v, srv_fail_reason why, int64_t t_recv_us) {
  if (!v) return;
  srv_stats *st = &v->stats;
  atomic_fetch_add(&st->fail.count, 1);
  atomic_fetch_add(&st->fail.ns, (uint64_t)(eng_now_us() - t_recv_us) * 1000);
  atomic_fetch_add(&st->fail_by_reason[why], 1);
}

static srv_fail_reason reason_of(int code) {
  switch (code) {
    case ERR_CANCELLED:
    case ERR_DEADLINE_EXCEEDED: return SRV_FAIL_CANCELED;
    case ERR_INTERNAL: return SRV_FAIL_BACKEND;
    case ERR_INVALID_ARGUMENT:
    case ERR_RESOURCE_EXHAUSTED:
    case ERR_UNAVAILABLE: return SRV_FAIL_REJECTED;
    default: return SRV_FAIL_OTHER;
  }
}

// --- typed contents -> contiguous bytes of the tensor's dtype

static int typed_count(const Inference__InferTensorContents *c) {
  if (!c) return 0;
  return c->n_bool_contents || c->n_int_contents || c->n_int64_contents || c->n_uint_contents ||
         c->n_uint64_contents || c->n_fp32_contents || c->n_fp64_contents || c->n_bytes_contents;
}

static int convert_typed(const char *name, dtype dt, const Inference__InferTensorContents *c, int64_t numel,
                         uint8_t *dst, err *e) {
  // an empty tensor may come without contents (build_request_with lets it),
  // beside another input's typed contents: once a NULL dereference, a remote
  // crash of the server (found by tests/fuzz/fuzz_infer)
  static const Inference__InferTensorContents none = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
  if (!c) c = &none;
  size_t have = 0;
  const char *field = "";
  switch (dt) {
    case DT_FP32: have = c->n_fp32_contents, field = "fp32_contents"; break;
    case DT_FP64: have = c->n_fp64_contents, field = "fp64_contents"; break;
    case DT_INT64: have = c->n_int64_contents, field = "int64_contents"; break;
    case DT_INT32: case DT_INT16: case DT_INT8: have = c->n_int_contents, field = "int_contents"; break;
    case DT_UINT32: case DT_UINT16: case DT_UINT8: have = c->n_uint_contents, field = "uint_contents"; break;
    case DT_UINT64: have = c->n_uint64_contents, field = "uint64_contents"; break;
    case DT_BOOL: have = c->n_bool_contents, field = "bool_contents"; break;
    default:
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': %s data must be sent in raw_input_contents", name,
                     dtype_wire_name(dt));
  }
  if ((int64_t)have != numel)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': got %zu %s values, expected %" PRId64, name, have, field,
                   numel);
  for (int64_t i = 0; i < numel; i++) {
    switch (dt) {
      case DT_FP32: ((float *)dst)[i] = c->fp32_contents[i]; break;
      case DT_FP64: ((double *)dst)[i] = c->fp64_contents[i]; break;
      case DT_INT64: ((int64_t *)dst)[i] = c->int64_contents[i]; break;
      case DT_INT32: ((int32_t *)dst)[i] = c->int_contents[i]; break;
      case DT_INT16: ((int16_t *)dst)[i] = (int16_t)c->int_contents[i]; break;
      case DT_INT8: ((int8_t *)dst)[i] = (int8_t)c->int_contents[i]; break;
      case DT_UINT32: ((uint32_t *)dst)[i] = c->uint_contents[i]; break;
      case DT_UINT16: ((uint16_t *)dst)[i] = (uint16_t)c->uint_contents[i]; break;
      case DT_UINT8: ((uint8_t *)dst)[i] = (uint8_t)c->uint_contents[i]; break;
      case DT_UINT64: ((uint64_t *)dst)[i] = c->uint64_contents[i]; break;
      case DT_BOOL: ((uint8_t *)dst)[i] = c->bool_contents[i] ? 1 : 0; break;
      default: break;
    }
  }
  return 0;
}

// --- scheduling parameters

// An unsigned integer request parameter (tritonclient sends priority as
// uint64 and timeout as int64; accept either).
static int uint_param(const Inference__InferParameter *p, const char *key, uint64_t *out, err *e) {
  switch (p->parameter_choice_case) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM: *out = p->uint64_param; return 0;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
      if (p->int64_param >= 0) {
        *out = (uint64_t)p->int64_param;
        return 0;
      }
      break;
    default: break;
  }
  return err_set(e, ERR_INVALID_ARGUMENT, "parameter '%s' must be a non-negative integer", key);
}

// Reads the request parameters the scheduler honours: "priority" (the
// priority level, 0 = the model's default) and "timeout" (queue timeout in
// microseconds, honoured when the queue policy allows overrides).
static int read_parameters(srv_request *r, err *e) {
  const Inference__ModelInferRequest *msg = r->msg;
  for (size_t i = 0; i < msg->n_parameters; i++) {
    const char *key = msg->parameters[i]->key;
    const Inference__InferParameter *p = msg->parameters[i]->value;
    if (!p) continue;
    uint64_t x = 0;
    if (strcmp(key, "priority") == 0) {
      TRY(uint_param(p, key, &x, e));
      if (x > UINT32_MAX) return err_set(e, ERR_INVALID_ARGUMENT, "priority %" PRIu64 " is out of range", x);
      r->item.priority = (uint32_t)x;
    } else if (strcmp(key, "timeout") == 0) {
      TRY(uint_param(p, key, &x, e));
      r->item.timeout_us = x > INT64_MAX ? INT64_MAX : (int64_t)x;
    }
  }
  return 0;
}

// --- client shared memory (Triton's shared_memory_* tensor parameters)

typedef struct shm_ref {
  const char *region;  // NULL: the tensor does not use shared memory
  uint64_t byte_size, offset;
  int has_size;
} shm_ref;

// Folds one tensor parameter into *ref (others are ignored here).
static int shm_param(shm_ref *ref, const char *key, const Inference__InferParameter *p, err *e) {
  if (!p || strncmp(key, "shared_memory_", 14) != 0) return 0;
  if (strcmp(key, "shared_memory_region") == 0) {
    if (p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
      return err_set(e, ERR_INVALID_ARGUMENT, "parameter 'shared_memory_region' must be a string");
    ref->region = p->string_param;
  } else if (strcmp(key, "shared_memory_byte_size") == 0) {
    TRY(uint_param(p, key, &ref->byte_size, e));
    ref->has_size = 1;
  } else if (strcmp(key, "shared_memory_offset") == 0) {
    TRY(uint_param(p, key, &ref->offset, e));
  }
  return 0;
}

// Reads a tensor's shared_memory_* parameters (the parameter entries of
// inputs and of requested outputs have the same layout).
#define READ_SHM_REF(ref, what, tensor, e)                                                                  \
  do {                                                                                                      \
    for (size_t p_ = 0; p_ < (tensor)->n_parameters; p_++)                                                  \
      if (shm_param(&(ref), (tensor)->parameters[p_]->key, (tensor)->parameters[p_]->value, (e)))           \
        return err_prefix((e), "%s '%s': ", what, (tensor)->name);                                          \
    if (((ref).region != NULL) != (ref).has_size)                                                           \
      return err_set((e), ERR_INVALID_ARGUMENT,                                                             \
                     "%s '%s': shared_memory_region and shared_memory_byte_size must be given together", what, \
                     (tensor)->name);                                                                       \
  } while (0)

// Takes a held reference to the window: a system region's bytes in *ptr, or
// (a name system shared memory does not know) a CUDA region in *cuda. One
// namespace for both kinds, as Triton's: the register RPCs refuse a name
// the other kind holds.
static int shm_take(srv_server *s, srv_request *r, const char *what, const char *tensor, const shm_ref *ref,
                    uint8_t **ptr, srv_cuda_shm_region **cuda, err *e) {
  if (!s->shm) return err_set(e, ERR_FAILED_PRECONDITION, "%s '%s': " SRV_SHM_DISABLED_MSG, what, tensor);
  *ptr = NULL;
  *cuda = NULL;
  srv_shm_region *reg;
  if (srv_shm_acquire(s->shm, ref->region, ref->offset, ref->byte_size, &reg, ptr, e) == 0) {
    r->shm_held[r->n_shm_held++] = reg;
    return 0;
  }
  if (e->code != ERR_NOT_FOUND || !srv_cuda_shm_has(s->cuda_shm, ref->region))
    return err_prefix(e, "%s '%s': ", what, tensor);
  if (srv_cuda_shm_acquire(s->cuda_shm, ref->region, ref->offset, ref->byte_size, cuda, e) != 0)
    return err_prefix(e, "%s '%s': ", what, tensor);
  r->cuda_held[r->n_cuda_held++] = *cuda;
  return 0;
}

// Whether config input ci in a CUDA region can stay there until its batch
// is assembled: some GPU instance of the model takes it as device bytes
// (eng_model_device_input; the batch then copies it device to device, or
// from its device to the instance's), and it is not padded (padding is
// done on the host).
static int cuda_input_stays(const eng_model *em, size_t ci) {
  const eng_pad *pad = eng_model_pad(em);
  if (pad && pad->in[ci].on) return 0;
  for (int i = 0; i < eng_model_n_instances(em); i++)
    if (eng_model_device_input(em, i, ci) >= 0) return 1;
  return 0;
}

// An input in a CUDA region: left there (r->cuda_in, data NULL) when a GPU
// instance can take it in place, else copied into a host buffer the request
// owns (one device-to-host copy on the CQ thread).
static int cuda_input(srv_request *r, size_t ci, const char *tensor, srv_cuda_shm_region *cuda, uint64_t offset,
                      size_t bytes, void **data, err *e) {
  const eng_model *em = r->version->model;
  if (bytes && cuda_input_stays(em, ci)) {
    if (!r->cuda_in && !(r->cuda_in = calloc(eng_model_n_inputs(em), sizeof *r->cuda_in)))
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    r->cuda_in[ci] = (srv_cuda_in){.region = cuda, .offset = offset};
    *data = NULL;
    return 0;
  }
  atomic_fetch_add(&r->version->stats.cuda_in_host, 1);
  void *buf = malloc(bytes ? bytes : 1);
  if (!buf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  r->cuda_copies[r->n_cuda_copies++] = buf;
  if (srv_cuda_shm_read(cuda, offset, buf, bytes, e) != 0) return err_prefix(e, "input '%s': ", tensor);
  *data = buf;
  return 0;
}

// Requests are batched only with requests whose non-batch dims are equal,
// except the sequence dim of padded inputs (pad: NULL when the model does
// not pad), which the batcher reads from the item's seq_len instead.
static uint64_t shape_key(const eng_tensor *in, size_t n, const eng_pad *pad) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the dims after the first
  for (size_t i = 0; i < n; i++)
    for (int d = 1; d < in[i].ndims; d++) {
      int padded = pad && pad->in[i].on && pad->in[i].dim == d;
      uint64_t x = padded ? UINT64_MAX : (uint64_t)in[i].dims[d];
      for (int b = 0; b < 8; b++) h = (h ^ ((x >> (8 * b)) & 0xff)) * 1099511628211ull;
    }
  return h;
}

// --- validation

// A shape's element count and byte size, refusing what does not fit in
// int64 bytes: dims are the client's (each checked >= 0 but unbounded), and
// eng_numel's product overflows (UB) on e.g. [8, 2^61], while a product that
// wraps size_t, [1, 2^62] of INT64, would make the byte size 0 and match an
// empty raw input (found by tests/fuzz/fuzz_infer).
static int checked_bytes(const eng_tensor *t, int64_t *numel, size_t *bytes) {
  int64_t n = 1, b;
  for (int d = 0; d < t->ndims; d++)
    if (__builtin_mul_overflow(n, t->dims[d], &n)) return -1;
  if (__builtin_mul_overflow(n, (int64_t)dtype_size(t->dt), &b)) return -1;
  *numel = n;
  *bytes = (size_t)b;
  return 0;
}

static int find_config_input(const eng_model *em, const char *name) {
  for (size_t i = 0; i < eng_model_n_inputs(em); i++)
    if (strcmp(eng_model_input(em, i)->name, name) == 0) return (int)i;
  return -1;
}

// Checks one input's datatype and shape; fills *rows with its batch size.
static int check_input(const srv_model *m, const eng_io *ci, int max_batch,
                       const Inference__ModelInferRequest__InferInputTensor *in, int64_t *rows, err *e) {
  dtype dt = dtype_from_wire(in->datatype);
  if (dt != ci->dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': datatype '%s' does not match the model's, expected %s",
                   in->name, in->datatype, dtype_wire_name(ci->dt));
  // the shapes are spelled out for the error messages only (formatting them
  // for every request was a visible share of a CQ thread's CPU)
  char want[160], got[160];
#define SHAPES()                                                                                         \
  (fmt_dims(want, sizeof want, max_batch > 0, ci->ndims, ci->dims),                                      \
   fmt_dims(got, sizeof got, 0, (int)(in->n_shape < ENG_MAX_DIMS ? in->n_shape : ENG_MAX_DIMS), in->shape))
  int batched = max_batch > 0;
  if ((int)in->n_shape != ci->ndims + batched)
    return SHAPES(), err_set(e, ERR_INVALID_ARGUMENT, "input '%s': shape %s has %zu dims, expected shape %s",
                             in->name, got, in->n_shape, want);
  for (size_t d = 0; d < in->n_shape; d++)
    if (in->shape[d] < 0)
      return SHAPES(), err_set(e, ERR_INVALID_ARGUMENT, "input '%s': shape %s has a negative dim", in->name, got);
  for (int d = 0; d < ci->ndims; d++) {
    int64_t want_d = ci->dims[d], got_d = in->shape[d + batched];
    if (want_d >= 0 && want_d != got_d)
      return SHAPES(), err_set(e, ERR_INVALID_ARGUMENT,
                               "input '%s': shape %s does not match the model's, expected shape %s", in->name, got,
                               want);
  }
#undef SHAPES
  *rows = 1;
  if (batched) {
    *rows = in->shape[0];
    if (*rows < 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': batch size %" PRId64 " must be at least 1", in->name,
                     *rows);
    if (*rows > max_batch)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': batch size %" PRId64 " exceeds max_batch_size %d of model '%s'", in->name, *rows,
                     max_batch, m->name);
  }
  return 0;
}

// Reads the shared_memory_* parameters of every input and requested output;
// *n_in_shm counts the inputs that use them.
static int read_shm_refs(const Inference__ModelInferRequest *msg, shm_ref *in_refs, shm_ref *out_refs,
                         size_t *n_in_shm, size_t *n_any, err *e) {
  *n_in_shm = *n_any = 0;
  for (size_t i = 0; i < msg->n_inputs; i++) {
    READ_SHM_REF(in_refs[i], "input", msg->inputs[i], e);
    *n_in_shm += in_refs[i].region != NULL;
  }
  *n_any = *n_in_shm;
  for (size_t i = 0; i < msg->n_outputs; i++) {
    READ_SHM_REF(out_refs[i], "output", msg->outputs[i], e);
    *n_any += out_refs[i].region != NULL;
  }
  return 0;
}

static int build_request_with(srv_server *s, srv_request *r, const shm_ref *in_refs, const shm_ref *out_refs,
                              size_t n_in_shm, err *e) {
  const Inference__ModelInferRequest *msg = r->msg;
  const srv_model *m = r->model;
  const eng_model *em = r->version->model;
  int max_batch = eng_model_max_batch(em);
  size_t n_cfg = eng_model_n_inputs(em);
  r->inputs = arena_calloc(r->arena, n_cfg ? n_cfg : 1, sizeof *r->inputs);
  if (!r->inputs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");

  // raw_input_contents holds one entry per input that is not in shared memory
  int raw = msg->n_raw_input_contents > 0;
  if (raw && msg->n_raw_input_contents != msg->n_inputs - n_in_shm)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "raw_input_contents has %zu entries but the request has %zu inputs outside shared memory",
                   msg->n_raw_input_contents, msg->n_inputs - n_in_shm);
  int rc = 0;
  int *seen = arena_calloc(r->arena, n_cfg ? n_cfg : 1, sizeof *seen);
  if (!seen) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int64_t rows = -1;
  size_t typed_bytes = 0, raw_i = 0;
  for (size_t i = 0; rc == 0 && i < msg->n_inputs; i++) {
    const Inference__ModelInferRequest__InferInputTensor *in = msg->inputs[i];
    int ci = find_config_input(em, in->name);
    if (ci < 0) {
      char names[256] = "";
      size_t o = 0;
      for (size_t k = 0; k < n_cfg && o < sizeof names; k++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s'%s'", k ? ", " : "", eng_model_input(em, k)->name);
      rc = err_set(e, ERR_INVALID_ARGUMENT, "unexpected input '%s' for model '%s' (its inputs: %s)", in->name,
                   m->name, names);
      break;
    }
    if (seen[ci]++) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is given twice", in->name);
      break;
    }
    int64_t in_rows = 1;
    rc = check_input(m, eng_model_input(em, (size_t)ci), max_batch, in, &in_rows, e);
    if (rc) break;
    if (rows >= 0 && in_rows != rows) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s': batch size %" PRId64 " differs from the other inputs' %" PRId64,
                   in->name, in_rows, rows);
      break;
    }
    rows = in_rows;
    eng_tensor *t = &r->inputs[ci];
    t->dt = eng_model_input(em, (size_t)ci)->dt;
    t->ndims = (int)in->n_shape;
    memcpy(t->dims, in->shape, in->n_shape * sizeof *in->shape);
    int64_t numel;
    if (checked_bytes(t, &numel, &t->bytes) != 0) {
      char got[160];
      fmt_dims(got, sizeof got, 0, t->ndims, t->dims);
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s': shape %s of %s is too large (over %" PRId64 " bytes)",
                   in->name, got, dtype_wire_name(t->dt), INT64_MAX);
      break;
    }
    if (in_refs[i].region) {
      if (typed_count(in->contents)) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s': contents given with shared_memory_region", in->name);
        break;
      }
      if (in_refs[i].byte_size != t->bytes) {
        char got[160];
        fmt_dims(got, sizeof got, 0, t->ndims, t->dims);
        rc = err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': shared_memory_byte_size %" PRIu64 ", expected %zu bytes for shape %s of %s",
                     in->name, in_refs[i].byte_size, t->bytes, got, dtype_wire_name(t->dt));
        break;
      }
      uint8_t *p = NULL;
      srv_cuda_shm_region *cuda = NULL;
      rc = shm_take(s, r, "input", in->name, &in_refs[i], &p, &cuda, e);
      t->data = p;
      if (rc == 0 && cuda) rc = cuda_input(r, (size_t)ci, in->name, cuda, in_refs[i].offset, t->bytes, &t->data, e);
    } else if (raw) {
      if (typed_count(in->contents)) {
        rc = err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': typed contents and raw_input_contents are mixed in one request", in->name);
        break;
      }
      const ProtobufCBinaryData *rd = &msg->raw_input_contents[raw_i++];
      if (rd->len != t->bytes) {
        char got[160];
        fmt_dims(got, sizeof got, 0, t->ndims, t->dims);
        rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s': got %zu bytes of raw data, expected %zu bytes for shape %s of %s",
                     in->name, rd->len, t->bytes, got, dtype_wire_name(t->dt));
        break;
      }
      t->data = rd->data;
    } else {
      if (!typed_count(in->contents) && numel > 0) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s' has no data (neither contents nor raw_input_contents)",
                     in->name);
        break;
      }
      typed_bytes += (t->bytes + 15) & ~(size_t)15;
    }
  }
  for (size_t k = 0; rc == 0 && k < n_cfg; k++)
    if (!seen[k])
      rc = err_set(e, ERR_INVALID_ARGUMENT, "missing input '%s' for model '%s'", eng_model_input(em, k)->name, m->name);
  if (rc) return rc;

  if (typed_bytes) {
    uint8_t *buf = malloc(typed_bytes);
    if (!buf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    r->typed_buf = buf;
    size_t off = 0;
    for (size_t i = 0; i < msg->n_inputs; i++) {
      const Inference__ModelInferRequest__InferInputTensor *in = msg->inputs[i];
      if (in_refs[i].region) continue;
      eng_tensor *t = &r->inputs[find_config_input(em, in->name)];
      t->data = buf + off;
      TRY(convert_typed(in->name, t->dt, in->contents, eng_numel(t->ndims, t->dims), buf + off, e));
      off += (t->bytes + 15) & ~(size_t)15;
    }
  }

  r->outputs_mask = 0;
  size_t n_out = eng_model_n_outputs(em);
  if (n_out > 64)  // the requested-outputs mask and the response are sized for 64
    return err_set(e, ERR_UNIMPLEMENTED, "model '%s' has %zu outputs; at most 64 are supported", m->name, n_out);
  for (size_t i = 0; i < msg->n_outputs; i++) {
    size_t k = 0;
    while (k < n_out && strcmp(eng_model_output(em, k)->name, msg->outputs[i]->name) != 0) k++;
    if (k == n_out)
      return err_set(e, ERR_INVALID_ARGUMENT, "unknown requested output '%s' for model '%s'", msg->outputs[i]->name,
                     m->name);
    if (r->outputs_mask & ((uint64_t)1 << k))  // as inputs: each once (a second shared-memory target is ambiguous)
      return err_set(e, ERR_INVALID_ARGUMENT, "output '%s' is requested twice", msg->outputs[i]->name);
    r->outputs_mask |= (uint64_t)1 << k;
    if (!out_refs[i].region) continue;
    if (!r->shm_out && !(r->shm_out = calloc(n_out, sizeof *r->shm_out)))
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    srv_shm_out *o = &r->shm_out[k];
    TRY(shm_take(s, r, "output", msg->outputs[i]->name, &out_refs[i], &o->ptr, &o->cuda, e));
    o->offset = out_refs[i].offset;
    o->cap = out_refs[i].byte_size;
    o->region = out_refs[i].region;
  }
  if (msg->n_outputs == 0) r->outputs_mask = n_out >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n_out) - 1);
  r->item.rows = rows < 0 ? 1 : rows;
  // neither: validated outside a live call (srv_infer_prepare's fuzz driver), no deadline
  r->item.deadline_us = r->stream ? srv_stream_deadline_us(r->stream)
                      : r->call  ? srv_call_deadline_us(r->call)
                                 : INT64_MAX;
  TRY(read_parameters(r, e));
  const eng_pad *pad = eng_model_pad(em);
  r->item.shape_key = shape_key(r->inputs, n_cfg, pad);
  if (pad) TRY(eng_pad_seq_len(pad, r->inputs, &r->item.seq_len, e));
  r->padded_len = r->item.seq_len;
  return 0;
}

static int build_request(srv_server *s, srv_request *r, err *e) {
  const Inference__ModelInferRequest *msg = r->msg;
  shm_ref *refs = arena_calloc(r->arena, msg->n_inputs + msg->n_outputs + 1, sizeof *refs);
  if (!refs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  size_t n_in_shm, n_any_shm;
  int rc = read_shm_refs(msg, refs, refs + msg->n_inputs, &n_in_shm, &n_any_shm, e);
  if (rc == 0 && n_any_shm &&
      (!(r->shm_held = calloc(n_any_shm, sizeof *r->shm_held)) ||
       !(r->cuda_held = calloc(n_any_shm, sizeof *r->cuda_held)) ||
       !(r->cuda_copies = calloc(n_in_shm ? n_in_shm : 1, sizeof *r->cuda_copies))))
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (rc == 0) rc = build_request_with(s, r, refs, refs + msg->n_inputs, n_in_shm, e);
  return rc;
}

static void answer(srv_request *r, uint8_t *resp, size_t len, int code, const char *msg);

// proto3 string fields must be UTF-8, and protobuf-c does not check: a
// broken id or name would be echoed into the response (or a log line) where
// the client's parser fails on it. Refused, without quoting the bytes; so
// are names and ids over their limits (a 100 KB name came back in the error).
// Names (model, version, tensors, parameter keys) and ids longer than these
// are refused before anything quotes them back in an error or a log line.
#define SRV_MAX_NAME_BYTES 1024
#define SRV_MAX_ID_BYTES 4096

static int text_field(const char *what, const char *str, size_t cap, err *e) {
  if (!str) return 0;
  size_t n = strlen(str);
  if (n > cap) return err_set(e, ERR_INVALID_ARGUMENT, "%s of %zu bytes exceeds the limit of %zu", what, n, cap);
  if (utf8_valid(str, n)) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT, "%s is not valid UTF-8 (proto3 string fields must be)", what);
}

static int text_param(const char *what, const char *key, const Inference__InferParameter *v, err *e) {
  TRY(text_field(what, key, SRV_MAX_NAME_BYTES, e));
  if (v && v->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
    TRY(text_field(what, v->string_param, SRV_MAX_ID_BYTES, e));
  return 0;
}

static int check_strings(const Inference__ModelInferRequest *m, err *e) {
  TRY(text_field("model_name", m->model_name, SRV_MAX_NAME_BYTES, e));
  TRY(text_field("model_version", m->model_version, SRV_MAX_NAME_BYTES, e));
  TRY(text_field("id", m->id, SRV_MAX_ID_BYTES, e));
  for (size_t i = 0; i < m->n_parameters; i++)
    TRY(text_param("a request parameter", m->parameters[i]->key, m->parameters[i]->value, e));
  for (size_t i = 0; i < m->n_inputs; i++) {
    const Inference__ModelInferRequest__InferInputTensor *t = m->inputs[i];
    TRY(text_field("an input name", t->name, SRV_MAX_NAME_BYTES, e));
    TRY(text_field("an input datatype", t->datatype, SRV_MAX_NAME_BYTES, e));
    for (size_t k = 0; k < t->n_parameters; k++)
      TRY(text_param("an input parameter", t->parameters[k]->key, t->parameters[k]->value, e));
  }
  for (size_t i = 0; i < m->n_outputs; i++) {
    const Inference__ModelInferRequest__InferRequestedOutputTensor *t = m->outputs[i];
    TRY(text_field("an output name", t->name, SRV_MAX_NAME_BYTES, e));
    for (size_t k = 0; k < t->n_parameters; k++)
      TRY(text_param("an output parameter", t->parameters[k]->key, t->parameters[k]->value, e));
  }
  return 0;
}

// --- unpacking without copying the tensors
//
// protobuf-c copies every bytes field it unpacks, and raw_input_contents
// (the tensors' bytes) is nearly all of a request. So the wire bytes are
// scanned first: the entries of raw_input_contents are left where they lie
// and the rest (names, shapes, parameters: some hundred bytes) is unpacked
// alone; the unpacked message's raw_input_contents then point into the
// wire bytes. Those are the received message itself when it outlives the
// request's use of its inputs (a unary call from the network keeps it until
// answered, srv_call_message_kept), else one copy in the request's arena.
// A message the scan cannot follow is unpacked whole, as before, so
// protobuf-c alone decides what parses.
#define RAW_INPUT_FIELD 7  // ModelInferRequest.raw_input_contents (proto/grpc_service.proto)

typedef struct wire_field {
  size_t start, end;   // the field's bytes, tag included
  size_t data, n;      // a length-delimited field's payload
  uint32_t number, type;
} wire_field;

// A varint of at most `max` bytes at *pos.
static int wire_varint(const uint8_t *b, size_t len, size_t *pos, int max, uint64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < max && *pos < len; i++) {
    uint8_t c = b[(*pos)++];
    v |= (uint64_t)(c & 0x7f) << (7 * i);
    if (!(c & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

// The top-level field at *pos; -1 where protobuf-c is left to judge
// (truncated, groups, unknown wire types, tags and lengths past 32 bits).
static int wire_next(const uint8_t *b, size_t len, size_t *pos, wire_field *f) {
  uint64_t tag, n;
  f->start = *pos;
  if (wire_varint(b, len, pos, 5, &tag) || tag > UINT32_MAX || (tag >> 3) == 0) return -1;
  f->number = (uint32_t)(tag >> 3);
  f->type = (uint32_t)(tag & 7);
  f->data = *pos;
  f->n = 0;
  switch (f->type) {
    case 0: if (wire_varint(b, len, pos, 10, &n)) return -1; break;
    case 1: if (len - *pos < 8) return -1; *pos += 8; break;
    case 5: if (len - *pos < 4) return -1; *pos += 4; break;
    case 2:
      if (wire_varint(b, len, pos, 5, &n) || n > len - *pos) return -1;
      f->data = *pos;
      f->n = (size_t)n;
      *pos += (size_t)n;
      break;
    default: return -1;
  }
  f->end = *pos;
  return 0;
}

static Inference__ModelInferRequest *unpack_request(srv_arena *a, const uint8_t *req, size_t len, int kept) {
  size_t n_raw = 0, rest_len = 0, pos = 0;
  wire_field f;
  while (pos < len) {
    if (wire_next(req, len, &pos, &f)) return inference__model_infer_request__unpack(&a->pa, len, req);
    if (f.number == RAW_INPUT_FIELD && f.type == 2) n_raw++;
    else rest_len += f.end - f.start;
  }
  if (n_raw == 0) return inference__model_infer_request__unpack(&a->pa, len, req);
  if (!kept) {  // the caller's bytes go with the call: one copy the request owns
    uint8_t *copy = arena_alloc(a, len);
    if (!copy) return NULL;
    memcpy(copy, req, len);
    req = copy;
  }
  uint8_t *rest = arena_alloc(a, rest_len ? rest_len : 1);
  ProtobufCBinaryData *raw = arena_alloc(a, n_raw * sizeof *raw);
  if (!rest || !raw) return NULL;
  size_t o = 0, k = 0;
  for (pos = 0; pos < len;) {
    wire_next(req, len, &pos, &f);  // the same bytes parsed above
    if (f.number == RAW_INPUT_FIELD && f.type == 2) {
      raw[k++] = (ProtobufCBinaryData){.len = f.n, .data = (uint8_t *)req + f.data};
    } else {
      memcpy(rest + o, req + f.start, f.end - f.start);
      o += f.end - f.start;
    }
  }
  Inference__ModelInferRequest *msg = inference__model_infer_request__unpack(&a->pa, rest_len, rest);
  if (!msg) return NULL;
  msg->n_raw_input_contents = n_raw;
  msg->raw_input_contents = raw;
  return msg;
}

int srv_infer_prepare(srv_server *s, srv_request *r, const uint8_t *req, size_t len, err *e) {
  int kept = r->call && srv_call_message_kept(r->call);
  // the tree and the message's fields but its tensors (and, where made, the message's copy)
  size_t hint = kept ? 2 * ARENA_SLACK : (len < ARENA_BIG ? len : ARENA_BIG) + ARENA_SLACK;
  r->arena = arena_create(hint);
  if (!r->arena) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  r->msg = unpack_request(r->arena, req, len, kept);
  if (!r->msg) return err_set(e, ERR_INVALID_ARGUMENT, "malformed ModelInferRequest: the message does not parse");
  TRY(check_strings(r->msg, e));
  TRY(srv_registry_find_ref(s->reg, r->msg->model_name, r->msg->model_version, &r->model, &r->version, e));
  r->reg = s->reg;
  return build_request(s, r, e);
}

// ModelInfer and each message of ModelStreamInfer: unpack, validate, queue.
static void infer_entry(srv_server *s, srv_call *call, srv_stream *st, const uint8_t *req, size_t len) {
  int64_t t_recv = eng_now_us();
  // Every CQ thread writing this one line per request bounces it between
  // cores; the readers (the drain's quiet period, the idle trim) count in
  // milliseconds, so a write when it moved on by 100 us is as good.
  if (t_recv - atomic_load_explicit(&s->infer_last_call_us, memory_order_relaxed) >= 100)
    atomic_store(&s->infer_last_call_us, t_recv);
  // Draining changes nothing here: a call the transport took is served (main
  // closes the transport once calls stop arriving, see its drain).
  atomic_fetch_add(&s->infer_inflight, 1);
  err e = {0};
  srv_request *r = calloc(1, sizeof *r);
  if (!r) {
    answer(&(srv_request){.call = call, .stream = st}, NULL, 0, ERR_RESOURCE_EXHAUSTED, "out of memory");
    atomic_fetch_sub(&s->infer_inflight, 1);
    return;
  }
  r->call = call;
  r->stream = st;
  r->t_recv_us = t_recv;
  int rc = srv_infer_prepare(s, r, req, len, &e);
  if (rc) {
    record_failure(r->version, SRV_FAIL_REJECTED, t_recv);
    srv_log(SRV_LOG_DEBUG, "ModelInfer rejected: %s", e.msg);
    srv_infer_send(s, r, NULL, 0, (int)e.code, e.msg);
    return;
  }
  atomic_fetch_add(&r->version->stats.pending, 1);
  r->traced = prof_trace_sample(s->trace);
  srv_sched_submit(s->sched, r);
}

void srv_infer_handler(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  infer_entry(ctx, call, NULL, req, len);
}

void srv_infer_stream_handler(void *ctx, srv_stream *st, const uint8_t *req, size_t len) {
  infer_entry(ctx, NULL, st, req, len);
}

// --- answering (instance thread) and dropping (under the scheduler's lock, any thread)

// pad_to_longest: the dims of a request's slice `have` (batch dim first) of
// config output k cut from the batch's padded length back to its own: every
// variable dim whose extent is the padded length. 0 when nothing changes.
static int crop_dims(const srv_request *r, const eng_pad *pad, size_t k, int nd, const int64_t *have, int64_t *want) {
  int cut = 0;
  for (int d = 0; d < nd; d++) {
    want[d] = have[d];
    if (d > 0 && d < 32 && (pad->out_var[k] >> d & 1) && have[d] == r->padded_len) {
      want[d] = r->item.seq_len;
      cut = 1;
    }
  }
  return cut;
}

static int pack_reply(srv_request *r, const eng_tensor *outputs, size_t n_outputs, int64_t row_off, uint8_t **out,
                      size_t *out_len, err *e) {
  const Inference__ModelInferRequest *msg = r->msg;
  const eng_model *em = r->version->model;
  Inference__ModelInferResponse resp = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  resp.model_name = r->model->name;
  resp.model_version = r->version->version_str;
  resp.id = msg->id;
  Inference__ModelInferResponse__InferOutputTensor ots[64], *otp[64];
  ProtobufCBinaryData raws[64];
  int64_t shapes[64][ENG_MAX_DIMS];
  uint8_t *crops[64];  // cropped copies, freed once packed
  size_t n = 0, n_crops = 0;
  int rc = 0;
  int batched = eng_model_max_batch(em) > 0;
  const eng_pad *pad = batched && r->padded_len != r->item.seq_len ? eng_model_pad(em) : NULL;
  for (size_t k = 0; k < n_outputs && k < 64; k++) {
    if (!(r->outputs_mask >> k & 1)) continue;
    const eng_tensor *t = &outputs[k];
    inference__model_infer_response__infer_output_tensor__init(&ots[n]);
    ots[n].name = (char *)eng_model_output(em, k)->name;
    ots[n].datatype = (char *)dtype_wire_name(t->dt);
    memcpy(shapes[n], t->dims, (size_t)t->ndims * sizeof t->dims[0]);
    size_t row_bytes = t->bytes, off = 0;
    if (batched && t->ndims > 0 && t->dims[0] > 0) {
      row_bytes = t->bytes / (size_t)t->dims[0];
      off = (size_t)row_off * row_bytes;
      shapes[n][0] = r->item.rows;
    }
    ots[n].n_shape = (size_t)t->ndims;
    ots[n].shape = shapes[n];
    otp[n] = &ots[n];
    raws[n].data = (uint8_t *)t->data + off;
    raws[n].len = batched ? row_bytes * (size_t)r->item.rows : t->bytes;
    int64_t want[ENG_MAX_DIMS];
    size_t esize = dtype_size(t->dt);
    if (pad && esize && t->ndims > 0 && crop_dims(r, pad, k, t->ndims, shapes[n], want)) {
      // one run from the slice's start (e.g. [1, L, H] of [1, Lpad, H]) needs no copy
      int last = 0;
      int64_t runs = 1;
      for (int d = 0; d < t->ndims; d++)
        if (want[d] != shapes[n][d]) last = d;
      for (int d = 0; d < last; d++) runs *= want[d];
      size_t bytes = esize * (size_t)eng_numel(t->ndims, want);
      if (runs != 1) {
        uint8_t *c = malloc(bytes ? bytes : 1);
        if (!c) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory cropping output '%s'", ots[n].name);
          break;
        }
        crops[n_crops++] = c;
        eng_pad_crop(c, raws[n].data, t->ndims, shapes[n], want, esize);
        raws[n].data = c;
      }
      raws[n].len = bytes;
      memcpy(shapes[n], want, (size_t)t->ndims * sizeof want[0]);
    }
    const srv_shm_out *so = r->shm_out && (r->shm_out[k].ptr || r->shm_out[k].cuda) ? &r->shm_out[k] : NULL;
    if (so) {
      // written where the client asked; the response keeps an empty entry so
      // raw_output_contents stays indexed like outputs (as Triton's does)
      if (raws[n].len > so->cap) {
        rc = err_set(e, ERR_INVALID_ARGUMENT,
                     "output '%s': %zu bytes do not fit in the %" PRIu64 " bytes given in shared memory region '%s'",
                     ots[n].name, raws[n].len, so->cap, so->region);
        break;
      }
      if (so->cuda) {
        if (srv_cuda_shm_write(so->cuda, so->offset, raws[n].data, raws[n].len, e) != 0) {
          rc = err_prefix(e, "output '%s': ", ots[n].name);
          break;
        }
      } else {
        memcpy(so->ptr, raws[n].data, raws[n].len);
      }
      raws[n].len = 0;
    }
    n++;
  }
  uint8_t *buf = NULL;
  size_t len = 0, n_hdr = 0;
  uint8_t hdr[16];
  if (rc == 0) {
    resp.n_outputs = n;
    resp.outputs = otp;
    resp.n_raw_output_contents = n;
    resp.raw_output_contents = raws;
    len = inference__model_infer_response__get_packed_size(&resp);
    // On a stream the answer is a ModelStreamInferResponse whose only field is
    // infer_response (2): its tag and length go in front of the same bytes.
    if (r->stream) {
      hdr[n_hdr++] = 2 << 3 | 2;
      for (uint64_t v = len; ; v >>= 7) {
        hdr[n_hdr++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        if (v <= 0x7f) break;
      }
    }
    buf = malloc(n_hdr + len ? n_hdr + len : 1);
    if (!buf) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory packing the response");
  }
  if (rc == 0) {
    memcpy(buf, hdr, n_hdr);
    inference__model_infer_response__pack(&resp, buf + n_hdr);
    *out = buf;
    *out_len = n_hdr + len;
  }
  for (size_t i = 0; i < n_crops; i++) free(crops[i]);
  return rc;
}

// A stream's failed request: ModelStreamInferResponse.error_message, with
// the request's model, version and id (when known) so the client can tell
// which of its requests failed. NULL when out of memory.
static char *valid_or_empty(char *str) { return str && utf8_valid(str, strlen(str)) ? str : (char *)""; }

static uint8_t *pack_stream_error(const srv_request *r, const char *msg, size_t *len) {
  Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
  Inference__ModelInferResponse ir = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  sr.error_message = (char *)(msg && *msg ? msg : "failed");
  if (r && r->msg) {  // echoed so the client can match the error; a field that is not UTF-8 is not
    ir.model_name = valid_or_empty(r->msg->model_name);
    ir.model_version = valid_or_empty(r->msg->model_version);
    ir.id = valid_or_empty(r->msg->id);
    sr.infer_response = &ir;
  }
  *len = inference__model_stream_infer_response__get_packed_size(&sr);
  uint8_t *buf = malloc(*len ? *len : 1);
  if (buf) inference__model_stream_infer_response__pack(&sr, buf);
  return buf;
}

// Sends an answer now.
static void answer(srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  if (r->stream) {
    if (!resp) resp = pack_stream_error(r, msg, &len);
    srv_stream_reply(r->stream, resp, resp ? len : 0);
  } else if (resp) {
    srv_call_reply(r->call, resp, len);
  } else {
    srv_call_fail(r->call, code, msg);
  }
}

void srv_infer_send(srv_server *s, srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  answer(r, resp, len, code, msg);
  srv_infer_request_free(r);
  atomic_fetch_sub(&s->infer_inflight, 1);
}

// An answer leaves now, or in its turn when the model preserves ordering;
// either way r is freed once it is sent (maybe before this returns).
static void deliver(srv_server *s, srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  if (r->ord) srv_order_answer(r, resp, len, code, msg);
  else srv_infer_send(s, r, resp, len, code, msg);
}

// The stage latencies of one answered request into the histograms, and
// into the trace file when the request was sampled.
static void record_stages(srv_server *s, srv_version *v, const srv_request *r, const eng_job *job, int64_t t_end,
                          uint64_t batch_id, int64_t rows) {
  srv_stats *st = &v->stats;
  // a sampled request's spans go on a lane of its own while it runs
  int tid = 0;
  if (r->traced) {
    tid = prof_trace_lane(s->trace, v->trace_pid, r->t_recv_us, t_end);
    char lane[32];
    snprintf(lane, sizeof lane, "requests %d", tid - PROF_TRACE_LANE_TID0);
    prof_trace_name_track(s->trace, v->trace_pid, tid, NULL, lane);
  }
  struct {
    const char *name;
    prof_hist *h;
    int64_t a, b;
  } stages[] = {
      {"request", st->h_request, r->t_recv_us, t_end},
      {"queue", st->h_queue, r->t_enqueue_us, job->t_start_us},
      {"compute_input", st->h_input, job->t_start_us, job->t_infer_start_us},
      {"compute_infer", st->h_infer, job->t_infer_start_us, job->t_infer_end_us},
      {"compute_output", st->h_output, job->t_infer_end_us, t_end},
  };
  for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
    prof_hist_record(stages[i].h, stages[i].b - stages[i].a);
    if (!r->traced) continue;
    prof_trace_span_info sp = {.name = stages[i].name, .start_us = stages[i].a, .end_us = stages[i].b,
                               .model = r->model->name, .version = v->version_str, .request_id = r->msg->id,
                               .batch_id = batch_id, .batch_size = (int)rows, .instance = job->instance,
                               .stream = job->stream, .device = eng_model_instance_device(v->model, job->instance),
                               .pid = v->trace_pid, .tid = tid};
    prof_trace_span(s->trace, &sp);
  }
}

// A batch's successful unary answers, sent on the reply queue's threads
// (replyq.h) so the instance thread can run its next batch meanwhile.
enum { CHUNK_MAX = 16 };
typedef struct reply_chunk {
  srv_replyq_item it;  // first: the queue's
  srv_server *s;
  int n;
  srv_request *r[CHUNK_MAX];
  uint8_t *resp[CHUNK_MAX];
  size_t len[CHUNK_MAX];
} reply_chunk;

static void send_chunk(srv_replyq_item *it) {
  reply_chunk *c = (reply_chunk *)it;
  for (int i = 0; i < c->n; i++) {
    srv_call_reply_queued(c->r[i]->call, c->resp[i], c->len[i]);  // one CQ wakeup for the burst
    srv_infer_request_free(c->r[i]);
    atomic_fetch_sub(&c->s->infer_inflight, 1);
  }
  free(c);
}

static void post_chunk(srv_server *s, reply_chunk *c) {
  c->it.fn = send_chunk;
  if (srv_replyq_post(s->replyq, &c->it) != 0) send_chunk(&c->it);  // stopping: sent here
}

// Packs every answer of the batch first, then accounts the statistics, then
// sends: a client that reads ModelStatistics after its answer sees its
// request counted. Batches of three or more unary requests are sent by the
// reply queue, in chunks spread over its threads; smaller ones here (a hop
// to another thread would only add latency to a lone request), as are
// stream answers (their order on the stream is kept) and ordered ones
// (server/core/order.c sends those in turn).
void srv_infer_complete(srv_server *s, srv_version *v, srv_request *const *reqs, size_t n, int rc, const err *e,
                        const eng_job *job, const eng_tensor *outputs, size_t n_outputs) {
  srv_stats *st = &v->stats;
  int64_t rows = 0;
  for (size_t i = 0; i < n; i++) rows += reqs[i]->item.rows;
  int64_t input_us = job->t_infer_start_us - job->t_start_us, infer_us = job->t_infer_end_us - job->t_infer_start_us;

  typedef struct packed {
    uint8_t *resp;
    size_t len;
    err e;
  } packed;
  packed stack_p[16];
  packed *pk = n <= 16 ? stack_p : calloc(n, sizeof *pk);
  int64_t row_off = 0;
  for (size_t i = 0; i < n; i++) {
    if (!pk) break;
    pk[i] = (packed){0};
    if (rc == 0) pack_reply(reqs[i], outputs, n_outputs, row_off, &pk[i].resp, &pk[i].len, &pk[i].e);
    row_off += reqs[i]->item.rows;
  }
  int64_t t_end = eng_now_us();

  uint64_t batch_id = atomic_fetch_add(&v->batch_ids, 1);
  if (rc == 0) {
    int dev = eng_model_instance_device(v->model, job->instance);
    if (dev >= 0 && job->device_ns)
      prof_gpus_busy(s->gpus, dev, job->t_infer_end_us - (int64_t)(job->device_ns / 1000), job->t_infer_end_us);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) ok += pk && !pk[i].e.code;
    prof_window_add(&st->win_requests, t_end, (double)ok);
    prof_window_add(&st->win_rows, t_end, (double)rows);
    prof_hist_record(st->h_batch, rows);
    atomic_fetch_add(&st->inference_count, (uint64_t)rows);
    atomic_fetch_add(&st->execution_count, 1);
    atomic_store(&st->last_inference_ms, srv_wall_ms());
    if (rows >= 1 && rows <= st->n_batch) {
      srv_batch_stat *b = &st->batch[rows];
      atomic_fetch_add(&b->count, 1);
      atomic_fetch_add(&b->input_ns, (uint64_t)input_us * 1000);
      atomic_fetch_add(&b->infer_ns, (uint64_t)infer_us * 1000);
      atomic_fetch_add(&b->output_ns, (uint64_t)(t_end - job->t_infer_end_us) * 1000);
    }
  } else {
    srv_log(SRV_LOG_WARN, "model '%s' version %s: execution failed: %s", reqs[0]->model->name, v->version_str,
            e->msg);
  }

  // a version preserves ordering or not, its requests alike; read before
  // any is answered (an ordered one may be sent and freed at once)
  int ordered = n && reqs[0]->ord;
  int offload = !ordered && s->replyq && n >= 3;
  int per = 0;
  if (offload) {  // about one chunk per thread, each worth a wakeup
    int th = srv_replyq_threads(s->replyq);
    per = (int)((n + (size_t)th - 1) / (size_t)th);
    per = per < 4 ? 4 : per > CHUNK_MAX ? CHUNK_MAX : per;
  }
  reply_chunk *chunk = NULL;
  for (size_t i = 0; i < n; i++) {
    srv_request *r = reqs[i];
    const err *fail = rc ? e : !pk ? NULL : pk[i].e.code ? &pk[i].e : NULL;
    if (!pk && rc == 0) {
      record_failure(v, SRV_FAIL_OTHER, r->t_recv_us);
      atomic_fetch_sub(&st->pending, 1);
      deliver(s, r, NULL, 0, ERR_RESOURCE_EXHAUSTED, "out of memory packing the response");
    } else if (fail) {
      record_failure(v, rc ? SRV_FAIL_BACKEND : SRV_FAIL_OTHER, r->t_recv_us);
      atomic_fetch_sub(&st->pending, 1);
      deliver(s, r, NULL, 0, (int)fail->code, fail->msg);
    } else {
      record_stages(s, v, r, job, t_end, batch_id, rows);
      atomic_fetch_add(&st->success.count, 1);
      atomic_fetch_add(&st->success.ns, (uint64_t)(t_end - r->t_recv_us) * 1000);
      atomic_fetch_add(&st->queue.count, 1);
      atomic_fetch_add(&st->queue.ns, (uint64_t)(job->t_start_us - r->t_enqueue_us) * 1000);
      atomic_fetch_add(&st->compute_input.count, 1);
      atomic_fetch_add(&st->compute_input.ns, (uint64_t)input_us * 1000);
      atomic_fetch_add(&st->compute_infer.count, 1);
      atomic_fetch_add(&st->compute_infer.ns, (uint64_t)infer_us * 1000);
      atomic_fetch_add(&st->compute_output.count, 1);
      atomic_fetch_add(&st->compute_output.ns, (uint64_t)(t_end - job->t_infer_end_us) * 1000);
      atomic_fetch_sub(&st->pending, 1);
      if (offload && !r->stream && (chunk || (chunk = calloc(1, sizeof *chunk)))) {  // no memory: sent here
        chunk->s = s;
        chunk->r[chunk->n] = r;
        chunk->resp[chunk->n] = pk[i].resp;
        chunk->len[chunk->n] = pk[i].len;
        if (++chunk->n == per) {
          post_chunk(s, chunk);
          chunk = NULL;
        }
        continue;  // the chunk answers and frees it
      }
      deliver(s, r, pk[i].resp, pk[i].len, 0, NULL);
    }
  }
  if (chunk) post_chunk(s, chunk);
  if (pk != stack_p) free(pk);
}

void srv_infer_drop(srv_server *s, srv_request *r, int code, const char *msg) {
  record_failure(r->version, reason_of(code), r->t_recv_us);
  atomic_fetch_sub(&r->version->stats.pending, 1);
  deliver(s, r, NULL, 0, code, msg);
}
