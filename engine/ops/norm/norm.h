// engine/ops/norm/norm.h: what the normalisations' two paths share
// (engine/ops/norm/norm.c on the CPU, norm_cuda.c on the CUDA plan). Not a
// public header.
#ifndef INFERD_ENGINE_OPS_NORM_H
#define INFERD_ENGINE_OPS_NORM_H

#include <stddef.h>

#include "engine/ops/ops.h"
#include "engine/tensor.h"

// Softmax/LogSoftmax as [outer, len, inner] (opset < 13: 2-D coercion).
void eng_ops__softmax_dims(const eng_op_params *p, const eng_tensor *x, size_t *outer, size_t *len,
                           size_t *inner);

// InstanceNormalization / GroupNormalization: X as [n, c, spatial] in `groups`
// groups; per_group: scale and B hold one value per group (opset 18).
void eng_ops__groupnorm_dims(const eng_op_params *p, const eng_tensor *in, size_t *n, size_t *c, size_t *groups,
                             size_t *spatial, int *per_group);

#endif
