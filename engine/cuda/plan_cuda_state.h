// engine/cuda/plan_cuda_state.h: the CUDA plan's own state (struct
// eng_cuda_plan and its execution slots) and the functions its files share:
// plan_cuda.c (create, submit, finish), plan_cuda_fuse.c (each run's
// fusions) and plan_cuda_slot.c (a slot's memory, staging, enqueueing and
// graphs). Not a public header, and not the op families' either: they see a
// node's cuda_ctx (plan_cuda_internal.h), never the plan.
#ifndef INFERD_ENGINE_PLAN_CUDA_STATE_H
#define INFERD_ENGINE_PLAN_CUDA_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "engine/cpu/plan_internal.h"
#include "engine/cuda/cuda_gemm.h"
#include "engine/cuda/cuda_mem.h"
#include "engine/cuda/cuda_weights.h"
#include "engine/cuda/plan_cuda.h"
#include "engine/cuda/plan_cuda_host.h"
#include "engine/cuda/plan_cuda_internal.h"
#include "engine/dev_seg.h"
#include "kernels/base/err.h"

typedef struct gentry {
  uint64_t epoch;
  size_t n;
  int64_t *sig;
  cudaGraphExec_t exec;
  host_run *hrun;  // its host nodes' snapshot (plan_cuda_host.h), or NULL
} gentry;

typedef struct slot {
  cuda_ctx ctx;
  eng_cuda_arena *act;
  uint8_t *act_base;
  size_t act_cap;
  eng_cuda_arena *ws;  // the ops' workspace (cuda_ctx.ws), grown by eng_cuda__prepare_nodes
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
  size_t *hv_off, *hv32_off;            // per value a host node reads or writes: pinned copy as stored
                                        // on the device, its FP32 twin in FP16 plans (plan_cuda_host.c)
  host_run *hrun;                       // the snapshot the enqueue in progress fills (plan_cuda_host.h)
  host_run *hrun_plain;                 // the plain launches' snapshot
  host_run *hrun_tune;                  // the tuning passes' (cuda_gemm.h's dry runs)
  host_run *hrun_live;                  // the last launch's: finish reads its host nodes' errors
  int *oob_host, *oob_dev;              // per node: its out-of-range flag (cuda_ctx.oob), mapped pinned memory
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
  int real_rows, run_rows;  // this batch's rows, and the prepared size it runs at (more: padded)
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
  int *run_in_act;      // per node, this run: its prologue activation code (eng_cuda__settle_prologues)
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
  _Atomic uint64_t fused;                 // nodes the last run skipped as fused (plan_cuda_fuse.c)
  _Atomic uint64_t nhwc_nodes, relayouts;  // the last layout pass's (plan_cuda_layout.c)
  _Atomic uint64_t gemm_convs;             // the last eng_cuda__prepare_nodes' Convs on cuBLASLt
  eng_gemm_tuner *tuner;                   // shared by the slots' cuBLASLt objects; NULL: autotuning off
  _Atomic uint64_t gemm_tuned, gemm_tune_improved, gemm_tune_ns, gemm_tune_passes, gemm_first_ns, gemm_best_ns;
  _Atomic uint64_t dev_seg_copies, peer_copies;  // device segments copied in, those from another device
  // preparation (plan_cuda_prep.c): the sizes prepared, ascending; zeros for
  // its inputs while it lasts; serving once eng_cuda_plan_serve ran
  int *prepared;
  size_t n_prepared;
  void *zeros;
  size_t zeros_bytes;
  bool serving;
  bool pad;         // serving: unprepared sizes run padded
  bool pad_unsafe;  // an output without the batch dimension first at some prepared size
  eng_tensor *pad_in;  // per input: this submit's padded shape (the caller's data)
  _Atomic uint64_t made;  // op state made by a node's prepare (cuDNN plans), since create
  _Atomic uint64_t lazy_prepares, padded_batches, padded_rows;
  _Atomic uint64_t lazy_by[ENG_LAZY_CAUSES];
  _Atomic uint64_t stale_captures;  // graphs captured for a signature the slot had under an older layout
  // host fallback (plan_cuda_host.c over engine/cpu/plan_hostfb.c): nodes without a CUDA op run on the host
  eng_hostfb *hf;
};


static inline size_t numel(const eng_tensor *t) { return (size_t)eng_numel(t->ndims, t->dims); }
static inline size_t nbytes(const eng_tensor *t) { return numel(t) * dtype_size(t->dt); }

// Stored type of a value on the device: FP16 plans keep FP32 values in FP16.
static inline dtype dev_dt(const eng_cuda_plan *p, dtype t) { return p->half && t == DT_FP32 ? DT_FP16 : t; }

// --- fusions (plan_cuda_fuse.c)

// Each node's fusion candidate from its op's fuse hook (p->fz), once at create.
void eng_cuda__find_fusions(eng_cuda_plan *p);
// This run's fusions (p->skip, run_act, run_bias, run_z, run_out), after the planner's layout.
void eng_cuda__settle_fusions(eng_cuda_plan *p);
// This run's prologues (p->run_in_act, more of p->skip), after the NHWC layout.
void eng_cuda__settle_prologues(eng_cuda_plan *p);
// Every node not folded has a CUDA op, and no graph output is computed on the host.
int eng_cuda__check_folds(const eng_cuda_plan *p, err *e);

// --- preparation (plan_cuda_prep.c)

// eng_cuda_plan_create (defined there, after its warm-up) up to the warm-up: plan_cuda.c.
int eng_cuda__create(const eng_graph *g, int max_batch, int device, const eng_cuda_opts *opts, eng_cuda_plan **out,
                     err *e);
// What a submit captures, makes or tunes: a sum that moves with each.
static inline uint64_t eng_cuda__prep_events(eng_cuda_plan *p) {
  return atomic_load(&p->graphs_captured) + atomic_load(&p->gemm_tune_passes) + atomic_load(&p->gemm_tuned) +
         atomic_load(&p->made);
}

// --- slots (plan_cuda_slot.c)

// A slot's stream, cuBLASLt object and bookkeeping; its pools too when every shape is known.
int eng_cuda__slot_create(eng_cuda_plan *p, slot *s, err *e);
void eng_cuda__slot_destroy(slot *s);
// One device region of at least need bytes in *a (its slot's graphs dropped when it moves).
int eng_cuda__ensure_dev(eng_cuda_plan *p, slot *s, eng_cuda_arena **a, uint8_t **base, size_t *cap,
                         size_t need, err *e);
// This run's folded values that a kernel reads as device data (p->fdev).
void eng_cuda__mark_uploads(eng_cuda_plan *p);
// The slot's staging and scratch offsets for this run's shapes; grows the pools.
int eng_cuda__ensure_staging(eng_cuda_plan *p, slot *s, err *e);
// The constants' device copy (the model's weight store), at create.
int eng_cuda__upload_consts(eng_cuda_plan *p, err *e);
// Every stateful node's prepare for this run's shapes; the slot's workspace grown to fit.
int eng_cuda__prepare_nodes(eng_cuda_plan *p, slot *s, err *e);
// Enqueues the staged batch on the slot's stream: a captured graph, or plainly.
int eng_cuda__launch(eng_cuda_plan *p, slot *s, err *e);

#endif
