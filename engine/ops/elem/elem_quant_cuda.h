// engine/ops/elem/elem_quant_cuda.h: linear quantization's CUDA path
// (elem_quant_cuda.c), listed in the elem family's CUDA table (elem_cuda.c):
// QuantizeLinear, DequantizeLinear and inferd.QuantDequant share one init
// (the constant scale and zero point) and one destroy.
#ifndef INFERD_ENGINE_OPS_ELEM_QUANT_CUDA_H
#define INFERD_ENGINE_OPS_ELEM_QUANT_CUDA_H

#include "engine/cuda/plan_cuda_internal.h"

int eng_cuda__quant_init(const eng_plan *pl, size_t i, int half, void **state, err *e);
void eng_cuda__quant_destroy(void *state);
int eng_cuda__quantize_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e);
int eng_cuda__dequantize_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                             int n_out, err *e);
int eng_cuda__quant_dequant_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                                eng_tensor *out, int n_out, err *e);
// inferd.QuantDequant runs NHWC per tensor or along axis 1 (the channels).
bool eng_cuda__quant_dequant_nhwc(const eng_plan *pl, size_t node, const void *state);

#endif
