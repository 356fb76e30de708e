// engine/cpu/plan_hostfb.c: the host fallback's device-free half
// (plan_hostfb.h says what and why): the load-time plan (which nodes, which
// values the device reads, the log lines), the per-run host regions, the
// snapshot a launch's host runs read, and one host node's crossings, enqueued
// through the device side's callbacks.
#include "engine/cpu/plan_hostfb.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/k_ref.h"

struct eng_hostfb {
  const eng_plan *pl;
  int half;
  uint8_t *dev_op;    // per node: it has a device op
  uint8_t *at_load;   // per node: a host node at load (not derived from constants and shapes)
  uint8_t *dev_read;  // per value: read by a device node or a graph output (a host result goes up)
  uint8_t *hstate;    // per value, while enqueueing: 0 on the device only, 1 copied down, 2 made on the host
  uint8_t *hplan;     // per value, this run: 1 a host region, 2 a folded value staged for a host node
  size_t n_host, n_noop;
  char **lines;  // the host nodes' load log lines
  eng_hostfb_counts counts;
};

// What one host run needs, fixed while enqueueing: the CPU op, its parameters
// and operands over host memory, and where narrow copies are widened from and
// narrowed to (NULL: no conversion).
struct eng_hostfb_job {
  eng_hostfb_run *run;
  const eng_op_def *def;
  const eng_node *node;  // the graph's: name and op type for errors
  eng_op_params params;
  int n_in, n_out;
  eng_tensor *in, *out;
  const uint16_t **in_half;
  uint16_t **out_half;
};

struct eng_hostfb_run {
  int n, cap;
  int ni, no;  // operands per job: the widest node's inputs and outputs (eng_plan.max_arity_*)
  eng_hostfb_job *jobs;
  // the first failing job of the launch: later ones skip (their results are dropped with the batch)
  atomic_int failed;
  err e;
  void *block;  // the jobs' operand arrays, one allocation
};

static inline size_t numel(const eng_tensor *t) {
  return (size_t)eng_numel(t->ndims, t->dims);
}
static inline size_t nbytes(const eng_tensor *t) {
  return numel(t) * dtype_size(t->dt);
}
static inline size_t round_to(size_t b, size_t align) {
  return align > 1 ? (b + align - 1) / align * align : b;
}

static bool is_const(const eng_graph *g, int v) {
  return v >= 0 && eng_graph_value(g, (size_t)v)->kind == ENG_VALUE_CONST;
}

// Stored type of a value on the device: half plans keep FP32 values in FP16.
static dtype dev_dt(const eng_hostfb *h, dtype t) {
  return h->half && t == DT_FP32 ? DT_FP16 : t;
}

// Bytes of value v as stored on the device.
static size_t dev_bytes(const eng_hostfb *h, int v) {
  const eng_tensor *t = &h->pl->cur[v];
  return numel(t) * dtype_size(dev_dt(h, t->dt));
}

static bool is_host(const eng_hostfb *h, size_t i) {
  return !h->dev_op[i] && !h->pl->folded[i];
}

// --- at create

uint8_t *eng_hostfb_derived(const eng_plan *pl) {
  const eng_graph *g = pl->g;
  uint8_t *d = calloc(pl->n_values + 1, 1);
  if (!d) return NULL;
  for (size_t v = 0; v < pl->n_values; v++) d[v] = is_const(g, (int)v);
  // parameters given as graph inputs are known on the host in every run (plan_values.c)
  for (size_t i = 0; i < pl->n_inputs; i++)
    if (pl->val_in[i]) d[eng_graph_input_value(g, i)] = 1;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    bool all = true;
    for (int k = 0; k < n->n_in && all; k++)
      all = n->in[k] < 0 || d[n->in[k]] || (pl->defs[i]->flags & ENG_OP_SHAPE_ONLY);
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) d[n->out[k]] = all;
  }
  return d;
}

// The load log line of host node i (at_load): its bytes per batch at the
// planned (largest) shapes, where shapes are known at load.
static int describe(eng_hostfb *h, size_t i, const char *why, err *e) {
  const eng_plan *pl = h->pl;
  const eng_graph *g = pl->g;
  const eng_node *n = eng_graph_node(g, i);
  char sizes[96];
  if (pl->have_layout) {
    size_t in = 0, out = 0;
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0 || pl->known[v]) continue;
      bool made_here = false;  // by an earlier host node: already on the host
      for (size_t j = 0; j < i && !made_here; j++) {
        if (!h->at_load[j]) continue;
        const eng_node *m = eng_graph_node(g, j);
        for (int o = 0; o < m->n_out; o++) made_here |= m->out[o] == v;
      }
      if (!made_here) in += dev_bytes(h, v);
    }
    for (int k = 0; k < n->n_out; k++) {
      int v = n->out[k];
      if (v >= 0 && h->dev_read[v]) out += dev_bytes(h, v);
    }
    snprintf(sizes, sizeof sizes, "%zu bytes in, %zu out per batch", in, out);
  } else {
    snprintf(sizes, sizeof sizes, "copies sized per input-shape signature");
  }
  char line[ERR_MSG_MAX + 256];
  if (why)
    snprintf(line, sizeof line, "node '%s' (op_type '%s'): no CUDA path (%s), runs on the host (%s)", n->name,
             n->op_type, why, sizes);
  else
    snprintf(line, sizeof line, "node '%s' (op_type '%s'): no CUDA path, runs on the host (%s)", n->name, n->op_type,
             sizes);
  h->lines[h->n_host] = strdup(line);
  if (!h->lines[h->n_host]) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  h->n_host++;
  return 0;
}

int eng_hostfb_create(const eng_plan *pl, const uint8_t *dev_op, const uint8_t *derived, char *const *why, int half,
                      eng_hostfb **out, err *e) {
  *out = NULL;
  const eng_graph *g = pl->g;
  eng_hostfb *h = calloc(1, sizeof *h);
  if (!h) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  h->pl = pl;
  h->half = half;
  h->dev_op = calloc(pl->n_nodes + 1, 1);
  h->at_load = calloc(pl->n_nodes + 1, 1);
  h->dev_read = calloc(pl->n_values + 1, 1);
  h->hstate = calloc(pl->n_values + 1, 1);
  h->hplan = calloc(pl->n_values + 1, 1);
  h->lines = calloc(pl->n_nodes + 1, sizeof *h->lines);
  if (!h->dev_op || !h->at_load || !h->dev_read || !h->hstate || !h->hplan || !h->lines) {
    eng_hostfb_destroy(h);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (size_t j = 0; j < pl->n_outputs; j++) h->dev_read[eng_graph_output_value(g, j)] = 1;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    h->dev_op[i] = dev_op[i] != 0;
    if (!dev_op[i]) {
      h->n_noop++;
      const eng_node *n = eng_graph_node(g, i);
      // no device op, and neither folded for the planned shapes nor derived from constants and input shapes
      h->at_load[i] = !(pl->have_sig && pl->folded[i]) && !(n->n_out > 0 && n->out[0] >= 0 && derived[n->out[0]]);
      continue;
    }
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) h->dev_read[n->in[k]] = 1;
  }
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (!h->at_load[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    int rc = 0;
    if (!pl->defs[i]->run)
      rc = err_set(e, ERR_UNIMPLEMENTED, "node '%s': op %s runs on neither the device nor the host", n->name,
                   n->op_type);
    else
      rc = describe(h, i, why ? why[i] : NULL, e);
    if (rc) {
      eng_hostfb_destroy(h);
      return rc;
    }
  }
  *out = h;
  return 0;
}

void eng_hostfb_destroy(eng_hostfb *h) {
  if (!h) return;
  for (size_t k = 0; h->lines && k < h->n_host; k++) free(h->lines[k]);
  free(h->lines);
  free(h->dev_op);
  free(h->at_load);
  free(h->dev_read);
  free(h->hstate);
  free(h->hplan);
  free(h);
}

size_t eng_hostfb_n_host(const eng_hostfb *h) {
  return h ? h->n_host : 0;
}
const char *eng_hostfb_line(const eng_hostfb *h, size_t k) {
  return h && k < h->n_host ? h->lines[k] : NULL;
}
size_t eng_hostfb_n_noop(const eng_hostfb *h) {
  return h ? h->n_noop : 0;
}
int eng_hostfb_is_host(const eng_hostfb *h, size_t i) {
  return is_host(h, i);
}
int eng_hostfb_dev_read(const eng_hostfb *h, int v) {
  return v >= 0 && h->dev_read[v];
}

// --- snapshots

eng_hostfb_run *eng_hostfb_run_new(const eng_hostfb *h) {
  const eng_plan *pl = h->pl;
  eng_hostfb_run *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  int cap = (int)h->n_noop;
  // the widest node's operands (eng_plan__create sets them; eng_hostfb_node checks each node against
  // them). Before they were set, every job had room for one operand of each kind, and a Pad of
  // three inputs wrote over its outputs and FP16 pointers (test_gpu_plan's SIGSEGV, 2026-12-03).
  size_t ni = (size_t)(pl->max_arity_in > 1 ? pl->max_arity_in : 1);
  size_t no = (size_t)(pl->max_arity_out > 1 ? pl->max_arity_out : 1);
  r->ni = (int)ni;
  r->no = (int)no;
  size_t per = ni * sizeof(eng_tensor) + no * sizeof(eng_tensor) + ni * sizeof(void *) + no * sizeof(void *);
  r->jobs = calloc((size_t)cap + 1, sizeof *r->jobs);
  r->block = calloc((size_t)cap + 1, per);
  if (!r->jobs || !r->block) {
    eng_hostfb_run_free(r);
    return NULL;
  }
  uint8_t *b = r->block;  // eng_tensor first: the strictest alignment of the four arrays
  for (int k = 0; k < cap; k++) {
    eng_hostfb_job *j = &r->jobs[k];
    j->in = (eng_tensor *)(void *)b;
    b += ni * sizeof(eng_tensor);
    j->out = (eng_tensor *)(void *)b;
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

void eng_hostfb_run_free(eng_hostfb_run *r) {
  if (!r) return;
  free(r->jobs);
  free(r->block);
  free(r);
}

void eng_hostfb_run_reset(eng_hostfb_run *r) {
  if (!r) return;
  atomic_store(&r->failed, 0);
  r->e = (err){0};
}

int eng_hostfb_run_check(const eng_hostfb_run *r, err *e) {
  if (!r || !atomic_load(&((eng_hostfb_run *)r)->failed)) return 0;
  *e = r->e;
  return e->code ? e->code : ERR_INTERNAL;
}

void eng_hostfb_job_run(void *arg) {
  eng_hostfb_job *j = arg;
  eng_hostfb_run *r = j->run;
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
    r->e = e;  // before failed: the check reads e after seeing failed (and after the launch completed)
    atomic_store(&r->failed, 1);
    return;
  }
  for (int k = 0; k < j->n_out; k++)
    if (j->out_half[k]) k_f32_to_f16(j->out_half[k], j->out[k].data, numel(&j->out[k]));
}

// --- per run

size_t eng_hostfb_staging(eng_hostfb *h, size_t *hv_off, size_t *hv32_off, size_t total, size_t align) {
  const eng_plan *pl = h->pl;
  const eng_graph *g = pl->g;
  memset(h->hplan, 0, pl->n_values);
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (!is_host(h, i)) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0 || is_const(g, v)) continue;  // constants: the plan's host copy
      if (!h->hplan[v]) h->hplan[v] = pl->known[v] ? 2 : 1;
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) h->hplan[n->out[k]] = 1;
  }
  for (size_t v = 0; v < pl->n_values; v++) {
    const eng_tensor *t = &pl->cur[v];
    if (h->hplan[v] == 2) {  // a folded value, in its plan type
      hv_off[v] = total;
      total += round_to(nbytes(t), align);
    } else if (h->hplan[v] == 1) {
      hv_off[v] = total;
      total += round_to(dev_bytes(h, (int)v), align);
      hv32_off[v] = total;
      if (dev_dt(h, t->dt) != t->dt) total += round_to(nbytes(t), align);
    }
  }
  return total;
}

void eng_hostfb_stage(const eng_hostfb *h, uint8_t *base, const size_t *hv_off) {
  const eng_plan *pl = h->pl;
  for (size_t v = 0; v < pl->n_values; v++)
    if (h->hplan[v] == 2 && nbytes(&pl->cur[v]) && pl->cur[v].data)
      memcpy(base + hv_off[v], pl->cur[v].data, nbytes(&pl->cur[v]));
}

void eng_hostfb_begin(eng_hostfb *h, eng_hostfb_run *r) {
  memset(h->hstate, 0, h->pl->n_values);
  memset(&h->counts, 0, sizeof h->counts);
  if (r) r->n = 0;
}

void eng_hostfb_counts_get(const eng_hostfb *h, eng_hostfb_counts *c) {
  *c = h->counts;
}

// Value v as the CPU kernel sees it: plan type and shape over host memory.
static void host_tensor(const eng_hostfb *h, uint8_t *base, const size_t *hv_off, const size_t *hv32_off, int v,
                        eng_tensor *t) {
  *t = h->pl->cur[v];
  t->bytes = nbytes(t);
  if (is_const(h->pl->g, v)) return;  // cur's data: the plan's host copy
  if (h->hplan[v] == 2)
    t->data = base + hv_off[v];
  else
    t->data = base + (dev_dt(h, t->dt) != t->dt ? hv32_off[v] : hv_off[v]);
}

int eng_hostfb_node(eng_hostfb *h, eng_hostfb_run *r, size_t i, uint8_t *base, const size_t *hv_off,
                    const size_t *hv32_off, const eng_hostfb_io *io, err *e) {
  const eng_plan *pl = h->pl;
  const eng_node *n = eng_graph_node(pl->g, i);
  if (!r || r->n >= r->cap) return err_set(e, ERR_INTERNAL, "host fallback: no snapshot room for this node");
  if (n->n_in > r->ni || n->n_out > r->no)
    return err_set(e, ERR_INTERNAL, "host fallback: %d inputs and %d outputs, the snapshot holds %d and %d", n->n_in,
                   n->n_out, r->ni, r->no);
  eng_hostfb_job *j = &r->jobs[r->n++];
  j->def = pl->defs[i];
  j->node = n;
  j->params = pl->params[i];
  j->n_in = n->n_in;
  j->n_out = n->n_out;
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    j->in_half[k] = NULL;
    if (v < 0) {
      memset(&j->in[k], 0, sizeof j->in[k]);
      continue;
    }
    // a host pointer for every operand: constants and folded values are on the host already,
    // everything else is this run's host region (filled below, or by the host node that made it)
    host_tensor(h, base, hv_off, hv32_off, v, &j->in[k]);
    if (is_const(pl->g, v) || h->hplan[v] == 2) continue;
    if (h->hplan[v] != 1)
      return err_set(e, ERR_INTERNAL, "host fallback: input %d ('%s') has no host region this run", k,
                     eng_graph_value(pl->g, (size_t)v)->name);
    uint8_t *down = base + hv_off[v];
    bool narrow = dev_dt(h, pl->cur[v].dt) != pl->cur[v].dt;
    if (narrow && h->hstate[v] != 2) j->in_half[k] = (const uint16_t *)(const void *)down;
    if (h->hstate[v]) continue;  // already on the host this run
    size_t b = dev_bytes(h, v);
    if (b) {
      TRY(io->down(io->ctx, i, k, v, down, b, e));
      h->counts.down++;
      h->counts.down_bytes += b;
    }
    h->hstate[v] = 1;
  }
  for (int k = 0; k < n->n_out; k++) {
    int v = n->out[k];
    j->out_half[k] = NULL;
    if (v < 0) {
      memset(&j->out[k], 0, sizeof j->out[k]);  // omitted (dt DT_INVALID)
      continue;
    }
    if (h->hplan[v] != 1)
      return err_set(e, ERR_INTERNAL, "host fallback: output %d ('%s') has no host region this run", k,
                     eng_graph_value(pl->g, (size_t)v)->name);
    host_tensor(h, base, hv_off, hv32_off, v, &j->out[k]);
    if (dev_dt(h, pl->cur[v].dt) != pl->cur[v].dt) j->out_half[k] = (uint16_t *)(void *)(base + hv_off[v]);
    h->hstate[v] = 2;
  }
  TRY(io->launch(io->ctx, j, e));
  h->counts.nodes++;
  for (int k = 0; k < n->n_out; k++) {
    int v = n->out[k];
    size_t b = v >= 0 ? dev_bytes(h, v) : 0;
    if (!b || !h->dev_read[v]) continue;
    TRY(io->up(io->ctx, v, base + hv_off[v], b, e));
    h->counts.up++;
    h->counts.up_bytes += b;
  }
  return 0;
}
