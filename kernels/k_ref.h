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
typedef enum k_unop {
  K_SQRT, K_EXP, K_NEG, K_ABS, K_RECIP, K_HARD_SIGMOID, K_HARD_SWISH, K_CLIP, K_SIGN
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

// --- broadcasting copies of any element size (kernels/index/k_index.c); shapes as for k_binary_f32
// y = cond ? a : b
void k_where(void *y, const uint8_t *cond, const void *a, const void *b, size_t esz, int ndim,
             const int64_t *ydims, const int64_t *cdims, const int64_t *adims,
             const int64_t *bdims);
// y = x repeated along the dims where xdims[i] is 1 (Expand)
void k_expand(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims,
              const int64_t *xdims);

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
// Trilu on x viewed as [batch, rows, cols]: keeps element (i, j) when
// j - i >= k (upper) or j - i <= k (lower), writes zero bytes elsewhere.
// y may alias x.
void k_trilu(void *y, const void *x, size_t esz, size_t batch, int64_t rows, int64_t cols,
             int64_t k, int upper);
// Pad: y index i reads x index i - begin[d]; outside x: `value` (constant),
// the mirror image without the edge (reflect) or the nearest edge (edge).
typedef enum k_padmode { K_PAD_CONSTANT, K_PAD_REFLECT, K_PAD_EDGE } k_padmode;
void k_pad(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
           const int64_t *begin, const int64_t *ydims, k_padmode mode, const void *value);

// --- reductions over a set of axes (kernels/reduce/k_reduce.c)
typedef enum k_redop { K_RSUM, K_RMEAN, K_RMAX, K_RMIN } k_redop;
// reduce[i] != 0 marks the axes reduced; y has x's shape with those dims 1.
void k_reduce_f32(float *y, const float *x, int ndim, const int64_t *xdims, const int *reduce,
                  k_redop op);
// The same on K_F32 or any integer type (K_INT_TYPES): sums wrap, Mean
// truncates toward zero. -1 for another type, touching nothing.
int k_reduce(void *y, const void *x, k_elem t, int ndim, const int64_t *xdims, const int *reduce,
             k_redop op);

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
  K_COORD_TF_HALF_PIXEL
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

// --- normalisation
// LayerNormalization over the last `cols` elements of each of `rows` rows;
// bias may be NULL.
void k_layer_norm(float *y, const float *x, const float *scale, const float *bias, size_t rows,
                  size_t cols, float eps);
// RMSNorm (Llama): y = x * rsqrt(mean(x^2) + eps) * weight, per row.
void k_rms_norm(float *y, const float *x, const float *weight, size_t rows, size_t cols, float eps);
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
