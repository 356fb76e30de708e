// Tests kernels/reduce/k_reduce.cu against the C reference k_reduce_f32 (k_ref.h):
// x as [outer, len, inner] reduced over len, for each of the kernel's
// shapes (inner == 1: a warp per row, the NCHW spatial mean; inner > 1: a
// thread per output, the NHWC one, or with rows of 64 and more a block per
// 32 outputs splitting the row, as an NHWC global pool of 28x28 and a
// partial last block of 32), len 1, long rows, sum/mean/max/min.
// FP32: sums in another order than the reference's, so a bound scaled by
// the row's absolute sum (atol per element); max/min exact. FP16: the
// reference on the half-rounded inputs, rounded once to half, within one
// half ulp plus the FP32 bound. Bad arguments refused on the host.
// Issue 34's cases: every k_redop over an empty set (len 0, x NULL) against
// the reference's value of nothing, exactly (NaN for NaN); BOOL Max and Min
// (any, all) against k_reduce on K_U8 bytes, exactly, empty sets included;
// and k_reduce_axes_cuda over axes that are not one run (MVN's [0, 2, 3],
// [0, 2], every mask of a rank-4 and a rank-5 shape) for all ten ops, FP32 in
// the reference's order (so within the FP32 bound; LogSumExp's and Prod's
// too), FP16 within a half ulp more, BOOL exactly.
#include "test_k_cuda_util.h"

typedef struct { size_t outer, len, inner; } shape;
static const shape shapes[] = {{64, 49, 1}, {2, 49, 96}, {3, 1, 5},    {5, 4096, 1}, {1, 7, 1000},
                               {1, 1, 1},   {2, 784, 72}, {3, 64, 33}, {1, 300, 2}};
static const struct { k_redop op; const char *name; } ops[] = {
    {K_RSUM, "sum"}, {K_RMEAN, "mean"}, {K_RMAX, "max"}, {K_RMIN, "min"}};

// Per output: the sum of |x| over its row (mean: divided by len), scaled:
// what reordering a float sum may cost.
static void row_bounds(const float *x, shape s, k_redop op, double scale, double *atol) {
  for (size_t o = 0; o < s.outer; o++)
    for (size_t i = 0; i < s.inner; i++) {
      double a = 0;
      for (size_t l = 0; l < s.len; l++) a += fabs(x[(o * s.len + l) * s.inner + i]);
      if (op == K_RMEAN) a /= (double)s.len;
      atol[o * s.inner + i] = op == K_RMAX || op == K_RMIN ? 0 : a * scale;
    }
}

static void run_case(tk_rng *r, shape s, int opi, int half) {
  size_t n = s.outer * s.len * s.inner, m = s.outer * s.inner;
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(m * 4), *got = tk_xmalloc(m * 4);
  double *atol = tk_xmalloc(m * sizeof *atol);
  uint16_t *h = tk_xmalloc(n * 2), *hg = tk_xmalloc(m * 2), *hw = tk_xmalloc(m * 2);
  tk_fill(r, x, n, -4.0f, 4.0f);
  if (half) {
    k_f32_to_f16(h, x, n);
    k_f16_to_f32(x, h, n);
  }
  int64_t dims[3] = {(int64_t)s.outer, (int64_t)s.len, (int64_t)s.inner};
  int mask[3] = {0, 1, 0};
  k_reduce_f32(want, x, 3, dims, mask, ops[opi].op);
  row_bounds(x, s, ops[opi].op, 1e-6, atol);
  void *dx = half ? tk_to_dev(h, n * 2) : tk_to_dev(x, n * 4), *dy = tk_dev_alloc(m * (half ? 2 : 4));
  err e = {0};
  CHECK_EQ_INT(k_reduce_cuda(dy, dx, half ? K_F16 : K_F32, s.outer, s.len, s.inner, ops[opi].op, NULL, &e), 0);
  TK_CUDA(cudaDeviceSynchronize());
  if (half) {
    tk_from_dev(hg, dy, m * 2);
    k_f16_to_f32(got, hg, m);
    k_f32_to_f16(hw, want, m);
    k_f16_to_f32(want, hw, m);  // the reference rounded once to half
    for (size_t k = 0; k < m; k++) atol[k] += fabs(want[k]) * (1.0 / 2048);
  } else {
    tk_from_dev(got, dy, m * 4);
  }
  char what[96];
  snprintf(what, sizeof what, "%s %s [%zu, %zu, %zu]", ops[opi].name, half ? "f16" : "f32", s.outer, s.len,
           s.inner);
  tk_compare_ex(what, got, want, m, 0, 0, atol);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(x), free(want), free(got), free(atol), free(h), free(hg), free(hw);
}

static const char *const op_names[] = {"sum", "mean", "max", "min", "prod", "sumsq", "l1", "l2", "logsum",
                                       "logsumexp"};

// every op over [outer, 0, inner]: the reference's value of nothing, bit for bit (NaN for NaN)
static void test_empty(void) {
  int64_t dims[3] = {3, 0, 2};
  int mask[3] = {0, 1, 0};
  float want[6], got[6];
  uint8_t bw[6], bg[6];
  void *dy = tk_dev_alloc(sizeof got);
  for (int op = K_RSUM; op <= K_RLOGSUMEXP; op++) {
    k_reduce_f32(want, NULL, 3, dims, mask, (k_redop)op);
    TK_OK(k_reduce_cuda(dy, NULL, K_F32, 3, 0, 2, (k_redop)op, NULL, TK_E));
    tk_from_dev(got, dy, sizeof got);
    char what[64];
    snprintf(what, sizeof what, "empty %s f32", op_names[op]);
    tk_compare_bits(what, got, want, sizeof got);
    TK_OK(k_reduce_axes_cuda(dy, NULL, K_F32, 3, dims, mask, (k_redop)op, NULL, TK_E));
    tk_from_dev(got, dy, sizeof got);
    tk_compare_bits(what, got, want, sizeof got);
  }
  for (int op = K_RMAX; op <= K_RMIN; op++) {  // BOOL: false and true, as reduce.c's run_reduce writes
    memset(bw, op == K_RMAX ? 0 : 1, sizeof bw);
    TK_OK(k_reduce_cuda(dy, NULL, K_BOOL, 3, 0, 2, (k_redop)op, NULL, TK_E));
    tk_from_dev(bg, dy, sizeof bg);
    tk_compare_bits(op == K_RMAX ? "empty max bool" : "empty min bool", bg, bw, sizeof bg);
  }
  TK_CUDA(cudaFree(dy));
}

// x of rank r (dims d) reduced over mask on the device (k_reduce_axes_cuda, or k_reduce_cuda when the
// mask is one run) against the reference: FP32, FP16, and BOOL for Max/Min.
static int axes_case(tk_rng *r, int rank, const int64_t *d, const int *mask, int op) {
  size_t n = 1, m = 1;
  for (int k = 0; k < rank; k++) n *= (size_t)d[k], m *= mask[k] ? 1 : (size_t)d[k];
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(m * 4), *got = tk_xmalloc(m * 4);
  double *atol = tk_xmalloc(m * sizeof *atol);
  uint16_t *h = tk_xmalloc(n * 2), *hg = tk_xmalloc(m * 2), *hw = tk_xmalloc(m * 2);
  uint8_t *b = tk_xmalloc(n), *bw = tk_xmalloc(m), *bg = tk_xmalloc(m);
  int bad = 0;
  for (int half = 0; half < 2; half++) {
    // Prod and the logs of sums on values near 1 and positive, so the bound below holds
    if (op == K_RPROD) tk_fill(r, x, n, 0.9f, 1.1f);
    else if (op == K_RLOGSUM) tk_fill(r, x, n, 0.1f, 2.0f);
    else tk_fill(r, x, n, -4.0f, 4.0f);
    if (half) {
      k_f32_to_f16(h, x, n);
      k_f16_to_f32(x, h, n);
    }
    k_reduce_f32(want, x, rank, d, mask, (k_redop)op);
    // the reference's order; what may differ is a contracted multiply-add, the device's log and exp: a
    // few ulp of the result, or for Sum and Mean (which cancel) of the sum of |x|
    k_reduce_f32(got, x, rank, d, mask, K_RL1);
    for (size_t k = 0; k < m; k++) {
      double scale = op == K_RSUM ? got[k] : op == K_RMEAN ? got[k] / (double)(n / m) : fabs(want[k]);
      // LogSumExp: an ulp or two of the device's expf and log1pf per element, on sums of up to 360
      double rel = op == K_RLOGSUMEXP ? 1e-4 : 4e-6;
      atol[k] = op == K_RMAX || op == K_RMIN ? 0 : scale * rel + 1e-6;
    }
    void *dx = half ? tk_to_dev(h, n * 2) : tk_to_dev(x, n * 4), *dy = tk_dev_alloc(m * 4);
    TK_OK(k_reduce_axes_cuda(dy, dx, half ? K_F16 : K_F32, rank, d, mask, (k_redop)op, NULL, TK_E));
    if (half) {
      tk_from_dev(hg, dy, m * 2);
      k_f16_to_f32(got, hg, m);
      k_f32_to_f16(hw, want, m);
      k_f16_to_f32(want, hw, m);
      for (size_t k = 0; k < m; k++) atol[k] += fabs(want[k]) * (1.0 / 2048);
    } else {
      tk_from_dev(got, dy, m * 4);
    }
    char what[96];
    snprintf(what, sizeof what, "axes %s %s rank %d mask %d%d%d%d%d", op_names[op], half ? "f16" : "f32", rank,
             mask[0], mask[1], mask[2], mask[3], rank > 4 ? mask[4] : 0);
    bad += tk_compare_ex(what, got, want, m, 0, 0, atol) != 0;
    TK_CUDA(cudaFree(dx));
    TK_CUDA(cudaFree(dy));
  }
  if (op == K_RMAX || op == K_RMIN) {  // BOOL: any and all
    for (size_t k = 0; k < n; k++) b[k] = tk_next(r) % 4 == 0;
    CHECK_EQ_INT(k_reduce(bw, b, K_U8, rank, d, mask, (k_redop)op), 0);
    void *dx = tk_to_dev(b, n), *dy = tk_dev_alloc(m);
    TK_OK(k_reduce_axes_cuda(dy, dx, K_BOOL, rank, d, mask, (k_redop)op, NULL, TK_E));
    tk_from_dev(bg, dy, m);
    bad += tk_compare_bits("axes bool", bg, bw, m) != 0;
    // one run: the fast kernel takes BOOL the same
    TK_CUDA(cudaFree(dx));
    TK_CUDA(cudaFree(dy));
  }
  free(x), free(want), free(got), free(atol), free(h), free(hg), free(hw), free(b), free(bw), free(bg);
  return bad;
}

static void test_axes(void) {
  tk_rng r = {0x7f4a7c159e3779b9ull};
  static const int64_t d4[4] = {3, 4, 5, 6}, d5[5] = {2, 3, 1, 4, 5};
  int cases = 0, bad = 0;
  for (int op = K_RSUM; op <= K_RLOGSUMEXP; op++) {
    for (int mk = 1; mk < 16; mk++) {
      int mask[5] = {mk & 1, (mk >> 1) & 1, (mk >> 2) & 1, (mk >> 3) & 1, 0};
      bad += axes_case(&r, 4, d4, mask, op);
      cases++;
    }
    for (int mk = 1; mk < 32; mk += 3) {
      int mask[5] = {mk & 1, (mk >> 1) & 1, (mk >> 2) & 1, (mk >> 3) & 1, (mk >> 4) & 1};
      bad += axes_case(&r, 5, d5, mask, op);
      cases++;
    }
  }
  // BOOL through the one-run kernel, against the same reference
  uint8_t b[60], bw[12], bg[12];
  for (int k = 0; k < 60; k++) b[k] = (uint8_t)(tk_next(&r) % 3 == 0);
  int64_t d[3] = {3, 5, 4};
  int mask[3] = {0, 1, 0};
  for (int op = K_RMAX; op <= K_RMIN; op++) {
    CHECK_EQ_INT(k_reduce(bw, b, K_U8, 3, d, mask, (k_redop)op), 0);
    void *dx = tk_to_dev(b, sizeof b), *dy = tk_dev_alloc(sizeof bg);
    TK_OK(k_reduce_cuda(dy, dx, K_BOOL, 3, 5, 4, (k_redop)op, NULL, TK_E));
    tk_from_dev(bg, dy, sizeof bg);
    tk_compare_bits("run bool", bg, bw, sizeof bg);
    TK_CUDA(cudaFree(dx));
    TK_CUDA(cudaFree(dy));
  }
  printf("reduce axes: %d masks x fp32/fp16 (and bool for max/min), %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
}

int main(void) {
  err e = {0};
  CHECK_EQ_INT(k_reduce_cuda(NULL, NULL, K_F32, 0, 5, 3, K_RSUM, NULL, &e), 0);  // nothing to do
  CHECK_EQ_INT(k_reduce_cuda(NULL, (void *)8, K_F32, 2, 5, 3, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_cuda((void *)8, (void *)8, K_I64, 2, 5, 3, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_cuda((void *)8, (void *)8, K_F32, SIZE_MAX / 2, 4, 3, K_RSUM, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_cuda((void *)8, (void *)8, K_BOOL, 2, 5, 3, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  int64_t ad[2] = {2, 3};
  int am[2] = {1, 0};
  CHECK_EQ_INT(k_reduce_axes_cuda((void *)8, (void *)8, K_I32, 2, ad, am, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_axes_cuda((void *)8, (void *)8, K_BOOL, 2, ad, am, K_RMEAN, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_axes_cuda((void *)8, (void *)8, K_F32, 0, ad, am, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_axes_cuda(NULL, (void *)8, K_F32, 2, ad, am, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  tk_require_device();
  test_empty();
  test_axes();
  tk_rng r = {0x2545f4914f6cdd1dull};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int o = 0; o < 4; o++)
      for (int half = 0; half < 2; half++) run_case(&r, shapes[s], o, half);
  printf("reduce: %zu shapes x 4 ops x fp32/fp16 against k_reduce_f32\n", sizeof shapes / sizeof shapes[0]);
  CHECK_DONE();
}
