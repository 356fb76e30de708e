// kernels/elem/k_mlp_act.cuh: the activation of a decoder's MLP (k_mlp_kind)
// on one float, shared by k_mlp_act.cu and the GEMV's fused gate+up epilogue
// (kernels/gemm/k_gemv.cu), so both round the same way: the math of
// k_silu_mul and k_gelu (kernels/elem/k_mlp_act.c) with _rn intrinsics.
#pragma once

#include "kernels/k_cuda_common.cuh"

static __device__ __forceinline__ float k_mlp_act1(float v, int act) {
  if (act == K_MLP_SILU) return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v)));
  return act == K_MLP_GELU_TANH ? k_gelu_tanh_f(v) : k_gelu_erf_f(v);
}
