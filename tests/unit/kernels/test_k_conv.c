// Tests kernels/conv/k_conv.c: the sliding-window references against values
// worked out by hand (they are the oracles of the oneDNN path, so they are
// checked against nothing but arithmetic): a 1-D conv with stride, padding
// and dilation, a grouped 2-D conv, a transposed conv with stride and
// output cropping, and pools at the padded borders.
#include "check.h"
#include "kernels/conv/k_conv.h"

static k_window win1(int64_t c, int64_t m, int64_t grp, int64_t x, int64_t y, int64_t k,
                     int64_t s, int64_t d, int64_t pl, int64_t pr) {
  k_window g = {0};
  g.nsp = 1;
  g.n = 1;
  g.c = c;
  g.m = m;
  g.group = grp;
  g.x[0] = x;
  g.y[0] = y;
  g.k[0] = k;
  g.stride[0] = s;
  g.dil[0] = d;
  g.pad_l[0] = pl;
  g.pad_r[0] = pr;
  return g;
}

static void test_conv_1d(void) {
  // x = 1..5, w = [1, 10], stride 2, dilation 2, pad 1/1: taps at
  // o*2 - 1 and o*2 + 1 -> y0 = 0*1 + x1*10 = 20, y1 = x1 + 10*x3 = 2 + 40,
  // y2 = x3 + 10*x5(out) = 4; plus bias 0.5
  float x[5] = {1, 2, 3, 4, 5}, w[2] = {1, 10}, b[1] = {0.5f}, y[3];
  k_window g = win1(1, 1, 1, 5, 3, 2, 2, 2, 1, 1);
  k_conv_ref(y, x, w, b, &g);
  CHECK_NEAR(y[0], 20.5, 0, 1e-6);
  CHECK_NEAR(y[1], 42.5, 0, 1e-6);
  CHECK_NEAR(y[2], 4.5, 0, 1e-6);
}

static void test_conv_groups(void) {
  // 2 groups, 1x1 kernel: channel 0 -> outputs 0, 1; channel 1 -> output 2, 3
  float x[4] = {1, 2, 3, 4};  // [c=2][x=2]
  float w[4] = {2, -1, 10, 100};  // [m=4][c/g=1][k=1]
  float y[8];
  k_window g = win1(2, 4, 2, 2, 2, 1, 1, 1, 0, 0);
  k_conv_ref(y, x, w, NULL, &g);
  float want[8] = {2, 4, -1, -2, 30, 40, 300, 400};
  for (int i = 0; i < 8; i++) CHECK_NEAR(y[i], want[i], 0, 1e-6);
}

static void test_conv_transpose(void) {
  // x = [1, 2], w = [1, 2, 3], stride 2: full output 1,2,3+2,4,6 = [1,2,5,4,6];
  // pad 1 at the start crops the first -> [2, 5, 4, 6] (y = 4)
  float x[2] = {1, 2}, w[3] = {1, 2, 3}, y[4], b[1] = {1};
  k_window g = win1(1, 1, 1, 2, 4, 3, 2, 1, 1, 0);
  k_conv_transpose_ref(y, x, w, b, &g);
  float want[4] = {3, 6, 5, 7};
  for (int i = 0; i < 4; i++) CHECK_NEAR(y[i], want[i], 0, 1e-6);
}

static void test_pools(void) {
  // x = [1, 2, 3, 4, 5], k 2, stride 2, pad 1/1 -> windows [-1,0], [1,2], [3,4]
  float x[5] = {1, -2, 3, 4, -5}, y[3];
  k_window g = win1(1, 1, 1, 5, 3, 2, 2, 1, 1, 1);
  k_pool_ref(y, x, &g, K_POOL_MAX);
  CHECK_NEAR(y[0], 1, 0, 0);
  CHECK_NEAR(y[1], 3, 0, 0);
  CHECK_NEAR(y[2], 4, 0, 0);
  k_pool_ref(y, x, &g, K_POOL_AVG_EXCLUDE);
  CHECK_NEAR(y[0], 1, 0, 1e-6);
  CHECK_NEAR(y[1], 0.5, 0, 1e-6);
  CHECK_NEAR(y[2], -0.5, 0, 1e-6);
  k_pool_ref(y, x, &g, K_POOL_AVG_INCLUDE);
  CHECK_NEAR(y[0], 0.5, 0, 1e-6);
  // ceil_mode's extra window [4, 5] with no end pad: tap 5 lies past
  // x + pad_r, so include-padding divides by 1, not 2
  k_window c = win1(1, 1, 1, 5, 3, 2, 2, 1, 0, 0);
  k_pool_ref(y, x, &c, K_POOL_AVG_INCLUDE);
  CHECK_NEAR(y[0], -0.5, 0, 1e-6);
  CHECK_NEAR(y[2], -5, 0, 1e-6);
  // max ignores the padding even when every value is negative
  float neg[5] = {-3, -2, -9, -9, -9};
  k_pool_ref(y, neg, &g, K_POOL_MAX);
  CHECK_NEAR(y[0], -3, 0, 0);
}

int main(void) {
  test_conv_1d();
  test_conv_groups();
  test_conv_transpose();
  test_pools();
  CHECK_DONE();
}
