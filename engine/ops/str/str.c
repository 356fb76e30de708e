// engine/ops/str/str.c: Cast to and from STRING on the CPU (str.h). The
// numbers are printed and parsed as onnxruntime does (kernels/str/k_str.c).
#include "engine/ops/str/str.h"

#include <stdio.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "kernels/str/k_str.h"

int eng_ops_str_supports(const char *op_type) {
  static const char *const ops[] = {"Cast",      "Identity", "Flatten", "Reshape", "Squeeze",        "Unsqueeze",
                                    "Dropout",   "Transpose", "Concat", "Shape",   "Gather",         "Slice",
                                    "Expand",    "GatherElements", "GatherND", "Split", "Where",
                                    "ai.onnx.ml.LabelEncoder", "ai.onnx.ml.OneHotEncoder",
                                    "ai.onnx.ml.TreeEnsembleClassifier", "ai.onnx.ml.LinearClassifier",
                                    "ai.onnx.ml.SVMClassifier"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i], op_type) == 0) return 1;
  return 0;
}

// The kernels' type of the numeric side of a Cast; -1 for none. The same
// answers as eng_ops_elem_of, which lives in elem.c: elem.c calls this file
// for Cast, so this file does not call back (tests/unit/check_circles.py).
static int num_elem(dtype t, k_elem *k) {
  static const struct {
    dtype t;
    k_elem k;
  } map[] = {{DT_FP32, K_F32}, {DT_FP64, K_F64}, {DT_FP16, K_F16}, {DT_INT64, K_I64}, {DT_INT32, K_I32},
             {DT_INT16, K_I16}, {DT_INT8, K_I8},   {DT_UINT8, K_U8},  {DT_UINT16, K_U16}, {DT_UINT32, K_U32},
             {DT_UINT64, K_U64}, {DT_BOOL, K_BOOL}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (map[i].t == t) return *k = map[i].k, 0;
  return -1;
}

int eng_ops_str_cast_infer(const eng_op_params *p, const eng_tensor *in, eng_tensor *out, err *e) {
  k_elem k;
  if (in[0].dt != DT_STRING && num_elem(in[0].dt, &k) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: Cast from %s to BYTES", dtype_wire_name(in[0].dt));
  op_set_out(&out[0], eng_ops_cpu_internal_dtype(p->to), in[0].ndims, in[0].dims);
  return 0;
}

// A float target narrower than FP32 travels as FP32 inside a plan, with
// the narrow type's precision (as elem.c's Cast does for numbers).
static void round_narrow(dtype to, float *y, size_t n) {
  if (to != DT_FP16 && to != DT_BF16) return;
  for (size_t i = 0; i < n; i++) {
    if (to == DT_FP16) {
      uint16_t h;
      k_f32_to_f16(&h, &y[i], 1);
      k_f16_to_f32(&y[i], &h, 1);
    } else {
      uint32_t u;
      memcpy(&u, &y[i], 4);
      if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
      u &= 0xffff0000u;
      memcpy(&y[i], &u, 4);
    }
  }
}

int eng_ops_str_cast_run(const eng_op_params *p, const eng_tensor *in, eng_tensor *out, err *e) {
  size_t n = op_numel(&in[0]);
  if (!n) return 0;
  k_elem k;
  if (in[0].dt == DT_STRING && out[0].dt == DT_STRING) {
    if (out[0].data != in[0].data) memmove(out[0].data, in[0].data, n * sizeof(k_str));
    return 0;
  }
  if (out[0].dt == DT_STRING) {
    if (num_elem(in[0].dt, &k) != 0)
      return err_set(e, ERR_INTERNAL, "Cast from %s to BYTES has no kernel", dtype_wire_name(in[0].dt));
    k_str_from_num(out[0].data, in[0].data, k, n);
    return 0;
  }
  if (num_elem(out[0].dt, &k) != 0)
    return err_set(e, ERR_INTERNAL, "Cast from BYTES to %s has no kernel", dtype_wire_name(out[0].dt));
  size_t bad = 0;
  const k_str *x = in[0].data;
  if (k_str_to_num(out[0].data, k, x, n, &bad) != 0) {
    // the client's bytes go into the message escaped and cut (they may be anything)
    char shown[40];
    size_t m = 0, i = 0;
    const uint8_t *s = k_str_data(&x[bad]);
    for (; i < x[bad].n && m + 5 < sizeof shown; i++)
      m += (size_t)snprintf(shown + m, sizeof shown - m,
                            s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'' ? "%c" : "\\x%02x", s[i]);
    shown[m] = '\0';
    return err_set(e, ERR_INVALID_ARGUMENT, "Cast to %s: element %zu ('%s%s') is not a number in range",
                   dtype_wire_name(p->to), bad, shown, i < x[bad].n ? "..." : "");
  }
  if (out[0].dt == DT_FP32) round_narrow(p->to, out[0].data, n);
  return 0;
}
