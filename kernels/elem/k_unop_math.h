// kernels/elem/k_unop_math.h: the element math of the k_unop codes from K_LOG on
// (the transcendental functions, rounding, and the activations Softplus,
// Softsign, Elu, Selu, Celu, ThresholdedRelu, Mish, Shrink, Swish), one
// definition for the C reference (kernels/elem/k_unary.c, k_unary_f32) and its
// CUDA twin (kernels/elem/k_unop.cu), so both compute the same expression in
// FP32. a and b are the op's parameters (k_ref.h's k_unop). Not a public
// header: the kernels include it.
#ifndef INFERD_KERNELS_K_UNOP_MATH_H
#define INFERD_KERNELS_K_UNOP_MATH_H

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/k_ref.h"
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#define K_UM_FN static inline __host__ __device__
#else
#define K_UM_FN static inline
#endif

// log(1 + e^v) without overflow for large v (PyTorch's and onnxruntime's form).
K_UM_FN float k_um_softplus(float v) {
  return v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v));
}

K_UM_FN float k_unop_math(k_unop op, float v, float a, float b) {
  switch (op) {
    case K_LOG: return logf(v);
    case K_SIN: return sinf(v);
    case K_COS: return cosf(v);
    case K_TAN: return tanf(v);
    case K_ASIN: return asinf(v);
    case K_ACOS: return acosf(v);
    case K_ATAN: return atanf(v);
    case K_SINH: return sinhf(v);
    case K_COSH: return coshf(v);
    case K_ASINH: return asinhf(v);
    case K_ACOSH: return acoshf(v);
    case K_ATANH: return atanhf(v);
    case K_FLOOR: return floorf(v);
    case K_CEIL: return ceilf(v);
    case K_ROUND: return rintf(v);  // halves to even (the default rounding mode), as ONNX says
    case K_SOFTPLUS: return k_um_softplus(v);
    case K_SOFTSIGN: return v / (1.0f + fabsf(v));
    case K_ELU: return v < 0.0f ? a * (expf(v) - 1.0f) : v;  // a: alpha
    case K_SELU: return v > 0.0f ? b * v : b * (a * expf(v) - a);  // a: alpha, b: gamma
    case K_CELU: return v != v ? v : fmaxf(0.0f, v) + fminf(0.0f, a * (expf(v / a) - 1.0f));
    case K_THRESHOLDED_RELU: return v > a ? v : (v != v ? v : 0.0f);
    case K_MISH: return v * tanhf(k_um_softplus(v));
    case K_SHRINK: return v < -a ? v + b : v > a ? v - b : (v != v ? v : 0.0f);  // a: lambd, b: bias
    case K_SWISH: return v / (1.0f + expf(-a * v));  // a: alpha
    default: return v;  // the codes before K_LOG have their own loops
  }
}

#endif
