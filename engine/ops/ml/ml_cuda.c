// engine/ops/ml/ml_cuda.c: the ai.onnx.ml family's CUDA table: empty. Tree
// walks, label lookups and the small linear models of scikit-learn's
// converted models run on the CPU (ml.c); the CUDA plan refuses them ("op
// ... not yet supported on CUDA"), and KIND_AUTO serves such a model on the
// CPU (engine/repo/config.h, config_resolve_kinds).
#include "engine/cuda/plan_cuda_internal.h"

const cuda_op eng_cuda__ml_ops[1] = {{.op_type = NULL}};
const size_t eng_cuda__n_ml_ops = 0;
