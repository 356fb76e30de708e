// engine/ops/conv/col2im.c: Col2Im (im2col's inverse: sums each column of
// [N, C * prod(block), L] back into an image [N, C, image...], any spatial
// rank, with strides, dilations and pads) and CausalConvWithState (a causal
// depthwise 1-D convolution over [past_state, input], optional bias and
// SiLU, also giving the last k - 1 positions as present_state) and
// MaxUnpool (MaxPool's inverse from its indices), listed in conv.c's table. Col2Im's image_shape and block_shape are read while
// planning (host_in).
#include <math.h>
#include <string.h>

#include "engine/ops/conv/conv.h"
#include "engine/ops/ops_common.h"

// --- Col2Im

typedef struct c2i {
  int sp;  // spatial rank
  int64_t img[ENG_MAX_DIMS], blk[ENG_MAX_DIMS], dil[ENG_MAX_DIMS], str[ENG_MAX_DIMS], pb[ENG_MAX_DIMS],
      pe[ENG_MAX_DIMS], cols[ENG_MAX_DIMS];
  int64_t C, K, L;
} c2i;

static int attr_or(const eng_node *n, const char *name, int64_t *v, int cnt, int64_t def, err *e) {
  int got;
  TRY(eng_ops__attr_ints(n, name, v, 2 * ENG_MAX_DIMS, &got, e));
  if (got < 0) {
    for (int k = 0; k < cnt; k++) v[k] = def;
  } else if (got != cnt) {
    return err_set(e, ERR_INVALID_ARGUMENT, "'%s' has %d values, expected %d", name, got, cnt);
  }
  return 0;
}

static int c2i_geometry(const eng_op_params *p, const eng_tensor *in, c2i *g, err *e) {
  int ni, nb;
  TRY(eng_ops__read_ints(&in[1], "image_shape", g->img, ENG_MAX_DIMS, &ni, e));
  TRY(eng_ops__read_ints(&in[2], "block_shape", g->blk, ENG_MAX_DIMS, &nb, e));
  if (ni != nb || ni < 1 || ni + 2 > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "image_shape has %d values, block_shape %d", ni, nb);
  g->sp = ni;
  int64_t pads[2 * ENG_MAX_DIMS];
  TRY(attr_or(p->node, "dilations", g->dil, ni, 1, e));
  TRY(attr_or(p->node, "strides", g->str, ni, 1, e));
  TRY(attr_or(p->node, "pads", pads, 2 * ni, 0, e));
  const eng_tensor *x = &in[0];
  if (x->ndims != 3) return err_set(e, ERR_INVALID_ARGUMENT, "input must be [N, C * prod(block_shape), L]");
  g->K = 1, g->L = 1;
  for (int d = 0; d < ni; d++) {
    g->pb[d] = pads[d], g->pe[d] = pads[ni + d];
    if (g->blk[d] < 1 || g->dil[d] < 1 || g->str[d] < 1 || g->img[d] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "block, dilation and stride must be >= 1");
    g->K *= g->blk[d];
    g->cols[d] = (g->img[d] + g->pb[d] + g->pe[d] - g->dil[d] * (g->blk[d] - 1) - 1) / g->str[d] + 1;
    if (g->cols[d] < 1) return err_set(e, ERR_INVALID_ARGUMENT, "no sliding block fits dim %d", d);
    g->L *= g->cols[d];
  }
  if (x->dims[1] % g->K != 0 || x->dims[2] != g->L)
    return err_set(e, ERR_INVALID_ARGUMENT, "input is [%lld, %lld, %lld], expected [N, C * %lld, %lld]",
                   (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2], (long long)g->K,
                   (long long)g->L);
  g->C = x->dims[1] / g->K;
  return 0;
}

int eng_ops__infer_col2im(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)n_in, (void)n_out;
  c2i g;
  TRY(c2i_geometry(p, in, &g, e));
  out[0] = in[0];
  out[0].data = NULL;
  out[0].ndims = 2 + g.sp;
  out[0].dims[1] = g.C;
  for (int d = 0; d < g.sp; d++) out[0].dims[2 + d] = g.img[d];
  return 0;
}

int eng_ops__run_col2im(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  (void)n_in, (void)n_out;
  if (in[0].dt != DT_FP32) return err_set(e, ERR_UNIMPLEMENTED, "unsupported element type %s", dtype_wire_name(in[0].dt));
  c2i g;
  TRY(c2i_geometry(p, in, &g, e));
  const float *x = in[0].data;
  float *y = out[0].data;
  int64_t img_n = 1;
  for (int d = 0; d < g.sp; d++) img_n *= g.img[d];
  memset(y, 0, op_numel(&out[0]) * sizeof *y);
  for (int64_t nc = 0; nc < in[0].dims[0] * g.C; nc++)
    for (int64_t k = 0; k < g.K; k++)
      for (int64_t l = 0; l < g.L; l++) {
        // k and l as multi-indices (last dim fastest), then the image position
        int64_t kr = k, lr = l, at = 0;
        int inside = 1;
        int64_t kk[ENG_MAX_DIMS], ll[ENG_MAX_DIMS];
        for (int d = g.sp - 1; d >= 0; d--) {
          kk[d] = kr % g.blk[d], kr /= g.blk[d];
          ll[d] = lr % g.cols[d], lr /= g.cols[d];
        }
        for (int d = 0; d < g.sp; d++) {
          int64_t pos = ll[d] * g.str[d] - g.pb[d] + kk[d] * g.dil[d];
          if (pos < 0 || pos >= g.img[d]) inside = 0;
          at = at * g.img[d] + pos;
        }
        if (inside) y[nc * img_n + at] += x[(nc * g.K + k) * g.L + l];
      }
  return 0;
}

// --- CausalConvWithState: input [B, C, T], weight [C, 1, k], bias [C],
// past_state [B, C, k - 1] -> output [B, C, T], present_state [B, C, k - 1]

int eng_ops__parse_causal_conv(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const char *act = op_attr_str(n, "activation", "none");
  if (strcmp(act, "none") == 0) p->mode = 0;
  else if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0) p->mode = 1;
  else return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: activation '%s' (none, silu, swish)", act);
  return 0;
}

int eng_ops__infer_causal_conv(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                               err *e) {
  (void)p;
  const eng_tensor *x = &in[0], *w = &in[1];
  if (x->dt != DT_FP32 || x->ndims != 3 || w->ndims != 3 || w->dims[0] != x->dims[1] || w->dims[1] != 1 ||
      w->dims[2] < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "input must be a float [B, C, T] and weight [C, 1, k]");
  int64_t k = w->dims[2];
  if (op_given(in, n_in, 2) && (in[2].ndims != 1 || in[2].dims[0] != x->dims[1]))
    return err_set(e, ERR_INVALID_ARGUMENT, "bias must be [C]");
  if (op_given(in, n_in, 3) && (in[3].ndims != 3 || in[3].dims[0] != x->dims[0] || in[3].dims[1] != x->dims[1] ||
                                in[3].dims[2] != k - 1))
    return err_set(e, ERR_INVALID_ARGUMENT, "past_state must be [B, C, k - 1]");
  out[0] = *x;
  out[0].data = NULL;
  if (n_out > 1) {
    out[1] = *x;
    out[1].data = NULL;
    out[1].dims[2] = k - 1;
  }
  return 0;
}

int eng_ops__run_causal_conv(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  (void)e;
  const eng_tensor *x = &in[0];
  int64_t B = x->dims[0], C = x->dims[1], T = x->dims[2], k = in[1].dims[2], P = T + k - 1;
  const float *xs = x->data, *w = in[1].data, *bias = op_given(in, n_in, 2) ? in[2].data : NULL;
  const float *past = op_given(in, n_in, 3) ? in[3].data : NULL;
  float *y = out[0].data, *st = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : NULL;
  for (int64_t bc = 0; bc < B * C; bc++) {
    int64_t c = bc % C;
    // the padded row [past (k - 1), input (T)], read by position
#define PADDED(i) ((i) < k - 1 ? (past ? past[bc * (k - 1) + (i)] : 0.0f) : xs[bc * T + (i) - (k - 1)])
    for (int64_t t = 0; t < T; t++) {
      double acc = bias ? bias[c] : 0;
      for (int64_t j = 0; j < k; j++) acc += (double)w[c * k + j] * PADDED(t + j);
      float v = (float)acc;
      if (p->mode == 1) v = v / (1.0f + expf(-v));
      y[bc * T + t] = v;
    }
    if (st)
      for (int64_t j = 0; j < k - 1; j++) st[bc * (k - 1) + j] = PADDED(P - (k - 1) + j);
#undef PADDED
  }
  return 0;
}

// --- MaxUnpool: X [N, C, spatial...] and its MaxPool indices I into zeros
// of the unpooled shape (from kernel_shape, strides, pads), placed at the
// start of output_shape when that input is given (read while planning).

static int unpool_shape(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *inferred, int64_t *y,
                        err *e) {
  const eng_tensor *x = &in[0];
  int sp = x->ndims - 2;
  if (sp < 1 || x->dt != DT_FP32) return err_set(e, ERR_INVALID_ARGUMENT, "X must be a float [N, C, spatial...]");
  if (in[1].dt != DT_INT64 || in[1].ndims != x->ndims ||
      memcmp(in[1].dims, x->dims, (size_t)x->ndims * sizeof x->dims[0]) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "I must be INT64 of X's shape");
  int64_t ks[ENG_MAX_DIMS], st[ENG_MAX_DIMS], pads[2 * ENG_MAX_DIMS];
  int nk;
  TRY(eng_ops__attr_ints(p->node, "kernel_shape", ks, ENG_MAX_DIMS, &nk, e));
  if (nk != sp) return err_set(e, ERR_INVALID_ARGUMENT, "kernel_shape must have %d values", sp);
  TRY(attr_or(p->node, "strides", st, sp, 1, e));
  TRY(attr_or(p->node, "pads", pads, 2 * sp, 0, e));
  inferred[0] = x->dims[0], inferred[1] = x->dims[1];
  for (int d = 0; d < sp; d++) inferred[2 + d] = (x->dims[2 + d] - 1) * st[d] - (pads[d] + pads[sp + d]) + ks[d];
  memcpy(y, inferred, (size_t)x->ndims * sizeof *y);
  if (op_given(in, n_in, 2)) {
    int n;
    TRY(eng_ops__read_ints(&in[2], "output_shape", y, ENG_MAX_DIMS, &n, e));
    if (n != x->ndims) return err_set(e, ERR_INVALID_ARGUMENT, "output_shape must have %d values", x->ndims);
    for (int d = 0; d < n; d++)
      if (y[d] < inferred[d])
        return err_set(e, ERR_INVALID_ARGUMENT, "output_shape[%d] = %lld is below the unpooled %lld", d,
                       (long long)y[d], (long long)inferred[d]);
  }
  return 0;
}

int eng_ops__infer_max_unpool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                              err *e) {
  (void)n_out;
  int64_t inf[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(unpool_shape(p, in, n_in, inf, y, e));
  out[0] = in[0];
  out[0].data = NULL;
  memcpy(out[0].dims, y, sizeof y);
  return 0;
}

int eng_ops__run_max_unpool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e) {
  (void)n_out;
  int64_t inf[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(unpool_shape(p, in, n_in, inf, y, e));
  int r = in[0].ndims;
  size_t total = (size_t)eng_numel(r, inf), n = op_numel(&in[0]);
  float *o = out[0].data;
  memset(o, 0, op_numel(&out[0]) * sizeof *o);
  const float *x = in[0].data;
  const int64_t *idx = in[1].data;
  for (size_t i = 0; i < n; i++) {
    if (idx[i] < 0 || (size_t)idx[i] >= total)
      return err_set(e, ERR_INVALID_ARGUMENT, "I[%zu] = %lld is outside the unpooled tensor (%zu elements)", i,
                     (long long)idx[i], total);
    // the flat index in the unpooled shape, placed at the start of y's
    size_t rest = (size_t)idx[i], at = 0, stride = 1;
    for (int d = r - 1; d >= 0; d--) {
      at += (rest % (size_t)inf[d]) * stride;
      rest /= (size_t)inf[d];
      stride *= (size_t)y[d];
    }
    o[at] = x[i];
  }
  return 0;
}
