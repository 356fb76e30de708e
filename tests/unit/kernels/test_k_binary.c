// Tests kernels/elem/k_binary.c: hand-computed broadcasts ([2,3]x[3],
// [2,1,4]x[3,1], scalars), then many random shapes against a naive
// per-element reference that unravels every output index; int64 division
// and overflow rules; empty outputs; comparisons (every k_cmpop, three
// element types, NaN) and bool logic against the same naive reference.
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "kernels/k_ref.h"

// --- naive reference: unravel each flat output index, ravel into a and b.
static int64_t ravel(int ndim, const int64_t *idx, const int64_t *dims) {
  int64_t off = 0;
  for (int i = 0; i < ndim; i++) off = off * dims[i] + (dims[i] == 1 ? 0 : idx[i]);
  return off;
}

static double ref_op(double a, double b, k_binop op) {
  switch (op) {
    case K_ADD: return a + b;
    case K_SUB: return a - b;
    case K_MUL: return a * b;
    case K_DIV: return a / b;
    case K_POW: return pow(a, b);
    case K_MAX: return a > b ? a : b;
    case K_MIN: return a < b ? a : b;
    case K_FMOD: return fmod(a, b);
    case K_MOD: break;
  }
  return 0;
}

static int64_t count(int ndim, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= d[i];
  return n;
}

// Returns the number of mismatching elements.
static int check_against_naive(int ndim, const int64_t *yd, const int64_t *ad, const int64_t *bd, k_binop op) {
  int64_t ny = count(ndim, yd), na = count(ndim, ad), nb = count(ndim, bd);
  float a[512], b[512], y[512];
  for (int64_t i = 0; i < na; i++) a[i] = (float)(i % 13) - 6.0f + 0.25f;
  for (int64_t i = 0; i < nb; i++) b[i] = (float)(i % 7) + 1.5f;  // never 0
  k_binary_f32(y, a, b, ndim, yd, ad, bd, op);
  int bad = 0;
  for (int64_t f = 0; f < ny; f++) {
    int64_t idx[K_MAX_DIMS], rem = f;
    for (int i = ndim - 1; i >= 0; i--) {
      idx[i] = rem % yd[i];
      rem /= yd[i];
    }
    double want = ref_op(a[ravel(ndim, idx, ad)], b[ravel(ndim, idx, bd)], op);
    if (fabs(y[f] - want) > 1e-6 * fabs(want)) bad++;
  }
  return bad;
}

static void test_hand(void) {
  // [2,3] + [3] (b left-padded to [1,3])
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, y[6];
  int64_t yd[2] = {2, 3}, ad[2] = {2, 3}, bd[2] = {1, 3};
  k_binary_f32(y, a, b, 2, yd, ad, bd, K_ADD);
  float want[6] = {11, 22, 33, 14, 25, 36};
  for (int i = 0; i < 6; i++) CHECK(y[i] == want[i]);
  // [3] - [2,3]: the broadcast operand on the left.
  k_binary_f32(y, b, a, 2, yd, bd, ad, K_SUB);
  float want2[6] = {9, 18, 27, 6, 15, 24};
  for (int i = 0; i < 6; i++) CHECK(y[i] == want2[i]);

  // [2,1,4] * [3,1] -> [2,3,4]: y[i,j,k] = a[i,0,k] * b[j,0]
  float a3[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b3[3] = {1, 10, 100}, y3[24];
  int64_t yd3[3] = {2, 3, 4}, ad3[3] = {2, 1, 4}, bd3[3] = {1, 3, 1};
  k_binary_f32(y3, a3, b3, 3, yd3, ad3, bd3, K_MUL);
  int bad = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++)
        if (y3[(i * 3 + j) * 4 + k] != a3[i * 4 + k] * b3[j]) bad++;
  CHECK_EQ_INT(bad, 0);
  CHECK(y3[0] == 1.0f);
  CHECK(y3[23] == 800.0f);  // a[1,0,3] * b[2] = 8 * 100
  CHECK(y3[12 + 4] == 50.0f);  // a[1,0,0] * b[1] = 5 * 10

  // Scalars: rank 0, and a [2,3] with a scalar padded to [1,1].
  float s1 = 6.0f, s2 = 4.0f, sy = 0.0f;
  k_binary_f32(&sy, &s1, &s2, 0, NULL, NULL, NULL, K_DIV);
  CHECK(sy == 1.5f);
  int64_t sd[2] = {1, 1};
  k_binary_f32(y, a, &s2, 2, yd, ad, sd, K_DIV);
  for (int i = 0; i < 6; i++) CHECK(y[i] == a[i] / 4.0f);
  k_binary_f32(y, &s2, a, 2, yd, sd, ad, K_SUB);
  for (int i = 0; i < 6; i++) CHECK(y[i] == 4.0f - a[i]);
  // Both inputs broadcast into a bigger output: [2,1] + [1,3] -> [2,3].
  float c[2] = {100, 200}, d[3] = {1, 2, 3};
  int64_t cd[2] = {2, 1}, dd[2] = {1, 3};
  k_binary_f32(y, c, d, 2, yd, cd, dd, K_ADD);
  float want3[6] = {101, 102, 103, 201, 202, 203};
  for (int i = 0; i < 6; i++) CHECK(y[i] == want3[i]);
}

static void test_random_shapes(void) {
  // Every shape of rank 1..4 with dims from {1,2,3} in y, and each input
  // dim either the full dim or 1 by a mask: covers merged and unmerged
  // dims, inner strides 0/1 on either side, and outer-only broadcasts.
  int cases = 0, bad = 0;
  uint32_t seed = 12345;
  for (int ndim = 1; ndim <= 4; ndim++) {
    int nshapes = 1;
    for (int i = 0; i < ndim; i++) nshapes *= 3;
    for (int s = 0; s < nshapes; s++) {
      int64_t yd[K_MAX_DIMS];
      int t = s;
      for (int i = 0; i < ndim; i++) {
        yd[i] = 1 + t % 3 + (i == ndim - 1 ? 2 : 0);  // inner dim 3..5
        t /= 3;
      }
      for (int ma = 0; ma < (1 << ndim); ma++) {
        for (int mb = 0; mb < (1 << ndim); mb++) {
          int64_t ad[K_MAX_DIMS], bd[K_MAX_DIMS];
          for (int i = 0; i < ndim; i++) {
            ad[i] = (ma >> i) & 1 ? 1 : yd[i];
            bd[i] = (mb >> i) & 1 ? 1 : yd[i];
          }
          seed = seed * 1103515245u + 12345u;
          k_binop op = (k_binop)((seed >> 16) % 7);
          bad += check_against_naive(ndim, yd, ad, bd, op);
          cases++;
        }
      }
    }
  }
  CHECK(cases > 1000);
  CHECK_EQ_INT(bad, 0);
  // Rank 8 with alternating broadcasts.
  int64_t yd8[8] = {2, 2, 1, 3, 2, 1, 2, 3}, ad8[8] = {2, 1, 1, 3, 1, 1, 2, 1}, bd8[8] = {1, 2, 1, 1, 2, 1, 1, 3};
  for (int op = 0; op < 7; op++) CHECK_EQ_INT(check_against_naive(8, yd8, ad8, bd8, (k_binop)op), 0);
}

static void test_i64(void) {
  int64_t a[6] = {7, -7, 7, -7, INT64_MIN, 5}, b[6] = {2, 2, -2, -2, -1, 0}, y[6];
  int64_t d[1] = {6};
  k_binary_i64(y, a, b, 1, d, d, d, K_DIV);
  int64_t want[6] = {3, -3, -3, 3, INT64_MIN, 0};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(y[i], want[i]);
  int64_t big[2] = {INT64_MAX, INT64_MIN}, one = 1;
  int64_t d2[1] = {2}, d1[1] = {1};
  k_binary_i64(y, big, &one, 1, d2, d2, d1, K_ADD);
  CHECK_EQ_INT(y[0], INT64_MIN);  // wraps
  CHECK_EQ_INT(y[1], INT64_MIN + 1);
  k_binary_i64(y, big, &one, 1, d2, d2, d1, K_SUB);
  CHECK_EQ_INT(y[0], INT64_MAX - 1);
  CHECK_EQ_INT(y[1], INT64_MAX);
  // Shape arithmetic as the engine does it: [2,3] * [3] and [3] - [2,1].
  int64_t m[6] = {1, 2, 3, 4, 5, 6}, v[3] = {10, -1, 0}, c[2] = {100, 200};
  int64_t yd[2] = {2, 3}, md[2] = {2, 3}, vd[2] = {1, 3}, cd[2] = {2, 1};
  k_binary_i64(y, m, v, 2, yd, md, vd, K_MUL);
  int64_t want2[6] = {10, -2, 0, 40, -5, 0};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(y[i], want2[i]);
  k_binary_i64(y, v, c, 2, yd, vd, cd, K_SUB);
  int64_t want3[6] = {-90, -101, -100, -190, -201, -200};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(y[i], want3[i]);
  k_binary_i64(y, m, v, 2, yd, md, vd, K_DIV);
  int64_t want4[6] = {0, -2, 0, 0, -5, 0};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(y[i], want4[i]);
}

static void test_empty(void) {
  float a[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  int64_t yd[2] = {0, 4}, ad[2] = {1, 4};
  k_binary_f32(y, a, a, 2, yd, ad, ad, K_ADD);
  int64_t yd2[2] = {4, 0}, ad2[2] = {4, 1};
  k_binary_f32(y, a, a, 2, yd2, ad2, ad2, K_MUL);
  for (int i = 0; i < 4; i++) CHECK(y[i] == 9.0f);
  int64_t iy[2] = {5, 5}, ia[1] = {3};
  k_binary_i64(iy, ia, ia, 2, yd, ad, ad, K_ADD);
  CHECK(iy[0] == 5 && iy[1] == 5);
}

// --- comparisons and logic: each op over every broadcast mask of a
// [2,3,4] output, checked element by element against the naive walk
static int ref_cmp(double a, double b, k_cmpop op) {
  switch (op) {
    case K_EQ: return a == b;
    case K_LT: return a < b;
    case K_GT: return a > b;
    case K_LE: return a <= b;
    case K_GE: return a >= b;
  }
  return -1;
}

static int ref_logic(int a, int b, k_logop op) {
  a = a != 0, b = b != 0;
  switch (op) {
    case K_AND: return a && b;
    case K_OR: return a || b;
    case K_XOR: return a != b;
    case K_XNOR: return a == b;
  }
  return -1;
}

static void test_compare_logic(void) {
  enum { N = 24 };
  int64_t yd[3] = {2, 3, 4};
  float af[N], bf[N];
  int64_t ai[N], bi[N];
  int32_t a32[N], b32[N];
  uint8_t au[N], bu[N], y[N];
  for (int i = 0; i < N; i++) {
    // small ranges so equal values occur often; NaN in a few places
    af[i] = (float)(i % 5) - 2, bf[i] = (float)(i % 3) - 1;
    ai[i] = i % 5 - 2, bi[i] = i % 3 - 1;
    a32[i] = (int32_t)(i % 4) - 2, b32[i] = (int32_t)(i % 3) - 1;
    au[i] = (uint8_t)(i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 7);  // 7: a raw nonzero "true"
    bu[i] = (uint8_t)(i % 2);
  }
  af[3] = NAN, bf[5] = NAN;
  int bad = 0, cases = 0;
  for (int ma = 0; ma < 8; ma++)
    for (int mb = 0; mb < 8; mb++) {
      int64_t ad[3], bd[3];
      for (int i = 0; i < 3; i++) {
        ad[i] = (ma >> i) & 1 ? 1 : yd[i];
        bd[i] = (mb >> i) & 1 ? 1 : yd[i];
      }
      for (int op = K_EQ; op <= K_GE; op++)
        for (int ty = 0; ty < 3; ty++) {
          if (ty == 0) k_compare_f32(y, af, bf, 3, yd, ad, bd, (k_cmpop)op);
          else if (ty == 1) k_compare_i64(y, ai, bi, 3, yd, ad, bd, (k_cmpop)op);
          else k_compare_i32(y, a32, b32, 3, yd, ad, bd, (k_cmpop)op);
          for (int f = 0; f < N; f++) {
            int64_t idx[3] = {f / 12, f / 4 % 3, f % 4};
            int64_t ia = ravel(3, idx, ad), ib = ravel(3, idx, bd);
            double va = ty == 0 ? af[ia] : ty == 1 ? (double)ai[ia] : a32[ia];
            double vb = ty == 0 ? bf[ib] : ty == 1 ? (double)bi[ib] : b32[ib];
            bad += y[f] != ref_cmp(va, vb, (k_cmpop)op);
            cases++;
          }
        }
      for (int op = K_AND; op <= K_XNOR; op++) {
        k_logic(y, au, bu, 3, yd, ad, bd, (k_logop)op);
        for (int f = 0; f < N; f++) {
          int64_t idx[3] = {f / 12, f / 4 % 3, f % 4};
          bad += y[f] != ref_logic(au[ravel(3, idx, ad)], bu[ravel(3, idx, bd)], (k_logop)op);
          cases++;
        }
      }
    }
  CHECK(cases > 10000);
  CHECK_EQ_INT(bad, 0);
  // NaN compares false every way, itself included
  float nan = NAN, one = 1;
  int64_t d1[1] = {1};
  for (int op = K_EQ; op <= K_GE; op++) {
    k_compare_f32(y, &nan, &nan, 1, d1, d1, d1, (k_cmpop)op);
    CHECK_EQ_INT(y[0], 0);
    k_compare_f32(y, &nan, &one, 1, d1, d1, d1, (k_cmpop)op);
    CHECK_EQ_INT(y[0], 0);
  }
  // hand-written: [2,1] >= [3] on int64 -> [[1,0,0],[1,1,1]]
  int64_t c[2] = {1, 5}, r[3] = {0, 2, 5}, cd[2] = {2, 1}, rd[2] = {1, 3}, yd2[2] = {2, 3};
  k_compare_i64(y, c, r, 2, yd2, cd, rd, K_GE);
  const uint8_t want[6] = {1, 0, 0, 1, 1, 1};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(y[i], want[i]);
}

// --- every integer type through k_binary, k_compare (and k_unary in
// test_k_unary.c): each op on values around the type's edges, broadcast
// [4,6] op [6] and [4,1], against a reference in __int128 that wraps the
// exact result to the type's width; the k_elem's width and signedness come
// from a table the kernels do not use.
typedef struct ity {
  k_elem k;
  int bits, sgn;
  const char *name;
} ity;
static const ity ITYPES[] = {{K_I8, 8, 1, "i8"},    {K_I16, 16, 1, "i16"}, {K_I32, 32, 1, "i32"},
                             {K_I64, 64, 1, "i64"}, {K_U8, 8, 0, "u8"},    {K_U16, 16, 0, "u16"},
                             {K_U32, 32, 0, "u32"}, {K_U64, 64, 0, "u64"}};

typedef __int128 i128;

// v reduced modulo 2^bits into the type's range
static i128 wrap(const ity *t, i128 v) {
  unsigned __int128 m = (unsigned __int128)1 << t->bits, u = (unsigned __int128)v % m;
  if (t->bits == 64) u = (uint64_t)v;  // (1 << 64) fits, but keep the common case exact
  i128 r = (i128)u;
  if (t->sgn && r >= (i128)(m >> 1)) r -= (i128)m;
  return r;
}

static void put(const ity *t, void *buf, size_t i, i128 v) {
  v = wrap(t, v);
  switch (t->bits) {
    case 8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case 16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case 32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    default: ((uint64_t *)buf)[i] = (uint64_t)v; break;
  }
}

static i128 get(const ity *t, const void *buf, size_t i) {
  uint64_t u;
  switch (t->bits) {
    case 8: u = ((const uint8_t *)buf)[i]; break;
    case 16: u = ((const uint16_t *)buf)[i]; break;
    case 32: u = ((const uint32_t *)buf)[i]; break;
    default: u = ((const uint64_t *)buf)[i]; break;
  }
  return wrap(t, (i128)u);
}

static i128 ref_int(const ity *t, i128 a, i128 b, k_binop op) {
  switch (op) {
    case K_ADD: return wrap(t, a + b);
    case K_SUB: return wrap(t, a - b);
    case K_MUL: return wrap(t, (i128)((unsigned __int128)a * (unsigned __int128)b));
    case K_DIV: return b == 0 ? 0 : wrap(t, a / b);  // C truncates toward zero
    case K_FMOD: return b == 0 ? 0 : a % b;
    case K_MOD: {
      if (b == 0) return 0;
      i128 r = a % b;
      return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    case K_POW: {
      if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
      unsigned __int128 r = 1;
      for (i128 k = 0; k < b; k++) r = (uint64_t)(r * (unsigned __int128)(uint64_t)a);
      return wrap(t, (i128)r);
    }
    case K_MAX: return a > b ? a : b;
    case K_MIN: return a < b ? a : b;
  }
  return 0;
}

static void test_int_types(void) {
  enum { R = 4, C = 6, N = R * C };
  int bad = 0, cases = 0;
  for (size_t ti = 0; ti < sizeof ITYPES / sizeof ITYPES[0]; ti++) {
    const ity *t = &ITYPES[ti];
    i128 lo = t->sgn ? -((i128)1 << (t->bits - 1)) : 0, hi = t->sgn ? ((i128)1 << (t->bits - 1)) - 1
                                                                  : ((i128)1 << t->bits) - 1;
    // the edges, small values of both signs, zero and one
    const i128 vals[] = {lo, lo + 1, hi, hi - 1, 0, 1, -1, 2, -3, 7, -7, 100, 3, 5};
    enum { NV = sizeof vals / sizeof vals[0] };
    uint64_t a[N], b[C], bc[R], y[N];
    uint8_t yc[N];
    for (int i = 0; i < N; i++) put(t, a, (size_t)i, vals[(i * 5 + 1) % NV]);
    for (int i = 0; i < C; i++) put(t, b, (size_t)i, vals[(i * 3 + 2) % NV]);
    for (int i = 0; i < R; i++) put(t, bc, (size_t)i, vals[(i * 7 + 4) % NV]);
    for (int op = K_ADD; op <= K_FMOD; op++) {
      CHECK(k_binary_takes(t->k, (k_binop)op));
      for (int shape = 0; shape < 2; shape++) {
        int64_t yd[2] = {R, C}, bd[2] = {shape ? R : 1, shape ? 1 : C};
        const void *bb = shape ? (const void *)bc : (const void *)b;
        if (op == K_POW) {  // small exponents: the ones a model raises integers to
          for (int i = 0; i < C; i++) put(t, b, (size_t)i, (i % 5) - (t->sgn ? 1 : 0));
          for (int i = 0; i < R; i++) put(t, bc, (size_t)i, i + 1);
        }
        CHECK_EQ_INT(k_binary(y, a, bb, t->k, 2, yd, yd, bd, (k_binop)op), 0);
        for (int f = 0; f < N; f++) {
          i128 va = get(t, a, (size_t)f), vb = get(t, bb, shape ? (size_t)(f / C) : (size_t)(f % C));
          i128 want = ref_int(t, va, vb, (k_binop)op), got = get(t, y, (size_t)f);
          if (got != want) {
            if (bad < 5)
              fprintf(stderr, "%s op %d: %lld op %lld = %lld, want %lld\n", t->name, op, (long long)va,
                      (long long)vb, (long long)got, (long long)want);
            bad++;
          }
          cases++;
        }
        if (op == K_POW) {
          for (int i = 0; i < C; i++) put(t, b, (size_t)i, vals[(i * 3 + 2) % NV]);
          for (int i = 0; i < R; i++) put(t, bc, (size_t)i, vals[(i * 7 + 4) % NV]);
        }
      }
    }
    for (int op = K_EQ; op <= K_GE; op++) {
      int64_t yd[2] = {R, C}, bd[2] = {1, C};
      CHECK_EQ_INT(k_compare(yc, a, b, t->k, 2, yd, yd, bd, (k_cmpop)op), 0);
      for (int f = 0; f < N; f++) {
        i128 va = get(t, a, (size_t)f), vb = get(t, b, (size_t)(f % C));
        int want = op == K_EQ ? va == vb : op == K_LT ? va < vb : op == K_GT ? va > vb : op == K_LE ? va <= vb : va >= vb;
        bad += yc[f] != want;
        cases++;
      }
    }
  }
  CHECK(cases > 3000);
  CHECK_EQ_INT(bad, 0);
  // what the kernels refuse, untouched outputs: bool and half arithmetic
  float f[1] = {5}, fy[1] = {9};
  int64_t d1[1] = {1};
  CHECK_EQ_INT(k_binary(fy, f, f, K_BOOL, 1, d1, d1, d1, K_ADD), -1);
  CHECK_EQ_INT(k_binary(fy, f, f, K_F16, 1, d1, d1, d1, K_ADD), -1);
  CHECK(fy[0] == 9.0f);
  CHECK(!k_binary_takes(K_BOOL, K_ADD) && !k_binary_takes(K_F16, K_ADD));
  uint8_t yb[1];
  CHECK_EQ_INT(k_compare(yb, f, f, K_BOOL, 1, d1, d1, d1, K_EQ), -1);
  // float Mod with fmod=1 is C's fmod (the dividend's sign); double runs the same body as float
  float fa[4] = {5.5f, -5.5f, 5.5f, -5.5f}, fb[4] = {2, 2, -2, -2}, fr[4];
  double da[4] = {5.5, -5.5, 1e300, 3}, db[4] = {2, 2, 1e300, 0.5}, dr[4];
  int64_t d4[1] = {4};
  CHECK_EQ_INT(k_binary(fr, fa, fb, K_F32, 1, d4, d4, d4, K_FMOD), 0);
  for (int i = 0; i < 4; i++) CHECK(fr[i] == fmodf(fa[i], fb[i]));
  // fmod=0 on floats as numpy's mod: the divisor's sign, a zero signed like the divisor
  float fa2[4] = {5.5f, -5.5f, 4.0f, -4.0f}, fb2[4] = {2, 2, -2, 2}, fw2[4] = {1.5f, 0.5f, -0.0f, 0.0f};
  CHECK_EQ_INT(k_binary(fr, fa2, fb2, K_F32, 1, d4, d4, d4, K_MOD), 0);
  for (int i = 0; i < 4; i++) CHECK(fr[i] == fw2[i] && signbit(fr[i]) == signbit(fw2[i]));
  // Pow of a float by an integer exponent and of an integer by a float one, broadcast
  float pb[3] = {1.5f, -2, 0.5f}, py[3];
  int64_t pe[1] = {3}, d3[1] = {3};
  CHECK_EQ_INT(k_pow_mixed(py, pb, K_F32, pe, K_I64, 1, d3, d3, d1), 0);
  CHECK(py[0] == 3.375f && py[1] == -8.0f && py[2] == 0.125f);
  int32_t ib[3] = {4, 9, -8}, iy[3];
  float ie[1] = {0.5f};
  CHECK_EQ_INT(k_pow_mixed(iy, ib, K_I32, ie, K_F32, 1, d3, d3, d1), 0);
  CHECK(iy[0] == 2 && iy[1] == 3 && iy[2] == 0);  // sqrt(-8) is NaN: 0, as every cast of NaN to an integer
  CHECK_EQ_INT(k_pow_mixed(iy, ib, K_I32, ie, K_F16, 1, d3, d3, d1), -1);
  CHECK_EQ_INT(k_binary(dr, da, db, K_F64, 1, d4, d4, d4, K_ADD), 0);
  CHECK(dr[0] == 7.5 && dr[1] == -3.5 && dr[2] == 2e300 && dr[3] == 3.5);  // 2e300 is beyond float
  CHECK_EQ_INT(k_binary(dr, da, db, K_F64, 1, d4, d4, d4, K_POW), 0);
  CHECK(dr[0] == pow(5.5, 2) && dr[3] == sqrt(3.0));
}

int main(void) {
  test_int_types();
  test_hand();
  test_compare_logic();
  test_random_shapes();
  test_i64();
  test_empty();
  CHECK_DONE();
}
