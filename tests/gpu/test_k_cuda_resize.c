// Tests kernels/resize/k_resize.cu against the C references: k_resize_nearest_cuda
// against k_resize_nearest, k_resize_linear_cuda against k_resize_linear,
// k_pad_cuda against k_pad (kernels/index/k_index.c). Both sides share the index math
// (kernels/resize/k_resize_math.h) and the GPU blends with the reference's operations in
// its order, so every output must match bit for bit: nearest and pad for
// element sizes 1, 2, 4 and 8 (random bytes, NaN patterns included);
// linear in FP32, and in FP16 as the reference on the widened inputs
// rounded once to half. Covers every coordinate mode with every nearest
// mode (Upsample's included), up- and downsampling by integer, fractional
// and sizes-derived scales, resizes of every dim (N and C too), output
// dims of 1 (align_corners' and pytorch_half_pixel's special case),
// input dims of 1, ranks 1 to 8, ~1M-element cases, linear on
// [outer, h, w, inner] (NHWC, checked against the reference on the
// transposed tensor), pad with positive, negative (cropping), mixed and
// maximal reflect pads on every dim, a constant pad of an empty input,
// and the launchers' argument checks, which run without a device.
#include "test_k_cuda_util.h"

static int64_t count(int nd, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= d[i];
  return n;
}

static void fill_bytes(tk_rng *r, void *p, size_t n) {
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(tk_next(r) >> 56);
}

static const char *const coord_name[] = {"half_pixel", "asymmetric", "pytorch_half_pixel",
                                         "align_corners", "tf_half_pixel_for_nearest"};
static const char *const nearest_name[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil",
                                           "simple"};

// The output extent of a resize of n by scale, as engine/ops/resize/resize.c infers it.
static int64_t scaled(int64_t n, float s) { return (int64_t)(float)((float)n * s); }

// --- nearest

// One case: x of dims xd (rank nd) to yd with the given scales, esz-byte
// elements; returns 1 when the GPU differs from the reference.
static int nearest_case(tk_rng *r, int nd, const int64_t *xd, const int64_t *yd, const float *sc, size_t esz,
                        k_coord c, k_nearest m) {
  size_t nx = (size_t)count(nd, xd), ny = (size_t)count(nd, yd);
  uint8_t *x = tk_xmalloc(nx * esz), *want = tk_xmalloc(ny * esz), *got = tk_xmalloc(ny * esz);
  fill_bytes(r, x, nx * esz);
  k_resize_nearest(want, x, esz, nd, xd, yd, sc, c, m);
  void *dx = tk_to_dev(x, nx * esz), *dy = tk_dev_alloc(ny * esz);
  TK_CUDA(cudaMemset(dy, 0xa5, (ny ? ny : 1) * esz));
  err e = {0};
  int rc = k_resize_nearest_cuda(dy, dx, esz, nd, xd, yd, sc, c, m, NULL, &e);
  if (rc) fprintf(stderr, "  k_resize_nearest_cuda: %s\n", e.msg);
  tk_from_dev(got, dy, ny * esz);
  int bad = rc != 0 || memcmp(got, want, ny * esz) != 0;
  if (bad) {
    fprintf(stderr, "  nearest %s/%s esz %zu rank %d:", coord_name[c], nearest_name[m], esz, nd);
    for (int i = 0; i < nd; i++) fprintf(stderr, " %lld->%lld (%g)", (long long)xd[i], (long long)yd[i], sc[i]);
    fprintf(stderr, "\n");
    tk_compare_bits("nearest", got, want, ny * esz);
  }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(x), free(want), free(got);
  return bad;
}

typedef struct rcase {
  int nd;
  int64_t x[K_MAX_DIMS];
  float s[K_MAX_DIMS];  // scales; 0: from y (sizes)
  int64_t y[K_MAX_DIMS];  // with sizes
} rcase;

// The case's output dims and scales: sizes give scales out / in (as ONNX
// Runtime computes them), scales give floor(in * scale).
static void resolve(const rcase *k, int64_t *yd, float *sc) {
  for (int i = 0; i < k->nd; i++) {
    if (k->s[i] > 0) {
      sc[i] = k->s[i];
      yd[i] = scaled(k->x[i], k->s[i]);
    } else {
      yd[i] = k->y[i];
      sc[i] = k->x[i] ? (float)k->y[i] / (float)k->x[i] : 1.0f;
    }
  }
}

static const rcase nearest_cases[] = {
    {4, {2, 3, 5, 7}, {1, 1, 2, 2}, {0}},                        // the FPN / U-Net x2
    {4, {1, 2, 9, 11}, {1, 1, 0.5f, 0.5f}, {0}},                 // x0.5 down
    {4, {2, 2, 7, 6}, {1, 1, 1.7f, 0.6f}, {0}},                  // fractional up and down
    {4, {1, 3, 5, 7}, {1, 1, 0, 0}, {1, 3, 13, 4}},              // sizes: scales out / in
    {3, {3, 4, 5}, {1.5f, 0.5f, 1.8f}, {0}},                     // every dim, N and C too
    {4, {2, 3, 6, 5}, {1, 1, 0, 0}, {2, 3, 1, 1}},               // output dims of 1
    {4, {1, 4, 1, 1}, {1, 1, 3, 5}, {0}},                        // input dims of 1
    {4, {1, 1, 4, 4}, {1, 1, 1, 1}, {0}},                        // scale 1: a copy in most modes
    {1, {17}, {2.5f}, {0}},
    {5, {2, 1, 3, 4, 2}, {1, 2, 1, 0.5f, 3}, {0}},
    {8, {1, 2, 1, 3, 2, 1, 2, 3}, {2, 1, 3, 1, 0.5f, 2, 1, 1.5f}, {0}},
};

static void test_nearest(void) {
  tk_rng r = {0x9e3779b97f4a7c15ull};
  int cases = 0, bad = 0;
  static const size_t esz[] = {1, 2, 4, 8};
  for (size_t k = 0; k < sizeof nearest_cases / sizeof nearest_cases[0]; k++) {
    int64_t yd[K_MAX_DIMS];
    float sc[K_MAX_DIMS];
    resolve(&nearest_cases[k], yd, sc);
    for (int c = 0; c <= K_COORD_TF_HALF_PIXEL; c++)
      for (int m = 0; m <= K_NEAREST_SIMPLE; m++) {
        bad += nearest_case(&r, nearest_cases[k].nd, nearest_cases[k].x, yd, sc, esz[(c + m + k) % 4], (k_coord)c,
                            (k_nearest)m);
        cases++;
      }
  }
  // every element size on the x2 upsample and on a large one (~1M outputs, the 2-D grid)
  for (size_t s = 0; s < 4; s++) {
    int64_t xd[4] = {2, 3, 5, 7}, yd[4] = {2, 3, 10, 14}, xl[4] = {1, 8, 128, 128}, yl[4] = {1, 8, 256, 256};
    float sc[4] = {1, 1, 2, 2};
    bad += nearest_case(&r, 4, xd, yd, sc, esz[s], K_COORD_ASYMMETRIC, K_NEAREST_FLOOR);
    bad += nearest_case(&r, 4, xl, yl, sc, esz[s], K_COORD_HALF_PIXEL, K_NEAREST_ROUND_PREFER_FLOOR);
    cases += 2;
  }
  // rank 0: one element
  bad += nearest_case(&r, 0, NULL, NULL, NULL, 4, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR);
  cases++;
  printf("nearest: %d cases (5 coordinate x 5 nearest modes each), %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);

  // Known values, not only agreement: [1, 4] -> [1, 8] asymmetric floor repeats each element.
  float x[4] = {1, 2, 3, 4}, y[8], want[8] = {1, 1, 2, 2, 3, 3, 4, 4};
  int64_t xd[2] = {1, 4}, yd[2] = {1, 8};
  float sc[2] = {1, 2};
  float *dx = tk_to_dev(x, sizeof x), *dy = tk_dev_alloc(sizeof y);
  TK_OK(k_resize_nearest_cuda(dy, dx, 4, 2, xd, yd, sc, K_COORD_ASYMMETRIC, K_NEAREST_FLOOR, NULL, TK_E));
  tk_from_dev(y, dy, sizeof y);
  tk_compare("nearest known values", y, want, 8, 0, 0);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
}

// --- linear

// x [outer, ih, iw, inner] -> y [outer, oh, ow, inner]; the reference runs
// on x transposed to [outer, inner, ih, iw] and its result is transposed
// back. FP16: inputs rounded to half first, the reference rounded once.
static int linear_case(tk_rng *r, size_t outer, int64_t ih, int64_t iw, size_t inner, int64_t oh, int64_t ow,
                       float sh, float sw, k_coord c, int half) {
  size_t nx = outer * (size_t)(ih * iw) * inner, ny = outer * (size_t)(oh * ow) * inner;
  float *x = tk_xmalloc(nx * 4), *xt = tk_xmalloc(nx * 4), *yt = tk_xmalloc(ny * 4), *want = tk_xmalloc(ny * 4),
        *got = tk_xmalloc(ny * 4);
  uint16_t *xh = tk_xmalloc(nx * 2), *gh = tk_xmalloc(ny * 2), *wh = tk_xmalloc(ny * 2);
  tk_fill(r, x, nx, -8.0f, 8.0f);
  if (half) {
    k_f32_to_f16(xh, x, nx);
    k_f16_to_f32(x, xh, nx);
  }
  int64_t d4[4] = {(int64_t)outer, ih, iw, (int64_t)inner};
  int to_cf[4] = {0, 3, 1, 2}, to_cl[4] = {0, 2, 3, 1};
  k_transpose(xt, x, 4, 4, d4, to_cf);
  k_resize_linear(yt, xt, outer * inner, ih, iw, oh, ow, sh, sw, c);
  int64_t yt4[4] = {(int64_t)outer, (int64_t)inner, oh, ow};
  k_transpose(want, yt, 4, 4, yt4, to_cl);
  void *dx = half ? tk_to_dev(xh, nx * 2) : tk_to_dev(x, nx * 4), *dy = tk_dev_alloc(ny * (half ? 2 : 4));
  err e = {0};
  int rc = k_resize_linear_cuda(dy, dx, half ? K_F16 : K_F32, outer, ih, iw, inner, oh, ow, sh, sw, c, NULL, &e);
  if (rc) fprintf(stderr, "  k_resize_linear_cuda: %s\n", e.msg);
  int bad;
  if (half) {
    tk_from_dev(gh, dy, ny * 2);
    k_f32_to_f16(wh, want, ny);
    bad = rc != 0 || memcmp(gh, wh, ny * 2) != 0;
    if (bad) {
      k_f16_to_f32(got, gh, ny);
      k_f16_to_f32(want, wh, ny);
    }
  } else {
    tk_from_dev(got, dy, ny * 4);
    bad = rc != 0 || memcmp(got, want, ny * 4) != 0;
  }
  if (bad) {
    fprintf(stderr, "  linear %s %s [%zu, %lld, %lld, %zu] -> [%lld, %lld] scales %g, %g\n", coord_name[c],
            half ? "f16" : "f32", outer, (long long)ih, (long long)iw, inner, (long long)oh, (long long)ow,
            (double)sh, (double)sw);
    tk_compare("linear", got, want, ny, 0, 0);
  }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(x), free(xt), free(yt), free(want), free(got), free(xh), free(gh), free(wh);
  return bad;
}

static void test_linear(void) {
  tk_rng r = {0xd1b54a32d192ed03ull};
  struct {
    size_t outer;
    int64_t ih, iw;
    size_t inner;
    float sh, sw;  // 0: sizes oh, ow
    int64_t oh, ow;
  } cases[] = {
      {6, 5, 7, 1, 2, 2, 0, 0},         // NCHW x2 (N*C = 6)
      {2, 5, 7, 3, 2, 2, 0, 0},         // NHWC x2 (N = 2, C = 3)
      {4, 9, 11, 1, 0.5f, 0.5f, 0, 0},  // down
      {1, 8, 6, 5, 1.3f, 0.7f, 0, 0},   // fractional, NHWC
      {3, 6, 5, 1, 0, 0, 13, 4},        // sizes
      {2, 4, 4, 2, 0, 0, 1, 1},         // to 1 x 1
      {2, 1, 1, 4, 3, 5, 0, 0},         // from 1 x 1
      {1, 1, 7, 1, 2, 2, 0, 0},         // one row
      {1, 3, 3, 1, 1, 1, 0, 0},         // scale 1
      {64, 32, 32, 1, 2, 2, 0, 0},      // ~262k outputs NCHW
      {1, 64, 64, 64, 2, 2, 0, 0},      // ~1M outputs NHWC
  };
  int n = 0, bad = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    int64_t oh = cases[k].sh > 0 ? scaled(cases[k].ih, cases[k].sh) : cases[k].oh;
    int64_t ow = cases[k].sw > 0 ? scaled(cases[k].iw, cases[k].sw) : cases[k].ow;
    float sh = cases[k].sh > 0 ? cases[k].sh : (float)oh / (float)cases[k].ih;
    float sw = cases[k].sw > 0 ? cases[k].sw : (float)ow / (float)cases[k].iw;
    for (int c = 0; c <= K_COORD_TF_HALF_PIXEL; c++)
      for (int half = 0; half < 2; half++) {
        bad += linear_case(&r, cases[k].outer, cases[k].ih, cases[k].iw, cases[k].inner, oh, ow, sh, sw,
                           (k_coord)c, half);
        n++;
      }
  }
  printf("linear: %d cases (5 coordinate modes x fp32/fp16 each), %d mismatched\n", n, bad);
  CHECK_EQ_INT(bad, 0);

  // Known values: [1, 2] -> [1, 4] half_pixel blends 1 and 3 as 1, 1.5, 2.5, 3.
  float x[2] = {1, 3}, y[4], want[4] = {1, 1.5f, 2.5f, 3};
  float *dx = tk_to_dev(x, sizeof x), *dy = tk_dev_alloc(sizeof y);
  TK_OK(k_resize_linear_cuda(dy, dx, K_F32, 1, 1, 2, 1, 1, 4, 1.0f, 2.0f, K_COORD_HALF_PIXEL, NULL, TK_E));
  tk_from_dev(y, dy, sizeof y);
  tk_compare("linear known values", y, want, 4, 0, 0);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
}

// --- pad

static int pad_case(tk_rng *r, int nd, const int64_t *xd, const int64_t *b, const int64_t *en, size_t esz,
                    k_padmode mode) {
  int64_t yd[K_MAX_DIMS];
  for (int i = 0; i < nd; i++) yd[i] = xd[i] + b[i] + en[i];
  size_t nx = (size_t)count(nd, xd), ny = (size_t)count(nd, yd);
  uint8_t *x = tk_xmalloc(nx * esz), *want = tk_xmalloc(ny * esz), *got = tk_xmalloc(ny * esz), value[8];
  fill_bytes(r, x, nx * esz);
  fill_bytes(r, value, sizeof value);
  k_pad(want, x, esz, nd, xd, b, yd, mode, value);
  void *dx = nx ? tk_to_dev(x, nx * esz) : NULL, *dy = tk_dev_alloc(ny * esz);
  err e = {0};
  int rc = k_pad_cuda(dy, dx, esz, nd, xd, b, yd, mode, value, NULL, &e);
  if (rc) fprintf(stderr, "  k_pad_cuda: %s\n", e.msg);
  tk_from_dev(got, dy, ny * esz);
  int bad = rc != 0 || memcmp(got, want, ny * esz) != 0;
  if (bad) {
    fprintf(stderr, "  pad mode %d esz %zu rank %d:", (int)mode, esz, nd);
    for (int i = 0; i < nd; i++) fprintf(stderr, " %lld%+lld%+lld", (long long)xd[i], (long long)b[i], (long long)en[i]);
    fprintf(stderr, "\n");
    tk_compare_bits("pad", got, want, ny * esz);
  }
  if (dx) TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(x), free(want), free(got);
  return bad;
}

static void test_pad(void) {
  tk_rng r = {0x2545f4914f6cdd1dull};
  struct {
    int nd;
    int64_t x[K_MAX_DIMS], b[K_MAX_DIMS], e[K_MAX_DIMS];
    int modes;  // bit per k_padmode that fits the pads
  } cases[] = {
      {4, {2, 3, 5, 7}, {0, 0, 1, 1}, {0, 0, 1, 1}, 7},            // the conv "same" border
      {4, {2, 3, 5, 7}, {0, 0, 4, 6}, {0, 0, 4, 6}, 7},            // maximal reflect (dim - 1)
      {4, {2, 3, 5, 7}, {0, 0, 2, 0}, {0, 0, 0, 3}, 7},            // asymmetric
      {4, {2, 3, 5, 7}, {1, 2, 1, 0}, {0, 1, 2, 3}, 7},            // every dim, N and C too
      {4, {2, 3, 5, 7}, {0, 0, -1, -2}, {0, 0, -2, -1}, 7},        // negative: crops
      {4, {2, 3, 5, 7}, {0, -1, 2, -3}, {-1, 0, -1, 3}, 7},        // mixed
      {4, {2, 3, 5, 7}, {0, 0, 9, 0}, {0, 0, 0, 11}, 5},           // wider than the dim: constant, edge
      {3, {1, 1, 1}, {2, 0, 3}, {1, 4, 0}, 7},                     // dims of 1 (reflect repeats)
      {1, {9}, {3}, {5}, 7},
      {5, {2, 3, 2, 3, 4}, {1, 0, 1, 2, 0}, {0, 2, 1, 0, 3}, 7},
      {8, {2, 1, 2, 1, 2, 1, 2, 3}, {0, 1, 0, 0, 1, 0, 1, 2}, {1, 0, 0, 2, 0, 0, 1, 2}, 5},
      {2, {0, 3}, {1, 1}, {1, 0}, 1},                              // empty input, constant
      {4, {1, 64, 128, 128}, {0, 0, 1, 1}, {0, 0, 1, 1}, 7},       // ~1M outputs
  };
  static const size_t esz[] = {1, 2, 4, 8};
  int n = 0, bad = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (int mode = 0; mode < 3; mode++) {
      if (!(cases[k].modes & (1 << mode))) continue;
      for (size_t s = 0; s < 4; s++) {
        if (cases[k].x[3] == 128 && s != 2) continue;  // the large one in FP32's size only
        bad += pad_case(&r, cases[k].nd, cases[k].x, cases[k].b, cases[k].e, esz[s], (k_padmode)mode);
        n++;
      }
    }
  printf("pad: %d cases, %d mismatched\n", n, bad);
  CHECK_EQ_INT(bad, 0);

  // Known values: [3] reflect 2, 2 -> 3 2 | 1 2 3 | 2 1; edge -> 1 1 | 1 2 3 | 3 3; constant 9.
  float x[3] = {1, 2, 3}, y[7], nine = 9.0f;
  float want[3][7] = {{9, 9, 1, 2, 3, 9, 9}, {3, 2, 1, 2, 3, 2, 1}, {1, 1, 1, 2, 3, 3, 3}};
  int64_t xd[1] = {3}, b[1] = {2}, yd[1] = {7};
  float *dx = tk_to_dev(x, sizeof x), *dy = tk_dev_alloc(sizeof y);
  for (int mode = 0; mode < 3; mode++) {
    TK_OK(k_pad_cuda(dy, dx, 4, 1, xd, b, yd, (k_padmode)mode, &nine, NULL, TK_E));
    tk_from_dev(y, dy, sizeof y);
    tk_compare("pad known values", y, want[mode], 7, 0, 0);
  }
  // value NULL: zeros
  float zeros[7] = {0, 0, 1, 2, 3, 0, 0};
  TK_OK(k_pad_cuda(dy, dx, 4, 1, xd, b, yd, K_PAD_CONSTANT, NULL, NULL, TK_E));
  tk_from_dev(y, dy, sizeof y);
  tk_compare("pad zeros", y, zeros, 7, 0, 0);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
}

// --- argument checks (host only: every call fails, or returns 0, before a launch)

static void test_errors(void) {
  err e = {0};
  void *p = (void *)256;  // never dereferenced
  int64_t x2[2] = {2, 3}, y2[2] = {4, 6}, z2[2] = {0, 3}, neg[2] = {-1, 3}, big[2] = {INT64_MAX / 2, 8};
  float s2[2] = {2, 2}, s0[2] = {0, 2}, snan[2] = {NAN, 2}, sinf[2] = {INFINITY, 2};
  // nearest
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 9, x2, y2, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_resize_nearest_cuda");
  CHECK_CONTAINS(e.msg, "rank");
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, NULL, y2, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, x2, y2, NULL, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 3, 2, x2, y2, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "element size");
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, x2, y2, s2, (k_coord)6, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "mode");
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, x2, y2, s2, K_COORD_HALF_PIXEL, (k_nearest)-1, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, neg, y2, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, x2, big, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
  const float *bad_scales[] = {s0, snan, sinf};
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, x2, y2, bad_scales[i], K_COORD_HALF_PIXEL, K_NEAREST_FLOOR,
                                       NULL, &e),
                 ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "scale");
  }
  CHECK_EQ_INT(k_resize_nearest_cuda(p, p, 4, 2, z2, y2, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "empty input");
  CHECK_EQ_INT(k_resize_nearest_cuda(NULL, p, 4, 2, x2, y2, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_resize_nearest_cuda(NULL, NULL, 4, 2, x2, z2, s2, K_COORD_HALF_PIXEL, K_NEAREST_FLOOR, NULL, &e),
               0);  // empty output: nothing to do
  // linear
  CHECK_EQ_INT(k_resize_linear_cuda(p, p, K_I64, 1, 2, 2, 1, 4, 4, 2, 2, K_COORD_HALF_PIXEL, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_resize_linear_cuda");
  CHECK_EQ_INT(k_resize_linear_cuda(p, p, K_F32, 1, 2, 2, 1, 4, 4, 2, 2, (k_coord)9, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_resize_linear_cuda(p, p, K_F32, 1, -2, 2, 1, 4, 4, 2, 2, K_COORD_HALF_PIXEL, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_resize_linear_cuda(p, p, K_F32, 1, 2, 2, 1, 4, 4, 0, 2, K_COORD_HALF_PIXEL, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "scales");
  CHECK_EQ_INT(k_resize_linear_cuda(p, p, K_F16, 1, 2, 2, 1, 4, 4, 2, NAN, K_COORD_HALF_PIXEL, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_resize_linear_cuda(p, p, K_F32, SIZE_MAX / 2, 2, 2, 4, 4, 4, 2, 2, K_COORD_HALF_PIXEL, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
  CHECK_EQ_INT(k_resize_linear_cuda(p, p, K_F32, 1, 0, 2, 1, 4, 4, 2, 2, K_COORD_HALF_PIXEL, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "empty input");
  CHECK_EQ_INT(k_resize_linear_cuda(p, NULL, K_F32, 1, 2, 2, 1, 4, 4, 2, 2, K_COORD_HALF_PIXEL, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_resize_linear_cuda(NULL, NULL, K_F32, 0, 2, 2, 1, 4, 4, 2, 2, K_COORD_HALF_PIXEL, NULL, &e), 0);
  // pad
  int64_t b2[2] = {1, 1}, py[2] = {4, 5};
  CHECK_EQ_INT(k_pad_cuda(p, p, 4, 9, x2, b2, py, K_PAD_CONSTANT, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_pad_cuda");
  CHECK_EQ_INT(k_pad_cuda(p, p, 4, 2, x2, NULL, py, K_PAD_CONSTANT, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_pad_cuda(p, p, 16, 2, x2, b2, py, K_PAD_CONSTANT, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "element size");
  CHECK_EQ_INT(k_pad_cuda(p, p, 4, 2, x2, b2, py, (k_padmode)4, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "mode");
  CHECK_EQ_INT(k_pad_cuda(p, p, 4, 2, neg, b2, py, K_PAD_CONSTANT, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_pad_cuda(p, NULL, 4, 2, z2, b2, py, K_PAD_REFLECT, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "reflect padding of the empty dim 0");
  CHECK_EQ_INT(k_pad_cuda(p, NULL, 4, 2, z2, b2, py, K_PAD_EDGE, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "edge");
  CHECK_EQ_INT(k_pad_cuda(p, NULL, 4, 2, x2, b2, py, K_PAD_EDGE, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_pad_cuda(NULL, NULL, 4, 2, x2, b2, z2, K_PAD_REFLECT, NULL, NULL, &e), 0);  // empty output
}

int main(void) {
  test_errors();
  tk_require_device();
  test_nearest();
  test_linear();
  test_pad();
  CHECK_DONE();
}
