// Tests kernels/elem/k_quant.c: QuantizeLinear's rounding (halves to even) and
// saturation, per tensor, per axis and per block, NaN (stored as 0), the zero
// point, DequantizeLinear back, DynamicQuantizeLinear's scale and zero point,
// the integer MatMul of MatMulInteger and QLinearMatMul, and what is refused;
// k_fake_quant equal to k_quantize then k_dequantize, bit for bit, on every
// quantized type, per tensor, per axis and per block, in place too.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/k_ref.h"

static void test_quantize(void) {
  float x[6] = {0.5f, 1.5f, 2.5f, -1000.0f, 1000.0f, NAN}, s = 1.0f;
  uint8_t zp = 10, y[6];
  k_quant_layout l = {6, 1, 1, 0, 0};
  CHECK_EQ_INT(k_quantize(y, K_U8, x, &s, &zp, &l), 0);
  CHECK_EQ_INT(y[0], 10);   // 0.5 rounds to 0
  CHECK_EQ_INT(y[1], 12);   // 1.5 to 2
  CHECK_EQ_INT(y[2], 12);   // 2.5 to 2
  CHECK_EQ_INT(y[3], 0);    // saturated
  CHECK_EQ_INT(y[4], 255);
  CHECK_EQ_INT(y[5], 10);   // NaN quantizes as 0: the zero point
  int8_t yi[6];
  CHECK_EQ_INT(k_quantize(yi, K_I8, x, &s, NULL, &l), 0);
  CHECK(yi[3] == -128 && yi[4] == 127 && yi[5] == 0);
  // per axis: [2, 3] along axis 1, scales 1, 2, 4
  float xa[6] = {4, 4, 4, 8, 8, 8}, sa[3] = {1, 2, 4};
  int16_t ya[6];
  k_quant_layout la = {2, 3, 1, 1, 0};
  CHECK_EQ_INT(k_quantize(ya, K_I16, xa, sa, NULL, &la), 0);
  CHECK(ya[0] == 4 && ya[1] == 2 && ya[2] == 1 && ya[3] == 8 && ya[4] == 4 && ya[5] == 2);
  // per block: [1, 4] along axis 1 in blocks of 2: scales [1, 2]
  float xb[4] = {3, 3, 3, 3}, sb[2] = {1, 2};
  uint16_t yb[4];
  k_quant_layout lb = {1, 4, 1, 0, 2};
  CHECK_EQ_INT(k_quantize(yb, K_U16, xb, sb, NULL, &lb), 0);
  CHECK(yb[0] == 3 && yb[1] == 3 && yb[2] == 2 && yb[3] == 2);  // 1.5 rounds to 2
  // refused: a float target
  CHECK_EQ_INT(k_quantize(yb, K_F32, xb, sb, NULL, &lb), -1);
}

static void test_dequantize(void) {
  int8_t x[3] = {-128, 0, 127}, zp = -1;
  float s = 0.5f, y[3];
  k_quant_layout l = {3, 1, 1, 0, 0};
  CHECK_EQ_INT(k_dequantize(y, x, K_I8, &s, &zp, &l), 0);
  CHECK(y[0] == -63.5f && y[1] == 0.5f && y[2] == 64.0f);
  CHECK_EQ_INT(k_dequantize(y, x, K_BOOL, &s, NULL, &l), -1);
}

static void test_dynamic(void) {
  float x[4] = {-1.0f, 0.0f, 1.0f, 2.0f}, s;
  uint8_t y[4], zp;
  k_dynamic_quantize(y, &s, &zp, x, 4);
  CHECK_NEAR(s, 3.0 / 255.0, 1e-6, 0);
  CHECK_EQ_INT(zp, 85);  // round(1 / (3/255)) = 85
  CHECK(y[0] == 0 && y[1] == 85 && y[3] == 255);
  float z[2] = {0.0f, NAN};
  k_dynamic_quantize(y, &s, &zp, z, 2);  // a NaN: no range, everything 0
  CHECK(s == 0.0f && zp == 0 && y[0] == 0 && y[1] == 0);
}

static void test_matmul(void) {
  // [2, 2] x [2, 2], zero points 1 and 2
  uint8_t a[4] = {2, 3, 4, 5}, b[4] = {3, 4, 5, 6};
  int32_t y[4];
  CHECK_EQ_INT(k_matmul_int(y, K_I32, a, K_U8, b, K_U8, 1, 2, NULL, 1, 0, 0, 2, 2, 2, 0, NULL, 0), 0);
  // (a-1) = [1 2; 3 4], (b-2) = [1 2; 3 4]: product [7 10; 15 22]
  CHECK(y[0] == 7 && y[1] == 10 && y[2] == 15 && y[3] == 22);
  int8_t q[4];
  // QLinearMatMul: round(sum * 0.5) + 3, saturated to INT8
  CHECK_EQ_INT(k_matmul_int(q, K_I8, a, K_U8, b, K_U8, 1, 2, NULL, 1, 0, 0, 2, 2, 2, 0.5, NULL, 3), 0);
  CHECK(q[0] == 7 && q[1] == 8 && q[2] == 11 && q[3] == 14);  // 3.5 -> 4, 7.5 -> 8
  CHECK_EQ_INT(k_matmul_int(q, K_F32, a, K_U8, b, K_U8, 0, 0, NULL, 1, 0, 0, 2, 2, 2, 0.5, NULL, 0), -1);
}

// k_fake_quant against the two ops it fuses, through a qt tensor.
static void fake_case(k_elem qt, const k_quant_layout *l, const float *s, const void *zp, const float *x, size_t n) {
  float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
  void *q = malloc(n * 4);
  CHECK(want && got && q);
  CHECK_EQ_INT(k_quantize(q, qt, x, s, zp, l), 0);
  CHECK_EQ_INT(k_dequantize(want, q, qt, s, zp, l), 0);
  CHECK_EQ_INT(k_fake_quant(got, x, qt, s, zp, l), 0);
  CHECK_EQ_INT(memcmp(got, want, n * sizeof *got), 0);
  memcpy(got, x, n * sizeof *got);
  CHECK_EQ_INT(k_fake_quant(got, got, qt, s, zp, l), 0);  // in place
  CHECK_EQ_INT(memcmp(got, want, n * sizeof *got), 0);
  free(want), free(got), free(q);
}

static void test_fake_quant(void) {
  enum { N = 4 * 6 * 5 };
  float x[N], s[6] = {0.05f, 0.013f, 1.0f, 0.5f, 3e-3f, 0.25f};
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N; i++) {
    r ^= r >> 12, r ^= r << 25, r ^= r >> 27;
    x[i] = (float)((double)(r * 2685821657736338717ull >> 11) / 9007199254740992.0 * 20.0 - 10.0);
  }
  static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 0.025f, -0.025f, 0.075f, 1e30f, -1e30f};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) x[i * 11 % N] = special[i];
  static const k_elem types[] = {K_I8, K_U8, K_I16, K_U16, K_I32, K_U32};
  int64_t zp64[6] = {-3, 7, 0, 120, -128, 1};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    k_elem qt = types[t];
    int unsigned_t = qt == K_U8 || qt == K_U16 || qt == K_U32;
    unsigned char zp[6 * 4];
    for (int i = 0; i < 6; i++) {
      int64_t z = unsigned_t ? (zp64[i] < 0 ? -zp64[i] : zp64[i]) : zp64[i];
      switch (qt) {
        case K_I8: ((int8_t *)zp)[i] = (int8_t)z; break;
        case K_U8: ((uint8_t *)zp)[i] = (uint8_t)z; break;
        case K_I16: ((int16_t *)zp)[i] = (int16_t)z; break;
        case K_U16: ((uint16_t *)zp)[i] = (uint16_t)z; break;
        case K_I32: ((int32_t *)zp)[i] = (int32_t)z; break;
        default: ((uint32_t *)zp)[i] = (uint32_t)z; break;
      }
    }
    k_quant_layout pt = {N, 1, 1, 0, 0}, pa = {4, 6, 5, 1, 0}, pb = {4, 6, 5, 0, 4};
    fake_case(qt, &pt, s, zp, x, N);
    fake_case(qt, &pt, s + 1, NULL, x, N);
    fake_case(qt, &pa, s, zp, x, N);
    float sb[4 * 2 * 5];  // blocks of 4 along an axis of 6: 2 blocks
    for (int i = 0; i < 40; i++) sb[i] = s[i % 6];
    fake_case(qt, &pb, sb, NULL, x, N);
  }
  // a value on a rounding tie (0.025 / 0.05 = 0.5 in FP32) goes to the even step: 0
  float h = 0.025f, sc = 0.05f, y;
  k_quant_layout one = {1, 1, 1, 0, 0};
  CHECK_EQ_INT(k_fake_quant(&y, &h, K_I8, &sc, NULL, &one), 0);
  CHECK(y == 0.0f);
  h = 100.0f;  // saturated: 127 steps
  CHECK_EQ_INT(k_fake_quant(&y, &h, K_I8, &sc, NULL, &one), 0);
  CHECK(y == 127 * 0.05f);
  CHECK_EQ_INT(k_fake_quant(&y, &h, K_F32, &sc, NULL, &one), -1);
}

int main(void) {
  test_quantize();
  test_fake_quant();
  test_dequantize();
  test_dynamic();
  test_matmul();
  CHECK_DONE();
}
