// kernels/gemm/k_rnn.c: the C reference of ONNX's recurrent ops, RNN, GRU and
// LSTM, with their default activations (Tanh; Sigmoid and Tanh; Sigmoid, Tanh
// and Tanh), forward, reverse or both directions, biases, peepholes, clip,
// GRU's linear_before_reset, per-batch sequence lengths (steps past a
// sequence's end write zeros and leave its state alone) and both layouts.
// Sums in double, one gate row at a time.
#include "kernels/k_ref.h"

#include <math.h>
#include <string.h>

static float sigm(float v) { return v >= 0.0f ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v)); }

static float clipv(float v, float c) { return c > 0.0f ? (v < -c ? -c : v > c ? c : v) : v; }

static double dot(const float *a, const float *b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

void k_rnn(const k_rnn_args *a, float *y, float *yh, float *yc, const float *x, const float *w, const float *r,
           const float *bias, const float *peep, const float *h0, const float *c0, const int64_t *lens, float *work) {
  int64_t S = a->seq, B = a->batch, I = a->input, H = a->hidden, D = a->dirs, G = a->kind == K_RNN_LSTM ? 4
                                                                                   : a->kind == K_RNN_GRU ? 3 : 1;
  float *h = work, *c = work + B * H, *g = work + 2 * B * H, *rh = work + 2 * B * H + G * H;
#define XAT(t, b) (x + (a->batch_first ? ((b) * S + (t)) * I : ((t) * B + (b)) * I))
#define YAT(t, d, b) (y + (a->batch_first ? (((b) * S + (t)) * D + (d)) * H : (((t) * D + (d)) * B + (b)) * H))
#define HAT(p, d, b) ((p) + (a->batch_first ? ((b) * D + (d)) * H : ((d) * B + (b)) * H))
  for (int64_t d = 0; d < D; d++) {
    int rev = a->reverse || d == 1;
    const float *W = w + d * G * H * I, *R = r + d * G * H * H;
    const float *wb = bias ? bias + d * 2 * G * H : NULL, *rb = bias ? wb + G * H : NULL;
    const float *P = peep ? peep + d * 3 * H : NULL;
    for (int64_t b = 0; b < B; b++)
      for (int64_t j = 0; j < H; j++) {
        h[b * H + j] = h0 ? HAT(h0, d, b)[j] : 0.0f;
        c[b * H + j] = c0 ? HAT(c0, d, b)[j] : 0.0f;
      }
    for (int64_t s = 0; s < S; s++)
      for (int64_t b = 0; b < B; b++) {
        int64_t len = lens ? lens[b] : S;
        float *hb = h + b * H, *cb = c + b * H;
        if (s >= len) {  // past this sequence's end
          if (y) memset(YAT(s, d, b), 0, (size_t)H * sizeof(float));
          continue;
        }
        int64_t t = rev ? len - 1 - s : s;
        const float *xt = XAT(t, b);
        // g = x W^T + Wb, then + h R^T + Rb, except GRU's h gate (its R part depends on r)
        for (int64_t q = 0; q < G * H; q++) {
          double v = dot(xt, W + q * I, I) + (wb ? wb[q] : 0.0);
          int gru_h = a->kind == K_RNN_GRU && q >= 2 * H;
          if (!gru_h) v += dot(hb, R + q * H, H) + (rb ? rb[q] : 0.0);
          g[q] = (float)v;
        }
        if (a->kind == K_RNN_RNN) {
          for (int64_t j = 0; j < H; j++) hb[j] = tanhf(clipv(g[j], a->clip));
        } else if (a->kind == K_RNN_GRU) {  // gates z, r, h
          for (int64_t j = 0; j < H; j++) {
            g[j] = sigm(clipv(g[j], a->clip));
            g[H + j] = sigm(clipv(g[H + j], a->clip));
          }
          for (int64_t j = 0; j < H; j++) {
            double hr;
            if (a->linear_before_reset) {
              hr = g[H + j] * (dot(hb, R + (2 * H + j) * H, H) + (rb ? rb[2 * H + j] : 0.0));
            } else {
              for (int64_t k = 0; k < H; k++) rh[k] = g[H + k] * hb[k];
              hr = dot(rh, R + (2 * H + j) * H, H) + (rb ? rb[2 * H + j] : 0.0);
            }
            g[2 * H + j] = tanhf(clipv((float)(g[2 * H + j] + hr), a->clip));
          }
          for (int64_t j = 0; j < H; j++) hb[j] = (1.0f - g[j]) * g[2 * H + j] + g[j] * hb[j];
        } else {  // LSTM: gates i, o, f, c
          for (int64_t j = 0; j < H; j++) {
            float gi = sigm(clipv(g[j] + (P ? P[j] * cb[j] : 0.0f), a->clip));
            float gf = sigm(clipv(g[2 * H + j] + (P ? P[2 * H + j] * cb[j] : 0.0f), a->clip));
            float gc = tanhf(clipv(g[3 * H + j], a->clip));
            cb[j] = gf * cb[j] + gi * gc;
            float go = sigm(clipv(g[H + j] + (P ? P[H + j] * cb[j] : 0.0f), a->clip));
            hb[j] = go * tanhf(cb[j]);
          }
        }
        if (y) memcpy(YAT(t, d, b), hb, (size_t)H * sizeof(float));
      }
    for (int64_t b = 0; b < B; b++) {
      if (yh) memcpy(HAT(yh, d, b), h + b * H, (size_t)H * sizeof(float));
      if (yc) memcpy(HAT(yc, d, b), c + b * H, (size_t)H * sizeof(float));
    }
  }
#undef XAT
#undef YAT
#undef HAT
}
