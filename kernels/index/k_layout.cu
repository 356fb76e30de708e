// kernels/index/k_layout.cu: CUDA twin of k_transpose (any element size, up to
// K_MAX_DIMS dims). The host plans as the reference does: output dims with
// their source strides, size-1 dims dropped, neighbours merged where the
// source is contiguous across them. A plan that collapses to one contiguous
// run is a device-to-device copy; otherwise each thread computes one output
// element's source offset by unravelling its index over the merged dims.
// Elements of 1, 2, 4, 8 and 16 bytes move as one typed load when both
// pointers are aligned to it; other sizes move byte by byte.
#include "kernels/k_cuda_common.cuh"

namespace {

struct tplan {
  int nd;
  int64_t dims[K_MAX_DIMS];  // output dims, outermost first
  int64_t ss[K_MAX_DIMS];    // source stride of each, in elements
};

template <typename T, typename IDX>
__global__ void transpose_kernel(T *y, const T *x, IDX n, tplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    int64_t off = 0;
    for (int k = p.nd - 1; k >= 0; k--) {
      IDX d = (IDX)p.dims[k];
      IDX q = rem / d;
      off += (int64_t)(rem - q * d) * p.ss[k];
      rem = q;
    }
    y[i] = x[off];
  }
}

// Any element size: thread per output element, byte loop.
template <typename IDX>
__global__ void transpose_bytes_kernel(char *y, const char *x, IDX n, size_t es, tplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    int64_t off = 0;
    for (int k = p.nd - 1; k >= 0; k--) {
      IDX d = (IDX)p.dims[k];
      IDX q = rem / d;
      off += (int64_t)(rem - q * d) * p.ss[k];
      rem = q;
    }
    const char *src = x + off * (int64_t)es;
    char *dst = y + (size_t)i * es;
    for (size_t b = 0; b < es; b++) dst[b] = src[b];
  }
}

template <typename T>
void launch_typed(void *y, const void *x, size_t n, const tplan &p, cudaStream_t stream) {
  unsigned blocks = k_blocks_for(n, K_THREADS);
  if (n <= 0x7fffffffu)
    transpose_kernel<T, uint32_t>
        <<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)x, (uint32_t)n, p);
  else
    transpose_kernel<T, uint64_t>
        <<<blocks, K_THREADS, 0, stream>>>((T *)y, (const T *)x, (uint64_t)n, p);
}

}  // namespace

extern "C" int k_transpose_cuda(void *y, const void *x, size_t elem_size, int ndim,
                                const int64_t *xdims, const int *perm, cudaStream_t stream,
                                err *e) {
  static const char kname[] = "k_transpose_cuda";
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kname, ndim, K_MAX_DIMS);
  if (elem_size == 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: element size 0", kname);
  if (ndim > 0 && (!xdims || !perm))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims or perm for rank %d", kname, ndim);
  unsigned seen = 0;
  for (int i = 0; i < ndim; i++) {
    if (perm[i] < 0 || perm[i] >= ndim || (seen >> perm[i]) & 1u)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "%s: perm is not a permutation of 0..%d (perm[%d] = %d)", kname, ndim - 1, i,
                     perm[i]);
    seen |= 1u << perm[i];
  }
  // Source strides in elements; the count of elements, with overflow checks.
  int64_t xstride[K_MAX_DIMS];
  uint64_t n = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    if (xdims[i] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kname, i);
    xstride[i] = (int64_t)n;
    if (__builtin_mul_overflow(n, (uint64_t)xdims[i], &n))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kname);
  }
  uint64_t bytes;
  if (__builtin_mul_overflow(n, (uint64_t)elem_size, &bytes) || bytes > (uint64_t)INT64_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: byte count overflows", kname);
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kname, y, x);

  tplan p;
  p.nd = 0;
  for (int i = 0; i < ndim; i++) {
    int64_t d = xdims[perm[i]], s = xstride[perm[i]];
    if (d == 1) continue;
    if (p.nd > 0 && p.ss[p.nd - 1] == s * d) {
      p.dims[p.nd - 1] *= d;
      p.ss[p.nd - 1] = s;
    } else {
      p.dims[p.nd] = d;
      p.ss[p.nd] = s;
      p.nd++;
    }
  }
  if (p.nd == 0 || (p.nd == 1 && p.ss[0] == 1)) {
    // The permutation keeps memory order: one contiguous copy.
    K_CUDA_TRY(e, kname, cudaMemcpyAsync(y, x, (size_t)bytes, cudaMemcpyDeviceToDevice, stream));
    return 0;
  }
  uintptr_t align = (uintptr_t)y | (uintptr_t)x;
  if (elem_size == 1) {
    launch_typed<uint8_t>(y, x, (size_t)n, p, stream);
  } else if (elem_size == 2 && align % 2 == 0) {
    launch_typed<uint16_t>(y, x, (size_t)n, p, stream);
  } else if (elem_size == 4 && align % 4 == 0) {
    launch_typed<uint32_t>(y, x, (size_t)n, p, stream);
  } else if (elem_size == 8 && align % 8 == 0) {
    launch_typed<uint64_t>(y, x, (size_t)n, p, stream);
  } else if (elem_size == 16 && align % 16 == 0) {
    launch_typed<uint4>(y, x, (size_t)n, p, stream);
  } else {
    unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
    if (n <= 0x7fffffffu)
      transpose_bytes_kernel<uint32_t>
          <<<blocks, K_THREADS, 0, stream>>>((char *)y, (const char *)x, (uint32_t)n, elem_size, p);
    else
      transpose_bytes_kernel<uint64_t>
          <<<blocks, K_THREADS, 0, stream>>>((char *)y, (const char *)x, (uint64_t)n, elem_size, p);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
