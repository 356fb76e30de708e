// kernels/attn/k_paged_attn.c: the C reference of attention over a paged KV
// cache (k_ref.h: k_paged_attn_ref): the queries of one sequence's chunk at
// consecutive positions, each attending causally to every earlier key of its
// sequence, the keys found through the sequence's block table (vLLM's
// PagedAttention layout). Grouped-query heads share a KV head. Prefill
// chunks and single decode tokens are the same call (n_q 1). Dot products
// and the weighted sum of V in double; the scores are kept in float (the
// caller's scratch) as the FP32 reference keeps them.
#include <math.h>
#include <string.h>

#include "kernels/k_ref.h"

static inline const float *slot_row(const float *cache, const int32_t *table, int64_t block_tokens, int64_t row_elems,
                                    int64_t p) {
  return cache + ((int64_t)table[p / block_tokens] * block_tokens + p % block_tokens) * row_elems;
}

void k_paged_kv_write(float *cache, const int32_t *table, int64_t block_tokens, int64_t row_elems, int64_t pos0,
                      int64_t n, const float *src, int64_t src_stride) {
  for (int64_t t = 0; t < n; t++) {
    float *dst = (float *)slot_row(cache, table, block_tokens, row_elems, pos0 + t);
    memcpy(dst, src + t * src_stride, (size_t)row_elems * sizeof(float));
  }
}

void k_paged_attn_ref(float *o, const float *q, const float *k_cache, const float *v_cache, const int32_t *table,
                      const k_paged_attn_args *a, float *scratch) {
  int64_t d = a->head_dim, row = a->n_kv_heads * d, group = a->n_heads / a->n_kv_heads;
  for (int64_t i = 0; i < a->n_q; i++) {
    int64_t p = a->pos0 + i;
    int64_t first = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
    for (int64_t h = 0; h < a->n_heads; h++) {
      const float *qh = q + i * a->q_stride + h * d;
      int64_t kvh = h / group;
      float mx = -INFINITY;
      for (int64_t j = first; j <= p; j++) {
        const float *kr = slot_row(k_cache, table, a->block_tokens, row, j) + kvh * d;
        double s = 0.0;
        for (int64_t c = 0; c < d; c++) s += (double)qh[c] * kr[c];
        float sc = (float)s * a->scale;
        scratch[j - first] = sc;
        if (sc > mx) mx = sc;
      }
      double sum = 0.0;
      for (int64_t j = first; j <= p; j++) {
        float e = expf(scratch[j - first] - mx);
        scratch[j - first] = e;
        sum += e;
      }
      float *oh = o + i * a->o_stride + h * d;
      for (int64_t c = 0; c < d; c++) {
        double acc = 0.0;
        for (int64_t j = first; j <= p; j++)
          acc += (double)scratch[j - first] * slot_row(v_cache, table, a->block_tokens, row, j)[kvh * d + c];
        oh[c] = (float)(acc / sum);
      }
    }
  }
}
