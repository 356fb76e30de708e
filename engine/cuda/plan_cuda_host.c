// engine/cuda/plan_cuda_host.c: nodes of a CUDA plan that run on the host
// (plan_cuda_host.h says how and why). The decisions and the snapshots are
// engine/cpu/plan_hostfb.c's; here: the plan's and slots' share of them, and
// the CUDA calls of one host node (copies on the slot's stream, NHWC operands
// transposed first, the CPU kernel as a host function).
#include "engine/cuda/plan_cuda_host.h"

#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/plan_cuda_state.h"

int eng_cuda__init_ops(const eng_plan *pl, int half, const cuda_op **ops, void **nstate, char **why, err *e) {
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (!ops[i] || !ops[i]->init) continue;  // folded, on the host, or nothing to make
    int ret = ops[i]->init(pl, i, half, &nstate[i], e);
    if (!ret) continue;
    // a mode or type its CUDA path does not run: the CPU path does, on the host
    if (ret == ERR_UNIMPLEMENTED && pl->defs[i]->run && (why[i] = strdup(e->msg)) != NULL) {
      ops[i] = NULL;
      nstate[i] = NULL;
      *e = (err){0};
      continue;
    }
    const eng_node *n = eng_graph_node(pl->g, i);
    err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
    return ret;
  }
  return 0;
}

int eng_cuda__host_plan(eng_cuda_plan *p, const uint8_t *derived, char *const *why, err *e) {
  const eng_plan *pl = p->pl;
  uint8_t *dev_op = calloc(pl->n_nodes + 1, 1);
  if (!dev_op) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < pl->n_nodes; i++) dev_op[i] = p->ops[i] != NULL;
  int rc = eng_hostfb_create(pl, dev_op, derived, why, p->half, &p->hf, e);
  free(dev_op);
  return rc;
}

void eng_cuda__host_free(eng_cuda_plan *p) {
  eng_hostfb_destroy(p->hf);
  p->hf = NULL;
}

size_t eng_cuda__host_noop(const eng_cuda_plan *p) {
  return eng_hostfb_n_noop(p->hf);
}

size_t eng_cuda_plan_n_host_nodes(const eng_cuda_plan *p) {
  return eng_hostfb_n_host(p->hf);
}

const char *eng_cuda_plan_host_node(const eng_cuda_plan *p, size_t k) {
  return eng_hostfb_line(p->hf, k);
}

host_run *eng_cuda__host_run_new(const eng_cuda_plan *p) {
  return p->hf ? eng_hostfb_run_new(p->hf) : NULL;
}
void eng_cuda__host_run_free(host_run *r) {
  eng_hostfb_run_free(r);
}
void eng_cuda__host_run_reset(host_run *r) {
  eng_hostfb_run_reset(r);
}
int eng_cuda__host_run_check(const host_run *r, err *e) {
  return eng_hostfb_run_check(r, e);
}

size_t eng_cuda__host_staging(eng_cuda_plan *p, slot *s, size_t total) {
  // dev types from the plan's, not p->ddt: the slots size their staging at create, before any submit set ddt
  return eng_hostfb_staging(p->hf, s->hv_off, s->hv32_off, total, CUDA_STAGE_ALIGN);
}

void eng_cuda__host_stage(eng_cuda_plan *p, slot *s) {
  eng_hostfb_stage(p->hf, s->pin_base, s->hv_off);
}

void eng_cuda__host_begin(eng_cuda_plan *p, slot *s) {
  eng_hostfb_begin(p->hf, s->hrun);
}

// --- one node's CUDA calls (plan_hostfb.h's eng_hostfb_io)

typedef struct node_io {
  eng_cuda_plan *p;
  slot *s;
  size_t scr;  // the slot's scratch for this node's NHWC operands (plan_cuda_layout.c sized it)
} node_io;

static int io_down(void *ctx, size_t i, int k, int v, void *dst, size_t bytes, err *e) {
  node_io *c = ctx;
  eng_cuda_plan *p = c->p;
  const void *src = p->dptr[v];
  if (!src) return err_set(e, ERR_INTERNAL, "host fallback: input %d has no device buffer", k);
  if (k < 31 && (p->lay.conv[i] & (1u << k))) {  // stored NHWC: transposed back to NCHW on the device first
    eng_tensor x = p->pl->cur[v];
    x.dt = p->ddt[v];
    x.data = p->dptr[v];
    TRY(eng_cuda__relayout(&x, c->s->scr_base + c->scr, false, c->s->ctx.stream, e));
    c->scr += eng_cuda__round_up(bytes);
    src = x.data;
  }
  CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->s->ctx.stream));
  return 0;
}

// The host function a stream (or a captured graph's host node) calls: no CUDA call inside.
static void CUDART_CB host_fn(void *job) {
  eng_hostfb_job_run(job);
}

static int io_launch(void *ctx, eng_hostfb_job *job, err *e) {
  node_io *c = ctx;
  CUDA_TRY(e, cudaLaunchHostFunc(c->s->ctx.stream, host_fn, job));
  return 0;
}

static int io_up(void *ctx, int v, const void *src, size_t bytes, err *e) {
  node_io *c = ctx;
  void *dst = c->p->dptr[v];
  if (!dst) return err_set(e, ERR_INTERNAL, "host fallback: a value the device reads has no device buffer");
  CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->s->ctx.stream));
  return 0;
}

int eng_cuda__host_node(eng_cuda_plan *p, slot *s, size_t i, err *e) {
  node_io c = {.p = p, .s = s, .scr = s->lay_off};
  eng_hostfb_io io = {.ctx = &c, .down = io_down, .launch = io_launch, .up = io_up};
  return eng_hostfb_node(p->hf, s->hrun, i, s->pin_base, s->hv_off, s->hv32_off, &io, e);
}
