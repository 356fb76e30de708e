// kernels/elem/k_bias_act.cu: the fused GEMM epilogue y = act(x + bias[col]) on a
// row-major [rows, cols] matrix, for float and half storage, for the
// cuBLASLt path when its own epilogue cannot be used. One pass over the
// matrix instead of a broadcast add and an activation; the math is the same
// float operations as k_binary_f32 (add) followed by k_relu / k_gelu, so it
// matches those references (half: x + bias stays in float before the
// activation, one rounding at the end). A 2D grid (rows on y, columns on x)
// avoids a division per element to find the column; half moves pairs of
// columns where the shape and pointers allow.
#include "kernels/k_cuda_common.cuh"

namespace {

template <k_act ACT>
__device__ __forceinline__ float act(float v) {
  if (ACT == K_ACT_RELU) return k_relu_f(v);
  if (ACT == K_ACT_GELU) return k_gelu_erf_f(v);
  if (ACT == K_ACT_GELU_TANH) return k_gelu_tanh_f(v);
  return v;
}

template <class T, k_act ACT, bool BIAS>
__global__ void bias_act_kernel(T *y, const T *x, const T *bias, size_t rows, size_t cols) {
  size_t cstride = (size_t)gridDim.x * blockDim.x;
  for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += cstride) {
      float v = k_ld(xr[c]);
      if (BIAS) v = __fadd_rn(v, k_ld(bias[c]));
      yr[c] = k_st<T>(act<ACT>(v));
    }
  }
}

// Pairs of columns (k_pairs: half only): cols even and y, x, bias aligned to
// a pair, so every row starts on a pair. `pairs` = cols / 2.
template <class T, k_act ACT, bool BIAS>
__global__ void bias_act_pair_kernel(k_vec<T, 2> *y, const k_vec<T, 2> *x, const k_vec<T, 2> *bias,
                                     size_t rows, size_t pairs) {
  size_t cstride = (size_t)gridDim.x * blockDim.x;
  for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const k_vec<T, 2> *xr = x + r * pairs;
    k_vec<T, 2> *yr = y + r * pairs;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < pairs; c += cstride) {
      k_vec<T, 2> v = xr[c], b;
      if (BIAS) b = bias[c];
#pragma unroll
      for (int k = 0; k < 2; k++) {
        float f = k_ld(v.v[k]);
        if (BIAS) f = __fadd_rn(f, k_ld(b.v[k]));
        v.v[k] = k_st<T>(act<ACT>(f));
      }
      yr[c] = v;
    }
  }
}

// Columns over grid.x (enough blocks to cover a row of `width` once), rows
// over grid.y (at most 65535, the rest by the loop); about K_MAX_BLOCKS blocks.
static dim3 act_grid(size_t rows, size_t width) {
  size_t gx = (width + K_THREADS - 1) / K_THREADS;
  if (gx > K_MAX_BLOCKS) gx = K_MAX_BLOCKS;
  size_t gy = K_MAX_BLOCKS / gx;
  if (gy < 1) gy = 1;
  if (gy > rows) gy = rows;
  if (gy > 65535) gy = 65535;
  return dim3((unsigned)gx, (unsigned)gy);
}

template <class T, k_act ACT>
void launch_act(T *y, const T *x, const T *bias, size_t rows, size_t cols, cudaStream_t stream) {
  if constexpr (k_pairs<T>::value) {
    typedef k_vec<T, 2> pair;
    const unsigned pb = sizeof(pair);
    if (cols % 2 == 0 && k_aligned(y, pb) && k_aligned(x, pb) && (!bias || k_aligned(bias, pb))) {
      dim3 grid = act_grid(rows, cols / 2);
      pair *y2 = (pair *)y;
      const pair *x2 = (const pair *)x, *b2 = (const pair *)bias;
      if (bias)
        bias_act_pair_kernel<T, ACT, true><<<grid, K_THREADS, 0, stream>>>(y2, x2, b2, rows, cols / 2);
      else
        bias_act_pair_kernel<T, ACT, false><<<grid, K_THREADS, 0, stream>>>(y2, x2, b2, rows, cols / 2);
      return;
    }
  }
  dim3 grid = act_grid(rows, cols);
  if (bias)
    bias_act_kernel<T, ACT, true><<<grid, K_THREADS, 0, stream>>>(y, x, bias, rows, cols);
  else
    bias_act_kernel<T, ACT, false><<<grid, K_THREADS, 0, stream>>>(y, x, bias, rows, cols);
}

template <class T>
int launch(const char *kname, T *y, const T *x, const T *bias, size_t rows, size_t cols,
           k_act act_kind, cudaStream_t stream, err *e) {
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
  switch (act_kind) {
    case K_ACT_NONE:
      launch_act<T, K_ACT_NONE>(y, x, bias, rows, cols, stream);
      break;
    case K_ACT_RELU:
      launch_act<T, K_ACT_RELU>(y, x, bias, rows, cols, stream);
      break;
    case K_ACT_GELU:
      launch_act<T, K_ACT_GELU>(y, x, bias, rows, cols, stream);
      break;
    case K_ACT_GELU_TANH:
      launch_act<T, K_ACT_GELU_TANH>(y, x, bias, rows, cols, stream);
      break;
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

}  // namespace

extern "C" int k_bias_act_cuda(float *y, const float *x, const float *bias, size_t rows,
                               size_t cols, k_act act_kind, cudaStream_t stream, err *e) {
  return launch("k_bias_act_cuda", y, x, bias, rows, cols, act_kind, stream, e);
}

extern "C" int k_bias_act_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *bias,
                                   size_t rows, size_t cols, k_act act_kind, cudaStream_t stream,
                                   err *e) {
  return launch("k_bias_act_f16_cuda", k_half(y), k_half(x), k_half(bias), rows, cols, act_kind,
                stream, e);
}
