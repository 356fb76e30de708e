// kernels/reduce/k_reduce.c: Reduce{Sum,Mean,Max,Min} over any set of axes. The
// input is walked once in order; each element is combined into the output
// element its kept indices select (stride 0 on the reduced axes). Sums
// accumulate in the output, in FP32, as ONNX Runtime's reference does.
// CumSum's running sums along one axis live here too.
#include "kernels/k_ref.h"

#include <math.h>

void k_reduce_f32(float *y, const float *x, int ndim, const int64_t *xdims, const int *reduce,
                  k_redop op) {
  int64_t ys[K_MAX_DIMS], idx[K_MAX_DIMS] = {0}, n = 1, ny = 1, acc = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    ys[i] = reduce[i] ? 0 : acc;
    if (!reduce[i]) acc *= xdims[i];
    n *= xdims[i];
  }
  ny = acc;
  float init = op == K_RMAX ? -INFINITY : op == K_RMIN ? INFINITY : 0.0f;
  for (int64_t i = 0; i < ny; i++) y[i] = init;
  if (n <= 0) {
    if (op == K_RMEAN)  // mean of nothing: 0/0
      for (int64_t i = 0; i < ny; i++) y[i] = NAN;
    return;
  }
  int64_t yo = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], *t = &y[yo];
    switch (op) {
      case K_RSUM: case K_RMEAN: *t += v; break;
      case K_RMAX: *t = v != v || v > *t ? v : *t; break;  // NaN sticks
      case K_RMIN: *t = v != v || v < *t ? v : *t; break;
    }
    for (int d = ndim - 1; d >= 0; d--) {
      yo += ys[d];
      if (++idx[d] < xdims[d]) break;
      yo -= ys[d] * xdims[d];
      idx[d] = 0;
    }
  }
  if (op == K_RMEAN) {
    float per = (float)(n / ny);  // elements per output
    for (int64_t i = 0; i < ny; i++) y[i] /= per;
  }
}

// --- CumSum: one running sum per (outer, inner) column, in the column's
// type (integers wrap through unsigned arithmetic, no UB). Reading x[j]
// before writing y[j] keeps it correct when y aliases x.
#define CUMSUM_BODY(T, UT)                                                     \
  for (size_t o = 0; o < outer; o++)                                           \
    for (size_t c = 0; c < inner; c++) {                                       \
      size_t base = o * len * inner + c;                                       \
      UT acc = 0;                                                              \
      for (size_t t = 0; t < len; t++) {                                       \
        size_t j = base + (reverse ? len - 1 - t : t) * inner;                 \
        UT v = (UT)x[j];                                                       \
        if (exclusive) {                                                       \
          y[j] = (T)acc;                                                       \
          acc += v;                                                            \
        } else {                                                               \
          acc += v;                                                            \
          y[j] = (T)acc;                                                       \
        }                                                                      \
      }                                                                        \
    }

void k_cumsum_f32(float *y, const float *x, size_t outer, size_t len, size_t inner, int exclusive,
                  int reverse) {
  CUMSUM_BODY(float, float)
}

void k_cumsum_i64(int64_t *y, const int64_t *x, size_t outer, size_t len, size_t inner,
                  int exclusive, int reverse) {
  CUMSUM_BODY(int64_t, uint64_t)
}

void k_cumsum_i32(int32_t *y, const int32_t *x, size_t outer, size_t len, size_t inner,
                  int exclusive, int reverse) {
  CUMSUM_BODY(int32_t, uint32_t)
}
