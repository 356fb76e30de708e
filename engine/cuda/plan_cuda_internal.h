// engine/cuda/plan_cuda_internal.h: how an op family plugs into the CUDA plan
// (engine/cuda/plan_cuda.c). Not a public header: only the plan's files and
// the op families' CUDA files (engine/ops/<family>/<family>_cuda.c, listed in
// engine/ops/families.h) include it.
//
// A cuda_op runs one node on a slot's stream. The simple ops need only
// run; an op that keeps state (cuDNN plans per shape, packed weights) adds
// hooks, all optional:
//   init     once per node at plan create, on the plan's device: refuses
//            what the op cannot run (the load fails with its message) and
//            makes the node's state.
//   fuse     once per node at plan create: which following nodes the op can
//            absorb (an Add, an activation), see cuda_fusion.
//   prepare  every submit, before the batch is enqueued or captured, with
//            this run's shapes, types and device pointers: creates what a
//            shape seen for the first time needs (may allocate and
//            synchronise), works out this run's host-side arguments (the
//            resize family's scales and pads, from values the planner
//            read) and says how many workspace bytes its run needs.
//            The plan grows the slot's workspace to the largest need
//            outside capture. Nothing here runs inside a CUDA graph capture.
//   run      enqueue only: no allocation, no synchronisation (capturable).
//   destroy  releases the node's state.
// Submits are serialised (plan_cuda.h), so prepare may leave "this run's"
// choice in the node state for run to use in the same submit.
#ifndef INFERD_ENGINE_PLAN_CUDA_INTERNAL_H
#define INFERD_ENGINE_PLAN_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_conv.h"
#include "engine/cuda/cuda_gemm.h"
#include "engine/cuda/cuda_weights.h"
#include "engine/cpu/plan_internal.h"
#include "engine/ops/families.h"
#include "kernels/base/err.h"
#include "kernels/k_cuda.h"

// What one node's run sees: the slot's resources and this node's fused
// epilogue and state. Filled by the plan before each run.
typedef struct cuda_ctx {
  cudaStream_t stream;
  eng_gemm_lt *gemm;
  eng_gemm_dtype gemm32;  // products of FP32 values: FP32 or TF32
  eng_cudnn *cudnn;       // the slot's cuDNN handle; NULL unless an op asked (CUDA_OP_CUDNN)
  void *ws;               // the slot's op workspace (the largest prepare asked for)
  size_t ws_bytes;
  // this node's fused epilogue (set per node by the plan's run loop)
  int act;           // the op's own activation code (cuda_fusion.act), 0 = none
  int in_act;        // a skipped activation the op applies to input 0 as it loads it (cuda_fusion.pro_act)
  const void *bias;  // a following Add's constant, or NULL
  const void *z;     // a following Add's residual operand (same shape as the output), or NULL
  void *node;        // this node's state (init), or NULL
  bool conv_timed;   // cuDNN algorithms: each candidate timed instead of the heuristic's pick (eng_cuda_opts)
  bool nhwc;         // CUDA_OP_NHWC ops: this node's 4-D activations are NHWC (plan_cuda_layout.c)
  bool conv_gemm;    // 1x1 stride-1 Convs on NHWC activations as cuBLASLt GEMMs (eng_cuda_opts.no_conv_gemm)
  eng_cuda_wset *weights;  // the device's copy of the constants: derived copies (packed weights) go there
  // this node's out-of-range flag (device memory, a word of the slot's mapped array): a kernel that
  // meets an index out of range sets it to 1 and the batch fails when it finishes, naming the node
  int *oob;
} cuda_ctx;

typedef int (*cuda_run_fn)(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                           eng_tensor *out, int n_out, err *e);
// Whether run handles these (FP16-stored) operands itself.
typedef bool (*cuda_half_fn)(const eng_op_params *p, const eng_tensor *in, int n_in);

// A node's fusion candidate (static; settled per run, see plan_cuda_fuse.c
// eng_cuda__settle_fusions): the node's output mid_value feeds only an Add
// (bias_node: with a constant bias_value or a residual z_value, whose
// output is add_value) and/or an activation act_node.
typedef struct cuda_fusion {
  int bias_node, act_node;  // fused Add / activation node, -1 if none
  int bias_value;           // the Add's constant operand (a bias), or -1
  int z_value;              // the Add's other activation (a residual), or -1
  int mid_value;            // the fusing node's output; -1: no fusion
  int add_value;            // the Add's output
  // MatMul only: a residual Add after the product (or after its bias Add), Add(chain, res_z)
  // with res_z computed before the node; act_node then follows this Add. -1 if none.
  int res_node, res_z, res_value;
  int act;                  // the op's own activation code (k_act for GEMMs, eng_cuconv_act for Conv)
  // A prologue: input 0 is the output of pro_node, an activation (code pro_act) read by this node
  // alone, of pro_value. The plan skips pro_node when it ran in place and this node runs NHWC with
  // that input as stored (eng_cuda__settle_prologues); the op then applies pro_act as it loads
  // input 0 (cuda_ctx.in_act). -1 / 0 if none.
  int pro_node, pro_value, pro_act;
} cuda_fusion;

enum {
  CUDA_OP_CUDNN = 1,     // each slot needs a cuDNN handle
  CUDA_OP_NHWC = 2,      // runs on NHWC activations when cuda_ctx.nhwc says so (logical dims NCHW)
  CUDA_OP_ELEMWISE = 4,  // elementwise with broadcasting: blind to layout, dims presented in memory order
};

// What a prepare call reports.
typedef struct cuda_prep {
  size_t ws_need;  // workspace bytes this node's run needs for these shapes
  int made;        // device allocations it made (a new shape's plan), for the stats
  bool gemm;       // a Conv that runs as a cuBLASLt GEMM this run (engine/ops/conv/conv_cuda.c), for the stats
} cuda_prep;

typedef struct cuda_op {
  const char *op_type;
  cuda_run_fn run;
  cuda_half_fn half;  // NULL: never; the plan runs the op in FP32 on converted copies
  int flags;
  int (*init)(const eng_plan *pl, size_t node, int half, void **node_state, err *e);
  void (*fuse)(const eng_plan *pl, size_t node, cuda_fusion *f);
  int (*prepare)(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                 const eng_tensor *out, int n_out, cuda_prep *r, err *e);
  void (*destroy)(void *node_state);
  // CUDA_OP_NHWC ops: whether this node can run NHWC at all (NULL: yes)
  bool (*nhwc)(const eng_plan *pl, size_t node, const void *node_state);
} cuda_op;

// Staging, scratch and workspace offsets are multiples of this.
#define CUDA_STAGE_ALIGN 256
static inline size_t eng_cuda__round_up(size_t n) {
  return (n + CUDA_STAGE_ALIGN - 1) / CUDA_STAGE_ALIGN * CUDA_STAGE_ALIGN;
}

// --- shared with the op families (plan_cuda_util.c)

// The one node that reads value v, or -1 when it is a graph output, unused,
// or read twice (by one node or two).
int eng_cuda__sole_consumer(const eng_graph *g, size_t n_nodes, int v);
bool eng_cuda__is_const(const eng_graph *g, int v);
// Whether value v exists when node i runs (a graph input, a constant or an
// earlier node's output): a fusion may read it as a residual.
bool eng_cuda__made_before(const eng_plan *pl, int v, size_t i);
// Node input k as a tensor over the graph's host copy of its bytes, when
// that input is a constant (the plan's own copy lives on the device); false
// otherwise. For ops that read an attribute-like input once, at init.
bool eng_cuda__const_input(const eng_plan *pl, size_t node, int k, eng_tensor *t);
// Value v's element type as known at plan create (DT_INVALID: only a run
// will tell): a graph input's or constant's, or a node output's: from the
// planned shapes where the planner inferred them at create (fixed input
// shapes), else from its probe (eng_plan__probe_types: a dynamic dim given
// a probe size; DT_INVALID past a node the probe could not infer). An
// init refuses (ERR_UNIMPLEMENTED) a type its run has no kernel for, so the
// node runs on the host from load rather than failing each request.
dtype eng_cuda__load_dt(const eng_plan *pl, int v);
// The same for node input k (DT_INVALID when absent).
dtype eng_cuda__load_in_dt(const eng_plan *pl, size_t node, int k);
// A half function for ops whose run takes FP16 operands as they are.
bool eng_cuda__half_always(const eng_op_params *p, const eng_tensor *in, int n_in);

// The CUDA run of op_type from the families' tables below, or NULL when no
// family runs it on CUDA (the node must then be folded on the host).
const cuda_op *eng_cuda__find_op(const char *op_type);

// --- layouts (plan_cuda_layout.c)

// Per run: each 4-D value's storage layout, each node's mode and the
// operands converted before it runs. See plan_cuda_layout.c.
#define CUDA_LAYOUT_CONV_Z (1u << 31)  // cuda_layout.conv: the fused residual
typedef struct cuda_layout {
  uint8_t *lay;     // per value: 1 = stored NHWC (4-D values only)
  uint8_t *mode;    // per node: 1 = runs NHWC
  uint32_t *conv;   // per node: bit k = input k is transposed to the node's layout first
  size_t node_scr;  // scratch bytes the most converting node needs
  size_t out_scr;   // scratch bytes for graph outputs transposed back to NCHW
  bool any;         // some node runs NHWC
  uint64_t n_nhwc;  // nodes that run NHWC
  uint64_t n_conv;  // transposes: operands before their node, outputs before copy-out
} cuda_layout;

int eng_cuda__layout_alloc(cuda_layout *L, size_t n_nodes, size_t n_values, err *e);
void eng_cuda__layout_free(cuda_layout *L);
// on false: everything NCHW. ddt: per value, the stored type.
void eng_cuda__layout_settle(cuda_layout *L, const eng_plan *pl, const cuda_op *const *ops,
                             const void *const *nstate, const char *skip, const int *run_out,
                             const int *run_z, const dtype *ddt, bool on);
// Same bytes in both layouts (up to rank 4, aligned right: C == 1 or H * W == 1).
bool eng_cuda__layout_neutral(const eng_tensor *t);
// Value v is stored NHWC with bytes unlike its NCHW ones (4-D, not
// neutral): a reader in NCHW, or the copy-out of a graph output, transposes.
bool eng_cuda__stored_nhwc(const cuda_layout *L, const eng_plan *pl, int v);
// An elementwise operand's dims in memory order: aligned to rank 4, (N, H, W, C).
void eng_cuda__layout_present(eng_tensor *t);
// Transposes 4-D t (logical NCHW dims, stored in the other layout than
// to_nhwc asks) into dst and points t at it.
int eng_cuda__relayout(eng_tensor *t, void *dst, bool to_nhwc, cudaStream_t st, err *e);

// --- the families' CUDA tables (engine/ops/families.h): eng_cuda__<family>_ops[] in
// engine/ops/<family>/<family>_cuda.c, and its count
#define ENG_CUDA_OPS_TABLE(f)                \
  extern const cuda_op eng_cuda__##f##_ops[]; \
  extern const size_t eng_cuda__n_##f##_ops;
ENG_OPS_FAMILIES(ENG_CUDA_OPS_TABLE)
#undef ENG_CUDA_OPS_TABLE

#endif
