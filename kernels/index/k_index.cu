// kernels/index/k_index.cu: CUDA twin of k_where (kernels/index/k_index.c): y = cond ? a : b
// with numpy broadcasting over all three, any element size (moved as is,
// so the result is the reference's bit for bit). The host plans the walk
// as kernels/elem/k_binary.cu does (size-1 output dims dropped, dims every operand walks
// contiguously merged, stride 0 where an operand repeats) and passes it by
// value; one thread per output element, 32-bit index math where it fits.
// Also the twins of k_gather, k_expand, k_gather_elements, k_gather_nd and k_trilu: a thread
// per output element, elements of 1, 2, 4 or 8 bytes moved as they are.
// An index out of range cannot fail the launch as the references fail the
// call: its element(s) come out as zero bytes, nothing outside x is read and
// the caller's flag (bad) is raised, which the CUDA plan turns into the CPU
// path's error when the batch finishes.
#include "kernels/k_cuda_typed.cuh"

namespace {

// Merged dims and, per operand (cond, a, b), the element strides.
struct wplan {
  int nd;
  int64_t dims[K_MAX_DIMS];
  int64_t st[3][K_MAX_DIMS];
};

void plan_make(wplan *p, int ndim, const int64_t *ydims, const int64_t *const *in) {
  int64_t st[3][K_MAX_DIMS];
  for (int k = 0; k < 3; k++) {
    int64_t acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
      st[k][i] = in[k][i] == 1 && ydims[i] != 1 ? 0 : acc;
      acc *= in[k][i];
    }
  }
  p->nd = 0;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] == 1) continue;
    int j = p->nd - 1;
    bool merge = j >= 0;
    for (int k = 0; k < 3 && merge; k++) merge = p->st[k][j] == st[k][i] * ydims[i];
    if (merge) {
      p->dims[j] *= ydims[i];
      for (int k = 0; k < 3; k++) p->st[k][j] = st[k][i];
    } else {
      p->dims[p->nd] = ydims[i];
      for (int k = 0; k < 3; k++) p->st[k][p->nd] = st[k][i];
      p->nd++;
    }
  }
  if (p->nd == 0) {
    p->nd = 1;
    p->dims[0] = 1;
    for (int k = 0; k < 3; k++) p->st[k][0] = 0;
  }
}

template <class T, typename IDX>
__global__ void where_kernel(T *y, const uint8_t *c, const T *a, const T *b, IDX n, wplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    int64_t co = 0, ao = 0, bo = 0;
    for (int k = p.nd - 1; k >= 0; k--) {
      IDX d = (IDX)p.dims[k];
      IDX q = rem / d;
      IDX r = rem - q * d;
      co += (int64_t)r * p.st[0][k];
      ao += (int64_t)r * p.st[1][k];
      bo += (int64_t)r * p.st[2][k];
      rem = q;
    }
    y[i] = c[co] ? a[ao] : b[bo];
  }
}

template <int B>
void launch(void *y, const uint8_t *c, const void *a, const void *b, uint64_t n, const wplan &p,
            cudaStream_t s) {
  typedef typename k_bits<B>::t T;
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  if (n <= 0x7fffffffu)
    where_kernel<T, uint32_t><<<blocks, K_THREADS, 0, s>>>((T *)y, c, (const T *)a, (const T *)b,
                                                          (uint32_t)n, p);
  else
    where_kernel<T, uint64_t><<<blocks, K_THREADS, 0, s>>>((T *)y, c, (const T *)a, (const T *)b, n, p);
}

}  // namespace

extern "C" int k_where_cuda(void *y, const uint8_t *cond, const void *a, const void *b, size_t esz,
                            int ndim, const int64_t *ydims, const int64_t *cdims,
                            const int64_t *adims, const int64_t *bdims, cudaStream_t stream, err *e) {
  const char *kn = "k_where_cuda";
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kn, ndim, K_MAX_DIMS);
  if (ndim > 0 && (!ydims || !cdims || !adims || !bdims))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims for rank %d", kn, ndim);
  if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element size %zu is not 1, 2, 4 or 8", kn, esz);
  const int64_t *in[3] = {cdims, adims, bdims};
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kn, i);
    for (int k = 0; k < 3; k++)
      if (in[k][i] != ydims[i] && in[k][i] != 1)
        return err_set(e, ERR_INVALID_ARGUMENT, "%s: axis %d: %s dim %lld does not broadcast to %lld", kn, i,
                       k == 0 ? "condition" : k == 1 ? "X" : "Y", (long long)in[k][i], (long long)ydims[i]);
    if (__builtin_mul_overflow(n, (uint64_t)ydims[i], &n))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kn);
  }
  if (n == 0) return 0;
  if (!y || !cond || !a || !b)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p cond=%p a=%p b=%p)", kn, y,
                   (const void *)cond, a, b);
  wplan p;
  plan_make(&p, ndim, ydims, in);
  switch (esz) {
    case 1: launch<1>(y, cond, a, b, n, p, stream); break;
    case 2: launch<2>(y, cond, a, b, n, p, stream); break;
    case 4: launch<4>(y, cond, a, b, n, p, stream); break;
    default: launch<8>(y, cond, a, b, n, p, stream); break;
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

namespace {

// An index out of range: its element(s) come out as zero bytes and *bad (when given) is set to 1, a
// plain store (every writer writes 1; bad may be mapped host memory).
__device__ __forceinline__ void oob(int *bad) {
  if (bad) *(volatile int *)bad = 1;
}

// GatherElements: idx's dims, x's strides (the axis's taken from the index).
struct geplan {
  int nd, axis;
  int64_t idims[K_MAX_DIMS], xst[K_MAX_DIMS], len;
};

template <class T>
__global__ void gather_elements_kernel(T *y, const T *x, const void *idx, int i32, size_t n, geplan p, int *bad) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    long long k = k_idx_at(idx, i32, i);
    if (k < 0) k += p.len;
    if (k < 0 || k >= p.len) {
      y[i] = (T)0;
      oob(bad);
      continue;
    }
    size_t rem = i;
    int64_t off = 0;
    for (int d = p.nd - 1; d >= 0; d--) {
      size_t dim = (size_t)p.idims[d], q = rem / dim;
      if (d != p.axis) off += (int64_t)(rem - q * dim) * p.xst[d];
      rem = q;
    }
    y[i] = x[off + k * p.xst[p.axis]];
  }
}

// GatherND: the data dims the m-tuples index.
struct gnplan {
  int m;
  int64_t d[K_MAX_DIMS];
  size_t n_tuples, slice, per_batch;
};

template <class T>
__global__ void gather_nd_kernel(T *y, const T *x, const void *idx, int i32, size_t n, gnplan p, int *bad) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t bt = i / p.slice, s = i - bt * p.slice, b = bt / p.n_tuples, off = 0;
    bool ok = true;
    for (int j = 0; j < p.m; j++) {
      long long k = k_idx_at(idx, i32, bt * (size_t)p.m + (size_t)j);
      if (k < 0) k += p.d[j];
      if (k < 0 || k >= p.d[j]) ok = false;
      off = off * (size_t)p.d[j] + (ok ? (size_t)k : 0);
    }
    if (!ok) oob(bad);
    y[i] = ok ? x[b * p.per_batch + off * p.slice + s] : (T)0;
  }
}

template <class T>
__global__ void trilu_kernel(T *y, const T *x, size_t n, int64_t rows, int64_t cols, int64_t k, int upper) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t c = (int64_t)(i % (size_t)cols), r = (int64_t)((i / (size_t)cols) % (size_t)rows);
    bool keep = upper ? c - r >= k : c - r <= k;  // |c - r| < 2^62: no overflow
    T v = x[i];  // read before the write: y may alias x
    y[i] = keep ? v : (T)0;
  }
}

int check_esz(const char *kn, size_t esz, err *e) {
  if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element size %zu is not 1, 2, 4 or 8", kn, esz);
  return 0;
}

}  // namespace

extern "C" int k_gather_elements_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                                      int axis, const void *idx, int idx_i32, const int64_t *idims, int *bad,
                                      cudaStream_t stream, err *e) {
  const char *kn = "k_gather_elements_cuda";
  TRY(check_esz(kn, esz, e));
  if (ndim < 1 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 1..%d", kn, ndim, K_MAX_DIMS);
  if (!xdims || !idims) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims", kn);
  if (axis < 0 || axis >= ndim)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: axis %d outside 0..%d", kn, axis, ndim - 1);
  geplan p;
  p.nd = ndim, p.axis = axis, p.len = xdims[axis];
  uint64_t n = 1;
  int64_t acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (xdims[d] < 0 || idims[d] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kn, d);
    if (d != axis && idims[d] > xdims[d])
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: indices dim %d (%lld) exceeds data's (%lld)", kn, d,
                     (long long)idims[d], (long long)xdims[d]);
    p.idims[d] = idims[d];
    p.xst[d] = acc;
    acc *= xdims[d];
    if (__builtin_mul_overflow(n, (uint64_t)idims[d], &n))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kn);
  }
  if (n == 0) return 0;
  if (!y || !x || !idx)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p idx=%p)", kn, y, x, idx);
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  K_BY_ESZ(esz, (gather_elements_kernel<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)x, idx,
                                                                              idx_i32, (size_t)n, p, bad)))
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_gather_nd_cuda(void *y, const void *x, size_t esz, size_t batch, int m, const int64_t *d,
                                size_t slice, const void *idx, int idx_i32, size_t n_tuples, int *bad,
                                cudaStream_t stream, err *e) {
  const char *kn = "k_gather_nd_cuda";
  TRY(check_esz(kn, esz, e));
  if (m < 1 || m > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: tuple length %d outside 1..%d", kn, m, K_MAX_DIMS);
  if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims", kn);
  gnplan p;
  p.m = m, p.n_tuples = n_tuples, p.slice = slice, p.per_batch = slice;
  for (int j = 0; j < m; j++) {
    if (d[j] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim %d", kn, j);
    p.d[j] = d[j];
    if (__builtin_mul_overflow(p.per_batch, (size_t)d[j], &p.per_batch))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: data size overflows", kn);
  }
  size_t n;
  if (!k_mul3(batch, n_tuples, slice, &n))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu overflows", kn, batch, n_tuples, slice);
  if (n == 0) return 0;
  if (!y || !x || !idx)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p idx=%p)", kn, y, x, idx);
  unsigned blocks = k_blocks_for(n, K_THREADS);
  K_BY_ESZ(esz, (gather_nd_kernel<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)x, idx, idx_i32,
                                                                        n, p, bad)))
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_trilu_cuda(void *y, const void *x, size_t esz, size_t batch, int64_t rows, int64_t cols,
                            int64_t k, int upper, cudaStream_t stream, err *e) {
  const char *kn = "k_trilu_cuda";
  TRY(check_esz(kn, esz, e));
  if (rows < 0 || cols < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative matrix dims %lld x %lld", kn, (long long)rows,
                   (long long)cols);
  size_t n;
  if (!k_mul3(batch, (size_t)rows, (size_t)cols, &n))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %lld x %lld overflows", kn, batch, (long long)rows,
                   (long long)cols);
  if (n == 0) return 0;
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kn, y, x);
  // a k beyond the matrix acts as the nearest one inside it (clamped so c - r - k cannot overflow)
  if (k > cols) k = cols;
  if (k < -rows) k = -rows;
  unsigned blocks = k_blocks_for(n, K_THREADS);
  K_BY_ESZ(esz, (trilu_kernel<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)x, n, rows, cols, k,
                                                                    upper)))
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

namespace {

template <class T>
__global__ void gather_kernel(T *y, const T *x, const void *idx, int i32, size_t n, size_t n_idx, size_t inner,
                              int64_t len, int *bad) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t in = i % inner, ot = i / inner, t = ot % n_idx, o = ot / n_idx;
    long long k = k_idx_at(idx, i32, t);
    if (k < 0) k += len;
    bool ok = k >= 0 && k < len;
    if (!ok) oob(bad);
    y[i] = ok ? x[(o * (size_t)len + (size_t)k) * inner + in] : (T)0;
  }
}

// Expand, Tile and Slice as one walk: y's dims; per dim, the period of x's index (Tile: x's dim;
// the others: y's, so no wrap) and x's stride for a step of y (0 where Expand repeats, times the
// step for Slice); x's offset of y[0] (Slice's starts).
struct walkplan {
  int nd;
  int64_t off;
  int64_t dims[K_MAX_DIMS], per[K_MAX_DIMS], xst[K_MAX_DIMS];
};

template <class T>
__global__ void walk_kernel(T *y, const T *x, size_t n, walkplan p) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t rem = i;
    int64_t off = p.off;
    for (int d = p.nd - 1; d >= 0; d--) {
      size_t dim = (size_t)p.dims[d], q = rem / dim;
      off += (int64_t)((rem - q * dim) % (size_t)p.per[d]) * p.xst[d];
      rem = q;
    }
    y[i] = x[off];
  }
}

// A walk over ndim (0..K_MAX_DIMS) dims: checks the rank and pointers, starts the plan as rank 0's
// single element; the launcher fills dims d from ndim - 1 down.
int walk_begin(const char *kn, size_t esz, int ndim, const int64_t *ydims, const int64_t *xdims, walkplan *p,
               err *e) {
  TRY(check_esz(kn, esz, e));
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kn, ndim, K_MAX_DIMS);
  if (ndim > 0 && (!ydims || !xdims)) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims", kn);
  p->nd = ndim > 0 ? ndim : 1;
  p->off = 0;
  p->dims[0] = 1, p->per[0] = 1, p->xst[0] = 0;
  return 0;
}

// n *= dim without wrapping.
int walk_count(const char *kn, uint64_t *n, int64_t dim, err *e) {
  if (__builtin_mul_overflow(*n, (uint64_t)dim, n))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kn);
  return 0;
}

int walk_launch(const char *kn, void *y, const void *x, size_t esz, uint64_t n, const walkplan &p, cudaStream_t stream,
                err *e) {
  if (n == 0) return 0;
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kn, y, x);
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  K_BY_ESZ(esz, (walk_kernel<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)x, (size_t)n, p)))
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

}  // namespace

extern "C" int k_slice_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims, const int64_t *starts,
                            const int64_t *steps, const int64_t *ydims, cudaStream_t stream, err *e) {
  const char *kn = "k_slice_cuda";
  walkplan p;
  TRY(walk_begin(kn, esz, ndim, ydims, xdims, &p, e));
  if (ndim > 0 && (!starts || !steps)) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL starts or steps", kn);
  uint64_t n = 1;
  int64_t acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (ydims[d] < 0 || xdims[d] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kn, d);
    // the first and the last element read stay inside x's dim: nothing outside x is read
    int64_t last = starts[d] + (ydims[d] > 0 ? (ydims[d] - 1) * steps[d] : 0);
    if (ydims[d] > 0 && (starts[d] < 0 || starts[d] >= xdims[d] || last < 0 || last >= xdims[d]))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: axis %d: %lld elements from %lld by %lld leave [0, %lld)", kn, d,
                     (long long)ydims[d], (long long)starts[d], (long long)steps[d], (long long)xdims[d]);
    p.dims[d] = ydims[d];
    p.per[d] = ydims[d] > 0 ? ydims[d] : 1;
    p.xst[d] = steps[d] * acc;
    p.off += (ydims[d] > 0 ? starts[d] : 0) * acc;
    acc *= xdims[d];
    TRY(walk_count(kn, &n, ydims[d], e));
  }
  return walk_launch(kn, y, x, esz, n, p, stream, e);
}

extern "C" int k_gather_cuda(void *y, const void *x, size_t esz, size_t outer, int64_t axis_len, size_t inner,
                             const void *idx, int idx_i32, size_t n_idx, int *bad, cudaStream_t stream, err *e) {
  const char *kn = "k_gather_cuda";
  TRY(check_esz(kn, esz, e));
  if (axis_len < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative axis length", kn);
  size_t n;
  if (!k_mul3(outer, n_idx, inner, &n))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu overflows", kn, outer, n_idx, inner);
  if (n == 0) return 0;
  if (!y || !x || !idx)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p idx=%p)", kn, y, x, idx);
  unsigned blocks = k_blocks_for(n, K_THREADS);
  K_BY_ESZ(esz, (gather_kernel<T><<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)x, idx, idx_i32, n,
                                                                     n_idx, inner, axis_len, bad)))
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_expand_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims,
                             const int64_t *xdims, cudaStream_t stream, err *e) {
  const char *kn = "k_expand_cuda";
  walkplan p;
  TRY(walk_begin(kn, esz, ndim, ydims, xdims, &p, e));
  uint64_t n = 1;
  int64_t acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (ydims[d] < 0 || (xdims[d] != ydims[d] && xdims[d] != 1))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: axis %d: dim %lld does not broadcast to %lld", kn, d,
                     (long long)xdims[d], (long long)ydims[d]);
    p.dims[d] = ydims[d];
    p.per[d] = ydims[d] > 0 ? ydims[d] : 1;
    p.xst[d] = xdims[d] == 1 ? 0 : acc;
    acc *= xdims[d];
    TRY(walk_count(kn, &n, ydims[d], e));
  }
  return walk_launch(kn, y, x, esz, n, p, stream, e);
}

extern "C" int k_tile_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims,
                           const int64_t *xdims, cudaStream_t stream, err *e) {
  const char *kn = "k_tile_cuda";
  walkplan p;
  TRY(walk_begin(kn, esz, ndim, ydims, xdims, &p, e));
  uint64_t n = 1;
  int64_t acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (ydims[d] < 0 || (ydims[d] > 0 && (xdims[d] <= 0 || ydims[d] % xdims[d] != 0)))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: axis %d: dim %lld is no multiple of %lld", kn, d,
                     (long long)ydims[d], (long long)xdims[d]);
    p.dims[d] = ydims[d];
    p.per[d] = xdims[d] > 0 ? xdims[d] : 1;
    p.xst[d] = acc;
    acc *= xdims[d];
    TRY(walk_count(kn, &n, ydims[d], e));
  }
  return walk_launch(kn, y, x, esz, n, p, stream, e);
}
