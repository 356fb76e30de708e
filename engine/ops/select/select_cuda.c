// engine/ops/select/select_cuda.c: the select family's CUDA table: empty.
// NonZero, Compress, Unique and NonMaxSuppression decide their shapes from
// values read while planning; on CUDA they run only where folded for the
// planned shapes (the CUDA plan refuses them otherwise: "op NonZero not yet
// supported on CUDA"), and such a model is served with KIND_CPU.
#include "engine/cuda/plan_cuda_internal.h"

const cuda_op eng_cuda__select_ops[1] = {{.op_type = NULL}};
const size_t eng_cuda__n_select_ops = 0;
