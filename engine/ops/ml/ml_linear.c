// engine/ops/ml/ml_linear.c: LinearRegressor and LinearClassifier: scores
// X W^T + b, the classifier's label the best score's class (or, with one
// score, its sign), and post_transform as onnxruntime applies it.
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ml/ml.h"
#include "engine/ops/ops_common.h"

enum { LIN_REG = 0, LIN_CLS = 1 };

// p->mode: LIN_REG or LIN_CLS; p->n_ints: the targets (classes' scores);
// p->node: the node, whose coefficients, intercepts and labels run reads.
int eng_ml__parse_linear(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  int cls = strstr(n->op_type, "Classifier") != NULL;
  const eng_attr *co = eng_node_attr(n, "coefficients"), *in = eng_node_attr(n, "intercepts");
  size_t nc = co ? co->n_floats : 0, ni = in ? in->n_floats : 0, nl = 0;
  if (!nc) return err_set(e, ERR_INVALID_ARGUMENT, "coefficients is missing or empty");
  int64_t targets;
  if (cls) {
    eng_ml_labels l;
    TRY(eng_ml__labels(n, "classlabels_ints", &l, e));
    nl = l.n;
    p->to = eng_ml__label_dt(&l);
    targets = ni ? (int64_t)ni : (int64_t)nl;  // onnxruntime counts the intercepts
    if (targets != (int64_t)nl && !(targets == 1 && nl == 2))
      return err_set(e, ERR_INVALID_ARGUMENT, "%lld scores for %zu class labels", (long long)targets, nl);
  } else {
    targets = op_attr_int(n, "targets", 1);
    if (targets < 1) return err_set(e, ERR_INVALID_ARGUMENT, "targets %lld is not positive", (long long)targets);
    if (ni && ni != (size_t)targets)
      return err_set(e, ERR_INVALID_ARGUMENT, "intercepts has %zu entries, targets is %lld", ni, (long long)targets);
  }
  if (nc % (size_t)targets)
    return err_set(e, ERR_INVALID_ARGUMENT, "coefficients has %zu entries, not a multiple of the %lld targets", nc,
                   (long long)targets);
  k_ml_post post;
  TRY(eng_ml__post(n, &post, e));
  p->node = n;
  p->mode = cls;
  p->n_ints = (int)targets;
  p->axis = (int64_t)(nc / (size_t)targets);  // features
  p->nearest = (int)post;
  return 0;
}

int eng_ml__infer_linear(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  int64_t rows, feats;
  TRY(eng_ml__rows(&in[0], &rows, &feats, e));
  if (feats != p->axis)
    return err_set(e, ERR_INVALID_ARGUMENT, "X has %lld features, the coefficients %lld", (long long)feats,
                   (long long)p->axis);
  if (p->mode == LIN_REG) {
    int64_t d[2] = {rows, p->n_ints};
    op_set_out(&out[0], DT_FP32, 2, d);
    return 0;
  }
  int64_t d[2] = {rows, p->n_ints == 1 ? 2 : p->n_ints};
  op_set_out(&out[0], p->to, 1, d);
  if (n_out > 1 && out[1].dt != DT_INVALID) op_set_out(&out[1], DT_FP32, 2, d);
  return 0;
}

int eng_ml__run_linear(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  int64_t rows, feats;
  TRY(eng_ml__rows(&in[0], &rows, &feats, e));
  const float *x;
  int owned;
  TRY(eng_ml__floats(&in[0], &x, &owned, e));
  const eng_attr *co = eng_node_attr(p->node, "coefficients"), *ic = eng_node_attr(p->node, "intercepts");
  size_t nt = (size_t)p->n_ints, nf = (size_t)feats;
  k_ml_post post = (k_ml_post)p->nearest;
  float s1[1];
  float *scores = p->mode == LIN_REG ? out[0].data : malloc(nt * sizeof *scores);
  if (!scores) {
    if (owned) free((void *)x);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  eng_ml_labels l = {0};
  int rc = p->mode == LIN_CLS ? eng_ml__labels(p->node, "classlabels_ints", &l, e) : 0;
  if (rc) {
    free(scores);
    if (owned) free((void *)x);
    return rc;
  }
  for (int64_t r = 0; r < rows; r++) {
    float *s = p->mode == LIN_REG ? scores + (size_t)r * nt : scores;
    const float *xr = x + (size_t)r * nf;
    for (size_t t = 0; t < nt; t++) {
      float acc = ic && ic->n_floats ? ic->floats[t] : 0.0f;
      for (size_t f = 0; f < nf; f++) acc += xr[f] * co->floats[t * nf + f];
      s[t] = acc;
    }
    if (p->mode == LIN_REG) {
      k_ml_post_n(s, nt, post);
      continue;
    }
    float *z = n_out > 1 && out[1].dt != DT_INVALID ? (float *)out[1].data + (size_t)r * (nt == 1 ? 2 : nt) : NULL;
    if (nt == 1) {
      // one score: its sign picks the second label or the first
      if (l.n == 2) eng_ml__put_class(&l, &out[0], (size_t)r, s[0] > 0);
      else eng_ml__put_value(&l, &out[0], (size_t)r, s[0] > 0);
      s1[0] = post == K_ML_LOGISTIC ? k_ml_logistic(s[0]) : post == K_ML_PROBIT ? k_ml_probit(s[0]) : s[0];
      if (z) z[0] = 1.0f - s1[0], z[1] = s1[0];
      continue;
    }
    size_t best = 0;
    for (size_t t = 1; t < nt; t++)
      if (s[t] > s[best]) best = t;
    eng_ml__put_class(&l, &out[0], (size_t)r, best);
    k_ml_post_n(s, nt, post);
    if (z) memcpy(z, s, nt * sizeof *s);
  }
  if (p->mode == LIN_CLS) free(scores);
  if (owned) free((void *)x);
  return 0;
}
