// tests/unit/engine/test_plan.c: the planner's memory reuse (exact arena
// sizes for chains, views that take no memory, in-place elementwise ops),
// batch independence (each row of a batch equals that row run alone), lazy
// re-planning for a dynamic non-batch dim, the load-time type probe leaving
// a plan as it found it, input validation, and two plans sharing one graph
// from two threads.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"
#include "onnx_build.h"

#define MODEL "plan_model.onnx"
enum { F = 1, I64 = 7 };

static uint32_t rng_state = 777;
static float frand(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static eng_graph *load(ob *b) {
  eng_graph *g = NULL;
  err e = {0};
  CHECK_EQ_INT(ob_save(b, MODEL), 0);
  if (eng_graph_load(MODEL, &g, &e) != 0) fprintf(stderr, "load: %s\n", e.msg);
  CHECK(g != NULL);
  return g;
}

// x[B,256] through `n` nodes; kinds: 's' Softmax, 'r' Relu, 'v' a view (Reshape/Flatten/Identity)
static eng_graph *chain(const char *kinds) {
  ob *b = ob_new(14);
  int64_t d[2] = {-1, 256};
  ob_input(b, "x", F, 2, d);
  ob_init(b, "shape", I64, 1, (int64_t[]){2}, (int64_t[]){0, -1}, 16);
  char prev[16] = "x", cur[16], name[16];
  int i = 0;
  for (const char *k = kinds; *k; k++, i++) {
    snprintf(cur, sizeof cur, "t%d", i);
    snprintf(name, sizeof name, "n%d", i);
    if (*k == 's') ob_node(b, "Softmax", name, prev, cur);
    else if (*k == 'r') ob_node(b, "Relu", name, prev, cur);
    else {
      static const char *views[3] = {"Reshape", "Flatten", "Identity"};
      char ins[40];
      snprintf(ins, sizeof ins, i % 3 == 0 ? "%s,shape" : "%s", prev);
      ob_node(b, views[i % 3], name, ins, cur);
    }
    memcpy(prev, cur, sizeof prev);
  }
  ob_output(b, prev, F, 2, d);
  return load(b);
}

static void test_reuse(void) {
  const size_t t = 4 * 256 * sizeof(float);  // one tensor at max_batch 4
  err e = {0};
  eng_plan *p = NULL;

  eng_graph *g = chain("ssssss");
  CHECK_EQ_INT(eng_plan_create(g, 4, &p, &e), 0);
  CHECK_EQ_INT(eng_plan_naive_bytes(p), 6 * t);
  CHECK_EQ_INT(eng_plan_arena_bytes(p), 2 * t);  // ping-pong, input buffer reused
  eng_plan_destroy(p);
  eng_graph_destroy(g);

  // the same chain with views between the softmaxes: same arena
  g = chain("svsvsvsvsvs");
  CHECK_EQ_INT(eng_plan_create(g, 4, &p, &e), 0);
  CHECK_EQ_INT(eng_plan_naive_bytes(p), 11 * t);
  CHECK_EQ_INT(eng_plan_arena_bytes(p), 2 * t);
  // and it still computes: the views see the right bytes
  float x[2 * 256];
  for (int i = 0; i < 512; i++) x[i] = frand() * 5;
  eng_tensor in = {DT_FP32, 2, {2, 256}, x, sizeof x}, out;
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, &out, 1, &e), 0);
  double s0 = 0, s1 = 0;
  for (int i = 0; i < 256; i++) {
    s0 += ((float *)out.data)[i];
    s1 += ((float *)out.data)[256 + i];
  }
  CHECK_NEAR(s0, 1.0, 1e-5, 0);
  CHECK_NEAR(s1, 1.0, 1e-5, 0);
  CHECK(out.data != x);
  eng_plan_destroy(p);
  eng_graph_destroy(g);

  // elementwise ops run in place: the whole chain lives in the input's buffer
  g = chain("rrrrr");
  CHECK_EQ_INT(eng_plan_create(g, 4, &p, &e), 0);
  CHECK_EQ_INT(eng_plan_naive_bytes(p), 5 * t);
  CHECK_EQ_INT(eng_plan_arena_bytes(p), t);
  for (int i = 0; i < 512; i++) x[i] = frand();
  float x_copy[512];
  memcpy(x_copy, x, sizeof x_copy);
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, &out, 1, &e), 0);
  int bad = 0;
  for (int i = 0; i < 512; i++) bad += ((float *)out.data)[i] != (x[i] > 0 ? x[i] : 0);
  CHECK_EQ_INT(bad, 0);
  CHECK(memcmp(x, x_copy, sizeof x_copy) == 0);  // in place on the arena copy, not the caller's
  eng_plan_destroy(p);
  eng_graph_destroy(g);
}

// x[B,16] -> MatMul -> Add -> LayerNorm -> Softmax, and a Relu branch as a second output
static eng_graph *batch_model(void) {
  ob *b = ob_new(17);
  float w[16 * 8], bias[8], s[8], lb[8];
  for (int i = 0; i < 128; i++) w[i] = frand();
  for (int i = 0; i < 8; i++) bias[i] = frand(), s[i] = frand(), lb[i] = frand();
  ob_input(b, "x", F, 2, (int64_t[]){-1, 16});
  ob_init(b, "w", F, 2, (int64_t[]){16, 8}, w, sizeof w);
  ob_init(b, "bias", F, 1, (int64_t[]){8}, bias, sizeof bias);
  ob_init(b, "s", F, 1, (int64_t[]){8}, s, sizeof s);
  ob_init(b, "lb", F, 1, (int64_t[]){8}, lb, sizeof lb);
  ob_node(b, "MatMul", "mm", "x,w", "h");
  ob_node(b, "Add", "add", "h,bias", "hb");
  ob_node(b, "LayerNormalization", "ln", "hb,s,lb", "l");
  ob_node(b, "Softmax", "sm", "l", "y");
  ob_node(b, "Relu", "relu", "hb", "z");
  ob_output(b, "y", F, 2, (int64_t[]){-1, 8});
  ob_output(b, "z", F, 2, (int64_t[]){-1, 8});
  return load(b);
}

static void test_batch_rows(void) {
  eng_graph *g = batch_model();
  if (!g) return;
  err e = {0};
  eng_plan *p = NULL;
  CHECK_EQ_INT(eng_plan_create(g, 8, &p, &e), 0);
  size_t arena = eng_plan_arena_bytes(p);
  CHECK(arena > 0);
  CHECK(arena < eng_plan_naive_bytes(p) + 8 * 16 * 4);
  float x[8 * 16], got[2][8 * 8];
  for (int b = 1; b <= 8; b++) {
    for (int i = 0; i < b * 16; i++) x[i] = frand() * 2;
    eng_tensor in = {DT_FP32, 2, {b, 16}, x, (size_t)b * 64}, out[2];
    CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), 0);
    CHECK_EQ_INT(out[0].dims[0], b);
    CHECK_EQ_INT(out[1].bytes, (size_t)b * 32);
    memcpy(got[0], out[0].data, (size_t)b * 32);
    memcpy(got[1], out[1].data, (size_t)b * 32);
    for (int r = 0; r < b; r++) {
      eng_tensor in1 = {DT_FP32, 2, {1, 16}, x + r * 16, 64}, o1[2];
      CHECK_EQ_INT(eng_plan_run(p, &in1, 1, o1, 2, &e), 0);
      int bad = 0;
      for (int k = 0; k < 2; k++)
        for (int j = 0; j < 8; j++) {
          float a = got[k][r * 8 + j], w = ((float *)o1[k].data)[j];
          bad += !(fabsf(a - w) <= 1e-6f + 1e-5f * fabsf(w));
        }
      CHECK_EQ_INT(bad, 0);
    }
  }
  CHECK_EQ_INT(eng_plan_arena_bytes(p), arena);  // no re-plan for batches up to max

  // input validation names the input
  eng_tensor in = {DT_FP32, 2, {9, 16}, x, sizeof x}, out[2];
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "'x'");
  CHECK_CONTAINS(e.msg, "batch size 9");
  in.dims[0] = 2;
  in.dims[1] = 15;
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "'x'");
  in.dims[1] = 16;
  in.dt = DT_FP64;
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "'x'");
  in.dt = DT_FP32;
  in.bytes = 10;
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "'x'");
  in.bytes = sizeof x;
  CHECK_EQ_INT(eng_plan_run(p, &in, 0, out, 2, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 1, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), 0);  // still usable
  eng_plan_destroy(p);

  // max_batch 0 uses the declared (dynamic) shape: planned at the first run
  CHECK_EQ_INT(eng_plan_create(g, 0, &p, &e), 0);
  CHECK_EQ_INT(eng_plan_arena_bytes(p), 0);
  in.dims[0] = 3;
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), 0);
  CHECK(eng_plan_arena_bytes(p) > 0);
  eng_plan_destroy(p);
  eng_graph_destroy(g);
}

static void test_replan_dynamic_dim(void) {
  ob *b = ob_new(13);
  ob_input(b, "x", F, 2, (int64_t[]){-1, -1});
  float half = 0.5f;
  ob_init(b, "half", F, 0, NULL, &half, 4);
  ob_node(b, "Softmax", "sm", "x", "s");
  ob_node(b, "Mul", "mul", "s,half", "y");
  ob_output(b, "y", F, 2, (int64_t[]){-1, -1});
  eng_graph *g = load(b);
  if (!g) return;
  err e = {0};
  eng_plan *p = NULL;
  CHECK_EQ_INT(eng_plan_create(g, 2, &p, &e), 0);
  CHECK_EQ_INT(eng_plan_arena_bytes(p), 0);  // T unknown until the first run
  static float x[2 * 64];
  size_t last = 0;
  int ts[4] = {4, 64, 4, 17};
  for (int r = 0; r < 4; r++) {
    int T = ts[r];
    for (int i = 0; i < 2 * T; i++) x[i] = frand() * 3;
    eng_tensor in = {DT_FP32, 2, {2, T}, x, (size_t)(2 * T) * 4}, out;
    CHECK_EQ_INT(eng_plan_run(p, &in, 1, &out, 1, &e), 0);
    CHECK_EQ_INT(out.dims[1], T);
    int bad = 0;
    for (int row = 0; row < 2; row++) {
      double mx = -1e30, s = 0;
      for (int j = 0; j < T; j++) mx = fmax(mx, x[row * T + j]);
      for (int j = 0; j < T; j++) s += exp(x[row * T + j] - mx);
      for (int j = 0; j < T; j++) {
        double want = 0.5 * exp(x[row * T + j] - mx) / s;
        bad += !(fabs(((float *)out.data)[row * T + j] - want) <= 1e-6 + 1e-5 * want);
      }
    }
    CHECK_EQ_INT(bad, 0);
    size_t a = eng_plan_arena_bytes(p);
    if (r == 0) CHECK(a >= 2 * 4 * 4);
    if (r == 1) CHECK(a > last);     // grew for T = 64
    if (r >= 2) CHECK_EQ_INT(a, last);  // smaller shapes fit: kept
    last = a;
  }
  eng_plan_destroy(p);
  eng_graph_destroy(g);
}

// eng_plan__probe_types (plan_probe.c) on a plan whose shapes are known per
// run only: it types every computed value, folds included, and leaves the
// plan's state as create left it, so the probed plan runs and answers
// exactly as an unprobed one, signature after signature.
static void test_probe_restores(void) {
  ob *b = ob_new(13);
  ob_input(b, "x", F, 2, (int64_t[]){-1, -1});
  float half = 0.5f;
  ob_init(b, "half", F, 0, NULL, &half, 4);
  ob_node(b, "Shape", "shape", "x", "sh");  // folded for each signature
  ob_node(b, "Reshape", "re", "x,sh", "r");
  ob_attr_i(b, ob_node(b, "Cast", "toi", "r", "ci"), "to", 6 /* INT32 */);
  ob_attr_i(b, ob_node(b, "Cast", "tof", "ci", "cf"), "to", F);
  ob_node(b, "Mul", "mul", "cf,half", "y");
  ob_output(b, "y", F, 2, (int64_t[]){-1, -1});
  eng_graph *g = load(b);
  if (!g) return;
  err e = {0};
  eng_plan *p = NULL, *q = NULL;  // p probed, q as create left it
  CHECK_EQ_INT(eng_plan_create(g, 2, &p, &e), 0);
  CHECK_EQ_INT(eng_plan_create(g, 2, &q, &e), 0);
  if (!p || !q) goto done;
  eng_plan__probe_types(p);
  static const dtype want[] = {DT_INT64, DT_FP32, DT_INT32, DT_FP32, DT_FP32};  // per node, in order
  CHECK_EQ_INT(p->n_nodes, 5);
  for (size_t i = 0; i < p->n_nodes && i < 5; i++) {
    int v = eng_graph_node(g, i)->out[0];
    CHECK_EQ_INT(p->load_dt[v], want[i]);
    CHECK_EQ_INT(q->load_dt[v], DT_INVALID);  // create does not probe (the CUDA plan calls it)
  }
  // nothing else moved: no layout, no signature, no folds, the same values
  CHECK_EQ_INT(p->have_layout, 0);
  CHECK_EQ_INT(p->have_sig, 0);
  CHECK_EQ_INT(p->folds, q->folds);
  CHECK_EQ_INT(p->mask_rows_shared, q->mask_rows_shared);
  CHECK_EQ_INT(memcmp(p->cur, q->cur, p->n_values * sizeof *p->cur), 0);
  CHECK_EQ_INT(memcmp(p->known, q->known, p->n_values), 0);
  CHECK_EQ_INT(memcmp(p->folded, q->folded, p->n_nodes), 0);
  for (size_t v = 0; v < p->n_values; v++) {
    CHECK(p->fold_buf[v] == NULL);
    CHECK_EQ_INT(p->fold_cap[v], 0);
  }
  static float x[2 * 9];
  int ts[3] = {3, 9, 3};
  for (int r = 0; r < 3; r++) {
    int T = ts[r];
    for (int i = 0; i < 2 * T; i++) x[i] = frand() * 5;
    eng_tensor in = {DT_FP32, 2, {2, T}, x, (size_t)(2 * T) * 4}, op, oq;
    CHECK_EQ_INT(eng_plan_run(p, &in, 1, &op, 1, &e), 0);
    CHECK_EQ_INT(eng_plan_run(q, &in, 1, &oq, 1, &e), 0);
    CHECK_EQ_INT(op.dims[1], T);
    CHECK_EQ_INT(oq.dims[1], T);
    CHECK_EQ_INT(op.bytes, oq.bytes);
    CHECK_EQ_INT(memcmp(op.data, oq.data, oq.bytes), 0);
    CHECK(((float *)op.data)[0] == 0.5f * (float)(int)x[0]);
    CHECK(p->folds > 0);  // Shape folded: the probe's folds did not stand in for the run's
    CHECK_EQ_INT(p->folds, q->folds);
    CHECK_EQ_INT(p->layouts, q->layouts);
    CHECK_EQ_INT(eng_plan_arena_bytes(p), eng_plan_arena_bytes(q));
  }
done:
  eng_plan_destroy(p);
  eng_plan_destroy(q);
  eng_graph_destroy(g);
}

// Identity of the input as the output: plan-owned memory, not the caller's
static void test_passthrough_output(void) {
  ob *b = ob_new(13);
  ob_input(b, "x", F, 1, (int64_t[]){4});
  ob_node(b, "Identity", "id", "x", "y");
  ob_output(b, "y", F, 1, (int64_t[]){4});
  ob_output(b, "x", F, 1, (int64_t[]){4});
  eng_graph *g = load(b);
  if (!g) return;
  err e = {0};
  eng_plan *p = NULL;
  CHECK_EQ_INT(eng_plan_create(g, 0, &p, &e), 0);
  float x[4] = {1, 2, 3, 4};
  eng_tensor in = {DT_FP32, 1, {4}, x, sizeof x}, out[2];
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), 0);
  CHECK(out[0].data != x && out[1].data != x);
  CHECK(memcmp(out[0].data, x, 16) == 0);
  CHECK(memcmp(out[1].data, x, 16) == 0);
  eng_plan_destroy(p);
  eng_graph_destroy(g);
}

// --- two plans, one graph, two threads

typedef struct worker {
  const eng_graph *g;
  const float *x;
  const float *want;  // [8][8] softmax outputs for batch 8
  int failures;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  eng_plan *p = NULL;
  err e = {0};
  if (eng_plan_create(w->g, 8, &p, &e) != 0) {
    w->failures++;
    return NULL;
  }
  for (int it = 0; it < 50; it++) {
    int b = 1 + it % 8;
    eng_tensor in = {DT_FP32, 2, {b, 16}, (void *)w->x, (size_t)b * 64}, out[2];
    if (eng_plan_run(p, &in, 1, out, 2, &e) != 0) {
      w->failures++;
      continue;
    }
    for (int i = 0; i < b * 8; i++)
      if (fabsf(((float *)out[0].data)[i] - w->want[i]) > 1e-6f + 1e-5f * fabsf(w->want[i])) w->failures++;
  }
  eng_plan_destroy(p);
  return NULL;
}

static void test_threads(void) {
  eng_graph *g = batch_model();
  if (!g) return;
  float x[8 * 16], want[64];
  for (int i = 0; i < 128; i++) x[i] = frand();
  eng_plan *p = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_plan_create(g, 8, &p, &e), 0);
  eng_tensor in = {DT_FP32, 2, {8, 16}, x, sizeof x}, out[2];
  CHECK_EQ_INT(eng_plan_run(p, &in, 1, out, 2, &e), 0);
  memcpy(want, out[0].data, sizeof want);
  eng_plan_destroy(p);
  worker w[2] = {{g, x, want, 0}, {g, x, want, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(pthread_create(&th[i], NULL, work, &w[i]), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(pthread_join(th[i], NULL), 0);
  CHECK_EQ_INT(w[0].failures, 0);
  CHECK_EQ_INT(w[1].failures, 0);
  eng_graph_destroy(g);
}

int main(void) {
  test_reuse();
  test_batch_rows();
  test_replan_dynamic_dim();
  test_probe_restores();
  test_passthrough_output();
  test_threads();
  CHECK_DONE();
}
