// tests/unit/engine/test_cuda_init.c: the CUDA plan's load-time decisions
// without a GPU (built where CUDA is, run anywhere: nothing here touches a
// device). Each case is a small model planned as the CUDA plan plans it
// (eng_plan__create without a host arena, then eng_plan__probe_types);
// eng_cuda__init_ops (engine/cuda/plan_cuda_host.c) runs every node's CUDA init exactly as
// eng_cuda__create does, and eng_hostfb_create (engine/cpu/plan_hostfb.c)
// makes the host-fallback plan from what is left. Checked per case: whether
// the node keeps its CUDA op or runs on the host from load, and the reason its
// host line gives. These are the types and modes that used to pass the load
// and fail every request (issue 34: Clip of INT8, Pow of FP32 by INT32, BOOL
// and non-adjacent reductions, integer Relu) and their neighbours; then the
// same decisions where a dynamic non-batch dim leaves the planned shapes
// unknown at create, so the types come from the planner's probe
// (eng_plan__probe_types), and two models the probe cannot infer through.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_hostfb.h"
#include "engine/cpu/plan_internal.h"
#include "engine/cuda/plan_cuda_host.h"
#include "engine/cuda/plan_cuda_internal.h"
#include "engine/graph/graph.h"
#include "onnx_build.h"

enum {
  O_FLOAT = 1, O_UINT8 = 2, O_INT8 = 3, O_INT32 = 6, O_INT64 = 7, O_BOOL = 9, O_FLOAT16 = 10, O_DOUBLE = 11,
};

// Loads b's model (freeing b), plans it and runs the CUDA inits; checks that the
// last node keeps its CUDA op (want_dev) or runs on the host with a line naming
// want_why. label names the case in failures.
static void expect(const char *label, ob *b, int want_dev, const char *want_why) {
  fprintf(stderr, "  %s\n", label);
  CHECK_EQ_INT(ob_save(b, "cuda_init.onnx"), 0);
  eng_graph *g = NULL;
  eng_plan *pl = NULL;
  err e = {0};
  if (eng_graph_load("cuda_init.onnx", &g, &e) != 0) fprintf(stderr, "  load: %s\n", e.msg);
  CHECK(g != NULL);
  if (!g) return;
  if (eng_plan__create(g, 0, 0, &pl, &e) != 0) fprintf(stderr, "  plan: %s\n", e.msg);
  CHECK(pl != NULL);
  if (pl) eng_plan__probe_types(pl);  // as eng_cuda__create does before the inits
  size_t n = pl ? pl->n_nodes : 0;
  const cuda_op **ops = calloc(n + 1, sizeof *ops);
  void **st = calloc(n + 1, sizeof *st);
  char **why = calloc(n + 1, sizeof *why);
  uint8_t *dev_op = calloc(n + 1, 1);
  if (pl && ops && st && why && dev_op) {
    for (size_t i = 0; i < n; i++) ops[i] = eng_cuda__find_op(eng_graph_node(g, i)->op_type);
    int rc = eng_cuda__init_ops(pl, 0, ops, st, why, &e);
    if (rc) fprintf(stderr, "  init: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    size_t last = n - 1;
    CHECK_EQ_INT(ops[last] != NULL, want_dev);
    if (want_why) CHECK_CONTAINS(why[last], want_why);
    else CHECK(why[last] == NULL);
    // the fallback plan takes the node as the CUDA plan would hand it over
    for (size_t i = 0; i < n; i++) dev_op[i] = ops[i] != NULL;
    uint8_t *derived = eng_hostfb_derived(pl);
    eng_hostfb *h = NULL;
    CHECK_EQ_INT(eng_hostfb_create(pl, dev_op, derived, why, 0, &h, &e), 0);
    if (h && !want_dev) {
      CHECK(eng_hostfb_n_host(h) >= 1);
      const char *line = eng_hostfb_line(h, eng_hostfb_n_host(h) - 1);
      CHECK_CONTAINS(line, want_why);
    }
    if (h && want_dev) CHECK_EQ_INT(eng_hostfb_n_host(h), 0);
    eng_hostfb_destroy(h);
    free(derived);
    for (size_t i = 0; i < n; i++) {
      if (st[i] && ops[i] && ops[i]->destroy) ops[i]->destroy(st[i]);
      free(why[i]);
    }
  }
  free(ops);
  free(st);
  free(why);
  free(dev_op);
  eng_plan_destroy(pl);
  eng_graph_destroy(g);
}

static const int64_t D23[] = {2, 3};

// x [2, 3] of type t through op_type into y of type yt (a one-node model).
static ob *unary(const char *op, int t, int yt) {
  ob *b = ob_new(18);
  ob_input(b, "x", t, 2, D23);
  ob_node(b, op, "n", "x", "y");
  ob_output(b, "y", yt, 2, D23);
  return b;
}

static ob *binary(const char *op, int ta, int tb, int ty) {
  ob *b = ob_new(18);
  ob_input(b, "a", ta, 2, D23);
  ob_input(b, "b", tb, 2, D23);
  ob_node(b, op, "n", "a,b", "y");
  ob_output(b, "y", ty, 2, D23);
  return b;
}

static void test_clip(void) {
  expect("Clip INT8, no bounds", unary("Clip", O_INT8, O_INT8), 1, NULL);
  ob *b = ob_new(13);
  int8_t lo = -3, hi = 5;
  ob_input(b, "x", O_INT8, 2, D23);
  ob_init(b, "lo", O_INT8, 0, NULL, &lo, 1);
  ob_init(b, "hi", O_INT8, 0, NULL, &hi, 1);
  ob_node(b, "Clip", "n", "x,lo,hi", "y");
  ob_output(b, "y", O_INT8, 2, D23);
  expect("Clip INT8 by constant INT8 bounds", b, 1, NULL);
  b = ob_new(13);
  uint8_t ulo = 7;
  ob_input(b, "x", O_UINT8, 2, D23);
  ob_init(b, "lo", O_UINT8, 0, NULL, &ulo, 1);
  ob_node(b, "Clip", "n", "x,lo,", "y");
  ob_output(b, "y", O_UINT8, 2, D23);
  expect("Clip UINT8 by a constant min only", b, 1, NULL);
  b = ob_new(13);
  ob_input(b, "x", O_INT8, 2, D23);
  ob_input(b, "lo", O_INT8, 0, NULL);
  ob_node(b, "Clip", "n", "x,lo", "y");
  ob_output(b, "y", O_INT8, 2, D23);
  expect("Clip INT8 by a min given as an input", b, 0, "constant scalar bounds");
  // FP64 travels as FP32 inside a plan (eng_ops_cpu_internal_dtype): the FP32 kernels take it
  expect("Clip FP64", unary("Clip", O_DOUBLE, O_DOUBLE), 1, NULL);
  expect("Clip FP32", unary("Clip", O_FLOAT, O_FLOAT), 1, NULL);
}

static void test_pow(void) {
  expect("Pow FP32 by INT32", binary("Pow", O_FLOAT, O_INT32, O_FLOAT), 1, NULL);
  expect("Pow INT64 by FP32", binary("Pow", O_INT64, O_FLOAT, O_INT64), 1, NULL);
  expect("Pow INT32 by INT32", binary("Pow", O_INT32, O_INT32, O_INT32), 1, NULL);
  expect("Pow FP64 by FP64", binary("Pow", O_DOUBLE, O_DOUBLE, O_DOUBLE), 1, NULL);
  expect("Pow UINT8 by FP16", binary("Pow", O_UINT8, O_FLOAT16, O_UINT8), 1, NULL);
  // mixed types run in FP32: an FP16 plan widens the FP16 operand first
  const cuda_op *op = eng_cuda__find_op("Pow");
  CHECK(op && op->half);
  if (op && op->half) {
    eng_tensor t[2] = {{.dt = DT_FP16}, {.dt = DT_INT32}};
    CHECK(!op->half(NULL, t, 2));
    t[1].dt = DT_FP16;
    CHECK(op->half(NULL, t, 2));
  }
}

static void test_elem_types(void) {
  expect("Relu INT32", unary("Relu", O_INT32, O_INT32), 0, "INT32 tensors have no CUDA kernel");
  expect("Relu FP32", unary("Relu", O_FLOAT, O_FLOAT), 1, NULL);
  expect("Relu FP16", unary("Relu", O_FLOAT16, O_FLOAT16), 1, NULL);
  expect("Neg INT32 (k_unary_int_cuda)", unary("Neg", O_INT32, O_INT32), 1, NULL);
  expect("Relu INT8", unary("Relu", O_INT8, O_INT8), 0, "INT8 tensors have no CUDA kernel");
  expect("Sqrt FP64", unary("Sqrt", O_DOUBLE, O_DOUBLE), 1, NULL);
  expect("Add FP64", binary("Add", O_DOUBLE, O_DOUBLE, O_DOUBLE), 1, NULL);
  expect("Add INT8", binary("Add", O_INT8, O_INT8, O_INT8), 1, NULL);
  expect("Equal BOOL", binary("Equal", O_BOOL, O_BOOL, O_BOOL), 1, NULL);
  expect("Less UINT8", binary("Less", O_UINT8, O_UINT8, O_BOOL), 1, NULL);
  // a computed value's type, known at load when the planned shapes are
  ob *b = ob_new(18);
  ob_input(b, "x", O_FLOAT, 2, D23);
  ob_attr_i(b, ob_node(b, "Cast", "c", "x", "i"), "to", O_INT32);
  ob_node(b, "Relu", "n", "i", "y");
  ob_output(b, "y", O_INT32, 2, D23);
  expect("Relu of a computed INT32 value, fixed shapes", b, 0, "INT32 tensors have no CUDA kernel");
  // without planned shapes the create's probe types it (eng_plan__probe_types): the same decision
  b = ob_new(18);
  ob_input(b, "x", O_FLOAT, 2, (int64_t[]){-1, 3});
  ob_attr_i(b, ob_node(b, "Cast", "c", "x", "i"), "to", O_INT32);
  ob_node(b, "Relu", "n", "i", "y");
  ob_output(b, "y", O_INT32, 2, (int64_t[]){-1, 3});
  expect("Relu of a computed value, runtime shapes", b, 0, "INT32 tensors have no CUDA kernel");
}

static void test_reduce(void) {
  ob *b = ob_new(18);
  ob_input(b, "x", O_BOOL, 2, D23);
  ob_node(b, "ReduceMax", "n", "x", "y");
  ob_output(b, "y", O_BOOL, 2, (int64_t[]){1, 1});
  expect("ReduceMax BOOL", b, 1, NULL);
  b = ob_new(18);
  ob_input(b, "x", O_INT32, 2, D23);
  ob_node(b, "ReduceSum", "n", "x", "y");
  ob_output(b, "y", O_INT32, 2, (int64_t[]){1, 1});
  expect("ReduceSum INT32", b, 0, "reductions of INT32 are not supported on CUDA");
  b = ob_new(13);
  ob_input(b, "x", O_FLOAT, 4, (int64_t[]){2, 3, 4, 5});
  ob_attr_ints(b, ob_node(b, "ReduceMean", "n", "x", "y"), "axes", 3, (int64_t[]){0, 2, 3});
  ob_output(b, "y", O_FLOAT, 4, (int64_t[]){1, 3, 1, 1});
  expect("ReduceMean over axes 0, 2, 3 (MVN's)", b, 1, NULL);
  b = ob_new(18);
  int64_t ax = 1;
  ob_input(b, "x", O_FLOAT, 2, (int64_t[]){2, 0});
  ob_init(b, "axes", O_INT64, 1, (int64_t[]){1}, &ax, sizeof ax);
  ob_node(b, "ReduceProd", "n", "x,axes", "y");
  ob_output(b, "y", O_FLOAT, 2, (int64_t[]){2, 1});
  expect("ReduceProd of an empty set", b, 1, NULL);
  b = ob_new(18);
  ob_input(b, "x", O_FLOAT, 2, D23);
  ob_input(b, "axes", O_INT64, 1, (int64_t[]){1});
  ob_node(b, "ReduceSum", "n", "x,axes", "y");
  ob_output(b, "y", O_FLOAT, 2, (int64_t[]){-1, -1});
  expect("ReduceSum by axes computed at run time", b, 0, "axes computed at run time");
  b = ob_new(14);
  int64_t zero = 0;
  ob_input(b, "x", 12 /* UINT32 */, 2, D23);
  ob_init(b, "axis", O_INT64, 0, NULL, &zero, sizeof zero);
  ob_node(b, "CumSum", "n", "x,axis", "y");
  ob_output(b, "y", 12, 2, D23);
  expect("CumSum UINT32", b, 0, "CumSum of UINT32 has no CUDA kernel");
  b = ob_new(13);
  ob_input(b, "x", O_UINT8, 2, D23);
  ob_attr_i(b, ob_node(b, "ArgMax", "n", "x", "y"), "axis", 1);
  ob_output(b, "y", O_INT64, 2, (int64_t[]){2, 1});
  expect("ArgMax UINT8", b, 0, "UINT8 data has no CUDA kernel");
  // a computed value's type, known at load with the planned shapes (it used to be checked per run)
  b = ob_new(13);
  ob_input(b, "x", O_FLOAT, 2, D23);
  ob_attr_i(b, ob_node(b, "Cast", "c", "x", "u"), "to", O_UINT8);
  ob_attr_i(b, ob_node(b, "ArgMax", "n", "u", "y"), "axis", 1);
  ob_output(b, "y", O_INT64, 2, (int64_t[]){2, 1});
  expect("ArgMax of a computed UINT8 value", b, 0, "UINT8 data has no CUDA kernel");
}

// --- a dynamic non-batch dim: types from the create's probe (eng_plan__probe_types)

static const int64_t DYN[] = {2, -1};  // a sequence length known per request only

// x [2, -1] FP32 cast to `to` into "c", then op_type over it (and `more`
// inputs) into y of type yt, dims [2, -1] (a model whose planned shapes
// are unknown at create: the refused node's input is a computed value).
static ob *cast_then(int opset, int to, const char *op, const char *more, int yt, Onnx__NodeProto **node) {
  ob *b = ob_new(opset);
  ob_input(b, "x", O_FLOAT, 2, DYN);
  ob_attr_i(b, ob_node(b, "Cast", "c", "x", "c"), "to", to);
  char ins[64];
  snprintf(ins, sizeof ins, "c%s", more);
  Onnx__NodeProto *n = ob_node(b, op, "n", ins, "y");
  if (node) *node = n;
  ob_output(b, "y", yt, 2, DYN);
  return b;
}

static ob *resize_linear(int to) {
  static const float sc[2] = {1.0f, 2.0f};
  Onnx__NodeProto *n;
  ob *b = cast_then(18, to, "Resize", ",,sc", to, &n);
  ob_init(b, "sc", O_FLOAT, 1, (int64_t[]){2}, sc, sizeof sc);
  ob_attr_s(b, n, "mode", "linear");
  return b;
}

// data (x cast to t) scattered with reduction `red` at indices i by updates (u cast to t)
static ob *scatter_red(int t, const char *red) {
  ob *b = ob_new(18);
  ob_input(b, "x", O_FLOAT, 2, DYN);
  ob_input(b, "i", O_INT64, 2, DYN);
  ob_input(b, "u", O_FLOAT, 2, DYN);
  ob_attr_i(b, ob_node(b, "Cast", "cx", "x", "d"), "to", t);
  ob_attr_i(b, ob_node(b, "Cast", "cu", "u", "v"), "to", t);
  Onnx__NodeProto *n = ob_node(b, "ScatterElements", "n", "d,i,v", "y");
  ob_attr_i(b, n, "axis", 1);
  if (red) ob_attr_s(b, n, "reduction", red);
  ob_output(b, "y", t, 2, DYN);
  return b;
}

static void test_dynamic(void) {
  expect("Relu of a computed INT32 value, dynamic dim", cast_then(18, O_INT32, "Relu", "", O_INT32, NULL), 0,
         "INT32 tensors have no CUDA kernel");
  expect("Relu of a computed FP32 value, dynamic dim", cast_then(18, O_FLOAT, "Relu", "", O_FLOAT, NULL), 1, NULL);
  expect("linear Resize of a computed UINT8 value, dynamic dim", resize_linear(O_UINT8), 0,
         "linear resize of UINT8 on CUDA");
  expect("linear Resize of a computed FP32 value, dynamic dim", resize_linear(O_FLOAT), 1, NULL);
  expect("ScatterElements add of a computed UINT8 value, dynamic dim", scatter_red(O_UINT8, "add"), 0,
         "a scatter reduction on UINT8 has no CUDA kernel");
  expect("ScatterElements add of INT32, dynamic dim", scatter_red(O_INT32, "add"), 1, NULL);
  expect("ScatterElements (no reduction) of UINT8, dynamic dim", scatter_red(O_UINT8, NULL), 1, NULL);
  float one = 1.0f;
  ob *b = cast_then(19, O_INT32, "DequantizeLinear", ",s", O_FLOAT, NULL);
  ob_init(b, "s", O_FLOAT, 0, NULL, &one, sizeof one);
  expect("DequantizeLinear of a computed INT32 value, dynamic dim", b, 0,
         "DequantizeLinear on CUDA of INT32: no kernel");
  b = cast_then(19, O_INT8, "DequantizeLinear", ",s", O_FLOAT, NULL);
  ob_init(b, "s", O_FLOAT, 0, NULL, &one, sizeof one);
  expect("DequantizeLinear of a computed INT8 value, dynamic dim", b, 1, NULL);
  expect("ReduceSum of a computed INT32 value, dynamic dim",
         cast_then(18, O_INT32, "ReduceSum", "", O_INT32, NULL), 0, "reductions of INT32 are not supported on CUDA");
  expect("ReduceSum of a computed FP32 value, dynamic dim",
         cast_then(18, O_FLOAT, "ReduceSum", "", O_FLOAT, NULL), 1, NULL);
  int64_t ax = 1;
  b = cast_then(14, 12 /* UINT32 */, "CumSum", ",ax", 12, NULL);
  ob_init(b, "ax", O_INT64, 0, NULL, &ax, sizeof ax);
  expect("CumSum of a computed UINT32 value, dynamic dim", b, 0, "CumSum of UINT32 has no CUDA kernel");
  b = cast_then(14, O_INT64, "CumSum", ",ax", O_INT64, NULL);
  ob_init(b, "ax", O_INT64, 0, NULL, &ax, sizeof ax);
  expect("CumSum of a computed INT64 value, dynamic dim", b, 1, NULL);
  b = cast_then(13, O_UINT8, "ArgMax", "", O_INT64, NULL);
  expect("ArgMax of a computed UINT8 value, dynamic dim", b, 0, "UINT8 data has no CUDA kernel");
  // the probe (dim 1) cannot infer a Reshape of [2, 1] into 6 elements: the
  // values from there on stay untyped, the load still succeeds and the
  // node keeps its CUDA op (its run checks the type)
  b = ob_new(18);
  ob_input(b, "x", O_FLOAT, 2, DYN);
  ob_init(b, "six", O_INT64, 1, (int64_t[]){1}, (int64_t[]){6}, sizeof(int64_t));
  ob_attr_i(b, ob_node(b, "Cast", "c", "x", "c"), "to", O_INT32);
  ob_node(b, "Reshape", "r", "c,six", "r");
  ob_node(b, "Relu", "n", "r", "y");
  ob_output(b, "y", O_INT32, 1, (int64_t[]){6});
  expect("Relu after a Reshape the probe cannot infer", b, 1, NULL);
  // a shape read from a graph input (a value input): only a run brings its bytes, so the same
  b = ob_new(18);
  ob_input(b, "x", O_FLOAT, 2, DYN);
  ob_input(b, "shape", O_INT64, 1, (int64_t[]){1});
  ob_attr_i(b, ob_node(b, "Cast", "c", "x", "c"), "to", O_INT32);
  ob_node(b, "Reshape", "r", "c,shape", "r");
  ob_node(b, "Relu", "n", "r", "y");
  ob_output(b, "y", O_INT32, 1, (int64_t[]){-1});
  expect("Relu after a Reshape by a shape given as an input", b, 1, NULL);
}

int main(void) {
  test_clip();
  test_pow();
  test_elem_types();
  test_reduce();
  test_dynamic();
  remove("cuda_init.onnx");
  CHECK_DONE();
}
