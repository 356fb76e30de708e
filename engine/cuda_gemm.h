// cuda_gemm.h: matrix products on the GPU through cuBLASLt, with bias and
// ReLU/GELU fused into the product's epilogue. Tensors are row-major, as the
// engine stores them. The object owns the cuBLASLt handle and a workspace
// sized at create, and caches each shape's descriptors and chosen algorithm,
// so after the first call of a shape the request path does no heuristic
// search and no allocation.
//
// Not thread-safe, and one stream at a time: the workspace is shared by every
// call, so calls on different streams must be ordered by the caller. Each
// model instance owns one.
#ifndef INFERD_ENGINE_CUDA_GEMM_H
#define INFERD_ENGINE_CUDA_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// What happens to each output after the product. Bias is a vector of n
// (one per output column, as in ONNX Gemm / a linear layer), of C's type.
// GELU is cuBLASLt's, the tanh approximation:
//   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// so only fuse an ONNX Gelu with approximate="tanh" into it.
typedef enum eng_gemm_epilogue {
  ENG_GEMM_EPI_NONE = 0,
  ENG_GEMM_EPI_RELU,
  ENG_GEMM_EPI_GELU,
  ENG_GEMM_EPI_BIAS,
  ENG_GEMM_EPI_BIAS_RELU,
  ENG_GEMM_EPI_BIAS_GELU,
} eng_gemm_epilogue;

// Element types and arithmetic.
typedef enum eng_gemm_dtype {
  ENG_GEMM_FP32 = 0,   // fp32 in and out, full fp32 arithmetic (TF32 off)
  ENG_GEMM_FP32_TF32,  // fp32 in and out, tensor cores with TF32 inputs (~1e-3 relative)
  ENG_GEMM_FP16,       // fp16 in and out (bias too), fp32 accumulation
} eng_gemm_dtype;

typedef struct eng_gemm_lt eng_gemm_lt;

typedef struct eng_gemm_lt_stats {
  uint64_t runs;
  uint64_t cache_hits, cache_misses;  // per (shape, transposes, epilogue, dtype, alignment)
  uint64_t heuristic_queries;         // cublasLtMatmulAlgoGetHeuristic calls
  uint64_t evictions;
  int cached;                         // entries in the cache now
} eng_gemm_lt_stats;

// Creates the cuBLASLt handle on the current device and reserves a workspace
// of workspace_bytes there (0: no workspace, fewer algorithms; 32 MiB suits
// Hopper). cache_cap bounds the shapes kept (0: 64); the least recently
// used shape is dropped when it is full.
int eng_gemm_lt_create(eng_gemm_lt **out, size_t workspace_bytes, int cache_cap, err *e);
void eng_gemm_lt_destroy(eng_gemm_lt *g);

// C[m,n] = epilogue(op(A)[m,k] x op(B)[k,n] (+ bias[n])), all row-major and
// dense: A is stored [m,k], or [k,m] when trans_a; B is [k,n], or [n,k] when
// trans_b; C is [m,n]. bias must be non-NULL exactly for the BIAS epilogues.
// Enqueued on stream; returns once enqueued. m, n, k >= 1.
int eng_gemm_lt_run(eng_gemm_lt *g, void *C, const void *A, const void *B, const void *bias,
                    int m, int n, int k, bool trans_a, bool trans_b, eng_gemm_epilogue epilogue,
                    eng_gemm_dtype dtype, cudaStream_t stream, err *e);

// The same with a residual: C = epilogue(op(A) x op(B) + Z (+ bias)), Z[m,n]
// row-major like C, of C's type, added before the activation (cuBLASLt's
// beta * C input with beta 1; the bias and the activation are applied after
// it). Z may be C itself (in place); NULL is eng_gemm_lt_run.
int eng_gemm_lt_run_res(eng_gemm_lt *g, void *C, const void *A, const void *B, const void *bias,
                        const void *Z, int m, int n, int k, bool trans_a, bool trans_b,
                        eng_gemm_epilogue epilogue, eng_gemm_dtype dtype, cudaStream_t stream,
                        err *e);
void eng_gemm_lt_stats_get(const eng_gemm_lt *g, eng_gemm_lt_stats *s);

const char *eng_gemm_epilogue_name(eng_gemm_epilogue epi);
const char *eng_gemm_dtype_name(eng_gemm_dtype dt);

#ifdef __cplusplus
}
#endif

#endif
