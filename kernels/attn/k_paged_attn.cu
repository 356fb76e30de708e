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
// Split-K (flash-decoding) when the caller asks for splits > 1: blockIdx.z
// takes the split-th share of each token's keys (whole tiles) and writes its
// unnormalised sums, running max and running sum to the workspace; a second
// kernel combines the splits (rescaled to the common max) into the output.
// That keeps the GPU busy when few (token, KV head) pairs have long contexts
// (decode at small batch). Simple first otherwise: a prefill chunk's tokens
// each re-read the keys before them (quadratic traffic).
#include "kernels/k_cuda_common.cuh"

namespace {

#define PA_THREADS 128
#define PA_TILE 32
#define PA_MAX_HEAD 256
#define PA_MAX_GROUP 64
#define PA_MAX_SPLITS 32

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
                      int64_t q_stride, int64_t o_stride, int64_t bt, int64_t window, float scale, float *ws) {
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
  // this split's keys jb .. je (all of them without splits), whole tiles each
  const int splits = gridDim.z, sp = blockIdx.z;
  const int64_t tiles = (p - first + PA_TILE) / PA_TILE, per = (tiles + splits - 1) / splits;
  const int64_t jb = first + (int64_t)sp * per * PA_TILE;
  const int64_t je = jb + per * PA_TILE - 1 < p ? jb + per * PA_TILE - 1 : p;
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
  for (int64_t j0 = jb; j0 <= je; j0 += PA_TILE) {
    const int nt = (int)(je - j0 + 1 < PA_TILE ? je - j0 + 1 : PA_TILE);
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
  if (splits == 1) {
    T *ot = o + t * (size_t)o_stride + (size_t)g * group * d;
    for (int i = tid; i < gd; i += blockDim.x) ot[i] = k_st<T>(acc[i] / ls[i / d]);
    return;
  }
  // partials: [token][head][split][d sums, max, sum]; an empty split (more
  // splits than tiles) leaves max -inf and sum 0, which the combine skips
  for (int i = tid; i < gd; i += blockDim.x) {
    int h = i / d, c = i % d;
    float *w = ws + ((t * (size_t)n_heads + (size_t)(g * group + h)) * (size_t)splits + (size_t)sp) * (size_t)(d + 2);
    w[c] = acc[i];
    if (c == 0) w[d] = mx[h], w[d + 1] = ls[h];
  }
}

// o[t, h, c] from the splits' partials: each rescaled by exp(max_s - max).
template <class T>
__global__ void paged_attn_combine_kernel(T *o, const float *ws, int64_t n_tok, int n_heads, int d, int splits,
                                          int64_t o_stride) {
  size_t n = (size_t)n_tok * (size_t)n_heads * (size_t)d, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t c = i % (size_t)d, th = i / (size_t)d, t = th / (size_t)n_heads, h = th % (size_t)n_heads;
    const float *w = ws + th * (size_t)splits * (size_t)(d + 2);
    float mx = -INFINITY;
    for (int s = 0; s < splits; s++) mx = fmaxf(mx, w[(size_t)s * (d + 2) + d]);
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < splits; s++) {
      const float *ws_s = w + (size_t)s * (d + 2);
      if (ws_s[d + 1] == 0.0f) continue;  // an empty split
      float f = expf(ws_s[d] - mx);
      num = fmaf(f, ws_s[c], num);
      den = fmaf(f, ws_s[d + 1], den);
    }
    o[t * (size_t)o_stride + h * (size_t)d + c] = k_st<T>(num / den);
  }
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

extern "C" size_t k_paged_attn_ws_floats(int64_t n_tok, int64_t n_heads, int64_t head_dim, int splits) {
  return splits > 1 ? (size_t)n_tok * (size_t)n_heads * (size_t)splits * (size_t)(head_dim + 2) : 0;
}

extern "C" int k_paged_attn_cuda(void *o, const void *q, const void *k_cache, const void *v_cache, const k_llm_meta *m,
                                 const k_paged_attn_args *a, int splits, float *ws, dtype dt, cudaStream_t stream,
                                 err *e) {
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
  if (splits < 1 || splits > PA_MAX_SPLITS || (splits > 1 && !ws))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %d splits (1 .. %d, with a workspace past 1)", kname, splits,
                   PA_MAX_SPLITS);
  dim3 grid((unsigned)m->n_tok, (unsigned)a->n_kv_heads, (unsigned)splits);
  size_t work = (size_t)m->n_tok * (size_t)a->n_heads * (size_t)a->head_dim;
  K_DT_DISPATCH(e, kname, dt, T,
                paged_attn_kernel<T>
                <<<grid, PA_THREADS, smem, stream>>>((T *)o, (const T *)q, (const T *)k_cache, (const T *)v_cache, *m,
                                                     (int)a->n_heads, (int)a->n_kv_heads, (int)a->head_dim, a->q_stride,
                                                     a->o_stride, a->block_tokens, a->window, a->scale, ws);
                if (splits > 1) paged_attn_combine_kernel<T><<<k_blocks_for(work, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)o, ws, m->n_tok, (int)a->n_heads, (int)a->head_dim, splits, a->o_stride));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
