// tests/unit/engine/test_attn.c: the attention pass and the fused op
// (engine/ops/attn/attn.c). The pass on every committed transformer export (filled
// with weights by tests/models/zoo/fill.py into ATTN_ZOO): the number of
// fused nodes per graph, no Softmax left, and the fused plan's outputs
// against the same graph loaded with the pass off. On small models built
// here: the exact pattern fused and checked against the C reference
// (k_attn_ref) with masks of several shapes, a fully masked row (IsNaN/Where
// gives 0, without it NaN), and near misses left alone. The heads' layout:
// the reference's row strides against the plain transposed layout (exact),
// and models with the exporters' head Transposes around the pattern, taken
// into the node (counted, none left) or, in near misses, left alone.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/ops/attn/attn.h"
#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"
#include "kernels/k_ref.h"
#include "attn_case.h"
#include "onnx_build.h"

#define MODEL "attn_model.onnx"
enum { F = 1, I64 = 7 };

static uint64_t rng_s = 88172645463325252ull;
static float urand(float lo, float hi) { return attn_urand(&rng_s, lo, hi); }

// Loads path with the pass on or off, plans it, runs ins; copies output 0 into *out (malloc'd).
static int load_run(const char *path, int fuse, const eng_tensor *ins, size_t n_in, float **out,
                    size_t *n_out_el, size_t *n_fused, err *e) {
  eng_graph_opts o = {.no_fuse_attention = !fuse};
  return attn_load_run(path, &o, ins, n_in, out, n_out_el, n_fused, NULL, e);
}

// Runs the export at path once (attention fused) and returns how many
// attention nodes read their mask as one row for every query row (plan.c
// mask_rows_shared); (size_t)-1 when it does not run.
static size_t rows_shared(const char *path, const eng_tensor *ins, size_t n_in) {
  eng_graph *g = NULL;
  eng_plan *p = NULL;
  err e = {0};
  size_t n = (size_t)-1;
  eng_tensor y[4];
  size_t no = 0;
  if (eng_graph_load(path, &g, &e) == 0 && eng_plan_create(g, 0, &p, &e) == 0) {
    no = eng_graph_n_outputs(g);
    if (eng_plan_run(p, ins, n_in, y, no < 4 ? no : 4, &e) == 0) n = p->mask_rows_shared;
  }
  if (n == (size_t)-1) fprintf(stderr, "%s: %s\n", path, e.msg);
  eng_plan_destroy(p);
  eng_graph_destroy(g);
  return n;
}

// --- the committed exports

static void test_zoo(void) {
  // transposes: the heads' Transposes the pass takes in, two layers: all
  // four of TorchScript's (Q, Kt, V, O); dynamo's Q, V and O (its K detours
  // through Reshapes); GPT TorchScript's Kt, V and O (the divisor's Shape
  // reads its Q too)
  // where: the Where nodes left; TorchScript writes each layer's mask as its own Where of the
  // shared expanded mask, with Constant nodes of its own: one after the passes (graph_pass.c
  // pass_cse), beside the embeddings' (distilbert_ts17 had 3, vit_ts17 4)
  static const struct {
    const char *model;
    int batch;  // 0: a fixed batch of 1 in the graph
    size_t transposes;
    size_t where;
    size_t shared;  // attention nodes reading the mask as one row (plan.c mask_rows_shared)
  } zoo[] = {{"bert_dynamo18", 0, 6, 1, 2}, {"distilbert_dynamo18", 0, 6, 1, 2}, {"distilbert_ts17", 2, 8, 2, 2},
             {"vit_dynamo18", 0, 6, 0, 0},  {"vit_ts17", 2, 8, 3, 2},            {"gpt_dynamo18", 2, 8, 0, 0},
             {"gpt_ts17", 2, 6, 0, 0}};
  for (size_t z = 0; z < sizeof zoo / sizeof zoo[0]; z++) {
    char path[512];
    // the graph as loaded: every attention fused, nothing left of the pattern
    eng_graph *g = zoo_load(zoo[z].model, path, sizeof path);
    if (!g) continue;
    err e = {0};
    int rc = 0;
    // the Transposes gone are those the nodes took in
    eng_graph_opts off = {.no_fuse_attention = 1};
    eng_graph *g0 = NULL;
    CHECK_EQ_INT(eng_graph_load_opts(path, &off, &g0, &e), 0);
    size_t t0 = g0 ? count_op(g0, "Transpose") : 0, t1 = count_op(g, "Transpose");
    eng_graph_destroy(g0);
    printf("%s: %zu attention node(s) fused, %zu Transposes taken in (%zu of %zu left), %zu Where\n",
           zoo[z].model, eng_graph_n_attention(g), eng_attn_n_transposes(g), t1, t0, count_op(g, "Where"));
    CHECK_EQ_INT(eng_attn_n_transposes(g), zoo[z].transposes);
    CHECK_EQ_INT(t0 - t1, zoo[z].transposes);
    CHECK_EQ_INT(eng_graph_n_attention(g), 2);  // two layers in every export
    CHECK_EQ_INT(count_op(g, "inferd.Attention"), 2);
    CHECK_EQ_INT(count_op(g, "Softmax"), 0);
    CHECK_EQ_INT(count_op(g, "IsNaN"), 0);
    CHECK_EQ_INT(count_op(g, "Where"), zoo[z].where);
    // inputs: ids (int64), a padding mask with its last positions off
    // (a whole row off in batch row 1 where there are two), or pixels
    int64_t seq = 16, b = zoo[z].batch ? zoo[z].batch : 1;
    eng_tensor ins[4];
    void *bufs[4] = {0};
    size_t n_in = zoo_inputs(g, b, seq, 1, &rng_s, ins, bufs);
    eng_graph_destroy(g);
    // a padding mask expanded over the query rows is read one row a (batch, head), as is ViT
    // TorchScript's mask of constants; GPT's causal masks differ by row, dynamo's ViT has none
    size_t shared = rows_shared(path, ins, n_in);
    printf("  mask read as one row in %zu attention node(s)\n", shared);
    CHECK_EQ_INT(shared, zoo[z].shared);
    float *fused = NULL, *plain = NULL;
    size_t nf = 0, np = 0, cf = 0, cp = 0;
    rc = load_run(path, 1, ins, n_in, &fused, &nf, &cf, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "%s fused: %s\n", zoo[z].model, e.msg);
    rc = load_run(path, 0, ins, n_in, &plain, &np, &cp, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "%s unfused: %s\n", zoo[z].model, e.msg);
    CHECK_EQ_INT(cf, 2);
    CHECK_EQ_INT(cp, 0);  // the switch leaves the graph as exported
    if (fused && plain && nf == np) {
      double w = worst(fused, plain, nf, 1e-4, 1e-5);
      printf("  fused vs unfused: worst %.3g of tolerance (%zu outputs)\n", w, nf);
      CHECK(w <= 1.0);
    } else {
      CHECK(0);
    }
    free(fused);
    free(plain);
    for (int i = 0; i < 4; i++) free(bufs[i]);
  }
}

// --- small models built here

enum {
  V_PLAIN = 0,    // MatMul -> Softmax -> MatMul
  V_SDPA = 1,     // torch SDPA: Mul(Q, c), Mul(Kt, c), Add(mask), IsNaN/Where
  V_GPT = 2,      // Div(MatMul, d) -> Add(causal-style mask) -> Softmax -> MatMul
  // near misses, built on V_SDPA
  V_SCORES_OUT = 3,  // the scores are also a graph output
  V_AXIS = 4,        // Softmax over another axis
  V_DIV_DATA = 5,    // the divisor is input data
  V_WHERE_ONE = 6,   // the NaN Where puts 1, not 0
  V_P_READ = 7,      // the probabilities are read by a second node
};

// Q [B,H,Sq,D], Kt [B,H,D,Sk], V [B,H,Sk,Dv] and mask (dims md) as inputs.
static ob *attn_model(int variant, const int64_t *qd, const int64_t *kd, const int64_t *vd,
                      int mnd, const int64_t *md, float c) {
  ob *b = ob_new(17);
  ob_input(b, "q", F, 4, qd);
  ob_input(b, "kt", F, 4, kd);
  ob_input(b, "v", F, 4, vd);
  int mask = mnd > 0 && variant != V_PLAIN;
  if (mask) ob_input(b, "mask", F, mnd, md);
  int64_t one = 1;
  ob_init(b, "c", F, 1, &one, &c, sizeof c);
  float zero = variant == V_WHERE_ONE ? 1.0f : 0.0f;
  ob_init(b, "zero", F, 0, NULL, &zero, sizeof zero);
  const char *scores = "s";
  if (variant == V_PLAIN) {
    ob_node(b, "MatMul", "mm0", "q,kt", "s");
  } else if (variant == V_GPT || variant == V_DIV_DATA) {
    ob_node(b, "MatMul", "mm0", "q,kt", "s0");
    if (variant == V_DIV_DATA) ob_input(b, "d", F, 0, NULL);
    ob_node(b, "Div", "div", variant == V_DIV_DATA ? "s0,d" : "s0,c", "s1");
    ob_node(b, "Add", "add", mask ? "mask,s1" : "s1,zero", "s");  // mask first: either order
  } else {
    ob_node(b, "Mul", "mq", "q,c", "qs");
    ob_node(b, "Mul", "mk", "c,kt", "ks");
    ob_node(b, "MatMul", "mm0", "qs,ks", "s0");
    if (mask) ob_node(b, "Add", "add", "s0,mask", "s");
    else scores = "s0";
  }
  Onnx__NodeProto *sm = ob_node(b, "Softmax", "sm", scores, "p");
  ob_attr_i(b, sm, "axis", variant == V_AXIS ? 2 : -1);
  const char *pv = "p";
  if (variant != V_PLAIN && variant != V_GPT && variant != V_DIV_DATA) {
    ob_node(b, "IsNaN", "isnan", "p", "nan");
    ob_node(b, "Where", "where", "nan,zero,p", "pz");
    pv = "pz";
  }
  char in[64];
  snprintf(in, sizeof in, "%s,v", pv);
  ob_node(b, "MatMul", "mm1", in, "y");
  ob_output(b, "y", F, -1, NULL);
  if (variant == V_SCORES_OUT) ob_output(b, scores, F, -1, NULL);
  if (variant == V_P_READ) {
    ob_node(b, "Relu", "relu", "p", "p2");
    ob_output(b, "p2", F, -1, NULL);
  }
  return b;
}

typedef struct shape_case {
  int64_t b, h, sq, sk, d, dv;
  int mnd;
  int64_t md[4];
} shape_case;

static void run_small(int variant, const shape_case *c, int expect_fused) {
  int64_t qd[4] = {c->b, c->h, c->sq, c->d}, kd[4] = {c->b, c->h, c->d, c->sk};
  int64_t vd[4] = {c->b, c->h, c->sk, c->dv};
  float cst = variant == V_GPT ? 2.5f : 0.7f;
  ob *m = attn_model(variant, qd, kd, vd, c->mnd, c->md, cst);
  CHECK_EQ_INT(ob_save(m, MODEL), 0);
  size_t nq = (size_t)eng_numel(4, qd), nk = (size_t)eng_numel(4, kd), nv = (size_t)eng_numel(4, vd);
  size_t nm = c->mnd ? (size_t)eng_numel(c->mnd, c->md) : 0;
  float *q = malloc(nq * 4), *kt = malloc(nk * 4), *v = malloc(nv * 4), *mask = malloc(nm * 4 + 4);
  for (size_t i = 0; i < nq; i++) q[i] = urand(-2, 2);
  for (size_t i = 0; i < nk; i++) kt[i] = urand(-2, 2);
  for (size_t i = 0; i < nv; i++) v[i] = urand(-1, 1);
  // some positions off (-inf); with a per-row mask, row 0 entirely off
  for (size_t i = 0; i < nm; i++) mask[i] = i % 3 == 1 ? -INFINITY : urand(-1, 0);
  if (c->mnd == 4 && c->md[2] > 1)
    for (int64_t j = 0; j < c->md[3]; j++) mask[j] = -INFINITY;
  float d = 3.0f;
  eng_tensor ins[5] = {mk(DT_FP32, 4, qd, q), mk(DT_FP32, 4, kd, kt), mk(DT_FP32, 4, vd, v)};
  size_t n_in = 3;
  if (c->mnd && variant != V_PLAIN) ins[n_in++] = mk(DT_FP32, c->mnd, c->md, mask);
  if (variant == V_DIV_DATA) ins[n_in++] = mk(DT_FP32, 0, NULL, &d);
  float *fused = NULL, *plain = NULL;
  size_t nf = 0, np = 0, cf = 0, cp = 0;
  err e = {0};
  int rc = load_run(MODEL, 1, ins, n_in, &fused, &nf, &cf, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "variant %d fused: %s\n", variant, e.msg);
  rc = load_run(MODEL, 0, ins, n_in, &plain, &np, &cp, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "variant %d unfused: %s\n", variant, e.msg);
  CHECK_EQ_INT((int)cf, expect_fused);
  // the reference on the same operands
  size_t no = (size_t)(c->b * c->h * c->sq * c->dv);
  float *want = malloc(no * 4);
  int has_mask = c->mnd && variant != V_PLAIN;
  k_attn_args a = {.b = c->b, .h = c->h, .sq = c->sq, .sk = c->sk, .d = c->d, .dv = c->dv,
                   .q_sb = c->h * c->sq * c->d, .q_sh = c->sq * c->d,
                   .k_sb = c->h * c->d * c->sk, .k_sh = c->d * c->sk,
                   .v_sb = c->h * c->sk * c->dv, .v_sh = c->sk * c->dv,
                   .o_sb = c->h * c->sq * c->dv, .o_sh = c->sq * c->dv,
                   .scale = variant == V_PLAIN ? 1.0f : variant == V_GPT ? 1.0f / cst : cst * cst,
                   .nan_zero = variant == V_SDPA};
  if (has_mask) {  // mask dims right-aligned to [B, H, Sq, Sk]
    int64_t md[4] = {1, 1, 1, 1};
    for (int i = 0; i < c->mnd; i++) md[4 - c->mnd + i] = c->md[i];
    a.m_sk = md[3] == 1 ? 0 : 1;
    a.m_sq = md[2] == 1 ? 0 : md[3];
    a.m_sh = md[1] == 1 ? 0 : md[2] * md[3];
    a.m_sb = md[0] == 1 ? 0 : md[1] * md[2] * md[3];
  }
  k_attn_ref(want, q, kt, v, has_mask ? mask : NULL, &a);
  if (fused && plain && nf == no && np == no) {
    double wf = worst(fused, want, no, 1e-4, 1e-5), wp = worst(plain, want, no, 1e-4, 1e-5);
    printf("variant %d [%lld,%lld,%lld,%lld,%lld,%lld] mask rank %d: fused %zu, worst vs reference %.3g (unfused %.3g)\n",
           variant, (long long)c->b, (long long)c->h, (long long)c->sq, (long long)c->sk,
           (long long)c->d, (long long)c->dv, c->mnd, cf, wf, wp);
    if (variant == V_AXIS) {  // another softmax: not the reference's; left as is
      CHECK(worst(fused, plain, no, 0, 0) == 0.0);
    } else {
      CHECK(wf <= 1.0);
      CHECK(wp <= 1.0);  // the reference is right about the unfused graph too
    }
  } else {
    CHECK(0);
  }
  free(q), free(kt), free(v), free(mask), free(want), free(fused), free(plain);
}

static void test_small(void) {
  static const shape_case cases[] = {
      {2, 3, 5, 7, 4, 6, 4, {2, 1, 1, 7}},   // a padding mask per batch row
      {1, 2, 8, 8, 16, 16, 2, {8, 8}},       // a causal-style [Sq, Sk] mask, row 0 off
      {2, 2, 3, 9, 8, 5, 4, {2, 2, 3, 9}},   // a full mask
      {1, 4, 1, 33, 32, 32, 1, {33}},        // one query row, a rank-1 mask
      {2, 1, 17, 5, 3, 2, 0, {0}},           // no mask
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_small(V_SDPA, &cases[i], 1);
    run_small(V_GPT, &cases[i], 1);
    run_small(V_PLAIN, &cases[i], 1);
  }
  // near misses: left alone, and still right
  run_small(V_SCORES_OUT, &cases[0], 0);
  run_small(V_AXIS, &cases[2], 0);
  run_small(V_P_READ, &cases[0], 0);
}

static void test_near_miss_only(void) {
  // V_DIV_DATA and V_WHERE_ONE compute something else than the reference:
  // only the count is checked, then fused == unfused.
  static const shape_case c = {1, 2, 4, 6, 8, 8, 4, {1, 1, 1, 6}};
  for (int variant = V_DIV_DATA; variant <= V_WHERE_ONE; variant++) {
    int64_t qd[4] = {c.b, c.h, c.sq, c.d}, kd[4] = {c.b, c.h, c.d, c.sk};
    int64_t vd[4] = {c.b, c.h, c.sk, c.dv};
    ob *m = attn_model(variant, qd, kd, vd, c.mnd, c.md, 0.5f);
    CHECK_EQ_INT(ob_save(m, MODEL), 0);
    eng_graph *g = NULL;
    err e = {0};
    CHECK_EQ_INT(eng_graph_load(MODEL, &g, &e), 0);
    if (g) {
      CHECK_EQ_INT(eng_graph_n_attention(g), 0);
      CHECK_EQ_INT(count_op(g, "Softmax"), 1);
    }
    eng_graph_destroy(g);
  }
}

// A model cannot name the internal op.
static void test_internal_name_refused(void) {
  int64_t d[2] = {2, 2};
  ob *b = ob_new(17);
  ob_input(b, "x", F, 2, d);
  ob_node(b, "inferd.Attention", "a", "x,x,x", "y");
  ob_output(b, "y", F, -1, NULL);
  CHECK_EQ_INT(ob_save(b, MODEL), 0);
  eng_graph *g = NULL;
  err e = {0};
  CHECK(eng_graph_load(MODEL, &g, &e) != 0);
  CHECK_CONTAINS(e.msg, "inferd.Attention");
  eng_graph_destroy(g);
}

// --- the heads' layout

// x [B, S, H, D] into y [B, H, S, D] (Q, V: perm 0,2,1,3), or with kt into
// Kt [B, H, D, S] (perm 0,2,3,1); back (!fwd): y [B, S, H, D] from x [B, H, S, D].
static void heads(float *y, const float *x, int64_t b, int64_t s, int64_t h, int64_t d, int kt,
                  int fwd) {
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t si = 0; si < s; si++)
      for (int64_t hi = 0; hi < h; hi++)
        for (int64_t di = 0; di < d; di++) {
          int64_t bshd = ((bi * s + si) * h + hi) * d + di;
          int64_t bh = kt ? ((bi * h + hi) * d + di) * s + si : ((bi * h + hi) * s + si) * d + di;
          if (fwd) y[bh] = x[bshd];
          else y[bshd] = x[bh];
        }
}

typedef struct layout_case {
  int64_t b, h, sq, sk, d, dv;
} layout_case;

// q [B, Sq, H, D], k [B, Sk, H, D], v [B, Sk, H, Dv], mask [B, 1, 1, Sk]
// filled; want [B, Sq, H, Dv] the reference on the transposed copies
// (k_attn_ref packed), transposed back: the unfused graph's layout.
typedef struct layout_data {
  float *q, *k, *v, *mask, *want;
  size_t nq, nk, nv, nm, no;
} layout_data;

static void layout_data_make(const layout_case *c, float scale, int nan_zero, int use_mask,
                             layout_data *x) {
  x->nq = (size_t)(c->b * c->sq * c->h * c->d), x->nk = (size_t)(c->b * c->sk * c->h * c->d);
  x->nv = (size_t)(c->b * c->sk * c->h * c->dv), x->nm = (size_t)(c->b * c->sk);
  x->no = (size_t)(c->b * c->sq * c->h * c->dv);
  x->q = malloc(x->nq * 4 + 4), x->k = malloc(x->nk * 4 + 4), x->v = malloc(x->nv * 4 + 4);
  x->mask = malloc(x->nm * 4 + 4), x->want = malloc(x->no * 4 + 4);
  for (size_t i = 0; i < x->nq; i++) x->q[i] = urand(-2, 2);
  for (size_t i = 0; i < x->nk; i++) x->k[i] = urand(-2, 2);
  for (size_t i = 0; i < x->nv; i++) x->v[i] = urand(-1, 1);
  for (size_t i = 0; i < x->nm; i++) x->mask[i] = i % 4 == 3 ? -INFINITY : urand(-1, 0);
  float *qh = malloc(x->nq * 4 + 4), *kt = malloc(x->nk * 4 + 4), *vh = malloc(x->nv * 4 + 4);
  float *oh = malloc(x->no * 4 + 4);
  heads(qh, x->q, c->b, c->sq, c->h, c->d, 0, 1);
  heads(kt, x->k, c->b, c->sk, c->h, c->d, 1, 1);
  heads(vh, x->v, c->b, c->sk, c->h, c->dv, 0, 1);
  k_attn_args a = {.b = c->b, .h = c->h, .sq = c->sq, .sk = c->sk, .d = c->d, .dv = c->dv,
                   .q_sb = c->h * c->sq * c->d, .q_sh = c->sq * c->d,
                   .k_sb = c->h * c->d * c->sk, .k_sh = c->d * c->sk,
                   .v_sb = c->h * c->sk * c->dv, .v_sh = c->sk * c->dv,
                   .o_sb = c->h * c->sq * c->dv, .o_sh = c->sq * c->dv,
                   .m_sb = c->sk, .m_sk = 1, .scale = scale, .nan_zero = nan_zero};
  k_attn_ref(oh, qh, kt, vh, use_mask ? x->mask : NULL, &a);
  heads(x->want, oh, c->b, c->sq, c->h, c->dv, 0, 0);
  free(qh), free(kt), free(vh), free(oh);
}

static void layout_data_free(layout_data *x) {
  free(x->q), free(x->k), free(x->v), free(x->mask), free(x->want);
}

// The reference reading [B, S, H, D] through its row strides (K key-major)
// and writing [B, Sq, H, Dv] gives exactly the transposed copies' result:
// the same sums in the same order.
static void test_ref_strides(void) {
  static const layout_case cases[] = {{2, 3, 5, 7, 4, 6}, {1, 4, 16, 16, 8, 8}, {3, 2, 1, 9, 5, 3}};
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    const layout_case *c = &cases[t];
    layout_data x;
    layout_data_make(c, 0.35f, 1, 1, &x);
    float *got = malloc(x.no * 4 + 4);
    for (size_t i = 0; i < x.no; i++) got[i] = NAN;  // every element must be written
    int64_t hd = c->h * c->d, hdv = c->h * c->dv;
    k_attn_args a = {.b = c->b, .h = c->h, .sq = c->sq, .sk = c->sk, .d = c->d, .dv = c->dv,
                     .q_sb = c->sq * hd, .q_sh = c->d, .q_ss = hd,
                     .k_sb = c->sk * hd, .k_sh = c->d, .k_sd = 1, .k_sk = hd,
                     .v_sb = c->sk * hdv, .v_sh = c->dv, .v_ss = hdv,
                     .o_sb = c->sq * hdv, .o_sh = c->dv, .o_ss = hdv,
                     .m_sb = c->sk, .m_sk = 1, .scale = 0.35f, .nan_zero = 1};
    k_attn_ref(got, x.q, x.k, x.v, x.mask, &a);
    double w = worst(got, x.want, x.no, 0, 0);
    printf("reference strided [%lld,%lld,%lld,%lld,%lld,%lld]: worst %g (exact: 0)\n", (long long)c->b,
           (long long)c->h, (long long)c->sq, (long long)c->sk, (long long)c->d, (long long)c->dv, w);
    CHECK(w == 0.0);
    free(got);
    layout_data_free(&x);
  }
}

enum {
  L_ALL = 0,      // SDPA form, all four Transposes taken in
  L_GPT = 1,      // Div form, no mask: all four
  L_K_TWO = 2,    // K as dynamo's detour: Transpose(0,2,1,3) then (0,1,3,2): Q, V, O only
  L_Q_OUT = 3,    // Q's transposed value also a graph output: K, V, O only
  L_O_OUT = 4,    // the node's own output also a graph output: Q, K, V only
  L_NO_OUT_T = 5, // the output not transposed (read as [B, H, Sq, Dv]): Q, K, V; compared transposed
};

// The exporters' layout around the pattern: Reshape [B, S, H*D] is left
// out (the inputs come as [B, S, H, D]); the output's Reshape to
// [B, Sq, H*Dv] is there (it reads the fused node's output as a view).
static ob *layout_model(int variant, const layout_case *c, float cst) {
  int64_t qd[4] = {c->b, c->sq, c->h, c->d}, kd[4] = {c->b, c->sk, c->h, c->d};
  int64_t vd[4] = {c->b, c->sk, c->h, c->dv}, md[4] = {c->b, 1, 1, c->sk};
  static const int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1}, p0132[4] = {0, 1, 3, 2};
  ob *b = ob_new(17);
  ob_input(b, "q", F, 4, qd);
  ob_input(b, "k", F, 4, kd);
  ob_input(b, "v", F, 4, vd);
  if (variant != L_GPT) ob_input(b, "mask", F, 4, md);
  int64_t one = 1, shp[3] = {c->b, c->sq, c->h * c->dv}, three = 3;
  ob_init(b, "c", F, 1, &one, &cst, sizeof cst);
  ob_init(b, "shape", I64, 1, &three, shp, sizeof shp);
  float zero = 0.0f;
  ob_init(b, "zero", F, 0, NULL, &zero, sizeof zero);
  ob_attr_ints(b, ob_node(b, "Transpose", "tq", "q", "qh"), "perm", 4, p0213);
  if (variant == L_K_TWO) {
    ob_attr_ints(b, ob_node(b, "Transpose", "tk0", "k", "kh"), "perm", 4, p0213);
    ob_attr_ints(b, ob_node(b, "Transpose", "tk", "kh", "kt"), "perm", 4, p0132);
  } else {
    ob_attr_ints(b, ob_node(b, "Transpose", "tk", "k", "kt"), "perm", 4, p0231);
  }
  ob_attr_ints(b, ob_node(b, "Transpose", "tv", "v", "vh"), "perm", 4, p0213);
  if (variant == L_GPT) {
    ob_node(b, "MatMul", "mm0", "qh,kt", "s0");
    ob_node(b, "Div", "div", "s0,c", "s");
  } else {
    ob_node(b, "Mul", "mq", "qh,c", "qs");
    ob_node(b, "Mul", "mk", "c,kt", "ks");
    ob_node(b, "MatMul", "mm0", "qs,ks", "s0");
    ob_node(b, "Add", "add", "s0,mask", "s");
  }
  ob_attr_i(b, ob_node(b, "Softmax", "sm", "s", "p"), "axis", -1);
  const char *pv = "p";
  if (variant != L_GPT) {
    ob_node(b, "IsNaN", "isnan", "p", "nan");
    ob_node(b, "Where", "where", "nan,zero,p", "pz");
    pv = "pz";
  }
  char in[64];
  snprintf(in, sizeof in, "%s,vh", pv);
  ob_node(b, "MatMul", "mm1", in, "oh");
  if (variant == L_NO_OUT_T) {
    ob_output(b, "oh", F, -1, NULL);
  } else {
    ob_attr_ints(b, ob_node(b, "Transpose", "to", "oh", "o"), "perm", 4, p0213);
    ob_node(b, "Reshape", "r", "o,shape", "y");
    ob_output(b, "y", F, -1, NULL);
  }
  if (variant == L_Q_OUT) ob_output(b, "qh", F, -1, NULL);
  if (variant == L_O_OUT) ob_output(b, "oh", F, -1, NULL);
  return b;
}

static void run_layout(int variant, const layout_case *c, size_t want_absorbed) {
  float cst = variant == L_GPT ? 2.5f : 0.6f;
  float scale = variant == L_GPT ? 1.0f / cst : cst * cst;
  CHECK_EQ_INT(ob_save(layout_model(variant, c, cst), MODEL), 0);
  layout_data x;
  layout_data_make(c, scale, variant != L_GPT, variant != L_GPT, &x);
  // what the pass did: Transposes taken in, and those left (of 4, 5 with K's detour)
  eng_graph *g = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_graph_load(MODEL, &g, &e), 0);
  size_t absorbed = g ? eng_attn_n_transposes(g) : 0, left = g ? count_op(g, "Transpose") : 0;
  size_t total = variant == L_K_TWO ? 5 : variant == L_NO_OUT_T ? 3 : 4;
  if (g) {
    CHECK_EQ_INT(eng_graph_n_attention(g), 1);
    CHECK_EQ_INT(absorbed, want_absorbed);
    CHECK_EQ_INT(left, total - want_absorbed);
  }
  eng_graph_destroy(g);
  int64_t qd[4] = {c->b, c->sq, c->h, c->d}, kd[4] = {c->b, c->sk, c->h, c->d};
  int64_t vd[4] = {c->b, c->sk, c->h, c->dv}, md[4] = {c->b, 1, 1, c->sk};
  eng_tensor ins[4] = {mk(DT_FP32, 4, qd, x.q), mk(DT_FP32, 4, kd, x.k), mk(DT_FP32, 4, vd, x.v),
                       mk(DT_FP32, 4, md, x.mask)};
  size_t n_in = variant == L_GPT ? 3 : 4;
  float *fused = NULL, *plain = NULL;
  size_t nf = 0, np = 0, cf = 0, cp = 0;
  int rc = load_run(MODEL, 1, ins, n_in, &fused, &nf, &cf, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "layout %d fused: %s\n", variant, e.msg);
  rc = load_run(MODEL, 0, ins, n_in, &plain, &np, &cp, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "layout %d unfused: %s\n", variant, e.msg);
  if (variant == L_NO_OUT_T && fused && plain && nf == x.no && np == x.no) {
    // output 0 is [B, H, Sq, Dv]: bring it to want's [B, Sq, H, Dv]
    float *t = malloc(x.no * 4 + 4);
    heads(t, fused, c->b, c->sq, c->h, c->dv, 0, 0);
    memcpy(fused, t, x.no * 4);
    heads(t, plain, c->b, c->sq, c->h, c->dv, 0, 0);
    memcpy(plain, t, x.no * 4);
    free(t);
  }
  if (fused && plain && nf == x.no && np == x.no) {
    double wf = worst(fused, x.want, x.no, 1e-4, 1e-5), wp = worst(plain, x.want, x.no, 1e-4, 1e-5);
    printf("layout %d [%lld,%lld,%lld,%lld,%lld,%lld]: %zu Transposes taken in, %zu left; worst vs "
           "reference %.3g (unfused %.3g)\n",
           variant, (long long)c->b, (long long)c->h, (long long)c->sq, (long long)c->sk,
           (long long)c->d, (long long)c->dv, absorbed, left, wf, wp);
    CHECK(wf <= 1.0);
    CHECK(wp <= 1.0);
  } else {
    CHECK(0);
  }
  free(fused), free(plain);
  layout_data_free(&x);
}

static void test_layout(void) {
  static const layout_case cases[] = {
      {2, 3, 5, 7, 4, 6},     // Sq != Sk, d != dv
      {1, 4, 16, 16, 8, 8},   // one batch row
      {3, 2, 1, 9, 5, 3},     // one query row (the batch dims of O would merge)
      {2, 2, 6, 1, 3, 3},     // one key (those of K and V would)
      {2, 1, 3, 4, 1, 2},     // one head of size 1: K's strides both 1, packed-looking
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_layout(L_ALL, &cases[i], 4);
    run_layout(L_GPT, &cases[i], 4);
  }
  run_layout(L_K_TWO, &cases[0], 3);
  run_layout(L_Q_OUT, &cases[0], 3);
  run_layout(L_O_OUT, &cases[0], 3);
  run_layout(L_NO_OUT_T, &cases[0], 3);
}

int main(void) {
  test_internal_name_refused();
  test_ref_strides();
  test_layout();
  test_small();
  test_near_miss_only();
  test_zoo();
  CHECK_DONE();
}
