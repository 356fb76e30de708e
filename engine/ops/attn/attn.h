// engine/ops/attn/attn.h: scaled-dot-product attention, one home for the op family:
// the load-time pass that recognises the subgraph exporters write for it
// (attn.c), the fused op's attributes, shape rule and CPU path (attn.c, on
// OpenBLAS), its CUDA path (attn_cuda.c over kernels/attn/k_attn.cu) and the C
// reference (kernels/attn/k_attn.c). Not a public header.
//
// The fused node, op_type "inferd.Attention" (internal: a model cannot
// name it), computes O = softmax(scale / divisor * Q Kt + mask) V with
// inputs
//   0 Q    [batch..., Sq, D]
//   1 Kt   [batch..., D, Sk]  the keys TRANSPOSED, as the exporters hand
//                             them to the first MatMul (no copy to undo it)
//   2 V    [batch..., Sk, Dv]
//   3 mask optional, additive, broadcast to [batch..., Sq, Sk]
//   4 divisor optional scalar known when planning (a constant, or computed
//          from shapes: GPT's Pow(Cast(Shape(Q)[3]), 0.5)); a host_in input
// and attributes scale (float, default 1) and nan_zero (int: a row whose
// softmax is undefined, every score -inf or a NaN, gives 0 instead of NaN,
// as the exporters' IsNaN/Where after the Softmax makes it). The int
// attributes q_perm, k_perm, v_perm, o_perm (default 0) say the pass took
// the exporters' head Transpose into the node (attn.c): then that operand
// is 4-D [B, S, H, D] (Q and V: read as [B, H, S, D]; K: read as Kt [B, H,
// D, S]), and with o_perm the output is [B, Sq, H, Dv] (the batch dims must
// be two), all read and written in place through row strides. Batch dims
// broadcast as MatMul's and Add's do, so the fused node's output has the
// unfused one's shape; a mask that would enlarge Sq or Sk is refused when
// planning, with a message naming the switch that turns the pass off.
//
// Packed Q/K/V (attn_qkv.c's pass; int attribute qkv_packed 1, with all
// three of q_perm, k_perm, v_perm): inputs 0, 1 and 2 are one tensor T
// [B, S, 3*H*D], the output of one projection, and inputs 5, 6 and 7 the
// shapes the exporter's Reshapes of Q, K and V asked for (known when
// planning, resolved by Reshape's rules, allowzero as the int attribute
// qkv_allowzero; each must come to [B, S, H, D]). Q is read from T's
// columns [0, H*D), K from [H*D, 2*H*D), V from [2*H*D, 3*H*D), each as
// [B, S, H, D] with rows 3*H*D apart: offsets and strides, no copy.
#ifndef INFERD_ENGINE_ATTN_H
#define INFERD_ENGINE_ATTN_H

#include <stdint.h>

#include "engine/graph/graph.h"
#include "engine/ops/ops.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "kernels/k_ref.h"

#define ENG_ATTN_OP "inferd.Attention"
#define ENG_ATTN_QKV_PACKED "qkv_packed"
#define ENG_ATTN_QKV_ALLOWZERO "qkv_allowzero"

// The pass (graph_pass.c runs it after constant folding): rewrites each
// matched subgraph's last MatMul into an inferd.Attention node and marks
// the other nodes of the match dead (dead has one entry per node). Sets
// *changed when it fused any; the count goes to eng_graph_n_attention.
int eng_attn__fuse(eng_graph *g, unsigned char *dead, int *changed, err *e);

// Transposes the pass took into g's fused nodes (their perm flags, summed).
size_t eng_attn_n_transposes(const eng_graph *g);

// The pass after it (attn_qkv.c): where a fused node's Q, K and V are the
// exporter's Reshapes to heads of three projections of one X (MatMul by a
// constant [E, N] each, and an Add of a constant [N] bias on all three or
// on none) or of the three equal parts of one Split along the last axis,
// rewrites the node to packed mode (above), with the three projections
// merged into one MatMul by the concatenated constants [E, 3N] (+ [3N]):
// one GEMM instead of three, and no copy. Sets *changed when it packed any;
// the count goes to eng_graph_n_qkv_merged. Leaves the node as it is where
// any condition fails.
int eng_attn__merge_qkv(eng_graph *g, unsigned char *dead, int *changed, err *e);

// The fused op's shapes for concrete inputs: batch dims (broadcast over
// every operand), per-operand element strides per batch dim (0 where the
// operand broadcasts), the head sizes, the row strides inside a head (as
// k_attn_args has them, never 0 here) and the mask's row/column strides.
typedef struct eng_attn_shape {
  int nb;
  int64_t batch[ENG_MAX_DIMS];
  int64_t qs[ENG_MAX_DIMS], ks[ENG_MAX_DIMS], vs[ENG_MAX_DIMS], ms[ENG_MAX_DIMS],
      os[ENG_MAX_DIMS];
  int64_t sq, sk, d, dv;
  int64_t q_ss, k_sd, k_sk, v_ss, o_ss;
  int64_t off[3];  // elements from Q's, Kt's and V's data to the operand (packed Q/K/V)
  int has_mask;
  int64_t m_sq, m_sk;
  float scale;  // attribute scale / divisor
} eng_attn_shape;

// Analyses in[0..n_in) (their `data` is needed only for the divisor); y
// gets the output's type and shape when not NULL.
int eng_attn__analyse(const eng_op_params *p, const eng_tensor *in, int n_in, eng_attn_shape *s,
                      eng_tensor *y, err *e);

// Collapses s's batch dims into the kernels' [B, H] (k_attn_args), where
// every operand's strides allow; ERR_UNIMPLEMENTED when more than two batch
// dims stay apart.
int eng_attn__kernel_args(const eng_attn_shape *s, k_attn_args *a, err *e);

// TensorScatter (attn_cache.c), listed in attn.c's table.
int eng_ops__parse_tensor_scatter(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_tensor_scatter(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                  int n_out, err *e);
int eng_ops__run_tensor_scatter(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                                err *e);
// ONNX's LinearAttention (attn_linear.c), listed in attn.c's table.
int eng_ops__parse_linear_attn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_linear_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                               err *e);
int eng_ops__run_linear_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e);
// ONNX's own Attention op (attn_onnx.c), listed in attn.c's table.
int eng_ops__parse_onnx_attn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_onnx_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e);
int eng_ops__run_onnx_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e);
int eng_ops__parse_rotary(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_rotary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e);
int eng_ops__run_rotary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e);

#endif
