// kernels/attn/k_rope.cu: CUDA twin of k_rope (kernels/attn/k_rope.c): the
// rotate-half RoPE of transformers' Llama, Qwen2 and Mistral, in place on
// every head of a step's rows (the runner passes Q's and K's heads, adjacent
// in the fused QKV row, as one run of n_heads + n_kv_heads heads). The
// angle pos * inv_freq is formed in float and the rotation with _rn
// intrinsics, as the reference's C evaluates them; cosf and sinf are the
// accurate ones (no fast math), so FP32 results are within an ulp or two.
#include "kernels/k_cuda_common.cuh"

namespace {

template <class T>
__global__ void rope_kernel(T *x, size_t n_tok, const int32_t *pos, int64_t n_heads, int64_t head_dim,
                            int64_t row_stride, const float *inv_freq) {
  int64_t half = head_dim / 2;
  size_t n = n_tok * (size_t)n_heads * (size_t)half, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    size_t i = idx % (size_t)half, h = idx / (size_t)half % (size_t)n_heads, t = idx / (size_t)half / (size_t)n_heads;
    float ang = __fmul_rn((float)pos[t], inv_freq[i]);
    float c = cosf(ang), s = sinf(ang);
    T *xh = x + t * (size_t)row_stride + h * (size_t)head_dim;
    float a = k_ld(xh[i]), b = k_ld(xh[i + half]);
    xh[i] = k_st<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
    xh[i + half] = k_st<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
  }
}

}  // namespace

extern "C" int k_rope_cuda(void *x, size_t n_tok, const int32_t *pos, int64_t n_heads, int64_t head_dim,
                           int64_t row_stride, const float *inv_freq, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_rope_cuda";
  if (n_tok == 0 || n_heads <= 0 || head_dim < 2) return 0;
  if (!x || !pos || !inv_freq) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (head_dim % 2 || row_stride < n_heads * head_dim)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: head_dim %lld odd or rows (%lld) narrower than the heads", kname,
                   (long long)head_dim, (long long)row_stride);
  size_t work = n_tok * (size_t)n_heads * (size_t)(head_dim / 2);
  K_DT_DISPATCH(e, kname, dt, T,
                rope_kernel<T><<<k_blocks_for(work, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)x, n_tok, pos, n_heads, head_dim, row_stride, inv_freq));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
