// engine/cuda/plan_cuda_slot.c: one execution slot of the CUDA plan
// (plan_cuda.h says what a slot is for). Its memory: the activation arena,
// the ops' workspace, the scratch and the pinned staging that inputs and
// outputs pass through, whose offsets are computed here for each run's
// shapes. Its work: one batch enqueued on the slot's stream (copy-in, every
// node not fused away, copy-back), captured into a CUDA graph per
// input-shape signature and replayed, or launched plainly.
//
// GEMM autotuning (cuda_gemm.h): one eng_gemm_tuner per plan, shared by the
// slots' cuBLASLt objects. Timing cannot happen inside a capture, so a
// capture that met an untimed shape is thrown away, the batch runs once
// outside it as a dry tuning pass, and is captured again (capture_tuned).
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/plan_cuda_state.h"
#include "kernels/base/clock.h"
#include "kernels/k_cuda.h"

// cuBLASLt workspace per slot: enough for Hopper's best kernels.
#define GEMM_WORKSPACE (32u << 20)

// --- memory

static void drop_graphs(slot *s) {
  for (int i = 0; i < s->n_graphs; i++) {
    (void)cudaGraphExecDestroy(s->graphs[i].exec);
    free(s->graphs[i].sig);
    if (s->hrun_live == s->graphs[i].hrun) s->hrun_live = NULL;
    eng_cuda__host_run_free(s->graphs[i].hrun);
  }
  s->n_graphs = 0;
}

// One device region of at least need bytes (one block, carved once).
int eng_cuda__ensure_dev(eng_cuda_plan *p, slot *s, eng_cuda_arena **a, uint8_t **base, size_t *cap,
                      size_t need, err *e) {
  if (need <= *cap && *a) return 0;
  if (need == 0) need = CUDA_STAGE_ALIGN;
  drop_graphs(s);  // they hold the old pointers
  if (*a) atomic_fetch_sub(&p->dev_bytes, (uint64_t)(*cap + ENG_CUDA_MEM_ALIGN));
  eng_cuda_arena_destroy(*a);
  *a = NULL;
  *base = NULL;
  *cap = 0;
  void *b = NULL;
  atomic_fetch_add(&p->allocs, 1);
  TRY(eng_cuda_arena_create(a, p->device, need + ENG_CUDA_MEM_ALIGN, 8, e));
  atomic_fetch_add(&p->dev_bytes, (uint64_t)(need + ENG_CUDA_MEM_ALIGN));
  TRY(eng_cuda_arena_alloc(*a, need, 0, &b, e));
  *base = b;
  *cap = need;
  return 0;
}

// Folded values a kernel of this run reads as device data (not through
// host_in): staged like inputs, copied in with them. Per root value, as the
// buffers are.
void eng_cuda__mark_uploads(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  memset(p->fdev, 0, pl->n_values);
  for (size_t i = 0; i < pl->n_nodes; i++) {
    // a fused node's operands (bias, residual) are read by the node it was fused into: kept;
    // a host node reads its folded inputs on the host (eng_cuda__host_stage)
    if (pl->folded[i] || !p->ops[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0 || (pl->defs[i]->host_in & ENG_IN(k))) continue;
      int r = pl->root[v];
      if (pl->known[r] && !eng_cuda__is_const(g, r)) p->fdev[r] = 1;
    }
  }
  // a graph output known on the host (folded, or a parameter given as an
  // input passed through) goes up with them and back with the outputs
  for (size_t j = 0; j < pl->n_outputs; j++) {
    int r = pl->root[eng_graph_output_value(g, j)];
    if (pl->known[r] && !eng_cuda__is_const(g, r)) p->fdev[r] = 1;
  }
}

// Offsets of the slot's staging for the shapes in pl->cur; grows the pinned
// pool and the scratch if they need more.
int eng_cuda__ensure_staging(eng_cuda_plan *p, slot *s, err *e) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  size_t total = 0, scr = 0;
  for (size_t i = 0; i < pl->n_inputs; i++) {
    const eng_tensor *t = &pl->cur[eng_graph_input_value(g, i)];
    s->in_off[i] = total;
    size_t b = eng_cuda__round_up(nbytes(t));
    if (p->fixed_in && b > p->in_cap[i])
      return err_set(e, ERR_INTERNAL, "input %zu needs %zu bytes, planned %zu", i, b, p->in_cap[i]);
    total += p->fixed_in ? p->in_cap[i] : b;
    s->in32_off[i] = scr;
    if (p->half && t->dt == DT_FP32) scr += eng_cuda__round_up(nbytes(t));
  }
  for (size_t j = 0; j < pl->n_outputs; j++) {
    const eng_tensor *t = &pl->cur[eng_graph_output_value(g, j)];
    s->out_off[j] = total;
    total += eng_cuda__round_up(nbytes(t));
    s->edge_off[j] = total;
    dtype od = eng_plan__out_dtype(pl, j);
    if (od != t->dt) total += eng_cuda__round_up(numel(t) * dtype_size(od));
    s->out32_off[j] = scr;
    if (p->half && t->dt == DT_FP32) scr += eng_cuda__round_up(nbytes(t));
  }
  // fallback operands: the largest FP32 copies of one node that may fall
  // back (no FP16 kernel, or one with conditions: Gemm with a general C),
  // sized without asking each op, which only decides per run
  s->fb_off = scr;
  size_t fb = 0;
  for (size_t i = 0; p->half && i < pl->n_nodes; i++) {
    if (!p->ops[i] || pl->folded[i] || p->ops[i]->half == eng_cuda__half_always) continue;
    const eng_node *n = eng_graph_node(g, i);
    size_t need = 0;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0 && pl->cur[n->in[k]].dt == DT_FP32) need += eng_cuda__round_up(nbytes(&pl->cur[n->in[k]]));
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0 && pl->cur[n->out[k]].dt == DT_FP32) need += eng_cuda__round_up(nbytes(&pl->cur[n->out[k]]));
    if (need > fb) fb = need;
  }
  scr += fb;
  s->lay_off = scr;
  scr += p->lay.node_scr;
  s->lay_out_off = scr;
  scr += p->lay.out_scr;
  for (size_t v = 0; v < pl->n_values; v++) {
    if (!p->fdev[v]) continue;
    const eng_tensor *t = &pl->cur[v];
    s->fd_pin[v] = total;
    total += eng_cuda__round_up(nbytes(t));
    s->fd_dev[v] = scr;
    scr += eng_cuda__round_up(numel(t) * dtype_size(p->ddt[v]));
    s->fd_w[v] = scr;
    if (p->ddt[v] != t->dt) scr += eng_cuda__round_up(nbytes(t));
  }
  total = eng_cuda__host_staging(p, s, total);  // the host nodes' copies (plan_cuda_host.c)
  if (scr) TRY(eng_cuda__ensure_dev(p, s, &s->scr, &s->scr_base, &s->scr_cap, scr, e));
  if (total <= s->pin_cap && s->pin) return 0;
  if (total == 0) total = CUDA_STAGE_ALIGN;
  drop_graphs(s);
  if (s->pin) atomic_fetch_sub(&p->pin_bytes, (uint64_t)(s->pin_cap + ENG_CUDA_MEM_ALIGN));
  eng_cuda_pinned_destroy(s->pin);
  s->pin = NULL;
  s->pin_base = NULL;
  s->pin_cap = 0;
  void *base = NULL;
  atomic_fetch_add(&p->allocs, 1);
  TRY(eng_cuda_pinned_create(&s->pin, total + ENG_CUDA_MEM_ALIGN, 8, e));
  atomic_fetch_add(&p->pin_bytes, (uint64_t)(total + ENG_CUDA_MEM_ALIGN));
  TRY(eng_cuda_pinned_alloc(s->pin, total, 0, &base, e));
  s->pin_base = base;
  s->pin_cap = total;
  return 0;
}

// Constants: the device's copy in the model's store (engine/cuda/cuda_weights.h),
// uploaded by the first plan of the graph on this device and precision and
// shared by the rest; FP32 ones stored as FP16 for an FP16 plan.
int eng_cuda__upload_consts(eng_cuda_plan *p, err *e) {
  if (!p->weights) {
    TRY(eng_cuda_weights_create(p->pl->g, &p->own_weights, e));
    p->weights = p->own_weights;
  }
  TRY(eng_cuda_weights_acquire(p->weights, p->device, p->half != 0, &p->wset, &p->weights_uploaded, e));
  if (p->weights_uploaded) atomic_fetch_add(&p->allocs, 1);
  for (size_t v = 0; v < p->pl->n_values; v++) p->cdev[v] = eng_cuda_wset_ptr(p->wset, v);
  return 0;
}

// --- enqueueing one batch

static void fill_tensor(eng_cuda_plan *p, eng_tensor *t, int v) {
  if (v < 0) {
    memset(t, 0, sizeof *t);
    return;
  }
  *t = p->pl->cur[v];
  t->dt = p->ddt[v];
  t->data = p->dptr[v];
  t->bytes = nbytes(t);
}

// A node with FP16-stored operands and no FP16 kernel: FP32 copies in the
// slot's scratch, the FP32 op, the outputs narrowed back.
static int run_fallback(eng_cuda_plan *p, slot *s, size_t i, err *e) {
  eng_plan *pl = p->pl;
  const eng_node *n = eng_graph_node(pl->g, i);
  cudaStream_t st = s->ctx.stream;
  size_t off = s->fb_off;
  for (int k = 0; k < n->n_in; k++) {
    eng_tensor *t = &pl->tin[k];
    if (t->dt != DT_FP16) continue;
    void *w = s->scr_base + off;
    off += eng_cuda__round_up(numel(t) * sizeof(float));
    TRY(k_f16_to_f32_cuda(w, t->data, numel(t), st, e));
    t->dt = DT_FP32;
    t->data = w;
    t->bytes = nbytes(t);
  }
  void *dst[16] = {0};
  for (int k = 0; k < n->n_out && k < 16; k++) {
    eng_tensor *t = &pl->tout[k];
    if (t->dt != DT_FP16) continue;
    dst[k] = t->data;
    t->dt = DT_FP32;
    t->data = s->scr_base + off;
    t->bytes = nbytes(t);
    off += eng_cuda__round_up(numel(t) * sizeof(float));
  }
  if (off > s->scr_cap)
    return err_set(e, ERR_INTERNAL, "FP16 fallback scratch too small (%zu > %zu bytes)", off, s->scr_cap);
  TRY(p->ops[i]->run(&s->ctx, &pl->params[i], pl->tin, n->n_in, pl->tout, n->n_out, e));
  for (int k = 0; k < n->n_out && k < 16; k++)
    if (dst[k]) TRY(k_f32_to_f16_cuda(dst[k], pl->tout[k].data, numel(&pl->tout[k]), st, e));
  return 0;
}

// Node i's fused epilogue and state in the slot's context; a fused result
// goes to the buffer of the last fused node's output (eng_cuda__settle_fusions).
static void set_node_ctx(eng_cuda_plan *p, slot *s, size_t i) {
  eng_plan *pl = p->pl;
  s->ctx.act = p->run_act[i];
  s->ctx.in_act = p->run_in_act[i];
  s->ctx.bias = p->run_bias[i] >= 0 ? p->dptr[p->run_bias[i]] : NULL;
  s->ctx.z = p->run_z[i] >= 0 ? p->dptr[p->run_z[i]] : NULL;
  s->ctx.node = p->nstate[i];
  s->ctx.oob = s->oob_dev ? s->oob_dev + i : NULL;
  if (p->run_out[i] >= 0) pl->tout[0].data = p->dptr[p->run_out[i]];
}

static void clear_node_ctx(slot *s) {
  s->ctx.nhwc = false;
  s->ctx.act = 0;
  s->ctx.in_act = 0;
  s->ctx.bias = NULL;
  s->ctx.z = NULL;
  s->ctx.node = NULL;
  s->ctx.oob = NULL;
}

// Every stateful node's prepare for this run's shapes, then the slot's
// workspace grown to the largest need. Runs before launch, so before any
// capture: whatever a new shape needs (a cuDNN plan) is made here.
int eng_cuda__prepare_nodes(eng_cuda_plan *p, slot *s, err *e) {
  eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  size_t need = 0;
  uint64_t gemm = 0;
  int rc = 0;
  for (size_t i = 0; i < pl->n_nodes && !rc; i++) {
    const cuda_op *op = p->ops[i];
    if (p->skip[i] || !op || !op->prepare) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++) fill_tensor(p, &pl->tin[k], n->in[k]);
    for (int k = 0; k < n->n_out; k++) fill_tensor(p, &pl->tout[k], n->out[k]);
    set_node_ctx(p, s, i);
    s->ctx.nhwc = p->lay.mode[i];
    cuda_prep r = {0};
    rc = op->prepare(&s->ctx, &pl->params[i], pl->tin, n->n_in, pl->tout, n->n_out, &r, e);
    if (rc) err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
    if (r.made) {
      atomic_fetch_add(&p->allocs, (uint64_t)r.made);
      atomic_fetch_add(&p->made, (uint64_t)r.made);  // a new shape's plan: a lazy prepare once serving
    }
    if (r.ws_need > need) need = r.ws_need;
    gemm += r.gemm;
  }
  atomic_store(&p->gemm_convs, gemm);
  clear_node_ctx(s);
  if (rc) return rc;
  if (need > s->ws_cap || (need && !s->ws))
    TRY(eng_cuda__ensure_dev(p, s, &s->ws, &s->ws_base, &s->ws_cap, need, e));
  s->ctx.ws = s->ws_base;
  s->ctx.ws_bytes = s->ws_cap;
  return 0;
}

// Node i's operands in the layout it runs in (plan_cuda_layout.c): the
// ones stored in the other layout transposed into the slot's scratch, an
// elementwise node's dims presented in memory order, the NHWC flag set.
static int relayout_operands(eng_cuda_plan *p, slot *s, size_t i, err *e) {
  eng_plan *pl = p->pl;
  const eng_node *n = eng_graph_node(pl->g, i);
  bool nhwc = p->lay.mode[i];
  uint32_t conv = p->lay.conv[i];
  size_t off = s->lay_off;
  s->ctx.nhwc = nhwc;
  for (int k = 0; conv && k < n->n_in && k < 31; k++) {
    if (!(conv & (1u << k))) continue;
    eng_tensor *t = &pl->tin[k];
    TRY(eng_cuda__relayout(t, s->scr_base + off, nhwc, s->ctx.stream, e));
    off += eng_cuda__round_up(nbytes(t));
  }
  if (conv & CUDA_LAYOUT_CONV_Z) {
    eng_tensor z;
    fill_tensor(p, &z, p->run_z[i]);
    TRY(eng_cuda__relayout(&z, s->scr_base + off, nhwc, s->ctx.stream, e));
    s->ctx.z = z.data;
  }
  if (nhwc && (p->ops[i]->flags & CUDA_OP_ELEMWISE)) {
    for (int k = 0; k < n->n_in; k++) eng_cuda__layout_present(&pl->tin[k]);
    for (int k = 0; k < n->n_out; k++) eng_cuda__layout_present(&pl->tout[k]);
  }
  return 0;
}

// Everything of one batch after the host staging: copy-in, the nodes,
// copy-back. Captured into a graph or launched as is.
// A batch with device segments has its inputs copied in before (copy_in):
// here only an FP16 plan's narrowing of them remains.
static int enqueue(eng_cuda_plan *p, slot *s, err *e) {
  eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  cudaStream_t st = s->ctx.stream;
  bool copied_in = s->n_segs > 0;
  eng_cuda__host_begin(p, s);
  nvtxRangePushA("inferd h2d");
  for (size_t i = 0; i < pl->n_inputs; i++) {
    int v = eng_graph_input_value(g, i);
    const eng_tensor *t = &pl->cur[v];
    size_t n = numel(t);
    if (!n || pl->val_in[i]) continue;  // a value input travels as a folded value (fdev) if a kernel reads it
    if (p->ddt[v] != t->dt) {  // FP32 in, FP16 stored: copy, then narrow on the device
      void *w = s->scr_base + s->in32_off[i];
      if ((!copied_in &&
           CUDA_OK(e, cudaMemcpyAsync(w, s->pin_base + s->in_off[i], nbytes(t), cudaMemcpyHostToDevice, st))) ||
          k_f32_to_f16_cuda(p->dptr[v], w, n, st, e)) {
        nvtxRangePop();
        return e->code;
      }
    } else if (!copied_in && CUDA_OK(e, cudaMemcpyAsync(p->dptr[v], s->pin_base + s->in_off[i], nbytes(t),
                                                        cudaMemcpyHostToDevice, st))) {
      nvtxRangePop();
      return e->code;
    }
  }
  for (size_t v = 0; v < pl->n_values; v++) {
    if (!p->fdev[v]) continue;
    const eng_tensor *t = &pl->cur[v];
    size_t n = numel(t);
    if (!n) continue;
    int rc0 = 0;
    if (p->ddt[v] != t->dt) {  // an FP32 mask in an FP16 plan: land, then narrow
      void *w = s->scr_base + s->fd_w[v];
      rc0 = CUDA_OK(e, cudaMemcpyAsync(w, s->pin_base + s->fd_pin[v], nbytes(t), cudaMemcpyHostToDevice, st));
      if (!rc0) rc0 = k_f32_to_f16_cuda((uint16_t *)(s->scr_base + s->fd_dev[v]), w, n, st, e);
    } else {
      rc0 = CUDA_OK(e, cudaMemcpyAsync(s->scr_base + s->fd_dev[v], s->pin_base + s->fd_pin[v], nbytes(t),
                                       cudaMemcpyHostToDevice, st));
    }
    if (rc0) {
      nvtxRangePop();
      return rc0;
    }
  }
  nvtxRangePop();
  nvtxRangePushA("inferd compute");
  int rc = 0;
  for (size_t i = 0; i < pl->n_nodes && !rc; i++) {
    if (p->skip[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    if (!p->ops[i]) {  // no CUDA path: on the host, between copies (plan_cuda_host.c)
      rc = eng_cuda__host_node(p, s, i, e);
      if (rc) err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
      continue;
    }
    bool half_operands = false;
    for (int k = 0; k < n->n_in; k++) {
      fill_tensor(p, &pl->tin[k], n->in[k]);
      half_operands |= pl->tin[k].dt == DT_FP16;
    }
    for (int k = 0; k < n->n_out; k++) {
      fill_tensor(p, &pl->tout[k], n->out[k]);
      half_operands |= pl->tout[k].dt == DT_FP16;
    }
    set_node_ctx(p, s, i);
    const cuda_op *op = p->ops[i];
    rc = relayout_operands(p, s, i, e);
    if (rc) {
      err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
      break;
    }
    if (half_operands && (!op->half || !op->half(&pl->params[i], pl->tin, n->n_in)))
      rc = run_fallback(p, s, i, e);
    else
      rc = op->run(&s->ctx, &pl->params[i], pl->tin, n->n_in, pl->tout, n->n_out, e);
    if (rc) err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
  }
  clear_node_ctx(s);
  nvtxRangePop();
  if (rc) return rc;
  nvtxRangePushA("inferd d2h");
  size_t lay_off = s->lay_out_off;
  for (size_t j = 0; j < pl->n_outputs && !rc; j++) {
    int v = eng_graph_output_value(g, j);
    const eng_tensor *t = &pl->cur[v];
    size_t b = nbytes(t);
    if (!b) continue;
    const void *src = p->dptr[v];
    if (eng_cuda__stored_nhwc(&p->lay, pl, v)) {  // back to NCHW first
      eng_tensor x;
      fill_tensor(p, &x, v);
      rc = eng_cuda__relayout(&x, s->scr_base + lay_off, false, st, e);
      src = x.data;
      lay_off += eng_cuda__round_up(nbytes(&x));
      if (rc) break;
    }
    if (p->ddt[v] != t->dt) {  // widen on the device, then copy FP32 back
      void *w = s->scr_base + s->out32_off[j];
      rc = k_f16_to_f32_cuda(w, src, numel(t), st, e);
      src = w;
    }
    if (!rc) rc = CUDA_OK(e, cudaMemcpyAsync(s->pin_base + s->out_off[j], src, b, cudaMemcpyDeviceToHost, st));
  }
  nvtxRangePop();
  return rc;
}

// The batch's input-shape signature, the key of the slot's graphs, and
// whether its inputs are copied in outside the graph (a batch with device
// segments: its graph starts after the copy-in).
static size_t signature(const eng_cuda_plan *p, const slot *s, int64_t *sig, size_t cap) {
  const eng_plan *pl = p->pl;
  size_t n = 0;
  if (cap < 1) return 0;
  sig[n++] = (s->n_segs > 0) | (int64_t)p->layout_nhwc << 1;  // a graph per layout too
  for (size_t i = 0; i < pl->n_inputs; i++) {
    const eng_tensor *t = &pl->cur[eng_graph_input_value(pl->g, i)];
    if (n + 2 + (size_t)t->ndims > cap) return 0;
    sig[n++] = t->dt;
    sig[n++] = t->ndims;
    for (int d = 0; d < t->ndims; d++) sig[n++] = t->dims[d];
    if (!pl->val_in[i]) continue;
    // a parameter given as an input (plan_values.c) decides shapes and
    // kernel arguments as the shapes do: its bytes join the key; one too
    // big for it launches plainly
    size_t b = t->bytes, w = (b + sizeof *sig - 1) / sizeof *sig;
    if (n + w > cap) return 0;
    if (w) {
      sig[n + w - 1] = 0;
      memcpy(&sig[n], t->data, b);
    }
    n += w;
  }
  return n;
}

// The slot's graph for sig in this epoch; *stale set when it only has one of an older epoch.
static gentry *find_graph(slot *s, uint64_t epoch, const int64_t *sig, size_t n, bool *stale) {
  *stale = false;
  for (int i = 0; i < s->n_graphs; i++) {
    gentry *g = &s->graphs[i];
    if (g->n != n || memcmp(g->sig, sig, n * sizeof *sig) != 0) continue;
    if (g->epoch == epoch) return g;
    *stale = true;
  }
  return NULL;
}

// Captures enqueue into a graph. 1: captured into *out; 0: capture is not
// possible here (graphs get disabled, the caller launches plainly); <0: a
// real error from enqueue (in *e).
// A plan with host nodes gets a snapshot of their operands per graph
// (*hr, owned by the caller on 1), which the graph's host callbacks read at
// every replay.
static int capture(eng_cuda_plan *p, slot *s, cudaGraphExec_t *out, host_run **hr, err *e) {
  cudaStream_t st = s->ctx.stream;
  err ce = {0};
  *hr = NULL;
  host_run *run = NULL;
  if (eng_cuda__host_noop(p) && !(run = eng_cuda__host_run_new(p))) {
    err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  if (CUDA_OK(&ce, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal))) {
    eng_cuda__host_run_free(run);
    return 0;
  }
  s->hrun = run;
  int rc = enqueue(p, s, e);
  s->hrun = NULL;
  cudaGraph_t graph = NULL;
  int erc = CUDA_OK(&ce, cudaStreamEndCapture(st, &graph));
  if (rc) {
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    eng_cuda__host_run_free(run);
    return -1;
  }
  cudaGraphExec_t exec = NULL;
  if (!erc && graph) erc = CUDA_OK(&ce, cudaGraphInstantiate(&exec, graph, 0));
  if (graph) (void)cudaGraphDestroy(graph);
  if (erc || !graph) {
    eng_cuda__host_run_free(run);
    return 0;
  }
  *out = exec;
  *hr = run;
  return 1;
}

// The tuner's counters into the plan's atomics, for stats readers on other threads.
static void publish_tuning(eng_cuda_plan *p) {
  if (!p->tuner) return;
  eng_gemm_tuner_stats ts;
  eng_gemm_tuner_stats_get(p->tuner, &ts);
  atomic_store(&p->gemm_tuned, ts.shapes);
  atomic_store(&p->gemm_tune_improved, ts.improved);
  atomic_store(&p->gemm_tune_ns, ts.tune_ns);
  atomic_store(&p->gemm_first_ns, (uint64_t)(ts.first_us * 1e3));
  atomic_store(&p->gemm_best_ns, (uint64_t)(ts.best_us * 1e3));
}

static uint64_t tune_skipped(const slot *s) {
  eng_gemm_lt_stats gs;
  eng_gemm_lt_stats_get(s->ctx.gemm, &gs);
  return gs.tune_skipped;
}

// The batch enqueued once for cuBLASLt's autotuning alone (cuda_gemm.h's dry
// pass): every GEMM shape it meets is timed outside any capture, on this
// run's buffers, even where a product adds its residual in place. What it
// computes is thrown away: the real run follows on the same stream and
// writes every value again before reading it.
static int tuning_pass(eng_cuda_plan *p, slot *s, err *e) {
  eng_gemm_lt_set_dry(s->ctx.gemm, true);
  // its own snapshot: the launch after it refills the plain one while its callbacks may still be queued
  s->hrun = s->hrun_tune;
  eng_cuda__host_run_reset(s->hrun);
  int rc = enqueue(p, s, e);
  eng_gemm_lt_set_dry(s->ctx.gemm, false);
  atomic_fetch_add(&p->gemm_tune_passes, 1);
  publish_tuning(p);
  return rc;
}

// capture, with autotuning: a capture cannot time anything, so when it met a
// GEMM shape still untuned its graph is dropped, a tuning pass runs outside
// it and the batch is captured again, now with the timed algorithms. Shapes
// another slot already timed are taken from the tuner inside the capture.
static int capture_tuned(eng_cuda_plan *p, slot *s, cudaGraphExec_t *out, host_run **hr, err *e) {
  uint64_t skipped = p->tuner ? tune_skipped(s) : 0;
  int rc = capture(p, s, out, hr, e);
  if (rc != 1 || !p->tuner || tune_skipped(s) == skipped) return rc;
  (void)cudaGraphExecDestroy(*out);
  *out = NULL;
  eng_cuda__host_run_free(*hr);
  *hr = NULL;
  if (tuning_pass(p, s, e)) return -1;
  return capture(p, s, out, hr, e);
}

// A batch with device segments: every input onto the device ahead of its
// graph, on the slot's stream, where the nodes (or an FP16 plan's narrowing)
// read it: the host runs from the pinned staging, each device segment device
// to device, or from the device it lives on when that is another one. Outside
// the graph because the segments' addresses change from batch to batch,
// where a graph's copies are fixed at capture.
static int copy_in(eng_cuda_plan *p, slot *s, err *e) {
  eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  cudaStream_t st = s->ctx.stream;
  int rc = 0;
  uint64_t segs = 0, peers = 0;
  nvtxRangePushA("inferd copy-in");
  for (size_t i = 0; i < pl->n_inputs && !rc; i++) {
    if (pl->val_in[i]) continue;  // no segments (check_segs): a folded value (fdev) if a kernel reads it
    int v = eng_graph_input_value(g, i);
    const eng_tensor *t = &pl->cur[v];
    uint8_t *dst = p->ddt[v] != t->dt ? s->scr_base + s->in32_off[i] : (uint8_t *)p->dptr[v];
    const uint8_t *host = s->pin_base + s->in_off[i];
    eng_seg_walk w;
    eng_copy_run r;
    eng_seg_walk_init(&w, s->segs, s->n_segs, i, nbytes(t));
    while (!rc && eng_seg_walk_next(&w, &r)) {
      if (!r.seg) {
        rc = CUDA_OK(e, cudaMemcpyAsync(dst + r.offset, host + r.offset, r.bytes, cudaMemcpyHostToDevice, st));
      } else if (r.seg->device == p->device) {
        rc = CUDA_OK(e, cudaMemcpyAsync(dst + r.offset, r.seg->ptr, r.bytes, cudaMemcpyDeviceToDevice, st));
        segs++;
      } else {
        rc = CUDA_OK(e, cudaMemcpyPeerAsync(dst + r.offset, p->device, r.seg->ptr, r.seg->device, r.bytes, st));
        segs++;
        peers++;
      }
    }
  }
  nvtxRangePop();
  atomic_fetch_add(&p->dev_seg_copies, segs);
  atomic_fetch_add(&p->peer_copies, peers);
  return rc;
}

int eng_cuda__launch(eng_cuda_plan *p, slot *s, err *e) {
  int64_t sig[ENG_MAX_DIMS * 64];
  size_t n = signature(p, s, sig, sizeof sig / sizeof sig[0]);
  int cap = p->o.graph_cap > 0 ? p->o.graph_cap : 64;
  if (p->o.no_graphs || atomic_load(&p->graphs_disabled) || n == 0) goto plain;
  bool stale = false;
  gentry *g = find_graph(s, p->epoch, sig, n, &stale);
  if (!g && s->n_graphs < cap) {
    cudaGraphExec_t exec = NULL;
    host_run *hr = NULL;
    int rc = capture_tuned(p, s, &exec, &hr, e);
    publish_tuning(p);
    if (rc < 0) return e->code ? e->code : ERR_INTERNAL;
    if (rc == 0) {
      atomic_store(&p->graphs_disabled, 1);
      goto plain;
    }
    g = &s->graphs[s->n_graphs];
    g->sig = malloc(n * sizeof *sig);
    if (!g->sig) {
      (void)cudaGraphExecDestroy(exec);
      eng_cuda__host_run_free(hr);
      goto plain;
    }
    memcpy(g->sig, sig, n * sizeof *sig);
    g->n = n;
    g->epoch = p->epoch;
    g->exec = exec;
    g->hrun = hr;
    s->n_graphs++;
    atomic_fetch_add(&p->graphs_captured, 1);
    if (stale) atomic_fetch_add(&p->stale_captures, 1);
  }
  if (g) {
    if (s->n_segs) TRY(copy_in(p, s, e));
    s->hrun_live = g->hrun;  // its host nodes' errors, read by finish
    eng_cuda__host_run_reset(g->hrun);
    uint64_t t0 = clock_mono_ns();
    CUDA_TRY(e, cudaGraphLaunch(g->exec, s->ctx.stream));
    atomic_fetch_add(&p->launch_ns, clock_mono_ns() - t0);
    atomic_fetch_add(&p->graph_launches, 1);
    return 0;
  }
plain:
  atomic_fetch_add(&p->plain_launches, 1);
  // A plain launch times new shapes as it meets them, except a product adding
  // its residual in place (timing would consume it): that one waits for a
  // tuning pass before the next plain launch.
  // A pass that itself leaves shapes untimed (the stream's capture state
  // unreadable) would repeat forever: then no more passes on this slot.
  if (p->tuner && s->tune_pending && !s->tune_stuck) {
    uint64_t before = tune_skipped(s);
    TRY(tuning_pass(p, s, e));
    s->tune_stuck = tune_skipped(s) != before;
    s->tune_pending = false;
  }
  // the inputs' device segments after the pass: it computes nothing kept
  if (s->n_segs) TRY(copy_in(p, s, e));
  uint64_t skipped = p->tuner ? tune_skipped(s) : 0;
  s->hrun = s->hrun_live = s->hrun_plain;
  eng_cuda__host_run_reset(s->hrun);
  int prc = enqueue(p, s, e);
  if (p->tuner) {
    s->tune_pending = tune_skipped(s) != skipped;
    publish_tuning(p);
  }
  return prc;
}

int eng_cuda__slot_create(eng_cuda_plan *p, slot *s, err *e) {
  const eng_plan *pl = p->pl;
  size_t ni = pl->n_inputs + 1, no = pl->n_outputs + 1;
  s->in_off = calloc(ni, sizeof *s->in_off);
  s->in32_off = calloc(ni, sizeof *s->in32_off);
  s->out_off = calloc(no, sizeof *s->out_off);
  s->edge_off = calloc(no, sizeof *s->edge_off);
  s->out32_off = calloc(no, sizeof *s->out32_off);
  s->outs = calloc(no, sizeof *s->outs);
  s->fd_pin = calloc(pl->n_values + 1, sizeof *s->fd_pin);
  s->fd_dev = calloc(pl->n_values + 1, sizeof *s->fd_dev);
  s->fd_w = calloc(pl->n_values + 1, sizeof *s->fd_w);
  s->hv_off = calloc(pl->n_values + 1, sizeof *s->hv_off);
  s->hv32_off = calloc(pl->n_values + 1, sizeof *s->hv32_off);
  if (eng_cuda__host_noop(p) &&
      (!(s->hrun_plain = eng_cuda__host_run_new(p)) || !(s->hrun_tune = eng_cuda__host_run_new(p))))
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int cap = p->o.graph_cap > 0 ? p->o.graph_cap : 64;
  s->graphs = calloc((size_t)cap, sizeof *s->graphs);
  if (!s->in_off || !s->in32_off || !s->out_off || !s->edge_off || !s->out32_off || !s->outs || !s->graphs ||
      !s->fd_pin || !s->fd_dev || !s->fd_w || !s->hv_off || !s->hv32_off)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->ctx.gemm32 = p->o.precision == ENG_PREC_TF32 ? ENG_GEMM_FP32_TF32 : ENG_GEMM_FP32;
  s->ctx.conv_timed = p->o.conv_timed != 0;
  s->ctx.conv_gemm = !p->o.no_conv_gemm;
  s->ctx.weights = p->wset;
  CUDA_TRY(e, cudaStreamCreateWithFlags(&s->ctx.stream, cudaStreamNonBlocking));
  // the nodes' out-of-range flags: host memory the kernels write through its device alias, read by
  // finish after the batch's event (no copy to enqueue, nothing a graph must capture)
  CUDA_TRY(e, cudaHostAlloc((void **)&s->oob_host, (pl->n_nodes + 1) * sizeof *s->oob_host,
                            cudaHostAllocMapped | cudaHostAllocPortable));
  memset(s->oob_host, 0, (pl->n_nodes + 1) * sizeof *s->oob_host);
  CUDA_TRY(e, cudaHostGetDevicePointer((void **)&s->oob_dev, s->oob_host, 0));
  atomic_fetch_add(&p->allocs, 1);  // the workspace
  TRY(eng_gemm_lt_create(&s->ctx.gemm, GEMM_WORKSPACE, 0, e));
  atomic_fetch_add(&p->dev_bytes, GEMM_WORKSPACE);
  eng_gemm_lt_set_tuner(s->ctx.gemm, p->tuner);
  eng_gemm_lt_set_no_clusters(s->ctx.gemm, p->o.no_gemm_clusters != 0);
  if (p->need_cudnn) TRY(eng_cudnn_create(&s->ctx.cudnn, e));
  if (pl->have_layout) {  // every shape known: size for max_batch now
    TRY(eng_cuda__ensure_dev(p, s, &s->act, &s->act_base, &s->act_cap, pl->arena_need, e));
    TRY(eng_cuda__ensure_staging(p, s, e));
  }
  return 0;
}

void eng_cuda__slot_destroy(slot *s) {
  if (s->ctx.stream) {
    (void)cudaStreamSynchronize(s->ctx.stream);
    (void)cudaStreamDestroy(s->ctx.stream);
  }
  drop_graphs(s);
  free(s->graphs);
  if (s->oob_host) (void)cudaFreeHost(s->oob_host);
  eng_gemm_lt_destroy(s->ctx.gemm);
  eng_cudnn_destroy(s->ctx.cudnn);
  eng_cuda_arena_destroy(s->ws);
  eng_cuda_arena_destroy(s->act);
  eng_cuda_arena_destroy(s->scr);
  eng_cuda_pinned_destroy(s->pin);
  free(s->in_off);
  free(s->in32_off);
  free(s->out_off);
  free(s->edge_off);
  free(s->out32_off);
  free(s->outs);
  free(s->fd_pin);
  free(s->fd_dev);
  free(s->fd_w);
  free(s->hv_off);
  free(s->hv32_off);
  eng_cuda__host_run_free(s->hrun_plain);
  eng_cuda__host_run_free(s->hrun_tune);
}

