// Tests kernels/gemm/k_gemm_ref.c: a 2x3 by 3x2 product by hand under every
// transpose combination (operands stored transposed in memory), alpha and
// beta, padded leading dimensions, beta = 0 ignoring NaN in C, k = 0 and
// empty m/n; then random shapes against a naive loop.
#include "check.h"
#include "kernels/k_ref.h"

static void test_hand(void) {
  // A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]], A*B = [[58,64],[139,154]]
  const float a[6] = {1, 2, 3, 4, 5, 6}, at[6] = {1, 4, 2, 5, 3, 6};
  const float b[6] = {7, 8, 9, 10, 11, 12}, bt[6] = {7, 9, 11, 8, 10, 12};
  const float c0[4] = {1, 2, 3, 4};
  const float want[4] = {2 * 58 + 0.5f * 1, 2 * 64 + 0.5f * 2, 2 * 139 + 0.5f * 3, 2 * 154 + 0.5f * 4};
  for (int ta = 0; ta < 2; ta++) {
    for (int tb = 0; tb < 2; tb++) {
      float c[4];
      memcpy(c, c0, sizeof c);
      // Stored A is [m,k] = [2,3] (lda 3) or, transposed, [k,m] = [3,2] (lda 2).
      k_gemm_ref(c, ta ? at : a, tb ? bt : b, ta, tb, 2, 2, 3, 2.0f, 0.5f, ta ? 2 : 3, tb ? 3 : 2, 2);
      for (int i = 0; i < 4; i++) CHECK_NEAR(c[i], want[i], 0, 0);
      float p[4] = {NAN, NAN, NAN, NAN};
      k_gemm_ref(p, ta ? at : a, tb ? bt : b, ta, tb, 2, 2, 3, 1.0f, 0.0f, ta ? 2 : 3, tb ? 3 : 2, 2);
      CHECK(p[0] == 58 && p[1] == 64 && p[2] == 139 && p[3] == 154);  // beta 0: NaN in C unread
    }
  }
  // Padded leading dims: A in a [2,5] buffer, C in a [2,4] buffer (pads untouched).
  const float ap[10] = {1, 2, 3, -99, -99, 4, 5, 6, -99, -99};
  float cp[8] = {0, 0, 42, 42, 0, 0, 42, 42};
  k_gemm_ref(cp, ap, b, 0, 0, 2, 2, 3, 1.0f, 0.0f, 5, 2, 4);
  CHECK(cp[0] == 58 && cp[1] == 64 && cp[4] == 139 && cp[5] == 154);
  CHECK(cp[2] == 42 && cp[3] == 42 && cp[6] == 42 && cp[7] == 42);
  // k = 0: C = beta * C.
  float ck[4] = {1, 2, 3, 4};
  k_gemm_ref(ck, a, b, 0, 0, 2, 2, 0, 1.0f, 3.0f, 1, 2, 2);
  CHECK(ck[0] == 3 && ck[1] == 6 && ck[2] == 9 && ck[3] == 12);
  // alpha = 0: A and B not read (NaN there does not leak), C scaled.
  const float na[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
  float ca[4] = {1, 2, 3, 4};
  k_gemm_ref(ca, na, na, 0, 0, 2, 2, 3, 0.0f, -1.0f, 3, 2, 2);
  CHECK(ca[0] == -1 && ca[3] == -4);
  // m = 0 or n = 0: nothing written.
  float ce[4] = {9, 9, 9, 9};
  k_gemm_ref(ce, a, b, 0, 0, 0, 2, 3, 1.0f, 0.0f, 3, 2, 2);
  k_gemm_ref(ce, a, b, 0, 0, 2, 0, 3, 1.0f, 0.0f, 3, 2, 2);
  for (int i = 0; i < 4; i++) CHECK(ce[i] == 9.0f);
}

static void test_random(void) {
  enum { M = 5, N = 7, K = 4 };
  float a[M * K], b[K * N], at[K * M], bt[N * K], c0[M * N];
  uint32_t seed = 99;
  for (int i = 0; i < M * K; i++) {
    seed = seed * 1664525u + 1013904223u;
    a[i] = (float)((int)(seed >> 24) - 128) / 16.0f;
  }
  for (int i = 0; i < K * N; i++) {
    seed = seed * 1664525u + 1013904223u;
    b[i] = (float)((int)(seed >> 24) - 128) / 16.0f;
  }
  for (int i = 0; i < M * N; i++) c0[i] = (float)i - 10.0f;
  for (int i = 0; i < M; i++)
    for (int p = 0; p < K; p++) at[p * M + i] = a[i * K + p];
  for (int p = 0; p < K; p++)
    for (int j = 0; j < N; j++) bt[j * K + p] = b[p * N + j];
  int bad = 0;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      float c[M * N];
      memcpy(c, c0, sizeof c);
      k_gemm_ref(c, ta ? at : a, tb ? bt : b, ta, tb, M, N, K, -1.5f, 0.25f, ta ? M : K, tb ? K : N, N);
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
          double s = 0;
          for (int p = 0; p < K; p++) s += (double)a[i * K + p] * b[p * N + j];
          double want = -1.5 * s + 0.25 * c0[i * N + j];
          if (fabs(c[i * N + j] - want) > 1e-6 * fabs(want) + 1e-6) bad++;
        }
    }
  CHECK_EQ_INT(bad, 0);
}

int main(void) {
  test_hand();
  test_random();
  CHECK_DONE();
}
