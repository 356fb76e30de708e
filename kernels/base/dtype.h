// Tensor element types. The numbering is Triton's model_config DataType
// (TYPE_*), so config values map without a table; helpers convert to the
// KServe wire strings ("FP32") and ONNX TensorProto codes.
#ifndef INFERD_KERNELS_BASE_DTYPE_H
#define INFERD_KERNELS_BASE_DTYPE_H

#include <stddef.h>

typedef enum dtype {
  DT_INVALID = 0,
  DT_BOOL = 1,
  DT_UINT8 = 2,
  DT_UINT16 = 3,
  DT_UINT32 = 4,
  DT_UINT64 = 5,
  DT_INT8 = 6,
  DT_INT16 = 7,
  DT_INT32 = 8,
  DT_INT64 = 9,
  DT_FP16 = 10,
  DT_FP32 = 11,
  DT_FP64 = 12,
  DT_STRING = 13,
  DT_BF16 = 14,
} dtype;

// Bytes per element; 0 for DT_INVALID and DT_STRING (variable size).
size_t dtype_size(dtype t);
// KServe v2 datatype string ("FP32", "BYTES"...); "INVALID" for DT_INVALID.
const char *dtype_wire_name(dtype t);
// Parses a KServe datatype string; DT_INVALID when unknown.
dtype dtype_from_wire(const char *s);
// ONNX TensorProto.DataType <-> dtype; DT_INVALID / 0 when there is no match.
dtype dtype_from_onnx(int onnx_type);
int dtype_to_onnx(dtype t);
// Triton config name ("TYPE_FP32").
const char *dtype_config_name(dtype t);

#endif
