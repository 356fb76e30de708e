// engine/ops/ops.h: the CPU backend's operator table. Each op parses its
// attributes once per plan (opset-aware defaults), infers output shapes for
// concrete input shapes, and runs on buffers the planner assigned. The
// planner knows ops only through this table.
#ifndef INFERD_ENGINE_OPS_CPU_H
#define INFERD_ENGINE_OPS_CPU_H

#include "engine/cpu/conv_dnnl.h"
#include "engine/graph/graph.h"
#include "engine/ops/conv/conv.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "kernels/k_ref.h"

// What an op with subgraphs (If, Loop, Scan: engine/ops/ctrl/) needs of the
// backend that runs it: a plan for a subgraph, its shape inference and its
// run. The CPU plan sets eng_op_params.sub to its own (plan.c); where it
// is NULL (constant folding at load) such an op does not run. A subgraph's
// inputs are its own, then its outer inputs (eng_graph_n_outer), all in
// internal types (FP32 for floats); outputs as eng_plan_run's.
typedef struct eng_sub_api {
  int (*create)(const eng_graph *g, void **plan, err *e);
  void (*destroy)(void *plan);
  // Output types and shapes for inputs' types and shapes; an input's data
  // may be NULL where unknown (an error when the subgraph reads its bytes
  // while inferring shapes). An output's data is set when its bytes are
  // known (constant or folded), else NULL.
  int (*infer)(void *plan, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out, err *e);
  int (*run)(void *plan, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out, err *e);
} eng_sub_api;

// Attributes after parsing; each op uses the fields it needs.
typedef struct eng_op_params {
  int64_t axis;
  float alpha, beta, eps;
  int trans_a, trans_b;
  int approximate;  // Gelu
  int legacy;       // Softmax/LogSoftmax before opset 13: 2-D coercion
  int allowzero;    // Reshape
  dtype to;         // Cast: target type as declared (FP16, FP64... kept)
  int n_ints;       // perm / axes (attribute forms)
  int64_t ints[ENG_MAX_DIMS];
  int has_ints;     // perm or axes given
  eng_conv_attrs conv;  // Conv, ConvTranspose and the pools (engine/ops/conv/conv.h)
  // Slice starts/ends and Pad begin/end pads in their attribute forms
  // (Slice before opset 10, Pad before 11); n_se entries each.
  int n_se;
  int64_t starts[ENG_MAX_DIMS], ends[ENG_MAX_DIMS];
  int64_t start, end;  // Shape (opset 15)
  int has_end;
  int keepdims, noop_empty;  // Reduce*
  int mode, coord, nearest;  // Pad / Resize: enums of the op's file
  int keep_aspect;           // Resize: keep_aspect_ratio_policy (resize.c)
  int n_floats;              // Upsample scales before opset 9
  float floats[ENG_MAX_DIMS];
  dtype value_dt;            // ConstantOfShape: the fill value and its type
  uint8_t value[8];
  // Set by parse: run_state honours eng_op_state's post-ops, so the CPU
  // plan may fuse a following Add and activation into this node (Conv,
  // ConvTranspose; Gemm when it runs as a oneDNN inner product).
  int fusable;
  // Set by parse: run_state takes input 0 and output 0 in oneDNN's
  // activation layouts (eng_op_state's *_fmt), so the CPU plan may leave a
  // value in one between two such nodes (the conv family).
  int layouts;
  int upper;                   // Trilu
  int exclusive, reverse;      // CumSum
  int detect_neg, detect_pos;  // IsInf
  int64_t batch_dims;          // GatherND
  int nan_zero;                // inferd.Attention (attn.h); its scale is alpha
  // inferd.Attention, set by the planner per input-shape signature: the
  // mask's query rows are proven equal (a padding mask expanded to [B, 1,
  // Sq, Sk]), so every query row reads row 0 (plan.c mask_rows_shared).
  int mask_rows_same;
  // Ops with subgraphs (engine/ops/ctrl/): the node (its GRAPH attributes
  // and the rest are read from it), and the backend's subgraph runner, set
  // by the plan after parse (NULL: none; the op refuses to run).
  const eng_node *node;
  const eng_sub_api *sub;
} eng_op_params;

enum {
  ENG_OP_ALIAS = 1,    // output 0 is a view of input 0's bytes: no copy
  ENG_OP_INPLACE = 2,  // output 0 may overwrite input 0 when shapes and types match
  ENG_OP_SHAPE_ONLY = 4,  // reads its inputs' shapes, never their bytes (Shape)
  // Output element i reads, of each input not in host_in, only the element
  // numpy broadcasting aligns with i (from the last dim): Add, Where, Cast,
  // Expand... The planner uses it to prove a value repeats along an axis.
  ENG_OP_ELEMWISE = 8,
  // Output 0 may be omitted (""), other outputs named: RNN, GRU and LSTM
  // without Y. Other ops' run functions write output 0 unconditionally.
  ENG_OP_OUT0_OPTIONAL = 16,
  // Input 0 may be omitted (""): Loop's trip count. Other ops read input 0.
  ENG_OP_IN0_OPTIONAL = 32,
  // Input 0's (PREF0) and input 1's (PREF1) bytes, where known when
  // planning, settle the outputs' shapes (If's cond, Loop's trip count and
  // cond), but the op infers shapes without them too where it can. In a
  // plan that does not batch, a graph input feeding them is read as a value
  // input (plan_values.c), as for host_in; unlike host_in, inputs computed
  // at run time are no error.
  ENG_OP_HOST_PREF0 = 64,
  ENG_OP_HOST_PREF1 = 128,
};

// Plan-wide resources that stateful ops share (a oneDNN engine and
// stream): the first op that needs them creates them, the plan owns and
// destroys them. A plan runs on one thread at a time, and so do they.
typedef struct eng_op_ctx eng_op_ctx;
void eng_op_ctx_destroy(eng_op_ctx *c);

// What a stateful op keeps between runs of one node of one plan.
typedef struct eng_op_state {
  void *node;        // the op's own: NULL until it stores one; freed with def->destroy
  eng_op_ctx **ctx;  // the plan's shared context: NULL until an op creates it
  // Work the CPU plan fused into this run (params->fusable ops only):
  // output 0 = act(op + post_add), with post_add NULL or a tensor of
  // output 0's shape in other bytes, and act post_act (NONE: identity)
  // with its parameters act_alpha, act_beta (conv_dnnl.h).
  const eng_tensor *post_add;
  eng_dnnl_act post_act;
  float act_alpha, act_beta;
  // Activation layouts (params->layouts ops only): those of input 0 and of
  // post_add as the nodes that wrote them reported (NULL: plain); whether
  // output 0 may be left in the op's own layout (all its readers take it);
  // out: the layout the run left output 0 in (NULL: plain), valid until the
  // node runs again.
  const void *in_fmt, *add_fmt;
  int out_keep;
  const void *out_fmt;
} eng_op_state;

// Bit k of eng_op_def.host_in: input k is read while inferring shapes
// (Reshape's shape, Slice's starts, ...), so its value must be known for
// each input-shape signature: an initializer, a Constant, or the output of
// nodes the planner folded. Such an input's tensor carries `data` in infer.
#define ENG_IN(k) (1u << (k))

// Tensors passed to infer/run: an omitted optional input or output has
// dt == DT_INVALID. Float tensors of every width travel as FP32 inside a
// plan; `data` is set in infer only for values known at planning time
// (constants and folded values), always for the inputs named in host_in.
typedef struct eng_op_def {
  const char *op_type;
  int min_in, max_in, min_out, max_out;
  int flags;
  int (*parse)(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
  int (*infer)(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
               err *e);
  int (*run)(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
             err *e);
  unsigned host_in;  // ENG_IN(k) bits
  // Optional, for ops that cache work between runs (oneDNN primitives):
  // when set, the CPU plan calls run_state instead of run (which stays as
  // the stateless reference path) and releases st->node with destroy.
  int (*run_state)(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in,
                   eng_tensor *out, int n_out, err *e);
  void (*destroy)(void *node_state);
} eng_op_def;

// The op graph_pass_qdq.c makes of onnxruntime's QDQ Gemm: QLinearMatMul's
// eight inputs plus an optional INT32 bias of N (engine/ops/elem/elem_quant.c).
#define ENG_QLINEAR_GEMM_OP "inferd.QLinearGemm"

// The op graph_pass_qdq.c makes of a QuantizeLinear -> DequantizeLinear pair
// on an activation when the model runs in float (GPU instances): x, scale
// and zero point as QuantizeLinear's, FP32 out (elem_quant.c; CUDA path
// elem_quant_cuda.c, one fake-quant kernel: round, clamp, rescale).
#define ENG_QUANT_DEQUANT_OP "inferd.QuantDequant"

// The op called op_type in the default domain, or NULL when unsupported.
// Constant is listed (folded at load) but has no run function.
const eng_op_def *eng_ops_cpu_find(const char *op_type);

// Constant folding's run, shared by the load-time pass (graph_pass.c) and
// the planner's per-signature folding (plan.c): runs d on host memory, on
// inputs whose bytes are known. out[] holds the shapes and types d's infer
// gave; each output not omitted (dt != DT_INVALID) gets its size in bytes
// and the buffer buf(ctx, k, bytes) returns, which the caller owns, then
// d->run fills them. Returns 0, the run's error, or ERR_RESOURCE_EXHAUSTED
// when buf returned NULL (nothing ran; buffers already given stay given).
typedef void *(*eng_fold_buf_fn)(void *ctx, int k, size_t bytes);
int eng_ops_cpu_fold(const eng_op_def *d, const eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, eng_fold_buf_fn buf, void *ctx, err *e);

// The type a value of declared type t has inside a plan: every float width
// computes as FP32, integer and bool types are kept.
dtype eng_ops_cpu_internal_dtype(dtype t);

// The kernels' element type of a tensor dtype (k_cast); -1 when there is none.
int eng_ops_elem_of(dtype t, k_elem *k);

#endif
