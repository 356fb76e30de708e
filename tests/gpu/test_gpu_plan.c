// tests/gpu/test_gpu_plan.c, main() of the test_gpu_plan binary: the CUDA
// plan (engine/cuda/plan_cuda.c) against the CPU plan (engine/cpu/plan.c) on
// the models tests/unit/engine/gen_test_models.py writes: the same random
// inputs for every batch size 1..max_batch (or the declared shapes for
// fixed-shape models), outputs compared element by element; two
// GPU plans of one graph on two threads at once; no real allocation across
// 100 runs; a larger shape re-plans, grows and is counted; bad inputs are
// refused and leave the plan usable; the conv family (cuDNN, ConvTranspose
// included) fuses its epilogues, runs NHWC where the layout pass says so and
// allocates nothing once every batch size is warm, and runs its 1x1 Convs on
// 1x1 inputs as cuBLASLt GEMMs (counted); what the CUDA plan has no
// path for (DFT, LSTM, ScatterND, Einsum, a Pad value computed from the
// data) runs on the host inside it, named and counted (host fallback); plans sharing a store keep one copy of the weights per device
// and precision (packed NHWC weights included).
//
// Error measure: whole graphs mix GEMMs, reductions and transcendental
// functions whose summation order and ulp differ between the CPU and the
// GPU, so an element's error is scaled by the magnitude of its output
// tensor as well as its own, a stand-in for the magnitude of the terms
// that formed it (cancellation makes small results relatively inexact):
//   |gpu - cpu| <= rtol * (|cpu| + mean |cpu| over the tensor)
// with rtol = 1e-5 for FP32/FP64, 1e-3 for FP16 outputs and for bn_cast's
// FP32 output that went through an FP16 round trip (one ulp of FP16 is
// 2^-10 relative, and a last-bit difference before rounding may flip it).
// Integer outputs must match exactly.
//
// Models: argv[1], else $INFERD_GPU_PLAN_MODELS, else the directory ctest's
// fixture writes, else .devrun/gpu_plan_models (the GPU machine's bundle).
// Without a device: checks that create refuses, prints SKIP and exits 77.
//
// This file: main() and the case-file runner (every model of ort_cases.txt,
// every batch size, against the CPU plan; then through every plan mode:
// graphs, two slots, FP16, TF32, FP32 NHWC). The other parts of the binary:
// test_gpu_plan_run.c (allocation, threads, refusals, faults, shared
// weights), test_gpu_plan_ops.c (the conv family, the GEMM routes); shared
// pieces in test_gpu_plan_util.c.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cuda_runtime_api.h>

#include "test_gpu_plan_util.h"

#ifndef INFERD_GPU_PLAN_MODELS
#define INFERD_GPU_PLAN_MODELS ""
#endif

// --- every model, every batch size

static int n_models;

// Models test_models must have compared (the generated set has 14 and more).
static int min_models = 14;
// INFERD_GPU_PLAN_CASES_ONLY: the folder's own FP32 bounds (ort_cases.txt) also hold between the
// plans (deep exported networks drift further than the unit models' 1e-5)
static int cases_only;

static void test_models(void) {
  char path[1024], name[128];
  double rtol_file;
  snprintf(path, sizeof path, "%s/ort_cases.txt", models_dir);
  FILE *f = fopen(path, "r");
  if (!f) fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
  CHECK(f != NULL);
  if (!f) return;
  char line[256];
  // "name rtol [low-precision rtol]" per line (test_modes reads the third column)
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "%127s %lf", name, &rtol_file) != 2) continue;
    eng_graph *g = load_model(name);
    if (!g) continue;
    int mb = batch_of(g);
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    CHECK_EQ_INT(eng_plan_create(g, mb, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, mb, 0, NULL, &gp, &e);
    if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (cp && gp) {
      double worst = 0;
      for (int b = mb > 0 ? 1 : 0; b <= mb; b++) {
        io_set in = {0};
        char label[32];
        snprintf(label, sizeof label, "batch %d", b);
        make_inputs(g, name, b, 0, &in);
        double w = run_both(name, g, cp, gp, &in, label, cases_only ? rtol_file : 0);
        if (w > worst) worst = w;
        io_free(&in);
      }
      printf("%-16s max_batch %d: worst scaled error %.3g, device arena %zu bytes\n", name, mb,
             worst, eng_cuda_plan_arena_bytes(gp));
      n_models++;
    }
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
    eng_graph_destroy(g);
  }
  fclose(f);
  CHECK(n_models >= min_models);
}

// --- precisions, graphs and slots on every model and batch size

static int same_bits(const io_set *a, const eng_tensor *b, size_t n) {
  for (size_t j = 0; j < n; j++)
    if (a->t[j].bytes != b[j].bytes || (b[j].bytes && memcmp(a->t[j].data, b[j].data, b[j].bytes) != 0))
      return 0;
  return 1;
}

static void test_modes(void) {
  char path[1024], name[128];
  double rtol_file, rtol_low;
  snprintf(path, sizeof path, "%s/ort_cases.txt", models_dir);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  if (!f) return;
  int models = 0;
  uint64_t graph_launches = 0;
  char line[256];
  // "name rtol [low-precision rtol]": the third column widens FP16/TF32's bound for one model
  while (fgets(line, sizeof line, f)) {
    int got = sscanf(line, "%127s %lf %lf", name, &rtol_file, &rtol_low);
    if (got < 2) continue;
    if (got < 3 || rtol_low < low_rtol) rtol_low = low_rtol;
    double r32 = out_rtol(name, 0, DT_FP32);
    if (cases_only && rtol_file > r32) r32 = rtol_file;
    eng_graph *g = load_model(name);
    if (!g) continue;
    int mb = batch_of(g);
    size_t n_out = eng_graph_n_outputs(g);
    eng_plan *cp = NULL;
    eng_cuda_plan *plain = NULL, *graphs = NULL, *half = NULL, *tf32 = NULL, *nhwc = NULL;
    err e = {0};
    int warm[] = {1, MAXB};
    // plain and graph plans are held to the same bits: with GEMM autotuning each plan would time
    // its own choice (the noise may pick differently), so both keep cuBLASLt's first answer; the
    // other plans tune (the default) and are held to their tolerances
    // and both NCHW: an FP32 plan left to choose times both layouts per warmed batch size
    // (test_conv's flip pass checks that), which would be another sum order again
    eng_cuda_opts o_plain = {.no_graphs = 1, .n_slots = 1, .no_gemm_autotune = 1, .layout = ENG_CUDA_LAYOUT_NCHW};
    eng_cuda_opts o_graph = {.n_slots = 2, .warm = warm, .n_warm = 2, .no_gemm_autotune = 1,
                             .layout = ENG_CUDA_LAYOUT_NCHW};
    eng_cuda_opts o_half = {.precision = ENG_PREC_FP16};
    eng_cuda_opts o_tf32 = {.precision = ENG_PREC_TF32};
    // FP32 on NHWC activations (the FP16 and TF32 plans' layout around convolutions), held
    // to FP32's tolerance: the layout pass itself must not lose anything
    eng_cuda_opts o_nhwc = {.layout = ENG_CUDA_LAYOUT_NHWC};
    CHECK_EQ_INT(eng_plan_create(g, mb, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, mb, 0, &o_plain, &plain, &e);
    if (!rc) rc = eng_cuda_plan_create(g, mb, 0, &o_graph, &graphs, &e);
    if (!rc) rc = eng_cuda_plan_create(g, mb, 0, &o_half, &half, &e);
    if (!rc) rc = eng_cuda_plan_create(g, mb, 0, &o_tf32, &tf32, &e);
    if (!rc) rc = eng_cuda_plan_create(g, mb, 0, &o_nhwc, &nhwc, &e);
    if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (!rc && cp) {
      double w_half = 0, w_tf32 = 0, w_pipe = 0, w_nhwc = 0;
      int identical = 1, broke = 0;
// a failed run leaves its outputs undefined: say why, count it, drop this model
#define RUN_OR_DROP(call, label)                                                \
  if ((rc = (call)) != 0) {                                                     \
    fprintf(stderr, "%s batch %d: %s run: %s\n", name, b, label, e.msg);        \
    CHECK_EQ_INT(rc, 0);                                                        \
    io_free(&in);                                                               \
    io_free(&in2);                                                              \
    io_free(&ref);                                                              \
    io_free(&ref2);                                                             \
    io_free(&base);                                                             \
    broke = 1;                                                                  \
    break;                                                                      \
  }
      for (int b = mb > 0 ? 1 : 0; b <= mb; b++) {
        io_set in = {0}, in2 = {0}, ref = {0}, ref2 = {0}, base = {0};
        char what[160];
        make_inputs(g, name, b, 0, &in);
        int b2 = mb > 0 ? 1 + (b % mb) : 0;  // another batch size for the second slot
        make_inputs(g, name, b2, 0, &in2);
        eng_tensor co[MAX_IO], go[MAX_IO], go2[MAX_IO];
        RUN_OR_DROP(eng_plan_run(cp, in.t, in.n, co, n_out, &e), "cpu");
        copy_outputs(co, n_out, &ref);
        RUN_OR_DROP(eng_plan_run(cp, in2.t, in2.n, co, n_out, &e), "cpu");
        copy_outputs(co, n_out, &ref2);
        // plain launches, then the graph plan twice (capture, replay): the same bits
        RUN_OR_DROP(eng_cuda_plan_run(plain, in.t, in.n, go, n_out, &e), "plain");
        copy_outputs(go, n_out, &base);
        for (int rep = 0; rep < 2 && !rc; rep++) {
          rc = eng_cuda_plan_run(graphs, in.t, in.n, go, n_out, &e);
          if (rc) fprintf(stderr, "%s batch %d: graph run: %s\n", name, b, e.msg);
          CHECK_EQ_INT(rc, 0);
          if (!rc && !same_bits(&base, go, n_out)) {
            identical = 0;
            fprintf(stderr, "%s batch %d: graph replay %d differs from plain launches\n", name, b, rep);
          }
        }
        RUN_OR_DROP(rc, "graph");
        // two batches in flight on two slots, finished in order
        RUN_OR_DROP(eng_cuda_plan_submit(graphs, 0, in.t, in.n, &e), "slot 0 submit");
        rc = eng_cuda_plan_submit(graphs, 1, in2.t, in2.n, &e);
        if (rc) (void)eng_cuda_plan_finish(graphs, 0, go, n_out, NULL, &e);  // drain slot 0 first
        RUN_OR_DROP(rc, "slot 1 submit");
        RUN_OR_DROP(eng_cuda_plan_finish(graphs, 0, go, n_out, NULL, &e), "slot 0 finish");
        RUN_OR_DROP(eng_cuda_plan_finish(graphs, 1, go2, n_out, NULL, &e), "slot 1 finish");
        snprintf(what, sizeof what, "%s batch %d slot 0", name, b);
        w_pipe = max_worst(w_pipe, compare_set(what, &ref, go, r32));
        snprintf(what, sizeof what, "%s batch %d slot 1", name, b2);
        w_pipe = max_worst(w_pipe, compare_set(what, &ref2, go2, r32));
        // reduced precisions within 1e-2 (INFERD_GPU_PLAN_LOW_RTOL for deep networks: 60 FP16
        // layers of random weights drift further than one block does)
        RUN_OR_DROP(eng_cuda_plan_run(half, in.t, in.n, go, n_out, &e), "fp16");
        snprintf(what, sizeof what, "%s batch %d fp16", name, b);
        w_half = max_worst(w_half, compare_set(what, &ref, go, rtol_low));
        RUN_OR_DROP(eng_cuda_plan_run(tf32, in.t, in.n, go, n_out, &e), "tf32");
        snprintf(what, sizeof what, "%s batch %d tf32", name, b);
        w_tf32 = max_worst(w_tf32, compare_set(what, &ref, go, rtol_low));
        RUN_OR_DROP(eng_cuda_plan_run(nhwc, in.t, in.n, go, n_out, &e), "nhwc");
        snprintf(what, sizeof what, "%s batch %d fp32 nhwc", name, b);
        w_nhwc = max_worst(w_nhwc, compare_set(what, &ref, go, r32));
        io_free(&in);
        io_free(&in2);
        io_free(&ref);
        io_free(&ref2);
        io_free(&base);
      }
#undef RUN_OR_DROP
      if (broke) goto next_model;
      CHECK(identical);
      eng_cuda_plan_stats st;
      eng_cuda_plan_stats_get(graphs, &st);
      CHECK(st.graphs_captured >= 1 || st.graphs_disabled);
      graph_launches += st.graph_launches;
      eng_cuda_plan_stats ps;
      eng_cuda_plan_stats_get(plain, &ps);
      CHECK_EQ_INT(ps.graphs_captured, 0);
      CHECK_EQ_INT(ps.nhwc_nodes, 0);  // strict FP32 keeps NCHW
      eng_cuda_plan_stats ns;
      eng_cuda_plan_stats_get(nhwc, &ns);
      printf("%-16s graphs %llu captured, %llu replays, identical to plain: %s; two slots worst %.3g; "
             "fp16 worst %.3g; tf32 worst %.3g; fp32 nhwc worst %.3g (%llu nodes NHWC, %llu "
             "transposes)%s\n",
             name, (unsigned long long)st.graphs_captured, (unsigned long long)st.graph_launches,
             identical ? "yes" : "NO", w_pipe, w_half, w_tf32, w_nhwc, (unsigned long long)ns.nhwc_nodes,
             (unsigned long long)ns.relayouts, st.graphs_disabled ? " (graphs disabled)" : "");
      models++;
    }
  next_model:
    eng_cuda_plan_destroy(plain);
    eng_cuda_plan_destroy(graphs);
    eng_cuda_plan_destroy(half);
    eng_cuda_plan_destroy(tf32);
    eng_cuda_plan_destroy(nhwc);
    eng_plan_destroy(cp);
    eng_graph_destroy(g);
  }
  fclose(f);
  CHECK(models >= min_models);
  CHECK(graph_launches > 0);
}

// --- main

static int is_dir_with_cases(const char *d) {
  char p[1024];
  struct stat st;
  snprintf(p, sizeof p, "%s/ort_cases.txt", d);
  return d && *d && stat(p, &st) == 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);  // lines stay whole beside stderr's in one log
  const char *env = getenv("INFERD_GPU_PLAN_MODELS");
  if (argc > 1) models_dir = argv[1];
  else if (env && *env) models_dir = env;
  else if (is_dir_with_cases(INFERD_GPU_PLAN_MODELS)) models_dir = INFERD_GPU_PLAN_MODELS;
  else models_dir = ".devrun/gpu_plan_models";

  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n == 0) {
    // host-side contract first: create refuses cleanly where no device answers
    eng_graph *g = is_dir_with_cases(models_dir) ? load_model("mlp_raw") : NULL;
    if (g) {
      eng_cuda_plan *gp = (eng_cuda_plan *)1;
      err e = {0};
      CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, NULL, &gp, &e), ERR_UNAVAILABLE);
      CHECK(gp == NULL);
      CHECK_CONTAINS(e.msg, "not available");
      eng_graph_destroy(g);
    }
    if (check_failures_) return 1;
    printf("SKIP: no CUDA device (%s)\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "none visible");
    return 77;
  }
  if (!is_dir_with_cases(models_dir)) {
    fprintf(stderr, "no models in '%s' (run tests/unit/engine/gen_test_models.py DIR)\n",
            models_dir);
    return 1;
  }
  // INFERD_GPU_PLAN_CASES_ONLY=1: only the per-case checks (every model of ort_cases.txt through
  // every plan mode against the CPU plan), for a folder of other models (the exported zoo)
  const char *only = getenv("INFERD_GPU_PLAN_CASES_ONLY");
  const char *low = getenv("INFERD_GPU_PLAN_LOW_RTOL");
  if (low && *low) low_rtol = atof(low);
  if (only && *only == '1') {
    min_models = 1;
    cases_only = 1;
    test_models();
    test_modes();
    CHECK_DONE();
  }
  test_models();
  test_no_alloc("mlp_raw", 0);
  test_no_alloc("block", 1);
  test_threads();
  test_modes();
  test_conv();
  test_conv_gemm();
  test_gemm_fusion();
  test_qkv_merge();
  test_gemm_autotune();
  test_host_fallback();
  test_device_paths();
  test_host_refused_mode();
  test_fault();
  test_shared_weights();
  CHECK_DONE();
}
