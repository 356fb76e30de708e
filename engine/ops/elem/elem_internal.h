// engine/ops/elem/elem_internal.h: what the elementwise family's CPU files
// share: elem.c's table lists the unary ops elem_unary.c parses and runs.
#ifndef INFERD_ENGINE_OPS_ELEM_INTERNAL_H
#define INFERD_ENGINE_OPS_ELEM_INTERNAL_H

#include "engine/ops/ops.h"

// Every op of elem_unary.c's table but Clip: p->mode, p->alpha, p->beta from its entry.
int eng_ops__parse_unop(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
// Clip: bounds as attributes before opset 11, optional inputs from 11.
int eng_ops__parse_clip(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
// Shape rule: the input's; any type k_unary takes for the op, and FP32. _f32: FP32 only.
int eng_ops__infer_unary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e);
int eng_ops__infer_unary_f32(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                             int n_out, err *e);
int eng_ops__run_unary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e);

// Linear quantization (elem_quant.c): QuantizeLinear and DequantizeLinear share parse_qdq;
// MatMulInteger takes op_parse_none (p->mode 0), QLinearMatMul parse_qlinear_matmul.
#define ELEM_QUANT_FN(name) \
  int eng_ops__##name(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__parse_qdq(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__parse_qlinear_matmul(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
ELEM_QUANT_FN(infer_quantize)
ELEM_QUANT_FN(run_quantize)
ELEM_QUANT_FN(infer_dequantize)
ELEM_QUANT_FN(run_dequantize)
ELEM_QUANT_FN(infer_quant_dequant)
ELEM_QUANT_FN(run_quant_dequant)
ELEM_QUANT_FN(infer_dynquant)
ELEM_QUANT_FN(run_dynquant)
ELEM_QUANT_FN(infer_matmul_int)
ELEM_QUANT_FN(run_matmul_int)
#undef ELEM_QUANT_FN

#endif
