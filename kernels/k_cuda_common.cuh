// kernels/k_cuda_common.cuh: private helpers of the k_*.cu launchers: the
// CUDA_TRY-style checks that turn a CUDA error into an err naming the
// kernel, launch geometry, warp/block reductions and the scalar activation
// math shared by k_unary.cu and k_bias_act.cu. Not a public header.
#ifndef INFERD_KERNELS_K_CUDA_COMMON_CUH
#define INFERD_KERNELS_K_CUDA_COMMON_CUH

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

// a*b*c without wrapping; false on overflow.
static inline bool k_mul3(size_t a, size_t b, size_t c, size_t *out) {
  size_t ab;
  if (__builtin_mul_overflow(a, b, &ab)) return false;
  return !__builtin_mul_overflow(ab, c, out);
}

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
