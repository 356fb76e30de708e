// kernels/sample/k_sample.c: k_sample_rows_ref (k_sample.h), the C
// reference of kernels/sample/k_sample.cu: the rule written as plainly as it
// reads, the row's keys sorted and walked with exact uint64 prefix sums of
// the weights. The CUDA kernel finds the same cuts without sorting; since
// every mass is an integer sum, any order of summation gives these bits.
#include "kernels/sample/k_sample.h"

#include <stdlib.h>

#include "kernels/k_ref.h"
#include "kernels/sample/k_sample_rule.h"

static float load(const void *x, dtype dt, size_t i) {
  if (dt == DT_FP32) return ((const float *)x)[i];
  uint16_t h = ((const uint16_t *)x)[i];
  if (dt == DT_BF16) {
    uint32_t b = (uint32_t)h << 16;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
  }
  float v;
  k_f16_to_f32(&v, &h, 1);
  return v;
}

static int by_key(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int32_t sample_row(const void *x, dtype dt, uint32_t V, const k_sample_param *p, const int32_t *seen,
                          uint64_t *k) {
  for (uint32_t i = 0; i < V; i++) k[i] = ks_key(ks_desc32(ks_canon(load(x, dt, i))), i);
  if (p->repetition_penalty > 0 && p->repetition_penalty != 1)
    for (int64_t j = 0; j < p->n_seen; j++) {
      int32_t t = seen[p->seen_off + j];
      if (t >= 0 && (uint32_t)t < V)
        k[t] = ks_key(ks_desc32(ks_penalize(ks_canon(load(x, dt, (size_t)t)), p->repetition_penalty)), (uint32_t)t);
    }
  int greedy = !(p->temperature > 0);
  float inv_t = greedy ? 1.0f : 1.0f / p->temperature;
  uint64_t top = UINT64_MAX;
  for (uint32_t i = 0; i < V; i++) {
    if (!greedy) k[i] = ks_key(ks_desc32(ks_canon(ks_undesc32((uint32_t)(k[i] >> 32)) * inv_t)), i);
    if (k[i] < top) top = k[i];
  }
  float mx = ks_undesc32((uint32_t)(top >> 32));
  if (greedy || isinf(mx)) return (int32_t)(uint32_t)top;
  qsort(k, V, sizeof *k, by_key);
  int F = ks_wbits(V);
#define W(j) ks_weight(ks_undesc32((uint32_t)(k[j] >> 32)) - mx, F)
  uint32_t n = p->top_k > 0 && (uint32_t)p->top_k < V ? (uint32_t)p->top_k : V;  // top_k
  uint64_t total = 0;
  for (uint32_t j = 0; j < n; j++) total += W(j);
  uint32_t last = n - 1;  // the head's last key
  if (p->top_p > 0 && p->top_p < 1) {
    uint64_t thr = ks_ceil_mul(p->top_p, (double)total), h = 0;
    if (thr < total)  // else the whole head (a cut there would drop only weightless keys)
      for (uint32_t j = 0; j < n; j++)
        if ((h += W(j)) >= thr) {
          last = j;
          break;
        }
  }
  if (p->min_p > 0) {
    uint64_t thr = ks_ceil_mul(p->min_p, (double)((uint64_t)1 << F));
    for (uint32_t j = 1; j <= last; j++)
      if (W(j) < thr) {
        last = j - 1;
        break;
      }
  }
  uint64_t kept = 0, h = 0;
  for (uint32_t j = 0; j <= last; j++) kept += W(j);
  uint64_t thr = ks_draw_thr(p->u, kept);
  for (uint32_t j = 0; j <= last; j++)
    if ((h += W(j)) >= thr) return (int32_t)(uint32_t)k[j];
#undef W
  return (int32_t)(uint32_t)k[last];  // unreachable: H(last) = kept >= thr
}

int k_sample_rows_ref(int32_t *ids, const void *x, dtype dt, size_t rows, size_t vocab, const k_sample_param *p,
                      const int32_t *seen, float *scratch) {
  if (dt != DT_FP32 && dt != DT_FP16 && dt != DT_BF16) return -1;
  if (vocab == 0 || vocab > (size_t)INT32_MAX) return -1;
  size_t es = dt == DT_FP32 ? 4 : 2;
  for (size_t r = 0; r < rows; r++)
    if (p[r].mode)
      ids[r] = sample_row((const uint8_t *)x + r * vocab * es, dt, (uint32_t)vocab, &p[r], seen, (uint64_t *)scratch);
  return 0;
}

size_t k_sample_ws_bytes(size_t rows, size_t vocab) {
  if (vocab == 0 || vocab > (size_t)INT32_MAX) return 0;
  return rows * ks_row_bytes((uint32_t)vocab);
}
