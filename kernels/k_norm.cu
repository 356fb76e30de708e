// kernels/k_norm.cu: CUDA twins of k_layer_norm and k_batch_norm, for
// float and half storage (half: scale, bias, mean and var are half too).
// Layer norm: one block per row, two passes like the reference's (mean
// first, then the variance of the centred values, so a large mean does not
// cancel the spread), block reductions by warp shuffle. Sums and the
// per-element normalisation are in k_acc<T>: for float, double like the
// reference, which keeps the result within an ulp of it for any offset or
// row length; the kernel is memory-bound and Hopper's FP64 rate is half its
// FP32 rate, so this is free there (on GPUs with 1/64-rate FP64 it would
// not be). For half, float: the output's rounding dwarfs the difference.
// Batch norm: the per-channel factor is computed in double exactly as the
// reference does and the per-element math uses _rn intrinsics, so FP32
// results are bit-identical to k_batch_norm, and FP16 ones are its results
// on the widened inputs, rounded once.
#include "kernels/k_cuda_common.cuh"

namespace {

template <class T>
__global__ void layer_norm_kernel(T *y, const T *x, const T *scale, const T *bias, size_t rows,
                                  size_t cols, float eps) {
  typedef typename k_acc<T>::type acc;
  __shared__ acc shared[32];
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * cols;
    T *yr = y + row * cols;
    acc s = 0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) s += k_ld(xr[j]);
    acc mean = k_block_sum(s, shared) / (acc)cols;
    acc ss = 0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      acc d = k_ld(xr[j]) - mean;
      ss += d * d;
    }
    acc inv_std = 1 / sqrt(k_block_sum(ss, shared) / (acc)cols + (acc)eps);
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      acc v = (k_ld(xr[j]) - mean) * inv_std * k_ld(scale[j]);
      if (bias) v += k_ld(bias[j]);
      yr[j] = k_st<T>((float)v);
    }
  }
}

// grid.x walks (n*c) planes, grid.y and threads walk the spatial extent.
template <class T>
__global__ void batch_norm_kernel(T *y, const T *x, const T *scale, const T *bias, const T *mean,
                                  const T *var, size_t planes, size_t c, size_t spatial, float eps) {
  for (size_t p = blockIdx.x; p < planes; p += gridDim.x) {
    size_t ch = p % c;
    float k = (float)((double)k_ld(scale[ch]) / sqrt((double)k_ld(var[ch]) + (double)eps));
    float m = k_ld(mean[ch]), b = bias ? k_ld(bias[ch]) : 0.0f;
    const T *xs = x + p * spatial;
    T *ys = y + p * spatial;
    size_t stride = (size_t)gridDim.y * blockDim.x;
    for (size_t s = (size_t)blockIdx.y * blockDim.x + threadIdx.x; s < spatial; s += stride)
      ys[s] = k_st<T>(__fadd_rn(__fmul_rn(__fsub_rn(k_ld(xs[s]), m), k), b));
  }
}

template <class T>
int launch_layer_norm(const char *kname, T *y, const T *x, const T *scale, const T *bias, size_t rows,
                      size_t cols, float eps, cudaStream_t stream, err *e) {
  size_t total;
  if (!k_mul3(rows, cols, 1, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu elements overflow", kname, rows, cols);
  if (!(eps >= 0.0f))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: epsilon %g is negative or NaN", kname,
                   (double)eps);
  if (total == 0) return 0;
  if (!y || !x || !scale)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p scale=%p)", kname,
                   (void *)y, (const void *)x, (const void *)scale);
  unsigned blocks = rows > 65535u * 4 ? 65535u * 4 : (unsigned)rows;
  layer_norm_kernel<T><<<blocks, k_row_threads(cols), 0, stream>>>(y, x, scale, bias, rows, cols, eps);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

template <class T>
int launch_batch_norm(const char *kname, T *y, const T *x, const T *scale, const T *bias,
                      const T *mean, const T *var, size_t n, size_t c, size_t spatial, float eps,
                      cudaStream_t stream, err *e) {
  size_t total;
  if (!k_mul3(n, c, spatial, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu elements overflow", kname, n, c,
                   spatial);
  if (total == 0) return 0;
  if (!y || !x || !scale || !mean || !var)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p scale=%p mean=%p var=%p)",
                   kname, (void *)y, (const void *)x, (const void *)scale, (const void *)mean,
                   (const void *)var);
  size_t planes = n * c;
  unsigned gx = planes > 65535u * 4 ? 65535u * 4 : (unsigned)planes;
  // Split a plane over several blocks only when there are too few planes to
  // fill the GPU; grid.y is limited to 65535.
  size_t per_plane = (spatial + K_THREADS - 1) / K_THREADS;
  size_t want = planes >= 1024 ? 1 : (1024 + planes - 1) / planes;
  if (want > per_plane) want = per_plane;
  if (want > 65535) want = 65535;
  dim3 grid(gx, (unsigned)(want ? want : 1));
  batch_norm_kernel<T><<<grid, K_THREADS, 0, stream>>>(y, x, scale, bias, mean, var, planes, c,
                                                       spatial, eps);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

}  // namespace

extern "C" int k_layer_norm_cuda(float *y, const float *x, const float *scale, const float *bias,
                                 size_t rows, size_t cols, float eps, cudaStream_t stream, err *e) {
  return launch_layer_norm("k_layer_norm_cuda", y, x, scale, bias, rows, cols, eps, stream, e);
}
extern "C" int k_layer_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                     const uint16_t *bias, size_t rows, size_t cols, float eps,
                                     cudaStream_t stream, err *e) {
  return launch_layer_norm("k_layer_norm_f16_cuda", k_half(y), k_half(x), k_half(scale),
                           k_half(bias), rows, cols, eps, stream, e);
}

extern "C" int k_batch_norm_cuda(float *y, const float *x, const float *scale, const float *bias,
                                 const float *mean, const float *var, size_t n, size_t c,
                                 size_t spatial, float eps, cudaStream_t stream, err *e) {
  return launch_batch_norm("k_batch_norm_cuda", y, x, scale, bias, mean, var, n, c, spatial, eps,
                           stream, e);
}
extern "C" int k_batch_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                     const uint16_t *bias, const uint16_t *mean,
                                     const uint16_t *var, size_t n, size_t c, size_t spatial,
                                     float eps, cudaStream_t stream, err *e) {
  return launch_batch_norm("k_batch_norm_f16_cuda", k_half(y), k_half(x), k_half(scale),
                           k_half(bias), k_half(mean), k_half(var), n, c, spatial, eps, stream, e);
}
