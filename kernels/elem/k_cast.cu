// kernels/elem/k_cast.cu: CUDA twins of k_f16_to_f32 and k_f32_to_f16. Numbers
// go through cuda_fp16.h's __float2half_rn / __half2float (hardware cvt,
// round to nearest even, subnormals kept), which agree with the reference
// bit for bit. NaN is handled by hand: cvt returns a canonical NaN, while the
// reference keeps the sign and the top payload bits, and the server must
// give the same bytes whichever backend ran.
#include <cuda_fp16.h>

#include "kernels/k_cuda_common.cuh"

namespace {

__device__ __forceinline__ uint16_t f32_to_half_bits(float f) {
  uint32_t u = __float_as_uint(f);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u), payload = (uint16_t)((a >> 13) & 0x3FFu);
    return (uint16_t)(sign | 0x7C00u | (payload ? payload : 0x200u));
  }
  return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float half_bits_to_f32(uint16_t h) {
  if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu))
    return __uint_as_float(((uint32_t)(h & 0x8000u) << 16) | 0x7F800000u |
                           ((uint32_t)(h & 0x3FFu) << 13));
  return __half2float(__ushort_as_half(h));
}

__global__ void f32_to_f16_kernel(uint16_t *y, const float *x, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = f32_to_half_bits(x[i]);
}

__global__ void f16_to_f32_kernel(float *y, const uint16_t *x, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = half_bits_to_f32(x[i]);
}

}  // namespace

extern "C" int k_f32_to_f16_cuda(uint16_t *y, const float *x, size_t n, cudaStream_t stream,
                                 err *e) {
  static const char kname[] = "k_f32_to_f16_cuda";
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kname, (void *)y,
                   (const void *)x);
  f32_to_f16_kernel<<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, x, n);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_f16_to_f32_cuda(float *y, const uint16_t *x, size_t n, cudaStream_t stream,
                                 err *e) {
  static const char kname[] = "k_f16_to_f32_cuda";
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kname, (void *)y,
                   (const void *)x);
  f16_to_f32_kernel<<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, x, n);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
