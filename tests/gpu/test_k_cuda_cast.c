// Tests kernels/elem/k_cast.cu against k_f16_to_f32 / k_f32_to_f16 (kernels/elem/k_cast.c),
// bit for bit: every one of the 65536 half patterns to float (NaN payloads
// included), every half value and every halfway point between neighbouring
// halves (and one float ulp either side) to half, float specials (signed
// zeros, inf, NaNs with and without payload bits that survive, the overflow
// threshold 65520, the subnormal and underflow boundaries), ~1M random float
// bit patterns and ~1M random values in the half range; odd sizes and 1.
#include "test_k_cuda_util.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void check_f32_to_f16(const char *what, const float *x, size_t n) {
  uint16_t *want = tk_xmalloc(n * 2), *got = tk_xmalloc(n * 2);
  k_f32_to_f16(want, x, n);
  float *dx = tk_to_dev(x, n * 4);
  uint16_t *dy = tk_dev_alloc(n * 2);
  TK_OK(k_f32_to_f16_cuda(dy, dx, n, NULL, TK_E));
  tk_from_dev(got, dy, n * 2);
  if (tk_compare_bits(what, got, want, n * 2)) {
    int shown = 0;
    for (size_t i = 0; i < n && shown < 5; i++)
      if (got[i] != want[i]) {
        fprintf(stderr, "  %s: x=%a (0x%08x) got 0x%04x want 0x%04x\n", what, (double)x[i],
                tk_bits(x[i]), got[i], want[i]);
        shown++;
      }
  }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(want);
  free(got);
}

static void check_f16_to_f32(const char *what, const uint16_t *x, size_t n) {
  float *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  k_f16_to_f32(want, x, n);
  uint16_t *dx = tk_to_dev(x, n * 2);
  float *dy = tk_dev_alloc(n * 4);
  TK_OK(k_f16_to_f32_cuda(dy, dx, n, NULL, TK_E));
  tk_from_dev(got, dy, n * 4);
  if (tk_compare_bits(what, got, want, n * 4)) {
    int shown = 0;
    for (size_t i = 0; i < n && shown < 5; i++)
      if (tk_bits(got[i]) != tk_bits(want[i])) {
        fprintf(stderr, "  %s: h=0x%04x got 0x%08x want 0x%08x\n", what, x[i], tk_bits(got[i]),
                tk_bits(want[i]));
        shown++;
      }
  }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(want);
  free(got);
}

static void test_all_halves(void) {
  enum { N = 65536 };
  uint16_t *h = tk_xmalloc(N * 2);
  for (size_t i = 0; i < N; i++) h[i] = (uint16_t)i;
  check_f16_to_f32("f16->f32 all patterns", h, N);
  check_f16_to_f32("f16->f32 n=1", h + 0x3c00, 1);
  check_f16_to_f32("f16->f32 n=3 (odd offset)", h + 0x7bff, 3);

  // Every half as float, each halfway point to the next half, and one float
  // ulp either side of it: round-to-nearest-even decides at exactly these.
  float *f = tk_xmalloc((size_t)N * 4 * 4);
  size_t n = 0;
  float *as_float = tk_xmalloc(N * 4);
  k_f16_to_f32(as_float, h, N);
  for (uint32_t i = 0; i < N; i++) {
    f[n++] = as_float[i];
    uint32_t mag = i & 0x7fffu;
    if (mag >= 0x7bffu) continue;  // the last finite half, inf and NaN have no finite successor
    double lo = as_float[i], hi = as_float[(i & 0x8000u) | (mag + 1)];
    float mid = (float)((lo + hi) / 2);  // exact: halves are far coarser than floats
    f[n++] = mid;
    f[n++] = nextafterf(mid, 0.0f);
    f[n++] = nextafterf(mid, mid > 0 ? INFINITY : -INFINITY);
  }
  check_f32_to_f16("f32->f16 halves and halfway points", f, n);
  free(f);
  free(as_float);
  free(h);
}

static void test_specials(void) {
  float x[] = {
      0.0f,
      -0.0f,
      INFINITY,
      -INFINITY,
      from_bits(0x7fc00000u),
      from_bits(0xffc00000u),  // quiet NaNs
      from_bits(0x7f800001u),  // NaN whose payload is lost: quiet bit set
      from_bits(0x7fa02000u),
      from_bits(0xff8fe000u),  // NaNs whose top payload bits survive
      65504.0f,
      65519.0f,
      nextafterf(65520.0f, 0.0f),
      65520.0f,
      65536.0f,
      1e10f,
      -65520.0f,
      3.4e38f,
      6.103515625e-05f,  // 2^-14, smallest normal half
      nextafterf(6.103515625e-05f, 0.0f),
      5.9604644775390625e-08f,                     // 2^-24, smallest subnormal half
      2.98023223876953125e-08f,                    // 2^-25: halfway to 0, ties to even -> 0
      nextafterf(2.98023223876953125e-08f, 1.0f),  // just above: rounds up to 2^-24
      8.940696716308594e-08f,                      // 1.5 * 2^-24: tie, rounds to even 2^-23
      1e-30f,
      -1e-30f,
      1e-45f,
      from_bits(0x00800000u),
      1.0f,
      -1.0f,
      0.1f,
      1.0009765625f,
      1.00048828125f,  // 1 + 2^-11: tie -> 1.0
      1.00146484375f,  // 1 + 3*2^-11: tie -> 1 + 2^-9
  };
  check_f32_to_f16("f32->f16 specials", x, sizeof x / sizeof x[0]);
  check_f32_to_f16("f32->f16 n=1", x + 9, 1);
}

static void test_random(void) {
  enum { N = (1 << 20) + 5 };
  tk_rng r = {0xfeedfaceu};
  float *x = tk_xmalloc((size_t)N * 4);
  for (size_t i = 0; i < N; i++) x[i] = from_bits((uint32_t)tk_next(&r));
  check_f32_to_f16("f32->f16 random bit patterns", x, N);
  for (size_t i = 0; i < N; i++) {
    // Log-uniform magnitudes over the half range and a little beyond.
    float m = exp2f(tk_uniform(&r, -26.0f, 17.0f));
    x[i] = (tk_next(&r) & 1) ? -m : m;
  }
  check_f32_to_f16("f32->f16 random half-range values", x, N);
  uint16_t *h = tk_xmalloc((size_t)N * 2);
  for (size_t i = 0; i < N; i++) h[i] = (uint16_t)tk_next(&r);
  check_f16_to_f32("f16->f32 random ~1M", h, N);
  free(h);
  free(x);
}

static void test_errors(void) {
  err e = {0};
  CHECK_EQ_INT(k_f32_to_f16_cuda(NULL, NULL, 0, NULL, &e), 0);
  CHECK_EQ_INT(k_f32_to_f16_cuda(NULL, (float *)16, 3, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_f32_to_f16_cuda");
  CHECK_EQ_INT(k_f16_to_f32_cuda((float *)16, NULL, 3, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_f16_to_f32_cuda");
}

int main(void) {
  test_errors();
  tk_require_device();
  test_specials();
  test_all_halves();
  test_random();
  CHECK_DONE();
}
