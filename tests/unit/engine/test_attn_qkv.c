// tests/unit/engine/test_attn_qkv.c: the pass that packs a fused
// attention's Q, K and V into one projection (engine/ops/attn/attn_qkv.c) and the
// fused op's packed mode (engine/ops/attn/attn.c). On small models built here, as
// the exporters write them (three MatMul + Add projections of one X, with
// the Reshape's shape computed from Shape(X) or a constant with 0 and -1;
// GPT's one projection and Split): merged (counted, MatMuls gone) and the
// CPU plan's output against the same model with the merge off and with the
// attention unfused. Near misses (another X for K, a weight that is an
// input, a bias on two of three, the Split's parts out of order, a
// projection also read elsewhere) stay apart and stay right. On the
// committed exports (ATTN_ZOO): which merge, and their outputs against the
// merge off.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/ops/attn/attn.h"
#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "attn_case.h"
#include "onnx_build.h"

#define MODEL "attn_qkv_model.onnx"
enum { F = 1, I64 = 7 };

static uint64_t rng_s = 0x9E3779B97F4A7C15ull;
static float urand(float lo, float hi) { return attn_urand(&rng_s, lo, hi); }

// The three ways to load: everything on, the merge off, the attention unfused.
enum { RUN_ON, RUN_NO_MERGE, RUN_UNFUSED };

// Loads path as `how` says, plans it on the CPU, runs ins; output 0 into
// *out (malloc'd), the graph's counts into attn/merged.
static int load_run(const char *path, int how, const eng_tensor *ins, size_t n_in, float **out, size_t *n_out_el,
                    size_t *attn, size_t *merged, err *e) {
  eng_graph_opts o = {.no_fuse_attention = how == RUN_UNFUSED, .no_merge_qkv = how == RUN_NO_MERGE};
  return attn_load_run(path, &o, ins, n_in, out, n_out_el, attn, merged, e);
}

// --- small models: X [B, S, E] -> Q, K, V [B, S, H, D] -> SDPA -> Y [B, S, H*D]

enum {
  M_SHAPE = 0,    // the exporters' Reshape shape: Concat(Shape(X)[0:2], [H, D])
  M_CONST = 1,    // a constant shape [0, 0, H, -1] (0 copies, -1 infers)
  M_NO_BIAS = 2,  // no bias on any of the three
  M_SPLIT = 3,    // GPT: one projection [E, 3N] and Split into Q, K, V
  // near misses: left apart
  M_OTHER_X = 4,      // K projects another input X2
  M_W_INPUT = 5,      // V's weight is a graph input, not a constant
  M_BIAS_TWO = 6,     // V has no bias, Q and K have
  M_SPLIT_ORDER = 7,  // the Split's parts feed K, Q, V
  M_K_READ = 8,       // K's projection is a graph output too
};

typedef struct qcase {
  int64_t b, s, e, h, d;
} qcase;

static const char *const PROJ[3] = {"q", "k", "v"};

static ob *qkv_model(int variant, const qcase *c, float **w, float **bias, float *wqkv, float *bqkv) {
  int64_t n = c->h * c->d;
  int64_t xd[3] = {c->b, c->s, c->e}, md[4] = {c->b, 1, 1, c->s}, wd[2] = {c->e, n}, bd = n;
  int64_t w3[2] = {c->e, 3 * n}, b3 = 3 * n;
  static const int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1};
  ob *b = ob_new(17);
  ob_input(b, "x", F, 3, xd);
  if (variant == M_OTHER_X) ob_input(b, "x2", F, 3, xd);
  if (variant == M_W_INPUT) ob_input(b, "wv", F, 2, wd);
  ob_input(b, "mask", F, 4, md);
  float c0 = 0.6f, zero = 0.0f;
  int64_t one = 1, two = 2, four = 4;
  ob_init(b, "c", F, 1, &one, &c0, sizeof c0);
  ob_init(b, "zero", F, 0, NULL, &zero, sizeof zero);
  int64_t hd[2] = {c->h, c->d}, cshape[4] = {0, 0, c->h, -1}, yshape[3] = {0, 0, n};
  ob_init(b, "hd", I64, 1, &two, hd, sizeof hd);
  ob_init(b, "cshape", I64, 1, &four, cshape, sizeof cshape);
  int64_t three = 3;
  ob_init(b, "yshape", I64, 1, &three, yshape, sizeof yshape);
  Onnx__NodeProto *sh = ob_node(b, "Shape", "shape_x", "x", "bs");
  ob_attr_i(b, sh, "start", 0);
  ob_attr_i(b, sh, "end", 2);
  ob_attr_i(b, ob_node(b, "Concat", "cat", "bs,hd", "heads"), "axis", 0);
  const char *shape = variant == M_CONST ? "cshape" : "heads";
  char nm[64], ins[128], out[64];
  if (variant == M_SPLIT || variant == M_SPLIT_ORDER) {
    ob_init(b, "wqkv", F, 2, w3, wqkv, (size_t)(3 * n * c->e) * 4);
    ob_init(b, "bqkv", F, 1, &b3, bqkv, (size_t)(3 * n) * 4);
    ob_node(b, "MatMul", "qkv_mm", "x,wqkv", "qkv_p");
    ob_node(b, "Add", "qkv_add", "bqkv,qkv_p", "qkv");
    int64_t sizes[3] = {n, n, n};
    ob_init(b, "sizes", I64, 1, &three, sizes, sizeof sizes);
    const char *outs = variant == M_SPLIT ? "q_a,k_a,v_a" : "k_a,q_a,v_a";
    ob_attr_i(b, ob_node(b, "Split", "split", "qkv,sizes", outs), "axis", -1);
  } else {
    for (int k = 0; k < 3; k++) {
      const char *x = variant == M_OTHER_X && k == 1 ? "x2" : "x";
      // no bias: the product is the Reshape's input (M_BIAS_TWO's V through an Identity)
      int biased = variant != M_NO_BIAS && !(variant == M_BIAS_TWO && k == 2);
      snprintf(nm, sizeof nm, "w%s", PROJ[k]);
      if (!(variant == M_W_INPUT && k == 2)) ob_init(b, nm, F, 2, wd, w[k], (size_t)(n * c->e) * 4);
      snprintf(ins, sizeof ins, "%s,w%s", x, PROJ[k]);
      snprintf(nm, sizeof nm, "%s_mm", PROJ[k]);
      snprintf(out, sizeof out, variant == M_NO_BIAS ? "%s_a" : "%s_p", PROJ[k]);
      ob_node(b, "MatMul", nm, ins, out);
      snprintf(out, sizeof out, "%s_a", PROJ[k]);
      if (!biased) {
        if (variant == M_BIAS_TWO) {
          snprintf(ins, sizeof ins, "%s_p", PROJ[k]);
          snprintf(nm, sizeof nm, "%s_id", PROJ[k]);
          ob_node(b, "Identity", nm, ins, out);
        }
        continue;
      }
      snprintf(nm, sizeof nm, "b%s", PROJ[k]);
      ob_init(b, nm, F, 1, &bd, bias[k], (size_t)n * 4);
      // both operand orders: TorchScript's constant first, and the product first
      if (k == 1)
        snprintf(ins, sizeof ins, "%s_p,b%s", PROJ[k], PROJ[k]);
      else
        snprintf(ins, sizeof ins, "b%s,%s_p", PROJ[k], PROJ[k]);
      snprintf(nm, sizeof nm, "%s_add", PROJ[k]);
      ob_node(b, "Add", nm, ins, out);
    }
  }
  for (int k = 0; k < 3; k++) {
    snprintf(ins, sizeof ins, "%s_a,%s", PROJ[k], shape);
    snprintf(nm, sizeof nm, "%s_r", PROJ[k]);
    snprintf(out, sizeof out, "%s_h4", PROJ[k]);
    ob_node(b, "Reshape", nm, ins, out);
    snprintf(ins, sizeof ins, "%s_h4", PROJ[k]);
    snprintf(nm, sizeof nm, "%s_t", PROJ[k]);
    snprintf(out, sizeof out, "%s_h", PROJ[k]);
    ob_attr_ints(b, ob_node(b, "Transpose", nm, ins, out), "perm", 4, k == 1 ? p0231 : p0213);
  }
  ob_node(b, "Mul", "mq", "q_h,c", "qs");
  ob_node(b, "Mul", "mk", "c,k_h", "ks");
  ob_node(b, "MatMul", "mm0", "qs,ks", "s0");
  ob_node(b, "Add", "add", "s0,mask", "s");
  ob_attr_i(b, ob_node(b, "Softmax", "sm", "s", "p"), "axis", -1);
  ob_node(b, "IsNaN", "isnan", "p", "nan");
  ob_node(b, "Where", "where", "nan,zero,p", "pz");
  ob_node(b, "MatMul", "mm1", "pz,v_h", "oh");
  ob_attr_ints(b, ob_node(b, "Transpose", "to", "oh", "o"), "perm", 4, p0213);
  ob_node(b, "Reshape", "ry", "o,yshape", "y");
  ob_output(b, "y", F, -1, NULL);
  if (variant == M_K_READ) ob_output(b, "k_a", F, -1, NULL);
  return b;
}

static void run_qkv(int variant, const qcase *c, size_t want_merged) {
  int64_t n = c->h * c->d, xd[3] = {c->b, c->s, c->e}, md[4] = {c->b, 1, 1, c->s};
  int64_t wd[2] = {c->e, n};
  size_t nx = (size_t)(c->b * c->s * c->e), nw = (size_t)(c->e * n);
  float *x = malloc(nx * 4), *x2 = malloc(nx * 4), *mask = malloc((size_t)(c->b * c->s) * 4);
  float *w[3], *bias[3], *wqkv = malloc(3 * nw * 4), *bqkv = malloc((size_t)(3 * n) * 4);
  for (size_t i = 0; i < nx; i++) x[i] = urand(-1, 1), x2[i] = urand(-1, 1);
  for (int k = 0; k < 3; k++) {
    w[k] = malloc(nw * 4), bias[k] = malloc((size_t)n * 4);
    for (size_t i = 0; i < nw; i++) w[k][i] = urand(-0.5f, 0.5f);
    for (int64_t i = 0; i < n; i++) bias[k][i] = urand(-0.5f, 0.5f);
  }
  for (size_t i = 0; i < 3 * nw; i++) wqkv[i] = urand(-0.5f, 0.5f);
  for (int64_t i = 0; i < 3 * n; i++) bqkv[i] = urand(-0.5f, 0.5f);
  // padding: the last position of every batch row off, all of batch row 1 when there are two
  for (int64_t i = 0; i < c->b * c->s; i++)
    mask[i] = (i % c->s == c->s - 1 || (c->b > 1 && i / c->s == 1)) ? -INFINITY : 0.0f;
  CHECK_EQ_INT(ob_save(qkv_model(variant, c, w, bias, wqkv, bqkv), MODEL), 0);
  eng_tensor ins[4];
  size_t n_in = 0;
  ins[n_in++] = mk(DT_FP32, 3, xd, x);
  if (variant == M_OTHER_X) ins[n_in++] = mk(DT_FP32, 3, xd, x2);
  if (variant == M_W_INPUT) ins[n_in++] = mk(DT_FP32, 2, wd, w[2]);
  ins[n_in++] = mk(DT_FP32, 4, md, mask);
  // the graph: merged or not, and the MatMuls left
  eng_graph *g = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_graph_load(MODEL, &g, &e), 0);
  if (g) {
    int split = variant == M_SPLIT || variant == M_SPLIT_ORDER;
    CHECK_EQ_INT(eng_graph_n_attention(g), 1);
    CHECK_EQ_INT(eng_graph_n_qkv_merged(g), want_merged);
    CHECK_EQ_INT(count_op(g, "MatMul"), split || want_merged ? 1 : 3);
    CHECK_EQ_INT(count_op(g, "Split"), split && !want_merged);
    CHECK_EQ_INT(count_op(g, "Reshape"), want_merged ? 1 : 4);  // Y's stays
  } else {
    fprintf(stderr, "variant %d: %s\n", variant, e.msg);
  }
  eng_graph_destroy(g);
  float *y[3] = {0};
  size_t ny[3] = {0}, attn[3] = {0}, merged[3] = {0};
  for (int how = 0; how < 3; how++) {
    int rc = load_run(MODEL, how, ins, n_in, &y[how], &ny[how], &attn[how], &merged[how], &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "variant %d run %d: %s\n", variant, how, e.msg);
  }
  CHECK_EQ_INT(merged[RUN_ON], want_merged);
  CHECK_EQ_INT(merged[RUN_NO_MERGE], 0);
  CHECK_EQ_INT(merged[RUN_UNFUSED], 0);
  CHECK_EQ_INT(attn[RUN_UNFUSED], 0);
  size_t no = (size_t)(c->b * c->s * n);
  if (y[0] && y[1] && y[2] && ny[0] == no && ny[1] == no && ny[2] == no) {
    double w_on = worst(y[RUN_ON], y[RUN_UNFUSED], no, 1e-4, 1e-5);
    double w_nm = worst(y[RUN_NO_MERGE], y[RUN_UNFUSED], no, 1e-4, 1e-5);
    printf(
        "qkv variant %d [b%lld s%lld e%lld h%lld d%lld]: merged %zu; worst vs unfused %.3g "
        "(merge off %.3g)\n",
        variant, (long long)c->b, (long long)c->s, (long long)c->e, (long long)c->h, (long long)c->d, merged[RUN_ON],
        w_on, w_nm);
    CHECK(w_on <= 1.0);
    CHECK(w_nm <= 1.0);
    // a fully masked row gives 0 (IsNaN/Where), not NaN, in every form
    if (c->b > 1) CHECK(y[RUN_ON][c->s * n] == 0.0f);
  } else {
    CHECK(0);
  }
  for (int k = 0; k < 3; k++) free(y[k]), free(w[k]), free(bias[k]);
  free(x), free(x2), free(mask), free(wqkv), free(bqkv);
}

static void test_small(void) {
  static const qcase cases[] = {
      {2, 5, 8, 2, 3},    // two batch rows (row 1 fully masked), odd sizes
      {1, 16, 32, 4, 8},  // one batch row
      {3, 1, 6, 3, 1},    // one position, heads of size 1
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_qkv(M_SHAPE, &cases[i], 1);
    run_qkv(M_CONST, &cases[i], 1);
    run_qkv(M_NO_BIAS, &cases[i], 1);
    run_qkv(M_SPLIT, &cases[i], 1);
  }
  for (int v = M_OTHER_X; v <= M_K_READ; v++) run_qkv(v, &cases[0], 0);
}

// --- the committed exports: which merge (TorchScript's BERT-family and ViT
// projections, dynamo's GPT Split), and every output against the merge off

static void test_zoo(void) {
  static const struct {
    const char *model;
    int batch;  // 0: a fixed batch of 1 in the graph
    size_t merged;
  } zoo[] = {{"bert_dynamo18", 0, 0}, {"distilbert_dynamo18", 0, 0}, {"distilbert_ts17", 2, 2}, {"vit_dynamo18", 0, 0},
             {"vit_ts17", 2, 2},      {"gpt_dynamo18", 2, 2},        {"gpt_ts17", 2, 0}};
  for (size_t z = 0; z < sizeof zoo / sizeof zoo[0]; z++) {
    char path[512];
    eng_graph *g = zoo_load(zoo[z].model, path, sizeof path);
    if (!g) continue;
    err e = {0};
    int rc = 0;
    CHECK_EQ_INT(eng_graph_n_qkv_merged(g), zoo[z].merged);
    int64_t seq = 16, b = zoo[z].batch ? zoo[z].batch : 1;
    eng_tensor ins[4];
    void *bufs[4] = {0};
    size_t n_in = zoo_inputs(g, b, seq, 0, &rng_s, ins, bufs);
    eng_graph_destroy(g);
    float *y[2] = {0};
    size_t ny[2] = {0}, attn[2], merged[2];
    for (int how = 0; how < 2; how++) {
      rc = load_run(path, how, ins, n_in, &y[how], &ny[how], &attn[how], &merged[how], &e);
      CHECK_EQ_INT(rc, 0);
      if (rc) fprintf(stderr, "%s run %d: %s\n", zoo[z].model, how, e.msg);
    }
    if (y[0] && y[1] && ny[0] == ny[1]) {
      double w = worst(y[RUN_ON], y[RUN_NO_MERGE], ny[0], 1e-4, 1e-5);
      printf("%s: %zu of %zu attention nodes with Q/K/V merged; worst vs merge off %.3g\n", zoo[z].model,
             merged[RUN_ON], attn[RUN_ON], w);
      CHECK(w <= 1.0);
    } else {
      CHECK(0);
    }
    free(y[0]), free(y[1]);
    for (int i = 0; i < 4; i++) free(bufs[i]);
  }
}

int main(void) {
  test_small();
  test_zoo();
  CHECK_DONE();
}
