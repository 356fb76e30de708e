// kernels/k_bias_act.cu: the fused GEMM epilogue y = act(x + bias[col]) on a
// row-major [rows, cols] matrix, for the cuBLASLt path when its own epilogue
// cannot be used. One pass over the matrix instead of a broadcast add and an
// activation; the math is the same float operations as k_binary_f32 (add)
// followed by k_relu / k_gelu, so it matches those references. A 2D grid
// (rows on y, columns on x) avoids a division per element to find the column.
#include "kernels/k_cuda_common.cuh"

namespace {

template <k_act ACT>
__device__ __forceinline__ float act(float v) {
  if (ACT == K_ACT_RELU) return k_relu_f(v);
  if (ACT == K_ACT_GELU) return k_gelu_erf_f(v);
  if (ACT == K_ACT_GELU_TANH) return k_gelu_tanh_f(v);
  return v;
}

template <k_act ACT, bool BIAS>
__global__ void bias_act_kernel(float *y, const float *x, const float *bias, size_t rows,
                                size_t cols) {
  size_t cstride = (size_t)gridDim.x * blockDim.x;
  for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += cstride) {
      float v = xr[c];
      if (BIAS) v = __fadd_rn(v, bias[c]);
      yr[c] = act<ACT>(v);
    }
  }
}

template <k_act ACT>
void launch_act(float *y, const float *x, const float *bias, size_t rows, size_t cols, dim3 grid,
                cudaStream_t stream) {
  if (bias)
    bias_act_kernel<ACT, true><<<grid, K_THREADS, 0, stream>>>(y, x, bias, rows, cols);
  else
    bias_act_kernel<ACT, false><<<grid, K_THREADS, 0, stream>>>(y, x, bias, rows, cols);
}

}  // namespace

extern "C" int k_bias_act_cuda(float *y, const float *x, const float *bias, size_t rows,
                               size_t cols, k_act act_kind, cudaStream_t stream, err *e) {
  static const char kname[] = "k_bias_act_cuda";
  if (act_kind != K_ACT_NONE && act_kind != K_ACT_RELU && act_kind != K_ACT_GELU &&
      act_kind != K_ACT_GELU_TANH)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown activation %d", kname, (int)act_kind);
  size_t total;
  if (!k_mul3(rows, cols, 1, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu elements overflow", kname, rows, cols);
  if (total == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kname, (void *)y,
                   (const void *)x);
  // Columns over grid.x (enough blocks to cover a row once), rows over
  // grid.y (at most 65535, the rest by the loop); about K_MAX_BLOCKS blocks.
  size_t gx = (cols + K_THREADS - 1) / K_THREADS;
  if (gx > K_MAX_BLOCKS) gx = K_MAX_BLOCKS;
  size_t gy = K_MAX_BLOCKS / gx;
  if (gy < 1) gy = 1;
  if (gy > rows) gy = rows;
  if (gy > 65535) gy = 65535;
  dim3 grid((unsigned)gx, (unsigned)gy);
  switch (act_kind) {
    case K_ACT_NONE:
      launch_act<K_ACT_NONE>(y, x, bias, rows, cols, grid, stream);
      break;
    case K_ACT_RELU:
      launch_act<K_ACT_RELU>(y, x, bias, rows, cols, grid, stream);
      break;
    case K_ACT_GELU:
      launch_act<K_ACT_GELU>(y, x, bias, rows, cols, grid, stream);
      break;
    case K_ACT_GELU_TANH:
      launch_act<K_ACT_GELU_TANH>(y, x, bias, rows, cols, grid, stream);
      break;
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
