// kernels/attn/k_linear_attn.c: linear attention's recurrence (k_linear_attn.h).
#include "kernels/attn/k_linear_attn.h"

#include <math.h>

void k_linear_attn(float *out, float *state, const float *q, const float *k, const float *v, const float *decay,
                   int decay_per_dim, const float *beta, int64_t beta_heads, int64_t B, int64_t T, int64_t Hq,
                   int64_t Hkv, int64_t dk, int64_t dv, float scale, float *vv) {
  int64_t G = Hq / Hkv, dstride = decay_per_dim ? Hkv * dk : Hkv;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hkv; h++) {
      float *S = state + (b * Hkv + h) * dk * dv;
      for (int64_t t = 0; t < T; t++) {
        const float *kt = k + (b * T + t) * Hkv * dk + h * dk, *vt = v + (b * T + t) * Hkv * dv + h * dv;
        if (decay) {
          const float *g = decay + (b * T + t) * dstride + (decay_per_dim ? h * dk : h);
          for (int64_t i = 0; i < dk; i++) {
            float f = expf(g[decay_per_dim ? i : 0]);
            for (int64_t j = 0; j < dv; j++) S[i * dv + j] *= f;
          }
        }
        for (int64_t j = 0; j < dv; j++) vv[j] = vt[j];
        if (beta) {
          float bt = beta[(b * T + t) * beta_heads + (beta_heads == 1 ? 0 : h)];
          for (int64_t j = 0; j < dv; j++) {
            float r = 0;
            for (int64_t i = 0; i < dk; i++) r += S[i * dv + j] * kt[i];
            vv[j] = bt * (vt[j] - r);
          }
        }
        for (int64_t i = 0; i < dk; i++)
          for (int64_t j = 0; j < dv; j++) S[i * dv + j] += kt[i] * vv[j];
        for (int64_t g = 0; g < G; g++) {
          int64_t hq = h * G + g;
          const float *qt = q + (b * T + t) * Hq * dk + hq * dk;
          float *o = out + (b * T + t) * Hq * dv + hq * dv;
          for (int64_t j = 0; j < dv; j++) {
            float acc = 0;
            for (int64_t i = 0; i < dk; i++) acc += qt[i] * S[i * dv + j];
            o[j] = scale * acc;
          }
        }
      }
    }
}
