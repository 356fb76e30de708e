// engine/ops/ml/ml_svm.c: SVMRegressor and SVMClassifier (libsvm's models
// as skl2onnx writes them): kernels over support vectors (or liblinear's
// coefficients), one-vs-one votes, Platt probabilities through libsvm's
// multiclass_probability, and the labels and score columns exactly as
// onnxruntime's svmclassifier.cc and svmregressor.cc write them.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ml/ml.h"
#include "engine/ops/ops_common.h"

enum { K_LINEAR, K_POLY, K_RBF, K_SIGMOID };

typedef struct svm {
  int kernel;
  float gamma, coef0, degree;
  const float *coef, *sv, *rho, *pa, *pb;
  size_t n_coef, n_sv, n_rho, n_prob;
  int64_t n_vec, feats, classes;  // support vectors, features, classes (1 for a regressor)
  const int64_t *per_class;
  eng_ml_labels labels;
  int linear_mode, one_class, all_positive;
  k_ml_post post;
} svm;

static size_t nf(const eng_node *n, const char *name, const float **p) {
  const eng_attr *a = eng_node_attr(n, name);
  *p = a ? a->floats : NULL;
  return a ? a->n_floats : 0;
}

static int svm_read(const eng_node *n, int cls, svm *s, err *e) {
  memset(s, 0, sizeof *s);
  static const char *const kernels[] = {"LINEAR", "POLY", "RBF", "SIGMOID", NULL};
  TRY(eng_ops__enum(op_attr_str(n, "kernel_type", "LINEAR"), kernels, "kernel_type", &s->kernel, e));
  const float *kp;
  size_t nkp = nf(n, "kernel_params", &kp);
  if (nkp >= 3) s->gamma = kp[0], s->coef0 = kp[1], s->degree = kp[2];
  s->n_coef = nf(n, "coefficients", &s->coef);
  s->n_sv = nf(n, "support_vectors", &s->sv);
  s->n_rho = nf(n, "rho", &s->rho);
  if (!s->n_coef) return err_set(e, ERR_INVALID_ARGUMENT, "coefficients is missing or empty");
  if (!s->n_rho) return err_set(e, ERR_INVALID_ARGUMENT, "rho is missing or empty");
  TRY(eng_ml__post(n, &s->post, e));
  if (!cls) {
    s->n_vec = op_attr_int(n, "n_supports", 0);
    s->one_class = (int)op_attr_int(n, "one_class", 0);
    s->classes = 1;
    s->linear_mode = s->n_vec <= 0;
    if (s->linear_mode) {
      s->feats = (int64_t)s->n_coef;
      s->kernel = K_LINEAR;
    } else {
      if (s->n_sv % (size_t)s->n_vec || s->n_coef < (size_t)s->n_vec)
        return err_set(e, ERR_INVALID_ARGUMENT, "%zu support vector values and %zu coefficients for n_supports %lld",
                       s->n_sv, s->n_coef, (long long)s->n_vec);
      s->feats = (int64_t)(s->n_sv / (size_t)s->n_vec);
    }
    return 0;
  }
  size_t nl, npc, npb;
  TRY(eng_ml__labels(n, "classlabels_ints", &s->labels, e));
  nl = s->labels.n;
  s->classes = (int64_t)nl;
  s->per_class = eng_ml__attr_ints(n, "vectors_per_class", &npc);
  s->n_prob = nf(n, "prob_a", &s->pa);
  npb = nf(n, "prob_b", &s->pb);
  if (s->n_prob != npb) return err_set(e, ERR_INVALID_ARGUMENT, "prob_a has %zu entries, prob_b %zu", s->n_prob, npb);
  for (size_t i = 0; i < npc; i++) {
    if (s->per_class[i] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "vectors_per_class[%zu] is negative", i);
    s->n_vec += s->per_class[i];
  }
  s->all_positive = 1;
  for (size_t i = 0; i < s->n_coef; i++) s->all_positive &= s->coef[i] >= 0;
  int64_t pairs = s->classes * (s->classes - 1) / 2;
  if (s->n_vec > 0) {
    if (npc != nl) return err_set(e, ERR_INVALID_ARGUMENT, "vectors_per_class has %zu entries for %zu classes", npc, nl);
    if (s->n_sv % (size_t)s->n_vec)
      return err_set(e, ERR_INVALID_ARGUMENT, "%zu support vector values for %lld vectors", s->n_sv, (long long)s->n_vec);
    s->feats = (int64_t)(s->n_sv / (size_t)s->n_vec);
    if (s->n_coef < (size_t)(s->n_vec * (s->classes - 1)))
      return err_set(e, ERR_INVALID_ARGUMENT, "%zu coefficients, expected %lld", s->n_coef,
                     (long long)(s->n_vec * (s->classes - 1)));
    if ((int64_t)s->n_rho < pairs)
      return err_set(e, ERR_INVALID_ARGUMENT, "rho has %zu entries for %lld class pairs", s->n_rho, (long long)pairs);
    if (s->n_prob && (int64_t)s->n_prob < pairs)
      return err_set(e, ERR_INVALID_ARGUMENT, "prob_a has %zu entries for %lld class pairs", s->n_prob, (long long)pairs);
  } else {
    s->linear_mode = 1;
    s->kernel = K_LINEAR;
    if (s->n_coef % nl) return err_set(e, ERR_INVALID_ARGUMENT, "%zu coefficients for %zu classes", s->n_coef, nl);
    s->feats = (int64_t)(s->n_coef / nl);
  }
  return 0;
}

static double kdot(const svm *s, const float *x, const float *v, int64_t f) {
  double sum = 0;
  if (s->kernel == K_RBF) {
    for (int64_t i = 0; i < f; i++) {
      double d = (double)x[i] - v[i];
      sum += d * d;
    }
    return exp(-(double)s->gamma * sum);
  }
  for (int64_t i = 0; i < f; i++) sum += (double)x[i] * v[i];
  if (s->kernel == K_POLY) return pow(s->gamma * sum + s->coef0, s->degree);
  if (s->kernel == K_SIGMOID) return tanh(s->gamma * sum + s->coef0);
  return sum;
}

// The score columns of the classifier's Z.
static int64_t z_cols(const svm *s) {
  if (!s->n_prob && s->n_vec > 0) return s->classes > 2 ? s->classes * (s->classes - 1) / 2 : 2;
  return s->classes;
}

int eng_ml__parse_svm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  svm s;
  int cls = strstr(n->op_type, "Classifier") != NULL;
  TRY(svm_read(n, cls, &s, e));
  p->node = n;
  p->mode = cls;
  return 0;
}

int eng_ml__infer_svm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  svm s;
  TRY(svm_read(p->node, p->mode, &s, e));
  int64_t rows, feats;
  TRY(eng_ml__rows(&in[0], &rows, &feats, e));
  if (feats != s.feats)
    return err_set(e, ERR_INVALID_ARGUMENT, "X has %lld features, the model %lld", (long long)feats, (long long)s.feats);
  int64_t d[2] = {rows, p->mode ? z_cols(&s) : 1};
  if (!p->mode) {
    op_set_out(&out[0], DT_FP32, 2, d);
    return 0;
  }
  op_set_out(&out[0], eng_ml__label_dt(&s.labels), 1, d);
  if (n_out > 1 && out[1].dt != DT_INVALID) op_set_out(&out[1], DT_FP32, 2, d);
  return 0;
}

// libsvm's pairwise coupling (onnxruntime's ml_common.h): r[i * k + j] the
// pairwise probabilities, p the k class probabilities.
static void multiclass_probability(int64_t k, const float *r, float *p, float *q, float *qp) {
  float eps = 0.005f / (float)k;
  memset(q, 0, (size_t)(k * k) * sizeof *q);
  for (int64_t i = 0; i < k; i++) {
    p[i] = 1.0f / (float)k;
    for (int64_t j = 0; j < i; j++) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = q[j * k + i];
    }
    for (int64_t j = i + 1; j < k; j++) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = -r[j * k + i] * r[i * k + j];
    }
  }
  for (int loop = 0; loop < 100; loop++) {
    float pqp = 0;
    for (int64_t i = 0; i < k; i++) {
      qp[i] = 0;
      for (int64_t j = 0; j < k; j++) qp[i] += q[i * k + j] * p[j];
      pqp += p[i] * qp[i];
    }
    float max_err = 0;
    for (int64_t i = 0; i < k; i++) {
      float er = fabsf(qp[i] - pqp);
      if (er > max_err) max_err = er;
    }
    if (max_err < eps) break;
    for (int64_t i = 0; i < k; i++) {
      float diff = (-qp[i] + pqp) / q[i * k + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * k + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (int64_t j = 0; j < k; j++) {
        qp[j] = (qp[j] + diff * q[i * k + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

static int run_cls(const svm *s, const float *x, int64_t rows, eng_tensor *out, int n_out, err *e) {
  int64_t c = s->classes, cols = z_cols(s), pairs = c * (c - 1) / 2;
  size_t nsc = (size_t)(pairs > c ? pairs : c) + 2;
  float *scores = malloc(nsc * sizeof *scores), *ker = malloc(((size_t)s->n_vec + 1) * sizeof *ker);
  float *pr = malloc((size_t)(c * c) * 3 * sizeof *pr + (size_t)c * 2 * sizeof *pr);
  int64_t *votes = calloc((size_t)c, sizeof *votes), *start = calloc((size_t)c + 1, sizeof *start);
  if (!scores || !ker || !pr || !votes || !start) {
    free(scores), free(ker), free(pr), free(votes), free(start);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int64_t i = 0; !s->linear_mode && i < c; i++) start[i + 1] = start[i] + s->per_class[i];
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * s->feats;
    size_t ns = 0;
    if (s->linear_mode) {
      for (int64_t j = 0; j < c; j++) scores[ns++] = (float)(kdot(s, xr, s->coef + j * s->feats, s->feats) + s->rho[0]);
    } else {
      for (int64_t j = 0; j < s->n_vec; j++) ker[j] = (float)kdot(s, xr, s->sv + j * s->feats, s->feats);
      memset(votes, 0, (size_t)c * sizeof *votes);
      int64_t ev = 0;
      for (int64_t i = 0; i < c; i++)
        for (int64_t j = i + 1; j < c; j++, ev++) {
          double sum = 0;
          const float *c1 = s->coef + s->n_vec * (j - 1) + start[i], *c2 = s->coef + s->n_vec * i + start[j];
          for (int64_t m = 0; m < s->per_class[i]; m++) sum += c1[m] * ker[start[i] + m];
          for (int64_t m = 0; m < s->per_class[j]; m++) sum += c2[m] * ker[start[j] + m];
          sum += s->rho[ev];
          scores[ns++] = (float)sum;
          votes[sum > 0 ? i : j]++;
        }
    }
    if (s->n_prob && !s->linear_mode) {
      float *p2 = pr, *est = pr + c * c, *q = est + c, *qp = q + c * c;
      memset(p2, 0, (size_t)(c * c) * sizeof *p2);
      int64_t idx = 0;
      for (int64_t i = 0; i < c; i++) {
        int64_t a = i * c + i + 1, b = (i + 1) * c + i;
        for (int64_t j = i + 1; j < c; j++, idx++, a++, b += c) {
          float v = 1.0f - k_ml_logistic(scores[idx] * s->pa[idx] + s->pb[idx]);
          v = fminf(fmaxf(v, 1.0e-7f), 1 - 1.0e-7f);
          p2[a] = v;
          p2[b] = 1 - v;
        }
      }
      multiclass_probability(c, p2, est, q, qp);
      memcpy(scores, est, (size_t)c * sizeof *scores);
      ns = (size_t)c;
    }
    int64_t best = 0;
    float maxw = 0;
    if (!s->linear_mode) {
      for (int64_t i = 1; i < c; i++)
        if (votes[i] > votes[best]) best = i;
    } else {
      for (size_t i = 1; i < ns; i++)
        if (scores[i] > scores[best]) best = (int64_t)i;
      maxw = scores[best];
    }
    int wa = -1;
    const eng_ml_labels *L = &s->labels;
    if (s->n_rho == 1) {
      if (c == 2) {
        wa = s->post == K_ML_NONE ? 2 : 0;
        if (!s->n_prob && ((s->all_positive && maxw >= 0.5f) || (maxw > 0 && !s->all_positive)))
          eng_ml__put_class(L, &out[0], (size_t)r, 1);
        else
          eng_ml__put_class(L, &out[0], (size_t)r, (size_t)best);
      } else {
        eng_ml__put_value(L, &out[0], (size_t)r, maxw > 0);
      }
    } else {
      eng_ml__put_class(L, &out[0], (size_t)r, (size_t)best);
    }
    if (n_out < 2 || out[1].dt == DT_INVALID) continue;
    float *z = (float *)out[1].data + r * cols;
    if (ns >= 2) {
      k_ml_post_n(scores, ns, s->post);
      memcpy(z, scores, ns * sizeof *z);
    } else if (s->post == K_ML_PROBIT) {
      z[0] = k_ml_probit(scores[0]), z[1] = 0.0f;
    } else if (wa == 0 || wa == 1) {
      z[0] = 1.0f - scores[0], z[1] = scores[0];
    } else if (wa == 2 || wa == 3) {
      if (s->post == K_ML_LOGISTIC) z[0] = k_ml_logistic(-scores[0]), z[1] = k_ml_logistic(scores[0]);
      else z[0] = -scores[0], z[1] = scores[0];
    } else {
      z[0] = scores[0], z[1] = 0.0f;
    }
  }
  free(scores), free(ker), free(pr), free(votes), free(start);
  return 0;
}

int eng_ml__run_svm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  svm s;
  TRY(svm_read(p->node, p->mode, &s, e));
  int64_t rows, feats;
  TRY(eng_ml__rows(&in[0], &rows, &feats, e));
  const float *x;
  int owned;
  TRY(eng_ml__floats(&in[0], &x, &owned, e));
  int rc = 0;
  if (p->mode) {
    rc = run_cls(&s, x, rows, out, n_out, e);
  } else {
    float *y = out[0].data;
    for (int64_t r = 0; r < rows; r++) {
      const float *xr = x + r * s.feats;
      double sum = 0;
      if (s.linear_mode) {
        sum = kdot(&s, xr, s.coef, s.feats);
      } else {
        for (int64_t j = 0; j < s.n_vec; j++) sum += s.coef[j] * kdot(&s, xr, s.sv + j * s.feats, s.feats);
      }
      sum += s.rho[0];
      if (s.one_class) sum = sum > 0 ? 1 : -1;
      y[r] = (float)sum;
    }
  }
  if (owned) free((void *)x);
  return rc;
}
