// tests/gpu/k_sample_old.cu: the previous device sampler (one block a row,
// floating sums in a fixed lane tree), kept only for test_k_cuda_sample's
// side-by-side timing against kernels/sample/k_sample.cu. Its rule (double
// sums of float probabilities) is not today's integer-weight rule, so its
// ids may differ from k_sample_rows_ref's on knife-edge rows: timed, not
// compared. Was kernels/sample/k_sample.cu's k_sample_rows_cuda. One block of K_SAMPLE_LANES threads per row,
// the rule of k_sample.h as kernels/sample/k_sample.c computes it: thread t
// holds lane t's partial sum (ids t, t + LANES, ... in order), the block
// sums them by warp shuffles (strides 16 .. 1), then the warps' sums the
// same way, which is the reference's tree. Scratch: 2 x vocab floats per
// row (the keys, then the probabilities).
//
// Speed: a cut (top_k's k-th key, top_p's head, the draw) is the smallest
// key with a monotone property; the reference bisects, one pass over the row
// per step (~50 per cut). Here each pass tests PIV pivots at once (a count
// or a mass per pivot, each with the reference's per-lane order and tree,
// so every tested value has the reference's bits), a (PIV + 1)-ary search
// of the high word, then of the ids among that word's ties (only the range
// between the smallest and largest such id). The answer is the definition's
// (k_sample.c's search comment), whatever pivots are visited. Once a cut is
// known and at most CAP keys lie at or below it (top_k 50; a narrow
// nucleus), those keys and probabilities are compacted into shared memory,
// each lane's in id order, so the later passes sum the same terms in the
// same order (the dropped terms are the +0.0 the full pass adds) without
// touching the row again. Passes are fused where the sums allow: the mass
// of top_k's candidates with the normalisation, a cut's mass with its
// compaction's count.
#include "kernels/k_cuda_common.cuh"
#include "kernels/sample/k_sample.h"
#include "kernels/sample/k_sample_rule.h"

namespace {

#define LANES 1024
#define WARPS (LANES / 32)
#define NONE UINT64_MAX
#define PIV 15    // pivots per pass: 4 bits of the key per pass, registers for 1024 threads
#define CAP 2048  // compacted keys in shared memory

static_assert(WARPS == 32, "the second level of the tree is one warp");

struct shared_red {
  double d[WARPS];
  unsigned long long u[WARPS];
  int64_t n[WARPS];
  double d_out;
  unsigned long long u_out;
  int64_t n_out;
  double dp[PIV][WARPS];
  int np[PIV][WARPS];
  double dp_out[PIV];
  int np_out[PIV];
  int scan[WARPS];
  unsigned long long ck[CAP];
  float cb[CAP];
};

static __device__ double block_sum(double v, shared_red *s) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous reduction's result has been read
  if (lane == 0) s->d[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = s->d[lane];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) s->d_out = v;
  }
  __syncthreads();
  return s->d_out;
}

static __device__ uint64_t block_min(uint64_t v, shared_red *s, bool want_max) {
  for (int o = 16; o > 0; o >>= 1) {
    uint64_t w = __shfl_down_sync(0xffffffffu, (unsigned long long)v, o);
    v = want_max ? (w > v ? w : v) : (w < v ? w : v);
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) s->u[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = s->u[lane];
    for (int o = 16; o > 0; o >>= 1) {
      uint64_t w = __shfl_down_sync(0xffffffffu, (unsigned long long)v, o);
      v = want_max ? (w > v ? w : v) : (w < v ? w : v);
    }
    if (lane == 0) s->u_out = v;
  }
  __syncthreads();
  return s->u_out;
}

static __device__ int64_t block_count(int64_t v, shared_red *s) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, (long long)v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) s->n[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = s->n[lane];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, (long long)v, o);
    if (lane == 0) s->n_out = v;
  }
  __syncthreads();
  return s->n_out;
}

// PIV block sums at once, each by block_sum's tree (warp w sums pivot w's
// warp partials in the second level).
static __device__ void block_sum_piv(double (&acc)[PIV], shared_red *s) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < PIV; j++)
    for (int o = 16; o > 0; o >>= 1) acc[j] += __shfl_down_sync(0xffffffffu, acc[j], o);
  __syncthreads();  // the previous results have been read
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < PIV; j++) s->dp[j][warp] = acc[j];
  }
  __syncthreads();
  if (warp < PIV) {
    double v = s->dp[warp][lane];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) s->dp_out[warp] = v;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < PIV; j++) acc[j] = s->dp_out[j];
}

static __device__ void block_count_piv(int (&c)[PIV], shared_red *s) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < PIV; j++)
    for (int o = 16; o > 0; o >>= 1) c[j] += __shfl_down_sync(0xffffffffu, c[j], o);
  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < PIV; j++) s->np[j][warp] = c[j];
  }
  __syncthreads();
  if (warp < PIV) {
    int v = s->np[warp][lane];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) s->np_out[warp] = v;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < PIV; j++) c[j] = s->np_out[j];
}

// The whole row: thread t visits ids t, t + LANES, ... (its lane's order).
struct full_src {
  const uint32_t *a;
  const float *b;
  uint32_t V;
  template <bool MASS, class F>
  __device__ void each(F f) const {
    for (uint32_t i = threadIdx.x; i < V; i += LANES) f(ks_key(a[i], i), MASS ? b[i] : 0.0f);
  }
};

// A compacted row: thread t's keys (still in id order) at k[off .. off + n).
struct compact_src {
  const unsigned long long *k;
  const float *b;
  int off, n;
  template <bool MASS, class F>
  __device__ void each(F f) const {
    for (int m = off; m < off + n; m++) f((uint64_t)k[m], MASS ? b[m] : 0.0f);
  }
};

// Keys <= cap of the row into s->ck / s->cb, each thread's in its lane's
// order; false (nothing written) past CAP keys. All threads agree. *mass:
// mass_le(cap), from the same pass.
static __device__ bool compact(const full_src &f, uint64_t cap, shared_red *s, compact_src *out, double *mass) {
  int n = 0;
  double acc = 0;
  f.each<true>([&](uint64_t k, float b) {
    n += k <= cap;
    acc += k <= cap ? (double)b : 0.0;
  });
  *mass = block_sum(acc, s);
  if (block_count(n, s) > CAP) return false;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, x = n;
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) s->scan[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int v = s->scan[lane];
    for (int o = 1; o < 32; o <<= 1) {
      int y = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += y;
    }
    s->scan[lane] = v;
  }
  __syncthreads();
  int off = (warp ? s->scan[warp - 1] : 0) + x - n, m = off;
  f.each<true>([&](uint64_t k, float b) {
    if (k <= cap) {
      s->ck[m] = k;
      s->cb[m] = b;
      m++;
    }
  });
  __syncthreads();
  *out = compact_src{s->ck, s->cb, off, n};
  return true;
}

// A pass's PIV pivots as 32-bit ranks: in the high-word phase key <= (m, max
// id) iff the key's high word <= m; in the id phase (word h) key <= (h, m)
// iff rank(key) <= m, rank 0 below h and all ones above (ids < 2^31).
struct pivots {
  bool id_phase;
  uint32_t h;
  uint32_t m[PIV];
};

static __device__ __forceinline__ uint32_t rank_of(uint64_t k, const pivots &pv) {
  uint32_t hi = (uint32_t)(k >> 32);
  if (!pv.id_phase) return hi;
  return hi < pv.h ? 0u : hi > pv.h ? 0xffffffffu : (uint32_t)k;
}

// ok[j] = count of keys <= pivot j >= k.
template <class Src>
struct count_ok {
  const Src &src;
  shared_red *s;
  int64_t k;
  __device__ void operator()(const pivots &pv, bool (&ok)[PIV]) const {
    int c[PIV];
#pragma unroll
    for (int j = 0; j < PIV; j++) c[j] = 0;
    src.template each<false>([&](uint64_t key, float) {
      uint32_t r = rank_of(key, pv);
#pragma unroll
      for (int j = 0; j < PIV; j++) c[j] += r <= pv.m[j];
    });
    block_count_piv(c, s);
#pragma unroll
    for (int j = 0; j < PIV; j++) ok[j] = c[j] >= k;
  }
};

// ok[j] = mass of keys <= min(pivot j, cap) >= target (STRICT: > target).
// A key past cap adds +0.0 to every pivot's sum, as the reference's does.
template <class Src, bool STRICT>
struct mass_ok {
  const Src &src;
  shared_red *s;
  double target;
  uint64_t cap;
  __device__ void operator()(const pivots &pv, bool (&ok)[PIV]) const {
    double acc[PIV];
#pragma unroll
    for (int j = 0; j < PIV; j++) acc[j] = 0;
    src.template each<true>([&](uint64_t key, float b) {
      uint32_t r = key <= cap ? rank_of(key, pv) : 0xffffffffu;
      double v = key <= cap ? (double)b : 0.0;
#pragma unroll
      for (int j = 0; j < PIV; j++) acc[j] += r <= pv.m[j] ? v : 0.0;
    });
    block_sum_piv(acc, s);
#pragma unroll
    for (int j = 0; j < PIV; j++) ok[j] = STRICT ? acc[j] > target : acc[j] >= target;
  }
};

template <class Src>
static __device__ double mass_le(const Src &src, shared_red *s, uint64_t c) {
  double acc = 0;
  src.template each<true>([&](uint64_t k, float b) { acc += k <= c ? (double)b : 0.0; });
  return block_sum(acc, s);
}

// [lo, hi] after a pass: past the last pivot found false, up to the first
// found true (pivots ascending in [lo, hi), ok monotone).
static __device__ void narrow(const pivots &pv, const bool (&ok)[PIV], uint32_t *lo, uint32_t *hi) {
  uint32_t nlo = *lo, nhi = *hi;
  bool found = false;
#pragma unroll
  for (int j = 0; j < PIV; j++) {
    if (!found) {
      if (ok[j])
        nhi = pv.m[j], found = true;
      else
        nlo = pv.m[j] + 1;
    }
  }
  *lo = nlo, *hi = nhi;
}

// The smallest key c (a key of the row) with ok(c): ok monotone, false
// below top, true at cap (at every key when cap is NONE). The high word by
// a (PIV + 1)-ary search between top's and cap's, then the id between the
// smallest and largest of that word's keys (<= cap).
template <class Src, class Ok>
static __device__ uint64_t search(const Src &src, shared_red *s, const Ok &ok, uint64_t top, uint64_t cap, uint32_t V) {
  uint32_t lo = (uint32_t)(top >> 32), hi = cap == NONE ? 0xffffffffu : (uint32_t)(cap >> 32);
  pivots pv;
  bool okv[PIV];
  pv.id_phase = false, pv.h = 0;
  while (lo < hi) {  // ok false at (lo - 1, max id), true at (hi, max id)
    uint64_t w = hi - lo;
#pragma unroll
    for (int j = 0; j < PIV; j++) pv.m[j] = lo + (uint32_t)(w * (j + 1) / (PIV + 1));
    ok(pv, okv);
    narrow(pv, okv, &lo, &hi);
  }
  uint32_t h = lo;
  uint64_t kmin = NONE, kmax = 0;
  src.template each<false>([&](uint64_t k, float) {
    if ((uint32_t)(k >> 32) == h && k <= cap) {
      if (k < kmin) kmin = k;
      if (k > kmax) kmax = k;
    }
  });
  kmin = block_min(kmin, s, false);
  kmax = block_min(kmax, s, true);
  uint32_t il = 0, ih = V - 1;
  if (kmin != NONE) il = (uint32_t)kmin, ih = (uint32_t)kmax;  // else the reference's range
  pv.id_phase = true, pv.h = h;
  while (il < ih) {  // ok false at (h, il - 1), true at (h, ih)
    uint64_t w = ih - il;
#pragma unroll
    for (int j = 0; j < PIV; j++) pv.m[j] = il + (uint32_t)(w * (j + 1) / (PIV + 1));
    ok(pv, okv);
    narrow(pv, okv, &il, &ih);
  }
  return ks_key(h, il);
}

// top_p then min_p: the cut (the largest key kept) below top_k's ck;
// total: mass_le(ck).
template <class Src>
static __device__ uint64_t nucleus(const Src &src, shared_red *s, const k_sample_param &p, uint64_t top, float p_top,
                                   uint64_t ck, double total, uint32_t V) {
  uint64_t cut = ck;
  if (p.top_p > 0 && p.top_p < 1) {
    double tp = p.top_p;
    if (total >= tp) cut = search(src, s, mass_ok<Src, false>{src, s, tp, cut}, top, cut, V);
  }
  if (p.min_p > 0) {
    float floor_p = p.min_p * p_top;
    uint64_t first = NONE;
    src.template each<true>([&](uint64_t k, float b) {
      if (k > top && k <= cut && b < floor_p && k < first) first = k;
    });
    first = block_min(first, s, false);
    if (first != NONE) cut = first - 1;
  }
  return cut;
}

// The inverse-CDF walk of u over the keys <= cut (kept: their mass).
template <class Src>
static __device__ int32_t draw(const Src &src, shared_red *s, double u, uint64_t top, uint64_t cut, double kept,
                               uint32_t V) {
  double target = u * kept;
  if (kept > target) return (int32_t)(uint32_t)search(src, s, mass_ok<Src, true>{src, s, target, cut}, top, cut, V);
  uint64_t last = 0;
  src.template each<false>([&](uint64_t k, float) {
    if (k <= cut && k > last) last = k;
  });
  return (int32_t)(uint32_t)block_min(last, s, true);
}

template <class T>
__global__ void __launch_bounds__(LANES) sample_kernel(int32_t *ids, const T *x, float *scratch, uint32_t V,
                                                       const k_sample_param *params, const int32_t *seen) {
  __shared__ shared_red red;
  const k_sample_param p = params[blockIdx.x];
  if (!p.mode) return;
  const T *xr = x + (size_t)blockIdx.x * V;
  float *l = scratch + (size_t)blockIdx.x * 2 * V;
  uint32_t *a = (uint32_t *)l;
  float *b = l + V;
  bool pen = p.repetition_penalty > 0 && p.repetition_penalty != 1;
  bool greedy = !(p.temperature > 0);
  float inv_t = greedy ? 1.0f : 1.0f / p.temperature;
  uint64_t top = NONE;
  if (pen) {
    for (uint32_t i = threadIdx.x; i < V; i += LANES) l[i] = ks_canon(k_ld(xr[i]));
    __syncthreads();
    // a repeated id is written twice with the same value
    for (int64_t j = threadIdx.x; j < p.n_seen; j += LANES) {
      int32_t t = seen[p.seen_off + j];
      if (t >= 0 && (uint32_t)t < V) l[t] = ks_penalize(ks_canon(k_ld(xr[t])), p.repetition_penalty);
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < V; i += LANES) {
      float v = greedy ? l[i] : ks_canon(l[i] * inv_t);
      a[i] = ks_desc32(v);
      uint64_t k = ks_key(a[i], i);
      if (k < top) top = k;
    }
  } else {  // one pass: no penalised ids to overwrite
    for (uint32_t i = threadIdx.x; i < V; i += LANES) {
      float v = ks_canon(k_ld(xr[i]));
      if (!greedy) v = ks_canon(v * inv_t);
      a[i] = ks_desc32(v);
      uint64_t k = ks_key(a[i], i);
      if (k < top) top = k;
    }
  }
  top = block_min(top, &red, false);  // its barriers order the key writes before the passes' reads
  int32_t top_id = (int32_t)(uint32_t)top;
  float mx = ks_undesc32((uint32_t)(top >> 32));
  if (greedy || isinf(mx)) {
    if (threadIdx.x == 0) ids[blockIdx.x] = top_id;
    return;
  }
  full_src fs = {a, b, V};
  uint64_t ck = NONE;
  if (p.top_k > 0 && (uint32_t)p.top_k < V) ck = search(fs, &red, count_ok<full_src>{fs, &red, p.top_k}, top, NONE, V);
  double acc = 0;
  for (uint32_t i = threadIdx.x; i < V; i += LANES) {
    float e = ks_key(a[i], i) <= ck ? ks_expf(ks_undesc32(a[i]) - mx) : 0.0f;
    b[i] = e;
    acc += (double)e;
  }
  double sum = block_sum(acc, &red);
  acc = 0;  // mass_le(ck) from the same pass: the ids past ck add +0.0 there too
  for (uint32_t i = threadIdx.x; i < V; i += LANES) {
    float q = (float)((double)b[i] / sum);
    b[i] = q;
    acc += (double)q;
  }
  double total = block_sum(acc, &red);  // its barriers order the writes of b before the reads
  float p_top = b[top_id];
  compact_src cs;
  double kept;
  int32_t tok;
  if (ck != NONE && compact(fs, ck, &red, &cs, &kept)) {
    uint64_t cut = nucleus(cs, &red, p, top, p_top, ck, total, V);
    tok = draw(cs, &red, p.u, top, cut, cut == ck ? total : mass_le(cs, &red, cut), V);
  } else {
    uint64_t cut = nucleus(fs, &red, p, top, p_top, ck, total, V);
    if (cut == ck)
      tok = draw(fs, &red, p.u, top, cut, total, V);
    else if (compact(fs, cut, &red, &cs, &kept))
      tok = draw(cs, &red, p.u, top, cut, kept, V);
    else
      tok = draw(fs, &red, p.u, top, cut, kept, V);
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = tok;
}

}  // namespace

extern "C" int k_sample_rows_cuda_old(int32_t *ids, const void *x, float *scratch, size_t rows, size_t vocab,
                                      const k_sample_param *params, const int32_t *seen, dtype dt, cudaStream_t stream,
                                      err *e) {
  static const char *kname = "k_sample_rows_cuda_old";
  if (rows == 0) return 0;
  if (!ids || !x || !scratch || !params) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (vocab == 0 || vocab > (size_t)INT32_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: vocab of %zu (1 .. 2^31 - 1)", kname, vocab);
  if (rows > 0x7fffffffu) return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu rows", kname, rows);
  K_DT_DISPATCH(e, kname, dt, T,
                sample_kernel<T>
                <<<(unsigned)rows, LANES, 0, stream>>>(ids, (const T *)x, scratch, (uint32_t)vocab, params, seen));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
