// kernels/ml/k_tree.c: tree ensembles and the score transforms (k_ml.h).
#include <math.h>

#include "kernels/ml/k_ml.h"

static int goes_true(const k_tree_ens *t, const k_tree_node *nd, float v) {
  if (isnan(v) && nd->nan_true) return 1;
  switch ((k_tree_mode)nd->mode) {
    case K_TREE_LEQ: return v <= nd->split;
    case K_TREE_LT: return v < nd->split;
    case K_TREE_GTE: return v >= nd->split;
    case K_TREE_GT: return v > nd->split;
    case K_TREE_EQ: return v == nd->split;
    case K_TREE_NEQ: return v != nd->split;
    case K_TREE_MEMBER:
      for (int32_t i = 0; i < nd->set_n; i++)
        if (t->sets[nd->set_off + i] == v) return 1;
      return 0;
  }
  return 0;
}

// The leaf a row reaches from ref; -1 on a walk longer than the node count.
static int32_t walk(const k_tree_ens *t, int32_t ref, const float *row) {
  for (int32_t steps = 0; ref >= 0; steps++) {
    if (steps > t->n_nodes) return -1;
    const k_tree_node *nd = &t->nodes[ref];
    ref = nd->next[goes_true(t, nd, row[nd->feature])];
  }
  return -ref - 1;
}

int k_tree_eval(const k_tree_ens *t, const float *x, int64_t n_rows, int64_t n_features, float *y,
                uint8_t *has) {
  int32_t nt = t->n_targets;
  for (int64_t r = 0; r < n_rows; r++) {
    const float *row = x + r * n_features;
    float *yr = y + r * nt;
    uint8_t *h = has + r * nt;
    for (int32_t k = 0; k < nt; k++) {
      yr[k] = 0.0f;
      h[k] = 0;
    }
    for (int32_t tr = 0; tr < t->n_trees; tr++) {
      int32_t l = walk(t, t->roots[tr], row);
      if (l < 0) return -1;
      for (int32_t i = t->leaf_off[l]; i < t->leaf_off[l + 1]; i++) {
        int32_t k = t->targets[i];
        float w = t->weights[i];
        int first = !h[k];
        switch (t->agg) {
          case K_TREE_AVERAGE:
          case K_TREE_SUM: yr[k] += w; break;
          case K_TREE_MIN: yr[k] = first || w < yr[k] ? w : yr[k]; break;
          case K_TREE_MAX: yr[k] = first || w > yr[k] ? w : yr[k]; break;
        }
        h[k] = 1;
      }
    }
    if (t->agg == K_TREE_AVERAGE && t->n_trees > 0)
      for (int32_t k = 0; k < nt; k++) yr[k] /= (float)t->n_trees;
  }
  return 0;
}

// --- score transforms (onnxruntime's ml_common.h)

float k_ml_logistic(float v) {
  float a = 1.0f / (1.0f + expf(-fabsf(v)));
  return v < 0 ? 1.0f - a : a;
}

static float erf_inv(float x) {
  float sgn = x < 0 ? -1.0f : 1.0f;
  x = (1 - x) * (1 + x);
  float lg = logf(x);
  float v = 2 / (3.14159265358979323846f * 0.147f) + 0.5f * lg;
  float v2 = 1 / 0.147f * lg;
  float v3 = -v + sqrtf(v * v - v2);
  return sgn * sqrtf(v3);
}

float k_ml_probit(float v) { return 1.41421356f * erf_inv(v * 2 - 1); }

void k_ml_post_n(float *s, size_t n, k_ml_post post) {
  float m = -INFINITY, sum = 0.0f;
  switch (post) {
    case K_ML_NONE: return;
    case K_ML_LOGISTIC:
      for (size_t i = 0; i < n; i++) s[i] = k_ml_logistic(s[i]);
      return;
    case K_ML_PROBIT:
      for (size_t i = 0; i < n; i++) s[i] = k_ml_probit(s[i]);
      return;
    case K_ML_SOFTMAX:
      for (size_t i = 0; i < n; i++) m = s[i] > m ? s[i] : m;
      for (size_t i = 0; i < n; i++) sum += s[i] = expf(s[i] - m);
      for (size_t i = 0; i < n; i++) s[i] /= sum;
      return;
    case K_ML_SOFTMAX_ZERO: {
      // zeros stay zero (exp(0) would not)
      for (size_t i = 0; i < n; i++) m = s[i] > m ? s[i] : m;
      float en = expf(-m);
      for (size_t i = 0; i < n; i++) {
        if (s[i] > 0.0000001f || s[i] < -0.0000001f) sum += s[i] = expf(s[i] - m);
        else s[i] *= en;
      }
      for (size_t i = 0; i < n; i++) s[i] /= sum;
      return;
    }
  }
}
