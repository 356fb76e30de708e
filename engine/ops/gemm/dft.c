// engine/ops/gemm/dft.c: DFT (opset 17: axis an attribute, default 1; opset 20: axis
// the optional third input, default -2), real (last dim 1) or complex (last dim 2)
// FP32 signals, dft_length (zero-padding or truncating the signal) and the axis
// read while planning, inverse, onesided. The sum is the C reference
// kernels/gemm/k_dft.c; gemm.c's table lists it (a linear map along one axis);
// no CUDA path yet. FNet's token mixing (torch.fft.fftn, dynamo exporter) is the
// model that needs it. eng_op_params has no DFT fields: axis is p->axis, inverse
// p->reverse, onesided p->exclusive, "axis is input 2" p->has_ints.
#include <stdlib.h>
#include <string.h>

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

// --- STFT: signal [B, L, 1 or 2], frame_step, window [W] (optional),
// frame_length (optional): [B, frames, bins, 2], each frame's windowed DFT
// of frame_length points (bins: frame_length / 2 + 1 when onesided).
// frame_step and frame_length are read while planning. p->exclusive: onesided.

int eng_ops__parse_stft(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->exclusive = op_attr_int(n, "onesided", 1) != 0;
  return 0;
}

typedef struct stft_geom {
  int64_t step, len, frames, bins, win;
} stft_geom;

static int stft_geom_of(const eng_op_params *p, const eng_tensor *in, int n_in, stft_geom *s, err *e) {
  const eng_tensor *x = &in[0];
  if (x->dt != DT_FP32 || x->ndims != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
    return err_set(e, ERR_INVALID_ARGUMENT, "signal must be a float [B, L, 1 or 2]");
  int64_t v[1];
  int cnt;
  TRY(eng_ops__read_ints(&in[1], "frame_step", v, 1, &cnt, e));
  if (cnt != 1 || v[0] < 1) return err_set(e, ERR_INVALID_ARGUMENT, "frame_step must be one integer >= 1");
  s->step = v[0];
  s->win = op_given(in, n_in, 2) ? in[2].dims[0] : -1;
  if (op_given(in, n_in, 2) && (in[2].ndims != 1 || in[2].dt != DT_FP32))
    return err_set(e, ERR_INVALID_ARGUMENT, "window must be a float [W]");
  if (op_given(in, n_in, 3)) {
    TRY(eng_ops__read_ints(&in[3], "frame_length", v, 1, &cnt, e));
    if (cnt != 1 || v[0] < 1) return err_set(e, ERR_INVALID_ARGUMENT, "frame_length must be one integer >= 1");
    s->len = v[0];
  } else {
    s->len = s->win >= 0 ? s->win : x->dims[1];
  }
  if (s->win < 0) s->win = s->len;
  if (s->len > x->dims[1]) return err_set(e, ERR_INVALID_ARGUMENT, "frame_length %lld exceeds the signal (%lld)",
                                          (long long)s->len, (long long)x->dims[1]);
  s->frames = 1 + (x->dims[1] - s->len) / s->step;
  s->bins = p->exclusive ? s->len / 2 + 1 : s->len;
  return 0;
}

int eng_ops__infer_stft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  stft_geom s;
  TRY(stft_geom_of(p, in, n_in, &s, e));
  memset(&out[0], 0, sizeof out[0]);
  out[0].dt = DT_FP32;
  out[0].ndims = 4;
  out[0].dims[0] = in[0].dims[0], out[0].dims[1] = s.frames, out[0].dims[2] = s.bins, out[0].dims[3] = 2;
  return 0;
}

int eng_ops__run_stft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  stft_geom s;
  TRY(stft_geom_of(p, in, n_in, &s, e));
  const eng_tensor *x = &in[0];
  int64_t L = x->dims[1], c = x->dims[2];
  const float *xs = x->data, *w = op_given(in, n_in, 2) ? in[2].data : NULL;
  float *frame = malloc((size_t)(s.len * c > 0 ? s.len * c : 1) * sizeof *frame);
  if (!frame) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  float *y = out[0].data;
  for (int64_t b = 0; b < x->dims[0]; b++)
    for (int64_t f = 0; f < s.frames; f++) {
      // the frame: window_size samples from f * step, weighted, zero past the signal or the window
      for (int64_t j = 0; j < s.len; j++)
        for (int64_t k = 0; k < c; k++) {
          int64_t at = f * s.step + j;
          float v = j < s.win && at < L ? xs[(b * L + at) * c + k] : 0.0f;
          frame[j * c + k] = w ? (j < s.win ? v * w[j] : 0.0f) : v;
        }
      if (k_dft_f32(y + ((b * s.frames + f) * s.bins) * 2, frame, 1, s.len, 1, c == 2, s.len, s.bins, 0) != 0) {
        free(frame);
        return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      }
    }
  free(frame);
  return 0;
}
