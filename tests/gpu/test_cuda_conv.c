// tests/gpu/test_cuda_conv.c: the cuDNN convolution plans
// (engine/cuda/cuda_conv.c) against the double-precision references in
// conv_ref.h: 1x1, 3x3, strides, dilation, groups, depthwise, asymmetric
// pads, ResNet's 7x7 stem, 1-D, every epilogue (bias, residual, in-place
// residual, relu, clip, sigmoid, tanh, swish), NCHW and NHWC, FP32 (TF32
// off) and FP16, one replayed from a captured CUDA graph. Host-side checks
// (shapes, weight packing, argument validation) run everywhere first.
// Also main() of the test_cuda_conv binary, whose other files are
// test_cuda_deconv.c (transposed convolutions) and test_cuda_pool.c
// (pooling); what they share is in test_cuda_conv_util.c.
//
// Error measure for convolutions: an element is a sum of terms, and can only
// be as exact as the sum of their magnitudes, so each error is divided by
// mag = sum |x w| + |bias| + |z| (at least 1): <= 1e-4 (FP32), 1e-2 (FP16).
//
// `test_cuda_conv --bench` (or --bench-only) also times a ResNet-50 3x3 convolution (N=32,
// C=K=256, 14x14, bias+relu) in each layout and type.
#include <execinfo.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conv_ref.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv.h"
#include "test_cuda_conv_util.h"

// --- host-side checks

static void host_checks(void) {
  err e = {0};
  int ho = 0, wo = 0;
  eng_cuconv_desc d = {.n = 1, .c = 3, .h = 224, .w = 224, .k = 64, .r = 7, .s = 7, .pad_top = 3,
                       .pad_left = 3, .pad_bottom = 3, .pad_right = 3, .stride_h = 2, .stride_w = 2};
  CHECK_EQ_INT(eng_cuconv_out_dims(&d, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 112);
  CHECK_EQ_INT(wo, 112);
  d = (eng_cuconv_desc){.n = 1, .c = 8, .h = 10, .w = 10, .k = 8, .r = 3, .s = 3, .pad_bottom = 1,
                        .pad_right = 1, .stride_h = 2, .stride_w = 2, .groups = 8};
  CHECK_EQ_INT(eng_cuconv_out_dims(&d, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 5);
  CHECK_EQ_INT(eng_cuconv_w_bytes(&d), 8 * 1 * 3 * 3 * 4);
  d.groups = 3;
  CHECK_EQ_INT(eng_cuconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "groups");
  d.groups = 1;
  d.r = 20;
  CHECK_EQ_INT(eng_cuconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);
  d.r = 3;
  d.act = ENG_CUCONV_ACT_CLIP;
  CHECK_EQ_INT(eng_cuconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "clip_max");
  d.act = ENG_CUCONV_ACT_HARD_SIGMOID, d.act_alpha = NAN, d.act_beta = 0.5f;
  CHECK_EQ_INT(eng_cuconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "hard_sigmoid");
  d.act = (eng_cuconv_act)(ENG_CUCONV_ACT_HARD_SWISH + 1);
  CHECK_EQ_INT(eng_cuconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);

  // packing: KRSC puts c innermost; fp16 rounds
  eng_cuconv_desc p = {.n = 1, .c = 4, .h = 5, .w = 5, .k = 2, .r = 3, .s = 2, .groups = 2,
                       .layout = ENG_CUCONV_NHWC};
  float w[2 * 2 * 3 * 2], got[2 * 2 * 3 * 2];
  for (int i = 0; i < 24; i++) w[i] = (float)i;
  CHECK_EQ_INT(eng_cuconv_pack_weights(&p, w, got, sizeof got - 1, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_cuconv_pack_weights(&p, w, got, sizeof got, &e), 0);
  for (int k = 0; k < 2; k++)
    for (int c = 0; c < 2; c++)
      for (int r = 0; r < 3; r++)
        for (int s = 0; s < 2; s++)
          CHECK_EQ_INT(got[((k * 3 + r) * 2 + s) * 2 + c], w[((k * 2 + c) * 3 + r) * 2 + s]);
  p.layout = ENG_CUCONV_NCHW;
  p.dtype = ENG_CUCONV_FP16;
  uint16_t h16[24];
  CHECK_EQ_INT(eng_cuconv_pack_weights(&p, w, h16, sizeof h16, &e), 0);
  CHECK_EQ_INT(h16[1], 0x3c00);   // 1.0
  CHECK_EQ_INT(h16[23], 0x4dc0);  // 23.0
  float b[2] = {0.5f, -2.0f};
  uint16_t b16[2];
  CHECK_EQ_INT(eng_cuconv_pack_bias(&p, b, b16, sizeof b16, &e), 0);
  CHECK_EQ_INT(b16[0], 0x3800);
  CHECK_EQ_INT(b16[1], 0xc000);
}

// --- convolution cases

typedef struct conv_case {
  const char *name;
  eng_cuconv_desc d;  // dtype and layout filled per run
  bool z_in_place;    // z is y (the residual is overwritten by the result)
} conv_case;

#define CONV(nm, ...) {.name = nm, .d = {__VA_ARGS__}}
static conv_case conv_cases[] = {
    CONV("1x1 bias", .n = 2, .c = 16, .h = 7, .w = 7, .k = 32, .r = 1, .s = 1, .has_bias = true),
    CONV("3x3 p1 bias+relu", .n = 2, .c = 8, .h = 9, .w = 10, .k = 16, .r = 3, .s = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .has_bias = true, .act = ENG_CUCONV_ACT_RELU),
    CONV("3x3 s2 p1 plain", .n = 2, .c = 8, .h = 10, .w = 11, .k = 8, .r = 3, .s = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2),
    CONV("3x3 dil2 p2 bias", .n = 1, .c = 4, .h = 12, .w = 11, .k = 8, .r = 3, .s = 3, .pad_top = 2,
         .pad_left = 2, .pad_bottom = 2, .pad_right = 2, .dil_h = 2, .dil_w = 2, .has_bias = true),
    CONV("3x3 groups2 bias+relu", .n = 2, .c = 8, .h = 8, .w = 8, .k = 12, .r = 3, .s = 3,
         .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .groups = 2, .has_bias = true,
         .act = ENG_CUCONV_ACT_RELU),
    CONV("dw3x3 bias+relu6", .n = 2, .c = 16, .h = 10, .w = 10, .k = 16, .r = 3, .s = 3,
         .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .groups = 16,
         .has_bias = true, .act = ENG_CUCONV_ACT_CLIP, .clip_max = 6.0f),
    CONV("dw3x3 s2 SAME(0,0,1,1) bias+swish", .n = 2, .c = 8, .h = 10, .w = 10, .k = 8, .r = 3,
         .s = 3, .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2, .groups = 8,
         .has_bias = true, .act = ENG_CUCONV_ACT_SWISH),
    CONV("3x3 pads(1,0,2,1) bias+z+relu", .n = 1, .c = 4, .h = 7, .w = 9, .k = 8, .r = 3, .s = 3,
         .pad_top = 1, .pad_left = 0, .pad_bottom = 2, .pad_right = 1, .has_bias = true,
         .has_z = true, .act = ENG_CUCONV_ACT_RELU),
    CONV("7x7 s2 p3 stem bias+relu", .n = 2, .c = 3, .h = 32, .w = 30, .k = 16, .r = 7, .s = 7,
         .pad_top = 3, .pad_left = 3, .pad_bottom = 3, .pad_right = 3, .stride_h = 2, .stride_w = 2,
         .has_bias = true, .act = ENG_CUCONV_ACT_RELU),
    CONV("3x3 p1 bias+z+relu", .n = 2, .c = 16, .h = 8, .w = 8, .k = 16, .r = 3, .s = 3,
         .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .has_bias = true,
         .has_z = true, .act = ENG_CUCONV_ACT_RELU),
    {.name = "1x1 bias+z(in place)+relu", .z_in_place = true,
     .d = {.n = 2, .c = 32, .h = 7, .w = 7, .k = 16, .r = 1, .s = 1, .has_bias = true, .has_z = true,
           .act = ENG_CUCONV_ACT_RELU}},
    CONV("1x1 bias+sigmoid", .n = 2, .c = 8, .h = 5, .w = 5, .k = 8, .r = 1, .s = 1, .has_bias = true,
         .act = ENG_CUCONV_ACT_SIGMOID),
    CONV("1x1 bias+hard_swish", .n = 2, .c = 16, .h = 6, .w = 5, .k = 24, .r = 1, .s = 1,
         .has_bias = true, .act = ENG_CUCONV_ACT_HARD_SWISH),
    CONV("3x3 p1 z+hard_sigmoid(0.3, 0.4)", .n = 2, .c = 8, .h = 7, .w = 7, .k = 8, .r = 3, .s = 3,
         .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .has_z = true,
         .act = ENG_CUCONV_ACT_HARD_SIGMOID, .act_alpha = 0.3f, .act_beta = 0.4f),
    CONV("dw5x5 s2 p2 bias+hard_swish", .n = 2, .c = 16, .h = 11, .w = 9, .k = 16, .r = 5, .s = 5,
         .pad_top = 2, .pad_left = 2, .pad_bottom = 2, .pad_right = 2, .stride_h = 2, .stride_w = 2,
         .groups = 16, .has_bias = true, .act = ENG_CUCONV_ACT_HARD_SWISH),
    CONV("3x3 p1 tanh", .n = 1, .c = 8, .h = 6, .w = 6, .k = 8, .r = 3, .s = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .act = ENG_CUCONV_ACT_TANH),
    CONV("1-D k3 p1 bias+relu", .n = 2, .c = 4, .h = 1, .w = 20, .k = 8, .r = 1, .s = 3,
         .pad_left = 1, .pad_right = 1, .has_bias = true, .act = ENG_CUCONV_ACT_RELU),
    CONV("3x3 p1 bias only", .n = 2, .c = 8, .h = 8, .w = 8, .k = 16, .r = 3, .s = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .has_bias = true),
    CONV("3x3 p1 z only", .n = 1, .c = 8, .h = 8, .w = 8, .k = 8, .r = 3, .s = 3, .pad_top = 1,
         .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .has_z = true),
    CONV("3x3 pads(0,1,1,0) relu", .n = 2, .c = 8, .h = 9, .w = 9, .k = 8, .r = 3, .s = 3,
         .pad_left = 1, .pad_bottom = 1, .act = ENG_CUCONV_ACT_RELU),
};

// Everything one convolution run needs, on host and device.
typedef struct conv_run {
  eng_cuconv_desc d;
  int ho, wo;
  float *x, *w, *bias, *z;
  double *ref, *mag;
  void *dx, *dw, *db, *dz, *dy, *ws;
  size_t ws_bytes;
  eng_cuconv_plan *plan;
} conv_run;

static int conv_setup(conv_run *cr, const conv_case *cc, eng_cuconv_layout l, eng_cuconv_dtype dt,
                      eng_cudnn *h, eng_cuconv_search search) {
  memset(cr, 0, sizeof *cr);
  cr->d = cc->d;
  cr->d.layout = l;
  cr->d.dtype = dt;
  const eng_cuconv_desc *d = &cr->d;
  err e = {0};
  if (eng_cuconv_out_dims(d, &cr->ho, &cr->wo, &e)) {
    CHECK_FAIL_("%s: %s", cc->name, e.msg);
    return -1;
  }
  bool f16 = dt == ENG_CUCONV_FP16;
  int g = d->groups ? d->groups : 1;
  size_t nx = (size_t)d->n * d->c * d->h * d->w, nw = (size_t)d->k * (d->c / g) * d->r * d->s;
  size_t ny = (size_t)d->n * d->k * cr->ho * cr->wo;
  cr->x = rand_buf(nx, f16);
  cr->w = rand_buf(nw, f16);
  cr->bias = d->has_bias ? rand_buf((size_t)d->k, f16) : NULL;
  cr->z = d->has_z ? rand_buf(ny, f16) : NULL;
  cr->ref = malloc(ny * sizeof *cr->ref);
  cr->mag = malloc(ny * sizeof *cr->mag);
  ref_conv(d, cr->ho, cr->wo, cr->x, cr->w, cr->bias, cr->z, cr->ref, cr->mag);
  eng_cuconv_opts o = {.search = search};
  if (eng_cuconv_plan_create(&cr->plan, h, d, &o, &e)) {
    CHECK_FAIL_("%s %s %s: plan: %s", cc->name, l == ENG_CUCONV_NHWC ? "NHWC" : "NCHW",
                eng_cuconv_dtype_name(dt), e.msg);
    return -1;
  }
  cr->dx = to_dev(cr->x, d->n, d->c, d->h, d->w, l, dt);
  size_t wb = eng_cuconv_w_bytes(d);
  void *wh = malloc(wb);
  CHECK_EQ_INT(eng_cuconv_pack_weights(d, cr->w, wh, wb, &e), 0);
  cr->dw = dev_copy(wh, wb);
  free(wh);
  if (cr->bias) {
    size_t bb = eng_cuconv_bias_bytes(d);
    void *bh = malloc(bb);
    CHECK_EQ_INT(eng_cuconv_pack_bias(d, cr->bias, bh, bb, &e), 0);
    cr->db = dev_copy(bh, bb);
    free(bh);
  }
  if (cr->z) cr->dz = to_dev(cr->z, d->n, d->k, cr->ho, cr->wo, l, dt);
  if (cc->z_in_place) cr->dy = cr->dz;
  else TC(cudaMalloc(&cr->dy, eng_cuconv_y_bytes(d)));
  cr->ws_bytes = eng_cuconv_plan_workspace(cr->plan);
  if (cr->ws_bytes) TC(cudaMalloc(&cr->ws, cr->ws_bytes));
  return 0;
}

static void conv_teardown(conv_run *cr) {
  eng_cuconv_plan_destroy(cr->plan);
  if (cr->dy != cr->dz) cudaFree(cr->dy);
  cudaFree(cr->dx), cudaFree(cr->dw), cudaFree(cr->db), cudaFree(cr->dz), cudaFree(cr->ws);
  free(cr->x), free(cr->w), free(cr->bias), free(cr->z), free(cr->ref), free(cr->mag);
}

// Compares the device's y with the reference; returns the worst relative error.
static double conv_compare(const conv_run *cr, const char *what, double tol) {
  const eng_cuconv_desc *d = &cr->d;
  float *y = from_dev(cr->dy, d->n, d->k, cr->ho, cr->wo, d->layout, d->dtype);
  size_t ny = (size_t)d->n * d->k * cr->ho * cr->wo, bad = 0, worst_i = 0;
  double worst = 0;
  for (size_t i = 0; i < ny; i++) {
    double rel = fabs((double)y[i] - cr->ref[i]) / (cr->mag[i] > 1 ? cr->mag[i] : 1);
    if (!(rel <= tol)) bad++;
    if (!(rel <= worst)) worst = rel, worst_i = i;
  }
  check_count_++;
  if (bad)
    CHECK_FAIL_("%s: %zu of %zu elements off; worst [%zu] %.6g vs %.6g (rel %.3g, tol %.g)", what, bad,
                ny, worst_i, (double)y[worst_i], cr->ref[worst_i], worst, tol);
  free(y);
  return worst;
}

// only: -1 for every case (and the TF32, argument and graph checks), else one case
static void conv_tests(eng_cudnn *h, cudaStream_t st, int only) {
  const eng_cuconv_layout layouts[] = {ENG_CUCONV_NCHW, ENG_CUCONV_NHWC};
  const eng_cuconv_dtype dtypes[] = {ENG_CUCONV_FP32, ENG_CUCONV_FP16};
  for (size_t ci = 0; ci < sizeof conv_cases / sizeof conv_cases[0]; ci++) {
    if (only >= 0 && (int)ci != only) continue;
    for (int li = 0; li < 2; li++)
      for (int ti = 0; ti < 2; ti++) {
        const conv_case *cc = &conv_cases[ci];
        conv_run cr;
        // EXHAUSTIVE on a few, so both searches run
        eng_cuconv_search search = ci % 4 == 1 ? ENG_CUCONV_SEARCH_EXHAUSTIVE : ENG_CUCONV_SEARCH_HEURISTIC;
        char what[160];
        snprintf(what, sizeof what, "conv %-34s %s %s", cc->name,
                 layouts[li] == ENG_CUCONV_NHWC ? "NHWC" : "NCHW", eng_cuconv_dtype_name(dtypes[ti]));
        if (conv_setup(&cr, cc, layouts[li], dtypes[ti], h, search) == 0) {
          err e = {0};
          int rc = eng_cuconv_run(cr.plan, h, st, cr.dx, cr.dw, cr.db, cr.dz, cr.dy, cr.ws, cr.ws_bytes, &e);
          check_count_++;
          if (rc) CHECK_FAIL_("%s: run: %s", what, e.msg);
          TC(cudaStreamSynchronize(st));
          double tol = dtypes[ti] == ENG_CUCONV_FP16 ? 1e-2 : 1e-4;
          double worst = rc ? -1 : conv_compare(&cr, what, tol);
          eng_cuconv_info in;
          eng_cuconv_plan_info(cr.plan, &in);
          printf("%s: %-21s math %d %-5s%s ws %7zu cands %2d  max rel err %.2e\n", what, in.algo_name,
                 in.math, eng_cuconv_strategy_name(in.strategy), in.explicit_pad ? " +pad" : "     ",
                 in.workspace_bytes, in.candidates, worst);
          if (getenv("CONV_TEST_VERBOSE")) printf("  tried: %s\n", in.log);
        }
        conv_teardown(&cr);
      }
  }
  if (only >= 0) return;

  // TF32 allowed: same cases within FP16's bound (TF32 keeps 10 mantissa bits)
  for (int li = 0; li < 2; li++) {
    conv_run cr;
    const conv_case *cc = &conv_cases[9];
    if (conv_setup(&cr, cc, layouts[li], ENG_CUCONV_FP32_TF32, h, ENG_CUCONV_SEARCH_HEURISTIC) == 0) {
      err e = {0};
      CHECK_EQ_INT(eng_cuconv_run(cr.plan, h, st, cr.dx, cr.dw, cr.db, cr.dz, cr.dy, cr.ws, cr.ws_bytes, &e), 0);
      TC(cudaStreamSynchronize(st));
      eng_cuconv_info in;
      eng_cuconv_plan_info(cr.plan, &in);
      printf("conv %-34s %s fp32_tf32: %s math %d  max rel err %.2e\n", cc->name,
             li ? "NHWC" : "NCHW", in.algo_name, in.math, conv_compare(&cr, "tf32", 1e-2));
    }
    conv_teardown(&cr);
  }

  // argument checks on a real plan
  {
    conv_run cr;
    if (conv_setup(&cr, &conv_cases[7], ENG_CUCONV_NHWC, ENG_CUCONV_FP16, h, ENG_CUCONV_SEARCH_HEURISTIC) == 0) {
      err e = {0};
      CHECK_EQ_INT(eng_cuconv_run(cr.plan, h, st, cr.dx, cr.dw, NULL, cr.dz, cr.dy, cr.ws, cr.ws_bytes, &e),
                   ERR_INVALID_ARGUMENT);
      CHECK_CONTAINS(e.msg, "bias");
      CHECK(cr.ws_bytes > 0);  // asymmetric pads: the padded input lives there
      CHECK_EQ_INT(eng_cuconv_run(cr.plan, h, st, cr.dx, cr.dw, cr.db, cr.dz, cr.dy, cr.ws, cr.ws_bytes - 1, &e),
                   ERR_INVALID_ARGUMENT);
      CHECK_CONTAINS(e.msg, "workspace");

      // graph capture: the padded copy, the fused call, all in a graph
      cudaStream_t cs;
      TC(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
      TC(cudaMemset(cr.dy, 0, eng_cuconv_y_bytes(&cr.d)));
      cudaGraph_t g = NULL;
      cudaGraphExec_t ge = NULL;
      TC(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
      int rc = eng_cuconv_run(cr.plan, h, cs, cr.dx, cr.dw, cr.db, cr.dz, cr.dy, cr.ws, cr.ws_bytes, &e);
      cudaError_t ce = cudaStreamEndCapture(cs, &g);
      check_count_++;
      if (rc || ce != cudaSuccess)
        CHECK_FAIL_("conv graph capture: run %d (%s), end capture %s", rc, e.msg, cudaGetErrorString(ce));
      else {
        TC(cudaGraphInstantiate(&ge, g, 0));
        TC(cudaGraphLaunch(ge, cs));
        TC(cudaStreamSynchronize(cs));
        printf("conv graph replay: max rel err %.2e\n", conv_compare(&cr, "conv graph replay", 1e-2));
        cudaGraphExecDestroy(ge);
      }
      if (g) cudaGraphDestroy(g);
      // the run left cs set on the cuDNN handle: point it back at st before cs goes (the
      // transposed-conv plans save and restore the handle's stream; a destroyed one crashed them)
      CHECK_EQ_INT(eng_cuconv_run(cr.plan, h, st, cr.dx, cr.dw, cr.db, cr.dz, cr.dy, cr.ws, cr.ws_bytes, &e), 0);
      TC(cudaStreamSynchronize(st));
      cudaStreamDestroy(cs);
    }
    conv_teardown(&cr);
  }
}

// --- timing

static void bench(eng_cudnn *h, cudaStream_t st) {
  eng_cuconv_desc base = {.n = 32, .c = 256, .h = 14, .w = 14, .k = 256, .r = 3, .s = 3, .pad_top = 1,
                          .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .has_bias = true,
                          .act = ENG_CUCONV_ACT_RELU};
  double flop = 2.0 * 32 * 256 * 14 * 14 * 256 * 9;
  struct { eng_cuconv_dtype dt; eng_cuconv_layout l; } cfg[] = {
      {ENG_CUCONV_FP16, ENG_CUCONV_NHWC}, {ENG_CUCONV_FP16, ENG_CUCONV_NCHW},
      {ENG_CUCONV_FP32, ENG_CUCONV_NHWC}, {ENG_CUCONV_FP32, ENG_CUCONV_NCHW},
      {ENG_CUCONV_FP32_TF32, ENG_CUCONV_NHWC}, {ENG_CUCONV_FP32_TF32, ENG_CUCONV_NCHW}};
  printf("bench: 3x3 conv N=32 C=K=256 14x14 pad 1, bias+relu (%.2f GFLOP)\n", flop / 1e9);
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++)
    for (int s = 0; s < 2; s++) {
      eng_cuconv_desc d = base;
      d.dtype = cfg[i].dt;
      d.layout = cfg[i].l;
      eng_cuconv_opts o = {.search = s ? ENG_CUCONV_SEARCH_EXHAUSTIVE : ENG_CUCONV_SEARCH_HEURISTIC};
      eng_cuconv_plan *p = NULL;
      err e = {0};
      if (eng_cuconv_plan_create(&p, h, &d, &o, &e)) {
        printf("bench %s %s: plan failed: %s\n", eng_cuconv_dtype_name(d.dtype),
               d.layout ? "NHWC" : "NCHW", e.msg);
        continue;
      }
      void *x, *w, *b, *y, *ws = NULL;
      TC(cudaMalloc(&x, eng_cuconv_x_bytes(&d)));
      TC(cudaMalloc(&w, eng_cuconv_w_bytes(&d)));
      TC(cudaMalloc(&b, eng_cuconv_bias_bytes(&d)));
      TC(cudaMalloc(&y, eng_cuconv_y_bytes(&d)));
      TC(cudaMemset(x, 0, eng_cuconv_x_bytes(&d)));
      TC(cudaMemset(w, 0, eng_cuconv_w_bytes(&d)));
      TC(cudaMemset(b, 0, eng_cuconv_bias_bytes(&d)));
      size_t wsb = eng_cuconv_plan_workspace(p);
      if (wsb) TC(cudaMalloc(&ws, wsb));
      if (eng_cuconv_run(p, h, st, x, w, b, NULL, y, ws, wsb, &e)) {
        CHECK_FAIL_("bench run: %s", e.msg);
        continue;
      }
      for (int r = 0; r < 10; r++) eng_cuconv_run(p, h, st, x, w, b, NULL, y, ws, wsb, &e);
      cudaEvent_t e0, e1;
      TC(cudaEventCreate(&e0));
      TC(cudaEventCreate(&e1));
      const int reps = 100;
      TC(cudaEventRecord(e0, st));
      for (int r = 0; r < reps; r++) eng_cuconv_run(p, h, st, x, w, b, NULL, y, ws, wsb, &e);
      TC(cudaEventRecord(e1, st));
      TC(cudaEventSynchronize(e1));
      float ms = 0;
      TC(cudaEventElapsedTime(&ms, e0, e1));
      ms /= reps;
      // the same from a captured graph of 20 runs: GPU time without the
      // legacy API's per-call host cost (how the engine replays a plan)
      float gms = -1;
      cudaStream_t cs;
      TC(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
      cudaGraph_t g = NULL;
      cudaGraphExec_t ge = NULL;
      TC(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
      int grc = 0;
      for (int r = 0; r < 20 && !grc; r++) grc = eng_cuconv_run(p, h, cs, x, w, b, NULL, y, ws, wsb, &e);
      if (cudaStreamEndCapture(cs, &g) == cudaSuccess && !grc &&
          cudaGraphInstantiate(&ge, g, 0) == cudaSuccess) {
        TC(cudaGraphLaunch(ge, cs));
        TC(cudaStreamSynchronize(cs));
        TC(cudaEventRecord(e0, cs));
        for (int r = 0; r < 5; r++) TC(cudaGraphLaunch(ge, cs));
        TC(cudaEventRecord(e1, cs));
        TC(cudaEventSynchronize(e1));
        TC(cudaEventElapsedTime(&gms, e0, e1));
        gms /= 100;
      }
      if (ge) cudaGraphExecDestroy(ge);
      if (g) cudaGraphDestroy(g);
      cudaStreamDestroy(cs);
      eng_cuconv_info in;
      eng_cuconv_plan_info(p, &in);
      printf("bench %-9s %s %-10s: %7.3f ms %6.1f TFLOP/s (graph %7.3f ms)  %s math %d %s ws %zu (%d candidates)\n",
             eng_cuconv_dtype_name(d.dtype), d.layout ? "NHWC" : "NCHW",
             s ? "exhaustive" : "heuristic", ms, flop / (ms * 1e-3) / 1e12, (double)gms, in.algo_name, in.math,
             eng_cuconv_strategy_name(in.strategy), in.workspace_bytes, in.candidates);
      printf("  tried: %s\n", in.log);
      cudaEventDestroy(e0), cudaEventDestroy(e1);
      cudaFree(x), cudaFree(w), cudaFree(b), cudaFree(y), cudaFree(ws);
      eng_cuconv_plan_destroy(p);
    }
}

// A crash on the device machine (no debugger there) leaves its frames in the log: addresses to
// resolve with addr2line against the same build here.
static void on_crash(int sig) {
  void *frames[48];
  int n = backtrace(frames, 48);
  static const char msg[] = "crashed; frames:\n";
  (void)!write(2, msg, sizeof msg - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(int argc, char **argv) {
  signal(SIGSEGV, on_crash);
  signal(SIGFPE, on_crash);
  signal(SIGABRT, on_crash);
  // no argument: conv, transposed conv and pool tests; --conv, --tconv,
  // --pool, --bench-only: one part, --conv=N, --tconv=N, --pool=N: one case
  // (separate processes keep one part's crash out of the others); --bench:
  // the tests, then the timing
  const char *arg = argc > 1 ? argv[1] : "";
  bool do_bench = strncmp(arg, "--bench", 7) == 0;
  bool p_conv = strncmp(arg, "--conv", 6) == 0, p_tconv = strncmp(arg, "--tconv", 7) == 0,
       p_pool = strncmp(arg, "--pool", 6) == 0;
  bool all = !p_conv && !p_tconv && !p_pool && strcmp(arg, "--bench-only") != 0;
  bool do_conv = all || p_conv, do_tconv = all || p_tconv, do_pool = all || p_pool;
  int only = strchr(arg, '=') ? atoi(strchr(arg, '=') + 1) : -1;
  host_checks();
  pool_host_checks();
  tconv_host_checks();
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0 || !eng_cuconv_available()) {
    printf("SKIP: no CUDA device (%s)\n", !eng_cuconv_available() ? "built without cuDNN"
                                          : rc != cudaSuccess        ? cudaGetErrorString(rc)
                                                                     : "0 devices");
    if (check_failures_) CHECK_DONE();
    return 77;
  }
  struct cudaDeviceProp prop;
  TC(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s (sm_%d%d), cuDNN %zu\n", prop.name, prop.major, prop.minor, eng_cudnn_version());
  eng_cudnn *h = NULL;
  err e = {0};
  if (eng_cudnn_create(&h, &e)) {
    fprintf(stderr, "cudnn: %s\n", e.msg);
    return 1;
  }
  cudaStream_t st;
  TC(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  if (do_conv) conv_tests(h, st, only);
  if (do_tconv) tconv_tests(h, st, only);
  if (do_pool) pool_tests(h, st, only);
  if (do_bench) bench(h, st);
  cudaStreamDestroy(st);
  eng_cudnn_destroy(h);
  CHECK_DONE();
}
