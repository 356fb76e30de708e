// engine/cuda/plan_cuda.c: executes the CPU planner's plan (plan_internal.h) on a
// CUDA device. Values get device pointers from the layout (root + offset in
// a slot's device arena), constants live in an arena filled once at create,
// and each node runs through its family's CUDA op (engine/ops/families.h,
// eng_cuda__find_op) on the slot's stream.
// Inputs and outputs pass through pinned staging whose offsets are computed
// here; conversions of declared FP16/BF16/FP64 edges happen on the host, in
// the staging buffers, with the CPU plan's own functions.
//
// Fusion: ops say what they absorb through their fuse hook (a Gemm/MatMul
// its bias Add, a MatMul's residual Add and Relu / Gelu as the cuBLASLt
// epilogue: engine/ops/gemm/gemm_cuda.c; a Conv a residual Add and
// Relu/Sigmoid/Tanh: engine/ops/conv/conv_cuda.c); settle_fusions checks the
// buffers per run and the fused nodes are skipped.
//
// Op families with state (the conv family's cuDNN plans) plug in through
// plan_cuda_internal.h: per-node init/prepare/destroy hooks and a per-slot
// cuDNN handle and workspace, sized before launch, never inside a capture.
//
// GEMM autotuning (cuda_gemm.h): one eng_gemm_tuner per plan, shared by the
// slots' cuBLASLt objects. Timing cannot happen inside a capture, so a
// capture that met an untimed shape is thrown away, the batch runs once
// outside it as a dry tuning pass, and is captured again (capture_tuned).
#include "engine/cuda/plan_cuda.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nvtx3/nvToolsExt.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv.h"
#include "engine/cuda/cuda_gemm.h"
#include "engine/cuda/cuda_mem.h"
#include "engine/cuda/cuda_weights.h"
#include "engine/cuda/plan_cuda_k.h"
#include "engine/cuda/plan_cuda_internal.h"
#include "engine/cpu/plan_internal.h"
#include "kernels/base/clock.h"
#include "kernels/k_cuda.h"

// cuBLASLt workspace per slot: enough for Hopper's best kernels.
#define GEMM_WORKSPACE (32u << 20)

typedef struct gentry {
  uint64_t epoch;
  size_t n;
  int64_t *sig;
  cudaGraphExec_t exec;
} gentry;

typedef struct slot {
  cuda_ctx ctx;
  eng_cuda_arena *act;
  uint8_t *act_base;
  size_t act_cap;
  eng_cuda_arena *ws;   // the ops' workspace (cuda_ctx.ws), grown by prepare_nodes
  uint8_t *ws_base;
  size_t ws_cap;
  eng_cuda_arena *scr;  // FP16 plans: FP32 edges and fallback operands
  uint8_t *scr_base;
  size_t scr_cap;
  eng_cuda_pinned *pin;
  uint8_t *pin_base;
  size_t pin_cap;
  size_t *in_off, *out_off, *edge_off;  // pinned, per input / output
  size_t *in32_off, *out32_off;         // scratch, per input / output (FP16 plans)
  size_t fb_off;                        // scratch: start of the fallback operands
  size_t lay_off, lay_out_off;          // scratch: a node's transposed operands, the outputs'
  size_t *fd_pin, *fd_dev, *fd_w;       // per value read by a kernel after folding: pinned copy,
                                        // device copy, FP32 landing before narrowing (scratch)
  eng_tensor *outs;                     // per output: internal type and shape of the batch
  uint64_t seq;                         // this batch's submit number
  bool tune_pending;                    // the last plain launch met a GEMM it could not time
  bool tune_stuck;                      // a tuning pass left shapes untimed: no more passes
  // this submit's device segments (eng_cuda_plan_submit_segs), read by
  // launch; with any, the inputs are copied in outside the graph (copy_in)
  const eng_dev_seg *segs;
  size_t n_segs;
  gentry *graphs;
  int n_graphs;
} slot;

struct eng_cuda_plan {
  eng_plan *pl;  // the shared analysis; its host arena is never allocated
  int device;
  eng_cuda_opts o;
  int half;
  const cuda_op **ops;  // per node
  cuda_fusion *fz;      // per node (a product node)
  void **nstate;        // per node: the op's state (cuda_op.init), or NULL
  int need_cudnn;       // some op wants a cuDNN handle per slot
  char *skip;           // per node, this run: fused into an earlier node
  int *run_act;         // per node, this run: the op's activation code
  int *run_in_act;      // per node, this run: its prologue activation code (settle_prologues)
  int *run_bias;        // per node, this run: bias value or -1
  int *run_z;           // per node, this run: residual value or -1
  int *run_out;         // per node, this run: the value whose buffer output 0 is written to
  void **dptr;          // per value: device pointer for this run
  void **cdev;          // per value: constant's device copy (NULL if not a constant)
  dtype *ddt;           // per value, this run: the type stored on the device
  uint8_t *fdev;        // per value, this run: folded on the host, read by a kernel (uploaded)
  cuda_layout lay;      // this run's NHWC regions (plan_cuda_layout.c)
  bool layout_nhwc;     // this run keeps convolution regions NHWC
  // An FP32 plan left to choose (ENG_CUDA_LAYOUT_AUTO) times both layouts per
  // warmed batch size and keeps the faster (warm_up, pick_layout): which wins
  // depends on the model, not the precision alone.
  bool layout_timed;
  int layout_trial;  // warm_up's layout under trial (0 NCHW, 1 NHWC), -1 outside it
  int n_picks;
  struct {
    int rows;
    bool nhwc;
  } picks[16];
  eng_cuda_weights *own_weights;  // the plan's own store where opts gave none
  eng_cuda_weights *weights;      // where the constants come from (the model's store, or own_weights)
  eng_cuda_wset *wset;            // this device's copy, held while the plan lives
  bool weights_uploaded;          // this plan made that copy (the others on the device share it)
  slot sl[ENG_CUDA_MAX_SLOTS];
  int n_slots;
  // static shapes: each input has a fixed place in every slot's pinned
  // staging, sized for max_batch, so a caller can assemble it there
  int fixed_in;
  size_t *in_cap;
  size_t *in_bytes;  // per input, this submit's byte size (checking device segments)
  uint64_t epoch;  // bumped at every re-layout: graphs of older epochs are stale
  uint64_t submits;
  // events, a ring one longer than the slots so the previous batch's end
  // survives until the next batch is finished
  cudaEvent_t ev_start[ENG_CUDA_MAX_SLOTS + 1], ev_end[ENG_CUDA_MAX_SLOTS + 1];
  uint64_t last_done_seq;  // finish side only
  int have_last_done;
  _Atomic uint64_t graphs_captured, graph_launches, plain_launches, busy_ns, batches;
  _Atomic uint64_t launch_ns;  // host time inside cudaGraphLaunch: a lone batch's GPU work waits for it
  // host time of submit before the batch's start event, in all and the input staging's share: a lone
  // batch waits for all of it before its GPU work starts
  _Atomic uint64_t pre_ns, stage_ns;
  _Atomic int graphs_disabled;
  // cudaMalloc/cudaHostAlloc calls, counted where the pools are made (the
  // pools may be replaced while another thread reads the stats)
  _Atomic uint64_t allocs;
  _Atomic uint64_t dev_bytes, pin_bytes;  // what the pools and workspaces hold now
  _Atomic uint64_t fused;                 // nodes skipped by the last settle_fusions and settle_prologues
  _Atomic uint64_t nhwc_nodes, relayouts;  // the last layout pass's (plan_cuda_layout.c)
  _Atomic uint64_t gemm_convs;             // the last prepare_nodes' Convs on cuBLASLt
  eng_gemm_tuner *tuner;                   // shared by the slots' cuBLASLt objects; NULL: autotuning off
  _Atomic uint64_t gemm_tuned, gemm_tune_improved, gemm_tune_ns, gemm_tune_passes, gemm_first_ns, gemm_best_ns;
  _Atomic uint64_t dev_seg_copies, peer_copies;  // device segments copied in, those from another device
};

static size_t numel(const eng_tensor *t) { return (size_t)eng_numel(t->ndims, t->dims); }
static size_t nbytes(const eng_tensor *t) { return numel(t) * dtype_size(t->dt); }

static void find_fusions(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    cuda_fusion *f = &p->fz[i];
    *f = (cuda_fusion){.bias_node = -1, .act_node = -1, .bias_value = -1, .z_value = -1,
                       .mid_value = -1, .add_value = -1, .res_node = -1, .res_z = -1,
                       .res_value = -1, .act = 0, .pro_node = -1, .pro_value = -1, .pro_act = 0};
    if (p->ops[i] && p->ops[i]->fuse) p->ops[i]->fuse(pl, i, f);  // NULL: a folded node
  }
}

static bool same_shape(const eng_tensor *a, const eng_tensor *b) {
  return a->dt == b->dt && a->ndims == b->ndims &&
         memcmp(a->dims, b->dims, (size_t)a->ndims * sizeof a->dims[0]) == 0;
}

// This run's fusions. The fused result is written where the last fused
// node's output lives, so that buffer must be one the fusing node may write
// while its inputs are still being read: the product's own (the planner ran
// the Add / activation in place), or the residual's when the Add ran in
// place on it (z == y is allowed; z is read elementwise before y is
// written), unless that residual is also the node's input. Otherwise the
// nodes run on their own.
static void settle_fusions(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  memset(p->skip, 0, pl->n_nodes);
  for (size_t i = 0; i < pl->n_nodes; i++) {
    p->run_act[i] = 0;
    p->run_bias[i] = -1;
    p->run_z[i] = -1;
    p->run_out[i] = -1;
  }
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const cuda_fusion *f = &p->fz[i];
    if (f->mid_value < 0 || p->skip[i] || pl->folded[i]) continue;
    // an Add two products could absorb (Conv + Conv shortcut) goes to the first
    if ((f->bias_node >= 0 && p->skip[f->bias_node]) || (f->act_node >= 0 && p->skip[f->act_node]) ||
        (f->res_node >= 0 && p->skip[f->res_node]))
      continue;
    const eng_node *n = eng_graph_node(g, i);
    int r = pl->root[f->mid_value], out = f->mid_value;
    int xr = n->n_in > 0 && n->in[0] >= 0 ? pl->root[n->in[0]] : -1;
    if (f->bias_node >= 0) {
      if (f->z_value >= 0 && !same_shape(&pl->cur[f->z_value], &pl->cur[f->mid_value]))
        continue;  // a broadcast residual: the Add runs on its own
      int ra = pl->root[f->add_value];
      bool on_z = f->z_value >= 0 && ra == pl->root[f->z_value] && ra != xr;
      if (ra != r && !on_z) continue;
      r = ra;
      out = f->add_value;
      p->run_bias[i] = f->bias_value;
      p->run_z[i] = f->z_value;
      p->skip[f->bias_node] = 1;
    }
    // the residual (MatMul): same rules as above; the activation follows it, so it fuses
    // only if the residual did
    bool res_ok = true;
    if (f->res_node >= 0) {
      int rr = pl->root[f->res_value];
      bool on_z = rr == pl->root[f->res_z] && rr != xr;
      res_ok = same_shape(&pl->cur[f->res_z], &pl->cur[f->mid_value]) && (rr == r || on_z);
      if (res_ok) {
        r = rr;
        out = f->res_value;
        p->run_z[i] = f->res_z;
        p->skip[f->res_node] = 1;
      }
    }
    // The exact GELU through cuBLASLt's tanh form where the result is stored
    // as FP16 only: the two differ by at most 4.7e-4 (at x = 2.70, GELU 2.69),
    // under a quarter of FP16's spacing there (2^-9), so the stored halves
    // differ by at most one rounding step; in FP32 that is not noise.
    bool act_ok = f->act != K_ACT_GELU || (p->half && pl->cur[f->mid_value].dt == DT_FP32);
    if (f->act_node >= 0 && res_ok && act_ok) {
      const eng_node *na = eng_graph_node(g, (size_t)f->act_node);
      if (pl->root[na->out[0]] == r) {
        p->run_act[i] = f->act;
        p->skip[f->act_node] = 1;
        out = na->out[0];
      }
    }
    p->run_out[i] = out;
  }
  uint64_t fused = 0;
  for (size_t i = 0; i < pl->n_nodes; i++) fused += p->skip[i] != 0;
  atomic_store(&p->fused, fused);
  for (size_t i = 0; i < pl->n_nodes; i++)
    if (pl->folded[i]) p->skip[i] = 1;  // computed on the host while planning
}

// This run's prologues (cuda_fusion.pro_node), once the layout is settled:
// the activation node is skipped when it ran in place (its output's buffer
// holds its input, which the consumer then reads), is no fused node's
// already, needs no layout conversion, and the consumer runs NHWC reading
// input 0 as stored (the ops that take prologues do so on NHWC only: the
// depthwise kernel). Else both run as they are.
static void settle_prologues(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  uint64_t added = 0;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    p->run_in_act[i] = 0;
    const cuda_fusion *f = &p->fz[i];
    int h = f->pro_node;
    if (h < 0 || p->skip[i] || p->skip[h] || !p->lay.mode[i] || (p->lay.conv[i] & 1u) ||
        p->lay.conv[h])
      continue;
    int hv = eng_graph_node(g, (size_t)h)->out[0];
    if (pl->root[hv] != pl->root[f->pro_value] || p->ddt[hv] != p->ddt[f->pro_value]) continue;
    p->run_in_act[i] = f->pro_act;
    p->skip[h] = 1;
    added++;
  }
  atomic_fetch_add(&p->fused, added);
}

// Folded values (plan.c) are computed on the host for each signature (a
// transformer's position ids, causal and padding masks come from input
// shapes): the ones a kernel reads as device data travel with the inputs
// (mark_uploads), the rest stay on the host (host_in: Reshape's shape...).
// Nodes without a CUDA kernel are accepted only when folded. Checked for
// every signature.
static int check_folds(const eng_cuda_plan *p, err *e) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (pl->folded[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    if (!p->ops[i])
      return err_set(e, ERR_UNIMPLEMENTED,
                     "node '%s': op %s not yet supported on CUDA (and not computable from input "
                     "shapes alone)", n->name, n->op_type);
  }
  for (size_t j = 0; j < pl->n_outputs; j++) {
    int v = eng_graph_output_value(g, j);
    if (pl->known[v] && !eng_cuda__is_const(g, v))
      return err_set(e, ERR_UNIMPLEMENTED,
                     "output '%s' is computed on the host from input shapes; not supported by "
                     "the CUDA plan yet", eng_graph_output(g, j)->name);
  }
  return 0;
}

// --- memory

static void drop_graphs(slot *s) {
  for (int i = 0; i < s->n_graphs; i++) {
    (void)cudaGraphExecDestroy(s->graphs[i].exec);
    free(s->graphs[i].sig);
  }
  s->n_graphs = 0;
}

// One device region of at least need bytes (one block, carved once).
static int ensure_dev(eng_cuda_plan *p, slot *s, eng_cuda_arena **a, uint8_t **base, size_t *cap,
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

// Stored type of a value on the device: FP16 plans keep FP32 values in FP16.
static dtype dev_dt(const eng_cuda_plan *p, dtype t) { return p->half && t == DT_FP32 ? DT_FP16 : t; }

// Folded values a kernel of this run reads as device data (not through
// host_in): staged like inputs, copied in with them. Per root value, as the
// buffers are.
static void mark_uploads(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  memset(p->fdev, 0, pl->n_values);
  for (size_t i = 0; i < pl->n_nodes; i++) {
    // a fused node's operands (bias, residual) are read by the node it was fused into: kept
    if (pl->folded[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0 || (pl->defs[i]->host_in & ENG_IN(k))) continue;
      int r = pl->root[v];
      if (pl->known[r] && !eng_cuda__is_const(g, r)) p->fdev[r] = 1;
    }
  }
}

// Offsets of the slot's staging for the shapes in pl->cur; grows the pinned
// pool and the scratch if they need more.
static int ensure_staging(eng_cuda_plan *p, slot *s, err *e) {
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
  if (scr) TRY(ensure_dev(p, s, &s->scr, &s->scr_base, &s->scr_cap, scr, e));
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
static int upload_consts(eng_cuda_plan *p, err *e) {
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
// goes to the buffer of the last fused node's output (settle_fusions).
static void set_node_ctx(eng_cuda_plan *p, slot *s, size_t i) {
  eng_plan *pl = p->pl;
  s->ctx.act = p->run_act[i];
  s->ctx.in_act = p->run_in_act[i];
  s->ctx.bias = p->run_bias[i] >= 0 ? p->dptr[p->run_bias[i]] : NULL;
  s->ctx.z = p->run_z[i] >= 0 ? p->dptr[p->run_z[i]] : NULL;
  s->ctx.node = p->nstate[i];
  if (p->run_out[i] >= 0) pl->tout[0].data = p->dptr[p->run_out[i]];
}

static void clear_node_ctx(slot *s) {
  s->ctx.nhwc = false;
  s->ctx.act = 0;
  s->ctx.in_act = 0;
  s->ctx.bias = NULL;
  s->ctx.z = NULL;
  s->ctx.node = NULL;
}

// Every stateful node's prepare for this run's shapes, then the slot's
// workspace grown to the largest need. Runs before launch, so before any
// capture: whatever a new shape needs (a cuDNN plan) is made here.
static int prepare_nodes(eng_cuda_plan *p, slot *s, err *e) {
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
    if (r.made) atomic_fetch_add(&p->allocs, (uint64_t)r.made);
    if (r.ws_need > need) need = r.ws_need;
    gemm += r.gemm;
  }
  atomic_store(&p->gemm_convs, gemm);
  clear_node_ctx(s);
  if (rc) return rc;
  if (need > s->ws_cap || (need && !s->ws))
    TRY(ensure_dev(p, s, &s->ws, &s->ws_base, &s->ws_cap, need, e));
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
  nvtxRangePushA("inferd h2d");
  for (size_t i = 0; i < pl->n_inputs; i++) {
    int v = eng_graph_input_value(g, i);
    const eng_tensor *t = &pl->cur[v];
    size_t n = numel(t);
    if (!n) continue;
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
  }
  return n;
}

static gentry *find_graph(slot *s, uint64_t epoch, const int64_t *sig, size_t n) {
  for (int i = 0; i < s->n_graphs; i++) {
    gentry *g = &s->graphs[i];
    if (g->epoch == epoch && g->n == n && memcmp(g->sig, sig, n * sizeof *sig) == 0) return g;
  }
  return NULL;
}

// Captures enqueue into a graph. 1: captured into *out; 0: capture is not
// possible here (graphs get disabled, the caller launches plainly); <0: a
// real error from enqueue (in *e).
static int capture(eng_cuda_plan *p, slot *s, cudaGraphExec_t *out, err *e) {
  cudaStream_t st = s->ctx.stream;
  err ce = {0};
  if (CUDA_OK(&ce, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal))) return 0;
  int rc = enqueue(p, s, e);
  cudaGraph_t graph = NULL;
  int erc = CUDA_OK(&ce, cudaStreamEndCapture(st, &graph));
  if (rc) {
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return -1;
  }
  if (erc || !graph) return 0;
  cudaGraphExec_t exec = NULL;
  erc = CUDA_OK(&ce, cudaGraphInstantiate(&exec, graph, 0));
  (void)cudaGraphDestroy(graph);
  if (erc) return 0;
  *out = exec;
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
static int capture_tuned(eng_cuda_plan *p, slot *s, cudaGraphExec_t *out, err *e) {
  uint64_t skipped = p->tuner ? tune_skipped(s) : 0;
  int rc = capture(p, s, out, e);
  if (rc != 1 || !p->tuner || tune_skipped(s) == skipped) return rc;
  (void)cudaGraphExecDestroy(*out);
  *out = NULL;
  if (tuning_pass(p, s, e)) return -1;
  return capture(p, s, out, e);
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

static int launch(eng_cuda_plan *p, slot *s, err *e) {
  int64_t sig[ENG_MAX_DIMS * 64];
  size_t n = signature(p, s, sig, sizeof sig / sizeof sig[0]);
  int cap = p->o.graph_cap > 0 ? p->o.graph_cap : 64;
  if (p->o.no_graphs || atomic_load(&p->graphs_disabled) || n == 0) goto plain;
  gentry *g = find_graph(s, p->epoch, sig, n);
  if (!g && s->n_graphs < cap) {
    cudaGraphExec_t exec = NULL;
    int rc = capture_tuned(p, s, &exec, e);
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
      goto plain;
    }
    memcpy(g->sig, sig, n * sizeof *sig);
    g->n = n;
    g->epoch = p->epoch;
    g->exec = exec;
    s->n_graphs++;
    atomic_fetch_add(&p->graphs_captured, 1);
  }
  if (g) {
    if (s->n_segs) TRY(copy_in(p, s, e));
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
  int prc = enqueue(p, s, e);
  if (p->tuner) {
    s->tune_pending = tune_skipped(s) != skipped;
    publish_tuning(p);
  }
  return prc;
}

// --- create / destroy

static int slot_create(eng_cuda_plan *p, slot *s, err *e) {
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
  int cap = p->o.graph_cap > 0 ? p->o.graph_cap : 64;
  s->graphs = calloc((size_t)cap, sizeof *s->graphs);
  if (!s->in_off || !s->in32_off || !s->out_off || !s->edge_off || !s->out32_off || !s->outs || !s->graphs ||
      !s->fd_pin || !s->fd_dev || !s->fd_w)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->ctx.gemm32 = p->o.precision == ENG_PREC_TF32 ? ENG_GEMM_FP32_TF32 : ENG_GEMM_FP32;
  s->ctx.conv_timed = p->o.conv_timed != 0;
  s->ctx.conv_gemm = !p->o.no_conv_gemm;
  s->ctx.weights = p->wset;
  CUDA_TRY(e, cudaStreamCreateWithFlags(&s->ctx.stream, cudaStreamNonBlocking));
  atomic_fetch_add(&p->allocs, 1);  // the workspace
  TRY(eng_gemm_lt_create(&s->ctx.gemm, GEMM_WORKSPACE, 0, e));
  atomic_fetch_add(&p->dev_bytes, GEMM_WORKSPACE);
  eng_gemm_lt_set_tuner(s->ctx.gemm, p->tuner);
  if (p->need_cudnn) TRY(eng_cudnn_create(&s->ctx.cudnn, e));
  if (pl->have_layout) {  // every shape known: size for max_batch now
    TRY(ensure_dev(p, s, &s->act, &s->act_base, &s->act_cap, pl->arena_need, e));
    TRY(ensure_staging(p, s, e));
  }
  return 0;
}

static void slot_destroy(slot *s) {
  if (s->ctx.stream) {
    (void)cudaStreamSynchronize(s->ctx.stream);
    (void)cudaStreamDestroy(s->ctx.stream);
  }
  drop_graphs(s);
  free(s->graphs);
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
}

// The layout a timed plan keeps for batches of `rows` (want_nhwc): slot 0
// runs the warm-up batch each way, once to capture its graph and three times
// timed by the plan's events, and NHWC is kept where its best time is 3%
// under NCHW's (noise must not flip a model between runs). A model that
// rejects the zeros gets no pick (NCHW, as before); device trouble fails the
// load. opts.layout_flip (a test hook) picks by parity instead of timing.
static int time_layouts(eng_cuda_plan *p, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out,
                        int rows, err *e) {
  uint64_t best[2] = {UINT64_MAX, UINT64_MAX};
  int rc = 0;
  for (int l = 0; l < 2 && !rc && !p->o.layout_flip; l++) {
    p->layout_trial = l;
    for (int it = 0; it < 4 && !rc; it++) {
      err we = {0};
      uint64_t ns = 0;
      int r = eng_cuda_plan_submit(p, 0, in, n_in, &we);
      if (r == 0) r = eng_cuda_plan_finish(p, 0, out, n_out, &ns, &we);
      if (r == ERR_INTERNAL || r == ERR_RESOURCE_EXHAUSTED) {
        *e = we;
        rc = err_prefix(e, "timing the %s layout at batch size %d: ", l ? "NHWC" : "NCHW", rows);
      } else if (r) {
        p->layout_trial = -1;
        return 0;
      } else if (it > 0 && ns < best[l]) {
        best[l] = ns;
      }
    }
  }
  p->layout_trial = -1;
  if (rc) return rc;
  int i = p->n_picks++;
  p->picks[i].rows = rows;
  p->picks[i].nhwc = p->o.layout_flip ? (i % 2 == 1) : (double)best[1] < 0.97 * (double)best[0];
  return 0;
}

// Runs each warm batch size once on every slot (zeros in), which captures its
// graph and settles cuBLASLt's algorithm choice before the first request
// (and, in a timed plan, its layout first: time_layouts).
static int warm_up(eng_cuda_plan *p, err *e) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  if (!pl->have_layout || !p->o.n_warm) return 0;
  size_t n_in = pl->n_inputs, n_out = pl->n_outputs;
  eng_tensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
  size_t biggest = 0;
  for (size_t i = 0; i < n_in; i++) {
    const eng_io *io = eng_graph_input(g, i);
    size_t b = (size_t)eng_numel(io->ndims - 1, io->dims + 1) * dtype_size(io->dt);
    if (pl->max_batch > 0) b *= (size_t)pl->max_batch;
    else if (io->ndims > 0) b *= (size_t)io->dims[0];
    if (b > biggest) biggest = b;
  }
  void *zeros = calloc(biggest + 16, 1);
  int rc = 0;
  uint64_t fault_at = p->o.fault_at;  // the test hook counts served batches only
  p->o.fault_at = 0;
  if (!in || !out || !zeros) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory warming up");
  for (size_t w = 0; w < p->o.n_warm && !rc; w++) {
    int rows = p->o.warm[w];
    if (pl->max_batch > 0 ? rows < 1 || rows > pl->max_batch : w > 0) continue;  // no batch dim: once
    for (size_t i = 0; i < n_in; i++) {
      const eng_io *io = eng_graph_input(g, i);
      in[i] = (eng_tensor){.dt = io->dt, .ndims = io->ndims, .data = zeros};
      memcpy(in[i].dims, io->dims, sizeof in[i].dims);
      if (pl->max_batch > 0) in[i].dims[0] = rows;
      in[i].bytes = nbytes(&in[i]);
    }
    if (p->layout_timed && p->n_picks < (int)(sizeof p->picks / sizeof p->picks[0]))
      rc = time_layouts(p, in, n_in, out, n_out, rows, e);
    for (int k = 0; k < p->n_slots && !rc; k++) {
      err we = {0};
      int r = eng_cuda_plan_submit(p, k, in, n_in, &we);
      if (r == 0) r = eng_cuda_plan_finish(p, k, out, n_out, NULL, &we);
      // a model may reject zeros (value-dependent shapes): only device trouble fails the load
      if (r == ERR_INTERNAL || r == ERR_RESOURCE_EXHAUSTED) {
        *e = we;
        rc = err_prefix(e, "warming up batch size %d: ", rows);
      }
    }
  }
  free(in);
  free(out);
  free(zeros);
  p->o.fault_at = fault_at;
  // the warm-up's runs are not traffic
  atomic_store(&p->busy_ns, 0);
  atomic_store(&p->batches, 0);
  p->submits = 0;
  return rc;
}

// NHWC regions pay where tensor cores run the convolutions (FP16, TF32):
// there cuDNN's NHWC kernels are the fast ones. Strict FP32 starts NCHW and
// is timed both ways at warm-up (*timed): there cuDNN's NCHW kernels are the
// fast ones for 3x3 Convs (ResNet-50 FP32 took 1.5x as long NHWC at batch
// 128), yet a model of depthwise and 1x1 Convs runs faster NHWC, on our
// depthwise kernel and SGEMMs (MobileNetV3-Large FP32, batch 32-128: 0.62-0.68
// of the NCHW time; H200, bench_engine, 2026-11-26).
static bool want_nhwc(const eng_cuda_plan *p, bool *timed) {
  *timed = false;
  if (p->o.layout == ENG_CUDA_LAYOUT_NCHW) return false;
  bool conv = false;
  for (size_t i = 0; i < p->pl->n_nodes && !conv; i++)
    conv = p->ops[i] && (p->ops[i]->flags & CUDA_OP_NHWC) &&
           strcmp(eng_graph_node(p->pl->g, i)->op_type, "Conv") == 0;
  if (!conv) return false;
  if (p->o.layout == ENG_CUDA_LAYOUT_NHWC || p->o.precision != ENG_PREC_FP32) return true;
  *timed = true;
  return false;
}

// This submit's batch size: input 0's first dim (1 without one).
static int batch_rows(const eng_cuda_plan *p) {
  const eng_tensor *t = &p->pl->cur[eng_graph_input_value(p->pl->g, 0)];
  return t->ndims > 0 && t->dims[0] > 0 ? (int)t->dims[0] : 1;
}

// The timed layout for this submit's batch: the pick of the warmed batch
// size nearest it (by ratio), NCHW before any.
static bool pick_layout(const eng_cuda_plan *p, int rows) {
  bool nhwc = false;
  double best = 0;
  for (int i = 0; i < p->n_picks; i++) {
    double r = rows > p->picks[i].rows ? (double)rows / p->picks[i].rows : (double)p->picks[i].rows / rows;
    if (i == 0 || r < best) best = r, nhwc = p->picks[i].nhwc;
  }
  return nhwc;
}

// Per value: computable from constants and input shapes alone, so folded on
// the host for every signature (plan.c's foldable, less its size cap, which
// check_folds meets per signature). NULL when out of memory.
static uint8_t *shape_derived(const eng_plan *pl) {
  const eng_graph *g = pl->g;
  uint8_t *d = calloc(pl->n_values + 1, 1);
  if (!d) return NULL;
  for (size_t v = 0; v < pl->n_values; v++) d[v] = eng_cuda__is_const(g, (int)v);
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

int eng_cuda_plan_create(const eng_graph *g, int max_batch, int device, const eng_cuda_opts *opts,
                         eng_cuda_plan **out, err *e) {
  *out = NULL;
  int count = 0;
  cudaError_t crc = cudaGetDeviceCount(&count);
  if (crc != cudaSuccess || device < 0 || device >= count) {
    (void)cudaGetLastError();
    return err_set(e, ERR_UNAVAILABLE, "CUDA device %d not available (%s)", device,
                   crc != cudaSuccess ? cudaGetErrorString(crc) : "out of range");
  }
  eng_cuda_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  p->device = device;
  if (opts) p->o = *opts;
  if (p->o.n_slots <= 0) p->o.n_slots = 2;
  if (p->o.n_slots > ENG_CUDA_MAX_SLOTS) p->o.n_slots = ENG_CUDA_MAX_SLOTS;
  p->half = p->o.precision == ENG_PREC_FP16;
  p->weights = p->o.weights;
  int ret = eng_plan__create(g, max_batch, 0, &p->pl, e);
  if (ret) goto fail;
  const eng_plan *pl = p->pl;
  p->ops = calloc(pl->n_nodes + 1, sizeof *p->ops);
  p->fz = calloc(pl->n_nodes + 1, sizeof *p->fz);
  p->skip = calloc(pl->n_nodes + 1, 1);
  p->nstate = calloc(pl->n_nodes + 1, sizeof *p->nstate);
  p->run_act = calloc(pl->n_nodes + 1, sizeof *p->run_act);
  p->run_in_act = calloc(pl->n_nodes + 1, sizeof *p->run_in_act);
  p->run_bias = calloc(pl->n_nodes + 1, sizeof *p->run_bias);
  p->run_z = calloc(pl->n_nodes + 1, sizeof *p->run_z);
  p->run_out = calloc(pl->n_nodes + 1, sizeof *p->run_out);
  p->dptr = calloc(pl->n_values + 1, sizeof *p->dptr);
  p->cdev = calloc(pl->n_values + 1, sizeof *p->cdev);
  p->ddt = calloc(pl->n_values + 1, sizeof *p->ddt);
  p->fdev = calloc(pl->n_values + 1, 1);
  if (!p->ops || !p->fz || !p->nstate || !p->skip || !p->run_act || !p->run_in_act ||
      !p->run_bias || !p->run_z ||
      !p->run_out || !p->dptr || !p->cdev || !p->ddt || !p->fdev) {
    ret = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  uint8_t *derived = shape_derived(pl);
  if (!derived) {
    ret = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    p->ops[i] = eng_cuda__find_op(n->op_type);
    // a node computed from constants and input shapes alone is folded on the
    // host for each signature and needs no kernel (check_folds re-checks)
    bool host = (pl->have_sig && pl->folded[i]) || (n->n_out > 0 && n->out[0] >= 0 && derived[n->out[0]]);
    if (!p->ops[i] && !host) {
      ret = err_set(e, ERR_UNIMPLEMENTED, "node '%s': op %s not yet supported on CUDA", n->name,
                    n->op_type);
      free(derived);
      goto fail;
    }
  }
  free(derived);
  if ((ret = CUDA_OK(e, cudaSetDevice(device))) != 0) goto fail;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    if (!p->ops[i]) continue;  // folded for the planned shapes: no kernel, no state
    if (p->ops[i]->init && (ret = p->ops[i]->init(pl, i, p->half, &p->nstate[i], e)) != 0) {
      err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
      goto fail;
    }
    if (p->ops[i]->flags & CUDA_OP_CUDNN) p->need_cudnn = 1;
  }
  find_fusions(p);
  if ((ret = eng_cuda__layout_alloc(&p->lay, pl->n_nodes, pl->n_values, e)) != 0) goto fail;
  p->layout_nhwc = want_nhwc(p, &p->layout_timed);
  p->layout_trial = -1;
  p->in_cap = calloc(pl->n_inputs + 1, sizeof *p->in_cap);
  p->in_bytes = calloc(pl->n_inputs + 1, sizeof *p->in_bytes);
  if (!p->in_cap || !p->in_bytes) {
    ret = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  p->fixed_in = pl->have_layout;  // the planned shapes are the largest ones
  for (size_t i = 0; i < pl->n_inputs && p->fixed_in; i++)
    p->in_cap[i] = eng_cuda__round_up(nbytes(&pl->cur[eng_graph_input_value(g, i)]));
  if ((ret = CUDA_OK(e, cudaSetDevice(device))) != 0) goto fail;
  for (int k = 0; k <= p->o.n_slots; k++) {
    if ((ret = CUDA_OK(e, cudaEventCreate(&p->ev_start[k]))) != 0) goto fail;
    if ((ret = CUDA_OK(e, cudaEventCreate(&p->ev_end[k]))) != 0) goto fail;
  }
  if ((ret = upload_consts(p, e)) != 0) goto fail;
  if (!p->o.no_gemm_autotune) {
    eng_gemm_tune_opts to = {.budget_ms = p->o.gemm_tune_budget_ms, .min_flops = p->o.gemm_tune_min_flops};
    if ((ret = eng_gemm_tuner_create(&p->tuner, &to, e)) != 0) goto fail;
  }
  for (int k = 0; k < p->o.n_slots; k++) {
    p->n_slots++;
    if ((ret = slot_create(p, &p->sl[k], e)) != 0) {
      err_prefix(e, "stream slot %d: ", k);
      goto fail;
    }
  }
  if ((ret = warm_up(p, e)) != 0) goto fail;
  *out = p;
  return 0;
fail:
  eng_cuda_plan_destroy(p);
  return ret;
}

void eng_cuda_plan_destroy(eng_cuda_plan *p) {
  if (!p) return;
  (void)cudaSetDevice(p->device);
  for (int k = 0; k < p->n_slots; k++) slot_destroy(&p->sl[k]);
  eng_gemm_tuner_destroy(p->tuner);  // after the slots' cuBLASLt objects that borrow it
  for (int k = 0; k <= ENG_CUDA_MAX_SLOTS; k++) {
    if (p->ev_start[k]) (void)cudaEventDestroy(p->ev_start[k]);
    if (p->ev_end[k]) (void)cudaEventDestroy(p->ev_end[k]);
  }
  for (size_t i = 0; p->nstate && i < p->pl->n_nodes; i++)
    if (p->nstate[i] && p->ops[i]->destroy) p->ops[i]->destroy(p->nstate[i]);
  // after the node states, which may point at the copy's derived weights
  if (p->wset) eng_cuda_weights_release(p->weights, p->wset);
  eng_cuda_weights_destroy(p->own_weights);
  eng_plan_destroy(p->pl);
  free(p->ops);
  free(p->fz);
  free(p->nstate);
  free(p->skip);
  free(p->run_act);
  free(p->run_in_act);
  free(p->run_bias);
  free(p->run_z);
  free(p->run_out);
  free(p->dptr);
  free(p->cdev);
  free(p->ddt);
  free(p->fdev);
  eng_cuda__layout_free(&p->lay);
  free(p->in_cap);
  free(p->in_bytes);
  free(p);
}

void *eng_cuda_plan_stage(eng_cuda_plan *p, int k, size_t i, size_t *cap) {
  *cap = 0;
  if (k < 0 || k >= p->n_slots || i >= p->pl->n_inputs || !p->fixed_in || !p->sl[k].pin_base) return NULL;
  const eng_io *io = eng_graph_input(p->pl->g, i);
  if (p->pl->cur[eng_graph_input_value(p->pl->g, i)].dt != io->dt) return NULL;  // converted at the edge
  *cap = p->in_cap[i];
  return p->sl[k].pin_base + p->sl[k].in_off[i];
}

int eng_cuda_plan_n_slots(const eng_cuda_plan *p) { return p->n_slots; }

uint64_t eng_cuda_plan_real_allocs(const eng_cuda_plan *p) {
  eng_cuda_plan_stats s;
  eng_cuda_plan_stats_get(p, &s);
  return s.real_allocs;
}

void eng_cuda_plan_stats_get(const eng_cuda_plan *p, eng_cuda_plan_stats *s) {
  memset(s, 0, sizeof *s);
  s->real_allocs = atomic_load(&p->allocs);
  s->device_bytes = atomic_load(&p->dev_bytes);
  s->pinned_bytes = atomic_load(&p->pin_bytes);
  s->weight_bytes = p->wset ? eng_cuda_wset_bytes(p->wset) : 0;
  s->weights_uploaded = p->weights_uploaded;
  s->weight_holders = p->wset ? eng_cuda_wset_holders(p->wset) : 0;
  s->fused_nodes = atomic_load(&p->fused);
  s->nhwc_nodes = atomic_load(&p->nhwc_nodes);
  s->relayouts = atomic_load(&p->relayouts);
  s->gemm_convs = atomic_load(&p->gemm_convs);
  s->gemm_tuned = atomic_load(&p->gemm_tuned);
  s->gemm_tune_improved = atomic_load(&p->gemm_tune_improved);
  s->gemm_tune_ns = atomic_load(&p->gemm_tune_ns);
  s->gemm_tune_passes = atomic_load(&p->gemm_tune_passes);
  s->gemm_first_ns = atomic_load(&p->gemm_first_ns);
  s->gemm_best_ns = atomic_load(&p->gemm_best_ns);
  s->graphs_captured = atomic_load(&p->graphs_captured);
  s->graph_launches = atomic_load(&p->graph_launches);
  s->launch_ns = atomic_load(&p->launch_ns);
  s->pre_ns = atomic_load(&p->pre_ns);
  s->stage_ns = atomic_load(&p->stage_ns);
  s->timed_layouts = p->n_picks;
  for (int i = 0; i < p->n_picks; i++) s->timed_nhwc += p->picks[i].nhwc;
  s->plain_launches = atomic_load(&p->plain_launches);
  s->busy_ns = atomic_load(&p->busy_ns);
  s->batches = atomic_load(&p->batches);
  s->graphs_disabled = atomic_load(&p->graphs_disabled);
  s->dev_seg_copies = atomic_load(&p->dev_seg_copies);
  s->peer_copies = atomic_load(&p->peer_copies);
}

int eng_cuda_input_takes_device(const eng_graph *g, size_t i) {
  if (i >= eng_graph_n_inputs(g)) return 0;
  dtype dt = eng_graph_input(g, i)->dt;
  // the types converted on the host at the edge (eng_plan__to_internal) and strings stay host-only
  return dtype_size(dt) > 0 && eng_ops_cpu_internal_dtype(dt) == dt;
}

size_t eng_cuda_plan_arena_bytes(const eng_cuda_plan *p) {
  return p->pl->have_layout ? p->pl->arena_need : 0;
}

// --- run

int eng_cuda_plan_submit(eng_cuda_plan *p, int k, const eng_tensor *inputs, size_t n_in, err *e) {
  return eng_cuda_plan_submit_segs(p, k, inputs, n_in, NULL, 0, e);
}

// The segments against this submit's inputs (after prepare: their shapes).
static int check_segs(eng_cuda_plan *p, const eng_dev_seg *segs, size_t n_segs, err *e) {
  const eng_plan *pl = p->pl;
  for (size_t i = 0; i < pl->n_inputs; i++) p->in_bytes[i] = nbytes(&pl->cur[eng_graph_input_value(pl->g, i)]);
  TRY(eng_dev_seg_check(segs, n_segs, p->in_bytes, pl->n_inputs, e));
  for (size_t k = 0; k < n_segs; k++) {
    const eng_io *io = eng_graph_input(pl->g, segs[k].input);
    if (!eng_cuda_input_takes_device(pl->g, segs[k].input))
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' (%s) is converted on the host: it cannot come from the device",
                     io->name, dtype_wire_name(io->dt));
  }
  return 0;
}

int eng_cuda_plan_submit_segs(eng_cuda_plan *p, int k, const eng_tensor *inputs, size_t n_in,
                              const eng_dev_seg *segs, size_t n_segs, err *e) {
  if (k < 0 || k >= p->n_slots) return err_set(e, ERR_INTERNAL, "no stream slot %d", k);
  slot *s = &p->sl[k];
  eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  uint64_t t_in = clock_mono_ns();
  CUDA_TRY(e, cudaSetDevice(p->device));
  TRY(eng_plan__prepare(pl, inputs, n_in, pl->n_outputs, e));
  if (n_segs) TRY(check_segs(p, segs, n_segs, e));
  TRY(check_folds(p, e));
  // a re-layout moves buffers: every slot's graphs of an older layout are stale
  p->epoch = pl->layouts;
  settle_fusions(p);
  for (size_t v = 0; v < pl->n_values; v++) p->ddt[v] = dev_dt(p, pl->cur[v].dt);
  if (p->layout_timed)
    p->layout_nhwc = p->layout_trial >= 0 ? p->layout_trial == 1 : pick_layout(p, batch_rows(p));
  eng_cuda__layout_settle(&p->lay, pl, p->ops, (const void *const *)p->nstate, p->skip, p->run_out,
                          p->run_z, p->ddt, p->layout_nhwc);
  settle_prologues(p);
  atomic_store(&p->nhwc_nodes, p->lay.n_nhwc);
  atomic_store(&p->relayouts, p->lay.n_conv);
  TRY(ensure_dev(p, s, &s->act, &s->act_base, &s->act_cap, pl->arena_need, e));
  mark_uploads(p);
  TRY(ensure_staging(p, s, e));
  for (size_t v = 0; v < pl->n_values; v++) {
    int r = pl->root[v];
    bool c = eng_graph_value(g, (size_t)r)->kind == ENG_VALUE_CONST;
    // folded values no kernel reads have no device copy
    p->dptr[v] = c ? p->cdev[r] : p->fdev[r] ? s->scr_base + s->fd_dev[r]
                 : pl->known[r] ? NULL : s->act_base + pl->off[r];
  }
  nvtxRangePushA("inferd stage inputs");
  uint64_t t_stage = clock_mono_ns();
  for (size_t i = 0; i < n_in; i++) {
    const eng_tensor *t = &pl->cur[eng_graph_input_value(g, i)];
    size_t n = numel(t);
    uint8_t *dst = s->pin_base + s->in_off[i];
    if (!n || inputs[i].data == dst) continue;  // assembled in place
    if (!n_segs || !eng_cuda_input_takes_device(g, i)) {
      eng_plan__to_internal(dst, &inputs[i], n);
      continue;
    }
    // no conversion here (takes_device): the host runs only, the segments' bytes are not the host's
    eng_seg_walk w;
    eng_copy_run r;
    eng_seg_walk_init(&w, segs, n_segs, i, nbytes(t));
    while (eng_seg_walk_next(&w, &r))
      if (!r.seg) memcpy(dst + r.offset, (const uint8_t *)inputs[i].data + r.offset, r.bytes);
  }
  for (size_t v = 0; v < pl->n_values; v++)
    if (p->fdev[v] && nbytes(&pl->cur[v])) memcpy(s->pin_base + s->fd_pin[v], pl->cur[v].data, nbytes(&pl->cur[v]));
  nvtxRangePop();
  atomic_fetch_add(&p->stage_ns, clock_mono_ns() - t_stage);
  for (size_t j = 0; j < pl->n_outputs; j++) s->outs[j] = pl->cur[eng_graph_output_value(g, j)];
  TRY(prepare_nodes(p, s, e));
  s->seq = p->submits++;
  int ri = (int)(s->seq % (uint64_t)(p->n_slots + 1));
  atomic_fetch_add(&p->pre_ns, clock_mono_ns() - t_in);
  CUDA_TRY(e, cudaEventRecord(p->ev_start[ri], s->ctx.stream));
  if (p->o.fault_at && p->submits == p->o.fault_at) TRY(eng_pk_fault_cuda(s->ctx.stream, e));
  s->segs = segs;
  s->n_segs = n_segs;
  int rc = launch(p, s, e);
  s->segs = NULL;  // the caller's; read only while launching
  s->n_segs = 0;
  if (rc) {
    // the slot stays usable: drain whatever got queued before the failure
    (void)cudaStreamSynchronize(s->ctx.stream);
    (void)cudaGetLastError();
    return rc;
  }
  CUDA_TRY(e, cudaEventRecord(p->ev_end[ri], s->ctx.stream));
  return 0;
}

// Device time of this batch not already counted for the previous one;
// returns the batch's own device time in ns.
static uint64_t account_busy(eng_cuda_plan *p, uint64_t seq) {
  int ri = (int)(seq % (uint64_t)(p->n_slots + 1));
  float ms = 0.0f;
  if (cudaEventElapsedTime(&ms, p->ev_start[ri], p->ev_end[ri]) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  double busy = ms;
  if (p->have_last_done && p->last_done_seq + 1 == seq) {
    int pi = (int)((seq - 1) % (uint64_t)(p->n_slots + 1));
    float gap = 0.0f;  // negative when this batch started before the last one ended
    if (cudaEventElapsedTime(&gap, p->ev_end[pi], p->ev_start[ri]) == cudaSuccess) {
      if (gap < 0) busy += gap;
    } else {
      (void)cudaGetLastError();
    }
  }
  if (busy > 0) atomic_fetch_add(&p->busy_ns, (uint64_t)(busy * 1e6));
  p->last_done_seq = seq;
  p->have_last_done = 1;
  return ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
}

int eng_cuda_plan_finish(eng_cuda_plan *p, int k, eng_tensor *outputs, size_t n_out,
                         uint64_t *device_ns, err *e) {
  if (k < 0 || k >= p->n_slots) return err_set(e, ERR_INTERNAL, "no stream slot %d", k);
  slot *s = &p->sl[k];
  const eng_plan *pl = p->pl;
  CUDA_TRY(e, cudaSetDevice(p->device));
  // wait first, whatever else is wrong: the slot must be idle when this
  // returns, or the next submit would stage its inputs into pinned memory
  // the batch still in flight copies its outputs over
  int ri = (int)(s->seq % (uint64_t)(p->n_slots + 1));
  CUDA_TRY(e, cudaEventSynchronize(p->ev_end[ri]));
  uint64_t ns = account_busy(p, s->seq);
  if (device_ns) *device_ns = ns;
  atomic_fetch_add(&p->batches, 1);
  if (outputs && n_out != pl->n_outputs)
    return err_set(e, ERR_INVALID_ARGUMENT, "%zu outputs requested, the model has %zu", n_out,
                   pl->n_outputs);
  if (!outputs) n_out = 0;  // wait only
  for (size_t j = 0; j < n_out; j++) {
    const eng_tensor *t = &s->outs[j];
    eng_tensor *o = &outputs[j];
    o->dt = eng_plan__out_dtype(pl, j);
    o->ndims = t->ndims;
    memcpy(o->dims, t->dims, sizeof o->dims);
    size_t n = numel(t);
    o->bytes = n * dtype_size(o->dt);
    o->data = s->pin_base + s->out_off[j];
    if (o->dt != t->dt) {
      eng_tensor src = *t;
      src.data = s->pin_base + s->out_off[j];
      o->data = s->pin_base + s->edge_off[j];
      if (n) eng_plan__to_edge(o->data, o->dt, &src, n);
    }
  }
  return 0;
}

int eng_cuda_plan_run(eng_cuda_plan *p, const eng_tensor *inputs, size_t n_in,
                      eng_tensor *outputs, size_t n_out, err *e) {
  TRY(eng_cuda_plan_submit(p, 0, inputs, n_in, e));
  return eng_cuda_plan_finish(p, 0, outputs, n_out, NULL, e);
}

const char *eng_precision_name(eng_precision prec) {
  switch (prec) {
    case ENG_PREC_FP32: return "fp32";
    case ENG_PREC_TF32: return "tf32";
    case ENG_PREC_FP16: return "fp16";
  }
  return "?";
}

int eng_precision_parse(const char *s, eng_precision *out) {
  static const eng_precision all[] = {ENG_PREC_FP32, ENG_PREC_TF32, ENG_PREC_FP16};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (s && strcasecmp(s, eng_precision_name(all[i])) == 0) {
      *out = all[i];
      return 0;
    }
  return -1;
}
