// Tests kernels/elem/k_unary.c: activations against hand values and plain
// double-precision formulas, large-|x| stability, aliasing and n = 0; the
// integer unary ops (Neg, Abs, Sign, Clip) on every integer type, edges
// included, and what k_unary refuses.
#include <stdint.h>

#include "check.h"
#include "kernels/k_ref.h"

static void test_relu(void) {
  float x[5] = {-2.0f, -0.5f, 0.0f, 1.5f, NAN}, y[5];
  k_relu(y, x, 5);
  CHECK(y[0] == 0.0f && y[1] == 0.0f && y[2] == 0.0f);
  CHECK(y[3] == 1.5f);
  CHECK(isnan(y[4]));
  float l[3] = {-2.0f, 0.0f, 3.0f};
  k_leaky_relu(l, l, 3, 0.1f);  // in place
  CHECK_NEAR(l[0], -0.2, 1e-6, 0);
  CHECK(l[1] == 0.0f);
  CHECK(l[2] == 3.0f);
}

static void test_sigmoid(void) {
  float x[5] = {0.0f, 1.0f, -1.0f, 10.0f, -10.0f}, y[5];
  k_sigmoid(y, x, 5);
  CHECK_NEAR(y[0], 0.5, 1e-7, 0);
  CHECK_NEAR(y[1], 0.7310585786300049, 1e-6, 0);
  CHECK_NEAR(y[2], 0.2689414213699951, 1e-6, 0);
  CHECK_NEAR(y[3], 0.9999546021312976, 1e-6, 0);
  CHECK_NEAR(y[4], 4.5397868702434395e-05, 1e-5, 0);
  // Large |x|: no NaN, saturates, tiny values keep their relative accuracy.
  float big[6] = {100.0f, -100.0f, 1000.0f, -1000.0f, INFINITY, -INFINITY}, yb[6];
  k_sigmoid(yb, big, 6);
  CHECK(yb[0] == 1.0f);
  CHECK_NEAR(yb[1], 3.720075976020836e-44, 0.05, 0);  // subnormal float, coarse
  CHECK(yb[2] == 1.0f);
  CHECK(yb[3] == 0.0f);
  CHECK(yb[4] == 1.0f);
  CHECK(yb[5] == 0.0f);
  CHECK_NEAR(yb[1], 0.0, 0, 1e-40);
  float m30 = -30.0f, y30;
  k_sigmoid(&y30, &m30, 1);
  CHECK_NEAR(y30, exp(-30.0) / (1.0 + exp(-30.0)), 1e-5, 0);
  // sigmoid(x) + sigmoid(-x) == 1 and a double formula over a range.
  enum { N = 401 };
  float xs[N], ys[N], xn[N], yn[N];
  for (int i = 0; i < N; i++) {
    xs[i] = -20.0f + 0.1f * (float)i;
    xn[i] = -xs[i];
  }
  k_sigmoid(ys, xs, N);
  k_sigmoid(yn, xn, N);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    double ref = 1.0 / (1.0 + exp(-(double)xs[i]));
    if (fabs(ys[i] - ref) > 1e-6 * ref + 1e-12) bad++;
    if (fabs(ys[i] + yn[i] - 1.0) > 1e-6) bad++;
  }
  CHECK_EQ_INT(bad, 0);
}

static void test_tanh_erf(void) {
  enum { N = 161 };
  float x[N], t[N], e[N];
  for (int i = 0; i < N; i++) x[i] = -8.0f + 0.1f * (float)i;
  k_tanh(t, x, N);
  k_erf(e, x, N);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    double v = x[i], e2 = exp(2.0 * v);
    double ref = (e2 - 1.0) / (e2 + 1.0);
    if (fabs(t[i] - ref) > 2e-7 + 1e-6 * fabs(ref)) bad++;
  }
  CHECK_EQ_INT(bad, 0);
  float xe[4] = {0.0f, 0.5f, 1.0f, -2.0f}, ye[4];
  k_erf(ye, xe, 4);
  CHECK(ye[0] == 0.0f);
  CHECK_NEAR(ye[1], 0.5204998778130465, 1e-6, 0);
  CHECK_NEAR(ye[2], 0.8427007929497149, 1e-6, 0);
  CHECK_NEAR(ye[3], -0.9953222650189527, 1e-6, 0);
  CHECK_NEAR(e[N - 1], 1.0, 0, 1e-7);  // erf(8)
}

static void test_gelu(void) {
  float x[3] = {1.0f, -1.0f, 0.0f}, ye[3], ya[3];
  k_gelu(ye, x, 3, 0);
  k_gelu(ya, x, 3, 1);
  CHECK_NEAR(ye[0], 0.8413447460685429, 1e-6, 0);
  CHECK_NEAR(ye[1], -0.15865525393145707, 1e-5, 0);
  CHECK(ye[2] == 0.0f);
  CHECK_NEAR(ya[0], 0.8411919906082768, 1e-6, 0);
  CHECK_NEAR(ya[1], -0.15880800939172324, 1e-5, 0);
  CHECK(ya[2] == 0.0f);
  enum { N = 121 };
  float xs[N], g0[N], g1[N];
  for (int i = 0; i < N; i++) xs[i] = -6.0f + 0.1f * (float)i;
  k_gelu(g0, xs, N, 0);
  k_gelu(g1, xs, N, 1);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    double v = xs[i];
    double r0 = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    double r1 = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    if (fabs(g0[i] - r0) > 1e-6 + 1e-5 * fabs(r0)) bad++;
    if (fabs(g1[i] - r1) > 1e-6 + 1e-5 * fabs(r1)) bad++;
  }
  CHECK_EQ_INT(bad, 0);
  // The two forms agree to about 1e-3 (a property of the approximation).
  double worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs(g0[i] - g1[i]));
  CHECK(worst < 1e-3 && worst > 0);
  // In place.
  float z[2] = {2.0f, -3.0f};
  k_gelu(z, z, 2, 0);
  CHECK_NEAR(z[0], 1.9544997361036416, 1e-6, 0);
  CHECK_NEAR(z[1], -0.004049694849615, 1e-4, 0);
}

static void test_empty(void) {
  float guard[2] = {7.0f, 8.0f};
  const float src[2] = {-1.0f, -1.0f};
  k_relu(guard, src, 0);
  k_leaky_relu(guard, src, 0, 0.5f);
  k_sigmoid(guard, src, 0);
  k_tanh(guard, src, 0);
  k_erf(guard, src, 0);
  k_gelu(guard, src, 0, 0);
  k_gelu(guard, src, 0, 1);
  CHECK(guard[0] == 7.0f && guard[1] == 8.0f);
}

static void test_int_types(void) {
  // signed: Neg and Abs of INT_MIN wrap to INT_MIN (two's complement)
  int8_t x8[5] = {INT8_MIN, -5, 0, 3, INT8_MAX}, y8[5], lo8 = -4, hi8 = 100;
  CHECK_EQ_INT(k_unary(y8, x8, K_I8, 5, K_NEG, NULL, NULL), 0);
  const int8_t neg8[5] = {INT8_MIN, 5, 0, -3, -INT8_MAX};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(y8[i], neg8[i]);
  CHECK_EQ_INT(k_unary(y8, x8, K_I8, 5, K_ABS, NULL, NULL), 0);
  const int8_t abs8[5] = {INT8_MIN, 5, 0, 3, INT8_MAX};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(y8[i], abs8[i]);
  CHECK_EQ_INT(k_unary(y8, x8, K_I8, 5, K_SIGN, NULL, NULL), 0);
  const int8_t sign8[5] = {-1, -1, 0, 1, 1};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(y8[i], sign8[i]);
  CHECK_EQ_INT(k_unary(y8, x8, K_I8, 5, K_CLIP, &lo8, &hi8), 0);
  const int8_t clip8[5] = {-4, -4, 0, 3, 100};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(y8[i], clip8[i]);
  CHECK_EQ_INT(k_unary(y8, x8, K_I8, 5, K_CLIP, NULL, &hi8), 0);  // one bound only
  CHECK_EQ_INT(y8[0], INT8_MIN);
  CHECK_EQ_INT(y8[4], 100);
  int32_t x32[3] = {INT32_MIN, -7, 9}, y32[3];
  CHECK_EQ_INT(k_unary(y32, x32, K_I32, 3, K_ABS, NULL, NULL), 0);
  CHECK(y32[0] == INT32_MIN && y32[1] == 7 && y32[2] == 9);
  int64_t x64[2] = {INT64_MIN, -1}, y64[2];
  CHECK_EQ_INT(k_unary(y64, x64, K_I64, 2, K_NEG, NULL, NULL), 0);
  CHECK(y64[0] == INT64_MIN && y64[1] == 1);
  // unsigned: values above the signed range stay positive; Abs is the identity
  uint64_t u64[3] = {UINT64_MAX, 0, 1}, v64[3], ulo = 1, uhi = UINT64_MAX - 1;
  CHECK_EQ_INT(k_unary(v64, u64, K_U64, 3, K_ABS, NULL, NULL), 0);
  CHECK(v64[0] == UINT64_MAX && v64[1] == 0 && v64[2] == 1);
  CHECK_EQ_INT(k_unary(v64, u64, K_U64, 3, K_SIGN, NULL, NULL), 0);
  CHECK(v64[0] == 1 && v64[1] == 0 && v64[2] == 1);
  CHECK_EQ_INT(k_unary(v64, u64, K_U64, 3, K_CLIP, &ulo, &uhi), 0);
  CHECK(v64[0] == UINT64_MAX - 1 && v64[1] == 1 && v64[2] == 1);
  uint16_t u16[2] = {65535, 7}, v16[2];
  CHECK_EQ_INT(k_unary(v16, u16, K_U16, 2, K_SIGN, NULL, NULL), 0);
  CHECK(v16[0] == 1 && v16[1] == 1);
  // in place, as the engine runs it
  CHECK_EQ_INT(k_unary(x32, x32, K_I32, 3, K_NEG, NULL, NULL), 0);
  CHECK(x32[0] == INT32_MIN && x32[1] == 7 && x32[2] == -9);
  // refused, output untouched: Neg on unsigned (ONNX defines it for signed
  // types), the float-only ops on integers, floats and bool
  v16[0] = 42;
  CHECK_EQ_INT(k_unary(v16, u16, K_U16, 2, K_NEG, NULL, NULL), -1);
  CHECK_EQ_INT(k_unary(v16, u16, K_U16, 2, K_SQRT, NULL, NULL), -1);
  CHECK_EQ_INT(k_unary(v16, u16, K_BOOL, 1, K_ABS, NULL, NULL), -1);
  CHECK_EQ_INT(k_unary(v16, u16, K_F32, 1, K_ABS, NULL, NULL), -1);
  CHECK_EQ_INT(v16[0], 42);
  CHECK(k_unary_takes(K_I16, K_NEG) && !k_unary_takes(K_U8, K_NEG) && k_unary_takes(K_U8, K_CLIP));
  // FP32 Sign: 0 and NaN are their own sign
  float xf[4] = {-2.5f, 0.0f, 3.0f, NAN}, yf[4];
  k_unary_f32(yf, xf, 4, K_SIGN, 0, 0);
  CHECK(yf[0] == -1.0f && yf[1] == 0.0f && yf[2] == 1.0f && yf[3] != yf[3]);
}

int main(void) {
  test_int_types();
  test_relu();
  test_sigmoid();
  test_tanh_erf();
  test_gelu();
  test_empty();
  CHECK_DONE();
}
