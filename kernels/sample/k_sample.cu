// kernels/sample/k_sample.cu: k_sample_rows_cuda (k_cuda.h), a token drawn
// per row of a step's logits on the GPU (issue 35 item 5), so that only
// int32 ids cross to the host; the rule of k_sample.h, bit for bit
// kernels/sample/k_sample.c's. Every mass is an exact uint64 sum of integer
// weights, so blocks may sum in any order and split a row between them.
//
// Three launches (a CUDA graph captures them like one):
//  1. keys: grid (rows, G), G = ks_groups(vocab) blocks of up to KS_CHUNK
//     ids a row (63 at 128,256: a batch of one fills the GPU). Each block
//     writes its ids' keys (the high words; the id is the index), applies
//     the repetition penalty to the seen ids in its range, its smallest key
//     into the row's block tops, and zeroes its share of the row's bins.
//  2. bins: the same grid. The row's top from the blocks' tops, then per id
//     x = logit - top, its bin (KS_BIN_SCALE bins a nat: monotone in the
//     key, so bins are runs of the sorted order) and weight; a shared
//     histogram of counts and weights, flushed by atomics into the row's;
//     min_p's first key (the smallest key after top below the floor) by an
//     atomic min.
//  3. select: one block of KS_BINS threads a row. Prefix sums of the bins
//     say which bin holds each cut (top_k's k-th key, top_p's head, the
//     draw); only that bin's keys are gathered (one read of the row's
//     words), sorted in shared memory (bitonic) and walked with the exact
//     prefix sum. A bin of more than CAP keys (all logits equal; top_k deep
//     in a flat tail) is first narrowed by a radix select over its keys, 8
//     bits a pass, to a range of at most CAP: slower, the same answer.
#include "kernels/k_cuda_common.cuh"
#include "kernels/sample/k_sample.h"
#include "kernels/sample/k_sample_rule.h"

namespace {

typedef unsigned long long ull;

#define NONE 0xffffffffffffffffull
#define FULL 0xffffffffu
#define TA 256      // threads of launches 1 and 2
#define TF KS_BINS  // threads of launch 3: one a bin
#define CAP 4096    // a bin's keys sorted in shared memory at most
#define PER (CAP / TF)

static_assert(TF == 1024, "launch 3: one thread a bin, 32 warps");
static_assert(KS_GMAX <= TA, "launch 2 reads the block tops one a thread");

struct row_ws {
  uint32_t *a;  // the keys' high words (ks_desc32 of the tempered logits)
  ull *w;       // the bins' weights
  uint32_t *n;  // the bins' counts
  ull *part;    // the blocks' smallest keys
  ull *first;   // min_p's first key
};

static __device__ row_ws ws_row(uint8_t *ws, uint32_t V, size_t r) {
  uint8_t *b = ws + r * ks_row_bytes(V);
  return row_ws{(uint32_t *)b, (ull *)(b + ks_off_w(V)), (uint32_t *)(b + ks_off_n(V)), (ull *)(b + ks_off_part(V)),
                (ull *)(b + ks_off_first(V))};
}

// x = logit - top (<= 0; -inf for -inf logits): KS_BIN_SCALE bins a nat,
// the last one holding everything further down. Non-decreasing in the key.
static __device__ __forceinline__ uint32_t bin_of(float x) {
  float f = -x * KS_BIN_SCALE;
  return f < (float)(KS_BINS - 1) ? (uint32_t)f : (uint32_t)(KS_BINS - 1);
}

enum { OP_MIN, OP_MAX, OP_SUM };

template <int OP>
static __device__ __forceinline__ ull op2(ull a, ull b) {
  return OP == OP_MIN ? (a < b ? a : b) : OP == OP_MAX ? (a > b ? a : b) : a + b;
}

// The block's min, max or sum (exact: integers), every thread gets it. sh: 33.
template <int OP>
static __device__ ull block_red(ull v, ull *sh) {
  const ull id = OP == OP_MIN ? NONE : 0;
  for (int o = 16; o > 0; o >>= 1) v = op2<OP>(v, __shfl_down_sync(FULL, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();  // the previous call's result has been read
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nw ? sh[lane] : id;
    for (int o = 16; o > 0; o >>= 1) v = op2<OP>(v, __shfl_down_sync(FULL, v, o));
    if (lane == 0) sh[32] = v;
  }
  __syncthreads();
  return sh[32];
}

// The block's exclusive prefix sum of v (thread order); *total: the whole.
// sh: 33.
static __device__ ull block_excl_scan(ull v, ull *sh, ull *total) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  ull x = v;
  for (int o = 1; o < 32; o <<= 1) {
    ull y = __shfl_up_sync(FULL, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) sh[warp] = x;
  __syncthreads();
  if (warp == 0) {
    ull y = lane < nw ? sh[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      ull z = __shfl_up_sync(FULL, y, o);
      if (lane >= o) y += z;
    }
    sh[lane] = y;
  }
  __syncthreads();
  ull before = (warp ? sh[warp - 1] : 0) + x - v;
  *total = sh[nw - 1];
  return before;
}

// ids [i0, i1) of block (row, g) of launches 1 and 2.
static __device__ void chunk(uint32_t V, uint32_t *i0, uint32_t *i1) {
  uint32_t G = gridDim.y, C = (V + G - 1) / G, g = blockIdx.y;
  uint64_t a = (uint64_t)g * C, b = a + C;
  *i0 = a < V ? (uint32_t)a : V;
  *i1 = b < V ? (uint32_t)b : V;
}

// --- launch 1: keys

template <class T>
__global__ void __launch_bounds__(TA)
    keys_kernel(const T *x, uint8_t *ws, uint32_t V, const k_sample_param *params, const int32_t *seen) {
  __shared__ ull sh[33];
  const size_t r = blockIdx.x;
  const k_sample_param p = params[r];
  if (!p.mode) return;
  row_ws w = ws_row(ws, V, r);
  // the row's bins and min_p's slot start empty for launch 2
  for (uint32_t b = blockIdx.y * TA + threadIdx.x; b < KS_BINS; b += gridDim.y * TA) w.w[b] = 0, w.n[b] = 0;
  if (blockIdx.y == 0 && threadIdx.x == 0) *w.first = NONE;
  uint32_t i0, i1;
  chunk(V, &i0, &i1);
  const T *xr = x + r * V;
  bool pen = p.repetition_penalty > 0 && p.repetition_penalty != 1;
  bool greedy = !(p.temperature > 0);
  float inv_t = greedy ? 1.0f : 1.0f / p.temperature;
  ull top = NONE;
  if (pen) {
    for (uint32_t i = i0 + threadIdx.x; i < i1; i += TA) w.a[i] = ks_desc32(ks_canon(k_ld(xr[i])));
    __syncthreads();
    // the seen ids of this block's range (a repeated id is written twice with the same value)
    for (int64_t j = threadIdx.x; j < p.n_seen; j += TA) {
      int32_t t = seen[p.seen_off + j];
      if (t >= 0 && (uint32_t)t >= i0 && (uint32_t)t < i1)
        w.a[t] = ks_desc32(ks_penalize(ks_canon(k_ld(xr[t])), p.repetition_penalty));
    }
    __syncthreads();
    for (uint32_t i = i0 + threadIdx.x; i < i1; i += TA) {
      uint32_t d = w.a[i];
      if (!greedy) w.a[i] = d = ks_desc32(ks_canon(ks_undesc32(d) * inv_t));
      ull k = ks_key(d, i);
      top = k < top ? k : top;
    }
  } else {  // one pass: no penalised ids to overwrite
    for (uint32_t i = i0 + threadIdx.x; i < i1; i += TA) {
      float v = ks_canon(k_ld(xr[i]));
      if (!greedy) v = ks_canon(v * inv_t);
      uint32_t d = ks_desc32(v);
      w.a[i] = d;
      ull k = ks_key(d, i);
      top = k < top ? k : top;
    }
  }
  top = block_red<OP_MIN>(top, sh);
  if (threadIdx.x == 0) w.part[blockIdx.y] = top;
}

// The row's top key from its blocks' (ng of them).
static __device__ ull row_top(const row_ws &w, uint32_t ng, ull *sh) {
  return block_red<OP_MIN>(threadIdx.x < ng ? w.part[threadIdx.x] : NONE, sh);
}

// --- launch 2: bins

__global__ void __launch_bounds__(TA) bins_kernel(uint8_t *ws, uint32_t V, const k_sample_param *params) {
  __shared__ ull sw[KS_BINS];
  __shared__ uint32_t sn[KS_BINS];
  __shared__ ull sh[33];
  const size_t r = blockIdx.x;
  const k_sample_param p = params[r];
  if (!p.mode || !(p.temperature > 0)) return;
  row_ws w = ws_row(ws, V, r);
  ull top = row_top(w, gridDim.y, sh);
  float mx = ks_undesc32((uint32_t)(top >> 32));
  if (isinf(mx)) return;  // launch 3 returns top's id
  int F = ks_wbits(V);
  ull floor_w = p.min_p > 0 ? ks_ceil_mul(p.min_p, (double)(1ull << F)) : 0;
  for (uint32_t b = threadIdx.x; b < KS_BINS; b += TA) sw[b] = 0, sn[b] = 0;
  __syncthreads();
  uint32_t i0, i1;
  chunk(V, &i0, &i1);
  ull first = NONE;
  for (uint32_t i = i0 + threadIdx.x; i < i1; i += TA) {
    uint32_t d = w.a[i];
    float x = ks_undesc32(d) - mx;
    ull wt = ks_weight(x, F);
    uint32_t b = bin_of(x);
    atomicAdd(&sn[b], 1u);
    if (wt) atomicAdd(&sw[b], wt);
    ull k = ks_key(d, i);
    if (wt < floor_w && k > top && k < first) first = k;
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < KS_BINS; b += TA)
    if (sn[b]) {
      atomicAdd(&w.n[b], sn[b]);
      if (sw[b]) atomicAdd(&w.w[b], sw[b]);
    }
  if (p.min_p > 0) {
    first = block_red<OP_MIN>(first, sh);
    if (threadIdx.x == 0 && first != NONE) atomicMin(w.first, first);
  }
}

// --- launch 3: select

struct fin_shared {
  ull pw[KS_BINS];       // the bins' weights, inclusive prefix sums
  uint32_t pn[KS_BINS];  // the bins' counts, inclusive prefix sums
  ull keys[CAP];         // one bin's gathered keys, then sorted
  ull sh[33];
  uint32_t cnt, bin;
  ull res_key, res_pre;
};

// The row's state in launch 3.
struct fin_row {
  const uint32_t *a;
  uint32_t V;
  float mx;
  int F;
};

static __device__ __forceinline__ ull weight_of(const fin_row &f, ull key) {
  return ks_weight(ks_undesc32((uint32_t)(key >> 32)) - f.mx, f.F);
}

// The first bin b <= bc whose cumulative c(b) reaches thr (1 <= thr <=
// c(bc)): c(b) = pre[b] below bc, last at bc (bc's keys past the cut left
// out). One thread a bin.
template <class P>
static __device__ uint32_t find_bin(const P *pre, uint32_t bc, ull last, ull thr, fin_shared *s) {
  uint32_t b = threadIdx.x;
  if (b <= bc) {
    ull cb = b < bc ? pre[b] : last, cp = b ? pre[b - 1] : 0;
    if (cp < thr && thr <= cb) s->bin = b;
  }
  __syncthreads();
  uint32_t r = s->bin;
  __syncthreads();
  return r;
}

// The keys of bin b in [klo, khi] into s->keys (the first CAP of them, in
// no order); returns how many there are.
static __device__ uint32_t gather(const fin_row &f, uint32_t b, ull klo, ull khi, fin_shared *s) {
  int lane = threadIdx.x & 31;
  if (threadIdx.x == 0) s->cnt = 0;
  __syncthreads();
  for (uint32_t base = 0; base < f.V; base += TF) {  // uniform trip count: the ballot needs whole warps
    uint32_t i = base + threadIdx.x;
    ull k = 0;
    bool in = false;
    if (i < f.V) {
      uint32_t d = f.a[i];
      k = ks_key(d, i);
      in = k >= klo && k <= khi && bin_of(ks_undesc32(d) - f.mx) == b;
    }
    unsigned ball = __ballot_sync(FULL, in);
    if (!ball) continue;
    uint32_t at = 0;
    if (lane == 0) at = atomicAdd(&s->cnt, (uint32_t)__popc(ball));
    at = __shfl_sync(FULL, at, 0);
    if (in) {
      uint32_t pos = at + (uint32_t)__popc(ball & ((1u << lane) - 1));
      if (pos < CAP) s->keys[pos] = k;
    }
  }
  __syncthreads();
  uint32_t m = s->cnt;
  __syncthreads();
  return m;
}

// s->keys[0..m) (m <= CAP) sorted, then the first whose count (BY_COUNT) or
// weight from the first reaches need (1 <= need <= theirs); *pre: the
// weight up to it.
static __device__ ull sort_walk(const fin_row &f, uint32_t m, ull need, bool by_count, fin_shared *s, ull *pre) {
  uint32_t P = 1;
  while (P < m) P <<= 1;
  for (uint32_t j = m + threadIdx.x; j < P; j += TF) s->keys[j] = NONE;
  __syncthreads();
  for (uint32_t k = 2; k <= P; k <<= 1)  // bitonic sort, ascending
    for (uint32_t j = k >> 1; j > 0; j >>= 1) {
      for (uint32_t i = threadIdx.x; i < P; i += TF) {
        uint32_t o = i ^ j;
        if (o > i) {
          ull u = s->keys[i], v = s->keys[o];
          if ((u > v) == ((i & k) == 0)) s->keys[i] = v, s->keys[o] = u;
        }
      }
      __syncthreads();
    }
  // thread t holds sorted places PER t .. PER t + PER - 1
  ull wl[PER], sum = 0, tot;
#pragma unroll
  for (int q = 0; q < PER; q++) {
    uint32_t j = threadIdx.x * PER + q;
    wl[q] = j < m ? weight_of(f, s->keys[j]) : 0;
    sum += wl[q];
  }
  ull before = block_excl_scan(sum, s->sh, &tot);
#pragma unroll
  for (int q = 0; q < PER; q++) {
    uint32_t j = threadIdx.x * PER + q;
    ull after = before + wl[q];
    bool hit = by_count ? j + 1 == need : before < need && need <= after;
    if (j < m && hit) s->res_key = s->keys[j], s->res_pre = after;
    before = after;
  }
  __syncthreads();
  *pre = s->res_pre;
  ull c = s->res_key;
  __syncthreads();
  return c;
}

// refine for a bin of more than CAP keys (all logits equal; a cut deep in a
// flat tail): a radix select over the keys' offsets from the bin's smallest,
// 8 bits a pass (256 counts and weights in shared memory, over s->keys'
// storage), until the range holding the answer has at most CAP keys, which
// sort_walk finishes. Integer sums: the same answer as one sort.
static __device__ ull refine_radix(const fin_row &f, uint32_t b, ull cap, ull need, bool by_count, fin_shared *s,
                                   ull *pre) {
  ull lo = NONE, hi = 0;
  for (uint32_t i = threadIdx.x; i < f.V; i += TF) {
    uint32_t d = f.a[i];
    ull k = ks_key(d, i);
    if (k <= cap && bin_of(ks_undesc32(d) - f.mx) == b) lo = k < lo ? k : lo, hi = k > hi ? k : hi;
  }
  lo = block_red<OP_MIN>(lo, s->sh);
  hi = block_red<OP_MAX>(hi, s->sh);
  ull *hw = s->keys, acc = 0;  // acc: the weight of the bin's keys below lo
  uint32_t *hn = (uint32_t *)(s->keys + 256);
  for (;;) {  // the answer lies in [lo, hi]; need counts from lo
    ull span = hi - lo;
    int shift = span >> 8 ? 64 - __clzll((long long)span) - 8 : 0;  // (span >> shift) <= 255
    if (threadIdx.x < 256) hw[threadIdx.x] = 0, hn[threadIdx.x] = 0;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < f.V; i += TF) {
      uint32_t d = f.a[i];
      ull k = ks_key(d, i);
      float x = ks_undesc32(d) - f.mx;
      if (k >= lo && k <= hi && bin_of(x) == b) {
        uint32_t q = (uint32_t)((k - lo) >> shift);
        atomicAdd(&hn[q], 1u);
        atomicAdd(&hw[q], ks_weight(x, f.F));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      ull c = 0, wsum = 0;
      uint32_t q = 0;
      for (; q < 255; q++) {
        ull v = by_count ? (ull)hn[q] : hw[q];
        if (c + v >= need) break;
        c += v, wsum += hw[q];
      }
      s->bin = q, s->res_key = c, s->res_pre = wsum, s->cnt = hn[q];
    }
    __syncthreads();
    uint32_t q = s->bin, n = s->cnt;
    need -= s->res_key, acc += s->res_pre;
    ull wq = hw[q];
    __syncthreads();
    lo += (ull)q << shift;
    if (lo + ((1ull << shift) - 1) < hi) hi = lo + ((1ull << shift) - 1);
    if (shift == 0) {  // one key: [lo, lo]
      *pre = acc + wq;
      return lo;
    }
    if (n <= CAP) {
      uint32_t m = gather(f, b, lo, hi, s);
      ull c = sort_walk(f, m, need, by_count, s, pre);
      *pre += acc;
      return c;
    }
  }
}

// The smallest key c <= cap of bin b whose count (BY_COUNT) or weight of the
// bin's keys <= c reaches need (1 <= need <= the bin's, under cap); *pre:
// the weight of the bin's keys <= c.
static __device__ ull refine(const fin_row &f, uint32_t b, ull cap, ull need, bool by_count, fin_shared *s, ull *pre) {
  uint32_t m = gather(f, b, 0, cap, s);
  if (m > CAP) return refine_radix(f, b, cap, need, by_count, s, pre);
  return sort_walk(f, m, need, by_count, s, pre);
}

__global__ void __launch_bounds__(TF)
    select_kernel(int32_t *ids, uint8_t *ws, uint32_t V, const k_sample_param *params) {
  __shared__ fin_shared s;
  const size_t r = blockIdx.x;
  const k_sample_param p = params[r];
  if (!p.mode) return;
  row_ws w = ws_row(ws, V, r);
  ull top = row_top(w, ks_groups(V), s.sh);
  float mx = ks_undesc32((uint32_t)(top >> 32));
  if (!(p.temperature > 0) || isinf(mx)) {
    if (threadIdx.x == 0) ids[r] = (int32_t)(uint32_t)top;
    return;
  }
  fin_row f = {w.a, V, mx, ks_wbits(V)};
  // the bins' prefix sums (one thread a bin)
  ull tw, tn, bw = w.w[threadIdx.x], bn = w.n[threadIdx.x];
  s.pw[threadIdx.x] = block_excl_scan(bw, s.sh, &tw) + bw;
  s.pn[threadIdx.x] = (uint32_t)(block_excl_scan(bn, s.sh, &tn) + bn);  // <= vocab
  __syncthreads();
  // top_k: the k-th key ck; total: the weight of the keys <= ck
  const uint32_t LAST = KS_BINS - 1;
  ull cut = NONE, kept = tw, pre;
  uint32_t bc = LAST;  // the cut's bin: below it every key is kept
  if (p.top_k > 0 && (uint32_t)p.top_k < V) {
    ull k = (ull)p.top_k;
    uint32_t b = find_bin(s.pn, LAST, tn, k, &s);
    cut = refine(f, b, NONE, k - (b ? s.pn[b - 1] : 0), true, &s, &pre);
    bc = b, kept = (b ? s.pw[b - 1] : 0) + pre;
  }
  // top_p: the head up to the first key whose head reaches top_p of the mass
  if (p.top_p > 0 && p.top_p < 1) {
    ull thr = ks_ceil_mul(p.top_p, (double)kept);
    if (thr < kept) {
      uint32_t b = find_bin(s.pw, bc, kept, thr, &s);
      ull below = b ? s.pw[b - 1] : 0;
      cut = refine(f, b, b == bc ? cut : NONE, thr - below, false, &s, &pre);
      bc = b, kept = below + pre;
    }
  }
  // min_p: the head ends before its first key under the floor
  if (p.min_p > 0) {
    ull first = *w.first;
    if (first != NONE && first <= cut) {
      uint32_t b = bin_of(ks_undesc32((uint32_t)(first >> 32)) - mx);
      ull v = 0;
      for (uint32_t i = threadIdx.x; i < V; i += TF) {
        uint32_t d = w.a[i];
        float x = ks_undesc32(d) - mx;
        if (ks_key(d, i) < first && bin_of(x) == b) v += ks_weight(x, f.F);
      }
      cut = first - 1, bc = b, kept = (b ? s.pw[b - 1] : 0) + block_red<OP_SUM>(v, s.sh);
    }
  }
  // the draw
  ull thr = ks_draw_thr(p.u, kept);
  uint32_t b = find_bin(s.pw, bc, kept, thr, &s);
  ull tok = refine(f, b, b == bc ? cut : NONE, thr - (b ? s.pw[b - 1] : 0), false, &s, &pre);
  if (threadIdx.x == 0) ids[r] = (int32_t)(uint32_t)tok;
}

}  // namespace

extern "C" int k_sample_rows_cuda(int32_t *ids, const void *x, void *ws, size_t rows, size_t vocab,
                                  const k_sample_param *params, const int32_t *seen, dtype dt, cudaStream_t stream,
                                  err *e) {
  static const char *kname = "k_sample_rows_cuda";
  if (rows == 0) return 0;
  if (!ids || !x || !ws || !params) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (vocab == 0 || vocab > (size_t)INT32_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: vocab of %zu (1 .. 2^31 - 1)", kname, vocab);
  if (rows > 0x7fffffffu) return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu rows", kname, rows);
  if ((uintptr_t)ws & 7) return err_set(e, ERR_INVALID_ARGUMENT, "%s: workspace not 8-byte aligned", kname);
  uint32_t V = (uint32_t)vocab;
  dim3 grid((unsigned)rows, ks_groups(V));
  K_DT_DISPATCH(e, kname, dt, T, keys_kernel<T><<<grid, TA, 0, stream>>>((const T *)x, (uint8_t *)ws, V, params, seen));
  K_LAUNCH_CHECK(e, kname);
  bins_kernel<<<grid, TA, 0, stream>>>((uint8_t *)ws, V, params);
  K_LAUNCH_CHECK(e, kname);
  select_kernel<<<(unsigned)rows, TF, 0, stream>>>(ids, (uint8_t *)ws, V, params);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
