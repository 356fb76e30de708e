// Tests kernels/k_norm.cu against k_layer_norm and k_batch_norm (k_norm.c).
// layer_norm: rtol 1e-5, atol 1e-6. Both compute in double (two passes) and
// round once to float; they differ only in the order of the double sums
// (~1e-16 relative), so a result is off by at most one float ulp, and atol
// covers results near 0 where bias cancels the normalised value. Shapes:
// 1 column, odd widths, 768 and 4096 (transformer widths), one ~1M row,
// 1024 x 1024, a large common offset (mean >> spread), bias NULL, in place.
// layer_norm_f16: see layer_case16.
// batch_norm: bit-exact (same double factor per channel, same float ops per
// element). Shapes with spatial 1, odd spatial, many channels, ~1M elements.
#include "test_k_cuda_util.h"

static void layer_case(tk_rng *r, size_t rows, size_t cols, float offset, int with_bias,
                       int in_place) {
  size_t n = rows * cols;
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  float *scale = tk_xmalloc(cols * 4), *bias = tk_xmalloc(cols * 4);
  tk_fill(r, x, n, offset - 2.0f, offset + 2.0f);
  tk_fill(r, scale, cols, 0.5f, 1.5f);
  tk_fill(r, bias, cols, -1.0f, 1.0f);
  const float eps = 1e-5f;
  k_layer_norm(want, x, scale, with_bias ? bias : NULL, rows, cols, eps);
  float *dx = tk_to_dev(x, n * 4), *dy = in_place ? dx : tk_dev_alloc(n * 4);
  float *ds = tk_to_dev(scale, cols * 4), *db = tk_to_dev(bias, cols * 4);
  TK_OK(k_layer_norm_cuda(dy, dx, ds, with_bias ? db : NULL, rows, cols, eps, NULL, TK_E));
  tk_from_dev(got, dy, n * 4);
  char what[128];
  snprintf(what, sizeof what, "layer_norm [%zu,%zu] offset %g%s%s", rows, cols, (double)offset,
           with_bias ? "" : " no bias", in_place ? " in place" : "");
  tk_compare(what, got, want, n, 1e-5, 1e-6);
  if (!in_place) TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(ds));
  TK_CUDA(cudaFree(db));
  free(x);
  free(want);
  free(got);
  free(scale);
  free(bias);
}

static void test_layer_norm(void) {
  static const size_t shapes[][2] = {{1, 1},    {3, 1},       {1, 7},       {3, 17},
                                     {5, 33},   {2, 100},     {64, 768},    {16, 4096},
                                     {7, 4099}, {1, 1048579}, {1024, 1024}, {65537, 3}};
  tk_rng r = {31337};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    layer_case(&r, shapes[s][0], shapes[s][1], 0.0f, 1, 0);
    layer_case(&r, shapes[s][0], shapes[s][1], 0.0f, 0, 0);
  }
  layer_case(&r, 32, 1000, 1000.0f, 1, 0);  // mean 1000, spread 2
  layer_case(&r, 8, 4096, -300.0f, 0, 0);
  layer_case(&r, 33, 257, 3.0f, 1, 1);  // in place
}

// FP16 storage (k_layer_norm_f16_cuda, what an FP16 plan's LayerNormalization
// runs): inputs drawn in float and rounded to half, the reference k_layer_norm
// on the same (widened) values. The kernel keeps mean, variance and the
// per-element math in float and rounds each output to half once, so it is
// within half an ulp of the reference (2^-11 relative) plus float's error:
// rtol 1e-3, atol 1e-4 (outputs near 0 where the bias cancels). Shapes:
// BERT-base's [B*S, 768] at batch 32 x seq 128, GPT-2 XL's 1600, odd widths,
// more rows than the grid (grid-stride), a common offset of 100 (half's ulp
// there is 1/16: the two-pass statistics must not lose the spread), no bias,
// in place.
static void layer_case16(tk_rng *r, size_t rows, size_t cols, float offset, int with_bias,
                         int in_place) {
  size_t n = rows * cols;
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  float *scale = tk_xmalloc(cols * 4), *bias = tk_xmalloc(cols * 4);
  uint16_t *xh = tk_xmalloc(n * 2), *sh = tk_xmalloc(cols * 2), *bh = tk_xmalloc(cols * 2),
           *yh = tk_xmalloc(n * 2);
  tk_fill(r, x, n, offset - 2.0f, offset + 2.0f);
  tk_fill(r, scale, cols, 0.5f, 1.5f);
  tk_fill(r, bias, cols, -1.0f, 1.0f);
  k_f32_to_f16(xh, x, n);  // the values both sides see
  k_f16_to_f32(x, xh, n);
  k_f32_to_f16(sh, scale, cols);
  k_f16_to_f32(scale, sh, cols);
  k_f32_to_f16(bh, bias, cols);
  k_f16_to_f32(bias, bh, cols);
  const float eps = 1e-5f;
  k_layer_norm(want, x, scale, with_bias ? bias : NULL, rows, cols, eps);
  uint16_t *dx = tk_to_dev(xh, n * 2), *dy = in_place ? dx : tk_dev_alloc(n * 2);
  uint16_t *ds = tk_to_dev(sh, cols * 2), *db = tk_to_dev(bh, cols * 2);
  TK_OK(k_layer_norm_f16_cuda(dy, dx, ds, with_bias ? db : NULL, rows, cols, eps, NULL, TK_E));
  tk_from_dev(yh, dy, n * 2);
  k_f16_to_f32(got, yh, n);
  char what[128];
  snprintf(what, sizeof what, "layer_norm_f16 [%zu,%zu] offset %g%s%s", rows, cols,
           (double)offset, with_bias ? "" : " no bias", in_place ? " in place" : "");
  tk_compare(what, got, want, n, 1e-3, 1e-4);
  if (!in_place) TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(ds));
  TK_CUDA(cudaFree(db));
  free(x);
  free(want);
  free(got);
  free(scale);
  free(bias);
  free(xh);
  free(sh);
  free(bh);
  free(yh);
}

static void test_layer_norm_f16(void) {
  static const size_t shapes[][2] = {{1, 1},  {3, 17},   {5, 33},     {4096, 768},
                                     {8, 1600}, {7, 4099}, {262147, 3}, {1, 65537}};
  tk_rng r = {2718};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    layer_case16(&r, shapes[s][0], shapes[s][1], 0.0f, 1, 0);
    layer_case16(&r, shapes[s][0], shapes[s][1], 0.0f, 0, 0);
  }
  layer_case16(&r, 64, 768, 100.0f, 1, 0);  // mean 100, spread 2
  layer_case16(&r, 33, 257, 3.0f, 1, 1);    // in place
}

static void batch_case(tk_rng *r, size_t nb, size_t c, size_t spatial, int with_bias,
                       int in_place) {
  size_t n = nb * c * spatial;
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  float *scale = tk_xmalloc(c * 4), *bias = tk_xmalloc(c * 4), *mean = tk_xmalloc(c * 4),
        *var = tk_xmalloc(c * 4);
  tk_fill(r, x, n, -5.0f, 5.0f);
  tk_fill(r, scale, c, -2.0f, 2.0f);
  tk_fill(r, bias, c, -1.0f, 1.0f);
  tk_fill(r, mean, c, -1.0f, 1.0f);
  tk_fill(r, var, c, 0.0f, 3.0f);
  const float eps = 1e-3f;
  k_batch_norm(want, x, scale, with_bias ? bias : NULL, mean, var, nb, c, spatial, eps);
  float *dx = tk_to_dev(x, n * 4), *dy = in_place ? dx : tk_dev_alloc(n * 4);
  float *ds = tk_to_dev(scale, c * 4), *db = tk_to_dev(bias, c * 4);
  float *dm = tk_to_dev(mean, c * 4), *dv = tk_to_dev(var, c * 4);
  TK_OK(k_batch_norm_cuda(dy, dx, ds, with_bias ? db : NULL, dm, dv, nb, c, spatial, eps, NULL,
                          TK_E));
  tk_from_dev(got, dy, n * 4);
  char what[128];
  snprintf(what, sizeof what, "batch_norm [%zu,%zu,%zu]%s%s", nb, c, spatial,
           with_bias ? "" : " no bias", in_place ? " in place" : "");
  tk_compare_bits(what, got, want, n * 4);
  if (!in_place) TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(ds));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dm));
  TK_CUDA(cudaFree(dv));
  free(x);
  free(want);
  free(got);
  free(scale);
  free(bias);
  free(mean);
  free(var);
}

static void test_batch_norm(void) {
  static const size_t shapes[][3] = {
      {1, 1, 1},    {1, 3, 1},      {2, 3, 5},      {4, 64, 49},
      {8, 1024, 1}, {1, 3, 349527}, {16, 32, 2048}, {3, 5, 1048579 / 15},
      {2, 70000, 1}};
  tk_rng r = {4242};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int b = 0; b < 2; b++) batch_case(&r, shapes[s][0], shapes[s][1], shapes[s][2], b, 0);
  batch_case(&r, 2, 7, 33, 1, 1);
}

static void test_errors(void) {
  err e = {0};
  float *p = (float *)16;
  CHECK_EQ_INT(k_layer_norm_cuda(NULL, NULL, NULL, NULL, 0, 5, 1e-5f, NULL, &e), 0);
  CHECK_EQ_INT(k_layer_norm_cuda(p, p, NULL, NULL, 2, 5, 1e-5f, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_layer_norm_cuda");
  CHECK_EQ_INT(k_layer_norm_cuda(p, p, p, NULL, 2, 5, -1.0f, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "epsilon");
  CHECK_EQ_INT(k_batch_norm_cuda(p, p, p, NULL, p, NULL, 1, 2, 3, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_batch_norm_cuda");
  CHECK_EQ_INT(k_batch_norm_cuda(p, p, p, p, p, p, SIZE_MAX, 2, 3, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
}

int main(void) {
  test_errors();
  tk_require_device();
  test_layer_norm();
  test_layer_norm_f16();
  test_batch_norm();
  CHECK_DONE();
}
