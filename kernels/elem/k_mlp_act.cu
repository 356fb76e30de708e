// kernels/elem/k_mlp_act.cu: CUDA twin of k_mlp_act (kernels/elem/k_mlp_act.c):
// SwiGLU / GeGLU on a decoder's fused gate+up rows, or a plain SiLU / GELU,
// one thread per output element. The scalar math is k_mlp_act1's
// (k_mlp_act.cuh, shared with the GEMV's gate+up epilogue), so FP32 results
// match the reference to the ulps of expf / erff / tanhf.
#include "kernels/elem/k_mlp_act.cuh"

namespace {

template <class T>
__global__ void mlp_act_kernel(T *y, const T *x, size_t rows, size_t cols, int act, int gated) {
  size_t n = rows * cols, stride = (size_t)gridDim.x * blockDim.x, xs = gated ? 2 * cols : cols;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t r = i / cols, c = i % cols;
    float g = k_mlp_act1(k_ld(x[r * xs + c]), act);
    if (gated) g = __fmul_rn(g, k_ld(x[r * xs + cols + c]));
    y[i] = k_st<T>(g);
  }
}

}  // namespace

extern "C" int k_mlp_act_cuda(void *y, const void *x, size_t rows, size_t cols, k_mlp_kind act, int gated, dtype dt,
                              cudaStream_t stream, err *e) {
  static const char *kname = "k_mlp_act_cuda";
  if (rows == 0 || cols == 0) return 0;
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if ((unsigned)act > K_MLP_GELU) return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown activation %d", kname, (int)act);
  K_DT_DISPATCH(e, kname, dt, T,
                mlp_act_kernel<T><<<k_blocks_for(rows * cols, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)y, (const T *)x, rows, cols, (int)act, gated));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
