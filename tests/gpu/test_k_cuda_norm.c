// Tests kernels/norm/k_norm.cu against k_layer_norm and k_batch_norm (kernels/norm/k_norm.c).
// layer_norm (FP32): rtol 1e-5, atol 1e-6. Rows up to 8192 columns run the
// register kernel (float statistics, corrected two-pass: kernels/norm/k_norm.cu bounds
// its error at ~1.3e-6 relative in the worst case, ~1e-7 for these random
// rows; atol covers outputs near 0 where bias cancels the normalised
// value); longer rows the block kernel (double sums like the reference:
// within an ulp). Cases cover each of the register kernel's shapes (one
// warp per row with 1..32 elements per thread, 2, 4 and 8 warps per row,
// partly filled ones), the 16-byte vector path and the one-element path
// (odd widths, widths that 4 does not divide, x/y or scale/bias off the
// 16-byte boundary), the fallback past 8192 and, through
// k_layer_norm__block_cuda, at transformer widths, 1 row and more rows
// than the grid (grid-stride), bias NULL, in place, and large common
// offsets (mean >> spread: the float statistics must not lose the spread).
// layer_norm_f16: see test_layer_norm_f16.
// batch_norm: bit-exact (same double factor per channel, same float ops per
// element). Shapes with spatial 1, odd spatial, many channels, ~1M elements.
#include "test_k_cuda_util.h"

// One layer-norm call. shift moves x and y (shift_params: scale and bias)
// that many elements past cudaMalloc's 256-byte alignment.
typedef struct ln_case {
  size_t rows, cols;
  float offset;  // inputs drawn from [offset - 2, offset + 2)
  int no_bias, in_place, shift, shift_params;
  int block;  // through k_layer_norm__block_cuda / _f16__block_cuda
} ln_case;

// A device copy of n elements of esz bytes, `shift` elements into its buffer;
// *base gets the pointer to free.
static void *ln_to_dev(const void *h, size_t n, size_t esz, int shift, void **base) {
  *base = tk_dev_alloc((n + (size_t)shift) * esz);
  char *d = (char *)*base + (size_t)shift * esz;
  if (n) TK_CUDA(cudaMemcpy(d, h, n * esz, cudaMemcpyHostToDevice));
  return d;
}

// f16: inputs drawn in float and rounded to half, the reference k_layer_norm
// on the same (widened) values; k_layer_norm_f16_cuda (or its block twin)
// on the half bits.
static void layer_run(tk_rng *r, const ln_case *c, int f16) {
  size_t rows = c->rows, cols = c->cols, n = rows * cols, esz = f16 ? 2 : 4;
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  float *scale = tk_xmalloc(cols * 4), *bias = tk_xmalloc(cols * 4);
  tk_fill(r, x, n, c->offset - 2.0f, c->offset + 2.0f);
  tk_fill(r, scale, cols, 0.5f, 1.5f);
  tk_fill(r, bias, cols, -1.0f, 1.0f);
  void *hx = x, *hs = scale, *hb = bias, *hy = got;
  uint16_t *xh = NULL, *sh = NULL, *bh = NULL, *yh = NULL;
  if (f16) {  // the values both sides see
    xh = tk_xmalloc(n * 2), sh = tk_xmalloc(cols * 2), bh = tk_xmalloc(cols * 2);
    yh = tk_xmalloc(n * 2);
    k_f32_to_f16(xh, x, n);
    k_f16_to_f32(x, xh, n);
    k_f32_to_f16(sh, scale, cols);
    k_f16_to_f32(scale, sh, cols);
    k_f32_to_f16(bh, bias, cols);
    k_f16_to_f32(bias, bh, cols);
    hx = xh, hs = sh, hb = bh, hy = yh;
  }
  const float eps = 1e-5f;
  k_layer_norm(want, x, scale, c->no_bias ? NULL : bias, rows, cols, eps);
  void *bx, *by = NULL, *bs, *bb;
  void *dx = ln_to_dev(hx, n, esz, c->shift, &bx), *dy = dx;
  if (!c->in_place) {  // shifted as x
    by = tk_dev_alloc((n + (size_t)c->shift) * esz);
    dy = (char *)by + (size_t)c->shift * esz;
  }
  void *ds = ln_to_dev(hs, cols, esz, c->shift_params, &bs);
  void *db = ln_to_dev(hb, cols, esz, c->shift_params, &bb);
  if (c->no_bias) db = NULL;
  if (f16 && c->block)
    TK_OK(k_layer_norm_f16__block_cuda(dy, dx, ds, db, rows, cols, eps, NULL, TK_E));
  else if (f16)
    TK_OK(k_layer_norm_f16_cuda(dy, dx, ds, db, rows, cols, eps, NULL, TK_E));
  else if (c->block)
    TK_OK(k_layer_norm__block_cuda(dy, dx, ds, db, rows, cols, eps, NULL, TK_E));
  else
    TK_OK(k_layer_norm_cuda(dy, dx, ds, db, rows, cols, eps, NULL, TK_E));
  tk_from_dev(hy, dy, n * esz);
  if (f16) k_f16_to_f32(got, yh, n);
  char what[160];
  snprintf(what, sizeof what, "layer_norm%s%s [%zu,%zu] offset %g%s%s%s%s", f16 ? "_f16" : "",
           c->block ? " block" : "", rows, cols, (double)c->offset, c->no_bias ? " no bias" : "",
           c->in_place ? " in place" : "", c->shift ? " x/y shifted" : "",
           c->shift_params ? " scale/bias shifted" : "");
  if (f16)
    tk_compare(what, got, want, n, 1e-3, 1e-4);
  else
    tk_compare(what, got, want, n, 1e-5, 1e-6);
  TK_CUDA(cudaFree(bx));
  if (by) TK_CUDA(cudaFree(by));
  TK_CUDA(cudaFree(bs));
  TK_CUDA(cudaFree(bb));
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

// Every shape with and without bias, then the special cases.
static void layer_sweep(tk_rng *r, const size_t (*shapes)[2], size_t n_shapes,
                        const ln_case *extra, size_t n_extra, int f16) {
  for (size_t s = 0; s < n_shapes; s++)
    for (int nb = 0; nb < 2; nb++) {
      ln_case c = {.rows = shapes[s][0], .cols = shapes[s][1], .no_bias = nb};
      layer_run(r, &c, f16);
    }
  for (size_t s = 0; s < n_extra; s++) layer_run(r, &extra[s], f16);
}

// Register kernel shapes (FP32, 16-byte vectors are 4 floats): 1 column,
// widths below a warp (7, 17, 31), 1..8 vectors per lane (100, 768, 1024),
// 2 warps (1536), 4 (3072, 4096), 8 (5000 partly filled, 8192); widths on
// the one-element path (odd, or 770: even but not a multiple of 4); more
// rows than the grid (16500 rows of 256 at four rows a block, 4103 rows of
// 2000 at one, 65537 of 3); the block fallback past 8192 (8193, ~1M).
static void test_layer_norm(void) {
  static const size_t shapes[][2] = {
      {1, 1},      {3, 1},    {1, 7},     {1, 31},     {64, 31},    {3, 17},
      {5, 33},     {2, 100},  {64, 768},  {64, 770},   {1, 1024},   {1024, 1024},
      {33, 1536},  {16, 3072}, {16, 4096}, {7, 4099},   {5, 5000},   {3, 8192},
      {16500, 256}, {4103, 2000}, {65537, 3}, {2, 8193}, {1, 1048579}};
  static const ln_case extra[] = {
      {.rows = 32, .cols = 1000, .offset = 1000.0f},  // mean 1000, spread 2
      {.rows = 32, .cols = 1000, .offset = 1000.0f, .shift = 1},
      {.rows = 64, .cols = 768, .offset = 10000.0f},
      {.rows = 8, .cols = 4096, .offset = -300.0f, .no_bias = 1},
      {.rows = 4, .cols = 8192, .offset = 1000.0f},
      {.rows = 64, .cols = 31, .offset = 100.0f},
      {.rows = 64, .cols = 768, .shift = 1},  // x, y 4 bytes off: one element per access
      {.rows = 64, .cols = 768, .shift = 2, .no_bias = 1},  // 8 bytes off
      {.rows = 16, .cols = 4096, .shift = 3},
      {.rows = 64, .cols = 768, .shift_params = 1},  // scale, bias off the boundary
      {.rows = 33, .cols = 257, .offset = 3.0f, .in_place = 1},
      {.rows = 64, .cols = 1024, .in_place = 1},  // vector path in place
      {.rows = 3, .cols = 6000, .in_place = 1},
      {.rows = 64, .cols = 768, .block = 1},  // the fallback kernel at narrow widths
      {.rows = 5, .cols = 33, .block = 1, .no_bias = 1},
      {.rows = 32, .cols = 1000, .offset = 1000.0f, .block = 1}};
  tk_rng r = {31337};
  layer_sweep(&r, shapes, sizeof shapes / sizeof shapes[0], extra, sizeof extra / sizeof extra[0],
              0);
}

// FP16 storage (k_layer_norm_f16_cuda, what an FP16 plan's
// LayerNormalization runs). Both kernels keep mean, variance and the
// per-element math in float and round each output to half once, so they are
// within half an ulp of the reference (2^-11 relative) plus float's error:
// rtol 1e-3, atol 1e-4 (outputs near 0 where the bias cancels). Shapes
// (16-byte vectors are 8 halves): BERT-base's [B*S, 768] at batch 32 x
// seq 128, GPT-2 XL's 1600, 1 to 4 vectors per lane, 2, 4 and 8 warps per
// row, widths on the one-element path (odd, or 772: a multiple of 4 but not
// of 8), more rows than the grid (16500 x 256, 4103 x 2048, 262147 x 3),
// the fallback past 8192 (8200, 65537); common offsets of 100 (half's ulp
// there is 1/16: the statistics must not lose the spread), misaligned
// pointers, no bias, in place, and the block kernel at BERT's shape.
static void test_layer_norm_f16(void) {
  static const size_t shapes[][2] = {{1, 1},       {1, 31},      {3, 17},     {5, 33},
                                     {64, 256},    {4096, 768},  {64, 772},   {1, 1024},
                                     {8, 1600},    {16, 3072},   {16, 4096},  {7, 4099},
                                     {4, 8192},    {16500, 256}, {4103, 2048}, {262147, 3},
                                     {2, 8200},    {1, 65537}};
  static const ln_case extra[] = {
      {.rows = 64, .cols = 768, .offset = 100.0f},  // mean 100, spread 2
      {.rows = 16, .cols = 4096, .offset = 100.0f},
      {.rows = 4, .cols = 8192, .offset = -100.0f, .no_bias = 1},
      {.rows = 64, .cols = 768, .shift = 1},  // 2 bytes off
      {.rows = 64, .cols = 768, .shift = 4},  // 8 bytes off
      {.rows = 64, .cols = 768, .shift_params = 1, .no_bias = 1},
      {.rows = 33, .cols = 257, .offset = 3.0f, .in_place = 1},
      {.rows = 64, .cols = 768, .in_place = 1},
      {.rows = 4096, .cols = 768, .block = 1},
      {.rows = 5, .cols = 33, .block = 1}};
  tk_rng r = {2718};
  layer_sweep(&r, shapes, sizeof shapes / sizeof shapes[0], extra, sizeof extra / sizeof extra[0],
              1);
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
  CHECK_EQ_INT(k_layer_norm_cuda(p, p, p, NULL, SIZE_MAX, 2, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
  uint16_t *h = (uint16_t *)16;
  CHECK_EQ_INT(k_layer_norm_f16_cuda(h, h, NULL, h, 4, 768, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_layer_norm_f16_cuda");
  CHECK_EQ_INT(k_layer_norm__block_cuda(p, NULL, p, NULL, 4, 768, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_layer_norm__block_cuda");
  CHECK_EQ_INT(k_layer_norm_f16__block_cuda(h, h, h, NULL, 4, 768, NAN, NULL, &e),
               ERR_INVALID_ARGUMENT);
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
