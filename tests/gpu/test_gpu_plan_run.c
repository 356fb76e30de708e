// tests/gpu/test_gpu_plan_run.c: the CUDA plan (engine/cuda/plan_cuda.c,
// plan_cuda_slot.c) in service, against the CPU plan: no real allocation
// across 100 runs; a larger shape re-plans, grows and is counted; bad inputs
// are refused and leave the plan usable; two GPU plans of one graph on two
// threads at once; what the CUDA plan cannot run (a Pad value computed from
// the data) runs on the host inside the plan, named with the reason; a CUDA error fails its
// batch and the plan works after; plans sharing a store keep one copy of the
// weights per device and precision (packed NHWC weights included). Part of
// the test_gpu_plan binary (main() in test_gpu_plan.c).
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_weights.h"
#include "test_gpu_plan_util.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// --- no allocation on the hot path; growth is counted

void test_no_alloc(const char *name, int grow) {
  eng_graph *g = load_model(name);
  if (!g) return;
  eng_plan *cp = NULL;
  eng_cuda_plan *gp = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, NULL, &gp, &e), 0);
  if (!cp || !gp) goto out;
  io_set in[MAXB + 1] = {{0}};
  for (int b = 1; b <= MAXB; b++) make_inputs(g, name, b, 0, &in[b]);
  // warm up at the largest batch: plans a dynamic non-batch dim, caches GEMM shapes
  run_both(name, g, cp, gp, &in[MAXB], "warm-up", 0);
  uint64_t allocs = eng_cuda_plan_real_allocs(gp);
  CHECK(allocs >= 2);  // at least the activation arena and the pinned staging
  double worst = 0, t0 = now_s();
  int runs = 0;
  for (int i = 0; i < 100; i++) {
    int b = 1 + i % MAXB;
    eng_tensor go[MAX_IO];
    size_t n_out = eng_graph_n_outputs(g);
    int rc = eng_cuda_plan_run(gp, in[b].t, in[b].n, go, n_out, &e);
    CHECK_EQ_INT(rc, 0);
    runs += rc == 0;
  }
  double dt = now_s() - t0;
  CHECK_EQ_INT(runs, 100);
  CHECK_EQ_INT(eng_cuda_plan_real_allocs(gp), allocs);
  // results after the 100 runs are still right for every batch size
  for (int b = 1; b <= MAXB; b++) {
    double w = run_both(name, g, cp, gp, &in[b], "after 100 runs", 0);
    if (w > worst) worst = w;
  }
  CHECK_EQ_INT(eng_cuda_plan_real_allocs(gp), allocs);
  printf("%-16s 100 runs (batch 1..%d): %.1f us/run, real allocations %llu before and after\n",
         name, MAXB, dt / 100 * 1e6, (unsigned long long)allocs);

  // bad inputs are refused, and the plan still works after
  eng_tensor go[MAX_IO];
  size_t n_out = eng_graph_n_outputs(g);
  CHECK_EQ_INT(eng_cuda_plan_run(gp, in[1].t, in[1].n + 1, go, n_out, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_cuda_plan_run(gp, in[1].t, in[1].n, go, n_out + 1, &e), ERR_INVALID_ARGUMENT);
  io_set big = {0};
  make_inputs(g, name, MAXB + 1, 0, &big);
  CHECK_EQ_INT(eng_cuda_plan_run(gp, big.t, big.n, go, n_out, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "batch size");
  io_free(&big);
  run_both(name, g, cp, gp, &in[2], "after refusals", 0);

  if (grow) {  // a longer dim 1 than planned: re-plan, grow, counted, still right
    io_set longer = {0};
    make_inputs(g, name, MAXB, in[MAXB].t[0].dims[1] + 3, &longer);
    run_both(name, g, cp, gp, &longer, "grown", 0);
    CHECK(eng_cuda_plan_real_allocs(gp) > allocs);
    uint64_t grown = eng_cuda_plan_real_allocs(gp);
    run_both(name, g, cp, gp, &in[1], "after growth", 0);
    CHECK_EQ_INT(eng_cuda_plan_real_allocs(gp), grown);
    printf("%-16s grew for a longer sequence: real allocations %llu -> %llu\n", name,
           (unsigned long long)allocs, (unsigned long long)grown);
    io_free(&longer);
  }
  for (int b = 1; b <= MAXB; b++) io_free(&in[b]);
out:
  eng_cuda_plan_destroy(gp);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}

// --- two GPU plans of one graph on two threads

typedef struct worker {
  const eng_graph *g;
  const io_set *in;      // per batch 1..MAXB
  const io_set *expect;  // CPU outputs per batch
  int id, runs, bad_runs, failed;
  double worst;
  char msg[ERR_MSG_MAX];
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  eng_cuda_plan *gp = NULL;
  err e = {0};
  if (eng_cuda_plan_create(w->g, MAXB, 0, NULL, &gp, &e) != 0) {
    w->failed = 1;
    snprintf(w->msg, sizeof w->msg, "%s", e.msg);
    return NULL;
  }
  size_t n_out = eng_graph_n_outputs(w->g);
  for (int i = 0; i < 40; i++) {
    int b = 1 + (i * 3 + w->id) % MAXB;  // the two threads interleave different sizes
    eng_tensor go[MAX_IO];
    if (eng_cuda_plan_run(gp, w->in[b].t, w->in[b].n, go, n_out, &e) != 0) {
      w->failed = 1;
      snprintf(w->msg, sizeof w->msg, "%s", e.msg);
      break;
    }
    w->runs++;
    int bad_run = 0;
    for (size_t j = 0; j < n_out; j++) {
      const eng_tensor *c = &w->expect[b].t[j];
      size_t n = (size_t)eng_numel(c->ndims, c->dims);
      double mean = 0;
      for (size_t k = 0; k < n; k++) mean += fabs(elem(c, k));
      mean = n ? mean / (double)n : 0;
      for (size_t k = 0; k < n; k++) {
        double cv = elem(c, k), gv = elem(&go[j], k), bound = 1e-5 * (fabs(cv) + mean);
        if (!(fabs(gv - cv) <= bound)) bad_run = 1;
        double rel = bound > 0 ? fabs(gv - cv) / bound * 1e-5 : 0;
        if (rel > w->worst) w->worst = rel;
      }
      if (go[j].ndims != c->ndims || go[j].dims[0] != c->dims[0]) bad_run = 1;
    }
    w->bad_runs += bad_run;
  }
  eng_cuda_plan_destroy(gp);
  return NULL;
}

void test_threads(void) {
  const char *name = "block";
  eng_graph *g = load_model(name);
  if (!g) return;
  eng_plan *cp = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  io_set in[MAXB + 1] = {{0}}, expect[MAXB + 1] = {{0}};
  size_t n_out = eng_graph_n_outputs(g);
  for (int b = 1; b <= MAXB; b++) {
    make_inputs(g, name, b, 0, &in[b]);
    eng_tensor co[MAX_IO];
    CHECK_EQ_INT(eng_plan_run(cp, in[b].t, in[b].n, co, n_out, &e), 0);
    copy_outputs(co, n_out, &expect[b]);
  }
  worker w[2];
  pthread_t th[2];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 2; i++) {
    w[i].id = i;
    w[i].g = g;
    w[i].in = in;
    w[i].expect = expect;
    CHECK_EQ_INT(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    CHECK_EQ_INT(pthread_join(th[i], NULL), 0);
    if (w[i].failed) fprintf(stderr, "thread %d: %s\n", i, w[i].msg);
    CHECK_EQ_INT(w[i].failed, 0);
    CHECK_EQ_INT(w[i].runs, 40);
    CHECK_EQ_INT(w[i].bad_runs, 0);
    printf("thread %d: %d runs of '%s', %d off the CPU result, worst scaled error %.3g\n", i,
           w[i].runs, name, w[i].bad_runs, w[i].worst);
  }
  for (int b = 1; b <= MAXB; b++) {
    io_free(&in[b]);
    io_free(&expect[b]);
  }
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}

// --- a mode the CUDA path refuses at init runs on the host, named with the reason

void test_host_refused_mode(void) {
  // Pad's constant_value computed from the data: the planner never reads it, so the CUDA path
  // (which takes it on the host at load) refuses the node; it runs on the host inside the plan
  eng_graph *g = load_model("pad_runtime_value");
  CHECK(g != NULL);
  if (!g) return;
  eng_plan *cp = NULL;
  eng_cuda_plan *gp = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, NULL, &gp, &e), 0);
  if (gp) {
    CHECK_EQ_INT((int)eng_cuda_plan_n_host_nodes(gp), 1);
    const char *line = eng_cuda_plan_host_node(gp, 0);
    CHECK(line != NULL);
    if (line) {
      CHECK_CONTAINS(line, "pad_by_max");
      CHECK_CONTAINS(line, "constant_value ('mx') must be a constant");
      CHECK_CONTAINS(line, "runs on the host");
      printf("pad_runtime_value: %s\n", line);
    }
  }
  for (int b = 1; cp && gp && b <= MAXB; b++) {
    io_set in = {0};
    make_inputs(g, "pad_runtime_value", b, 0, &in);
    run_both("pad_runtime_value", g, cp, gp, &in, "host Pad", 0);
    io_free(&in);
  }
  eng_cuda_plan_destroy(gp);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}

// --- a CUDA error fails the batch; the plan works after

void test_fault(void) {
  eng_graph *g = load_model("mlp_raw");
  if (!g) return;
  eng_plan *cp = NULL;
  eng_cuda_plan *gp = NULL;
  err e = {0};
  eng_cuda_opts o = {.fault_at = 3};
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e), 0);
  if (gp && cp) {
    io_set in = {0}, ref = {0};
    make_inputs(g, "mlp_raw", 2, 0, &in);
    size_t n_out = eng_graph_n_outputs(g);
    eng_tensor co[MAX_IO], go[MAX_IO];
    CHECK_EQ_INT(eng_plan_run(cp, in.t, in.n, co, n_out, &e), 0);
    copy_outputs(co, n_out, &ref);
    for (int i = 1; i <= 5; i++) {
      int rc = eng_cuda_plan_run(gp, in.t, in.n, go, n_out, &e);
      if (i == 3) {
        CHECK_EQ_INT(rc, ERR_INTERNAL);
        CHECK_CONTAINS(e.msg, "fault_kernel");
      } else {
        CHECK_EQ_INT(rc, 0);
        if (!rc) compare_set("mlp_raw after fault", &ref, go, 1e-5);
      }
    }
    io_free(&in);
    io_free(&ref);
  }
  eng_cuda_plan_destroy(gp);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}

// --- the weights once per device (engine/cuda/cuda_weights.h): plans of one graph given one store
// share the device's copy; a plan without a store (or of another precision) makes its own.
// cudaMemGetInfo shows it: a second plan sharing the copy takes about the weights' bytes less
// device memory than one uploading its own (wide_gemm: 16 MiB of FP32 weights). Then the
// derived copies: conv_resnet's NHWC FP16 plans pack their Conv weights KRSC once per device.
static size_t free_bytes(void) {
  size_t fr = 0, tot = 0;
  CHECK_EQ_INT(cudaMemGetInfo(&fr, &tot), cudaSuccess);
  return fr;
}

void test_shared_weights(void) {
  const char *name = "wide_gemm";
  eng_graph *g = load_model(name);
  if (!g) return;
  err e = {0};
  eng_cuda_weights *w = NULL;
  CHECK_EQ_INT(eng_cuda_weights_create(g, &w, &e), 0);
  eng_plan *cp = NULL;
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  io_set in = {0};
  make_inputs(g, name, MAXB, 0, &in);
  eng_cuda_opts shared = {.weights = w}, own = {0};
  eng_cuda_plan *a = NULL, *b = NULL, *priv = NULL, *half = NULL;
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &shared, &a, &e), 0);
  size_t f0 = free_bytes();
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &own, &priv, &e), 0);
  size_t f1 = free_bytes();
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &shared, &b, &e), 0);
  size_t f2 = free_bytes();
  if (!a || !b || !priv) goto out;
  eng_cuda_plan_stats sa, sb, sp;
  eng_cuda_plan_stats_get(a, &sa);
  eng_cuda_plan_stats_get(b, &sb);
  eng_cuda_plan_stats_get(priv, &sp);
  const uint64_t wbytes = 1024ull * 4096 * sizeof(float);
  CHECK(sa.weight_bytes >= wbytes && sa.weight_bytes < wbytes + (1u << 20));
  CHECK_EQ_INT(sa.weights_uploaded, 1);
  CHECK_EQ_INT(sb.weights_uploaded, 0);
  CHECK_EQ_INT(sb.weight_holders, 2);
  CHECK_EQ_INT(sb.weight_bytes, sa.weight_bytes);
  CHECK_EQ_INT(sp.weights_uploaded, 1);
  CHECK_EQ_INT(sp.weight_holders, 1);
  // the weights are not counted in a plan's own device bytes (the same for both)
  CHECK_EQ_INT(sb.device_bytes, sp.device_bytes);
  size_t drop_priv = f0 - f1, drop_shared = f1 - f2;
  printf("shared weights: %s %.1f MiB; device memory taken by a plan with its own copy %.1f MiB, "
         "by one sharing it %.1f MiB\n", name, sa.weight_bytes / 1048576.0, drop_priv / 1048576.0,
         drop_shared / 1048576.0);
  CHECK(drop_priv >= drop_shared + wbytes - (2u << 20));
  // both answer right, and the survivor still does once the uploader is gone
  run_both(name, g, cp, a, &in, "shared a", 1e-4);
  run_both(name, g, cp, b, &in, "shared b", 1e-4);
  eng_cuda_plan_destroy(a);
  a = NULL;
  eng_cuda_plan_stats_get(b, &sb);
  CHECK_EQ_INT(sb.weight_holders, 1);
  run_both(name, g, cp, b, &in, "shared b after a went", 1e-4);
  // FP16 storage is another copy on the same device
  eng_cuda_opts ho = {.precision = ENG_PREC_FP16, .weights = w};
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &ho, &half, &e), 0);
  if (half) {
    eng_cuda_plan_stats sh;
    eng_cuda_plan_stats_get(half, &sh);
    CHECK_EQ_INT(sh.weights_uploaded, 1);
    CHECK_EQ_INT(sh.weight_holders, 1);
    // half the bytes (each block rounded up to the alignment)
    CHECK(sh.weight_bytes <= sa.weight_bytes / 2 + (1u << 10));
  }
out:
  eng_cuda_plan_destroy(a);
  eng_cuda_plan_destroy(b);
  eng_cuda_plan_destroy(priv);
  eng_cuda_plan_destroy(half);
  eng_cuda_weights_destroy(w);
  io_free(&in);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);

  // derived copies: two NHWC FP16 plans of conv_resnet, one packing per Conv
  name = "conv_resnet";
  g = load_model(name);
  if (!g) return;
  CHECK_EQ_INT(eng_cuda_weights_create(g, &w, &e), 0);
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  make_inputs(g, name, MAXB, 0, &in);
  eng_cuda_opts co = {.precision = ENG_PREC_FP16, .layout = ENG_CUDA_LAYOUT_NHWC, .weights = w};
  a = b = NULL;
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &co, &a, &e), 0);
  if (a) {
    run_both(name, g, cp, a, &in, "nhwc fp16 a", low_rtol);
    eng_cuda_plan_stats_get(a, &sa);
    CHECK(sa.nhwc_nodes > 0);
    CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &co, &b, &e), 0);
  }
  if (b) {
    run_both(name, g, cp, b, &in, "nhwc fp16 b", low_rtol);
    eng_cuda_plan_stats_get(b, &sb);
    eng_cuda_plan_stats_get(a, &sa);
    CHECK_EQ_INT(sb.weights_uploaded, 0);
    CHECK_EQ_INT(sb.weight_bytes, sa.weight_bytes);  // b's NHWC packing found a's
    printf("shared weights: %s NHWC FP16, %.2f MiB with the packed copies, 2 plans\n", name,
           sb.weight_bytes / 1048576.0);
  }
  eng_cuda_plan_destroy(a);
  eng_cuda_plan_destroy(b);
  eng_cuda_weights_destroy(w);
  io_free(&in);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}
