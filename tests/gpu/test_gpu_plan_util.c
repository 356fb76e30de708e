// tests/gpu/test_gpu_plan_util.c: the pieces the files of the test_gpu_plan
// binary share (test_gpu_plan_util.h): check.h's counters, the models folder,
// seeded random inputs shaped by a model's case file, and the comparison of
// the CUDA plan's outputs with the CPU plan's (the error measure in
// test_gpu_plan.c's header).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/k_ref.h"
#include "test_gpu_plan_util.h"

// check.h's counters, one pair for the binary's files (CHECK_SHARED)
int check_failures_ = 0;
int check_count_ = 0;

const char *models_dir;  // set by main()
// Bound of the FP16 and TF32 plans against the FP32 CPU plan (scaled, as compare()).
double low_rtol = 1e-2;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) {  // uniform in [-1, 1)
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

// --- inputs

void io_free(io_set *s) {
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
void make_inputs(const eng_graph *g, const char *name, int batch, int64_t dim1, io_set *s) {
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
void copy_outputs(const eng_tensor *o, size_t n, io_set *s) {
  s->n = n;
  for (size_t j = 0; j < n; j++) {
    s->t[j] = o[j];
    s->t[j].data = malloc(o[j].bytes ? o[j].bytes : 1);
    CHECK(s->t[j].data != NULL);
    if (o[j].bytes) memcpy(s->t[j].data, o[j].data, o[j].bytes);
  }
}

// --- comparison

double elem(const eng_tensor *t, size_t k) {
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
    case DT_INT8: return ((const int8_t *)t->data)[k];
    default: return NAN;
  }
}

static int is_int(dtype d) { return d != DT_FP32 && d != DT_FP64 && d != DT_FP16 && d != DT_BF16; }

// Returns the largest scaled error (error / bound * rtol) and counts
// elements over the bound into *bad.
double compare(const char *what, const eng_tensor *cpu, const eng_tensor *gpu, double rtol,
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
  for (size_t k = 0; k < n; k++) mean += isfinite(elem(cpu, k)) ? fabs(elem(cpu, k)) : 0;
  mean = n ? mean / (double)n : 0;
  for (size_t k = 0; k < n; k++) {
    double c = elem(cpu, k), g = elem(gpu, k), diff = fabs(g - c);
    double bound = is_int(cpu->dt) ? 0 : rtol * (fabs(c) + mean);
    // an infinity (an empty set's Max or LogSumExp) must be the same one
    int ok = is_int(cpu->dt) ? g == c
                             : (isfinite(g) && diff <= bound) || (isnan(c) && isnan(g)) || (isinf(c) && g == c);
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

double out_rtol(const char *model, size_t j, dtype dt) {
  if (dt == DT_FP16) return 1e-3;
  if (strcmp(model, "bn_cast") == 0 && j == 0) return 1e-3;  // FP16 round trip inside
  return 1e-5;
}

// Runs both plans on `in` and compares every output; returns the worst scaled error.
// rtol_min: a floor on the per-output bound (0: out_rtol's own)
double run_both(const char *model, const eng_graph *g, eng_plan *cp, eng_cuda_plan *gp,
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

eng_graph *load_model(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", models_dir, name);
  eng_graph *g = NULL;
  err e = {0};
  if (eng_graph_load(path, &g, &e) != 0) fprintf(stderr, "load %s: %s\n", path, e.msg);
  CHECK(g != NULL);
  return g;
}

int batch_of(const eng_graph *g) {
  for (size_t i = 0; i < eng_graph_n_inputs(g); i++) {
    const eng_io *io = eng_graph_input(g, i);
    if (io->ndims > 0 && io->dims[0] < 0) return MAXB;
  }
  return 0;
}

double max_worst(double a, double b) { return a > b ? a : b; }

// Worst scaled error of the GPU outputs against the CPU's; integer outputs
// must match exactly except where a float rounded differently decides them
// (counted in *int_flips, reported, bounded by the caller).
double compare_set(const char *what, const io_set *cpu, const eng_tensor *gpu, double rtol) {
  double worst = 0;
  for (size_t j = 0; j < cpu->n; j++) {
    char w[200];
    size_t bad;
    snprintf(w, sizeof w, "%s out%zu", what, j);
    worst = max_worst(worst, compare(w, &cpu->t[j], &gpu[j], rtol, &bad));
  }
  return worst;
}
