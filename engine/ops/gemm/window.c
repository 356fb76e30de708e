// engine/ops/gemm/window.c: the signal windows DFT and STFT take (HannWindow,
// HammingWindow, BlackmanWindow): a 1-D tensor of `size` cosine-sum weights,
// periodic (N = size) or symmetric (N = size - 1), computed in double and
// stored in output_datatype (a float type; FP32 inside the plan). size is
// read while planning. Listed in gemm.c's table beside DFT.
#include <math.h>

#include "engine/ops/gemm/gemm.h"
#include "engine/ops/ops_common.h"

// p->mode: 0 Hann, 1 Hamming, 2 Blackman; p->exclusive: periodic; p->to: the output type.
int eng_ops__parse_window(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  p->mode = n->op_type[0] == 'H' ? (n->op_type[2] == 'n' ? 0 : 1) : 2;
  p->exclusive = op_attr_int(n, "periodic", 1) != 0;
  p->to = dtype_from_onnx((int)op_attr_int(n, "output_datatype", 1));
  if (p->to != DT_FP32 && p->to != DT_FP16 && p->to != DT_FP64 && p->to != DT_BF16)
    return err_set(e, ERR_UNIMPLEMENTED, "unsupported: output_datatype %lld (only float types)",
                   (long long)op_attr_int(n, "output_datatype", 1));
  return 0;
}

static int window_size(const eng_tensor *t, int64_t *n, err *e) {
  int64_t v[1];
  int cnt;
  TRY(eng_ops__read_ints(t, "size", v, 1, &cnt, e));
  if (cnt != 1 || v[0] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "size must be one integer >= 0");
  *n = v[0];
  return 0;
}

int eng_ops__infer_window(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)n_in, (void)n_out;
  int64_t n = 0;
  TRY(window_size(&in[0], &n, e));
  out[0].dt = eng_ops_cpu_internal_dtype(p->to);
  out[0].ndims = 1;
  out[0].dims[0] = n;
  return 0;
}

int eng_ops__run_window(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  (void)n_in, (void)n_out;
  int64_t n = 0;
  TRY(window_size(&in[0], &n, e));
  double N = (double)(p->exclusive ? n : n - 1), pi2 = 2 * M_PI;
  float *y = out[0].data;
  for (int64_t i = 0; i < n; i++) {
    double x = N > 0 ? pi2 * (double)i / N : 0, w;
    if (p->mode == 0) w = 0.5 - 0.5 * cos(x);
    else if (p->mode == 1) w = 25.0 / 46.0 - (21.0 / 46.0) * cos(x);
    else w = 0.42 - 0.5 * cos(x) + 0.08 * cos(2 * x);
    y[i] = (float)w;
  }
  return 0;
}
