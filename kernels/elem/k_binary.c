// kernels/elem/k_binary.c: elementwise binary ops with numpy broadcasting.
// A broadcast input gets stride 0 on the dims it repeats; dims of size 1 are
// dropped and neighbouring dims that both inputs walk contiguously are
// merged, so the inner loop is as long, and as often unit-stride, as the
// shapes allow.
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

// Walks every outer index (all dims but the innermost) with an odometer and
// calls INNER with pointers to the start of each contiguous output run.
#define BCAST_WALK_T(TY, T, y, a, b, p, INNER)                                       \
  do {                                                                         \
    int nd_ = (p)->nd;                                                         \
    int64_t d_ = (p)->dims[nd_ - 1], sa_ = (p)->as[nd_ - 1], sb_ = (p)->bs[nd_ - 1]; \
    int64_t idx_[K_MAX_DIMS] = {0};                                            \
    int64_t ao_ = 0, bo_ = 0;                                                  \
    TY *py_ = (y);                                                             \
    for (;;) {                                                                 \
      const T *pa_ = (a) + ao_, *pb_ = (b) + bo_;                              \
      INNER(T, py_, pa_, pb_, d_, sa_, sb_);                                   \
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
#define BCAST_WALK(T, y, a, b, p, INNER) BCAST_WALK_T(T, T, y, a, b, p, INNER)

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

#define F_ADD(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, va + vb)
#define F_SUB(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, va - vb)
#define F_MUL(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, va * vb)
#define F_DIV(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, va / vb)
#define F_POW(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, powf(va, vb))
// NaN on either side wins: `va != va` is true only for NaN
#define F_MAX(T, py, pa, pb, d, sa, sb) \
  RUN_OP(T, py, pa, pb, d, sa, sb, va != va || va > vb ? va : vb)
#define F_MIN(T, py, pa, pb, d, sa, sb) \
  RUN_OP(T, py, pa, pb, d, sa, sb, va != va || va < vb ? va : vb)

void k_binary_f32(float *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op) {
  bplan p;
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;
  switch (op) {
    case K_ADD: BCAST_WALK(float, y, a, b, &p, F_ADD); break;
    case K_SUB: BCAST_WALK(float, y, a, b, &p, F_SUB); break;
    case K_MUL: BCAST_WALK(float, y, a, b, &p, F_MUL); break;
    case K_DIV: BCAST_WALK(float, y, a, b, &p, F_DIV); break;
    case K_POW: BCAST_WALK(float, y, a, b, &p, F_POW); break;
    case K_MAX: BCAST_WALK(float, y, a, b, &p, F_MAX); break;
    case K_MIN: BCAST_WALK(float, y, a, b, &p, F_MIN); break;
  }
}

// Signed overflow is undefined in C, so add/sub/mul go through uint64_t and
// wrap like two's complement hardware does.
static inline int64_t i64_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);  // INT64_MIN / -1 wraps
  return a / b;
}

// Integer power by squaring, wrapping like the other int64 ops; a negative
// exponent gives 0 unless the base is 1 or -1 (as integer division would).
static inline int64_t i64_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)a;
  for (; b; b >>= 1, x *= x)
    if (b & 1) r *= x;
  return (int64_t)r;
}

#define I_ADD(T, py, pa, pb, d, sa, sb) \
  RUN_OP(T, py, pa, pb, d, sa, sb, (int64_t)((uint64_t)va + (uint64_t)vb))
#define I_SUB(T, py, pa, pb, d, sa, sb) \
  RUN_OP(T, py, pa, pb, d, sa, sb, (int64_t)((uint64_t)va - (uint64_t)vb))
#define I_MUL(T, py, pa, pb, d, sa, sb) \
  RUN_OP(T, py, pa, pb, d, sa, sb, (int64_t)((uint64_t)va * (uint64_t)vb))
#define I_DIV(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, i64_div(va, vb))
#define I_POW(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, i64_pow(va, vb))
#define I_MAX(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, va > vb ? va : vb)
#define I_MIN(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, va < vb ? va : vb)

void k_binary_i64(int64_t *y, const int64_t *a, const int64_t *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op) {
  bplan p;
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;
  switch (op) {
    case K_ADD: BCAST_WALK(int64_t, y, a, b, &p, I_ADD); break;
    case K_SUB: BCAST_WALK(int64_t, y, a, b, &p, I_SUB); break;
    case K_MUL: BCAST_WALK(int64_t, y, a, b, &p, I_MUL); break;
    case K_DIV: BCAST_WALK(int64_t, y, a, b, &p, I_DIV); break;
    case K_POW: BCAST_WALK(int64_t, y, a, b, &p, I_POW); break;
    case K_MAX: BCAST_WALK(int64_t, y, a, b, &p, I_MAX); break;
    case K_MIN: BCAST_WALK(int64_t, y, a, b, &p, I_MIN); break;
  }
}

// --- comparisons: the same walk with a bool output
#define C_EQ(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(va == vb))
#define C_LT(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(va < vb))
#define C_GT(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(va > vb))
#define C_LE(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(va <= vb))
#define C_GE(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(va >= vb))

#define COMPARE_BODY(T)                                                 \
  bplan p;                                                              \
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;               \
  switch (op) {                                                         \
    case K_EQ: BCAST_WALK_T(uint8_t, T, y, a, b, &p, C_EQ); break;      \
    case K_LT: BCAST_WALK_T(uint8_t, T, y, a, b, &p, C_LT); break;      \
    case K_GT: BCAST_WALK_T(uint8_t, T, y, a, b, &p, C_GT); break;      \
    case K_LE: BCAST_WALK_T(uint8_t, T, y, a, b, &p, C_LE); break;      \
    case K_GE: BCAST_WALK_T(uint8_t, T, y, a, b, &p, C_GE); break;      \
  }

void k_compare_f32(uint8_t *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op) {
  COMPARE_BODY(float)
}

void k_compare_i64(uint8_t *y, const int64_t *a, const int64_t *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op) {
  COMPARE_BODY(int64_t)
}

void k_compare_i32(uint8_t *y, const int32_t *a, const int32_t *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op) {
  COMPARE_BODY(int32_t)
}

// --- logic on bools: operands normalised to 0/1 first, so a nonzero byte
// other than 1 (raw BOOL bytes from a client) still counts as true
#define L_AND(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(!!va & !!vb))
#define L_OR(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(!!va | !!vb))
#define L_XOR(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(!!va ^ !!vb))
#define L_XNOR(T, py, pa, pb, d, sa, sb) RUN_OP(T, py, pa, pb, d, sa, sb, (uint8_t)(!va == !vb))

void k_logic(uint8_t *y, const uint8_t *a, const uint8_t *b, int ndim, const int64_t *ydims,
             const int64_t *adims, const int64_t *bdims, k_logop op) {
  bplan p;
  if (!bplan_make(&p, ndim, ydims, adims, bdims)) return;
  switch (op) {
    case K_AND: BCAST_WALK(uint8_t, y, a, b, &p, L_AND); break;
    case K_OR: BCAST_WALK(uint8_t, y, a, b, &p, L_OR); break;
    case K_XOR: BCAST_WALK(uint8_t, y, a, b, &p, L_XOR); break;
    case K_XNOR: BCAST_WALK(uint8_t, y, a, b, &p, L_XNOR); break;
  }
}
