// cli.c: command-line parsing for inferd-load. Hand-written rather than
// getopt_long so it keeps no global state and the unit tests can call it
// repeatedly; accepts "--opt value" and "--opt=value".
#include "clients/load/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- numbers

static int parse_double(const char *s, double *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int parse_long(const char *s, long long lo, long long hi, long long *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

// --- ranges

size_t ld_range_levels(const ld_range *r, double *out, size_t cap) {
  size_t n = 0;
  if (!(r->step > 0) || r->start > r->end) return 0;
  // Stepping by index, not by repeated addition, so 0.1 steps do not drift;
  // the slack admits an END that is a rounding error short.
  for (size_t i = 0;; i++) {
    double v = r->start + (double)i * r->step;
    if (v > r->end + 1e-9 * fabs(r->end)) break;
    if (n < cap) out[n] = v;
    n++;
    if (n > LD_MAX_LEVELS) break;
  }
  return n;
}

int ld_range_parse(const char *s, bool integer, ld_range *r, err *e) {
  double part[3];
  int n = 0;
  const char *p = s;
  char buf[64];
  if (!s || !*s) return err_set(e, ERR_INVALID_ARGUMENT, "empty range (want START[:END[:STEP]])");
  for (;;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (n == 3 || len == 0 || len >= sizeof buf)
      return err_set(e, ERR_INVALID_ARGUMENT, "bad range '%s' (want START[:END[:STEP]])", s);
    memcpy(buf, p, len);
    buf[len] = '\0';
    if (parse_double(buf, &part[n]) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "bad number '%s' in range '%s'", buf, s);
    if (integer && part[n] != floor(part[n]))
      return err_set(e, ERR_INVALID_ARGUMENT, "range '%s' must hold whole numbers", s);
    n++;
    if (!colon) break;
    p = colon + 1;
  }
  r->start = part[0];
  r->end = n > 1 ? part[1] : part[0];
  r->step = n > 2 ? part[2] : 1;
  if (!(r->start > 0)) return err_set(e, ERR_INVALID_ARGUMENT, "range '%s': START must be > 0", s);
  if (r->end < r->start) return err_set(e, ERR_INVALID_ARGUMENT, "range '%s': END is below START", s);
  if (!(r->step > 0)) return err_set(e, ERR_INVALID_ARGUMENT, "range '%s': STEP must be > 0", s);
  if (ld_range_levels(r, NULL, 0) > LD_MAX_LEVELS)
    return err_set(e, ERR_INVALID_ARGUMENT, "range '%s' has more than %d levels", s, LD_MAX_LEVELS);
  return 0;
}

// --- shapes

static int parse_shape(const char *s, ld_shape_opt *out, err *e) {
  memset(out, 0, sizeof *out);
  // The last ':' separates: tensor names may themselves hold ':' (TF style "x:0").
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s || !colon[1])
    return err_set(e, ERR_INVALID_ARGUMENT, "bad --shape '%s' (want NAME:D1,D2,...)", s);
  const char *p = colon + 1;
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char buf[32];
    long long d;
    if (out->rank == LD_MAX_RANK)
      return err_set(e, ERR_INVALID_ARGUMENT, "--shape '%s' has more than %d dims", s, LD_MAX_RANK);
    if (len == 0 || len >= sizeof buf) return err_set(e, ERR_INVALID_ARGUMENT, "bad dim in --shape '%s'", s);
    memcpy(buf, p, len);
    buf[len] = '\0';
    if (parse_long(buf, 1, (long long)1 << 40, &d) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "--shape '%s': dim '%s' is not a positive integer", s, buf);
    out->dims[out->rank++] = d;
    if (!comma) break;
    p = comma + 1;
    if (!*p) return err_set(e, ERR_INVALID_ARGUMENT, "bad --shape '%s' (trailing ',')", s);
  }
  out->name = strndup(s, (size_t)(colon - s));
  if (!out->name) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  return 0;
}

// --- options

enum {
  O_URL,
  O_MODEL,
  O_VERSION,
  O_CONC,
  O_RATE,
  O_DIST,
  O_CONN,
  O_THREADS,
  O_ROWS,
  O_SHAPE,
  O_DATA,
  O_VALIDATE,
  O_SHM,
  O_STREAMING,
  O_OUT_SHM_SIZE,
  O_INTERVAL,
  O_STAB,
  O_TRIALS,
  O_TIMEOUT,
  O_SSTATS,
  O_MIX,
  O_CANCEL_AFTER,
  O_EXPIRE,
  O_DURATION,
  O_REPORT_EVERY,
  O_CSV,
  O_JSON,
  O_SEED,
  O_VERBOSE,
  O_OFFLOAD,
  O_HELP
};

typedef struct opt_def {
  const char *lng;
  char shrt;
  bool arg;
  int id;
} opt_def;

static const opt_def OPTS[] = {
    {"url", 'u', true, O_URL},
    {"model-name", 'm', true, O_MODEL},
    {"model-version", 'x', true, O_VERSION},
    {"concurrency-range", 0, true, O_CONC},
    {"request-rate-range", 0, true, O_RATE},
    {"request-distribution", 0, true, O_DIST},
    {"connections", 0, true, O_CONN},
    {"threads", 0, true, O_THREADS},
    {"rows", 'b', true, O_ROWS},
    {"batch-size", 0, true, O_ROWS},
    {"shape", 0, true, O_SHAPE},
    {"input-data", 0, true, O_DATA},
    {"validate-identity", 0, false, O_VALIDATE},
    {"shared-memory", 0, true, O_SHM},
    {"streaming", 0, false, O_STREAMING},
    {"output-shared-memory-size", 0, true, O_OUT_SHM_SIZE},
    {"measurement-interval", 'p', true, O_INTERVAL},
    {"stability-percentage", 's', true, O_STAB},
    {"max-trials", 'r', true, O_TRIALS},
    {"timeout-ms", 0, true, O_TIMEOUT},
    {"server-stats", 0, false, O_SSTATS},
    {"mix", 0, true, O_MIX},
    {"cancel-after-us", 0, true, O_CANCEL_AFTER},
    {"expire-us", 0, true, O_EXPIRE},
    {"duration-s", 0, true, O_DURATION},
    {"report-every-s", 0, true, O_REPORT_EVERY},
    {"csv", 'f', true, O_CSV},
    {"json", 0, true, O_JSON},
    {"seed", 0, true, O_SEED},
    {"verbose", 'v', false, O_VERBOSE},
    {"grpc-transport-offload", 0, false, O_OFFLOAD},
    {"help", 'h', false, O_HELP},
};

void ld_usage(FILE *f) {
  fputs(
      "usage: inferd-load -u HOST:PORT -m MODEL [options]\n"
      "       inferd-load generate -m MODEL [options]   (generative models: inferd-load generate --help)\n"
      "Load generator for KServe v2 / Triton gRPC servers (inferd, Triton).\n"
      "  -u, --url HOST:PORT            server (default localhost:8001)\n"
      "  -m, --model-name MODEL         model to load (required)\n"
      "  -x, --model-version V          version (default: the server's choice)\n"
      "  --concurrency-range S:E:STEP   closed loop: keep C requests in flight (default 1:1:1)\n"
      "  --request-rate-range S:E:STEP  open loop: send R requests/s whatever the replies\n"
      "  --request-distribution D       open loop spacing: constant (default) or poisson\n"
      "  --connections N                gRPC connections (default: one per thread)\n"
      "  --threads N                    completion-queue threads (default min(4, cores))\n"
      "  --grpc-transport-offload       let gRPC's executor threads take over a contended\n"
      "                                 connection's transport work (default: kept on the thread\n"
      "                                 that holds it, as inferd does; proto/grpc_offload.h)\n"
      "  -b, --rows R                   batch rows per request when the model batches (default 1)\n"
      "  --shape NAME:D1,D2,...         dims of an input without the batch dim (repeatable)\n"
      "  --input-data random|zero|PATH  input bytes: random (seeded, default), zeros, or raw\n"
      "                                 little-endian bytes: a file (one input) or a directory\n"
      "                                 with one file per input, named after the input\n"
      "  --validate-identity            each output must equal the input of the same index\n"
      "  --shared-memory none|system|cuda  system: inputs and outputs go through POSIX shared\n"
      "                                 memory regions registered with the server (same host; inferd\n"
      "                                 needs --allow-client-shm true); cuda: through memory on GPU 0\n"
      "                                 (cudaMalloc + IPC handle, as tritonclient; libcudart loaded\n"
      "                                 at run time); default none\n"
      "  --output-shared-memory-size N  bytes of each output's region (default 102400)\n"
      "  --streaming                    send on ModelStreamInfer streams (one per thread and\n"
      "                                 connection, open for a whole level) instead of unary calls\n"
      "  -p, --measurement-interval MS  window length (default 2000)\n"
      "  -s, --stability-percentage P   stable when the last 3 windows are within P% (default 10)\n"
      "  -r, --max-trials N             at most N windows per level (default 10)\n"
      "  --timeout-ms MS                per-request deadline (default 30000, 0: none)\n"
      "  --server-stats                 add the server's ModelStatistics over the measured windows\n"
      "                                 (with --duration-s: over the whole run, its drain included)\n"
      "  --mix V:I:C:E                  unary calls: percentages of valid requests, invalid ones\n"
      "                                 (the first input one element longer in its last dim), ones\n"
      "                                 the client cancels and ones with a deadline too short to meet;\n"
      "                                 counted by kind and status, latency of the valid ones only;\n"
      "                                 in the closed loop each freed slot draws the next kind\n"
      "  --cancel-after-us LO:HI        cancel kind: cancelled this long after sending (default 0:1000;\n"
      "                                 0 at once, others at gRPC's next wakeup, ~1 ms granular)\n"
      "  --expire-us LO:HI              expire kind: its deadline (default 1:500)\n"
      "  --duration-s S                 run one level for S seconds instead of windows until stable\n"
      "  --report-every-s P             with --duration-s: a report per period of P seconds (valid\n"
      "                                 p50/p99/max, counts by kind and status, schedule lag)\n"
      "  -f, --csv FILE                 one row per level\n"
      "  --json FILE                    per level: the CSV fields, errors by status, latency CDF\n"
      "  --seed N                       random inputs and poisson arrivals (default 1)\n"
      "  -v, --verbose                  more progress on stderr\n"
      "Exit status: 0 when the load ran (even with request errors), 1 when the server or model\n"
      "could not be reached or described or shared memory could not be set up, 2 for usage errors.\n",
      f);
}

static const opt_def *find_long(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof OPTS / sizeof OPTS[0]; i++)
    if (strlen(OPTS[i].lng) == len && strncmp(OPTS[i].lng, name, len) == 0) return &OPTS[i];
  return NULL;
}

static const opt_def *find_short(char c) {
  for (size_t i = 0; i < sizeof OPTS / sizeof OPTS[0]; i++)
    if (OPTS[i].shrt == c) return &OPTS[i];
  return NULL;
}

static int int_opt(const char *name, const char *v, long long lo, long long hi, int *out, err *e) {
  long long x;
  if (parse_long(v, lo, hi, &x) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s wants an integer in [%lld, %lld], got '%s'", name, lo, hi, v);
  *out = (int)x;
  return 0;
}

static int apply(ld_opts *o, const opt_def *d, const char *name, const char *v, bool *have_conc, err *e) {
  switch (d->id) {
    case O_URL:
      o->url = v;
      return 0;
    case O_MODEL:
      o->model = v;
      return 0;
    case O_VERSION:
      o->version = v;
      return 0;
    case O_CONC:
      *have_conc = true;
      return ld_range_parse(v, true, &o->range, e) ? err_prefix(e, "--concurrency-range: ") : 0;
    case O_RATE:
      o->mode = LD_OPEN;
      return ld_range_parse(v, false, &o->range, e) ? err_prefix(e, "--request-rate-range: ") : 0;
    case O_DIST:
      if (strcmp(v, "constant") == 0)
        o->dist = LD_DIST_CONSTANT;
      else if (strcmp(v, "poisson") == 0)
        o->dist = LD_DIST_POISSON;
      else
        return err_set(e, ERR_INVALID_ARGUMENT, "--request-distribution wants constant or poisson, got '%s'", v);
      return 0;
    case O_CONN:
      return int_opt(name, v, 1, 1024, &o->connections, e);
    case O_OFFLOAD:
      o->transport_offload = true;
      return 0;
    case O_THREADS:
      return int_opt(name, v, 1, 256, &o->threads, e);
    case O_ROWS:
      return int_opt(name, v, 1, 1 << 24, &o->rows, e);
    case O_SHAPE: {
      ld_shape_opt *n = realloc(o->shapes, (o->n_shapes + 1) * sizeof *n);
      if (!n) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      o->shapes = n;
      TRY(parse_shape(v, &o->shapes[o->n_shapes], e));
      o->n_shapes++;
      return 0;
    }
    case O_DATA:
      if (strcmp(v, "random") == 0)
        o->data = LD_DATA_RANDOM;
      else if (strcmp(v, "zero") == 0)
        o->data = LD_DATA_ZERO;
      else if (!*v)
        return err_set(e, ERR_INVALID_ARGUMENT, "--input-data wants random, zero or a path");
      else
        o->data = LD_DATA_PATH, o->data_path = v;
      return 0;
    case O_VALIDATE:
      o->validate_identity = true;
      return 0;
    case O_SHM:
      if (strcmp(v, "none") == 0)
        o->shared_memory = LD_SHM_NONE;
      else if (strcmp(v, "system") == 0)
        o->shared_memory = LD_SHM_SYSTEM;
      else if (strcmp(v, "cuda") == 0)
        o->shared_memory = LD_SHM_CUDA;
      else
        return err_set(e, ERR_INVALID_ARGUMENT, "--shared-memory wants none, system or cuda, got '%s'", v);
      return 0;
    case O_STREAMING:
      o->streaming = true;
      return 0;
    case O_OUT_SHM_SIZE: {
      long long x;
      if (parse_long(v, 1, (long long)1 << 40, &x) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "%s wants a byte count in [1, 2^40], got '%s'", name, v);
      o->output_shm_size = (size_t)x;
      return 0;
    }
    case O_INTERVAL:
      return int_opt(name, v, 10, 3600 * 1000, &o->interval_ms, e);
    case O_STAB: {
      double x;
      if (parse_double(v, &x) != 0 || !(x > 0) || x > 100)
        return err_set(e, ERR_INVALID_ARGUMENT, "%s wants a percentage in (0, 100], got '%s'", name, v);
      o->stability_pct = x;
      return 0;
    }
    case O_TRIALS:
      return int_opt(name, v, 1, 10000, &o->max_trials, e);
    case O_TIMEOUT:
      return int_opt(name, v, 0, 24 * 3600 * 1000, &o->timeout_ms, e);
    case O_SSTATS:
      o->server_stats = true;
      return 0;
    case O_MIX:
      return ld_mix_parse(v, &o->mix, e);
    case O_CANCEL_AFTER:
      return ld_span_parse(v, 0, &o->cancel_after, e) ? err_prefix(e, "--cancel-after-us: ") : 0;
    case O_EXPIRE:
      return ld_span_parse(v, 1, &o->expire, e) ? err_prefix(e, "--expire-us: ") : 0;
    case O_DURATION:
    case O_REPORT_EVERY: {
      double x;
      if (parse_double(v, &x) != 0 || !(x > 0) || x > 7 * 24 * 3600)
        return err_set(e, ERR_INVALID_ARGUMENT, "%s wants seconds in (0, 604800], got '%s'", name, v);
      *(d->id == O_DURATION ? &o->duration_s : &o->report_every_s) = x;
      return 0;
    }
    case O_CSV:
      o->csv = v;
      return 0;
    case O_JSON:
      o->json = v;
      return 0;
    case O_SEED: {
      char *end;
      errno = 0;
      unsigned long long x = strtoull(v, &end, 0);
      if (errno || !*v || *end || *v == '-')
        return err_set(e, ERR_INVALID_ARGUMENT, "--seed wants a non-negative integer, got '%s'", v);
      o->seed = x;
      return 0;
    }
    case O_VERBOSE:
      o->verbose++;
      return 0;
    case O_HELP:
      o->help = true;
      return 0;
  }
  return err_set(e, ERR_INTERNAL, "unhandled option %s", name);
}

int ld_opts_parse(int argc, char **argv, ld_opts *o, err *e) {
  memset(o, 0, sizeof *o);
  o->url = "localhost:8001";
  o->version = "";
  o->range = (ld_range){1, 1, 1};
  o->rows = 1;
  o->interval_ms = 2000;
  o->stability_pct = 10;
  o->max_trials = 10;
  o->timeout_ms = 30000;
  o->seed = 1;
  o->output_shm_size = LD_OUTPUT_SHM_SIZE_DEFAULT;
  o->cancel_after = (ld_span){0, 1000000};
  o->expire = (ld_span){1000, 500000};
  bool have_conc = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    const opt_def *d = NULL;
    char name[64];
    if (a[0] == '-' && a[1] == '-' && a[2]) {
      const char *eq = strchr(a + 2, '=');
      size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
      d = find_long(a + 2, len);
      if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "unknown option '%s'", a);
      if (eq && !d->arg) return err_set(e, ERR_INVALID_ARGUMENT, "option --%s takes no value", d->lng);
      val = eq ? eq + 1 : NULL;
    } else if (a[0] == '-' && a[1] && !a[2]) {
      d = find_short(a[1]);
      if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "unknown option '%s'", a);
    } else {
      return err_set(e, ERR_INVALID_ARGUMENT, "unexpected argument '%s'", a);
    }
    snprintf(name, sizeof name, "--%s", d->lng);
    if (d->arg && !val) {
      if (i + 1 >= argc) return err_set(e, ERR_INVALID_ARGUMENT, "option %s needs a value", name);
      val = argv[++i];
    }
    TRY(apply(o, d, name, val, &have_conc, e));
  }
  if (o->help) return 0;
  if (have_conc && o->mode == LD_OPEN)
    return err_set(e, ERR_INVALID_ARGUMENT, "--concurrency-range and --request-rate-range exclude each other");
  if (!o->model || !*o->model) return err_set(e, ERR_INVALID_ARGUMENT, "-m MODEL is required");
  if (!*o->url) return err_set(e, ERR_INVALID_ARGUMENT, "-u wants HOST:PORT");
  // Every in-flight request writes its outputs into the same regions, so
  // no answer's outputs can be read back without racing the next request's.
  if (o->validate_identity && o->shared_memory != LD_SHM_NONE)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "--validate-identity cannot be used with --shared-memory: all requests in flight share "
                   "the output regions, so an answer's outputs cannot be read back without racing the next "
                   "request's writes");
  if (o->mix.on && o->streaming)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "--mix cannot be used with --streaming: cancelling one request would end its whole stream");
  if (o->mix.on && o->shared_memory != LD_SHM_NONE)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "--mix cannot be used with --shared-memory: the invalid kind's longer input has no region");
  if (o->duration_s > 0 && ld_range_levels(&o->range, NULL, 0) != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "--duration-s runs one level: give the range a single value");
  if (o->report_every_s > 0 && !(o->duration_s > 0))
    return err_set(e, ERR_INVALID_ARGUMENT, "--report-every-s needs --duration-s");
  if (o->report_every_s > 0 && o->duration_s / o->report_every_s > LD_MAX_PERIODS)
    return err_set(e, ERR_INVALID_ARGUMENT, "--duration-s / --report-every-s makes more than %d periods",
                   LD_MAX_PERIODS);
  if (o->mode == LD_CLOSED && o->range.end > 16384)
    return err_set(e, ERR_INVALID_ARGUMENT, "--concurrency-range: at most 16384 requests in flight");
  return 0;
}

void ld_opts_close(ld_opts *o) {
  for (size_t i = 0; i < o->n_shapes; i++) free(o->shapes[i].name);
  free(o->shapes);
  o->shapes = NULL;
  o->n_shapes = 0;
}
