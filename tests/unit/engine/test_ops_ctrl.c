// tests/unit/engine/test_ops_ctrl.c: control flow (engine/ops/ctrl/: If,
// Loop, Scan) and the ops whose shapes are values (engine/ops/select/)
// through the real loader, planner and executor on small models built in C,
// beyond what ONNX's node tests cover: a Loop body reading an outer-scope
// value computed at run time, a while loop (no trip count, cond from the
// body), an If nested in a Loop reading the outermost scope, an If in a
// batched model, branches of different shapes, Scan in reverse, and the
// load errors of bad models. Expected values are computed by hand here.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cpu/plan.h"
#include "engine/graph/graph.h"
#include "onnx_build.h"

#define MODEL "ops_ctrl_model.onnx"
#include "plan_case.h"
enum { F = 1, I64 = 7, BOOL = 9 };

static const int64_t D1[1] = {1}, D2[1] = {2}, D3[1] = {3};

static void check_f32(const eng_tensor *o, int nd, const int64_t *dims, const float *want) {
  CHECK_EQ_INT(o->dt, DT_FP32);
  CHECK_EQ_INT(o->ndims, nd);
  if (o->ndims != nd) return;
  for (int d = 0; d < nd; d++) CHECK_EQ_INT(o->dims[d], dims[d]);
  for (int64_t i = 0; i < eng_numel(nd, dims); i++) CHECK_NEAR(((const float *)o->data)[i], want[i], 1e-6, 1e-6);
}

// Load and plan must fail (max_batch mb), the message holding s1 and s2.
static void expect_error(ob *b, int mb, const char *s1, const char *s2) {
  tc c;
  memset(&c, 0, sizeof c);
  CHECK_EQ_INT(ob_save(b, MODEL), 0);
  int rc = eng_graph_load(MODEL, &c.g, &c.e);
  if (!rc) rc = eng_plan_create(c.g, mb, &c.p, &c.e);
  CHECK(rc != 0);
  if (s1) CHECK_CONTAINS(c.e.msg, s1);
  if (s2) CHECK_CONTAINS(c.e.msg, s2);
  tc_close(&c);
}

// A Loop body with its inputs: the iteration number i, the condition c and
// one carried FP32 value named carried, of shape dims.
static ob *loop_body(const char *carried, int nd, const int64_t *dims) {
  ob *s = ob_new(13);
  ob_input(s, "i", I64, 0, NULL);
  ob_input(s, "c", BOOL, 0, NULL);
  ob_input(s, carried, F, nd, dims);
  return s;
}

// tc_run, which must succeed (what names the case in a failure); its rc.
static int run_ok(tc *c, ob *b, const eng_tensor *ins, size_t n_in, size_t n_out, const char *what) {
  int rc = tc_run(c, b, ins, n_in, n_out);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s: %s\n", what, c->e.msg);
  return rc;
}

// Runs b on its one FP32 [1] input x: its one output must be [1] holding
// want; what names the case in a failure.
static void run_one_case(ob *b, float x, float want, const char *what) {
  eng_tensor in = T(DT_FP32, 1, D1, &x);
  tc c;
  if (!run_ok(&c, b, &in, 1, 1, what)) check_f32(&c.out[0], 1, D1, &want);
  tc_close(&c);
}

// A Loop node "loop" in b on ins, its body body, its outputs outs.
static void add_loop(ob *b, const char *ins, const char *outs, ob *body) {
  Onnx__NodeProto *n = ob_node(b, "Loop", "loop", ins, outs);
  ob_attr_g(b, n, "body", body);
}

// An If node "if" in b on cond, its branches th and el, its output out.
static void add_if(ob *b, const char *cond, const char *out, ob *th, ob *el) {
  Onnx__NodeProto *n = ob_node(b, "If", "if", cond, out);
  ob_attr_g(b, n, "then_branch", th);
  ob_attr_g(b, n, "else_branch", el);
}

// body (i, c, x_in) -> (c, y = x_in + w, y, i): w from the enclosing graph
static ob *add_w_body(void) {
  ob *s = loop_body("x_in", 1, D2);
  ob_node(s, "Identity", "c_id", "c", "c_out");
  ob_node(s, "Add", "add", "x_in,w", "y");
  ob_node(s, "Identity", "y_id", "y", "y_scan");
  ob_node(s, "Identity", "i_id", "i", "i_scan");
  ob_output(s, "c_out", BOOL, 0, NULL);
  ob_output(s, "y", F, 1, D2);
  ob_output(s, "y_scan", F, 1, D2);
  ob_output(s, "i_scan", I64, 0, NULL);
  return s;
}

// Loop(M = 3) whose body adds w = a * 2, a graph input: an outer-scope value
// computed at run time. Final x = x0 + 3w; scan outputs stack every y and i.
static void test_loop_outer_scope(void) {
  ob *b = ob_new(13);
  int64_t m = 3;
  float two = 2;
  ob_input(b, "x", F, 1, D2);
  ob_input(b, "a", F, 1, D2);
  ob_init(b, "M", I64, 0, NULL, &m, sizeof m);
  ob_init(b, "two", F, 1, D1, &two, sizeof two);
  ob_node(b, "Mul", "mul", "a,two", "w");
  add_loop(b, "M,,x", "xf,ys,is", add_w_body());
  int64_t d32[2] = {3, 2};
  ob_output(b, "xf", F, 1, D2);
  ob_output(b, "ys", F, 2, d32);
  ob_output(b, "is", I64, 1, D3);
  float x[2] = {1, 2}, a[2] = {0.5f, 1};
  eng_tensor ins[2] = {T(DT_FP32, 1, D2, x), T(DT_FP32, 1, D2, a)};
  tc c;
  if (!run_ok(&c, b, ins, 2, 3, "loop")) {
    float xf[2] = {4, 8}, ys[6] = {2, 4, 3, 6, 4, 8};
    check_f32(&c.out[0], 1, D2, xf);
    check_f32(&c.out[1], 2, d32, ys);
    CHECK_EQ_INT(c.out[2].dt, DT_INT64);
    for (int i = 0; i < 3 && c.out[2].ndims == 1; i++) CHECK_EQ_INT(((const int64_t *)c.out[2].data)[i], i);
    // a second run with other outer values re-runs the body with them
    float a2[2] = {-1, 0};
    ins[1] = T(DT_FP32, 1, D2, a2);
    CHECK_EQ_INT(eng_plan_run(c.p, ins, 2, c.out, 3, &c.e), 0);
    float xf2[2] = {-5, 2};
    check_f32(&c.out[0], 1, D2, xf2);
  }
  tc_close(&c);
}

// A while loop: no trip count, the body computes cond (x * 2 < 100); x = 1
// doubles until 128. No scan outputs, so the iteration count needs no planning.
static void test_loop_while(void) {
  ob *b = ob_new(13);
  uint8_t t = 1;
  float lim = 100, two = 2;
  ob_input(b, "x", F, 1, D1);
  ob_init(b, "c0", BOOL, 0, NULL, &t, 1);
  ob_init(b, "lim", F, 1, D1, &lim, sizeof lim);
  ob_init(b, "two", F, 1, D1, &two, sizeof two);
  ob *s = loop_body("x_in", 1, D1);
  ob_node(s, "Mul", "mul", "x_in,two", "x2");
  ob_node(s, "Less", "less", "x2,lim", "lt");
  ob_node(s, "Squeeze", "sq", "lt", "c_out");
  ob_output(s, "c_out", BOOL, 0, NULL);
  ob_output(s, "x2", F, 1, D1);
  add_loop(b, ",c0,x", "xf", s);
  ob_output(b, "xf", F, 1, D1);
  run_one_case(b, 1, 128, "while");
}

// branch graph: out = Add(s_in, v), both from enclosing scopes
static ob *add_branch(const char *v) {
  ob *s = ob_new(13);
  char ins[64];
  snprintf(ins, sizeof ins, "s_in,%s", v);
  ob_node(s, "Add", "add", ins, "r");
  ob_output(s, "r", F, 1, D1);
  return s;
}

// Loop(M = 4) over s; its body holds If(i > 1) whose branches add the
// outermost graph's big (10) or small (1) to the body's s_in: names resolved
// two scopes up. s = 1 + 1 + 10 + 10 = 22.
static void test_if_nested_in_loop(void) {
  ob *b = ob_new(13);
  int64_t m = 4, one = 1;
  float big = 10, small = 1;
  ob_input(b, "s", F, 1, D1);
  ob_init(b, "M", I64, 0, NULL, &m, sizeof m);
  ob_init(b, "one", I64, 0, NULL, &one, sizeof one);
  ob_init(b, "big", F, 1, D1, &big, sizeof big);
  ob_init(b, "small", F, 1, D1, &small, sizeof small);
  ob *body = loop_body("s_in", 1, D1);
  ob_node(body, "Greater", "gt", "i,one", "late");
  add_if(body, "late", "s_out", add_branch("big"), add_branch("small"));
  ob_node(body, "Identity", "c_id", "c", "c_out");
  ob_output(body, "c_out", BOOL, 0, NULL);
  ob_output(body, "s_out", F, 1, D1);
  add_loop(b, "M,,s", "sf", body);
  ob_output(b, "sf", F, 1, D1);
  run_one_case(b, 0, 22, "nested");
}

// If in a batched model (max_batch 4): cond = sum(x) > 0, computed per run;
// then 2x, else -x, over the outer x of every row. cond is not known when
// planning; the branches agree in shape, so the plan holds for any cond.
static void test_if_batched(void) {
  ob *b = ob_new(13);
  float zero = 0, two = 2;
  int64_t dx[2] = {-1, 3};
  ob_input(b, "x", F, 2, dx);
  ob_init(b, "zero", F, 0, NULL, &zero, sizeof zero);
  ob_init(b, "two", F, 0, NULL, &two, sizeof two);
  Onnx__NodeProto *r = ob_node(b, "ReduceSum", "sum", "x", "s");
  ob_attr_i(b, r, "keepdims", 0);
  ob_node(b, "Greater", "gt", "s,zero", "pos");
  ob *th = ob_new(13), *el = ob_new(13);
  ob_node(th, "Mul", "mul", "x,two", "y2");
  ob_output(th, "y2", F, 2, dx);
  ob_node(el, "Neg", "neg", "x", "yn");
  ob_output(el, "yn", F, 2, dx);
  add_if(b, "pos", "y", th, el);
  ob_output(b, "y", F, 2, dx);
  tc c;
  int rc = tc_load(&c, b, 4);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "if batched: %s\n", c.e.msg);
  if (!rc) {
    float x[6] = {1, 2, 3, -1, 0, 1}, w2[6] = {2, 4, 6, -2, 0, 2};
    int64_t d2[2] = {2, 3}, d1[2] = {1, 3};
    eng_tensor in = T(DT_FP32, 2, d2, x);
    CHECK_EQ_INT(eng_plan_run(c.p, &in, 1, c.out, 1, &c.e), 0);
    check_f32(&c.out[0], 2, d2, w2);
    float xn[3] = {-1, -2, 0.5f}, wn[3] = {1, 2, -0.5f};
    in = T(DT_FP32, 2, d1, xn);
    CHECK_EQ_INT(eng_plan_run(c.p, &in, 1, c.out, 1, &c.e), 0);
    check_f32(&c.out[0], 2, d1, wn);
  }
  tc_close(&c);
}

// then gives [2], else [3]: with cond a graph input (max_batch 0) the plan
// reads cond while planning and takes its branch's shape; computed at run
// time (or batched) the load fails saying why.
static ob *shapes_model(int cond_computed) {
  ob *b = ob_new(13);
  float v2[2] = {1, 2}, v3[3] = {3, 4, 5}, zero = 0;
  ob_init(b, "v2", F, 1, D2, v2, sizeof v2);
  ob_init(b, "v3", F, 1, D3, v3, sizeof v3);
  if (cond_computed) {
    int64_t dx[1] = {-1};
    ob_input(b, "x", F, 1, dx);
    ob_init(b, "zero", F, 0, NULL, &zero, sizeof zero);
    ob_node(b, "Relu", "relu", "x", "rx");
    Onnx__NodeProto *r = ob_node(b, "ReduceSum", "sum", "rx", "s");
    ob_attr_i(b, r, "keepdims", 0);
    ob_node(b, "Greater", "gt", "s,zero", "cond");
  } else {
    ob_input(b, "cond", BOOL, 0, NULL);
  }
  ob *th = ob_new(13), *el = ob_new(13);
  ob_node(th, "Identity", "a", "v2", "o2");
  ob_output(th, "o2", F, 1, D2);
  ob_node(el, "Identity", "b", "v3", "o3");
  ob_output(el, "o3", F, 1, D3);
  add_if(b, "cond", "y", th, el);
  int64_t dy[1] = {-1};
  ob_output(b, "y", F, 1, dy);
  return b;
}

static void test_if_branch_shapes(void) {
  tc c;
  int rc = tc_load(&c, shapes_model(0), 0);
  CHECK_EQ_INT(rc, 0);
  if (!rc) {
    uint8_t t = 1, f = 0;
    eng_tensor in = T(DT_BOOL, 0, NULL, &t);
    CHECK_EQ_INT(eng_plan_run(c.p, &in, 1, c.out, 1, &c.e), 0);
    float w2[2] = {1, 2}, w3[3] = {3, 4, 5};
    check_f32(&c.out[0], 1, D2, w2);
    in = T(DT_BOOL, 0, NULL, &f);
    CHECK_EQ_INT(eng_plan_run(c.p, &in, 1, c.out, 1, &c.e), 0);
    check_f32(&c.out[0], 1, D3, w3);
  }
  tc_close(&c);
  // cond from x through Relu: x becomes a value input too (max_batch 0)
  // and the cond folds; batched, it cannot, and the branches disagree
  rc = tc_load(&c, shapes_model(1), 0);
  CHECK_EQ_INT(rc, 0);
  if (!rc) {
    float x = 3;
    eng_tensor in = T(DT_FP32, 1, D1, &x);
    CHECK_EQ_INT(eng_plan_run(c.p, &in, 1, c.out, 1, &c.e), 0);
    CHECK_EQ_INT(c.out[0].dims[0], 2);
  }
  tc_close(&c);
}

// Scan (opset 11), the scan input read in reverse: running sums of
// [[1,2],[3,4],[5,6]] from the last row.
static void test_scan_reverse(void) {
  ob *b = ob_new(11);
  int64_t d32[2] = {3, 2};
  ob_input(b, "s0", F, 1, D2);
  ob_input(b, "xs", F, 2, d32);
  ob *s = ob_new(11);
  ob_input(s, "s_in", F, 1, D2);
  ob_input(s, "xi", F, 1, D2);
  ob_node(s, "Add", "add", "s_in,xi", "s_out");
  ob_node(s, "Identity", "id", "s_out", "y");
  ob_output(s, "s_out", F, 1, D2);
  ob_output(s, "y", F, 1, D2);
  Onnx__NodeProto *n = ob_node(b, "Scan", "scan", "s0,xs", "sf,ys");
  ob_attr_g(b, n, "body", s);
  ob_attr_i(b, n, "num_scan_inputs", 1);
  int64_t rev = 1;
  ob_attr_ints(b, n, "scan_input_directions", 1, &rev);
  ob_output(b, "sf", F, 1, D2);
  ob_output(b, "ys", F, 2, d32);
  float s0[2] = {0, 0}, xs[6] = {1, 2, 3, 4, 5, 6};
  eng_tensor ins[2] = {T(DT_FP32, 1, D2, s0), T(DT_FP32, 2, d32, xs)};
  tc c;
  if (!run_ok(&c, b, ins, 2, 2, "scan")) {
    float sf[2] = {9, 12}, ys[6] = {5, 6, 8, 10, 9, 12};
    check_f32(&c.out[0], 1, D2, sf);
    check_f32(&c.out[1], 2, d32, ys);
  }
  tc_close(&c);
}

// Bad models fail the load with a message naming the problem.
static void test_bad_models(void) {
  // a body reading a name no scope defines
  ob *b = ob_new(13);
  int64_t m = 2;
  ob_input(b, "x", F, 1, D2);
  ob_init(b, "M", I64, 0, NULL, &m, sizeof m);
  ob *s = add_w_body();  // reads w, which this model does not define
  add_loop(b, "M,,x", "xf", s);
  ob_output(b, "xf", F, 1, D2);
  expect_error(b, 0, "input 'w' is not defined", "subgraph 'body'");

  // neither a trip count nor a condition
  b = ob_new(13);
  float w = 1;
  ob_input(b, "x", F, 1, D2);
  ob_init(b, "w", F, 1, D1, &w, sizeof w);
  add_loop(b, ",,x", "xf,ys,is", add_w_body());
  ob_output(b, "xf", F, 1, D2);
  expect_error(b, 0, "neither a trip count M nor a condition", "never end");

  // a Loop without its body
  b = ob_new(13);
  ob_input(b, "x", F, 1, D2);
  ob_init(b, "M", I64, 0, NULL, &m, sizeof m);
  ob_node(b, "Loop", "loop", "M,,x", "xf");
  ob_output(b, "xf", F, 1, D2);
  expect_error(b, 0, "graph attribute 'body'", NULL);

  // a body whose outputs do not match the Loop's (1 + 1 carried + 2 scan expected 4)
  b = ob_new(13);
  ob_input(b, "x", F, 1, D2);
  ob_init(b, "M", I64, 0, NULL, &m, sizeof m);
  ob_init(b, "w", F, 1, D1, &w, sizeof w);
  add_loop(b, "M,,x", "xf,ys", add_w_body());
  ob_output(b, "xf", F, 1, D2);
  expect_error(b, 0, "body has 3 inputs and 4 outputs, expected 3 and 3", NULL);

  // If whose branches differ in shape with cond computed at run time, batched
  expect_error(shapes_model(1), 4, "branches of different shapes", "F");  // "FP32 [2]" vs "FP32 [3]"

  // scan outputs whose length the body decides at run time
  b = ob_new(13);
  int64_t dbx[2] = {-1, 2};
  ob_input(b, "x", F, 2, dbx);
  ob_init(b, "M", I64, 0, NULL, &m, sizeof m);
  ob_init(b, "w", F, 1, D1, &w, sizeof w);
  s = loop_body("x_in", 2, dbx);
  ob_node(s, "Add", "add", "x_in,w", "y");
  Onnx__NodeProto *rb = ob_node(s, "ReduceSum", "rs", "y", "sum");
  ob_attr_i(b, rb, "keepdims", 0);
  ob_node(s, "Less", "lt", "sum,zero", "c_out");
  ob_node(s, "Identity", "yid", "y", "ys");
  ob_output(s, "c_out", BOOL, 0, NULL);
  ob_output(s, "y", F, 2, dbx);
  ob_output(s, "ys", F, 2, dbx);
  float zero = 0;
  ob_init(b, "zero", F, 0, NULL, &zero, sizeof zero);
  Onnx__NodeProto *rs = ob_node(b, "ReduceSum", "rsx", "x", "sx");
  ob_attr_i(b, rs, "keepdims", 0);
  ob_node(b, "Greater", "gtx", "sx,zero", "go");
  add_loop(b, "M,go,x", "xf,yss", s);
  ob_output(b, "xf", F, 2, dbx);
  int64_t dd[3] = {-1, -1, 2};
  ob_output(b, "yss", F, 3, dd);
  expect_error(b, 4, "number of iterations", "not known when planning");
}

// A body that fails at its third iteration (Gather of the iteration number
// from 2 values): the run fails naming the iteration and the body's error,
// nothing leaks, and the plan runs again afterwards.
static void test_loop_body_fails(void) {
  ob *b = ob_new(13);
  float vals[2] = {5, 7};
  ob_input(b, "m", I64, 0, NULL);
  ob_init(b, "vals", F, 1, D2, vals, sizeof vals);
  float zero = 0;
  ob_init(b, "acc0", F, 0, NULL, &zero, sizeof zero);
  ob *s = loop_body("acc", 0, NULL);
  ob_node(s, "Gather", "g", "vals,i", "v");
  ob_node(s, "Add", "add", "acc,v", "acc_out");
  ob_node(s, "Identity", "c_id", "c", "c_out");
  ob_output(s, "c_out", BOOL, 0, NULL);
  ob_output(s, "acc_out", F, 0, NULL);
  add_loop(b, "m,,acc0", "total", s);
  ob_output(b, "total", F, 0, NULL);
  tc c;
  int rc = tc_load(&c, b, 0);
  CHECK_EQ_INT(rc, 0);
  if (!rc) {
    int64_t m = 3;
    eng_tensor in = T(DT_INT64, 0, NULL, &m);
    rc = eng_plan_run(c.p, &in, 1, c.out, 1, &c.e);
    CHECK(rc != 0);
    CHECK_CONTAINS(c.e.msg, "iteration 2");
    m = 2;
    CHECK_EQ_INT(eng_plan_run(c.p, &in, 1, c.out, 1, &c.e), 0);
    float want = 12;
    check_f32(&c.out[0], 0, NULL, &want);
  }
  tc_close(&c);
}

// The shape-from-values ops in a batched model: refused (their input would
// mix the batch's requests), saying which input.
static void test_select_batched(void) {
  ob *b = ob_new(13);
  int64_t dx[2] = {-1, 3};
  ob_input(b, "x", F, 2, dx);
  ob_node(b, "NonZero", "nz", "x", "idx");
  int64_t dy[2] = {2, -1};
  ob_output(b, "idx", I64, 2, dy);
  expect_error(b, 4, "cannot be batched", "input 'x'");
}

int main(void) {
  test_loop_outer_scope();
  test_loop_while();
  test_if_nested_in_loop();
  test_if_batched();
  test_if_branch_shapes();
  test_scan_reverse();
  test_bad_models();
  test_loop_body_fails();
  test_select_batched();
  CHECK_DONE();
}
