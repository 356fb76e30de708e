// kernels/reduce/k_arg.cu: CUDA twins of k_arg_reduce (ArgMax, ArgMin) and
// k_topk (kernels/reduce/k_reduce.c) on FP32, FP16, BF16, FP64, INT32 and
// INT64 storage, x viewed as [outer, len, inner].
//
// ArgMax/ArgMin give the reference's answer exactly. Along a strided axis
// (inner > 1) a thread per column runs the reference's scan. Along the last
// axis a warp per row splits the scan, which is exact because the scan's
// rule is a total order on (value, index) pairs: a more extreme number
// wins, equal values go to the lower index (the higher with
// select_last_index), and a NaN never wins; a NaN at index 0 stands (the
// scan never moves off it), so the row's answer is then 0.
//
// TopK sorts each column by (value, index): larger (smaller) values first,
// equal values by lower index, which is the reference's stable insertion.
// A column of up to TOPK_SMEM_LEN elements is sorted by one block in shared
// memory (a bitonic sort) and its first k kept; a longer one is copied
// into a workspace as [columns, len] and sorted there by CUB's segmented
// radix sort (stable: equal keys keep the lower index first), keys
// canonicalised first (-0 as +0, every NaN as one positive NaN). Both paths
// order NaN above every number (as torch.topk does), as the reference does,
// so rows with NaN give the CPU path's indices too. The values are copied
// from x at the chosen indices, so they are x's bits.
#include <cub/device/device_segmented_radix_sort.cuh>

#include "kernels/k_cuda_typed.cuh"

namespace {

#define ARG_ROW_THREADS 256
#define TOPK_SMEM_LEN 2048

// --- ArgMax, ArgMin

// Whether (v, i) replaces the best (w, j) so far (j < 0: none yet).
template <class V>
__device__ __forceinline__ bool arg_beats(V v, long long i, V w, long long j, int is_min, int last) {
  if (j < 0) return v == v;
  if (is_min ? v < w : v > w) return true;
  return v == w && (last ? i > j : i < j);
}

// A thread per (outer, inner) column: the reference's scan.
template <class T>
__global__ void arg_cols(int64_t *y, const T *x, size_t outer, size_t len, size_t inner, int is_min, int last) {
  typedef typename k_num<T>::val V;
  size_t n = outer * inner, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t o = i / inner, c = i - o * inner;
    const T *p = x + o * len * inner + c;
    V best = k_num<T>::ld(p[0]);
    int64_t at = 0;
    for (size_t l = 1; l < len; l++) {
      V v = k_num<T>::ld(p[l * inner]);
      if ((is_min ? v < best : v > best) || (last && v == best)) best = v, at = (int64_t)l;
    }
    y[i] = at;
  }
}

// A warp per row (inner == 1).
template <class T>
__global__ void arg_rows(int64_t *y, const T *x, size_t rows, size_t len, int is_min, int last) {
  typedef typename k_num<T>::val V;
  int lane = threadIdx.x & 31;
  size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
  for (size_t r = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
    const T *p = x + r * len;
    V best = V(0);
    long long bi = -1;
    for (size_t l = (size_t)lane; l < len; l += 32) {
      V v = k_num<T>::ld(p[l]);
      if (arg_beats(v, (long long)l, best, bi, is_min, last)) best = v, bi = (long long)l;
    }
    for (int o = 16; o > 0; o >>= 1) {
      V w = __shfl_down_sync(0xffffffffu, best, o);
      long long j = __shfl_down_sync(0xffffffffu, bi, o);
      if (j >= 0 && arg_beats(w, j, best, bi, is_min, last)) best = w, bi = j;
    }
    if (lane == 0) {
      V x0 = k_num<T>::ld(p[0]);
      y[r] = x0 != x0 || bi < 0 ? 0 : (int64_t)bi;
    }
  }
}

// --- TopK

// Whether (ka, ia) sorts before (kb, ib): larger (smaller) first, NaN above every number, equal
// values by lower index; ia < 0 marks padding, which sorts last.
template <class V>
__device__ __forceinline__ bool topk_before(V ka, int ia, V kb, int ib, int largest) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  bool na = ka != ka, nb = kb != kb;
  if (na || nb) return na && nb ? ia < ib : (largest ? na : nb);
  if (ka != kb) return largest ? ka > kb : ka < kb;
  return ia < ib;
}

// A block per column: the column (padded to p2, a power of two) sorted in shared memory.
template <class T>
__global__ void topk_smem(T *vals, int64_t *idx, const T *x, size_t outer, size_t len, size_t inner, size_t k,
                          int largest, unsigned p2) {
  typedef typename k_num<T>::val V;
  extern __shared__ __align__(16) unsigned char topk_sm[];
  V *key = (V *)topk_sm;
  int *ix = (int *)(key + p2);
  for (size_t col = blockIdx.x; col < outer * inner; col += gridDim.x) {
    size_t o = col / inner, c = col - o * inner;
    const T *p = x + o * len * inner + c;
    for (unsigned l = threadIdx.x; l < p2; l += blockDim.x) {
      key[l] = l < len ? k_num<T>::ld(p[(size_t)l * inner]) : V(0);
      ix[l] = l < len ? (int)l : -1;
    }
    __syncthreads();
    for (unsigned size = 2; size <= p2; size <<= 1)
      for (unsigned half = size >> 1; half > 0; half >>= 1) {
        for (unsigned t = threadIdx.x; t < p2 / 2; t += blockDim.x) {
          unsigned lo = 2 * t - (t & (half - 1)), hi = lo + half;
          bool up = (lo & size) == 0;
          bool swap = up ? topk_before(key[hi], ix[hi], key[lo], ix[lo], largest)
                         : topk_before(key[lo], ix[lo], key[hi], ix[hi], largest);
          if (swap) {
            V kv = key[lo];
            int iv = ix[lo];
            key[lo] = key[hi], ix[lo] = ix[hi];
            key[hi] = kv, ix[hi] = iv;
          }
        }
        __syncthreads();
      }
    T *vp = vals + o * k * inner + c;
    int64_t *ip = idx + o * k * inner + c;
    for (unsigned j = threadIdx.x; j < k; j += blockDim.x) {
      int l = ix[j];
      vp[(size_t)j * inner] = p[(size_t)l * inner];
      ip[(size_t)j * inner] = l;
    }
    __syncthreads();
  }
}

// The sort path's keys: -0 as +0 and every NaN as one positive NaN, so the radix order is the
// shared-memory path's (integers as they are).
template <class T>
__device__ __forceinline__ T canon(T v) {
  typedef typename k_num<T>::val V;
  V f = k_num<T>::ld(v);
  if (f != f) return k_num<T>::st((V)NAN);
  if (f == V(0)) return k_num<T>::st(V(0));
  return v;
}
template <>
__device__ __forceinline__ int32_t canon(int32_t v) {
  return v;
}
template <>
__device__ __forceinline__ int64_t canon(int64_t v) {
  return v;
}

// x's columns as rows of keys (and their indices) for the segmented sort; off[c] = c * len.
template <class T>
__global__ void topk_gather(T *keys, int *ids, long long *off, const T *x, size_t outer, size_t len, size_t inner) {
  size_t cols = outer * inner, n = cols * len, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t col = i / len, l = i - col * len, o = col / inner, c = col - o * inner;
    keys[i] = canon(x[(o * len + l) * inner + c]);
    ids[i] = (int)l;
    if (l == 0) off[col] = (long long)i;
    if (i == n - 1) off[cols] = (long long)n;
  }
}

template <class T>
__global__ void topk_emit(T *vals, int64_t *idx, const T *x, const int *ids, size_t outer, size_t len, size_t inner,
                          size_t k) {
  size_t n = outer * k * inner, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t c = i % inner, oj = i / inner, j = oj % k, o = oj / k;
    int l = ids[(o * inner + c) * len + j];
    vals[i] = x[(o * len + (size_t)l) * inner + c];
    idx[i] = l;
  }
}

static size_t round256(size_t b) { return (b + 255) / 256 * 256; }

// The sort path's workspace: keys in and out, indices in and out, the segment offsets, CUB's own.
struct topk_ws {
  size_t keys, ids, offs, cub, total;
};

template <class T>
int topk_ws_plan(topk_ws *w, size_t cols, size_t len, const char *kn, err *e) {
  size_t n = cols * len;
  w->keys = round256(n * sizeof(T));
  w->ids = round256(n * sizeof(int));
  w->offs = round256((cols + 1) * sizeof(long long));
  w->cub = 0;
  K_CUDA_TRY(e, kn,
             (cub::DeviceSegmentedRadixSort::SortPairs((void *)NULL, w->cub, (const T *)NULL, (T *)NULL,
                                                       (const int *)NULL, (int *)NULL, (int)n, (int)cols,
                                                       (const long long *)NULL, (const long long *)NULL)));
  w->total = 2 * w->keys + 2 * w->ids + w->offs + round256(w->cub);
  return 0;
}

int topk_check(dtype dt, size_t outer, size_t len, size_t inner, size_t k, const char *kn, err *e) {
  if (!k_num_dtype(dt))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %s is not FP32, FP16, BF16, FP64, INT32 or INT64", kn,
                   dtype_wire_name(dt));
  if (k > len) return err_set(e, ERR_INVALID_ARGUMENT, "%s: k %zu exceeds the axis length %zu", kn, k, len);
  size_t n;
  if (!k_mul3(outer, len, inner, &n) || n > (size_t)INT32_MAX || len > (size_t)INT32_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu elements exceed 2^31 - 1", kn, outer, len, inner);
  return 0;
}

}  // namespace

extern "C" int k_arg_reduce_cuda(int64_t *y, const void *x, dtype dt, size_t outer, size_t len, size_t inner,
                                 int is_min, int select_last, cudaStream_t stream, err *e) {
  const char *kn = "k_arg_reduce_cuda";
  if (len == 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: the axis is empty", kn);
  size_t n;
  if (!k_mul3(outer, len, inner, &n))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu overflows", kn, outer, len, inner);
  if (!k_num_dtype(dt))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %s is not FP32, FP16, BF16, FP64, INT32 or INT64", kn,
                   dtype_wire_name(dt));
  if (outer * inner == 0) return 0;
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kn, (void *)y, x);
  if (inner == 1) {
    unsigned blocks = k_blocks_for(outer, ARG_ROW_THREADS / 32);
    K_NUM_DISPATCH(e, kn, dt, T,
                   (arg_rows<T><<<blocks, ARG_ROW_THREADS, 0, stream>>>(y, (const T *)x, outer, len, is_min,
                                                                         select_last)))
  } else {
    unsigned blocks = k_blocks_for(outer * inner, K_THREADS);
    K_NUM_DISPATCH(e, kn, dt, T,
                   (arg_cols<T><<<blocks, K_THREADS, 0, stream>>>(y, (const T *)x, outer, len, inner, is_min,
                                                                   select_last)))
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_topk_cuda_ws(size_t *bytes, dtype dt, size_t outer, size_t len, size_t inner, size_t k, err *e) {
  const char *kn = "k_topk_cuda_ws";
  TRY(topk_check(dt, outer, len, inner, k, kn, e));
  *bytes = 0;
  if (len <= TOPK_SMEM_LEN || k == 0 || outer * inner == 0) return 0;
  topk_ws w;
  K_NUM_DISPATCH(e, kn, dt, T, TRY(topk_ws_plan<T>(&w, outer * inner, len, kn, e)))
  *bytes = w.total;
  return 0;
}

extern "C" int k_topk_cuda(void *vals, int64_t *idx, const void *x, dtype dt, size_t outer, size_t len, size_t inner,
                           size_t k, int largest, void *ws, size_t ws_bytes, cudaStream_t stream, err *e) {
  const char *kn = "k_topk_cuda";
  TRY(topk_check(dt, outer, len, inner, k, kn, e));
  size_t cols = outer * inner;
  if (k == 0 || cols == 0) return 0;
  if (!vals || !idx || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (vals=%p idx=%p x=%p)", kn, vals, (void *)idx, x);
  if (len <= TOPK_SMEM_LEN) {
    unsigned p2 = 1;
    while (p2 < len) p2 <<= 1;
    unsigned threads = p2 / 2 < 32 ? 32 : p2 / 2 > 512 ? 512 : p2 / 2;
    unsigned blocks = cols > 65535 ? 65535 : (unsigned)cols;
    K_NUM_DISPATCH(e, kn, dt, T,
                   (topk_smem<T><<<blocks, threads, p2 * (sizeof(typename k_num<T>::val) + sizeof(int)), stream>>>(
                       (T *)vals, idx, (const T *)x, outer, len, inner, k, largest, p2)))
    K_LAUNCH_CHECK(e, kn);
    return 0;
  }
  K_NUM_DISPATCH(e, kn, dt, T, {
    topk_ws w;
    TRY(topk_ws_plan<T>(&w, cols, len, kn, e));
    if (!ws || ws_bytes < w.total)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: workspace of %zu bytes, %zu needed", kn, ws_bytes, w.total);
    uint8_t *b = (uint8_t *)ws;
    T *kin = (T *)b, *kout = (T *)(b + w.keys);
    int *iin = (int *)(b + 2 * w.keys), *iout = (int *)(b + 2 * w.keys + w.ids);
    long long *off = (long long *)(b + 2 * w.keys + 2 * w.ids);
    void *tmp = b + 2 * w.keys + 2 * w.ids + w.offs;
    size_t n = cols * len, tb = w.cub;
    topk_gather<T><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(kin, iin, off, (const T *)x, outer, len,
                                                                            inner);
    K_LAUNCH_CHECK(e, kn);
    if (largest)
      K_CUDA_TRY(e, kn,
                 cub::DeviceSegmentedRadixSort::SortPairsDescending(tmp, tb, kin, kout, iin, iout, (int)n, (int)cols,
                                                                    off, off + 1, 0, (int)(sizeof(T) * 8), stream));
    else
      K_CUDA_TRY(e, kn,
                 cub::DeviceSegmentedRadixSort::SortPairs(tmp, tb, kin, kout, iin, iout, (int)n, (int)cols, off,
                                                          off + 1, 0, (int)(sizeof(T) * 8), stream));
    size_t ny = outer * k * inner;
    topk_emit<T><<<k_blocks_for(ny, K_THREADS), K_THREADS, 0, stream>>>((T *)vals, idx, (const T *)x, iout, outer,
                                                                         len, inner, k);
  })
  K_LAUNCH_CHECK(e, kn);
  return 0;
}
