// Tests kernels/index/k_layout.c: transpose by hand on 2-D and 3-D, then every
// permutation of a 4-D tensor for element sizes 1, 2, 3, 4, 8 and 16 against
// a naive index reference, size-1 dims, rank 8, rank 0 and empty tensors;
// concat with a zero-width input.
#include <stdlib.h>

#include "check.h"
#include "kernels/k_ref.h"

// Naive: for every y index, compute the x offset from perm.
static void naive_transpose(char *y, const char *x, size_t es, int ndim, const int64_t *xd, const int *perm) {
  int64_t yd[K_MAX_DIMS], xs[K_MAX_DIMS], n = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    xs[i] = n;
    n *= xd[i];
  }
  for (int i = 0; i < ndim; i++) yd[i] = xd[perm[i]];
  for (int64_t f = 0; f < n; f++) {
    int64_t rem = f, off = 0;
    for (int i = ndim - 1; i >= 0; i--) {
      off += (rem % yd[i]) * xs[perm[i]];
      rem /= yd[i];
    }
    memcpy(y + f * (int64_t)es, x + off * (int64_t)es, es);
  }
}

static void test_hand(void) {
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
  int64_t d[2] = {2, 3};
  int p[2] = {1, 0};
  k_transpose(y, x, sizeof(float), 2, d, p);
  float want[6] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; i++) CHECK(y[i] == want[i]);
  // [2,3,2] perm [2,0,1] -> [2,2,3]: y[k,i,j] = x[i,j,k]
  int16_t x3[12], y3[12];
  for (int i = 0; i < 12; i++) x3[i] = (int16_t)i;
  int64_t d3[3] = {2, 3, 2};
  int p3[3] = {2, 0, 1};
  k_transpose(y3, x3, sizeof(int16_t), 3, d3, p3);
  int16_t want3[12] = {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11};
  for (int i = 0; i < 12; i++) CHECK_EQ_INT(y3[i], want3[i]);
}

static int next_perm(int *p, int n) {
  int i = n - 2;
  while (i >= 0 && p[i] > p[i + 1]) i--;
  if (i < 0) return 0;
  int j = n - 1;
  while (p[j] < p[i]) j--;
  int t = p[i];
  p[i] = p[j];
  p[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) {
    t = p[a];
    p[a] = p[b];
    p[b] = t;
  }
  return 1;
}

static void test_all_perms(const int64_t *xd, int ndim) {
  static const size_t sizes[6] = {1, 2, 3, 4, 8, 16};
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= xd[i];
  char *x = malloc((size_t)n * 16), *y = malloc((size_t)n * 16), *r = malloc((size_t)n * 16);
  CHECK(x && y && r);
  if (!x || !y || !r) goto out;
  for (int64_t i = 0; i < n * 16; i++) x[i] = (char)(i * 7 + i / 251);
  int perms = 0, bad = 0;
  for (int s = 0; s < 6; s++) {
    int p[K_MAX_DIMS];
    for (int i = 0; i < ndim; i++) p[i] = i;
    do {
      memset(y, 0x5A, (size_t)n * sizes[s]);
      k_transpose(y, x, sizes[s], ndim, xd, p);
      naive_transpose(r, x, sizes[s], ndim, xd, p);
      if (memcmp(y, r, (size_t)n * sizes[s]) != 0) bad++;
      perms++;
    } while (next_perm(p, ndim));
  }
  CHECK_EQ_INT(bad, 0);
  int fact = 1;
  for (int i = 2; i <= ndim; i++) fact *= i;
  CHECK_EQ_INT(perms, 6 * fact);
out:
  free(x);
  free(y);
  free(r);
}

static void test_rank8_and_edges(void) {
  int64_t d8[8] = {2, 1, 2, 3, 1, 2, 2, 1};
  int p8[8] = {7, 6, 5, 4, 3, 2, 1, 0}, q8[8] = {3, 0, 6, 1, 7, 2, 5, 4};
  int32_t x[48], y[48], r[48];  // 2*1*2*3*1*2*2*1 elements
  for (int i = 0; i < 48; i++) x[i] = i * 3 + 1;
  k_transpose(y, x, 4, 8, d8, p8);
  naive_transpose((char *)r, (const char *)x, 4, 8, d8, p8);
  CHECK(memcmp(y, r, sizeof y) == 0);
  k_transpose(y, x, 4, 8, d8, q8);
  naive_transpose((char *)r, (const char *)x, 4, 8, d8, q8);
  CHECK(memcmp(y, r, sizeof y) == 0);
  // Rank 0 and all-ones shapes copy one element.
  double s = 2.5, t = 0;
  k_transpose(&t, &s, sizeof s, 0, NULL, NULL);
  CHECK(t == 2.5);
  int64_t ones[3] = {1, 1, 1};
  int p3[3] = {2, 1, 0};
  t = 0;
  k_transpose(&t, &s, sizeof s, 3, ones, p3);
  CHECK(t == 2.5);
  // Empty: nothing written.
  int64_t e[3] = {2, 0, 3};
  y[0] = 77;
  k_transpose(y, x, 4, 3, e, p3);
  CHECK_EQ_INT(y[0], 77);
}

static void test_concat(void) {
  // Axis 1 of [2,2] and [2,3] floats, with a [2,0] input (NULL) between.
  float a[4] = {1, 2, 3, 4}, b[6] = {5, 6, 7, 8, 9, 10}, y[11];
  y[10] = -1;
  const void *xs[3] = {a, NULL, b};
  size_t rb[3] = {2 * sizeof(float), 0, 3 * sizeof(float)};
  k_concat(y, xs, rb, 3, 2);
  float want[10] = {1, 2, 5, 6, 7, 3, 4, 8, 9, 10};
  for (int i = 0; i < 10; i++) CHECK(y[i] == want[i]);
  CHECK(y[10] == -1.0f);
  // Axis 0 is outer = 1 with whole tensors as rows.
  uint8_t c[3] = {1, 2, 3}, d[2] = {4, 5}, z[5];
  const void *xs2[2] = {c, d};
  size_t rb2[2] = {3, 2};
  k_concat(z, xs2, rb2, 2, 1);
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(z[i], i + 1);
  // outer = 0 / no inputs write nothing.
  z[0] = 99;
  k_concat(z, xs2, rb2, 2, 0);
  k_concat(z, xs2, rb2, 0, 3);
  CHECK_EQ_INT(z[0], 99);
}

int main(void) {
  test_hand();
  int64_t d4[4] = {2, 3, 4, 5};
  test_all_perms(d4, 4);
  int64_t d4b[4] = {3, 1, 2, 1};
  test_all_perms(d4b, 4);
  int64_t d5[5] = {2, 3, 1, 2, 3};
  test_all_perms(d5, 5);
  test_rank8_and_edges();
  test_concat();
  CHECK_DONE();
}
