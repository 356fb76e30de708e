// Tests kernels/elem/k_binary.c: hand-computed broadcasts ([2,3]x[3],
// [2,1,4]x[3,1], scalars), then many random shapes against a naive
// per-element reference that unravels every output index; int64 division
// and overflow rules; empty outputs; comparisons (every k_cmpop, three
// element types, NaN) and bool logic against the same naive reference.
#include <stdint.h>

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

int main(void) {
  test_hand();
  test_compare_logic();
  test_random_shapes();
  test_i64();
  test_empty();
  CHECK_DONE();
}
