// engine/cuda/plan_cuda_host.c: nodes of a CUDA plan that run on the host
// (plan_cuda_host.h says how and why). Here: the load-time plan (which nodes,
// which values go up, the log lines), the per-run pinned offsets, the
// snapshot a launch's host callbacks read, and the enqueueing of one node.
#include "engine/cuda/plan_cuda_host.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/plan_cuda_state.h"
#include "kernels/k_ref.h"

// What one host callback needs, fixed while enqueueing: the CPU op, its
// parameters and operands over pinned memory, and where FP16 copies are
// widened from and narrowed to (NULL: no conversion).
typedef struct host_job {
  host_run *run;
  const eng_op_def *def;
  const eng_node *node;  // the graph's: name and op type for errors
  eng_op_params params;
  int n_in, n_out;
  eng_tensor *in, *out;
  const uint16_t **in_half;
  uint16_t **out_half;
} host_job;

struct host_run {
  int n, cap;
  int ni, no;  // operands per job: the widest node's inputs and outputs (eng_plan.max_arity_*)
  host_job *jobs;
  // the first failing job of the launch: later ones skip (their results are dropped with the batch)
  atomic_int failed;
  err e;
  void *block;  // the jobs' operand arrays, one allocation
};

// A host node this run: no CUDA op and not folded on the host while planning.
static bool is_host(const eng_cuda_plan *p, size_t i) { return !p->ops[i] && !p->pl->folded[i]; }

// Bytes of value v as stored on the device (an FP16 plan keeps FP32 as FP16).
static size_t dev_bytes(const eng_cuda_plan *p, int v, dtype ddt) {
  return numel(&p->pl->cur[v]) * dtype_size(ddt);
}

// --- at create

// A host node at load: no CUDA op and neither folded for the planned shapes
// nor derived from constants and input shapes (folded for every signature).
static bool host_at_load(const eng_cuda_plan *p, const uint8_t *derived, size_t i) {
  const eng_plan *pl = p->pl;
  const eng_node *n = eng_graph_node(pl->g, i);
  if (p->ops[i] || (pl->have_sig && pl->folded[i])) return false;
  return !(n->n_out > 0 && n->out[0] >= 0 && derived[n->out[0]]);
}

int eng_cuda__host_plan(eng_cuda_plan *p, const uint8_t *derived, char *const *why, err *e) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  p->dev_read = calloc(pl->n_values + 1, 1);
  p->hstate = calloc(pl->n_values + 1, 1);
  p->hplan = calloc(pl->n_values + 1, 1);
  p->host_desc = calloc(pl->n_nodes + 1, sizeof *p->host_desc);
  if (!p->dev_read || !p->hstate || !p->hplan || !p->host_desc)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t j = 0; j < pl->n_outputs; j++) p->dev_read[eng_graph_output_value(g, j)] = 1;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (!p->ops[i]) {
      p->n_noop++;
      continue;
    }
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) p->dev_read[n->in[k]] = 1;
  }
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (!host_at_load(p, derived, i)) continue;
    const eng_node *n = eng_graph_node(g, i);
    if (!pl->defs[i]->run)
      return err_set(e, ERR_UNIMPLEMENTED, "node '%s': op %s runs on neither the device nor the host", n->name,
                     n->op_type);
    // bytes per batch at the planned (largest) shapes; shapes known only per signature otherwise
    char sizes[96];
    if (pl->have_layout) {
      size_t in = 0, out = 0;
      for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0 || pl->known[v]) continue;
        bool made_here = false;  // by an earlier host node: already on the host
        for (size_t j = 0; j < i && !made_here; j++) {
          if (!host_at_load(p, derived, j)) continue;
          const eng_node *m = eng_graph_node(g, j);
          for (int o = 0; o < m->n_out; o++) made_here |= m->out[o] == v;
        }
        if (!made_here) in += dev_bytes(p, v, dev_dt(p, pl->cur[v].dt));
      }
      for (int k = 0; k < n->n_out; k++) {
        int v = n->out[k];
        if (v >= 0 && p->dev_read[v]) out += dev_bytes(p, v, dev_dt(p, pl->cur[v].dt));
      }
      snprintf(sizes, sizeof sizes, "%zu bytes in, %zu out per batch", in, out);
    } else {
      snprintf(sizes, sizeof sizes, "copies sized per input-shape signature");
    }
    char line[ERR_MSG_MAX + 256];
    if (why && why[i])
      snprintf(line, sizeof line, "node '%s' (op_type '%s'): no CUDA path (%s), runs on the host (%s)", n->name,
               n->op_type, why[i], sizes);
    else
      snprintf(line, sizeof line, "node '%s' (op_type '%s'): no CUDA path, runs on the host (%s)", n->name,
               n->op_type, sizes);
    p->host_desc[p->n_host] = strdup(line);
    if (!p->host_desc[p->n_host]) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    p->n_host++;
  }
  return 0;
}

void eng_cuda__host_free(eng_cuda_plan *p) {
  for (size_t k = 0; p->host_desc && k < p->n_host; k++) free(p->host_desc[k]);
  free(p->host_desc);
  free(p->dev_read);
  free(p->hstate);
  free(p->hplan);
}

size_t eng_cuda_plan_n_host_nodes(const eng_cuda_plan *p) { return p->n_host; }

const char *eng_cuda_plan_host_node(const eng_cuda_plan *p, size_t k) {
  return k < p->n_host ? p->host_desc[k] : NULL;
}

// --- snapshots

host_run *eng_cuda__host_run_new(const eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  host_run *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  int cap = (int)p->n_noop;
  // the widest node's operands (eng_plan__create sets them): eng_cuda__host_node checks each node
  // against them. Before they were set, every job had room for one operand of each kind, and
  // a Pad of three inputs wrote over its outputs and FP16 pointers (test_gpu_plan's SIGSEGV, 2026-12-03)
  size_t ni = (size_t)(pl->max_arity_in > 1 ? pl->max_arity_in : 1);
  size_t no = (size_t)(pl->max_arity_out > 1 ? pl->max_arity_out : 1);
  r->ni = (int)ni;
  r->no = (int)no;
  size_t per = ni * sizeof(eng_tensor) + no * sizeof(eng_tensor) + ni * sizeof(void *) + no * sizeof(void *);
  r->jobs = calloc((size_t)cap + 1, sizeof *r->jobs);
  r->block = calloc((size_t)cap + 1, per);
  if (!r->jobs || !r->block) {
    eng_cuda__host_run_free(r);
    return NULL;
  }
  uint8_t *b = r->block;  // eng_tensor first: the strictest alignment of the four arrays
  for (int k = 0; k < cap; k++) {
    host_job *j = &r->jobs[k];
    j->in = (eng_tensor *)b;
    b += ni * sizeof(eng_tensor);
    j->out = (eng_tensor *)b;
    b += no * sizeof(eng_tensor);
    j->in_half = (const uint16_t **)(void *)b;
    b += ni * sizeof(void *);
    j->out_half = (uint16_t **)(void *)b;
    b += no * sizeof(void *);
    j->run = r;
  }
  r->cap = cap;
  return r;
}

void eng_cuda__host_run_free(host_run *r) {
  if (!r) return;
  free(r->jobs);
  free(r->block);
  free(r);
}

void eng_cuda__host_run_reset(host_run *r) {
  if (!r) return;
  atomic_store(&r->failed, 0);
  r->e = (err){0};
}

int eng_cuda__host_run_check(const host_run *r, err *e) {
  if (!r || !atomic_load(&((host_run *)r)->failed)) return 0;
  *e = r->e;
  return e->code ? e->code : ERR_INTERNAL;
}

// The host callback: widen, run the CPU kernel, narrow. No CUDA call here
// (a host function may not make any).
static void CUDART_CB run_job(void *arg) {
  host_job *j = arg;
  host_run *r = j->run;
  if (atomic_load(&r->failed)) return;
  for (int k = 0; k < j->n_in; k++)
    if (j->in_half[k]) k_f16_to_f32(j->in[k].data, j->in_half[k], numel(&j->in[k]));
  // an aliasing op reads and writes one buffer in the CPU plan: here they differ
  if ((j->def->flags & ENG_OP_ALIAS) && j->n_out > 0 && j->out[0].data != j->in[0].data && j->out[0].bytes)
    memcpy(j->out[0].data, j->in[0].data, j->out[0].bytes);
  err e = {0};
  int rc = j->def->run(&j->params, j->in, j->n_in, j->out, j->n_out, &e);
  if (rc) {
    err_prefix(&e, "node '%s' (op_type '%s', on the host): ", j->node->name, j->node->op_type);
    if (!e.code) e.code = (err_code)rc;
    r->e = e;  // before failed: finish reads e after seeing failed (and after the stream's end event)
    atomic_store(&r->failed, 1);
    return;
  }
  for (int k = 0; k < j->n_out; k++)
    if (j->out_half[k]) k_f32_to_f16(j->out_half[k], j->out[k].data, numel(&j->out[k]));
}

// --- per run

size_t eng_cuda__host_staging(eng_cuda_plan *p, slot *s, size_t total) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  memset(p->hplan, 0, pl->n_values);
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (!is_host(p, i)) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0 || eng_cuda__is_const(g, v)) continue;  // constants: the plan's host copy
      if (!p->hplan[v]) p->hplan[v] = pl->known[v] ? 2 : 1;
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) p->hplan[n->out[k]] = 1;
  }
  for (size_t v = 0; v < pl->n_values; v++) {
    const eng_tensor *t = &pl->cur[v];
    if (p->hplan[v] == 2) {  // a folded value, in its plan type
      s->hv_off[v] = total;
      total += eng_cuda__round_up(nbytes(t));
    } else if (p->hplan[v] == 1) {
      // dev_dt, not p->ddt: the slots size their staging at create, before any submit set ddt
      dtype dd = dev_dt(p, t->dt);
      s->hv_off[v] = total;
      total += eng_cuda__round_up(dev_bytes(p, (int)v, dd));
      s->hv32_off[v] = total;
      if (dd != t->dt) total += eng_cuda__round_up(nbytes(t));
    }
  }
  return total;
}

void eng_cuda__host_stage(eng_cuda_plan *p, slot *s) {
  const eng_plan *pl = p->pl;
  for (size_t v = 0; v < pl->n_values; v++)
    if (p->hplan[v] == 2 && nbytes(&pl->cur[v]) && pl->cur[v].data)
      memcpy(s->pin_base + s->hv_off[v], pl->cur[v].data, nbytes(&pl->cur[v]));
}

void eng_cuda__host_begin(eng_cuda_plan *p, slot *s) {
  memset(p->hstate, 0, p->pl->n_values);
  if (s->hrun) s->hrun->n = 0;
}

// Value v as the CPU kernel sees it: plan type and shape over host memory.
static void host_tensor(const eng_cuda_plan *p, const slot *s, int v, eng_tensor *t) {
  *t = p->pl->cur[v];
  t->bytes = nbytes(t);
  if (eng_cuda__is_const(p->pl->g, v)) return;  // cur's data: the plan's host copy
  uint8_t *pin = s->pin_base;
  t->data = p->hplan[v] == 2 ? pin + s->hv_off[v] : pin + (p->ddt[v] != t->dt ? s->hv32_off[v] : s->hv_off[v]);
}

int eng_cuda__host_node(eng_cuda_plan *p, slot *s, size_t i, err *e) {
  eng_plan *pl = p->pl;
  const eng_node *n = eng_graph_node(pl->g, i);
  cudaStream_t st = s->ctx.stream;
  host_run *r = s->hrun;
  if (!r || r->n >= r->cap) return err_set(e, ERR_INTERNAL, "host fallback: no snapshot room for this node");
  if (n->n_in > r->ni || n->n_out > r->no)
    return err_set(e, ERR_INTERNAL, "host fallback: %d inputs and %d outputs, the snapshot holds %d and %d", n->n_in,
                   n->n_out, r->ni, r->no);
  host_job *j = &r->jobs[r->n++];
  j->def = pl->defs[i];
  j->node = n;
  j->params = pl->params[i];
  j->n_in = n->n_in;
  j->n_out = n->n_out;
  size_t scr = s->lay_off;  // NHWC operands transposed back here first (plan_cuda_layout.c sized it)
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    j->in_half[k] = NULL;
    if (v < 0) {
      memset(&j->in[k], 0, sizeof j->in[k]);
      continue;
    }
    host_tensor(p, s, v, &j->in[k]);
    if (eng_cuda__is_const(pl->g, v) || p->hplan[v] == 2) continue;
    uint8_t *down = s->pin_base + s->hv_off[v];
    if (p->ddt[v] != pl->cur[v].dt && p->hstate[v] != 2) j->in_half[k] = (const uint16_t *)down;
    if (p->hstate[v]) continue;  // already on the host this run
    size_t b = dev_bytes(p, v, p->ddt[v]);
    if (b) {
      const void *src = p->dptr[v];
      if (k < 31 && (p->lay.conv[i] & (1u << k))) {
        eng_tensor x = pl->cur[v];
        x.dt = p->ddt[v];
        x.data = p->dptr[v];
        TRY(eng_cuda__relayout(&x, s->scr_base + scr, false, st, e));
        scr += eng_cuda__round_up(b);
        src = x.data;
      }
      CUDA_TRY(e, cudaMemcpyAsync(down, src, b, cudaMemcpyDeviceToHost, st));
    }
    p->hstate[v] = 1;
  }
  for (int k = 0; k < n->n_out; k++) {
    int v = n->out[k];
    j->out_half[k] = NULL;
    if (v < 0) {
      memset(&j->out[k], 0, sizeof j->out[k]);  // omitted (dt DT_INVALID)
      continue;
    }
    host_tensor(p, s, v, &j->out[k]);
    if (p->ddt[v] != pl->cur[v].dt) j->out_half[k] = (uint16_t *)(s->pin_base + s->hv_off[v]);
    p->hstate[v] = 2;
  }
  CUDA_TRY(e, cudaLaunchHostFunc(st, run_job, j));
  for (int k = 0; k < n->n_out; k++) {
    int v = n->out[k];
    size_t b = v >= 0 ? dev_bytes(p, v, p->ddt[v]) : 0;
    if (!b || !p->dev_read[v] || !p->dptr[v]) continue;
    CUDA_TRY(e, cudaMemcpyAsync(p->dptr[v], s->pin_base + s->hv_off[v], b, cudaMemcpyHostToDevice, st));
  }
  return 0;
}
