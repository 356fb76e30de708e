// tests/unit/engine/test_ops_transformer.c: the ops transformer exporters
// add to the vision set (comparisons and bool logic in engine/ops/elem/elem.c;
// GatherElements, GatherND, Trilu and Split in engine/ops/index/index.c; CumSum in
// engine/ops/reduce/reduce.c) run through the real loader, planner and executor on small
// models built in C, each checked against values computed here by hand or
// with plain loops; and an attention-mask subgraph as the exporters write it,
// planned for two sequence lengths in turn, its shape part folded.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"
#include "onnx_build.h"

#define MODEL "ops_transformer_model.onnx"
#include "plan_case.h"
enum { F = 1, U8 = 2, I32 = 6, I64 = 7, BOOL = 9 };

static void check_shape(const eng_tensor *o, dtype dt, int nd, const int64_t *dims) {
  CHECK_EQ_INT(o->dt, dt);
  CHECK_EQ_INT(o->ndims, nd);
  for (int i = 0; i < nd && i < o->ndims; i++) CHECK_EQ_INT(o->dims[i], dims[i]);
}

// Runs a model with one output and compares its bytes with want (exact:
// these ops move or compare values, they compute nothing to round).
static void expect_bytes(ob *b, const eng_tensor *ins, size_t n_in, dtype dt, int nd,
                         const int64_t *dims, const void *want, const char *what) {
  tc c;
  int rc = tc_run(&c, b, ins, n_in, 1);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s: %s\n", what, c.e.msg);
  if (!rc) {
    check_shape(&c.out[0], dt, nd, dims);
    size_t n = (size_t)eng_numel(nd, dims), esz = dtype_size(dt);
    int bad = 0;
    for (size_t i = 0; i < n && c.out[0].ndims == nd && c.out[0].dt == dt; i++)
      if (memcmp((const char *)c.out[0].data + i * esz, (const char *)want + i * esz, esz) != 0 &&
          bad++ < 4)
        fprintf(stderr, "  %s: element %zu differs\n", what, i);
    CHECK_EQ_INT(bad, 0);
  }
  tc_close(&c);
}

// Load + plan must fail; the message must contain both strings.
static void expect_plan_error(ob *b, const char *s1, const char *s2) {
  tc c;
  memset(&c, 0, sizeof c);
  CHECK_EQ_INT(ob_save(b, MODEL), 0);
  int rc = eng_graph_load(MODEL, &c.g, &c.e);
  if (!rc) rc = eng_plan_create(c.g, 0, &c.p, &c.e);
  CHECK(rc != 0);
  CHECK_CONTAINS(c.e.msg, s1);
  CHECK_CONTAINS(c.e.msg, s2);
  tc_close(&c);
}

// Plans, then the run must fail naming the node and `s`.
static void expect_run_error(ob *b, const eng_tensor *ins, size_t n_in, const char *node,
                             const char *s) {
  tc c;
  CHECK(tc_run(&c, b, ins, n_in, 1) != 0);
  CHECK_CONTAINS(c.e.msg, node);
  CHECK_CONTAINS(c.e.msg, s);
  tc_close(&c);
}

// x (input) op w (initializer) -> y
static ob *binary_model(int opset, const char *op, int xt, int nd, const int64_t *d, int wt,
                        int wnd, const int64_t *wd, const void *w, size_t wbytes, int yt,
                        Onnx__NodeProto **n) {
  ob *b = ob_new(opset);
  ob_input(b, "x", xt, nd, d);
  ob_init(b, "w", wt, wnd, wd, w, wbytes);
  *n = ob_node(b, op, "op", "x,w", "y");
  ob_output(b, "y", yt, -1, NULL);
  return b;
}

static ob *unary_model(int opset, const char *op, int xt, int nd, const int64_t *d,
                       const char *ins, int yt, Onnx__NodeProto **n) {
  ob *b = ob_new(opset);
  ob_input(b, "x", xt, nd, d);
  *n = ob_node(b, op, "op", ins, "y");
  ob_output(b, "y", yt, -1, NULL);
  return b;
}

// --- comparisons and logic

static void test_compare(void) {
  // x [2,3] against w [3] (broadcast over rows), every comparison, three types
  const float xf[6] = {-1, 0, 2.5f, 3, 0, -7}, wf[3] = {0, 0, 3};
  int64_t xi[6], wi[3];
  int32_t x32[6], w32[3];
  for (int i = 0; i < 6; i++) xi[i] = (int64_t)floorf(xf[i]), x32[i] = (int32_t)xi[i];
  for (int i = 0; i < 3; i++) wi[i] = (int64_t)wf[i], w32[i] = (int32_t)wi[i];
  int64_t d[2] = {2, 3}, wd[1] = {3};
  const struct {
    const char *op;
    int k;
  } ops[] = {{"Equal", 0}, {"Less", 1}, {"LessOrEqual", 2}, {"Greater", 3}, {"GreaterOrEqual", 4}};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    for (int ty = 0; ty < 3; ty++) {
      uint8_t want[6];
      for (int i = 0; i < 6; i++) {
        double a = ty == 0 ? xf[i] : ty == 1 ? (double)xi[i] : x32[i];
        double c = ty == 0 ? wf[i % 3] : ty == 1 ? (double)wi[i % 3] : w32[i % 3];
        switch (ops[k].k) {
          case 0: want[i] = a == c; break;
          case 1: want[i] = a < c; break;
          case 2: want[i] = a <= c; break;
          case 3: want[i] = a > c; break;
          default: want[i] = a >= c; break;
        }
      }
      int et = ty == 0 ? F : ty == 1 ? I64 : I32;
      const void *x = ty == 0 ? (const void *)xf : ty == 1 ? (const void *)xi : (const void *)x32;
      const void *w = ty == 0 ? (const void *)wf : ty == 1 ? (const void *)wi : (const void *)w32;
      size_t esz = ty == 1 ? 8 : 4;
      eng_tensor in = T(ty == 0 ? DT_FP32 : ty == 1 ? DT_INT64 : DT_INT32, 2, d, x);
      Onnx__NodeProto *n;
      ob *b = binary_model(16, ops[k].op, et, 2, d, et, 1, wd, w, 3 * esz, BOOL, &n);
      char what[64];
      snprintf(what, sizeof what, "%s type %d", ops[k].op, et);
      expect_bytes(b, &in, 1, DT_BOOL, 2, d, want, what);
    }
  // Equal on bools (a raw nonzero byte other than 1 is true)
  const uint8_t xb[6] = {0, 1, 2, 0, 1, 0}, wb[3] = {0, 1, 1};
  const uint8_t wantb[6] = {1, 1, 1, 1, 1, 0};
  eng_tensor inb = T(DT_BOOL, 2, d, xb);
  Onnx__NodeProto *n;
  expect_bytes(binary_model(16, "Equal", BOOL, 2, d, BOOL, 1, wd, wb, 3, BOOL, &n), &inb, 1,
               DT_BOOL, 2, d, wantb, "Equal bool");
  // mixed types and unsupported ones are refused at planning, naming the node
  int64_t w64[3] = {0, 0, 3};
  expect_plan_error(binary_model(16, "Less", F, 2, d, I64, 1, wd, w64, 24, BOOL, &n),
                    "node 'op' (op_type 'Less')", "inputs differ in type: FP32 vs INT64");
  expect_plan_error(binary_model(16, "Less", BOOL, 2, d, BOOL, 1, wd, wb, 3, BOOL, &n),
                    "node 'op' (op_type 'Less')", "unsupported element type BOOL");
}

static void test_logic(void) {
  // x [2,1,3] with w [2,1]: y [2,2,3]
  const uint8_t x[6] = {0, 1, 1, 0, 0, 1}, w[2] = {1, 0};
  int64_t d[3] = {2, 1, 3}, wd[2] = {2, 1}, yd[3] = {2, 2, 3};
  eng_tensor in = T(DT_BOOL, 3, d, x);
  const char *ops[] = {"And", "Or", "Xor"};
  for (int k = 0; k < 3; k++) {
    uint8_t want[12];
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++)
        for (int c = 0; c < 3; c++) {
          int a = x[i * 3 + c], bb = w[j];
          want[(i * 2 + j) * 3 + c] = (uint8_t)(k == 0 ? a && bb : k == 1 ? a || bb : a != bb);
        }
    Onnx__NodeProto *n;
    expect_bytes(binary_model(7, ops[k], BOOL, 3, d, BOOL, 2, wd, w, 2, BOOL, &n), &in, 1, DT_BOOL,
                 3, yd, want, ops[k]);
  }
  Onnx__NodeProto *n;
  const uint8_t nots[6] = {1, 0, 0, 1, 1, 0};
  expect_bytes(unary_model(1, "Not", BOOL, 3, d, "x", BOOL, &n), &in, 1, DT_BOOL, 3, d, nots, "Not");
  const int64_t w64[2] = {1, 0};
  expect_plan_error(binary_model(7, "And", BOOL, 3, d, I64, 2, wd, w64, 16, BOOL, &n),
                    "node 'op' (op_type 'And')", "B must be bool, got INT64");
}

static void test_isnan_isinf(void) {
  const float x[6] = {1, NAN, INFINITY, -INFINITY, -0.0f, 3e38f};
  int64_t d[1] = {6};
  eng_tensor in = T(DT_FP32, 1, d, x);
  Onnx__NodeProto *n;
  expect_bytes(unary_model(13, "IsNaN", F, 1, d, "x", BOOL, &n), &in, 1, DT_BOOL, 1, d,
               (uint8_t[]){0, 1, 0, 0, 0, 0}, "IsNaN");
  expect_bytes(unary_model(10, "IsInf", F, 1, d, "x", BOOL, &n), &in, 1, DT_BOOL, 1, d,
               (uint8_t[]){0, 0, 1, 1, 0, 0}, "IsInf");
  ob *b = unary_model(10, "IsInf", F, 1, d, "x", BOOL, &n);
  ob_attr_i(b, n, "detect_negative", 0);
  expect_bytes(b, &in, 1, DT_BOOL, 1, d, (uint8_t[]){0, 0, 1, 0, 0, 0}, "IsInf positive only");
  b = unary_model(10, "IsInf", F, 1, d, "x", BOOL, &n);
  ob_attr_i(b, n, "detect_positive", 0);
  expect_bytes(b, &in, 1, DT_BOOL, 1, d, (uint8_t[]){0, 0, 0, 1, 0, 0}, "IsInf negative only");
  expect_plan_error(unary_model(13, "IsNaN", I64, 1, d, "x", BOOL, &n),
                    "node 'op' (op_type 'IsNaN')", "X must be a float tensor");
}

// --- index ops

static void test_gather_elements(void) {
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)(i * 10);
  int64_t d[2] = {3, 4};
  eng_tensor in = T(DT_FP32, 2, d, x);
  // axis 1, indices [3,2] (narrower than the data on axis 1), one negative
  const int64_t idx[6] = {0, 3, -1, 1, 2, 2};
  int64_t id[2] = {3, 2};
  float want[6];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) {
      int64_t k = idx[i * 2 + j] < 0 ? idx[i * 2 + j] + 4 : idx[i * 2 + j];
      want[i * 2 + j] = x[i * 4 + k];
    }
  Onnx__NodeProto *n;
  ob *b = binary_model(13, "GatherElements", F, 2, d, I64, 2, id, idx, sizeof idx, F, &n);
  ob_attr_i(b, n, "axis", 1);
  expect_bytes(b, &in, 1, DT_FP32, 2, id, want, "GatherElements axis 1");
  // axis 0 (the default), int32 indices [2,4]
  const int32_t i0[8] = {2, 0, 1, 2, 0, 0, 2, -3};
  int64_t i0d[2] = {2, 4};
  float want0[8];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) {
      int k = i0[i * 4 + j] < 0 ? i0[i * 4 + j] + 3 : i0[i * 4 + j];
      want0[i * 4 + j] = x[k * 4 + j];
    }
  b = binary_model(13, "GatherElements", F, 2, d, I32, 2, i0d, i0, sizeof i0, F, &n);
  expect_bytes(b, &in, 1, DT_FP32, 2, i0d, want0, "GatherElements axis 0 int32");
  // an index past the axis is a run error; a rank mismatch a planning error
  b = binary_model(13, "GatherElements", F, 2, d, I64, 2, (int64_t[]){1, 1}, (int64_t[]){4}, 8, F,
                   &n);
  ob_attr_i(b, n, "axis", 1);
  expect_run_error(b, &in, 1, "node 'op' (op_type 'GatherElements')", "out of range for axis 1");
  b = binary_model(13, "GatherElements", F, 2, d, I64, 1, (int64_t[]){1}, (int64_t[]){0}, 8, F,
                   &n);
  expect_plan_error(b, "op_type 'GatherElements'", "indices have rank 1, data rank 2");
}

static void test_gather_nd(void) {
  int64_t x[24];
  for (int i = 0; i < 24; i++) x[i] = 100 + i;
  int64_t d[3] = {2, 3, 4};
  eng_tensor in = T(DT_INT64, 3, d, x);
  Onnx__NodeProto *n;
  // batch_dims 0, tuples of 2: [[1,2],[0,-1]] -> rows x[1,2,:], x[0,2,:]
  const int64_t i2[4] = {1, 2, 0, -1};
  int64_t want[8];
  for (int k = 0; k < 4; k++) want[k] = x[(1 * 3 + 2) * 4 + k], want[4 + k] = x[(0 * 3 + 2) * 4 + k];
  ob *b = binary_model(13, "GatherND", I64, 3, d, I64, 2, (int64_t[]){2, 2}, i2, sizeof i2, I64, &n);
  expect_bytes(b, &in, 1, DT_INT64, 2, (int64_t[]){2, 4}, want, "GatherND m=2");
  // full tuples (m = rank): single elements, indices [3,3] -> y [3]
  const int64_t i3[9] = {0, 0, 0, 1, 2, 3, 1, 0, 2};
  b = binary_model(13, "GatherND", I64, 3, d, I64, 2, (int64_t[]){3, 3}, i3, sizeof i3, I64, &n);
  expect_bytes(b, &in, 1, DT_INT64, 1, (int64_t[]){3}, (int64_t[]){x[0], x[23], x[14]},
               "GatherND m=rank");
  // batch_dims 1: per batch b, indices [2, 1, 1] pick rows of x[b]: y [2,1,4]
  const int64_t ib[2] = {2, 0};
  int64_t wantb[8];
  for (int k = 0; k < 4; k++) wantb[k] = x[(0 * 3 + 2) * 4 + k], wantb[4 + k] = x[(1 * 3 + 0) * 4 + k];
  b = binary_model(13, "GatherND", I64, 3, d, I64, 3, (int64_t[]){2, 1, 1}, ib, sizeof ib, I64, &n);
  ob_attr_i(b, n, "batch_dims", 1);
  expect_bytes(b, &in, 1, DT_INT64, 3, (int64_t[]){2, 1, 4}, wantb, "GatherND batch_dims 1");
  // errors: a tuple out of range (run), a tuple too long and mismatched batch dims (planning)
  b = binary_model(13, "GatherND", I64, 3, d, I64, 1, (int64_t[]){2}, (int64_t[]){0, 3}, 16, I64,
                   &n);
  expect_run_error(b, &in, 1, "node 'op' (op_type 'GatherND')", "out of range");
  b = binary_model(13, "GatherND", I64, 3, d, I64, 1, (int64_t[]){4}, (int64_t[]){0, 0, 0, 0}, 32,
                   I64, &n);
  expect_plan_error(b, "op_type 'GatherND'", "must be between 1 and 3");
  b = binary_model(13, "GatherND", I64, 3, d, I64, 2, (int64_t[]){3, 1}, (int64_t[]){0, 0, 0}, 24,
                   I64, &n);
  ob_attr_i(b, n, "batch_dims", 1);
  expect_plan_error(b, "op_type 'GatherND'", "batch dim 0 differs");
}

static void test_trilu(void) {
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)(i + 1);
  int64_t d[3] = {2, 3, 4};
  eng_tensor in = T(DT_FP32, 3, d, x);
  const struct {
    int upper;
    int has_k;
    int64_t k;
  } cases[] = {{1, 0, 0}, {0, 0, 0}, {1, 1, 1}, {0, 1, -1}, {1, 1, -5}, {0, 1, 9}, {1, 1, 4}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    float want[24];
    for (int b = 0; b < 2; b++)
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
          int keep = cases[c].upper ? j - i >= cases[c].k : j - i <= cases[c].k;
          want[(b * 3 + i) * 4 + j] = keep ? x[(b * 3 + i) * 4 + j] : 0.0f;
        }
    Onnx__NodeProto *n;
    ob *b = unary_model(14, "Trilu", F, 3, d, cases[c].has_k ? "x,k" : "x", F, &n);
    if (cases[c].has_k) ob_init(b, "k", I64, 0, NULL, &cases[c].k, 8);
    if (!cases[c].upper) ob_attr_i(b, n, "upper", 0);
    char what[64];
    snprintf(what, sizeof what, "Trilu upper=%d k=%lld", cases[c].upper, (long long)cases[c].k);
    expect_bytes(b, &in, 1, DT_FP32, 3, d, want, what);
  }
  // bool masks (a causal mask): lower triangle of a 3x3 of ones
  const uint8_t ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  int64_t d2[2] = {3, 3};
  eng_tensor inb = T(DT_BOOL, 2, d2, ones);
  Onnx__NodeProto *n;
  ob *b = unary_model(14, "Trilu", BOOL, 2, d2, "x", BOOL, &n);
  ob_attr_i(b, n, "upper", 0);
  expect_bytes(b, &inb, 1, DT_BOOL, 2, d2, (uint8_t[]){1, 0, 0, 1, 1, 0, 1, 1, 1}, "Trilu bool");
  expect_plan_error(unary_model(14, "Trilu", F, 1, (int64_t[]){4}, "x", F, &n),
                    "op_type 'Trilu'", "rank >= 2");
}

// Split x [2,7] (values 0..13) into pieces along axis 1 of the given sizes.
static void expect_split(ob *b, const int64_t *sizes, int n_out, const char *what) {
  float x[14];
  for (int i = 0; i < 14; i++) x[i] = (float)i;
  int64_t d[2] = {2, 7};
  eng_tensor in = T(DT_FP32, 2, d, x);
  tc c;
  int rc = tc_run(&c, b, &in, 1, (size_t)n_out);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s: %s\n", what, c.e.msg);
  int64_t at = 0;
  for (int k = 0; k < n_out && !rc; k++) {
    check_shape(&c.out[k], DT_FP32, 2, (int64_t[]){2, sizes[k]});
    for (int r = 0; r < 2; r++)
      for (int64_t j = 0; j < sizes[k] && c.out[k].dims[1] == sizes[k]; j++)
        CHECK_EQ_INT(((const float *)c.out[k].data)[r * sizes[k] + j], x[r * 7 + at + j]);
    at += sizes[k];
  }
  tc_close(&c);
}

static ob *split_model(int opset, int n_out, const char *ins, Onnx__NodeProto **n) {
  ob *b = ob_new(opset);
  ob_input(b, "x", F, 2, (int64_t[]){2, 7});
  const char *outs[] = {"y0", "y0,y1", "y0,y1,y2"};
  *n = ob_node(b, "Split", "op", ins, outs[n_out - 1]);
  for (int k = 0; k < n_out; k++) ob_output(b, (const char *[]){"y0", "y1", "y2"}[k], F, -1, NULL);
  return b;
}

static void test_split(void) {
  Onnx__NodeProto *n;
  // opset 13: sizes from the input
  ob *b = split_model(13, 3, "x,s", &n);
  ob_init(b, "s", I64, 1, (int64_t[]){3}, (int64_t[]){2, 0, 5}, 24);
  ob_attr_i(b, n, "axis", -1);
  expect_split(b, (int64_t[]){2, 0, 5}, 3, "Split-13 sizes");
  // opset 11: sizes from the attribute
  b = split_model(11, 2, "x", &n);
  ob_attr_i(b, n, "axis", 1);
  ob_attr_ints(b, n, "split", 2, (int64_t[]){4, 3});
  expect_split(b, (int64_t[]){4, 3}, 2, "Split-11 attribute");
  // opset 18: num_outputs, ceil-sized parts with a smaller last one
  b = split_model(18, 3, "x", &n);
  ob_attr_i(b, n, "axis", 1);
  ob_attr_i(b, n, "num_outputs", 3);
  expect_split(b, (int64_t[]){3, 3, 1}, 3, "Split-18 num_outputs");
  // errors: 7 does not split evenly before opset 18; sizes that do not sum up
  b = split_model(13, 2, "x", &n);
  ob_attr_i(b, n, "axis", 1);
  expect_plan_error(b, "op_type 'Split'", "does not split into 2 equal parts");
  b = split_model(13, 2, "x,s", &n);
  ob_init(b, "s", I64, 1, (int64_t[]){2}, (int64_t[]){3, 3}, 16);
  ob_attr_i(b, n, "axis", 1);
  expect_plan_error(b, "op_type 'Split'", "sum to 6, the axis has 7");
  b = split_model(18, 2, "x", &n);
  expect_plan_error(b, "op_type 'Split'", "either the split input or num_outputs is required");
}

static void test_cumsum(void) {
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t d[2] = {2, 3};
  eng_tensor in = T(DT_FP32, 2, d, x);
  const float want[4][6] = {
      {1, 3, 6, 4, 9, 15},   // plain, axis 1
      {0, 1, 3, 0, 4, 9},    // exclusive
      {6, 5, 3, 15, 11, 6},  // reverse
      {5, 3, 0, 11, 6, 0},   // exclusive + reverse
  };
  for (int m = 0; m < 4; m++) {
    Onnx__NodeProto *n;
    ob *b = unary_model(14, "CumSum", F, 2, d, "x,ax", F, &n);
    ob_init(b, "ax", I64, 0, NULL, (int64_t[]){-1}, 8);
    if (m & 1) ob_attr_i(b, n, "exclusive", 1);
    if (m & 2) ob_attr_i(b, n, "reverse", 1);
    char what[32];
    snprintf(what, sizeof what, "CumSum mode %d", m);
    expect_bytes(b, &in, 1, DT_FP32, 2, d, want[m], what);
  }
  // int64 on axis 0 (an int32 axis): position ids from a mask, as RoBERTa's exporter does
  int64_t xi[6] = {1, 1, 0, 1, 0, 1};
  eng_tensor ini = T(DT_INT64, 2, d, xi);
  Onnx__NodeProto *n;
  ob *b = unary_model(14, "CumSum", I64, 2, d, "x,ax", I64, &n);
  ob_init(b, "ax", I32, 0, NULL, (int32_t[]){0}, 4);
  expect_bytes(b, &ini, 1, DT_INT64, 2, d, (int64_t[]){1, 1, 0, 2, 1, 1}, "CumSum int64 axis 0");
  b = unary_model(14, "CumSum", F, 2, d, "x,ax", F, &n);
  ob_init(b, "ax", I64, 0, NULL, (int64_t[]){2}, 8);
  expect_plan_error(b, "op_type 'CumSum'", "axis 2 out of range");
}

// --- an attention mask as the dynamo exporter writes it for BERT:
// key positions kept where attention_mask is 1 and the position is >= 0
// (Range over the sequence, GreaterOrEqual, And), the scores masked with
// Where, Softmax, and a fully masked row's NaNs replaced by 0 (IsNaN, Where).
// The Shape/Range/GreaterOrEqual part depends on shapes only and folds;
// the rest runs per request. Planned for T = 4, then T = 3 in the same plan.
static ob *mask_model(void) {
  ob *b = ob_new(18);
  ob_input(b, "mask", I64, 2, (int64_t[]){-1, -1});
  ob_input(b, "scores", F, 3, (int64_t[]){-1, -1, -1});
  ob_init(b, "zero", I64, 0, NULL, (int64_t[]){0}, 8);
  ob_init(b, "one", I64, 0, NULL, (int64_t[]){1}, 8);
  ob_init(b, "ax1", I64, 1, (int64_t[]){1}, (int64_t[]){1}, 8);
  ob_init(b, "ninf", F, 0, NULL, (float[]){-INFINITY}, 4);
  ob_init(b, "fzero", F, 0, NULL, (float[]){0}, 4);
  Onnx__NodeProto *n = ob_node(b, "Shape", "shape", "mask", "sh");
  ob_attr_i(b, n, "start", 1);
  ob_attr_i(b, n, "end", 2);
  ob_node(b, "Squeeze", "sq", "sh", "t");
  ob_node(b, "Range", "range", "zero,t,one", "pos");
  ob_node(b, "GreaterOrEqual", "ge", "pos,zero", "valid");
  n = ob_node(b, "Cast", "cast", "mask", "mb");
  ob_attr_i(b, n, "to", BOOL);
  ob_node(b, "Unsqueeze", "unsq", "mb,ax1", "mb3");  // [B,1,T]: every query row sees the same keys
  ob_node(b, "And", "and", "mb3,valid", "keep");
  ob_node(b, "Where", "where", "keep,scores,ninf", "masked");
  n = ob_node(b, "Softmax", "softmax", "masked", "p");
  ob_attr_i(b, n, "axis", -1);
  ob_node(b, "IsNaN", "isnan", "p", "bad");
  ob_node(b, "Where", "fix", "bad,fzero,p", "probs");
  ob_node(b, "Not", "not", "keep", "dropped");
  ob_output(b, "probs", F, -1, NULL);
  ob_output(b, "dropped", BOOL, -1, NULL);
  return b;
}

static void check_mask_run(tc *c, int64_t B, int64_t L, const int64_t *mask, const float *s) {
  eng_tensor ins[2] = {T(DT_INT64, 2, (int64_t[]){B, L}, mask),
                       T(DT_FP32, 3, (int64_t[]){B, L, L}, s)};
  int rc = eng_plan_run(c->p, ins, 2, c->out, 2, &c->e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "mask L=%lld: %s\n", (long long)L, c->e.msg);
    return;
  }
  check_shape(&c->out[0], DT_FP32, 3, (int64_t[]){B, L, L});
  check_shape(&c->out[1], DT_BOOL, 3, (int64_t[]){B, 1, L});
  const float *p = c->out[0].data;
  const uint8_t *dr = c->out[1].data;
  for (int64_t b = 0; b < B; b++) {
    for (int64_t j = 0; j < L; j++) CHECK_EQ_INT(dr[b * L + j], mask[b * L + j] == 0);
    for (int64_t i = 0; i < L; i++) {
      // softmax over the kept keys of row (b, i); a row with none is all zeros
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < L; j++)
        if (mask[b * L + j]) mx = fmax(mx, s[(b * L + i) * L + j]);
      for (int64_t j = 0; j < L; j++)
        if (mask[b * L + j]) sum += exp(s[(b * L + i) * L + j] - mx);
      for (int64_t j = 0; j < L; j++) {
        double want = mask[b * L + j] ? exp(s[(b * L + i) * L + j] - mx) / sum : 0.0;
        CHECK_NEAR(p[(b * L + i) * L + j], want, 1e-5, 1e-7);
      }
    }
  }
}

static void test_attention_mask(void) {
  tc c;
  int rc = tc_load(&c, mask_model(), 0);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "mask model: %s\n", c.e.msg);
    tc_close(&c);
    return;
  }
  float s[2 * 4 * 4];
  for (int i = 0; i < 32; i++) s[i] = (float)((i * 7) % 11) * 0.3f - 1.5f;
  // T = 4: the second row is padded at the end; T = 3: its mask is all zeros
  const int64_t m4[8] = {1, 1, 1, 1, 1, 1, 0, 0}, m3[6] = {1, 0, 1, 0, 0, 0};
  check_mask_run(&c, 2, 4, m4, s);
  uint64_t folds = c.p->folds;
  CHECK(folds >= 4);  // shape, sq, range, ge at least, for this signature
  check_mask_run(&c, 2, 3, m3, s);
  CHECK(c.p->folds > folds);  // a new signature: folded again for T = 3
  folds = c.p->folds;
  check_mask_run(&c, 2, 3, m3, s);
  CHECK_EQ_INT(c.p->folds, folds);  // same signature: nothing folded again
  // the data-dependent nodes run; the shape-only ones never do
  const eng_graph *g = c.g;
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    const char *nm = eng_graph_node(g, i)->name;
    int want_fold = !strcmp(nm, "shape") || !strcmp(nm, "sq") || !strcmp(nm, "range") ||
                    !strcmp(nm, "ge");
    if (!strcmp(nm, "cast") || !strcmp(nm, "and") || !strcmp(nm, "isnan") || want_fold)
      CHECK_EQ_INT(c.p->folded[i], want_fold);
  }
  tc_close(&c);
}

int main(void) {
  test_compare();
  test_logic();
  test_isnan_isinf();
  test_gather_elements();
  test_gather_nd();
  test_trilu();
  test_split();
  test_cumsum();
  test_attention_mask();
  CHECK_DONE();
}
