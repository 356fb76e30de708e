// kernels/index/k_scatter.cu: CUDA twins of k_scatter_elements and
// k_scatter_nd (kernels/index/k_index.c): y already holds the data; each
// update is written (reduction none: any element of 1, 2, 4 or 8 bytes,
// moved as it is) or combined (add, mul, max, min on FP32, FP16, BF16,
// FP64, INT32, INT64; integers wrap, half types combine in float and round
// once per update) into the element its index names. Negative indices
// count from the end; an index out of range skips its update and sets
// *bad (a device word, when given) to 1, since an enqueued launch cannot
// fail the call as the references do.
//
// The result is the reference's, updates to one element applied in the
// reference's order, whatever the duplicates:
// - where the combination is order-independent (add, mul, max, min on
//   integers, which wrap; max and min on FP32 and FP64: the reference's
//   "b > a ? b : a" keeps a NaN already there and skips a NaN update in any
//   order), a thread per update combines with an atomic compare-and-swap;
// - otherwise (none, whose last write wins; float add and mul, whose
//   rounding depends on the order; the half types) the updates that can
//   meet run in order in one thread: ScatterElements' duplicates share
//   every coordinate but the axis, so a thread takes a line of the indices
//   along the axis (threads never meet); ScatterND's may come from any
//   tuple, so a thread takes one element of the slice and walks every tuple
//   in order (parallel over the slice only: a scatter of single elements is
//   serial).
// The one difference left: max/min by compare-and-swap keeps whichever of
// +0 and -0 came first to the device, the reference the first in order.
#include "kernels/k_cuda_typed.cuh"

namespace {

template <class A>
__device__ __forceinline__ A wrap_add(A a, A b) {
  return a + b;
}
template <class A>
__device__ __forceinline__ A wrap_mul(A a, A b) {
  return a * b;
}
template <>
__device__ __forceinline__ int32_t wrap_add(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}
template <>
__device__ __forceinline__ int32_t wrap_mul(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a * (uint32_t)b);
}
template <>
__device__ __forceinline__ int64_t wrap_add(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
template <>
__device__ __forceinline__ int64_t wrap_mul(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}

// The reference's COMBINE (k_index.c) on one element.
template <class T>
__device__ __forceinline__ T combine(T d, T s, int red) {
  typedef typename k_num<T>::val V;
  V a = k_num<T>::ld(d), b = k_num<T>::ld(s);
  switch (red) {
    case K_SCATTER_ADD: return k_num<T>::st(wrap_add(a, b));
    case K_SCATTER_MUL: return k_num<T>::st(wrap_mul(a, b));
    case K_SCATTER_MAX: return b > a ? s : d;
    case K_SCATTER_MIN: return b < a ? s : d;
    default: return s;
  }
}

template <int B>
struct word;
template <>
struct word<2> {
  typedef unsigned short t;
};
template <>
struct word<4> {
  typedef unsigned int t;
};
template <>
struct word<8> {
  typedef unsigned long long t;
};

// combine into *d by compare-and-swap (2-, 4- and 8-byte T).
template <class T>
__device__ __forceinline__ void combine_atomic(T *d, T s, int red) {
  typedef typename word<sizeof(T)>::t W;
  W *a = (W *)d, old = *a, seen;
  do {
    seen = old;
    T cur, next;
    memcpy(&cur, &seen, sizeof cur);
    next = combine(cur, s, red);
    W nw;
    memcpy(&nw, &next, sizeof nw);
    if (nw == seen) return;
    old = atomicCAS(a, seen, nw);
  } while (old != seen);
}

// Writes (none) need no arithmetic: the bit types' combine is the write.
template <class T>
__device__ __forceinline__ T put(T d, T s, int red) {
  return combine(d, s, red);
}
#define PUT_BITS(B)                                                     \
  template <>                                                           \
  __device__ __forceinline__ B put(B d, B s, int red) {                 \
    (void)d, (void)red;                                                 \
    return s;                                                           \
  }
PUT_BITS(uint8_t)
PUT_BITS(uint16_t)
PUT_BITS(uint32_t)
PUT_BITS(unsigned long long)
#undef PUT_BITS

// A plain store, not an atomic: every writer writes the same 1, and *bad may be mapped host memory
// (the CUDA plan's flags), where device atomics are not guaranteed over every link.
__device__ __forceinline__ void flag(int *bad) {
  if (bad) *(volatile int *)bad = 1;
}

// --- ScatterElements: idx's dims, y's and idx's strides, the axis and its length in y.
struct seplan {
  int nd, axis;
  int64_t len;
  int64_t idims[K_MAX_DIMS], yst[K_MAX_DIMS], ist[K_MAX_DIMS];
};

// A thread per line of idx along the axis, its updates in order.
template <class T>
__global__ void scatter_el_lines(T *y, const T *u, const void *idx, int i32, size_t lines, seplan p, int red, int *bad) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < lines; t += stride) {
    size_t rem = t;
    int64_t yo = 0, io = 0;
    for (int d = p.nd - 1; d >= 0; d--) {
      if (d == p.axis) continue;
      size_t dim = (size_t)p.idims[d], q = rem / dim, r = rem - q * dim;
      yo += (int64_t)r * p.yst[d];
      io += (int64_t)r * p.ist[d];
      rem = q;
    }
    for (int64_t a = 0; a < p.idims[p.axis]; a++) {
      size_t ii = (size_t)(io + a * p.ist[p.axis]);
      long long k = k_idx_at(idx, i32, ii);
      if (k < 0) k += p.len;
      if (k < 0 || k >= p.len) {
        flag(bad);
        continue;
      }
      T *d = y + yo + k * p.yst[p.axis];
      *d = put(*d, u[ii], red);
    }
  }
}

// A thread per update, combined atomically (order-independent reductions).
template <class T>
__global__ void scatter_el_atomic(T *y, const T *u, const void *idx, int i32, size_t n, seplan p, int red, int *bad) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t rem = i;
    int64_t yo = 0;
    for (int d = p.nd - 1; d >= 0; d--) {
      size_t dim = (size_t)p.idims[d], q = rem / dim, r = rem - q * dim;
      if (d != p.axis) yo += (int64_t)r * p.yst[d];
      rem = q;
    }
    long long k = k_idx_at(idx, i32, i);
    if (k < 0) k += p.len;
    if (k < 0 || k >= p.len) {
      flag(bad);
      continue;
    }
    combine_atomic(y + yo + k * p.yst[p.axis], u[i], red);
  }
}

// --- ScatterND: y's first m dims, the slice each tuple names, the tuples.
struct sndplan {
  int m;
  int64_t d[K_MAX_DIMS];
  size_t slice, n_tuples;
};

// Tuple t's slice of y, or -1 when an index is out of range.
__device__ __forceinline__ long long nd_row(const void *idx, int i32, size_t t, const sndplan &p) {
  long long off = 0;
  for (int j = 0; j < p.m; j++) {
    long long k = k_idx_at(idx, i32, t * (size_t)p.m + (size_t)j);
    if (k < 0) k += p.d[j];
    if (k < 0 || k >= p.d[j]) return -1;
    off = off * p.d[j] + k;
  }
  return off;
}

// A thread per element of the slice, every tuple in order.
template <class T>
__global__ void scatter_nd_serial(T *y, const T *u, const void *idx, int i32, sndplan p, int red, int *bad) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t s = (size_t)blockIdx.x * blockDim.x + threadIdx.x; s < p.slice; s += stride)
    for (size_t t = 0; t < p.n_tuples; t++) {
      long long row = nd_row(idx, i32, t, p);
      if (row < 0) {
        if (s == 0) flag(bad);
        continue;
      }
      T *d = y + (size_t)row * p.slice + s;
      *d = put(*d, u[t * p.slice + s], red);
    }
}

// A thread per updated element, combined atomically.
template <class T>
__global__ void scatter_nd_atomic(T *y, const T *u, const void *idx, int i32, sndplan p, int red, int *bad) {
  size_t n = p.n_tuples * p.slice, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t t = i / p.slice, s = i - t * p.slice;
    long long row = nd_row(idx, i32, t, p);
    if (row < 0) {
      if (s == 0) flag(bad);
      continue;
    }
    combine_atomic(y + (size_t)row * p.slice + s, u[i], red);
  }
}

// Whether red on dt is order-independent (the atomic kernels).
bool order_free(dtype dt, int red) {
  if (red == K_SCATTER_NONE) return false;
  if (dt == DT_INT32 || dt == DT_INT64) return true;
  return (dt == DT_FP32 || dt == DT_FP64) && (red == K_SCATTER_MAX || red == K_SCATTER_MIN);
}

int check_common(const char *kn, dtype dt, size_t esz, int red, err *e) {
  if (red < K_SCATTER_NONE || red > K_SCATTER_MIN)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: reduction %d is not one of none, add, mul, max, min", kn, red);
  if (red == K_SCATTER_NONE) {
    if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element size %zu is not 1, 2, 4 or 8", kn, esz);
  } else if (!k_num_dtype(dt) || dtype_size(dt) != esz) {
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: a reduction on %s (element size %zu) is not supported", kn,
                   dtype_wire_name(dt), esz);
  }
  return 0;
}

}  // namespace

// Runs CALL with T the element type: the bit type of esz for none, else dt's storage type.
#define SCATTER_TYPED(red, dt, esz, CALL) \
  if ((red) == K_SCATTER_NONE) {          \
    K_BY_ESZ(esz, CALL)                   \
  } else {                                \
    K_NUM_DISPATCH(e, kn, dt, T, CALL)    \
  }

extern "C" int k_scatter_elements_cuda(void *y, const void *upd, dtype dt, size_t esz, int ndim, const int64_t *ydims,
                                       int axis, const void *idx, int idx_i32, const int64_t *idims, int red, int *bad,
                                       cudaStream_t stream, err *e) {
  const char *kn = "k_scatter_elements_cuda";
  TRY(check_common(kn, dt, esz, red, e));
  if (ndim < 1 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 1..%d", kn, ndim, K_MAX_DIMS);
  if (!ydims || !idims) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims", kn);
  if (axis < 0 || axis >= ndim)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: axis %d outside 0..%d", kn, axis, ndim - 1);
  seplan p;
  p.nd = ndim, p.axis = axis, p.len = ydims[axis];
  uint64_t n = 1;
  int64_t ya = 1, ia = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (ydims[d] < 0 || idims[d] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kn, d);
    if (d != axis && idims[d] > ydims[d])
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: indices dim %d (%lld) exceeds data's (%lld)", kn, d,
                     (long long)idims[d], (long long)ydims[d]);
    p.idims[d] = idims[d], p.yst[d] = ya, p.ist[d] = ia;
    ya *= ydims[d], ia *= idims[d];
    if (__builtin_mul_overflow(n, (uint64_t)idims[d], &n))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kn);
  }
  if (n == 0) return 0;
  if (!y || !upd || !idx)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p upd=%p idx=%p)", kn, y, upd, idx);
  if (order_free(dt, red)) {
    unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
    K_NUM_DISPATCH(e, kn, dt, T,
                   (scatter_el_atomic<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)upd, idx, idx_i32,
                                                                            (size_t)n, p, red, bad)))
  } else {
    size_t lines = (size_t)n / (size_t)idims[axis];
    unsigned blocks = k_blocks_for(lines, K_THREADS);
    SCATTER_TYPED(red, dt, esz,
                  (scatter_el_lines<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)upd, idx, idx_i32, lines,
                                                                         p, red, bad)))
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_scatter_nd_cuda(void *y, const void *upd, dtype dt, size_t esz, int ydim, const int64_t *ydims,
                                 const void *idx, int idx_i32, size_t n_tuples, int m, int red, int *bad,
                                 cudaStream_t stream, err *e) {
  const char *kn = "k_scatter_nd_cuda";
  TRY(check_common(kn, dt, esz, red, e));
  if (ydim < 1 || ydim > K_MAX_DIMS || m < 1 || m > ydim)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: tuples of %d for rank %d", kn, m, ydim);
  if (!ydims) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims", kn);
  sndplan p;
  p.m = m, p.n_tuples = n_tuples, p.slice = 1;
  for (int d = 0; d < ydim; d++) {
    if (ydims[d] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kn, d);
    if (d < m) p.d[d] = ydims[d];
    else if (__builtin_mul_overflow(p.slice, (size_t)ydims[d], &p.slice))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: slice size overflows", kn);
  }
  size_t n;
  if (!k_mul3(n_tuples, p.slice, 1, &n)) return err_set(e, ERR_INVALID_ARGUMENT, "%s: update count overflows", kn);
  if (n == 0) return 0;
  if (!y || !upd || !idx)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p upd=%p idx=%p)", kn, y, upd, idx);
  if (order_free(dt, red)) {
    unsigned blocks = k_blocks_for(n, K_THREADS);
    K_NUM_DISPATCH(e, kn, dt, T,
                   (scatter_nd_atomic<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)upd, idx, idx_i32, p,
                                                                            red, bad)))
  } else {
    unsigned blocks = k_blocks_for(p.slice, K_THREADS);
    SCATTER_TYPED(red, dt, esz,
                  (scatter_nd_serial<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)upd, idx, idx_i32, p,
                                                                          red, bad)))
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}
