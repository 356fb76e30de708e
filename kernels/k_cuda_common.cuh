// kernels/k_cuda_common.cuh: private helpers of the k_*.cu launchers: the
// CUDA_TRY-style checks that turn a CUDA error into an err naming the
// kernel, launch geometry, element storage (every kernel is written once
// over its storage type T, float or __half, and computes in float),
// warp/block reductions and the scalar activation math shared by
// kernels/elem/k_unary.cu and kernels/elem/k_bias_act.cu. Not a public header.
#ifndef INFERD_KERNELS_K_CUDA_COMMON_CUH
#define INFERD_KERNELS_K_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/k_cuda.h"

// Returns from the launcher with ERR_INTERNAL and a message naming the
// kernel, the file:line and the failing call.
#define K_CUDA_TRY(e, kname, call)                                                             \
  do {                                                                                         \
    cudaError_t k_st_ = (call);                                                                \
    if (k_st_ != cudaSuccess) {                                                                \
      (void)cudaGetLastError(); /* clear it so a later check does not report it again */       \
      return err_set((e), ERR_INTERNAL, "%s: %s:%d: %s: %s (%s)", (kname), __FILE__, __LINE__, \
                     #call, cudaGetErrorString(k_st_), cudaGetErrorName(k_st_));               \
    }                                                                                          \
  } while (0)

// After every launch: catches bad configurations and earlier sticky faults.
#define K_LAUNCH_CHECK(e, kname) K_CUDA_TRY(e, kname, cudaGetLastError())

// Threads per block for the elementwise kernels, and a cap on the grid:
// grid-stride loops cover the rest, and 4096 blocks of 256 keep every SM of
// an H100 (132 x 2048 threads) busy several times over.
#define K_THREADS 256
#define K_MAX_BLOCKS 4096u

static inline unsigned k_blocks_for(size_t work, unsigned threads) {
  size_t b = (work + threads - 1) / threads;
  if (b == 0) b = 1;
  return b > K_MAX_BLOCKS ? K_MAX_BLOCKS : (unsigned)b;
}

// Threads for a kernel that walks a row of len elements with one block:
// enough warps to cover the row once, at most 512.
static inline unsigned k_row_threads(size_t len) {
  size_t t = (len + 31) / 32 * 32;
  if (t > 512) t = 512;
  return (unsigned)(t ? t : 32);
}

// a*b*c without wrapping; false on overflow.
static inline bool k_mul3(size_t a, size_t b, size_t c, size_t *out) {
  size_t ab;
  if (__builtin_mul_overflow(a, b, &ab)) return false;
  return !__builtin_mul_overflow(ab, c, out);
}

// --- element storage. Kernels load each element as float (k_ld), compute
// in float and store once (k_st<T>, round to nearest even for half), so an
// FP16 result is the FP32 math on the widened inputs, rounded. NaN comes
// back as cvt's canonical NaN (only kernels/elem/k_cast.cu keeps payloads, for
// bit-identical casts).
static __device__ __forceinline__ float k_ld(float v) { return v; }
static __device__ __forceinline__ float k_ld(__half v) { return __half2float(v); }
static __device__ __forceinline__ float k_ld(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
struct k_store;
template <>
struct k_store<float> {
  static __device__ __forceinline__ float st(float v) { return v; }
};
template <>
struct k_store<__half> {
  static __device__ __forceinline__ __half st(float v) { return __float2half_rn(v); }
};
template <>
struct k_store<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16_rn(v); }
};
template <class T>
static __device__ __forceinline__ T k_st(float v) {
  return k_store<T>::st(v);
}

// What sums and statistics accumulate in: double for float storage (the
// FP32 kernels stay within an ulp of the references, which accumulate in
// double; on Hopper the memory-bound kernels pay nothing for it), float for
// half (the output's 2^-11 rounding dwarfs a float sum's drift).
template <class T>
struct k_acc {
  typedef double type;
};
template <>
struct k_acc<__half> {
  typedef float type;
};
template <>
struct k_acc<__nv_bfloat16> {
  typedef float type;
};

// The decoder kernels (engine/llm/cuda) take their storage as a dtype
// (kernels/base/dtype.h: k_elem has no bfloat16): K_DT_DISPATCH(dt, T, body)
// runs body with T the storage type, or returns ERR_INVALID_ARGUMENT naming
// kname for another dtype.
#define K_DT_DISPATCH(e, kname, dt, T, ...)                                                    \
  switch (dt) {                                                                             \
    case DT_FP32: {                                                                         \
      typedef float T;                                                                      \
      __VA_ARGS__;                                                                          \
    } break;                                                                                \
    case DT_FP16: {                                                                         \
      typedef __half T;                                                                     \
      __VA_ARGS__;                                                                          \
    } break;                                                                                \
    case DT_BF16: {                                                                         \
      typedef __nv_bfloat16 T;                                                              \
      __VA_ARGS__;                                                                          \
    } break;                                                                                \
    default:                                                                                \
      return err_set((e), ERR_INVALID_ARGUMENT, "%s: element type %s (FP32, FP16 or BF16)", \
                     (kname), dtype_wire_name(dt));                                         \
  }

// N elements of T moved in one aligned access: 16 bytes (4 floats, 8
// halves) for the unary kernels, a 32-bit pair of halves for the binary and
// bias kernels. The launchers check the pointers' alignment first.
template <class T, int N>
struct alignas(sizeof(T) * N) k_vec {
  T v[N];
};

// Pairs pay for narrow types only: two halves fill a 32-bit access, while a
// float already is one (the FP32 kernels keep their one-element access).
template <class T>
struct k_pairs {
  static const bool value = sizeof(T) < 4;
};

static inline bool k_aligned(const void *p, unsigned bytes) {
  return (uintptr_t)p % bytes == 0;
}

// --- y[i] = op(x[i]), the elementwise map every unary family shares
// (kernels/elem/k_unary.cu, kernels/elem/k_unop.cu): 16-byte vectors where y and x are aligned (nv of
// them, then the n_tail elements after them, one each for the first threads),
// else one element a thread. op maps float to float; T is widened and rounded
// once. Every thread reads before it writes, so y may alias x.
template <class T, class Op>
__global__ void k_map_kernel(T *y, const T *x, size_t n, Op op) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = k_st<T>(op(k_ld(x[i])));
}

template <class T, class Op>
__global__ void k_map_vec_kernel(k_vec<T, 16 / sizeof(T)> *y, const k_vec<T, 16 / sizeof(T)> *x, size_t nv,
                                 size_t n_tail, Op op) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = tid; i < nv; i += stride) {
    k_vec<T, 16 / sizeof(T)> v = x[i];
#pragma unroll
    for (int k = 0; k < (int)(16 / sizeof(T)); k++) v.v[k] = k_st<T>(op(k_ld(v.v[k])));
    y[i] = v;
  }
  if (tid < n_tail) {
    T *yt = (T *)(y + nv);
    const T *xt = (const T *)(x + nv);
    yt[tid] = k_st<T>(op(k_ld(xt[tid])));
  }
}

// Launches the map (n > 0); the caller checks the launch.
template <class T, class Op>
void k_map(T *y, const T *x, size_t n, Op op, cudaStream_t stream) {
  typedef k_vec<T, 16 / sizeof(T)> vec;
  if (k_aligned(y, 16) && k_aligned(x, 16)) {
    const size_t per = 16 / sizeof(T), nv = n / per;
    k_map_vec_kernel<T, Op><<<k_blocks_for(nv ? nv : 1, K_THREADS), K_THREADS, 0, stream>>>(
        (vec *)y, (const vec *)x, nv, n % per, op);
  } else {
    k_map_kernel<T, Op><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, x, n, op);
  }
}

// The FP16 launchers take IEEE half bits as uint16_t (C has no half type).
static inline __half *k_half(uint16_t *p) { return reinterpret_cast<__half *>(p); }
static inline const __half *k_half(const uint16_t *p) { return reinterpret_cast<const __half *>(p); }

// --- reductions (every thread of the block must call; blockDim.x a
// multiple of 32, at most 1024).
template <typename T>
static __device__ __forceinline__ T k_warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float k_warp_max(float v) {
  // fmaxf drops NaN; the references compare with `>`, which also never
  // picks a NaN over a number, except a NaN in the first slot. Rows with NaN
  // are outside what the two agree on.
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// `shared` holds 32 values of T.
template <typename T>
static __device__ __forceinline__ T k_block_sum(T v, T *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = k_warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < nwarps ? shared[lane] : (T)0;
  return k_warp_sum(v);
}

static __device__ __forceinline__ float k_block_max(float v, float *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = k_warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < nwarps ? shared[lane] : -INFINITY;
  return k_warp_max(v);
}

// --- activation math, written with explicit _rn intrinsics where the
// reference's C evaluates separate float operations, so nvcc's FMA
// contraction cannot make the GPU round differently from the CPU.
static __device__ __forceinline__ float k_relu_f(float v) {
  return v < 0.0f ? 0.0f : v;
}

static __device__ __forceinline__ float k_gelu_erf_f(float v) {
  const float inv_sqrt2 = 0.70710678118654752440f;
  return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(__fmul_rn(v, inv_sqrt2))));
}

static __device__ __forceinline__ float k_gelu_tanh_f(float v) {
  const float sqrt_2_over_pi = 0.79788456080286535588f;
  // C evaluates 0.044715f * v * v * v left to right.
  float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, v), v), v);
  float inner = __fmul_rn(sqrt_2_over_pi, __fadd_rn(v, cube));
  return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));
}

#endif
