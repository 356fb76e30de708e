// echo_server.c: bench_echo_server, the transport ceiling for inferd's
// benchmarks. A bare gRPC C-core server speaking the KServe v2 / Triton
// protocol (inference.GRPCInferenceService) that answers ModelInfer as an
// identity model would -- each input comes back as OUTPUT<i> with the same
// datatype, shape and bytes -- but with no model, no batcher and no event
// loop in between. Whatever rate a load generator reaches against it is the
// most inferd's front end could reach on the same machine and client.
//
// Core API use is the same as server/grpc/grpc_front.c: every method registered
// with GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER (the request body is there
// when the call arrives), one completion queue and one thread per worker,
// requests pre-posted per CQ and re-armed as they fire, one generic request
// per CQ answering unknown methods with UNIMPLEMENTED. Unlike inferd, which
// arms RECV_CLOSE_ON_SERVER on its own so it can see cancellations while a
// request waits in the batcher, a reply here is ONE four-op batch (initial
// metadata, message, status, close): one request completion and one batch
// completion per RPC, the cheapest shape the core allows.
//
// Everything about a call happens on its CQ's thread, so the context pool is
// a plain per-thread free list. Batches start under the thread's mutex and
// only while its CQ is open (the core aborts on a batch begun on a shut-down
// queue).
//
// Usage: bench_echo_server [--port N] [--address A] [--threads N]
//          [--datatype FP32] [--shape -1,16] [--calls N] [--max-message-bytes N]
// Prints "echo ready: grpc=<port>" on stderr; SIGINT/SIGTERM: graceful stop,
// exit 0.
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grpc_service.pb-c.h"
#include "model_config.pb-c.h"
#include "tests/bench/echo/echo_common.h"

#define MAX_DIMS 16
#define SCRATCH_KEEP (8u << 20)  // a larger copy buffer is freed after use
#define GRACE_MS 2000            // in-flight calls get this long at shutdown

// ---------------------------------------------------------------- methods

enum {
  M_SERVER_LIVE,
  M_SERVER_READY,
  M_MODEL_READY,
  M_SERVER_METADATA,
  M_MODEL_METADATA,
  M_MODEL_CONFIG,
  M_MODEL_INFER,
  N_METHODS,
  M_GENERIC = -1,  // any other method: UNIMPLEMENTED
};

static const char *const method_path[N_METHODS] = {
    "/inference.GRPCInferenceService/ServerLive",     "/inference.GRPCInferenceService/ServerReady",
    "/inference.GRPCInferenceService/ModelReady",     "/inference.GRPCInferenceService/ServerMetadata",
    "/inference.GRPCInferenceService/ModelMetadata",  "/inference.GRPCInferenceService/ModelConfig",
    "/inference.GRPCInferenceService/ModelInfer",
};

// What a handler produced: a packed message (malloc'd) or a failure status.
typedef struct reply {
  grpc_status_code code;
  uint8_t *msg;
  size_t len;
  char text[256];
} reply;

// ---------------------------------------------------------------- options

static struct {
  const char *address;
  int port;
  int threads;
  int calls;
  int max_msg;
  const char *datatype;
  int64_t shape[MAX_DIMS];
  size_t n_shape;
} opt = {.address = "0.0.0.0", .port = 8001, .calls = 32, .max_msg = 64 << 20, .datatype = "FP32",
         .shape = {-1, 16}, .n_shape = 2};

static const struct {
  const char *wire;
  Inference__DataType cfg;
} dtypes[] = {
    {"BOOL", INFERENCE__DATA_TYPE__TYPE_BOOL},   {"UINT8", INFERENCE__DATA_TYPE__TYPE_UINT8},
    {"UINT16", INFERENCE__DATA_TYPE__TYPE_UINT16}, {"UINT32", INFERENCE__DATA_TYPE__TYPE_UINT32},
    {"UINT64", INFERENCE__DATA_TYPE__TYPE_UINT64}, {"INT8", INFERENCE__DATA_TYPE__TYPE_INT8},
    {"INT16", INFERENCE__DATA_TYPE__TYPE_INT16},   {"INT32", INFERENCE__DATA_TYPE__TYPE_INT32},
    {"INT64", INFERENCE__DATA_TYPE__TYPE_INT64},   {"FP16", INFERENCE__DATA_TYPE__TYPE_FP16},
    {"FP32", INFERENCE__DATA_TYPE__TYPE_FP32},     {"FP64", INFERENCE__DATA_TYPE__TYPE_FP64},
    {"BYTES", INFERENCE__DATA_TYPE__TYPE_STRING},  {"BF16", INFERENCE__DATA_TYPE__TYPE_BF16},
};
static Inference__DataType opt_cfg_dtype;

// ---------------------------------------------------------------- handlers

static void fail(reply *r, grpc_status_code code, const char *fmt, const char *arg) {
  r->code = code;
  snprintf(r->text, sizeof r->text, fmt, arg ? arg : "");
}

static void pack(reply *r, const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  r->msg = malloc(n ? n : 1);
  if (!r->msg) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory packing the reply%s", NULL);
    return;
  }
  r->len = protobuf_c_message_pack(m, r->msg);
  r->code = GRPC_STATUS_OK;
}

static void on_server_live(const uint8_t *d, size_t n, reply *r) {
  (void)d, (void)n;
  Inference__ServerLiveResponse m = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
  m.live = 1;
  pack(r, &m.base);
}

static void on_server_ready(const uint8_t *d, size_t n, reply *r) {
  (void)d, (void)n;
  Inference__ServerReadyResponse m = INFERENCE__SERVER_READY_RESPONSE__INIT;
  m.ready = 1;
  pack(r, &m.base);
}

static void on_model_ready(const uint8_t *d, size_t n, reply *r) {
  Inference__ModelReadyRequest *rq = inference__model_ready_request__unpack(NULL, n, d);
  if (!rq) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse ModelReadyRequest%s", NULL);
    return;
  }
  inference__model_ready_request__free_unpacked(rq, NULL);
  Inference__ModelReadyResponse m = INFERENCE__MODEL_READY_RESPONSE__INIT;
  m.ready = 1;  // every model name is "loaded"
  pack(r, &m.base);
}

static void on_server_metadata(const uint8_t *d, size_t n, reply *r) {
  (void)d, (void)n;
  Inference__ServerMetadataResponse m = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
  m.name = "bench_echo_server";
  m.version = "0.1.0";
  pack(r, &m.base);
}

static void on_model_metadata(const uint8_t *d, size_t n, reply *r) {
  Inference__ModelMetadataRequest *rq = inference__model_metadata_request__unpack(NULL, n, d);
  if (!rq) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse ModelMetadataRequest%s", NULL);
    return;
  }
  Inference__ModelMetadataResponse__TensorMetadata in = INFERENCE__MODEL_METADATA_RESPONSE__TENSOR_METADATA__INIT;
  Inference__ModelMetadataResponse__TensorMetadata out = INFERENCE__MODEL_METADATA_RESPONSE__TENSOR_METADATA__INIT;
  in.name = "INPUT0";
  out.name = "OUTPUT0";
  in.datatype = out.datatype = (char *)opt.datatype;
  in.n_shape = out.n_shape = opt.n_shape;
  in.shape = out.shape = opt.shape;
  Inference__ModelMetadataResponse__TensorMetadata *ins[1] = {&in}, *outs[1] = {&out};
  char *versions[1] = {"1"};
  Inference__ModelMetadataResponse m = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
  m.name = rq->name;
  m.n_versions = 1;
  m.versions = versions;
  m.platform = "echo";
  m.n_inputs = m.n_outputs = 1;
  m.inputs = ins;
  m.outputs = outs;
  pack(r, &m.base);
  inference__model_metadata_request__free_unpacked(rq, NULL);
}

// max_batch_size 0: dims are the full --shape, as in ModelMetadata.
static void on_model_config(const uint8_t *d, size_t n, reply *r) {
  Inference__ModelConfigRequest *rq = inference__model_config_request__unpack(NULL, n, d);
  if (!rq) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse ModelConfigRequest%s", NULL);
    return;
  }
  Inference__ModelInput in = INFERENCE__MODEL_INPUT__INIT;
  Inference__ModelOutput out = INFERENCE__MODEL_OUTPUT__INIT;
  in.name = "INPUT0";
  out.name = "OUTPUT0";
  in.data_type = out.data_type = opt_cfg_dtype;
  in.n_dims = out.n_dims = opt.n_shape;
  in.dims = out.dims = opt.shape;
  Inference__ModelInput *ins[1] = {&in};
  Inference__ModelOutput *outs[1] = {&out};
  Inference__ModelConfig cfg = INFERENCE__MODEL_CONFIG__INIT;
  cfg.name = rq->name;
  cfg.platform = "echo";
  cfg.backend = "echo";
  cfg.n_input = cfg.n_output = 1;
  cfg.input = ins;
  cfg.output = outs;
  Inference__ModelConfigResponse m = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
  m.config = &cfg;
  pack(r, &m.base);
  inference__model_config_request__free_unpacked(rq, NULL);
}

// The identity answer. The reply points at the request's own tensors and
// bytes (protobuf-c packs from any memory), so the payload is copied once on
// unpack and once on pack.
static void on_model_infer(const uint8_t *d, size_t n, reply *r) {
  Inference__ModelInferRequest *rq = inference__model_infer_request__unpack(NULL, n, d);
  if (!rq) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "cannot parse ModelInferRequest%s", NULL);
    return;
  }
  size_t n_in = rq->n_inputs;
  if (rq->n_raw_input_contents && rq->n_raw_input_contents != n_in) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "raw_input_contents must have one entry per input%s", NULL);
    goto done;
  }
  // Which inputs come back, in what order: all, or the requested OUTPUT<i>.
  size_t n_out = rq->n_outputs ? rq->n_outputs : n_in;
  size_t *src = malloc((n_out ? n_out : 1) * sizeof *src);
  Inference__ModelInferResponse__InferOutputTensor *outs = calloc(n_out ? n_out : 1, sizeof *outs);
  Inference__ModelInferResponse__InferOutputTensor **out_ptrs = malloc((n_out ? n_out : 1) * sizeof *out_ptrs);
  ProtobufCBinaryData *raw = malloc((n_out ? n_out : 1) * sizeof *raw);
  char(*names)[24] = malloc((n_out ? n_out : 1) * sizeof *names);
  if (!src || !outs || !out_ptrs || !raw || !names) {
    fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory%s", NULL);
    goto free_out;
  }
  for (size_t i = 0; i < n_out; i++) {
    if (!rq->n_outputs) {
      src[i] = i;
      continue;
    }
    const char *name = rq->outputs[i]->name;
    char *end = NULL;
    unsigned long k = 0;
    if (strncmp(name, "OUTPUT", 6) == 0 && name[6] >= '0' && name[6] <= '9') k = strtoul(name + 6, &end, 10);
    if (!end || *end || k >= n_in) {
      fail(r, GRPC_STATUS_INVALID_ARGUMENT, "unexpected inference output '%s' for the echo model", name);
      goto free_out;
    }
    src[i] = (size_t)k;
  }
  for (size_t i = 0; i < n_out; i++) {
    const Inference__ModelInferRequest__InferInputTensor *t = rq->inputs[src[i]];
    Inference__ModelInferResponse__InferOutputTensor *o = &outs[i];
    Inference__ModelInferResponse__InferOutputTensor init = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
    *o = init;
    snprintf(names[i], sizeof names[i], "OUTPUT%zu", src[i]);
    o->name = names[i];
    o->datatype = t->datatype;
    o->n_shape = t->n_shape;
    o->shape = t->shape;
    if (!rq->n_raw_input_contents) o->contents = t->contents;  // typed contents echo as typed contents
    else raw[i] = rq->raw_input_contents[src[i]];
    out_ptrs[i] = o;
  }
  {
    Inference__ModelInferResponse m = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    m.model_name = rq->model_name;
    m.model_version = rq->model_version;
    m.id = rq->id;
    m.n_outputs = n_out;
    m.outputs = out_ptrs;
    if (rq->n_raw_input_contents) {
      m.n_raw_output_contents = n_out;
      m.raw_output_contents = raw;
    }
    pack(r, &m.base);
  }
free_out:
  free(src);
  free(outs);
  free(out_ptrs);
  free(raw);
  free(names);
done:
  inference__model_infer_request__free_unpacked(rq, NULL);
}

typedef void (*handler_fn)(const uint8_t *, size_t, reply *);
static const handler_fn handlers[N_METHODS] = {
    on_server_live,    on_server_ready, on_model_ready, on_server_metadata,
    on_model_metadata, on_model_config, on_model_infer,
};

// ---------------------------------------------------------------- calls

typedef struct worker worker;

// One call from request to final batch; the completion tag is the context.
typedef struct call_ctx {
  struct call_ctx *next;  // free list
  worker *w;
  int method;     // index into method_path, or M_GENERIC
  int answering;  // 0: waiting for the call, 1: the reply batch is out
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_call_details details;  // generic requests only
  grpc_byte_buffer *payload;
  grpc_byte_buffer *send_buf;
  grpc_slice status_text;
  int has_text;
  int cancelled;  // written by the core through RECV_CLOSE_ON_SERVER
} call_ctx;

struct worker {
  int idx;
  grpc_completion_queue *cq;
  pthread_t th;
  int th_started;
  pthread_mutex_t mu;  // guards closed and every batch start on this CQ
  int closed;
  call_ctx *pool;
  uint8_t *scratch;
  size_t scratch_cap;
  uint64_t served;  // calls answered (any status)
};

static struct {
  grpc_server *server;
  void *handle[N_METHODS];
  worker *w;
  int n_workers;
  atomic_int draining;
  pthread_mutex_t mu;
  pthread_cond_t cv;  // CLOCK_MONOTONIC
  int notified;
} G;
static char shutdown_tag;  // its address is the tag of grpc_server_shutdown_and_notify

#define LOG(...)                                 \
  do {                                           \
    fprintf(stderr, "bench_echo_server: " __VA_ARGS__); \
    fputc('\n', stderr);                         \
  } while (0)

static int draining(void) { return atomic_load_explicit(&G.draining, memory_order_acquire); }

static call_ctx *ctx_get(worker *w, int method) {
  call_ctx *c = w->pool;
  if (c) w->pool = c->next;
  else if (!(c = malloc(sizeof *c))) return NULL;
  memset(c, 0, sizeof *c);
  c->w = w;
  c->method = method;
  grpc_metadata_array_init(&c->md);
  if (method == M_GENERIC) grpc_call_details_init(&c->details);
  return c;
}

static void ctx_put(call_ctx *c) {
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->send_buf) grpc_byte_buffer_destroy(c->send_buf);
  if (c->has_text) grpc_slice_unref(c->status_text);
  grpc_metadata_array_destroy(&c->md);
  if (c->method == M_GENERIC) grpc_call_details_destroy(&c->details);
  if (c->call) grpc_call_unref(c->call);
  c->next = c->w->pool;
  c->w->pool = c;
}

static void arm(worker *w, int method) {
  call_ctx *c = ctx_get(w, method);
  if (!c) {
    LOG("out of memory arming a request");
    return;
  }
  grpc_call_error rc =
      method == M_GENERIC
          ? grpc_server_request_call(G.server, &c->call, &c->details, &c->md, w->cq, w->cq, c)
          : grpc_server_request_registered_call(G.server, G.handle[method], &c->call, &c->deadline, &c->md,
                                                &c->payload, w->cq, w->cq, c);
  if (rc != GRPC_CALL_OK) {
    if (!draining()) LOG("requesting a %s call failed: error %d", method == M_GENERIC ? "generic" : method_path[method], (int)rc);
    ctx_put(c);
  }
}

// Copies a multi-slice message into the worker's scratch; a one-slice message
// is used where it lies. *data is valid until the reader is destroyed.
// Returns 0, -1 (failed; destroy the reader) or -2 (no reader to destroy).
static int flatten(worker *w, grpc_byte_buffer *bb, grpc_byte_buffer_reader *rd, const uint8_t **data,
                   size_t *len, reply *r) {
  if (!grpc_byte_buffer_reader_init(rd, bb)) {
    fail(r, GRPC_STATUS_INVALID_ARGUMENT, "request message cannot be decompressed%s", NULL);
    return -2;
  }
  size_t total = grpc_byte_buffer_length(rd->buffer_out);
  *len = total;
  *data = (const uint8_t *)"";
  grpc_slice *s;
  if (total == 0 || !grpc_byte_buffer_reader_peek(rd, &s)) return 0;
  if (GRPC_SLICE_LENGTH(*s) == total) {
    *data = GRPC_SLICE_START_PTR(*s);
    return 0;
  }
  if (w->scratch_cap < total) {
    free(w->scratch);
    w->scratch = malloc(total);
    w->scratch_cap = w->scratch ? total : 0;
    if (!w->scratch) {
      fail(r, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory copying the request%s", NULL);
      return -1;
    }
  }
  size_t off = 0;
  do {
    size_t n = GRPC_SLICE_LENGTH(*s);
    if (n > total - off) break;
    memcpy(w->scratch + off, GRPC_SLICE_START_PTR(*s), n);
    off += n;
  } while (grpc_byte_buffer_reader_peek(rd, &s));
  if (off != total) {
    fail(r, GRPC_STATUS_INTERNAL, "request message length mismatch%s", NULL);
    return -1;
  }
  *data = w->scratch;
  return 0;
}

// A call arrived: run its handler and answer with one batch.
static void on_new(worker *w, call_ctx *c, int ok) {
  if (!ok) {  // shutting down: the request was never matched with a call
    ctx_put(c);
    return;
  }
  if (!draining()) arm(w, c->method);

  reply r = {.code = GRPC_STATUS_OK};
  if (c->method == M_GENERIC) {
    r.code = GRPC_STATUS_UNIMPLEMENTED;
    snprintf(r.text, sizeof r.text, "method '%.*s' is not implemented by the echo server",
             (int)GRPC_SLICE_LENGTH(c->details.method), (const char *)GRPC_SLICE_START_PTR(c->details.method));
  } else if (!c->payload) {
    fail(&r, GRPC_STATUS_INVALID_ARGUMENT, "request message missing%s", NULL);
  } else {
    grpc_byte_buffer_reader rd;
    const uint8_t *data;
    size_t len;
    int frc = flatten(w, c->payload, &rd, &data, &len, &r);
    if (frc == 0) handlers[c->method](data, len, &r);
    if (frc != -2) grpc_byte_buffer_reader_destroy(&rd);
    if (w->scratch_cap > SCRATCH_KEEP) {
      free(w->scratch);
      w->scratch = NULL;
      w->scratch_cap = 0;
    }
    grpc_byte_buffer_destroy(c->payload);
    c->payload = NULL;
  }

  if (r.code == GRPC_STATUS_OK) {
    grpc_slice s = r.len ? grpc_slice_new(r.msg, r.len, free) : grpc_empty_slice();
    if (!r.len) free(r.msg);
    c->send_buf = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);  // the buffer holds its own reference
  } else {
    free(r.msg);
    c->status_text = grpc_slice_from_copied_string(r.text);
    c->has_text = 1;
  }

  c->answering = 1;
  int closed;
  grpc_call_error rc = echo_reply(c->call, c->send_buf, r.code, c->has_text ? &c->status_text : NULL, &c->cancelled,
                                  c, &w->mu, &w->closed, &closed);
  if (rc != GRPC_CALL_OK) {
    if (!closed) LOG("grpc_call_start_batch failed: error %d", (int)rc);
    grpc_call_cancel(c->call, NULL);
    ctx_put(c);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE) continue;
    if (ev.tag == &shutdown_tag) {
      pthread_mutex_lock(&G.mu);
      G.notified = 1;
      pthread_cond_broadcast(&G.cv);
      pthread_mutex_unlock(&G.mu);
      continue;
    }
    call_ctx *c = ev.tag;
    if (!c->answering) {
      on_new(w, c, ev.success);
    } else {  // the reply batch finished (or failed: the client went away)
      w->served++;
      ctx_put(c);
    }
  }
  return NULL;
}

// ---------------------------------------------------------------- main

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_echo_server [options]\n"
          "  --port N                gRPC port, 0 picks a free one (default 8001)\n"
          "  --address A             listen address (default 0.0.0.0)\n"
          "  --threads N             completion-queue threads (default: number of CPUs)\n"
          "  --calls N               requests pre-posted per method per thread (default 32)\n"
          "  --datatype T            ModelMetadata/ModelConfig datatype (default FP32)\n"
          "  --shape D,D,...         ModelMetadata/ModelConfig shape, -1 = variable (default -1,16)\n"
          "  --max-message-bytes N   largest request/response (default 67108864)\n"
          "ModelInfer echoes every input back as OUTPUT<i>, whatever its name, type or shape.\n"
          "When serving, 'echo ready: grpc=<port>' goes to stderr; SIGINT/SIGTERM stop it.\n");
}

// echo_parse_int under this program's name.
static int parse_int(const char *name, const char *v, long lo, long hi, int *out) {
  return echo_parse_int("bench_echo_server", name, v, lo, hi, out);
}

static int parse_shape(const char *v) {
  opt.n_shape = 0;
  const char *p = v;
  while (*p) {
    if (opt.n_shape == MAX_DIMS) break;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (errno || end == p || x < -1) break;
    opt.shape[opt.n_shape++] = (int64_t)x;
    if (*end == '\0') return 0;
    if (*end != ',') break;
    p = end + 1;
  }
  fprintf(stderr, "bench_echo_server: --shape: '%s' is not a list like -1,16 (at most %d dims, each >= -1)\n",
          v, MAX_DIMS);
  return -1;
}

static int parse_args(int argc, char **argv) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  opt.threads = ncpu > 0 ? (int)(ncpu < 256 ? ncpu : 256) : 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench_echo_server: %s needs a value (or is unknown)\n", a);
      usage(stderr);
      return -1;
    }
    const char *v = argv[++i];
    int rc = 0;
    if (!strcmp(a, "--port")) rc = parse_int(a, v, 0, 65535, &opt.port);
    else if (!strcmp(a, "--address")) opt.address = v;
    else if (!strcmp(a, "--threads")) rc = parse_int(a, v, 1, 256, &opt.threads);
    else if (!strcmp(a, "--calls")) rc = parse_int(a, v, 1, 4096, &opt.calls);
    else if (!strcmp(a, "--max-message-bytes")) rc = parse_int(a, v, 1024, INT_MAX, &opt.max_msg);
    else if (!strcmp(a, "--shape")) rc = parse_shape(v);
    else if (!strcmp(a, "--datatype")) opt.datatype = v;
    else {
      fprintf(stderr, "bench_echo_server: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    if (rc) return -1;
  }
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (!strcmp(dtypes[i].wire, opt.datatype)) opt_cfg_dtype = dtypes[i].cfg;
  if (opt_cfg_dtype == INFERENCE__DATA_TYPE__TYPE_INVALID) {
    fprintf(stderr, "bench_echo_server: --datatype: unknown type '%s' (FP32, FP16, INT64, ...)\n", opt.datatype);
    return -1;
  }
  return 0;
}

// Waits for the shutdown notification, at most until `until` (NULL: forever).
static void wait_notified(const struct timespec *until) {
  pthread_mutex_lock(&G.mu);
  while (!G.notified) {
    if (!until) pthread_cond_wait(&G.cv, &G.mu);
    else if (pthread_cond_timedwait(&G.cv, &G.mu, until) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&G.mu);
}

static void teardown(void) {
  for (int i = 0; i < G.n_workers; i++) {
    worker *w = &G.w[i];
    if (!w->cq) continue;
    pthread_mutex_lock(&w->mu);
    w->closed = 1;
    grpc_completion_queue_shutdown(w->cq);
    pthread_mutex_unlock(&w->mu);
  }
  for (int i = 0; i < G.n_workers; i++) {
    worker *w = &G.w[i];
    if (w->th_started) pthread_join(w->th, NULL);
    else if (w->cq) worker_main(w);  // drain on this thread
  }
  if (G.server) grpc_server_destroy(G.server);
  uint64_t served = 0;
  for (int i = 0; i < G.n_workers; i++) {
    worker *w = &G.w[i];
    served += w->served;
    if (w->cq) grpc_completion_queue_destroy(w->cq);
    while (w->pool) {
      call_ctx *n = w->pool->next;
      free(w->pool);
      w->pool = n;
    }
    free(w->scratch);
    pthread_mutex_destroy(&w->mu);
  }
  free(G.w);
  grpc_shutdown();
  LOG("stopped after %" PRIu64 " calls", served);
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv)) return 2;

  // Block the stop signals before any thread exists (gRPC's included), so
  // only sigwait below sees them.
  sigset_t stop;
  int rc = echo_block_stop_signals(&stop);
  if (rc) {
    LOG("pthread_sigmask: %s", strerror(rc));
    return 1;
  }

  atomic_init(&G.draining, 0);
  pthread_mutex_init(&G.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&G.cv, &ca);
  pthread_condattr_destroy(&ca);

  grpc_init();
  G.n_workers = opt.threads;
  G.w = calloc((size_t)G.n_workers, sizeof *G.w);
  if (!G.w) {
    LOG("out of memory");
    grpc_shutdown();
    return 1;
  }
  for (int i = 0; i < G.n_workers; i++) {
    G.w[i].idx = i;
    pthread_mutex_init(&G.w[i].mu, NULL);
  }

  G.server = echo_server_create(opt.max_msg);
  if (!G.server) {
    LOG("grpc_server_create failed");
    goto fail;
  }
  for (int i = 0; i < G.n_workers; i++) {
    G.w[i].cq = grpc_completion_queue_create_for_next(NULL);
    if (!G.w[i].cq) {
      LOG("cannot create completion queue %d", i);
      goto fail;
    }
    grpc_server_register_completion_queue(G.server, G.w[i].cq, NULL);
  }
  for (int m = 0; m < N_METHODS; m++) {
    G.handle[m] = grpc_server_register_method(G.server, method_path[m], NULL,
                                              GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    if (!G.handle[m]) {
      LOG("cannot register %s", method_path[m]);
      goto fail;
    }
  }
  char addr[300];
  snprintf(addr, sizeof addr, "%s:%d", opt.address, opt.port);
  int port = echo_listen(G.server, addr);
  if (port < 0) {
    LOG("cannot create insecure server credentials");
    goto fail;
  }
  if (port == 0) {
    LOG("cannot listen on %s (address in use or invalid)", addr);
    goto fail;
  }

  grpc_server_start(G.server);
  // Pre-post while no worker runs yet: each pool has one user.
  for (int i = 0; i < G.n_workers; i++) {
    for (int m = 0; m < N_METHODS; m++) {
      int k = m == M_MODEL_INFER ? opt.calls : (opt.calls < 4 ? opt.calls : 4);
      while (k-- > 0) arm(&G.w[i], m);
    }
    arm(&G.w[i], M_GENERIC);
  }
  int start_failed = 0;
  for (int i = 0; i < G.n_workers; i++) {
    rc = pthread_create(&G.w[i].th, NULL, worker_main, &G.w[i]);
    if (rc) {
      LOG("cannot start thread %d: %s", i, strerror(rc));
      start_failed = 1;
      raise(SIGTERM);  // blocked: stays pending, so the stop path below runs at once
      break;
    }
    G.w[i].th_started = 1;
  }
  if (!start_failed) {
    fprintf(stderr, "echo ready: grpc=%d\n", port);
    fflush(stderr);
  }

  int sig = 0;
  rc = sigwait(&stop, &sig);
  if (rc) LOG("sigwait: %s", strerror(rc));
  else LOG("signal %d: stopping", sig);

  atomic_store_explicit(&G.draining, 1, memory_order_release);
  grpc_server_shutdown_and_notify(G.server, G.w[0].cq, &shutdown_tag);
  if (G.w[0].th_started) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += GRACE_MS / 1000;
    until.tv_nsec += (long)(GRACE_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    wait_notified(&until);
    if (!G.notified) {
      LOG("grace of %d ms over: cancelling the calls left", GRACE_MS);
      grpc_server_cancel_all_calls(G.server);
      wait_notified(NULL);
    }
  } else {
    grpc_server_cancel_all_calls(G.server);  // the notify tag is collected by teardown's drain
  }
  teardown();
  pthread_mutex_destroy(&G.mu);
  pthread_cond_destroy(&G.cv);
  return rc || start_failed ? 1 : 0;

fail:
  if (G.server) {
    // Never started: shutting down still needs the notify tag collected.
    if (G.w[0].cq) {
      grpc_server_shutdown_and_notify(G.server, G.w[0].cq, &shutdown_tag);
      grpc_server_cancel_all_calls(G.server);
    }
  }
  teardown();
  return 1;
}
