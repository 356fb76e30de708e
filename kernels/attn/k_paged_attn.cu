// kernels/attn/k_paged_attn.cu: CUDA twins of k_paged_kv_write and
// k_paged_attn_ref (kernels/attn/k_paged_attn.c) over a whole decoder step:
// every token of every item at once, prefill chunks and decode tokens alike,
// each token finding its item, position and block table through k_llm_meta.
//
// Attention is memory-bound (decode reads every cached K and V row once per
// step), so the kernel is built around reading each row once, wide, with
// many rows in flight, and doing no barrier or division per key:
// - one block per (token, KV head, head chunk, split). The chunk is up to
//   PA_MAX_HC query heads of the KV head's group (GQA): each K and V row is
//   read once for all of them (groups past PA_MAX_HC take more chunks, whose
//   re-reads hit L2).
// - a "key group" of L lanes (a power of two) owns one key at a time: each
//   lane loads 16 bytes of the key's K row and of its V row (8 halves or 4
//   floats; one element at a time where the head size or the pointers do not
//   allow vectors), so a row is one coalesced request. The L lanes' partial
//   dot products meet through log2(L) shuffles; 32 / L keys per warp at once,
//   PA_UNROLL (4; 2 where registers are short) of them per key group per
//   iteration, their loads issued together, and the next iteration's loads
//   issued before this one's math (registers double-buffered), so every warp
//   keeps bytes in flight while it computes. (The first version, one key's
//   softmax update after another and loads then math, streamed a batch of 64
//   at 0.73 TB/s: latency-bound.)
// - every key group keeps its own online softmax per head (running max, sum
//   and the weighted sum of V over its slice of the head) in registers, so
//   the key loop has no barrier and no cross-group traffic; per iteration the
//   U keys' scores (independent shuffle chains) come first, then one max and
//   one rescale of the sums, then the weighted V rows: no serial dependency
//   from key to key. The groups merge once at the end (shuffles within a
//   warp, shared memory across warps).
// - a key's physical row: its block id from the table and its slot, by a
//   multiply-shift division by block_tokens (pa_div; positions are int32).
// - scores in the log2 domain (q pre-scaled by scale * log2(e), exp2f): the
//   same softmax, one multiply fewer per key.
// Everything in float; the output rounded once. Causality and the sliding
// window are the key range itself (first .. pos), so no masking is needed.
// Split-K (flash-decoding) when the caller asks for splits > 1: blockIdx.z
// takes the split-th share of each token's keys and writes its unnormalised
// sums, max (log2 domain) and sum to the workspace; the last of the splits'
// blocks to finish (a counter per block of splits in the workspace, reset by
// that block) combines them, rescaled to the common max, into the output:
// no second launch (it cost a few us a layer at batch 1). That keeps the
// GPU busy when few (token, KV head) pairs have long contexts (decode at
// small batch). Simple first otherwise: a prefill chunk's tokens each re-read
// the keys before them (quadratic traffic, L2-friendly).
//
// Tensor-core prefill (k_paged_attn_args.tc_prefill, FP16 and BF16, head_dim
// a multiple of 16 up to 128, one split): every tile of 16 consecutive step
// tokens that belong to one item (a prefill chunk's, 16 at a time) runs on
// tc_prefill_kernel instead: one block per (tile, query head), 4 warps;
// keys staged 32 at a time from the paged cache into shared memory, S = Q
// K^T and O += P V as nvcuda::wmma 16x16x16 products with float
// accumulators, the online softmax in float between them (P rounded to the
// storage type for the second product, as flash attention does), the causal
// and window masks per row. The kernel above skips exactly those tiles, so
// each output row is written once.
#include <mma.h>

#include "kernels/k_cuda_common.cuh"
#include "kernels/k_pdl.cuh"

namespace {

#define PA_WARPS 4
#define PA_THREADS (PA_WARPS * 32)
#define PA_UNROLL 4      // keys per key group per iteration (PA_UNROLL_FOR)
#define PA_MAX_HC 8      // query heads per block (registers: PA_MAX_HC x 8 floats of sums a lane)
#define PA_LANE_ELEMS 8  // head elements a lane holds of each key (head_dim <= 32 x 8)
#define PA_MAX_HEAD 256
#define PA_MAX_GROUP 64
#define PA_MAX_SPLITS 32
#define PA_LOG2E 1.44269504088896340736f
#define TC_ROWS 16  // query tokens per tensor-core tile
#define TC_KEYS 32  // keys staged per round
#define TC_MAX_HEAD 128

// Whether step tokens t0 .. t0 + 15 (t0 a multiple of 16) are one item's: the
// tiles the tensor-core kernel takes. Items' tokens are consecutive in a step.
static __device__ __forceinline__ bool tc_tile(const k_llm_meta &m, int64_t t0) {
  return t0 + TC_ROWS - 1 < m.n_tok && m.tok_item[t0] == m.tok_item[t0 + TC_ROWS - 1];
}

// n / d and n % d for 0 <= n < 2^31 by a multiply and a shift (Granlund and
// Montgomery, as CUTLASS's FastDivmod): mul = ceil(2^(31 + ceil(log2 d)) / d).
struct pa_div {
  uint32_t d, mul, shr;
};

static pa_div pa_div_make(uint32_t d) {
  pa_div r = {d, 0, 0};
  if (d > 1) {
    uint32_t l = 0;
    while (((uint64_t)1 << l) < d) l++;  // ceil(log2 d)
    r.mul = (uint32_t)((((uint64_t)1 << (31 + l)) + d - 1) / d);
    r.shr = l - 1;  // the high word of n * mul is already shifted by 32
  }
  return r;
}

static __device__ __forceinline__ uint32_t pa_quot(uint32_t n, pa_div v) {
  return v.d == 1 ? n : __umulhi(n, v.mul) >> v.shr;
}

// The launch's shapes, by value.
struct pa_geom {
  int n_heads, group, d, chunks;  // chunks of HC query heads per KV head
  int lg_l;                       // log2 of the lanes per key (L)
  int row;                        // elements per cache slot (n_kv x d)
  int64_t q_stride, o_stride, window;
  pa_div bt;
  float qscale;  // scale * log2(e)
  int skip_tc;   // tc_prefill_kernel writes the rows of its tiles (tc_tile)
};

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

// The split-K workspace: per (token, query head) a region of PA_MAX_SPLITS
// partials ([d sums, max, sum] each) and one counter word (used for the
// head that starts a block's chunk), laid out the same whatever the splits
// and the step's tokens, so the counters stay where the zeroed workspace
// had them from one launch to the next.
static __host__ __device__ __forceinline__ size_t pa_ws_region(int d) {
  return (size_t)PA_MAX_SPLITS * (d + 2) + 1;
}
static __device__ __forceinline__ float *pa_ws_at(float *ws, int64_t t, int head, int n_heads, int d) {
  return ws + ((size_t)t * (size_t)n_heads + (size_t)head) * pa_ws_region(d);
}

// Keys per key group per iteration: 4, or 2 where the registers are
// already full (8 query heads' sums, or FP32's two vectors a lane per row).
#define PA_UNROLL_FOR(T, HC) ((HC) >= 8 || sizeof(T) == 4 ? 2 : PA_UNROLL)
// The shallow pipeline (k_paged_attn_args.shallow): half the keys in flight
// per key group, registers capped for PA_SHALLOW_BLOCKS blocks an SM. The
// deep one (165 registers at FP16 with 4 heads: 3 blocks an SM) hides
// latency when the grid is about one wave (decode at small batch, split-K);
// on grids of several waves (batch 64 and up) occupancy hides it better: the
// deep pipeline made batch 64's attention 130 us a layer against the
// unpipelined kernel's 95 (ncu, H200, 2026-12-03).
#define PA_SHALLOW_U(T, HC) ((HC) >= 8 || sizeof(T) == 4 ? 1 : 2)
#define PA_SHALLOW_BLOCKS 4

// Issues the loads of key group gkg's U keys base + u * nkg + gkg (those
// under n_keys; ok says which): its lanes' vectors of each K and V row.
template <class T, int V, int U, int NVL>
static __device__ __forceinline__ void pa_load(k_vec<T, V> (&kv)[U][NVL], k_vec<T, V> (&vv)[U][NVL], bool (&ok)[U],
                                               int base, int gkg, int nkg, int n_keys, int64_t jb, const int32_t *table,
                                               const pa_geom &gm, const T *__restrict__ kc, const T *__restrict__ vc,
                                               size_t head_off, int lig, int L, int nvec) {
  typedef k_vec<T, V> vec;
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int jj = base + u * nkg + gkg;
    ok[u] = jj < n_keys;
    if (ok[u]) {
      const uint32_t j = (uint32_t)(jb + jj), b = pa_quot(j, gm.bt);
      const size_t off = ((size_t)__ldg(table + b) * gm.bt.d + (j - b * gm.bt.d)) * (size_t)gm.row + head_off;
      const T *kr = kc + off, *vr = vc + off;
#pragma unroll
      for (int k = 0; k < NVL; k++) {
        const int vi = lig + k * L;
        if (vi < nvec) {
          kv[u][k] = *reinterpret_cast<const vec *>(kr + vi * V);
          vv[u][k] = *reinterpret_cast<const vec *>(vr + vi * V);
        }
      }
    }
  }
}

// T storage; V elements per load (16 bytes, or 1 for the fallback); HC the
// query heads a block handles at most (1, 2, 4 or 8: sized registers).
// Lane `lane` of key group kg holds vectors lig, lig + L, ... (< d / V) of
// each of its keys: at most PA_LANE_ELEMS elements, so NVL vectors.
template <class T, int V, int HC, int U, int MINB>
__global__ void __launch_bounds__(PA_THREADS, MINB)
    paged_attn_kernel(T *__restrict__ o, const T *__restrict__ q, const T *__restrict__ kc, const T *__restrict__ vc,
                      k_llm_meta m, pa_geom gm, float *__restrict__ ws) {
  constexpr int NVL = PA_LANE_ELEMS / V;
  typedef k_vec<T, V> vec;
  extern __shared__ float4 sh4[];
  float *sh = reinterpret_cast<float *>(sh4);
  const int d = gm.d, L = 1 << gm.lg_l, KG = 32 >> gm.lg_l, nvec = d / V;
  k_pdl_release();  // the output projection's GEMV may start streaming its weights (k_pdl.cuh)
  float *qs = sh;            // [HC][d]: the chunk's queries, times scale * log2(e)
  float *red = qs + HC * d;  // [PA_WARPS][HC][d + 2]: each warp's sums, max, sum
  const int t = blockIdx.x, g = blockIdx.y / gm.chunks, h0 = (blockIdx.y % gm.chunks) * HC;
  if (gm.skip_tc && tc_tile(m, (int64_t)(t & ~(TC_ROWS - 1)))) return;  // block-uniform, before any barrier
  const int nh = gm.group - h0 < HC ? gm.group - h0 : HC;               // block-uniform
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int lig = lane & (L - 1), kg = lane >> gm.lg_l, nkg = PA_WARPS * KG, gkg = warp * KG + kg;
  const int64_t p = m.tok_pos[t];
  const int32_t *table = m.tables + m.table_off[m.tok_item[t]];
  const int64_t first = gm.window > 0 && p - gm.window + 1 > 0 ? p - gm.window + 1 : 0;
  // this split's keys jb .. jb + n_keys - 1 (all of them without splits);
  // more splits than keys leaves some empty
  const int splits = gridDim.z, sp = blockIdx.z;
  const int64_t all = p - first + 1, per = (all + splits - 1) / splits, jb = first + (int64_t)sp * per;
  const int n_keys = (int)(jb > p ? 0 : (p - jb + 1 < per ? p - jb + 1 : per));
  const size_t head_off = (size_t)g * d;
  // The loop is warp-uniform (every lane takes every shuffle); a key group
  // past the split's last key loads nothing and updates nothing. The next
  // iteration's K and V rows are loaded (kn, vn) before this one's math, so
  // a warp always has loads in flight, table lookup included; the first
  // iteration's before even the queries are staged.
  const int step = U * nkg;
  vec kn[U][NVL], vn[U][NVL];  // vectors no lane loads stay zero (defined, never used)
  bool okn[U];
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int k = 0; k < NVL; k++)
#pragma unroll
      for (int e = 0; e < V; e++) kn[u][k].v[e] = vn[u][k].v[e] = k_st<T>(0.0f);
  pa_load<T, V, U, NVL>(kn, vn, okn, 0, gkg, nkg, n_keys, jb, table, gm, kc, vc, head_off, lig, L, nvec);
  // the queries meanwhile (the first keys' loads are already in flight)
  const T *qt = q + (size_t)t * (size_t)gm.q_stride + (size_t)(g * gm.group + h0) * d;
  for (int i = tid; i < nh * d; i += PA_THREADS) qs[i] = k_ld(qt[i]) * gm.qscale;
  __syncthreads();

  float acc[HC][PA_LANE_ELEMS], mx[HC], ls[HC];
#pragma unroll
  for (int h = 0; h < HC; h++) {
    mx[h] = -INFINITY, ls[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < PA_LANE_ELEMS; e++) acc[h][e] = 0.0f;
  }
  for (int base = 0; base < n_keys; base += step) {
    vec kv[U][NVL], vv[U][NVL];
    bool ok[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      ok[u] = okn[u];
#pragma unroll
      for (int k = 0; k < NVL; k++) kv[u][k] = kn[u][k], vv[u][k] = vn[u][k];
    }
    if (base + step < n_keys)  // block-uniform
      pa_load<T, V, U, NVL>(kn, vn, okn, base + step, gkg, nkg, n_keys, jb, table, gm, kc, vc, head_off, lig, L, nvec);
    // the U keys' scores for every head first (independent shuffle chains)
    float sc[U][HC];
#pragma unroll
    for (int u = 0; u < U; u++) {
      float kf[PA_LANE_ELEMS];
#pragma unroll
      for (int k = 0; k < NVL; k++) {
        const bool in = ok[u] && lig + k * L < nvec;
#pragma unroll
        for (int e = 0; e < V; e++) kf[k * V + e] = in ? k_ld(kv[u][k].v[e]) : 0.0f;
      }
#pragma unroll
      for (int h = 0; h < HC; h++) {
        float sh_ = 0.0f;
        if (h < nh) {  // block-uniform: the shuffles stay converged
#pragma unroll
          for (int k = 0; k < NVL; k++) {
            const int vi = lig + k * L;
            if (vi < nvec) {
              const float *qv = qs + h * d + vi * V;
              if (V % 4 == 0) {  // 16-byte shared loads (d % V == 0 keeps them aligned)
#pragma unroll
                for (int e = 0; e < V; e += 4) {
                  float4 q4 = *reinterpret_cast<const float4 *>(qv + e);
                  sh_ = fmaf(q4.x, kf[k * V + e], sh_);
                  sh_ = fmaf(q4.y, kf[k * V + e + 1], sh_);
                  sh_ = fmaf(q4.z, kf[k * V + e + 2], sh_);
                  sh_ = fmaf(q4.w, kf[k * V + e + 3], sh_);
                }
              } else {
#pragma unroll
                for (int e = 0; e < V; e++) sh_ = fmaf(qv[e], kf[k * V + e], sh_);
              }
            }
          }
          for (int w = L >> 1; w > 0; w >>= 1) sh_ += __shfl_xor_sync(0xffffffffu, sh_, w);
        }
        sc[u][h] = sh_;
      }
    }
    // online softmax, log2 domain, once per iteration: the new max over the
    // group's valid keys, one rescale of the sums, then each key's weight.
    // A group with no key yet and none now keeps max -inf and sums 0.
#pragma unroll
    for (int h = 0; h < HC; h++) {
      if (h >= nh) continue;
      float mn = mx[h];
#pragma unroll
      for (int u = 0; u < U; u++)
        if (ok[u]) mn = fmaxf(mn, sc[u][h]);
      if (mn == -INFINITY) continue;
      const float a = exp2f(mx[h] - mn);  // 0 on the first keys (mx -inf): the sums are 0 then anyway
      ls[h] *= a;
#pragma unroll
      for (int e = 0; e < PA_LANE_ELEMS; e++) acc[h][e] *= a;
      mx[h] = mn;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (!ok[u]) continue;
      float vf[PA_LANE_ELEMS];
#pragma unroll
      for (int k = 0; k < NVL; k++) {
        const bool in = lig + k * L < nvec;
#pragma unroll
        for (int e = 0; e < V; e++) vf[k * V + e] = in ? k_ld(vv[u][k].v[e]) : 0.0f;
      }
#pragma unroll
      for (int h = 0; h < HC; h++) {
        if (h >= nh) continue;
        const float pw = exp2f(sc[u][h] - mx[h]);
        ls[h] += pw;
#pragma unroll
        for (int e = 0; e < PA_LANE_ELEMS; e++) acc[h][e] = fmaf(pw, vf[e], acc[h][e]);
      }
    }
  }

  // Merge the key groups of each warp (shuffles over the lanes L apart),
  // then the warps (shared memory). A group or warp without keys has max
  // -inf and weighs 0.
#pragma unroll
  for (int h = 0; h < HC; h++) {
    if (h >= nh) continue;  // block-uniform
    float M = mx[h];
    for (int w = L; w < 32; w <<= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, w));
    const float f = mx[h] == -INFINITY ? 0.0f : exp2f(mx[h] - M);
    float l = ls[h] * f;
    for (int w = L; w < 32; w <<= 1) l += __shfl_xor_sync(0xffffffffu, l, w);
    float *rw = red + (size_t)(warp * HC + h) * (d + 2);
#pragma unroll
    for (int k = 0; k < NVL; k++) {
#pragma unroll
      for (int e = 0; e < V; e++) {
        float a = acc[h][k * V + e] * f;
        for (int w = L; w < 32; w <<= 1) a += __shfl_xor_sync(0xffffffffu, a, w);
        const int vi = lig + k * L;
        if (kg == 0 && vi < nvec) rw[vi * V + e] = a;
      }
    }
    if (lane == 0) rw[d] = M, rw[d + 1] = l;
  }
  __syncthreads();
  for (int i = tid; i < nh * d; i += PA_THREADS) {
    const int h = i / d, c = i - h * d;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < PA_WARPS; w++) M = fmaxf(M, red[(size_t)(w * HC + h) * (d + 2) + d]);
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < PA_WARPS; w++) {
      const float *rw = red + (size_t)(w * HC + h) * (d + 2);
      if (rw[d] == -INFINITY) continue;  // a warp without keys
      const float f = exp2f(rw[d] - M);
      num = fmaf(f, rw[c], num);
      den = fmaf(f, rw[d + 1], den);
    }
    const int head = g * gm.group + h0 + h;
    if (splits == 1) {  // every token has a key (its own), so den > 0
      o[(size_t)t * (size_t)gm.o_stride + (size_t)head * d + c] = k_st<T>(num / den);
    } else {
      // partials (pa_ws_at): an empty split leaves max -inf and sum 0,
      // which the combine skips
      float *w = pa_ws_at(ws, t, head, gm.n_heads, d) + (size_t)sp * (d + 2);
      w[c] = num;
      if (c == 0) w[d] = M, w[d + 1] = den;
    }
  }
  if (splits == 1) return;
  // Split-K: the last of the splits' blocks of this (token, KV head, chunk)
  // to finish combines them (no second launch): each block publishes its
  // partials (fence), then counts itself in; the one that sees splits - 1
  // before it resets the counter (graphs replay the launch) and reads the
  // others' partials from L2 (__ldcg: L1 is not coherent across SMs).
  __shared__ int pa_last;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    unsigned *cnt = reinterpret_cast<unsigned *>(pa_ws_at(ws, t, g * gm.group + h0, gm.n_heads, d)) +
                    (size_t)PA_MAX_SPLITS * (d + 2);
    const unsigned prev = atomicAdd(cnt, 1u);
    pa_last = prev == (unsigned)(splits - 1);
    if (pa_last) atomicExch(cnt, 0u);
  }
  __syncthreads();
  if (!pa_last) return;  // block-uniform
  __threadfence();
  // the splits' maxima and sums (one load a thread), then per head the
  // common max, each split's weight 2^(max_s - max) (0 for an empty split)
  // and the denominator, then every output element as a weighted sum over
  // the splits (independent loads, unrolled so several are in flight)
  __shared__ float pa_mx[HC * PA_MAX_SPLITS], pa_l[HC * PA_MAX_SPLITS], pa_den[HC];
  for (int i = tid; i < nh * splits; i += PA_THREADS) {
    const int h = i / splits, s2 = i - h * splits;
    const float *w = pa_ws_at(ws, t, g * gm.group + h0 + h, gm.n_heads, d) + (size_t)s2 * (d + 2);
    pa_mx[h * PA_MAX_SPLITS + s2] = __ldcg(w + d);
    pa_l[h * PA_MAX_SPLITS + s2] = __ldcg(w + d + 1);
  }
  __syncthreads();
  if (tid < nh) {
    float M = -INFINITY, den = 0.0f;
    for (int s2 = 0; s2 < splits; s2++) M = fmaxf(M, pa_mx[tid * PA_MAX_SPLITS + s2]);
    for (int s2 = 0; s2 < splits; s2++) {
      const float l = pa_l[tid * PA_MAX_SPLITS + s2];
      const float f = l == 0.0f ? 0.0f : exp2f(pa_mx[tid * PA_MAX_SPLITS + s2] - M);  // an empty split weighs 0
      pa_mx[tid * PA_MAX_SPLITS + s2] = f;                                            // now the weight
      den = fmaf(f, l, den);
    }
    pa_den[tid] = den;
  }
  __syncthreads();
  for (int i = tid; i < nh * d; i += PA_THREADS) {
    const int h = i / d, c = i - h * d, head = g * gm.group + h0 + h;
    const float *w = pa_ws_at(ws, t, head, gm.n_heads, d) + c;
    const float *f = pa_mx + h * PA_MAX_SPLITS;
    float num = 0.0f;
#pragma unroll 8
    for (int s2 = 0; s2 < splits; s2++) num = fmaf(f[s2], __ldcg(w + (size_t)s2 * (d + 2)), num);
    o[(size_t)t * (size_t)gm.o_stride + (size_t)head * d + c] = k_st<T>(num / pa_den[h]);
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
  T *ps = vs + TC_KEYS * ld;                 // [16][40]
  float *ss = (float *)(ps + TC_ROWS * 40);  // [16][36]
  float *os = ss + TC_ROWS * 36;             // [16][lo]
  float *pv = os + TC_ROWS * lo;             // [16][lo]
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

// SH: the shallow pipeline (vector loads only: the one-element fallback is
// not the path a decode step's shapes take, so it keeps one instantiation).
template <class T, int V, int HC, bool SH>
void pa_launch_one(dim3 grid, size_t smem, cudaStream_t stream, T *o, const T *q, const T *kc, const T *vc,
                   const k_llm_meta &m, const pa_geom &gm, float *ws) {
  if (SH)
    paged_attn_kernel<T, V, HC, PA_SHALLOW_U(T, HC), PA_SHALLOW_BLOCKS>
        <<<grid, PA_THREADS, smem, stream>>>(o, q, kc, vc, m, gm, ws);
  else
    paged_attn_kernel<T, V, HC, PA_UNROLL_FOR(T, HC), 1><<<grid, PA_THREADS, smem, stream>>>(o, q, kc, vc, m, gm, ws);
}

template <class T, int V, bool SH>
void pa_launch_hc(int hc, dim3 grid, size_t smem, cudaStream_t stream, T *o, const T *q, const T *kc, const T *vc,
                  const k_llm_meta &m, const pa_geom &gm, float *ws) {
  switch (hc) {
    case 1:
      pa_launch_one<T, V, 1, SH>(grid, smem, stream, o, q, kc, vc, m, gm, ws);
      break;
    case 2:
      pa_launch_one<T, V, 2, SH>(grid, smem, stream, o, q, kc, vc, m, gm, ws);
      break;
    case 4:
      pa_launch_one<T, V, 4, SH>(grid, smem, stream, o, q, kc, vc, m, gm, ws);
      break;
    default:
      pa_launch_one<T, V, 8, SH>(grid, smem, stream, o, q, kc, vc, m, gm, ws);
      break;
  }
}

// The attention launch for storage T: 16-byte rows where the head size and
// the caches allow (every row of a KV head then starts 16-byte aligned),
// else one element a load. Fills in the lanes per key (gm.lg_l) and the
// shared memory; then the combine when split.
template <class T>
void pa_launch(int hc, int shallow, dim3 grid, cudaStream_t stream, T *o, const T *q, const T *kc, const T *vc,
               const k_llm_meta &m, pa_geom gm, float *ws) {
  constexpr int VV = (int)(16 / sizeof(T));
  const bool vec = gm.d % VV == 0 && k_aligned(kc, 16) && k_aligned(vc, 16);
  const int v = vec ? VV : 1, lanes = (gm.d / v + PA_LANE_ELEMS / v - 1) / (PA_LANE_ELEMS / v);
  gm.lg_l = 0;
  while ((1 << gm.lg_l) < lanes) gm.lg_l++;  // <= 5: d <= 256 = 32 lanes x 8
  size_t smem = ((size_t)hc * gm.d + (size_t)PA_WARPS * hc * (gm.d + 2)) * sizeof(float);
  if (vec && shallow)
    pa_launch_hc<T, VV, true>(hc, grid, smem, stream, o, q, kc, vc, m, gm, ws);
  else if (vec)
    pa_launch_hc<T, VV, false>(hc, grid, smem, stream, o, q, kc, vc, m, gm, ws);
  else
    pa_launch_hc<T, 1, false>(hc, grid, smem, stream, o, q, kc, vc, m, gm, ws);
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
  return splits > 1 ? (size_t)n_tok * (size_t)n_heads * pa_ws_region((int)head_dim) : 0;
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
      a->block_tokens > 0x7fffffff || a->q_stride < a->n_heads * a->head_dim || a->o_stride < a->n_heads * a->head_dim)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s: %lld heads over %lld KV heads of %lld, strides q %lld o %lld, %lld-token blocks", kname,
                   (long long)a->n_heads, (long long)a->n_kv_heads, (long long)a->head_dim, (long long)a->q_stride,
                   (long long)a->o_stride, (long long)a->block_tokens);
  int64_t group = a->n_heads / a->n_kv_heads;
  if (a->head_dim > PA_MAX_HEAD || group > PA_MAX_GROUP)
    return err_set(e, ERR_UNIMPLEMENTED, "%s: head_dim %lld (at most %d) or %lld query heads per KV head (at most %d)",
                   kname, (long long)a->head_dim, PA_MAX_HEAD, (long long)group, PA_MAX_GROUP);
  // query heads per block: the group's power of two up to PA_MAX_HC (a
  // group of 6 runs as one chunk of 8 with 2 idle), larger groups in chunks
  int hc = 1;
  while (hc < group && hc < PA_MAX_HC) hc *= 2;
  int64_t chunks = (group + hc - 1) / hc;
  if (m->n_tok > 0x7fffffff || a->n_kv_heads * chunks > 65535)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: grid of %lld tokens x %lld KV heads too large", kname,
                   (long long)m->n_tok, (long long)a->n_kv_heads);
  if (splits < 1 || splits > PA_MAX_SPLITS || (splits > 1 && !ws))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %d splits (1 .. %d, with a workspace past 1)", kname, splits,
                   PA_MAX_SPLITS);
  // shared memory: the chunk's queries and the warps' partials; at most
  // (8 x 256 + 4 x 8 x 258) floats = 41,216 bytes, plus the split combine's
  // static 2,084 at most: under the 48 KiB default
  pa_geom gm;
  gm.n_heads = (int)a->n_heads;
  gm.group = (int)group;
  gm.d = (int)a->head_dim;
  gm.chunks = (int)chunks;
  gm.lg_l = 0;  // pa_launch's
  gm.row = (int)(a->n_kv_heads * a->head_dim);
  gm.q_stride = a->q_stride;
  gm.o_stride = a->o_stride;
  gm.window = a->window;
  gm.bt = pa_div_make((uint32_t)a->block_tokens);
  gm.qscale = a->scale * PA_LOG2E;
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
          (__nv_bfloat16 *)o, (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k_cache, (const __nv_bfloat16 *)v_cache,
          *m, (int)a->n_heads, (int)a->n_kv_heads, (int)a->head_dim, a->q_stride, a->o_stride, a->block_tokens,
          a->window, a->scale);
    K_LAUNCH_CHECK(e, kname);
  }
  gm.skip_tc = tc;
  dim3 grid((unsigned)m->n_tok, (unsigned)(a->n_kv_heads * chunks), (unsigned)splits);
  K_DT_DISPATCH(e, kname, dt, T,
                pa_launch<T>(hc, a->shallow, grid, stream, (T *)o, (const T *)q, (const T *)k_cache, (const T *)v_cache,
                             *m, gm, ws));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
