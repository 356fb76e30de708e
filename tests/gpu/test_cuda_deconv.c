// tests/gpu/test_cuda_deconv.c: the cuDNN transposed convolution plans
// (engine/cuda/cuda_deconv.c; ConvTranspose through cuDNN's backward data)
// against the double-precision reference in conv_ref.h: strides 1 to 4,
// symmetric and asymmetric pads, output_padding (within dx, and past it when
// the dilation exceeds the stride), groups, depthwise, dilation, bias, 1-D,
// NCHW and NHWC, FP32, FP16 and TF32, each run twice into the same y, two
// replayed from a captured graph. Host-side checks (shapes, weight packing,
// argument validation, the plan's crop algebra swept over small 1-D shapes
// and simulated in 2-D with kernels/conv/k_conv.c's reference) run
// everywhere first. Part of the test_cuda_conv binary (main() in
// test_cuda_conv.c); errors are measured as there (relative to mag).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_ref.h"
#include "engine/cuda/cuda_conv.h"
#include "kernels/conv/k_conv.h"
#include "test_cuda_conv_util.h"

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

void tconv_host_checks(void) {
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

void tconv_tests(eng_cudnn *h, cudaStream_t st, int only) {
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
