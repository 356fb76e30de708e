// engine/ops/elem/elem.c: the elementwise ops on the CPU, all with numpy
// broadcasting: Add, Sub, Mul, Div, Mod, Pow, variadic Max/Min/Sum/Mean; the
// activations Relu, LeakyRelu, Sigmoid, Tanh, Erf, Gelu (FP32); Cast between
// every numeric type, CastLike; unary math and activations by k_unop (Clip,
// HardSigmoid, HardSwish, Sqrt, Exp, Neg, Abs, Sign, Reciprocal; Log, the
// trigonometric and hyperbolic functions, Floor, Ceil, Round, Softplus,
// Softsign, Mish, Elu, Selu, Celu, ThresholdedRelu, Shrink, Swish), the
// comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) and bool
// logic (And, Or, Xor, Not, IsNaN, IsInf) that attention masks are built
// from, and Where; BitShift and BitwiseAnd/Or/Xor/Not on the integer types
// (CPU only). The unary ops by k_unop live in elem_unary.c, linear
// quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// MatMulInteger, QLinearMatMul; CPU only) in elem_quant.c.
// Element types: the arithmetic, the comparisons, Neg/Abs/Sign/Clip take
// every type ONNX defines them for, through the typed kernels of
// kernels/elem (one body per op family, expanded per type: k_binary,
// k_compare, k_unary), each (op, type) pair asked of the kernels'
// k_*_takes at shape inference so a model the kernels cannot run fails at
// load. FP16, BF16 and FP64 values travel as FP32 inside a plan
// (eng_ops_cpu_internal_dtype), so their arithmetic is FP32's. Their CUDA
// path is elem_cuda.c.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/elem/elem_internal.h"
#include "engine/ops/ops_common.h"
#include "engine/ops/str/str.h"
#include "engine/cpu/par.h"
#include "kernels/k_ref.h"

// --- Add, Sub, Mul, Div, Mod (every numeric type, numpy broadcasting)

// The kernels' name for a plan's element type, or an error naming the op's type.
static int kelem(dtype t, k_elem *k, err *e) {
  if (t == DT_FP16 || eng_ops_elem_of(t, k) != 0)  // FP16 never reaches a CPU kernel
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(t));
  return 0;
}

// p->mode is the k_binop (set by the parse functions below).
static int infer_binary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_in, (void)n_out;
  if (in[0].dt != in[1].dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "input types differ: %s vs %s",
                   dtype_wire_name(in[0].dt), dtype_wire_name(in[1].dt));
  k_elem k = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &k, e));
  if (!k_binary_takes(k, (k_binop)p->mode))
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(in[0].dt));
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  op_set_out(&out[0], in[0].dt, nd, y);
  return 0;
}

// k_binary_f32 split over threads (par.h) along y's first dim that is not
// 1 (the dims before it are 1 in every operand, so each part is a
// contiguous slab of y, and of a and b unless they broadcast along it).
typedef struct bin_job {
  char *y;
  const char *a, *b;
  int nd, d0;
  const int64_t *yd, *ad, *bd;
  int64_t ys, as, bs;  // bytes per index of d0 in y, a, b
  k_binop op;
  k_elem t;
} bin_job;

static void bin_part(void *ctx, size_t lo, size_t hi) {
  const bin_job *j = ctx;
  int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS], d = j->d0, l = (int64_t)lo;
  memcpy(yd, j->yd, (size_t)j->nd * sizeof *yd);
  memcpy(ad, j->ad, (size_t)j->nd * sizeof *ad);
  memcpy(bd, j->bd, (size_t)j->nd * sizeof *bd);
  yd[d] = (int64_t)(hi - lo);
  const char *a = j->a, *b = j->b;
  if (ad[d] != 1) {
    ad[d] = yd[d];
    a += l * j->as;
  }
  if (bd[d] != 1) {
    bd[d] = yd[d];
    b += l * j->bs;
  }
  if (j->t == K_F32)  // the FP32 path, called as before the other types came
    k_binary_f32((float *)(void *)(j->y + l * j->ys), (const float *)(const void *)a,
                 (const float *)(const void *)b, j->nd, yd, ad, bd, j->op);
  else
    (void)k_binary(j->y + l * j->ys, a, b, j->t, j->nd, yd, ad, bd, j->op);  // infer asked k_binary_takes
}

static void binary_par(void *y, const void *a, const void *b, k_elem t, size_t esz, int nd,
                       const int64_t *yd, const int64_t *ad, const int64_t *bd, k_binop op) {
  bin_job j = {y, a, b, nd, 0, yd, ad, bd, 1, 1, 1, op, t};
  while (j.d0 < nd - 1 && yd[j.d0] == 1) j.d0++;
  for (int i = j.d0 + 1; i < nd; i++) {
    j.ys *= yd[i];
    j.as *= ad[i];
    j.bs *= bd[i];
  }
  size_t grain = (size_t)((ENG_PAR_GRAIN + j.ys - 1) / (j.ys > 0 ? j.ys : 1));
  j.ys *= (int64_t)esz;
  j.as *= (int64_t)esz;
  j.bs *= (int64_t)esz;
  eng_par_for((size_t)yd[j.d0], grain, bin_part, &j);
}

static int run_binary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_in, (void)n_out;
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  k_elem k = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &k, e));
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  if (nd == 0) {  // scalars: one dim of 1 keeps the kernels' loops simple
    nd = 1;
    y[0] = ad[0] = bd[0] = 1;
  }
  binary_par(out[0].data, in[0].data, in[1].data, k, dtype_size(in[0].dt), nd, y, ad, bd,
             (k_binop)p->mode);
  return 0;
}

// --- Relu, LeakyRelu, Sigmoid, Tanh, Erf, Gelu (FP32)

static int parse_leaky(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->alpha = op_attr_float(n, "alpha", 0.01f);
  return 0;
}

static int parse_gelu(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_attr *a = eng_node_attr(n, "approximate");
  const char *s = a ? a->s : "none";
  if (strcmp(s, "none") == 0) p->approximate = 0;
  else if (strcmp(s, "tanh") == 0) p->approximate = 1;
  else return err_set(e, ERR_INVALID_ARGUMENT, "unknown approximate '%s'", s);
  return 0;
}

// Each op's kernel on parts of x split over threads (par.h): elementwise,
// so the result is the same however the range is split.
typedef struct act_job {
  float *y;
  const float *x;
  const eng_op_params *p;
} act_job;

#define UNARY_RUN(name, call)                                                                   \
  static void name##_part(void *ctx, size_t lo, size_t hi) {                                    \
    const act_job *j = ctx;                                                                     \
    const eng_op_params *p = j->p;                                                              \
    float *y = j->y + lo;                                                                       \
    const float *x = j->x + lo;                                                                 \
    size_t n = hi - lo;                                                                         \
    (void)p;                                                                                    \
    call;                                                                                       \
  }                                                                                             \
  static int name(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,      \
                  int n_out, err *e) {                                                          \
    (void)n_in, (void)n_out, (void)e;                                                           \
    act_job j = {out[0].data, in[0].data, p};                                                   \
    eng_par_for(op_numel(&in[0]), ENG_PAR_GRAIN, name##_part, &j);                              \
    return 0;                                                                                   \
  }
UNARY_RUN(run_relu, k_relu(y, x, n))
UNARY_RUN(run_leaky, k_leaky_relu(y, x, n, p->alpha))
UNARY_RUN(run_sigmoid, k_sigmoid(y, x, n))
UNARY_RUN(run_tanh, k_tanh(y, x, n))
UNARY_RUN(run_erf, k_erf(y, x, n))
UNARY_RUN(run_gelu, k_gelu(y, x, n, p->approximate))

// Relu takes the signed integers too (opset 14): max(x, 0) by the integer
// kernel, against a zero scalar (eight zero bytes are 0 in every width).
static int infer_relu(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  dtype t = in[0].dt;
  if (t != DT_INT8 && t != DT_INT16 && t != DT_INT32 && t != DT_INT64)
    return eng_ops__infer_same_f32(p, in, n_in, out, n_out, e);
  op_set_out(&out[0], t, in[0].ndims, in[0].dims);
  return 0;
}

static int run_relu_any(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  if (in[0].dt == DT_FP32) return run_relu(p, in, n_in, out, n_out, e);
  static const uint64_t zero = 0;
  k_elem k = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &k, e));
  int64_t n = (int64_t)op_numel(&in[0]), one = 1;
  if (k_binary(out[0].data, in[0].data, &zero, k, 1, &n, &n, &one, K_MAX) != 0)
    return err_set(e, ERR_INTERNAL, "no Relu of %s", dtype_wire_name(in[0].dt));
  return 0;
}

// --- BitCast: the same bits as another type of the same width. Narrow floats
// travel as FP32 inside a plan, so FP16/BF16 bits are recovered from (and
// turned back into) their FP32 values exactly; FP64, computed as FP32, has
// no bits to keep and is refused.

// The declared type of a node's input k where the graph says it (a graph
// input), else DT_INVALID.
static dtype declared_in(const eng_graph *g, const eng_node *n, int k) {
  if (n->n_in <= k || n->in[k] < 0) return DT_INVALID;
  const eng_value *v = eng_graph_value(g, (size_t)n->in[k]);
  return v->kind == ENG_VALUE_INPUT ? v->dt : DT_INVALID;
}

static int parse_bitcast(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)opset;
  const eng_attr *a = eng_node_attr(n, "to");
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'to' is required");
  p->to = dtype_from_onnx((int)a->i);
  p->value_dt = declared_in(g, n, 0);
  return 0;
}

static int infer_bitcast(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                         err *e) {
  (void)n_in, (void)n_out;
  dtype src = p->value_dt != DT_INVALID ? p->value_dt : in[0].dt, dst = p->to;
  if (src == DT_FP64 || dst == DT_FP64 || src == DT_STRING || dst == DT_STRING || dtype_size(src) == 0 ||
      dtype_size(dst) == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: BitCast from %s to %s", dtype_wire_name(src),
                   dtype_wire_name(dst));
  if (dtype_size(src) != dtype_size(dst))
    return err_set(e, ERR_INVALID_ARGUMENT, "BitCast from %s to %s changes the width", dtype_wire_name(src),
                   dtype_wire_name(dst));
  op_set_out(&out[0], eng_ops_cpu_internal_dtype(dst), in[0].ndims, in[0].dims);
  return 0;
}

// FP32 (a plan's value) <-> the 16 bits of FP16 or BF16.
static uint16_t narrow_bits(float v, int bf16) {
  uint16_t h;
  if (!bf16) {
    k_f32_to_f16(&h, &v, 1);
    return h;
  }
  uint32_t u;
  memcpy(&u, &v, 4);
  return (uint16_t)(u >> 16);  // exact: the value came from a BF16
}

static float widen_bits(uint16_t h, int bf16) {
  float v;
  if (!bf16) {
    k_f16_to_f32(&v, &h, 1);
    return v;
  }
  uint32_t u = (uint32_t)h << 16;
  memcpy(&v, &u, 4);
  return v;
}

static int run_bitcast(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                       err *e) {
  (void)n_in, (void)n_out, (void)e;
  dtype src = p->value_dt != DT_INVALID ? p->value_dt : in[0].dt, dst = p->to;
  size_t n = op_numel(&in[0]);
  int src_narrow = src == DT_FP16 || src == DT_BF16, dst_narrow = dst == DT_FP16 || dst == DT_BF16;
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    if (src_narrow) h = narrow_bits(((const float *)in[0].data)[i], src == DT_BF16);
    else if (dst_narrow) memcpy(&h, (const char *)in[0].data + i * 2, 2);
    if (dst_narrow) ((float *)out[0].data)[i] = widen_bits(h, dst == DT_BF16);
    else if (src_narrow) memcpy((char *)out[0].data + i * 2, &h, 2);
  }
  if (!src_narrow && !dst_narrow && n && out[0].data != in[0].data)
    memcpy(out[0].data, in[0].data, n * dtype_size(src));
  return 0;
}

// --- SwiGLU: a * sigmoid(alpha * a) * b, A and B of one shape (FP32)

static int infer_swiglu(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  TRY(eng_ops__need_f32(&in[1], "B", e));
  if (in[0].ndims != in[1].ndims || eng_numel(in[0].ndims, in[0].dims) != eng_numel(in[1].ndims, in[1].dims))
    return err_set(e, ERR_INVALID_ARGUMENT, "A and B must have one shape");
  for (int i = 0; i < in[0].ndims; i++)
    if (in[0].dims[i] != in[1].dims[i]) return err_set(e, ERR_INVALID_ARGUMENT, "A and B must have one shape");
  return eng_ops__infer_same_f32(p, in, n_in, out, n_out, e);
}

static int run_swiglu(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                      err *e) {
  (void)n_in, (void)n_out, (void)e;
  const float *a = in[0].data, *b = in[1].data;
  float *y = out[0].data;
  for (size_t i = 0, n = op_numel(&in[0]); i < n; i++) y[i] = a[i] / (1.0f + expf(-p->alpha * a[i])) * b[i];
  return 0;
}

static int parse_swiglu(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->alpha = op_attr_float(n, "alpha", 1.0f);
  return 0;
}

// --- PRelu (floats): the slope broadcasts to X (unidirectionally)

static int infer_prelu(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                       err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(eng_ops__need_f32(&in[0], "X", e));
  TRY(eng_ops__need_f32(&in[1], "slope", e));
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  if (nd != in[0].ndims || eng_numel(nd, y) != (int64_t)op_numel(&in[0]))
    return err_set(e, ERR_INVALID_ARGUMENT, "slope must broadcast to X's shape");
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

static int run_prelu(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                     err *e) {
  (void)p, (void)n_in, (void)n_out;
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  if (nd == 0) {
    nd = 1;
    y[0] = bd[0] = 1;
  }
  k_prelu_f32(out[0].data, in[0].data, in[1].data, nd, y, bd);
  return 0;
}

// --- Cast

static int parse_cast(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_attr *a = eng_node_attr(n, "to");
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'to' is required");
  p->to = dtype_from_onnx((int)a->i);
  if (p->to == DT_STRING) return 0;  // engine/ops/str/ runs it
  switch (p->to) {
    case DT_FP32: case DT_FP16: case DT_FP64: case DT_BF16: case DT_INT64: case DT_INT32:
    case DT_INT16: case DT_INT8: case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64:
    case DT_BOOL:
      return 0;
    default:
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: Cast to ONNX type %lld",
                     (long long)a->i);
  }
}

// CastLike: Cast to the type of input 1. Its declared type where the graph
// gives one (a graph input; a constant's FP16/BF16/FP64 are stored widened,
// so those and node outputs take the type input 1 has in the plan, FP32 for
// every float width: no narrow rounding then).
static int parse_castlike(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)opset, (void)e;
  p->to = DT_INVALID;
  if (n->n_in > 1 && n->in[1] >= 0) {
    const eng_value *v = eng_graph_value(g, (size_t)n->in[1]);
    if (v->kind == ENG_VALUE_INPUT) p->to = v->dt;
  }
  return 0;
}


static int infer_cast(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_in, (void)n_out;
  if (eng_ops_str_cast(in[0].dt, p->to)) return eng_ops_str_cast_infer(p, in, out, e);
  k_elem k = (k_elem)0;  // set by kelem() before use
  if (eng_ops_elem_of(in[0].dt, &k) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: Cast from %s", dtype_wire_name(in[0].dt));
  op_set_out(&out[0], eng_ops_cpu_internal_dtype(p->to), in[0].ndims, in[0].dims);
  return 0;
}

static int infer_castlike(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                          int n_out, err *e) {
  eng_op_params q = *p;
  if (q.to == DT_INVALID) q.to = in[1].dt;
  if (q.to == DT_STRING || in[0].dt == DT_STRING)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: CastLike with STRING (use Cast)");
  return infer_cast(&q, in, n_in, out, n_out, e);
}

static int run_cast(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)n_in, (void)n_out;
  if (eng_ops_str_cast(in[0].dt, out[0].dt)) return eng_ops_str_cast_run(p, in, out, e);
  k_elem xk, yk;
  // infer_cast accepted both types; checked again so no path casts from an unset element type.
  if (eng_ops_elem_of(in[0].dt, &xk) != 0 || eng_ops_elem_of(out[0].dt, &yk) != 0)
    return err_set(e, ERR_INTERNAL, "Cast from %s to %s has no kernel", dtype_wire_name(in[0].dt),
                   dtype_wire_name(out[0].dt));
  size_t n = op_numel(&in[0]);
  if (!n) return 0;
  k_cast(out[0].data, yk, in[0].data, xk, n);
  // Narrow float targets travel as FP32 but must carry the narrow type's
  // precision, as if stored and reloaded.
  float *y = out[0].data;
  if (p->to == DT_FP16) {
    uint16_t tmp[256];
    for (size_t i = 0; i < n; i += 256) {
      size_t c = n - i < 256 ? n - i : 256;
      k_f32_to_f16(tmp, y + i, c);
      k_f16_to_f32(y + i, tmp, c);
    }
  } else if (p->to == DT_BF16) {
    for (size_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, &y[i], 4);
      if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);  // nearest even
      u &= 0xffff0000u;
      memcpy(&y[i], &u, 4);
    }
  }
  return 0;
}

// --- binary and variadic with broadcasting

// op: a k_binop, k_cmpop or k_logop, whichever enum the op's run reads p->mode as
static int parse_binop(const eng_node *n, eng_op_params *p, int op) {
  (void)n;
  p->mode = op;
  return 0;
}
#define PARSE_BINOP(name, op)                                                                   \
  static int name(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) { \
    (void)g, (void)opset, (void)e;                                                              \
    return parse_binop(n, p, op);                                                               \
  }
PARSE_BINOP(parse_add, K_ADD)
PARSE_BINOP(parse_sub, K_SUB)
PARSE_BINOP(parse_mul, K_MUL)
PARSE_BINOP(parse_div, K_DIV)
PARSE_BINOP(parse_pow, K_POW)
PARSE_BINOP(parse_max, K_MAX)
PARSE_BINOP(parse_min, K_MIN)

// Mod: fmod=0 (the default) takes the divisor's sign, integers only; fmod=1
// the dividend's (C's % and fmod).
static int parse_mod(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  int64_t f = op_attr_int(n, "fmod", 0);
  if (f != 0 && f != 1) return err_set(e, ERR_INVALID_ARGUMENT, "fmod must be 0 or 1, got %lld", (long long)f);
  p->mode = f ? K_FMOD : K_MOD;
  return 0;
}

// Broadcast shape of all inputs (variadic Max/Min, Where's three).
static int bcast_all(const eng_tensor *in, int n_in, eng_tensor *y, err *e) {
  *y = in[0];
  for (int k = 1; k < n_in; k++) {
    int nd;
    int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
    TRY(eng_ops__bcast(y, &in[k], &nd, yd, ad, bd, e));
    y->ndims = nd;
    memcpy(y->dims, yd, sizeof yd);
  }
  return 0;
}

static int infer_variadic(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                          int n_out, err *e) {
  (void)p, (void)n_out;
  for (int k = 0; k < n_in; k++)
    if (in[k].dt != in[0].dt)
      return err_set(e, ERR_INVALID_ARGUMENT, "input %d is %s, input 0 %s", k,
                     dtype_wire_name(in[k].dt), dtype_wire_name(in[0].dt));
  k_elem k = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &k, e));
  if (!k_binary_takes(k, (k_binop)p->mode))
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s",
                   dtype_wire_name(in[0].dt));
  eng_tensor y;
  TRY(bcast_all(in, n_in, &y, e));
  op_set_out(&out[0], in[0].dt, y.ndims, y.dims);
  return 0;
}

// y = op(in0, in1), then y = op(y, in_k): every input broadcasts to y's
// final shape, so each step is a valid k_binary call with y as its own left
// operand (read before written at the same index).
static int run_variadic(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_out;
  int nd = out[0].ndims > 0 ? out[0].ndims : 1;
  int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  k_elem t = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &t, e));
  op_pad_dims(&out[0], nd, yd);
  for (int k = 0; k < (n_in > 1 ? n_in - 1 : 1); k++) {
    const eng_tensor *a = k == 0 ? &in[0] : &out[0], *b = n_in > 1 ? &in[k + 1] : &in[0];
    op_pad_dims(a, nd, ad);
    op_pad_dims(b, nd, bd);
    if (k_binary(out[0].data, a->data, b->data, t, nd, yd, ad, bd, (k_binop)p->mode) != 0)
      return err_set(e, ERR_INTERNAL, "no %s kernel for this op", dtype_wire_name(in[0].dt));
  }
  return 0;
}

// Sum: variadic Add (one input: a copy); Mean: the Sum divided by the count,
// floats only (FP32 stands for every float width inside a plan).
PARSE_BINOP(parse_sum, K_ADD)

static int run_sum(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e) {
  if (n_in > 1) return run_variadic(p, in, n_in, out, n_out, e);
  if (out[0].data != in[0].data) memmove(out[0].data, in[0].data, op_numel(&in[0]) * dtype_size(in[0].dt));
  return 0;
}

static int infer_mean(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  TRY(eng_ops__need_f32(&in[0], "data_0", e));
  return infer_variadic(p, in, n_in, out, n_out, e);
}

static int run_mean(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  TRY(run_sum(p, in, n_in, out, n_out, e));
  float *y = out[0].data, inv = 1.0f / (float)n_in;
  size_t n = op_numel(&out[0]);
  for (size_t i = 0; i < n; i++) y[i] *= inv;
  return 0;
}

// The three shapes padded to the output's rank (a scalar as one dim of 1).
static int pad3(const eng_tensor *in, const eng_tensor *y, int64_t *yd, int64_t *ad, int64_t *bd) {
  int nd = y->ndims > 0 ? y->ndims : 1;
  op_pad_dims(y, nd, yd);
  op_pad_dims(&in[0], nd, ad);
  op_pad_dims(&in[1], nd, bd);
  return nd;
}

// Pow's base and exponent may differ in type (ONNX's T and T1): the result
// has the base's.
static int infer_pow(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  if (in[0].dt == in[1].dt) return infer_variadic(p, in, n_in, out, n_out, e);
  k_elem ka = K_F32, kb = K_F32;
  TRY(kelem(in[0].dt, &ka, e));
  TRY(kelem(in[1].dt, &kb, e));
  if (!k_binary_takes(ka, K_POW) || !k_binary_takes(kb, K_POW))
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: Pow of %s by a %s exponent",
                   dtype_wire_name(in[0].dt), dtype_wire_name(in[1].dt));
  eng_tensor y;
  TRY(bcast_all(in, n_in, &y, e));
  op_set_out(&out[0], in[0].dt, y.ndims, y.dims);
  return 0;
}

static int run_pow(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e) {
  if (in[0].dt == in[1].dt) return run_variadic(p, in, n_in, out, n_out, e);
  k_elem ka = K_F32, kb = K_F32;
  TRY(kelem(in[0].dt, &ka, e));
  TRY(kelem(in[1].dt, &kb, e));
  int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  int nd = pad3(in, &out[0], yd, ad, bd);
  if (k_pow_mixed(out[0].data, in[0].data, ka, in[1].data, kb, nd, yd, ad, bd) != 0)
    return err_set(e, ERR_INTERNAL, "no Pow kernel for %s by %s", dtype_wire_name(in[0].dt),
                   dtype_wire_name(in[1].dt));
  return 0;
}

// --- BitwiseAnd/Or/Xor, BitShift, BitwiseNot: integer types (k_bitwise)

static int parse_bitshift(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const char *d = op_attr_str(n, "direction", "");
  if (strcmp(d, "LEFT") == 0) p->mode = K_SHL;
  else if (strcmp(d, "RIGHT") == 0) p->mode = K_SHR;
  else return err_set(e, ERR_INVALID_ARGUMENT, "direction must be LEFT or RIGHT, got '%s'", d);
  return 0;
}
PARSE_BINOP(parse_bitand, K_BAND)
PARSE_BINOP(parse_bitor, K_BOR)
PARSE_BINOP(parse_bitxor, K_BXOR)

static int need_int(const eng_tensor *t, err *e) {
  k_elem k = K_F32;
  if (t->dt == DT_FP16 || eng_ops_elem_of(t->dt, &k) != 0 || k == K_F32 || k == K_F64 || k == K_BOOL)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s (integers only)", dtype_wire_name(t->dt));
  return 0;
}

static int infer_bitwise(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)p, (void)n_out;
  TRY(need_int(&in[0], e));
  if (n_in > 1 && in[1].dt != in[0].dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "input types differ: %s vs %s", dtype_wire_name(in[0].dt),
                   dtype_wire_name(in[1].dt));
  eng_tensor y;
  TRY(bcast_all(in, n_in, &y, e));
  op_set_out(&out[0], in[0].dt, y.ndims, y.dims);
  return 0;
}

static int run_bitwise(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  int nd = pad3(in, &out[0], yd, ad, bd);
  k_elem k = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &k, e));
  if (k_bitwise(out[0].data, in[0].data, in[1].data, k, nd, yd, ad, bd, (k_bitop)p->mode) != 0)
    return err_set(e, ERR_INTERNAL, "no bitwise kernel for %s", dtype_wire_name(in[0].dt));
  return 0;
}

static int run_bitnot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  k_bitwise_not(out[0].data, in[0].data, op_numel(&in[0]) * dtype_size(in[0].dt));
  return 0;
}

// --- comparisons and logic: bool results

PARSE_BINOP(parse_eq, K_EQ)
PARSE_BINOP(parse_lt, K_LT)
PARSE_BINOP(parse_le, K_LE)
PARSE_BINOP(parse_gt, K_GT)
PARSE_BINOP(parse_ge, K_GE)

// Equal, Less, LessOrEqual, Greater, GreaterOrEqual: every numeric type
// (FP32 stands for every float width inside a plan); Equal also on BOOL.
static int infer_compare(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_out;
  dtype t = in[0].dt;
  if (in[1].dt != t)
    return err_set(e, ERR_INVALID_ARGUMENT, "inputs differ in type: %s vs %s", dtype_wire_name(t),
                   dtype_wire_name(in[1].dt));
  k_elem k = (k_elem)0;  // set by kelem() before use
  if (!(t == DT_BOOL && p->mode == K_EQ)) {
    TRY(kelem(t, &k, e));
    if (k == K_BOOL)
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(t));
  }
  eng_tensor y;
  TRY(bcast_all(in, n_in, &y, e));
  op_set_out(&out[0], DT_BOOL, y.ndims, y.dims);
  return 0;
}

static int run_compare(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  int nd = pad3(in, &out[0], yd, ad, bd);
  uint8_t *y = out[0].data;
  if (in[0].dt == DT_BOOL) {  // Equal
    k_logic(y, in[0].data, in[1].data, nd, yd, ad, bd, K_XNOR);
    return 0;
  }
  k_elem k = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &k, e));
  if (k_compare(y, in[0].data, in[1].data, k, nd, yd, ad, bd, (k_cmpop)p->mode) != 0)
    return err_set(e, ERR_INTERNAL, "no %s comparison kernel", dtype_wire_name(in[0].dt));
  return 0;
}

PARSE_BINOP(parse_and, K_AND)
PARSE_BINOP(parse_or, K_OR)
PARSE_BINOP(parse_xor, K_XOR)

static int need_bool(const eng_tensor *t, const char *what, err *e) {
  if (t->dt != DT_BOOL)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s must be bool, got %s", what,
                   dtype_wire_name(t->dt));
  return 0;
}

static int infer_logic(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)p, (void)n_out;
  TRY(need_bool(&in[0], "A", e));
  TRY(need_bool(&in[1], "B", e));
  eng_tensor y;
  TRY(bcast_all(in, n_in, &y, e));
  op_set_out(&out[0], DT_BOOL, y.ndims, y.dims);
  return 0;
}

static int run_logic(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  int nd = pad3(in, &out[0], yd, ad, bd);
  k_logic(out[0].data, in[0].data, in[1].data, nd, yd, ad, bd, (k_logop)p->mode);
  return 0;
}

static int infer_not(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(need_bool(&in[0], "X", e));
  op_set_out(&out[0], DT_BOOL, in[0].ndims, in[0].dims);
  return 0;
}

static int run_not(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  k_not(out[0].data, in[0].data, op_numel(&in[0]));
  return 0;
}

// --- IsNaN, IsInf: float in, bool out

static int parse_isinf(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                       err *e) {
  (void)g, (void)opset, (void)e;
  p->detect_neg = op_attr_int(n, "detect_negative", 1) != 0;
  p->detect_pos = op_attr_int(n, "detect_positive", 1) != 0;
  return 0;
}

static int infer_isfloat(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(eng_ops__need_f32(&in[0], "X", e));
  op_set_out(&out[0], DT_BOOL, in[0].ndims, in[0].dims);
  return 0;
}

static int run_isnan(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  k_isnan(out[0].data, in[0].data, op_numel(&in[0]));
  return 0;
}

static int run_isinf(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  k_isinf(out[0].data, in[0].data, op_numel(&in[0]), p->detect_neg, p->detect_pos);
  return 0;
}

// --- Where

static int infer_where(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)p, (void)n_out;
  if (in[0].dt != DT_BOOL)
    return err_set(e, ERR_INVALID_ARGUMENT, "condition must be bool, got %s",
                   dtype_wire_name(in[0].dt));
  if (in[1].dt != in[2].dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "X is %s but Y is %s", dtype_wire_name(in[1].dt),
                   dtype_wire_name(in[2].dt));
  eng_tensor y;
  TRY(bcast_all(in, n_in, &y, e));
  op_set_out(&out[0], in[1].dt, y.ndims, y.dims);
  return 0;
}

static int run_where(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  int nd = out[0].ndims > 0 ? out[0].ndims : 1;
  int64_t yd[ENG_MAX_DIMS], cd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  op_pad_dims(&out[0], nd, yd);
  op_pad_dims(&in[0], nd, cd);
  op_pad_dims(&in[1], nd, ad);
  op_pad_dims(&in[2], nd, bd);
  k_where(out[0].data, in[0].data, in[1].data, in[2].data, eng_elem_size(out[0].dt), nd, yd, cd, ad,
          bd);
  return 0;
}

// --- table

const eng_op_def eng_ops__elem[] = {
    {"Add", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_add, infer_binary, run_binary, 0, NULL, NULL},
    {"Sub", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_sub, infer_binary, run_binary, 0, NULL, NULL},
    {"Mul", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_mul, infer_binary, run_binary, 0, NULL, NULL},
    {"Div", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_div, infer_binary, run_binary, 0, NULL, NULL},
    {"Mod", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_mod, infer_binary, run_binary, 0, NULL, NULL},
    {"Relu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, op_parse_none, infer_relu, run_relu_any, 0, NULL, NULL},
    {"LeakyRelu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_leaky, eng_ops__infer_same_f32, run_leaky, 0, NULL, NULL},
    {"Sigmoid", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, op_parse_none, eng_ops__infer_same_f32, run_sigmoid, 0, NULL, NULL},
    {"Tanh", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, op_parse_none, eng_ops__infer_same_f32, run_tanh, 0, NULL, NULL},
    {"Erf", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, op_parse_none, eng_ops__infer_same_f32, run_erf, 0, NULL, NULL},
    {"Gelu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_gelu, eng_ops__infer_same_f32, run_gelu, 0, NULL, NULL},
    {"Cast", 1, 1, 1, 1, ENG_OP_ELEMWISE, parse_cast, infer_cast, run_cast, 0, NULL, NULL},
    {"BitCast", 1, 1, 1, 1, ENG_OP_ELEMWISE, parse_bitcast, infer_bitcast, run_bitcast, 0, NULL, NULL},
    {"SwiGLU", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_swiglu, infer_swiglu, run_swiglu, 0, NULL, NULL},
    {"PRelu", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, op_parse_none, infer_prelu, run_prelu, 0, NULL, NULL},
    {"CastLike", 2, 2, 1, 1, 0, parse_castlike, infer_castlike, run_cast, 0, NULL, NULL},
    {"Clip", 1, 3, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_clip, eng_ops__infer_unary, eng_ops__run_unary, 0, NULL, NULL},
    {"HardSigmoid", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"HardSwish", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Sqrt", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Exp", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Reciprocal", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Log", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Sin", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Cos", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Tan", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Asin", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Acos", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Atan", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Sinh", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Cosh", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Asinh", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Acosh", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Atanh", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Floor", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Ceil", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Round", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Softplus", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Softsign", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Mish", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Elu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Selu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Celu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"ThresholdedRelu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Shrink", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Swish", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary_f32, eng_ops__run_unary, 0, NULL, NULL},
    {"Neg", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary, eng_ops__run_unary, 0, NULL, NULL},
    {"Abs", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary, eng_ops__run_unary, 0, NULL, NULL},
    {"Sign", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, eng_ops__parse_unop, eng_ops__infer_unary, eng_ops__run_unary, 0, NULL, NULL},
    {"Pow", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_pow, infer_pow, run_pow, 0, NULL, NULL},
    {"Max", 1, 1 << 20, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_max, infer_variadic, run_variadic, 0, NULL, NULL},
    {"Min", 1, 1 << 20, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_min, infer_variadic, run_variadic, 0, NULL, NULL},
    {"Sum", 1, 1 << 20, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_sum, infer_variadic, run_sum, 0, NULL, NULL},
    {"Mean", 1, 1 << 20, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_sum, infer_mean, run_mean, 0, NULL, NULL},
    {"BitShift", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_bitshift, infer_bitwise, run_bitwise, 0, NULL, NULL},
    {"BitwiseAnd", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_bitand, infer_bitwise, run_bitwise, 0, NULL, NULL},
    {"BitwiseOr", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_bitor, infer_bitwise, run_bitwise, 0, NULL, NULL},
    {"BitwiseXor", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_bitxor, infer_bitwise, run_bitwise, 0, NULL, NULL},
    {"BitwiseNot", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, op_parse_none, infer_bitwise, run_bitnot, 0, NULL, NULL},
    {"QuantizeLinear", 2, 3, 1, 1, 0, eng_ops__parse_qdq, eng_ops__infer_quantize, eng_ops__run_quantize, 0, NULL, NULL},
    {"DequantizeLinear", 2, 3, 1, 1, 0, eng_ops__parse_qdq, eng_ops__infer_dequantize, eng_ops__run_dequantize, 0, NULL, NULL},
    {ENG_QUANT_DEQUANT_OP, 2, 3, 1, 1, ENG_OP_INPLACE, eng_ops__parse_qdq, eng_ops__infer_quant_dequant, eng_ops__run_quant_dequant, 0, NULL, NULL},
    {"DynamicQuantizeLinear", 1, 1, 1, 3, 0, op_parse_none, eng_ops__infer_dynquant, eng_ops__run_dynquant, 0, NULL, NULL},
    {"MatMulInteger", 2, 4, 1, 1, 0, op_parse_none, eng_ops__infer_matmul_int, eng_ops__run_matmul_int, 0, NULL, NULL},
    {"QLinearMatMul", 8, 8, 1, 1, 0, eng_ops__parse_qlinear_matmul, eng_ops__infer_matmul_int, eng_ops__run_matmul_int, 0, NULL, NULL},
    {ENG_QLINEAR_GEMM_OP, 8, 9, 1, 1, 0, eng_ops__parse_qlinear_matmul, eng_ops__infer_matmul_int, eng_ops__run_matmul_int, 0, NULL, NULL},
    {"Equal", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_eq, infer_compare, run_compare, 0, NULL, NULL},
    {"Less", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_lt, infer_compare, run_compare, 0, NULL, NULL},
    {"LessOrEqual", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_le, infer_compare, run_compare, 0, NULL, NULL},
    {"Greater", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_gt, infer_compare, run_compare, 0, NULL, NULL},
    {"GreaterOrEqual", 2, 2, 1, 1, ENG_OP_ELEMWISE, parse_ge, infer_compare, run_compare, 0, NULL, NULL},
    {"And", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_and, infer_logic, run_logic, 0, NULL, NULL},
    {"Or", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_or, infer_logic, run_logic, 0, NULL, NULL},
    {"Xor", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_xor, infer_logic, run_logic, 0, NULL, NULL},
    {"Not", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, op_parse_none, infer_not, run_not, 0, NULL, NULL},
    {"IsNaN", 1, 1, 1, 1, ENG_OP_ELEMWISE, op_parse_none, infer_isfloat, run_isnan, 0, NULL, NULL},
    {"IsInf", 1, 1, 1, 1, ENG_OP_ELEMWISE, parse_isinf, infer_isfloat, run_isinf, 0, NULL, NULL},
    {"Where", 3, 3, 1, 1, ENG_OP_ELEMWISE, op_parse_none, infer_where, run_where, 0, NULL, NULL},
};
const size_t eng_ops__n_elem = sizeof eng_ops__elem / sizeof eng_ops__elem[0];
