// engine/ops/ml/ml.c: the ai.onnx.ml family's table (op types under
// ENG_ML_PREFIX; CPU only, its CUDA table ml_cuda.c is empty) and the small ops: Binarizer, Scaler, Normalizer and
// ArrayFeatureExtractor. The tree ensembles are in ml_tree.c, the linear
// models in ml_linear.c, LabelEncoder and OneHotEncoder in ml_label.c, the SVMs in ml_svm.c, what they share in
// ml_common.c.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ml/ml.h"
#include "engine/ops/ops_common.h"

static int numeric_x(const eng_tensor *x, err *e) {
  if (x->dt != DT_FP32 && x->dt != DT_INT64 && x->dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "X of type %s: expected a float, INT64 or INT32 tensor",
                   dtype_wire_name(x->dt));
  return 0;
}

static double load_x(const eng_tensor *x, size_t i) {
  if (x->dt == DT_FP32) return ((const float *)x->data)[i];
  if (x->dt == DT_INT64) return (double)((const int64_t *)x->data)[i];
  return ((const int32_t *)x->data)[i];
}

// --- Binarizer: 1 where X > threshold, else 0, in X's type

static int parse_binarizer(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->alpha = op_attr_float(n, "threshold", 0.0f);
  return 0;
}

static int infer_same(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(numeric_x(&in[0], e));
  op_set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
  return 0;
}

static void store(eng_tensor *y, size_t i, double v) {
  if (y->dt == DT_FP32) ((float *)y->data)[i] = (float)v;
  else if (y->dt == DT_INT64) ((int64_t *)y->data)[i] = (int64_t)v;
  else ((int32_t *)y->data)[i] = (int32_t)v;
}

static int run_binarizer(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t n = op_numel(&in[0]);
  for (size_t i = 0; i < n; i++) store(&out[0], i, load_x(&in[0], i) > (double)p->alpha ? 1.0 : 0.0);
  return 0;
}

// --- Scaler: (X - offset) * scale along the last axis, as floats

static int parse_scaler(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_attr *sc = eng_node_attr(n, "scale"), *of = eng_node_attr(n, "offset");
  size_t ns = sc ? sc->n_floats : 0, no = of ? of->n_floats : 0;
  if (ns > 1 && no > 1 && ns != no)
    return err_set(e, ERR_INVALID_ARGUMENT, "scale has %zu entries and offset %zu", ns, no);
  p->node = n;
  p->n_ints = (int)(ns > no ? ns : no);
  return 0;
}

static int infer_float_same(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e) {
  (void)n_in, (void)n_out;
  TRY(numeric_x(&in[0], e));
  if (in[0].ndims < 1) return err_set(e, ERR_INVALID_ARGUMENT, "X is a scalar, expected [N, C] or [C]");
  int64_t c = in[0].dims[in[0].ndims - 1];
  if (p->n_ints > 1 && p->n_ints != c)
    return err_set(e, ERR_INVALID_ARGUMENT, "scale/offset have %d entries, X has %lld columns", p->n_ints, (long long)c);
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

static int run_scaler(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  const eng_attr *sc = eng_node_attr(p->node, "scale"), *of = eng_node_attr(p->node, "offset");
  size_t ns = sc ? sc->n_floats : 0, no = of ? of->n_floats : 0, n = op_numel(&in[0]);
  size_t c = (size_t)in[0].dims[in[0].ndims - 1];
  float *y = out[0].data;
  for (size_t i = 0; i < n; i++) {
    size_t j = c ? i % c : 0;
    float o = no ? of->floats[no == 1 ? 0 : j] : 0.0f, s = ns ? sc->floats[ns == 1 ? 0 : j] : 1.0f;
    y[i] = ((float)load_x(&in[0], i) - o) * s;
  }
  return 0;
}

// --- Normalizer: each row (the last axis) divided by its MAX, L1 or L2 norm

static int parse_normalizer(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const names[] = {"MAX", "L1", "L2", NULL};
  return eng_ops__enum(op_attr_str(n, "norm", "MAX"), names, "norm", &p->mode, e);
}

static int run_normalizer(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t c = (size_t)in[0].dims[in[0].ndims - 1], n = op_numel(&in[0]);
  float *y = out[0].data;
  for (size_t r = 0; c && r < n / c; r++) {
    float *yr = y + r * c;
    for (size_t j = 0; j < c; j++) yr[j] = (float)load_x(&in[0], r * c + j);
    float d = p->mode == 0 ? -INFINITY : 0.0f;
    for (size_t j = 0; j < c; j++) {
      if (p->mode == 0) d = yr[j] > d ? yr[j] : d;
      else if (p->mode == 1) d += fabsf(yr[j]);
      else d += yr[j] * yr[j];
    }
    if (p->mode == 2) d = sqrtf(d);
    // onnxruntime divides by a negative MAX too, and leaves a zero norm's row as it is
    if (d == 0) continue;
    for (size_t j = 0; j < c; j++) yr[j] /= d;
  }
  return 0;
}

// --- ArrayFeatureExtractor: X's last axis gathered at the INT64 indices Y

static int infer_afe(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (in[1].dt != DT_INT64) return err_set(e, ERR_INVALID_ARGUMENT, "Y must be INT64, got %s", dtype_wire_name(in[1].dt));
  if (dtype_size(in[0].dt) == 0) return err_set(e, ERR_INVALID_ARGUMENT, "X of type %s is not supported", dtype_wire_name(in[0].dt));
  if (in[0].ndims < 1) return err_set(e, ERR_INVALID_ARGUMENT, "X is a scalar");
  int64_t k = (int64_t)op_numel(&in[1]);
  if (k < 1) return err_set(e, ERR_INVALID_ARGUMENT, "Y holds no index");
  if (in[0].ndims == 1) {
    int64_t d[2] = {1, k};
    op_set_out(&out[0], in[0].dt, 2, d);
  } else {
    op_set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
    out[0].dims[in[0].ndims - 1] = k;
  }
  return 0;
}

static int run_afe(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  size_t esz = dtype_size(in[0].dt), c = (size_t)in[0].dims[in[0].ndims - 1], k = op_numel(&in[1]);
  size_t rows = c ? op_numel(&in[0]) / c : 0;
  const int64_t *idx = in[1].data;
  for (size_t j = 0; j < k; j++)
    if (idx[j] < 0 || (size_t)idx[j] >= c)
      return err_set(e, ERR_INVALID_ARGUMENT, "index %lld is outside X's last axis (0..%zu)", (long long)idx[j], c - 1);
  const unsigned char *x = in[0].data;
  unsigned char *y = out[0].data;
  for (size_t r = 0; r < rows; r++)
    for (size_t j = 0; j < k; j++) memcpy(y + (r * k + j) * esz, x + (r * c + (size_t)idx[j]) * esz, esz);
  return 0;
}

// --- the table

#define ML(name) ENG_ML_PREFIX name

const eng_op_def eng_ops__ml[] = {
    {ML("Binarizer"), 1, 1, 1, 1, ENG_OP_ELEMWISE, parse_binarizer, infer_same, run_binarizer, 0, NULL, NULL},
    {ML("Scaler"), 1, 1, 1, 1, 0, parse_scaler, infer_float_same, run_scaler, 0, NULL, NULL},
    {ML("Normalizer"), 1, 1, 1, 1, 0, parse_normalizer, infer_float_same, run_normalizer, 0, NULL, NULL},
    {ML("ArrayFeatureExtractor"), 2, 2, 1, 1, 0, op_parse_none, infer_afe, run_afe, 0, NULL, NULL},
    {ML("LinearRegressor"), 1, 1, 1, 1, 0, eng_ml__parse_linear, eng_ml__infer_linear, eng_ml__run_linear, 0, NULL,
     NULL},
    {ML("LinearClassifier"), 1, 1, 1, 2, 0, eng_ml__parse_linear, eng_ml__infer_linear, eng_ml__run_linear, 0, NULL,
     NULL},
    {ML("TreeEnsembleRegressor"), 1, 1, 1, 1, 0, eng_ml__parse_tree_reg, eng_ml__infer_tree, eng_ml__run_tree, 0,
     eng_ml__run_tree_state, eng_ml__tree_destroy},
    {ML("TreeEnsembleClassifier"), 1, 1, 1, 2, 0, eng_ml__parse_tree_cls, eng_ml__infer_tree, eng_ml__run_tree, 0,
     eng_ml__run_tree_state, eng_ml__tree_destroy},
    {ML("LabelEncoder"), 1, 1, 1, 1, ENG_OP_ELEMWISE, eng_ml__parse_label, eng_ml__infer_label, eng_ml__run_label,
     0, NULL, NULL},
    {ML("OneHotEncoder"), 1, 1, 1, 1, 0, eng_ml__parse_onehot, eng_ml__infer_onehot, eng_ml__run_onehot, 0, NULL,
     NULL},
    {ML("SVMRegressor"), 1, 1, 1, 1, 0, eng_ml__parse_svm, eng_ml__infer_svm, eng_ml__run_svm, 0, NULL, NULL},
    {ML("SVMClassifier"), 1, 1, 1, 2, 0, eng_ml__parse_svm, eng_ml__infer_svm, eng_ml__run_svm, 0, NULL, NULL},
    {ML("TreeEnsemble"), 1, 1, 1, 1, 0, eng_ml__parse_tree_te5, eng_ml__infer_tree, eng_ml__run_tree, 0,
     eng_ml__run_tree_state, eng_ml__tree_destroy},
};
const size_t eng_ops__n_ml = sizeof eng_ops__ml / sizeof eng_ops__ml[0];
