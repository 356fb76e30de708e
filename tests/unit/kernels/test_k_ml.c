// Tests kernels/ml/k_tree.c: a two-tree ensemble with every node mode
// (set membership and a NaN that takes the true branch included) evaluated
// over rows whose leaves are worked out by hand below, under each
// aggregate function; a target no leaf reaches; a cycle refused rather
// than walked forever; and the post transforms against their formulas.
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "kernels/ml/k_ml.h"

// Tree 0 (root node 0):            Tree 1 (root node 4):
//   0: x0 <= 2 ? 1 : 2               4: x2 in {3, 5} ? leaf 3 : 5
//   1: x1 <  0 ? leaf 0 : leaf 1     5: x0 != 7 ? leaf 4 : leaf 5
//   2: x1 >= 1 ? 3 : leaf 2 (NaN x1 goes true)
//   3: x2 == 4 ? leaf 1 : leaf 0 (>, below, for a variant)
// leaves give (target, weight): 0: (0, 1)  1: (1, 2)  2: (0, 3) (1, -1)
//                               3: (0, 10) 4: (1, 20) 5: (0, -5)
static const k_tree_node nodes[] = {
    {0, 2.0f, K_TREE_LEQ, 0, {2, 1}, 0, 0},
    {1, 0.0f, K_TREE_LT, 0, {K_TREE_LEAF(1), K_TREE_LEAF(0)}, 0, 0},
    {1, 1.0f, K_TREE_GTE, 1, {K_TREE_LEAF(2), 3}, 0, 0},
    {2, 4.0f, K_TREE_EQ, 0, {K_TREE_LEAF(0), K_TREE_LEAF(1)}, 0, 0},
    {2, 0.0f, K_TREE_MEMBER, 0, {5, K_TREE_LEAF(3)}, 0, 2},
    {0, 7.0f, K_TREE_NEQ, 0, {K_TREE_LEAF(5), K_TREE_LEAF(4)}, 0, 0},
};
static const float sets[] = {3.0f, 5.0f};
static const int32_t roots[] = {0, 4};
static const int32_t leaf_off[] = {0, 1, 2, 4, 5, 6, 7};
static const int32_t targets[] = {0, 1, 0, 1, 0, 1, 0};
static const float weights[] = {1, 2, 3, -1, 10, 20, -5};

static k_tree_ens ens(k_tree_agg agg) {
  return (k_tree_ens){2, 6, 6, 2, roots, nodes, sets, leaf_off, targets, weights, agg};
}

enum { ROWS = 5, F = 3 };
static const float X[ROWS][F] = {
    {1, -1, 3},    // t0: 0 -> 1 -> leaf 0 (0:+1)     t1: 4 -> leaf 3 (0:+10)
    {1, 5, 0},     // t0: leaf 1 (1:+2)               t1: 5, x0 != 7 -> leaf 4 (1:+20)
    {3, 2, 4},     // t0: 2 -> 3, x2 == 4 -> leaf 1   t1: 5 -> leaf 4 (1:+20)
    {3, 0, 5},     // t0: 2, x1 < 1 -> leaf 2 (0:+3, 1:-1)   t1: leaf 3 (0:+10)
    {7, NAN, 9},   // t0: 2, NaN -> true -> 3, x2 != 4 -> leaf 0 (0:+1)  t1: 5, x0 == 7 -> leaf 5 (0:-5)
};
// per row, per target: the weights each tree gives (NAN: none)
static const float W[ROWS][2][2] = {
    {{1, 10}, {NAN, NAN}}, {{NAN, NAN}, {2, 20}}, {{NAN, NAN}, {2, 20}}, {{3, 10}, {-1, NAN}}, {{1, -5}, {NAN, NAN}},
};

static void test_aggregates(void) {
  const k_tree_agg aggs[] = {K_TREE_SUM, K_TREE_AVERAGE, K_TREE_MIN, K_TREE_MAX};
  for (int a = 0; a < 4; a++) {
    k_tree_ens t = ens(aggs[a]);
    float y[ROWS * 2];
    uint8_t has[ROWS * 2];
    CHECK_EQ_INT(k_tree_eval(&t, &X[0][0], ROWS, F, y, has), 0);
    for (int r = 0; r < ROWS; r++)
      for (int k = 0; k < 2; k++) {
        float w0 = W[r][k][0], w1 = W[r][k][1], want = 0;
        int n = !isnan(w0) + !isnan(w1);
        CHECK_EQ_INT(has[r * 2 + k], n > 0);
        if (aggs[a] == K_TREE_SUM || aggs[a] == K_TREE_AVERAGE) {
          want = (isnan(w0) ? 0 : w0) + (isnan(w1) ? 0 : w1);
          if (aggs[a] == K_TREE_AVERAGE) want /= 2;  // over the trees, not the leaves reached
        } else if (n == 2) {
          want = aggs[a] == K_TREE_MIN ? fminf(w0, w1) : fmaxf(w0, w1);
        } else if (n == 1) {
          want = isnan(w0) ? w1 : w0;
        }
        CHECK_NEAR(y[r * 2 + k], want, 0, 0);
      }
  }
}

static void test_cycle(void) {
  k_tree_node loop[2] = {{0, 0.0f, K_TREE_LEQ, 0, {1, 1}, 0, 0}, {0, 0.0f, K_TREE_LEQ, 0, {0, 0}, 0, 0}};
  int32_t r0 = 0, off[2] = {0, 1}, tg = 0;
  float w = 1, y, x = 0;
  uint8_t has;
  k_tree_ens t = {1, 2, 1, 1, &r0, loop, NULL, off, &tg, &w, K_TREE_SUM};
  CHECK_EQ_INT(k_tree_eval(&t, &x, 1, 1, &y, &has), -1);
}

static void test_post(void) {
  CHECK_NEAR(k_ml_logistic(0.5f), 1.0 / (1.0 + exp(-0.5)), 1e-6, 0);
  CHECK_NEAR(k_ml_logistic(-30.0f), 1.0 / (1.0 + exp(30.0)), 1e-3, 1e-12);
  CHECK_NEAR(k_ml_probit(0.5f), 0.0, 0, 1e-6);
  CHECK_NEAR(k_ml_probit(0.975f), 1.959964, 1e-2, 0);  // onnxruntime's erfinv approximation
  float s[3] = {1, 2, 3};
  k_ml_post_n(s, 3, K_ML_SOFTMAX);
  double d = exp(1) + exp(2) + exp(3);
  CHECK_NEAR(s[0], exp(1) / d, 1e-6, 0);
  CHECK_NEAR(s[2], exp(3) / d, 1e-6, 0);
  float z[3] = {0, 1, 2};
  k_ml_post_n(z, 3, K_ML_SOFTMAX_ZERO);  // the zero stays zero
  CHECK_NEAR(z[0], 0.0, 0, 0);
  CHECK_NEAR(z[1], exp(1) / (exp(1) + exp(2)), 1e-6, 0);
  float n[2] = {-1, 4};
  k_ml_post_n(n, 2, K_ML_NONE);
  CHECK_NEAR(n[0], -1.0, 0, 0);
}

int main(void) {
  test_aggregates();
  test_cycle();
  test_post();
  CHECK_DONE();
}
