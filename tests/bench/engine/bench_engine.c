// bench_engine.c: per-batch time of inferd's CUDA engine on one ONNX model,
// the engine half of tests/bench/engine/run.sh (bench_torch.py is the other).
//
//   bench_engine --model M.onnx [--precision fp32|tf32|fp16] [--batches 1,8,64]
//                [--iters N] [--warmup N] [--graphs 0|1] [--fuse-attention 0|1] [--merge-qkv 0|1] [--seq N] [--vocab N] [--cpu]
//                [--gemm-autotune 0|1] [--layout auto|nchw|nhwc] [--conv-search timed|heuristic]
//                [--conv-gemm 0|1]
//
// Inputs: FP32 random; INT64/INT32 token ids in [0, vocab) (vocab from the
// embedding table they index, or --vocab) and all-ones attention masks
// (inputs named *mask*); dynamic dims after the batch set to --seq, so a
// BERT exported with dynamic batch and sequence runs at --seq 128.
//
// Each batch goes pinned fp32 input (the slot's staging, where the server's
// batch assembly writes it) -> H2D -> every node -> D2H -> pinned fp32
// output, as a served batch does. Two figures per batch:
//   tool "inferd":      the serving configuration, two stream slots: batch
//                       n+1 is staged and enqueued while batch n runs, each
//                       finished in order; time = wall / iters.
//   tool "inferd_sync": one slot, each batch waited for before the next is
//                       staged (latency of a lone batch, host sync included).
// One JSON object per line on stdout; submit_us is the host's time inside
// eng_cuda_plan_submit per batch (staging, the plan's per-batch decisions,
// the graph launch), which a lone batch waits for before its GPU work;
// of it, pre_us comes before the batch's start event (the plan's per-batch
// setup, stage_us of input staging, node preparation) and launch_us is the
// host time inside cudaGraphLaunch; device_us is the batch's own event time
// (from before the launch to after the outputs' copy).
// --gemm-autotune 0|1 (default 0, as
// the server): cuBLASLt's algorithms timed per GEMM shape at plan create
// (plan_cuda.h), or its first heuristic answer; "0,1" runs both, one after
// the other, in the same process (a side-by-side comparison in one call).
// The JSON carries the plan's tuning counters: shapes timed, the time it
// took, and the sums of one run of every timed shape with the heuristic's
// first answer and with the kept one (gemm_first_us, gemm_best_us).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "engine/cuda/plan_cuda.h"

#define MAX_BATCHES 32

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  static char buf[256];
  snprintf(buf, sizeof buf, "%s", s ? s + 1 : path);
  char *dot = strstr(buf, ".onnx");
  if (dot) *dot = 0;
  return buf;
}

typedef struct inputs {
  size_t n;
  eng_tensor t[8];
} inputs;

// How the inputs are filled: FP32 uniform in [-1, 1); integer token ids
// uniform in [0, vocab) where vocab is the row count of the constant table
// the graph Gathers them from (or --vocab); inputs named *mask* all ones
// (every token real); BOOL all true. Dynamic dims after the batch take seq.
typedef struct fill_opts {
  int seq;    // --seq: value of dynamic non-batch dims (0: none allowed)
  int vocab;  // --vocab: token id range where the graph does not tell (0: ask the graph)
} fill_opts;

// Rows of the constant table input value v indexes through a Gather, or 0.
static int64_t gather_rows(const eng_graph *g, int v) {
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    const eng_node *n = eng_graph_node(g, i);
    if (strcmp(n->op_type, "Gather") != 0 || n->n_in < 2 || n->in[1] != v || n->in[0] < 0) continue;
    const eng_value *t = eng_graph_value(g, (size_t)n->in[0]);
    const eng_attr *ax = eng_node_attr(n, "axis");
    if (t->kind == ENG_VALUE_CONST && t->ndims >= 1 && (!ax || ax->i == 0)) return t->dims[0];
  }
  return 0;
}

static unsigned next_rand(unsigned *seed) {
  *seed = *seed * 1103515245u + 12345u;
  return (*seed >> 8) & 0xffff;
}

static int make_inputs(const eng_graph *g, int rows, const fill_opts *fo, inputs *in) {
  in->n = eng_graph_n_inputs(g);
  if (in->n > 8) return -1;
  unsigned seed = 12345;
  for (size_t i = 0; i < in->n; i++) {
    const eng_io *io = eng_graph_input(g, i);
    eng_tensor *t = &in->t[i];
    memset(t, 0, sizeof *t);
    t->dt = io->dt;
    t->ndims = io->ndims;
    memcpy(t->dims, io->dims, sizeof t->dims);
    if (t->ndims < 1) return -1;
    t->dims[0] = rows;
    for (int d = 1; d < t->ndims; d++)
      if (t->dims[d] < 0) {
        if (fo->seq <= 0) {
          fprintf(stderr, "bench_engine: input '%s' has a dynamic dim %d: give --seq\n", io->name, d);
          return -1;
        }
        t->dims[d] = fo->seq;
      }
    size_t n = (size_t)eng_numel(t->ndims, t->dims), es = dtype_size(t->dt);
    if (es == 0) return -1;
    void *x = malloc(n * es + 8);
    if (!x) return -1;
    t->data = x;
    t->bytes = n * es;
    int mask = strstr(io->name, "mask") != NULL;
    if (t->dt == DT_FP32) {
      for (size_t k = 0; k < n; k++) ((float *)x)[k] = (float)next_rand(&seed) / 65536.0f * 2.0f - 1.0f;
    } else if (t->dt == DT_BOOL) {
      memset(x, 1, n);
    } else if (t->dt == DT_INT64 || t->dt == DT_INT32) {
      int64_t vocab = mask ? 1 : gather_rows(g, eng_graph_input_value(g, i));
      if (!mask && fo->vocab > 0) vocab = fo->vocab;
      if (vocab <= 0) {
        fprintf(stderr, "bench_engine: input '%s': no Gather tells its range: give --vocab\n", io->name);
        return -1;
      }
      for (size_t k = 0; k < n; k++) {
        int64_t id = mask ? 1 : (int64_t)(((uint64_t)next_rand(&seed) << 16 | next_rand(&seed)) % (uint64_t)vocab);
        if (t->dt == DT_INT64) ((int64_t *)x)[k] = id;
        else ((int32_t *)x)[k] = (int32_t)id;
      }
    } else {
      fprintf(stderr, "bench_engine: input '%s': unsupported type\n", io->name);
      return -1;
    }
  }
  return 0;
}

static void free_inputs(inputs *in) {
  for (size_t i = 0; i < in->n; i++) free(in->t[i].data);
}

static int fail(const char *what, const err *e) {
  if (e) fprintf(stderr, "bench_engine: %s: %s\n", what, e->msg);
  else fprintf(stderr, "bench_engine: %s\n", what);
  return 1;
}

// Mean seconds per batch over iters, with `slots` batches kept in flight.
// The inputs sit in each slot's pinned staging (as the server's batch
// assembly leaves them, and as torch's pinned input tensor does).
// *all_staged: 1 when every input sat in pinned staging; 0 when the model's
// shapes were not fixed at create (a dynamic sequence) and submit copied
// them from pageable memory into the slot's pinned pool, as the server does.
// *device_s: the mean of the batches' own device time (the plan's events,
// from before the launch to after the outputs' copy), so a lone batch's
// host share is per_batch - device_s.
static int time_batches(eng_cuda_plan *p, int slots, const inputs *host, size_t n_out, int warmup,
                        int iters, double *per_batch, double *submit_s, double *device_s, int *all_staged,
                        err *e) {
  eng_tensor out[8];
  int pending[4] = {0};
  inputs staged[4];
  *all_staged = 1;
  for (int k = 0; k < slots; k++) {
    staged[k] = *host;
    for (size_t i = 0; i < host->n; i++) {
      size_t cap = 0;
      void *dst = eng_cuda_plan_stage(p, k, i, &cap);
      if (dst && cap >= host->t[i].bytes) {
        memcpy(dst, host->t[i].data, host->t[i].bytes);
        staged[k].t[i].data = dst;
      } else {
        *all_staged = 0;
      }
    }
  }
  double t0 = 0, in_submit = 0;
  uint64_t dev_ns = 0, one_ns = 0;
  for (int i = 0; i < warmup + iters; i++) {
    if (i == warmup) {
      for (int k = 0; k < slots; k++)
        if (pending[k] && eng_cuda_plan_finish(p, k, out, n_out, NULL, e)) return 1;
      memset(pending, 0, sizeof pending);
      t0 = now_s();
    }
    int k = i % slots;
    if (pending[k] && eng_cuda_plan_finish(p, k, out, n_out, &one_ns, e)) return 1;
    if (pending[k] && i > warmup + slots - 1) dev_ns += one_ns;  // batches submitted after t0
    double ts = now_s();
    if (eng_cuda_plan_submit(p, k, staged[k].t, staged[k].n, e)) return 1;
    if (i >= warmup) in_submit += now_s() - ts;
    pending[k] = 1;
  }
  for (int j = 0; j < slots; j++) {  // in submission order
    int k = (warmup + iters + j) % slots;
    if (pending[k] && eng_cuda_plan_finish(p, k, out, n_out, &one_ns, e)) return 1;
    if (pending[k]) dev_ns += one_ns;
  }
  *per_batch = (now_s() - t0) / iters;
  *submit_s = in_submit / iters;
  *device_s = (double)dev_ns / 1e9 / iters;
  return 0;
}

// --cpu: the CPU plan (OpenBLAS, oneDNN, our C kernels), one batch after
// another on this thread (and the libraries' own threads), as a CPU
// instance runs them; tool "inferd_cpu".
static int bench_cpu(const eng_graph *g, const char *model, const int *batches, int n_batches,
                     int iters, int warmup, const fill_opts *fo) {
  int max_b = 1;
  for (int i = 0; i < n_batches; i++)
    if (batches[i] > max_b) max_b = batches[i];
  err e = {0};
  eng_plan *p = NULL;
  if (eng_plan_create(g, max_b, &p, &e)) return fail("cpu plan", &e);
  eng_tensor out[8];
  size_t n_out = eng_graph_n_outputs(g);
  int rc = 0;
  for (int bi = 0; bi < n_batches && !rc; bi++) {
    inputs in = {0};
    if (make_inputs(g, batches[bi], fo, &in)) {
      rc = fail("inputs", NULL);
      break;
    }
    for (int i = 0; i < 3 && !rc; i++)
      if (eng_plan_run(p, in.t, in.n, out, n_out, &e)) rc = fail("run", &e);
    double t0 = now_s();
    int it = iters;
    if (!rc && it <= 0) {  // about 1 s per cell
      if (eng_plan_run(p, in.t, in.n, out, n_out, &e)) rc = fail("run", &e);
      double one = now_s() - t0;
      it = one > 0 ? (int)(1.0 / one) : 10;
      if (it < 5) it = 5;
      if (it > 10000) it = 10000;
    }
    for (int i = 0; i < warmup && !rc && iters > 0; i++)
      if (eng_plan_run(p, in.t, in.n, out, n_out, &e)) rc = fail("run", &e);
    t0 = now_s();
    for (int i = 0; i < it && !rc; i++)
      if (eng_plan_run(p, in.t, in.n, out, n_out, &e)) rc = fail("run", &e);
    if (!rc)
      printf("{\"tool\":\"inferd_cpu\",\"model\":\"%s\",\"precision\":\"fp32\",\"batch\":%d,"
             "\"seq\":%d,\"us_per_batch\":%.3f,\"iters\":%d}\n",
             base_name(model), batches[bi], fo->seq, (now_s() - t0) / it * 1e6, it);
    fflush(stdout);
    free_inputs(&in);
  }
  eng_plan_destroy(p);
  return rc;
}

static eng_cuda_plan_stats plan_stats(const eng_cuda_plan *p) {
  eng_cuda_plan_stats st;
  eng_cuda_plan_stats_get(p, &st);
  return st;
}

int main(int argc, char **argv) {
  const char *model = NULL, *prec_s = "fp32";
  int batches[MAX_BATCHES] = {1, 8, 64, 256, 1024}, n_batches = 5, iters = 0, warmup = 20, graphs = 1;
  eng_graph_opts gopts = {0};
  int cpu = 0, conv_timed = 0, conv_gemm = 1, gemm_clusters = 1;
  double tune_min_flops = 0;  // --gemm-tune-min-flops
  int tune_modes[2] = {0, 1}, n_tune = 1;  // --gemm-autotune: the values to run, in order
  fill_opts fo = {0, 0};
  eng_cuda_layout layout = ENG_CUDA_LAYOUT_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--cpu")) {
      cpu = 1;
      continue;
    }
    if (!v) return fail("missing value", NULL);
    if (!strcmp(a, "--model")) model = v;
    else if (!strcmp(a, "--precision")) prec_s = v;
    else if (!strcmp(a, "--iters")) iters = atoi(v);
    else if (!strcmp(a, "--warmup")) warmup = atoi(v);
    else if (!strcmp(a, "--graphs")) graphs = atoi(v);
    else if (!strcmp(a, "--seq")) fo.seq = atoi(v);
    else if (!strcmp(a, "--fuse-attention")) gopts.no_fuse_attention = atoi(v) == 0;  // 0: unfused
    else if (!strcmp(a, "--merge-qkv")) gopts.no_merge_qkv = atoi(v) == 0;  // 0: three projections
    else if (!strcmp(a, "--vocab")) fo.vocab = atoi(v);
    else if (!strcmp(a, "--layout"))  // auto | nchw | nhwc (eng_cuda_layout)
      layout = !strcmp(v, "nhwc") ? ENG_CUDA_LAYOUT_NHWC : !strcmp(v, "nchw") ? ENG_CUDA_LAYOUT_NCHW : ENG_CUDA_LAYOUT_AUTO;
    else if (!strcmp(a, "--conv-search"))  // timed | heuristic (cuDNN algorithm choice)
      conv_timed = !strcmp(v, "timed");
    else if (!strcmp(a, "--conv-gemm"))  // 1 | 0: NHWC 1x1 stride-1 Convs on cuBLASLt | cuDNN
      conv_gemm = atoi(v) != 0;
    else if (!strcmp(a, "--gemm-clusters"))  // 0: cuBLASLt algorithms without thread-block clusters only
      gemm_clusters = atoi(v) != 0;
    else if (!strcmp(a, "--gemm-tune-min-flops"))  // products under it keep the heuristic's pick (0: 2^24)
      tune_min_flops = atof(v);
    else if (!strcmp(a, "--gemm-autotune")) {  // 0 | 1 | 0,1 | 1,0
      n_tune = 0;
      for (const char *c = v; *c && n_tune < 2; c++)
        if (*c == '0' || *c == '1') tune_modes[n_tune++] = *c == '1';
      if (!n_tune) return fail("--gemm-autotune takes 0, 1 or both (0,1)", NULL);
    }
    else if (!strcmp(a, "--batches")) {
      n_batches = 0;
      char buf[512];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *t = strtok(buf, ","); t && n_batches < MAX_BATCHES; t = strtok(NULL, ","))
        batches[n_batches++] = atoi(t);
    } else {
      fprintf(stderr, "usage: bench_engine --model M.onnx [--precision fp32|tf32|fp16] [--batches 1,8,64] "
                      "[--iters N] [--warmup N] [--graphs 0|1] [--fuse-attention 0|1] [--merge-qkv 0|1] [--layout auto|nchw|nhwc] "
                      "[--conv-search timed|heuristic] [--conv-gemm 0|1] [--gemm-autotune 0|1|0,1] [--gemm-clusters 0|1] [--seq N] [--vocab N] [--cpu]\n");
      return 2;
    }
    i++;
  }
  if (!model) return fail("--model is required", NULL);
  eng_precision prec;
  if (eng_precision_parse(prec_s, &prec)) return fail("unknown precision", NULL);
  int max_b = 1;
  for (int i = 0; i < n_batches; i++)
    if (batches[i] > max_b) max_b = batches[i];
  err e = {0};
  eng_graph *g = NULL;
  if (eng_graph_load_opts(model, &gopts, &g, &e)) return fail("load", &e);
  if (cpu) {
    int crc = bench_cpu(g, model, batches, n_batches, iters, warmup, &fo);
    eng_graph_destroy(g);
    return crc;
  }
  size_t n_out = eng_graph_n_outputs(g);
  int rc = 0;
  for (int run = 0; run < 2 * n_tune && !rc; run++) {
    int mode = run % 2, tune = tune_modes[run / 2];
    int slots = mode == 0 ? 2 : 1;
    eng_cuda_opts o = {.precision = prec, .n_slots = slots, .no_graphs = !graphs, .graph_cap = 64,
                       .warm = batches, .n_warm = (size_t)n_batches, .layout = layout,
                       .conv_timed = conv_timed, .no_gemm_autotune = !tune, .no_conv_gemm = !conv_gemm,
                       .no_gemm_clusters = !gemm_clusters,
                       .gemm_tune_min_flops = tune_min_flops};
    eng_cuda_plan *p = NULL;
    double t_create = now_s();
    if (eng_cuda_plan_create(g, max_b, 0, &o, &p, &e)) {
      rc = fail("plan", &e);
      break;
    }
    t_create = now_s() - t_create;
    for (int bi = 0; bi < n_batches && !rc; bi++) {
      int staged = 0;
      inputs in = {0};
      if (make_inputs(g, batches[bi], &fo, &in)) {
        rc = fail("inputs", NULL);
        break;
      }
      // about 0.5 s of work per cell unless --iters says otherwise
      int it = iters;
      if (it <= 0) {
        double one = 0, sub = 0, dev = 0;
        if (time_batches(p, slots, &in, n_out, 3, 10, &one, &sub, &dev, &staged, &e)) rc = fail("run", &e);
        it = one > 0 ? (int)(0.5 / one) : 100;
        if (it < 20) it = 20;
        if (it > 20000) it = 20000;
      }
      double per = 0, submit = 0, dev = 0;
      eng_cuda_plan_stats ps0 = plan_stats(p);
      if (!rc && time_batches(p, slots, &in, n_out, warmup, it, &per, &submit, &dev, &staged, &e)) rc = fail("run", &e);
      eng_cuda_plan_stats ps = plan_stats(p);
      uint64_t launches = ps.graph_launches - ps0.graph_launches;
      double launch_us = launches ? (double)(ps.launch_ns - ps0.launch_ns) / 1e3 / (double)launches : 0;
      uint64_t subs = launches + ps.plain_launches - ps0.plain_launches;  // one launch a submit
      double pre_us = subs ? (double)(ps.pre_ns - ps0.pre_ns) / 1e3 / (double)subs : 0;
      double stage_us = subs ? (double)(ps.stage_ns - ps0.stage_ns) / 1e3 / (double)subs : 0;
      if (!rc)
        printf("{\"tool\":\"%s\",\"model\":\"%s\",\"precision\":\"%s\",\"batch\":%d,\"us_per_batch\":%.3f,"
               "\"graphs\":%d,\"iters\":%d,\"slots\":%d,\"layout\":\"%s\",\"conv_search\":\"%s\","
               "\"nhwc_nodes\":%llu,\"gemm_convs\":%llu,\"seq\":%d,\"staged\":%s,\"fuse_attention\":%s,"
               "\"merge_qkv\":%s,\"conv_gemm\":%d,\"gemm_autotune\":%d,\"gemm_tune_min_flops\":%g,\"gemm_tuned\":%llu,\"gemm_tune_improved\":%llu,\"gemm_tune_ms\":%.1f,"
               "\"gemm_tune_passes\":%llu,\"gemm_first_us\":%.2f,\"gemm_best_us\":%.2f,\"create_ms\":%.1f,"
               "\"submit_us\":%.2f,\"launch_us\":%.2f,\"pre_us\":%.2f,\"stage_us\":%.2f,\"device_us\":%.2f,"
               "\"timed_layouts\":%d,\"timed_nhwc\":%d}\n",
               slots == 2 ? "inferd" : "inferd_sync", base_name(model), prec_s, batches[bi], per * 1e6,
               graphs, it, slots, layout == ENG_CUDA_LAYOUT_NHWC ? "nhwc" : layout == ENG_CUDA_LAYOUT_NCHW ? "nchw" : "auto",
               conv_timed ? "timed" : "heuristic", (unsigned long long)ps.nhwc_nodes,
               (unsigned long long)ps.gemm_convs, fo.seq,
               staged ? "true" : "false", gopts.no_fuse_attention ? "false" : "true",
               gopts.no_merge_qkv ? "false" : "true", conv_gemm, tune, tune_min_flops,
               (unsigned long long)ps.gemm_tuned, (unsigned long long)ps.gemm_tune_improved,
               (double)ps.gemm_tune_ns / 1e6, (unsigned long long)ps.gemm_tune_passes,
               (double)ps.gemm_first_ns / 1e3, (double)ps.gemm_best_ns / 1e3, t_create * 1e3, submit * 1e6, launch_us, pre_us, stage_us, dev * 1e6,
               ps.timed_layouts, ps.timed_nhwc);
      fflush(stdout);
      free_inputs(&in);
    }
    eng_cuda_plan_destroy(p);
  }
  eng_graph_destroy(g);
  return rc;
}
