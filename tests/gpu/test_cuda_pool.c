// tests/gpu/test_cuda_pool.c: the cuDNN pooling plans (engine/cuda/cuda_pool.c)
// against the double-precision reference in conv_ref.h: max and average
// pooling with asymmetric pads, ceil_mode and count_include_pad both ways,
// global average and max, NCHW and NHWC, FP32 and FP16, two replayed from a
// captured CUDA graph. Host-side checks (output sizes the ONNX way) run
// everywhere first. Part of the test_cuda_conv binary (main() in
// test_cuda_conv.c).
//
// Error measure: absolute (inputs in [-1, 1]) <= 1e-5 (FP32), 2e-3 (FP16).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "conv_ref.h"
#include "engine/cuda/cuda_conv.h"
#include "test_cuda_conv_util.h"

// --- host-side checks

void pool_host_checks(void) {
  err e = {0};
  int ho = 0, wo = 0;
  // pooling sizes the ONNX way
  eng_cupool_desc q = {.n = 1, .c = 1, .h = 112, .w = 112, .kh = 3, .kw = 3, .pad_top = 1,
                       .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2};
  CHECK_EQ_INT(eng_cupool_out_dims(&q, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 56);
  q = (eng_cupool_desc){.n = 1, .c = 1, .h = 15, .w = 15, .kh = 2, .kw = 2, .stride_h = 2,
                        .stride_w = 2, .ceil_mode = true};
  CHECK_EQ_INT(eng_cupool_out_dims(&q, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 8);
  q.ceil_mode = false;
  CHECK_EQ_INT(eng_cupool_out_dims(&q, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 7);
  // ceil_mode's last window would start in the padding: dropped
  q = (eng_cupool_desc){.n = 1, .c = 1, .h = 5, .w = 5, .kh = 2, .kw = 2, .pad_top = 1,
                        .pad_bottom = 1, .stride_h = 2, .stride_w = 2, .ceil_mode = true};
  CHECK_EQ_INT(eng_cupool_out_dims(&q, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 3);
  q = (eng_cupool_desc){.n = 2, .c = 3, .h = 7, .w = 9, .global = true};
  CHECK_EQ_INT(eng_cupool_out_dims(&q, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho * 100 + wo, 101);
  CHECK_EQ_INT(eng_cupool_y_bytes(&q), 2 * 3 * 4);
}

// --- pooling cases

typedef struct pool_case {
  const char *name;
  eng_cupool_desc d;
} pool_case;

#define POOL(nm, ...) {.name = nm, .d = {__VA_ARGS__}}
static pool_case pool_cases[] = {
    POOL("max 3x3 s2 p1", .n = 2, .c = 8, .h = 16, .w = 16, .kh = 3, .kw = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2),
    POOL("max 3x3 s1 p1", .n = 1, .c = 4, .h = 9, .w = 7, .kh = 3, .kw = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1),
    POOL("max 2x2 s2 ceil", .n = 2, .c = 4, .h = 15, .w = 15, .kh = 2, .kw = 2, .stride_h = 2,
         .stride_w = 2, .ceil_mode = true),
    POOL("max 3x3 s2 ceil p1", .n = 1, .c = 4, .h = 10, .w = 11, .kh = 3, .kw = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2, .ceil_mode = true),
    POOL("max 3x3 s2 pads(1,0,0,1)", .n = 2, .c = 4, .h = 9, .w = 9, .kh = 3, .kw = 3, .pad_top = 1,
         .pad_right = 1, .stride_h = 2, .stride_w = 2),
    POOL("avg-incl 3x3 s2 p1", .n = 2, .c = 8, .h = 14, .w = 14, .kh = 3, .kw = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2,
         .mode = ENG_CUPOOL_AVG_INCLUDE_PAD),
    POOL("avg-excl 3x3 s2 p1", .n = 2, .c = 8, .h = 14, .w = 14, .kh = 3, .kw = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2,
         .mode = ENG_CUPOOL_AVG_EXCLUDE_PAD),
    POOL("avg-incl 3x3 s2 pads(0,0,1,1)", .n = 1, .c = 4, .h = 10, .w = 10, .kh = 3, .kw = 3,
         .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2, .mode = ENG_CUPOOL_AVG_INCLUDE_PAD),
    POOL("avg-excl 3x3 s2 pads(0,0,1,1)", .n = 1, .c = 4, .h = 10, .w = 10, .kh = 3, .kw = 3,
         .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2, .mode = ENG_CUPOOL_AVG_EXCLUDE_PAD),
    POOL("avg-incl 3x3 s2 p1 ceil", .n = 1, .c = 4, .h = 10, .w = 10, .kh = 3, .kw = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2,
         .ceil_mode = true, .mode = ENG_CUPOOL_AVG_INCLUDE_PAD),
    POOL("avg-excl 2x2 s2 ceil", .n = 1, .c = 4, .h = 7, .w = 9, .kh = 2, .kw = 2, .stride_h = 2,
         .stride_w = 2, .ceil_mode = true, .mode = ENG_CUPOOL_AVG_EXCLUDE_PAD),
    POOL("global avg 7x7", .n = 2, .c = 32, .h = 7, .w = 7, .global = true, .mode = ENG_CUPOOL_AVG_EXCLUDE_PAD),
    POOL("global max 5x6", .n = 2, .c = 8, .h = 5, .w = 6, .global = true, .mode = ENG_CUPOOL_MAX),
};

static void pool_one(eng_cudnn *h, cudaStream_t st, const pool_case *pc, eng_cuconv_layout l,
                     eng_cuconv_dtype dt, bool capture) {
  eng_cupool_desc d = pc->d;
  d.layout = l;
  d.dtype = dt;
  char what[160];
  snprintf(what, sizeof what, "pool %-30s %s %s%s", pc->name, l == ENG_CUCONV_NHWC ? "NHWC" : "NCHW",
           eng_cuconv_dtype_name(dt), capture ? " (graph)" : "");
  err e = {0};
  int ho, wo;
  if (eng_cupool_out_dims(&d, &ho, &wo, &e)) {
    CHECK_FAIL_("%s: %s", what, e.msg);
    return;
  }
  eng_cupool_plan *p = NULL;
  if (eng_cupool_plan_create(&p, h, &d, &e)) {
    CHECK_FAIL_("%s: plan: %s", what, e.msg);
    return;
  }
  size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * ho * wo;
  float *x = rand_buf(nx, dt == ENG_CUCONV_FP16);
  double *ref = malloc(ny * sizeof *ref);
  ref_pool(&d, ho, wo, x, ref);
  void *dx = to_dev(x, d.n, d.c, d.h, d.w, l, dt), *dy = NULL, *ws = NULL;
  TC(cudaMalloc(&dy, eng_cupool_y_bytes(&d)));
  TC(cudaMemset(dy, 0, eng_cupool_y_bytes(&d)));
  size_t wsb = eng_cupool_plan_workspace(p);
  if (wsb) TC(cudaMalloc(&ws, wsb));
  int rc;
  if (!capture) {
    rc = eng_cupool_run(p, h, st, dx, dy, ws, wsb, &e);
  } else {
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    TC(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    rc = eng_cupool_run(p, h, st, dx, dy, ws, wsb, &e);
    cudaError_t ce = cudaStreamEndCapture(st, &g);
    if (!rc && ce != cudaSuccess) rc = err_set(&e, ERR_INTERNAL, "end capture: %s", cudaGetErrorString(ce));
    if (!rc) {
      TC(cudaGraphInstantiate(&ge, g, 0));
      TC(cudaGraphLaunch(ge, st));
      cudaGraphExecDestroy(ge);
    }
    if (g) cudaGraphDestroy(g);
  }
  check_count_++;
  if (rc) CHECK_FAIL_("%s: run: %s", what, e.msg);
  TC(cudaStreamSynchronize(st));
  float *y = from_dev(dy, d.n, d.c, ho, wo, l, dt);
  double tol = dt == ENG_CUCONV_FP16 ? 2e-3 : 1e-5, worst = 0;
  size_t bad = 0, wi = 0;
  for (size_t i = 0; i < ny; i++) {
    double ae = fabs((double)y[i] - ref[i]);
    if (!(ae <= tol)) bad++;
    if (!(ae <= worst)) worst = ae, wi = i;
  }
  check_count_++;
  if (bad)
    CHECK_FAIL_("%s: %zu of %zu off; worst [%zu] %.6g vs %.6g", what, bad, ny, wi, (double)y[wi], ref[wi]);
  eng_cupool_info in;
  eng_cupool_plan_info(p, &in);
  printf("%s: out %dx%d%s%s ws %6zu  max abs err %.2e\n", what, ho, wo, in.explicit_pad ? " +pad" : "",
         in.rescaled ? " +rescale" : "", in.workspace_bytes, worst);
  free(x), free(ref), free(y);
  cudaFree(dx), cudaFree(dy), cudaFree(ws);
  eng_cupool_plan_destroy(p);
}

void pool_tests(eng_cudnn *h, cudaStream_t st, int only) {
  for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
    for (int l = 0; l < 2 && (only < 0 || (int)i == only); l++)
      for (int t = 0; t < 2; t++)
        pool_one(h, st, &pool_cases[i], l ? ENG_CUCONV_NHWC : ENG_CUCONV_NCHW,
                 t ? ENG_CUCONV_FP16 : ENG_CUCONV_FP32, false);
  if (only >= 0) return;
  // padded, rescaled average from a graph
  pool_one(h, st, &pool_cases[10], ENG_CUCONV_NHWC, ENG_CUCONV_FP16, true);
  pool_one(h, st, &pool_cases[4], ENG_CUCONV_NCHW, ENG_CUCONV_FP32, true);
}
