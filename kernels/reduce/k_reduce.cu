// kernels/reduce/k_reduce.cu: the CUDA twin of k_reduce_f32 (k_ref.h, the
// reference; every k_redop) for reductions over one contiguous run of axes, seen as
// [outer, len, inner]: y[o, i] = reduce over l of x[o, l, i]. Written once,
// instantiated per storage type (float, half); sums accumulate in float,
// in the reference's order where one thread owns an output (inner > 1, short
// rows) and as a tree otherwise. A global spatial mean over NCHW is
// [N*C, H*W, 1]; over NHWC it is [N, H*W, C].
// BOOL (one byte, 0 or 1) for Max and Min: any and all, exact in float.
// An empty run (len 0) writes each op's value of nothing, as the reference:
// the combine's identity, finished (Mean 0/0 = NaN, LogSum log 0 = -inf).
// Axes that are not one run (k_reduce_axes_cuda): a thread per output walks
// its reduced elements in memory order, the reference's order.
// CumSum's twin (k_cumsum_*) too: a thread per (outer, inner) column walks
// it in the reference's order, so FP32 sums equal the reference's bit for
// bit and integers wrap as the reference's unsigned arithmetic does.
#include <cuda_fp16.h>

#include "kernels/k_cuda_common.cuh"

namespace {

__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ float ld(__half v) { return __half2float(v); }
__device__ __forceinline__ float ld(uint8_t v) { return v != 0; }  // BOOL
template <class T>
__device__ __forceinline__ T st(float v);
template <>
__device__ __forceinline__ float st<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half st<__half>(float v) { return __float2half_rn(v); }
// BOOL: an empty set's max (-inf) is false, its min (+inf) true, as the reference's
template <>
__device__ __forceinline__ uint8_t st<uint8_t>(float v) { return v > 0.0f; }

// An element enters through prep (|v|, v*v), partials merge through comb, and
// done finishes a row (mean, sqrt, log): the C reference's k_redop, split so
// partial results of a row can be combined (warps, split rows).
struct acc {
  k_redop op;
  __device__ float init() const {
    return op == K_RMAX || op == K_RLOGSUMEXP ? -INFINITY : op == K_RMIN ? INFINITY
         : op == K_RPROD ? 1.0f : 0.0f;
  }
  __device__ float prep(float v) const {
    return op == K_RSUMSQ || op == K_RL2 ? v * v : op == K_RL1 ? fabsf(v) : v;
  }
  __device__ float comb(float a, float v) const {
    switch (op) {
      case K_RMAX: return v > a || v != v ? v : a;
      case K_RMIN: return v < a || v != v ? v : a;
      case K_RPROD: return a * v;
      case K_RLOGSUMEXP: {  // log(e^a + e^v), as the reference
        float m = v > a ? v : a;
        return m == -INFINITY ? m : v != v ? v : m + log1pf(expf(-fabsf(a - v)));
      }
      default: return a + v;
    }
  }
  __device__ float add(float a, float v) const { return comb(a, prep(v)); }
  __device__ float done(float a, size_t len) const {
    // an empty Mean: the reference's NaN (C's NAN), bit for bit, not the device's 0/0
    if (op == K_RMEAN) return len ? a / (float)len : __int_as_float(0x7fc00000);
    return op == K_RL2 ? sqrtf(a) : op == K_RLOGSUM ? logf(a) : a;
  }
};

// inner > 1: a thread per output, neighbours read neighbouring addresses.
template <class T>
__global__ void reduce_strided(T *y, const T *x, size_t outer, size_t len, size_t inner, acc f) {
  size_t n = outer * inner, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
    size_t o = j / inner, i = j % inner;
    const T *p = x + o * len * inner + i;
    float a = f.init();
    for (size_t l = 0; l < len; l++) a = f.add(a, ld(p[l * inner]));
    y[j] = st<T>(f.done(a, len));
  }
}

// inner > 1, long rows (an NHWC global mean: [N, H*W, C]): a thread per
// output would walk H*W serially, and with few outputs leave most of the
// GPU idle (MobileNetV3's first squeeze-excitation pool at batch 32 is
// [32, 784, 72]: 2304 threads for 1.8 M values). Instead a block per
// (outer, 32 neighbouring inner): its SPLIT_Y rows of 32 threads read 32
// neighbours per step (coalesced), row r every SPLIT_Y-th l from r, then the
// rows' partials combine in shared memory (in row order).
constexpr int SPLIT_Y = 32;  // [32, 784, 72]: 73728 threads, 25 steps each
template <class T>
__global__ void __launch_bounds__(32 * SPLIT_Y)
    reduce_split(T *y, const T *x, size_t len, size_t inner, acc f) {
  __shared__ float part[SPLIT_Y][32];
  size_t o = blockIdx.y, i = (size_t)blockIdx.x * 32 + threadIdx.x;
  float a = f.init();
  if (i < inner) {
    const T *p = x + o * len * inner + i;
    for (size_t l = threadIdx.y; l < len; l += SPLIT_Y) a = f.add(a, ld(p[l * inner]));
  }
  part[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && i < inner) {
    for (int r = 1; r < SPLIT_Y; r++) a = f.comb(a, part[r][threadIdx.x]);
    y[o * inner + i] = st<T>(f.done(a, len));
  }
}

__device__ __forceinline__ float warp_combine(float v, acc f) {
  for (int o = 16; o > 0; o >>= 1) v = f.comb(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// inner == 1: a warp per output row.
template <class T>
__global__ void reduce_rows(T *y, const T *x, size_t outer, size_t len, acc f) {
  size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
  int lane = threadIdx.x % 32;
  for (size_t o = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; o < outer; o += warps) {
    const T *p = x + o * len;
    float a = f.init();
    for (size_t l = lane; l < len; l += 32) a = f.add(a, ld(p[l]));
    a = warp_combine(a, f);
    if (lane == 0) y[o] = st<T>(f.done(a, len));
  }
}

template <class T>
int launch(void *y, const void *x, size_t outer, size_t len, size_t inner, acc f, cudaStream_t s,
           err *e) {
  size_t n;
  if (!k_mul3(outer, len, inner, &n))
    return err_set(e, ERR_INVALID_ARGUMENT, "k_reduce_cuda: %zu x %zu x %zu overflows", outer, len, inner);
  if (outer * inner == 0) return 0;
  if (!y || (!x && len)) return err_set(e, ERR_INVALID_ARGUMENT, "k_reduce_cuda: NULL pointer");
  if (inner > 1 && len >= 64 && outer <= 65535) {  // gridDim.y's limit
    dim3 grid((unsigned)((inner + 31) / 32), (unsigned)outer), block(32, SPLIT_Y);
    reduce_split<T><<<grid, block, 0, s>>>((T *)y, (const T *)x, len, inner, f);
  } else if (inner > 1)
    reduce_strided<T><<<k_blocks_for(outer * inner, K_THREADS), K_THREADS, 0, s>>>((T *)y, (const T *)x,
                                                                                  outer, len, inner, f);
  else
    reduce_rows<T><<<k_blocks_for(outer * 32, K_THREADS), K_THREADS, 0, s>>>((T *)y, (const T *)x, outer,
                                                                           len, f);
  K_LAUNCH_CHECK(e, "k_reduce_cuda");
  return 0;
}

}  // namespace

extern "C" int k_reduce_cuda(void *y, const void *x, k_elem et, size_t outer, size_t len, size_t inner,
                             k_redop op, cudaStream_t stream, err *e) {
  acc f = {op};
  if (et == K_BOOL && op != K_RMAX && op != K_RMIN)
    return err_set(e, ERR_INVALID_ARGUMENT, "k_reduce_cuda: BOOL takes Max and Min only, not op %d", (int)op);
  switch (et) {
    case K_F32: return launch<float>(y, x, outer, len, inner, f, stream, e);
    case K_F16: return launch<__half>(y, x, outer, len, inner, f, stream, e);
    case K_BOOL: return launch<uint8_t>(y, x, outer, len, inner, f, stream, e);
    default:
      return err_set(e, ERR_INVALID_ARGUMENT, "k_reduce_cuda: element type %d has no kernel", (int)et);
  }
}

// --- any set of axes

namespace {

// x's dims split into the kept ones (the output's, in order) and the reduced ones, each with its
// stride in x.
struct axes_walk {
  int nk, nr;
  long long kd[K_MAX_DIMS], ks[K_MAX_DIMS];
  long long rd[K_MAX_DIMS], rs[K_MAX_DIMS];
};

// A thread per output: its reduced elements in memory order (the reference's order).
template <class T>
__global__ void reduce_axes(T *y, const T *x, size_t ny, size_t len, axes_walk w, acc f) {
  for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < ny; j += (size_t)gridDim.x * blockDim.x) {
    long long base = 0;
    size_t rest = j;
    for (int k = w.nk - 1; k >= 0; k--) {
      base += (long long)(rest % (size_t)w.kd[k]) * w.ks[k];
      rest /= (size_t)w.kd[k];
    }
    float a = f.init();
    for (size_t l = 0; l < len; l++) {
      long long off = base;
      size_t r = l;
      for (int k = w.nr - 1; k >= 0; k--) {
        off += (long long)(r % (size_t)w.rd[k]) * w.rs[k];
        r /= (size_t)w.rd[k];
      }
      a = f.add(a, ld(x[off]));
    }
    y[j] = st<T>(f.done(a, len));
  }
}

template <class T>
void axes_launch(void *y, const void *x, size_t ny, size_t len, const axes_walk &w, acc f, cudaStream_t s) {
  reduce_axes<T><<<k_blocks_for(ny, K_THREADS), K_THREADS, 0, s>>>((T *)y, (const T *)x, ny, len, w, f);
}

}  // namespace

extern "C" int k_reduce_axes_cuda(void *y, const void *x, k_elem et, int ndim, const int64_t *dims,
                                  const int *reduce, k_redop op, cudaStream_t stream, err *e) {
  const char *kn = "k_reduce_axes_cuda";
  if (ndim < 1 || ndim > K_MAX_DIMS || !dims || !reduce)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 1..%d", kn, ndim, K_MAX_DIMS);
  if (et != K_F32 && et != K_F16 && et != K_BOOL)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %d has no kernel", kn, (int)et);
  if (et == K_BOOL && op != K_RMAX && op != K_RMIN)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: BOOL takes Max and Min only, not op %d", kn, (int)op);
  axes_walk w = {};
  size_t ny = 1, len = 1;
  long long stride = 1;
  for (int k = ndim - 1; k >= 0; k--) {  // strides first, innermost last
    if (dims[k] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim %d", kn, k);
    long long d = dims[k];
    if (reduce[k]) w.rd[w.nr] = d, w.rs[w.nr++] = stride, len *= (size_t)d;
    else w.kd[w.nk] = d, w.ks[w.nk++] = stride, ny *= (size_t)d;
    stride *= d;
  }
  // the walks go outermost first: reverse what was gathered innermost first
  for (int a = 0, b = w.nk - 1; a < b; a++, b--) {
    long long t = w.kd[a]; w.kd[a] = w.kd[b]; w.kd[b] = t;
    t = w.ks[a]; w.ks[a] = w.ks[b]; w.ks[b] = t;
  }
  for (int a = 0, b = w.nr - 1; a < b; a++, b--) {
    long long t = w.rd[a]; w.rd[a] = w.rd[b]; w.rd[b] = t;
    t = w.rs[a]; w.rs[a] = w.rs[b]; w.rs[b] = t;
  }
  if (ny == 0) return 0;
  if (!y || (!x && len)) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kn);
  acc f = {op};
  switch (et) {
    case K_F32: axes_launch<float>(y, x, ny, len, w, f, stream); break;
    case K_F16: axes_launch<__half>(y, x, ny, len, w, f, stream); break;
    default: axes_launch<uint8_t>(y, x, ny, len, w, f, stream); break;
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

namespace {

// The running sum's type: float for float and half (the reference's FP32
// sum; half rounds each stored result once), unsigned for integers (wraps).
template <class T>
struct cs_acc {
  typedef T type;
};
template <>
struct cs_acc<__half> {
  typedef float type;
};
template <>
struct cs_acc<long long> {
  typedef unsigned long long type;
};
template <>
struct cs_acc<int> {
  typedef unsigned type;
};

template <class A>
__device__ __forceinline__ A cs_ld(float v) { return v; }
template <class A>
__device__ __forceinline__ A cs_ld(__half v) { return __half2float(v); }
template <class A>
__device__ __forceinline__ A cs_ld(long long v) { return (A)v; }
template <class A>
__device__ __forceinline__ A cs_ld(int v) { return (A)v; }

template <class T>
__device__ __forceinline__ T cs_st(typename cs_acc<T>::type a) { return (T)a; }
template <>
__device__ __forceinline__ __half cs_st<__half>(float a) { return __float2half_rn(a); }

template <class T>
__global__ void cumsum_kernel(T *y, const T *x, size_t outer, size_t len, size_t inner, int exclusive,
                              int reverse) {
  typedef typename cs_acc<T>::type A;
  size_t n = outer * inner, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
    size_t base = (j / inner) * len * inner + j % inner;
    A acc = 0;
    for (size_t t = 0; t < len; t++) {
      size_t at = base + (reverse ? len - 1 - t : t) * inner;
      A v = cs_ld<A>(x[at]);  // read before the write: y may alias x
      if (exclusive) {
        y[at] = cs_st<T>(acc);
        acc += v;
      } else {
        acc += v;
        y[at] = cs_st<T>(acc);
      }
    }
  }
}

template <class T>
void cumsum_launch(void *y, const void *x, size_t outer, size_t len, size_t inner, int exclusive,
                   int reverse, cudaStream_t s) {
  cumsum_kernel<T><<<k_blocks_for(outer * inner, K_THREADS), K_THREADS, 0, s>>>(
      (T *)y, (const T *)x, outer, len, inner, exclusive, reverse);
}

}  // namespace

extern "C" int k_cumsum_cuda(void *y, const void *x, k_elem et, size_t outer, size_t len, size_t inner,
                             int exclusive, int reverse, cudaStream_t stream, err *e) {
  const char *kn = "k_cumsum_cuda";
  if (et != K_F32 && et != K_F16 && et != K_I64 && et != K_I32)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %d has no kernel (FP32, FP16, INT64, INT32)",
                   kn, (int)et);
  size_t n;
  if (!k_mul3(outer, len, inner, &n))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu overflows", kn, outer, len, inner);
  if (n == 0) return 0;
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kn, y, x);
  switch (et) {
    case K_F32: cumsum_launch<float>(y, x, outer, len, inner, exclusive, reverse, stream); break;
    case K_F16: cumsum_launch<__half>(y, x, outer, len, inner, exclusive, reverse, stream); break;
    case K_I64: cumsum_launch<long long>(y, x, outer, len, inner, exclusive, reverse, stream); break;
    default: cumsum_launch<int>(y, x, outer, len, inner, exclusive, reverse, stream); break;
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}
