// fixed_server.c: bench_fixed_server, the transport yardstick that perf_analyzer
// can run against. perf_analyzer (and tritonclient) asks ModelMetadata,
// ModelConfig and ModelStatistics before it sends a request, and it sends the
// model's own tensor names; the anchors' bare echo (shared/anchors) answers one
// method only and bench_echo_server knows INPUT0/OUTPUT0 alone. This server
// describes any one model from the command line (names, types, dims, max batch)
// and answers ModelInfer with ONE fixed reply of that model's output size (zeros,
// one row), packed once at start and sent by reference: per call it reads the
// whole request into one buffer (as any server must), finds its id (the answer
// carries it back) and does nothing else. It is
// a yardstick doing none of inferd's work -- no parsing of tensors, no batcher,
// no model -- so a client's rate against it is the most that client can get from
// a C-core server on the machine with these message sizes.
//
// The call handling is bench_echo_server's (echo_server.c beside this file):
// every method registered with GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, one
// completion queue and thread per worker, calls pre-posted and re-armed as they
// fire, one four-op reply batch per call. Unknown methods get UNIMPLEMENTED.
//
// Usage: bench_fixed_server --model NAME [--max-batch N] --input NAME:TYPE:D,D
//          [--input ...] --output NAME:TYPE:D,D [--output ...] [--port N]
//          [--threads N] [--calls N]
// D,D are the dims without the batch dim (as in config.pbtxt). Prints
// "fixed ready: grpc=<port>" on stderr; SIGINT/SIGTERM stop it.
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
#include <unistd.h>

#include "grpc_service.pb-c.h"
#include "model_config.pb-c.h"
#include "tests/bench/echo/echo_common.h"

#define MAX_DIMS 8
#define MAX_TENSORS 16
#define LOG(...)                                           \
  do {                                                     \
    fprintf(stderr, "bench_fixed_server: " __VA_ARGS__); \
    fputc('\n', stderr);                                   \
  } while (0)

// ---------------------------------------------------------------- the model

typedef struct tensor {
  const char *name;
  const char *wire;  // KServe datatype ("FP32")
  Inference__DataType cfg;
  size_t elsize;
  int64_t dims[MAX_DIMS + 1];  // [-1, dims...] when batching, else dims
  size_t n_dims;
  size_t row_bytes;  // one row's bytes
} tensor;

static struct {
  const char *model;
  int max_batch;
  tensor in[MAX_TENSORS], out[MAX_TENSORS];
  size_t n_in, n_out;
  int port, threads, calls;
} opt = {.port = 8001, .calls = 32};

static const struct {
  const char *wire;
  Inference__DataType cfg;
  size_t size;
} dtypes[] = {
    {"BOOL", INFERENCE__DATA_TYPE__TYPE_BOOL, 1},     {"UINT8", INFERENCE__DATA_TYPE__TYPE_UINT8, 1},
    {"INT8", INFERENCE__DATA_TYPE__TYPE_INT8, 1},     {"INT16", INFERENCE__DATA_TYPE__TYPE_INT16, 2},
    {"INT32", INFERENCE__DATA_TYPE__TYPE_INT32, 4},   {"INT64", INFERENCE__DATA_TYPE__TYPE_INT64, 8},
    {"FP16", INFERENCE__DATA_TYPE__TYPE_FP16, 2},     {"BF16", INFERENCE__DATA_TYPE__TYPE_BF16, 2},
    {"FP32", INFERENCE__DATA_TYPE__TYPE_FP32, 4},     {"FP64", INFERENCE__DATA_TYPE__TYPE_FP64, 8},
};

// NAME:TYPE:D,D (TYPE as KServe or as config.pbtxt's TYPE_FP32)
static int parse_tensor(const char *v, tensor *t) {
  char *s = strdup(v), *type = s ? strchr(s, ':') : NULL, *dims = type ? strchr(type + 1, ':') : NULL;
  if (!dims) goto bad;
  *type++ = '\0';
  *dims++ = '\0';
  if (!strncmp(type, "TYPE_", 5)) type += 5;
  t->name = s;
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (!strcmp(dtypes[i].wire, type)) t->wire = dtypes[i].wire, t->cfg = dtypes[i].cfg, t->elsize = dtypes[i].size;
  if (!t->wire || !*s) goto bad;
  t->n_dims = 0;
  size_t row = t->elsize;
  for (char *p = dims; *p;) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (errno || end == p || x < 1 || t->n_dims == MAX_DIMS || row > SIZE_MAX / (size_t)x) goto bad;
    t->dims[t->n_dims++] = x;
    row *= (size_t)x;
    if (*end == ',') p = end + 1;
    else if (*end == '\0') break;
    else goto bad;
  }
  t->row_bytes = row;
  return 0;
bad:
  fprintf(stderr, "bench_fixed_server: '%s' is not NAME:TYPE:D,D (TYPE one of BOOL UINT8 INT8 INT16 INT32 INT64 "
                  "FP16 BF16 FP32 FP64; dims >= 1, at most %d)\n", v, MAX_DIMS);
  free(s);
  return -1;
}

// The dims a client sees: the batch dim first (-1) when the model batches.
static void with_batch(tensor *t) {
  if (opt.max_batch <= 0) return;
  memmove(t->dims + 1, t->dims, t->n_dims * sizeof t->dims[0]);
  t->dims[0] = -1;
  t->n_dims++;
}

// ---------------------------------------------------------------- fixed replies

enum { M_LIVE, M_READY, M_MODEL_READY, M_SRV_META, M_META, M_CONFIG, M_STATS, M_INFER, N_METHODS };
static const char *const method_path[N_METHODS] = {
    "/inference.GRPCInferenceService/ServerLive",      "/inference.GRPCInferenceService/ServerReady",
    "/inference.GRPCInferenceService/ModelReady",      "/inference.GRPCInferenceService/ServerMetadata",
    "/inference.GRPCInferenceService/ModelMetadata",   "/inference.GRPCInferenceService/ModelConfig",
    "/inference.GRPCInferenceService/ModelStatistics", "/inference.GRPCInferenceService/ModelInfer",
};
static grpc_slice fixed[N_METHODS];  // packed once; each call sends a reference
static atomic_ullong g_infers;       // ModelInfer calls answered (ModelStatistics reports them)

static grpc_slice packed(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *b = malloc(n ? n : 1);
  if (!b) {
    LOG("out of memory packing a reply");
    exit(1);
  }
  protobuf_c_message_pack(m, b);
  return grpc_slice_new(b, n, free);
}

static void pack_fixed(void) {
  Inference__ServerLiveResponse live = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
  live.live = 1;
  fixed[M_LIVE] = packed(&live.base);
  Inference__ServerReadyResponse ready = INFERENCE__SERVER_READY_RESPONSE__INIT;
  ready.ready = 1;
  fixed[M_READY] = packed(&ready.base);
  Inference__ModelReadyResponse mready = INFERENCE__MODEL_READY_RESPONSE__INIT;
  mready.ready = 1;  // whatever name is asked
  fixed[M_MODEL_READY] = packed(&mready.base);
  Inference__ServerMetadataResponse smeta = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
  smeta.name = "bench_fixed_server";
  smeta.version = "0.1.0";
  fixed[M_SRV_META] = packed(&smeta.base);

  Inference__ModelMetadataResponse__TensorMetadata tm[2][MAX_TENSORS], *tmp[2][MAX_TENSORS];
  Inference__ModelInput ci[MAX_TENSORS], *cip[MAX_TENSORS];
  Inference__ModelOutput co[MAX_TENSORS], *cop[MAX_TENSORS];
  // config.pbtxt's dims leave the batch dim out
  size_t skip = opt.max_batch > 0 ? 1 : 0;
  for (int io = 0; io < 2; io++) {
    tensor *ts = io ? opt.out : opt.in;
    size_t n = io ? opt.n_out : opt.n_in;
    for (size_t i = 0; i < n; i++) {
      Inference__ModelMetadataResponse__TensorMetadata t = INFERENCE__MODEL_METADATA_RESPONSE__TENSOR_METADATA__INIT;
      t.name = (char *)ts[i].name;
      t.datatype = (char *)ts[i].wire;
      t.n_shape = ts[i].n_dims;
      t.shape = ts[i].dims;
      tm[io][i] = t;
      tmp[io][i] = &tm[io][i];
      if (!io) {
        Inference__ModelInput c = INFERENCE__MODEL_INPUT__INIT;
        c.name = t.name, c.data_type = ts[i].cfg, c.n_dims = ts[i].n_dims - skip, c.dims = ts[i].dims + skip;
        ci[i] = c, cip[i] = &ci[i];
      } else {
        Inference__ModelOutput c = INFERENCE__MODEL_OUTPUT__INIT;
        c.name = t.name, c.data_type = ts[i].cfg, c.n_dims = ts[i].n_dims - skip, c.dims = ts[i].dims + skip;
        co[i] = c, cop[i] = &co[i];
      }
    }
  }
  char *versions[1] = {"1"};
  Inference__ModelMetadataResponse meta = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
  meta.name = (char *)opt.model;
  meta.n_versions = 1;
  meta.versions = versions;
  meta.platform = "fixed";
  meta.n_inputs = opt.n_in, meta.inputs = tmp[0];
  meta.n_outputs = opt.n_out, meta.outputs = tmp[1];
  fixed[M_META] = packed(&meta.base);
  Inference__ModelConfig cfg = INFERENCE__MODEL_CONFIG__INIT;
  cfg.name = (char *)opt.model;
  cfg.platform = "fixed";
  cfg.backend = "fixed";
  cfg.max_batch_size = opt.max_batch > 0 ? opt.max_batch : 0;
  cfg.n_input = opt.n_in, cfg.input = cip;
  cfg.n_output = opt.n_out, cfg.output = cop;
  Inference__ModelConfigResponse cr = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
  cr.config = &cfg;
  fixed[M_CONFIG] = packed(&cr.base);

  // ModelInfer: every output, one row of zeros (batch 1), raw contents
  Inference__ModelInferResponse__InferOutputTensor ot[MAX_TENSORS], *otp[MAX_TENSORS];
  ProtobufCBinaryData raw[MAX_TENSORS];
  int64_t shapes[MAX_TENSORS][MAX_DIMS + 1];
  for (size_t i = 0; i < opt.n_out; i++) {
    Inference__ModelInferResponse__InferOutputTensor o = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
    memcpy(shapes[i], opt.out[i].dims, opt.out[i].n_dims * sizeof shapes[i][0]);
    if (skip) shapes[i][0] = 1;
    o.name = (char *)opt.out[i].name;
    o.datatype = (char *)opt.out[i].wire;
    o.n_shape = opt.out[i].n_dims;
    o.shape = shapes[i];
    ot[i] = o, otp[i] = &ot[i];
    raw[i].len = opt.out[i].row_bytes;
    raw[i].data = calloc(1, raw[i].len);
    if (!raw[i].data) {
      LOG("out of memory for output %s", opt.out[i].name);
      exit(1);
    }
  }
  Inference__ModelInferResponse ir = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  ir.model_name = (char *)opt.model;
  ir.model_version = "1";
  ir.n_outputs = opt.n_out, ir.outputs = otp;
  ir.n_raw_output_contents = opt.n_out, ir.raw_output_contents = raw;
  fixed[M_INFER] = packed(&ir.base);
  for (size_t i = 0; i < opt.n_out; i++) free(raw[i].data);
}

// ModelStatistics: the one model, with the calls answered so far as successes.
static grpc_slice stats_reply(void) {
  unsigned long long n = atomic_load_explicit(&g_infers, memory_order_relaxed);
  Inference__StatisticDuration ok = INFERENCE__STATISTIC_DURATION__INIT, zero = INFERENCE__STATISTIC_DURATION__INIT;
  ok.count = n;
  Inference__InferStatistics is = INFERENCE__INFER_STATISTICS__INIT;
  is.success = &ok;
  is.fail = is.queue = is.compute_input = is.compute_infer = is.compute_output = is.cache_hit = is.cache_miss = &zero;
  Inference__ModelStatistics ms = INFERENCE__MODEL_STATISTICS__INIT;
  ms.name = (char *)opt.model;
  ms.version = "1";
  ms.inference_count = ms.execution_count = n;
  ms.inference_stats = &is;
  Inference__ModelStatistics *msp[1] = {&ms};
  Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
  r.n_model_stats = 1;
  r.model_stats = msp;
  return packed(&r.base);
}

// ---------------------------------------------------------------- calls

typedef struct worker worker;
typedef struct call {
  worker *w;
  int method;  // index into method_path; -1: generic (unknown method)
  int answering;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_call_details details;
  grpc_byte_buffer *payload, *send;
  grpc_slice text;
  int cancelled;
} call;

struct worker {
  grpc_completion_queue *cq;
  pthread_t th;
  pthread_mutex_t mu;  // guards closed and every batch start (the core aborts on a shut-down CQ)
  int closed;
  uint8_t *scratch;  // the whole request, read as a server must
  size_t cap;
};

static grpc_server *g_server;
static void *g_handle[N_METHODS];
static atomic_int g_stopping;

// On w's thread under w->mu, or before the thread starts.
static void arm(worker *w, int method) {
  call *c = calloc(1, sizeof *c);
  if (!c) {
    LOG("out of memory arming a call");
    return;
  }
  c->w = w;
  c->method = method;
  grpc_metadata_array_init(&c->md);
  grpc_call_details_init(&c->details);
  grpc_call_error rc = method < 0 ? grpc_server_request_call(g_server, &c->call, &c->details, &c->md, w->cq, w->cq, c)
                                  : grpc_server_request_registered_call(g_server, g_handle[method], &c->call,
                                                                        &c->deadline, &c->md, &c->payload, w->cq,
                                                                        w->cq, c);
  if (rc != GRPC_CALL_OK) {
    grpc_metadata_array_destroy(&c->md);
    grpc_call_details_destroy(&c->details);
    free(c);
  }
}

static void done(call *c) {
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->send) grpc_byte_buffer_destroy(c->send);
  grpc_slice_unref(c->text);
  grpc_metadata_array_destroy(&c->md);
  grpc_call_details_destroy(&c->details);
  if (c->call) grpc_call_unref(c->call);
  free(c);
}

// Reads a varint at *p (< end); 0 when it runs past end or is too long.
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int sh = 0; *p < end && sh < 64; sh += 7) {
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << sh;
    if (!(b & 0x80)) return 1;
  }
  return 0;
}

// The request's id (ModelInferRequest field 3), found by walking the top
// level's fields (the tensors are skipped by length, never parsed). The
// answer carries it back: perf_analyzer's asynchronous mode matches answers
// to requests by id. *len 0 when there is none.
static void request_id(const uint8_t *d, size_t n, const uint8_t **id, size_t *len) {
  const uint8_t *p = d, *end = d + n;
  *len = 0;
  uint64_t key, v;
  while (p < end && varint(&p, end, &key)) {
    switch (key & 7) {
      case 0:
        if (!varint(&p, end, &v)) return;
        break;
      case 1:
        p += 8;
        break;
      case 5:
        p += 4;
        break;
      case 2:
        if (!varint(&p, end, &v) || v > (uint64_t)(end - p)) return;
        if (key >> 3 == 3) {
          *id = p;
          *len = (size_t)v;
          return;
        }
        p += v;
        break;
      default:
        return;
    }
  }
}

// Reads the whole request into the worker's scratch (one copy, as echo_server
// mode 2 and any server that parses it). Returns 0 or -1.
static int read_all(worker *w, grpc_byte_buffer *bb, size_t *n) {
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb)) return -1;
  size_t total = grpc_byte_buffer_length(rd.buffer_out), off = 0;
  if (total > w->cap) {
    free(w->scratch);
    w->cap = 0;
    if (!(w->scratch = malloc(total))) {
      grpc_byte_buffer_reader_destroy(&rd);
      return -1;
    }
    w->cap = total;
  }
  grpc_slice s;
  while (grpc_byte_buffer_reader_next(&rd, &s)) {
    size_t n = GRPC_SLICE_LENGTH(s);
    if (n <= total - off) memcpy(w->scratch + off, GRPC_SLICE_START_PTR(s), n);
    off += n;
    grpc_slice_unref(s);
  }
  grpc_byte_buffer_reader_destroy(&rd);
  *n = total;
  return off == total ? 0 : -1;
}

static void on_call(worker *w, call *c) {
  pthread_mutex_lock(&w->mu);
  if (!w->closed && !atomic_load(&g_stopping)) arm(w, c->method);
  pthread_mutex_unlock(&w->mu);
  grpc_status_code code = GRPC_STATUS_OK;
  grpc_slice body = grpc_empty_slice(), tail = grpc_empty_slice();
  size_t n_req = 0;
  if (c->method < 0) {
    code = GRPC_STATUS_UNIMPLEMENTED;
    c->text = grpc_slice_from_static_string("not implemented by bench_fixed_server (a transport yardstick)");
  } else if (!c->payload || read_all(w, c->payload, &n_req)) {
    code = GRPC_STATUS_INVALID_ARGUMENT;
    c->text = grpc_slice_from_static_string("request message missing or unreadable");
  } else if (c->method == M_STATS) {
    body = stats_reply();
  } else {
    body = grpc_slice_ref(fixed[c->method]);
    if (c->method == M_INFER) {
      atomic_fetch_add_explicit(&g_infers, 1, memory_order_relaxed);
      const uint8_t *id = NULL;
      size_t id_len = 0;
      request_id(w->scratch, n_req, &id, &id_len);
      if (id_len && id_len < 128) {  // field 3 appended: a parser takes fields in any order
        tail = grpc_slice_malloc(2 + id_len);
        uint8_t *t = GRPC_SLICE_START_PTR(tail);
        t[0] = 3 << 3 | 2;
        t[1] = (uint8_t)id_len;
        memcpy(t + 2, id, id_len);
      }
    }
  }
  if (code == GRPC_STATUS_OK) {
    grpc_slice parts[2] = {body, tail};
    c->send = grpc_raw_byte_buffer_create(parts, GRPC_SLICE_LENGTH(tail) ? 2 : 1);
  }
  grpc_slice_unref(body);
  grpc_slice_unref(tail);
  c->answering = 1;
  grpc_call_error rc = echo_reply(c->call, c->send, code, code == GRPC_STATUS_OK ? NULL : &c->text, &c->cancelled, c,
                                  &w->mu, &w->closed, NULL);
  if (rc != GRPC_CALL_OK) {
    grpc_call_cancel(c->call, NULL);
    done(c);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type != GRPC_OP_COMPLETE || !ev.tag) continue;
    call *c = ev.tag;
    if (c->answering || !ev.success) done(c);
    else on_call(w, c);
  }
  return NULL;
}

// ---------------------------------------------------------------- main

static void usage(FILE *f) {
  fprintf(f, "usage: bench_fixed_server --model NAME [--max-batch N] --input NAME:TYPE:D,D [--input ...]\n"
             "         --output NAME:TYPE:D,D [--output ...] [--port N] [--threads N] [--calls N]\n"
             "  dims without the batch dim (as config.pbtxt); --max-batch 0: no batch dim (default 0)\n"
             "  --port 0 picks a free port (default 8001); --threads: CQ threads (default: CPUs);\n"
             "  --calls: ModelInfer calls pre-posted per thread (default 32)\n"
             "Answers ModelInfer with one fixed reply: every output, one row of zeros. A yardstick, not a server.\n");
}

// echo_parse_int under this program's name.
static int parse_int(const char *name, const char *v, long lo, long hi, int *out) {
  return echo_parse_int("bench_fixed_server", name, v, lo, hi, out);
}

static int parse_args(int argc, char **argv) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  opt.threads = ncpu > 0 && ncpu < 256 ? (int)ncpu : 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench_fixed_server: %s needs a value (or is unknown)\n", a);
      return -1;
    }
    const char *v = argv[++i];
    int rc = 0;
    if (!strcmp(a, "--model")) opt.model = v;
    else if (!strcmp(a, "--max-batch")) rc = parse_int(a, v, 0, INT_MAX, &opt.max_batch);
    else if (!strcmp(a, "--port")) rc = parse_int(a, v, 0, 65535, &opt.port);
    else if (!strcmp(a, "--threads")) rc = parse_int(a, v, 1, 256, &opt.threads);
    else if (!strcmp(a, "--calls")) rc = parse_int(a, v, 1, 4096, &opt.calls);
    else if (!strcmp(a, "--input") || !strcmp(a, "--output")) {
      int in = a[2] == 'i';
      size_t *n = in ? &opt.n_in : &opt.n_out;
      if (*n == MAX_TENSORS) {
        fprintf(stderr, "bench_fixed_server: at most %d %ss\n", MAX_TENSORS, a + 2);
        return -1;
      }
      rc = parse_tensor(v, in ? &opt.in[*n] : &opt.out[*n]);
      if (!rc) ++*n;
    } else {
      fprintf(stderr, "bench_fixed_server: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    if (rc) return -1;
  }
  if (!opt.model || !opt.n_in || !opt.n_out) {
    fprintf(stderr, "bench_fixed_server: --model, at least one --input and one --output are needed\n");
    usage(stderr);
    return -1;
  }
  for (size_t i = 0; i < opt.n_in; i++) with_batch(&opt.in[i]);
  for (size_t i = 0; i < opt.n_out; i++) with_batch(&opt.out[i]);
  return 0;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv)) return 2;
  sigset_t stop;
  (void)echo_block_stop_signals(&stop);  // before any thread: only sigwait sees them
  grpc_init();
  pack_fixed();
  g_server = echo_server_create(INT_MAX);
  worker *w = calloc((size_t)opt.threads, sizeof *w);
  if (!g_server || !w) {
    LOG("cannot create the server");
    return 1;
  }
  grpc_completion_queue *notify = grpc_completion_queue_create_for_next(NULL);  // the shutdown tag alone
  grpc_server_register_completion_queue(g_server, notify, NULL);
  for (int i = 0; i < opt.threads; i++) {
    pthread_mutex_init(&w[i].mu, NULL);
    w[i].cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(g_server, w[i].cq, NULL);
  }
  for (int m = 0; m < N_METHODS; m++)
    g_handle[m] = grpc_server_register_method(g_server, method_path[m], NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
  char addr[64];
  snprintf(addr, sizeof addr, "0.0.0.0:%d", opt.port);
  int port = echo_listen(g_server, addr);
  if (port <= 0) {
    LOG("cannot listen on %s", addr);
    return 1;
  }
  grpc_server_start(g_server);
  for (int i = 0; i < opt.threads; i++) {
    for (int m = 0; m < N_METHODS; m++)
      for (int k = m == M_INFER ? opt.calls : 2; k > 0; k--) arm(&w[i], m);
    arm(&w[i], -1);
    if (pthread_create(&w[i].th, NULL, worker_main, &w[i])) {
      LOG("cannot start thread %d", i);
      return 1;
    }
  }
  fprintf(stderr, "fixed ready: grpc=%d\n", port);
  fflush(stderr);
  int sig = 0;
  sigwait(&stop, &sig);
  atomic_store(&g_stopping, 1);
  grpc_server_shutdown_and_notify(g_server, notify, NULL);
  grpc_server_cancel_all_calls(g_server);
  grpc_completion_queue_next(notify, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  for (int i = 0; i < opt.threads; i++) {
    pthread_mutex_lock(&w[i].mu);
    w[i].closed = 1;
    grpc_completion_queue_shutdown(w[i].cq);
    pthread_mutex_unlock(&w[i].mu);
  }
  for (int i = 0; i < opt.threads; i++) pthread_join(w[i].th, NULL);
  grpc_server_destroy(g_server);
  grpc_completion_queue_shutdown(notify);
  while (grpc_completion_queue_next(notify, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(notify);
  for (int i = 0; i < opt.threads; i++) {
    pthread_mutex_destroy(&w[i].mu);
    grpc_completion_queue_destroy(w[i].cq);
    free(w[i].scratch);
  }
  free(w);
  for (int m = 0; m < N_METHODS; m++) grpc_slice_unref(fixed[m]);
  LOG("stopped after %llu ModelInfer calls", (unsigned long long)atomic_load(&g_infers));
  grpc_shutdown();
  return 0;
}
