// kernels/k_cuda_typed.cuh: private helpers of the kernels that compare or
// combine elements of any numeric storage type (kernels/reduce/k_arg.cu:
// ArgMax, ArgMin, TopK; kernels/index/k_scatter.cu: the Scatter family's
// reductions): the one dispatch from a dtype to its storage type, the value
// an element is compared and combined as (half types widened to float,
// every other type as it is), and the read of an index tensor that is int64
// or int32. Not a public header.
#ifndef INFERD_KERNELS_K_CUDA_TYPED_CUH
#define INFERD_KERNELS_K_CUDA_TYPED_CUH

#include "kernels/k_cuda_common.cuh"

// Runs body with T the storage type of dt (FP32, FP16, BF16, FP64, INT32,
// INT64), or returns ERR_INVALID_ARGUMENT naming kname for another dtype.
#define K_NUM_DISPATCH(e, kname, dt, T, ...)                                                         \
  switch (dt) {                                                                                      \
    case DT_FP32: { typedef float T; __VA_ARGS__; } break;                                           \
    case DT_FP16: { typedef __half T; __VA_ARGS__; } break;                                          \
    case DT_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;                                   \
    case DT_FP64: { typedef double T; __VA_ARGS__; } break;                                          \
    case DT_INT32: { typedef int32_t T; __VA_ARGS__; } break;                                        \
    case DT_INT64: { typedef int64_t T; __VA_ARGS__; } break;                                        \
    default:                                                                                         \
      return err_set((e), ERR_INVALID_ARGUMENT, "%s: element type %s is not FP32, FP16, BF16, FP64, " \
                     "INT32 or INT64", (kname), dtype_wire_name(dt));                                 \
  }

// Whether K_NUM_DISPATCH takes dt.
static inline bool k_num_dtype(dtype dt) {
  return dt == DT_FP32 || dt == DT_FP16 || dt == DT_BF16 || dt == DT_FP64 || dt == DT_INT32 || dt == DT_INT64;
}

// The value an element is compared and combined as, and back (rounded to
// nearest even for the half types).
template <class T>
struct k_num {
  typedef T val;
  static __device__ __forceinline__ val ld(T v) { return v; }
  static __device__ __forceinline__ T st(val v) { return v; }
};
template <>
struct k_num<__half> {
  typedef float val;
  static __device__ __forceinline__ float ld(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half st(float v) { return __float2half_rn(v); }
};
template <>
struct k_num<__nv_bfloat16> {
  typedef float val;
  static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16_rn(v); }
};

// The unsigned type of B bytes, for kernels that move elements as they are, and K_BY_ESZ(esz, CALL):
// CALL with T that type for esz 1, 2, 4 (8 otherwise; callers check esz first).
template <int B>
struct k_bits;
template <>
struct k_bits<1> {
  typedef uint8_t t;
};
template <>
struct k_bits<2> {
  typedef uint16_t t;
};
template <>
struct k_bits<4> {
  typedef uint32_t t;
};
template <>
struct k_bits<8> {
  typedef unsigned long long t;
};
#define K_BY_ESZ(esz, CALL)                                   \
  switch (esz) {                                              \
    case 1: { typedef uint8_t T; CALL; } break;               \
    case 2: { typedef uint16_t T; CALL; } break;              \
    case 4: { typedef uint32_t T; CALL; } break;              \
    default: { typedef unsigned long long T; CALL; } break;   \
  }

// Index i of an int64 (or, with i32, int32) index tensor.
static __device__ __forceinline__ long long k_idx_at(const void *idx, int i32, size_t i) {
  return i32 ? (long long)((const int32_t *)idx)[i] : (long long)((const int64_t *)idx)[i];
}

#endif
