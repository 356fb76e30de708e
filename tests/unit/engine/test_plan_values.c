// tests/unit/engine/test_plan_values.c: parameters given as graph inputs
// (engine/cpu/plan_values.c) through the real loader, planner and executor:
// a Reshape whose shape is a model input, the same shape computed from an
// input by folded nodes, a Slice whose starts/ends are inputs, a TopK whose
// K is one, Tile's repeats, OneHot's depth; new values re-plan (shapes and
// arena), repeated values do not;
// bad values (a product that does not match, a negative dim, an axis out of
// range) fail that run with INVALID_ARGUMENT and leave the plan usable; a
// batching plan with such an input is refused at create.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"
#include "engine/graph/graph.h"
#include "onnx_build.h"

#define MODEL "plan_values_model.onnx"
#include "plan_case.h"
enum { F = 1, I64 = 7 };

static const float X6[6] = {0, 1, 2, 3, 4, 5};

// One run of the loaded plan: rc, and the output's dims into c->out[0].
static int run2(tc *c, const eng_tensor *x, const int64_t *s, int64_t ns) {
  eng_tensor in[2] = {*x, T(DT_INT64, 1, (int64_t[]){ns}, s)};
  return eng_plan_run(c->p, in, 2, c->out, 1, &c->e);
}

static void check_dims(const eng_tensor *o, int nd, const int64_t *dims) {
  CHECK_EQ_INT(o->ndims, nd);
  for (int i = 0; i < nd && i < o->ndims; i++) CHECK_EQ_INT(o->dims[i], dims[i]);
}

static void check_f32(const eng_tensor *o, const float *want, size_t n) {
  CHECK_EQ_INT(o->dt, DT_FP32);
  for (size_t i = 0; i < n; i++) CHECK(((const float *)o->data)[i] == want[i]);
}

static void test_reshape_shape_input(void) {
  ob *b = ob_new(13);
  ob_input(b, "x", F, 2, (int64_t[]){-1, -1});
  ob_input(b, "s", I64, 1, (int64_t[]){-1});
  ob_node(b, "Reshape", "reshape", "x,s", "y");
  ob_output(b, "y", F, -1, NULL);
  tc c;
  CHECK_EQ_INT(tc_load(&c, b, 0), 0);
  if (!c.p) {
    tc_close(&c);
    return;
  }
  CHECK_EQ_INT(c.p->n_val_in, 1);
  CHECK_EQ_INT(c.p->val_in[1], 1);
  CHECK_EQ_INT(c.p->val_in[0], 0);  // the data is not a parameter
  CHECK_EQ_INT(c.p->have_layout, 0);  // planned at the first run, which brings the shape
  eng_tensor x = T(DT_FP32, 2, (int64_t[]){2, 3}, X6);
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){3, 2}, 2), 0);
  check_dims(&c.out[0], 2, (int64_t[]){3, 2});
  check_f32(&c.out[0], X6, 6);
  uint64_t layouts = c.p->layouts;
  // the same values: no new shape inference, the layout stays
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){3, 2}, 2), 0);
  CHECK_EQ_INT(c.p->layouts, layouts);
  // new values: new shapes (rank too), -1 and 0 as ONNX reads them
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){-1}, 1), 0);
  check_dims(&c.out[0], 1, (int64_t[]){6});
  check_f32(&c.out[0], X6, 6);
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){0, 1, -1}, 3), 0);
  check_dims(&c.out[0], 3, (int64_t[]){2, 1, 3});
  // bad values fail the run with INVALID_ARGUMENT and a message, never more
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){4, 2}, 2), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(c.e.msg, "node 'reshape' (op_type 'Reshape')");
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){-2, 3}, 2), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(c.e.msg, "Reshape");
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){-1, -1}, 2), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){INT64_MAX, INT64_MAX}, 2), ERR_INVALID_ARGUMENT);
  // and the plan still serves good values after them
  CHECK_EQ_INT(run2(&c, &x, (int64_t[]){1, 6}, 2), 0);
  check_dims(&c.out[0], 2, (int64_t[]){1, 6});
  check_f32(&c.out[0], X6, 6);
  // a bigger data input with a value: the arena grows
  float x24[24];
  for (int i = 0; i < 24; i++) x24[i] = (float)i;
  eng_tensor xb = T(DT_FP32, 2, (int64_t[]){4, 6}, x24);
  CHECK_EQ_INT(run2(&c, &xb, (int64_t[]){2, 12}, 2), 0);
  check_dims(&c.out[0], 2, (int64_t[]){2, 12});
  check_f32(&c.out[0], x24, 24);
  tc_close(&c);

  // a batching plan would mix requests' shapes: refused, naming the input
  b = ob_new(13);
  ob_input(b, "x", F, 2, (int64_t[]){-1, 3});
  ob_input(b, "s", I64, 1, (int64_t[]){2});
  ob_node(b, "Reshape", "reshape", "x,s", "y");
  ob_output(b, "y", F, -1, NULL);
  CHECK_EQ_INT(tc_load(&c, b, 8), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(c.e.msg, "input 's'");
  CHECK_CONTAINS(c.e.msg, "max_batch_size 0");
  tc_close(&c);
}

// The shape computed from an input by nodes the planner folds per run
// (Add of a constant), and the same input read as data by another node.
static void test_folded_from_input(void) {
  ob *b = ob_new(13);
  ob_input(b, "x", F, 2, (int64_t[]){2, 3});
  ob_input(b, "s", I64, 1, (int64_t[]){2});
  ob_init(b, "one", I64, 0, NULL, (int64_t[]){1}, 8);
  ob_node(b, "Add", "add", "s,one", "s2");
  ob_node(b, "Reshape", "reshape", "x,s2", "y");
  ob_output(b, "y", F, -1, NULL);
  ob_output(b, "s2", I64, 1, (int64_t[]){2});
  tc c;
  CHECK_EQ_INT(tc_load(&c, b, 0), 0);
  if (!c.p) {
    tc_close(&c);
    return;
  }
  eng_tensor x = T(DT_FP32, 2, (int64_t[]){2, 3}, X6);
  eng_tensor in[2] = {x, T(DT_INT64, 1, (int64_t[]){2}, (int64_t[]){2, 1})};
  CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 2, &c.e), 0);
  check_dims(&c.out[0], 2, (int64_t[]){3, 2});
  check_f32(&c.out[0], X6, 6);
  CHECK_EQ_INT(((const int64_t *)c.out[1].data)[0], 3);
  CHECK_EQ_INT(((const int64_t *)c.out[1].data)[1], 2);
  int64_t s[2] = {0, 5};
  in[1].data = s;
  CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 2, &c.e), 0);
  check_dims(&c.out[0], 2, (int64_t[]){1, 6});
  s[1] = 4;  // [1, 5]: 5 elements for 6
  CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 2, &c.e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(c.e.msg, "reshape");
  tc_close(&c);
}

// Slice with starts, ends and axes as inputs (opset 13), bad axes refused.
static void test_slice_inputs(void) {
  ob *b = ob_new(13);
  ob_input(b, "x", F, 2, (int64_t[]){2, 3});
  ob_input(b, "st", I64, 1, (int64_t[]){1});
  ob_input(b, "en", I64, 1, (int64_t[]){1});
  ob_input(b, "ax", I64, 1, (int64_t[]){1});
  ob_node(b, "Slice", "slice", "x,st,en,ax", "y");
  ob_output(b, "y", F, -1, NULL);
  tc c;
  CHECK_EQ_INT(tc_load(&c, b, 0), 0);
  if (!c.p) {
    tc_close(&c);
    return;
  }
  CHECK_EQ_INT(c.p->n_val_in, 3);
  int64_t one[1] = {1};
  int64_t st[1] = {1}, en[1] = {3}, ax[1] = {1};
  eng_tensor in[4] = {T(DT_FP32, 2, (int64_t[]){2, 3}, X6), T(DT_INT64, 1, one, st), T(DT_INT64, 1, one, en),
                      T(DT_INT64, 1, one, ax)};
  CHECK_EQ_INT(eng_plan_run(c.p, in, 4, c.out, 1, &c.e), 0);
  check_dims(&c.out[0], 2, (int64_t[]){2, 2});
  check_f32(&c.out[0], (const float[]){1, 2, 4, 5}, 4);
  ax[0] = 0, st[0] = -1, en[0] = INT64_MAX;  // the last row
  CHECK_EQ_INT(eng_plan_run(c.p, in, 4, c.out, 1, &c.e), 0);
  check_dims(&c.out[0], 2, (int64_t[]){1, 3});
  check_f32(&c.out[0], (const float[]){3, 4, 5}, 3);
  ax[0] = 2;  // out of range for rank 2
  CHECK_EQ_INT(eng_plan_run(c.p, in, 4, c.out, 1, &c.e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(c.e.msg, "axis");
  tc_close(&c);
}

// TopK's K as an input: the output's size follows it; K beyond the axis fails.
static void test_topk_k_input(void) {
  ob *b = ob_new(11);
  ob_input(b, "x", F, 1, (int64_t[]){6});
  ob_input(b, "k", I64, 1, (int64_t[]){1});
  ob_node(b, "TopK", "topk", "x,k", "v,i");
  ob_output(b, "v", F, -1, NULL);
  ob_output(b, "i", I64, -1, NULL);
  tc c;
  CHECK_EQ_INT(tc_load(&c, b, 0), 0);
  if (!c.p) {
    tc_close(&c);
    return;
  }
  int64_t k[1] = {2};
  eng_tensor in[2] = {T(DT_FP32, 1, (int64_t[]){6}, X6), T(DT_INT64, 1, (int64_t[]){1}, k)};
  CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 2, &c.e), 0);
  check_dims(&c.out[0], 1, (int64_t[]){2});
  check_f32(&c.out[0], (const float[]){5, 4}, 2);
  k[0] = 4;
  CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 2, &c.e), 0);
  check_dims(&c.out[0], 1, (int64_t[]){4});
  check_f32(&c.out[0], (const float[]){5, 4, 3, 2}, 4);
  k[0] = 7;
  CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 2, &c.e), ERR_INVALID_ARGUMENT);
  k[0] = -1;
  CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 2, &c.e), ERR_INVALID_ARGUMENT);
  tc_close(&c);
}

// Tile's repeats and OneHot's depth as inputs: the output's size follows
// each request's value; negative repeats and a zero depth fail the run.
static void test_tile_onehot_inputs(void) {
  ob *b = ob_new(13);
  ob_input(b, "x", F, 2, (int64_t[]){2, 3});
  ob_input(b, "r", I64, 1, (int64_t[]){2});
  ob_node(b, "Tile", "tile", "x,r", "y");
  ob_output(b, "y", F, -1, NULL);
  tc c;
  CHECK_EQ_INT(tc_load(&c, b, 0), 0);
  if (c.p) {
    int64_t r[2] = {2, 1};
    eng_tensor in[2] = {T(DT_FP32, 2, (int64_t[]){2, 3}, X6), T(DT_INT64, 1, (int64_t[]){2}, r)};
    CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 1, &c.e), 0);
    check_dims(&c.out[0], 2, (int64_t[]){4, 3});
    check_f32(&c.out[0], (const float[]){0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, 12);
    r[0] = 1, r[1] = 2;
    CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 1, &c.e), 0);
    check_dims(&c.out[0], 2, (int64_t[]){2, 6});
    check_f32(&c.out[0], (const float[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}, 12);
    r[1] = -1;
    CHECK_EQ_INT(eng_plan_run(c.p, in, 2, c.out, 1, &c.e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(c.e.msg, "repeats[1] = -1 is negative");
  }
  tc_close(&c);

  b = ob_new(11);
  ob_input(b, "i", I64, 1, (int64_t[]){3});
  ob_input(b, "d", I64, 0, NULL);
  ob_input(b, "v", F, 1, (int64_t[]){2});
  ob_node(b, "OneHot", "onehot", "i,d,v", "y");
  ob_output(b, "y", F, -1, NULL);
  CHECK_EQ_INT(tc_load(&c, b, 0), 0);
  if (c.p) {
    int64_t idx[3] = {0, -1, 7}, depth = 3;
    float v[2] = {-1, 5};
    eng_tensor in[3] = {T(DT_INT64, 1, (int64_t[]){3}, idx), T(DT_INT64, 0, NULL, &depth),
                        T(DT_FP32, 1, (int64_t[]){2}, v)};
    CHECK_EQ_INT(eng_plan_run(c.p, in, 3, c.out, 1, &c.e), 0);
    check_dims(&c.out[0], 2, (int64_t[]){3, 3});
    check_f32(&c.out[0], (const float[]){5, -1, -1, -1, -1, 5, -1, -1, -1}, 9);
    depth = 8;  // 7 is in range now
    CHECK_EQ_INT(eng_plan_run(c.p, in, 3, c.out, 1, &c.e), 0);
    check_dims(&c.out[0], 2, (int64_t[]){3, 8});
    CHECK(((const float *)c.out[0].data)[2 * 8 + 7] == 5);
    CHECK(((const float *)c.out[0].data)[1 * 8 + 7] == 5);  // -1 counts from depth
    depth = 0;
    CHECK_EQ_INT(eng_plan_run(c.p, in, 3, c.out, 1, &c.e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(c.e.msg, "depth 0 is not a positive size");
  }
  tc_close(&c);
}

int main(void) {
  test_reshape_shape_input();
  test_folded_from_input();
  test_slice_inputs();
  test_topk_k_input();
  test_tile_onehot_inputs();
  CHECK_DONE();
}
