// engine/cpu/plan_internal.h: the planner's analysis, shared by the CPU plan
// (plan.c) and the CUDA plan (plan_cuda.c) so both execute one node order,
// one set of inferred shapes and dtypes and one arena layout (roots, offsets,
// aliases, constants). Not a public header: only engine/ backends include it.
#ifndef INFERD_ENGINE_PLAN_INTERNAL_H
#define INFERD_ENGINE_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/graph/graph.h"
#include "engine/ops/ops.h"
#include "engine/cpu/plan.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// eng_plan.fuse_on bits: the node's chain (its Add, if any) is fused; its
// activation too (an activation whose parameters are unknown is not).
enum { FUSE_ON = 1, FUSE_ACT_ON = 2 };

struct eng_plan {
  const eng_graph *g;
  int max_batch;
  int host_arena;  // 1: the layout's arena is host memory this plan owns (the CPU plan)
  size_t n_nodes, n_values, n_inputs, n_outputs;
  const eng_op_def **defs;
  eng_op_params *params;
  void **op_state;     // per node: a stateful op's cache (eng_op_state.node)
  eng_op_ctx *op_ctx;  // shared by the stateful ops; NULL until one needs it
  eng_tensor *cur;  // per value: this run's type, shape and data pointer
  eng_tensor *tin, *tout;  // scratch for one node's operands
  int max_arity_in, max_arity_out;  // the most inputs and outputs of one node (>= 1): tin's and tout's sizes
  int *last_use;    // per value
  int *group_last;  // per root value
  int *new_root;    // per value, computed for cur shapes
  size_t *need;     // per root value: bytes its buffer needs for cur shapes
  // the layout in force
  int have_layout;
  int *root;
  size_t *cap;  // per root value: bytes reserved
  size_t *off;  // per root value: arena offset
  int *edge;    // per graph output: copied/converted into its own buffer
  size_t *edge_cap, *edge_off;
  size_t arena_need, naive_bytes;
  uint8_t *arena;  // NULL unless host_arena
  size_t arena_alloc;
  // per graph output: a STRING output's wire layout, written at the end of
  // each run (its size depends on the strings, so it cannot sit in the
  // arena laid out from shapes); grown when a run needs more, kept between runs
  uint8_t **str_out;
  size_t *str_out_cap;
  uint64_t layouts;  // layouts assigned so far: a change means buffers moved
  // Folding, redone by every shape inference (infer_all): a node whose
  // inputs are all known values and whose outputs are small runs on the
  // host while shapes are inferred; its outputs then behave as constants
  // for the current input-shape signature.
  uint8_t *folded;  // per node: ran at planning time, skipped at run time
  uint8_t *known;   // per value: bytes known at planning time (constant or folded)
  void **fold_buf;  // per value: plan-owned host memory of a folded value
  size_t *fold_cap;
  uint64_t folds;   // nodes run by folding so far (tests, stats)
  // Attention nodes whose mask is read one row for every query row, for
  // the current signature (plan.c mask_rows_shared; tests, stats).
  size_t mask_rows_shared;
  // Fusion, CPU plan only (eng_plan_create; none in other backends): a
  // node whose op is params.fusable absorbs the Add (of a second value of
  // the same shape) and/or the activation (Relu, Sigmoid, HardSwish,
  // HardSigmoid, Clip with constant bounds, or gated: SiLU, a Sigmoid and
  // the Mul of its input and output; HardSwish as x * HardSigmoid(x)) that
  // alone consume its output. Found
  // once at create; switched on per input-shape signature, where the shapes
  // allow, by compute_roots. An absorbed node is skipped and its output
  // shares the absorbing node's buffer.
  int *fuse_add;      // per node: the Add it may absorb, or -1
  int *fuse_add_val;  // per node: that Add's other operand
  int *fuse_act;      // per node: the activation it may absorb (SiLU's Mul), or -1
  int *fuse_act2;     // per node: a gated activation's gate (Sigmoid...), absorbed with fuse_act, or -1
  uint8_t *fuse_kind; // per node: fuse_act's eng_dnnl_act
  float *fuse_alpha, *fuse_beta;  // per node: its parameters for the current shapes
  int *fuse_src;      // per node: for an absorbed one, the value its output aliases
  int *fuse_owner;    // per node: the node that may absorb it, or -1
  uint8_t *fuse_on;   // per node: its fusion holds for the current shapes (FUSE_*)
  uint8_t *fused;     // per node: absorbed (skipped) for the current shapes
  // Activation layouts, CPU plan only: a node of a params.layouts op may
  // leave its output (the end of its fused chain) in oneDNN's layout when
  // every reader is such a node too (reading it as input 0, or as the Add
  // it absorbed). Decided per input-shape signature with the fusions.
  uint8_t *keep_out;  // per node
  const void **fmt;   // per value: its layout in this run (NULL: plain)
  // the input types and shapes the inferred shapes and folds are for:
  // shape inference reruns only when they change
  eng_tensor *sig;
  int have_sig;
  // Parameters given as graph inputs (plan_values.c): per graph input, 1
  // when its bytes are read while inferring shapes (Reshape's shape, Slice's
  // starts, Resize's scales...), directly or through nodes folded from it.
  // Such an input is known (p->known) in every run, its bytes copied into
  // p->fold_buf and made part of the signature: new values rerun shape
  // inference and re-lay-out, as new shapes do. None: the plan is as static
  // as before.
  uint8_t *val_in;
  size_t n_val_in;
  void **sig_raw;        // per graph input: the bytes of the signature (value inputs only)
  size_t *sig_raw_cap, *sig_raw_bytes;
  int val_dirty;         // value inputs' bytes changed since the last shape inference
  // per value: a computed value's element type as the load knows it when
  // the planned shapes are not (!have_layout): eng_plan__probe_types's,
  // DT_INVALID where it could not tell. Types never depend on shapes.
  dtype *load_dt;
};

// Largest output, in elements, a node may have to be folded. Shape
// arithmetic yields at most ENG_MAX_DIMS elements; the margin covers the
// small index tensors exporters also compute from shapes (a Range over a
// sequence length, a mask) while keeping activation-sized work off the
// planning path, which reruns at every new input-shape signature.
#define ENG_FOLD_MAX_ELEMS 4096

// Whether value v's bytes live outside the arena (a constant, or a value
// folded for the current signature): p->cur[v].data points at them.
static inline int eng_plan__fixed(const eng_plan *p, int v) { return p->known[v]; }

// eng_plan_create with a choice of arena: host_arena 0 plans the layout
// (arena_need, off, edge_off) but allocates no host arena, for a backend
// that places the arena elsewhere.
int eng_plan__create(const eng_graph *g, int max_batch, int host_arena, eng_plan **out, err *e);

// The first half of eng_plan_run: validates the inputs (count, dtype,
// shape, bytes), infers every value's shape for them and re-lays-out when
// the layout in force does not fit. On return p->cur holds types and shapes
// (data pointers are the caller's to set), p->root/off/edge the layout and
// p->arena_need its size.
int eng_plan__prepare(eng_plan *p, const eng_tensor *inputs, size_t n_in, size_t n_out, err *e);

// Shape inference (and folding) of every node for the input types and
// shapes now in p->cur; vals_known 0 treats the value inputs as computed at
// run time (their bytes are not loaded). plan.c's infer_all caches it per
// signature; plan_probe.c runs it once more at create.
int eng_plan__infer_nodes(eng_plan *p, int vals_known, err *e);

// plan_probe.c: p->load_dt at create when some planned shape is unknown (a
// dynamic non-batch dim): one shape inference with each unknown dim set to
// a probe size, keeping only the computed values' element types. Undoes
// everything else it changed (p->cur, known, folded, fold buffers, the
// per-node marks and counters) and never fails: where the inference stops,
// the types stay DT_INVALID. Call before any run (have_sig 0). The CUDA
// plan calls it after eng_plan__create, for its inits; the CPU plan and its
// subgraphs' plans decide nothing by type at load and skip it.
void eng_plan__probe_types(eng_plan *p);

// Value inputs (plan_values.c). find: marks p->val_in at create (after the
// nodes' defs are set); refuses a batching plan that has any (requests
// batched together would mix their parameters). load: per run, after the
// inputs' types and shapes are set in p->cur: copies each value input's
// bytes into plan memory (converted to the internal type), points
// p->cur[v].data at them and sets p->val_dirty when they differ from the
// signature's. free: what find and load allocated.
// plan_fuse.c: the Add and activation each fusable node absorbs (fuse_add,
// fuse_act, ...), found once at create for a plan with a host arena.
int eng_plan__find_fusions(eng_plan *p, err *e);
int eng_plan__find_value_inputs(eng_plan *p, err *e);
int eng_plan__load_value_inputs(eng_plan *p, const eng_tensor *inputs, err *e);
void eng_plan__free_value_inputs(eng_plan *p);

// The CPU plan's subgraph runner for the ops with subgraphs (plan.c):
// a subgraph planned as its own eng_plan (max_batch 0), inferred and run
// through eng_plan_infer and eng_plan_run.
extern const eng_sub_api eng_plan__sub_api;

// Graph output j's declared type (the computed one where none is declared).
dtype eng_plan__out_dtype(const eng_plan *p, size_t j);

// Host conversions at the plan's edges: a declared input type (FP16, BF16,
// FP64, or any other type copied as is) into the internal type, and the
// internal FP32 into a declared output type. n elements.
void eng_plan__to_internal(void *dst, const eng_tensor *src, size_t n);
void eng_plan__to_edge(void *dst, dtype dt, const eng_tensor *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif
