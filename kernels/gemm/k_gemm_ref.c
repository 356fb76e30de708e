// kernels/gemm/k_gemm_ref.c: the GEMM oracle. A naive triple loop with double
// accumulation, so it is more accurate than the BLAS it checks. Follows BLAS
// conventions: beta == 0 means C is not read (it may hold NaN), alpha == 0
// means A and B are not read.
#include "kernels/k_ref.h"

void k_gemm_ref(float *c, const float *a, const float *b, int trans_a, int trans_b, size_t m,
                size_t n, size_t k, float alpha, float beta, size_t lda, size_t ldb, size_t ldc) {
  // op(A)[i,p] and op(B)[p,j] as strides, so one loop serves every combination.
  size_t a_is = trans_a ? 1 : lda, a_ps = trans_a ? lda : 1;
  size_t b_ps = trans_b ? 1 : ldb, b_js = trans_b ? ldb : 1;
  for (size_t i = 0; i < m; i++) {
    for (size_t j = 0; j < n; j++) {
      double acc = 0.0;
      if (alpha != 0.0f)
        for (size_t p = 0; p < k; p++) acc += (double)a[i * a_is + p * a_ps] * (double)b[p * b_ps + j * b_js];
      double v = (double)alpha * acc;
      if (beta != 0.0f) v += (double)beta * (double)c[i * ldc + j];
      c[i * ldc + j] = (float)v;
    }
  }
}
