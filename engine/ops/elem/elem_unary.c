// engine/ops/elem/elem_unary.c: the elementwise family's unary math and
// activations by k_unop (kernels/elem/k_unary.c): Clip, Sqrt, Exp, Neg, Abs,
// Sign, Reciprocal, HardSigmoid, HardSwish, Log, the trigonometric and
// hyperbolic functions, Floor, Ceil, Round, Softplus, Softsign, Mish, Elu,
// Selu, Celu, ThresholdedRelu, Shrink, Swish: one parse from a table of
// their codes and attributes, one shape rule, one run. elem.c's table lists
// them; their CUDA path is elem_cuda.c's.
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/cpu/par.h"
#include "engine/ops/elem/elem_internal.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// The kernels' name for a plan's element type, or an error naming the op's type.
static int kelem(dtype t, k_elem *k, err *e) {
  if (t == DT_FP16 || eng_ops_elem_of(t, k) != 0)  // FP16 never reaches a CPU kernel
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(t));
  return 0;
}

// FP32 takes every k_unop (k_unary_f32); integers what k_unary_takes says.
int eng_ops__infer_unary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_out;
  k_elem k = (k_elem)0;  // set by kelem() before use
  TRY(kelem(in[0].dt, &k, e));
  if (k != K_F32 && !k_unary_takes(k, (k_unop)p->mode))
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s",
                   dtype_wire_name(in[0].dt));
  for (int k = 1; k < n_in; k++) {  // Clip's bounds: scalars of the input's type
    if (in[k].dt == DT_INVALID) continue;
    if (in[k].dt != in[0].dt || op_numel(&in[k]) != 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s must be a %s scalar", k == 1 ? "min" : "max",
                     dtype_wire_name(in[0].dt));
  }
  op_set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
  return 0;
}

int eng_ops__infer_unary_f32(const eng_op_params *p, const eng_tensor *in, int n_in,
                           eng_tensor *out, int n_out, err *e) {
  TRY(eng_ops__need_f32(&in[0], "input", e));
  return eng_ops__infer_unary(p, in, n_in, out, n_out, e);
}

// FP32 k_unary_f32 on parts of x split over threads (par.h); elementwise,
// so the result does not depend on the split.
typedef struct unary_job {
  float *y;
  const float *x;
  k_unop op;
  float a, b;
} unary_job;

static void unary_part(void *ctx, size_t lo, size_t hi) {
  const unary_job *j = ctx;
  k_unary_f32(j->y + lo, j->x + lo, hi - lo, j->op, j->a, j->b);
}

// p->mode holds the k_unop (set by the parse functions below); alpha/beta
// its parameters, or Clip's attribute bounds before opset 11.
int eng_ops__run_unary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_out;
  size_t n = op_numel(&in[0]);
  if (in[0].dt != DT_FP32) {  // an integer type infer_unary checked
    k_elem k = (k_elem)0;  // set by kelem() before use
    TRY(kelem(in[0].dt, &k, e));
    const void *lo = op_given(in, n_in, 1) ? in[1].data : NULL;
    const void *hi = op_given(in, n_in, 2) ? in[2].data : NULL;
    if (k_unary(out[0].data, in[0].data, k, n, (k_unop)p->mode, lo, hi) != 0)
      return err_set(e, ERR_INTERNAL, "no %s kernel for this op", dtype_wire_name(in[0].dt));
    return 0;
  }
  unary_job j = {out[0].data, in[0].data, (k_unop)p->mode, p->alpha, p->beta};
  if (op_given(in, n_in, 1)) j.a = *(const float *)in[1].data;
  if (op_given(in, n_in, 2)) j.b = *(const float *)in[2].data;
  eng_par_for(n, ENG_PAR_GRAIN, unary_part, &j);
  return 0;
}

// Every op of this file but Clip: its k_unop and the attributes of its two parameters.
typedef struct unop_def {
  const char *op_type;
  k_unop op;
  const char *a_name, *b_name;  // NULL: unused
  float a_def, b_def;
} unop_def;

static const unop_def unops[] = {
    {"Sqrt", K_SQRT, NULL, NULL, 0, 0},
    {"Exp", K_EXP, NULL, NULL, 0, 0},
    {"Neg", K_NEG, NULL, NULL, 0, 0},
    {"Abs", K_ABS, NULL, NULL, 0, 0},
    {"Sign", K_SIGN, NULL, NULL, 0, 0},
    {"Reciprocal", K_RECIP, NULL, NULL, 0, 0},
    {"HardSwish", K_HARD_SWISH, NULL, NULL, 0, 0},
    {"HardSigmoid", K_HARD_SIGMOID, "alpha", "beta", 0.2f, 0.5f},
    {"Log", K_LOG, NULL, NULL, 0, 0},
    {"Sin", K_SIN, NULL, NULL, 0, 0},
    {"Cos", K_COS, NULL, NULL, 0, 0},
    {"Tan", K_TAN, NULL, NULL, 0, 0},
    {"Asin", K_ASIN, NULL, NULL, 0, 0},
    {"Acos", K_ACOS, NULL, NULL, 0, 0},
    {"Atan", K_ATAN, NULL, NULL, 0, 0},
    {"Sinh", K_SINH, NULL, NULL, 0, 0},
    {"Cosh", K_COSH, NULL, NULL, 0, 0},
    {"Asinh", K_ASINH, NULL, NULL, 0, 0},
    {"Acosh", K_ACOSH, NULL, NULL, 0, 0},
    {"Atanh", K_ATANH, NULL, NULL, 0, 0},
    {"Floor", K_FLOOR, NULL, NULL, 0, 0},
    {"Ceil", K_CEIL, NULL, NULL, 0, 0},
    {"Round", K_ROUND, NULL, NULL, 0, 0},
    {"Softplus", K_SOFTPLUS, NULL, NULL, 0, 0},
    {"Softsign", K_SOFTSIGN, NULL, NULL, 0, 0},
    {"Mish", K_MISH, NULL, NULL, 0, 0},
    {"Elu", K_ELU, "alpha", NULL, 1.0f, 0},
    {"Selu", K_SELU, "alpha", "gamma", 1.67326319217681884765625f, 1.05070102214813232421875f},
    {"Celu", K_CELU, "alpha", NULL, 1.0f, 0},
    {"ThresholdedRelu", K_THRESHOLDED_RELU, "alpha", NULL, 1.0f, 0},
    {"Shrink", K_SHRINK, "lambd", "bias", 0.5f, 0.0f},
    {"Swish", K_SWISH, "alpha", NULL, 1.0f, 0},
};

int eng_ops__parse_unop(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  for (size_t i = 0; i < sizeof unops / sizeof unops[0]; i++) {
    const unop_def *u = &unops[i];
    if (strcmp(u->op_type, n->op_type) != 0) continue;
    p->mode = u->op;
    p->alpha = u->a_name ? op_attr_float(n, u->a_name, u->a_def) : 0.0f;
    p->beta = u->b_name ? op_attr_float(n, u->b_name, u->b_def) : 0.0f;
    if (u->op == K_CELU && p->alpha == 0.0f) return err_set(e, ERR_INVALID_ARGUMENT, "Celu's alpha must not be 0");
    return 0;
  }
  return err_set(e, ERR_INTERNAL, "no k_unop for op '%s'", n->op_type);
}

// Clip: bounds are attributes before opset 11, optional inputs from 11
// (ReLU6 is Clip(x, 0, 6)); absent bounds do not clip.
int eng_ops__parse_clip(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g;
  p->mode = K_CLIP;
  if (opset < 11) {
    if (n->n_in > 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "Clip before opset 11 takes 1 input, got %d",
                     n->n_in);
    p->alpha = op_attr_float(n, "min", -FLT_MAX);
    p->beta = op_attr_float(n, "max", FLT_MAX);
  } else {
    p->alpha = -INFINITY;
    p->beta = INFINITY;
  }
  return 0;
}

