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

// --- ONNX's Attention op (opset 23+), as onnx's reference computes it

// The additive bias of score (b, h, i, j): the mask (padded with -inf past
// its last dim; a bool mask's false is -inf), the causal frontier, the
// sliding window and the padding of the keys.
static float onnx_bias(const k_attention_args *a, int64_t b, int64_t h, int64_t i, int64_t j) {
  float bias = 0.0f;
  if (a->mask) {
    if (j >= a->mask_len) return -INFINITY;
    int64_t at = b * a->mask_st[0] + h * a->mask_st[1] + i * a->mask_st[2] + j * a->mask_st[3];
    if (a->mask_bool) {
      if (!((const uint8_t *)a->mask)[at]) return -INFINITY;
    } else {
      bias = ((const float *)a->mask)[at];
    }
  }
  int64_t off = a->offset ? a->offset[b] : a->offset0, diff = i + off - j;
  if (a->causal && diff < 0) return -INFINITY;
  if ((a->left >= 0 && diff > a->left) || (a->right >= 0 && -diff > a->right)) return -INFINITY;
  if (a->nonpad && j >= a->nonpad[b]) return -INFINITY;
  return bias;
}

void k_attention(float *y, float *qk, const float *q, const float *k, const float *v, float *work,
                 const k_attention_args *a) {
  int64_t reps = a->hkv > 0 ? a->hq / a->hkv : 1;
  for (int64_t b = 0; b < a->b; b++)
    for (int64_t h = 0; h < a->hq; h++) {
      int64_t kh = h / reps;
      const float *kb = k + (b * a->hkv + kh) * a->t * a->d, *vb = v + (b * a->hkv + kh) * a->t * a->dv;
      for (int64_t i = 0; i < a->sq; i++) {
        const float *qr = q + ((b * a->hq + h) * a->sq + i) * a->d;
        float *yr = y + ((b * a->hq + h) * a->sq + i) * a->dv;
        float *qkr = qk ? qk + ((b * a->hq + h) * a->sq + i) * a->t : NULL;
        float m = -INFINITY, bias_max = -INFINITY;
        for (int64_t j = 0; j < a->t; j++) {
          double s = 0.0;
          for (int64_t d = 0; d < a->d; d++) s += (double)qr[d] * kb[j * a->d + d];
          float x = (float)(s * a->scale);
          if (a->softcap > 0.0f) x = a->softcap * tanhf(x / a->softcap);
          float bias = onnx_bias(a, b, h, i, j);
          bias_max = bias > bias_max ? bias : bias_max;
          if (qkr && a->qk_mode <= 1) qkr[j] = x;
          x += bias;
          if (qkr && a->qk_mode == 2) qkr[j] = x;
          work[j] = x;
          m = x > m ? x : m;
        }
        // a row with every key masked attends nothing: probabilities 0, Y 0
        int none = bias_max == -INFINITY;
        double sum = 0.0;
        for (int64_t j = 0; j < a->t; j++) {
          double e = none ? 0.0 : exp((double)work[j] - (m == -INFINITY ? 0.0 : m));
          work[j] = (float)e;
          sum += e;
        }
        for (int64_t j = 0; j < a->t; j++) {
          work[j] = sum > 0.0 ? (float)(work[j] / sum) : 0.0f;
          if (qkr && a->qk_mode == 3) qkr[j] = work[j];
        }
        for (int64_t d = 0; d < a->dv; d++) {
          double acc = 0.0;
          for (int64_t j = 0; j < a->t; j++) acc += (double)work[j] * vb[j * a->dv + d];
          yr[d] = (float)acc;
        }
      }
    }
}

// --- RotaryEmbedding (opset 23)

int k_rotary(float *y, const float *x, const float *cos_c, const float *sin_c, const int64_t *pos, int64_t max_pos,
             int64_t b, int64_t s, int64_t h, int64_t d, int64_t rot, int heads_first, int interleaved) {
  int64_t half = rot / 2;
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t si = 0; si < s; si++) {
      int64_t row = bi * s + si;
      if (pos) {
        row = pos[bi * s + si];
        if (row < 0 || row >= max_pos) return -1;
      }
      const float *c = cos_c + row * half, *sn = sin_c + row * half;
      for (int64_t hi = 0; hi < h; hi++) {
        int64_t at = heads_first ? ((bi * h + hi) * s + si) * d : ((bi * s + si) * h + hi) * d;
        const float *xr = x + at;
        float *yr = y + at;
        for (int64_t k = 0; k < half; k++) {
          int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
          float x1 = xr[i1], x2 = xr[i2];
          yr[i1] = c[k] * x1 - sn[k] * x2;
          yr[i2] = sn[k] * x1 + c[k] * x2;
        }
        for (int64_t k = rot; k < d; k++) yr[k] = xr[k];
      }
    }
  return 0;
}
