// engine/ops/elem/elem_cuda.c: the elementwise op family (engine/ops/elem/elem.c) on the CUDA
// plan. Add, Sub, Mul, Div with broadcasting through kernels/elem/k_binary.cu (FP32,
// FP16) and the plan's integer kernel (every width, eng_pk_binary_int_cuda), Mod (both
// fmod modes) the same way; Relu, LeakyRelu, Sigmoid, Tanh, Erf,
// Gelu through their FP32 and FP16 kernels; Cast and CastLike through the plan's cast
// kernel (narrow float targets rounded to their precision).
// HardSigmoid, HardSwish, Sqrt, Exp, Neg, Abs, Sign, Reciprocal, and Log, the
// trigonometric and hyperbolic functions, Floor, Ceil, Round, Softplus,
// Softsign, Mish, Elu, Selu, Celu, ThresholdedRelu, Shrink, Swish through
// the k_unop kernels (kernels/elem/k_unop.cu), one launcher for FP32 and FP16 storage.
// Clip too: its bounds (attributes before opset 11, constant inputs from
// 11; ReLU6 is Clip(x, 0, 6)) are read once at init from the graph, since
// the plan's copy of a constant lives on the device. Pow and the variadic
// Max/Min through kernels/elem/k_binary.cu (FP32, FP16) and the plan's integer kernel,
// the comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual)
// through k_compare_cuda (bool out; BOOL Equal as k_logic_cuda's XNOR),
// And/Or/Xor through k_logic_cuda, Not/IsNaN/IsInf through k_boolop_cuda,
// Where through k_where_cuda (any element size). QuantizeLinear,
// DequantizeLinear and inferd.QuantDequant through elem_quant_cuda.c. All broadcast and are blind to layout (CUDA_OP_ELEMWISE:
// in NHWC regions their operands come presented in memory order).
// Registered into the CUDA plan through engine/ops/families.h.
//
// Element types: every init refuses (ERR_UNIMPLEMENTED) an input type its run
// has no kernel for when the type is known at load (eng_cuda__load_dt), so
// such a node runs on the host from the plan's creation (plan_cuda_host.h)
// rather than failing each request; the runs still check, for types only a
// run tells. Integer Clip, Neg, Abs and Sign run through k_unary_int_cuda, Pow
// of a base and exponent of different types through k_pow_mixed_cuda.
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/ops/ops_common.h"
#include "engine/cuda/plan_cuda_internal.h"
#include "engine/cuda/plan_cuda_k.h"
#include "engine/ops/elem/elem_quant_cuda.h"

// --- Add, Sub, Mul, Div (FP32, FP16, every integer type) and the activations (FP32, FP16)

// Whether binary_typed has a kernel for t: the float kernels, every integer width.
static bool arith_takes(dtype t) {
  k_elem k;
  return t == DT_FP32 || t == DT_FP16 || (t != DT_BOOL && t != DT_FP64 && eng_ops_elem_of(t, &k) == 0);
}

// t as the run sees a value of it: inside a CUDA plan FP16 values travel as FP32 or as stored FP16,
// and both have kernels wherever FP32 has.
static dtype run_dt(dtype t) { return t == DT_FP16 ? DT_FP32 : t; }

static int refuse_type(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "%s tensors have no CUDA kernel for this op", dtype_wire_name(t));
}

// The init of ops that take input 0's type through binary_typed (Add..Mod, variadic Max/Min/Sum).
static int arith_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype t = eng_cuda__load_in_dt(pl, i, 0);
  return t == DT_INVALID || arith_takes(t) ? 0 : refuse_type(t, e);
}

// The init of ops with FP32 and FP16 kernels only (Relu..Gelu).
static int float_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype t = run_dt(eng_cuda__load_in_dt(pl, i, 0));
  return t == DT_INVALID || t == DT_FP32 ? 0 : refuse_type(t, e);
}

// y = a op b over nd dims (y's, a's, b's), by the element type: the float
// kernels, or the plan's one integer kernel for every integer width.
static int binary_typed(cuda_ctx *c, dtype t, void *y, const void *a, const void *b, int nd,
                        const int64_t *yd, const int64_t *ad, const int64_t *bd, k_binop op, err *e) {
  k_elem k;
  if (t == DT_FP32) return k_binary_f32_cuda(y, a, b, nd, yd, ad, bd, op, c->stream, e);
  if (t == DT_FP16) return k_binary_f16_cuda(y, a, b, nd, yd, ad, bd, op, c->stream, e);
  if (arith_takes(t) && eng_ops_elem_of(t, &k) == 0)
    return eng_pk_binary_int_cuda(y, a, b, k, nd, yd, ad, bd, op, c->stream, e);
  return refuse_type(t, e);
}

static int run_binary(cuda_ctx *c, const eng_tensor *in, eng_tensor *out, k_binop op, err *e) {
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  if (nd == 0) {
    nd = 1;
    y[0] = ad[0] = bd[0] = 1;
  }
  return binary_typed(c, in[0].dt, out[0].data, in[0].data, in[1].data, nd, y, ad, bd, op, e);
}

#define BINARY_RUN(name, op)                                                                   \
  static int name(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,         \
                  eng_tensor *out, int n_out, err *e) {                                        \
    (void)p, (void)n_in, (void)n_out;                                                          \
    return run_binary(c, in, out, op, e);                                                      \
  }
BINARY_RUN(run_add, K_ADD)
BINARY_RUN(run_sub, K_SUB)
BINARY_RUN(run_mul, K_MUL)
BINARY_RUN(run_div, K_DIV)

// Mod: fmod=0 or 1, parsed into p->mode (K_MOD, K_FMOD) as the CPU path's
static int run_mod(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                   err *e) {
  (void)n_in, (void)n_out;
  return run_binary(c, in, out, (k_binop)p->mode, e);
}

// FP32 and FP16 launchers of one unary op.
#define UNARY_RUN(name, call32, call16)                                                         \
  static int name(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,          \
                  eng_tensor *out, int n_out, err *e) {                                         \
    (void)p, (void)n_in, (void)n_out;                                                           \
    size_t n = op_numel(&in[0]);                                                                \
    if (in[0].dt != DT_FP32 && in[0].dt != DT_FP16) /* Relu of an integer type */              \
      return refuse_type(in[0].dt, e);                                                          \
    if (in[0].dt == DT_FP16) {                                                                  \
      uint16_t *y = out[0].data;                                                                \
      const uint16_t *x = in[0].data;                                                           \
      return call16;                                                                            \
    }                                                                                           \
    float *y = out[0].data;                                                                     \
    const float *x = in[0].data;                                                                \
    return call32;                                                                              \
  }
UNARY_RUN(run_relu, k_relu_cuda(y, x, n, c->stream, e), k_relu_f16_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_leaky, k_leaky_relu_cuda(y, x, n, p->alpha, c->stream, e),
          k_leaky_relu_f16_cuda(y, x, n, p->alpha, c->stream, e))
UNARY_RUN(run_sigmoid, k_sigmoid_cuda(y, x, n, c->stream, e),
          k_sigmoid_f16_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_tanh, k_tanh_cuda(y, x, n, c->stream, e), k_tanh_f16_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_erf, k_erf_cuda(y, x, n, c->stream, e), k_erf_f16_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_gelu, k_gelu_cuda(y, x, n, p->approximate, c->stream, e),
          k_gelu_f16_cuda(y, x, n, p->approximate, c->stream, e))

// --- Cast

// Inside a CUDA plan FP16 values travel as FP32 (see run_cast), so the FP16
// element type is not one the cast kernel sees.
static int elem_of(dtype t, k_elem *k) { return t == DT_FP16 ? -1 : eng_ops_elem_of(t, k); }

// STRING (engine/ops/str/) is the CPU's alone: a Cast to or from it runs on the host.
static int cast_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  if (pl->params[i].to == DT_STRING || eng_cuda__load_in_dt(pl, i, 0) == DT_STRING)
    return err_set(e, ERR_UNIMPLEMENTED, "Cast %s STRING is not supported on CUDA",
                   pl->params[i].to == DT_STRING ? "to" : "from");
  return 0;
}

static int run_cast(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  k_elem xk, yk;
  if (elem_of(in[0].dt, &xk) != 0 || elem_of(out[0].dt, &yk) != 0)
    return err_set(e, ERR_UNIMPLEMENTED, "Cast %s -> %s not supported on CUDA",
                   dtype_wire_name(in[0].dt), dtype_wire_name(out[0].dt));
  size_t n = op_numel(&in[0]);
  if (!n) return 0;
  TRY(eng_pk_cast_cuda(out[0].data, yk, in[0].data, xk, n, c->stream, e));
  // narrow float targets travel as FP32 with the narrow type's precision
  if (p->to == DT_FP16 || p->to == DT_BF16)
    TRY(eng_pk_round_narrow_cuda(out[0].data, n, p->to == DT_BF16, c->stream, e));
  return 0;
}

// --- unary math by k_unop, Clip

// engine/ops/elem/elem.c's parse put the k_unop code in p->mode and its two
// parameters (HardSigmoid's alpha and beta) in p->alpha and p->beta.
// Integer Neg, Abs and Sign run as k_unary does them (k_unary_takes).
// Whether k_unary_int_cuda does op on t (an integer type), and its element code (k).
static bool int_takes(dtype t, k_unop op, k_elem *k) { return eng_ops_elem_of(t, k) == 0 && k_unary_takes(*k, op); }

static bool unop_takes(dtype t, k_unop op) {
  k_elem k;
  return t == DT_FP32 || t == DT_FP16 || int_takes(t, op, &k);
}

static int unop_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype t = eng_cuda__load_in_dt(pl, i, 0);
  return t == DT_INVALID || unop_takes(t, (k_unop)pl->params[i].mode) ? 0 : refuse_type(t, e);
}

static int unop_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  k_elem k;
  if (in[0].dt != DT_FP32 && in[0].dt != DT_FP16) {
    if (!int_takes(in[0].dt, (k_unop)p->mode, &k)) return refuse_type(in[0].dt, e);
    return k_unary_int_cuda(out[0].data, in[0].data, k, op_numel(&in[0]), (k_unop)p->mode, NULL, NULL, c->stream, e);
  }
  return k_unop_cuda(out[0].data, in[0].data, (size_t)eng_numel(in[0].ndims, in[0].dims),
                     in[0].dt == DT_FP16 ? K_F16 : K_F32, (k_unop)p->mode, p->alpha, p->beta,
                     c->stream, e);
}

// Clip's bounds, from the graph's constants: FP32 ones for float data (FP16
// data takes them too: the kernel widens each element), bounds of the data's
// own type for integer data (ONNX gives min, max and input one type T), kept
// as bytes of that type. The data's type is the bounds' when either is given,
// else the load's when known; a run of an integer type without bounds copies.
typedef struct clip_node {
  float lo, hi;
  dtype it;                   // the integer type the bounds are of, DT_INVALID: float bounds
  int64_t ilo[1], ihi[1];     // bytes of one it each (8 bytes hold any integer type)
  bool has_ilo, has_ihi;
} clip_node;

static int clip_refuse_type(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "Clip of %s tensors has no CUDA kernel", dtype_wire_name(t));
}

static int clip_refuse(const char *name, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "Clip on CUDA takes constant scalar bounds of the data's type ('%s' is not one)",
                 name);
}

static int clip_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  const eng_node *n = eng_graph_node(pl->g, i);
  const eng_op_params *p = &pl->params[i];
  clip_node s = {.lo = p->alpha, .hi = p->beta, .it = DT_INVALID};
  dtype xt = run_dt(eng_cuda__load_in_dt(pl, i, 0));
  k_elem k;
  if (xt != DT_INVALID && xt != DT_FP32 && !int_takes(xt, K_CLIP, &k)) return clip_refuse_type(xt, e);
  if (xt != DT_INVALID && xt != DT_FP32) s.it = xt;
  for (int b = 1; b < 3 && b < n->n_in; b++) {
    int v = n->in[b];
    if (v < 0) continue;
    const eng_value *val = eng_graph_value(pl->g, (size_t)v);
    if (!eng_cuda__is_const(pl->g, v) || val->bytes != dtype_size(val->dt) || !val->bytes)
      return clip_refuse(val->name, e);
    if (val->dt == DT_FP32 && s.it == DT_INVALID) {
      memcpy(b == 1 ? &s.lo : &s.hi, val->data, sizeof(float));
      continue;
    }
    if (val->dt == DT_FP32 || (s.it != DT_INVALID && val->dt != s.it) || !int_takes(val->dt, K_CLIP, &k))
      return clip_refuse(val->name, e);
    s.it = val->dt;
    memcpy(b == 1 ? (void *)s.ilo : (void *)s.ihi, val->data, val->bytes);
    if (b == 1) s.has_ilo = true;
    else s.has_ihi = true;
  }
  clip_node *c = malloc(sizeof *c);
  if (!c) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  *c = s;
  *state = c;
  return 0;
}

static int clip_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  const clip_node *s = c->node;
  size_t n = (size_t)eng_numel(in[0].ndims, in[0].dims);
  k_elem k;
  if (in[0].dt == DT_FP32 || in[0].dt == DT_FP16) {
    if (s->it != DT_INVALID) return err_set(e, ERR_INTERNAL, "Clip: %s bounds for %s data", dtype_wire_name(s->it),
                                            dtype_wire_name(in[0].dt));
    return k_unop_cuda(out[0].data, in[0].data, n, in[0].dt == DT_FP16 ? K_F16 : K_F32, K_CLIP, s->lo, s->hi,
                       c->stream, e);
  }
  if (!int_takes(in[0].dt, K_CLIP, &k) || (s->it != DT_INVALID && s->it != in[0].dt))
    return clip_refuse_type(in[0].dt, e);
  return k_unary_int_cuda(out[0].data, in[0].data, k, n, K_CLIP, s->has_ilo ? s->ilo : NULL,
                          s->has_ihi ? s->ihi : NULL, c->stream, e);
}

// --- Pow, Max, Min, Equal, Where: numpy broadcasting over the output's rank
// (at least 1), shorter operands left-padded with 1s, as the CPU ops do.

// The output's dims and two operands' over the output's rank (at least 1).
typedef struct bdims {
  int nd;
  int64_t y[ENG_MAX_DIMS], a[ENG_MAX_DIMS], b[ENG_MAX_DIMS];
} bdims;

static bdims bdims_of(const eng_tensor *out, const eng_tensor *a, const eng_tensor *b) {
  bdims d;
  d.nd = out->ndims > 0 ? out->ndims : 1;
  op_pad_dims(out, d.nd, d.y);
  op_pad_dims(a, d.nd, d.a);
  op_pad_dims(b, d.nd, d.b);
  return d;
}

// y = op(a, b), all three shapes broadcast to out's.
static int binop(cuda_ctx *c, void *y, const eng_tensor *a, const eng_tensor *b,
                 const eng_tensor *out, k_binop op, err *e) {
  bdims d = bdims_of(out, a, b);
  return binary_typed(c, out->dt, y, a->data, b->data, d.nd, d.y, d.a, d.b, op, e);
}

// engine/ops/elem/elem.c's run_variadic: y = op(in0, in1), then y = op(y, in_k). Every
// input broadcasts to y's final shape, so each step is a valid k_binary
// call with y as its own left operand (exactly y's buffer and shape); the
// planner gives y input 0's buffer only when their shapes are equal. One
// input: a copy (Max(x) = x). p->mode is the k_binop.
static int variadic_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                        eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  size_t bytes = (size_t)eng_numel(out[0].ndims, out[0].dims) * dtype_size(out[0].dt);
  if (n_in == 1) {
    if (bytes && out[0].data != in[0].data)
      CUDA_TRY(e, cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, c->stream));
    return 0;
  }
  for (int k = 0; k < n_in; k++)  // only Pow mixes types (pow_run)
    if (in[k].dt != out[0].dt)
      return err_set(e, ERR_UNIMPLEMENTED, "%s by a %s operand has no CUDA kernel",
                     dtype_wire_name(out[0].dt), dtype_wire_name(in[k].dt));
  for (int k = 0; k + 1 < n_in; k++)
    TRY(binop(c, out[0].data, k == 0 ? &in[0] : &out[0], &in[k + 1], &out[0], (k_binop)p->mode, e));
  return 0;
}

// Pow's base and exponent may differ in type (ONNX's T and T1; the result has the base's): that
// pair through k_pow_mixed_cuda, in double as the CPU's k_pow_mixed; FP16 and BOOL have no kernel there.
// (ka, kb: the operands' element codes.)
static bool pow_mixed_takes(dtype a, dtype b, k_elem *ka, k_elem *kb) {
  return eng_ops_elem_of(a, ka) == 0 && eng_ops_elem_of(b, kb) == 0 && k_binary_takes(*ka, K_POW) &&
         k_binary_takes(*kb, K_POW);
}

static int pow_refuse(dtype a, dtype b, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "Pow: %s by a %s exponent has no CUDA kernel", dtype_wire_name(a),
                 dtype_wire_name(b));
}

static int pow_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype a = run_dt(eng_cuda__load_in_dt(pl, i, 0)), b = run_dt(eng_cuda__load_in_dt(pl, i, 1));
  if (a == DT_INVALID || b == DT_INVALID) return 0;  // a run tells
  k_elem ka, kb;
  return (a == b ? arith_takes(a) : pow_mixed_takes(a, b, &ka, &kb)) ? 0 : pow_refuse(a, b, e);
}

// Mixed types run in FP32: the plan widens FP16 operands to FP32 copies first.
static bool pow_half(const eng_op_params *p, const eng_tensor *in, int n_in) {
  (void)p;
  return n_in < 2 || in[0].dt == in[1].dt;
}

static int pow_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e) {
  if (in[0].dt == in[1].dt) return variadic_run(c, p, in, n_in, out, n_out, e);
  k_elem ka, kb;
  if (!pow_mixed_takes(in[0].dt, in[1].dt, &ka, &kb)) return pow_refuse(in[0].dt, in[1].dt, e);
  bdims d = bdims_of(&out[0], &in[0], &in[1]);
  return k_pow_mixed_cuda(out[0].data, in[0].data, ka, in[1].data, kb, d.nd, d.y, d.a, d.b, c->stream, e);
}

// The comparisons' types: BOOL for Equal only (through k_logic_cuda), not FP64; k: a typed one's code.
static bool compare_takes(dtype t, int mode, k_elem *k) {
  return (t == DT_BOOL && mode == K_EQ) || (t != DT_BOOL && t != DT_FP64 && eng_ops_elem_of(t, k) == 0);
}

static int compare_refuse(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "comparing %s tensors has no CUDA kernel", dtype_wire_name(t));
}

// engine/ops/elem/elem.c's parse put the k_cmpop in p->mode.
static int compare_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                       eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  bdims d = bdims_of(&out[0], &in[0], &in[1]);
  k_elem et;
  if (in[0].dt == DT_BOOL && p->mode == K_EQ)
    return k_logic_cuda(out[0].data, in[0].data, in[1].data, d.nd, d.y, d.a, d.b, K_XNOR, c->stream, e);
  if (!compare_takes(in[0].dt, p->mode, &et)) return compare_refuse(in[0].dt, e);  // BOOL Equal went above
  return k_compare_cuda(out[0].data, in[0].data, in[1].data, et, d.nd, d.y, d.a, d.b, (k_cmpop)p->mode,
                        c->stream, e);
}

static int compare_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype t = eng_cuda__load_in_dt(pl, i, 0);
  k_elem k;
  return t == DT_INVALID || compare_takes(t, pl->params[i].mode, &k) ? 0 : compare_refuse(t, e);
}

// And, Or, Xor: p->mode is the k_logop.
static int logic_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  bdims d = bdims_of(&out[0], &in[0], &in[1]);
  return k_logic_cuda(out[0].data, in[0].data, in[1].data, d.nd, d.y, d.a, d.b, (k_logop)p->mode, c->stream,
                      e);
}

// Whether k_boolop_cuda (Not, IsNaN, IsInf) takes x of type t (into *k): asked at init from the load's types
// and by each run.
static bool boolop_takes(dtype t, k_elem *k) {
  if (t == DT_FP32) *k = K_F32;
  else if (t == DT_FP16) *k = K_F16;
  else if (t == DT_BOOL) *k = K_BOOL;
  else return false;
  return true;
}

static int boolop_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype t = eng_cuda__load_in_dt(pl, i, 0);
  k_elem k;
  return t == DT_INVALID || boolop_takes(t, &k) ? 0 : refuse_type(t, e);
}

static int boolop_run(cuda_ctx *c, const eng_tensor *x, eng_tensor *y, k_boolop op, int neg, int pos,
                      err *e) {
  k_elem et;
  if (!boolop_takes(x->dt, &et)) return refuse_type(x->dt, e);
  return k_boolop_cuda(y->data, x->data, (size_t)eng_numel(x->ndims, x->dims), et, op, neg, pos, c->stream, e);
}

static int not_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  return boolop_run(c, &in[0], &out[0], K_NOT, 0, 0, e);
}

static int isnan_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  return boolop_run(c, &in[0], &out[0], K_ISNAN, 0, 0, e);
}

static int isinf_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  return boolop_run(c, &in[0], &out[0], K_ISINF, p->detect_neg, p->detect_pos, e);
}

// Where moves X's or Y's elements as they are: any type, FP16 included.
static int where_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (in[1].dt != in[2].dt || out[0].dt != in[1].dt)
    return err_set(e, ERR_INTERNAL, "Where: X is %s, Y %s, the output %s", dtype_wire_name(in[1].dt),
                   dtype_wire_name(in[2].dt), dtype_wire_name(out[0].dt));
  bdims d = bdims_of(&out[0], &in[1], &in[2]);
  int64_t cd[ENG_MAX_DIMS];
  op_pad_dims(&in[0], d.nd, cd);
  return k_where_cuda(out[0].data, in[0].data, in[1].data, in[2].data, dtype_size(out[0].dt), d.nd, d.y,
                      cd, d.a, d.b, c->stream, e);
}

#define UNOP(name) \
  {.op_type = name, .run = unop_run, .half = eng_cuda__half_always, .flags = CUDA_OP_ELEMWISE, .init = unop_init}

// An elementwise op whose init checks the element types the load knows.
#define TYPED(name, fn, ini) \
  {.op_type = name, .run = fn, .half = eng_cuda__half_always, .flags = CUDA_OP_ELEMWISE, .init = ini}

// FP16 operands run as they are (the kernels widen each to float; Where,
// the comparisons, IsNaN and IsInf read them as they are stored).
const cuda_op eng_cuda__elem_ops[] = {
    TYPED("Add", run_add, arith_init),
    TYPED("Sub", run_sub, arith_init),
    TYPED("Mul", run_mul, arith_init),
    TYPED("Div", run_div, arith_init),
    TYPED("Relu", run_relu, float_init),
    TYPED("LeakyRelu", run_leaky, float_init),
    TYPED("Sigmoid", run_sigmoid, float_init),
    TYPED("Tanh", run_tanh, float_init),
    TYPED("Erf", run_erf, float_init),
    TYPED("Gelu", run_gelu, float_init),
    TYPED("Mod", run_mod, arith_init),
    {.op_type = "Cast", .run = run_cast, .half = NULL, .flags = CUDA_OP_ELEMWISE, .init = cast_init},
    // CastLike: Cast to input 1's type (parse_castlike set p->to as Cast's parse does; out[0] has the type)
    {.op_type = "CastLike", .run = run_cast, .half = NULL, .flags = CUDA_OP_ELEMWISE, .init = cast_init},
    UNOP("HardSigmoid"),
    UNOP("HardSwish"),
    UNOP("Sqrt"),
    UNOP("Exp"),
    UNOP("Neg"),
    UNOP("Abs"),
    UNOP("Sign"),
    UNOP("Reciprocal"),
    UNOP("Log"),
    UNOP("Sin"),
    UNOP("Cos"),
    UNOP("Tan"),
    UNOP("Asin"),
    UNOP("Acos"),
    UNOP("Atan"),
    UNOP("Sinh"),
    UNOP("Cosh"),
    UNOP("Asinh"),
    UNOP("Acosh"),
    UNOP("Atanh"),
    UNOP("Floor"),
    UNOP("Ceil"),
    UNOP("Round"),
    UNOP("Softplus"),
    UNOP("Softsign"),
    UNOP("Mish"),
    UNOP("Elu"),
    UNOP("Selu"),
    UNOP("Celu"),
    UNOP("ThresholdedRelu"),
    UNOP("Shrink"),
    UNOP("Swish"),
    {.op_type = "Clip",
     .run = clip_run,
     .half = eng_cuda__half_always,
     .flags = CUDA_OP_ELEMWISE,
     .init = clip_init,
     .destroy = free},
    {.op_type = "Pow", .run = pow_run, .half = pow_half, .flags = CUDA_OP_ELEMWISE, .init = pow_init},
    TYPED("Max", variadic_run, arith_init),
    TYPED("Sum", variadic_run, arith_init),
    TYPED("Min", variadic_run, arith_init),
#define ELEM(name, fn) {.op_type = name, .run = fn, .half = eng_cuda__half_always, .flags = CUDA_OP_ELEMWISE}
#define COMPARE(name) TYPED(name, compare_run, compare_init)
    COMPARE("Equal"),
    COMPARE("Less"),
    COMPARE("LessOrEqual"),
    COMPARE("Greater"),
    COMPARE("GreaterOrEqual"),
#undef COMPARE
    ELEM("And", logic_run),
    ELEM("Or", logic_run),
    ELEM("Xor", logic_run),
    TYPED("Not", not_run, boolop_init),
    TYPED("IsNaN", isnan_run, boolop_init),
    TYPED("IsInf", isinf_run, boolop_init),
#undef TYPED
#undef ELEM
    {.op_type = "Where", .run = where_run, .half = eng_cuda__half_always, .flags = CUDA_OP_ELEMWISE},
    // linear quantization (elem_quant_cuda.c): constant scales and zero points, read at init
    {.op_type = "QuantizeLinear",
     .run = eng_cuda__quantize_run,
     .half = eng_cuda__half_always,
     .init = eng_cuda__quant_init,
     .destroy = eng_cuda__quant_destroy},
    {.op_type = "DequantizeLinear",
     .run = eng_cuda__dequantize_run,
     .half = eng_cuda__half_always,
     .init = eng_cuda__quant_init,
     .destroy = eng_cuda__quant_destroy},
    {.op_type = ENG_QUANT_DEQUANT_OP,
     .run = eng_cuda__quant_dequant_run,
     .half = eng_cuda__half_always,
     .flags = CUDA_OP_NHWC,
     .init = eng_cuda__quant_init,
     .destroy = eng_cuda__quant_destroy,
     .nhwc = eng_cuda__quant_dequant_nhwc},
};
const size_t eng_cuda__n_elem_ops = sizeof eng_cuda__elem_ops / sizeof eng_cuda__elem_ops[0];
