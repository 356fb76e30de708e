// kernels/attn/k_rope.c: rotary position embeddings (RoPE) as transformers
// applies them to Llama, Qwen2 and Mistral: the frequencies (with Llama 3's
// "llama3" scaling) and the rotation of the two halves of each head
// (rotate_half, not interleaved pairs). The angle pos * inv_freq is formed in
// float, as the FP32 reference forms it, so positions far out round alike.
#include <math.h>

#include "kernels/k_ref.h"

void k_rope_inv_freq(float *inv_freq, int64_t rot_dim, double theta, const k_rope_scaling *s) {
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < rot_dim / 2; i++) {
    // 1 / theta^(2i/d) in float, as torch computes it
    float f = (float)(1.0 / pow(theta, (double)(2 * i) / (double)rot_dim));
    if (s && s->kind == K_ROPE_LLAMA3) {
      // Llama 3.1's long-context scaling (transformers' _compute_llama3_parameters):
      // wavelengths longer than old_len / low_freq_factor are slowed by factor,
      // shorter than old_len / high_freq_factor kept, and those between blended.
      double old_len = (double)s->original_max_pos;
      double low_wl = old_len / s->low_freq_factor, high_wl = old_len / s->high_freq_factor;
      double wl = 2.0 * pi / f;
      double v = wl > low_wl ? f / s->factor : f;
      if (!(wl < high_wl) && !(wl > low_wl)) {
        double smooth = (old_len / wl - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
        v = (1.0 - smooth) * v / s->factor + smooth * v;
      }
      f = (float)v;
    }
    inv_freq[i] = f;
  }
}

void k_rope(float *x, int64_t n_tok, const int64_t *pos, int64_t n_heads, int64_t head_dim, int64_t row_stride,
            const float *inv_freq) {
  int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n_tok; t++) {
    float p = (float)pos[t];
    for (int64_t i = 0; i < half; i++) {
      float ang = p * inv_freq[i];
      float c = cosf(ang), s = sinf(ang);
      for (int64_t h = 0; h < n_heads; h++) {
        float *xh = x + t * row_stride + h * head_dim;
        float a = xh[i], b = xh[i + half];
        xh[i] = a * c - b * s;
        xh[i + half] = b * c + a * s;
      }
    }
  }
}
