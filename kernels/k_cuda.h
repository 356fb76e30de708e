// kernels/k_cuda.h: launchers of the CUDA twins of the C reference kernels
// (k_ref.h). Same math as the references, FP32 unless the name says
// otherwise: each kernel is written once over its element type, and the
// _f16 launchers run it on IEEE half tensors, passed as uint16_t bits, so
// the engine can run a whole model in half precision. An _f16 launcher
// takes the same arguments, shapes, checks and aliasing rules as its FP32
// twin; the math is done in float (statistics and sums included) and each
// output is rounded to half once, so results are within half's rounding of
// the FP32 references run on the widened inputs. Scalars (alpha, eps) stay
// float; scale, bias, mean and var are half. Convention (llm.c's): outputs
// first, then inputs, sizes, stream last; every pointer is a device pointer; each launcher checks its
// arguments and the launch, returns 0 or an err_code and fills *e with a
// message that names the kernel. Launches are asynchronous on `stream`
// (NULL = the legacy default stream); nothing is allocated. A size of 0 is
// a no-op that touches no pointer. C-callable.
#ifndef INFERD_KERNELS_K_CUDA_H
#define INFERD_KERNELS_K_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/base/dtype.h"
#include "kernels/base/err.h"
#include "kernels/k_ref.h"
#include "kernels/sample/k_sample.h"

// --- the k_unop family (kernels/elem/k_unop.cu), one launcher for every storage type:
// et K_F32 (float) or K_F16 (IEEE half bits); a and b as k_unary_f32's.
// y may alias x.
int k_unop_cuda(void *y, const void *x, size_t n, k_elem et, k_unop op, float a, float b,
                cudaStream_t stream, err *e);

// --- reductions (kernels/reduce/k_reduce.cu): x seen as [outer, len, inner], y as
// [outer, inner], reduced over len (the reference's k_redop); et K_F32 or
// K_F16, accumulation in float, or K_BOOL (0/1 bytes) for K_RMAX and K_RMIN.
// len 0 (an empty set; x may be NULL) writes the reference's value of nothing:
// 0 (Sum, L1, L2, SumSquare), 1 (Prod), NaN (Mean), -inf (LogSum,
// LogSumExp, Max; false for BOOL), +inf (Min; true for BOOL).
int k_reduce_cuda(void *y, const void *x, k_elem et, size_t outer, size_t len, size_t inner,
                  k_redop op, cudaStream_t stream, err *e);
// The same over any set of axes, as k_reduce: x of ndim (1..K_MAX_DIMS) dims (HOST
// array), reduce[k] nonzero for each reduced axis; y holds the kept dims in order. A
// thread per output: for axes that are not one run (k_reduce_cuda is faster for those).
int k_reduce_axes_cuda(void *y, const void *x, k_elem et, int ndim, const int64_t *dims,
                       const int *reduce, k_redop op, cudaStream_t stream, err *e);

// --- elementwise unary (kernels/elem/k_unary.cu); y may alias x.
int k_relu_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e);
int k_leaky_relu_cuda(float *y, const float *x, size_t n, float alpha, cudaStream_t stream, err *e);
int k_sigmoid_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e);
int k_tanh_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e);
int k_erf_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e);
// approximate: 0 = exact erf form, 1 = tanh approximation (as k_gelu).
int k_gelu_cuda(float *y, const float *x, size_t n, int approximate, cudaStream_t stream, err *e);
int k_relu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream, err *e);
int k_leaky_relu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, float alpha,
                          cudaStream_t stream, err *e);
int k_sigmoid_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream, err *e);
int k_tanh_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream, err *e);
int k_erf_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream, err *e);
int k_gelu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, int approximate,
                    cudaStream_t stream, err *e);
// k_unary's integer ops (Neg, Abs, Sign, Clip; k_unary_takes says which type takes which) on
// every K_INT_TYPES type t. lo, hi: Clip's bounds, one element of type t each in HOST memory, or
// NULL when absent (read before the launch returns).
int k_unary_int_cuda(void *y, const void *x, k_elem t, size_t n, k_unop op, const void *lo,
                     const void *hi, cudaStream_t stream, err *e);

// --- binary with numpy broadcasting (kernels/elem/k_binary.cu). Shapes as k_binary_f32:
// all three have `ndim` dims (0..K_MAX_DIMS; callers left-pad with 1s), an
// input dim equals ydims[i] or is 1. The dim arrays are HOST memory, read
// before the call returns; y must not overlap a or b unless it is exactly
// the same buffer with the same shape as y. Every k_binop: Max and Min
// propagate NaN from either side as the reference does; Pow is computed in
// double and rounded once (the reference's powf is within an ulp of it); Mod
// (K_MOD, K_FMOD) equals the reference's bit for bit.
int k_binary_f32_cuda(float *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                      const int64_t *adims, const int64_t *bdims, k_binop op, cudaStream_t stream,
                      err *e);
int k_binary_f16_cuda(uint16_t *y, const uint16_t *a, const uint16_t *b, int ndim,
                      const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                      k_binop op, cudaStream_t stream, err *e);

// Comparisons (kernels/elem/k_binary.cu) as k_compare_f32 / _i64 / _i32, every
// k_cmpop: y is bool (one byte, 0 or 1); a and b of element type et:
// K_F32, K_F16 (compared as the floats they stand for) or any integer type (K_INT_TYPES). Shapes, dims and aliasing as
// k_binary_f32_cuda (y never aliases a or b: another type).
int k_compare_cuda(uint8_t *y, const void *a, const void *b, k_elem et, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op, cudaStream_t stream, err *e);

// k_pow_mixed's twin: y (type ta, the base's) = pow(a, b) for a base a of type ta and an exponent b of
// another type tb, each element through double and stored by k_cast's rules (k_binary_takes(t, K_POW)
// types: not FP16 or BOOL); shapes, dims and aliasing as k_binary_f32_cuda's (y never aliases b).
int k_pow_mixed_cuda(void *y, const void *a, k_elem ta, const void *b, k_elem tb, int ndim, const int64_t *ydims,
                     const int64_t *adims, const int64_t *bdims, cudaStream_t stream, err *e);

// Logic on bools (kernels/elem/k_binary.cu) as k_logic: any nonzero byte is true, y is
// 0 or 1. Shapes, dims and aliasing as k_binary_f32_cuda.
int k_logic_cuda(uint8_t *y, const uint8_t *a, const uint8_t *b, int ndim, const int64_t *ydims,
                 const int64_t *adims, const int64_t *bdims, k_logop op, cudaStream_t stream, err *e);

// --- unary ops with a bool result or operand (kernels/elem/k_unop.cu), as k_not,
// k_isnan and k_isinf: K_NOT takes et K_BOOL (y may alias x); K_ISNAN and
// K_ISINF take K_F32 or K_F16, IsInf counting -inf when neg, +inf when pos.
typedef enum k_boolop { K_NOT, K_ISNAN, K_ISINF } k_boolop;
int k_boolop_cuda(uint8_t *y, const void *x, size_t n, k_elem et, k_boolop op, int neg, int pos,
                  cudaStream_t stream, err *e);

// --- running sums (kernels/reduce/k_reduce.cu) as k_cumsum_f32/_i64/_i32: x seen as
// [outer, len, inner]; et K_F32, K_F16 (summed in float, each result
// rounded once), K_I64 or K_I32 (wrapping). y may alias x.
int k_cumsum_cuda(void *y, const void *x, k_elem et, size_t outer, size_t len, size_t inner,
                  int exclusive, int reverse, cudaStream_t stream, err *e);

// --- ArgMax, ArgMin, TopK (kernels/reduce/k_arg.cu) as k_arg_reduce and k_topk: x seen as
// [outer, len, inner]; dt FP32, FP16, BF16, FP64, INT32 or INT64. ArgMax/ArgMin give the
// reference's indices exactly (NaN included). TopK: vals (x's type) and idx as [outer, k, inner],
// sorted, ties to the lower index, NaN above every number (the reference leaves a NaN where its
// insertion met it: rows with NaN may differ); k <= len, outer * len * inner < 2^31. Columns
// longer than 2048 are sorted in ws: k_topk_cuda_ws says how many bytes (0: none; it asks CUB, so
// it needs a device).
int k_arg_reduce_cuda(int64_t *y, const void *x, dtype dt, size_t outer, size_t len, size_t inner, int is_min,
                      int select_last, cudaStream_t stream, err *e);
int k_topk_cuda_ws(size_t *bytes, dtype dt, size_t outer, size_t len, size_t inner, size_t k, err *e);
int k_topk_cuda(void *vals, int64_t *idx, const void *x, dtype dt, size_t outer, size_t len, size_t inner, size_t k,
                int largest, void *ws, size_t ws_bytes, cudaStream_t stream, err *e);

// --- indexing (kernels/index/k_index.cu) as k_gather, k_expand, k_gather_elements, k_gather_nd and k_trilu,
// elements of 1, 2, 4 or 8 bytes moved as they are; idx on the device,
// int64 (or int32 when idx_i32); dims HOST memory. Unlike the references,
// an out-of-range index cannot fail the call (the launch is asynchronous):
// its element (Gather, GatherElements) or slice (GatherND) comes out as zero bytes,
// nothing outside x is read and the gathers set *bad (device memory, when not NULL) to 1.
// y must not overlap x or idx, except that k_trilu_cuda's y may alias x.
// Gather (k_gather): x as [outer, axis_len, inner], y as [outer, n_idx, inner].
int k_gather_cuda(void *y, const void *x, size_t esz, size_t outer, int64_t axis_len, size_t inner,
                  const void *idx, int idx_i32, size_t n_idx, int *bad, cudaStream_t stream, err *e);
// Expand (k_expand): x repeated along the dims where xdims[i] is 1; ndim 0
// copies one element.
int k_expand_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims,
                  const int64_t *xdims, cudaStream_t stream, err *e);
// Tile (k_tile): y[i] = x[i mod xdims], each ydims[i] a multiple of xdims[i].
int k_tile_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims, const int64_t *xdims,
                cudaStream_t stream, err *e);
int k_gather_elements_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                           int axis, const void *idx, int idx_i32, const int64_t *idims, int *bad,
                           cudaStream_t stream, err *e);
int k_gather_nd_cuda(void *y, const void *x, size_t esz, size_t batch, int m, const int64_t *d,
                     size_t slice, const void *idx, int idx_i32, size_t n_tuples, int *bad, cudaStream_t stream,
                     err *e);
int k_trilu_cuda(void *y, const void *x, size_t esz, size_t batch, int64_t rows, int64_t cols,
                 int64_t k, int upper, cudaStream_t stream, err *e);
// Slice (k_slice): y[i] = x[starts + i * steps] per dim (steps of either sign, not 0), the
// starts and steps already clamped by the op's rule (every element read inside x: checked).
int k_slice_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims, const int64_t *starts,
                 const int64_t *steps, const int64_t *ydims, cudaStream_t stream, err *e);
// ScatterElements and ScatterND (kernels/index/k_scatter.cu) as k_scatter_elements and k_scatter_nd
// on y, which already holds the data: red a k_scatter_red; none moves elements of esz (1, 2, 4, 8)
// bytes as they are, a reduction takes dt FP32, FP16, BF16, FP64, INT32 or INT64 (esz its size).
// Duplicate indices give the reference's result (k_scatter.cu says how). An index out of range
// skips its update and sets *bad (device memory, when not NULL) to 1. upd and idx on the device,
// dims HOST memory; y must not overlap upd or idx.
int k_scatter_elements_cuda(void *y, const void *upd, dtype dt, size_t esz, int ndim, const int64_t *ydims, int axis,
                            const void *idx, int idx_i32, const int64_t *idims, int red, int *bad,
                            cudaStream_t stream, err *e);
int k_scatter_nd_cuda(void *y, const void *upd, dtype dt, size_t esz, int ydim, const int64_t *ydims, const void *idx,
                      int idx_i32, size_t n_tuples, int m, int red, int *bad, cudaStream_t stream, err *e);

// --- broadcasting selection (kernels/index/k_index.cu), as k_where: y = cond ? a : b,
// cond bool (non-zero is true), a, b and y of element size esz (1, 2, 4
// or 8 bytes, moved as is). Shapes as k_binary_f32_cuda with a third
// input; the dim arrays are HOST memory; y must not overlap an input
// unless it is exactly that buffer with y's shape.
int k_where_cuda(void *y, const uint8_t *cond, const void *a, const void *b, size_t esz, int ndim,
                 const int64_t *ydims, const int64_t *cdims, const int64_t *adims,
                 const int64_t *bdims, cudaStream_t stream, err *e);

// --- linear quantization (kernels/elem/k_quant.cu), the twins of k_quantize,
// k_dequantize and k_fake_quant (k_ref.h) per tensor or per axis (no blocks).
// Per axis, element i's parameters are scale[(i / inner) % len] (x as
// [outer, len, inner]); per tensor (scale NULL), s0 and z0. The zero points
// travel as float (every 8- and 16-bit value is exact in float); zp NULL: 0.
// scale and zp are DEVICE pointers (len floats each); the struct is host memory.
typedef struct k_qaxis {
  size_t len, inner;
  const float *scale, *zp;
  float s0, z0;
} k_qaxis;
// Whether the kernels take quantized type qt: K_I8, K_U8, K_I16, K_U16.
int k_quant_cuda_takes(k_elem qt);
// y (qt) = saturate(round_half_even(x / scale) + zp); x K_F32 or K_F16 storage.
int k_quantize_cuda(void *y, k_elem qt, const void *x, k_elem xt, size_t n, const k_qaxis *q,
                    cudaStream_t stream, err *e);
// y (yt: K_F32 or K_F16 storage) = (x - zp) * scale; x of type qt.
int k_dequantize_cuda(void *y, k_elem yt, const void *x, k_elem qt, size_t n, const k_qaxis *q,
                      cudaStream_t stream, err *e);
// QuantizeLinear to qt then DequantizeLinear in one pass over et (K_F32 or
// K_F16) storage: round, clamp, rescale. y may alias x.
int k_fake_quant_cuda(void *y, const void *x, k_elem et, k_elem qt, size_t n, const k_qaxis *q,
                      cudaStream_t stream, err *e);

// --- resize and pad (kernels/resize/k_resize.cu), the index math of the references
// (kernels/resize/k_resize_math.h). Dims, scales, pads and the pad value are HOST memory,
// read before the call returns; y must not overlap x.
// Nearest over every dim (k_resize_nearest), any element size of 1, 2, 4
// or 8 bytes (moved as is); scales positive and finite.
int k_resize_nearest_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                          const int64_t *ydims, const float *scales, k_coord c, k_nearest m,
                          cudaStream_t stream, err *e);
// Bilinear over the middle two dims of x seen as [outer, ih, iw, inner]
// into y [outer, oh, ow, inner]: k_resize_linear's [nc, ih, iw] is inner 1
// (NCHW), an NHWC tensor is outer N, inner C. et K_F32 or K_F16.
int k_resize_linear_cuda(void *y, const void *x, k_elem et, size_t outer, int64_t ih, int64_t iw,
                         size_t inner, int64_t oh, int64_t ow, float sh, float sw, k_coord c,
                         cudaStream_t stream, err *e);
// Pad (k_pad): y index i reads x index i - begin[d]; outside x the esz
// bytes at value (constant; NULL: zeros), the mirror image (reflect) or the
// nearest edge (edge). A negative begin (or a y dim shorter than x's)
// crops. Element sizes 1, 2, 4, 8; reflect and edge need non-empty dims.
int k_pad_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
               const int64_t *begin, const int64_t *ydims, k_padmode mode, const void *value,
               cudaStream_t stream, err *e);

// --- softmax over the middle axis of [outer, axis_len, inner] (kernels/norm/k_softmax.cu)
int k_softmax_cuda(float *y, const float *x, size_t outer, size_t axis_len, size_t inner,
                   cudaStream_t stream, err *e);
int k_log_softmax_cuda(float *y, const float *x, size_t outer, size_t axis_len, size_t inner,
                       cudaStream_t stream, err *e);
int k_softmax_f16_cuda(uint16_t *y, const uint16_t *x, size_t outer, size_t axis_len,
                       size_t inner, cudaStream_t stream, err *e);
int k_log_softmax_f16_cuda(uint16_t *y, const uint16_t *x, size_t outer, size_t axis_len,
                           size_t inner, cudaStream_t stream, err *e);

// --- scaled-dot-product attention (kernels/attn/k_attn.cu) as k_attn_ref (k_ref.h),
// flash-style: per block 8 query rows of one (b, h), tiles of 32 keys of Kt
// and V staged in shared memory, an online softmax (running max and sum) in
// FP32 whatever the storage, each output rounded once. et K_F32 or K_F16 for
// o, q, kt, v and mask alike (mask may be NULL). divisor: NULL, or one
// device element of type div_et (K_F32 or K_F16) the scale is divided by,
// read on the device so a captured graph replays with the value of the
// moment. Head sizes d and dv up to K_ATTN_MAX_HEAD (ERR_UNIMPLEMENTED
// past it). o must not overlap an input. Nothing allocated, no sync:
// capturable. FP16 with d == dv == 64 or 128 runs on tensor cores instead
// (128 query rows per block, keys 128 at a time in steps of 64, S and P V
// as half products summed in float, the softmax weights P rounded to half
// for the second product: at most 2^-11 * max|v| more error); same rules
// for undefined rows.
#define K_ATTN_MAX_HEAD 128
int k_attn_cuda(void *o, const void *q, const void *kt, const void *v, const void *mask,
                const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
                cudaStream_t stream, err *e);
// Internal, for tests and benchmarks: the same on the CUDA-core kernel
// whatever the type and head size (the tensor-core kernel's baseline).
int k_attn__simt_cuda(void *o, const void *q, const void *kt, const void *v, const void *mask,
                      const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
                      cudaStream_t stream, err *e);
// Internal, for tests and benchmarks: the two tensor-core kernels by name,
// each where k_attn_cuda takes tensor cores (FP16, d == dv == 64 or 128;
// elsewhere the CUDA-core kernel, as k_attn_cuda). tc1: 4 warps x 16 query
// rows, tiles of 32 keys, S through shared memory (wmma). tc2 (k_attn_cuda's
// default there): 8 warps x 16 rows, keys staged 128 at a time, S and the
// softmax in registers (mma.sync), P fed straight into P V.
int k_attn__tc1_cuda(void *o, const void *q, const void *kt, const void *v, const void *mask,
                     const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
                     cudaStream_t stream, err *e);
int k_attn__tc2_cuda(void *o, const void *q, const void *kt, const void *v, const void *mask,
                     const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
                     cudaStream_t stream, err *e);

// --- normalisation (kernels/norm/k_norm.cu); bias may be NULL in both.
int k_layer_norm_cuda(float *y, const float *x, const float *scale, const float *bias, size_t rows,
                      size_t cols, float eps, cudaStream_t stream, err *e);
int k_batch_norm_cuda(float *y, const float *x, const float *scale, const float *bias,
                      const float *mean, const float *var, size_t n, size_t c, size_t spatial,
                      float eps, cudaStream_t stream, err *e);
int k_layer_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                          const uint16_t *bias, size_t rows, size_t cols, float eps,
                          cudaStream_t stream, err *e);
int k_batch_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                          const uint16_t *bias, const uint16_t *mean, const uint16_t *var,
                          size_t n, size_t c, size_t spatial, float eps, cudaStream_t stream,
                          err *e);
// GroupNormalization and InstanceNormalization (groups == c) as k_group_norm:
// x as [n, c, spatial]; dt DT_FP32, DT_FP16 or DT_BF16 for y, x, scale and
// bias alike (c elements each, or `groups` with per_group); statistics in
// double for FP32 (as the reference), float for the 16-bit types. ws: device
// scratch of k_group_norm_cuda_ws(...) bytes (0 where the shape needs none)
// lets few long groups spread over many blocks; with less (or NULL) each
// group takes one block, which is correct but leaves most of the GPU idle
// when groups are few. y may alias x.
size_t k_group_norm_cuda_ws(size_t n, size_t c, size_t groups, size_t spatial);
int k_group_norm_cuda(void *y, const void *x, const void *scale, const void *bias, dtype dt,
                      size_t n, size_t c, size_t groups, size_t spatial, int per_group, float eps,
                      void *ws, size_t ws_bytes, cudaStream_t stream, err *e);
// Internal, for tests and benchmarks: group norm on one path whatever the
// shape: 0 a warp per group, 1 a block per group, 2 groups cut into chunks
// (at least two; ws: 16 bytes per group and chunk, as k_group_norm_cuda_ws
// counts them, or 32 per group where it asks for none).
int k_group_norm__path_cuda(void *y, const void *x, const void *scale, const void *bias, dtype dt,
                            size_t n, size_t c, size_t groups, size_t spatial, int per_group,
                            float eps, void *ws, size_t ws_bytes, int path, cudaStream_t stream,
                            err *e);
// Internal, for tests and benchmarks: layer norm on the block-per-row
// kernel (three passes over global memory) whatever the width; the public
// entry points take it only past 8192 columns.
int k_layer_norm__block_cuda(float *y, const float *x, const float *scale, const float *bias,
                             size_t rows, size_t cols, float eps, cudaStream_t stream, err *e);
int k_layer_norm_f16__block_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                 const uint16_t *bias, size_t rows, size_t cols, float eps,
                                 cudaStream_t stream, err *e);

// --- layout (kernels/index/k_layout.cu): y = x transposed by perm (y dim i = x dim
// perm[i]), any element size, up to K_MAX_DIMS dims; xdims and perm are HOST
// memory; y must not overlap x.
int k_transpose_cuda(void *y, const void *x, size_t elem_size, int ndim, const int64_t *xdims,
                     const int *perm, cudaStream_t stream, err *e);

// --- IEEE half <-> float (kernels/elem/k_cast.cu), bit-identical to k_f16_to_f32 and
// k_f32_to_f16 (round to nearest even; inf, NaN payloads and subnormals kept).
int k_f16_to_f32_cuda(float *y, const uint16_t *x, size_t n, cudaStream_t stream, err *e);
int k_f32_to_f16_cuda(uint16_t *y, const float *x, size_t n, cudaStream_t stream, err *e);

// --- fused GEMM epilogue (kernels/elem/k_bias_act.cu): y[r,c] = act(x[r,c] + bias[c])
// over a row-major [rows, cols] matrix; bias may be NULL (activation only);
// y may alias x. The cuBLASLt path falls back to it when its own epilogue
// does not fit.
typedef enum k_act {
  K_ACT_NONE = 0,
  K_ACT_RELU = 1,
  K_ACT_GELU = 2,       // exact erf form (ONNX Gelu default)
  K_ACT_GELU_TANH = 3,  // tanh approximation (cuBLASLt's GELU epilogue)
} k_act;
int k_bias_act_cuda(float *y, const float *x, const float *bias, size_t rows, size_t cols,
                    k_act act, cudaStream_t stream, err *e);
int k_bias_act_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *bias, size_t rows,
                        size_t cols, k_act act, cudaStream_t stream, err *e);

// --- depthwise 2-D convolution on NHWC activations (kernels/conv/k_dwconv.cu), with a
// fused epilogue: y[n,oh,ow,ch] = act(bias[ch] + z[n,oh,ow,ch] +
// sum_{r,s} x[n, oh*sh - pt + r*dh, ow*sw - pl + s*dw, ch] * w[ch*R*S + r*S + s]),
// taps outside x reading zero (so asymmetric pads are just the output
// extent the caller gives). w is [C][R][S] (KRSC of a depthwise filter,
// what the engine packs for NHWC). et K_F32 or K_F16 for x, w, bias, z and
// y alike; sums in float, each output rounded once. bias and z may be NULL;
// z may be y (in-place residual); y must not overlap x or w. The act codes
// are eng_cuconv_act's (engine/cuda/cuda_conv.h), clip_max for K_DW_ACT_CLIP,
// alpha and beta for K_DW_ACT_HARD_SIGMOID.
// Square 3x3 and 5x5 windows of stride 1 or 2, undilated, with C % 8 == 0
// (half) or C % 4 == 0 (float) and 16-byte aligned x, y, z take a tiled
// path (1, 2 or 4 adjacent output pixels per thread, weights staged in
// shared memory); the rest one thread per output pixel and group of 8
// (half), 4 (float) or 2 (half, C even) channels, else one. Both sum in the
// same order (the same bits). Nothing allocated, no sync: capturable. The
// struct is HOST memory, read before the call returns.
typedef enum k_dw_act {
  K_DW_ACT_NONE = 0,
  K_DW_ACT_RELU,
  K_DW_ACT_CLIP,  // min(max(v, 0), clip_max)
  K_DW_ACT_SIGMOID,
  K_DW_ACT_TANH,
  K_DW_ACT_SWISH,         // v * sigmoid(v)
  K_DW_ACT_HARD_SIGMOID,  // max(0, min(1, alpha * v + beta))
  K_DW_ACT_HARD_SWISH,    // v * max(0, min(1, v / 6 + 0.5))
} k_dw_act;
typedef struct k_dwconv_args {
  int n, h, w, c;      // x: [n, h, w, c]
  int oh, ow;          // y (and z): [n, oh, ow, c]
  int r, s;            // kernel height, width
  int pad_top, pad_left;
  int stride_h, stride_w;  // >= 1
  int dil_h, dil_w;        // >= 1
  k_dw_act act;
  float clip_max;     // K_DW_ACT_CLIP, > 0
  float alpha, beta;  // K_DW_ACT_HARD_SIGMOID, finite
  int tile_w;         // tiled path's output pixels per thread: 0 = the launcher's pick, 1, 2, 4 (tests)
  int block_groups;   // tiled path's most channel groups per block: 0 = the launcher's (16), 1..64 (benches)
  // applied to each element of x as it is loaded and rounded to et (taps
  // outside x still read 0): an activation node before the conv, skipped.
  // One without parameters: NONE, RELU, SIGMOID, TANH, SWISH, HARD_SWISH.
  k_dw_act in_act;
} k_dwconv_args;
int k_dwconv_cuda(void *y, const void *x, const void *w, const void *bias, const void *z, k_elem et,
                  const k_dwconv_args *a, cudaStream_t stream, err *e);
// The same with the one-pixel-per-thread kernel only: the version before the
// tiled path, for tests/bench/kernels/bench_k_dwconv.c's side-by-side runs.
int k_dwconv__v1_cuda(void *y, const void *x, const void *w, const void *bias, const void *z,
                      k_elem et, const k_dwconv_args *a, cudaStream_t stream, err *e);

// --- decoder runtime (engine/llm/cuda/): kernels over a step's tokens, each
// generic over its storage dt (kernels/base/dtype.h: DT_FP32, DT_FP16 or
// DT_BF16; k_elem has no bfloat16), computing in float (sums of the FP32
// norms in double) and rounding each output once. Per-token metadata lives
// on the device (k_llm_meta); nothing is allocated and nothing synchronises,
// so a step can be captured into a CUDA graph.

// Where each token of a step belongs: token t (0 .. n_tok) is item
// tok_item[t]'s token at position tok_pos[t]; item i's block table starts at
// tables[table_off[i]]. Device pointers (the struct itself is host memory,
// passed by value to the kernels).
typedef struct k_llm_meta {
  const int32_t *tok_item, *tok_pos;
  const int32_t *tables, *table_off;
  int64_t n_tok;
} k_llm_meta;

// k_embed (kernels/index/k_embed.cu): y [n_tok, hidden] = table[tokens[t]]
// (+ pos_table[pos[t]] when not NULL). tokens and pos: device int32.
int k_embed_cuda(void *y, const void *table, const void *pos_table, const int32_t *tokens,
                 const int32_t *pos, size_t n_tok, size_t hidden, dtype dt, cudaStream_t stream,
                 err *e);
// k_rms_norm and k_layer_norm (kernels/norm/k_llm_norm.cu), one block per row,
// scale and bias of the storage type; y may alias x. bias may be NULL.
int k_rms_norm_dt_cuda(void *y, const void *x, const void *scale, size_t rows, size_t cols, float eps,
                       dtype dt, cudaStream_t stream, err *e);
int k_layer_norm_dt_cuda(void *y, const void *x, const void *scale, const void *bias, size_t rows,
                         size_t cols, float eps, dtype dt, cudaStream_t stream, err *e);
// k_rope (kernels/attn/k_rope.cu) in place; pos: n_tok device int32;
// inv_freq: head_dim / 2 device floats (k_rope_inv_freq's).
int k_rope_cuda(void *x, size_t n_tok, const int32_t *pos, int64_t n_heads, int64_t head_dim,
                int64_t row_stride, const float *inv_freq, dtype dt, cudaStream_t stream, err *e);
// k_mlp_act (kernels/elem/k_mlp_act.cu); y must not overlap x when gated.
int k_mlp_act_cuda(void *y, const void *x, size_t rows, size_t cols, k_mlp_kind act, int gated, dtype dt,
                   cudaStream_t stream, err *e);
// k_paged_kv_write for K and V of every token of the step at once
// (kernels/attn/k_paged_attn.cu): row t of k and of v (row_elems elements,
// src_stride apart) into its item's slot for position tok_pos[t]. The block
// ids are the caller's to check (the runner checks them on the host).
int k_paged_kv_write_cuda(void *k_cache, void *v_cache, const void *k, const void *v, int64_t src_stride,
                          int64_t row_elems, int64_t block_tokens, const k_llm_meta *m, dtype dt,
                          cudaStream_t stream, err *e);
// k_rope_cuda on the Q and K heads of the fused QKV rows qkv [n_tok, row_stride] (Q's n_heads,
// then K's and V's n_kv_heads heads of head_dim), then k_paged_kv_write_cuda of the rotated K
// rows and the V rows, in one launch (kernels/attn/k_rope.cu): the same bits as the two calls.
// Positions are m's tok_pos. inv_freq NULL: no rotation (learned positions), the write only.
int k_rope_kv_write_cuda(void *qkv, void *k_cache, void *v_cache, int64_t n_heads, int64_t n_kv_heads,
                         int64_t head_dim, int64_t row_stride, const float *inv_freq, int64_t block_tokens,
                         const k_llm_meta *m, dtype dt, cudaStream_t stream, err *e);
// y [m, n] = x [m, k] w [n, k]^T (+ bias [n]) (+ res [m, n]) for a decode step's few rows
// (kernels/gemm/k_gemv.cu): a warp a few weight rows, 16-byte streaming loads, float
// accumulation in an order that does not depend on m, the output rounded once. x, w, y dense
// row-major; bias and res NULL or of the storage type; res may be y (in place). ERR_UNIMPLEMENTED
// (nothing launched; the caller takes cuBLASLt) outside m 1 .. 8, k a multiple of 8, FP16 or
// BF16, x and w 16-byte aligned.
int k_gemv_cuda(void *y, const void *x, const void *w, const void *bias, const void *res, int64_t m, int64_t n,
                int64_t k, dtype dt, cudaStream_t stream, err *e);
// What k_gemv_ex_cuda fuses around the product (a decode layer's launches fewer):
typedef struct k_gemv_opts {
  // non-NULL: x's rows RMS-normalised first with this scale [k] and eps, rounded to the storage
  // type, as k_rms_norm_dt_cuda writes them (m * k elements must fit 48 KiB: else ERR_UNIMPLEMENTED)
  const void *rms_scale;
  float eps;
  // non-zero: w holds 2n rows, the gate's then the up's (bias 2n or NULL), and y [m, n] =
  // act(gate) * up, gate and up rounded first: k_mlp_act_cuda's bits on the plain product's rows
  int glu;
  k_mlp_kind act;
  // non-zero (sm_90): launched as a programmatic dependent of the stream's previous kernel, the
  // first weights read before that kernel ends (CUDA graphs keep the edge)
  int pdl;
} k_gemv_opts;
// k_gemv_cuda with the fusions of o (NULL: none). res must be NULL with glu.
int k_gemv_ex_cuda(void *y, const void *x, const void *w, const void *bias, const void *res, int64_t m, int64_t n,
                   int64_t k, const k_gemv_opts *o, dtype dt, cudaStream_t stream, err *e);
// y = x widened to float (kernels/elem/k_widen.cu), exact; y must not overlap x.
int k_widen_cuda(float *y, const void *x, size_t n, dtype dt, cudaStream_t stream, err *e);
// ids[r] = the greedy token of row r of x [rows, cols] (kernels/reduce/k_argmax_rows.cu),
// k_argmax_rows_ref's policy exactly (the lowest index among equal maxima; NaN never chosen,
// unless at index 0: then 0). ids: rows device int32. ws: NULL for one block a row, or
// k_argmax_rows_ws_bytes(rows, cols) bytes of device memory (any contents; 4-byte aligned):
// then each row is split over blocks of 2,048 columns and their bests combined by a second
// kernel (the same answers; a 128k vocabulary row in a few us instead of ~58).
int k_argmax_rows_cuda(int32_t *ids, const void *x, size_t rows, size_t cols, void *ws, dtype dt, cudaStream_t stream,
                       err *e);
size_t k_argmax_rows_ws_bytes(size_t rows, size_t cols);
// ids[r] = the token k_sample_rows_ref draws from row r of x [rows, vocab]
// under params[r] (kernels/sample/k_sample.cu; mode 0 rows untouched), bit
// for bit. params: rows device k_sample_param; seen: the penalty's device
// ids (params' seen_off / n_seen; NULL when no row has n_seen); ws:
// k_sample_ws_bytes(rows, vocab) device bytes (any contents; 8-byte
// aligned). Three launches, each row split over many blocks where the grid
// needs it (a batch of one fills the GPU too).
int k_sample_rows_cuda(int32_t *ids, const void *x, void *ws, size_t rows, size_t vocab,
                       const k_sample_param *params, const int32_t *seen, dtype dt, cudaStream_t stream, err *e);
// k_paged_attn_ref for every token of the step at once (prefill chunks and
// decode tokens alike; kernels/attn/k_paged_attn.cu): token t's query row
// (q + t q_stride) attends to its item's keys 0 .. tok_pos[t] (inside the
// window). a gives the heads, strides, block size, window and scale; its
// n_q and pos0 are unused (m says). One block per (token, KV head, chunk of
// up to 8 of its query heads): the chunk reads each key and value row once
// (16-byte loads where head_dim and the caches' alignment allow), lanes in
// groups per key, each group with its own online softmax (float), merged at
// the end. head_dim up to 256, n_heads / n_kv_heads up to 64
// (ERR_UNIMPLEMENTED past them). block_tokens up to 2^31 - 1.
// splits > 1 (up to 32): split-K over each token's keys (flash-decoding),
// for few tokens with long contexts: each (token, KV head) pair's keys are
// shared out evenly among `splits` blocks, whose partial sums go to
// ws (k_paged_attn_ws_floats floats of device memory, for up to n_tok
// tokens and 32 splits), and the last of them to finish combines them. ws
// holds counters: zero it once after allocating it (cudaMemset); every launch
// leaves them zero again, so one ws serves any later step of up to n_tok
// tokens and any splits, graphs included (one launch at a time per ws).
// splits 1: one pass, ws unused (NULL).
// a->tc_prefill (FP16 and BF16, head_dim a multiple of 16 up to 128, splits
// 1; ignored otherwise): each tile of 16 consecutive step tokens of one item
// (prefill chunks) runs on tensor cores (wmma, float accumulation, softmax
// weights rounded to the storage type for P V); the other tokens as above.
// Needs compute capability 8.0 or newer (the caller checks).
// a->shallow: fewer keys in flight a lane group and registers capped for 4
// blocks an SM (16-byte loads only): for grids of several waves, where
// occupancy hides the latency better than each warp's loads in flight; the
// same result up to the order of the softmax's rescales (rounding).
int k_paged_attn_cuda(void *o, const void *q, const void *k_cache, const void *v_cache, const k_llm_meta *m,
                      const k_paged_attn_args *a, int splits, float *ws, dtype dt, cudaStream_t stream, err *e);
size_t k_paged_attn_ws_floats(int64_t n_tok, int64_t n_heads, int64_t head_dim, int splits);

#ifdef __cplusplus
}
#endif

#endif
