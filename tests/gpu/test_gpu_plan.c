// test_gpu_plan.c: the CUDA plan (engine/cuda/plan_cuda.c) against the CPU plan
// (engine/cpu/plan.c) on the models tests/unit/engine/gen_test_models.py writes:
// the same random inputs for every batch size 1..max_batch (or the declared
// shapes for fixed-shape models), outputs compared element by element; two
// GPU plans of one graph on two threads at once; no real allocation across
// 100 runs; a larger shape re-plans, grows and is counted; bad inputs are
// refused and leave the plan usable; the conv family (cuDNN, ConvTranspose
// included) fuses its epilogues, runs NHWC where the layout pass says so and
// allocates nothing once every batch size is warm, and runs its 1x1 Convs on
// 1x1 inputs as cuBLASLt GEMMs (counted); what the CUDA plan cannot
// run (a Pad value computed from the data) is refused at load with the
// node's name; plans sharing a store keep one copy of the weights per device
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
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "engine/cuda/cuda_weights.h"
#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "engine/cuda/plan_cuda.h"
#include "kernels/k_ref.h"

#ifndef INFERD_GPU_PLAN_MODELS
#define INFERD_GPU_PLAN_MODELS ""
#endif

enum { MAXB = 4, MAX_IO = 8 };

static const char *models_dir;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) {  // uniform in [-1, 1)
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// --- inputs

typedef struct io_set {
  size_t n;
  eng_tensor t[MAX_IO];
} io_set;

static void io_free(io_set *s) {
  for (size_t i = 0; i < s->n; i++) free(s->t[i].data);
  s->n = 0;
}

// The case file's input shapes ("in <onnx type> <rank> <dims...>").
static int read_case_shapes(const char *name, int64_t dims[MAX_IO][ENG_MAX_DIMS], int *ranks,
                            size_t *n) {
  char path[1024], kind[8];
  snprintf(path, sizeof path, "%s/%s.case", models_dir, name);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int et, rank;
  *n = 0;
  while (fscanf(f, "%7s %d %d", kind, &et, &rank) == 3) {
    int64_t d[ENG_MAX_DIMS] = {0};
    for (int i = 0; i < rank && i < ENG_MAX_DIMS; i++) {
      long long v;
      if (fscanf(f, "%lld", &v) != 1) break;
      d[i] = v;
    }
    if (strcmp(kind, "in") == 0 && *n < MAX_IO) {
      memcpy(dims[*n], d, sizeof d);
      ranks[*n] = rank;
      (*n)++;
    }
  }
  fclose(f);
  return 0;
}

// Random inputs of the graph's declared types: the case file's shapes with
// dim 0 set to batch when batch > 0, and inner dim override `inner` (dim 1)
// when > 0.
static void make_inputs(const eng_graph *g, const char *name, int batch, int64_t dim1, io_set *s) {
  int64_t dims[MAX_IO][ENG_MAX_DIMS];
  int ranks[MAX_IO];
  size_t nc = 0;
  CHECK_EQ_INT(read_case_shapes(name, dims, ranks, &nc), 0);
  s->n = eng_graph_n_inputs(g);
  CHECK_EQ_INT(nc, s->n);
  for (size_t i = 0; i < s->n && i < nc; i++) {
    const eng_io *io = eng_graph_input(g, i);
    eng_tensor *t = &s->t[i];
    memset(t, 0, sizeof *t);
    t->dt = io->dt;
    t->ndims = ranks[i];
    memcpy(t->dims, dims[i], sizeof t->dims);
    if (batch > 0) t->dims[0] = batch;
    if (dim1 > 0) t->dims[1] = dim1;
    size_t n = (size_t)eng_numel(t->ndims, t->dims);
    t->bytes = n * dtype_size(t->dt);
    t->data = malloc(t->bytes ? t->bytes : 1);
    CHECK(t->data != NULL);
    for (size_t k = 0; k < n; k++) {
      double v = 2.0 * urand();
      switch (t->dt) {
        case DT_FP32: ((float *)t->data)[k] = (float)v; break;
        case DT_FP64: ((double *)t->data)[k] = v; break;
        case DT_FP16: {
          float f = (float)v;
          k_f32_to_f16((uint16_t *)t->data + k, &f, 1);
          break;
        }
        // integers in [0, 5): valid as indices into the test models' and the zoo's smallest
        // indexed axes (token ids, GatherND tuples), masks with some zeros
        case DT_INT64: ((int64_t *)t->data)[k] = (int64_t)(v * 2.5); break;
        case DT_INT32: ((int32_t *)t->data)[k] = (int32_t)(v * 2.5); break;
        default: memset((uint8_t *)t->data + k * dtype_size(t->dt), 0, dtype_size(t->dt));
      }
    }
  }
}

// Deep copy of outputs (the plans' own memory is valid only until the next run).
static void copy_outputs(const eng_tensor *o, size_t n, io_set *s) {
  s->n = n;
  for (size_t j = 0; j < n; j++) {
    s->t[j] = o[j];
    s->t[j].data = malloc(o[j].bytes ? o[j].bytes : 1);
    CHECK(s->t[j].data != NULL);
    if (o[j].bytes) memcpy(s->t[j].data, o[j].data, o[j].bytes);
  }
}

// --- comparison

static double elem(const eng_tensor *t, size_t k) {
  switch (t->dt) {
    case DT_FP32: return ((const float *)t->data)[k];
    case DT_FP64: return ((const double *)t->data)[k];
    case DT_FP16: {
      float f;
      k_f16_to_f32(&f, (const uint16_t *)t->data + k, 1);
      return f;
    }
    case DT_INT64: return (double)((const int64_t *)t->data)[k];
    case DT_INT32: return ((const int32_t *)t->data)[k];
    case DT_BOOL: case DT_UINT8: return ((const uint8_t *)t->data)[k];
    default: return NAN;
  }
}

static int is_int(dtype d) { return d != DT_FP32 && d != DT_FP64 && d != DT_FP16 && d != DT_BF16; }

// Returns the largest scaled error (error / bound * rtol) and counts
// elements over the bound into *bad.
static double compare(const char *what, const eng_tensor *cpu, const eng_tensor *gpu, double rtol,
                      size_t *bad) {
  *bad = 0;
  CHECK_EQ_INT(gpu->dt, cpu->dt);
  CHECK_EQ_INT(gpu->ndims, cpu->ndims);
  for (int d = 0; d < cpu->ndims && d < gpu->ndims; d++) CHECK_EQ_INT(gpu->dims[d], cpu->dims[d]);
  CHECK_EQ_INT(gpu->bytes, cpu->bytes);
  if (gpu->dt != cpu->dt || gpu->bytes != cpu->bytes) {
    *bad = 1;
    return INFINITY;
  }
  size_t n = (size_t)eng_numel(cpu->ndims, cpu->dims);
  if (n) CHECK(gpu->data != NULL);
  double mean = 0, worst = 0;
  for (size_t k = 0; k < n; k++) mean += fabs(elem(cpu, k));
  mean = n ? mean / (double)n : 0;
  for (size_t k = 0; k < n; k++) {
    double c = elem(cpu, k), g = elem(gpu, k), diff = fabs(g - c);
    double bound = is_int(cpu->dt) ? 0 : rtol * (fabs(c) + mean);
    int ok = is_int(cpu->dt) ? g == c : (isfinite(g) && diff <= bound) || (isnan(c) && isnan(g));
    double rel = bound > 0 ? diff / bound * rtol : (diff > 0 ? INFINITY : 0);
    if (rel > worst) worst = rel;
    if (!ok) {
      if (*bad < 5)
        fprintf(stderr, "  %s[%zu]: gpu %.9g cpu %.9g (|diff| %.3g > bound %.3g)\n", what, k, g, c,
                diff, bound);
      (*bad)++;
    }
  }
  CHECK_EQ_INT(*bad, 0);
  return worst;
}

static double out_rtol(const char *model, size_t j, dtype dt) {
  if (dt == DT_FP16) return 1e-3;
  if (strcmp(model, "bn_cast") == 0 && j == 0) return 1e-3;  // FP16 round trip inside
  return 1e-5;
}

// Runs both plans on `in` and compares every output; returns the worst scaled error.
// rtol_min: a floor on the per-output bound (0: out_rtol's own)
static double run_both(const char *model, const eng_graph *g, eng_plan *cp, eng_cuda_plan *gp,
                       const io_set *in, const char *label, double rtol_min) {
  eng_tensor co[MAX_IO], go[MAX_IO];
  err e = {0};
  size_t n_out = eng_graph_n_outputs(g);
  // the CPU plan's outputs survive the GPU run: different plans
  int rc = eng_plan_run(cp, in->t, in->n, co, n_out, &e);
  if (rc) fprintf(stderr, "%s %s: cpu run: %s\n", model, label, e.msg);
  CHECK_EQ_INT(rc, 0);
  if (rc) return INFINITY;
  rc = eng_cuda_plan_run(gp, in->t, in->n, go, n_out, &e);
  if (rc) fprintf(stderr, "%s %s: gpu run: %s\n", model, label, e.msg);
  CHECK_EQ_INT(rc, 0);
  if (rc) return INFINITY;
  double worst = 0;
  for (size_t j = 0; j < n_out; j++) {
    char what[160];
    size_t bad;
    snprintf(what, sizeof what, "%s %s out%zu", model, label, j);
    double rtol = out_rtol(model, j, co[j].dt);
    double w = compare(what, &co[j], &go[j], rtol > rtol_min ? rtol : rtol_min, &bad);
    if (w > worst) worst = w;
    if (bad) fprintf(stderr, "%s: %zu elements over the bound\n", what, bad);
  }
  return worst;
}

static eng_graph *load_model(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", models_dir, name);
  eng_graph *g = NULL;
  err e = {0};
  if (eng_graph_load(path, &g, &e) != 0) fprintf(stderr, "load %s: %s\n", path, e.msg);
  CHECK(g != NULL);
  return g;
}

static int batch_of(const eng_graph *g) {
  for (size_t i = 0; i < eng_graph_n_inputs(g); i++) {
    const eng_io *io = eng_graph_input(g, i);
    if (io->ndims > 0 && io->dims[0] < 0) return MAXB;
  }
  return 0;
}

// --- every model, every batch size

static int n_models;

// Models test_models must have compared (the generated set has 14 and more).
static int min_models = 14;
// Bound of the FP16 and TF32 plans against the FP32 CPU plan (scaled, as compare()).
static double low_rtol = 1e-2;
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

// --- no allocation on the hot path; growth is counted

static void test_no_alloc(const char *name, int grow) {
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

static void test_threads(void) {
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

// --- precisions, graphs and slots on every model and batch size

static int same_bits(const io_set *a, const eng_tensor *b, size_t n) {
  for (size_t j = 0; j < n; j++)
    if (a->t[j].bytes != b[j].bytes || (b[j].bytes && memcmp(a->t[j].data, b[j].data, b[j].bytes) != 0))
      return 0;
  return 1;
}

static double max_worst(double a, double b) { return a > b ? a : b; }

// Worst scaled error of the GPU outputs against the CPU's; integer outputs
// must match exactly except where a float rounded differently decides them
// (counted in *int_flips, reported, bounded by the caller).
static double compare_set(const char *what, const io_set *cpu, const eng_tensor *gpu, double rtol) {
  double worst = 0;
  for (size_t j = 0; j < cpu->n; j++) {
    char w[200];
    size_t bad;
    snprintf(w, sizeof w, "%s out%zu", what, j);
    worst = max_worst(worst, compare(w, &cpu->t[j], &gpu[j], rtol, &bad));
  }
  return worst;
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

// --- the conv family (cuDNN): fusion, no allocation once warm, refusals

// Nodes each conv model runs inside a Conv's epilogue: conv_resnet's five
// Relus and two residual Adds; conv_dwsep's Sigmoid and Tanh (its 1x1
// conv's output is a graph output, so that Relu runs on its own);
// conv_pools' 1-D Relu; conv_transpose_net's Relu after its Conv (nothing
// fuses into a ConvTranspose). And the nodes that run NHWC with the NHWC
// layout: some (-1), unchecked (-2), or exactly so many: none in
// conv_transpose (no Conv leads into NHWC; a ConvTranspose follows its
// input), four in conv_transpose_net (the Conv, both ConvTransposes that
// follow it, the Relu after one; the fused Relu is no node of its own).
// None of their Convs is a 1x1 kernel on a 1x1 input, so none runs as a
// cuBLASLt GEMM NCHW (test_conv_gemm has those); NHWC the 1x1 stride-1 ones
// do (gemm): conv_dwsep's pointwise Conv, conv_mbv3's two expand and one
// projection Convs (the latter with its residual); conv_resnet's 1x1
// shortcut has stride 2 and stays on cuDNN.
// conv_mbv3: its depthwise Convs' HardSwish, HardSigmoid and residual Add +
// HardSwish, and the projection's residual Add (5), on cuDNN (NCHW, the
// activation after it) and on the depthwise kernel (NHWC) alike. pro: the
// prologues (an expand Conv's HardSwish applied by the depthwise kernel as
// it loads), NHWC only: none while engine/ops/conv/conv_cuda.c keeps them off (slower).
static const struct {
  const char *name;
  uint64_t fused;
  int nhwc;
  uint64_t pro;
  uint64_t gemm;
} conv_models[] = {{"conv_resnet", 7, -1, 0, 0},    {"conv_dwsep", 2, -1, 0, 1},
                   {"conv_pools", 1, -2, 0, 0},     {"conv_transpose", 0, 0, 0, 0},
                   {"conv_transpose_net", 1, 4, 0, 0}, {"conv_mbv3", 5, -1, 0, 3}};

static void test_conv(void) {
  // each model three times: NCHW; with NHWC regions (and every cuDNN candidate timed, the other
  // choice of algorithm); and AUTO in FP32 with the timed layout's test hook, which keeps NHWC at
  // every second warmed batch size (2 and MAXB) and NCHW at 1 and 3: one plan whose layout flips
  // from batch to batch, its graphs apart per layout, no allocation once warm
  static const char *const lay_name[] = {"nchw", "nhwc", "flip"};
  for (int lay = 0; lay < 3; lay++)
  for (size_t m = 0; m < sizeof conv_models / sizeof conv_models[0]; m++) {
    const char *name = conv_models[m].name;
    eng_graph *g = load_model(name);
    if (!g) continue;
    size_t n_out = eng_graph_n_outputs(g);
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    int warm[] = {1, 2, 3, MAXB};
    eng_cuda_opts o = {.warm = warm, .n_warm = 4,
                       .layout = lay == 0 ? ENG_CUDA_LAYOUT_NCHW : lay == 1 ? ENG_CUDA_LAYOUT_NHWC : ENG_CUDA_LAYOUT_AUTO,
                       .conv_timed = lay == 1, .layout_flip = lay == 2};
    CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e);
    if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (cp && gp) {
      io_set in[MAXB + 1] = {{0}};
      for (int b = 1; b <= MAXB; b++) make_inputs(g, name, b, 0, &in[b]);
      double worst = run_both(name, g, cp, gp, &in[MAXB], "conv warm", 0);
      eng_cuda_plan_stats st;
      eng_cuda_plan_stats_get(gp, &st);
      // MAXB ran last: NHWC in the flip pass too
      CHECK_EQ_INT(st.fused_nodes, conv_models[m].fused + (lay ? conv_models[m].pro : 0));
      CHECK_EQ_INT(st.gemm_convs, lay ? conv_models[m].gemm : 0);
      if (!lay) CHECK_EQ_INT(st.nhwc_nodes, 0);
      // a timed layout wherever a Conv could run NHWC (conv_transpose has none): four picks, two NHWC
      bool timed = lay == 2 && conv_models[m].nhwc != 0;
      CHECK_EQ_INT(st.timed_layouts, timed ? 4 : 0);
      CHECK_EQ_INT(st.timed_nhwc, timed ? 2 : 0);
      // NHWC: the 2-D models run their convolutions NHWC and transpose only at the edges
      // (an input into the first conv, each 4-D output before copy-out)
      if (lay && conv_models[m].nhwc != -2) {
        if (conv_models[m].nhwc < 0) CHECK(st.nhwc_nodes > 0);
        else CHECK_EQ_INT(st.nhwc_nodes, conv_models[m].nhwc);
        CHECK(st.relayouts <= eng_graph_n_inputs(g) + n_out);
      }
      // every batch size was warmed (a cuDNN plan each, the NHWC weights): none allocates now
      uint64_t allocs = st.real_allocs;
      for (int i = 0; i < 40; i++) {
        int b = 1 + i % MAXB;
        eng_tensor go[MAX_IO];
        CHECK_EQ_INT(eng_cuda_plan_run(gp, in[b].t, in[b].n, go, n_out, &e), 0);
      }
      CHECK_EQ_INT(eng_cuda_plan_real_allocs(gp), allocs);
      for (int b = 1; b <= MAXB; b++) {
        worst = max_worst(worst, run_both(name, g, cp, gp, &in[b], "conv after 40 runs", 0));
        if (timed && conv_models[m].nhwc != -2) {  // this batch's layout: NCHW at the odd sizes, NHWC at the even
          eng_cuda_plan_stats_get(gp, &st);
          CHECK_EQ_INT(st.nhwc_nodes > 0, b % 2 == 0);
        }
      }
      eng_cuda_plan_stats_get(gp, &st);
      printf("%-16s %s: %llu nodes fused, %llu NHWC, %llu transposes, %llu graphs, real allocations %llu "
             "before and after 40 runs, worst scaled error %.3g\n",
             name, lay_name[lay], (unsigned long long)st.fused_nodes, (unsigned long long)st.nhwc_nodes,
             (unsigned long long)st.relayouts, (unsigned long long)st.graphs_captured,
             (unsigned long long)allocs, worst);
      for (int b = 1; b <= MAXB; b++) io_free(&in[b]);
    }
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
    eng_graph_destroy(g);
  }
}

// --- 1x1 Convs on 1x1 inputs as cuBLASLt GEMMs (engine/ops/conv/conv_cuda.c is_gemm): conv_se_gemm's
// squeeze-excitation pair (bias + Relu, bias alone), a residual Add of the pool + Relu without
// bias, and a strided one take the GEMM route, 4 Convs; its Sigmoid one (no such cuBLASLt
// epilogue) and the 3x3 stem stay on cuDNN. In every precision and both layouts (the GEMM's
// operands are the same bytes in NCHW and NHWC), at every batch size, values against the CPU
// plan; the epilogue is the Convs' own, so the same 5 nodes fuse (the stem's, the SE's and the
// Sigmoid's activations, the residual Add and its Relu).
static void test_conv_gemm(void) {
  const char *name = "conv_se_gemm";
  eng_graph *g = load_model(name);
  if (!g) return;
  static const struct {
    const char *label;
    eng_cuda_opts o;
  } modes[] = {{"fp32", {.precision = ENG_PREC_FP32}},
               {"fp32 nhwc", {.precision = ENG_PREC_FP32, .layout = ENG_CUDA_LAYOUT_NHWC}},
               {"tf32", {.precision = ENG_PREC_TF32}},
               {"fp16", {.precision = ENG_PREC_FP16}}};
  for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, MAXB, 0, &modes[k].o, &gp, &e);
    if (rc) fprintf(stderr, "%s %s: cuda create: %s\n", name, modes[k].label, e.msg);
    CHECK_EQ_INT(rc, 0);
    bool low = modes[k].o.precision != ENG_PREC_FP32;
    double worst = 0;
    eng_cuda_plan_stats st = {0};
    for (int b = 1; cp && gp && b <= MAXB; b++) {
      io_set in = {0};
      make_inputs(g, name, b, 0, &in);
      char label[64];
      snprintf(label, sizeof label, "%s batch %d", modes[k].label, b);
      worst = max_worst(worst, run_both(name, g, cp, gp, &in, label, low ? low_rtol : 0));
      eng_cuda_plan_stats_get(gp, &st);
      if (st.gemm_convs != 4 || st.fused_nodes != 5)
        fprintf(stderr, "%s %s: %llu Convs as GEMMs (want 4), %llu nodes fused (want 5)\n", name,
                label, (unsigned long long)st.gemm_convs, (unsigned long long)st.fused_nodes);
      CHECK_EQ_INT(st.gemm_convs, 4);
      CHECK_EQ_INT(st.fused_nodes, 5);
      io_free(&in);
    }
    printf("%s %s: %llu Convs as cuBLASLt GEMMs, %llu nodes fused, %llu NHWC, worst scaled error %.3g\n",
           name, modes[k].label, (unsigned long long)st.gemm_convs,
           (unsigned long long)st.fused_nodes, (unsigned long long)st.nhwc_nodes, worst);
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
  }
  eng_graph_destroy(g);
}

// g's CPU plan and its CUDA plan in FP32 (half 0) or FP16, both for MAXB;
// a failure is checked (and said, with name) and leaves that plan NULL.
static void plans_at(const eng_graph *g, const char *name, int half, eng_plan **cp, eng_cuda_plan **gp) {
  err e = {0};
  eng_cuda_opts o = {.precision = half ? ENG_PREC_FP16 : ENG_PREC_FP32};
  CHECK_EQ_INT(eng_plan_create(g, MAXB, cp, &e), 0);
  int rc = eng_cuda_plan_create(g, MAXB, 0, &o, gp, &e);
  if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
  CHECK_EQ_INT(rc, 0);
}

// --- GEMM epilogues on 3-D activations: mm3d_bias's three MatMuls ([B,S,K] x [K,N], one GEMM
// of M = B*S rows each) carry their bias Adds (written Add(bias, product) in the file; the load
// pass puts the product first so the Add runs in place on it), the second its residual Add too
// (cuBLASLt's C operand) and the third the Relu after it: 5 nodes fused, in FP32 and FP16, at
// every batch size and two sequence lengths. The exact-erf Gelu runs on its own in FP32 and in
// the first product's epilogue (cuBLASLt's tanh form) in FP16: 6 nodes fused there. The FP16 plan
// runs both LayerNorms (one with its Mean/InvStdDev outputs) in FP16. Values against the CPU
// plan, as everywhere here.
static void test_gemm_fusion(void) {
  eng_graph *g = load_model("mm3d_bias");
  if (!g) return;
  for (int half = 0; half < 2; half++) {
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    plans_at(g, "mm3d_bias", half, &cp, &gp);
    double worst = 0;
    for (int b = 1; cp && gp && b <= MAXB; b++)
      for (int seq = 0; seq < 2; seq++) {
        io_set in = {0};
        make_inputs(g, "mm3d_bias", b, seq ? 13 : 0, &in);
        char label[64];
        snprintf(label, sizeof label, "%s batch %d seq %lld", half ? "fp16" : "fp32", b,
                 (long long)in.t[0].dims[1]);
        worst = max_worst(worst, run_both("mm3d_bias", g, cp, gp, &in, label, half ? low_rtol : 0));
        eng_cuda_plan_stats st;
        eng_cuda_plan_stats_get(gp, &st);
        unsigned long long want = half ? 6 : 5;
        if (st.fused_nodes != want)
          fprintf(stderr, "mm3d_bias %s: %llu nodes fused, want %llu\n", label,
                  (unsigned long long)st.fused_nodes, want);
        CHECK_EQ_INT(st.fused_nodes, want);
        io_free(&in);
      }
    printf("mm3d_bias %s: %d nodes fused (3 bias Adds, the residual Add, 1 Relu%s), worst scaled error %.3g\n",
           half ? "fp16" : "fp32", half ? 6 : 5, half ? ", the Gelu" : "", worst);
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
  }
  eng_graph_destroy(g);
}

// --- attention with Q, K, V packed into one projection (engine/ops/attn/attn_qkv.c)

// attn_qkv (three projections merged) and attn_qkv_split (GPT's Split taken
// in), head size 64 (FP16: the tensor-core kernel reading Q, K, V at column
// offsets of one [B, S, 3E] product, rows 3E apart): the FP32 and FP16 plans
// against the CPU plan at every batch size and two sequence lengths.
static void test_qkv_merge(void) {
  static const char *const names[] = {"attn_qkv", "attn_qkv_split"};
  for (int m = 0; m < 2; m++) {
    eng_graph *g = load_model(names[m]);
    if (!g) continue;
    CHECK_EQ_INT(eng_graph_n_qkv_merged(g), 1);
    for (int half = 0; half < 2; half++) {
      eng_plan *cp = NULL;
      eng_cuda_plan *gp = NULL;
      plans_at(g, names[m], half, &cp, &gp);
      double worst = 0;
      for (int b = 1; cp && gp && b <= MAXB; b++)
        for (int seq = 0; seq < 2; seq++) {
          io_set in = {0};
          make_inputs(g, names[m], b, seq ? 64 : 0, &in);
          char label[64];
          snprintf(label, sizeof label, "%s batch %d seq %lld", half ? "fp16" : "fp32", b,
                   (long long)in.t[0].dims[1]);
          worst = max_worst(worst, run_both(names[m], g, cp, gp, &in, label, half ? low_rtol : 0));
          io_free(&in);
        }
      printf("%s %s: Q/K/V merged, worst scaled error %.3g\n", names[m], half ? "fp16" : "fp32",
             worst);
      eng_cuda_plan_destroy(gp);
      eng_plan_destroy(cp);
    }
    eng_graph_destroy(g);
  }
}

// --- GEMM autotuning in a plan (cuda_gemm.h, plan_cuda_slot.c capture_tuned)

// mm3d_bias (three MatMuls with bias, one adding a residual, a Relu; a
// dynamic sequence, so nothing is warmed at create) with every product timed
// (min_flops 1): graphs on two slots and plain launches, FP32 and FP16, each
// against the CPU plan. The first capture meets untimed shapes, so a tuning
// pass runs and the graph is captured again; slot 1 then takes slot 0's
// choices without timing. The plain plan times as it launches (a product
// adding its residual in place: in a pass before the next launch).
static void test_gemm_autotune(void) {
  eng_graph *g = load_model("mm3d_bias");
  if (!g) return;
  for (int mode = 0; mode < 4; mode++) {
    int half = mode & 1, plain = mode >> 1;
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    eng_cuda_opts o = {.precision = half ? ENG_PREC_FP16 : ENG_PREC_FP32, .n_slots = 2, .no_graphs = plain,
                       .gemm_tune_min_flops = 1};
    const char *label = plain ? (half ? "fp16 plain" : "fp32 plain") : (half ? "fp16 graphs" : "fp32 graphs");
    CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e);
    if (rc) fprintf(stderr, "mm3d_bias autotune %s: cuda create: %s\n", label, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (!cp || !gp) goto next;
    double worst = 0;
    io_set in = {0};
    make_inputs(g, "mm3d_bias", MAXB, 0, &in);
    eng_cuda_plan_stats s1, st;
    for (int rep = 0; rep < 3; rep++) {
      char what[64];
      snprintf(what, sizeof what, "autotune %s rep %d", label, rep);
      worst = max_worst(worst, run_both("mm3d_bias", g, cp, gp, &in, what, half ? low_rtol : 0));
      eng_cuda_plan_stats_get(gp, &s1);
      if (rep == 0 && !plain) {  // all three timed before the graph that holds them was captured
        CHECK_EQ_INT(s1.gemm_tuned, 3);
        CHECK(s1.gemm_tune_passes >= 1);
        CHECK_EQ_INT(s1.graphs_captured, 1);
      }
    }
    CHECK_EQ_INT(s1.gemm_tuned, 3);  // plain too, by the third launch
    CHECK(s1.gemm_tune_ns > 0);
    CHECK(s1.gemm_best_ns <= s1.gemm_first_ns);
    // slot 1, same signature: slot 0's choices, nothing timed
    eng_tensor go[MAX_IO];
    size_t n_out = eng_graph_n_outputs(g);
    CHECK_EQ_INT(eng_cuda_plan_submit(gp, 1, in.t, in.n, &e), 0);
    CHECK_EQ_INT(eng_cuda_plan_finish(gp, 1, go, n_out, NULL, &e), 0);
    eng_cuda_plan_stats_get(gp, &st);
    CHECK_EQ_INT(st.gemm_tuned, s1.gemm_tuned);
    CHECK_EQ_INT(st.gemm_tune_passes, s1.gemm_tune_passes);
    if (!plain) CHECK_EQ_INT(st.plain_launches, 0);
    printf("mm3d_bias autotune %s: %llu shapes timed in %.1f ms (%llu tuning passes, %llu improved), "
           "worst scaled error %.3g\n",
           label, (unsigned long long)st.gemm_tuned, (double)st.gemm_tune_ns / 1e6,
           (unsigned long long)st.gemm_tune_passes, (unsigned long long)st.gemm_tune_improved, worst);
    io_free(&in);
  next:
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
  }
  // off: nothing timed
  {
    eng_cuda_plan *gp = NULL;
    err e = {0};
    eng_cuda_opts o = {.no_gemm_autotune = 1, .gemm_tune_min_flops = 1};
    CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e), 0);
    if (gp) {
      io_set in = {0};
      make_inputs(g, "mm3d_bias", 2, 0, &in);
      eng_tensor go[MAX_IO];
      CHECK_EQ_INT(eng_cuda_plan_run(gp, in.t, in.n, go, eng_graph_n_outputs(g), &e), 0);
      eng_cuda_plan_stats st;
      eng_cuda_plan_stats_get(gp, &st);
      CHECK_EQ_INT(st.gemm_tuned, 0);
      CHECK_EQ_INT(st.gemm_tune_passes, 0);
      io_free(&in);
    }
    eng_cuda_plan_destroy(gp);
  }
  eng_graph_destroy(g);
}

// --- what the CUDA plan cannot run is refused at load, by name

static void test_refusals(void) {
  // Pad's constant_value computed from the data: the planner never reads it, so the GPU side
  // (which takes it on the host) cannot know it
  eng_graph *g = load_model("pad_runtime_value");
  if (g) {
    eng_cuda_plan *gp = NULL;
    err e = {0};
    CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, NULL, &gp, &e), ERR_UNIMPLEMENTED);
    CHECK(gp == NULL);
    CHECK_CONTAINS(e.msg, "pad_by_max");
    CHECK_CONTAINS(e.msg, "constant_value ('mx') must be a constant");
    printf("pad_runtime_value refused: %s\n", e.msg);
    eng_graph_destroy(g);
  }
}

// --- a CUDA error fails the batch; the plan works after

static void test_fault(void) {
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

// --- main

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

static void test_shared_weights(void) {
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
  test_refusals();
  test_fault();
  test_shared_weights();
  CHECK_DONE();
}
