// kernels/elem/k_widen.cu: any decoder storage type to float (the GPU
// runner's logits, engine/llm/cuda/): exact for every type (half and
// bfloat16 widen without rounding), so its references are k_f16_to_f32 and
// the bfloat16 bit shift.
#include "kernels/k_cuda_common.cuh"

namespace {

template <class T>
__global__ void widen_kernel(float *y, const T *x, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = k_ld(x[i]);
}

}  // namespace

extern "C" int k_widen_cuda(float *y, const void *x, size_t n, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_widen_cuda";
  if (n == 0) return 0;
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  K_DT_DISPATCH(e, kname, dt, T,
                widen_kernel<T><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, (const T *)x, n));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
