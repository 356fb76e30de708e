// engine/ops/conv/lppool.c: LpPool on the CPU: the p-th root of the sum of |x|^p
// over each window (padding adds nothing), as ONNX's node tests compute it. The
// window (kernel_shape, strides, pads, auto_pad, dilations, ceil_mode) is
// AveragePool's, so the node is parsed, shaped and pooled as an AveragePool
// (padding counted) of |x|^p through the family's reference path, times the
// kernel size.
// conv.c's table lists it; no CUDA path yet.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/conv/lppool.h"

#include "engine/ops/conv/conv.h"
#include "engine/ops/ops.h"
#include "engine/ops/ops_common.h"

// p->beta: the exponent p.
int eng_ops__parse_lppool(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  eng_node avg = *n;
  avg.op_type = (char *)"AveragePool";
  TRY(eng_conv_parse(g, &avg, opset, p, e));
  p->layouts = 0;  // plain activations in and out: the reference path
  p->fusable = 0;
  p->conv.count_include_pad = 1;  // padding counts as zeros: kernel size x that average is the plain sum
  int64_t pw = op_attr_int(n, "p", 2);
  if (pw < 1) return err_set(e, ERR_INVALID_ARGUMENT, "p must be positive, got %lld", (long long)pw);
  p->beta = (float)pw;
  return 0;
}

int eng_ops__infer_lppool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  TRY(eng_ops__need_f32(&in[0], "X", e));
  return eng_conv_infer(p, in, n_in, out, n_out, e);
}

int eng_ops__run_lppool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  size_t n = op_numel(&in[0]), ny = op_numel(&out[0]);
  float *pw = malloc((n ? n : 1) * sizeof *pw);
  if (!pw) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  const float *x = in[0].data;
  double pe = p->beta;
  for (size_t i = 0; i < n; i++) pw[i] = (float)pow(fabs((double)x[i]), pe);
  eng_tensor t = in[0];
  t.data = pw;
  int rc = eng_conv_run_ref(p, &t, n_in, out, n_out, e);
  free(pw);
  TRY(rc);
  double k = 1.0;
  for (int d = 0; d < p->conv.nsp; d++) k *= (double)p->conv.kernel[d];
  float *y = out[0].data;
  for (size_t i = 0; i < ny; i++) y[i] = (float)pow(k * y[i], 1.0 / pe);
  return 0;
}
