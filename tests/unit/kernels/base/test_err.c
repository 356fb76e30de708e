// Tests kernels/base/err.c (err_set, err_prefix, err_join) and kernels/base/dtype.c.
#include "check.h"
#include "kernels/base/dtype.h"
#include "kernels/base/err.h"

static int fails_with_context(err *e) {
  err_set(e, ERR_NOT_FOUND, "file %s", "x.onnx");
  return err_prefix(e, "model %s: ", "m");
}

int main(void) {
  err e = {0};
  CHECK_EQ_INT(err_set(&e, ERR_INVALID_ARGUMENT, "input '%s' expects %d dims", "x", 2), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "input 'x' expects 2 dims");
  CHECK_EQ_INT(fails_with_context(&e), ERR_NOT_FOUND);
  CHECK_EQ_STR(e.msg, "model m: file x.onnx");
  CHECK_EQ_STR(err_code_name(ERR_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  // err_join: reasons joined by "; "; a full buffer cuts the one that does not fit and drops the rest
  char why[12];
  size_t len = 0;
  err_join(why, sizeof why, &len, "a%d", 1);
  err_join(why, sizeof why, &len, "b");
  CHECK_EQ_STR(why, "a1; b");
  CHECK_EQ_INT((int)len, 5);
  err_join(why, sizeof why, &len, "%s", "cdefgh");
  CHECK_EQ_STR(why, "a1; b; cdef");
  CHECK_EQ_INT((int)len, (int)sizeof why - 1);
  err_join(why, sizeof why, &len, "dropped");
  CHECK_EQ_STR(why, "a1; b; cdef");
  CHECK_EQ_INT((int)len, (int)sizeof why - 1);
  CHECK_EQ_INT(dtype_size(DT_FP16), 2);
  CHECK_EQ_INT(dtype_size(DT_INT64), 8);
  CHECK_EQ_INT(dtype_from_wire("FP32"), DT_FP32);
  CHECK_EQ_INT(dtype_from_wire("BYTES"), DT_STRING);
  CHECK_EQ_INT(dtype_from_wire("F32"), DT_INVALID);
  CHECK_EQ_INT(dtype_from_onnx(1), DT_FP32);
  CHECK_EQ_INT(dtype_from_onnx(10), DT_FP16);
  CHECK_EQ_INT(dtype_to_onnx(DT_INT64), 7);
  CHECK_EQ_STR(dtype_wire_name(DT_BOOL), "BOOL");
  CHECK_EQ_STR(dtype_config_name(DT_FP32), "TYPE_FP32");
  CHECK_DONE();
}
