// Tests kernels/conv/k_dwconv.cu, the depthwise NHWC convolution with its fused
// epilogue, against a C reference that sums in double. Geometries: 3x3 s1
// (p1 and asymmetric pads), 5x5 s1 p2, 3x3 s2 (p0 and p1), 5x5 s2 p2,
// dilation 2, asymmetric pads, a 5x3 window, a 1x1 window; C = 5 (one
// channel per thread), 6 (half pairs), 8, 16, 24 (8 halves or 4 floats per
// thread); with and without bias and residual, every activation; FP32 and
// FP16. Tolerance relative to the magnitude of what was summed (|bias| +
// |z| + sum |x*w|): 1e-5 for FP32 (float sums of at most 25 taps), 1e-2 for
// FP16 (the output's rounding, 2^-11 of it). Every plain run is also
// compared bit for bit with k_dwconv__v1_cuda (the one-pixel-per-thread
// kernel, summing in the same order). The tiled path (3x3 and 5x5, stride 1
// and 2) with each tile width forced (1, 2, 4 and the launcher's pick) at
// batch 1 and 3, W not a multiple of the tile, C = 12 (tiled in FP32, not
// in FP16) and C = 520 (more than one block of channels). An input
// activation (k_dwconv_args.in_act: HardSwish, Relu, Sigmoid) on every
// geometry, against the reference on the activated, rounded x. Also: an
// in-place residual (z == y), a misaligned x (the scalar path), a captured
// graph replayed on new input, and the argument checks.
#include "test_k_cuda_util.h"

static const char *const act_name[] = {"none", "relu",  "clip",         "sigmoid",
                                       "tanh", "swish", "hard_sigmoid", "hard_swish"};

typedef struct geom {
  const char *name;
  int h, w, r, s, sh, sw, pt, pl, pb, pr, dh, dw;
} geom;

static const geom geoms[] = {
    {"3x3 s1 p1", 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 s1 pads 0,2,2,0", 6, 13, 3, 3, 1, 1, 0, 2, 2, 0, 1, 1},
    {"5x5 s1 p2", 9, 11, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1},
    {"3x3 s2 p0", 9, 8, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1},
    {"3x3 s2 p1", 8, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"5x5 s2 p2", 11, 10, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1},
    {"3x3 d2 p2", 9, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
    {"3x3 s2 pads 0,1,1,0", 8, 8, 3, 3, 2, 2, 0, 1, 1, 0, 1, 1},
    {"5x3 s(1,2) pads 2,0,1,3", 7, 9, 5, 3, 1, 2, 2, 0, 1, 3, 1, 1},
    {"1x1", 4, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
};

static double clamp01(double t) { return t < 0 ? 0 : t > 1 ? 1 : t; }

static double act_ref(double v, const k_dwconv_args *a) {
  double clip_max = a->clip_max;
  switch (a->act) {
    case K_DW_ACT_RELU:
      return v < 0 ? 0 : v;
    case K_DW_ACT_CLIP:
      return v < 0 ? 0 : v > clip_max ? clip_max : v;
    case K_DW_ACT_SIGMOID:
      return 1.0 / (1.0 + exp(-v));
    case K_DW_ACT_TANH:
      return tanh(v);
    case K_DW_ACT_SWISH:
      return v / (1.0 + exp(-v));
    case K_DW_ACT_HARD_SIGMOID:
      return clamp01((double)a->alpha * v + a->beta);
    case K_DW_ACT_HARD_SWISH:
      return v * clamp01(v / 6.0 + 0.5);
    default:
      return v;
  }
}

// y and mag: [n, oh, ow, c]; w: [c][r][s]; bias, z may be NULL.
static void dw_ref(float *y, double *mag, const float *x, const float *w, const float *bias,
                   const float *z, const k_dwconv_args *a) {
  for (int n = 0; n < a->n; n++)
    for (int oh = 0; oh < a->oh; oh++)
      for (int ow = 0; ow < a->ow; ow++)
        for (int ch = 0; ch < a->c; ch++) {
          size_t o = (((size_t)n * a->oh + oh) * a->ow + ow) * a->c + ch;
          double v = 0, m = 0;
          for (int r = 0; r < a->r; r++) {
            int ih = oh * a->stride_h - a->pad_top + r * a->dil_h;
            if (ih < 0 || ih >= a->h) continue;
            for (int s = 0; s < a->s; s++) {
              int iw = ow * a->stride_w - a->pad_left + s * a->dil_w;
              if (iw < 0 || iw >= a->w) continue;
              double t = (double)x[(((size_t)n * a->h + ih) * a->w + iw) * a->c + ch] *
                         (double)w[((size_t)ch * a->r + r) * a->s + s];
              v += t;
              m += fabs(t);
            }
          }
          if (bias) v += bias[ch], m += fabs(bias[ch]);
          if (z) v += z[o], m += fabs(z[o]);
          y[o] = (float)act_ref(v, a);
          mag[o] = m;
        }
}

static size_t out_dim(int in, int k, int st, int d, int p0, int p1) {
  return (size_t)((in + p0 + p1 - ((k - 1) * d + 1)) / st + 1);
}

static k_dwconv_args args_of(const geom *g, int n, int c, k_dw_act act) {
  k_dwconv_args a = {0};
  a.n = n, a.h = g->h, a.w = g->w, a.c = c;
  a.oh = (int)out_dim(g->h, g->r, g->sh, g->dh, g->pt, g->pb);
  a.ow = (int)out_dim(g->w, g->s, g->sw, g->dw, g->pl, g->pr);
  a.r = g->r, a.s = g->s, a.pad_top = g->pt, a.pad_left = g->pl;
  a.stride_h = g->sh, a.stride_w = g->sw, a.dil_h = g->dh, a.dil_w = g->dw;
  a.act = act;
  a.clip_max = 1.5f;
  a.alpha = 0.3f, a.beta = 0.45f;  // not ONNX's defaults: the kernel must read them
  return a;
}

// Host values rounded to the storage type (half: through IEEE half), and
// the device copy in that type.
static void *to_dev_as(float *h, size_t n, k_elem et) {
  if (et == K_F32) return tk_to_dev(h, n * 4);
  uint16_t *b = tk_xmalloc(n * 2);
  k_f32_to_f16(b, h, n);
  k_f16_to_f32(h, b, n);
  void *d = tk_to_dev(b, n * 2);
  free(b);
  return d;
}

static void from_dev_as(float *h, const void *d, size_t n, k_elem et) {
  if (et == K_F32) {
    tk_from_dev(h, d, n * 4);
    return;
  }
  uint16_t *b = tk_xmalloc(n * 2);
  tk_from_dev(b, d, n * 2);
  k_f16_to_f32(h, b, n);
  free(b);
}

static void compare(const char *what, const float *got, const float *want, const double *mag,
                    size_t n, double tol) {
  double *atol = tk_xmalloc(n * sizeof *atol);
  for (size_t i = 0; i < n; i++) atol[i] = tol * mag[i];
  tk_compare_ex(what, got, want, n, tol, 0.0, atol);
  free(atol);
}

// y bit for bit against k_dwconv__v1_cuda's on the same operands.
static void same_as_v1(const char *what, const void *dy, const void *dx, const void *dw,
                       const void *db, const void *dz, k_elem et, const k_dwconv_args *a, size_t ny) {
  size_t es = et == K_F32 ? 4 : 2;
  void *dv = tk_dev_alloc(ny * es);
  TK_OK(k_dwconv__v1_cuda(dv, dx, dw, db, dz, et, a, NULL, TK_E));
  unsigned char *got = tk_xmalloc(ny * es), *want = tk_xmalloc(ny * es);
  tk_from_dev(got, dy, ny * es);
  tk_from_dev(want, dv, ny * es);
  check_count_++;
  for (size_t i = 0; i < ny * es; i++)
    if (got[i] != want[i]) {
      CHECK_FAIL_("%s: element %zu differs from k_dwconv__v1_cuda's", what, i / es);
      break;
    }
  TK_CUDA(cudaFree(dv));
  free(got), free(want);
}

// mode: 0 plain; 1 z == y (in place); 2 x misaligned by one element.
// tile_w, bg: k_dwconv_args.tile_w and block_groups (0: the launcher's pick).
// in_act: k_dwconv_args.in_act, applied by the reference to x rounded to
// the storage type (what a skipped activation node would have stored).
static void run_case_n(tk_rng *rng, const geom *g, int n, int c, k_elem et, k_dw_act act,
                       int with_bias, int with_z, int mode, int tile_w, int bg, k_dw_act in_act) {
  k_dwconv_args a = args_of(g, n, c, act);
  a.tile_w = tile_w;
  a.block_groups = bg;
  a.in_act = in_act;
  size_t nx = (size_t)n * g->h * g->w * c, ny = (size_t)n * a.oh * a.ow * c,
         nw = (size_t)c * g->r * g->s, es = et == K_F32 ? 4 : 2;
  float *x = tk_xmalloc(nx * 4), *w = tk_xmalloc(nw * 4), *bias = tk_xmalloc((size_t)c * 4),
        *z = tk_xmalloc(ny * 4), *want = tk_xmalloc(ny * 4), *got = tk_xmalloc(ny * 4);
  double *mag = tk_xmalloc(ny * sizeof *mag);
  tk_fill(rng, x, nx, -2.0f, 2.0f);
  tk_fill(rng, w, nw, -1.0f, 1.0f);
  tk_fill(rng, bias, (size_t)c, -1.0f, 1.0f);
  tk_fill(rng, z, ny, -1.0f, 1.0f);
  void *dx = to_dev_as(x, nx, et), *dw = to_dev_as(w, nw, et), *db = to_dev_as(bias, (size_t)c, et),
       *dz = to_dev_as(z, ny, et);
  float *xa = x;
  if (in_act != K_DW_ACT_NONE) {
    xa = tk_xmalloc(nx * 4);
    k_dwconv_args pa = a;
    pa.act = in_act;
    for (size_t i = 0; i < nx; i++) xa[i] = (float)act_ref(x[i], &pa);
    if (et == K_F16) {
      uint16_t *b = tk_xmalloc(nx * 2);
      k_f32_to_f16(b, xa, nx);
      k_f16_to_f32(xa, b, nx);
      free(b);
    }
  }
  dw_ref(want, mag, xa, w, with_bias ? bias : NULL, with_z ? z : NULL, &a);
  if (xa != x) free(xa);
  void *dy = mode == 1 ? dz : tk_dev_alloc(ny * es);
  void *dxa = dx, *dxm = NULL;
  if (mode == 2) {
    dxm = tk_dev_alloc((nx + 1) * es);
    TK_CUDA(cudaMemcpy((char *)dxm + es, dx, nx * es, cudaMemcpyDeviceToDevice));
    dxa = (char *)dxm + es;
  }
  TK_OK(k_dwconv_cuda(dy, dxa, dw, with_bias ? db : NULL, with_z ? dz : NULL, et, &a, NULL, TK_E));
  from_dev_as(got, dy, ny, et);
  char what[200];
  snprintf(what, sizeof what, "dwconv %s %s N=%d C=%d tile %d groups %d %s(x) %s%s%s%s",
           et == K_F32 ? "f32" : "f16", g->name, n, c, tile_w, bg, act_name[in_act], act_name[act],
           with_bias ? " bias" : "", with_z ? " z" : "",
           mode == 1 ? " in place" : mode == 2 ? " misaligned x" : "");
  compare(what, got, want, mag, ny, et == K_F32 ? 1e-5 : 1e-2);
  if (mode == 0) same_as_v1(what, dy, dx, dw, with_bias ? db : NULL, with_z ? dz : NULL, et, &a, ny);
  if (mode != 1) TK_CUDA(cudaFree(dy));
  if (dxm) TK_CUDA(cudaFree(dxm));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dw));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dz));
  free(x), free(w), free(bias), free(z), free(want), free(got), free(mag);
}

static void run_case(tk_rng *rng, const geom *g, int c, k_elem et, k_dw_act act, int with_bias,
                     int with_z, int mode) {
  run_case_n(rng, g, 2, c, et, act, with_bias, with_z, mode, 0, 0, K_DW_ACT_NONE);
}

static void test_cases(void) {
  tk_rng rng = {UINT64_C(0x9e3779b97f4a7c15)};
  static const int cs[] = {5, 6, 8, 16, 24};
  for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++)
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
      for (int t = 0; t < 2; t++)
        for (int act = K_DW_ACT_NONE; act <= K_DW_ACT_HARD_SWISH; act++)
          for (int bz = 0; bz < 4; bz++)
            run_case(&rng, &geoms[gi], cs[ci], t ? K_F16 : K_F32, (k_dw_act)act, bz & 1, bz >> 1, 0);
  for (int t = 0; t < 2; t++)
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
      run_case(&rng, &geoms[0], cs[ci], t ? K_F16 : K_F32, K_DW_ACT_RELU, 1, 1, 1);
      run_case(&rng, &geoms[5], cs[ci], t ? K_F16 : K_F32, K_DW_ACT_SWISH, 1, 1, 2);
    }
  // an input activation (a prologue: HardSwish before the conv) on every geometry and path
  for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++)
    for (int t = 0; t < 2; t++)
      for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        run_case_n(&rng, &geoms[gi], 2, cs[ci], t ? K_F16 : K_F32, K_DW_ACT_HARD_SWISH, 1, 0, 0, 0,
                   0, K_DW_ACT_HARD_SWISH);
        run_case_n(&rng, &geoms[gi], 1, cs[ci], t ? K_F16 : K_F32, K_DW_ACT_NONE, 0, 1, 0, 0,
                   0, K_DW_ACT_RELU);
      }
}

// The tiled path's windows (3x3, 5x5; stride 1, 2) with every tile width,
// batch 1 and 3; W = 7 to 13 against tiles of 2 and 4. C = 12: tiled in
// FP32 (3 groups of 4), the pairs kernel in FP16; C = 520: 65 groups of 8
// halves (five blocks of channels, 13 groups each, at the default cap of
// 16) or 130 of 4 floats (nine: 15 each but the last). The activations
// alternate so the bias-only and z-only epilogues run tiled too. Each case
// runs again with a cap of 1, 7 and 64 groups a block (bench_k_dwconv's
// variants): 64 splits 65 groups into 33 + 32.
static void test_tiled(void) {
  tk_rng rng = {UINT64_C(0x51ed27a3)};
  static const int cs[] = {8, 12, 24, 520};
  static const int tiles[] = {0, 1, 2, 4}, bgs[] = {0, 1, 7, 64};
  int k = 0;
  for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
    const geom *g = &geoms[gi];
    if (g->r != g->s || (g->r != 3 && g->r != 5) || g->sh != g->sw || g->sh > 2 || g->dh != 1 ||
        g->dw != 1)
      continue;
    for (int t = 0; t < 2; t++)
      for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++)
          for (int n = 1; n <= 3; n += 2, k++)
            run_case_n(&rng, g, n, cs[ci], t ? K_F16 : K_F32,
                       k % 3 == 0 ? K_DW_ACT_HARD_SWISH : k % 3 == 1 ? K_DW_ACT_HARD_SIGMOID : K_DW_ACT_RELU,
                       k % 4 != 1, k % 4 != 2, 0, tiles[ti], bgs[k % 4],
                       k % 5 == 0 ? K_DW_ACT_HARD_SWISH : k % 5 == 1 ? K_DW_ACT_SIGMOID : K_DW_ACT_NONE);
  }
}

// Captured once, replayed on new x: the graph reads the data of the moment.
static void test_graph(void) {
  tk_rng rng = {UINT64_C(12345)};
  const geom *g = &geoms[5];
  const int c = 24;
  k_dwconv_args a = args_of(g, 3, c, K_DW_ACT_CLIP);
  size_t nx = (size_t)a.n * g->h * g->w * c, ny = (size_t)a.n * a.oh * a.ow * c,
         nw = (size_t)c * g->r * g->s;
  float *x = tk_xmalloc(nx * 4), *w = tk_xmalloc(nw * 4), *bias = tk_xmalloc((size_t)c * 4),
        *z = tk_xmalloc(ny * 4), *want = tk_xmalloc(ny * 4), *got = tk_xmalloc(ny * 4);
  double *mag = tk_xmalloc(ny * sizeof *mag);
  tk_fill(&rng, x, nx, -2.0f, 2.0f);
  tk_fill(&rng, w, nw, -1.0f, 1.0f);
  tk_fill(&rng, bias, (size_t)c, -1.0f, 1.0f);
  tk_fill(&rng, z, ny, -1.0f, 1.0f);
  void *dx = to_dev_as(x, nx, K_F16), *dw = to_dev_as(w, nw, K_F16),
       *db = to_dev_as(bias, (size_t)c, K_F16), *dz = to_dev_as(z, ny, K_F16),
       *dy = tk_dev_alloc(ny * 2);
  cudaStream_t st;
  TK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t gr;
  cudaGraphExec_t ex;
  TK_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  err ce = {0};
  int rc = k_dwconv_cuda(dy, dx, dw, db, dz, K_F16, &a, st, &ce);
  TK_CUDA(cudaStreamEndCapture(st, &gr));
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  capture: %s\n", ce.msg);
  TK_CUDA(cudaGraphInstantiate(&ex, gr, 0));
  for (int rep = 0; rep < 2; rep++) {
    tk_fill(&rng, x, nx, -2.0f, 2.0f);  // new input each replay
    uint16_t *xb = tk_xmalloc(nx * 2);
    k_f32_to_f16(xb, x, nx);
    k_f16_to_f32(x, xb, nx);
    TK_CUDA(cudaMemcpy(dx, xb, nx * 2, cudaMemcpyHostToDevice));
    free(xb);
    TK_CUDA(cudaGraphLaunch(ex, st));
    TK_CUDA(cudaStreamSynchronize(st));
    dw_ref(want, mag, x, w, bias, z, &a);
    from_dev_as(got, dy, ny, K_F16);
    compare(rep ? "dwconv graph replay 2" : "dwconv graph replay 1", got, want, mag, ny, 1e-2);
  }
  TK_CUDA(cudaGraphExecDestroy(ex));
  TK_CUDA(cudaGraphDestroy(gr));
  TK_CUDA(cudaStreamDestroy(st));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dw));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dz));
  TK_CUDA(cudaFree(dy));
  free(x), free(w), free(bias), free(z), free(want), free(got), free(mag);
}

// Host-side: rejected before any launch, so they run without a GPU.
static void expect_invalid(const char *what, void *y, const void *x, const void *w, k_elem et,
                           const k_dwconv_args *a) {
  err e = {0};
  int rc = k_dwconv_cuda(y, x, w, NULL, NULL, et, a, NULL, &e);
  check_count_++;
  if (rc != ERR_INVALID_ARGUMENT)
    CHECK_FAIL_("%s: got %d (%s), want ERR_INVALID_ARGUMENT", what, rc, e.msg);
  else if (!strstr(e.msg, "k_dwconv_cuda"))
    CHECK_FAIL_("%s: message does not name the kernel: %s", what, e.msg);
}

static void test_errors(void) {
  k_dwconv_args ok = args_of(&geoms[0], 1, 8, K_DW_ACT_NONE), a;
  char buf[16] = {0};  // never read: every case fails before a launch
  void *p = buf;
  expect_invalid("NULL args", p, p, p, K_F32, NULL);
  expect_invalid("int64 elements", p, p, p, K_I64, &ok);
  a = ok, a.c = -1;
  expect_invalid("negative C", p, p, p, K_F32, &a);
  a = ok, a.stride_h = 0;
  expect_invalid("zero stride", p, p, p, K_F32, &a);
  a = ok, a.dil_w = 0;
  expect_invalid("zero dilation", p, p, p, K_F32, &a);
  a = ok, a.r = 0;
  expect_invalid("empty kernel", p, p, p, K_F32, &a);
  a = ok, a.pad_left = -1;
  expect_invalid("negative pad", p, p, p, K_F32, &a);
  a = ok, a.act = (k_dw_act)(K_DW_ACT_HARD_SWISH + 1);
  expect_invalid("unknown activation", p, p, p, K_F32, &a);
  a = ok, a.act = K_DW_ACT_CLIP, a.clip_max = 0.0f;
  expect_invalid("clip without max", p, p, p, K_F32, &a);
  a = ok, a.tile_w = 3;
  expect_invalid("tile width 3", p, p, p, K_F32, &a);
  a = ok, a.block_groups = 65;
  expect_invalid("65 groups a block", p, p, p, K_F32, &a);
  a = ok, a.block_groups = -1;
  expect_invalid("negative groups a block", p, p, p, K_F32, &a);
  a = ok, a.in_act = K_DW_ACT_CLIP;
  expect_invalid("input activation with a parameter", p, p, p, K_F32, &a);
  a = ok, a.act = K_DW_ACT_HARD_SIGMOID, a.alpha = INFINITY;
  expect_invalid("hard_sigmoid with an infinite alpha", p, p, p, K_F32, &a);
  a = ok, a.oh = 70000, a.stride_h = 40000;
  expect_invalid("window past int", p, p, p, K_F32, &a);
  expect_invalid("NULL y", NULL, p, p, K_F16, &ok);
  expect_invalid("NULL w", p, p, NULL, K_F16, &ok);
  // an empty output is a no-op that touches no pointer
  a = ok, a.n = 0;
  err e = {0};
  CHECK_EQ_INT(k_dwconv_cuda(NULL, NULL, NULL, NULL, NULL, K_F32, &a, NULL, &e), 0);
}

int main(void) {
  test_errors();
  tk_require_device();
  test_cases();
  test_tiled();
  test_graph();
  CHECK_DONE();
}
