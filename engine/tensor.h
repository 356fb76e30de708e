// Tensor descriptions shared by the config, graph, plan and server layers.
#ifndef INFERD_ENGINE_TENSOR_H
#define INFERD_ENGINE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/dtype.h"
#include "kernels/str/k_str.h"

#define ENG_MAX_DIMS 8
#define ENG_NAME_MAX 256

// A graph or model input/output as declared: dims of -1 are dynamic
// (a symbolic or unknown ONNX dimension).
typedef struct eng_io {
  char name[ENG_NAME_MAX];
  dtype dt;
  int ndims;
  int64_t dims[ENG_MAX_DIMS];
} eng_io;

// A concrete tensor: full shape (batch dimension included when the model
// batches) and a pointer to its contiguous row-major bytes.
typedef struct eng_tensor {
  dtype dt;
  int ndims;
  int64_t dims[ENG_MAX_DIMS];
  void *data;
  size_t bytes;
} eng_tensor;

// Number of elements of a shape; 1 for a scalar (ndims 0).
static inline int64_t eng_numel(int ndims, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndims; i++) n *= dims[i];
  return n;
}

// Bytes of one element inside a plan: the type's size, and for STRING the
// plan's fixed-size view (k_str, kernels/str/k_str.h). Outside a plan a
// STRING tensor is its wire layout (kernels/base/strwire.h), whose size
// only its bytes tell.
static inline size_t eng_elem_size(dtype t) { return t == DT_STRING ? sizeof(k_str) : dtype_size(t); }

// Bytes of t's elements inside a plan (eng_elem_size).
static inline size_t eng_tensor_bytes(const eng_tensor *t) {
  return (size_t)eng_numel(t->ndims, t->dims) * eng_elem_size(t->dt);
}

#endif
