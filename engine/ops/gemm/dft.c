// engine/ops/gemm/dft.c: DFT (opset 17: axis an attribute, default 1; opset 20: axis
// the optional third input, default -2), real (last dim 1) or complex (last dim 2)
// FP32 signals, dft_length (zero-padding or truncating the signal) and the axis
// read while planning, inverse, onesided. The sum is the C reference
// kernels/gemm/k_dft.c; gemm.c's table lists it (a linear map along one axis);
// no CUDA path yet. FNet's token mixing (torch.fft.fftn, dynamo exporter) is the
// model that needs it. eng_op_params has no DFT fields: axis is p->axis, inverse
// p->reverse, onesided p->exclusive, "axis is input 2" p->has_ints.
#include "engine/ops/gemm/gemm.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

int eng_ops__parse_dft(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g;
  p->has_ints = opset >= 20;
  p->axis = p->has_ints ? -2 : op_attr_int(n, "axis", 1);
  p->reverse = op_attr_int(n, "inverse", 0) != 0;
  p->exclusive = op_attr_int(n, "onesided", 0) != 0;
  if (p->reverse && p->exclusive)
    return err_set(e, ERR_UNIMPLEMENTED, "unsupported: an inverse one-sided DFT (complex-to-real)");
  return 0;
}

// The signal's axis, its length, the transform's length and the output bins.
static int dft_shape(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *axis, int64_t *len,
                     int64_t *bins, err *e) {
  const eng_tensor *x = &in[0];
  int r = x->ndims;
  if (x->dt != DT_FP32) return err_set(e, ERR_UNIMPLEMENTED, "unsupported element type %s", dtype_wire_name(x->dt));
  if (r < 2) return err_set(e, ERR_INVALID_ARGUMENT, "input must have rank >= 2 ([..., 1 or 2]), got %d", r);
  if (x->dims[r - 1] != 1 && x->dims[r - 1] != 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "the last dim must be 1 (real) or 2 (complex), got %lld",
                   (long long)x->dims[r - 1]);
  int64_t a = p->axis;
  if (p->has_ints && op_given(in, n_in, 2)) {
    int64_t v[1];
    int cnt;
    TRY(eng_ops__read_ints(&in[2], "axis", v, 1, &cnt, e));
    if (cnt != 1) return err_set(e, ERR_INVALID_ARGUMENT, "axis must be a scalar");
    a = v[0];
  }
  if (a < 0) a += r;
  if (a < 0 || a > r - 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld outside [-%d, -2] and [0, %d]", (long long)p->axis, r, r - 2);
  *axis = a;
  *len = x->dims[a];
  if (op_given(in, n_in, 1)) {
    int64_t v[1];
    int cnt;
    TRY(eng_ops__read_ints(&in[1], "dft_length", v, 1, &cnt, e));
    if (cnt != 1 || v[0] < 1) return err_set(e, ERR_INVALID_ARGUMENT, "dft_length must be one positive value");
    *len = v[0];
  }
  if (p->exclusive && x->dims[r - 1] == 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "onesided needs a real input (last dim 1)");
  *bins = p->exclusive ? *len / 2 + 1 : *len;
  return 0;
}

int eng_ops__infer_dft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int64_t axis, len, bins, d[ENG_MAX_DIMS];
  TRY(dft_shape(p, in, n_in, &axis, &len, &bins, e));
  for (int i = 0; i < in[0].ndims; i++) d[i] = in[0].dims[i];
  d[axis] = bins;
  d[in[0].ndims - 1] = 2;
  op_set_out(&out[0], DT_FP32, in[0].ndims, d);
  return eng_ops__checked_numel(in[0].ndims, d, "result", e);
}

int eng_ops__run_dft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int64_t axis, len, bins;
  TRY(dft_shape(p, in, n_in, &axis, &len, &bins, e));
  int r = in[0].ndims;
  size_t outer = (size_t)op_prod(in[0].dims, 0, (int)axis), inner = (size_t)op_prod(in[0].dims, (int)axis + 1, r - 1);
  if (k_dft_f32(out[0].data, in[0].data, outer, in[0].dims[axis], inner, in[0].dims[r - 1] == 2, len, bins,
                p->reverse) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "DFT: out of memory for %lld twiddles", (long long)len);
  return 0;
}
