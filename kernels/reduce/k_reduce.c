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
  float init = op == K_RMAX || op == K_RLOGSUMEXP ? -INFINITY : op == K_RMIN ? INFINITY
             : op == K_RPROD ? 1.0f : 0.0f;
  for (int64_t i = 0; i < ny; i++) y[i] = init;
  if (n <= 0) {
    if (op == K_RMEAN)  // mean of nothing: 0/0
      for (int64_t i = 0; i < ny; i++) y[i] = NAN;
    if (op == K_RLOGSUM)  // log(0)
      for (int64_t i = 0; i < ny; i++) y[i] = -INFINITY;
    return;
  }
  int64_t yo = 0;
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], *t = &y[yo];
    switch (op) {
      case K_RSUM: case K_RMEAN: *t += v; break;
      case K_RMAX: *t = v != v || v > *t ? v : *t; break;  // NaN sticks
      case K_RMIN: *t = v != v || v < *t ? v : *t; break;
      case K_RPROD: *t *= v; break;
      case K_RSUMSQ: case K_RL2: *t += v * v; break;
      case K_RL1: *t += fabsf(v); break;
      case K_RLOGSUM: *t += v; break;
      case K_RLOGSUMEXP: {  // log(e^t + e^v) = max + log1p(e^-|t - v|)
        float m = v > *t ? v : *t;
        *t = m == -INFINITY ? m : v != v ? v : m + log1pf(expf(-fabsf(*t - v)));
        break;
      }
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
  if (op == K_RL2)
    for (int64_t i = 0; i < ny; i++) y[i] = sqrtf(y[i]);
  if (op == K_RLOGSUM)
    for (int64_t i = 0; i < ny; i++) y[i] = logf(y[i]);
}

// --- the integer types: one body (K_INT_TYPES), the same walk. Sums wrap
// through uint64_t (as the type's own arithmetic would, without signed
// overflow); Mean is the sum divided by the count, truncated toward zero as
// ONNX Runtime's integer ReduceMean does; Max/Min start from the type's
// extremes (the engine refuses an empty reduced axis for them).
#define DEF_REDUCE_INT(K, T, S)                                                                 \
  static void red_##K(T *y, const T *x, int ndim, const int64_t *xdims, const int *reduce,      \
                      k_redop op) {                                                             \
    int64_t ys[K_MAX_DIMS], idx[K_MAX_DIMS] = {0}, n = 1, ny = 1, acc = 1;                      \
    for (int i = ndim - 1; i >= 0; i--) {                                                       \
      ys[i] = reduce[i] ? 0 : acc;                                                              \
      if (!reduce[i]) acc *= xdims[i];                                                          \
      n *= xdims[i];                                                                            \
    }                                                                                           \
    ny = acc;                                                                                   \
    T tmax = S ? (T)((UINT64_C(1) << (8 * sizeof(T) - 1)) - 1) : (T)~(T)0;                      \
    T tmin = S ? (T)(-tmax - 1) : (T)0;                                                         \
    T init = op == K_RMAX ? tmin : op == K_RMIN ? tmax : op == K_RPROD ? (T)1 : (T)0;          \
    for (int64_t i = 0; i < ny; i++) y[i] = init;                                               \
    if (n <= 0) return;                                                                         \
    int64_t yo = 0;                                                                             \
    for (int64_t i = 0; i < n; i++) {                                                           \
      T v = x[i], *t = &y[yo];                                                                  \
      switch (op) {                                                                             \
        case K_RSUM: case K_RMEAN: *t = (T)((uint64_t)*t + (uint64_t)v); break;                 \
        case K_RMAX: *t = v > *t ? v : *t; break;                                               \
        case K_RMIN: *t = v < *t ? v : *t; break;                                               \
        case K_RPROD: *t = (T)((uint64_t)*t * (uint64_t)v); break;                              \
        default: break; /* refused by k_reduce */                                               \
      }                                                                                         \
      for (int d = ndim - 1; d >= 0; d--) {                                                     \
        yo += ys[d];                                                                            \
        if (++idx[d] < xdims[d]) break;                                                         \
        yo -= ys[d] * xdims[d];                                                                 \
        idx[d] = 0;                                                                             \
      }                                                                                         \
    }                                                                                           \
    if (op == K_RMEAN) {                                                                        \
      int64_t per = n / ny;                                                                     \
      for (int64_t i = 0; i < ny; i++)                                                          \
        y[i] = S ? (T)((int64_t)y[i] / per) : (T)((uint64_t)y[i] / (uint64_t)per);              \
    }                                                                                           \
  }
K_INT_TYPES(DEF_REDUCE_INT)

int k_reduce(void *y, const void *x, k_elem t, int ndim, const int64_t *xdims, const int *reduce,
             k_redop op) {
  switch (t) {
    case K_F32: k_reduce_f32(y, x, ndim, xdims, reduce, op); return 0;
#define CASE_RED(K, T, S) \
    case K: if (op > K_RPROD) return -1; red_##K(y, x, ndim, xdims, reduce, op); return 0;
    K_INT_TYPES(CASE_RED)
#undef CASE_RED
    default: return -1;
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

#define DEF_CUMSUM_INT(K, T, S)                                                                 \
  static void cum_##K(T *y, const T *x, size_t outer, size_t len, size_t inner, int exclusive,  \
                      int reverse) {                                                            \
    CUMSUM_BODY(T, uint64_t)                                                                    \
  }
K_INT_TYPES(DEF_CUMSUM_INT)

int k_cumsum(void *y, const void *x, k_elem t, size_t outer, size_t len, size_t inner,
             int exclusive, int reverse) {
  switch (t) {
    case K_F32: k_cumsum_f32(y, x, outer, len, inner, exclusive, reverse); return 0;
#define CASE_CUM(K, T, S) \
    case K: cum_##K(y, x, outer, len, inner, exclusive, reverse); return 0;
    K_INT_TYPES(CASE_CUM)
#undef CASE_CUM
    default: return -1;
  }
}

// --- ArgMax, ArgMin: one scan per (outer, inner) column; the first extreme
// wins, or the last with select_last. Comparisons only, so a NaN is never
// picked over a number (the first element stands when all are NaN).
#define DEF_ARG(K, T, S)                                                                         \
  static void arg_##K(int64_t *y, const T *x, size_t outer, size_t len, size_t inner, int is_min, \
                      int last) {                                                                \
    for (size_t o = 0; o < outer; o++)                                                           \
      for (size_t c = 0; c < inner; c++) {                                                       \
        const T *p = x + o * len * inner + c;                                                    \
        T best = p[0];                                                                           \
        int64_t at = 0;                                                                          \
        for (size_t l = 1; l < len; l++) {                                                       \
          T v = p[l * inner];                                                                    \
          int better = is_min ? v < best : v > best;                                             \
          if (better || (last && v == best)) {                                                   \
            best = v;                                                                            \
            at = (int64_t)l;                                                                     \
          }                                                                                      \
        }                                                                                        \
        y[o * inner + c] = at;                                                                   \
      }                                                                                          \
  }
K_FLOAT_TYPES(DEF_ARG)
K_INT_TYPES(DEF_ARG)

int k_arg_reduce(int64_t *y, const void *x, k_elem t, size_t outer, size_t len, size_t inner, int is_min,
                 int select_last) {
  if (len == 0) return -1;
  switch (t) {
#define CASE_ARG(K, T, S) \
    case K: arg_##K(y, x, outer, len, inner, is_min, select_last); return 0;
    K_FLOAT_TYPES(CASE_ARG)
    K_INT_TYPES(CASE_ARG)
#undef CASE_ARG
    default: return -1;
  }
}

// --- TopK: per (outer, inner) column, the k largest (or smallest) values and
// their indices, ties to the lower index; a stable insertion into a k-long
// list, so the order is the sorted one whatever `sorted` asks. NaN ranks
// above every number and equal to another NaN (torch.topk's order, and the
// CUDA path's, kernels/reduce/k_arg.cu): the largest k put NaNs first, the
// smallest k take them last, whatever their place in the row. TOPK_BEFORE:
// whether v goes before w (integers: v != v is never true).
#define TOPK_BEFORE(v, w, largest) \
  ((largest) ? (v) > (w) || ((v) != (v) && (w) == (w)) : (v) < (w) || ((w) != (w) && (v) == (v)))
#define DEF_TOPK(K, T, S)                                                                        \
  static void topk_##K(T *vals, int64_t *idx, const T *x, size_t outer, size_t len, size_t inner, \
                       size_t k, int largest) {                                                  \
    for (size_t o = 0; o < outer; o++)                                                           \
      for (size_t c = 0; c < inner; c++) {                                                       \
        const T *p = x + o * len * inner + c;                                                    \
        T *vp = vals + o * k * inner + c;                                                        \
        int64_t *ip = idx + o * k * inner + c;                                                   \
        size_t n = 0;                                                                            \
        for (size_t l = 0; l < len; l++) {                                                       \
          T v = p[l * inner];                                                                    \
          size_t at = n;                                                                         \
          while (at > 0 && TOPK_BEFORE(v, vp[(at - 1) * inner], largest)) at--;                  \
          if (at >= k) continue;                                                                 \
          for (size_t m = (n < k ? n : k - 1); m > at; m--) {                                    \
            vp[m * inner] = vp[(m - 1) * inner];                                                 \
            ip[m * inner] = ip[(m - 1) * inner];                                                 \
          }                                                                                      \
          vp[at * inner] = v;                                                                    \
          ip[at * inner] = (int64_t)l;                                                           \
          if (n < k) n++;                                                                        \
        }                                                                                        \
      }                                                                                          \
  }
K_FLOAT_TYPES(DEF_TOPK)
K_INT_TYPES(DEF_TOPK)

int k_topk(void *vals, int64_t *idx, const void *x, k_elem t, size_t outer, size_t len, size_t inner, size_t k,
           int largest) {
  if (k > len) return -1;
  if (k == 0) return 0;
  switch (t) {
#define CASE_TOPK(K, T, S) \
    case K: topk_##K(vals, idx, x, outer, len, inner, k, largest); return 0;
    K_FLOAT_TYPES(CASE_TOPK)
    K_INT_TYPES(CASE_TOPK)
#undef CASE_TOPK
    default: return -1;
  }
}

// --- CumProd: the running product along one axis, CumSum's walk
#define DEF_CUMPROD(K, T, MUL)                                                                   \
  static void cumprod_##K(T *y, const T *x, size_t outer, size_t len, size_t inner, int exclusive, \
                          int reverse) {                                                         \
    for (size_t o = 0; o < outer; o++)                                                           \
      for (size_t c = 0; c < inner; c++) {                                                       \
        size_t base = o * len * inner + c;                                                       \
        T acc = (T)1;                                                                            \
        for (size_t t = 0; t < len; t++) {                                                       \
          size_t j = base + (reverse ? len - 1 - t : t) * inner;                                 \
          T v = x[j];                                                                            \
          if (exclusive) {                                                                       \
            y[j] = acc;                                                                          \
            acc = MUL(T, acc, v);                                                                \
          } else {                                                                               \
            acc = MUL(T, acc, v);                                                                \
            y[j] = acc;                                                                          \
          }                                                                                      \
        }                                                                                        \
      }                                                                                          \
  }
#define FMUL(T, a, b) ((a) * (b))
#define IMUL(T, a, b) ((T)((uint64_t)(a) * (uint64_t)(b)))  // wraps, no signed overflow
DEF_CUMPROD(K_F32, float, FMUL)
DEF_CUMPROD(K_F64, double, FMUL)
DEF_CUMPROD(K_I32, int32_t, IMUL)
DEF_CUMPROD(K_I64, int64_t, IMUL)

int k_cumprod(void *y, const void *x, k_elem t, size_t outer, size_t len, size_t inner, int exclusive, int reverse) {
  switch (t) {
    case K_F32: cumprod_K_F32(y, x, outer, len, inner, exclusive, reverse); return 0;
    case K_F64: cumprod_K_F64(y, x, outer, len, inner, exclusive, reverse); return 0;
    case K_I32: cumprod_K_I32(y, x, outer, len, inner, exclusive, reverse); return 0;
    case K_I64: cumprod_K_I64(y, x, outer, len, inner, exclusive, reverse); return 0;
    default: return -1;
  }
}

void k_argmax_rows_ref(int32_t *ids, const float *x, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; r++) {
    const float *l = x + r * cols;
    size_t best = 0;
    for (size_t i = 1; i < cols; i++)
      if (l[i] > l[best]) best = i;
    ids[r] = (int32_t)best;
  }
}
