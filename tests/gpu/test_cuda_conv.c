// test_cuda_conv.c: the cuDNN convolution and pooling plans
// (engine/cuda/cuda_conv.c) against the double-precision references in
// conv_ref.h: 1x1, 3x3, strides, dilation, groups, depthwise, asymmetric
// pads, ResNet's 7x7 stem, 1-D, every epilogue (bias, residual, in-place
// residual, relu, clip, sigmoid, tanh, swish), NCHW and NHWC, FP32 (TF32
// off) and FP16; transposed convolutions (ConvTranspose through cuDNN's
// backward data): strides 1 to 4, symmetric and asymmetric pads,
// output_padding (within dx, and past it when the dilation exceeds the
// stride), groups, depthwise, dilation, bias, 1-D, in both layouts and types
// plus TF32, two replayed from a captured graph; max and average pooling
// with asymmetric pads, ceil_mode and count_include_pad both ways, global
// average; one conv and one pool replayed from a captured CUDA graph.
// Host-side checks (shapes, weight packing, argument validation, the
// transposed plan's crop algebra swept over small 1-D shapes and simulated
// in 2-D with kernels/conv/k_conv.c's reference) run everywhere first.
//
// Error measure for convolutions: an element is a sum of terms, and can only
// be as exact as the sum of their magnitudes, so each error is divided by
// mag = sum |x w| + |bias| + |z| (at least 1): <= 1e-4 (FP32), 1e-2 (FP16).
// Pools: absolute error (inputs in [-1, 1]) <= 1e-5 (FP32), 2e-3 (FP16).
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

#include "check.h"
#include "conv_ref.h"
#include "cuda_die.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv.h"
#include "kernels/conv/k_conv.h"
#include "kernels/k_ref.h"

#define TC(call) CUDA_DIE(call)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) {  // uniform in [-1, 1)
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}
static float *rand_buf(size_t n, bool fp16) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  for (size_t i = 0; i < n; i++) p[i] = urand();
  if (fp16 && n) {  // the reference sees exactly what the GPU gets
    uint16_t *h = malloc(n * sizeof *h);
    k_f32_to_f16(h, p, n);
    k_f16_to_f32(p, h, n);
    free(h);
  }
  return p;
}

// NCHW float <-> device bytes in layout/type
static void *to_dev(const float *nchw, int n, int c, int h, int w, eng_cuconv_layout l,
                    eng_cuconv_dtype dt) {
  size_t cnt = (size_t)n * c * h * w, es = dt == ENG_CUCONV_FP16 ? 2 : 4;
  float *t = malloc(cnt * sizeof *t);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < c; b++)
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          size_t src = (((size_t)a * c + b) * h + y) * w + x;
          size_t dst = l == ENG_CUCONV_NCHW ? src : (((size_t)a * h + y) * w + x) * c + b;
          t[dst] = nchw[src];
        }
  void *host = t;
  uint16_t *h16 = NULL;
  if (es == 2) {
    h16 = malloc(cnt * 2);
    k_f32_to_f16(h16, t, cnt);
    host = h16;
  }
  void *d = NULL;
  TC(cudaMalloc(&d, cnt * es));
  TC(cudaMemcpy(d, host, cnt * es, cudaMemcpyHostToDevice));
  free(t);
  free(h16);
  return d;
}

static float *from_dev(const void *d, int n, int c, int h, int w, eng_cuconv_layout l,
                       eng_cuconv_dtype dt) {
  size_t cnt = (size_t)n * c * h * w, es = dt == ENG_CUCONV_FP16 ? 2 : 4;
  float *t = malloc(cnt * sizeof *t), *out = malloc(cnt * sizeof *out);
  if (es == 2) {
    uint16_t *h16 = malloc(cnt * 2);
    TC(cudaMemcpy(h16, d, cnt * 2, cudaMemcpyDeviceToHost));
    k_f16_to_f32(t, h16, cnt);
    free(h16);
  } else {
    TC(cudaMemcpy(t, d, cnt * 4, cudaMemcpyDeviceToHost));
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < c; b++)
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          size_t dst = (((size_t)a * c + b) * h + y) * w + x;
          size_t src = l == ENG_CUCONV_NCHW ? dst : (((size_t)a * h + y) * w + x) * c + b;
          out[dst] = t[src];
        }
  free(t);
  return out;
}

static void *dev_copy(const void *host, size_t bytes) {
  void *d = NULL;
  TC(cudaMalloc(&d, bytes ? bytes : 1));
  if (bytes) TC(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
  return d;
}

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

// --- transposed convolution (ConvTranspose through cudnnConvolutionBackwardData)

// The ONNX geometry of d as kernels/conv/k_conv.h takes it (2-D, NCHW).
static k_window tconv_window(const eng_cutconv_desc *d, int ho, int wo) {
  k_window g;
  memset(&g, 0, sizeof g);
  g.nsp = 2;
  g.n = d->n, g.c = d->c, g.m = d->k, g.group = d->groups ? d->groups : 1;
  g.x[0] = d->h, g.x[1] = d->w, g.y[0] = ho, g.y[1] = wo, g.k[0] = d->r, g.k[1] = d->s;
  g.stride[0] = d->stride_h ? d->stride_h : 1, g.stride[1] = d->stride_w ? d->stride_w : 1;
  g.dil[0] = d->dil_h ? d->dil_h : 1, g.dil[1] = d->dil_w ? d->dil_w : 1;
  g.pad_l[0] = d->pad_top, g.pad_l[1] = d->pad_left, g.pad_r[0] = d->pad_bottom, g.pad_r[1] = d->pad_right;
  return g;
}

typedef struct tconv_case {
  const char *name;
  eng_cutconv_desc d;  // dtype and layout filled per run
} tconv_case;

#define TCONV(nm, ...) {.name = nm, .d = {__VA_ARGS__}}
static tconv_case tconv_cases[] = {
    TCONV("3x3 s1 p1 bias (direct)", .n = 2, .c = 8, .h = 7, .w = 6, .k = 16, .r = 3, .s = 3,
          .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .has_bias = true),
    TCONV("3x3 s2 p1 op1 bias", .n = 2, .c = 16, .h = 5, .w = 6, .k = 8, .r = 3, .s = 3,
          .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .out_pad_h = 1,
          .out_pad_w = 1, .stride_h = 2, .stride_w = 2, .has_bias = true),
    TCONV("4x4 s2 p1 (DCGAN)", .n = 2, .c = 16, .h = 4, .w = 4, .k = 8, .r = 4, .s = 4,
          .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2,
          .stride_w = 2),
    TCONV("3x3 s3 p0 bias", .n = 1, .c = 4, .h = 4, .w = 5, .k = 6, .r = 3, .s = 3, .stride_h = 3,
          .stride_w = 3, .has_bias = true),
    TCONV("2x2 s2 bias (U-Net up)", .n = 2, .c = 32, .h = 8, .w = 8, .k = 16, .r = 2, .s = 2,
          .stride_h = 2, .stride_w = 2, .has_bias = true),
    TCONV("3x3 s2 pads(0,0,1,1) bias", .n = 2, .c = 8, .h = 5, .w = 5, .k = 8, .r = 3, .s = 3,
          .pad_bottom = 1, .pad_right = 1, .stride_h = 2, .stride_w = 2, .has_bias = true),
    TCONV("3x3 s2 pads(2,1,0,1) op(1,0)", .n = 1, .c = 8, .h = 6, .w = 5, .k = 4, .r = 3, .s = 3,
          .pad_top = 2, .pad_left = 1, .pad_bottom = 0, .pad_right = 1, .out_pad_h = 1,
          .stride_h = 2, .stride_w = 2),
    TCONV("3x3 s2 p1 op1 groups2 bias", .n = 2, .c = 8, .h = 5, .w = 5, .k = 12, .r = 3, .s = 3,
          .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .out_pad_h = 1,
          .out_pad_w = 1, .stride_h = 2, .stride_w = 2, .groups = 2, .has_bias = true),
    TCONV("dw4x4 s2 p1 bias", .n = 2, .c = 16, .h = 6, .w = 6, .k = 16, .r = 4, .s = 4,
          .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .stride_h = 2,
          .stride_w = 2, .groups = 16, .has_bias = true),
    TCONV("3x3 dil2 s1 p2 op1 (crop)", .n = 1, .c = 4, .h = 6, .w = 7, .k = 8, .r = 3, .s = 3,
          .pad_top = 2, .pad_left = 2, .pad_bottom = 2, .pad_right = 2, .out_pad_h = 1,
          .out_pad_w = 1, .dil_h = 2, .dil_w = 2, .has_bias = true),
    TCONV("3x3 dil3 s1 op2 (tail)", .n = 1, .c = 4, .h = 5, .w = 5, .k = 4, .r = 3, .s = 3,
          .out_pad_h = 2, .out_pad_w = 2, .dil_h = 3, .dil_w = 3, .has_bias = true),
    TCONV("3x3 s2 dil2 pads(1,2,2,1) op1 g2", .n = 2, .c = 4, .h = 5, .w = 4, .k = 4, .r = 3,
          .s = 3, .pad_top = 1, .pad_left = 2, .pad_bottom = 2, .pad_right = 1, .out_pad_h = 1,
          .out_pad_w = 1, .stride_h = 2, .stride_w = 2, .dil_h = 2, .dil_w = 2, .groups = 2),
    TCONV("1x1 s2 op1 bias", .n = 2, .c = 8, .h = 4, .w = 5, .k = 8, .r = 1, .s = 1,
          .out_pad_h = 1, .out_pad_w = 1, .stride_h = 2, .stride_w = 2, .has_bias = true),
    TCONV("1-D k5 s2 pads(2,1) op1 bias", .n = 2, .c = 4, .h = 1, .w = 9, .k = 6, .r = 1, .s = 5,
          .pad_left = 2, .pad_right = 1, .out_pad_w = 1, .stride_w = 2, .has_bias = true),
    TCONV("1-D k4 s4 (patch unfold)", .n = 1, .c = 8, .h = 1, .w = 6, .k = 4, .r = 1, .s = 4,
          .stride_w = 4),
};

// The 1-D algebra of eng_cutconv_geometry over a sweep of small shapes,
// against ONNX's rule: cuDNN's dx must be a forward convolution's input
// for x, and cropping it as the geometry says must give exactly ONNX's y.
static void tconv_geometry_sweep(void) {
  int shapes = 0, direct = 0, cropped = 0, tails = 0, bad = 0;
#define SWEEP_FAIL(fmt, ...)                                                                        \
  do {                                                                                              \
    bad++;                                                                                          \
    CHECK_FAIL_("geometry x%d k%d s%d d%d pads(%d,%d) op%d: " fmt, x, k, s, dil, pl, pr, op, __VA_ARGS__); \
  } while (0)
  for (int x = 1; x <= 5; x++)
    for (int k = 1; k <= 4; k++)
      for (int s = 1; s <= 3; s++)
        for (int dil = 1; dil <= 3; dil++)
          for (int pl = 0; pl <= 3; pl++)
            for (int pr = 0; pr <= 3; pr++)
              for (int op = 0; op <= 2; op++) {
                eng_cutconv_desc d = {.n = 1, .c = 1, .h = 1, .w = x, .k = 1, .r = 1, .s = k,
                                      .pad_left = pl, .pad_right = pr, .out_pad_w = op,
                                      .stride_w = s, .dil_w = dil};
                err e = {0};
                int ho, wo;
                long long span = (long long)(k - 1) * dil + 1, full = (long long)s * (x - 1) + span;
                long long want = full + op - pl - pr;
                if (eng_cutconv_out_dims(&d, &ho, &wo, &e)) {
                  if (want >= 1) SWEEP_FAIL("refused: %s", e.msg);
                  continue;
                }
                eng_cutconv_geom g;
                if (eng_cutconv_geometry(&d, &g, &e)) {
                  SWEEP_FAIL("geometry: %s", e.msg);
                  continue;
                }
                shapes++;
                if (ho != 1 || wo != want || g.pad_h || g.dx_h != 1 || g.crop_h || g.copy_h != 1)
                  SWEEP_FAIL("out %dx%d (want 1x%lld), rows: pad %d dx %d crop %d copy %d", ho, wo, want,
                             g.pad_h, g.dx_h, g.crop_h, g.copy_h);
                // cuDNN's rule: dx's forward convolution (pad p both sides) has x outputs
                long long room = g.dx_w + 2LL * g.pad_w - span;
                if (g.pad_w < 0 || g.pad_w > (pl < pr ? pl : pr) || g.dx_w < 1 || room < 0 ||
                    room / s + 1 != x)
                  SWEEP_FAIL("pad %d dx %d inconsistent", g.pad_w, g.dx_w);
                if (g.crop_w < 0 || g.copy_w < 0 || g.copy_w > wo || (g.copy_w && g.crop_w + g.copy_w > g.dx_w))
                  SWEEP_FAIL("crop %d copy %d of dx %d, y %d", g.crop_w, g.copy_w, g.dx_w, wo);
                // values: the full output by scattering, then ONNX's y and the cropped dx
                double xv[5], wv[4], fullv[64] = {0};
                for (int i = 0; i < x; i++) xv[i] = 1 + i * 0.37;
                for (int t = 0; t < k; t++) wv[t] = 1 + t * 0.11;
                for (int i = 0; i < x; i++)
                  for (int t = 0; t < k; t++) fullv[i * s + t * dil] += xv[i] * wv[t];
                for (int o = 0; o < wo; o++) {
                  long long fi = o + pl;  // ONNX: y[o] = full[o + pl]
                  double ref = fi < full ? fullv[fi] : 0;
                  long long di = o + g.crop_w, fj = di + g.pad_w;  // dx[j] = full[j + p]
                  double sim = o < g.copy_w && fj < full ? fullv[fj] : 0;
                  if (o < g.copy_w && di >= g.dx_w) sim = NAN;
                  if (!(sim == ref)) {
                    SWEEP_FAIL("y[%d] %g, cropped dx gives %g", o, ref, sim);
                    break;
                  }
                }
                bool is_direct = g.crop_w == 0 && g.dx_w == wo;
                // symmetric pads with output_padding below the stride: cuDNN writes y itself
                // (unless the pads leave cuDNN no row of its own: F - 2p < 1)
                if (pl == pr && op < s && full - 2 * pl >= 1 && !is_direct)
                  SWEEP_FAIL("not direct (crop %d, dx %d, y %d)", g.crop_w, g.dx_w, wo);
                direct += is_direct;
                cropped += !is_direct;
                tails += g.copy_w < wo;
              }
#undef SWEEP_FAIL
  check_count_++;
  printf("conv_transpose geometry: %d 1-D shapes (%d bad) consistent with cuDNN and ONNX (%d direct, %d cropped, %d "
         "with zeros past dx)\n", shapes, bad, direct, cropped, tails);
  CHECK(tails > 0 && cropped > tails && direct > 0);
}

static void tconv_host_checks(void) {
  err e = {0};
  int ho = 0, wo = 0;
  // ONNX's rule: stride (x - 1) + output_padding + dilated kernel - pads
  eng_cutconv_desc d = {.n = 1, .c = 4, .h = 5, .w = 7, .k = 2, .r = 3, .s = 3, .pad_top = 1,
                        .pad_left = 1, .pad_bottom = 1, .pad_right = 1, .out_pad_h = 1,
                        .out_pad_w = 1, .stride_h = 2, .stride_w = 2};
  CHECK_EQ_INT(eng_cutconv_out_dims(&d, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 10);
  CHECK_EQ_INT(wo, 14);
  CHECK_EQ_INT(eng_cutconv_w_bytes(&d), 4 * 2 * 3 * 3 * 4);
  CHECK_EQ_INT(eng_cutconv_y_bytes(&d), 2 * 10 * 14 * 4);
  CHECK_EQ_INT(eng_cutconv_x_bytes(&d), 4 * 5 * 7 * 4);
  eng_cutconv_geom g;
  CHECK_EQ_INT(eng_cutconv_geometry(&d, &g, &e), 0);
  CHECK(g.pad_h == 1 && g.dx_h == 10 && g.crop_h == 0 && g.copy_h == 10);  // direct
  d.groups = 2;
  d.k = 6;
  CHECK_EQ_INT(eng_cutconv_w_bytes(&d), 4 * 3 * 3 * 3 * 4);
  d.groups = 3;
  CHECK_EQ_INT(eng_cutconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "groups");
  d.groups = 1;
  d.pad_top = 6, d.pad_bottom = 5;  // 2*4 + 1 + 3 - 11 = 1 row
  CHECK_EQ_INT(eng_cutconv_out_dims(&d, &ho, &wo, &e), 0);
  CHECK_EQ_INT(ho, 1);
  d.pad_bottom = 6;
  CHECK_EQ_INT(eng_cutconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "after padding");
  d.pad_top = d.pad_bottom = 1;
  d.out_pad_w = -1;
  CHECK_EQ_INT(eng_cutconv_out_dims(&d, &ho, &wo, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "output padding");
  d.out_pad_w = 0;
  // asymmetric: cuDNN gets the smaller pad, y is cropped out of the larger dx
  d.pad_top = 0, d.pad_bottom = 1;
  CHECK_EQ_INT(eng_cutconv_geometry(&d, &g, &e), 0);
  CHECK(g.pad_h == 0 && g.crop_h == 0 && g.dx_h == 2 * 4 + 3 && g.copy_h == 2 * 4 + 1 + 3 - 1);
  d.pad_top = 2, d.pad_bottom = 1;
  CHECK_EQ_INT(eng_cutconv_geometry(&d, &g, &e), 0);
  CHECK(g.pad_h == 1 && g.crop_h == 1 && g.copy_h == 2 * 4 + 1 + 3 - 3);

  // packing: ONNX [c, k/g, r, s] -> KRSC [c, r, s, k/g]; NCHW as it is
  eng_cutconv_desc p = {.n = 1, .c = 2, .h = 3, .w = 3, .k = 4, .r = 3, .s = 2, .groups = 2,
                        .layout = ENG_CUCONV_NHWC};
  float w[2 * 2 * 3 * 2], got[2 * 2 * 3 * 2];
  for (int i = 0; i < 24; i++) w[i] = (float)i;
  CHECK_EQ_INT(eng_cutconv_w_bytes(&p), sizeof w);
  CHECK_EQ_INT(eng_cutconv_pack_weights(&p, w, got, sizeof got - 1, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_cutconv_pack_weights(&p, w, got, sizeof got, &e), 0);
  for (int c = 0; c < 2; c++)
    for (int m = 0; m < 2; m++)
      for (int r = 0; r < 3; r++)
        for (int s = 0; s < 2; s++)
          CHECK_EQ_INT(got[((c * 3 + r) * 2 + s) * 2 + m], w[((c * 2 + m) * 3 + r) * 2 + s]);
  p.layout = ENG_CUCONV_NCHW;
  CHECK_EQ_INT(eng_cutconv_pack_weights(&p, w, got, sizeof got, &e), 0);
  CHECK(memcmp(got, w, sizeof w) == 0);
  p.dtype = ENG_CUCONV_FP16;
  uint16_t h16[24], b16[4];
  CHECK_EQ_INT(eng_cutconv_pack_weights(&p, w, h16, sizeof h16, &e), 0);
  CHECK_EQ_INT(h16[23], 0x4dc0);  // 23.0
  float b[4] = {0.5f, -2.0f, 1.0f, 0.0f};
  CHECK_EQ_INT(eng_cutconv_pack_bias(&p, b, b16, sizeof b16, &e), 0);
  CHECK_EQ_INT(b16[0], 0x3800);
  CHECK_EQ_INT(b16[1], 0xc000);

  tconv_geometry_sweep();

  // Every GPU case, on the host: the double reference (conv_ref.h) against
  // kernels/conv/k_conv.c's, and the plan's recipe (cuDNN's dx with the smaller
  // pad, cropped) simulated with k_conv_transpose_ref against ONNX's y.
  for (size_t ci = 0; ci < sizeof tconv_cases / sizeof tconv_cases[0]; ci++) {
    const eng_cutconv_desc *td = &tconv_cases[ci].d;
    const char *name = tconv_cases[ci].name;
    if (eng_cutconv_out_dims(td, &ho, &wo, &e) || eng_cutconv_geometry(td, &g, &e)) {
      CHECK_FAIL_("%s: %s", name, e.msg);
      continue;
    }
    int gr = td->groups ? td->groups : 1;
    size_t nx = (size_t)td->n * td->c * td->h * td->w, nw = (size_t)td->c * (td->k / gr) * td->r * td->s;
    size_t ny = (size_t)td->n * td->k * ho * wo, ndx = (size_t)td->n * td->k * g.dx_h * g.dx_w;
    float *x = rand_buf(nx, false), *w2 = rand_buf(nw, false);
    float *bias = td->has_bias ? rand_buf((size_t)td->k, false) : NULL;
    double *ref = malloc(ny * sizeof *ref), *mag = malloc(ny * sizeof *mag);
    float *ky = malloc(ny * sizeof *ky), *kdx = malloc(ndx * sizeof *kdx);
    ref_conv_transpose(td, ho, wo, x, w2, bias, ref, mag);
    k_window kw = tconv_window(td, ho, wo);
    k_conv_transpose_ref(ky, x, w2, bias, &kw);
    k_window kd = kw;  // cuDNN's: pad p on both sides, dx's extent
    kd.y[0] = g.dx_h, kd.y[1] = g.dx_w, kd.pad_l[0] = kd.pad_r[0] = g.pad_h, kd.pad_l[1] = kd.pad_r[1] = g.pad_w;
    k_conv_transpose_ref(kdx, x, w2, NULL, &kd);
    size_t bad_ref = 0, bad_sim = 0;
    for (int n = 0; n < td->n; n++)
      for (int m = 0; m < td->k; m++)
        for (int i = 0; i < ho; i++)
          for (int j = 0; j < wo; j++) {
            size_t o = (((size_t)n * td->k + m) * ho + i) * wo + j;
            double scale = mag[o] > 1 ? mag[o] : 1;
            if (!(fabs(ky[o] - ref[o]) <= 1e-5 * scale)) bad_ref++;
            double sim = bias ? bias[m] : 0;
            if (i < g.copy_h && j < g.copy_w)
              sim += kdx[(((size_t)n * td->k + m) * g.dx_h + i + g.crop_h) * g.dx_w + j + g.crop_w];
            if (!(fabs(sim - ky[o]) <= 1e-5 * scale)) bad_sim++;
          }
    check_count_ += 2;
    if (bad_ref) CHECK_FAIL_("%s: %zu of %zu elements of k_conv_transpose_ref differ from conv_ref.h's", name, bad_ref, ny);
    if (bad_sim) CHECK_FAIL_("%s: %zu of %zu elements of the cropped dx differ from ONNX's y", name, bad_sim, ny);
    free(x), free(w2), free(bias), free(ref), free(mag), free(ky), free(kdx);
  }
}

// Everything one transposed run needs, on host and device.
typedef struct tconv_run {
  eng_cutconv_desc d;
  int ho, wo;
  float *x, *w, *bias;
  double *ref, *mag;
  void *dx, *dw, *db, *dy, *ws;
  size_t ws_bytes;
  eng_cutconv_plan *plan;
} tconv_run;

static int tconv_setup(tconv_run *tr, const tconv_case *tc, eng_cuconv_layout l, eng_cuconv_dtype dt,
                       eng_cudnn *h, eng_cuconv_search search) {
  memset(tr, 0, sizeof *tr);
  tr->d = tc->d;
  tr->d.layout = l;
  tr->d.dtype = dt;
  const eng_cutconv_desc *d = &tr->d;
  err e = {0};
  if (eng_cutconv_out_dims(d, &tr->ho, &tr->wo, &e)) {
    CHECK_FAIL_("%s: %s", tc->name, e.msg);
    return -1;
  }
  bool f16 = dt == ENG_CUCONV_FP16;
  int g = d->groups ? d->groups : 1;
  size_t nx = (size_t)d->n * d->c * d->h * d->w, nw = (size_t)d->c * (d->k / g) * d->r * d->s;
  size_t ny = (size_t)d->n * d->k * tr->ho * tr->wo;
  tr->x = rand_buf(nx, f16);
  tr->w = rand_buf(nw, f16);
  tr->bias = d->has_bias ? rand_buf((size_t)d->k, f16) : NULL;
  tr->ref = malloc(ny * sizeof *tr->ref);
  tr->mag = malloc(ny * sizeof *tr->mag);
  ref_conv_transpose(d, tr->ho, tr->wo, tr->x, tr->w, tr->bias, tr->ref, tr->mag);
  eng_cuconv_opts o = {.search = search};
  if (eng_cutconv_plan_create(&tr->plan, h, d, &o, &e)) {
    CHECK_FAIL_("conv_transpose %s %s %s: plan: %s", tc->name, l == ENG_CUCONV_NHWC ? "NHWC" : "NCHW",
                eng_cuconv_dtype_name(dt), e.msg);
    return -1;
  }
  tr->dx = to_dev(tr->x, d->n, d->c, d->h, d->w, l, dt);
  size_t wb = eng_cutconv_w_bytes(d);
  void *wh = malloc(wb);
  CHECK_EQ_INT(eng_cutconv_pack_weights(d, tr->w, wh, wb, &e), 0);
  tr->dw = dev_copy(wh, wb);
  free(wh);
  if (tr->bias) {
    size_t bb = eng_cutconv_bias_bytes(d);
    void *bh = malloc(bb);
    CHECK_EQ_INT(eng_cutconv_pack_bias(d, tr->bias, bh, bb, &e), 0);
    tr->db = dev_copy(bh, bb);
    free(bh);
  }
  // y starts as NaN bytes (0xff): an element the plan forgets to write cannot pass
  TC(cudaMalloc(&tr->dy, eng_cutconv_y_bytes(d)));
  TC(cudaMemset(tr->dy, 0xff, eng_cutconv_y_bytes(d)));
  tr->ws_bytes = eng_cutconv_plan_workspace(tr->plan);
  if (tr->ws_bytes) {
    TC(cudaMalloc(&tr->ws, tr->ws_bytes));
    TC(cudaMemset(tr->ws, 0xff, tr->ws_bytes));  // nothing may rely on a zeroed workspace
  }
  return 0;
}

static void tconv_teardown(tconv_run *tr) {
  eng_cutconv_plan_destroy(tr->plan);
  cudaFree(tr->dx), cudaFree(tr->dw), cudaFree(tr->db), cudaFree(tr->dy), cudaFree(tr->ws);
  free(tr->x), free(tr->w), free(tr->bias), free(tr->ref), free(tr->mag);
}

static double tconv_compare(const tconv_run *tr, const char *what, double tol) {
  const eng_cutconv_desc *d = &tr->d;
  float *y = from_dev(tr->dy, d->n, d->k, tr->ho, tr->wo, d->layout, d->dtype);
  size_t ny = (size_t)d->n * d->k * tr->ho * tr->wo, bad = 0, worst_i = 0;
  double worst = 0;
  for (size_t i = 0; i < ny; i++) {
    double rel = fabs((double)y[i] - tr->ref[i]) / (tr->mag[i] > 1 ? tr->mag[i] : 1);
    if (!(rel <= tol)) bad++;
    if (!(rel <= worst)) worst = rel, worst_i = i;
  }
  check_count_++;
  if (bad)
    CHECK_FAIL_("%s: %zu of %zu elements off; worst [%zu] %.6g vs %.6g (rel %.3g, tol %.g)", what, bad,
                ny, worst_i, (double)y[worst_i], tr->ref[worst_i], worst, tol);
  free(y);
  return worst;
}

static int tconv_run_once(tconv_run *tr, eng_cudnn *h, cudaStream_t st, err *e) {
  return eng_cutconv_run(tr->plan, h, st, tr->dx, tr->dw, tr->db, tr->dy, tr->ws, tr->ws_bytes, e);
}

static void tconv_tests(eng_cudnn *h, cudaStream_t st, int only) {
  const eng_cuconv_layout layouts[] = {ENG_CUCONV_NCHW, ENG_CUCONV_NHWC};
  const eng_cuconv_dtype dtypes[] = {ENG_CUCONV_FP32, ENG_CUCONV_FP16};
  int relayouts = 0;
  for (size_t ci = 0; ci < sizeof tconv_cases / sizeof tconv_cases[0]; ci++) {
    if (only >= 0 && (int)ci != only) continue;
    for (int li = 0; li < 2; li++)
      for (int ti = 0; ti < 2; ti++) {
        const tconv_case *tc = &tconv_cases[ci];
        tconv_run tr;
        eng_cuconv_search search = ci % 4 == 1 ? ENG_CUCONV_SEARCH_EXHAUSTIVE : ENG_CUCONV_SEARCH_HEURISTIC;
        char what[160];
        snprintf(what, sizeof what, "convT %-33s %s %s", tc->name,
                 layouts[li] == ENG_CUCONV_NHWC ? "NHWC" : "NCHW", eng_cuconv_dtype_name(dtypes[ti]));
        if (tconv_setup(&tr, tc, layouts[li], dtypes[ti], h, search) == 0) {
          err e = {0};
          int rc = tconv_run_once(&tr, h, st, &e);
          check_count_++;
          if (rc) CHECK_FAIL_("%s: run: %s", what, e.msg);
          TC(cudaStreamSynchronize(st));
          double tol = dtypes[ti] == ENG_CUCONV_FP16 ? 1e-2 : 1e-4;
          double worst = rc ? -1 : tconv_compare(&tr, what, tol);
          // a second run into the same y and workspace (the bias is added, never accumulated)
          if (!rc) {
            rc = tconv_run_once(&tr, h, st, &e);
            CHECK_EQ_INT(rc, 0);
            TC(cudaStreamSynchronize(st));
            if (!rc) tconv_compare(&tr, "second run", tol);
          }
          eng_cutconv_info in;
          eng_cutconv_plan_info(tr.plan, &in);
          relayouts += in.relayout;
          printf("%s: %-10s math %d%s%s ws %7zu cands %2d  max rel err %.2e\n", what, in.algo_name,
                 in.math, in.cropped ? " +crop" : "      ", in.relayout ? " +relayout" : "",
                 in.workspace_bytes, in.candidates, worst);
          if (getenv("CONV_TEST_VERBOSE")) printf("  tried: %s\n", in.log);
        }
        tconv_teardown(&tr);
      }
  }
  if (only >= 0) return;
  // NHWC through cuDNN's own NHWC kernels is the point of the layout; a fallback is reported
  printf("conv_transpose: %d NHWC plans fell back to NCHW with transforms\n", relayouts);

  // TF32 allowed: within FP16's bound
  for (int li = 0; li < 2; li++) {
    tconv_run tr;
    const tconv_case *tc = &tconv_cases[1];
    if (tconv_setup(&tr, tc, layouts[li], ENG_CUCONV_FP32_TF32, h, ENG_CUCONV_SEARCH_HEURISTIC) == 0) {
      err e = {0};
      CHECK_EQ_INT(tconv_run_once(&tr, h, st, &e), 0);
      TC(cudaStreamSynchronize(st));
      eng_cutconv_info in;
      eng_cutconv_plan_info(tr.plan, &in);
      printf("convT %-33s %s fp32_tf32: %s math %d  max rel err %.2e\n", tc->name, li ? "NHWC" : "NCHW",
             in.algo_name, in.math, tconv_compare(&tr, "convT tf32", 1e-2));
    }
    tconv_teardown(&tr);
  }

  // argument checks and graph capture: a cropped plan (asymmetric pads, bias) and a direct one
  const int graph_cases[2] = {5, 1};
  for (int gi = 0; gi < 2; gi++) {
    tconv_run tr;
    const tconv_case *tc = &tconv_cases[graph_cases[gi]];
    eng_cuconv_layout l = gi ? ENG_CUCONV_NCHW : ENG_CUCONV_NHWC;
    eng_cuconv_dtype dt = gi ? ENG_CUCONV_FP32 : ENG_CUCONV_FP16;
    if (tconv_setup(&tr, tc, l, dt, h, ENG_CUCONV_SEARCH_HEURISTIC) != 0) {
      tconv_teardown(&tr);
      continue;
    }
    err e = {0};
    eng_cutconv_info in;
    eng_cutconv_plan_info(tr.plan, &in);
    if (gi == 0) {
      CHECK(in.cropped);
      CHECK(tr.ws_bytes > 0);  // dx lives there
      CHECK_EQ_INT(eng_cutconv_run(tr.plan, h, st, tr.dx, tr.dw, NULL, tr.dy, tr.ws, tr.ws_bytes, &e),
                   ERR_INVALID_ARGUMENT);
      CHECK_CONTAINS(e.msg, "bias");
      CHECK_EQ_INT(eng_cutconv_run(tr.plan, h, st, tr.dx, tr.dw, tr.db, tr.dy, tr.ws, tr.ws_bytes - 1, &e),
                   ERR_INVALID_ARGUMENT);
      CHECK_CONTAINS(e.msg, "workspace");
      CHECK_EQ_INT(eng_cutconv_run(tr.plan, h, st, NULL, tr.dw, tr.db, tr.dy, tr.ws, tr.ws_bytes, &e),
                   ERR_INVALID_ARGUMENT);
    } else {
      CHECK(!in.cropped && !in.relayout);  // symmetric pads, output_padding < stride: cuDNN writes y
    }
    cudaStream_t cs;
    TC(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    TC(cudaMemset(tr.dy, 0xff, eng_cutconv_y_bytes(&tr.d)));
    cudaGraph_t gr = NULL;
    cudaGraphExec_t ge = NULL;
    TC(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    int rc = tconv_run_once(&tr, h, cs, &e);
    cudaError_t ce = cudaStreamEndCapture(cs, &gr);
    check_count_++;
    if (rc || ce != cudaSuccess) {
      CHECK_FAIL_("convT graph capture: run %d (%s), end capture %s", rc, e.msg, cudaGetErrorString(ce));
    } else {
      TC(cudaGraphInstantiate(&ge, gr, 0));
      TC(cudaGraphLaunch(ge, cs));
      TC(cudaGraphLaunch(ge, cs));  // replayed twice: the bias must not pile up
      TC(cudaStreamSynchronize(cs));
      char what[96];
      snprintf(what, sizeof what, "convT graph replay (%s)", tc->name);
      printf("%s: max rel err %.2e\n", what, tconv_compare(&tr, what, dt == ENG_CUCONV_FP16 ? 1e-2 : 1e-4));
      cudaGraphExecDestroy(ge);
    }
    if (gr) cudaGraphDestroy(gr);
    cudaStreamDestroy(cs);
    tconv_teardown(&tr);
  }
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

static void pool_tests(eng_cudnn *h, cudaStream_t st, int only) {
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
