// engine/ops/ml/ml_common.c: what the ai.onnx.ml family's files share
// (ml.h): X read as rows of features, and attributes in their list or
// tensor forms, post_transform by name or number.
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ml/ml.h"
#include "engine/ops/ops_common.h"
#include "kernels/str/k_str.h"

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


int eng_ml__labels(const eng_node *n, const char *ints_name, eng_ml_labels *l, err *e) {
  memset(l, 0, sizeof *l);
  const eng_attr *s = eng_node_attr(n, "classlabels_strings");
  if (s && s->n_strings) {
    l->strs = s->strings;
    l->n = s->n_strings;
    return 0;
  }
  l->ints = eng_ml__attr_ints(n, ints_name, &l->n);
  if (!l->n) return err_set(e, ERR_INVALID_ARGUMENT, "%s (or classlabels_strings) is missing or empty", ints_name);
  return 0;
}

// A string label: inline when it fits, else a view of the node's attribute,
// which the graph keeps while any plan of it runs (kernels/str/k_str.h).
static void put_str(k_str *y, const char *s) {
  size_t n = strlen(s);
  memset(y, 0, sizeof *y);
  y->n = n;
  if (n <= K_STR_INLINE) memcpy(y->u.in, s, n);
  else y->u.ptr = (const uint8_t *)s;
}

void eng_ml__put_class(const eng_ml_labels *l, eng_tensor *y, size_t i, size_t k) {
  if (l->strs) put_str(&((k_str *)y->data)[i], l->strs[k]);
  else ((int64_t *)y->data)[i] = l->ints[k];
}

void eng_ml__put_value(const eng_ml_labels *l, eng_tensor *y, size_t i, int64_t v) {
  if (l->strs) put_str(&((k_str *)y->data)[i], v ? "1" : "0");  // onnxruntime's string fallbacks
  else ((int64_t *)y->data)[i] = v;
}
