// kernels/gemm/k_gemv.cu: y [m, n] = x [m, k] W [n, k]^T (+ bias) (+ res) for
// the few rows of a decode step (m <= 8), FP16 and BF16 storage, float
// accumulation (issue 35). A decode step's products read each weight once
// for a handful of rows: pure bandwidth, where cuBLASLt's small-m choices
// reached 25-45 % of it on an H200. The C reference is k_gemm_ref's product
// (kernels/gemm/k_gemm_ref.c); test_k_cuda_llm checks this against a host
// product of the same rounded inputs, and the fused forms against the
// unfused kernels they replace.
//
// A warp computes P output columns (P weight rows; 2P with the gate+up
// epilogue): the lanes stream the rows in 16-byte vectors (8 elements), each
// x vector loaded once for the P rows, so x's reads per weight byte are m / P
// (at m = 8 and one row a warp, x's reads were eight times the weights' and
// the step at 8 tokens ran slower than at 64). Weights are read with the
// cache-streaming hint (read once a step); the next vectors are loaded
// before the current ones are used. Each output's sum runs over the same
// vectors in the same order whatever m or P is (a row's result does not
// depend on the rows beside it: a decode graph padded to its bucket and the
// same rows outside it agree bit for bit); the lanes' sums meet by the same
// shuffles. bias and res (which may be y itself: each output is read and
// written by one thread) are added in float, the output rounded once.
//
// Fused forms (k_gemv_opts), each removing a launch from a decode layer:
// - RMSNorm first: x's rows are normalised into shared memory (one warp a
//   row's sum of squares, so the factor does not depend on m either) as
//   k_rms_norm_dt_cuda forms them, rounded to the storage type;
// - the gate+up epilogue: W holds the gate rows then the up rows; a warp
//   takes column j's pair and writes act(gate) * up, each rounded as
//   k_mlp_act_cuda's input is: the same bits as the product then the kernel;
// - programmatic dependent launch (sm_90): the first weight vectors are
//   loaded before griddepcontrol.wait, so a small matrix streams in while
//   the previous kernel finishes, and each GEMV lets the next kernel launch
//   early (griddepcontrol.launch_dependents; a no-op unless that kernel was
//   launched as a dependent).
#include "kernels/elem/k_mlp_act.cuh"
#include "kernels/k_cuda_common.cuh"
#include "kernels/k_pdl.cuh"

namespace {

#define GV_COLS 8  // output columns a block computes (warps x columns a warp)
#define GV_MAX_M 8
#define GV_SMEM_MAX (48 * 1024)  // normalised x rows in shared memory (no opt-in past the default)

// P output columns a warp, W warps a block (P * W = GV_COLS), by m's bucket
template <int M>
struct gv_shape {
  enum { P = M >= 4 ? 4 : M, W = GV_COLS / (M >= 4 ? 4 : M) };
};

struct gv_args {
  void *y;
  const void *x, *w, *bias, *res, *scale;
  int m, n, k, act;
  float eps;
};

// Vectors v0 + 32u (u < U) of each of the R weight rows, streamed past the
// cache (each weight is read once a step); those past the row are left.
template <class T, int R, int U>
__device__ __forceinline__ void gv_load(k_vec<T, 8> (&w)[R][U], const k_vec<T, 8> *const (&wr)[R], int v0, int nv) {
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int r = 0; r < R; r++)
      if (v0 + u * 32 < nv) {
        float4 raw = __ldcs(reinterpret_cast<const float4 *>(wr[r] + v0 + u * 32));
        w[r][u] = *reinterpret_cast<const k_vec<T, 8> *>(&raw);
      }
}

template <class T, int M, int GLU, int RMS>
__global__ void __launch_bounds__(gv_shape<M>::W * 32) gemv_kernel(gv_args a) {
  enum { P = gv_shape<M>::P, W = gv_shape<M>::W, R = P * (GLU + 1), U = R >= 8 ? 1 : 8 / R };
  typedef k_vec<T, 8> vec;
  extern __shared__ __align__(16) unsigned char gv_smem[];
  __shared__ float inv_rms[GV_MAX_M];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nv = a.k / 8;
  const int j0 = (blockIdx.x * W + warp) * P;
  k_pdl_release();
  // weight rows: r = h * P + p is column j0 + p's gate (h 0) or up (h 1)
  // row; columns past n read row n - 1 (valid memory) and write nothing
  const vec *wr[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    int j = j0 + r % P;
    j = j < a.n ? j : a.n - 1;
    wr[r] = reinterpret_cast<const vec *>(a.w) + ((size_t)j + (size_t)(r / P) * (size_t)a.n) * (size_t)nv;
  }
  vec wv[R][U];
  int v0 = lane;
  gv_load<T, R, U>(wv, wr, v0, nv);
  k_pdl_wait();  // x, bias's neighbours and res may be the previous kernel's output
  const vec *xr = reinterpret_cast<const vec *>(a.x);
  if (RMS) {
    const vec *sc = reinterpret_cast<const vec *>(a.scale);
    for (int i = warp; i < a.m; i += W) {
      float ss = 0.0f;
      for (int v = lane; v < nv; v += 32) {
        const vec xv = xr[(size_t)i * (size_t)nv + v];
#pragma unroll
        for (int e = 0; e < 8; e++) ss = fmaf(k_ld(xv.v[e]), k_ld(xv.v[e]), ss);
      }
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      if (lane == 0) inv_rms[i] = __fdiv_rn(1.0f, sqrtf(__fadd_rn(ss / (float)a.k, a.eps)));
    }
    __syncthreads();
    vec *xs = reinterpret_cast<vec *>(gv_smem);
    for (int idx = threadIdx.x; idx < a.m * nv; idx += W * 32) {
      const int i = idx / nv, v = idx - i * nv;
      vec xv = xr[(size_t)i * (size_t)nv + v];
      const vec sv = sc[v];
#pragma unroll
      for (int e = 0; e < 8; e++) xv.v[e] = k_st<T>(__fmul_rn(k_ld(sv.v[e]), __fmul_rn(k_ld(xv.v[e]), inv_rms[i])));
      xs[idx] = xv;
    }
    __syncthreads();
    xr = xs;
  }
  float acc[M][R];
#pragma unroll
  for (int i = 0; i < M; i++)
#pragma unroll
    for (int r = 0; r < R; r++) acc[i][r] = 0.0f;
  for (;;) {
    const int nx = v0 + 32 * U;
    vec wn[R][U];
    gv_load<T, R, U>(wn, wr, nx, nv);
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int v = v0 + u * 32;
      if (v >= nv) break;
#pragma unroll
      for (int i = 0; i < M; i++) {
        if (i < a.m) {
          const vec xv = xr[(size_t)i * (size_t)nv + v];
          float xf[8];
#pragma unroll
          for (int e = 0; e < 8; e++) xf[e] = k_ld(xv.v[e]);
#pragma unroll
          for (int r = 0; r < R; r++)
#pragma unroll
            for (int e = 0; e < 8; e++) acc[i][r] = fmaf(k_ld(wv[r][u].v[e]), xf[e], acc[i][r]);
        }
      }
    }
    if (nx >= nv) break;
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int r = 0; r < R; r++) wv[r][u] = wn[r][u];
    v0 = nx;
  }
  const T *bias = (const T *)a.bias, *res = (const T *)a.res;
  T *y = (T *)a.y;
#pragma unroll
  for (int i = 0; i < M; i++) {
#pragma unroll
    for (int r = 0; r < R; r++)
      for (int o = 16; o > 0; o >>= 1) acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], o);
    if (lane == 0 && i < a.m) {
#pragma unroll
      for (int p = 0; p < P; p++) {
        const int j = j0 + p;
        if (j >= a.n) break;
        float s = acc[i][p];
        if (bias) s += k_ld(bias[j]);
        if (GLU) {
          float up = acc[i][R - P + p];
          if (bias) up += k_ld(bias[a.n + j]);
          s = __fmul_rn(k_mlp_act1(k_ld(k_st<T>(s)), a.act), k_ld(k_st<T>(up)));
        } else if (res) {
          s += k_ld(res[(size_t)i * (size_t)a.n + j]);
        }
        y[(size_t)i * (size_t)a.n + j] = k_st<T>(s);
      }
    }
  }
}

template <class T, int M, int GLU, int RMS>
cudaError_t gemv_launch1(const gv_args &a, int pdl, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)((a.n + GV_COLS - 1) / GV_COLS));
  cfg.blockDim = dim3(gv_shape<M>::W * 32);
  cfg.dynamicSmemBytes = RMS ? (size_t)a.m * (size_t)a.k * sizeof(T) : 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, gemv_kernel<T, M, GLU, RMS>, a);
}

template <class T, int GLU, int RMS>
cudaError_t gemv_launch_m(const gv_args &a, int pdl, cudaStream_t stream) {
  if (a.m <= 1) return gemv_launch1<T, 1, GLU, RMS>(a, pdl, stream);
  if (a.m <= 2) return gemv_launch1<T, 2, GLU, RMS>(a, pdl, stream);
  if (a.m <= 4) return gemv_launch1<T, 4, GLU, RMS>(a, pdl, stream);
  return gemv_launch1<T, 8, GLU, RMS>(a, pdl, stream);
}

template <class T>
cudaError_t gemv_launch(const gv_args &a, int glu, int rms, int pdl, cudaStream_t stream) {
  if (glu) return rms ? gemv_launch_m<T, 1, 1>(a, pdl, stream) : gemv_launch_m<T, 1, 0>(a, pdl, stream);
  return rms ? gemv_launch_m<T, 0, 1>(a, pdl, stream) : gemv_launch_m<T, 0, 0>(a, pdl, stream);
}

}  // namespace

extern "C" int k_gemv_ex_cuda(void *y, const void *x, const void *w, const void *bias, const void *res, int64_t m,
                              int64_t n, int64_t k, const k_gemv_opts *o, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_gemv_cuda";
  const k_gemv_opts none = {};
  if (!o) o = &none;
  if (!y || !x || !w) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (m < 1 || n < 1 || k < 1) return err_set(e, ERR_INVALID_ARGUMENT, "%s: m %lld n %lld k %lld", kname,
                                              (long long)m, (long long)n, (long long)k);
  if (o->glu && res) return err_set(e, ERR_INVALID_ARGUMENT, "%s: a residual with the gate+up epilogue", kname);
  if ((unsigned)o->act > K_MLP_GELU) return err_set(e, ERR_INVALID_ARGUMENT, "%s: activation %d", kname, (int)o->act);
  const size_t es = dtype_size(dt);
  if (m > GV_MAX_M || n > 0x3fffffff || k > 0x7fffffff || k % 8 || (dt != DT_FP16 && dt != DT_BF16) ||
      !k_aligned(x, 16) || !k_aligned(w, 16) || (o->rms_scale && !k_aligned(o->rms_scale, 16)))
    return err_set(e, ERR_UNIMPLEMENTED,
                   "%s: m %lld (1 .. %d), k %lld (a multiple of 8), %s (FP16 or BF16), x, W and the norm's scale "
                   "16-byte aligned",
                   kname, (long long)m, GV_MAX_M, (long long)k, dtype_wire_name(dt));
  if (o->rms_scale && (size_t)m * (size_t)k * es > GV_SMEM_MAX)
    return err_set(e, ERR_UNIMPLEMENTED, "%s: %lld normalised rows of %lld do not fit %d bytes of shared memory", kname,
                   (long long)m, (long long)k, GV_SMEM_MAX);
  gv_args a = {y, x, w, bias, res, o->rms_scale, (int)m, (int)n, (int)k, (int)o->act, o->eps};
  cudaError_t ce = dt == DT_FP16 ? gemv_launch<__half>(a, o->glu, o->rms_scale != NULL, o->pdl, stream)
                                 : gemv_launch<__nv_bfloat16>(a, o->glu, o->rms_scale != NULL, o->pdl, stream);
  K_CUDA_TRY(e, kname, ce);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_gemv_cuda(void *y, const void *x, const void *w, const void *bias, const void *res, int64_t m,
                           int64_t n, int64_t k, dtype dt, cudaStream_t stream, err *e) {
  return k_gemv_ex_cuda(y, x, w, bias, res, m, n, k, NULL, dt, stream, e);
}
