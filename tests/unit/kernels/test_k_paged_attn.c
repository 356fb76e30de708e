// tests/unit/kernels/test_k_paged_attn.c: the decoder kernels of
// kernels/attn/ (paged attention, RoPE) and kernels/norm (RMSNorm), elem
// (SwiGLU's gate). Paged attention is checked against the dense reference
// k_attn_ref with a causal (and windowed) mask, the KV written through a
// shuffled block table in two chunks, with grouped-query heads.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/k_ref.h"

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

// ctx positions of one sequence; queries at positions pos0..ctx-1.
static void check_paged(int64_t ctx, int64_t pos0, int64_t window) {
  enum { NH = 4, NKV = 2, D = 8, BT = 3, POOL = 8 };
  int32_t table[POOL] = {5, 0, 3, 7, 1, 6, 2, 4};  // physical blocks in a shuffled order
  unsigned s = 42u + (unsigned)ctx;
  float q[16 * NH * D], k[16 * NKV * D], v[16 * NKV * D];
  for (int64_t i = 0; i < ctx * NH * D; i++) q[i] = frand(&s);
  for (int64_t i = 0; i < ctx * NKV * D; i++) k[i] = frand(&s), v[i] = frand(&s);
  static float kc[POOL * BT * NKV * D], vc[POOL * BT * NKV * D];
  memset(kc, 0xFF, sizeof kc);  // NaN where nothing is written: a stray read shows
  memset(vc, 0xFF, sizeof vc);
  // two chunks: positions 0..pos0-1, then pos0..ctx-1 (a prefill, then the chunk that attends)
  k_paged_kv_write(kc, table, BT, NKV * D, 0, pos0, k, NKV * D);
  k_paged_kv_write(vc, table, BT, NKV * D, 0, pos0, v, NKV * D);
  k_paged_kv_write(kc, table, BT, NKV * D, pos0, ctx - pos0, k + pos0 * NKV * D, NKV * D);
  k_paged_kv_write(vc, table, BT, NKV * D, pos0, ctx - pos0, v + pos0 * NKV * D, NKV * D);
  float o[16 * NH * D], scratch[16];
  float scale = 1.0f / sqrtf((float)D);
  k_paged_attn_args a = {.n_q = ctx - pos0,
                         .pos0 = pos0,
                         .n_heads = NH,
                         .n_kv_heads = NKV,
                         .head_dim = D,
                         .q_stride = NH * D,
                         .o_stride = NH * D,
                         .block_tokens = BT,
                         .window = window,
                         .scale = scale};
  k_paged_attn_ref(o, q + pos0 * NH * D, kc, vc, table, &a, scratch);
  // dense: per head, Q rows pos0.., keys 0..ctx-1 of its KV head, mask -inf
  // above the diagonal and outside the window
  float mask[16 * 16], ref[16 * D];
  int64_t sq = ctx - pos0;
  for (int64_t i = 0; i < sq; i++)
    for (int64_t j = 0; j < ctx; j++) {
      int64_t p = pos0 + i;
      mask[i * ctx + j] = j > p || (window && j <= p - window) ? -INFINITY : 0.0f;
    }
  for (int h = 0; h < NH; h++) {
    int kvh = h / (NH / NKV);
    k_attn_args d = {.b = 1,
                     .h = 1,
                     .sq = sq,
                     .sk = ctx,
                     .d = D,
                     .dv = D,
                     .q_ss = NH * D,
                     .k_sd = 1,
                     .k_sk = NKV * D,
                     .v_ss = NKV * D,
                     .o_ss = D,
                     .m_sq = ctx,
                     .m_sk = 1,
                     .scale = scale};
    k_attn_ref(ref, q + pos0 * NH * D + h * D, k + kvh * D, v + kvh * D, mask, &d);
    for (int64_t i = 0; i < sq; i++)
      for (int c = 0; c < D; c++) CHECK_NEAR(o[i * NH * D + h * D + c], ref[i * D + c], 1e-5, 1e-6);
  }
}

static void test_paged_attn(void) {
  check_paged(13, 9, 0);   // a 4-token chunk after 9 cached tokens
  check_paged(13, 12, 0);  // one decode token
  check_paged(7, 0, 0);    // a whole prompt at once
  check_paged(13, 5, 4);   // sliding window of 4
}

static void test_rope(void) {
  // rotate_half: position 0 is the identity; the rotation keeps each pair's norm;
  // one pair checked against the formula in double
  enum { D = 8 };
  float inv[D / 2];
  k_rope_inv_freq(inv, D, 10000.0, NULL);
  for (int i = 0; i < D / 2; i++) CHECK_NEAR(inv[i], 1.0 / pow(10000.0, 2.0 * i / D), 1e-6, 0);
  float x[2 * D], x0[2 * D];
  for (int i = 0; i < 2 * D; i++) x[i] = x0[i] = (float)(i + 1) / 7.0f;
  int64_t pos[1] = {5};
  k_rope(x, 1, pos, 2, D, 2 * D, inv);
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < D / 2; i++) {
      double ang = 5.0 * inv[i], a = x0[h * D + i], b = x0[h * D + i + D / 2];
      CHECK_NEAR(x[h * D + i], a * cos(ang) - b * sin(ang), 1e-5, 1e-6);
      CHECK_NEAR(x[h * D + i + D / 2], b * cos(ang) + a * sin(ang), 1e-5, 1e-6);
    }
  int64_t zero[1] = {0};
  memcpy(x, x0, sizeof x);
  k_rope(x, 1, zero, 2, D, 2 * D, inv);
  for (int i = 0; i < 2 * D; i++) CHECK_NEAR(x[i], x0[i], 0, 0);
  // llama3 scaling (factor 8, low 1, high 4, original context 64): wavelengths
  // under 64/4 are kept, over 64/1 divided by 8, between them blended
  enum { R = 16 };
  float plain[R / 2], scaled[R / 2];
  k_rope_scaling sc = {
      .kind = K_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_pos = 64};
  k_rope_inv_freq(plain, R, 10000.0, NULL);
  k_rope_inv_freq(scaled, R, 10000.0, &sc);
  int kept = 0, divided = 0, blended = 0;
  for (int i = 0; i < R / 2; i++) {
    double wl = 2 * M_PI / plain[i];
    if (wl < 16) {
      CHECK_NEAR(scaled[i], plain[i], 0, 0);
      kept++;
    } else if (wl > 64) {
      CHECK_NEAR(scaled[i], plain[i] / 8.0, 1e-6, 0);
      divided++;
    } else {
      CHECK(scaled[i] < plain[i] && scaled[i] > plain[i] / 8.0f);
      blended++;
    }
  }
  CHECK(kept > 0 && divided > 0 && blended > 0);
}

static void test_rms_norm_silu(void) {
  float x[2 * 5] = {1, -2, 3, 0.5f, 4, 0, 0, 0, 0, 0}, w[5] = {1, 2, 0.5f, -1, 1}, y[10];
  k_rms_norm(y, x, w, 2, 5, 1e-5f);
  double ms = (1 + 4 + 9 + 0.25 + 16) / 5.0;
  for (int j = 0; j < 5; j++) CHECK_NEAR(y[j], w[j] * x[j] / sqrt(ms + 1e-5), 1e-6, 1e-7);
  for (int j = 5; j < 10; j++) CHECK_NEAR(y[j], 0, 0, 0);  // a zero row stays zero (eps keeps it finite)
  float g[3] = {-1, 0, 2}, u[3] = {3, 5, -1}, z[3];
  k_silu_mul(z, g, u, 3);
  for (int i = 0; i < 3; i++) CHECK_NEAR(z[i], g[i] / (1 + exp(-g[i])) * u[i], 1e-6, 1e-7);
}

int main(void) {
  test_paged_attn();
  test_rope();
  test_rms_norm_silu();
  CHECK_DONE();
}
