// endpoints.c: the HTTP routes on the loop thread: health for load
// balancers and orchestrators, and /metrics in Prometheus text format with
// Triton's metric names.
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/alloc.h"
#include "server/http/dashboard.h"
#include "server/obs/hist.h"
#include "server/core/llm_serve.h"
#include "server/http/http.h"
#include "server/http/rest.h"
#include "server/core/server.h"

#define THROUGHPUT_WINDOW_S 5

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->p && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

// --- per model version: one helper writes every family whose series are
// per model and version (the caller's series function says what each
// version has)

// What a series function gets beside the version: the server, which of its
// caller's families it writes (k) and the scrape's time.
typedef struct fam_ctx {
  srv_server *s;
  size_t k;
  int64_t now;
} fam_ctx;

// Writes version v's series of family `name`: none, one or several lines.
typedef void (*series_fn)(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c);

// One metric family: its # HELP and # TYPE lines, then each version's series,
// every model's in the registry's order. only_if_any: a family no version
// wrote a line for is left out, header too (the latency target's and the GPU
// instances' families exist only where those do).
static void family(sbuf *b, const char *name, const char *type, const char *help, int only_if_any,
                   series_fn series, const fam_ctx *c) {
  size_t start = b->len;
  sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
  size_t head = b->len;
  for (size_t i = 0; i < srv_registry_n_models(c->s->reg); i++) {
    srv_model *m = srv_registry_model_at(c->s->reg, i);
    for (size_t j = 0; j < m->n_versions; j++) series(b, name, m, &m->versions[j], c);
  }
  if (only_if_any && !b->oom && b->len == head) {
    b->len = start;
    if (b->p) b->p[start] = '\0';
  }
}

// --- Triton's counters and gauges

typedef enum {
  M_SUCCESS, M_FAILURE, M_COUNT, M_EXEC, M_REQ_US, M_QUEUE_US, M_IN_US, M_INFER_US, M_OUT_US, M_PENDING, M_CUDA_IN, M_PIECES, M_N
} metric;

static const struct {
  const char *name, *type, *help;
} metrics[M_N] = {
    {"nv_inference_request_success", "counter", "Number of successful inference requests, all batch sizes"},
    {"nv_inference_request_failure", "counter", "Number of failed inference requests, all batch sizes"},
    {"nv_inference_count", "counter", "Number of inferences performed (batch elements)"},
    {"nv_inference_exec_count", "counter", "Number of model executions performed (batches)"},
    {"nv_inference_request_duration_us", "counter", "Cumulative inference request duration in microseconds"},
    {"nv_inference_queue_duration_us", "counter", "Cumulative inference queuing duration in microseconds"},
    {"nv_inference_compute_input_duration_us", "counter", "Cumulative compute input duration in microseconds"},
    {"nv_inference_compute_infer_duration_us", "counter", "Cumulative compute inference duration in microseconds"},
    {"nv_inference_compute_output_duration_us", "counter", "Cumulative inference compute output duration in microseconds"},
    {"nv_inference_pending_request_count", "gauge", "Instantaneous number of pending requests awaiting execution"},
    {"inferd_cuda_shm_inputs_total", "counter",
     "Inputs read from CUDA shared memory, by path: device (copied device to device into the batch on the "
     "instance's GPU) or host (copied to host memory first)"},
    {"inferd_grpc_inputs_in_pieces_total", "counter",
     "Inputs of gRPC messages of 64 KiB or more that spanned the slices they arrived in, by path: gathered "
     "(copied from those slices straight into the batch) or joined (copied into one run first)"},
};

static const char *reason_names[SRV_FAIL_N] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};

// A counter's two series by path (inputs read two ways).
static void path_pair(sbuf *b, const char *n, const srv_model *m, const srv_version *v, const char *pa, uint64_t a,
                      const char *pb, uint64_t x) {
  sb_printf(b, "%s{model=\"%s\",version=\"%s\",path=\"%s\"} %llu\n", n, m->name, v->version_str, pa,
            (unsigned long long)a);
  sb_printf(b, "%s{model=\"%s\",version=\"%s\",path=\"%s\"} %llu\n", n, m->name, v->version_str, pb,
            (unsigned long long)x);
}

static void text_series(sbuf *b, const char *n, srv_model *m, srv_version *v, const fam_ctx *c) {
  if (!srv_version_ready(v)) return;
  srv_stats *st = &v->stats;
  uint64_t x = 0;
  switch ((metric)c->k) {
    case M_SUCCESS: x = atomic_load(&st->success.count); break;
    case M_FAILURE:
      for (int r = 0; r < SRV_FAIL_N; r++)
        sb_printf(b, "%s{model=\"%s\",version=\"%s\",reason=\"%s\"} %llu\n", n, m->name, v->version_str,
                  reason_names[r], (unsigned long long)atomic_load(&st->fail_by_reason[r]));
      return;
    case M_CUDA_IN:
      path_pair(b, n, m, v, "device", atomic_load(&st->cuda_in_device), "host", atomic_load(&st->cuda_in_host));
      return;
    case M_PIECES:
      path_pair(b, n, m, v, "gathered", atomic_load(&st->pieces_gathered), "joined", atomic_load(&st->pieces_joined));
      return;
    case M_COUNT: x = atomic_load(&st->inference_count); break;
    case M_EXEC: x = atomic_load(&st->execution_count); break;
    case M_REQ_US: x = (atomic_load(&st->success.ns) + atomic_load(&st->fail.ns)) / 1000; break;
    case M_QUEUE_US: x = atomic_load(&st->queue.ns) / 1000; break;
    case M_IN_US: x = atomic_load(&st->compute_input.ns) / 1000; break;
    case M_INFER_US: x = atomic_load(&st->compute_infer.ns) / 1000; break;
    case M_OUT_US: x = atomic_load(&st->compute_output.ns) / 1000; break;
    case M_PENDING: {
      int64_t p = atomic_load(&st->pending);
      x = p > 0 ? (uint64_t)p : 0;
      break;
    }
    case M_N: break;
  }
  sb_printf(b, "%s{model=\"%s\",version=\"%s\"} %llu\n", n, m->name, v->version_str, (unsigned long long)x);
}

static void metrics_text(srv_server *s, sbuf *b) {
  for (int k = 0; k < M_N; k++)
    family(b, metrics[k].name, metrics[k].type, metrics[k].help, 0, text_series, &(fam_ctx){s, (size_t)k, 0});
}

// --- histograms (Prometheus histogram type, and the dashboard's percentiles)

static prof_hist *get_request(srv_stats *st) { return st->h_request; }
static prof_hist *get_queue(srv_stats *st) { return st->h_queue; }
static prof_hist *get_input(srv_stats *st) { return st->h_input; }
static prof_hist *get_infer(srv_stats *st) { return st->h_infer; }
static prof_hist *get_output(srv_stats *st) { return st->h_output; }

static const struct {
  const char *metric, *key, *help;
  prof_hist *(*get)(srv_stats *st);
} stages[] = {
    {"inferd_request_duration_seconds", "request", "Request duration, server entry to response", get_request},
    {"inferd_queue_duration_seconds", "queue", "Time in the batcher's queue", get_queue},
    {"inferd_compute_input_duration_seconds", "compute_input", "Batch assembly and input preparation", get_input},
    {"inferd_compute_infer_duration_seconds", "compute_infer", "Model execution", get_infer},
    {"inferd_compute_output_duration_seconds", "compute_output", "Output extraction and response packing",
     get_output},
};
#define N_STAGES (sizeof stages / sizeof stages[0])

static const uint64_t latency_le[] = {10,     25,     50,      100,     250,     500,     1000,
                                      2500,   5000,   10000,   25000,   50000,   100000,  250000,
                                      500000, 1000000, 2500000, 5000000, 10000000, 60000000};
#define N_LAT_LE (sizeof latency_le / sizeof latency_le[0])

// One Prometheus histogram series: cumulative buckets, +Inf, sum, count.
// The histogram holds integers (microseconds, rows); scale turns them into
// the exported unit (1e-6: seconds, Prometheus' base unit for time).
static void prom_hist(sbuf *b, const char *name, const srv_model *m, const srv_version *v, const prof_hist *h,
                      const uint64_t *le, size_t n_le, double scale) {
  prof_hist_snap *snap = NULL;
  err e;
  if (prof_hist_snap_create(h, &snap, &e) != 0 || prof_hist_snapshot(h, snap, &e) != 0) {
    prof_hist_snap_destroy(snap);
    return;
  }
  uint64_t counts[64];
  if (n_le > 64) n_le = 64;
  prof_hist_cumulative(snap, le, n_le, counts);
  prof_hist_stats hs;
  prof_hist_summary(snap, &hs);
  for (size_t i = 0; i < n_le; i++)
    sb_printf(b, "%s_bucket{model=\"%s\",version=\"%s\",le=\"%.9g\"} %llu\n", name, m->name, v->version_str,
              (double)le[i] * scale, (unsigned long long)counts[i]);
  sb_printf(b, "%s_bucket{model=\"%s\",version=\"%s\",le=\"+Inf\"} %llu\n", name, m->name, v->version_str,
            (unsigned long long)hs.count);
  sb_printf(b, "%s_sum{model=\"%s\",version=\"%s\"} %.9g\n", name, m->name, v->version_str,
            (double)hs.sum * scale);
  sb_printf(b, "%s_count{model=\"%s\",version=\"%s\"} %llu\n", name, m->name, v->version_str,
            (unsigned long long)hs.count);
  prof_hist_snap_destroy(snap);
}

static void hist_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  if (!srv_version_ready(v)) return;
  if (c->k < N_STAGES) {
    prom_hist(b, name, m, v, stages[c->k].get(&v->stats), latency_le, N_LAT_LE, 1e-6);
    return;
  }
  uint64_t le[32];
  size_t n = 0;
  for (uint64_t x = 1; n < 32; x *= 2) {
    le[n++] = x;
    if (x >= (uint64_t)v->stats.n_batch) break;
  }
  prom_hist(b, name, m, v, v->stats.h_batch, le, n, 1.0);
}

static void metrics_histograms(srv_server *s, sbuf *b) {
  for (size_t k = 0; k <= N_STAGES; k++)
    family(b, k < N_STAGES ? stages[k].metric : "inferd_batch_size", "histogram",
           k < N_STAGES ? stages[k].help : "Rows per model execution", 0, hist_series, &(fam_ctx){s, k, 0});
}

// --- the latency target's choices (parameters latency_target_ms, batcher/lattarget.h)

typedef enum {
  LT_TARGET, LT_GOAL, LT_LAST_ROWS, LT_LAST_WAIT, LT_RATE, LT_BATCHES, LT_EARLY, LT_OBSERVED, LT_PRED, LT_MEAS, LT_N
} lt_metric;

static const struct {
  const char *name, *type, *help;
} lt_metrics[LT_N] = {
    {"inferd_latency_target_seconds", "gauge", "The model's p99 target for queue wait plus compute (latency_target_ms)"},
    {"inferd_latency_target_goal_batch_size", "gauge",
     "Rows the policy last aimed a batch at (what the measured load and compute times call for)"},
    {"inferd_latency_target_last_batch_size", "gauge", "Rows of the last batch the policy sent"},
    {"inferd_latency_target_last_wait_seconds", "gauge", "How long the last batch's oldest request waited in the queue"},
    {"inferd_latency_target_arrival_rate", "gauge", "Arrival rate the policy measures, rows per second"},
    {"inferd_latency_target_batches_total", "counter", "Batches the policy sent"},
    {"inferd_latency_target_early_batches_total", "counter",
     "Batches sent before reaching their goal size because the target would otherwise be missed"},
    {"inferd_latency_target_compute_observed_total", "counter", "Batches whose compute time the policy measured"},
    {"inferd_latency_target_compute_predicted_seconds_total", "counter",
     "Compute time the policy predicted for the measured batches, summed (its high estimate, about p98)"},
    {"inferd_latency_target_compute_measured_seconds_total", "counter",
     "Compute time measured for those batches (dispatch to the executor's release), summed"},
};

static double lt_value(int k, const bat_lt_stats *st) {
  switch (k) {
    case LT_TARGET: return (double)st->target_us * 1e-6;
    case LT_GOAL: return (double)st->goal_rows;
    case LT_LAST_ROWS: return (double)st->last_rows;
    case LT_LAST_WAIT: return (double)st->last_wait_us * 1e-6;
    case LT_RATE: return st->rate_per_s;
    case LT_BATCHES: return (double)st->batches;
    case LT_EARLY: return (double)st->early;
    case LT_OBSERVED: return (double)st->observed;
    case LT_PRED: return st->predicted_us_sum * 1e-6;
    case LT_MEAS: return st->measured_us_sum * 1e-6;
  }
  return 0;
}

static void lt_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  bat_lt_stats st;
  if (!v->model || !srv_sched_latency_stats(c->s->sched, v, &st)) return;
  sb_printf(b, "%s{model=\"%s\",version=\"%s\"} %.9g\n", name, m->name, v->version_str, lt_value((int)c->k, &st));
}

static void metrics_latency_target(srv_server *s, sbuf *b) {
  if (!s->sched) return;
  for (int k = 0; k < LT_N; k++)
    family(b, lt_metrics[k].name, lt_metrics[k].type, lt_metrics[k].help, 1, lt_series, &(fam_ctx){s, (size_t)k, 0});
}

// Per engine instance: GPU busy time measured with CUDA events, recreations
// after CUDA failures, health, graphs and the device allocation counter that
// proves the request path allocates nothing.
typedef struct inst_metric {
  const char *name, *type, *help;
} inst_metric;

enum {
  I_BUSY, I_BATCHES, I_HEALTHY, I_FAILED, I_RECREATE, I_GRAPHS, I_GRAPH_LAUNCH, I_PLAIN_LAUNCH, I_ALLOCS, I_PREPARED,
  I_PREPARE_S, I_LAZY, I_PADDED, I_N
};

static const inst_metric inst_metrics[I_N] = {
    {"inferd_instance_busy_seconds_total", "counter",
     "Device time with a batch of this instance in flight (copies and compute, CUDA events)"},
    {"inferd_instance_batches_total", "counter", "Batches this instance's current engine finished"},
    {"inferd_instance_healthy", "gauge", "0 between a CUDA failure and the instance's recreation, and once it failed for good"},
    {"inferd_instance_failed", "gauge",
     "1 once the instance could not be recreated after a CUDA failure (a sticky error): it never runs again"},
    {"inferd_instance_recreations_total", "counter", "Times the instance was rebuilt after a CUDA failure"},
    {"inferd_instance_cuda_graphs", "gauge", "CUDA graphs captured by the instance's current engine"},
    {"inferd_instance_graph_launches_total", "counter", "Batches launched as a CUDA graph replay"},
    {"inferd_instance_plain_launches_total", "counter", "Batches launched kernel by kernel"},
    {"inferd_instance_device_allocations_total", "counter",
     "cudaMalloc/cudaHostAlloc calls of the instance's current engine (flat while serving)"},
    {"inferd_instance_prepared_batch_sizes", "gauge",
     "Batch sizes the instance prepared before serving (graphs, cuDNN plans, GEMM choices); others run padded"},
    {"inferd_instance_prepare_seconds", "gauge", "Time the instance spent preparing its batch sizes at load"},
    {"inferd_instance_lazy_prepares_total", "counter",
     "Batches that captured a graph, made a cuDNN plan or tuned a GEMM on the request path (should stay 0)"},
    {"inferd_instance_padded_batches_total", "counter", "Batches run padded to the next prepared batch size"},
};

static double inst_value(int k, const eng_instance_stats *st) {
  switch (k) {
    case I_BUSY: return (double)st->busy_ns / 1e9;
    case I_BATCHES: return (double)st->batches;
    case I_HEALTHY: return st->healthy;
    case I_FAILED: return st->failed;
    case I_RECREATE: return (double)st->recreations;
    case I_GRAPHS: return (double)st->graphs;
    case I_GRAPH_LAUNCH: return (double)st->graph_launches;
    case I_PLAIN_LAUNCH: return (double)st->plain_launches;
    case I_PREPARED: return st->prepared_sizes;
    case I_PREPARE_S: return (double)st->prepare_ns / 1e9;
    case I_LAZY: return (double)st->lazy_prepares;
    case I_PADDED: return (double)st->padded_batches;
    default: return (double)st->device_allocs;
  }
}

static void inst_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  if (!v->model) return;  // an ensemble has no instances
  for (int x = 0; x < eng_model_n_instances(v->model); x++) {
    eng_instance_stats st;
    eng_model_instance_stats(v->model, x, &st);
    if (st.device < 0) continue;  // GPU instances only
    sb_printf(b, "%s{model=\"%s\",version=\"%s\",model_instance=\"%d\",gpu=\"%d\"} %.9g\n", name, m->name,
              v->version_str, x, st.device, inst_value((int)c->k, &st));
  }
}

static void metrics_instances(srv_server *s, sbuf *b) {
  for (int k = 0; k < I_N; k++)
    family(b, inst_metrics[k].name, inst_metrics[k].type, inst_metrics[k].help, 1, inst_series,
           &(fam_ctx){s, (size_t)k, 0});
}

// Per model version, every instance (CPU ones too): the batch sizes
// prepared at load and what still happened on the request path
// (engine/batch_sizes.h; issue 32): a lazy prepare there is a batch that
// captured, tuned or made something for its size while clients waited.
static void prepare_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  if (!v->model) return;
  uint64_t x = 0;
  for (int in = 0; in < eng_model_n_instances(v->model); in++) {
    eng_instance_stats st;
    eng_model_instance_stats(v->model, in, &st);
    x += c->k == 0 ? st.lazy_prepares : c->k == 1 ? st.padded_batches : st.padded_rows;
  }
  sb_printf(b, "%s{model=\"%s\",version=\"%s\"} %llu\n", name, m->name, v->version_str, (unsigned long long)x);
}

// the lazy prepares by why (engine/batch_sizes.h eng_lazy_cause): where to look when the total is not 0
static void causes_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  (void)c;
  if (!v->model) return;
  uint64_t x[ENG_LAZY_CAUSES] = {0};
  for (int in = 0; in < eng_model_n_instances(v->model); in++) {
    eng_instance_stats st;
    eng_model_instance_stats(v->model, in, &st);
    for (int k = 0; k < ENG_LAZY_CAUSES; k++) x[k] += st.lazy_by_cause[k];
  }
  for (int k = 0; k < ENG_LAZY_CAUSES; k++)
    sb_printf(b, "%s{model=\"%s\",version=\"%s\",cause=\"%s\"} %llu\n", name, m->name, v->version_str,
              eng_lazy_cause_str((eng_lazy_cause)k), (unsigned long long)x[k]);
}

static void metrics_prepare(srv_server *s, sbuf *b) {
  static const struct {
    const char *name, *help;
  } pm[] = {
      {"inferd_lazy_prepares_total",
       "Batches that prepared their batch size on the request path (a CUDA graph captured, a cuDNN plan made, a "
       "GEMM tuned): 0 once every size is prepared at load or padded to one that is"},
      {"inferd_padded_batches_total", "Batches run padded to the next batch size prepared at load"},
      {"inferd_padded_rows_total", "Rows added to batches by that padding (their results dropped)"},
  };
  for (size_t k = 0; k < sizeof pm / sizeof pm[0]; k++)
    family(b, pm[k].name, "counter", pm[k].help, 0, prepare_series, &(fam_ctx){s, k, 0});
  family(b, "inferd_lazy_prepare_causes_total", "counter",
         "Lazy prepares by cause: graph (a signature never captured), stale_graph (captured again after the slot's "
         "buffers moved), gemm (a GEMM timed), cudnn (a cuDNN plan made); a batch may count under several",
         0, causes_series, &(fam_ctx){s, 0, 0});
}

// Per GPU: Triton's NVML gauges (which perf_analyzer --collect-metrics
// reads), left out where NVML gave no value, and the engine-measured busy
// time and fraction, which also work on a MIG slice.
static void gpu_line(sbuf *b, const char *name, const prof_gpu_info *info, int d, double v) {
  sb_printf(b, "%s{gpu_uuid=\"%s\",gpu=\"%d\"} %.9g\n", name, info->uuid, d, v);
}

static void metrics_gpus(srv_server *s, sbuf *b) {
  int n = prof_gpus_n(s->gpus);
  if (n == 0) return;
  prof_gpu_sample *g = calloc((size_t)n, sizeof *g);
  if (!g) return;
  int64_t now = eng_now_us();
  for (int d = 0; d < n; d++) prof_gpus_sample(s->gpus, d, now, &g[d]);
  static const struct {
    const char *name, *type, *help;
    size_t field;  // the prof_gpu_sample member it shows
  } m[] = {
      {"nv_gpu_utilization", "gauge", "GPU utilization rate [0.0 - 1.0) (NVML)", offsetof(prof_gpu_sample, utilization)},
      {"nv_gpu_memory_total_bytes", "gauge", "GPU total memory, in bytes (NVML)", offsetof(prof_gpu_sample, mem_total)},
      {"nv_gpu_memory_used_bytes", "gauge", "GPU used memory, in bytes (NVML)", offsetof(prof_gpu_sample, mem_used)},
      {"nv_gpu_power_usage", "gauge", "GPU power usage in watts (NVML)", offsetof(prof_gpu_sample, power_w)},
      {"nv_gpu_power_limit", "gauge", "GPU power management limit in watts (NVML)",
       offsetof(prof_gpu_sample, power_limit_w)},
      {"inferd_gpu_busy_seconds_total", "counter",
       "Device time with at least one batch in flight (copies and compute, CUDA events), union over instances",
       offsetof(prof_gpu_sample, busy_s)},
      {"inferd_gpu_busy_fraction", "gauge", "inferd_gpu_busy_seconds_total's rate over the last 5 whole seconds",
       offsetof(prof_gpu_sample, busy_fraction)},
  };
  for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
    int header = 0;
    for (int d = 0; d < n; d++) {
      double v;
      memcpy(&v, (const char *)&g[d] + m[k].field, sizeof v);
      if (v < 0) continue;
      if (!header) sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].type);
      header = 1;
      gpu_line(b, m[k].name, prof_gpus_info(s->gpus, d), d, v);
    }
  }
  free(g);
}

// What the allocator holds (alloc.h): beside the process's RSS, it tells live
// allocations (a leak grows them) from pages kept for reuse.
static void metrics_memory(sbuf *b) {
  srv_alloc_stats st = srv_alloc_stats_read();
  if (st.allocated >= 0)
    sb_printf(b, "# HELP inferd_memory_allocated_bytes Bytes in live heap allocations (jemalloc's stats.allocated, "
                 "else glibc's mallinfo2)\n# TYPE inferd_memory_allocated_bytes gauge\n"
                 "inferd_memory_allocated_bytes %lld\n", st.allocated);
  if (st.resident >= 0)
    sb_printf(b, "# HELP inferd_memory_allocator_resident_bytes Bytes of memory-backed pages the heap allocator "
                 "holds, in use or kept for reuse\n# TYPE inferd_memory_allocator_resident_bytes gauge\n"
                 "inferd_memory_allocator_resident_bytes %lld\n", st.resident);
}

// The generative models' runners (server/core/llm_serve.h), per model and version.
static void llm_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  if (!v->llm) return;
  srv_llm_metrics lm;
  srv_llm_metrics_get(v->llm, &lm);
  const double vals[] = {(double)lm.prompt_tokens, (double)lm.generated_tokens, (double)lm.preemptions,
                         (double)lm.prefix_hit_tokens, (double)lm.blocks_used, (double)lm.blocks_total,
                         (double)lm.running, (double)lm.waiting};
  sb_printf(b, "%s{model=\"%s\",version=\"%s\"} %.17g\n", name, m->name, v->version_str, vals[c->k]);
}

// tokens a second, in the histogram's hundredths
static const uint64_t tps_le[] = {100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000};
#define N_TPS_LE (sizeof tps_le / sizeof tps_le[0])

static void llm_hist_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  if (!v->llm) return;
  srv_llm_metrics lm;
  srv_llm_metrics_get(v->llm, &lm);
  if (c->k == 3) {
    prom_hist(b, name, m, v, lm.tps_x100, tps_le, N_TPS_LE, 0.01);
    return;
  }
  const prof_hist *h[3] = {lm.ttft_us, lm.itl_us, lm.e2e_us};
  prom_hist(b, name, m, v, h[c->k], latency_le, N_LAT_LE, 1e-6);
}

static void metrics_llm(srv_server *s, sbuf *b) {
  static const struct {
    const char *name, *type, *help;
  } fam[] = {
      {"inferd_llm_prompt_tokens_total", "counter", "Prompt tokens of the requests a generative model admitted"},
      {"inferd_llm_generated_tokens_total", "counter", "Tokens a generative model sampled"},
      {"inferd_llm_preemptions_total", "counter",
       "Sequences preempted for want of KV blocks (recomputed later from their tokens)"},
      {"inferd_llm_prefix_cache_hit_tokens_total", "counter", "Prompt tokens whose KV came from the prefix cache"},
      {"inferd_llm_kv_blocks_used", "gauge", "KV cache blocks held by sequences, all runners"},
      {"inferd_llm_kv_blocks_capacity", "gauge", "KV cache blocks in the pools, all runners"},
      {"inferd_llm_running_sequences", "gauge", "Sequences holding KV blocks and stepped every iteration"},
      {"inferd_llm_waiting_sequences", "gauge", "Sequences queued for admission (new or preempted)"},
  };
  int any = 0;
  for (size_t i = 0; i < srv_registry_n_models(s->reg) && !any; i++) any = srv_registry_model_at(s->reg, i)->llm_cfg != NULL;
  if (!any) return;
  for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++)
    family(b, fam[f].name, fam[f].type, fam[f].help, 0, llm_series, &(fam_ctx){s, f, 0});
  // in llm_hist_series' order
  static const char *const hname[4] = {"inferd_llm_time_to_first_token_seconds", "inferd_llm_inter_token_latency_seconds",
                                       "inferd_llm_request_latency_seconds", "inferd_llm_request_tokens_per_second"};
  static const char *const hhelp[4] = {"From a request's arrival to its first token",
                                       "Between one token of a sequence and the next",
                                       "From a request's arrival to its whole answer (answered requests)",
                                       "An answered request's generated tokens over its arrival-to-answer time"};
  for (size_t k = 0; k < 4; k++) family(b, hname[k], "histogram", hhelp[k], 0, llm_hist_series, &(fam_ctx){s, k, 0});
}

// What the gRPC front did to its connections (grpc_front.h).
static void metrics_grpc(srv_server *s, sbuf *b) {
  if (!s->grpc) return;
  sb_printf(b, "# HELP inferd_grpc_connections_ended_total gRPC connections the server ended, by reason "
               "(rapid_reset: the client cancelled most of its calls at once, --grpc-rapid-reset-limit)\n"
               "# TYPE inferd_grpc_connections_ended_total counter\n"
               "inferd_grpc_connections_ended_total{reason=\"rapid_reset\"} %llu\n",
            srv_grpc_connections_ended(s->grpc));
}

// The server-wide budget of inference request bytes in flight (infer.c).
static void metrics_inflight(srv_server *s, sbuf *b) {
  sb_printf(b, "# HELP inferd_inflight_request_bytes Bytes of inference requests admitted and not yet answered "
               "(gRPC, streams, REST)\n# TYPE inferd_inflight_request_bytes gauge\n"
               "inferd_inflight_request_bytes %lld\n"
               "# HELP inferd_inflight_request_bytes_limit --max-inflight-request-bytes (0: no limit)\n"
               "# TYPE inferd_inflight_request_bytes_limit gauge\ninferd_inflight_request_bytes_limit %lld\n"
               "# HELP inferd_inflight_request_rejected_total Inference requests refused because the in-flight "
               "budget was full\n# TYPE inferd_inflight_request_rejected_total counter\n"
               "inferd_inflight_request_rejected_total %lld\n",
            (long long)atomic_load(&s->inflight_bytes), s->max_inflight_bytes,
            (long long)atomic_load(&s->inflight_rejected));
}

// What the HTTP port's limits did (http.h, issue 31); loop thread, as the port.
static void metrics_http(srv_server *s, sbuf *b) {
  if (!s->http) return;
  sb_printf(b, "# HELP inferd_http_connections Connections open on the HTTP port\n"
               "# TYPE inferd_http_connections gauge\ninferd_http_connections %zu\n"
               "# HELP inferd_http_body_bytes_in_flight Bytes of request bodies reserved on the HTTP port "
               "(--http-max-body-bytes-in-flight)\n# TYPE inferd_http_body_bytes_in_flight gauge\n"
               "inferd_http_body_bytes_in_flight %llu\n",
            srv_http_connections(s->http), (unsigned long long)srv_http_body_bytes(s->http));
  static const char *reasons[SRV_HTTP_INCIDENT_N] = {"connection_cap", "accept_error", "header_timeout",
                                                     "slow_body", "body_budget", "idle_evicted"};
  sb_printf(b, "# HELP inferd_http_refused_total Connections and requests the HTTP port's limits refused or "
               "ended, by reason\n# TYPE inferd_http_refused_total counter\n");
  for (int k = 0; k < SRV_HTTP_INCIDENT_N; k++)
    sb_printf(b, "inferd_http_refused_total{reason=\"%s\"} %llu\n", reasons[k],
              (unsigned long long)srv_http_incidents(s->http, (srv_http_incident)k));
}

// Requests and rows per second over the last THROUGHPUT_WINDOW_S whole seconds.
static void throughput_series(sbuf *b, const char *name, srv_model *m, srv_version *v, const fam_ctx *c) {
  if (!srv_version_ready(v)) return;
  prof_window *w = c->k ? &v->stats.win_rows : &v->stats.win_requests;
  sb_printf(b, "%s{model=\"%s\",version=\"%s\"} %.6g\n", name, m->name, v->version_str,
            prof_window_rate(w, c->now, THROUGHPUT_WINDOW_S));
}

static void metrics_throughput(srv_server *s, sbuf *b) {
  int64_t now = eng_now_us();
  static const char *names[2] = {"inferd_throughput_requests_per_second", "inferd_throughput_rows_per_second"};
  for (size_t k = 0; k < 2; k++) {
    char help[128];
    snprintf(help, sizeof help, "Successful %s per second over the last %d whole seconds",
             k ? "rows (batch elements)" : "requests", THROUGHPUT_WINDOW_S);
    family(b, names[k], "gauge", help, 0, throughput_series, &(fam_ctx){s, k, now});
  }
}

// --- /dashboard.json (see server/http/dashboard.html for the reader)

static void json_str(sbuf *b, const char *s) {
  sb_printf(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
    else if (c < 0x20) sb_printf(b, "\\u%04x", c);
    else sb_printf(b, "%c", c);
  }
  sb_printf(b, "\"");
}

static void dashboard_json(srv_server *s, sbuf *b) {
  int64_t now = eng_now_us();
  sb_printf(b, "{\"time_ms\": %llu, \"models\": [", (unsigned long long)srv_wall_ms());
  int first = 1;
  for (size_t i = 0; i < srv_registry_n_models(s->reg); i++) {
    srv_model *m = srv_registry_model_at(s->reg, i);
    for (size_t j = 0; j < m->n_versions; j++) {
      srv_version *v = &m->versions[j];
      if (!srv_version_ready(v)) continue;
      srv_stats *st = &v->stats;
      uint64_t ok = atomic_load(&st->success.count);
      double rps = prof_window_rate(&st->win_requests, now, THROUGHPUT_WINDOW_S);
      double rows_ps = prof_window_rate(&st->win_rows, now, THROUGHPUT_WINDOW_S);
      int64_t pending = atomic_load(&st->pending);
      sb_printf(b, "%s{\"name\": ", first ? "" : ", ");
      first = 0;
      json_str(b, m->name);
      sb_printf(b, ", \"version\": ");
      json_str(b, v->version_str);
      sb_printf(b, ", \"throughput_rps\": %.3f, \"rows_per_s\": %.3f, \"queue_depth\": %lld, \"success\": %llu, \"failure\": %llu",
                rps, rows_ps, (long long)(pending > 0 ? pending : 0), (unsigned long long)ok,
                (unsigned long long)atomic_load(&st->fail.count));
      sb_printf(b, ", \"latency_us\": {");
      for (size_t k = 0; k < N_STAGES; k++) {
        prof_hist *h = stages[k].get(st);
        prof_hist_snap *snap = NULL;
        err e;
        uint64_t p[4] = {0, 0, 0, 0};
        if (prof_hist_snap_create(h, &snap, &e) == 0 && prof_hist_snapshot(h, snap, &e) == 0) {
          prof_hist_stats hs;
          prof_hist_summary(snap, &hs);
          if (hs.count) {
            p[0] = prof_hist_percentile(snap, 50);
            p[1] = prof_hist_percentile(snap, 90);
            p[2] = prof_hist_percentile(snap, 99);
            p[3] = prof_hist_percentile(snap, 99.9);
          }
        }
        prof_hist_snap_destroy(snap);
        sb_printf(b, "%s\"%s\": {\"p50\": %llu, \"p90\": %llu, \"p99\": %llu, \"p999\": %llu}", k ? ", " : "",
                  stages[k].key, (unsigned long long)p[0], (unsigned long long)p[1], (unsigned long long)p[2],
                  (unsigned long long)p[3]);
      }
      sb_printf(b, "}, \"batch_sizes\": [");
      int bf = 1;
      const srv_batch_stat *bs;
      for (int size = 0; (size = srv_stats_batch_next(st, size, &bs)) > 0;) {
        uint64_t c = atomic_load(&bs->count);
        sb_printf(b, "%s[%d, %llu]", bf ? "" : ", ", size, (unsigned long long)c);
        bf = 0;
      }
      sb_printf(b, "]}");
    }
  }
  sb_printf(b, "], \"throughput_window_s\": %d, \"gpus\": [", THROUGHPUT_WINDOW_S);
  for (int d = 0; d < prof_gpus_n(s->gpus); d++) {
    prof_gpu_sample g;
    prof_gpus_sample(s->gpus, d, now, &g);
    const prof_gpu_info *info = prof_gpus_info(s->gpus, d);
    sb_printf(b, "%s{\"index\": %d, \"uuid\": ", d ? ", " : "", d);
    json_str(b, info->uuid);
    sb_printf(b, ", \"name\": ");
    json_str(b, info->name);
    sb_printf(b, ", \"busy_fraction\": %.4f, \"busy_seconds\": %.6f", g.busy_fraction, g.busy_s);
    // NVML's figures where it answered, null otherwise (no driver library, MIG)
    sb_printf(b, ", \"utilization\": ");
    if (g.utilization >= 0) sb_printf(b, "%.2f", g.utilization);
    else sb_printf(b, "null");
    sb_printf(b, ", \"memory_used_bytes\": ");
    if (g.mem_used >= 0) sb_printf(b, "%.0f", g.mem_used);
    else sb_printf(b, "null");
    sb_printf(b, ", \"memory_total_bytes\": ");
    if (g.mem_total >= 0) sb_printf(b, "%.0f", g.mem_total);
    else sb_printf(b, "null");
    sb_printf(b, ", \"power_watts\": ");
    if (g.power_w >= 0) sb_printf(b, "%.1f", g.power_w);
    else sb_printf(b, "null");
    sb_printf(b, "}");
  }
  sb_printf(b, "]}\n");
}

static void text(srv_http_response *resp, int status, const char *body) {
  resp->status = status;
  resp->content_type = "text/plain";
  resp->body = (char *)body;
  resp->len = strlen(body);
  resp->free_body = 0;
}

void srv_http_routes(void *ctx, const srv_http_request *req, srv_http_response *resp) {
  srv_server *s = ctx;
  atomic_fetch_add(&s->http_requests, 1);
  if (s->rest && srv_rest_route(s->rest, req, resp)) return;
  int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
  const char *p = req->path;
  int known = strcmp(p, "/v2/health/live") == 0 || strcmp(p, "/v2/health/ready") == 0 || strcmp(p, "/metrics") == 0 ||
              strcmp(p, "/dashboard") == 0 || strcmp(p, "/dashboard.json") == 0;
  if (!known) return text(resp, 404, "not found\n");
  if (!get) return text(resp, 405, "method not allowed\n");
  if (!s->allow_metrics && strcmp(p, "/metrics") == 0)
    return text(resp, 404, "metrics are disabled (--allow-metrics false)\n");
  if (strcmp(p, "/v2/health/live") == 0) return srv_server_live(s) ? text(resp, 200, "") : text(resp, 503, "");
  if (strcmp(p, "/v2/health/ready") == 0) return srv_server_ready(s) ? text(resp, 200, "") : text(resp, 503, "");
  if (strcmp(p, "/dashboard") == 0) {
    resp->status = 200;
    resp->content_type = "text/html; charset=utf-8";
    resp->body = (char *)prof_dashboard_html;
    resp->len = prof_dashboard_html_len;
    resp->free_body = 0;
    return;
  }
  sbuf b = {0};
  int json = strcmp(p, "/dashboard.json") == 0;
  srv_registry_rdlock(s->reg);  // model control must not free what these read
  if (json) {
    dashboard_json(s, &b);
  } else {
    metrics_text(s, &b);
    metrics_histograms(s, &b);
    metrics_instances(s, &b);
    metrics_latency_target(s, &b);
    metrics_prepare(s, &b);
    metrics_gpus(s, &b);
    metrics_throughput(s, &b);
    metrics_llm(s, &b);
    metrics_grpc(s, &b);
    metrics_inflight(s, &b);
    metrics_http(s, &b);
    metrics_memory(&b);
  }
  srv_registry_rdunlock(s->reg);
  if (b.oom || !b.p) {
    free(b.p);
    return text(resp, 500, "out of memory\n");
  }
  resp->status = 200;
  resp->content_type = json ? "application/json" : "text/plain; version=0.0.4";
  resp->body = b.p;
  resp->len = b.len;
  resp->free_body = 1;
}

void srv_http_metrics_routes(void *ctx, const srv_http_request *req, srv_http_response *resp) {
  if (strcmp(req->path, "/metrics") != 0) {
    srv_server *s = ctx;
    atomic_fetch_add(&s->http_requests, 1);
    return text(resp, 404, "not found (this port serves /metrics only)\n");
  }
  srv_http_routes(ctx, req, resp);
}
