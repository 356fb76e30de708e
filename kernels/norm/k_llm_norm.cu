// kernels/norm/k_llm_norm.cu: CUDA twins of k_rms_norm and k_layer_norm
// (kernels/norm/k_norm.c) over a decoder's storage types (float, half,
// bfloat16; kernels/norm/k_norm.cu has the ONNX engine's float/half layer
// norm). One block per row: a decoder step has few rows (its tokens) of a
// few thousand columns, so a block per row fills the GPU only at prefill
// sizes, but every variant is one kernel and simple. Sums in k_acc<T>
// (double for float, as the references; float for the 16-bit types), the
// RMS factor in float as k_rms_norm forms it (transformers' LlamaRMSNorm).
#include "kernels/k_cuda_common.cuh"

namespace {

template <class T>
__global__ void rms_norm_kernel(T *y, const T *x, const T *scale, size_t cols, float eps) {
  typedef typename k_acc<T>::type acc;
  __shared__ acc sh[32];
  const T *xr = x + (size_t)blockIdx.x * cols;
  T *yr = y + (size_t)blockIdx.x * cols;
  acc ss = 0;
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
    acc v = (acc)k_ld(xr[j]);
    ss += v * v;
  }
  ss = k_block_sum(ss, sh);
  float inv = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (acc)cols), eps)));
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
    yr[j] = k_st<T>(__fmul_rn(k_ld(scale[j]), __fmul_rn(k_ld(xr[j]), inv)));
}

template <class T>
__global__ void layer_norm_kernel(T *y, const T *x, const T *scale, const T *bias, size_t cols, float eps) {
  typedef typename k_acc<T>::type acc;
  __shared__ acc sh[32];
  const T *xr = x + (size_t)blockIdx.x * cols;
  T *yr = y + (size_t)blockIdx.x * cols;
  acc s = 0;
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) s += (acc)k_ld(xr[j]);
  acc mean = k_block_sum(s, sh) / (acc)cols;
  acc ss = 0;
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
    acc d = (acc)k_ld(xr[j]) - mean;
    ss += d * d;
  }
  ss = k_block_sum(ss, sh);
  acc inv_std = (acc)1 / sqrt(ss / (acc)cols + (acc)eps);
  for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
    acc v = ((acc)k_ld(xr[j]) - mean) * inv_std * (acc)k_ld(scale[j]);
    if (bias) v += (acc)k_ld(bias[j]);
    yr[j] = k_st<T>((float)v);
  }
}

// Rows run as one grid each: at most 2^31 - 1 rows (checked).
static int norm_check(const char *kname, const void *y, const void *x, const void *scale, size_t rows, err *e) {
  if (!y || !x || !scale) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (rows > 0x7fffffffu) return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu rows (at most 2^31 - 1)", kname, rows);
  return 0;
}

}  // namespace

extern "C" int k_rms_norm_dt_cuda(void *y, const void *x, const void *scale, size_t rows, size_t cols, float eps,
                                  dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_rms_norm_dt_cuda";
  if (rows == 0 || cols == 0) return 0;
  TRY(norm_check(kname, y, x, scale, rows, e));
  unsigned th = k_row_threads(cols);
  K_DT_DISPATCH(e, kname, dt, T,
                rms_norm_kernel<T>
                <<<(unsigned)rows, th, 0, stream>>>((T *)y, (const T *)x, (const T *)scale, cols, eps));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_layer_norm_dt_cuda(void *y, const void *x, const void *scale, const void *bias, size_t rows,
                                    size_t cols, float eps, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_layer_norm_dt_cuda";
  if (rows == 0 || cols == 0) return 0;
  TRY(norm_check(kname, y, x, scale, rows, e));
  unsigned th = k_row_threads(cols);
  K_DT_DISPATCH(e, kname, dt, T,
                layer_norm_kernel<T><<<(unsigned)rows, th, 0, stream>>>((T *)y, (const T *)x, (const T *)scale,
                                                                        (const T *)bias, cols, eps));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
