// kernels/sample/k_sample.cu: k_sample_rows_cuda (k_cuda.h), a token drawn
// per row of a step's logits on the GPU (issue 35 item 5), so that only
// int32 ids cross to the host. One block of K_SAMPLE_LANES threads per row,
// the rule of k_sample.h pass for pass as kernels/sample/k_sample.c runs
// it: thread t holds lane t's partial sum (ids t, t + LANES, ... in order),
// the block sums them by warp shuffles (strides 16 .. 1), then the warps'
// sums the same way, which is the reference's tree. Cuts are found without
// sorting: each step of a bisection over the 64-bit keys (ks_desc32 of the
// logit, id) is one pass over the row. Scratch: 2 x vocab floats per row
// (the keys, then the probabilities).
#include "kernels/k_cuda_common.cuh"
#include "kernels/sample/k_sample.h"
#include "kernels/sample/k_sample_rule.h"

namespace {

#define LANES K_SAMPLE_LANES
#define NONE UINT64_MAX

struct shared_red {
  double d[LANES / 32];
  unsigned long long u[LANES / 32];
  int64_t n[LANES / 32];
  double d_out;
  unsigned long long u_out;
  int64_t n_out;
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

struct row {
  const uint32_t *a;
  const float *b;
  uint32_t V;
  shared_red *s;
};

static __device__ double mass_le(const row &r, uint64_t c) {
  double acc = 0;
  for (uint32_t i = threadIdx.x; i < r.V; i += LANES) acc += ks_key(r.a[i], i) <= c ? (double)r.b[i] : 0.0;
  return block_sum(acc, r.s);
}

static __device__ int64_t count_le(const row &r, uint64_t c) {
  int64_t n = 0;
  for (uint32_t i = threadIdx.x; i < r.V; i += LANES) n += ks_key(r.a[i], i) <= c;
  return block_count(n, r.s);
}

// k_sample.c's search: the smallest key c with ok(c), ok monotone, false below top and true at cap
// (at every key when cap is NONE); the high word between top's and cap's.
template <class Ok>
static __device__ uint64_t search(const row &r, Ok ok, uint64_t top, uint64_t cap) {
  uint32_t lo = (uint32_t)(top >> 32), hi = cap == NONE ? 0xffffffffu : (uint32_t)(cap >> 32);
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ok(ks_key(mid, 0xffffffffu)))
      hi = mid;
    else
      lo = mid + 1;
  }
  uint32_t h = lo, il = 0, ih = r.V - 1;
  while (il < ih) {
    uint32_t mid = il + (ih - il) / 2;
    if (ok(ks_key(h, mid)))
      ih = mid;
    else
      il = mid + 1;
  }
  return ks_key(h, il);
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
  for (uint32_t i = threadIdx.x; i < V; i += LANES) l[i] = ks_canon(k_ld(xr[i]));
  __syncthreads();
  if (p.repetition_penalty > 0 && p.repetition_penalty != 1) {
    // a repeated id is written twice with the same value
    for (int64_t j = threadIdx.x; j < p.n_seen; j += LANES) {
      int32_t t = seen[p.seen_off + j];
      if (t >= 0 && (uint32_t)t < V) l[t] = ks_penalize(ks_canon(k_ld(xr[t])), p.repetition_penalty);
    }
    __syncthreads();
  }
  bool greedy = !(p.temperature > 0);
  float inv_t = greedy ? 1.0f : 1.0f / p.temperature;
  uint64_t top = NONE;
  for (uint32_t i = threadIdx.x; i < V; i += LANES) {
    float v = greedy ? l[i] : ks_canon(l[i] * inv_t);
    a[i] = ks_desc32(v);
    uint64_t k = ks_key(a[i], i);
    if (k < top) top = k;
  }
  top = block_min(top, &red, false);  // its barriers order the key writes before the passes' reads
  int32_t top_id = (int32_t)(uint32_t)top;
  float mx = ks_undesc32((uint32_t)(top >> 32));
  if (greedy || isinf(mx)) {
    if (threadIdx.x == 0) ids[blockIdx.x] = top_id;
    return;
  }
  row r = {a, b, V, &red};
  uint64_t ck = NONE;
  if (p.top_k > 0 && (uint32_t)p.top_k < V) {
    int64_t k = p.top_k;
    ck = search(
        r, [&](uint64_t c) { return count_le(r, c) >= k; }, top, NONE);
  }
  double acc = 0;
  for (uint32_t i = threadIdx.x; i < V; i += LANES) {
    b[i] = ks_key(a[i], i) <= ck ? ks_expf(ks_undesc32(a[i]) - mx) : 0.0f;
    acc += (double)b[i];
  }
  double sum = block_sum(acc, &red);
  for (uint32_t i = threadIdx.x; i < V; i += LANES) b[i] = (float)((double)b[i] / sum);
  __syncthreads();
  uint64_t cut = ck;
  if (p.top_p > 0 && p.top_p < 1) {
    double tp = p.top_p;
    if (mass_le(r, cut) >= tp) {
      uint64_t cap = cut;
      cut = search(
          r, [&](uint64_t c) { return mass_le(r, c < cap ? c : cap) >= tp; }, top, cap);
    }
  }
  if (p.min_p > 0) {
    float floor_p = p.min_p * b[top_id];
    uint64_t first = NONE;
    for (uint32_t i = threadIdx.x; i < V; i += LANES) {
      uint64_t k = ks_key(a[i], i);
      if (k > top && k <= cut && b[i] < floor_p && k < first) first = k;
    }
    first = block_min(first, &red, false);
    if (first != NONE) cut = first - 1;
  }
  double kept = mass_le(r, cut), target = p.u * kept;
  int32_t tok;
  if (kept > target) {
    uint64_t cap = cut;
    tok = (int32_t)(uint32_t)search(
        r, [&](uint64_t c) { return mass_le(r, c < cap ? c : cap) > target; }, top, cap);
  } else {
    uint64_t last = 0;
    for (uint32_t i = threadIdx.x; i < V; i += LANES) {
      uint64_t k = ks_key(a[i], i);
      if (k <= cut && k > last) last = k;
    }
    tok = (int32_t)(uint32_t)block_min(last, &red, true);
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = tok;
}

}  // namespace

extern "C" int k_sample_rows_cuda(int32_t *ids, const void *x, float *scratch, size_t rows, size_t vocab,
                                  const k_sample_param *params, const int32_t *seen, dtype dt, cudaStream_t stream,
                                  err *e) {
  static const char *kname = "k_sample_rows_cuda";
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
