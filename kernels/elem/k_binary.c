// kernels/elem/k_binary.c: elementwise binary ops with numpy broadcasting.
// A broadcast input gets stride 0 on the dims it repeats; dims of size 1 are
// dropped and neighbouring dims that both inputs walk contiguously are
// merged, so the inner loop is as long, and as often unit-stride, as the
// shapes allow. The typed loops come from one body per op family (float,
// integer, comparison) expanded over k_ref.h's type lists, and a table
// (k_binary, k_compare) picks one by k_elem.
#include "kernels/k_ref.h"

#include <math.h>
#include <stdbool.h>

// --- iteration plan shared by the typed loops
typedef struct bplan {
  int nd;  // >= 1 after planning (a scalar is one dim of size 1)
  int64_t dims[K_MAX_DIMS];
  int64_t as[K_MAX_DIMS];
  int64_t bs[K_MAX_DIMS];
} bplan;

static void contiguous_strides(int64_t *s, const int64_t *dims, const int64_t *ydims, int ndim) {
  int64_t acc = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    s[i] = (dims[i] == 1 && ydims[i] != 1) ? 0 : acc;
    acc *= dims[i];
  }
}

// Returns false when the output is empty (or the rank is out of range), in
// which case there is nothing to do.
static bool bplan_make(bplan *p, int ndim, const int64_t *ydims, const int64_t *adims,
                       const int64_t *bdims) {
  if (ndim < 0 || ndim > K_MAX_DIMS) return false;
  for (int i = 0; i < ndim; i++)
    if (ydims[i] <= 0) return false;
  int64_t as[K_MAX_DIMS], bs[K_MAX_DIMS];
  contiguous_strides(as, adims, ydims, ndim);
  contiguous_strides(bs, bdims, ydims, ndim);
  p->nd = 0;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] == 1) continue;
    int j = p->nd - 1;
    if (j >= 0 && p->as[j] == as[i] * ydims[i] && p->bs[j] == bs[i] * ydims[i]) {
      p->dims[j] *= ydims[i];
      p->as[j] = as[i];
      p->bs[j] = bs[i];
    } else {
      p->dims[p->nd] = ydims[i];
      p->as[p->nd] = as[i];
      p->bs[p->nd] = bs[i];
      p->nd++;
    }
  }
  if (p->nd == 0) {
    p->nd = 1;
    p->dims[0] = 1;
    p->as[0] = 0;
    p->bs[0] = 0;
  }
  return true;
}

// One inner run, specialised on the stride pattern so the common cases are
// unit-stride loops the compiler can vectorise.
#define RUN_OP(T, py, pa, pb, d, sa, sb, EXPR)                                 \
  do {                                                                         \
    if ((sa) == 1 && (sb) == 1) {                                              \
      for (int64_t i_ = 0; i_ < (d); i_++) {                                   \
        T va = (pa)[i_], vb = (pb)[i_];                                        \
        (py)[i_] = (EXPR);                                                     \
      }                                                                        \
    } else if ((sa) == 1 && (sb) == 0) {                                       \
      T vb = (pb)[0];                                                          \
      for (int64_t i_ = 0; i_ < (d); i_++) {                                   \
        T va = (pa)[i_];                                                       \
        (py)[i_] = (EXPR);                                                     \
      }                                                                        \
    } else if ((sa) == 0 && (sb) == 1) {                                       \
      T va = (pa)[0];                                                          \
      for (int64_t i_ = 0; i_ < (d); i_++) {                                   \
        T vb = (pb)[i_];                                                       \
        (py)[i_] = (EXPR);                                                     \
      }                                                                        \
    } else {                                                                   \
      for (int64_t i_ = 0; i_ < (d); i_++) {                                   \
        T va = (pa)[i_ * (sa)], vb = (pb)[i_ * (sb)];                          \
        (py)[i_] = (EXPR);                                                     \
      }                                                                        \
    }                                                                          \
  } while (0)

// Walks every outer index (all dims but the innermost) with an odometer and
// runs each contiguous output run with EXPR, an expression of va and vb
// (the operands' elements, of type T) giving each element of y (of type TY).
#define BCAST_WALK_TE(TY, T, y, a, b, p, EXPR)                                 \
  do {                                                                         \
    int nd_ = (p)->nd;                                                         \
    int64_t d_ = (p)->dims[nd_ - 1], sa_ = (p)->as[nd_ - 1], sb_ = (p)->bs[nd_ - 1]; \
    int64_t idx_[K_MAX_DIMS] = {0};                                            \
    int64_t ao_ = 0, bo_ = 0;                                                  \
    TY *py_ = (y);                                                             \
    for (;;) {                                                                 \
      const T *pa_ = (a) + ao_, *pb_ = (b) + bo_;                              \
      RUN_OP(T, py_, pa_, pb_, d_, sa_, sb_, EXPR);                            \
      py_ += d_;                                                               \
      int k_ = nd_ - 2;                                                        \
      for (; k_ >= 0; k_--) {                                                  \
        ao_ += (p)->as[k_];                                                    \
        bo_ += (p)->bs[k_];                                                    \
        if (++idx_[k_] < (p)->dims[k_]) break;                                 \
        ao_ -= (p)->as[k_] * (p)->dims[k_];                                    \
        bo_ -= (p)->bs[k_] * (p)->dims[k_];                                    \
        idx_[k_] = 0;                                                          \
      }                                                                        \
      if (k_ < 0) break;                                                       \
    }                                                                          \
  } while (0)
#define BCAST_WALK_E(T, y, a, b, p, EXPR) BCAST_WALK_TE(T, T, y, a, b, p, EXPR)

// --- floating point: one body for float (the FP32 path the engine
// threads, k_binary_f32) and double. NaN on either side of Max/Min wins:
// `va != va` is true only for NaN.
#define FLOAT_BODY(T, POW, FMOD)                                                              \
  switch (op) {                                                                               \
    case K_ADD: BCAST_WALK_E(T, y, a, b, &p, va + vb); break;                                 \
    case K_SUB: BCAST_WALK_E(T, y, a, b, &p, va - vb); break;                                 \
    case K_MUL: BCAST_WALK_E(T, y, a, b, &p, va * vb); break;                                 \
    case K_DIV: BCAST_WALK_E(T, y, a, b, &p, va / vb); break;                                 \
    case K_POW: BCAST_WALK_E(T, y, a, b, &p, POW(va, vb)); break;                             \
    case K_MAX: BCAST_WALK_E(T, y, a, b, &p, va != va || va > vb ? va : vb); break;           \
    case K_MIN: BCAST_WALK_E(T, y, a, b, &p, va != va || va < vb ? va : vb); break;           \
    case K_FMOD: BCAST_WALK_E(T, y, a, b, &p, FMOD(va, vb)); break;                           \
    case K_MOD: BCAST_WALK_E(T, y, a, b, &p, FMOD##_floor(va, vb)); break;                    \
  }

// Mod with fmod=0 on floats, as ONNX's reference (numpy's mod) computes it:
// C's remainder moved by one divisor when the signs differ; a zero takes
// the divisor's sign.
static inline float fmodf_floor(float a, float b) {
  float r = fmodf(a, b);
  if (r == 0) return copysignf(0.0f, b);
  return (r < 0) != (b < 0) ? r + b : r;
}
static inline double fmod_floor(double a, double b) {
  double r = fmod(a, b);
  if (r == 0) return copysign(0.0, b);
  return (r < 0) != (b < 0) ? r + b : r;
}

void k_binary_f32(float *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op) {
  bplan p;
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;
  FLOAT_BODY(float, powf, fmodf)
}

static void bin_f64(double *y, const double *a, const double *b, int ndim, const int64_t *ydims,
                    const int64_t *adims, const int64_t *bdims, k_binop op) {
  bplan p;
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;
  FLOAT_BODY(double, pow, fmod)
}

// --- integers: one body for every width and signedness (K_INT_TYPES).
// Add, Sub, Mul and Pow compute in uint64_t and truncate to T: modulo 2^64
// then modulo 2^bits is two's complement wraparound, with no signed
// overflow (undefined in C) and no promotion of narrow operands to int
// (uint16 * uint16 overflows int). The division guards (x/0, INT_MIN/-1)
// compare S, the type's signedness, first, so they fold away for
// unsigned types; the sign tests go through int64_t, which holds every
// value they see.

// Power by squaring modulo 2^64; e is the exponent's bits.
static inline uint64_t u64_pow(uint64_t x, uint64_t e) {
  uint64_t r = 1;
  for (; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return r;
}

// A signed base and exponent: a negative exponent gives 0 unless the base
// is 1 or -1 (as integer division would).
static inline uint64_t s64_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? UINT64_MAX : 1) : 0;
  return u64_pow((uint64_t)a, (uint64_t)b);
}

// Division and remainder on the operands widened to 64 bits (signed or
// unsigned by S, a constant, so the other branch folds away); the result
// is truncated back to T.
static inline int64_t s_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);  // INT64_MIN / -1 wraps
  return a / b;
}
static inline uint64_t u_div(uint64_t a, uint64_t b) { return b ? a / b : 0; }
// C's % (the dividend's sign); % by -1 is 0 (INT64_MIN % -1 traps on x86)
static inline int64_t s_fmod(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
static inline uint64_t u_rem(uint64_t a, uint64_t b) { return b ? a % b : 0; }
// Python's % (the divisor's sign): C's remainder moved by one divisor when the signs differ
static inline int64_t s_mod(int64_t a, int64_t b) {
  int64_t r = s_fmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

#define I_WRAP(T, x) ((T)(uint64_t)(x))
#define I_SU(S, T, SF, UF, va, vb) \
  I_WRAP(T, (S) ? (uint64_t)SF((int64_t)(va), (int64_t)(vb)) : UF((uint64_t)(va), (uint64_t)(vb)))
#define I_DIV(S, T, va, vb) I_SU(S, T, s_div, u_div, va, vb)
#define I_FMOD(S, T, va, vb) I_SU(S, T, s_fmod, u_rem, va, vb)
#define I_MOD(S, T, va, vb) I_SU(S, T, s_mod, u_rem, va, vb)
#define I_POW(S, T, va, vb) \
  I_WRAP(T, (S) ? s64_pow((int64_t)(va), (int64_t)(vb)) : u64_pow((uint64_t)(va), (uint64_t)(vb)))

#define DEF_BIN_INT(K, T, S)                                                                    \
  static void bin_##K(T *y, const T *a, const T *b, int ndim, const int64_t *ydims,             \
                      const int64_t *adims, const int64_t *bdims, k_binop op) {                 \
    bplan p;                                                                                    \
    if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;                                     \
    switch (op) {                                                                               \
      case K_ADD: BCAST_WALK_E(T, y, a, b, &p, I_WRAP(T, (uint64_t)va + (uint64_t)vb)); break;  \
      case K_SUB: BCAST_WALK_E(T, y, a, b, &p, I_WRAP(T, (uint64_t)va - (uint64_t)vb)); break;  \
      case K_MUL: BCAST_WALK_E(T, y, a, b, &p, I_WRAP(T, (uint64_t)va * (uint64_t)vb)); break;  \
      case K_DIV: BCAST_WALK_E(T, y, a, b, &p, I_DIV(S, T, va, vb)); break;                     \
      case K_POW: BCAST_WALK_E(T, y, a, b, &p, I_POW(S, T, va, vb)); break;                     \
      case K_MAX: BCAST_WALK_E(T, y, a, b, &p, va > vb ? va : vb); break;                       \
      case K_MIN: BCAST_WALK_E(T, y, a, b, &p, va < vb ? va : vb); break;                       \
      case K_MOD: BCAST_WALK_E(T, y, a, b, &p, I_MOD(S, T, va, vb)); break;                     \
      case K_FMOD: BCAST_WALK_E(T, y, a, b, &p, I_FMOD(S, T, va, vb)); break;                   \
    }                                                                                           \
  }
K_INT_TYPES(DEF_BIN_INT)

void k_binary_i64(int64_t *y, const int64_t *a, const int64_t *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op) {
  bin_K_I64(y, a, b, ndim, ydims, adims, bdims, op);
}

int k_binary_takes(k_elem t, k_binop op) {
  if (t == K_F16 || t == K_BOOL || (unsigned)t > (unsigned)K_BOOL) return 0;
  return (int)op >= (int)K_ADD && (int)op <= (int)K_FMOD;
}

// --- Pow with a base and an exponent of different types: rare (a float
// raised to an integer, an integer to a float), so each element goes
// through double by k_cast's rules one at a time rather than through a
// typed loop per pair of types.
static size_t kelem_size(k_elem t) {
  switch (t) {
    case K_F64: case K_I64: case K_U64: return 8;
    case K_F32: case K_I32: case K_U32: return 4;
    case K_F16: case K_I16: case K_U16: return 2;
    default: return 1;
  }
}

int k_pow_mixed(void *y, const void *a, k_elem ta, const void *b, k_elem tb, int ndim,
                const int64_t *ydims, const int64_t *adims, const int64_t *bdims) {
  if (!k_binary_takes(ta, K_POW) || !k_binary_takes(tb, K_POW)) return -1;
  bplan p;
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return 0;
  size_t sa = kelem_size(ta), sb = kelem_size(tb);
  char *py = y;
  const char *pa = a, *pb = b;
  int64_t idx[K_MAX_DIMS] = {0}, ao = 0, bo = 0;
  for (;;) {
    double va, vb, v;
    k_cast(&va, K_F64, pa + (size_t)ao * sa, ta, 1);
    k_cast(&vb, K_F64, pb + (size_t)bo * sb, tb, 1);
    v = pow(va, vb);
    k_cast(py, ta, &v, K_F64, 1);
    py += sa;
    int k = p.nd - 1;
    for (; k >= 0; k--) {
      ao += p.as[k];
      bo += p.bs[k];
      if (++idx[k] < p.dims[k]) break;
      ao -= p.as[k] * p.dims[k];
      bo -= p.bs[k] * p.dims[k];
      idx[k] = 0;
    }
    if (k < 0) break;
  }
  return 0;
}

int k_binary(void *y, const void *a, const void *b, k_elem t, int ndim, const int64_t *ydims,
             const int64_t *adims, const int64_t *bdims, k_binop op) {
  if (!k_binary_takes(t, op)) return -1;
  switch (t) {
    case K_F32: k_binary_f32(y, a, b, ndim, ydims, adims, bdims, op); return 0;
    case K_F64: bin_f64(y, a, b, ndim, ydims, adims, bdims, op); return 0;
#define CASE_INT(K, T, S) \
    case K: bin_##K(y, a, b, ndim, ydims, adims, bdims, op); return 0;
    K_INT_TYPES(CASE_INT)
#undef CASE_INT
    default: return -1;
  }
}

// --- comparisons: the same walk with a bool output, one body for every type
#define COMPARE_BODY(T)                                                         \
  bplan p;                                                                      \
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;                       \
  switch (op) {                                                                 \
    case K_EQ: BCAST_WALK_TE(uint8_t, T, y, a, b, &p, (uint8_t)(va == vb)); break; \
    case K_LT: BCAST_WALK_TE(uint8_t, T, y, a, b, &p, (uint8_t)(va < vb)); break;  \
    case K_GT: BCAST_WALK_TE(uint8_t, T, y, a, b, &p, (uint8_t)(va > vb)); break;  \
    case K_LE: BCAST_WALK_TE(uint8_t, T, y, a, b, &p, (uint8_t)(va <= vb)); break; \
    case K_GE: BCAST_WALK_TE(uint8_t, T, y, a, b, &p, (uint8_t)(va >= vb)); break; \
  }

#define DEF_CMP(K, T, S)                                                                        \
  static void cmp_##K(uint8_t *y, const T *a, const T *b, int ndim, const int64_t *ydims,       \
                      const int64_t *adims, const int64_t *bdims, k_cmpop op) {                 \
    COMPARE_BODY(T)                                                                             \
  }
K_INT_TYPES(DEF_CMP)
K_FLOAT_TYPES(DEF_CMP)

void k_compare_f32(uint8_t *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op) {
  cmp_K_F32(y, a, b, ndim, ydims, adims, bdims, op);
}

void k_compare_i64(uint8_t *y, const int64_t *a, const int64_t *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op) {
  cmp_K_I64(y, a, b, ndim, ydims, adims, bdims, op);
}

void k_compare_i32(uint8_t *y, const int32_t *a, const int32_t *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op) {
  cmp_K_I32(y, a, b, ndim, ydims, adims, bdims, op);
}

int k_compare(uint8_t *y, const void *a, const void *b, k_elem t, int ndim, const int64_t *ydims,
              const int64_t *adims, const int64_t *bdims, k_cmpop op) {
  switch (t) {
#define CASE_CMP(K, T, S) \
    case K: cmp_##K(y, a, b, ndim, ydims, adims, bdims, op); return 0;
    K_INT_TYPES(CASE_CMP)
    K_FLOAT_TYPES(CASE_CMP)
#undef CASE_CMP
    default: return -1;
  }
}

// --- logic on bools: operands normalised to 0/1 first, so a nonzero byte
// other than 1 (raw BOOL bytes from a client) still counts as true
void k_logic(uint8_t *y, const uint8_t *a, const uint8_t *b, int ndim, const int64_t *ydims,
             const int64_t *adims, const int64_t *bdims, k_logop op) {
  bplan p;
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;
  switch (op) {
    case K_AND: BCAST_WALK_E(uint8_t, y, a, b, &p, (uint8_t)(!!va & !!vb)); break;
    case K_OR: BCAST_WALK_E(uint8_t, y, a, b, &p, (uint8_t)(!!va | !!vb)); break;
    case K_XOR: BCAST_WALK_E(uint8_t, y, a, b, &p, (uint8_t)(!!va ^ !!vb)); break;
    case K_XNOR: BCAST_WALK_E(uint8_t, y, a, b, &p, (uint8_t)(!va == !vb)); break;
  }
}

// --- bitwise ops and shifts on the integer types (K_INT_TYPES), through
// uint64_t: And, Or, Xor act on the two's complement bits. Shifts as ONNX's
// reference (numpy) does: right shifts of signed types are arithmetic
// (GCC's >> on int64_t), and a shift count that is negative or at least the
// type's width gives 0, or -1 for a right shift of a negative value (C leaves
// those undefined; hardware masks the count).
// The sign test as a function: inline in the macro, it warns (-Wtype-limits) for unsigned T.
static inline int is_neg(int64_t v) { return v < 0; }
#define SHIFT(S, T, v, s, left)                                                           \
  (((S) && is_neg((int64_t)(s))) || (uint64_t)(s) >= 8 * sizeof(T)                        \
       ? (!(left) && (S) && is_neg((int64_t)(v)) ? (T)-1 : (T)0)                          \
   : (left) ? I_WRAP(T, (uint64_t)(v) << (uint64_t)(s))                                   \
   : (S)    ? (T)((int64_t)(v) >> (int64_t)(s))                                           \
            : (T)((uint64_t)(v) >> (uint64_t)(s)))
#define DEF_BIT_INT(K, T, S)                                                                     \
  static void bit_##K(T *y, const T *a, const T *b, int ndim, const int64_t *ydims,              \
                      const int64_t *adims, const int64_t *bdims, k_bitop op) {                  \
    bplan p;                                                                                     \
    if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;                                      \
    switch (op) {                                                                                \
      case K_BAND: BCAST_WALK_E(T, y, a, b, &p, I_WRAP(T, (uint64_t)va & (uint64_t)vb)); break;  \
      case K_BOR: BCAST_WALK_E(T, y, a, b, &p, I_WRAP(T, (uint64_t)va | (uint64_t)vb)); break;   \
      case K_BXOR: BCAST_WALK_E(T, y, a, b, &p, I_WRAP(T, (uint64_t)va ^ (uint64_t)vb)); break;  \
      case K_SHL: BCAST_WALK_E(T, y, a, b, &p, SHIFT(S, T, va, vb, 1)); break;                   \
      case K_SHR: BCAST_WALK_E(T, y, a, b, &p, SHIFT(S, T, va, vb, 0)); break;                   \
    }                                                                                            \
  }
K_INT_TYPES(DEF_BIT_INT)

int k_bitwise(void *y, const void *a, const void *b, k_elem t, int ndim, const int64_t *ydims,
              const int64_t *adims, const int64_t *bdims, k_bitop op) {
  if ((int)op < (int)K_BAND || (int)op > (int)K_SHR) return -1;
  switch (t) {
#define CASE_BIT(K, T, S) \
    case K: bit_##K(y, a, b, ndim, ydims, adims, bdims, op); return 0;
    K_INT_TYPES(CASE_BIT)
#undef CASE_BIT
    default: return -1;
  }
}

void k_bitwise_not(void *y, const void *x, size_t bytes) {
  unsigned char *py = y;
  const unsigned char *px = x;
  for (size_t i = 0; i < bytes; i++) py[i] = (unsigned char)~px[i];
}

// --- PRelu: y = x < 0 ? slope * x : x, the slope broadcast to x (NaN passes)
void k_prelu_f32(float *y, const float *x, const float *slope, int ndim, const int64_t *ydims,
                 const int64_t *sdims) {
  bplan p;
  if (!bplan_make(&p, ndim, ydims, ydims, sdims)) return;
  BCAST_WALK_E(float, y, x, slope, &p, va < 0.0f ? va * vb : va);
}
