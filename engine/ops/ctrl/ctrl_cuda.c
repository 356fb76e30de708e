// engine/ops/ctrl/ctrl_cuda.c: the control-flow family's CUDA table: empty.
// If, Loop and Scan run their subgraphs through the CPU plan only; the CUDA
// plan refuses a model with one ("op If not yet supported on CUDA") unless
// the node is folded for the planned shapes: such a model is served with
// an instance group of KIND_CPU.
#include "engine/cuda/plan_cuda_internal.h"

const cuda_op eng_cuda__ctrl_ops[1] = {{.op_type = NULL}};
const size_t eng_cuda__n_ctrl_ops = 0;
