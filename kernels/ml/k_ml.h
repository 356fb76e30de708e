// kernels/ml/k_ml.h: the math of the ai.onnx.ml ops (engine/ops/ml/): tree
// ensembles evaluated over rows of features, and the score transforms
// (post_transform) the ensembles and the linear models share, computed as
// onnxruntime computes them so labels and probabilities agree with it.
// C only: these ops have no CUDA path (a model of them stays on the CPU).
#ifndef INFERD_KERNELS_ML_H
#define INFERD_KERNELS_ML_H

#include <stddef.h>
#include <stdint.h>

// Node modes, numbered as TreeEnsemble's (ai.onnx.ml opset 5) nodes_modes.
typedef enum k_tree_mode {
  K_TREE_LEQ = 0,
  K_TREE_LT = 1,
  K_TREE_GTE = 2,
  K_TREE_GT = 3,
  K_TREE_EQ = 4,
  K_TREE_NEQ = 5,
  K_TREE_MEMBER = 6,
} k_tree_mode;

// aggregate_function, numbered as TreeEnsemble's.
typedef enum k_tree_agg { K_TREE_AVERAGE = 0, K_TREE_SUM = 1, K_TREE_MIN = 2, K_TREE_MAX = 3 } k_tree_agg;

// post_transform, numbered as TreeEnsemble's.
typedef enum k_ml_post {
  K_ML_NONE = 0,
  K_ML_SOFTMAX = 1,
  K_ML_LOGISTIC = 2,
  K_ML_SOFTMAX_ZERO = 3,
  K_ML_PROBIT = 4,
} k_ml_post;

// A reference to a node (>= 0) or to leaf l (-(l + 1)).
#define K_TREE_LEAF(l) (-(int32_t)(l)-1)

typedef struct k_tree_node {
  int64_t feature;     // column of the row it reads
  float split;         // the threshold (unused by MEMBER)
  uint8_t mode;        // k_tree_mode
  uint8_t nan_true;    // a NaN feature takes the true branch (missing_value_tracks_true)
  int32_t next[2];     // [false branch, true branch]: node or K_TREE_LEAF
  int32_t set_off, set_n;  // MEMBER: its values, sets[set_off .. set_off + set_n)
} k_tree_node;

// A whole ensemble, every index checked when it was built (ml_tree.c):
// leaf l adds weights[leaf_off[l] .. leaf_off[l + 1]) to targets[same].
typedef struct k_tree_ens {
  int32_t n_trees, n_nodes, n_leaves, n_targets;
  const int32_t *roots;  // n_trees: node or K_TREE_LEAF
  const k_tree_node *nodes;
  const float *sets;
  const int32_t *leaf_off;  // n_leaves + 1
  const int32_t *targets;
  const float *weights;
  k_tree_agg agg;
} k_tree_ens;

// Scores of n_rows rows of n_features floats: y[r * n_targets + t] is the
// aggregate over the trees (AVERAGE divides the sum by n_trees) of the
// weights the rows' leaves give target t, 0 where no leaf gives it; has
// (n_rows * n_targets bytes) says which a leaf gave. Base values
// and post transforms are the caller's. -1 when a walk is longer than the
// ensemble's node count (a cycle), else 0.
int k_tree_eval(const k_tree_ens *t, const float *x, int64_t n_rows, int64_t n_features, float *y,
                uint8_t *has);

// onnxruntime's score functions (ml_common.h): logistic, probit (through
// its erfinv approximation), and the n-score transforms in place.
float k_ml_logistic(float v);
float k_ml_probit(float v);
void k_ml_post_n(float *s, size_t n, k_ml_post post);

#endif
