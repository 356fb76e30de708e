// engine/ops/ml/ml.h: what the ai.onnx.ml family's files share (ml.c: the
// table and the small ops; ml_tree.c: the tree ensembles; ml_linear.c: the
// linear models; ml_label.c: LabelEncoder; ml_common.c: the helpers below). The ops are registered under ENG_ML_PREFIX
// (engine/graph/graph.h), run on the CPU only, and read X as rows of
// features in any of FP32 (every float width inside a plan), INT64, INT32.
#ifndef INFERD_ENGINE_OPS_ML_H
#define INFERD_ENGINE_OPS_ML_H

#include <stddef.h>
#include <stdint.h>

#include "engine/ops/ops.h"
#include "kernels/ml/k_ml.h"

// X's shape as rows of features: [N, F] or [F] (one row). Error for other ranks or types.
int eng_ml__rows(const eng_tensor *x, int64_t *rows, int64_t *feats, err *e);
// X's elements as floats into a buffer the caller frees (X's own when FP32: *owned 0).
int eng_ml__floats(const eng_tensor *x, const float **out, int *owned, err *e);

// An attribute's floats from its list or its TENSOR form (`tname`, may be
// NULL): a malloc'ed copy in *out (NULL when absent, *n 0).
int eng_ml__attr_floats(const eng_node *n, const char *name, const char *tname, float **out, size_t *cnt, err *e);
// An INTS attribute (its pointer and count; NULL, 0 when absent).
const int64_t *eng_ml__attr_ints(const eng_node *n, const char *name, size_t *cnt);
// post_transform's name (legacy ops) or number (TreeEnsemble) as k_ml_post.
int eng_ml__post(const eng_node *n, k_ml_post *out, err *e);

// A classifier's class labels: classlabels_strings (a STRING label output)
// or the INT64 list called ints_name; pointers into the node's attributes.
typedef struct eng_ml_labels {
  const int64_t *ints;
  char *const *strs;
  size_t n;
} eng_ml_labels;
int eng_ml__labels(const eng_node *n, const char *ints_name, eng_ml_labels *l, err *e);
// The label output's type for them.
static inline dtype eng_ml__label_dt(const eng_ml_labels *l) { return l->strs ? DT_STRING : DT_INT64; }
// Label element i of y: class k's label, or (onnxruntime's fallbacks) the
// value v, written as "1"/"0" for string labels.
void eng_ml__put_class(const eng_ml_labels *l, eng_tensor *y, size_t i, size_t k);
void eng_ml__put_value(const eng_ml_labels *l, eng_tensor *y, size_t i, int64_t v);

// The tree ops (ml_tree.c), for ml.c's table: one parse per form (the
// regressor, the classifier, opset 5's TreeEnsemble), one shape rule and run.
int eng_ml__parse_tree_reg(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ml__parse_tree_cls(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ml__parse_tree_te5(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ml__infer_tree(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ml__run_tree(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ml__run_tree_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e);
void eng_ml__tree_destroy(void *s);

// The linear models (ml_linear.c): LinearRegressor and LinearClassifier.
int eng_ml__parse_linear(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ml__infer_linear(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ml__run_linear(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

// LabelEncoder and OneHotEncoder (ml_label.c), on strings (k_str views), integers and floats.
int eng_ml__parse_label(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ml__infer_label(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ml__run_label(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ml__parse_onehot(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ml__infer_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ml__run_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

// SVMRegressor and SVMClassifier (ml_svm.c).
int eng_ml__parse_svm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ml__infer_svm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ml__run_svm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

#endif
