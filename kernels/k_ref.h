// kernels/k_ref.h: plain C reference implementations of every op's math.
// They are the CPU backend's kernels and the oracles for the CUDA kernels
// (issue 4). Outputs first, sizes last; no allocation, no knowledge of
// graphs or requests. All float math is FP32; `y` may alias `x` for the
// elementwise unary ops.
#ifndef INFERD_KERNELS_K_REF_H
#define INFERD_KERNELS_K_REF_H

#include <stddef.h>
#include <stdint.h>

#define K_MAX_DIMS 8

// --- elementwise unary
void k_relu(float *y, const float *x, size_t n);
void k_leaky_relu(float *y, const float *x, size_t n, float alpha);
void k_sigmoid(float *y, const float *x, size_t n);
void k_tanh(float *y, const float *x, size_t n);
void k_erf(float *y, const float *x, size_t n);
// approximate: 0 = exact erf form, 1 = tanh approximation (ONNX Gelu attribute)
void k_gelu(float *y, const float *x, size_t n, int approximate);

// --- binary with numpy broadcasting
typedef enum k_binop { K_ADD, K_SUB, K_MUL, K_DIV } k_binop;
// All three shapes have `ndim` dims (callers left-pad the shorter inputs
// with 1s); a dim of an input is either equal to ydims[i] or 1.
void k_binary_f32(float *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op);
// Same for int64 tensors (shape arithmetic); K_DIV truncates toward zero,
// division by zero yields 0.
void k_binary_i64(int64_t *y, const int64_t *a, const int64_t *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op);

// --- reductions over one axis, the tensor viewed as [outer, axis_len, inner]
void k_softmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner);
void k_log_softmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner);

// --- normalisation
// LayerNormalization over the last `cols` elements of each of `rows` rows;
// bias may be NULL.
void k_layer_norm(float *y, const float *x, const float *scale, const float *bias, size_t rows,
                  size_t cols, float eps);
// BatchNormalization (inference) on x viewed as [n, c, spatial].
void k_batch_norm(float *y, const float *x, const float *scale, const float *bias,
                  const float *mean, const float *var, size_t n, size_t c, size_t spatial,
                  float eps);

// --- layout
// y = x transposed by perm (y dim i = x dim perm[i]); any element size.
void k_transpose(void *y, const void *x, size_t elem_size, int ndim, const int64_t *xdims,
                 const int *perm);
// Concatenation along an axis, each input viewed as [outer, len_i * inner]
// bytes-wise: copies `outer` rows of row_bytes[i] from each input in turn.
void k_concat(void *y, const void *const *xs, const size_t *row_bytes, int n_inputs, size_t outer);

// --- GEMM reference (the engine calls OpenBLAS; this is the oracle)
// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, row-major, lda/ldb/ldc in elements.
void k_gemm_ref(float *c, const float *a, const float *b, int trans_a, int trans_b, size_t m,
                size_t n, size_t k, float alpha, float beta, size_t lda, size_t ldb, size_t ldc);

// --- conversions
// IEEE half <-> float, round to nearest even; inf, nan and subnormals kept.
void k_f16_to_f32(float *y, const uint16_t *x, size_t n);
void k_f32_to_f16(uint16_t *y, const float *x, size_t n);
// Numeric casts between the engine's element types, by ONNX-like rules
// (float -> int truncates toward zero; any -> bool is x != 0).
typedef enum k_elem { K_F32, K_F64, K_F16, K_I64, K_I32, K_I16, K_I8, K_U8, K_U16, K_U32, K_U64, K_BOOL } k_elem;
void k_cast(void *y, k_elem yt, const void *x, k_elem xt, size_t n);

#endif
