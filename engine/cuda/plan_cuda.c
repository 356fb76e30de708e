// engine/cuda/plan_cuda.c: executes the CPU planner's plan (plan_internal.h) on a
// CUDA device. Create looks each node's op up in the families' CUDA tables
// (engine/ops/families.h, eng_cuda__find_op), makes the ops' state, uploads
// the constants once per device (plan_cuda_prep.c then warms the slots and
// prepares batch sizes); submit plans this
// run's shapes, settles its fusions (plan_cuda_fuse.c) and NHWC regions
// (plan_cuda_layout.c), stages the inputs and launches the batch on a slot
// (plan_cuda_slot.c); finish waits for that slot and hands its outputs out.
// Values get device pointers from the layout (root + offset in a slot's
// device arena); conversions of declared FP16/BF16/FP64 edges happen on the
// host, in the staging buffers, with the CPU plan's own functions.
// plan_cuda_state.h holds the state these files share.
//
// Op families with state (the conv family's cuDNN plans) plug in through
// plan_cuda_internal.h: per-node init/prepare/destroy hooks and a per-slot
// cuDNN handle and workspace, sized before launch, never inside a capture.
#include "engine/cuda/plan_cuda.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nvtx3/nvToolsExt.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/plan_cuda_k.h"
#include "engine/cuda/plan_cuda_state.h"
#include "kernels/base/clock.h"

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

// eng_cuda_plan_create up to its warm-up (plan_cuda_prep.c's create does that after).
int eng_cuda__create(const eng_graph *g, int max_batch, int device, const eng_cuda_opts *opts, eng_cuda_plan **out,
                     err *e) {
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
  // the inits below decide by element type, also where shapes are known per request only
  eng_plan__probe_types(p->pl);
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
  uint8_t *derived = eng_hostfb_derived(pl);
  if (!derived) {
    ret = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  // a node computed from constants and input shapes alone is folded on the
  // host for each signature and needs no kernel; any other node without a
  // CUDA op runs on the host inside the plan (plan_cuda_host.h)
  for (size_t i = 0; i < pl->n_nodes; i++) p->ops[i] = eng_cuda__find_op(eng_graph_node(g, i)->op_type);
  // per node: why its CUDA path refused it at init (it then runs on the host)
  char **why = calloc(pl->n_nodes + 1, sizeof *why);
  if (!why) {
    free(derived);
    ret = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  if ((ret = CUDA_OK(e, cudaSetDevice(device))) != 0) goto fail_why;
  if ((ret = eng_cuda__init_ops(pl, p->half, p->ops, p->nstate, why, e)) != 0) goto fail_why;
  for (size_t i = 0; i < pl->n_nodes; i++)
    if (p->ops[i] && (p->ops[i]->flags & CUDA_OP_CUDNN)) p->need_cudnn = 1;
  ret = eng_cuda__host_plan(p, derived, why, e);
fail_why:
  for (size_t i = 0; i < pl->n_nodes; i++) free(why[i]);
  free(why);
  free(derived);
  if (ret) goto fail;
  eng_cuda__find_fusions(p);
  if ((ret = eng_cuda__layout_alloc(&p->lay, pl->n_nodes, pl->n_values, e)) != 0) goto fail;
  p->layout_nhwc = want_nhwc(p, &p->layout_timed);
  p->layout_trial = -1;
  p->in_cap = calloc(pl->n_inputs + 1, sizeof *p->in_cap);
  p->in_bytes = calloc(pl->n_inputs + 1, sizeof *p->in_bytes);
  p->pad_in = calloc(pl->n_inputs + 1, sizeof *p->pad_in);
  if (!p->in_cap || !p->in_bytes || !p->pad_in) {
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
  if ((ret = eng_cuda__upload_consts(p, e)) != 0) goto fail;
  if (!p->o.no_gemm_autotune) {
    eng_gemm_tune_opts to = {.budget_ms = p->o.gemm_tune_budget_ms, .min_flops = p->o.gemm_tune_min_flops};
    if ((ret = eng_gemm_tuner_create(&p->tuner, &to, e)) != 0) goto fail;
  }
  for (int k = 0; k < p->o.n_slots; k++) {
    p->n_slots++;
    if ((ret = eng_cuda__slot_create(p, &p->sl[k], e)) != 0) {
      err_prefix(e, "stream slot %d: ", k);
      goto fail;
    }
  }
  *out = p;
  return 0;
fail:
  eng_cuda_plan_destroy(p);
  return ret;
}

void eng_cuda_plan_destroy(eng_cuda_plan *p) {
  if (!p) return;
  (void)cudaSetDevice(p->device);
  for (int k = 0; k < p->n_slots; k++) eng_cuda__slot_destroy(&p->sl[k]);
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
  eng_cuda__host_free(p);
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
  free(p->pad_in);
  free(p->prepared);
  free(p->zeros);
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
  s->prepared_sizes = (int)p->n_prepared;
  s->pad = p->pad;
  s->lazy_prepares = atomic_load(&p->lazy_prepares);
  for (int c = 0; c < ENG_LAZY_CAUSES; c++) s->lazy_by_cause[c] = atomic_load(&p->lazy_by[c]);
  s->padded_batches = atomic_load(&p->padded_batches);
  s->padded_rows = atomic_load(&p->padded_rows);
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

// Bytes of input t's rows the caller sent: all of them, unless the batch
// runs padded (its first dim run rows, the caller's real).
static size_t real_bytes(const eng_tensor *t, int real, int run) {
  return real == run ? nbytes(t) : nbytes(t) / (size_t)run * (size_t)real;
}

// The segments against this submit's inputs (after prepare: their shapes; a
// padded batch's segments cover its own rows).
static int check_segs(eng_cuda_plan *p, const slot *s, const eng_dev_seg *segs, size_t n_segs, err *e) {
  const eng_plan *pl = p->pl;
  for (size_t i = 0; i < pl->n_inputs; i++)
    p->in_bytes[i] = real_bytes(&pl->cur[eng_graph_input_value(pl->g, i)], s->real_rows, s->run_rows);
  TRY(eng_dev_seg_check(segs, n_segs, p->in_bytes, pl->n_inputs, e));
  for (size_t k = 0; k < n_segs; k++) {
    const eng_io *io = eng_graph_input(pl->g, segs[k].input);
    // its bytes decide shapes: read on the host while planning, before any copy-in
    if (pl->val_in[segs[k].input])
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s' is a shape parameter read on the host: it cannot come from device memory", io->name);
    if (!eng_cuda_input_takes_device(pl->g, segs[k].input))
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' (%s) is converted on the host: it cannot come from the device",
                     io->name, dtype_wire_name(io->dt));
  }
  return 0;
}

// The prepared size a batch of `rows` runs at: its own, or (padding on) the
// next prepared one, with p->pad_in the inputs' padded shapes; every input
// must carry the batch first.
static int run_rows(eng_cuda_plan *p, const eng_tensor *inputs, size_t n_in, int rows) {
  if (!p->pad || rows < 1 || n_in != p->pl->n_inputs) return rows;
  size_t k = 0, hi = p->n_prepared;  // the first prepared size >= rows
  while (k < hi) {
    size_t mid = (k + hi) / 2;
    if (p->prepared[mid] < rows) k = mid + 1;
    else hi = mid;
  }
  if (k == p->n_prepared || p->prepared[k] == rows) return rows;  // beyond the largest: as it is
  int run = p->prepared[k];
  for (size_t i = 0; i < n_in; i++) {
    if (inputs[i].ndims < 1 || inputs[i].dims[0] != rows) return rows;
    p->pad_in[i] = inputs[i];
    p->pad_in[i].dims[0] = run;
    p->pad_in[i].bytes = nbytes(&p->pad_in[i]);
  }
  return run;
}

int eng_cuda_plan_submit_segs(eng_cuda_plan *p, int k, const eng_tensor *inputs, size_t n_in,
                              const eng_dev_seg *segs, size_t n_segs, err *e) {
  if (k < 0 || k >= p->n_slots) return err_set(e, ERR_INTERNAL, "no stream slot %d", k);
  slot *s = &p->sl[k];
  eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  uint64_t t_in = clock_mono_ns();
  uint64_t prep0 = eng_cuda__prep_events(p);
  uint64_t graphs0 = atomic_load(&p->graphs_captured), stale0 = atomic_load(&p->stale_captures);
  uint64_t gemm0 = atomic_load(&p->gemm_tune_passes) + atomic_load(&p->gemm_tuned), made0 = atomic_load(&p->made);
  CUDA_TRY(e, cudaSetDevice(p->device));
  int rows = pl->max_batch > 0 && n_in > 0 && inputs[0].ndims > 0 ? (int)inputs[0].dims[0] : 0;
  s->real_rows = s->run_rows = rows;
  if (p->serving) s->run_rows = run_rows(p, inputs, n_in, rows);
  TRY(eng_plan__prepare(pl, s->run_rows != rows ? p->pad_in : inputs, n_in, pl->n_outputs, e));
  if (n_segs) TRY(check_segs(p, s, segs, n_segs, e));
  TRY(eng_cuda__check_folds(p, e));
  // a re-layout moves buffers: every slot's graphs of an older layout are stale
  p->epoch = pl->layouts;
  eng_cuda__settle_fusions(p);
  for (size_t v = 0; v < pl->n_values; v++) p->ddt[v] = dev_dt(p, pl->cur[v].dt);
  if (p->layout_timed)
    p->layout_nhwc = p->layout_trial >= 0 ? p->layout_trial == 1 : pick_layout(p, batch_rows(p));
  eng_cuda__layout_settle(&p->lay, pl, p->ops, (const void *const *)p->nstate, p->skip, p->run_out,
                          p->run_z, p->ddt, p->layout_nhwc);
  eng_cuda__settle_prologues(p);
  atomic_store(&p->nhwc_nodes, p->lay.n_nhwc);
  atomic_store(&p->relayouts, p->lay.n_conv);
  TRY(eng_cuda__ensure_dev(p, s, &s->act, &s->act_base, &s->act_cap, pl->arena_need, e));
  eng_cuda__mark_uploads(p);
  TRY(eng_cuda__ensure_staging(p, s, e));
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
    // a padded batch stages its own rows; the rest of the staging keeps what it held
    size_t n = s->run_rows == s->real_rows ? numel(t) : numel(t) / (size_t)s->run_rows * (size_t)s->real_rows;
    uint8_t *dst = s->pin_base + s->in_off[i];
    // a value input's bytes are the plan's host copy (plan_values.c); kernels
    // that read it as data get it as a folded value (fdev)
    if (!n || inputs[i].data == dst || pl->val_in[i]) continue;  // assembled in place
    if (!n_segs || !eng_cuda_input_takes_device(g, i)) {
      eng_plan__to_internal(dst, &inputs[i], n);
      continue;
    }
    // no conversion here (takes_device): the host runs only, the segments' bytes are not the host's
    eng_seg_walk w;
    eng_copy_run r;
    eng_seg_walk_init(&w, segs, n_segs, i, real_bytes(t, s->real_rows, s->run_rows));
    while (eng_seg_walk_next(&w, &r))
      if (!r.seg) memcpy(dst + r.offset, (const uint8_t *)inputs[i].data + r.offset, r.bytes);
  }
  for (size_t v = 0; v < pl->n_values; v++)
    if (p->fdev[v] && nbytes(&pl->cur[v])) memcpy(s->pin_base + s->fd_pin[v], pl->cur[v].data, nbytes(&pl->cur[v]));
  eng_cuda__host_stage(p, s);  // folded values the host nodes read
  nvtxRangePop();
  atomic_fetch_add(&p->stage_ns, clock_mono_ns() - t_stage);
  for (size_t j = 0; j < pl->n_outputs; j++) s->outs[j] = pl->cur[eng_graph_output_value(g, j)];
  TRY(eng_cuda__prepare_nodes(p, s, e));
  s->seq = p->submits++;
  int ri = (int)(s->seq % (uint64_t)(p->n_slots + 1));
  atomic_fetch_add(&p->pre_ns, clock_mono_ns() - t_in);
  CUDA_TRY(e, cudaEventRecord(p->ev_start[ri], s->ctx.stream));
  if (p->serving && p->o.fault_at && p->submits == p->o.fault_at) TRY(eng_pk_fault_cuda(s->ctx.stream, e));
  s->segs = segs;
  s->n_segs = n_segs;
  int rc = eng_cuda__launch(p, s, e);
  s->segs = NULL;  // the caller's; read only while launching
  s->n_segs = 0;
  if (rc) {
    // the slot stays usable: drain whatever got queued before the failure
    (void)cudaStreamSynchronize(s->ctx.stream);
    (void)cudaGetLastError();
    return rc;
  }
  CUDA_TRY(e, cudaEventRecord(p->ev_end[ri], s->ctx.stream));
  if (p->serving && eng_cuda__prep_events(p) != prep0) {
    atomic_fetch_add(&p->lazy_prepares, 1);
    if (atomic_load(&p->stale_captures) != stale0)
      atomic_fetch_add(&p->lazy_by[ENG_LAZY_STALE_GRAPH], 1);
    else if (atomic_load(&p->graphs_captured) != graphs0)
      atomic_fetch_add(&p->lazy_by[ENG_LAZY_GRAPH], 1);
    if (atomic_load(&p->gemm_tune_passes) + atomic_load(&p->gemm_tuned) != gemm0)
      atomic_fetch_add(&p->lazy_by[ENG_LAZY_GEMM], 1);
    if (atomic_load(&p->made) != made0) atomic_fetch_add(&p->lazy_by[ENG_LAZY_CUDNN], 1);
  }
  if (s->run_rows != s->real_rows) {
    atomic_fetch_add(&p->padded_batches, 1);
    atomic_fetch_add(&p->padded_rows, (uint64_t)(s->run_rows - s->real_rows));
  }
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

int eng_cuda_plan_poll(eng_cuda_plan *p, int k) {
  if (k < 0 || k >= p->n_slots || cudaSetDevice(p->device) != cudaSuccess) return 1;  // finish says what is wrong
  int ri = (int)(p->sl[k].seq % (uint64_t)(p->n_slots + 1));
  cudaError_t rc = cudaEventQuery(p->ev_end[ri]);
  if (rc == cudaErrorNotReady) return 0;
  if (rc != cudaSuccess) cudaGetLastError();  // not sticky here; finish's synchronize reports it
  return 1;
}

// A kernel met an index out of range (cuda_ctx.oob): the batch fails as the CPU path's would, naming
// the first such node; every flag is cleared for the next batch.
static int oob_check(eng_cuda_plan *p, slot *s, err *e) {
  if (!s->oob_host) return 0;
  size_t bad = p->pl->n_nodes;
  for (size_t i = 0; i < p->pl->n_nodes; i++)
    if (s->oob_host[i]) {
      if (bad == p->pl->n_nodes) bad = i;
      s->oob_host[i] = 0;
    }
  if (bad == p->pl->n_nodes) return 0;
  const eng_node *n = eng_graph_node(p->pl->g, bad);
  return err_set(e, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s'): an index is out of range", n->name, n->op_type);
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
  // a CPU kernel of a host node failed (bad indices...): the batch fails with its message
  TRY(oob_check(p, s, e));  // first: it clears the flags for the next batch
  TRY(eng_cuda__host_run_check(s->hrun_live, e));
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
    if (s->run_rows != s->real_rows && t->ndims > 0 && t->dims[0] == s->run_rows) {  // padded: its own rows
      o->dims[0] = s->real_rows;
      n = n / (size_t)s->run_rows * (size_t)s->real_rows;
    }
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
