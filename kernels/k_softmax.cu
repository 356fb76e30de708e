// kernels/k_softmax.cu: CUDA twins of k_softmax and k_log_softmax over
// [outer, axis_len, inner]. inner == 1 (the last axis, by far the common
// case): one block per row, three passes (max, sum of exp, write) with
// warp-shuffle block reductions; the row stays in L1/L2 between passes.
// inner > 1: one thread per (outer, inner) column, walking the axis with
// stride `inner`, so neighbouring threads read neighbouring floats. The sum
// of exponentials is accumulated in double, as in the reference: a float sum
// over a long row (a thread adds thousands of terms) drifts by 1e-6..1e-5
// relative, and the kernel is memory-bound, so the double adds cost nothing
// measurable on Hopper. exp itself is float (expf, within 2 ulp).
#include "kernels/k_cuda_common.cuh"

namespace {

template <bool LOG>
__global__ void softmax_rows_kernel(float *y, const float *x, size_t rows, size_t len) {
  __shared__ float fshared[32];
  __shared__ double dshared[32];
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float *xr = x + row * len;
    float *yr = y + row * len;
    float mx = -INFINITY;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) mx = fmaxf(mx, xr[j]);
    mx = k_block_max(mx, fshared);
    double s = 0.0;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) s += expf(xr[j] - mx);
    s = k_block_sum(s, dshared);
    if (LOG) {
      // y = x - max - log(sum), as the reference: no log of a tiny probability.
      float shift = mx + (float)log(s);
      for (size_t j = threadIdx.x; j < len; j += blockDim.x) yr[j] = xr[j] - shift;
    } else {
      float inv = (float)(1.0 / s);
      for (size_t j = threadIdx.x; j < len; j += blockDim.x) yr[j] = expf(xr[j] - mx) * inv;
    }
  }
}

template <bool LOG>
__global__ void softmax_cols_kernel(float *y, const float *x, size_t outer, size_t len,
                                    size_t inner) {
  size_t cols = outer * inner, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += stride) {
    size_t o = c / inner, j = c - o * inner;
    const float *xc = x + o * len * inner + j;
    float *yc = y + o * len * inner + j;
    float mx = -INFINITY;
    for (size_t r = 0; r < len; r++) mx = fmaxf(mx, xc[r * inner]);
    double s = 0.0;
    for (size_t r = 0; r < len; r++) s += expf(xc[r * inner] - mx);
    if (LOG) {
      float shift = mx + (float)log(s);
      for (size_t r = 0; r < len; r++) yc[r * inner] = xc[r * inner] - shift;
    } else {
      float inv = (float)(1.0 / s);
      for (size_t r = 0; r < len; r++) yc[r * inner] = expf(xc[r * inner] - mx) * inv;
    }
  }
}

// Row kernel block size: enough warps to cover the row once, at most 512.
unsigned row_threads(size_t len) {
  size_t t = (len + 31) / 32 * 32;
  if (t > 512) t = 512;
  return (unsigned)(t ? t : 32);
}

template <bool LOG>
int launch(const char *kname, float *y, const float *x, size_t outer, size_t axis_len, size_t inner,
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
    softmax_rows_kernel<LOG><<<blocks, row_threads(axis_len), 0, stream>>>(y, x, outer, axis_len);
  } else {
    softmax_cols_kernel<LOG><<<k_blocks_for(outer * inner, K_THREADS), K_THREADS, 0, stream>>>(
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

extern "C" int k_log_softmax_cuda(float *y, const float *x, size_t outer, size_t axis_len,
                                  size_t inner, cudaStream_t stream, err *e) {
  return launch<true>("k_log_softmax_cuda", y, x, outer, axis_len, inner, stream, e);
}
