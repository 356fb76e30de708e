// engine/ops/ctrl/ctrl_cuda.c: the control-flow family's CUDA table: empty.
// If, Loop and Scan run their subgraphs through the CPU plan only; in a
// CUDA plan such a node runs on the host (host fallback,
// engine/cuda/plan_cuda_host.h) with the op's stateless run, unless it is
// folded for the planned shapes.
#include "engine/cuda/plan_cuda_internal.h"

const cuda_op eng_cuda__ctrl_ops[1] = {{.op_type = NULL}};
const size_t eng_cuda__n_ctrl_ops = 0;
