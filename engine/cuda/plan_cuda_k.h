// engine/cuda/plan_cuda_k.h: the few device kernels the CUDA plan needs beyond
// kernels/k_cuda.h: Gemm's alpha/beta/C epilogue, int64 broadcast
// arithmetic, casts between the plan's internal types, FP16/BF16 precision
// rounding of FP32 values (Cast to a narrow float), and LayerNormalization's
// optional Mean/InvStdDev outputs. Same semantics as the CPU ops
// (engine/ops/gemm/gemm.c, engine/ops/elem/elem.c, engine/ops/norm/norm.c,
// kernels/elem/k_cast.c, kernels/elem/k_binary.c). Device pointers,
// asynchronous on stream, nothing allocated, a size of 0 touches nothing.
// C-callable.
#ifndef INFERD_ENGINE_PLAN_CUDA_K_H
#define INFERD_ENGINE_PLAN_CUDA_K_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/base/err.h"
#include "kernels/k_ref.h"

// y[m,n] = alpha * y + beta * C, C of shape [cr, cc] broadcast to [m, n]
// (cr is 1 or m, cc is 1 or n); c NULL: y = alpha * y.
int eng_pk_gemm_scale_cuda(float *y, const float *c, int64_t m, int64_t n, int64_t cr, int64_t cc,
                           float alpha, float beta, cudaStream_t stream, err *e);

// As k_binary on the integer types (K_INT_TYPES), every k_binop (wrapping
// add/sub/mul/pow, x/0 = 0, Mod both ways); dims are host arrays of ndim
// (1..K_MAX_DIMS) entries.
int eng_pk_binary_int_cuda(void *y, const void *a, const void *b, k_elem t, int ndim,
                           const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                           k_binop op, cudaStream_t stream, err *e);
// eng_pk_binary_int_cuda on K_I64.
int eng_pk_binary_i64_cuda(int64_t *y, const int64_t *a, const int64_t *b, int ndim,
                           const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                           k_binop op, cudaStream_t stream, err *e);

// As k_cast for every k_elem but K_F16 (the plan carries no FP16 values).
int eng_pk_cast_cuda(void *y, k_elem yt, const void *x, k_elem xt, size_t n, cudaStream_t stream,
                     err *e);

// In place: each FP32 value rounded to the nearest FP16 (bf16 0) or BF16
// (bf16 1) value, ties to even, and widened back.
int eng_pk_round_narrow_cuda(float *y, size_t n, int bf16, cudaStream_t stream, err *e);

// Per row of x[rows, cols]: mean and 1/sqrt(var + eps), in double as the
// CPU op computes them; either output may be NULL.
int eng_pk_ln_stats_cuda(float *mean, float *istd, const float *x, size_t rows, size_t cols,
                         float eps, cudaStream_t stream, err *e);
// The same over FP16 x, the two statistics rounded to FP16 (an FP16 plan's
// storage of the op's FP32 Mean and InvStdDev outputs).
int eng_pk_ln_stats_f16_cuda(uint16_t *mean, uint16_t *istd, const uint16_t *x, size_t rows,
                             size_t cols, float eps, cudaStream_t stream, err *e);

// Test hook (INFERD_CUDA_FAULT_AT): launches a kernel with an invalid
// configuration and returns the launch check's ERR_INTERNAL, so tests drive
// the engine's recovery through a genuine CUDA error.
int eng_pk_fault_cuda(cudaStream_t stream, err *e);

#ifdef __cplusplus
}
#endif

#endif
