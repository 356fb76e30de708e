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
//
// Tensor-core prefill (k_paged_attn_args.tc_prefill, FP16 and BF16, head_dim
// a multiple of 16 up to 128, one split): every tile of 16 consecutive step
// tokens that belong to one item (a prefill chunk's, 16 at a time) runs on
// tc_prefill_kernel instead: one block per (tile, query head), 4 warps;
// keys staged 32 at a time from the paged cache into shared memory, S = Q
// K^T and O += P V as nvcuda::wmma 16x16x16 products with float
// accumulators, the online softmax in float between them (P rounded to the
// storage type for the second product, as flash attention does), the causal
// and window masks per row. The first kernel skips exactly those tiles, so
// each output row is written once.
#include <mma.h>

#include "kernels/k_cuda_common.cuh"

namespace {

#define PA_THREADS 128
#define PA_TILE 32
#define PA_MAX_HEAD 256
#define PA_MAX_GROUP 64
#define PA_MAX_SPLITS 32
#define TC_ROWS 16  // query tokens per tensor-core tile
#define TC_KEYS 32  // keys staged per round
#define TC_MAX_HEAD 128

// Whether step tokens t0 .. t0 + 15 (t0 a multiple of 16) are one item's: the
// tiles the tensor-core kernel takes. Items' tokens are consecutive in a step.
static __device__ __forceinline__ bool tc_tile(const k_llm_meta &m, int64_t t0) {
  return t0 + TC_ROWS - 1 < m.n_tok && m.tok_item[t0] == m.tok_item[t0 + TC_ROWS - 1];
}

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
                      int64_t q_stride, int64_t o_stride, int64_t bt, int64_t window, float scale, float *ws,
                      int skip_tc) {
  extern __shared__ float sh[];
  const int group = n_heads / n_kv, gd = group * d;
  float *qs = sh;                    // [group][d]
  float *acc = qs + gd;              // [group][d]
  float *ps = acc + gd;              // [group][PA_TILE]: scores, then weights
  float *mx = ps + group * PA_TILE;  // [group] running max
  float *ls = mx + group;            // [group] running sum
  float *al = ls + group;            // [group] this tile's rescale of the old sums
  const size_t t = blockIdx.x;
  if (skip_tc && tc_tile(m, (int64_t)(t & ~(size_t)(TC_ROWS - 1)))) return;  // tc_prefill_kernel's row
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

// Shared memory of tc_prefill_kernel for head_dim d (elements of 2 bytes):
// Q [16][d + 8], K and V [32][d + 8], P [16][40] in the storage type; S
// [16][36], O and the round's P V [16][d + 4] in float; max, sum, rescale
// [16] each. Every wmma pointer stays 32-byte aligned (d a multiple of 16).
static size_t tc_smem(int d) {
  size_t ld = (size_t)d + 8;
  return (TC_ROWS + 2 * TC_KEYS) * ld * 2 + TC_ROWS * 40 * 2 + TC_ROWS * 36 * 4 + 2 * TC_ROWS * ((size_t)d + 4) * 4 +
         3 * TC_ROWS * 4;
}

template <class T>
__global__ void __launch_bounds__(PA_THREADS)
    tc_prefill_kernel(T *o, const T *q, const T *kc, const T *vc, k_llm_meta m, int n_heads, int n_kv, int d,
                      int64_t q_stride, int64_t o_stride, int64_t bt, int64_t window, float scale) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  const int64_t t0 = (int64_t)blockIdx.x * TC_ROWS;
  if (!tc_tile(m, t0)) return;  // paged_attn_kernel's rows
  const int h = blockIdx.y, g = h / (n_heads / n_kv), tid = threadIdx.x, warp = tid >> 5;
  const int ld = d + 8, lo = d + 4, nd = d / 16;
  extern __shared__ __align__(128) unsigned char tc_mem[];
  T *qs = (T *)tc_mem;
  T *ks = qs + TC_ROWS * ld;
  T *vs = ks + TC_KEYS * ld;
  T *ps = vs + TC_KEYS * ld;                   // [16][40]
  float *ss = (float *)(ps + TC_ROWS * 40);    // [16][36]
  float *os = ss + TC_ROWS * 36;               // [16][lo]
  float *pv = os + TC_ROWS * lo;               // [16][lo]
  float *mx = pv + TC_ROWS * lo, *ls = mx + TC_ROWS, *al = ls + TC_ROWS;
  const int64_t row = (int64_t)n_kv * d, p0 = m.tok_pos[t0], plast = m.tok_pos[t0 + TC_ROWS - 1];
  const int32_t *table = m.tables + m.table_off[m.tok_item[t0]];
  const int64_t first = window > 0 && p0 - window + 1 > 0 ? p0 - window + 1 : 0;
  for (int i = tid; i < TC_ROWS * d; i += blockDim.x) {
    int r = i / d, c = i % d;
    qs[r * ld + c] = q[(size_t)(t0 + r) * (size_t)q_stride + (size_t)h * d + c];
    os[r * lo + c] = 0.0f;
  }
  if (tid < TC_ROWS) {
    mx[tid] = -INFINITY;
    ls[tid] = 0.0f;
  }
  for (int64_t j0 = first - first % TC_KEYS; j0 <= plast; j0 += TC_KEYS) {
    // the round's keys and values (zeros past the last position; masked below)
    for (int i = tid; i < TC_KEYS * d; i += blockDim.x) {
      int jj = i / d, c = i % d;
      int64_t j = j0 + jj;
      T kv = k_st<T>(0.0f), vv = kv;
      if (j <= plast) {
        size_t at = ((size_t)table[j / bt] * (size_t)bt + (size_t)(j % bt)) * (size_t)row + (size_t)g * d + c;
        kv = kc[at];
        vv = vc[at];
      }
      ks[jj * ld + c] = kv;
      vs[jj * ld + c] = vv;
    }
    __syncthreads();
    // S [16 x 32] = Q K^T: warps 0 and 1, 16 keys each
    if (warp < TC_KEYS / 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
      wmma::fill_fragment(sf, 0.0f);
      for (int kk = 0; kk < nd; kk++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;
        wmma::load_matrix_sync(qf, qs + kk * 16, ld);
        wmma::load_matrix_sync(kf, ks + warp * 16 * ld + kk * 16, ld);
        wmma::mma_sync(sf, qf, kf, sf);
      }
      wmma::store_matrix_sync(ss + warp * 16, sf, 36, wmma::mem_row_major);
    }
    __syncthreads();
    // online softmax per row, masked: key j for the row at position p when first(p) <= j <= p
    if (tid < TC_ROWS) {
      const int64_t p = p0 + tid, lo_j = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
      float mo = mx[tid], mn = mo;
      for (int jj = 0; jj < TC_KEYS; jj++) {
        int64_t j = j0 + jj;
        if (j >= lo_j && j <= p) mn = fmaxf(mn, ss[tid * 36 + jj] * scale);
      }
      float a = mn == -INFINITY ? 1.0f : expf(mo - mn), l = ls[tid] * a;
      for (int jj = 0; jj < TC_KEYS; jj++) {
        int64_t j = j0 + jj;
        float w = j >= lo_j && j <= p ? expf(ss[tid * 36 + jj] * scale - mn) : 0.0f;
        T wt = k_st<T>(w);
        ps[tid * 40 + jj] = wt;
        l += k_ld(wt);  // the sum of the weights P V uses
      }
      mx[tid] = mn;
      ls[tid] = l;
      al[tid] = a;
    }
    __syncthreads();
    // this round's P V [16 x d]: d / 16 tiles over the 4 warps
    for (int c = warp; c < nd; c += PA_THREADS / 32) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
      wmma::fill_fragment(of, 0.0f);
      for (int kk = 0; kk < TC_KEYS / 16; kk++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
        wmma::load_matrix_sync(pf, ps + kk * 16, 40);
        wmma::load_matrix_sync(vf, vs + kk * 16 * ld + c * 16, ld);
        wmma::mma_sync(of, pf, vf, of);
      }
      wmma::store_matrix_sync(pv + c * 16, of, lo, wmma::mem_row_major);
    }
    __syncthreads();
    for (int i = tid; i < TC_ROWS * d; i += blockDim.x) {
      int r = i / d, c = i % d;
      os[r * lo + c] = fmaf(os[r * lo + c], al[r], pv[r * lo + c]);
    }
    __syncthreads();  // K, V, P and the rescales are rewritten by the next round
  }
  for (int i = tid; i < TC_ROWS * d; i += blockDim.x) {
    int r = i / d, c = i % d;
    o[(size_t)(t0 + r) * (size_t)o_stride + (size_t)h * d + c] = k_st<T>(os[r * lo + c] / ls[r]);
  }
#endif
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
  // tensor cores for the prefill tiles when asked and the shape allows; the rest as before
  const int tc = a->tc_prefill && splits == 1 && (dt == DT_FP16 || dt == DT_BF16) && a->head_dim % 16 == 0 &&
                 a->head_dim <= TC_MAX_HEAD && m->n_tok >= TC_ROWS && a->n_heads <= 65535;
  if (tc) {
    dim3 tgrid((unsigned)((m->n_tok + TC_ROWS - 1) / TC_ROWS), (unsigned)a->n_heads);
    size_t tsm = tc_smem((int)a->head_dim);
    if (dt == DT_FP16)
      tc_prefill_kernel<__half><<<tgrid, PA_THREADS, tsm, stream>>>(
          (__half *)o, (const __half *)q, (const __half *)k_cache, (const __half *)v_cache, *m, (int)a->n_heads,
          (int)a->n_kv_heads, (int)a->head_dim, a->q_stride, a->o_stride, a->block_tokens, a->window, a->scale);
    else
      tc_prefill_kernel<__nv_bfloat16><<<tgrid, PA_THREADS, tsm, stream>>>(
          (__nv_bfloat16 *)o, (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k_cache,
          (const __nv_bfloat16 *)v_cache, *m, (int)a->n_heads, (int)a->n_kv_heads, (int)a->head_dim, a->q_stride,
          a->o_stride, a->block_tokens, a->window, a->scale);
    K_LAUNCH_CHECK(e, kname);
  }
  dim3 grid((unsigned)m->n_tok, (unsigned)a->n_kv_heads, (unsigned)splits);
  size_t work = (size_t)m->n_tok * (size_t)a->n_heads * (size_t)a->head_dim;
  K_DT_DISPATCH(e, kname, dt, T,
                paged_attn_kernel<T>
                <<<grid, PA_THREADS, smem, stream>>>((T *)o, (const T *)q, (const T *)k_cache, (const T *)v_cache, *m,
                                                     (int)a->n_heads, (int)a->n_kv_heads, (int)a->head_dim, a->q_stride,
                                                     a->o_stride, a->block_tokens, a->window, a->scale, ws, tc);
                if (splits > 1) paged_attn_combine_kernel<T><<<k_blocks_for(work, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)o, ws, m->n_tok, (int)a->n_heads, (int)a->head_dim, splits, a->o_stride));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
