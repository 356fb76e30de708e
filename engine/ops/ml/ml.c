// engine/ops/ml/ml.c: the ai.onnx.ml family's table (registered under
// ENG_ML_PREFIX, CPU only: engine/ops/registry.c), what its files share
// (ml.h), and the small ops: Binarizer, Scaler, Normalizer and
// ArrayFeatureExtractor. The tree ensembles are in ml_tree.c, the linear
// models in ml_linear.c, LabelEncoder in ml_label.c.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ml/ml.h"
#include "engine/ops/ops_common.h"

// --- shared

int eng_ml__rows(const eng_tensor *x, int64_t *rows, int64_t *feats, err *e) {
  if (x->dt != DT_FP32 && x->dt != DT_INT64 && x->dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "X of type %s: expected a float, INT64 or INT32 tensor",
                   dtype_wire_name(x->dt));
  if (x->ndims == 1) *rows = 1, *feats = x->dims[0];
  else if (x->ndims == 2) *rows = x->dims[0], *feats = x->dims[1];
  else return err_set(e, ERR_INVALID_ARGUMENT, "X has rank %d, expected [N, features] or [features]", x->ndims);
  return 0;
}

int eng_ml__floats(const eng_tensor *x, const float **out, int *owned, err *e) {
  *owned = 0;
  if (x->dt == DT_FP32) return *out = x->data, 0;
  size_t n = op_numel(x);
  float *f = malloc((n ? n : 1) * sizeof *f);
  if (!f) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < n; i++)
    f[i] = x->dt == DT_INT64 ? (float)((const int64_t *)x->data)[i] : (float)((const int32_t *)x->data)[i];
  *out = f;
  *owned = 1;
  return 0;
}

int eng_ml__attr_floats(const eng_node *n, const char *name, const char *tname, float **out, size_t *cnt, err *e) {
  *out = NULL, *cnt = 0;
  const eng_attr *a = eng_node_attr(n, name);
  const float *src = NULL;
  size_t k = 0;
  if (a && a->n_floats) {
    src = a->floats, k = a->n_floats;
  } else {
    const eng_attr *t = tname ? eng_node_attr(n, tname) : NULL;
    if (!t) t = a;  // opset 5 names its tensors plainly
    if (t && t->t) {
      if (t->t->dt != DT_FP32)
        return err_set(e, ERR_INVALID_ARGUMENT, "attribute '%s' is a %s tensor, expected float or double", t->name,
                       dtype_wire_name(t->t->dt));
      src = t->t->data, k = (size_t)eng_numel(t->t->ndims, t->t->dims);
    }
  }
  if (!k) return 0;
  *out = malloc(k * sizeof **out);
  if (!*out) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(*out, src, k * sizeof **out);
  *cnt = k;
  return 0;
}

const int64_t *eng_ml__attr_ints(const eng_node *n, const char *name, size_t *cnt) {
  const eng_attr *a = eng_node_attr(n, name);
  *cnt = a ? a->n_ints : 0;
  return a ? a->ints : NULL;
}

int eng_ml__post(const eng_node *n, k_ml_post *out, err *e) {
  const eng_attr *a = eng_node_attr(n, "post_transform");
  *out = K_ML_NONE;
  if (!a) return 0;
  if (a->type == 2 /* INT: TreeEnsemble */) {
    if (a->i < 0 || a->i > 4) return err_set(e, ERR_INVALID_ARGUMENT, "post_transform %lld is not 0..4", (long long)a->i);
    *out = (k_ml_post)a->i;
    return 0;
  }
  static const char *const names[] = {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT", NULL};
  int v;
  TRY(eng_ops__enum(a->s, names, "post_transform", &v, e));
  *out = (k_ml_post)v;
  return 0;
}

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
    // onnxruntime leaves a row of zeros (or a non-positive MAX) as it is
    if (p->mode == 0 && d <= 0) continue;
    if (p->mode != 0 && d == 0) continue;
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
    {ML("TreeEnsemble"), 1, 1, 1, 1, 0, eng_ml__parse_tree_te5, eng_ml__infer_tree, eng_ml__run_tree, 0,
     eng_ml__run_tree_state, eng_ml__tree_destroy},
};
const size_t eng_ops__n_ml = sizeof eng_ops__ml / sizeof eng_ops__ml[0];
