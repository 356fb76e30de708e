// kernels/elem/k_unop.cu: the CUDA twin of k_unary_f32 (k_ref.h, the reference):
// Sqrt, Exp, Neg, Abs, Sign, Reciprocal, HardSigmoid, HardSwish, Clip and the
// codes from K_LOG on (k_unop_math.h, the reference's own expressions), written
// once and instantiated per storage type (float, half; k_ld/k_st of
// k_cuda_common.cuh). Half values are widened to float, computed exactly as
// the reference computes them, and rounded once, so an FP16 result is the
// FP32 reference's, rounded. Also the unary ops with a bool result or
// operand (k_not, k_isnan, k_isinf of kernels/elem/k_unary.c): IsNaN and IsInf read
// float or half (a half is NaN or infinite exactly when its float is).
// Every thread reads its element before writing it, so y may alias x.
#include "kernels/k_cuda_common.cuh"
#include "kernels/elem/k_unop_math.h"

namespace {

struct unop {
  k_unop op;
  float a, b;
  // The reference's expressions (kernels/elem/k_unary.c), IEEE-exact division and sqrt.
  __device__ float operator()(float v) const {
    switch (op) {
      case K_SQRT: return __fsqrt_rn(v);
      case K_EXP: return expf(v);
      case K_NEG: return -v;
      case K_ABS: return fabsf(v);
      case K_RECIP: return __fdiv_rn(1.0f, v);
      case K_HARD_SIGMOID: {
        float t = __fadd_rn(__fmul_rn(a, v), b);
        return t != t ? t : fmaxf(0.0f, fminf(1.0f, t));  // NaN stays NaN, as in the reference
      }
      case K_HARD_SWISH: {
        float t = __fadd_rn(__fmul_rn(v, 1.0f / 6.0f), 0.5f);
        return t != t ? t : __fmul_rn(v, fmaxf(0.0f, fminf(1.0f, t)));
      }
      case K_CLIP: {  // min(max(v, a), b) as the reference: a > b gives b; comparisons: NaN passes through
        float t = v < a ? a : v;
        return t > b ? b : t;
      }
      case K_SIGN: return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v;  // 0 and NaN are their own sign
      default: return k_unop_math(op, v, a, b);  // K_LOG on: the reference's own expressions
    }
  }
};

template <class T>
int launch(void *y, const void *x, size_t n, unop f, cudaStream_t stream, err *e) {
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "k_unop_cuda: NULL pointer (y=%p x=%p) for n=%zu", y, x, n);
  // 16 bytes a thread where aligned: a MobileNetV3 HardSwish pass ran at a
  // third of the memory's speed one element a thread (ncu, tests/bench/RESULTS.md)
  k_map<T>((T *)y, (const T *)x, n, f, stream);
  K_LAUNCH_CHECK(e, "k_unop_cuda");
  return 0;
}

}  // namespace

extern "C" int k_unop_cuda(void *y, const void *x, size_t n, k_elem et, k_unop op, float a, float b,
                           cudaStream_t stream, err *e) {
  unop f = {op, a, b};
  switch (et) {
    case K_F32: return launch<float>(y, x, n, f, stream, e);
    case K_F16: return launch<__half>(y, x, n, f, stream, e);
    default:
      return err_set(e, ERR_INVALID_ARGUMENT, "k_unop_cuda: element type %d has no kernel", (int)et);
  }
}

namespace {

template <class T>
__global__ void boolop_kernel(uint8_t *y, const T *x, size_t n, k_boolop op, int neg, int pos) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = k_ld(x[i]);
    y[i] = op == K_ISNAN ? v != v : (uint8_t)((pos && v == INFINITY) || (neg && v == -INFINITY));
  }
}

__global__ void not_kernel(uint8_t *y, const uint8_t *x, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = !x[i];
}

}  // namespace

extern "C" int k_boolop_cuda(uint8_t *y, const void *x, size_t n, k_elem et, k_boolop op, int neg,
                             int pos, cudaStream_t stream, err *e) {
  const char *kn = "k_boolop_cuda";
  if ((int)op < (int)K_NOT || (int)op > (int)K_ISINF)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown op %d", kn, (int)op);
  if (op == K_NOT ? et != K_BOOL : et != K_F32 && et != K_F16)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %d has no kernel for op %d (Not: BOOL; "
                   "IsNaN, IsInf: FP32, FP16)", kn, (int)et, (int)op);
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p) for n=%zu", kn, (void *)y, x, n);
  unsigned blocks = k_blocks_for(n, K_THREADS);
  if (op == K_NOT)
    not_kernel<<<blocks, K_THREADS, 0, stream>>>(y, (const uint8_t *)x, n);
  else if (et == K_F32)
    boolop_kernel<float><<<blocks, K_THREADS, 0, stream>>>(y, (const float *)x, n, op, neg, pos);
  else
    boolop_kernel<__half><<<blocks, K_THREADS, 0, stream>>>(y, (const __half *)x, n, op, neg, pos);
  K_LAUNCH_CHECK(e, kn);
  return 0;
}
