// Tests kernels/elem/k_unop.cu (one launcher, every storage type) against the C
// reference k_unary_f32: FP32 within 1 ulp-ish (expf may differ by 2 ulp
// between CUDA and glibc: rtol 3e-7; the rest are IEEE-exact and must be
// equal, NaN to NaN), FP16 equal to the FP32 reference rounded to half (the kernel
// computes in float and rounds once). Special values (NaN, inf, -0, the
// HardSigmoid/Clip corners), sizes 1, odd and ~1M, in place, bad arguments.
#include "test_k_cuda_util.h"

typedef struct { k_unop op; const char *name; float a, b; int exact; } ucase;
static const ucase cases[] = {
    {K_SQRT, "sqrt", 0, 0, 1},           {K_EXP, "exp", 0, 0, 0},
    {K_NEG, "neg", 0, 0, 1},             {K_ABS, "abs", 0, 0, 1},
    {K_RECIP, "reciprocal", 0, 0, 1},    {K_HARD_SIGMOID, "hard_sigmoid", 0.2f, 0.5f, 1},
    {K_HARD_SWISH, "hard_swish", 0, 0, 1}, {K_CLIP, "clip_relu6", 0.0f, 6.0f, 1},
    {K_CLIP, "clip_sym", -1.5f, 1.5f, 1},
};

static void fill(tk_rng *r, float *x, size_t n) {
  static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, -3.0f, 6.0f, -2.5f, 2.5f};
  for (size_t i = 0; i < n; i++) x[i] = tk_uniform(r, -8.0f, 8.0f);
  for (size_t i = 0; i < n && i < sizeof special / sizeof special[0]; i++) x[i * 7 % n] = special[i];
}

static void case_f32(tk_rng *r, const ucase *c, size_t n, int in_place) {
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  fill(r, x, n);
  k_unary_f32(want, x, n, c->op, c->a, c->b);
  float *dx = tk_to_dev(x, n * 4), *dy = in_place ? dx : tk_dev_alloc(n * 4);
  err e = {0};
  CHECK_EQ_INT(k_unop_cuda(dy, dx, n, K_F32, c->op, c->a, c->b, NULL, &e), 0);
  TK_CUDA(cudaDeviceSynchronize());
  tk_from_dev(got, dy, n * 4);
  char what[96];
  snprintf(what, sizeof what, "%s f32 n=%zu%s", c->name, n, in_place ? " in place" : "");
  // exact values (NaN matching NaN whatever its payload: CUDA's canonical NaN is not glibc's)
  tk_compare(what, got, want, n, c->exact ? 0 : 3e-7, 0);
  TK_CUDA(cudaFree(dx));
  if (!in_place) TK_CUDA(cudaFree(dy));
  free(x), free(want), free(got);
}

static void case_f16(tk_rng *r, const ucase *c, size_t n) {
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  uint16_t *h = tk_xmalloc(n * 2), *hw = tk_xmalloc(n * 2), *hg = tk_xmalloc(n * 2);
  fill(r, x, n);
  k_f32_to_f16(h, x, n);
  k_f16_to_f32(x, h, n);  // the inputs as half holds them
  k_unary_f32(want, x, n, c->op, c->a, c->b);
  k_f32_to_f16(hw, want, n);
  k_f16_to_f32(want, hw, n);  // the reference, rounded once to half
  uint16_t *dx = tk_to_dev(h, n * 2), *dy = tk_dev_alloc(n * 2);
  err e = {0};
  CHECK_EQ_INT(k_unop_cuda(dy, dx, n, K_F16, c->op, c->a, c->b, NULL, &e), 0);
  TK_CUDA(cudaDeviceSynchronize());
  tk_from_dev(hg, dy, n * 2);
  k_f16_to_f32(got, hg, n);
  char what[96];
  snprintf(what, sizeof what, "%s f16 n=%zu", c->name, n);
  // exp's float result may differ by 2 ulp before rounding: at most one half ulp after it
  tk_compare(what, got, want, n, c->exact ? 0 : 1e-3, 0);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(x), free(want), free(got), free(h), free(hw), free(hg);
}

int main(void) {
  err e = {0};
  // host-side argument checks
  CHECK_EQ_INT(k_unop_cuda(NULL, NULL, 0, K_F32, K_NEG, 0, 0, NULL, &e), 0);
  CHECK_EQ_INT(k_unop_cuda(NULL, (void *)8, 4, K_F32, K_NEG, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_unop_cuda((void *)8, (void *)8, 4, K_I64, K_NEG, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  tk_require_device();
  tk_rng r = {0x9e3779b97f4a7c15ull};
  static const size_t sizes[] = {1, 1023, 1 << 20};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (size_t s = 0; s < 3; s++) {
      case_f32(&r, &cases[i], sizes[s], 0);
      case_f16(&r, &cases[i], sizes[s]);
    }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) case_f32(&r, &cases[i], 4097, 1);
  CHECK_DONE();
}
