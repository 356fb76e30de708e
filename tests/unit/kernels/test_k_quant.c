// Tests kernels/elem/k_quant.c: QuantizeLinear's rounding (halves to even) and
// saturation, per tensor, per axis and per block, NaN (stored as 0), the zero
// point, DequantizeLinear back, DynamicQuantizeLinear's scale and zero point,
// the integer MatMul of MatMulInteger and QLinearMatMul, and what is refused.
#include <math.h>
#include <stdint.h>

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

int main(void) {
  test_quantize();
  test_dequantize();
  test_dynamic();
  test_matmul();
  CHECK_DONE();
}
