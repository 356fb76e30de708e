// kernels/gemm/k_gemv.cu: y [m, n] = x [m, k] W [n, k]^T (+ bias) (+ res) for
// the few rows of a decode step (m <= 8), FP16 and BF16 storage, float
// accumulation (issue 35). A decode step's products read each weight once
// for a handful of rows: pure bandwidth, where cuBLASLt's small-m choices
// reached 25-45 % of it on an H200. The C reference is k_gemm_ref's product
// (kernels/gemm/k_gemm_ref.c); test_k_cuda_llm checks this against a host
// product of the same rounded inputs.
//
// One warp per weight row (output column): the lanes stream the row in
// 16-byte vectors (8 elements), GV_UNROLL of them issued together, the row
// read once with the cache-streaming hint (the weights are read once a
// step; x, a few KB a row, stays in L1 for the block's other warps), and
// multiply each by the same slice of every x row. Each output's sum runs
// over the same vectors in the same order whatever m is (a row's result does
// not depend on the rows beside it: a decode graph padded to its bucket and
// the same rows outside it agree bit for bit); the lanes' sums meet by the
// same shuffles. bias and res (which may be y itself: each output is read and
// written by one thread) are added in float, the output rounded once.
#include "kernels/k_cuda_common.cuh"

namespace {

#define GV_WARPS 8
#define GV_UNROLL 8  // 16-byte loads a lane issues together (a 2,048-wide FP16 row: all 8 at once)
#define GV_MAX_M 8

template <class T, int M>
__global__ void __launch_bounds__(GV_WARPS * 32)
    gemv_kernel(T *y, const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ bias, const T *res,
                int m, int n, int k) {
  typedef k_vec<T, 8> vec;
  const int lane = threadIdx.x & 31, row = blockIdx.x * GV_WARPS + (threadIdx.x >> 5);
  if (row >= n) return;  // warp-uniform; no barrier below
  const int nv = k / 8;
  const vec *wr = reinterpret_cast<const vec *>(w + (size_t)row * (size_t)k);
  const vec *xr = reinterpret_cast<const vec *>(x);
  float acc[M];
#pragma unroll
  for (int i = 0; i < M; i++) acc[i] = 0.0f;
  for (int v0 = lane; v0 < nv; v0 += 32 * GV_UNROLL) {
    vec wv[GV_UNROLL];
#pragma unroll
    for (int u = 0; u < GV_UNROLL; u++) {
      const int v = v0 + u * 32;
      if (v < nv) {
        float4 raw = __ldcs(reinterpret_cast<const float4 *>(wr + v));
        wv[u] = *reinterpret_cast<const vec *>(&raw);
      }
    }
#pragma unroll
    for (int u = 0; u < GV_UNROLL; u++) {
      const int v = v0 + u * 32;
      if (v >= nv) break;
      float wf[8];
#pragma unroll
      for (int e = 0; e < 8; e++) wf[e] = k_ld(wv[u].v[e]);
#pragma unroll
      for (int i = 0; i < M; i++) {
        if (i < m) {
          const vec xv = xr[(size_t)i * (size_t)nv + v];
#pragma unroll
          for (int e = 0; e < 8; e++) acc[i] = fmaf(wf[e], k_ld(xv.v[e]), acc[i]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < M; i++) {
    float s = acc[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0 && i < m) {
      if (bias) s += k_ld(bias[row]);
      if (res) s += k_ld(res[(size_t)i * (size_t)n + row]);
      y[(size_t)i * (size_t)n + row] = k_st<T>(s);
    }
  }
}

template <class T>
void gemv_launch(T *y, const T *x, const T *w, const T *bias, const T *res, int m, int n, int k, cudaStream_t stream) {
  dim3 grid((unsigned)((n + GV_WARPS - 1) / GV_WARPS));
  if (m <= 1)
    gemv_kernel<T, 1><<<grid, GV_WARPS * 32, 0, stream>>>(y, x, w, bias, res, m, n, k);
  else if (m <= 2)
    gemv_kernel<T, 2><<<grid, GV_WARPS * 32, 0, stream>>>(y, x, w, bias, res, m, n, k);
  else if (m <= 4)
    gemv_kernel<T, 4><<<grid, GV_WARPS * 32, 0, stream>>>(y, x, w, bias, res, m, n, k);
  else
    gemv_kernel<T, 8><<<grid, GV_WARPS * 32, 0, stream>>>(y, x, w, bias, res, m, n, k);
}

}  // namespace

extern "C" int k_gemv_cuda(void *y, const void *x, const void *w, const void *bias, const void *res, int64_t m,
                           int64_t n, int64_t k, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_gemv_cuda";
  if (!y || !x || !w) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (m < 1 || n < 1 || k < 1) return err_set(e, ERR_INVALID_ARGUMENT, "%s: m %lld n %lld k %lld", kname,
                                              (long long)m, (long long)n, (long long)k);
  if (m > GV_MAX_M || n > 0x7fffffff || k > 0x7fffffff || k % 8 || (dt != DT_FP16 && dt != DT_BF16) ||
      !k_aligned(x, 16) || !k_aligned(w, 16))
    return err_set(e, ERR_UNIMPLEMENTED,
                   "%s: m %lld (1 .. %d), k %lld (a multiple of 8), %s (FP16 or BF16), x and W 16-byte aligned",
                   kname, (long long)m, GV_MAX_M, (long long)k, dtype_wire_name(dt));
  if (dt == DT_FP16)
    gemv_launch<__half>((__half *)y, (const __half *)x, (const __half *)w, (const __half *)bias,
                        (const __half *)res, (int)m, (int)n, (int)k, stream);
  else
    gemv_launch<__nv_bfloat16>((__nv_bfloat16 *)y, (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)w,
                               (const __nv_bfloat16 *)bias, (const __nv_bfloat16 *)res, (int)m, (int)n, (int)k,
                               stream);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
