// kernels/attn/k_attn.c: the C reference of scaled-dot-product attention
// (k_ref.h: k_attn_ref), the oracle of the CUDA kernels (kernels/attn/k_attn.cu) and of
// the CPU plan's fused op (engine/ops/attn/attn.c). Written as the unfused graph
// reads: scores, mask, a max-subtracted softmax, then the product with V;
// every sum in double, so it sits within a few float ulps of the exact value.
// Row strides (q_ss, k_sd/k_sk, v_ss, o_ss) as k_ref.h has them, zeros packed.
#include "kernels/k_ref.h"

#include <math.h>

// Score (i, j) of one head, as the unfused graph has it before the Softmax:
// the product rounded to float, then the mask added in float. Recomputed
// where needed rather than kept: the reference allocates nothing.
static double score(const float *q, const float *kt, const float *m, const k_attn_args *a,
                    int64_t i, int64_t j) {
  double s = 0.0;
  for (int64_t d = 0; d < a->d; d++)
    s += (double)q[i * a->q_ss + d] * (double)kt[d * a->k_sd + j * a->k_sk];
  float x = (float)(s * (double)a->scale);  // the unfused graph rounds the scores to float
  if (m) x += m[i * a->m_sq + j * a->m_sk];
  return x;
}

void k_attn_ref(float *o, const float *q, const float *kt, const float *v, const float *mask,
                const k_attn_args *args) {
  const k_attn_args packed = k_attn_packed(*args), *a = &packed;
  for (int64_t b = 0; b < a->b; b++)
    for (int64_t h = 0; h < a->h; h++) {
      const float *qh = q + b * a->q_sb + h * a->q_sh, *kh = kt + b * a->k_sb + h * a->k_sh;
      const float *vh = v + b * a->v_sb + h * a->v_sh;
      const float *mh = mask ? mask + b * a->m_sb + h * a->m_sh : NULL;
      float *oh = o + b * a->o_sb + h * a->o_sh;
      for (int64_t i = 0; i < a->sq; i++) {
        float *orow = oh + i * a->o_ss;
        // softmax over the row: undefined (NaN) when its max is not finite or a score is NaN
        double mx = -INFINITY;
        int bad = 0;
        for (int64_t j = 0; j < a->sk; j++) {
          double s = score(qh, kh, mh, a, i, j);
          if (isnan(s)) bad = 1;
          else if (s > mx) mx = s;
        }
        if (a->sk == 0) {  // an empty product: the unfused MatMul gives zeros
          for (int64_t c = 0; c < a->dv; c++) orow[c] = 0.0f;
          continue;
        }
        if (bad || !isfinite(mx)) {
          for (int64_t c = 0; c < a->dv; c++) orow[c] = a->nan_zero ? 0.0f : NAN;
          continue;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < a->sk; j++) sum += exp(score(qh, kh, mh, a, i, j) - mx);
        enum { CHUNK = 256 };  // output columns per pass over the keys
        for (int64_t c0 = 0; c0 < a->dv; c0 += CHUNK) {
          int64_t w = a->dv - c0 < CHUNK ? a->dv - c0 : CHUNK;
          double acc[CHUNK] = {0};
          for (int64_t j = 0; j < a->sk; j++) {
            double p = exp(score(qh, kh, mh, a, i, j) - mx) / sum;
            for (int64_t c = 0; c < w; c++) acc[c] += p * (double)vh[j * a->v_ss + c0 + c];
          }
          for (int64_t c = 0; c < w; c++) orow[c0 + c] = (float)acc[c];
        }
      }
    }
}
