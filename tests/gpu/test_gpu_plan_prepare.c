// tests/gpu/test_gpu_plan_prepare.c: batch sizes prepared before a CUDA
// plan serves (engine/cuda/plan_cuda_prep.c, issue 32). After every size
// 1..max is prepared, running every size on every slot captures no graph,
// runs no tuning pass and tunes no GEMM shape (graphs_captured,
// gemm_tune_passes, gemm_tuned unchanged; lazy_prepares 0), with the answers
// the CPU plan gives. With a few sizes prepared and padding on, every other
// size runs padded to the next prepared one, still capturing nothing, its
// answers cut to its own rows and equal to the CPU plan's. A plan warmed the
// old way (create's opts.warm only, no padding) counts the sizes it meets
// unprepared as lazy prepares. Models: tests/unit/engine/gen_test_models.py's
// (a ResNet block through cuDNN with the FP32 layout timed, and an MLP
// through cuBLASLt with autotuning on). Skips (77) without a device.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "test_gpu_plan_util.h"

enum { PMAX = 16 };

typedef struct counts {
  uint64_t graphs, passes, tuned, lazy, padded, padded_rows;
} counts;

static counts read_counts(const eng_cuda_plan *p) {
  eng_cuda_plan_stats s;
  eng_cuda_plan_stats_get(p, &s);
  return (counts){s.graphs_captured, s.gemm_tune_passes, s.gemm_tuned, s.lazy_prepares, s.padded_batches,
                  s.padded_rows};
}

// Every size 1..PMAX on every slot against the CPU plan.
static void sweep(const char *model, const eng_graph *g, eng_plan *cp, eng_cuda_plan *gp, const char *label) {
  size_t n_out = eng_graph_n_outputs(g);
  for (int b = 1; b <= PMAX; b++) {
    io_set in = {0}, want = {0};
    make_inputs(g, model, b, 0, &in);
    eng_tensor co[MAX_IO], go[MAX_IO];
    err e = {0};
    int rc = eng_plan_run(cp, in.t, in.n, co, n_out, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) copy_outputs(co, n_out, &want);
    for (int k = 0; rc == 0 && k < eng_cuda_plan_n_slots(gp); k++) {
      rc = eng_cuda_plan_submit(gp, k, in.t, in.n, &e);
      if (rc == 0) rc = eng_cuda_plan_finish(gp, k, go, n_out, NULL, &e);
      if (rc) fprintf(stderr, "%s %s batch %d slot %d: %s\n", model, label, b, k, e.msg);
      CHECK_EQ_INT(rc, 0);
      char what[160];
      snprintf(what, sizeof what, "%s %s batch %d slot %d", model, label, b, k);
      if (rc == 0) compare_set(what, &want, go, out_rtol(model, 0, want.t[0].dt) > 1e-4 ? out_rtol(model, 0, want.t[0].dt) : 1e-4);
    }
    io_free(&in);
    io_free(&want);
  }
}

// A plan of the model with `prepared` sizes (NULL: every one), padding on;
// autotune: cuBLASLt's timed GEMM choice.
static void check_prepared(const char *model, const int *prepared, int n_prepared, int autotune) {
  eng_graph *g = load_model(model);
  if (!g) return;
  eng_plan *cp = NULL;
  eng_cuda_plan *gp = NULL;
  err e = {0};
  int must[] = {1, PMAX};
  eng_cuda_opts o = {.n_slots = 3, .graph_cap = 512, .warm = must, .n_warm = 2, .prepare_later = 1,
                     .no_gemm_autotune = !autotune, .gemm_tune_min_flops = 1};
  CHECK_EQ_INT(eng_plan_create(g, PMAX, &cp, &e), 0);
  CHECK_EQ_INT(eng_cuda_plan_create(g, PMAX, 0, &o, &gp, &e), 0);
  if (!cp || !gp) goto out;
  int n = prepared ? n_prepared : PMAX;
  for (int i = 0; i < n; i++) {
    uint64_t ns = 0;
    CHECK_EQ_INT(eng_cuda_plan_prepare(gp, prepared ? prepared[i] : i + 1, &ns, &e), 0);
    CHECK(ns > 0);
  }
  size_t np = 0;
  const int *v = eng_cuda_plan_prepared(gp, &np);
  CHECK_EQ_INT((int)np, n);
  for (size_t i = 1; i < np; i++) CHECK(v[i - 1] < v[i]);  // ascending
  eng_cuda_plan_serve(gp, 1);
  eng_cuda_plan_stats st;
  eng_cuda_plan_stats_get(gp, &st);
  CHECK_EQ_INT(st.prepared_sizes, n);
  CHECK_EQ_INT(st.pad, 1);
  CHECK_EQ_INT((int)st.batches, 0);  // the preparation's runs are not traffic
  if (autotune) CHECK(st.gemm_tuned > 0);
  counts c0 = read_counts(gp);
  char label[64];
  snprintf(label, sizeof label, "%d prepared%s", n, autotune ? ", autotuned" : "");
  sweep(model, g, cp, gp, label);
  counts c1 = read_counts(gp);
  CHECK_EQ_INT(c1.graphs, c0.graphs);  // nothing captured on the request path
  CHECK_EQ_INT(c1.passes, c0.passes);  // no tuning pass
  CHECK_EQ_INT(c1.tuned, c0.tuned);    // no GEMM shape timed
  CHECK_EQ_INT(c1.lazy, 0);
  int slots = eng_cuda_plan_n_slots(gp), unprepared = 0, added = 0;
  for (int b = 1; b <= PMAX && prepared; b++) {
    int run = 0;
    for (int i = n - 1; i >= 0; i--)
      if (prepared[i] >= b && (!run || prepared[i] < run)) run = prepared[i];
    unprepared += run != b;
    added += run - b;
  }
  CHECK_EQ_INT(c1.padded, (uint64_t)(unprepared * slots));
  CHECK_EQ_INT(c1.padded_rows, (uint64_t)(added * slots));
  printf("%-12s %-24s graphs %llu, tuned %llu, lazy %llu, padded %llu batches (+%llu rows)\n", model, label,
         (unsigned long long)c1.graphs, (unsigned long long)c1.tuned, (unsigned long long)c1.lazy,
         (unsigned long long)c1.padded, (unsigned long long)c1.padded_rows);
out:
  eng_cuda_plan_destroy(gp);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}

// The old warm-up (create's opts.warm, no padding): a size not warmed is
// captured on its first batch, and counted.
static void check_lazy_counted(const char *model) {
  eng_graph *g = load_model(model);
  if (!g) return;
  eng_cuda_plan *gp = NULL;
  err e = {0};
  int warm[] = {1, PMAX};
  eng_cuda_opts o = {.n_slots = 2, .warm = warm, .n_warm = 2};
  CHECK_EQ_INT(eng_cuda_plan_create(g, PMAX, 0, &o, &gp, &e), 0);
  if (gp) {
    io_set in = {0};
    make_inputs(g, model, 3, 0, &in);
    eng_tensor go[MAX_IO];
    size_t n_out = eng_graph_n_outputs(g);
    counts c0 = read_counts(gp);
    CHECK_EQ_INT(eng_cuda_plan_run(gp, in.t, in.n, go, n_out, &e), 0);
    CHECK_EQ_INT(go[0].dims[0], 3);
    counts c1 = read_counts(gp);
    CHECK_EQ_INT(c1.graphs, c0.graphs + 1);
    CHECK_EQ_INT(c1.lazy, 1);
    CHECK_EQ_INT(c1.padded, 0);
    CHECK_EQ_INT(eng_cuda_plan_run(gp, in.t, in.n, go, n_out, &e), 0);  // captured now: replayed
    CHECK_EQ_INT(read_counts(gp).lazy, 1);
    io_free(&in);
  }
  eng_cuda_plan_destroy(gp);
  eng_graph_destroy(g);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *env = getenv("INFERD_GPU_PLAN_MODELS");
  models_dir = argc > 1 ? argv[1] : env && *env ? env : ".devrun/gpu_plan_models";
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n == 0) {
    printf("SKIP: no CUDA device (%s)\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "none visible");
    return 77;
  }
  int few[] = {1, 3, 8, PMAX};
  check_prepared("conv_resnet", NULL, 0, 0);
  check_prepared("conv_resnet", few, 4, 0);
  check_prepared("mlp_raw", NULL, 0, 1);
  check_prepared("mlp_raw", few, 4, 1);
  check_lazy_counted("mlp_raw");
  CHECK_DONE();
}
