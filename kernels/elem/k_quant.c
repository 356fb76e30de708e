// kernels/elem/k_quant.c: linear quantization (QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear) between FP32 and the integer types, per tensor, per axis
// or per block, and the integer matrix product of MatMulInteger and
// QLinearMatMul. Integers are read and written through double, which holds
// every value up to 2^53 (INT32 accumulations included); x / scale is
// divided in FP32, as ONNX's reference does, then rounded half to even and
// saturated to the target type.
#include "kernels/k_ref.h"

#include <math.h>
#include <stdint.h>

static double get(const void *p, k_elem t, size_t i) {
  switch (t) {
    case K_I8: return ((const int8_t *)p)[i];
    case K_U8: return ((const uint8_t *)p)[i];
    case K_I16: return ((const int16_t *)p)[i];
    case K_U16: return ((const uint16_t *)p)[i];
    case K_I32: return ((const int32_t *)p)[i];
    case K_U32: return ((const uint32_t *)p)[i];
    case K_I64: return (double)((const int64_t *)p)[i];
    case K_U64: return (double)((const uint64_t *)p)[i];
    case K_F32: return ((const float *)p)[i];
    case K_F64: return ((const double *)p)[i];
    default: return 0.0;
  }
}

// v (already rounded) saturated to t's range and stored; NaN stores 0 (converting
// it to an integer is undefined in C).
static void set_sat(void *p, k_elem t, size_t i, double v) {
  if (v != v) v = 0.0;
#define SAT(T, lo, hi) ((T *)p)[i] = (T)(v < (lo) ? (lo) : v > (hi) ? (hi) : v)
  switch (t) {
    case K_I8: SAT(int8_t, -128.0, 127.0); break;
    case K_U8: SAT(uint8_t, 0.0, 255.0); break;
    case K_I16: SAT(int16_t, -32768.0, 32767.0); break;
    case K_U16: SAT(uint16_t, 0.0, 65535.0); break;
    case K_I32: SAT(int32_t, -2147483648.0, 2147483647.0); break;
    case K_U32: SAT(uint32_t, 0.0, 4294967295.0); break;
    default: break;
  }
#undef SAT
}

int k_quant_takes(k_elem t) {
  return t == K_I8 || t == K_U8 || t == K_I16 || t == K_U16 || t == K_I32 || t == K_U32;
}

// The scale / zero point index of element (o, a, i) of [outer, len, inner].
static size_t qidx(const k_quant_layout *l, size_t o, size_t a, size_t i) {
  if (l->block) return (o * ((l->len + l->block - 1) / l->block) + a / l->block) * l->inner + i;
  return l->per_axis ? a : 0;
}

int k_dequantize(float *y, const void *x, k_elem xt, const float *scale, const void *zp, const k_quant_layout *l) {
  if (!k_quant_takes(xt)) return -1;
  for (size_t o = 0; o < l->outer; o++)
    for (size_t a = 0; a < l->len; a++)
      for (size_t i = 0; i < l->inner; i++) {
        size_t at = (o * l->len + a) * l->inner + i, q = qidx(l, o, a, i);
        double v = get(x, xt, at) - (zp ? get(zp, xt, q) : 0.0);
        y[at] = (float)(v * scale[q]);
      }
  return 0;
}

int k_quantize(void *y, k_elem yt, const float *x, const float *scale, const void *zp, const k_quant_layout *l) {
  if (!k_quant_takes(yt)) return -1;
  for (size_t o = 0; o < l->outer; o++)
    for (size_t a = 0; a < l->len; a++)
      for (size_t i = 0; i < l->inner; i++) {
        size_t at = (o * l->len + a) * l->inner + i, q = qidx(l, o, a, i);
        double r = nearbyint((double)(x[at] / scale[q]));  // FP32 division, as ONNX's
        double v = (r != r ? 0.0 : r) + (zp ? get(zp, yt, q) : 0.0);  // NaN quantizes as 0 does
        set_sat(y, yt, at, v);
      }
  return 0;
}

int k_fake_quant(float *y, const float *x, k_elem qt, const float *scale, const void *zp, const k_quant_layout *l) {
  if (!k_quant_takes(qt)) return -1;
  double lo = 0.0, hi = 0.0;
  switch (qt) {
    case K_I8: lo = -128.0, hi = 127.0; break;
    case K_U8: hi = 255.0; break;
    case K_I16: lo = -32768.0, hi = 32767.0; break;
    case K_U16: hi = 65535.0; break;
    case K_I32: lo = -2147483648.0, hi = 2147483647.0; break;
    default: hi = 4294967295.0; break;
  }
  for (size_t o = 0; o < l->outer; o++)
    for (size_t a = 0; a < l->len; a++)
      for (size_t i = 0; i < l->inner; i++) {
        size_t at = (o * l->len + a) * l->inner + i, q = qidx(l, o, a, i);
        double z = zp ? get(zp, qt, q) : 0.0;
        double r = nearbyint((double)(x[at] / scale[q]));  // k_quantize's steps
        double v = (r != r ? 0.0 : r) + z;
        v = v < lo ? lo : v > hi ? hi : v;
        y[at] = (float)((v - z) * scale[q]);  // then k_dequantize's
      }
  return 0;
}

void k_dynamic_quantize(uint8_t *y, float *scale, uint8_t *zp, const float *x, size_t n) {
  float lo = 0.0f, hi = 0.0f;  // the range always holds 0
  for (size_t i = 0; i < n; i++) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  float s = (hi - lo) / 255.0f;  // NaN elements compare false: the range is the numbers'
  if (!isfinite(s)) s = 0.0f;
  double z = s == 0.0f ? 0.0 : nearbyint((double)(0.0f - lo / s));
  z = z < 0.0 ? 0.0 : z > 255.0 ? 255.0 : z;
  *scale = s;
  *zp = (uint8_t)z;
  for (size_t i = 0; i < n; i++) {
    double v = (s == 0.0f ? 0.0 : nearbyint((double)(x[i] / s))) + z;
    y[i] = v != v ? (uint8_t)0 : (uint8_t)(v < 0.0 ? 0.0 : v > 255.0 ? 255.0 : v);
  }
}

int k_matmul_int(void *y, k_elem yt, const void *a, k_elem at, const void *b, k_elem bt, double a_zp, double b_zp,
                 const double *b_zp_col, size_t batch, size_t a_bstride, size_t b_bstride, size_t m, size_t k,
                 size_t n, double mul, const double *mul_col, double y_zp) {
  if (!k_quant_takes(at) || !k_quant_takes(bt) || (yt != K_I32 && !k_quant_takes(yt))) return -1;
  int q = mul != 0.0 || mul_col;
  for (size_t bi = 0; bi < batch; bi++)
    for (size_t r = 0; r < m; r++)
      for (size_t c = 0; c < n; c++) {
        double acc = 0.0, bz = b_zp_col ? b_zp_col[c] : b_zp;
        for (size_t j = 0; j < k; j++)
          acc += (get(a, at, bi * a_bstride + r * k + j) - a_zp) * (get(b, bt, bi * b_bstride + j * n + c) - bz);
        size_t o = (bi * m + r) * n + c;
        if (!q) set_sat(y, yt, o, acc);  // MatMulInteger: the exact INT32 sum
        else set_sat(y, yt, o, nearbyint(acc * (mul_col ? mul_col[c] : mul)) + y_zp);
      }
  return 0;
}

// The multiplier is FP32 (as onnxruntime and ONNX's reference compute it);
// the product with the sum in double, as ONNX's reference (onnxruntime's
// MLAS rounds it to FP32 first, which can move a result by one step near a
// tie), rounded half to even, the zero point added, then saturated. The
// loop vectorizes: the product is clamped to the output range first (the
// bounds are integers, so clamping and rounding commute), then rounded by
// adding and taking away 1.5 * 2^52 (round-half-even in the default mode,
// exact below 2^51), instead of a nearbyint call per element (a libm call
// on baseline x86-64: 20 ns each, most of a QLinearConv's time when it was),
// and without branches. mul must be finite (the callers check).
// One output: acc's sum plus the bias, times the multiplier, clamped, rounded, stored.
#define REQ_ONE(T, dst, sum)                                                                    \
  do {                                                                                          \
    double v = (double)(sum) * mc;                                                              \
    v = v < lo ? lo : v; /* maxsd, minsd: no branch */                                          \
    v = v > hi ? hi : v;                                                                        \
    v = (v + 6755399441055744.0) - 6755399441055744.0;                                          \
    (dst) = (T)(int)(v + zp);                                                                   \
  } while (0)

#define REQ_BODY(T, LO, HI)                                                                     \
  for (size_t o = 0; o < outer; o++)                                                            \
    for (size_t c = 0; c < len; c++) {                                                          \
      double mc = (double)mul[per_c ? c : 0], zp = (double)y_zp;                                \
      double lo = (LO) - zp, hi = (HI) - zp;                                                    \
      int64_t bc = b ? b[c] : 0;                                                                \
      const int32_t *a = acc + (o * len + c) * inner;                                           \
      T *yo = (T *)y + (o * len + c) * inner;                                                   \
      for (size_t i = 0; i < inner; i++) REQ_ONE(T, yo[i], (int64_t)a[i] + bc);                 \
    }

int k_requantize(void *y, k_elem yt, const int32_t *acc, const int32_t *b, const float *mul, int per_c,
                 int32_t y_zp, size_t outer, size_t len, size_t inner) {
  if (yt == K_U8) REQ_BODY(uint8_t, 0.0, 255.0)
  else if (yt == K_I8) REQ_BODY(int8_t, -128.0, 127.0)
  else return -1;
  return 0;
}
#undef REQ_BODY

// Channels-last sums, channels-first output: tiles of CL_TILE positions, so
// each channel's row of the tile is written contiguously and the tile's
// sums (CL_TILE x len int32) stay in cache between the channels.
#define CL_TILE 32
#define REQ_CL_BODY(T, LO, HI)                                                                  \
  for (size_t o = 0; o < outer; o++)                                                            \
    for (size_t i0 = 0; i0 < inner; i0 += CL_TILE) {                                            \
      size_t i1 = i0 + CL_TILE < inner ? i0 + CL_TILE : inner;                                  \
      for (size_t c = 0; c < len; c++) {                                                        \
        double mc = (double)mul[per_c ? c : 0], zp = (double)y_zp;                              \
        double lo = (LO) - zp, hi = (HI) - zp;                                                  \
        int64_t bc = b ? b[c] : 0;                                                              \
        T *yo = (T *)y + (o * len + c) * inner;                                                 \
        const int32_t *a = acc + o * inner * len + c;                                           \
        for (size_t i = i0; i < i1; i++) REQ_ONE(T, yo[i], (int64_t)a[i * len] + bc);           \
      }                                                                                         \
    }

int k_requantize_cl(void *y, k_elem yt, const int32_t *acc, const int32_t *b, const float *mul, int per_c,
                    int32_t y_zp, size_t outer, size_t len, size_t inner) {
  if (yt == K_U8) REQ_CL_BODY(uint8_t, 0.0, 255.0)
  else if (yt == K_I8) REQ_CL_BODY(int8_t, -128.0, 127.0)
  else return -1;
  return 0;
}
#undef REQ_CL_BODY
#undef REQ_ONE
