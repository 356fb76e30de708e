// kernels/attn/k_paged_attn.cu: CUDA twins of k_paged_kv_write and
// k_paged_attn_ref (kernels/attn/k_paged_attn.c) over a whole decoder step:
// every token of every item at once, prefill chunks and decode tokens alike,
// each token finding its item, position and block table through k_llm_meta.
//
// Attention: one block per (token, KV head). The query heads of that KV
// head's group (GQA) are staged in shared memory, so each key and value row
// is read once for the whole group. Keys go by tiles of 32: a warp per key
// computes the group's dot products (lanes over the head's dims, a shuffle
// sum), one thread per query head updates its running max and sum (online
// softmax) and turns the tile's scores into weights, then every thread adds
// the weighted values into its (head, dim) accumulators (shared memory).
// Everything in float; the output rounded once. Causality and the sliding
// window are the key range itself (first .. pos), so no masking is needed.
// Simple first: a prefill chunk's tokens each re-read the keys before them
// (quadratic traffic), and a long decode context runs on one block per KV
// head; a split-K pass over long contexts (flash-decoding) is the next step.
#include "kernels/k_cuda_common.cuh"

namespace {

#define PA_THREADS 128
#define PA_TILE 32
#define PA_MAX_HEAD 256
#define PA_MAX_GROUP 64

template <class T>
__global__ void kv_write_kernel(T *kc, T *vc, const T *k, const T *v, int64_t src_stride, int64_t row, int64_t bt,
                                k_llm_meta m) {
  size_t n = (size_t)m.n_tok * (size_t)row, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t t = i / (size_t)row, c = i % (size_t)row;
    int64_t p = m.tok_pos[t];
    const int32_t *table = m.tables + m.table_off[m.tok_item[t]];
    size_t slot = (size_t)table[p / bt] * (size_t)bt + (size_t)(p % bt);
    kc[slot * (size_t)row + c] = k[t * (size_t)src_stride + c];
    vc[slot * (size_t)row + c] = v[t * (size_t)src_stride + c];
  }
}

template <class T>
__global__ void __launch_bounds__(PA_THREADS)
    paged_attn_kernel(T *o, const T *q, const T *kc, const T *vc, k_llm_meta m, int n_heads, int n_kv, int d,
                      int64_t q_stride, int64_t o_stride, int64_t bt, int64_t window, float scale) {
  extern __shared__ float sh[];
  const int group = n_heads / n_kv, gd = group * d;
  float *qs = sh;                    // [group][d]
  float *acc = qs + gd;              // [group][d]
  float *ps = acc + gd;              // [group][PA_TILE]: scores, then weights
  float *mx = ps + group * PA_TILE;  // [group] running max
  float *ls = mx + group;            // [group] running sum
  float *al = ls + group;            // [group] this tile's rescale of the old sums
  const size_t t = blockIdx.x;
  const int g = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  const int64_t p = m.tok_pos[t], row = (int64_t)n_kv * d;
  const int32_t *table = m.tables + m.table_off[m.tok_item[t]];
  const int64_t first = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
  const T *qt = q + t * (size_t)q_stride + (size_t)g * group * d;
  for (int i = tid; i < gd; i += blockDim.x) {
    qs[i] = k_ld(qt[i]);
    acc[i] = 0.0f;
  }
  if (tid < group) {
    mx[tid] = -INFINITY;
    ls[tid] = 0.0f;
  }
  __syncthreads();
  for (int64_t j0 = first; j0 <= p; j0 += PA_TILE) {
    const int nt = (int)(p - j0 + 1 < PA_TILE ? p - j0 + 1 : PA_TILE);
    for (int jj = warp; jj < nt; jj += nw) {
      int64_t j = j0 + jj;
      const T *kr = kc + ((size_t)table[j / bt] * (size_t)bt + (size_t)(j % bt)) * (size_t)row + (size_t)g * d;
      for (int h = 0; h < group; h++) {
        float s = 0.0f;
        for (int c = lane; c < d; c += 32) s = fmaf(qs[h * d + c], k_ld(kr[c]), s);
        s = k_warp_sum(s);
        if (lane == 0) ps[h * PA_TILE + jj] = s * scale;
      }
    }
    __syncthreads();
    if (tid < group) {
      float *pr = ps + tid * PA_TILE;
      float mo = mx[tid], mn = mo;
      for (int jj = 0; jj < nt; jj++) mn = fmaxf(mn, pr[jj]);
      float a = expf(mo - mn);  // the first tile: expf(-inf) = 0
      float l = ls[tid] * a;
      for (int jj = 0; jj < nt; jj++) {
        float w = expf(pr[jj] - mn);
        pr[jj] = w;
        l += w;
      }
      mx[tid] = mn;
      ls[tid] = l;
      al[tid] = a;
    }
    __syncthreads();
    for (int i = tid; i < gd; i += blockDim.x) {
      int h = i / d, c = i % d;
      float a = acc[i] * al[h];
      const float *pr = ps + h * PA_TILE;
      for (int jj = 0; jj < nt; jj++) {
        int64_t j = j0 + jj;
        const T *vr = vc + ((size_t)table[j / bt] * (size_t)bt + (size_t)(j % bt)) * (size_t)row + (size_t)g * d;
        a = fmaf(pr[jj], k_ld(vr[c]), a);
      }
      acc[i] = a;
    }
    __syncthreads();  // ps and al are rewritten by the next tile
  }
  T *ot = o + t * (size_t)o_stride + (size_t)g * group * d;
  for (int i = tid; i < gd; i += blockDim.x) ot[i] = k_st<T>(acc[i] / ls[i / d]);
}

}  // namespace

extern "C" int k_paged_kv_write_cuda(void *k_cache, void *v_cache, const void *k, const void *v, int64_t src_stride,
                                     int64_t row_elems, int64_t block_tokens, const k_llm_meta *m, dtype dt,
                                     cudaStream_t stream, err *e) {
  static const char *kname = "k_paged_kv_write_cuda";
  if (!m || m->n_tok <= 0 || row_elems <= 0) return 0;
  if (!k_cache || !v_cache || !k || !v || !m->tok_item || !m->tok_pos || !m->tables || !m->table_off)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (block_tokens <= 0 || src_stride < row_elems)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: block_tokens %lld, src_stride %lld < row %lld", kname,
                   (long long)block_tokens, (long long)src_stride, (long long)row_elems);
  size_t work = (size_t)m->n_tok * (size_t)row_elems;
  K_DT_DISPATCH(e, kname, dt, T,
                kv_write_kernel<T><<<k_blocks_for(work, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)k_cache, (T *)v_cache, (const T *)k, (const T *)v, src_stride, row_elems, block_tokens, *m));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_paged_attn_cuda(void *o, const void *q, const void *k_cache, const void *v_cache, const k_llm_meta *m,
                                 const k_paged_attn_args *a, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_paged_attn_cuda";
  if (!m || !a) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL metadata or arguments", kname);
  if (m->n_tok <= 0) return 0;
  if (!o || !q || !k_cache || !v_cache || !m->tok_item || !m->tok_pos || !m->tables || !m->table_off)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (a->n_kv_heads <= 0 || a->n_heads <= 0 || a->n_heads % a->n_kv_heads || a->head_dim <= 0 || a->block_tokens <= 0 ||
      a->q_stride < a->n_heads * a->head_dim || a->o_stride < a->n_heads * a->head_dim)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s: %lld heads over %lld KV heads of %lld, strides q %lld o %lld, %lld-token blocks", kname,
                   (long long)a->n_heads, (long long)a->n_kv_heads, (long long)a->head_dim, (long long)a->q_stride,
                   (long long)a->o_stride, (long long)a->block_tokens);
  int64_t group = a->n_heads / a->n_kv_heads;
  if (a->head_dim > PA_MAX_HEAD || group > PA_MAX_GROUP)
    return err_set(e, ERR_UNIMPLEMENTED, "%s: head_dim %lld (at most %d) or %lld query heads per KV head (at most %d)",
                   kname, (long long)a->head_dim, PA_MAX_HEAD, (long long)group, PA_MAX_GROUP);
  if (m->n_tok > 0x7fffffff || a->n_kv_heads > 65535)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: grid of %lld tokens x %lld KV heads too large", kname,
                   (long long)m->n_tok, (long long)a->n_kv_heads);
  size_t smem = (size_t)(2 * group * a->head_dim + group * PA_TILE + 3 * group) * sizeof(float);
  if (smem > 48 * 1024)
    return err_set(e, ERR_UNIMPLEMENTED, "%s: %zu bytes of shared memory per block (48 KiB at most)", kname, smem);
  dim3 grid((unsigned)m->n_tok, (unsigned)a->n_kv_heads);
  K_DT_DISPATCH(e, kname, dt, T,
                paged_attn_kernel<T>
                <<<grid, PA_THREADS, smem, stream>>>((T *)o, (const T *)q, (const T *)k_cache, (const T *)v_cache, *m,
                                                     (int)a->n_heads, (int)a->n_kv_heads, (int)a->head_dim, a->q_stride,
                                                     a->o_stride, a->block_tokens, a->window, a->scale));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
