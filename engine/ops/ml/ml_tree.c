// engine/ops/ml/ml_tree.c: TreeEnsembleRegressor and TreeEnsembleClassifier
// (ai.onnx.ml opsets 1 and 3: nodes named by tree and node ids, leaves
// found by mode LEAF) and TreeEnsemble (opset 5: nodes and leaves by
// index, set membership). Each is built into one k_tree_ens (kernels/ml/
// k_ml.h) with every index checked: at parse, so a bad model fails at load
// saying what is wrong, and again once per plan node at its first run
// (kept in the op's state), since eng_op_params holds no such arrays. The
// classifier's labels and scores follow onnxruntime's rules, binary cases
// included (tree_ensemble_aggregator.h), so they agree with it exactly.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ml/ml.h"
#include "engine/ops/ops_common.h"

typedef enum { KIND_REG, KIND_CLS, KIND_TE5 } tree_kind;

typedef struct ml_tree {
  k_tree_ens ens;
  k_tree_node *nodes;
  int32_t *roots, *leaf_off, *targets;
  float *weights, *sets, *base;
  size_t n_base;
  k_ml_post post;
  tree_kind kind;
  int64_t max_feature;  // the largest feature a node reads (-1: none)
  // the classifier's: labels and onnxruntime's binary rules
  eng_ml_labels labels;
  int binary_case, all_positive;
} ml_tree;

static void tree_free(ml_tree *t) {
  if (!t) return;
  free(t->nodes), free(t->roots), free(t->leaf_off), free(t->targets);
  free(t->weights), free(t->sets), free(t->base);
  free(t);
}

static void destroy_state(void *s) { tree_free(s); }

// --- building

static const char *const legacy_modes[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT",
                                           "BRANCH_EQ",  "BRANCH_NEQ", "LEAF",      NULL};

static int agg_of(const eng_node *n, tree_kind kind, k_tree_agg *out, err *e) {
  if (kind == KIND_TE5) {
    int64_t a = op_attr_int(n, "aggregate_function", 1);
    if (a < 0 || a > 3) return err_set(e, ERR_INVALID_ARGUMENT, "aggregate_function %lld is not 0..3", (long long)a);
    *out = (k_tree_agg)a;
    return 0;
  }
  static const char *const names[] = {"AVERAGE", "SUM", "MIN", "MAX", NULL};
  int v;
  TRY(eng_ops__enum(op_attr_str(n, "aggregate_function", "SUM"), names, "aggregate_function", &v, e));
  *out = (k_tree_agg)v;
  return 0;
}

// Leaves' (target, weight) lists from per-entry leaf numbers.
static int set_leaves(ml_tree *t, int32_t n_leaves, const int32_t *leaf_of_entry, const int64_t *target,
                      const float *w, size_t n_entries, int64_t n_targets, const char *what, err *e) {
  t->leaf_off = calloc((size_t)n_leaves + 1, sizeof *t->leaf_off);
  t->targets = malloc((n_entries ? n_entries : 1) * sizeof *t->targets);
  t->weights = malloc((n_entries ? n_entries : 1) * sizeof *t->weights);
  if (!t->leaf_off || !t->targets || !t->weights) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < n_entries; i++) {
    if (target[i] < 0 || target[i] >= n_targets)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s[%zu] = %lld is outside 0..%lld", what, i, (long long)target[i],
                     (long long)n_targets - 1);
    t->leaf_off[leaf_of_entry[i] + 1]++;
  }
  for (int32_t l = 0; l < n_leaves; l++) t->leaf_off[l + 1] += t->leaf_off[l];
  int32_t *at = malloc(((size_t)n_leaves + 1) * sizeof *at);
  if (!at) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(at, t->leaf_off, ((size_t)n_leaves + 1) * sizeof *at);
  for (size_t i = 0; i < n_entries; i++) {
    int32_t k = at[leaf_of_entry[i]]++;
    t->targets[k] = (int32_t)target[i];
    t->weights[k] = w[i];
  }
  free(at);
  t->ens.n_leaves = n_leaves;
  return 0;
}

typedef struct id_key {
  int64_t tree, node;
  int32_t index;
} id_key;

static int cmp_key(const void *a, const void *b) {
  const id_key *x = a, *y = b;
  if (x->tree != y->tree) return x->tree < y->tree ? -1 : 1;
  if (x->node != y->node) return x->node < y->node ? -1 : 1;
  return 0;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static int32_t find_key(const id_key *keys, size_t n, int64_t tree, int64_t node) {
  id_key k = {tree, node, 0};
  const id_key *f = bsearch(&k, keys, n, sizeof k, cmp_key);
  return f ? f->index : -1;
}

// The legacy form: nodes named (tree id, node id), leaves by mode LEAF,
// weights attached to leaves by (tree id, node id).
static int build_legacy(const eng_node *n, ml_tree *t, int64_t n_targets, err *e) {
  size_t nn, c;
  const int64_t *tree_ids = eng_ml__attr_ints(n, "nodes_treeids", &nn);
  const int64_t *node_ids = eng_ml__attr_ints(n, "nodes_nodeids", &c);
  if (!tree_ids || !nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_treeids is missing or empty");
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_nodeids has %zu entries, nodes_treeids %zu", c, nn);
  const int64_t *feat = eng_ml__attr_ints(n, "nodes_featureids", &c);
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_featureids has %zu entries, expected %zu", c, nn);
  const int64_t *tid = eng_ml__attr_ints(n, "nodes_truenodeids", &c);
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_truenodeids has %zu entries, expected %zu", c, nn);
  const int64_t *fid = eng_ml__attr_ints(n, "nodes_falsenodeids", &c);
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_falsenodeids has %zu entries, expected %zu", c, nn);
  const int64_t *miss = eng_ml__attr_ints(n, "nodes_missing_value_tracks_true", &c);
  if (miss && c != nn)
    return err_set(e, ERR_INVALID_ARGUMENT, "nodes_missing_value_tracks_true has %zu entries, expected %zu", c, nn);
  float *vals = NULL;
  size_t nv;
  TRY(eng_ml__attr_floats(n, "nodes_values", "nodes_values_as_tensor", &vals, &nv, e));
  int rc = 0;
  id_key *keys = malloc(nn * sizeof *keys);
  int32_t *leaf_of = malloc(nn * sizeof *leaf_of);
  int32_t *entry_leaf = NULL;
  float *entry_w = NULL;
  t->nodes = calloc(nn, sizeof *t->nodes);
  t->roots = malloc(nn * sizeof *t->roots);
  if (!keys || !leaf_of || !t->nodes || !t->roots) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  if (nv != nn) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "nodes_values has %zu entries, expected %zu", nv, nn);
    goto done;
  }
  size_t n_modes = 0;
  const char *const *modes = NULL;
  const eng_attr *mattr = eng_node_attr(n, "nodes_modes");
  if (mattr) n_modes = mattr->n_strings, modes = (const char *const *)mattr->strings;
  if (n_modes != nn) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "nodes_modes has %zu entries, expected %zu", n_modes, nn);
    goto done;
  }
  int32_t n_leaves = 0;
  for (size_t i = 0; i < nn; i++) {
    keys[i] = (id_key){tree_ids[i], node_ids[i], (int32_t)i};
    int m;
    if ((rc = eng_ops__enum(modes[i], legacy_modes, "nodes_modes", &m, e)) != 0) goto done;
    leaf_of[i] = m == 6 ? n_leaves++ : -1;
    t->nodes[i].mode = (uint8_t)(m == 6 ? 0 : m);
    t->nodes[i].feature = m == 6 ? 0 : feat[i];
    t->nodes[i].split = vals[i];
    t->nodes[i].nan_true = miss && miss[i];
    if (m != 6 && feat[i] < 0) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "nodes_featureids[%zu] = %lld is negative", i, (long long)feat[i]);
      goto done;
    }
    if (m != 6 && feat[i] > t->max_feature) t->max_feature = feat[i];
  }
  qsort(keys, nn, sizeof *keys, cmp_key);
  for (size_t i = 1; i < nn; i++)
    if (cmp_key(&keys[i - 1], &keys[i]) == 0) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "node id %lld appears twice in tree %lld", (long long)keys[i].node,
                   (long long)keys[i].tree);
      goto done;
    }
  // branches: ids within the node's own tree
  for (size_t i = 0; i < nn; i++) {
    if (leaf_of[i] >= 0) continue;
    const int64_t ids[2] = {fid[i], tid[i]};
    for (int b = 0; b < 2; b++) {
      int32_t j = find_key(keys, nn, tree_ids[i], ids[b]);
      if (j < 0) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "node %zu (tree %lld): its %s node id %lld is not in the tree", i,
                     (long long)tree_ids[i], b ? "true" : "false", (long long)ids[b]);
        goto done;
      }
      t->nodes[i].next[b] = leaf_of[j] >= 0 ? K_TREE_LEAF(leaf_of[j]) : j;
    }
  }
  // roots: each tree's first node in the file's order, as onnxruntime takes
  // them, the trees in the order they first appear (keys are sorted by tree)
  int32_t n_trees = 0;
  for (size_t k = 0; k < nn;) {
    int32_t first = keys[k].index;
    size_t m = k;
    for (; m < nn && keys[m].tree == keys[k].tree; m++)
      if (keys[m].index < first) first = keys[m].index;
    t->roots[n_trees++] = first;
    k = m;
  }
  qsort(t->roots, (size_t)n_trees, sizeof *t->roots, cmp_i32);
  for (int32_t r = 0; r < n_trees; r++)
    if (leaf_of[t->roots[r]] >= 0) t->roots[r] = K_TREE_LEAF(leaf_of[t->roots[r]]);
  // weights
  const char *p = t->kind == KIND_CLS ? "class" : "target";
  char a_tree[32], a_node[32], a_id[32], a_w[32], a_wt[40];
  snprintf(a_tree, sizeof a_tree, "%s_treeids", p);
  snprintf(a_node, sizeof a_node, "%s_nodeids", p);
  snprintf(a_id, sizeof a_id, "%s_ids", p);
  snprintf(a_w, sizeof a_w, "%s_weights", p);
  snprintf(a_wt, sizeof a_wt, "%s_weights_as_tensor", p);
  size_t nw, c2, c3, c4;
  const int64_t *wt = eng_ml__attr_ints(n, a_tree, &nw);
  const int64_t *wn = eng_ml__attr_ints(n, a_node, &c2);
  const int64_t *wi = eng_ml__attr_ints(n, a_id, &c3);
  if ((rc = eng_ml__attr_floats(n, a_w, a_wt, &entry_w, &c4, e)) != 0) goto done;
  if (c2 != nw || c3 != nw || c4 != nw) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "%s, %s, %s and %s have %zu, %zu, %zu and %zu entries", a_tree, a_node,
                 a_id, a_w, nw, c2, c3, c4);
    goto done;
  }
  entry_leaf = malloc((nw ? nw : 1) * sizeof *entry_leaf);
  if (!entry_leaf) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < nw; i++) {
    int32_t j = find_key(keys, nn, wt[i], wn[i]);
    if (j < 0 || leaf_of[j] < 0) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "%s entry %zu names tree %lld node %lld, which is no LEAF node", p, i,
                   (long long)wt[i], (long long)wn[i]);
      goto done;
    }
    entry_leaf[i] = leaf_of[j];
  }
  t->ens.n_trees = n_trees;
  t->ens.n_nodes = (int32_t)nn;
  rc = set_leaves(t, n_leaves, entry_leaf, wi, entry_w, nw, n_targets, a_id, e);
  if (!rc && t->kind == KIND_CLS) {
    // onnxruntime's binary rules: which class ids carry weights, and their signs
    int64_t first = nw ? wi[0] : -1;
    int one_class = 1;
    t->all_positive = 1;
    for (size_t i = 0; i < nw; i++) {
      one_class &= wi[i] == first;
      t->all_positive &= entry_w[i] >= 0;
    }
    t->binary_case = n_targets == 2 && nw && one_class;
  }
done:
  free(keys), free(leaf_of), free(entry_leaf), free(entry_w), free(vals);
  return rc;
}

// TreeEnsemble (opset 5): nodes and leaves by index.
static int build_te5(const eng_node *n, ml_tree *t, int64_t n_targets, err *e) {
  size_t nn, c, nl, nr;
  const int64_t *feat = eng_ml__attr_ints(n, "nodes_featureids", &nn);
  if (!feat || !nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_featureids is missing or empty");
  const int64_t *ti = eng_ml__attr_ints(n, "nodes_truenodeids", &c);
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_truenodeids has %zu entries, expected %zu", c, nn);
  const int64_t *fi = eng_ml__attr_ints(n, "nodes_falsenodeids", &c);
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_falsenodeids has %zu entries, expected %zu", c, nn);
  const int64_t *tl = eng_ml__attr_ints(n, "nodes_trueleafs", &c);
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_trueleafs has %zu entries, expected %zu", c, nn);
  const int64_t *fl = eng_ml__attr_ints(n, "nodes_falseleafs", &c);
  if (c != nn) return err_set(e, ERR_INVALID_ARGUMENT, "nodes_falseleafs has %zu entries, expected %zu", c, nn);
  const int64_t *miss = eng_ml__attr_ints(n, "nodes_missing_value_tracks_true", &c);
  if (miss && c != nn)
    return err_set(e, ERR_INVALID_ARGUMENT, "nodes_missing_value_tracks_true has %zu entries, expected %zu", c, nn);
  const int64_t *lt = eng_ml__attr_ints(n, "leaf_targetids", &nl);
  const int64_t *roots = eng_ml__attr_ints(n, "tree_roots", &nr);
  if (!nr) return err_set(e, ERR_INVALID_ARGUMENT, "tree_roots is missing or empty");
  const eng_attr *ma = eng_node_attr(n, "nodes_modes");
  if (!ma || !ma->t || ma->t->dt != DT_UINT8 || (size_t)eng_numel(ma->t->ndims, ma->t->dims) != nn)
    return err_set(e, ERR_INVALID_ARGUMENT, "nodes_modes must be a UINT8 tensor of %zu entries", nn);
  const uint8_t *modes = ma->t->data;
  float *splits = NULL, *lw = NULL, *sets = NULL;
  size_t ns, nlw, nsets;
  int rc = eng_ml__attr_floats(n, "nodes_splits", "nodes_splits", &splits, &ns, e);
  if (!rc) rc = eng_ml__attr_floats(n, "leaf_weights", "leaf_weights", &lw, &nlw, e);
  if (!rc) rc = eng_ml__attr_floats(n, "membership_values", "membership_values", &sets, &nsets, e);
  int32_t *entry_leaf = NULL;
  if (rc) goto done;
  if (ns != nn) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "nodes_splits has %zu entries, expected %zu", ns, nn);
    goto done;
  }
  if (nlw != nl || !nl) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "leaf_weights has %zu entries, leaf_targetids %zu (at least one)", nlw, nl);
    goto done;
  }
  t->nodes = calloc(nn, sizeof *t->nodes);
  t->roots = malloc(nr * sizeof *t->roots);
  entry_leaf = malloc(nl * sizeof *entry_leaf);
  if (!t->nodes || !t->roots || !entry_leaf) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  // MEMBER nodes take the membership values' NaN-separated groups in order
  size_t set_at = 0;
  for (size_t i = 0; i < nn; i++) {
    k_tree_node *d = &t->nodes[i];
    if (modes[i] > K_TREE_MEMBER) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "nodes_modes[%zu] = %d is not 0..6", i, modes[i]);
      goto done;
    }
    if (feat[i] < 0) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "nodes_featureids[%zu] = %lld is negative", i, (long long)feat[i]);
      goto done;
    }
    d->mode = modes[i];
    d->feature = feat[i];
    d->split = splits[i];
    d->nan_true = miss && miss[i];
    if (feat[i] > t->max_feature) t->max_feature = feat[i];
    if (d->mode == K_TREE_MEMBER) {
      if (set_at >= nsets) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "membership_values has no set left for node %zu", i);
        goto done;
      }
      d->set_off = (int32_t)set_at;
      while (set_at < nsets && !isnan(sets[set_at])) set_at++;
      d->set_n = (int32_t)(set_at - (size_t)d->set_off);
      set_at++;  // past the NaN
    }
    const int64_t ids[2] = {fi[i], ti[i]}, leaf[2] = {fl[i], tl[i]};
    for (int b = 0; b < 2; b++) {
      int64_t lim = leaf[b] ? (int64_t)nl : (int64_t)nn;
      if (ids[b] < 0 || ids[b] >= lim) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "node %zu: its %s %s %lld is outside 0..%lld", i, b ? "true" : "false",
                     leaf[b] ? "leaf" : "node", (long long)ids[b], (long long)lim - 1);
        goto done;
      }
      d->next[b] = leaf[b] ? K_TREE_LEAF(ids[b]) : (int32_t)ids[b];
    }
  }
  for (size_t r = 0; r < nr; r++) {
    if (roots[r] < 0 || roots[r] >= (int64_t)nn) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "tree_roots[%zu] = %lld is outside 0..%zu", r, (long long)roots[r], nn - 1);
      goto done;
    }
    t->roots[r] = (int32_t)roots[r];
  }
  for (size_t l = 0; l < nl; l++) entry_leaf[l] = (int32_t)l;
  t->ens.n_trees = (int32_t)nr;
  t->ens.n_nodes = (int32_t)nn;
  t->sets = sets, sets = NULL;
  rc = set_leaves(t, (int32_t)nl, entry_leaf, lt, lw, nl, n_targets, "leaf_targetids", e);
done:
  free(splits), free(lw), free(sets), free(entry_leaf);
  return rc;
}

static int tree_build(const eng_node *n, tree_kind kind, ml_tree **out, err *e) {
  *out = NULL;
  ml_tree *t = calloc(1, sizeof *t);
  if (!t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  t->kind = kind;
  t->max_feature = -1;
  int64_t n_targets = 0;
  int rc = 0;
  if (kind == KIND_CLS) {
    rc = eng_ml__labels(n, "classlabels_int64s", &t->labels, e);
    n_targets = (int64_t)t->labels.n;
  } else {
    n_targets = op_attr_int(n, "n_targets", kind == KIND_TE5 ? 0 : 1);
    if (n_targets < 1) rc = err_set(e, ERR_INVALID_ARGUMENT, "n_targets %lld is not positive", (long long)n_targets);
  }
  if (!rc && n_targets > (1 << 20))
    rc = err_set(e, ERR_INVALID_ARGUMENT, "%lld targets is more than supported", (long long)n_targets);
  if (!rc) rc = agg_of(n, kind, &t->ens.agg, e);
  if (!rc && kind == KIND_CLS) t->ens.agg = K_TREE_SUM;
  if (!rc) rc = eng_ml__post(n, &t->post, e);
  if (!rc) rc = kind == KIND_TE5 ? build_te5(n, t, n_targets, e) : build_legacy(n, t, n_targets, e);
  if (!rc && kind != KIND_TE5) rc = eng_ml__attr_floats(n, "base_values", "base_values_as_tensor", &t->base, &t->n_base, e);
  if (!rc && t->n_base && t->n_base != (size_t)n_targets && !(kind == KIND_CLS && t->n_base <= 2))
    rc = err_set(e, ERR_INVALID_ARGUMENT, "base_values has %zu entries, expected %lld", t->n_base, (long long)n_targets);
  if (rc) {
    tree_free(t);
    return rc;
  }
  t->ens.n_targets = (int32_t)n_targets;
  t->ens.roots = t->roots;
  t->ens.nodes = t->nodes;
  t->ens.sets = t->sets;
  t->ens.leaf_off = t->leaf_off;
  t->ens.targets = t->targets;
  t->ens.weights = t->weights;
  *out = t;
  return 0;
}

// --- parse, shapes, run

static int parse_kind(const eng_node *n, tree_kind kind, eng_op_params *p, err *e) {
  ml_tree *t;
  TRY(tree_build(n, kind, &t, e));
  p->node = n;
  p->mode = kind;
  p->axis = t->max_feature;
  p->n_ints = t->ens.n_targets;
  p->to = eng_ml__label_dt(&t->labels);
  tree_free(t);
  return 0;
}

int eng_ml__parse_tree_reg(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  return parse_kind(n, KIND_REG, p, e);
}
int eng_ml__parse_tree_cls(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  return parse_kind(n, KIND_CLS, p, e);
}
int eng_ml__parse_tree_te5(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  return parse_kind(n, KIND_TE5, p, e);
}

int eng_ml__infer_tree(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  int64_t rows, feats;
  TRY(eng_ml__rows(&in[0], &rows, &feats, e));
  if (p->axis >= feats)
    return err_set(e, ERR_INVALID_ARGUMENT, "the trees read feature %lld, X has %lld", (long long)p->axis,
                   (long long)feats);
  int64_t d2[2] = {rows, p->n_ints};
  if (p->mode == KIND_CLS) {
    op_set_out(&out[0], p->to, 1, d2);
    if (n_out > 1 && out[1].dt != DT_INVALID) op_set_out(&out[1], DT_FP32, 2, d2);
    else if (n_out > 1) out[1].dt = DT_INVALID;
  } else {
    op_set_out(&out[0], DT_FP32, 2, d2);
  }
  return 0;
}

// onnxruntime's binary classifier (two labels): base values, the label's
// class (0 or 1) and the two scores, in place on s[0..1] with h[0..1].
static int finalize_binary(const ml_tree *t, float *s, uint8_t *h, float *z) {
  int size = 2, wa = -1;
  if (t->n_base == 2) {
    if (h[1]) {
      s[1] = t->base[1] + s[0];
      s[0] = -s[1];
    } else {
      s[1] += t->base[1];
      s[0] += t->base[0];
    }
  } else if (t->n_base == 1) {
    s[0] += t->base[0];
    if (!h[1]) size = 1;
  } else {
    wa = 3;
    if (!h[1]) size = 1;
  }
  float pos = size == 2 && h[1] ? s[1] : (h[0] ? s[0] : 0.0f);
  int label;
  if (t->binary_case) {
    if (t->all_positive) wa = pos > 0.5f ? 0 : 1;
    else wa = pos > 0 ? 2 : 3;
    label = wa == 0 || wa == 2;
  } else {
    label = pos > 0;
  }
  if (size == 2) {
    k_ml_post_n(s, 2, t->post);
    z[0] = s[0], z[1] = s[1];
  } else if (t->post == K_ML_PROBIT) {
    z[0] = k_ml_probit(s[0]), z[1] = 0.0f;
  } else if (wa == 0 || wa == 1) {
    z[0] = 1.0f - s[0], z[1] = s[0];
  } else if (wa == 2 || wa == 3) {
    if (t->post == K_ML_LOGISTIC) z[0] = k_ml_logistic(-s[0]), z[1] = k_ml_logistic(s[0]);
    else z[0] = -s[0], z[1] = s[0];
  } else {
    z[0] = s[0], z[1] = 0.0f;
  }
  return label;
}

static int tree_run(const ml_tree *t, const eng_tensor *in, eng_tensor *out, int n_out, err *e) {
  int64_t rows, feats;
  TRY(eng_ml__rows(&in[0], &rows, &feats, e));
  const float *x;
  int owned;
  TRY(eng_ml__floats(&in[0], &x, &owned, e));
  size_t nt = (size_t)t->ens.n_targets, cells = (size_t)rows * nt;
  float *y = t->kind == KIND_CLS ? malloc((cells ? cells : 1) * sizeof *y) : out[0].data;
  uint8_t *has = malloc(cells ? cells : 1);
  int rc = 0;
  if (!y || !has) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc && k_tree_eval(&t->ens, x, rows, feats, y, has) != 0)
    rc = err_set(e, ERR_INVALID_ARGUMENT, "a tree has a cycle: its walk is longer than its %d nodes", t->ens.n_nodes);
  for (int64_t r = 0; !rc && r < rows; r++) {
    float *s = y + (size_t)r * nt;
    uint8_t *h = has + (size_t)r * nt;
    if (t->kind != KIND_CLS) {
      for (size_t k = 0; k < t->n_base; k++) s[k] += t->base[k];
      k_ml_post_n(s, nt, t->post);
      continue;
    }
    float zb[2];
    float *z = n_out > 1 && out[1].dt != DT_INVALID ? (float *)out[1].data + (size_t)r * nt : zb;
    if (nt == 2) {
      eng_ml__put_class(&t->labels, &out[0], (size_t)r, (size_t)finalize_binary(t, s, h, z));
      continue;
    }
    for (size_t k = 0; k < t->n_base; k++) {
      s[k] = h[k] ? s[k] + t->base[k] : t->base[k];
      h[k] = 1;
    }
    int64_t best = -1;
    for (size_t k = 0; k < nt; k++)
      if (h[k] && (best < 0 || s[k] > s[best])) best = (int64_t)k;
    eng_ml__put_class(&t->labels, &out[0], (size_t)r, (size_t)(best < 0 ? 0 : best));
    k_ml_post_n(s, nt, t->post);
    if (z != zb) memcpy(z, s, nt * sizeof *s);
  }
  if (t->kind == KIND_CLS) free(y);
  free(has);
  if (owned) free((void *)x);
  return rc;
}

int eng_ml__run_tree(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  ml_tree *t;
  TRY(tree_build(p->node, (tree_kind)p->mode, &t, e));
  int rc = tree_run(t, in, out, n_out, e);
  tree_free(t);
  return rc;
}

int eng_ml__run_tree_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_in;
  if (!st->node) {
    ml_tree *t;
    TRY(tree_build(p->node, (tree_kind)p->mode, &t, e));
    st->node = t;
  }
  return tree_run(st->node, in, out, n_out, e);
}

void eng_ml__tree_destroy(void *s) { destroy_state(s); }
