// engine/ops/gemm/gemm.h: the shape rule the matrix products' two paths
// share (engine/ops/gemm/gemm.c on the CPU, gemm_cuda.c on the CUDA plan).
// Not a public header.
#ifndef INFERD_ENGINE_OPS_GEMM_H
#define INFERD_ENGINE_OPS_GEMM_H

#include <stdint.h>

#include "engine/tensor.h"
#include "kernels/base/err.h"

// MatMul with numpy semantics: [batch..., m, k] x [batch..., k, n].
typedef struct eng_mm_shape {
  int64_t m, k, n;
  int nb;  // batch rank
  int64_t batch[ENG_MAX_DIMS], abatch[ENG_MAX_DIMS], bbatch[ENG_MAX_DIMS];
} eng_mm_shape;

// a x b's shape in *s, and y's type and dims when y is not NULL; an error when they do not multiply.
int eng_ops__mm_analyse(const eng_tensor *a, const eng_tensor *b, eng_mm_shape *s, eng_tensor *y,
                        err *e);

#endif
