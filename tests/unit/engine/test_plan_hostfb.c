// tests/unit/engine/test_plan_hostfb.c: the host fallback's device-free half
// (engine/cpu/plan_hostfb.h) without a GPU. The "device" is host memory:
// each value the device keeps gets its own buffer (FP16 for FP32 values in
// half mode, as the CUDA plan stores them), device nodes run the ops' CPU
// kernels on it, and the host nodes go through eng_hostfb_node exactly as
// the CUDA plan drives it. Like a CUDA stream, nothing runs while
// enqueueing: copies, host runs and device nodes are queued and run after
// the whole batch is enqueued, then run again (a captured graph's replay), so
// a snapshot that reads state changed after enqueueing shows up as a wrong
// result. Checked per model: the host nodes found and their load lines, the
// values copied down and up per run (counts and bytes), and the outputs
// against the CPU plan (equal in FP32; within FP16 rounding in half mode).
// The models are gen_test_models.py's host fallback models, which
// tests/gpu/test_gpu_plan runs on a GPU.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_hostfb.h"
#include "engine/cpu/plan_internal.h"
#include "engine/graph/graph.h"
#include "kernels/k_ref.h"

#define MAXB 4
#define ALIGN 64

static size_t numel(const eng_tensor *t) {
  return (size_t)eng_numel(t->ndims, t->dims);
}

// --- the simulated stream

typedef enum { Q_DOWN, Q_UP, Q_JOB, Q_DEV } qkind;
typedef struct qop {
  qkind kind;
  size_t node;
  void *dst;
  const void *src;
  size_t bytes;
  eng_hostfb_job *job;
} qop;

typedef struct sim {
  const eng_plan *pl;
  int half;
  const uint8_t *dev_op;
  void **dev;  // per value the device keeps: its buffer, as stored
  qop *q;
  size_t nq, capq;
  size_t downs, ups;  // copies seen through the callbacks
} sim;

static int push(sim *s, qop op) {
  if (s->nq == s->capq) {
    size_t c = s->capq ? 2 * s->capq : 64;
    qop *q = realloc(s->q, c * sizeof *q);
    if (!q) return -1;
    s->q = q;
    s->capq = c;
  }
  s->q[s->nq++] = op;
  return 0;
}

static int io_down(void *ctx, size_t i, int k, int v, void *dst, size_t bytes, err *e) {
  (void)i, (void)k;
  sim *s = ctx;
  if (!s->dev[v]) return err_set(e, ERR_INTERNAL, "value %d has no device buffer", v);
  s->downs++;
  return push(s, (qop){.kind = Q_DOWN, .dst = dst, .src = s->dev[v], .bytes = bytes}) ? ERR_RESOURCE_EXHAUSTED : 0;
}

static int io_launch(void *ctx, eng_hostfb_job *job, err *e) {
  (void)e;
  return push(ctx, (qop){.kind = Q_JOB, .job = job}) ? ERR_RESOURCE_EXHAUSTED : 0;
}

static int io_up(void *ctx, int v, const void *src, size_t bytes, err *e) {
  sim *s = ctx;
  if (!s->dev[v]) return err_set(e, ERR_INTERNAL, "value %d has no device buffer", v);
  s->ups++;
  return push(s, (qop){.kind = Q_UP, .dst = s->dev[v], .src = src, .bytes = bytes}) ? ERR_RESOURCE_EXHAUSTED : 0;
}

static int stored_half(const sim *s, int v) {
  return s->half && s->pl->cur[v].dt == DT_FP32;
}

// Value v as a device node's CPU kernel reads it: the planner's bytes for
// constants and folded values, else the device buffer (widened into w in half mode).
static void dev_view(const sim *s, int v, eng_tensor *t, void **w) {
  *t = s->pl->cur[v];
  t->bytes = numel(t) * dtype_size(t->dt);
  *w = NULL;
  if (s->pl->known[v]) return;
  t->data = s->dev[v];
  if (stored_half(s, v)) {
    *w = malloc(t->bytes + 4);
    k_f16_to_f32(*w, s->dev[v], numel(t));
    t->data = *w;
  }
}

// Device node i: the op's CPU kernel on the device buffers.
static int run_dev(sim *s, size_t i, err *e) {
  const eng_plan *pl = s->pl;
  const eng_node *n = eng_graph_node(pl->g, i);
  eng_tensor in[16], out[16];
  void *win[16] = {0}, *wout[16] = {0};
  if (n->n_in > 16 || n->n_out > 16) return err_set(e, ERR_INTERNAL, "node too wide for the simulation");
  for (int k = 0; k < n->n_in; k++) {
    if (n->in[k] < 0)
      memset(&in[k], 0, sizeof in[k]);
    else
      dev_view(s, n->in[k], &in[k], &win[k]);
  }
  for (int k = 0; k < n->n_out; k++) {
    int v = n->out[k];
    if (v < 0) {
      memset(&out[k], 0, sizeof out[k]);
      continue;
    }
    out[k] = pl->cur[v];
    out[k].bytes = numel(&out[k]) * dtype_size(out[k].dt);
    out[k].data = s->dev[v];
    if (stored_half(s, v)) out[k].data = wout[k] = malloc(out[k].bytes + 4);
  }
  if ((pl->defs[i]->flags & ENG_OP_ALIAS) && n->n_out > 0 && out[0].bytes)
    memcpy(out[0].data, in[0].data, out[0].bytes);
  int rc = pl->defs[i]->run(&pl->params[i], in, n->n_in, out, n->n_out, e);
  for (int k = 0; k < n->n_out; k++)
    if (wout[k]) {
      if (!rc) k_f32_to_f16(s->dev[n->out[k]], wout[k], numel(&out[k]));
      free(wout[k]);
    }
  for (int k = 0; k < n->n_in; k++) free(win[k]);
  if (rc) err_prefix(e, "device node '%s': ", n->name);
  return rc;
}

static int run_queue(sim *s, err *e) {
  for (size_t k = 0; k < s->nq; k++) {
    qop *o = &s->q[k];
    switch (o->kind) {
      case Q_DOWN:
      case Q_UP:
        memcpy(o->dst, o->src, o->bytes);
        break;
      case Q_JOB:
        eng_hostfb_job_run(o->job);
        break;
      case Q_DEV:
        TRY(run_dev(s, o->node, e));
        break;
    }
  }
  return 0;
}

// --- one model

typedef struct hcase {
  const char *name;
  const char *host_ops[3];  // the op types without a device path in this test
  int nodes, downs, ups;    // host nodes, values copied down and up per run
  const char *line_has;     // in the first load line
} hcase;

static eng_graph *load(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.onnx", INFERD_GRAPH_MODELS, name);
  eng_graph *g = NULL;
  err e = {0};
  if (eng_graph_load(path, &g, &e) != 0) fprintf(stderr, "%s: %s\n", path, e.msg);
  return g;
}

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int is_host_op(const hcase *c, const char *op) {
  for (int k = 0; k < 3 && c->host_ops[k]; k++)
    if (strcmp(c->host_ops[k], op) == 0) return 1;
  return 0;
}

static void run_case(const hcase *c, int half) {
  eng_graph *g = load(c->name);
  CHECK(g != NULL);
  if (!g) return;
  err e = {0};
  eng_plan *cp = NULL, *pl = NULL;
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  CHECK_EQ_INT(eng_plan__create(g, MAXB, 0, &pl, &e), 0);
  if (!cp || !pl) {
    fprintf(stderr, "%s: %s\n", c->name, e.msg);
    eng_plan_destroy(cp);
    eng_graph_destroy(g);
    return;
  }
  // the snapshot's room per job comes from these (the SIGSEGV of 2026-12-03: they were never set)
  int wide_in = 1, wide_out = 1;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    if (n->n_in > wide_in) wide_in = n->n_in;
    if (n->n_out > wide_out) wide_out = n->n_out;
  }
  CHECK_EQ_INT(pl->max_arity_in, wide_in);
  CHECK_EQ_INT(pl->max_arity_out, wide_out);
  uint8_t *dev_op = calloc(pl->n_nodes + 1, 1);
  for (size_t i = 0; i < pl->n_nodes; i++) dev_op[i] = !is_host_op(c, eng_graph_node(g, i)->op_type);
  uint8_t *derived = eng_hostfb_derived(pl);
  eng_hostfb *h = NULL;
  CHECK_EQ_INT(eng_hostfb_create(pl, dev_op, derived, NULL, half, &h, &e), 0);
  free(derived);
  if (h) {
    CHECK_EQ_INT(eng_hostfb_n_host(h), c->nodes);
    CHECK_CONTAINS(eng_hostfb_line(h, 0), c->line_has);
    CHECK_CONTAINS(eng_hostfb_line(h, 0), "runs on the host");
    CHECK(eng_hostfb_line(h, (size_t)c->nodes) == NULL);
    // bytes per batch at the planned shapes (MAXB): x [4, 2, 3] and the scalar mx in, y [4, 2, 5] out
    if (strcmp(c->name, "pad_runtime_value") == 0)
      CHECK_CONTAINS(eng_hostfb_line(h, 0),
                     half ? "(50 bytes in, 80 out per batch)" : "(100 bytes in, 160 out per batch)");
  }
  size_t n_in = eng_graph_n_inputs(g), n_out = eng_graph_n_outputs(g);
  for (int b = 1; h && b <= MAXB; b += 2) {
    // inputs: FP32, the batch first
    eng_tensor in[8];
    float *data[8] = {0};
    for (size_t k = 0; k < n_in && k < 8; k++) {
      const eng_io *io = eng_graph_input(g, k);
      in[k] = (eng_tensor){.dt = io->dt, .ndims = io->ndims};
      memcpy(in[k].dims, io->dims, sizeof in[k].dims);
      in[k].dims[0] = b;
      size_t nel = numel(&in[k]);
      data[k] = malloc(nel * sizeof(float) + 4);
      for (size_t x = 0; x < nel; x++) data[k][x] = frand();
      in[k].data = data[k];
      in[k].bytes = nel * sizeof(float);
    }
    eng_tensor ref[8];
    CHECK_EQ_INT(eng_plan_run(cp, in, n_in, ref, n_out, &e), 0);
    CHECK_EQ_INT(eng_plan__prepare(pl, in, n_in, n_out, &e), 0);
    size_t *hv_off = calloc(pl->n_values + 1, sizeof *hv_off), *hv32_off = calloc(pl->n_values + 1, sizeof *hv32_off);
    size_t total = eng_hostfb_staging(h, hv_off, hv32_off, 0, ALIGN);
    uint8_t *base = aligned_alloc(ALIGN, total + ALIGN);
    memset(base, 0xa5, total + ALIGN);  // garbage until written: a region read before its copy shows
    eng_hostfb_stage(h, base, hv_off);
    sim s = {.pl = pl, .half = half, .dev_op = dev_op};
    s.dev = calloc(pl->n_values + 1, sizeof *s.dev);
    for (size_t v = 0; v < pl->n_values; v++) {
      if (pl->known[v]) continue;
      const eng_tensor *t = &pl->cur[v];
      s.dev[v] = calloc(numel(t) * dtype_size(stored_half(&s, (int)v) ? DT_FP16 : t->dt) + 8, 1);
    }
    for (size_t k = 0; k < n_in; k++) {  // the copy-in
      int v = eng_graph_input_value(g, k);
      if (pl->known[v]) continue;
      if (stored_half(&s, v))
        k_f32_to_f16(s.dev[v], in[k].data, numel(&in[k]));
      else
        memcpy(s.dev[v], in[k].data, in[k].bytes);
    }
    eng_hostfb_run *run = eng_hostfb_run_new(h);
    CHECK(run != NULL);
    eng_hostfb_run_reset(run);
    eng_hostfb_begin(h, run);
    eng_hostfb_io io = {.ctx = &s, .down = io_down, .launch = io_launch, .up = io_up};
    int rc = 0;
    for (size_t i = 0; i < pl->n_nodes && !rc; i++) {
      if (pl->folded[i]) continue;
      if (dev_op[i])
        rc = push(&s, (qop){.kind = Q_DEV, .node = i});
      else
        rc = eng_hostfb_node(h, run, i, base, hv_off, hv32_off, &io, &e);
    }
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "%s: %s\n", c->name, e.msg);
    eng_hostfb_counts cn;
    eng_hostfb_counts_get(h, &cn);
    CHECK_EQ_INT(cn.nodes, c->nodes);
    CHECK_EQ_INT(cn.down, c->downs);
    CHECK_EQ_INT(cn.up, c->ups);
    CHECK_EQ_INT(s.downs, c->downs);
    CHECK_EQ_INT(s.ups, c->ups);
    CHECK(cn.down_bytes > 0 && cn.up_bytes > 0);
    // twice: the first run, then a replay of the same enqueue (a captured graph's)
    for (int pass = 0; pass < 2 && !rc; pass++) {
      eng_hostfb_run_reset(run);
      CHECK_EQ_INT(run_queue(&s, &e), 0);
      CHECK_EQ_INT(eng_hostfb_run_check(run, &e), 0);
      size_t bad = 0;
      double worst = 0;
      for (size_t j = 0; j < n_out; j++) {
        int v = eng_graph_output_value(g, j);
        const eng_tensor *t = &pl->cur[v];
        size_t nel = numel(t);
        CHECK_EQ_INT(nel, numel(&ref[j]));
        if (t->dt != DT_FP32 || nel != numel(&ref[j])) continue;
        float *got = malloc(nel * sizeof(float) + 4);
        if (pl->known[v])
          memcpy(got, t->data, nel * sizeof(float));
        else if (stored_half(&s, v))
          k_f16_to_f32(got, s.dev[v], nel);
        else
          memcpy(got, s.dev[v], nel * sizeof(float));
        const float *want = ref[j].data;
        for (size_t x = 0; x < nel; x++) {
          double d = got[x] > want[x] ? got[x] - want[x] : want[x] - got[x];
          double tol = half ? 2e-2 + 2e-2 * (want[x] < 0 ? -want[x] : want[x]) : 0;
          if (d > worst) worst = d;
          if (!(d <= tol)) bad++;
        }
        free(got);
      }
      CHECK_EQ_INT(bad, 0);
      if (pass == 1)
        printf("%s %s batch %d: %zu host node(s), %zu down (%zu bytes), %zu up (%zu bytes), worst error %.3g\n",
               c->name, half ? "half" : "fp32", b, cn.nodes, cn.down, cn.down_bytes, cn.up, cn.up_bytes, worst);
    }
    eng_hostfb_run_free(run);
    for (size_t v = 0; v < pl->n_values; v++) free(s.dev[v]);
    free(s.dev);
    free(s.q);
    free(base);
    free(hv_off);
    free(hv32_off);
    for (size_t k = 0; k < n_in && k < 8; k++) free(data[k]);
  }
  eng_hostfb_destroy(h);
  free(dev_op);
  eng_plan_destroy(pl);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}

// --- what the planning refuses

static int noop_down(void *ctx, size_t i, int k, int v, void *dst, size_t bytes, err *e) {
  (void)ctx, (void)i, (void)k, (void)v, (void)dst, (void)bytes, (void)e;
  return 0;
}
static int noop_launch(void *ctx, eng_hostfb_job *job, err *e) {
  (void)ctx, (void)job, (void)e;
  return 0;
}
static int noop_up(void *ctx, int v, const void *src, size_t bytes, err *e) {
  (void)ctx, (void)v, (void)src, (void)bytes, (void)e;
  return 0;
}

static void test_refusals(void) {
  eng_graph *g = load("host_chain");
  if (!g) return;
  err e = {0};
  eng_plan *pl = NULL;
  CHECK_EQ_INT(eng_plan__create(g, MAXB, 0, &pl, &e), 0);
  if (pl) {
    uint8_t *dev_op = calloc(pl->n_nodes + 1, 1);
    uint8_t *derived = eng_hostfb_derived(pl);
    size_t dft = pl->n_nodes;
    for (size_t i = 0; i < pl->n_nodes; i++) {
      dev_op[i] = strcmp(eng_graph_node(g, i)->op_type, "DFT") != 0;
      if (!dev_op[i]) dft = i;
    }
    CHECK(dft < pl->n_nodes);
    // a node neither side runs: no device op and no CPU run (the DFT's def without one)
    eng_op_def norun = *pl->defs[dft];
    norun.run = NULL;
    const eng_op_def *saved = pl->defs[dft];
    pl->defs[dft] = &norun;
    eng_hostfb *h = NULL;
    CHECK_EQ_INT(eng_hostfb_create(pl, dev_op, derived, NULL, 0, &h, &e), ERR_UNIMPLEMENTED);
    CHECK(h == NULL);
    CHECK_CONTAINS(e.msg, "runs on neither the device nor the host");
    CHECK_CONTAINS(e.msg, "dft_in");
    pl->defs[dft] = saved;
    // the device path's refusal joins the load line
    char **why = calloc(pl->n_nodes + 1, sizeof *why);
    why[dft] = "a mode the device path does not run";
    e = (err){0};
    CHECK_EQ_INT(eng_hostfb_create(pl, dev_op, derived, why, 0, &h, &e), 0);
    free(why);
    CHECK_CONTAINS(eng_hostfb_line(h, 0), "no CUDA path (a mode the device path does not run), runs on the host");
    CHECK_EQ_INT(eng_hostfb_n_noop(h), 1);
    // a snapshot holds one job per node without a device op: a second enqueue of the node is refused
    float x[8] = {0};
    eng_tensor in = {.dt = DT_FP32, .ndims = 3, .dims = {1, 8, 1}, .data = x, .bytes = sizeof x};
    CHECK_EQ_INT(eng_plan__prepare(pl, &in, 1, eng_graph_n_outputs(g), &e), 0);
    size_t *hv = calloc(pl->n_values + 1, sizeof *hv), *hv32 = calloc(pl->n_values + 1, sizeof *hv32);
    size_t total = eng_hostfb_staging(h, hv, hv32, 0, ALIGN);
    uint8_t *base = calloc(total + 1, 1);
    eng_hostfb_run *run = eng_hostfb_run_new(h);
    eng_hostfb_io io = {.down = noop_down, .launch = noop_launch, .up = noop_up};
    eng_hostfb_begin(h, run);
    CHECK_EQ_INT(eng_hostfb_node(h, run, dft, base, hv, hv32, &io, &e), 0);
    CHECK_EQ_INT(eng_hostfb_node(h, run, dft, base, hv, hv32, &io, &e), ERR_INTERNAL);
    CHECK_CONTAINS(e.msg, "no snapshot room");
    // no snapshot at all (a plan enqueueing without one): refused the same way
    eng_hostfb_begin(h, NULL);
    CHECK_EQ_INT(eng_hostfb_node(h, NULL, dft, base, hv, hv32, &io, &e), ERR_INTERNAL);
    eng_hostfb_run_free(run);
    free(base);
    free(hv);
    free(hv32);
    eng_hostfb_destroy(h);
    free(derived);
    free(dev_op);
  }
  eng_plan_destroy(pl);
  eng_graph_destroy(g);
}

int main(void) {
  static const hcase cases[] = {
      // Pad's constant_value computed by a ReduceMax: three inputs (x and mx come down, pads is a constant)
      {"pad_runtime_value", {"Pad"}, 1, 2, 1, "pad_by_max"},
      {"host_dft", {"DFT"}, 1, 1, 1, "node 'dft'"},
      {"host_lstm", {"LSTM"}, 1, 1, 2, "node 'lstm'"},
      {"host_lpnorm", {"LpNormalization"}, 2, 2, 2, "lpnorm_in"},
      {"host_einsum", {"Einsum"}, 1, 1, 1, "node 'einsum'"},
      // DFT -> Einsum on the host: x comes down once, f goes up for the Abs, y for the output
      {"host_chain", {"DFT", "Einsum"}, 2, 1, 2, "dft_in"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    run_case(&cases[k], 0);
    run_case(&cases[k], 1);
  }
  test_refusals();
  CHECK_DONE();
}
