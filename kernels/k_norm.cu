// kernels/k_norm.cu: CUDA twins of k_layer_norm and k_batch_norm.
// Layer norm: one block per row, two passes like the reference's (mean
// first, then the variance of the centred values, so a large mean does not
// cancel the spread), block reductions by warp shuffle. Sums and the
// per-element normalisation are in double like the reference, which keeps
// the result within an ulp of it for any offset or row length; the kernel
// is memory-bound and Hopper's FP64 rate is half its FP32 rate, so this is
// free there (on GPUs with 1/64-rate FP64 it would not be).
// Batch norm: the per-channel factor is computed in double exactly as the
// reference does and the per-element math uses _rn intrinsics, so results
// are bit-identical to k_batch_norm.
#include "kernels/k_cuda_common.cuh"

namespace {

__global__ void layer_norm_kernel(float *y, const float *x, const float *scale, const float *bias,
                                  size_t rows, size_t cols, float eps) {
  __shared__ double shared[32];
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float *xr = x + row * cols;
    float *yr = y + row * cols;
    double s = 0.0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
    double mean = k_block_sum(s, shared) / (double)cols;
    double ss = 0.0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double d = xr[j] - mean;
      ss += d * d;
    }
    double inv_std = 1.0 / sqrt(k_block_sum(ss, shared) / (double)cols + (double)eps);
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double v = (xr[j] - mean) * inv_std * scale[j];
      if (bias) v += bias[j];
      yr[j] = (float)v;
    }
  }
}

// grid.x walks (n*c) planes, grid.y and threads walk the spatial extent.
__global__ void batch_norm_kernel(float *y, const float *x, const float *scale, const float *bias,
                                  const float *mean, const float *var, size_t planes, size_t c,
                                  size_t spatial, float eps) {
  for (size_t p = blockIdx.x; p < planes; p += gridDim.x) {
    size_t ch = p % c;
    float k = (float)((double)scale[ch] / sqrt((double)var[ch] + (double)eps));
    float m = mean[ch], b = bias ? bias[ch] : 0.0f;
    const float *xs = x + p * spatial;
    float *ys = y + p * spatial;
    size_t stride = (size_t)gridDim.y * blockDim.x;
    for (size_t s = (size_t)blockIdx.y * blockDim.x + threadIdx.x; s < spatial; s += stride)
      ys[s] = __fadd_rn(__fmul_rn(__fsub_rn(xs[s], m), k), b);
  }
}

}  // namespace

extern "C" int k_layer_norm_cuda(float *y, const float *x, const float *scale, const float *bias,
                                 size_t rows, size_t cols, float eps, cudaStream_t stream, err *e) {
  static const char kname[] = "k_layer_norm_cuda";
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
  // Enough warps to cover a row once, at most 512 threads.
  size_t t = (cols + 31) / 32 * 32;
  unsigned threads = (unsigned)(t > 512 ? 512 : t);
  unsigned blocks = rows > 65535u * 4 ? 65535u * 4 : (unsigned)rows;
  layer_norm_kernel<<<blocks, threads, 0, stream>>>(y, x, scale, bias, rows, cols, eps);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_batch_norm_cuda(float *y, const float *x, const float *scale, const float *bias,
                                 const float *mean, const float *var, size_t n, size_t c,
                                 size_t spatial, float eps, cudaStream_t stream, err *e) {
  static const char kname[] = "k_batch_norm_cuda";
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
  batch_norm_kernel<<<grid, K_THREADS, 0, stream>>>(y, x, scale, bias, mean, var, planes, c,
                                                    spatial, eps);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
