// tests/unit/engine/test_ops_conv.c: the conv/pool family (engine/ops/conv/conv.c).
// The ONNX shape rules (auto_pad, ceil_mode, ConvTranspose's output_shape
// and output_padding) against hand-computed sizes and pads; the oneDNN path
// (run_state) against the C reference (run, kernels/conv/k_conv.c) on random data
// for many attribute combinations, twice per geometry and across batch sizes
// so the primitive cache is exercised; attribute parsing and refusals
// through the real loader and planner.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/graph/graph.h"
#include "engine/ops/ops.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"
#include "onnx_build.h"

#define MODEL "ops_conv_model.onnx"
#include "plan_case.h"
enum { F = 1 };

static uint32_t rng_state = 777;
static float frand(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

// A float tensor; data NULL: a shape only (the hostile shapes' element
// counts overflow, so no byte count is taken).
static eng_tensor ft(int nd, const int64_t *dims, void *data) {
  eng_tensor t = {DT_FP32, nd, {0}, data, 0};
  for (int i = 0; i < nd; i++) t.dims[i] = dims[i];
  if (data) t.bytes = (size_t)eng_numel(nd, t.dims) * 4;
  return t;
}

// Attributes for an nsp-dim op with kernel k, everything else at defaults.
static eng_conv_attrs attrs(eng_conv_kind kind, int nsp, const int64_t *k) {
  eng_conv_attrs a;
  memset(&a, 0, sizeof a);
  a.kind = kind;
  a.nsp = nsp;
  a.group = 1;
  for (int i = 0; i < nsp; i++) {
    a.kernel[i] = k ? k[i] : 1;
    a.strides[i] = a.dils[i] = 1;
  }
  a.has_kernel = 1;
  return a;
}

// --- shape rules

// Geometry of a 1-D op on x of length xl (1 channel; conv kinds get a 1x1xk W).
static int geom1(const eng_conv_attrs *a, int64_t xl, k_window *g, err *e) {
  int64_t xd[3] = {1, 1, xl}, wd[3] = {1, 1, a->kernel[0]};
  eng_tensor x = ft(3, xd, NULL), w = ft(3, wd, NULL);
  return eng_conv_window(a, &x, &w, g, e);
}

static void expect_dim(eng_conv_attrs a, int64_t xl, int64_t y, int64_t pl, int64_t pr,
                       const char *what) {
  k_window g;
  err e = {0};
  int rc = geom1(&a, xl, &g, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "%s: %s\n", what, e.msg);
    return;
  }
  if (g.y[0] != y || g.pad_l[0] != pl || g.pad_r[0] != pr)
    fprintf(stderr, "%s: got y %lld pads %lld/%lld\n", what, (long long)g.y[0],
            (long long)g.pad_l[0], (long long)g.pad_r[0]);
  CHECK_EQ_INT(g.y[0], y);
  CHECK_EQ_INT(g.pad_l[0], pl);
  CHECK_EQ_INT(g.pad_r[0], pr);
}

static void test_shape_rules(void) {
  int64_t k3[1] = {3}, k4[1] = {4}, k2[1] = {2};
  eng_conv_attrs a = attrs(ENG_CONV, 1, k3);
  expect_dim(a, 7, 5, 0, 0, "conv plain");
  a.strides[0] = 2;
  a.pads[0] = 1;  // asymmetric: 1 before, 0 after
  expect_dim(a, 7, 3, 1, 0, "conv stride 2, pads 1/0");
  a = attrs(ENG_CONV, 1, k3);
  a.strides[0] = 2;
  a.auto_pad = ENG_PAD_SAME_UPPER;
  expect_dim(a, 7, 4, 1, 1, "SAME_UPPER even total");
  a = attrs(ENG_CONV, 1, k4);
  a.auto_pad = ENG_PAD_SAME_UPPER;
  expect_dim(a, 6, 6, 1, 2, "SAME_UPPER odd total: the extra pad at the end");
  a.auto_pad = ENG_PAD_SAME_LOWER;
  expect_dim(a, 6, 6, 2, 1, "SAME_LOWER odd total: the extra pad at the beginning");
  a = attrs(ENG_CONV, 1, k3);
  a.dils[0] = 2;
  a.strides[0] = 2;
  a.auto_pad = ENG_PAD_VALID;
  a.pads[0] = a.pads[1] = 5;  // ignored under VALID
  expect_dim(a, 7, 2, 0, 0, "VALID with dilation 2 (span 5)");
  a = attrs(ENG_CONV, 1, k3);
  a.strides[0] = 3;
  a.auto_pad = ENG_PAD_SAME_UPPER;
  expect_dim(a, 1, 1, 1, 1, "SAME on a length-1 input");

  // ceil_mode: pools only; the last window may not start in the end pad
  a = attrs(ENG_POOL_MAX, 1, k2);
  a.strides[0] = 2;
  expect_dim(a, 5, 2, 0, 0, "floor");
  a.ceil_mode = 1;
  expect_dim(a, 5, 3, 0, 0, "ceil adds the partial window");
  a.pads[0] = a.pads[1] = 1;
  expect_dim(a, 5, 3, 1, 1, "ceil: a window starting in the end pad is dropped");
  a.strides[0] = 3;
  expect_dim(a, 5, 2, 1, 1, "ceil stride 3: dropped again");
  a.pads[0] = a.pads[1] = 0;
  expect_dim(a, 6, 2, 0, 0, "ceil with an exact fit adds nothing");
  a.auto_pad = ENG_PAD_SAME_UPPER;
  expect_dim(a, 5, 2, 0, 0, "ceil_mode does not change SAME");

  // ConvTranspose
  a = attrs(ENG_CONV_TRANSPOSE, 1, k3);
  a.strides[0] = 2;
  expect_dim(a, 3, 7, 0, 0, "convT plain: (x-1)*s + k");
  a.pads[0] = a.pads[1] = 1;
  a.out_pad[0] = 1;
  expect_dim(a, 3, 6, 1, 1, "convT pads 1 + output_padding 1");
  a = attrs(ENG_CONV_TRANSPOSE, 1, k3);
  a.strides[0] = 2;
  a.has_out_shape = 1;
  a.out_shape[0] = 6;
  expect_dim(a, 3, 6, 1, 0, "convT output_shape: odd pad at the beginning");
  a.has_out_shape = 0;
  a.auto_pad = ENG_PAD_SAME_UPPER;
  expect_dim(a, 3, 6, 0, 1, "convT SAME_UPPER: x*s, odd pad at the end");
  a.auto_pad = ENG_PAD_SAME_LOWER;
  expect_dim(a, 3, 6, 1, 0, "convT SAME_LOWER");
  a = attrs(ENG_CONV_TRANSPOSE, 1, k2);
  a.strides[0] = 2;
  a.dils[0] = 2;
  a.out_pad[0] = 1;
  expect_dim(a, 4, 10, 0, 0, "convT dilation 2 + output_padding 1");
}

static void expect_geom_error(eng_conv_attrs a, int nd, const int64_t *xd, const int64_t *wd,
                              const char *needle) {
  eng_tensor x = ft(nd, xd, NULL), w = ft(nd, wd ? wd : xd, NULL);
  k_window g;
  err e = {0};
  int rc = eng_conv_window(&a, &x, &w, &g, &e);
  CHECK(rc != 0);
  CHECK_CONTAINS(e.msg, needle);
}

static void test_shape_errors(void) {
  int64_t k5[2] = {5, 5}, k3[2] = {3, 3};
  int64_t x4[4] = {1, 2, 4, 4}, w5[4] = {3, 2, 5, 5};
  expect_geom_error(attrs(ENG_CONV, 2, k5), 4, x4, w5, "spans 5");
  eng_conv_attrs a = attrs(ENG_CONV, 2, k3);
  a.group = 3;
  int64_t w3[4] = {3, 1, 3, 3};
  expect_geom_error(a, 4, x4, w3, "not a multiple of group 3");
  a.group = 1;
  int64_t wbad[4] = {3, 5, 3, 3};
  expect_geom_error(a, 4, x4, wbad, "does not fit");
  int64_t x3[3] = {1, 2, 4};
  expect_geom_error(a, 3, x3, x3, "rank 3, expected 4");
  // hostile sizes: each dim allowed, their product not
  int64_t huge[4] = {(int64_t)1 << 40, (int64_t)1 << 40, 4, 4}, w1[4] = {1, (int64_t)1 << 40, 1, 1};
  int64_t k1[2] = {1, 1};
  expect_geom_error(attrs(ENG_CONV, 2, k1), 4, huge, w1, "overflows");
  int64_t too_big[4] = {1, 2, (int64_t)1 << 50, 4};
  expect_geom_error(attrs(ENG_POOL_MAX, 2, k1), 4, too_big, NULL, "dim 2 is");
  eng_conv_attrs t = attrs(ENG_CONV_TRANSPOSE, 2, k3);
  t.has_out_shape = 1;
  t.out_shape[0] = t.out_shape[1] = 100;
  int64_t wt[4] = {2, 1, 3, 3};
  expect_geom_error(t, 4, x4, wt, "exceeds");
  expect_geom_error(attrs(ENG_POOL_GLOBAL_AVG, 0, NULL), 2, x4, NULL, "rank 2");
}

// --- oneDNN against the reference

typedef struct combo {
  const char *name;
  eng_conv_kind kind;
  int nsp;
  int64_t n, c, m, group;  // m: output channels (convs)
  int64_t x[3], k[3], s[3], d[3], pads[6], out_pad[3];
  eng_auto_pad auto_pad;
  int bias, ceil_mode, include_pad;
} combo;

static const combo combos[] = {
    {"conv 3x3 pad 1 bias", ENG_CONV, 2, 2, 3, 8, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 1, 0, 0},
    {"conv 3x3 no bias", ENG_CONV, 2, 1, 4, 5, 1, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {0}, {0}, 0, 0, 0, 0},
    {"conv 1x1", ENG_CONV, 2, 3, 16, 8, 1, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {0}, {0}, 0, 1, 0, 0},
    {"conv stride 2 asym pads", ENG_CONV, 2, 2, 3, 6, 1, {11, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 2, 1}, {0}, 0, 1, 0, 0},
    {"conv dilation 2", ENG_CONV, 2, 1, 4, 4, 1, {12, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, {0}, 0, 1, 0, 0},
    {"conv groups 2", ENG_CONV, 2, 2, 6, 4, 2, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 1, 0, 0},
    {"conv depthwise", ENG_CONV, 2, 2, 8, 8, 8, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 1, 0, 0},
    {"conv depthwise x2 (m = 2c)", ENG_CONV, 2, 1, 4, 8, 4, {7, 7}, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, {0}, 0, 0, 0, 0},
    {"conv SAME_UPPER stride 2", ENG_CONV, 2, 1, 3, 4, 1, {8, 7}, {4, 3}, {2, 2}, {1, 1}, {0}, {0}, ENG_PAD_SAME_UPPER, 1, 0, 0},
    {"conv SAME_LOWER", ENG_CONV, 2, 1, 3, 4, 1, {6, 6}, {4, 2}, {1, 1}, {1, 1}, {0}, {0}, ENG_PAD_SAME_LOWER, 1, 0, 0},
    {"conv VALID rectangular", ENG_CONV, 2, 1, 2, 3, 1, {9, 5}, {5, 1}, {2, 1}, {1, 1}, {0}, {0}, ENG_PAD_VALID, 0, 0, 0},
    {"conv 1-D", ENG_CONV, 1, 2, 3, 5, 1, {17}, {5}, {2}, {2}, {3, 1}, {0}, 0, 1, 0, 0},
    {"conv 3-D", ENG_CONV, 3, 1, 2, 3, 1, {5, 6, 4}, {3, 3, 2}, {1, 2, 1}, {1, 1, 1}, {1, 1, 0, 1, 0, 1}, {0}, 0, 1, 0, 0},
    {"convT stride 2 pads 1 out_pad 1", ENG_CONV_TRANSPOSE, 2, 2, 4, 3, 1, {5, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 1, 0, 0},
    {"convT groups 2 no bias", ENG_CONV_TRANSPOSE, 2, 1, 4, 6, 2, {4, 4}, {2, 2}, {2, 2}, {1, 1}, {0}, {0}, 0, 0, 0, 0},
    {"convT dilation 2 asym pads", ENG_CONV_TRANSPOSE, 2, 1, 3, 2, 1, {5, 5}, {3, 3}, {1, 2}, {2, 2}, {1, 0, 0, 2}, {0}, 0, 1, 0, 0},
    {"convT out_pad beyond the end pad", ENG_CONV_TRANSPOSE, 2, 1, 2, 2, 1, {3, 3}, {2, 2}, {2, 2}, {1, 1}, {0}, {1, 1}, 0, 1, 0, 0},
    {"convT SAME_UPPER", ENG_CONV_TRANSPOSE, 2, 1, 2, 3, 1, {3, 4}, {3, 3}, {2, 2}, {1, 1}, {0}, {0}, ENG_PAD_SAME_UPPER, 1, 0, 0},
    {"convT 1-D", ENG_CONV_TRANSPOSE, 1, 2, 3, 2, 1, {6}, {4}, {3}, {1}, {1, 2}, {0}, 0, 1, 0, 0},
    {"maxpool 3x3 s2 p1", ENG_POOL_MAX, 2, 2, 3, 0, 1, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 0, 0, 0},
    {"maxpool ceil", ENG_POOL_MAX, 2, 1, 2, 0, 1, {8, 7}, {3, 2}, {2, 2}, {1, 1}, {0}, {0}, 0, 0, 1, 0},
    {"maxpool dilation 2 asym pads", ENG_POOL_MAX, 2, 1, 2, 0, 1, {9, 9}, {2, 3}, {1, 2}, {2, 2}, {1, 0, 0, 1}, {0}, 0, 0, 0, 0},
    {"maxpool SAME_LOWER 1-D", ENG_POOL_MAX, 1, 2, 3, 0, 1, {10}, {4}, {3}, {1}, {0}, {0}, ENG_PAD_SAME_LOWER, 0, 0, 0},
    {"avgpool exclude pad", ENG_POOL_AVG, 2, 2, 3, 0, 1, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 0, 0, 0},
    {"avgpool include pad", ENG_POOL_AVG, 2, 2, 3, 0, 1, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 0, 0, 1},
    {"avgpool ceil include pad", ENG_POOL_AVG, 2, 1, 2, 0, 1, {8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 1}, {0}, 0, 0, 1, 1},
    {"avgpool ceil exclude pad", ENG_POOL_AVG, 2, 1, 2, 0, 1, {8, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 1}, {0}, 0, 0, 1, 0},
    {"avgpool ceil no pads include", ENG_POOL_AVG, 2, 1, 2, 0, 1, {5, 6}, {2, 2}, {2, 2}, {1, 1}, {0}, {0}, 0, 0, 1, 1},
    {"avgpool SAME_UPPER include", ENG_POOL_AVG, 2, 1, 2, 0, 1, {5, 6}, {3, 2}, {2, 2}, {1, 1}, {0}, {0}, ENG_PAD_SAME_UPPER, 0, 0, 1},
    {"avgpool 3-D", ENG_POOL_AVG, 3, 1, 2, 0, 1, {4, 5, 6}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, {0, 1, 1, 0, 1, 1}, {0}, 0, 0, 0, 1},
    {"global avgpool", ENG_POOL_GLOBAL_AVG, 2, 2, 5, 0, 1, {7, 6}, {0}, {0}, {0}, {0}, {0}, 0, 0, 0, 0},
    {"global maxpool 1-D", ENG_POOL_GLOBAL_MAX, 1, 2, 5, 0, 1, {9}, {0}, {0}, {0}, {0}, {0}, 0, 0, 0, 0},
};

static const char *op_name(eng_conv_kind k) {
  static const char *names[] = {"", "Conv", "ConvTranspose", "MaxPool", "AveragePool",
                                "GlobalAveragePool", "GlobalMaxPool"};
  return names[k];
}

// Runs one combo at batch size n through both paths; st carries the
// oneDNN cache across calls, so w (the node's constant, which oneDNN may
// use in place) is the caller's, the same buffer each time; its values and
// b's are seeded by the combo.
static void compare_once(const combo *c, int64_t n, eng_op_state *st, const eng_op_params *p,
                         float *w) {
  uint32_t x_state = rng_state;
  rng_state = (uint32_t)(c - combos) * 7919u + 1u;
  const eng_op_def *def = eng_ops_cpu_find(op_name(c->kind));
  CHECK(def && def->run && def->run_state);
  if (!def) return;
  int conv = c->kind == ENG_CONV || c->kind == ENG_CONV_TRANSPOSE;
  int64_t xd[5] = {n, c->c}, wd[5], bd[1] = {c->m};
  for (int i = 0; i < c->nsp; i++) xd[2 + i] = c->x[i];
  if (c->kind == ENG_CONV) {
    wd[0] = c->m;
    wd[1] = c->c / c->group;
  } else {
    wd[0] = c->c;
    wd[1] = c->m / c->group;
  }
  for (int i = 0; i < c->nsp; i++) wd[2 + i] = c->k[i];
  size_t nx = (size_t)eng_numel(2 + c->nsp, xd), nw = conv ? (size_t)eng_numel(2 + c->nsp, wd) : 0;
  float *x = malloc(nx * 4), *b = malloc((size_t)(c->m + 1) * 4);
  for (size_t i = 0; i < nw; i++) w[i] = frand();
  for (int64_t i = 0; i < c->m; i++) b[i] = frand();
  rng_state = x_state;
  for (size_t i = 0; i < nx; i++) x[i] = frand();
  eng_tensor in[3] = {ft(2 + c->nsp, xd, x), ft(2 + c->nsp, wd, w), ft(1, bd, b)};
  int n_in = conv ? (c->bias ? 3 : 2) : 1;
  eng_tensor out[1];
  memset(out, 0, sizeof out);
  out[0].dt = DT_FP32;
  err e = {0};
  int rc = def->infer(p, in, n_in, out, 1, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "%s: infer: %s\n", c->name, e.msg);
    goto done;
  }
  size_t ny = (size_t)eng_numel(out[0].ndims, out[0].dims);
  float *yr = malloc(ny * 4), *yd = malloc(ny * 4);
  for (size_t i = 0; i < ny; i++) yd[i] = NAN;  // every output must be written
  eng_tensor o_ref = out[0], o_dnnl = out[0];
  o_ref.data = yr;
  o_dnnl.data = yd;
  rc = def->run(p, in, n_in, &o_ref, 1, &e);
  CHECK_EQ_INT(rc, 0);
  rc = def->run_state(st, p, in, n_in, &o_dnnl, 1, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s: oneDNN: %s\n", c->name, e.msg);
  int bad = 0;
  for (size_t i = 0; i < ny && !rc; i++)
    if (!(fabs(yr[i] - yd[i]) <= 2e-4 + 1e-4 * fabs(yr[i]))) {
      if (bad++ < 3)
        fprintf(stderr, "%s (batch %lld): [%zu] oneDNN %.7g reference %.7g\n", c->name,
                (long long)n, i, yd[i], yr[i]);
    }
  CHECK_EQ_INT(bad, 0);
  if (conv && !rc) {
    // the same with the plan's fusions: act(conv + add), one cache entry per
    // activation; the addend spans [-8, 8] so every clamp is reached
    static const struct {
      eng_dnnl_act act;
      float alpha, beta;
    } acts[] = {{ENG_DNNL_ACT_RELU, 0, 0},          {ENG_DNNL_ACT_SIGMOID, 0, 0},
                {ENG_DNNL_ACT_SILU, 0, 0},          {ENG_DNNL_ACT_HARD_SWISH, 0, 0},
                {ENG_DNNL_ACT_HARD_SIGMOID, 0.2f, 0.5f}, {ENG_DNNL_ACT_CLIP, -0.5f, 6.0f}};
    float *add = malloc(ny * 4);
    for (size_t i = 0; i < ny; i++) add[i] = 8 * frand();
    eng_tensor ta = out[0];
    ta.data = add;
    for (size_t q = 0; q < sizeof acts / sizeof acts[0] && !rc; q++) {
      for (size_t i = 0; i < ny; i++) yd[i] = NAN;
      st->post_add = &ta;
      st->post_act = acts[q].act;
      st->act_alpha = acts[q].alpha;
      st->act_beta = acts[q].beta;
      rc = def->run_state(st, p, in, n_in, &o_dnnl, 1, &e);
      st->post_add = NULL;
      st->post_act = ENG_DNNL_ACT_NONE;
      CHECK_EQ_INT(rc, 0);
      if (rc) fprintf(stderr, "%s: oneDNN fused act %d: %s\n", c->name, (int)acts[q].act, e.msg);
      bad = 0;
      for (size_t i = 0; i < ny && !rc; i++) {
        double v = (double)yr[i] + add[i], a = acts[q].alpha, bb = acts[q].beta, want = v;
        switch (acts[q].act) {
          case ENG_DNNL_ACT_NONE: break;
          case ENG_DNNL_ACT_RELU: want = v > 0 ? v : 0; break;
          case ENG_DNNL_ACT_SIGMOID: want = 1 / (1 + exp(-v)); break;
          case ENG_DNNL_ACT_SILU: want = v / (1 + exp(-v)); break;
          case ENG_DNNL_ACT_HARD_SWISH: want = v * fmin(1, fmax(0, v / 6 + 0.5)); break;
          case ENG_DNNL_ACT_HARD_SIGMOID: want = fmin(1, fmax(0, a * v + bb)); break;
          case ENG_DNNL_ACT_CLIP: want = fmin(bb, fmax(a, v)); break;
        }
        if (!(fabs(want - yd[i]) <= 2e-4 + 1e-4 * fabs(want)) && bad++ < 3)
          fprintf(stderr, "%s (batch %lld, fused act %d): [%zu] oneDNN %.7g want %.7g\n",
                  c->name, (long long)n, (int)acts[q].act, i, yd[i], want);
      }
      CHECK_EQ_INT(bad, 0);
    }
    free(add);
  }
  free(yr);
  free(yd);
done:
  free(x);
  free(b);
}

static void test_dnnl_vs_reference(void) {
  eng_op_ctx *ctx = NULL;
  for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
    const combo *c = &combos[i];
    eng_op_params p;
    memset(&p, 0, sizeof p);
    p.conv = attrs(c->kind, c->kind == ENG_POOL_GLOBAL_AVG || c->kind == ENG_POOL_GLOBAL_MAX ? 0 : c->nsp, c->k);
    p.conv.group = c->group;
    p.conv.auto_pad = c->auto_pad;
    p.conv.ceil_mode = c->ceil_mode;
    p.conv.count_include_pad = c->include_pad;
    for (int d = 0; d < c->nsp && p.conv.nsp; d++) {
      p.conv.strides[d] = c->s[d];
      p.conv.dils[d] = c->d[d];
      p.conv.out_pad[d] = c->out_pad[d];
    }
    for (int d = 0; d < 2 * c->nsp; d++) p.conv.pads[d] = c->pads[d];
    eng_op_state st = {.node = NULL, .ctx = &ctx};
    const eng_op_def *def = eng_ops_cpu_find(op_name(c->kind));
    size_t nw = (size_t)c->m * (size_t)(c->c / (c->group > 0 ? c->group : 1));
    for (int d = 0; d < c->nsp; d++) nw *= (size_t)c->k[d];
    float *w = malloc((nw + 1) * 4);
    // batch n, then 1 (a second geometry), then n again (from the cache)
    compare_once(c, c->n, &st, &p, w);
    compare_once(c, 1, &st, &p, w);
    compare_once(c, c->n, &st, &p, w);
    if (def && st.node) def->destroy(st.node);
    free(w);
  }
  CHECK(ctx != NULL);
  eng_op_ctx_destroy(ctx);
}

// --- through the loader and planner

// x [N,2,6,6] -> Conv(3x3, 4 out, SAME_UPPER, stride 2, bias) -> MaxPool(2x2, ceil)
// -> GlobalAveragePool, planned for batches up to 4 and run at 3, 1, 3.
static void test_plan_chain(void) {
  float w[4 * 2 * 9], bias[4];
  for (size_t i = 0; i < sizeof w / 4; i++) w[i] = frand();
  for (int i = 0; i < 4; i++) bias[i] = frand();
  ob *b = ob_new(17);
  int64_t xd[4] = {-1, 2, 6, 6}, wd[4] = {4, 2, 3, 3}, bd[1] = {4}, yd[4] = {-1, 4, 1, 1};
  ob_input(b, "x", F, 4, xd);
  ob_init(b, "w", F, 4, wd, w, sizeof w);
  ob_init(b, "b", F, 1, bd, bias, sizeof bias);
  Onnx__NodeProto *n = ob_node(b, "Conv", "conv", "x,w,b", "c");
  int64_t two[2] = {2, 2};
  ob_attr_s(b, n, "auto_pad", "SAME_UPPER");
  ob_attr_ints(b, n, "strides", 2, two);
  n = ob_node(b, "MaxPool", "pool", "c", "p");
  ob_attr_ints(b, n, "kernel_shape", 2, two);
  ob_attr_ints(b, n, "strides", 2, two);
  ob_attr_i(b, n, "ceil_mode", 1);
  ob_node(b, "GlobalAveragePool", "gap", "p", "y");
  ob_output(b, "y", F, 4, yd);
  tc c;
  int rc = tc_load(&c, b, 4);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "load: %s\n", c.e.msg);
    tc_close(&c);
    return;
  }
  int64_t batches[3] = {3, 1, 3};
  for (int bi = 0; bi < 3; bi++) {
    int64_t nb = batches[bi], xs[4] = {nb, 2, 6, 6};
    float x[3 * 2 * 36];
    for (int i = 0; i < nb * 72; i++) x[i] = frand();
    eng_tensor in = ft(4, xs, x);
    rc = eng_plan_run(c.p, &in, 1, c.out, 1, &c.e);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
      fprintf(stderr, "run: %s\n", c.e.msg);
      break;
    }
    CHECK_EQ_INT(c.out[0].ndims, 4);
    CHECK_EQ_INT(c.out[0].dims[0], nb);
    CHECK_EQ_INT(c.out[0].dims[1], 4);
    // reference: conv 6x6 -> 3x3 (SAME_UPPER s2: total pad 1, at the end),
    // maxpool 2x2 s2 ceil -> 2x2, mean of the four
    for (int64_t s = 0; s < nb; s++)
      for (int m = 0; m < 4; m++) {
        double conv[3][3];
        for (int oy = 0; oy < 3; oy++)
          for (int ox = 0; ox < 3; ox++) {
            double acc = bias[m];
            for (int ci = 0; ci < 2; ci++)
              for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                  int iy = oy * 2 + ky, ix = ox * 2 + kx;
                  if (iy < 6 && ix < 6)
                    acc += (double)x[((s * 2 + ci) * 6 + iy) * 6 + ix] * w[((m * 2 + ci) * 3 + ky) * 3 + kx];
                }
            conv[oy][ox] = acc;
          }
        double sum = 0;
        for (int py = 0; py < 2; py++)
          for (int px = 0; px < 2; px++) {
            double mx = -INFINITY;
            for (int dy = 0; dy < 2; dy++)
              for (int dx = 0; dx < 2; dx++) {
                int iy = py * 2 + dy, ix = px * 2 + dx;
                if (iy < 3 && ix < 3 && conv[iy][ix] > mx) mx = conv[iy][ix];
              }
            sum += mx;
          }
        CHECK_NEAR(((const float *)c.out[0].data)[s * 4 + m], sum / 4, 1e-4, 1e-4);
      }
  }
  tc_close(&c);
}

// A residual block, the pattern the CPU plan fuses into the convolutions:
// y = relu(conv2(relu(conv1(x))) + s), s = x, or a [4,1,1] constant that
// Add broadcasts (not fusable: run as separate nodes). Checked against
// k_conv_ref and plain loops at two batch sizes; the fused nodes are counted.
static void test_plan_fused_block(int broadcast) {
  enum { C = 4, H = 5 };
  float w1[C * C * 9], b1[C], w2[C * C * 9], sc[C];
  for (int i = 0; i < C * C * 9; i++) {
    w1[i] = frand();
    w2[i] = frand();
  }
  for (int i = 0; i < C; i++) {
    b1[i] = frand();
    sc[i] = frand();
  }
  ob *b = ob_new(17);
  int64_t xd[4] = {-1, C, H, H}, wd[4] = {C, C, 3, 3}, bd[1] = {C}, sd[3] = {C, 1, 1};
  int64_t pads[4] = {1, 1, 1, 1};
  ob_input(b, "x", F, 4, xd);
  ob_init(b, "w1", F, 4, wd, w1, sizeof w1);
  ob_init(b, "b1", F, 1, bd, b1, sizeof b1);
  ob_init(b, "w2", F, 4, wd, w2, sizeof w2);
  ob_init(b, "s", F, 3, sd, sc, sizeof sc);
  ob_attr_ints(b, ob_node(b, "Conv", "conv1", "x,w1,b1", "c1"), "pads", 4, pads);
  ob_node(b, "Relu", "relu1", "c1", "r1");
  ob_attr_ints(b, ob_node(b, "Conv", "conv2", "r1,w2", "c2"), "pads", 4, pads);
  ob_node(b, "Add", "add", broadcast ? "c2,s" : "x,c2", "a");
  ob_node(b, "Relu", "relu2", "a", "y");
  ob_output(b, "y", F, 4, xd);
  tc c;
  int rc = tc_load(&c, b, 3);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "load: %s\n", c.e.msg);
    tc_close(&c);
    return;
  }
  int64_t batches[2] = {3, 1};
  for (int bi = 0; bi < 2; bi++) {
    int64_t nb = batches[bi], xs[4] = {nb, C, H, H};
    float x[3 * C * H * H], t1[3 * C * H * H], t2[3 * C * H * H];
    for (int i = 0; i < nb * C * H * H; i++) x[i] = frand();
    eng_tensor in = ft(4, xs, x);
    rc = eng_plan_run(c.p, &in, 1, c.out, 1, &c.e);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
      fprintf(stderr, "run: %s\n", c.e.msg);
      break;
    }
    int fused = 0;
    for (size_t i = 0; i < c.p->n_nodes; i++) fused += c.p->fused[i];
    CHECK_EQ_INT(fused, broadcast ? 1 : 3);  // relu1; with x also add and relu2
    // r1 passes from conv1 to conv2 in oneDNN's layout; y, an output, is plain
    CHECK_EQ_INT(c.p->keep_out[0], 1);
    CHECK_EQ_INT(c.p->keep_out[2], 0);
    k_window g = {.nsp = 2, .n = nb, .c = C, .m = C, .group = 1};
    for (int d = 0; d < 2; d++) {
      g.x[d] = g.y[d] = H;
      g.k[d] = 3;
      g.stride[d] = g.dil[d] = 1;
      g.pad_l[d] = g.pad_r[d] = 1;
    }
    k_conv_ref(t1, x, w1, b1, &g);
    for (int i = 0; i < nb * C * H * H; i++) t1[i] = t1[i] > 0 ? t1[i] : 0;
    k_conv_ref(t2, t1, w2, NULL, &g);
    int bad = 0;
    for (int i = 0; i < nb * C * H * H; i++) {
      float a = t2[i] + (broadcast ? sc[(i / (H * H)) % C] : x[i]);
      float want = a > 0 ? a : 0, got = ((const float *)c.out[0].data)[i];
      if (!(fabs(want - got) <= 1e-4 + 1e-4 * fabs(want)) && bad++ < 3)
        fprintf(stderr, "fused block (batch %lld): [%d] %.7g want %.7g\n", (long long)nb, i, got, want);
    }
    CHECK_EQ_INT(bad, 0);
  }
  tc_close(&c);
}

// A one-node model whose load must fail with `needle` in the message.
static void expect_load_error(ob *b, const char *needle) {
  tc c;
  int rc = tc_load(&c, b, 4);
  CHECK(rc != 0);
  CHECK_CONTAINS(c.e.msg, needle);
  tc_close(&c);
}

static ob *pool_model(const char *op, int with_indices) {
  ob *b = ob_new(17);
  int64_t xd[4] = {-1, 2, 6, 6};
  ob_input(b, "x", F, 4, xd);
  Onnx__NodeProto *n = ob_node(b, op, "pool", "x", with_indices ? "y,idx" : "y");
  int64_t two[2] = {2, 2};
  ob_attr_ints(b, n, "kernel_shape", 2, two);
  ob_output(b, "y", F, -1, NULL);
  if (with_indices) ob_output(b, "idx", 7, -1, NULL);
  return b;
}

static void test_refusals(void) {
  expect_load_error(pool_model("MaxPool", 1), "unsupported: MaxPool's Indices output");
  ob *b = pool_model("AveragePool", 0);
  ob_attr_s(b, b->g.node[0], "auto_pad", "SAME_SIDEWAYS");
  expect_load_error(b, "unknown auto_pad 'SAME_SIDEWAYS'");
  b = pool_model("MaxPool", 0);
  int64_t huge[2] = {(int64_t)1 << 40, 1};
  ob_attr_ints(b, b->g.node[0], "strides", 2, huge);
  expect_load_error(b, "'strides'[0] = 1099511627776 is out of range");
  b = pool_model("MaxPool", 0);
  int64_t three[3] = {1, 1, 1};
  ob_attr_ints(b, b->g.node[0], "pads", 3, three);
  expect_load_error(b, "'pads' has 3 values, expected 4");
  b = pool_model("MaxPool", 0);
  int64_t k9[2] = {9, 9};
  b->g.node[0]->attribute[0]->ints[0] = k9[0];
  b->g.node[0]->attribute[0]->ints[1] = k9[1];
  expect_load_error(b, "node 'pool' (op_type 'MaxPool'): spatial dim 0: the kernel spans 9");
}

// Conv with W as a graph input (ONNX's node tests give it so): the kernel
// from W's shape in each run, the reference kernel; equal to the same
// model with W an initializer (oneDNN), for two kernel sizes in one plan;
// a W that does not fit X fails the run. (A batching plan would read W's
// dim 0 as the batch, as for every input: max_batch 0 here.)
static void test_runtime_w(void) {
  int64_t xd[4] = {1, 2, 6, 6}, w3[4] = {4, 2, 3, 3}, w1[4] = {4, 2, 1, 1}, bad[4] = {4, 3, 3, 3};
  float x[72], w[72];
  for (int i = 0; i < 72; i++) x[i] = frand(), w[i] = frand();
  {
    ob *b = ob_new(17);
    ob_input(b, "x", F, 4, (int64_t[]){-1, 2, 6, 6});
    ob_input(b, "w", F, 4, (int64_t[]){-1, -1, -1, -1});
    Onnx__NodeProto *n = ob_node(b, "Conv", "conv", "x,w", "y");
    ob_attr_ints(b, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    ob_output(b, "y", F, -1, NULL);
    tc c;
    CHECK_EQ_INT(tc_load(&c, b, 0), 0);
    if (!c.p) {
      tc_close(&c);
      return;
    }
    CHECK_EQ_INT(c.p->n_val_in, 0);  // W is data: nothing read while planning
    for (int k = 0; k < 2; k++) {
      const int64_t *wd = k ? w1 : w3;
      eng_tensor in[2] = {T(DT_FP32, 4, xd, x), T(DT_FP32, 4, wd, w)};
      int rc = eng_plan_run(c.p, in, 2, c.out, 1, &c.e);
      CHECK_EQ_INT(rc, 0);
      if (rc) break;
      // the same weights as an initializer, through oneDNN
      ob *r = ob_new(17);
      ob_input(r, "x", F, 4, xd);
      ob_init(r, "w", F, 4, wd, w, (size_t)eng_numel(4, wd) * 4);
      n = ob_node(r, "Conv", "conv", "x,w", "y");
      ob_attr_ints(r, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
      ob_output(r, "y", F, -1, NULL);
      tc ref;
      rc = tc_run(&ref, r, in, 1, 1);
      CHECK_EQ_INT(rc, 0);
      int64_t yd[4] = {1, 4, k ? 8 : 6, k ? 8 : 6};
      CHECK_EQ_INT(c.out[0].ndims, 4);
      for (int d = 0; d < 4; d++) CHECK_EQ_INT(c.out[0].dims[d], yd[d]);
      int off = 0;
      for (int64_t i = 0; !rc && i < eng_numel(4, yd); i++)
        off += fabsf(((const float *)c.out[0].data)[i] - ((const float *)ref.out[0].data)[i]) > 1e-4f;
      CHECK_EQ_INT(off, 0);
      tc_close(&ref);
    }
    eng_tensor in[2] = {T(DT_FP32, 4, xd, x), T(DT_FP32, 4, bad, w)};
    CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 1, &c.e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(c.e.msg, "does not fit X's 2 channels");
    tc_close(&c);
  }
  // a computed W with no kernel_shape: its spatial rank is unknown at load
  ob *b = ob_new(17);
  ob_input(b, "x", F, 4, (int64_t[]){-1, 2, 6, 6});
  ob_input(b, "w", F, 4, (int64_t[]){4, 2, 3, 3});
  ob_node(b, "Neg", "neg", "w", "nw");
  ob_node(b, "Conv", "conv", "x,nw", "y");
  ob_output(b, "y", F, -1, NULL);
  expect_load_error(b, "W 'nw' is computed at run time and no kernel_shape gives the spatial rank");
}

int main(void) {
  test_shape_rules();
  test_shape_errors();
  test_dnnl_vs_reference();
  test_plan_chain();
  test_plan_fused_block(0);
  test_plan_fused_block(1);
  test_refusals();
  test_runtime_w();
  CHECK_DONE();
}
