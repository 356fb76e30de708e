// engine/cuda/plan_cuda.h: the same execution plan as engine/cpu/plan.h, run on a
// CUDA device. The planning (node order, shapes, dtypes, arena layout,
// aliases, constants) is the CPU plan's own (engine/cpu/plan_internal.h); this
// backend places the arena in device memory, uploads the constants once and
// runs every node on a stream.
//
// Slots: a plan has n_slots execution slots, each with its own stream,
// activation arena, pinned staging, cuBLASLt workspace and CUDA graphs, so
// one thread can submit batch n+1 on one slot while batch n still runs on
// another: the copy-in of one overlaps the compute and copy-back of the
// other. submit stages and enqueues and returns; finish waits for that
// slot's batch and hands out its outputs.
//
// Memory is sized at create for max_batch rows: per slot one device arena
// for the activations, one pinned pool that stages inputs and outputs and
// (FP16) one device scratch; the constants once per device for every plan
// of the graph given the same store (eng_cuda_opts.weights). A run within the
// planned shapes allocates nothing (no cudaMalloc/cudaHostAlloc/cudaFree);
// a run whose shapes need more re-plans and grows that slot's pools, which
// the stats' real_allocs counts.
//
// CUDA graphs: each slot captures the whole batch (copy-in, every node,
// copy-back) once per input-shape signature and replays it after; the batch
// sizes in opts.warm are captured at create. A graph holds the slot's
// pointers, so a slot's graphs are dropped when its pools grow.
//
// Preparation (issue 32): a batch size is prepared when every slot has run
// it once (zeros in): its graphs captured, its cuDNN plans made, its GEMMs
// tuned. Create prepares opts.warm; with opts.prepare_later it only times
// the layouts there and the caller prepares size by size
// (eng_cuda_plan_prepare, engine/batch_sizes.h choosing which within the
// load's budget) before eng_cuda_plan_serve. From then on whatever still
// gets captured or tuned on a submit counts as a lazy prepare (stats), and
// with padding on, a batch whose size was not prepared runs at the next
// prepared size: its rows staged, the slot's staging holding earlier
// batches' rows (or the warm-up's zeros) in the rest, and only its rows
// handed out. Padding needs every output to carry the batch dimension first
// (checked at every prepared size) and rows that do not mix, as dynamic
// batching itself does. A batch with device segments has graphs of its own,
// not prepared: its first one per size is captured lazily.
//
// Precision: FP32 (TF32 off), TF32 (FP32 storage, TF32 tensor-core
// products) or FP16 (every FP32 value, constants included, stored and
// computed in FP16 with FP32 accumulation; weights converted once at create;
// FP32 inputs and outputs converted on the device at the edges). An op with
// no FP16 kernel runs in FP32 on converted copies.
//
// Threads: submit on one thread at a time; finish of a slot on any one
// thread, after that slot's submit returned and before its next submit.
// Any number of plans (on any devices) may share one graph.
#ifndef INFERD_ENGINE_PLAN_CUDA_H
#define INFERD_ENGINE_PLAN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "engine/batch_sizes.h"
#include "engine/dev_seg.h"
#include "engine/graph/graph.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_cuda_plan eng_cuda_plan;

typedef enum eng_precision {
  ENG_PREC_FP32 = 0,
  ENG_PREC_TF32 = 1,
  ENG_PREC_FP16 = 2,
} eng_precision;

#define ENG_CUDA_MAX_SLOTS 4

// ENG_CUDA_LAYOUT_AUTO: NHWC regions around convolutions in FP16 and TF32
// plans (tensor cores); in strict FP32 each warmed batch size is run both
// ways at create and keeps the faster (NCHW unless NHWC is 3% faster; other
// sizes follow the nearest warmed one; NCHW without warming). The others
// force one.
typedef enum eng_cuda_layout {
  ENG_CUDA_LAYOUT_AUTO = 0,
  ENG_CUDA_LAYOUT_NCHW,
  ENG_CUDA_LAYOUT_NHWC,
} eng_cuda_layout;

typedef struct eng_cuda_opts {
  eng_precision precision;
  int n_slots;      // 1..ENG_CUDA_MAX_SLOTS (0: 2)
  int no_graphs;    // 1: plain launches only
  int graph_cap;    // graphs kept per slot (0: 64); beyond it, plain launches
  const int *warm;  // batch sizes to capture (and tune) at create, static shapes only
  size_t n_warm;
  // 1: create times the layouts at opts.warm's sizes and prepares nothing:
  // the caller prepares (eng_cuda_plan_prepare) and then calls eng_cuda_plan_serve
  int prepare_later;
  uint64_t fault_at;  // test hook: the Nth submit (1-based) fails with a real CUDA launch error
  int layout_flip;    // test hook: a timed layout (FP32, AUTO) picks NHWC at every second warmed batch size, untimed
  eng_cuda_layout layout;  // where convolutions' activations are kept NHWC (AUTO in FP32: timed per warmed batch size)
  int conv_timed;          // 1: each cuDNN candidate timed, fastest kept (slower load); 0: cuDNN's heuristic pick
  int no_conv_gemm;        // 1: 1x1 stride-1 Convs on NHWC activations stay on cuDNN (0: cuBLASLt GEMMs)
  // cuBLASLt autotuning (cuda_gemm.h): each GEMM shape's algorithm timed among the heuristic's
  // candidates once per plan, before any graph captures it (a tuning pass outside the capture
  // when a capture meets an untuned shape). 1: off, cuBLASLt's first heuristic answer.
  int no_gemm_autotune;
  // 1: cuBLASLt algorithms without thread-block clusters only (eng_gemm_lt_set_no_clusters: a GPU
  // time-sliced with other processes)
  int no_gemm_clusters;
  int gemm_tune_budget_ms;  // wall time per shape (0: cuda_gemm's default, 200 ms)
  double gemm_tune_min_flops;  // smaller products untimed (0: cuda_gemm's default, 2^24; 1: time all)
  // Where the constants live on the device (engine/cuda/cuda_weights.h; borrowed, made for this graph, outliving
  // the plan): plans of one graph given one store share one copy per device and precision. NULL: the plan
  // uploads a copy of its own.
  struct eng_cuda_weights *weights;
} eng_cuda_opts;

// max_batch as eng_plan_create. device: a runtime ordinal (eng_cuda_devices).
// opts NULL: FP32, 2 slots, graphs on, nothing warmed. A node whose op has no
// CUDA implementation (or whose CUDA path refuses its mode at create) runs on
// the host inside the plan (engine/cuda/plan_cuda_host.h: host fallback);
// only a node no backend runs fails (ERR_UNIMPLEMENTED). No usable device:
// ERR_UNAVAILABLE; out of device memory: ERR_RESOURCE_EXHAUSTED naming the
// size. The plan borrows g.
int eng_cuda_plan_create(const eng_graph *g, int max_batch, int device, const eng_cuda_opts *opts,
                         eng_cuda_plan **out, err *e);
void eng_cuda_plan_destroy(eng_cuda_plan *p);
int eng_cuda_plan_n_slots(const eng_cuda_plan *p);

// Host fallback: the nodes of this plan that run on the host (no CUDA path
// for their op, type or mode), found at create; and the k-th one's line for
// the load log, "node 'X' (op_type 'DFT'): no CUDA path, runs on the host
// (N bytes in, M out per batch)" (borrowed, valid until destroy; NULL past
// the count).
size_t eng_cuda_plan_n_host_nodes(const eng_cuda_plan *p);
const char *eng_cuda_plan_host_node(const eng_cuda_plan *p, size_t k);

// Validates and stages host inputs (declared dtypes; FP16/BF16/FP64 converted
// at the edge) into slot's pinned memory and enqueues the batch on its
// stream. The inputs may be reused when it returns. The slot must be idle.
// A CUDA failure returns ERR_INTERNAL; the slot is idle again afterwards.
int eng_cuda_plan_submit(eng_cuda_plan *p, int slot, const eng_tensor *inputs, size_t n_in,
                         err *e);
// eng_cuda_plan_submit where byte ranges of the inputs live on a GPU
// (device segments, engine/dev_seg.h; seg.input indexes `inputs`, sorted
// and within each input's bytes): on the slot's stream, ahead of the batch's
// graph, each segment is copied device to device (from another device with
// a peer copy) into the input's device buffer and the host runs around it
// host to device; the host bytes of the segments' ranges are not read. A
// batch with segments runs a graph of its own (captured once per shape)
// whose copy-in happened before it. The segments' memory must stay as it
// is until finish returns. INVALID_ARGUMENT for segments that do not fit
// their inputs or name an input eng_cuda_input_takes_device refuses.
int eng_cuda_plan_submit_segs(eng_cuda_plan *p, int slot, const eng_tensor *inputs, size_t n_in,
                              const eng_dev_seg *segs, size_t n_segs, err *e);
// 1 when input i (graph order) of plans of g may come as device segments:
// not for the types converted on the host at the edge (FP16, BF16, FP64)
// nor strings. Depends on the graph only.
int eng_cuda_input_takes_device(const eng_graph *g, size_t i);

// Where input i (graph order) of slot's next batch may be assembled in
// place: pinned memory of *cap bytes that submit then reads without a copy
// (pass a tensor whose data is this pointer). NULL where the model's shapes
// are not fixed at create or the input is converted at the edge. Valid
// while the slot is idle.
void *eng_cuda_plan_stage(eng_cuda_plan *p, int slot, size_t i, size_t *cap);

// Waits for slot's batch; outputs get declared dtype, shape and a pointer
// into the slot's pinned memory, valid until the slot's next submit
// (outputs NULL: wait only). A failure on the device returns ERR_INTERNAL.
// The slot is idle afterwards.
// device_ns (may be NULL): the batch's device time, its first copy-in to
// its last copy-back, from CUDA events.
int eng_cuda_plan_finish(eng_cuda_plan *p, int slot, eng_tensor *outputs, size_t n_out,
                         uint64_t *device_ns, err *e);

// 1 when slot's batch has ended on the device (or cannot be waited for:
// finish then says why), 0 while it runs. Never blocks.
int eng_cuda_plan_poll(eng_cuda_plan *p, int slot);

// submit + finish on slot 0 (for tests and single-stream callers).
int eng_cuda_plan_run(eng_cuda_plan *p, const eng_tensor *inputs, size_t n_in,
                      eng_tensor *outputs, size_t n_out, err *e);

// Prepares batch size `rows` (plan_cuda.h's top): every slot runs it once,
// zeros in. *ns (may be NULL): the wall time it took. A model that refuses
// zeros (value-dependent shapes) leaves the size unprepared and returns 0;
// device trouble fails. Before eng_cuda_plan_serve, on the submitting thread.
int eng_cuda_plan_prepare(eng_cuda_plan *p, int rows, uint64_t *ns, err *e);
// Preparation is over: captures and tuning from here count as lazy; pad 1:
// batches of sizes not prepared run padded to the next prepared size (where
// the model allows: eng_cuda_plan_stats.pad). The preparation's runs leave
// the busy, batch and fault-injection counts.
void eng_cuda_plan_serve(eng_cuda_plan *p, int pad);
// The prepared sizes ascending (borrowed, valid until destroy), their count in *n.
const int *eng_cuda_plan_prepared(const eng_cuda_plan *p, size_t *n);

typedef struct eng_cuda_plan_stats {
  uint64_t real_allocs;      // cudaMalloc + cudaHostAlloc calls since create (create's own included)
  uint64_t graphs_captured;  // graphs instantiated since create
  uint64_t graph_launches, plain_launches;
  int timed_layouts;         // warmed batch sizes whose layout was timed (FP32, AUTO)
  int timed_nhwc;            // of those, the ones that keep NHWC
  uint64_t launch_ns;        // host time inside cudaGraphLaunch, summed over graph_launches
  uint64_t pre_ns;           // host time of submits before their batch's start event (setup, staging,
                             // node preparation), summed over submits
  uint64_t stage_ns;         // of that, copying (converting) the inputs into pinned staging
  uint64_t busy_ns;          // device time with a batch of this plan in flight (union over slots)
  uint64_t batches;          // batches finished successfully
  int graphs_disabled;       // capture failed once: plain launches from then on
  uint64_t device_bytes;     // device memory this plan holds alone: arenas, scratch, cuBLASLt workspaces
  uint64_t pinned_bytes;     // pinned host staging held
  uint64_t weight_bytes;     // the device's copy of the weights this plan uses (shared: see weight_holders)
  int weights_uploaded;      // 1: this plan uploaded that copy; 0: it found it there
  int weight_holders;        // plans holding that copy now
  uint64_t fused_nodes;      // nodes run inside another's epilogue (bias, residual Add, activation), last submit
  uint64_t nhwc_nodes;       // nodes run on NHWC activations, last submit
  uint64_t relayouts;        // operands and outputs transposed between layouts, last submit
  uint64_t gemm_convs;       // Convs run as cuBLASLt GEMMs (1x1 kernel, 1x1 input), last submit
  // cuBLASLt autotuning since create (0 when off)
  uint64_t gemm_tuned;          // GEMM shapes timed
  uint64_t gemm_tune_improved;  // of them, shapes where another than the heuristic's first answer won
  uint64_t gemm_tune_ns;        // wall time spent timing
  uint64_t gemm_tune_passes;    // extra dry runs of a batch to time shapes a capture met untuned
  // sums over the timed shapes of one run's device time (ns): the heuristic's first answer and
  // the kept one; first / best is the GEMMs' estimated speed-up
  uint64_t gemm_first_ns, gemm_best_ns;
  int prepared_sizes;        // batch sizes prepared (eng_cuda_plan_prepare)
  int pad;                   // batches of other sizes run padded (eng_cuda_plan_serve)
  uint64_t lazy_prepares;    // submits after serve that captured a graph, made a cuDNN plan or tuned a GEMM
  uint64_t lazy_by_cause[ENG_LAZY_CAUSES];  // those submits by why
  uint64_t padded_batches;   // batches run padded to a prepared size, and the rows added to them
  uint64_t padded_rows;
  uint64_t dev_seg_copies;   // device segments copied in (eng_cuda_plan_submit_segs)
  uint64_t peer_copies;      // of them, copied from another device
} eng_cuda_plan_stats;

// Safe from any thread while submit/finish run (counters are atomic).
void eng_cuda_plan_stats_get(const eng_cuda_plan *p, eng_cuda_plan_stats *s);
size_t eng_cuda_plan_arena_bytes(const eng_cuda_plan *p);
uint64_t eng_cuda_plan_real_allocs(const eng_cuda_plan *p);

const char *eng_precision_name(eng_precision prec);
// "fp32" | "tf32" | "fp16" (case-insensitive) -> precision; -1 if unknown.
int eng_precision_parse(const char *s, eng_precision *out);

#ifdef __cplusplus
}
#endif

#endif
