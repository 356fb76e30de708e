// kernels/base/dtype.c: element type tables.
#include "kernels/base/dtype.h"

#include <string.h>

static const struct {
  dtype t;
  size_t size;
  const char *wire;
  const char *config;
  int onnx;
} table[] = {
    {DT_INVALID, 0, "INVALID", "TYPE_INVALID", 0},
    {DT_BOOL, 1, "BOOL", "TYPE_BOOL", 9},
    {DT_UINT8, 1, "UINT8", "TYPE_UINT8", 2},
    {DT_UINT16, 2, "UINT16", "TYPE_UINT16", 4},
    {DT_UINT32, 4, "UINT32", "TYPE_UINT32", 12},
    {DT_UINT64, 8, "UINT64", "TYPE_UINT64", 13},
    {DT_INT8, 1, "INT8", "TYPE_INT8", 3},
    {DT_INT16, 2, "INT16", "TYPE_INT16", 5},
    {DT_INT32, 4, "INT32", "TYPE_INT32", 6},
    {DT_INT64, 8, "INT64", "TYPE_INT64", 7},
    {DT_FP16, 2, "FP16", "TYPE_FP16", 10},
    {DT_FP32, 4, "FP32", "TYPE_FP32", 1},
    {DT_FP64, 8, "FP64", "TYPE_FP64", 11},
    {DT_STRING, 0, "BYTES", "TYPE_STRING", 8},
    {DT_BF16, 2, "BF16", "TYPE_BF16", 16},
};
#define N_TYPES (sizeof table / sizeof table[0])

size_t dtype_size(dtype t) { return (unsigned)t < N_TYPES ? table[t].size : 0; }
const char *dtype_wire_name(dtype t) { return (unsigned)t < N_TYPES ? table[t].wire : "INVALID"; }
const char *dtype_config_name(dtype t) { return (unsigned)t < N_TYPES ? table[t].config : "TYPE_INVALID"; }
int dtype_to_onnx(dtype t) { return (unsigned)t < N_TYPES ? table[t].onnx : 0; }

dtype dtype_from_wire(const char *s) {
  for (size_t i = 1; i < N_TYPES; i++)
    if (strcmp(s, table[i].wire) == 0) return table[i].t;
  return DT_INVALID;
}

dtype dtype_from_onnx(int onnx_type) {
  for (size_t i = 1; i < N_TYPES; i++)
    if (table[i].onnx == onnx_type) return table[i].t;
  return DT_INVALID;
}
