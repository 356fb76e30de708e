// server/core/infer_validate.c: a ModelInfer request checked against its
// model's config, on the CQ thread that received it. Every input and output
// is matched to the config's by name, dtype and shape (each mismatch is
// INVALID_ARGUMENT naming the tensor and what was expected); the engine's
// input tensors are pointed at the received bytes, at typed contents
// converted to raw bytes, or at client shared memory (system regions read in
// place, CUDA regions left for the batch's device copy or read to the host);
// the scheduling parameters (priority, timeout) and pad_to_longest's
// sequence length are read for the batcher.
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/strwire.h"
#include "server/core/arena.h"
#include "server/core/infer_internal.h"
#include "server/core/request.h"
#include "server/core/server.h"
#include "server/sec/shmguard.h"

// --- messages

static void fmt_dims(char *buf, size_t cap, int leading_batch, int n, const int64_t *dims) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "[");
  if (leading_batch) o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, n ? "-1," : "-1");
  for (int i = 0; i < n && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? "," : "", dims[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
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
    case DT_STRING: have = c->n_bytes_contents, field = "bytes_contents"; break;
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
      case DT_STRING:  // the wire layout (strwire.h): length, then the bytes
        strwire_put_len(dst, (uint32_t)c->bytes_contents[i].len);
        if (c->bytes_contents[i].len) memcpy(dst + 4, c->bytes_contents[i].data, c->bytes_contents[i].len);
        dst += 4 + c->bytes_contents[i].len;
        break;
      default: break;
    }
  }
  return 0;
}

// The wire layout's size of a STRING input's bytes_contents; -1 when an
// element is over the 4-byte length the layout can hold.
static int64_t typed_string_bytes(const Inference__InferTensorContents *c) {
  int64_t b = 0;
  for (size_t i = 0; c && i < c->n_bytes_contents; i++) {
    if (c->bytes_contents[i].len > UINT32_MAX) return -1;
    b += 4 + (int64_t)c->bytes_contents[i].len;
  }
  return b;
}

// A STRING input's bytes (raw, binary REST, or read from shared memory)
// must hold exactly numel elements in the wire layout: checked here, once,
// so the batch (its requests' bytes one after the other) and the engine's
// walk over it stay inside each request's bytes.
static int check_strings_layout(const char *name, const uint8_t *buf, size_t len, int64_t numel, err *e) {
  const char *why;
  uint64_t at;
  if (strwire_check(buf, len, (uint64_t)numel, &why, &at) == 0) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT,
                 "input '%s': %zu bytes of BYTES data for %" PRId64
                 " elements (each a 4-byte little-endian length, then its bytes): it %s (element %" PRIu64 ")",
                 name, len, numel, why, at);
}

// A STRING input in a system region: its bytes copied through the SIGBUS
// guard into memory the request owns (freed with it, among cuda_copies,
// and charged to --max-inflight-request-bytes with its message), since
// their layout is checked now and the client may change the region
// afterwards: read in place at the batch's gather, a changed last length
// could reach into the next request's rows. The engine reads the copy.
static int shm_string_copy(srv_request *r, const char *tensor, const uint8_t *src, size_t bytes, void **data,
                           err *e) {
  void *buf = malloc(bytes ? bytes : 1);
  if (!buf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  r->cuda_copies[r->n_cuda_copies++] = buf;
  r->shm_copied += bytes;
  if (bytes && srv_shmguard_read(buf, src, bytes) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': its shared memory region shrank below its registered size",
                   tensor);
  *data = buf;
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
    } else if (strcmp(key, "sequence_id") == 0) {
      // tritonclient sends a number as int64 (uint64 from other clients), a string ID as a string
      if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM) {
        r->seq.id.str = p->string_param ? p->string_param : "";
        r->seq.id.len = strlen(r->seq.id.str);
      } else {
        TRY(uint_param(p, key, &x, e));
        r->seq.id = (bat_seq_id){.num = x};
      }
    } else if (strcmp(key, "sequence_start") == 0 || strcmp(key, "sequence_end") == 0) {
      if (p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
        return err_set(e, ERR_INVALID_ARGUMENT, "parameter '%s' must be a bool", key);
      unsigned flag = key[9] == 's' ? BAT_SEQ_START : BAT_SEQ_END;
      if (p->bool_param) r->seq.flags |= flag;
      else r->seq.flags &= ~flag;
    }
  }
  return 0;
}

// sequence_batching: the control inputs the client does not send, one row
// each, from the request's correlation ID and flags (READY is always true:
// a batch holds only real requests). A request without a correlation ID is
// refused by the sequence batcher, which names the model; its controls are
// left at zero here.
static int fill_controls(srv_request *r, const eng_model_config *cfg, int max_batch, err *e) {
  const eng_sequence_batching *sq = &cfg->sequence;
  int has_id = r->seq.id.str ? r->seq.id.len > 0 : r->seq.id.num != 0;
  for (size_t i = 0; i < sq->n_controls; i++) {
    const eng_control *k = &sq->controls[i];
    eng_tensor *t = &r->inputs[k->input];
    uint8_t *d = srv_arena_calloc(r->arena, 1, 16);
    if (!d) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    t->dt = k->dt;
    t->ndims = max_batch > 0 ? 2 : 1;
    t->dims[0] = 1;
    t->dims[1] = 1;
    t->bytes = dtype_size(k->dt);
    t->data = d;
    switch (k->kind) {
      case ENG_CONTROL_START: TRY(bat_seq_control_flag(k->dt, k->false_true, (r->seq.flags & BAT_SEQ_START) != 0, d, e)); break;
      case ENG_CONTROL_END: TRY(bat_seq_control_flag(k->dt, k->false_true, (r->seq.flags & BAT_SEQ_END) != 0, d, e)); break;
      case ENG_CONTROL_READY: TRY(bat_seq_control_flag(k->dt, k->false_true, 1, d, e)); break;
      case ENG_CONTROL_CORRID:
        if (has_id) TRY(bat_seq_control_corrid(k->dt, &r->seq.id, d, e));
        break;
    }
  }
  return 0;
}

// Triton's classification extension: a requested output's "classification"
// parameter (its top n classes, answered as BYTES "value:index[:label]"
// strings by server/core/reply.c) read into r->class_count[k].
static int read_classification(srv_request *r, const Inference__ModelInferRequest__InferRequestedOutputTensor *o,
                               size_t k, size_t n_out, int in_shm, err *e) {
  const Inference__InferParameter *p = NULL;
  for (size_t j = 0; j < o->n_parameters; j++)
    if (strcmp(o->parameters[j]->key, "classification") == 0) p = o->parameters[j]->value;
  if (!p) return 0;
  uint64_t n = 0;
  if (uint_param(p, "classification", &n, e)) return err_prefix(e, "output '%s': ", o->name);
  if (n == 0 || n > SRV_CLASSIFICATION_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "output '%s': classification %" PRIu64 " must be in 1..%u", o->name, n,
                   SRV_CLASSIFICATION_MAX);
  if (in_shm)  // its strings' size is known only once the batch ran
    return err_set(e, ERR_INVALID_ARGUMENT, "output '%s': classification results are not written to shared memory",
                   o->name);
  dtype dt = srv_version_output(r->version, k)->dt;
  if (dt == DT_BOOL || dt == DT_FP16 || dt == DT_BF16 || dt == DT_STRING || !dtype_size(dt))
    return err_set(e, ERR_INVALID_ARGUMENT, "output '%s': class result not available for output due to unsupported "
                   "type '%s'", o->name, dtype_wire_name(dt));
  if (!r->class_count && !(r->class_count = srv_arena_calloc(r->arena, n_out, sizeof *r->class_count)))
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  r->class_count[k] = (uint32_t)n;
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

// An input of a message received in pieces (infer_pieces.c) stays in them,
// for the batch's gather to copy straight into the batch (sched.c), when
// the request goes to the scheduler (an engine's version: not an ensemble's,
// the repeat backend's or the generative one's, which read inputs whole) and
// the input is plain rows: not BYTES, not padded (padding reads it whole).
static int pieces_stay(const srv_request *r, size_t ci, dtype dt) {
  const srv_version *v = r->version;
  if (!v->model || v->ens || v->rep || v->llm || dt == DT_STRING) return 0;
  const eng_pad *pad = eng_model_pad(v->model);
  return !(pad && pad->in[ci].on);
}

// An input in a CUDA region: left there (r->cuda_in, data NULL) when a GPU
// instance can take it in place, else copied into a host buffer the request
// owns (one device-to-host copy on the CQ thread).
static int cuda_input(srv_request *r, size_t ci, const char *tensor, srv_cuda_shm_region *cuda, uint64_t offset,
                      size_t bytes, void **data, err *e) {
  const eng_model *em = r->version->model;
  if (bytes && em && cuda_input_stays(em, ci)) {  // an ensemble (no engine) reads it to the host
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

// A client input (sequence_batching's control inputs are the server's).
static int find_config_input(const srv_version *v, const char *name) {
  for (size_t i = 0; i < srv_version_n_client_inputs(v); i++)
    if (strcmp(srv_version_input(v, i)->name, name) == 0) return (int)i;
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
  const srv_version *em = r->version;  // its engine's tensors, or an ensemble's (registry.h)
  int max_batch = srv_version_max_batch(em);
  size_t n_cfg = srv_version_n_inputs(em), n_client = srv_version_n_client_inputs(em);
  r->inputs = srv_arena_calloc(r->arena, n_cfg ? n_cfg : 1, sizeof *r->inputs);
  if (!r->inputs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");

  // raw_input_contents holds one entry per input that is not in shared memory
  int raw = msg->n_raw_input_contents > 0;
  // before the count: Triton's words, which its clients test for
  for (size_t i = 0; raw && i < msg->n_inputs; i++)
    if (typed_count(msg->inputs[i]->contents))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "contents field must not be specified when using raw_input_contents for '%s' for model '%s' "
                     "(typed contents and raw_input_contents are mixed in one request)",
                     msg->inputs[i]->name, m->name);
  if (raw && msg->n_raw_input_contents != msg->n_inputs - n_in_shm)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "raw_input_contents has %zu entries but the request has %zu inputs outside shared memory",
                   msg->n_raw_input_contents, msg->n_inputs - n_in_shm);
  int rc = 0;
  int *seen = srv_arena_calloc(r->arena, n_cfg ? n_cfg : 1, sizeof *seen);
  if (!seen) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int64_t rows = -1;
  size_t typed_bytes = 0, raw_i = 0;
  for (size_t i = 0; rc == 0 && i < msg->n_inputs; i++) {
    const Inference__ModelInferRequest__InferInputTensor *in = msg->inputs[i];
    int ci = find_config_input(em, in->name);
    if (ci < 0) {
      char names[256] = "";
      size_t o = 0;
      for (size_t k = 0; k < n_client && o < sizeof names; k++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s'%s'", k ? ", " : "", srv_version_input(em, k)->name);
      rc = err_set(e, ERR_INVALID_ARGUMENT, "unexpected input '%s' for model '%s' (its inputs: %s)", in->name,
                   m->name, names);
      break;
    }
    if (seen[ci]++) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is given twice", in->name);
      break;
    }
    int64_t in_rows = 1;
    rc = check_input(m, srv_version_input(em, (size_t)ci), max_batch, in, &in_rows, e);
    if (rc) break;
    if (rows >= 0 && in_rows != rows) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s': batch size %" PRId64 " differs from the other inputs' %" PRId64,
                   in->name, in_rows, rows);
      break;
    }
    rows = in_rows;
    eng_tensor *t = &r->inputs[ci];
    t->dt = srv_version_input(em, (size_t)ci)->dt;
    t->ndims = (int)in->n_shape;
    // a rank-0 input has no shape array (NULL): nothing to copy
    if (in->n_shape) memcpy(t->dims, in->shape, in->n_shape * sizeof *in->shape);
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
      if (t->dt == DT_STRING) t->bytes = (size_t)in_refs[i].byte_size;  // its layout checked once read
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
      if (rc == 0 && p && t->dt == DT_STRING) {
        rc = shm_string_copy(r, in->name, p, t->bytes, &t->data, e);
        if (rc == 0) rc = check_strings_layout(in->name, t->data, t->bytes, numel, e);
      } else if (rc == 0 && p) {
        if (!r->shm_in && !(r->shm_in = srv_arena_calloc(r->arena, n_cfg, sizeof *r->shm_in))) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
          break;
        }
        r->shm_in[ci] = in_refs[i].region;
      }
      if (rc == 0 && cuda) rc = cuda_input(r, (size_t)ci, in->name, cuda, in_refs[i].offset, t->bytes, &t->data, e);
      if (rc == 0 && cuda && t->dt == DT_STRING) {
        if (!t->data)  // left in the region for a GPU instance, which never takes strings (engine/model.c)
          rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s': BYTES data cannot stay in CUDA shared memory", in->name);
        else
          rc = check_strings_layout(in->name, t->data, t->bytes, numel, e);
      }
    } else if (raw) {
      const size_t rk = raw_i++;
      ProtobufCBinaryData *rd = &msg->raw_input_contents[rk];
      const srv_pieces *pc = r->raw_pieces && r->raw_pieces[rk].n ? &r->raw_pieces[rk] : NULL;
      int stays = pc && rd->len == t->bytes && pieces_stay(r, (size_t)ci, t->dt);
      if (pc && !stays) {  // read whole: joined into one run the request owns (once, on the CQ thread)
        if (!(rd->data = srv_infer__join_pieces(r->arena, pc->v, pc->n, rd->len))) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
          break;
        }
        atomic_fetch_add(&r->version->stats.pieces_joined, 1);
      }
      if (stays) {
        if (!r->in_pieces && !(r->in_pieces = srv_arena_calloc(r->arena, n_cfg, sizeof *r->in_pieces))) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
          break;
        }
        r->in_pieces[ci] = *pc;
        t->data = NULL;
        continue;
      }
      if (t->dt == DT_STRING) {
        rc = check_strings_layout(in->name, rd->data, rd->len, numel, e);
        t->bytes = rd->len;
        t->data = rd->data;
        continue;
      }
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
      if (t->dt == DT_STRING) {
        int64_t b = typed_string_bytes(in->contents);
        if (b < 0) {
          rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s': an element of bytes_contents is over 4 GiB", in->name);
          break;
        }
        t->bytes = (size_t)b;
      }
      typed_bytes += (t->bytes + 15) & ~(size_t)15;
    }
  }
  for (size_t k = 0; rc == 0 && k < n_client; k++)
    if (!seen[k] && !srv_version_input_optional(em, k))
      rc = err_set(e, ERR_INVALID_ARGUMENT, "missing input '%s' for model '%s'", srv_version_input(em, k)->name, m->name);
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
  size_t n_out = srv_version_n_client_outputs(em);  // state outputs (sequence_batching) are the server's
  if (n_out > 64)  // the requested-outputs mask and the response are sized for 64
    return err_set(e, ERR_UNIMPLEMENTED, "model '%s' has %zu outputs; at most 64 are supported", m->name, n_out);
  for (size_t i = 0; i < msg->n_outputs; i++) {
    size_t k = 0;
    while (k < n_out && strcmp(srv_version_output(em, k)->name, msg->outputs[i]->name) != 0) k++;
    if (k == n_out)
      return err_set(e, ERR_INVALID_ARGUMENT, "unknown requested output '%s' for model '%s'", msg->outputs[i]->name,
                     m->name);
    if (r->outputs_mask & ((uint64_t)1 << k))  // as inputs: each once (a second shared-memory target is ambiguous)
      return err_set(e, ERR_INVALID_ARGUMENT, "output '%s' is requested twice", msg->outputs[i]->name);
    r->outputs_mask |= (uint64_t)1 << k;
    TRY(read_classification(r, msg->outputs[i], k, n_out, out_refs[i].region != NULL, e));
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
  if (m->engine_config && m->engine_config->sequence.on) TRY(fill_controls(r, m->engine_config, max_batch, e));
  const eng_pad *pad = em->model ? eng_model_pad(em->model) : NULL;
  r->item.shape_key = shape_key(r->inputs, n_cfg, pad);
  if (pad) TRY(eng_pad_seq_len(pad, r->inputs, &r->item.seq_len, e));
  r->padded_len = r->item.seq_len;
  return 0;
}

int srv_infer__build_request(srv_server *s, srv_request *r, err *e) {
  const Inference__ModelInferRequest *msg = r->msg;
  shm_ref *refs = srv_arena_calloc(r->arena, msg->n_inputs + msg->n_outputs + 1, sizeof *refs);
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
