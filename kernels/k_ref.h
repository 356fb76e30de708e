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

// The engine's element types, as the typed kernels name them.
typedef enum k_elem { K_F32, K_F64, K_F16, K_I64, K_I32, K_I16, K_I8, K_U8, K_U16, K_U32, K_U64, K_BOOL } k_elem;
// The lists the typed elementwise kernels are generated from (one body,
// expanded per type): X(code, C type, 1 if signed).
#define K_INT_TYPES(X)                                                                   \
  X(K_I8, int8_t, 1) X(K_I16, int16_t, 1) X(K_I32, int32_t, 1) X(K_I64, int64_t, 1)     \
  X(K_U8, uint8_t, 0) X(K_U16, uint16_t, 0) X(K_U32, uint32_t, 0) X(K_U64, uint64_t, 0)
#define K_FLOAT_TYPES(X) X(K_F32, float, 1) X(K_F64, double, 1)

// --- elementwise unary
void k_relu(float *y, const float *x, size_t n);
void k_leaky_relu(float *y, const float *x, size_t n, float alpha);
void k_sigmoid(float *y, const float *x, size_t n);
void k_tanh(float *y, const float *x, size_t n);
void k_erf(float *y, const float *x, size_t n);
// approximate: 0 = exact erf form, 1 = tanh approximation (ONNX Gelu attribute)
void k_gelu(float *y, const float *x, size_t n, int approximate);
// y = silu(g) * u (SwiGLU); y may alias g or u.
void k_silu_mul(float *y, const float *g, const float *u, size_t n);

// The unary math ops selected by enum (ops_act.c); a and b are the op's
// parameters: HardSigmoid alpha/beta, Clip min/max, unused otherwise.
// From K_LOG on, FP32 only, one expression each in kernels/elem/k_unop_math.h:
// Elu alpha (a), Selu alpha and gamma (a, b), Celu alpha, ThresholdedRelu
// alpha, Shrink lambd and bias (a, b), Swish alpha.
typedef enum k_unop {
  K_SQRT, K_EXP, K_NEG, K_ABS, K_RECIP, K_HARD_SIGMOID, K_HARD_SWISH, K_CLIP, K_SIGN,
  K_LOG, K_SIN, K_COS, K_TAN, K_ASIN, K_ACOS, K_ATAN, K_SINH, K_COSH, K_ASINH, K_ACOSH, K_ATANH,
  K_FLOOR, K_CEIL, K_ROUND, K_SOFTPLUS, K_SOFTSIGN, K_ELU, K_SELU, K_CELU, K_THRESHOLDED_RELU,
  K_MISH, K_SHRINK, K_SWISH
} k_unop;
void k_unary_f32(float *y, const float *x, size_t n, k_unop op, float a, float b);
// int64 for the ops that make sense on shapes (Neg, Abs, Clip, Sign); others copy.
void k_unary_i64(int64_t *y, const int64_t *x, size_t n, k_unop op, int64_t a, int64_t b);
// The integer unary ops on any integer k_elem (K_I8..K_I64, K_U8..K_U64):
// Neg (signed types only, wrapping: -INT_MIN is INT_MIN), Abs (likewise;
// the identity on unsigned), Sign, Clip (lo/hi: one element of type t, or
// NULL for no bound). Returns -1, touching nothing, for another type or op
// (k_unary_takes says which).
int k_unary_takes(k_elem t, k_unop op);
int k_unary(void *y, const void *x, k_elem t, size_t n, k_unop op, const void *lo, const void *hi);

// --- binary with numpy broadcasting
// K_MAX/K_MIN propagate NaN from either side (as ONNX Runtime's Max/Min do).
// K_MOD is ONNX Mod with fmod=0 (the result takes the divisor's sign, as
// Python's %), K_FMOD Mod with fmod=1 (C's % and fmodf: the dividend's).
typedef enum k_binop { K_ADD, K_SUB, K_MUL, K_DIV, K_POW, K_MAX, K_MIN, K_MOD, K_FMOD } k_binop;
// All three shapes have `ndim` dims (callers left-pad the shorter inputs
// with 1s); a dim of an input is either equal to ydims[i] or 1.
void k_binary_f32(float *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op);
// Same for int64 tensors (shape arithmetic); K_DIV truncates toward zero,
// division by zero yields 0.
void k_binary_i64(int64_t *y, const int64_t *a, const int64_t *b, int ndim, const int64_t *ydims,
                  const int64_t *adims, const int64_t *bdims, k_binop op);

// Every k_binop on any k_elem but K_F16 and K_BOOL, one typed loop
// per type generated from one body (k_binary.c). Integers wrap in two's
// complement (INT_MIN / -1 is INT_MIN), K_DIV truncates toward zero and
// x / 0, x % 0 are 0 (ONNX leaves them undefined); K_POW by squaring, a
// negative exponent giving 0 unless the base is 1 or -1. K_F32 is
// k_binary_f32. Returns -1, touching nothing, for a (type, op) pair
// k_binary_takes refuses.
int k_binary_takes(k_elem t, k_binop op);
int k_binary(void *y, const void *a, const void *b, k_elem t, int ndim, const int64_t *ydims,
             const int64_t *adims, const int64_t *bdims, k_binop op);
// Bitwise And/Or/Xor and BitShift (K_SHL, K_SHR: arithmetic on signed
// types; a negative count or one of the type's width or more gives 0, or -1
// shifting a negative value right, as numpy) with broadcasting, on any integer k_elem;
// -1 for another type, touching nothing. k_bitwise_not: BitwiseNot, every
// byte inverted (any integer type; y may alias x).
typedef enum k_bitop { K_BAND, K_BOR, K_BXOR, K_SHL, K_SHR } k_bitop;
int k_bitwise(void *y, const void *a, const void *b, k_elem t, int ndim, const int64_t *ydims,
              const int64_t *adims, const int64_t *bdims, k_bitop op);
void k_bitwise_not(void *y, const void *x, size_t bytes);

// PRelu: y = x < 0 ? slope * x : x, slope (sdims) broadcast to x (ydims, ndim dims each).
void k_prelu_f32(float *y, const float *x, const float *slope, int ndim, const int64_t *ydims,
                 const int64_t *sdims);

// Pow of a base of type ta by an exponent of another type tb (ONNX's Pow
// types them apart): y (of type ta) = pow(a, b) computed in double, each
// operand and the result converted by k_cast's rules. -1 for F16 or BOOL.
int k_pow_mixed(void *y, const void *a, k_elem ta, const void *b, k_elem tb, int ndim,
                const int64_t *ydims, const int64_t *adims, const int64_t *bdims);

// Comparisons with broadcasting; y is bool (one byte, 0 or 1). Every
// comparison with a NaN is false (K_EQ included), as IEEE and ONNX Runtime say.
typedef enum k_cmpop { K_EQ, K_LT, K_GT, K_LE, K_GE } k_cmpop;
void k_compare_f32(uint8_t *y, const float *a, const float *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op);
void k_compare_i64(uint8_t *y, const int64_t *a, const int64_t *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op);
void k_compare_i32(uint8_t *y, const int32_t *a, const int32_t *b, int ndim, const int64_t *ydims,
                   const int64_t *adims, const int64_t *bdims, k_cmpop op);

// Any k_elem but K_F16 and K_BOOL (K_BOOL: use k_logic's K_XNOR for
// Equal); -1 for those, touching nothing.
int k_compare(uint8_t *y, const void *a, const void *b, k_elem t, int ndim, const int64_t *ydims,
              const int64_t *adims, const int64_t *bdims, k_cmpop op);

// Logic on bools with broadcasting (And, Or, Xor; K_XNOR is Equal on bools).
// Any nonzero byte is true; y is 0 or 1.
typedef enum k_logop { K_AND, K_OR, K_XOR, K_XNOR } k_logop;
void k_logic(uint8_t *y, const uint8_t *a, const uint8_t *b, int ndim, const int64_t *ydims,
             const int64_t *adims, const int64_t *bdims, k_logop op);

// --- unary with a bool result or operand (kernels/elem/k_unary.c); y may alias x for k_not
void k_not(uint8_t *y, const uint8_t *x, size_t n);
void k_isnan(uint8_t *y, const float *x, size_t n);
// IsInf: +inf counts when pos, -inf when neg.
void k_isinf(uint8_t *y, const float *x, size_t n, int neg, int pos);

// --- linear quantization (kernels/elem/k_quant.c)
// x viewed as [outer, len, inner], len along the quantization axis; the
// scale (and zero point) has one element (per tensor), len (per_axis), or
// [outer, ceil(len / block), inner] (block > 0).
typedef struct k_quant_layout {
  size_t outer, len, inner;
  int per_axis;
  size_t block;
} k_quant_layout;
// The integer types quantized values may have: K_I8, K_U8, K_I16, K_U16, K_I32, K_U32.
int k_quant_takes(k_elem t);
// y = (x - zp) * scale (zp: x's type, or NULL for 0). -1 for a type k_quant_takes refuses.
int k_dequantize(float *y, const void *x, k_elem xt, const float *scale, const void *zp, const k_quant_layout *l);
// y = saturate(round_half_even(x / scale) + zp) in yt (zp: yt's type, or NULL); NaN as 0.
int k_quantize(void *y, k_elem yt, const float *x, const float *scale, const void *zp, const k_quant_layout *l);
// QuantizeLinear to qt then DequantizeLinear, as the two calls above would
// compute through a qt tensor: y = (saturate(round_half_even(x / scale) + zp)
// - zp) * scale (zp: qt's type, or NULL); y may alias x. -1 for a type
// k_quant_takes refuses.
int k_fake_quant(float *y, const float *x, k_elem qt, const float *scale, const void *zp, const k_quant_layout *l);
// DynamicQuantizeLinear: UINT8 y, scale = (max(x, 0) - min(x, 0)) / 255, zp = saturate(round(-min / scale)).
void k_dynamic_quantize(uint8_t *y, float *scale, uint8_t *zp, const float *x, size_t n);
// batch products of a [m, k] (each batch at a_bstride elements; 0
// broadcasts) by b [k, n]: sum of (a - a_zp)(b - b_zp), stored exactly in
// K_I32 when mul is 0 and mul_col NULL (MatMulInteger), else
// saturate(round(sum * mul) + y_zp) in yt (QLinearMatMul). b_zp_col and
// mul_col, where not NULL, give b's zero point and the multiplier per
// column (n values) in place of b_zp and mul. -1 for a type k_quant_takes refuses.
int k_matmul_int(void *y, k_elem yt, const void *a, k_elem at, const void *b, k_elem bt, double a_zp, double b_zp,
                 const double *b_zp_col, size_t batch, size_t a_bstride, size_t b_bstride, size_t m, size_t k,
                 size_t n, double mul, const double *mul_col, double y_zp);
// QLinearConv's and QLinearMatMul's requantization of int32 sums acc viewed as
// [outer, len, inner], len along the output channels: y = saturate(
// round_half_even((acc + b[c]) * mul[c]) + y_zp) in yt (K_U8 or K_I8), the
// product in double as ONNX's reference (onnxruntime's differs by at most one step); b NULL for no bias; mul one value, or
// len values (per_c), finite (NaN or infinite mul is the caller's to refuse). -1 for another yt.
int k_requantize(void *y, k_elem yt, const int32_t *acc, const int32_t *b, const float *mul, int per_c,
                 int32_t y_zp, size_t outer, size_t len, size_t inner);
// The same from sums in channels-last order, acc [outer, inner, len], into y
// [outer, len, inner] (a convolution's NHWC int32 sums to its NCHW output).
int k_requantize_cl(void *y, k_elem yt, const int32_t *acc, const int32_t *b, const float *mul, int per_c,
                    int32_t y_zp, size_t outer, size_t len, size_t inner);

// --- broadcasting copies of any element size (kernels/index/k_index.c); shapes as for k_binary_f32
// y = cond ? a : b
void k_where(void *y, const uint8_t *cond, const void *a, const void *b, size_t esz, int ndim,
             const int64_t *ydims, const int64_t *cdims, const int64_t *adims,
             const int64_t *bdims);
// y = x repeated along the dims where xdims[i] is 1 (Expand)
void k_expand(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims,
              const int64_t *xdims);
// y = x repeated ydims[i] / xdims[i] times along each dim (Tile): y[i] = x[i mod xdims]; every
// ydims[i] a multiple of xdims[i] > 0 (or 0: nothing written); ndim 0 copies one element
void k_tile(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims, const int64_t *xdims);

// --- indexing (kernels/index/k_index.c), any element size
// Gather along an axis: x viewed as [outer, axis_len, inner]; idx holds
// n_idx int64 (or int32 when idx_i32) indices, negative ones counted from
// the end. Returns 0, or -1 when an index is out of range (y is then partial).
int k_gather(void *y, const void *x, size_t esz, size_t outer, int64_t axis_len, size_t inner,
             const void *idx, int idx_i32, size_t n_idx);
// y[i] = x[starts + i * steps] per dim (Slice); ydims is the result shape.
void k_slice(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
             const int64_t *starts, const int64_t *steps, const int64_t *ydims);
// GatherElements: y has idx's shape (idims, ndim dims, each <= x's except
// on axis); y[i] = x[i with i[axis] replaced by idx[i]]. Negative indices
// count from the end. Returns 0, or -1 when an index is out of range.
int k_gather_elements(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                      int axis, const void *idx, int idx_i32, const int64_t *idims);
// GatherND: x viewed as [batch, d_0..d_{m-1}, slice elements]; idx as
// [batch, n_tuples, m] (int64, or int32 when idx_i32). Each tuple selects
// one slice of `slice` elements, written to y in order. Negative indices
// count from the end. Returns 0, or -1 when an index is out of range.
int k_gather_nd(void *y, const void *x, size_t esz, size_t batch, int m, const int64_t *d,
                size_t slice, const void *idx, int idx_i32, size_t n_tuples);
// ScatterElements (axis) and ScatterND on y, which already holds the data:
// each update (upd, in idx's order) is written to, or with a reduction
// combined into (in the element's type: K_F32, K_F64, K_I32, K_I64; -1 for
// another with a reduction), the element idx names. ScatterElements: idx
// has idims (ndim dims); the target is idx's position with the axis
// replaced by the index. ScatterND: n_tuples tuples of m indices (int64, or
// int32 when idx_i32), each naming a slice of the last ydim - m dims.
// Negative indices count from the end; -1 for one out of range (y partial).
typedef enum k_scatter_red { K_SCATTER_NONE, K_SCATTER_ADD, K_SCATTER_MUL, K_SCATTER_MAX, K_SCATTER_MIN } k_scatter_red;
int k_scatter_elements(void *y, const void *upd, size_t esz, k_elem t, int ndim, const int64_t *ydims, int axis,
                       const void *idx, int idx_i32, const int64_t *idims, k_scatter_red red);
int k_scatter_nd(void *y, const void *upd, size_t esz, k_elem t, int ydim, const int64_t *ydims, const void *idx,
                 int idx_i32, size_t n_tuples, int m, k_scatter_red red);
// Trilu on x viewed as [batch, rows, cols]: keeps element (i, j) when
// j - i >= k (upper) or j - i <= k (lower), writes zero bytes elsewhere.
// y may alias x.
void k_trilu(void *y, const void *x, size_t esz, size_t batch, int64_t rows, int64_t cols,
             int64_t k, int upper);
// Pad: y index i reads x index i - begin[d]; outside x: `value` (constant),
// the mirror image without the edge (reflect) or the nearest edge (edge).
typedef enum k_padmode { K_PAD_CONSTANT, K_PAD_REFLECT, K_PAD_EDGE, K_PAD_WRAP } k_padmode;
void k_pad(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
           const int64_t *begin, const int64_t *ydims, k_padmode mode, const void *value);

// --- reductions over a set of axes (kernels/reduce/k_reduce.c)
// From K_RPROD on, FP32 only (k_reduce refuses them on integers): ReduceProd,
// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp (the
// last accumulated as a running log-add-exp, so large inputs never overflow).
typedef enum k_redop {
  K_RSUM, K_RMEAN, K_RMAX, K_RMIN, K_RPROD, K_RSUMSQ, K_RL1, K_RL2, K_RLOGSUM, K_RLOGSUMEXP
} k_redop;
// reduce[i] != 0 marks the axes reduced; y has x's shape with those dims 1.
void k_reduce_f32(float *y, const float *x, int ndim, const int64_t *xdims, const int *reduce,
                  k_redop op);
// The same on K_F32 or any integer type (K_INT_TYPES; K_RSUM..K_RMIN and
// K_RPROD): sums and products wrap, Mean truncates toward zero. -1 for
// another type or op, touching nothing.
int k_reduce(void *y, const void *x, k_elem t, int ndim, const int64_t *xdims, const int *reduce,
             k_redop op);

// ArgMax (is_min 0) or ArgMin along one axis of x viewed as [outer, len,
// inner]: y[o * inner + c] is the index of the first extreme (the last with
// select_last). Any K_FLOAT_TYPES or K_INT_TYPES type; -1 for another or len 0.
int k_arg_reduce(int64_t *y, const void *x, k_elem t, size_t outer, size_t len, size_t inner, int is_min,
                 int select_last);
// The greedy token of each row of x [rows, cols] (cols >= 1): best = 0, replaced only by a strictly
// larger value. So the lowest index among equal maxima (torch.argmax's), and NaN is never chosen
// unless it sits at index 0 (then 0). The host sampler's greedy rule and k_argmax_rows_cuda's reference.
void k_argmax_rows_ref(int32_t *ids, const float *x, size_t rows, size_t cols);

// TopK along one axis of x viewed as [outer, len, inner]: vals (x's type) and
// idx viewed as [outer, k, inner], the k largest (largest) or smallest in
// order, ties to the lower index. Any float or integer type; -1 for another
// or k > len.
int k_topk(void *vals, int64_t *idx, const void *x, k_elem t, size_t outer, size_t len, size_t inner, size_t k,
           int largest);
// CumProd along one axis (CumSum's exclusive and reverse): K_F32, K_F64, K_I32,
// K_I64 (integers wrap); -1 for another. y may alias x.
int k_cumprod(void *y, const void *x, k_elem t, size_t outer, size_t len, size_t inner, int exclusive, int reverse);

// --- running sums along one axis (kernels/reduce/k_reduce.c), x viewed as [outer, len, inner]
// exclusive: element i sums the ones before it (not itself); reverse: the
// ones after it. y may alias x.
void k_cumsum_f32(float *y, const float *x, size_t outer, size_t len, size_t inner, int exclusive,
                  int reverse);
void k_cumsum_i64(int64_t *y, const int64_t *x, size_t outer, size_t len, size_t inner,
                  int exclusive, int reverse);
void k_cumsum_i32(int32_t *y, const int32_t *x, size_t outer, size_t len, size_t inner,
                  int exclusive, int reverse);
// k_cumsum_f32 or the same on any integer type (wrapping); -1 for another type.
int k_cumsum(void *y, const void *x, k_elem t, size_t outer, size_t len, size_t inner,
             int exclusive, int reverse);

// --- resize (kernels/resize/k_resize.c)
// How an output coordinate maps to an input one (ONNX Resize
// coordinate_transformation_mode) and how nearest rounds it (nearest_mode;
// K_NEAREST_SIMPLE is Upsample's and Resize-10's: floor when upsampling,
// ceil when downsampling).
typedef enum k_coord {
  K_COORD_HALF_PIXEL, K_COORD_ASYMMETRIC, K_COORD_PYTORCH_HALF_PIXEL, K_COORD_ALIGN_CORNERS,
  K_COORD_TF_HALF_PIXEL, K_COORD_HALF_PIXEL_SYMMETRIC
} k_coord;
typedef enum k_nearest {
  K_NEAREST_ROUND_PREFER_FLOOR, K_NEAREST_ROUND_PREFER_CEIL, K_NEAREST_FLOOR, K_NEAREST_CEIL,
  K_NEAREST_SIMPLE
} k_nearest;
// The input coordinate of output coordinate o along a dim of in_len -> out_len.
float k_resize_coord(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c);
// Nearest over every dim; any element size.
void k_resize_nearest(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                      const int64_t *ydims, const float *scales, k_coord c, k_nearest m);
// Bilinear over the last two dims of x viewed as [nc, ih, iw].
void k_resize_linear(float *y, const float *x, size_t nc, int64_t ih, int64_t iw, int64_t oh,
                     int64_t ow, float sh, float sw, k_coord c);

// GridSample on x [n, c, xdims...] (nd = 1..3 spatial dims) at the grid
// [n, ydims..., nd] of normalised coordinates (x first, as ONNX lists
// them): y [n, c, ydims...]. mode K_GS_NEAREST (halves to even), LINEAR or
// CUBIC (Keys, a = -0.75, 4 taps a dim); pad K_GS_ZEROS, BORDER or
// REFLECTION; align: align_corners. As onnx's reference computes it.
enum { K_GS_NEAREST, K_GS_LINEAR, K_GS_CUBIC };
enum { K_GS_ZEROS, K_GS_BORDER, K_GS_REFLECTION };
void k_grid_sample(float *y, const float *x, const float *grid, size_t n, size_t c, int nd, const int64_t *xdims,
                   const int64_t *ydims, int mode, int pad, int align);

// Cubic over the last two dims of x viewed as [nc, ih, iw] (Keys' kernel with
// coefficient a; exclude: exclude_outside), as onnx's reference computes it.
void k_resize_cubic(float *y, const float *x, size_t nc, int64_t ih, int64_t iw, int64_t oh, int64_t ow, float sh,
                    float sw, k_coord c, float a, int exclude);

// --- reductions over one axis, the tensor viewed as [outer, axis_len, inner]
void k_softmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner);
void k_log_softmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner);

// --- scaled-dot-product attention (kernels/attn/k_attn.c; CUDA twin kernels/attn/k_attn.cu), per
// (b, h) of a [B, H] batch: O = softmax(scale * Q Kt + mask) V, the softmax
// over the keys. Q is [Sq, D], Kt the keys already transposed [D, Sk] (what
// exporters hand the first MatMul), V [Sk, Dv], O [Sq, Dv], each row-major
// at its (b, h) offset b*sb + h*sh (a stride of 0 broadcasts that operand);
// the additive mask element (i, j) is at b*m_sb + h*m_sh + i*m_sq + j*m_sk
// (strides 0 broadcast; no mask: NULL). A row whose softmax is undefined
// (every score -inf, or a NaN or +inf score) is NaN as the unfused graph
// computes it, or 0 with nan_zero (the exporters' IsNaN/Where after the
// Softmax); with no keys at all (sk 0) O is 0, the empty product. Strides
// count elements.
// Within a head, rows need not be packed: q_ss, v_ss and o_ss step between
// rows of Q, V and O (their columns are adjacent), and Kt element (d, j) is
// at d*k_sd + j*k_sk, so K stored key-major ([Sk, D] rows: k_sd 1, k_sk the
// row stride) is read as Kt without a copy. This is how the [B, S, H, D]
// layout the projections write reaches the kernels with no Transpose:
// Q/V/O rows H*D apart, heads D apart. Zero means packed: q_ss d, v_ss and
// o_ss dv, and k_sd = k_sk = 0 is k_sd sk, k_sk 1 (so a caller that sets
// none of them keeps the layout above).
typedef struct k_attn_args {
  int64_t b, h, sq, sk, d, dv;
  int64_t q_sb, q_sh, k_sb, k_sh, v_sb, v_sh, o_sb, o_sh;
  int64_t m_sb, m_sh, m_sq, m_sk;
  int64_t q_ss, k_sd, k_sk, v_ss, o_ss;
  float scale;
  int nan_zero;
} k_attn_args;
// a with the zero (packed) row strides above replaced by their values.
static inline k_attn_args k_attn_packed(k_attn_args a) {
  if (!a.q_ss) a.q_ss = a.d;
  if (!a.v_ss) a.v_ss = a.dv;
  if (!a.o_ss) a.o_ss = a.dv;
  if (!a.k_sd && !a.k_sk) a.k_sd = a.sk, a.k_sk = 1;
  return a;
}
// The reference: sums in double, one row at a time.
void k_attn_ref(float *o, const float *q, const float *kt, const float *v, const float *mask,
                const k_attn_args *a);

// ONNX's Attention (opset 23+) on contiguous [B, H, S, D] tensors: q is
// [b, hq, sq, d], k [b, hkv, t, d] and v [b, hkv, t, dv] (the keys and values
// with any past ones already in front), y [b, hq, sq, dv]; query head h reads
// key head h / (hq / hkv) (grouped-query attention). Score (i, j) is scale *
// q_i . k_j (double sums), then softcap * tanh(score / softcap) when softcap
// > 0, plus the bias: the mask (float, additive, or bool: false is -inf; its
// element (b, h, i, j) at the strides mask_st, 0 broadcasting; j at or past
// mask_len is -inf), -inf where causal and j > i + offset, outside the
// window [i + offset - left, i + offset + right] (-1: unbounded), and where
// j >= nonpad[b]; offset is offset[b], or offset0 when offset is NULL. A
// row whose bias is -inf everywhere gives probabilities 0 and y 0. qk (may
// be NULL; [b, hq, sq, t]) receives the scores after softcap (qk_mode 0, 1),
// with the bias (2) or the probabilities (3). work: t floats of scratch.
typedef struct k_attention_args {
  int64_t b, hq, hkv, sq, t, d, dv;
  float scale, softcap;
  const void *mask;
  int mask_bool;
  int64_t mask_len, mask_st[4];
  int causal;
  const int64_t *offset;
  int64_t offset0, left, right;
  const int64_t *nonpad;
  int qk_mode;
} k_attention_args;
void k_attention(float *y, float *qk, const float *q, const float *k, const float *v, float *work,
                 const k_attention_args *a);

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere.
void k_hardmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner);
// LpNormalization (p 1 or 2) along the axis; a zero norm gives 0.
void k_lp_norm(float *y, const float *x, size_t outer, size_t axis_len, size_t inner, int p);

// RotaryEmbedding on x as [b, s, h, d] (heads_first: stored [b, h, s, d]):
// the first rot dims of each head rotate in pairs (k, k + rot/2), or (2k,
// 2k + 1) when interleaved, by the angle whose cos and sin are row r of
// cos_c / sin_c ([rows, rot/2]): r = pos[b * s + i] (checked against
// max_pos; -1 when out of range), or b * s + i when pos is NULL. The other
// dims are copied. y may alias x.
int k_rotary(float *y, const float *x, const float *cos_c, const float *sin_c, const int64_t *pos, int64_t max_pos,
             int64_t b, int64_t s, int64_t h, int64_t d, int64_t rot, int heads_first, int interleaved);

// DFT along one axis (kernels/gemm/k_dft.c): x as [outer, n, inner, 1 or 2 (complex_in)], zero-padded
// or truncated to len along n; y as [outer, bins, inner, 2] holding bins 0..bins-1 (len, or len/2 + 1
// for a one-sided transform); inverse uses exp(+2 pi i k j / len) and divides by len. -1: no memory.
int k_dft_f32(float *y, const float *x, size_t outer, int64_t n, size_t inner, int complex_in, int64_t len,
              int64_t bins, int inverse);

// Einsum over up to K_EINSUM_MAX_IN operands (kernels/gemm/k_einsum.c): n_labels
// labels, the n_out output ones first (in the output's order, y row-major
// over them: out_div[l] is the product of the sizes after l), then the
// contracted ones; stride[k][l] is operand k's element stride for label l
// (0 when it lacks the label or broadcasts it; summed over repeats).
#define K_EINSUM_MAX_IN 4
#define K_EINSUM_MAX_LABELS 24
typedef struct k_einsum_plan {
  int n_in, n_labels, n_out;
  int64_t size[K_EINSUM_MAX_LABELS], out_div[K_EINSUM_MAX_LABELS];
  int64_t stride[K_EINSUM_MAX_IN][K_EINSUM_MAX_LABELS];
} k_einsum_plan;
void k_einsum(float *y, const float *const *x, const k_einsum_plan *p);

// RNN, GRU, LSTM (kernels/gemm/k_rnn.c) with ONNX's default activations: x
// [seq, batch, input] (batch_first: [batch, seq, input]), w [dirs, G*hidden,
// input], r [dirs, G*hidden, hidden], bias [dirs, 2*G*hidden] or NULL, peep
// (LSTM) [dirs, 3*hidden] or NULL, h0/c0 as yh/yc or NULL, lens [batch] or
// NULL; y [seq, dirs, batch, hidden] ([batch, seq, dirs, hidden]) and yh/yc
// [dirs, batch, hidden] ([batch, dirs, hidden]), each NULL when not wanted.
// Gates in ONNX's order (GRU z r h, LSTM i o f c). dirs 2 is bidirectional
// (direction 1 reversed); reverse reverses direction 0. work: 2*batch*hidden
// + 5*hidden floats.
enum { K_RNN_RNN, K_RNN_GRU, K_RNN_LSTM };
typedef struct k_rnn_args {
  int kind, reverse, batch_first, linear_before_reset;
  int64_t seq, batch, input, hidden, dirs;
  float clip;  // 0: none
} k_rnn_args;
void k_rnn(const k_rnn_args *a, float *y, float *yh, float *yc, const float *x, const float *w, const float *r,
           const float *bias, const float *peep, const float *h0, const float *c0, const int64_t *lens, float *work);

// --- paged attention (kernels/attn/k_paged_attn.c) and rotary embeddings
// (kernels/attn/k_rope.c), for decoder models (engine/llm/)
// The KV cache of one layer: blocks of block_tokens token slots, each slot a
// row of n_kv_heads * head_dim floats ([block][slot][kv head][dim]);
// position p of a sequence lives in block table[p / block_tokens], slot
// p % block_tokens (batcher/kvblocks.h hands out the ids).
typedef struct k_paged_attn_args {
  int64_t n_q;         // queries of one sequence, at positions pos0 .. pos0 + n_q - 1
  int64_t pos0;        // their keys (0 .. pos0 + n_q - 1) are in the cache already
  int64_t n_heads, n_kv_heads, head_dim;  // n_heads a multiple of n_kv_heads (GQA)
  int64_t q_stride, o_stride;             // elements between rows of q and of o
  int64_t block_tokens;
  int64_t window;  // sliding window: keys at positions > p - window only; 0: all
  float scale;
  int tc_prefill;  // k_paged_attn_cuda only: prefill tiles on tensor cores (k_cuda.h); the C reference ignores it
  int shallow;     // k_paged_attn_cuda only: the shallow pipeline for grids of many blocks (k_cuda.h)
} k_paged_attn_args;
// o[i, h] = softmax_j(scale * q[i, h] . k[j, h / group]) v[j, h / group] over
// the keys j <= pos0 + i (and in the window). scratch: pos0 + n_q floats.
void k_paged_attn_ref(float *o, const float *q, const float *k_cache, const float *v_cache,
                      const int32_t *table, const k_paged_attn_args *a, float *scratch);
// Copies n rows (row_elems floats, src_stride apart) into the slots of
// positions pos0 .. pos0 + n - 1.
void k_paged_kv_write(float *cache, const int32_t *table, int64_t block_tokens, int64_t row_elems,
                      int64_t pos0, int64_t n, const float *src, int64_t src_stride);
typedef enum k_rope_kind { K_ROPE_DEFAULT = 0, K_ROPE_LLAMA3 } k_rope_kind;
typedef struct k_rope_scaling {
  k_rope_kind kind;
  double factor, low_freq_factor, high_freq_factor;  // K_ROPE_LLAMA3
  int64_t original_max_pos;
} k_rope_scaling;
// rot_dim / 2 inverse frequencies theta^(-2i / rot_dim), scaled as s says (NULL: none).
void k_rope_inv_freq(float *inv_freq, int64_t rot_dim, double theta, const k_rope_scaling *s);
// Rotates each head of n_tok rows in place (row t at x + t * row_stride,
// n_heads heads of head_dim) by the angles pos[t] * inv_freq, the halves
// of a head as the pair (transformers' rotate_half).
void k_rope(float *x, int64_t n_tok, const int64_t *pos, int64_t n_heads, int64_t head_dim,
            int64_t row_stride, const float *inv_freq);

// Token embeddings (kernels/index/k_embed.c): row t of y (hidden floats) is
// row tokens[t] of table, plus row pos[t] of pos_table (learned positions,
// GPT-2) when that is not NULL. Indices are the caller's to check.
void k_embed(float *y, const float *table, const float *pos_table, const int32_t *tokens, const int32_t *pos,
             size_t n_tok, size_t hidden);
// The MLP's activation (kernels/elem/k_mlp_act.c): gated, y[r, c] =
// act(x[r, c]) * x[r, cols + c] with x rows 2 cols wide (gate then up:
// SwiGLU, GeGLU), y rows cols wide; else y[r, c] = act(x[r, c]) (y may alias
// x). The math of k_silu_mul and k_gelu, element by element.
typedef enum k_mlp_kind { K_MLP_SILU = 0, K_MLP_GELU_TANH, K_MLP_GELU } k_mlp_kind;
void k_mlp_act(float *y, const float *x, size_t rows, size_t cols, k_mlp_kind act, int gated);

// --- normalisation
// LRN across the channels of x viewed as [n, c, spatial] (y must not alias x):
// y = x / (bias + alpha / size * sum of squares over channels
// [ch - floor((size-1)/2), ch + ceil((size-1)/2)]) ^ beta.
void k_lrn(float *y, const float *x, size_t n, size_t c, size_t spatial, int64_t size, float alpha, float beta,
           float bias);
// LayerNormalization over the last `cols` elements of each of `rows` rows;
// bias may be NULL.
void k_layer_norm(float *y, const float *x, const float *scale, const float *bias, size_t rows,
                  size_t cols, float eps);
// RMSNormalization: each row divided by the root of its mean square (plus
// eps), times scale (cols elements); sums in double. y may alias x.
void k_rms_norm(float *y, const float *x, const float *scale, size_t rows, size_t cols, float eps);
// GroupNormalization on x viewed as [n, c, spatial]: each of a sample's
// `groups` runs of c / groups channels normalised by its own mean and
// variance (double sums, centred), then scaled and shifted per channel
// (scale, bias: c elements; per_group: `groups` elements, each shared by its
// group's channels, as GroupNormalization-18 has them). InstanceNormalization
// is groups == c. y may alias x.
void k_group_norm(float *y, const float *x, const float *scale, const float *bias, size_t n, size_t c,
                  size_t groups, size_t spatial, int per_group, float eps);
// NegativeLogLikelihoodLoss on x (log probabilities) viewed as [n, c, d] and
// target [n, d]: element (i, k) is -x[i, t, k] * weight[t] (weight NULL: 1),
// 0 where t == ignore (has_ignore). reduction 0 (none) writes the n*d
// elements, 1 (sum) and 2 (mean: the sum over the summed weights of the
// targets not ignored, or over n*d with neither weight nor ignore) one.
// Returns -1 for a target outside [0, c) that is not ignored (loss partial).
int k_nll_loss(float *loss, const float *x, const int64_t *target, const float *weight, size_t n, size_t c,
               size_t d, int has_ignore, int64_t ignore, int reduction);
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
// Split, the inverse: x viewed as `outer` rows, each row_bytes[0] + ... +
// row_bytes[n-1] long; output i gets the i-th piece of every row (none
// when ys[i] is NULL: an output nobody reads).
void k_split(void *const *ys, const size_t *row_bytes, int n_outputs, const void *x, size_t outer);

// --- GEMM reference (the engine calls OpenBLAS; this is the oracle)
// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, row-major, lda/ldb/ldc in elements.
void k_gemm_ref(float *c, const float *a, const float *b, int trans_a, int trans_b, size_t m,
                size_t n, size_t k, float alpha, float beta, size_t lda, size_t ldb, size_t ldc);

// --- conversions
// IEEE half <-> float, round to nearest even; inf, nan and subnormals kept.
void k_f16_to_f32(float *y, const uint16_t *x, size_t n);
void k_f32_to_f16(uint16_t *y, const float *x, size_t n);
// Numeric casts between the engine's element types (k_elem, above), by ONNX-like rules
// (float -> int truncates toward zero; any -> bool is x != 0).
void k_cast(void *y, k_elem yt, const void *x, k_elem xt, size_t n);

#endif
