// Tests kernels/norm/k_softmax.c: hand values, shift invariance with huge
// inputs, rows summing to 1 across the column-block boundary, log-softmax
// against the x - max - log(sum exp) identity where log(softmax) would
// underflow, in-place use and empty shapes.
#include <stdlib.h>

#include "check.h"
#include "kernels/k_ref.h"

static void test_hand(void) {
  float x[3] = {1, 2, 3}, y[3], ly[3];
  k_softmax(y, x, 1, 3, 1);
  double s = exp(1.0) + exp(2.0) + exp(3.0);
  CHECK_NEAR(y[0], exp(1.0) / s, 1e-6, 0);
  CHECK_NEAR(y[1], exp(2.0) / s, 1e-6, 0);
  CHECK_NEAR(y[2], exp(3.0) / s, 1e-6, 0);
  CHECK_NEAR(y[0], 0.09003057317038046, 1e-6, 0);
  k_log_softmax(ly, x, 1, 3, 1);
  CHECK_NEAR(ly[2], 3.0 - log(s), 1e-6, 0);
  CHECK_NEAR(ly[0], -2.4076059644443806, 1e-6, 0);
  // Shifting by a huge constant changes nothing and overflows nothing.
  float big[3] = {1001, 1002, 1003}, yb[4];
  k_softmax(yb, big, 1, 3, 1);
  for (int i = 0; i < 3; i++) CHECK_NEAR(yb[i], y[i], 1e-6, 0);
  float neg[3] = {-1e30f, -1e30f, -1e30f};
  k_softmax(yb, neg, 1, 3, 1);
  for (int i = 0; i < 3; i++) CHECK_NEAR(yb[i], 1.0 / 3.0, 1e-6, 0);
  // log-softmax of a far-below-max entry is exact where log(softmax) is -inf.
  float two[2] = {0.0f, -200.0f};
  k_log_softmax(yb, two, 1, 2, 1);
  CHECK_NEAR(yb[0], 0.0, 0, 1e-7);
  CHECK_NEAR(yb[1], -200.0, 1e-7, 0);
  k_softmax(yb, two, 1, 2, 1);
  CHECK(yb[0] == 1.0f);
  CHECK(yb[1] == 0.0f);
  // The max may be anywhere, last element included; without it exp overflows.
  float last[3] = {0.0f, 1.0f, 1000.0f};
  k_softmax(yb, last, 1, 3, 1);
  CHECK(yb[0] == 0.0f && yb[1] == 0.0f && yb[2] == 1.0f);
  k_log_softmax(yb, last, 1, 3, 1);
  CHECK_NEAR(yb[0], -1000.0, 1e-7, 0);
  CHECK_NEAR(yb[2], 0.0, 0, 1e-7);
  // Axis of length 1: softmax is 1, log-softmax is 0.
  float one[4] = {5, -3, 0, 1e20f};
  k_softmax(yb, one, 4, 1, 1);
  for (int i = 0; i < 4; i++) CHECK(yb[i] == 1.0f);
  k_log_softmax(yb, one, 1, 1, 4);
  for (int i = 0; i < 4; i++) CHECK(yb[i] == 0.0f);
}

// [outer, axis, inner] with inner past the 256-column block, against a
// double reference per (o, j) column; checks sums too.
static void test_strided(size_t outer, size_t axis, size_t inner) {
  size_t n = outer * axis * inner;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *ly = malloc(n * sizeof *ly);
  CHECK(x && y && ly);
  if (!x || !y || !ly) goto out;
  uint32_t seed = 7;
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) % 20000) / 1000.0f - 10.0f;  // [-10, 10)
  }
  k_softmax(y, x, outer, axis, inner);
  k_log_softmax(ly, x, outer, axis, inner);
  int bad = 0, bad_sum = 0;
  for (size_t o = 0; o < outer; o++) {
    for (size_t j = 0; j < inner; j++) {
      const float *xc = x + o * axis * inner + j;
      double mx = xc[0], s = 0, ysum = 0;
      for (size_t r = 1; r < axis; r++) mx = fmax(mx, xc[r * inner]);
      for (size_t r = 0; r < axis; r++) s += exp(xc[r * inner] - mx);
      for (size_t r = 0; r < axis; r++) {
        size_t at = o * axis * inner + r * inner + j;
        double p = exp(x[at] - mx) / s, lp = x[at] - mx - log(s);
        if (fabs(y[at] - p) > 1e-6 * p + 1e-9) bad++;
        if (fabs(ly[at] - lp) > 1e-5 * fabs(lp) + 1e-6) bad++;
        ysum += y[at];
      }
      if (fabs(ysum - 1.0) > 1e-5) bad_sum++;
    }
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(bad_sum, 0);
  // In place gives the same bits.
  k_softmax(x, x, outer, axis, inner);
  CHECK(memcmp(x, y, n * sizeof *x) == 0);
out:
  free(x);
  free(y);
  free(ly);
}

static void test_empty(void) {
  float x[2] = {1, 2}, y[2] = {9, 9};
  k_softmax(y, x, 0, 2, 1);
  k_softmax(y, x, 1, 0, 1);
  k_softmax(y, x, 1, 2, 0);
  k_log_softmax(y, x, 0, 2, 1);
  k_log_softmax(y, x, 1, 0, 1);
  k_log_softmax(y, x, 1, 2, 0);
  CHECK(y[0] == 9.0f && y[1] == 9.0f);
}

int main(void) {
  test_hand();
  test_strided(1, 10, 1);
  test_strided(3, 5, 300);  // crosses the column block
  test_strided(2, 7, 256);
  test_strided(4, 1000, 1);
  test_empty();
  CHECK_DONE();
}
