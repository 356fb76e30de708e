// Tests kernels/norm/k_norm.c: layer norm against hand values, with and without
// bias, on rows with a large mean (where one-pass variance fails), and the
// normalised-moments identity; batch norm against the plain formula; group
// norm (GroupNormalization, InstanceNormalization) against hand values, per
// channel and per group, with a large mean.
#include "check.h"
#include "kernels/k_ref.h"

static void test_layer_norm_hand(void) {
  // Row [1,2,3,4]: mean 2.5, variance 1.25.
  float x[8] = {1, 2, 3, 4, -1, -1, -1, -1}, y[8];
  float scale[4] = {1, 2, 1, 2}, bias[4] = {0, 1, 0, -1};
  k_layer_norm(y, x, scale, bias, 2, 4, 0.0f);
  double s = 1.0 / sqrt(1.25);
  CHECK_NEAR(y[0], -1.5 * s, 1e-6, 0);
  CHECK_NEAR(y[1], -0.5 * s * 2 + 1, 1e-6, 0);
  CHECK_NEAR(y[2], 0.5 * s, 1e-6, 0);
  CHECK_NEAR(y[3], 1.5 * s * 2 - 1, 1e-6, 0);
  CHECK_NEAR(y[0], -1.3416407864998738, 1e-6, 0);
  // A constant row with eps > 0 normalises to 0 (then + bias), not NaN.
  k_layer_norm(y, x, scale, bias, 2, 4, 1e-5f);
  for (int j = 0; j < 4; j++) CHECK_NEAR(y[4 + j], bias[j], 0, 1e-6);
  // No bias; eps enters under the square root.
  float ones[4] = {1, 1, 1, 1};
  k_layer_norm(y, x, ones, NULL, 1, 4, 0.75f);
  CHECK_NEAR(y[3], 1.5 / sqrt(1.25 + 0.75), 1e-6, 0);
  CHECK_NEAR(y[3], 1.0606601717798212, 1e-6, 0);
}

static void test_layer_norm_large_mean(void) {
  // Values 10000 + k/8: exactly representable, spread tiny against the mean.
  enum { C = 64 };
  float x[C], y[C], ones[C];
  for (int j = 0; j < C; j++) {
    x[j] = 10000.0f + (float)(j % 16) / 8.0f;
    ones[j] = 1.0f;
  }
  k_layer_norm(y, x, ones, NULL, 1, C, 0.0f);
  double mean = 0, var = 0;
  for (int j = 0; j < C; j++) mean += x[j];
  mean /= C;
  for (int j = 0; j < C; j++) var += (x[j] - mean) * (x[j] - mean);
  var /= C;
  int bad = 0;
  for (int j = 0; j < C; j++)
    if (fabs(y[j] - (x[j] - mean) / sqrt(var)) > 1e-5) bad++;
  CHECK_EQ_INT(bad, 0);
  // Output moments: mean 0, variance 1.
  double m2 = 0, v2 = 0;
  for (int j = 0; j < C; j++) m2 += y[j];
  for (int j = 0; j < C; j++) v2 += (double)y[j] * y[j];
  CHECK_NEAR(m2 / C, 0.0, 0, 1e-6);
  CHECK_NEAR(v2 / C, 1.0, 1e-5, 0);
  // In place.
  k_layer_norm(x, x, ones, NULL, 1, C, 0.0f);
  CHECK(memcmp(x, y, sizeof x) == 0);
}

// The mean of these is not a float; centring on a float-rounded mean would
// shift every output by about 0.5% of a standard deviation.
static void test_layer_norm_inexact_mean(void) {
  enum { C = 64 };
  float x[C], y[C], ones[C];
  for (int j = 0; j < C; j++) {
    x[j] = 10000.0f + 0.01f * (float)j + ((j % 3) ? 0.003f : 0.0f);
    ones[j] = 1.0f;
  }
  double mean = 0, var = 0;
  for (int j = 0; j < C; j++) mean += x[j];
  mean /= C;
  CHECK((double)(float)mean != mean);
  for (int j = 0; j < C; j++) var += (x[j] - mean) * (x[j] - mean);
  var /= C;
  k_layer_norm(y, x, ones, NULL, 1, C, 0.0f);
  int bad = 0;
  for (int j = 0; j < C; j++)
    if (fabs(y[j] - (x[j] - mean) / sqrt(var)) > 1e-4) bad++;
  CHECK_EQ_INT(bad, 0);
}

static void test_batch_norm(void) {
  // [n=2, c=3, spatial=2]
  float x[12], y[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i - 3.0f;
  float scale[3] = {1, 2, 0.5f}, bias[3] = {0, -1, 3}, mean[3] = {0, 1, -2}, var[3] = {1, 4, 0.25f};
  float eps = 1e-3f;
  k_batch_norm(y, x, scale, bias, mean, var, 2, 3, 2, eps);
  int bad = 0;
  for (int n = 0; n < 2; n++)
    for (int c = 0; c < 3; c++)
      for (int s = 0; s < 2; s++) {
        int at = (n * 3 + c) * 2 + s;
        double want = (x[at] - mean[c]) / sqrt((double)var[c] + eps) * scale[c] + bias[c];
        if (fabs(y[at] - want) > 1e-5 * fabs(want) + 1e-6) bad++;
      }
  CHECK_EQ_INT(bad, 0);
  // Hand value: n=1, c=1, s=0 -> x[8] = 5: (5 - 1) / sqrt(4.001) * 2 - 1.
  CHECK_NEAR(y[8], 4.0 / sqrt(4.001) * 2.0 - 1.0, 1e-6, 0);
  // bias NULL behaves as zero bias.
  float zb[3] = {0, 0, 0}, y2[12], y3[12];
  k_batch_norm(y2, x, scale, NULL, mean, var, 2, 3, 2, eps);
  k_batch_norm(y3, x, scale, zb, mean, var, 2, 3, 2, eps);
  CHECK(memcmp(y2, y3, sizeof y2) == 0);
}

// x [1, 4, 2] in 2 groups of 2 channels: group 0 is {1, 3, 5, 7} (mean 4,
// variance 5), group 1 {2, 2, 2, 2} (variance 0: only bias is left).
static void test_group_norm_hand(void) {
  float x[8] = {1, 3, 5, 7, 2, 2, 2, 2}, y[8];
  float scale[4] = {1, 2, -1, 3}, bias[4] = {0, 1, 0.5f, -1};
  k_group_norm(y, x, scale, bias, 1, 4, 2, 2, 0, 1e-5f);
  double s = 1.0 / sqrt(5.0 + 1e-5);
  CHECK_NEAR(y[0], -3 * s, 1e-6, 0);
  CHECK_NEAR(y[1], -1 * s, 1e-6, 0);
  CHECK_NEAR(y[2], 1 * s * 2 + 1, 1e-6, 0);
  CHECK_NEAR(y[3], 3 * s * 2 + 1, 1e-6, 0);
  CHECK_NEAR(y[3], 3.683281573, 1e-6, 0);
  for (int j = 4; j < 8; j++) CHECK_NEAR(y[j], bias[2 + (j - 4) / 2], 0, 1e-6);
  // per group (GroupNormalization-18): scale and bias of group 1 shared by channels 2 and 3
  float gs[2] = {2, -1}, gb[2] = {1, 0.25f};
  k_group_norm(y, x, gs, gb, 1, 4, 2, 2, 1, 1e-5f);
  CHECK_NEAR(y[0], -3 * s * 2 + 1, 1e-6, 0);
  CHECK_NEAR(y[3], 3 * s * 2 + 1, 1e-6, 0);
  for (int j = 4; j < 8; j++) CHECK_NEAR(y[j], 0.25, 0, 1e-6);
  // InstanceNormalization (groups == c) in place: each channel {a, b} with a < b becomes {-1, 1}
  // (eps 0: variance ((a - b) / 2)^2)
  float one[4] = {1, 1, 1, 1}, zero[4] = {0, 0, 0, 0};
  k_group_norm(x, x, one, zero, 1, 4, 4, 2, 0, 0.0f);
  CHECK_NEAR(x[0], -1, 1e-6, 0);
  CHECK_NEAR(x[1], 1, 1e-6, 0);
  CHECK_NEAR(x[2], -1, 1e-6, 0);
  CHECK_NEAR(x[3], 1, 1e-6, 0);
}

// Each of 3 samples x 2 groups of [1, 3, 16] normalised on its own; values
// 1000 + k/8 (exact in float): mean 1000-ish, spread small, as the two-pass
// keeps. Every group comes out with mean 0 and variance 1 (scale 1, bias 0).
static void test_group_norm_moments(void) {
  enum { N = 3, C = 6, G = 2, SP = 16, LEN = C / G * SP };
  float x[N * C * SP], y[N * C * SP], one[C], zero[C];
  for (int i = 0; i < N * C * SP; i++) x[i] = 1000.0f + (float)(i * 7 % 23) / 8.0f + (float)(i / LEN);
  for (int c = 0; c < C; c++) one[c] = 1.0f, zero[c] = 0.0f;
  k_group_norm(y, x, one, zero, N, C, G, SP, 0, 0.0f);
  for (int g = 0; g < N * G; g++) {
    double m = 0, v = 0;
    for (int j = 0; j < LEN; j++) m += y[g * LEN + j];
    m /= LEN;
    for (int j = 0; j < LEN; j++) v += (y[g * LEN + j] - m) * (y[g * LEN + j] - m);
    CHECK_NEAR(m, 0.0, 0, 1e-6);
    CHECK_NEAR(v / LEN, 1.0, 1e-5, 0);
  }
}

static void test_empty(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9}, one[4] = {1, 1, 1, 1};
  k_layer_norm(y, x, one, one, 0, 4, 1e-5f);
  k_layer_norm(y, x, one, one, 4, 0, 1e-5f);
  k_batch_norm(y, x, one, one, one, one, 0, 2, 2, 1e-5f);
  k_batch_norm(y, x, one, one, one, one, 2, 0, 2, 1e-5f);
  k_batch_norm(y, x, one, one, one, one, 2, 2, 0, 1e-5f);
  k_group_norm(y, x, one, one, 0, 2, 1, 2, 0, 1e-5f);
  k_group_norm(y, x, one, one, 2, 2, 2, 0, 0, 1e-5f);
  for (int i = 0; i < 4; i++) CHECK(y[i] == 9.0f);
}

int main(void) {
  test_layer_norm_hand();
  test_layer_norm_large_mean();
  test_layer_norm_inexact_mean();
  test_batch_norm();
  test_group_norm_hand();
  test_group_norm_moments();
  test_empty();
  CHECK_DONE();
}
