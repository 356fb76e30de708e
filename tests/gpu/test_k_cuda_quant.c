// Tests kernels/elem/k_quant.cu against the C references of kernels/elem/k_quant.c:
// k_quantize_cuda, k_dequantize_cuda and k_fake_quant_cuda bit for bit against
// k_quantize, k_dequantize and k_fake_quant on INT8, UINT8, INT16 and UINT16,
// per tensor (with and without a zero point) and per axis (axis 0, a middle
// axis, the last), FP32 storage and FP16 storage (the reference on the
// widened inputs, its result rounded to half once), sizes 1, odd and ~1M,
// fake-quant in place; special values (NaN, infinities, rounding ties,
// saturation); bad arguments refused on the host.
#include "test_k_cuda_util.h"

static const k_elem types[] = {K_I8, K_U8, K_I16, K_U16};
static size_t qsize(k_elem t) { return t == K_I8 || t == K_U8 ? 1 : 2; }

static void fill(tk_rng *r, float *x, size_t n, float amp) {
  static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 0.025f, -0.075f, 1e30f, -1e30f, 0.125f};
  for (size_t i = 0; i < n; i++) x[i] = tk_uniform(r, -amp, amp);
  for (size_t i = 0; i < n && i < sizeof special / sizeof special[0]; i++) x[i * 7 % n] = special[i];
}

// Zero points of type t, as the reference reads them (zh) and as the kernels do (zf).
static void zero_points(tk_rng *r, k_elem t, size_t n, void *zh, float *zf) {
  for (size_t i = 0; i < n; i++) {
    float u = tk_uniform(r, 0.0f, 1.0f);
    switch (t) {
      case K_I8: ((int8_t *)zh)[i] = (int8_t)(u * 40 - 20), zf[i] = ((int8_t *)zh)[i]; break;
      case K_U8: ((uint8_t *)zh)[i] = (uint8_t)(u * 255), zf[i] = ((uint8_t *)zh)[i]; break;
      case K_I16: ((int16_t *)zh)[i] = (int16_t)(u * 2000 - 1000), zf[i] = ((int16_t *)zh)[i]; break;
      default: ((uint16_t *)zh)[i] = (uint16_t)(u * 65535), zf[i] = ((uint16_t *)zh)[i]; break;
    }
  }
}

// One shape [outer, len, inner]; per_axis along len, else one scale.
static void run_case(tk_rng *r, k_elem qt, size_t outer, size_t len, size_t inner, int per_axis, int with_zp,
                     int half) {
  size_t n = outer * len * inner, ns = per_axis ? len : 1, qs = qsize(qt);
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  float *s = tk_xmalloc(ns * 4), *zf = tk_xmalloc(ns * 4);
  void *zh = tk_xmalloc(ns * 2), *qw = tk_xmalloc(n * 2), *qg = tk_xmalloc(n * 2);
  uint16_t *h = tk_xmalloc(n * 2), *hg = tk_xmalloc(n * 2);
  float amp = qs == 1 ? 8.0f : 400.0f;
  fill(r, x, n, amp);
  for (size_t i = 0; i < ns; i++) s[i] = tk_uniform(r, 0.01f, 0.1f);
  s[0] = 0.05f;  // 0.025 and -0.075 sit on ties under it
  zero_points(r, qt, ns, zh, zf);
  if (half) {
    k_f32_to_f16(h, x, n);
    k_f16_to_f32(x, h, n);  // the inputs as half holds them
  }
  k_quant_layout l = {outer, len, inner, per_axis, 0};
  if (!per_axis) l = (k_quant_layout){n, 1, 1, 0, 0};
  const void *zp = with_zp ? zh : NULL;
  float *ds = tk_to_dev(s, ns * 4), *dz = tk_to_dev(zf, ns * 4);
  k_qaxis a = {.len = len, .inner = inner, .s0 = s[0], .z0 = with_zp ? zf[0] : 0.0f};
  if (per_axis) a.scale = ds, a.zp = with_zp ? dz : NULL;
  k_elem ft = half ? K_F16 : K_F32;
  size_t fsz = half ? 2 : 4;
  void *dx = tk_to_dev(half ? (void *)h : (void *)x, n * fsz), *dq = tk_dev_alloc(n * qs), *dy = tk_dev_alloc(n * fsz);
  char what[128];
  snprintf(what, sizeof what, "type %d [%zu,%zu,%zu] %s%s %s", (int)qt, outer, len, inner,
           per_axis ? "per axis" : "per tensor", with_zp ? " zp" : "", half ? "f16" : "f32");
  // quantize
  CHECK_EQ_INT(k_quantize(qw, qt, x, s, zp, &l), 0);
  TK_OK(k_quantize_cuda(dq, qt, dx, ft, n, &a, NULL, TK_E));
  TK_CUDA(cudaDeviceSynchronize());
  tk_from_dev(qg, dq, n * qs);
  char w2[160];
  snprintf(w2, sizeof w2, "quantize %s", what);
  tk_compare_bits(w2, qg, qw, n * qs);
  // dequantize (of the reference's integers)
  TK_CUDA(cudaMemcpy(dq, qw, n * qs, cudaMemcpyHostToDevice));
  CHECK_EQ_INT(k_dequantize(want, qw, qt, s, zp, &l), 0);
  TK_OK(k_dequantize_cuda(dy, ft, dq, qt, n, &a, NULL, TK_E));
  TK_CUDA(cudaDeviceSynchronize());
  snprintf(w2, sizeof w2, "dequantize %s", what);
  if (half) {
    uint16_t *hw = tk_xmalloc(n * 2);
    k_f32_to_f16(hw, want, n);
    tk_from_dev(hg, dy, n * 2);
    tk_compare_bits(w2, hg, hw, n * 2);
    free(hw);
  } else {
    tk_from_dev(got, dy, n * 4);
    tk_compare_bits(w2, got, want, n * 4);
  }
  // fake quant, out of place then in place
  CHECK_EQ_INT(k_fake_quant(want, x, qt, s, zp, &l), 0);
  for (int in_place = 0; in_place < 2; in_place++) {
    void *y = in_place ? dx : dy;
    TK_OK(k_fake_quant_cuda(y, dx, ft, qt, n, &a, NULL, TK_E));
    TK_CUDA(cudaDeviceSynchronize());
    snprintf(w2, sizeof w2, "fake quant %s%s", what, in_place ? " in place" : "");
    if (half) {
      uint16_t *hw = tk_xmalloc(n * 2);
      k_f32_to_f16(hw, want, n);
      tk_from_dev(hg, y, n * 2);
      tk_compare_bits(w2, hg, hw, n * 2);
      free(hw);
    } else {
      tk_from_dev(got, y, n * 4);
      tk_compare_bits(w2, got, want, n * 4);
    }
  }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dq));
  TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(ds));
  TK_CUDA(cudaFree(dz));
  free(x), free(want), free(got), free(s), free(zf), free(zh), free(qw), free(qg), free(h), free(hg);
}

int main(void) {
  err e = {0};
  k_qaxis a = {.s0 = 1.0f};
  // host-side argument checks
  CHECK_EQ_INT(k_quantize_cuda(NULL, K_I8, NULL, K_F32, 0, &a, NULL, &e), 0);
  CHECK_EQ_INT(k_quantize_cuda((void *)8, K_I32, (void *)8, K_F32, 4, &a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_quantize_cuda((void *)8, K_I8, (void *)8, K_F64, 4, &a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_dequantize_cuda(NULL, K_F32, (void *)8, K_U8, 4, &a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_fake_quant_cuda((void *)8, (void *)8, K_F32, K_U8, 4, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  k_qaxis bad = {.scale = (const float *)8, .len = 0, .inner = 1};
  CHECK_EQ_INT(k_fake_quant_cuda((void *)8, (void *)8, K_F32, K_U8, 4, &bad, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK(k_quant_cuda_takes(K_I8) && k_quant_cuda_takes(K_U16) && !k_quant_cuda_takes(K_I32));
  tk_require_device();
  tk_rng r = {0x9e3779b97f4a7c15ull};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (int half = 0; half < 2; half++) {
      run_case(&r, types[t], 1, 1, 1, 0, 1, half);
      run_case(&r, types[t], 1, 1, 1023, 0, 1, half);
      run_case(&r, types[t], 1, 1, 1023, 0, 0, half);
      run_case(&r, types[t], 1, 1, 1 << 20, 0, 1, half);
      run_case(&r, types[t], 1, 16, 9 * 9, 1, 1, half);   // axis 0 of [16, 9, 9] weights
      run_case(&r, types[t], 4, 24, 7 * 7, 1, 1, half);   // channels of an NCHW activation
      run_case(&r, types[t], 8 * 7 * 7, 24, 1, 1, 0, half);  // channels last (NHWC, or a MatMul's columns)
      run_case(&r, types[t], 64, 1024, 16, 1, 1, half);   // ~1M per axis
    }
  CHECK_DONE();
}
