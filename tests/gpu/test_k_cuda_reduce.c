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

int main(void) {
  err e = {0};
  CHECK_EQ_INT(k_reduce_cuda(NULL, NULL, K_F32, 0, 5, 3, K_RSUM, NULL, &e), 0);  // nothing to do
  CHECK_EQ_INT(k_reduce_cuda(NULL, (void *)8, K_F32, 2, 5, 3, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_cuda((void *)8, (void *)8, K_I64, 2, 5, 3, K_RSUM, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_reduce_cuda((void *)8, (void *)8, K_F32, SIZE_MAX / 2, 4, 3, K_RSUM, NULL, &e),
               ERR_INVALID_ARGUMENT);
  tk_require_device();
  tk_rng r = {0x2545f4914f6cdd1dull};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int o = 0; o < 4; o++)
      for (int half = 0; half < 2; half++) run_case(&r, shapes[s], o, half);
  printf("reduce: %zu shapes x 4 ops x fp32/fp16 against k_reduce_f32\n", sizeof shapes / sizeof shapes[0]);
  CHECK_DONE();
}
