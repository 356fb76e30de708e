// main.c: inferd-load, a perf_analyzer-style load generator for KServe v2 /
// Triton gRPC servers. Learns the model, builds one request, then for each
// load level runs measurement windows until they are stable and reports the
// last three merged. Exit: 0 ran (request errors included), 1 the server or
// model could not be reached or described, shared memory regions could not
// be made or registered (or an output file not written), 2 usage.
#include <grpc/grpc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients/load/cli.h"
#include "kernels/base/clock.h"
#include "clients/load/driver.h"
#include "clients/load/gen.h"
#include "clients/load/inputs.h"
#include "clients/load/model.h"
#include "clients/load/report.h"
#include "clients/load/request.h"
#include "clients/load/rpc.h"
#include "clients/load/shm.h"
#include "clients/load/stats.h"
#include "kernels/base/dtype.h"
#include "proto/grpc_offload.h"

#define CONTROL_TIMEOUT_MS 10000
#define TICK_NS 50000000ull  // the measuring thread looks at Ctrl-C this often

static volatile sig_atomic_t interrupted = 0;
static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

// Sleeps until the monotonic time t, in ticks so Ctrl-C ends a window early.
static void sleep_until(uint64_t t) {
  for (;;) {
    uint64_t now = clock_mono_ns();
    if (now >= t || interrupted) return;
    uint64_t d = t - now < TICK_NS ? t - now : TICK_NS;
    struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
    nanosleep(&ts, NULL);
  }
}

typedef struct run_ctx {
  const ld_opts *o;
  const ld_model *m;
  ld_driver *drv;
  grpc_channel *ctl;
  int ctl_timeout_ms;
  bool server_stats;
  int rows;
} run_ctx;

static const char *level_name(ld_mode m) {
  return m == LD_OPEN ? "rate" : "concurrency";
}

// What every level reports whatever its mode: the mix and every request by kind.
static void fill_kinds(run_ctx *rc, ld_result *res) {
  res->mix = rc->o->mix;
  ld_driver_kind_totals(rc->drv, res->sent, res->by_kind);
}

// "valid OK=9 INVALID_ARGUMENT=1" for a period's stderr line; only the statuses seen.
static const char *kinds_str(const ld_period *p, char *buf, size_t cap) {
  size_t off = 0;
  buf[0] = '\0';
  for (int r = 0; r < LD_N_REQ_KINDS; r++) {
    if (!p->sent[r] && !p->by_kind[r][0]) continue;
    for (int k = 0; k < LD_N_KINDS && off < cap; k++)
      if (p->by_kind[r][k])
        off += (size_t)snprintf(buf + off, cap - off, "%s%s:%s=%llu", off ? " " : "", ld_req_kind_name(r),
                                ld_kind_name(k), (unsigned long long)p->by_kind[r][k]);
  }
  return buf;
}

// --duration-s: one level for a fixed time, collected every --report-every-s
// into a period; the result merges the periods, and its server statistics
// (--server-stats) run from the start to after the drain.
static int run_duration(run_ctx *rc, const ld_level *lv, ld_result *res, err *e) {
  const ld_opts *o = rc->o;
  uint64_t total_ns = (uint64_t)(o->duration_s * 1e9);
  uint64_t every_ns = o->report_every_s > 0 ? (uint64_t)(o->report_every_s * 1e9) : total_ns;
  if (every_ns == 0 || every_ns > total_ns) every_ns = total_ns ? total_ns : 1;
  size_t max = (size_t)((total_ns + every_ns - 1) / every_ns);
  ld_window win = {0}, merged = {0};
  ld_server_stats before, after;
  bool have_before = false;
  int rcode = 0;
  memset(res, 0, sizeof *res);
  res->mode = lv->mode;
  res->level = lv->value;
  res->rows = rc->rows;
  res->streaming = o->streaming;
  res->periods = calloc(max ? max : 1, sizeof *res->periods);
  if (!res->periods || ld_window_init(&win) != 0 || ld_window_init(&merged) != 0) {
    rcode = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto out;
  }
  err se;
  if (rc->server_stats)
    have_before = ld_server_stats_fetch(rc->ctl, o->model, o->version, rc->ctl_timeout_ms, &before, &se) == 0;
  if ((rcode = ld_driver_start(rc->drv, lv, e)) != 0) goto out;
  uint64_t t0 = clock_mono_ns(), prev = t0;
  while (res->n_periods < max && !interrupted) {
    uint64_t end = (uint64_t)(res->n_periods + 1) * every_ns;
    sleep_until(t0 + (end < total_ns ? end : total_ns));
    // the last period: no send after its collect (ld_driver_halt), so the periods hold every send but
    // one per load thread at most
    if (res->n_periods + 1 == max || end >= total_ns) ld_driver_halt(rc->drv);
    ld_window_reset(&win);
    ld_driver_collect(rc->drv, &win);
    uint64_t now = clock_mono_ns();
    win.duration_ns = now - prev;
    ld_period *p = &res->periods[res->n_periods++];
    ld_period_fill(p, &win, (double)(prev - t0) / 1e9);
    prev = now;
    ld_window_merge(&merged, &win);
    char kb[1024];
    fprintf(stderr,
            "  period %zu/%zu (%.0f-%.0f s): valid p50 %.0f us, p99 %.0f us, max %.0f us; lag p99 %.0f us, max %.0f us;"
            " %s\n",
            res->n_periods, max, p->start_s, p->start_s + p->seconds, p->valid.p50_us, p->valid.p99_us, p->valid.max_us,
            p->lag_p99_us, p->lag_max_us, kinds_str(p, kb, sizeof kb));
  }
  ld_driver_stop(rc->drv);
  // What ended during the drain belongs to no period but to the level's totals.
  ld_driver_totals(rc->drv, &res->level_ok, &res->level_errors);
  fill_kinds(rc, res);
  ld_result_fill(res, &merged);
  res->windows = res->measured = (int)res->n_periods;
  if (rc->server_stats && have_before &&
      ld_server_stats_fetch(rc->ctl, o->model, o->version, rc->ctl_timeout_ms, &after, &se) == 0) {
    ld_server_stats_sub(&after, &before, &res->srv);
    res->have_server = true;
  }
  if (interrupted)
    fprintf(stderr, "  %s %g: interrupted after %zu period(s)\n", level_name(lv->mode), lv->value, res->n_periods);
out:
  ld_window_close(&win);
  ld_window_close(&merged);
  return rcode;
}

// One level: windows until the last three agree (or max-trials), then the
// last three merged into *res.
static int run_level(run_ctx *rc, const ld_level *lv, ld_result *res, err *e) {
  const ld_opts *o = rc->o;
  int max = o->max_trials;
  ld_window *win = calloc((size_t)max, sizeof *win);
  ld_summary *sum = calloc((size_t)max, sizeof *sum);
  ld_server_stats *snap = calloc((size_t)max + 1, sizeof *snap);
  bool *snap_ok = calloc((size_t)max + 1, sizeof *snap_ok);
  ld_window merged = {0};
  int n = 0, rcode = 0;
  memset(res, 0, sizeof *res);
  res->mode = lv->mode;
  res->level = lv->value;
  res->rows = rc->rows;
  res->streaming = o->streaming;
  if (!win || !sum || !snap || !snap_ok || ld_window_init(&merged) != 0) {
    rcode = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto out;
  }
  if ((rcode = ld_driver_start(rc->drv, lv, e)) != 0) goto out;
  uint64_t t0 = clock_mono_ns(), prev = t0;
  err se;
  if (rc->server_stats)
    snap_ok[0] = ld_server_stats_fetch(rc->ctl, o->model, o->version, rc->ctl_timeout_ms, &snap[0], &se) == 0;
  while (n < max) {
    sleep_until(t0 + (uint64_t)(n + 1) * (uint64_t)o->interval_ms * 1000000ull);
    if ((rcode = ld_window_init(&win[n])) != 0) {
      rcode = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    ld_driver_collect(rc->drv, &win[n]);
    uint64_t now = clock_mono_ns();
    win[n].duration_ns = now - prev;
    prev = now;
    if (rc->server_stats)
      snap_ok[n + 1] = ld_server_stats_fetch(rc->ctl, o->model, o->version, rc->ctl_timeout_ms, &snap[n + 1], &se) == 0;
    ld_window_summarize(&win[n], &sum[n]);
    fprintf(stderr, "  %s %g window %d/%d: %.1f infer/s, avg %.0f us, p50 %.0f us, p99 %.0f us, errors %llu\n",
            level_name(lv->mode), lv->value, n + 1, max, sum[n].rps, sum[n].avg_us, sum[n].p50_us, sum[n].p99_us,
            (unsigned long long)sum[n].errors);
    n++;
    if (n >= 3 && ld_stable(&sum[n - 3], 3, o->stability_pct)) {
      res->stable = true;
      break;
    }
    if (interrupted) break;
  }
  ld_driver_stop(rc->drv);
  ld_driver_totals(rc->drv, &res->level_ok, &res->level_errors);
  fill_kinds(rc, res);
  if (rcode) goto out;
  int k = n < 3 ? n : 3;
  for (int i = n - k; i < n; i++) ld_window_merge(&merged, &win[i]);
  ld_result_fill(res, &merged);
  res->windows = n;
  res->measured = k;
  if (rc->server_stats && k > 0 && snap_ok[n] && snap_ok[n - k]) {
    ld_server_stats_sub(&snap[n], &snap[n - k], &res->srv);
    res->have_server = true;
  }
  if (!res->stable)
    fprintf(stderr, "  %s %g: %s after %d windows; reporting the last %d\n", level_name(lv->mode), lv->value,
            interrupted ? "interrupted" : "not stable", n, k);
out:
  for (int i = 0; win && i < n; i++) ld_window_close(&win[i]);
  ld_window_close(&merged);
  free(win);
  free(sum);
  free(snap);
  free(snap_ok);
  return rcode;
}

// A note when an output whose size the metadata fixes cannot fit in its
// region: the server would then fail every request with INVALID_ARGUMENT.
static void check_output_sizes(const ld_model *m, int rows, size_t region) {
  for (size_t k = 0; k < m->n_outputs; k++) {
    const ld_tensor_meta *t = &m->outputs[k];
    size_t esz = dtype_size(dtype_from_wire(t->datatype)), bytes = esz;
    for (size_t d = 0; d < t->rank && bytes; d++) {
      int64_t dim = d == 0 && m->batching ? rows : t->shape[d];
      bytes = dim < 0 ? 0 : bytes * (size_t)dim;  // variable dims: known only from the answer
    }
    if (bytes > region)
      fprintf(stderr,
              "inferd-load: note: output '%s' takes %zu bytes, more than --output-shared-memory-size %zu: "
              "every request will fail\n",
              t->name, bytes, region);
  }
}

static int usage_error(const err *e) {
  fprintf(stderr, "inferd-load: %s\n(inferd-load --help for the options)\n", e->msg);
  return 2;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "generate") == 0) {  // generative models: its own options (gen.h)
    struct sigaction gsa;
    memset(&gsa, 0, sizeof gsa);
    gsa.sa_handler = on_sigint;
    sigaction(SIGINT, &gsa, NULL);
    return ld_gen_main(argc - 1, argv + 1, &interrupted);
  }
  ld_opts o;
  err e = {0};
  if (ld_opts_parse(argc, argv, &o, &e) != 0) {
    ld_opts_close(&o);
    return usage_error(&e);
  }
  if (o.help) {
    ld_usage(stdout);
    ld_opts_close(&o);
    return 0;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = o.threads ? o.threads : (int)(cores < 1 ? 1 : cores > 4 ? 4 : cores);
  int connections = o.connections ? o.connections : threads;
  // Control RPCs get their own deadline: --timeout-ms is about inference (it may be tiny on purpose).
  int ctl_timeout = CONTROL_TIMEOUT_MS;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, NULL);
  // Shared memory objects outlive the process: a SIGTERM also goes through
  // the cleanup at the end, which unregisters and removes them.
  if (o.shared_memory != LD_SHM_NONE) sigaction(SIGTERM, &sa, NULL);

  grpc_init();
  // like inferd: a contended connection's transport work stays on the thread that holds it
  if (!o.transport_offload && !grpc_offload_decline())
    fprintf(stderr, "inferd-load: this gRPC's combiner cannot be kept off its executor (proto/grpc_offload.h)\n");
  int exit_code = 0;
  grpc_channel *ctl = ld_channel_create(o.url, false);
  ld_model *m = NULL;
  ld_tensor *in = NULL;
  size_t n_in = 0;
  uint8_t *req = NULL, *bad_req = NULL;
  size_t req_len = 0, bad_req_len = 0;
  ld_shm_set *shm = NULL;
  ld_cudart *cuda = NULL;  // --shared-memory cuda: the runtime, for the set's lifetime
  ld_driver *drv = NULL;
  ld_result *results = NULL;
  size_t n_results = 0;

  if (ld_model_fetch(ctl, o.model, o.version, ctl_timeout, &m, &e) != 0) {
    if (e.code == ERR_UNAVAILABLE || e.code == ERR_DEADLINE_EXCEEDED)
      fprintf(stderr, "inferd-load: cannot reach the server at %s: %s\n", o.url, e.msg);
    else
      fprintf(stderr, "inferd-load: cannot get metadata of model '%s'%s%s%s from %s: %s\n", o.model,
              *o.version ? " version '" : "", o.version, *o.version ? "'" : "", o.url, e.msg);
    exit_code = 1;
    goto done;
  }
  ld_input_cfg icfg = {o.rows, o.shapes, o.n_shapes, o.data, o.data_path, o.seed};
  if (ld_inputs_build(m, &icfg, stderr, &in, &n_in, &e) != 0) {
    exit_code = usage_error(&e);
    goto done;
  }
  if (o.validate_identity && m->n_outputs != n_in)
    fprintf(stderr,
            "inferd-load: note: --validate-identity on a model with %zu inputs and %zu outputs: "
            "every reply will count as VALIDATION\n",
            n_in, m->n_outputs);
  fprintf(stderr, "inferd-load: model '%s' (%s), %d thread(s), %d connection(s)%s, windows of %d ms%s\n", m->name,
          m->batching ? "batching" : "no batching", threads, connections,
          o.streaming ? ", streaming (ModelStreamInfer)" : "", o.interval_ms,
          o.shared_memory == LD_SHM_SYSTEM ? ", shared memory: system"
          : o.shared_memory == LD_SHM_CUDA ? ", shared memory: cuda"
                                           : "");
  for (size_t i = 0; i < n_in; i++) {
    char sb[256];
    fprintf(stderr, "  input %s %s %s (%zu bytes, %s)\n", in[i].name, in[i].datatype,
            ld_shape_str(in[i].shape, in[i].rank, sb, sizeof sb), in[i].size,
            o.data == LD_DATA_PATH   ? o.data_path
            : o.data == LD_DATA_ZERO ? "zeros"
                                     : "random");
  }
  ld_request_spec spec = {.model = o.model, .version = o.version, .in = in, .n_in = n_in};
  if (o.shared_memory != LD_SHM_NONE) {
    const char *kind = o.shared_memory == LD_SHM_CUDA ? "cuda" : "system";
    char prefix[64];
    snprintf(prefix, sizeof prefix, "inferd_load_%ld", (long)getpid());
    if ((o.shared_memory == LD_SHM_CUDA && ld_cudart_open(0, &cuda, &e) != 0) ||
        ld_shm_set_create(ctl, ctl_timeout, prefix, in, n_in, m, o.output_shm_size, cuda, &shm, &e) != 0) {
      fprintf(stderr, "inferd-load: --shared-memory %s: %s\n", kind, e.msg);
      exit_code = 1;
      goto done;
    }
    spec.in_shm = ld_shm_set_inputs(shm);
    spec.out = ld_shm_set_outputs(shm, &spec.n_out);
    fprintf(stderr, "inferd-load: shared memory: %s, %zu region(s) '%s_*' registered, %zu bytes per output\n", kind,
            ld_shm_set_count(shm), prefix, o.output_shm_size);
    check_output_sizes(m, o.rows, o.output_shm_size);
  }
  if (ld_request_encode_spec(&spec, &req, &req_len, &e) != 0) {
    fprintf(stderr, "inferd-load: %s\n", e.msg);
    exit_code = 1;
    goto done;
  }
  if (o.mix.on && o.mix.pct[LD_REQ_INVALID] > 0) {
    ld_tensor *bad = NULL;
    int brc = ld_inputs_widen_first(in, n_in, &bad, &e);
    if (brc == 0) {
      ld_request_spec bspec = spec;
      bspec.in = bad;
      brc = ld_request_encode_spec(&bspec, &bad_req, &bad_req_len, &e);
    }
    ld_inputs_free(bad, n_in);
    if (brc != 0) {
      fprintf(stderr, "inferd-load: --mix: %s\n", e.msg);
      exit_code = 1;
      goto done;
    }
  }
  if (o.mix.on)
    fprintf(stderr,
            "inferd-load: mix: %g%% valid, %g%% invalid, %g%% cancelled after %.0f-%.0f us, %g%% with a deadline of "
            "%.0f-%.0f us\n",
            o.mix.pct[LD_REQ_VALID], o.mix.pct[LD_REQ_INVALID], o.mix.pct[LD_REQ_CANCEL],
            (double)o.cancel_after.lo_ns / 1e3, (double)o.cancel_after.hi_ns / 1e3, o.mix.pct[LD_REQ_EXPIRE],
            (double)o.expire.lo_ns / 1e3, (double)o.expire.hi_ns / 1e3);
  bool server_stats = o.server_stats;
  if (server_stats) {
    ld_server_stats probe;
    if (ld_server_stats_fetch(ctl, o.model, o.version, ctl_timeout, &probe, &e) != 0) {
      fprintf(stderr, "inferd-load: note: --server-stats: ModelStatistics failed (%s); going on without\n", e.msg);
      server_stats = false;
    }
  }
  ld_driver_cfg dcfg = {.target = o.url,
                        .connections = connections,
                        .threads = threads,
                        .timeout_ms = o.timeout_ms,
                        .request = req,
                        .request_len = req_len,
                        .streaming = o.streaming,
                        .expect = o.validate_identity ? in : NULL,
                        .n_expect = o.validate_identity ? n_in : 0,
                        .mix = o.mix,
                        .bad_request = bad_req,
                        .bad_request_len = bad_req_len,
                        .cancel_after = o.cancel_after,
                        .expire = o.expire};
  if (ld_driver_create(&dcfg, &drv, &e) != 0) {
    fprintf(stderr, "inferd-load: %s\n", e.msg);
    exit_code = 1;
    goto done;
  }

  double levels[LD_MAX_LEVELS];
  size_t n_levels = ld_range_levels(&o.range, levels, LD_MAX_LEVELS);
  if (n_levels > LD_MAX_LEVELS) n_levels = LD_MAX_LEVELS;
  results = calloc(n_levels ? n_levels : 1, sizeof *results);
  if (!results) {
    fprintf(stderr, "inferd-load: out of memory\n");
    exit_code = 1;
    goto done;
  }
  run_ctx rc = {&o, m, drv, ctl, ctl_timeout, server_stats, m->batching ? o.rows : 1};
  ld_report_header(stdout, server_stats);
  for (size_t i = 0; i < n_levels && !interrupted; i++) {
    ld_level lv = {o.mode, levels[i], o.dist, o.seed};
    fprintf(stderr, "inferd-load: %s %g\n", level_name(o.mode), levels[i]);
    int lrc = o.duration_s > 0 ? run_duration(&rc, &lv, &results[n_results], &e)
                               : run_level(&rc, &lv, &results[n_results], &e);
    if (lrc != 0) {
      ld_result_close(&results[n_results]);
      fprintf(stderr, "inferd-load: %s\n", e.msg);
      exit_code = 1;
      break;
    }
    ld_report_row(stdout, &results[n_results], server_stats);
    n_results++;
  }
  if (o.csv && ld_report_csv(o.csv, results, n_results, &e) != 0) {
    fprintf(stderr, "inferd-load: --csv: %s\n", e.msg);
    exit_code = 1;
  }
  if (o.json && ld_report_json(o.json, results, n_results, &e) != 0) {
    fprintf(stderr, "inferd-load: --json: %s\n", e.msg);
    exit_code = 1;
  }

done:
  ld_driver_destroy(drv);  // first: no request may still use the regions
  if (ld_shm_set_destroy(shm, ctl, ctl_timeout, &e) != 0) {
    fprintf(stderr, "inferd-load: %s\n", e.msg);
    if (exit_code == 0) exit_code = 1;
  }
  ld_cudart_close(cuda);  // after the set: its regions were freed through it
  for (size_t i = 0; i < n_results; i++) ld_result_close(&results[i]);
  free(results);
  free(req);
  free(bad_req);
  ld_inputs_free(in, n_in);
  ld_model_destroy(m);
  if (ctl) grpc_channel_destroy(ctl);
  grpc_shutdown();
  ld_opts_close(&o);
  return exit_code;
}
