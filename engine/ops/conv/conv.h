// engine/ops/conv/conv.h: the convolution and pooling op family of the CPU
// backend (Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool,
// GlobalMaxPool): ONNX attribute parsing, the ONNX shape rules (auto_pad,
// ceil_mode, output_shape) in one geometry function that every backend can
// reuse, and execution through oneDNN (conv_dnnl.h) with the plain loops of
// kernels/conv/k_conv.h as the stateless reference. Registered through
// engine/ops/families.h (eng_ops__conv, conv_table.c).
#ifndef INFERD_ENGINE_OPS_CONV_H
#define INFERD_ENGINE_OPS_CONV_H

#include <stdint.h>

#include "engine/graph/graph.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "kernels/conv/k_conv.h"

typedef enum eng_conv_kind {
  ENG_CONV = 1,
  ENG_CONV_TRANSPOSE,
  ENG_POOL_MAX,
  ENG_POOL_AVG,
  ENG_POOL_GLOBAL_AVG,
  ENG_POOL_GLOBAL_MAX,
} eng_conv_kind;

typedef enum eng_auto_pad {
  ENG_PAD_NOTSET = 0,
  ENG_PAD_SAME_UPPER,
  ENG_PAD_SAME_LOWER,
  ENG_PAD_VALID,
} eng_auto_pad;

// The family's attributes as parsed (counts already checked against the
// spatial rank where it is known at parse: from W or kernel_shape).
typedef struct eng_conv_attrs {
  eng_conv_kind kind;
  eng_auto_pad auto_pad;
  int nsp;  // spatial rank; 0 for the global pools (taken from X)
  int64_t kernel[K_CONV_MAX_SP], strides[K_CONV_MAX_SP], dils[K_CONV_MAX_SP];
  int64_t pads[2 * K_CONV_MAX_SP];  // ONNX order: all begins, then all ends
  int64_t out_pad[K_CONV_MAX_SP], out_shape[K_CONV_MAX_SP];
  int has_kernel, has_out_shape;
  int64_t group;
  int ceil_mode, count_include_pad;
  // W is not a constant (a graph input, or computed): kernel taken from W's
  // shape in each run (has_kernel: kernel_shape, checked against it), the
  // reference kernel on the CPU
  int w_runtime;
} eng_conv_attrs;

struct eng_op_params;
struct eng_op_state;

// The family table's entries for the whole family (the op is told apart by
// the parsed kind).
int eng_conv_parse(const eng_graph *g, const eng_node *n, int opset, struct eng_op_params *p,
                   err *e);
int eng_conv_infer(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e);
// The reference (kernels/conv/k_conv.h): stateless and slow, for checks.
int eng_conv_run_ref(const struct eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, err *e);
// The fast path: oneDNN primitives cached in st->node.
int eng_conv_run(struct eng_op_state *st, const struct eng_op_params *p, const eng_tensor *in,
                 int n_in, eng_tensor *out, int n_out, err *e);
void eng_conv_state_destroy(void *node_state);

// The plan's oneDNN context (conv_dnnl.h), created in *st->ctx on first
// use; for the other ops that run through oneDNN (Gemm).
struct eng_dnnl_ctx;
int eng_conv_dnnl_ctx(struct eng_op_state *st, struct eng_dnnl_ctx **out, err *e);

// The geometry of one run: X's shape (and W's for the convolutions) with
// the attributes, by the ONNX shape rules; pad_r is the declared end pad
// (SAME_* and output_shape resolved). Fails with a message on mismatched
// shapes, bad attributes and sizes that would overflow.
int eng_conv_window(const eng_conv_attrs *a, const eng_tensor *x, const eng_tensor *w,
                    k_window *g, err *e);

// Col2Im, MaxUnpool and CausalConvWithState (col2im.c), listed in conv_table.c.
// Col2Im's and MaxUnpool's parse is op_parse_node (ops_common.h: keeps the node).
int eng_ops__infer_col2im(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                          int n_out, err *e);
int eng_ops__run_col2im(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e);
int eng_ops__infer_max_unpool(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                              int n_out, err *e);
int eng_ops__run_max_unpool(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                            int n_out, err *e);
int eng_ops__parse_causal_conv(const eng_graph *g, const eng_node *n, int opset, struct eng_op_params *p,
                               err *e);
int eng_ops__infer_causal_conv(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                               int n_out, err *e);
int eng_ops__run_causal_conv(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                             int n_out, err *e);

// LpPool (conv.c), listed in conv_table.c.
int eng_ops__parse_lppool(const eng_graph *g, const eng_node *n, int opset, struct eng_op_params *p, err *e);
int eng_ops__infer_lppool(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e);
int eng_ops__run_lppool(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e);

// QLinearConv and ConvInteger (qconv.c), listed in conv_table.c: Conv's
// parser and window with W at its input index; p->mode 1 QLinearConv, 2 ConvInteger.
int eng_qconv_parse(const eng_graph *g, const eng_node *n, int opset, struct eng_op_params *p, err *e);
int eng_qconv_infer(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                    err *e);
int eng_qconv_run_ref(const struct eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                      err *e);
int eng_qconv_run(struct eng_op_state *st, const struct eng_op_params *p, const eng_tensor *in, int n_in,
                  eng_tensor *out, int n_out, err *e);
void eng_qconv_state_destroy(void *node_state);

#endif
