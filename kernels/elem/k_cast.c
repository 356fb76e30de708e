// kernels/elem/k_cast.c: IEEE half <-> float conversion and casts between every
// pair of k_elem types. Half conversion works on bit patterns with explicit
// round-to-nearest-even, so it does not depend on F16C or the compiler's
// _Float16. Casting rules beyond the header's: float -> integer maps NaN to
// 0 and saturates values outside the target's range (C leaves both
// undefined); integer -> integer wraps modulo 2^bits; bool is one byte and
// any non-zero byte reads as true.
#include "kernels/k_ref.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

// --- half <-> float

// v >> s rounded to nearest, ties to even; 1 <= s <= 63.
static inline uint64_t rne_shift(uint64_t v, unsigned s) {
  uint64_t q = v >> s, r = v & ((UINT64_C(1) << s) - 1), half = UINT64_C(1) << (s - 1);
  if (r > half || (r == half && (q & 1))) q++;
  return q;
}

// NaN keeps its sign and the top 10 payload bits; if those are all zero a
// quiet bit is set so the result is still NaN, not infinity.
static inline uint16_t nan_half(uint16_t sign, uint16_t payload) {
  return (uint16_t)(sign | 0x7C00u | (payload ? payload : 0x200u));
}

static inline uint16_t f32_to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return a == 0x7F800000u ? (uint16_t)(sign | 0x7C00u) : nan_half(sign, (uint16_t)((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                    // normal half (>= 2^-14)
    // Rebias the exponent in place; a mantissa carry rolls into the exponent,
    // which is exactly the right result (up to 0x7BFF, inf excluded above).
    return (uint16_t)(sign | rne_shift(a - 0x38000000u, 13));
  }
  uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25, rounds to (signed) zero
  // Subnormal half: round(|f| * 2^24) = round(m * 2^(e - 126)).
  uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  return (uint16_t)(sign | rne_shift(m, 126 - e));
}

// Direct, so a double is rounded once (through float it would be rounded
// twice, which is wrong for values just off a halfway point).
static inline uint16_t f64_to_half(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
  uint64_t a = u & UINT64_C(0x7FFFFFFFFFFFFFFF);
  if (a >= UINT64_C(0x7FF0000000000000))
    return a == UINT64_C(0x7FF0000000000000) ? (uint16_t)(sign | 0x7C00u) : nan_half(sign, (uint16_t)((a >> 42) & 0x3FFu));
  if (a >= UINT64_C(0x40EFFE0000000000)) return (uint16_t)(sign | 0x7C00u);
  if (a >= UINT64_C(0x3F10000000000000)) return (uint16_t)(sign | rne_shift(a - UINT64_C(0x3F00000000000000), 42));
  uint64_t e = a >> 52;
  if (e < 998) return sign;
  uint64_t m = (a & UINT64_C(0xFFFFFFFFFFFFF)) | (UINT64_C(1) << 52);
  return (uint16_t)(sign | rne_shift(m, (unsigned)(1051 - e)));
}

static inline float half_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, u;
  if (e == 0x1F) {
    u = sign | 0x7F800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112) << 23) | (m << 13);
  } else if (m == 0) {
    u = sign;
  } else {
    // Subnormal half: normalise so the leading 1 becomes the implicit bit.
    int shift = 0;
    while (!(m & 0x400u)) {
      m <<= 1;
      shift++;
    }
    u = sign | ((uint32_t)(113 - shift) << 23) | ((m & 0x3FFu) << 13);
  }
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void k_f16_to_f32(float *y, const uint16_t *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = half_to_f32(x[i]);
}

void k_f32_to_f16(uint16_t *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = f32_to_half(x[i]);
}

// --- scalar converters into each destination type, from the three source
// families: floating (as double, exact for float and half), signed and
// unsigned integers.

// Saturating, NaN -> 0. The bounds compare as doubles: (double)TMAX may round
// up to 2^bits, which is still the right "too large" threshold because every
// double below it truncates into range.
#define INT_DST(NAME, T, TMIN, TMAX)                                          \
  static inline T NAME##_from_d(double v) {                                   \
    if (v != v) return 0;                                                     \
    if (v <= (double)(TMIN)) return (TMIN);                                   \
    if (v >= (double)(TMAX)) return (TMAX);                                   \
    return (T)v;                                                              \
  }                                                                           \
  static inline T NAME##_from_i(int64_t v) { return (T)v; }                   \
  static inline T NAME##_from_u(uint64_t v) { return (T)v; }

INT_DST(i64, int64_t, INT64_MIN, INT64_MAX)
INT_DST(i32, int32_t, INT32_MIN, INT32_MAX)
INT_DST(i16, int16_t, INT16_MIN, INT16_MAX)
INT_DST(i8, int8_t, INT8_MIN, INT8_MAX)
INT_DST(u8, uint8_t, 0, UINT8_MAX)
INT_DST(u16, uint16_t, 0, UINT16_MAX)
INT_DST(u32, uint32_t, 0, UINT32_MAX)
INT_DST(u64, uint64_t, 0, UINT64_MAX)

static inline float f32_from_d(double v) { return (float)v; }
static inline float f32_from_i(int64_t v) { return (float)v; }
static inline float f32_from_u(uint64_t v) { return (float)v; }
static inline double f64_from_d(double v) { return v; }
static inline double f64_from_i(int64_t v) { return (double)v; }
static inline double f64_from_u(uint64_t v) { return (double)v; }
static inline uint16_t f16_from_d(double v) { return f64_to_half(v); }
// An integer that float cannot hold exactly is above 2^24, far beyond the
// half range, so rounding to float first cannot change the half result.
static inline uint16_t f16_from_i(int64_t v) { return f32_to_half((float)v); }
static inline uint16_t f16_from_u(uint64_t v) { return f32_to_half((float)v); }
static inline uint8_t b_from_d(double v) { return v != 0.0; }
static inline uint8_t b_from_i(int64_t v) { return v != 0; }
static inline uint8_t b_from_u(uint64_t v) { return v != 0; }

#define CAST_LOOP(YT, XT, EXPR)                  \
  do {                                           \
    YT *yy_ = y;                                 \
    const XT *xx_ = x;                           \
    for (size_t i_ = 0; i_ < n; i_++) {          \
      XT v = xx_[i_];                            \
      yy_[i_] = (EXPR);                          \
    }                                            \
  } while (0)

// float -> float goes through double (exact) and back: identity.
#define CAST_TO(YT, P)                                                               \
  switch (xt) {                                                                      \
    case K_F32: CAST_LOOP(YT, float, P##_from_d(v)); return;                         \
    case K_F64: CAST_LOOP(YT, double, P##_from_d(v)); return;                        \
    case K_F16: CAST_LOOP(YT, uint16_t, P##_from_d(half_to_f32(v))); return;         \
    case K_I64: CAST_LOOP(YT, int64_t, P##_from_i(v)); return;                       \
    case K_I32: CAST_LOOP(YT, int32_t, P##_from_i(v)); return;                       \
    case K_I16: CAST_LOOP(YT, int16_t, P##_from_i(v)); return;                       \
    case K_I8: CAST_LOOP(YT, int8_t, P##_from_i(v)); return;                         \
    case K_U8: CAST_LOOP(YT, uint8_t, P##_from_u(v)); return;                        \
    case K_U16: CAST_LOOP(YT, uint16_t, P##_from_u(v)); return;                      \
    case K_U32: CAST_LOOP(YT, uint32_t, P##_from_u(v)); return;                      \
    case K_U64: CAST_LOOP(YT, uint64_t, P##_from_u(v)); return;                      \
    case K_BOOL: CAST_LOOP(YT, uint8_t, P##_from_i(v != 0)); return;                 \
  }                                                                                  \
  return

static size_t elem_size(k_elem t) {
  switch (t) {
    case K_F64: case K_I64: case K_U64: return 8;
    case K_F32: case K_I32: case K_U32: return 4;
    case K_F16: case K_I16: case K_U16: return 2;
    case K_I8: case K_U8: case K_BOOL: return 1;
  }
  return 0;
}

void k_cast(void *y, k_elem yt, const void *x, k_elem xt, size_t n) {
  if (n == 0) return;
  // Same type is a copy (memmove: an in-place cast is harmless); bool is
  // still normalised to 0/1.
  if (yt == xt && yt != K_BOOL) {
    memmove(y, x, n * elem_size(yt));
    return;
  }
  switch (yt) {
    case K_F32: CAST_TO(float, f32);
    case K_F64: CAST_TO(double, f64);
    case K_F16: CAST_TO(uint16_t, f16);
    case K_I64: CAST_TO(int64_t, i64);
    case K_I32: CAST_TO(int32_t, i32);
    case K_I16: CAST_TO(int16_t, i16);
    case K_I8: CAST_TO(int8_t, i8);
    case K_U8: CAST_TO(uint8_t, u8);
    case K_U16: CAST_TO(uint16_t, u16);
    case K_U32: CAST_TO(uint32_t, u32);
    case K_U64: CAST_TO(uint64_t, u64);
    case K_BOOL: CAST_TO(uint8_t, b);
  }
}
