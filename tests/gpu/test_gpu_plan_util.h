// tests/gpu/test_gpu_plan_util.h: what the files of the test_gpu_plan binary
// share: test_gpu_plan.c (main, every model of the case file through every
// plan mode), test_gpu_plan_run.c (the plan in service: allocation, threads,
// refusals, faults, shared weights), test_gpu_plan_ops.c (the conv family and
// the GEMM routes). test_gpu_plan_util.c defines the pieces below once: the
// models folder, random inputs (one seeded sequence, drawn from in the order
// main() runs the parts), the CPU/GPU comparison; the checks count into
// check.h's one pair of counters (CHECK_SHARED).
#ifndef INFERD_TESTS_GPU_TEST_GPU_PLAN_UTIL_H
#define INFERD_TESTS_GPU_TEST_GPU_PLAN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef INFERD_TESTS_CHECK_H
#error "check.h included before test_gpu_plan_util.h: this file would count on its own"
#endif
#define CHECK_SHARED 1
#include "check.h"
#include "engine/cpu/plan.h"
#include "engine/cuda/plan_cuda.h"
#include "engine/graph/graph.h"

enum { MAXB = 4, MAX_IO = 16 };  // MAX_IO: cuda_issue34 has 13 outputs

// --- test_gpu_plan_util.c

extern const char *models_dir;  // set by main()
// Bound of the FP16 and TF32 plans against the FP32 CPU plan (scaled, as compare()).
extern double low_rtol;

typedef struct io_set {
  size_t n;
  eng_tensor t[MAX_IO];
} io_set;

void io_free(io_set *s);
// Random inputs of the graph's declared types: the case file's shapes with
// dim 0 set to batch when batch > 0, and dim 1 set to dim1 when > 0.
void make_inputs(const eng_graph *g, const char *name, int batch, int64_t dim1, io_set *s);
// Deep copy of outputs (the plans' own memory is valid only until the next run).
void copy_outputs(const eng_tensor *o, size_t n, io_set *s);
double elem(const eng_tensor *t, size_t k);
// Returns the largest scaled error (error / bound * rtol) and counts
// elements over the bound into *bad.
double compare(const char *what, const eng_tensor *cpu, const eng_tensor *gpu, double rtol, size_t *bad);
double out_rtol(const char *model, size_t j, dtype dt);
// Runs both plans on `in` and compares every output; returns the worst scaled error.
// rtol_min: a floor on the per-output bound (0: out_rtol's own)
double run_both(const char *model, const eng_graph *g, eng_plan *cp, eng_cuda_plan *gp, const io_set *in,
                const char *label, double rtol_min);
eng_graph *load_model(const char *name);
int batch_of(const eng_graph *g);
double max_worst(double a, double b);
// Worst scaled error of the GPU outputs against the CPU's.
double compare_set(const char *what, const io_set *cpu, const eng_tensor *gpu, double rtol);

// --- the parts main() runs after its own test_models, test_modes

// test_gpu_plan_run.c
void test_no_alloc(const char *name, int grow);
void test_threads(void);
void test_host_refused_mode(void);
void test_fault(void);
void test_shared_weights(void);
// test_gpu_plan_ops.c
void test_conv(void);
void test_conv_gemm(void);
void test_gemm_fusion(void);
void test_qkv_merge(void);
void test_gemm_autotune(void);
void test_host_fallback(void);
void test_device_paths(void);

#endif
