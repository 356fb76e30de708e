// kernels/norm/k_softmax.cu: CUDA twins of k_softmax and k_log_softmax over
// [outer, axis_len, inner], for float and half storage. inner == 1 (the
// last axis, by far the common case): one block per row, three passes
// (max, sum of exp, write) with warp-shuffle block reductions; the row
// stays in L1/L2 between passes.
// inner > 1: one thread per (outer, inner) column, walking the axis with
// stride `inner`, so neighbouring threads read neighbouring floats. The sum
// of exponentials is accumulated in k_acc<T>: double for float, as in the
// reference (a float sum over a long row, where a thread adds thousands of
// terms, drifts by 1e-6..1e-5 relative, and the kernel is memory-bound, so
// the double adds cost nothing measurable on Hopper); float for half, whose
// rounding dwarfs that drift. exp itself is float (expf, within 2 ulp).
#include "kernels/k_cuda_common.cuh"

namespace {

template <class T, bool LOG>
__global__ void softmax_rows_kernel(T *y, const T *x, size_t rows, size_t len) {
  typedef typename k_acc<T>::type acc;
  __shared__ float fshared[32];
  __shared__ acc ashared[32];
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * len;
    T *yr = y + row * len;
    float mx = -INFINITY;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) mx = fmaxf(mx, k_ld(xr[j]));
    mx = k_block_max(mx, fshared);
    acc s = 0;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) s += expf(k_ld(xr[j]) - mx);
    s = k_block_sum(s, ashared);
    if (LOG) {
      // y = x - max - log(sum), as the reference: no log of a tiny probability.
      float shift = mx + (float)log(s);
      for (size_t j = threadIdx.x; j < len; j += blockDim.x) yr[j] = k_st<T>(k_ld(xr[j]) - shift);
    } else {
      float inv = (float)(1 / s);
      for (size_t j = threadIdx.x; j < len; j += blockDim.x)
        yr[j] = k_st<T>(expf(k_ld(xr[j]) - mx) * inv);
    }
  }
}

template <class T, bool LOG>
__global__ void softmax_cols_kernel(T *y, const T *x, size_t outer, size_t len, size_t inner) {
  typedef typename k_acc<T>::type acc;
  size_t cols = outer * inner, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += stride) {
    size_t o = c / inner, j = c - o * inner;
    const T *xc = x + o * len * inner + j;
    T *yc = y + o * len * inner + j;
    float mx = -INFINITY;
    for (size_t r = 0; r < len; r++) mx = fmaxf(mx, k_ld(xc[r * inner]));
    acc s = 0;
    for (size_t r = 0; r < len; r++) s += expf(k_ld(xc[r * inner]) - mx);
    if (LOG) {
      float shift = mx + (float)log(s);
      for (size_t r = 0; r < len; r++) yc[r * inner] = k_st<T>(k_ld(xc[r * inner]) - shift);
    } else {
      float inv = (float)(1 / s);
      for (size_t r = 0; r < len; r++) yc[r * inner] = k_st<T>(expf(k_ld(xc[r * inner]) - mx) * inv);
    }
  }
}

template <bool LOG, class T>
int launch(const char *kname, T *y, const T *x, size_t outer, size_t axis_len, size_t inner,
           cudaStream_t stream, err *e) {
  size_t total;
  if (!k_mul3(outer, axis_len, inner, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu elements overflow", kname, outer,
                   axis_len, inner);
  if (total == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kname, (void *)y,
                   (const void *)x);
  if (inner == 1) {
    unsigned blocks = outer > 65535u * 4 ? 65535u * 4 : (unsigned)outer;
    softmax_rows_kernel<T, LOG><<<blocks, k_row_threads(axis_len), 0, stream>>>(y, x, outer, axis_len);
  } else {
    softmax_cols_kernel<T, LOG><<<k_blocks_for(outer * inner, K_THREADS), K_THREADS, 0, stream>>>(
        y, x, outer, axis_len, inner);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

}  // namespace

extern "C" int k_softmax_cuda(float *y, const float *x, size_t outer, size_t axis_len, size_t inner,
                              cudaStream_t stream, err *e) {
  return launch<false>("k_softmax_cuda", y, x, outer, axis_len, inner, stream, e);
}
extern "C" int k_softmax_f16_cuda(uint16_t *y, const uint16_t *x, size_t outer, size_t axis_len,
                                  size_t inner, cudaStream_t stream, err *e) {
  return launch<false>("k_softmax_f16_cuda", k_half(y), k_half(x), outer, axis_len, inner, stream, e);
}

extern "C" int k_log_softmax_cuda(float *y, const float *x, size_t outer, size_t axis_len,
                                  size_t inner, cudaStream_t stream, err *e) {
  return launch<true>("k_log_softmax_cuda", y, x, outer, axis_len, inner, stream, e);
}
extern "C" int k_log_softmax_f16_cuda(uint16_t *y, const uint16_t *x, size_t outer,
                                      size_t axis_len, size_t inner, cudaStream_t stream, err *e) {
  return launch<true>("k_log_softmax_f16_cuda", k_half(y), k_half(x), outer, axis_len, inner, stream,
                      e);
}
