// engine/ops/attn/attn_linear.c: ONNX's LinearAttention (opset 27): causal
// linear attention over [B, T, H * D] query, key and value with a carried
// state [B, Hkv, dk, dv] (past_state in, present_state out) and the linear,
// gated (decay), delta (beta) and gated-delta update rules; grouped-query
// heads. Listed in attn.c's table; the recurrence is kernels/attn/k_linear_attn.c.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/attn/attn.h"
#include "engine/ops/ops_common.h"
#include "kernels/attn/k_linear_attn.h"

// p->node keeps the node; the attributes are read from it: q_num_heads,
// kv_num_heads, scale (0: 1 / sqrt(dk)), update_rule.
int eng_ops__parse_linear_attn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  int64_t hq = op_attr_int(n, "q_num_heads", 0), hkv = op_attr_int(n, "kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld)",
                   (long long)hq, (long long)hkv);
  const char *rule = op_attr_str(n, "update_rule", "gated_delta");
  static const char *const rules[] = {"linear", "gated", "delta", "gated_delta", NULL};
  TRY(eng_ops__enum(rule, rules, "update_rule", &p->mode, e));
  p->node = n;
  p->alpha = op_attr_float(n, "scale", 0);
  return 0;
}

typedef struct la_shape {
  int64_t B, T, Hq, Hkv, dk, dv, beta_heads;
  int gating, delta, decay_per_dim;
} la_shape;

static int la_check(const eng_op_params *p, const eng_tensor *in, int n_in, la_shape *s, err *e) {
  s->Hq = op_attr_int(p->node, "q_num_heads", 1);
  s->Hkv = op_attr_int(p->node, "kv_num_heads", 1);
  s->gating = p->mode == 1 || p->mode == 3;
  s->delta = p->mode >= 2;
  for (int k = 0; k < 3; k++)
    if (in[k].dt != DT_FP32 || in[k].ndims != 3)
      return err_set(e, ERR_INVALID_ARGUMENT, "query, key and value must be float [B, T, H * D]");
  s->B = in[0].dims[0], s->T = in[0].dims[1];
  if (in[0].dims[2] % s->Hq || in[1].dims[2] % s->Hkv || in[2].dims[2] % s->Hkv)
    return err_set(e, ERR_INVALID_ARGUMENT, "the last dims are not multiples of the head counts");
  s->dk = in[0].dims[2] / s->Hq, s->dv = in[2].dims[2] / s->Hkv;
  for (int k = 1; k < 3; k++)
    if (in[k].dims[0] != s->B || in[k].dims[1] != s->T)
      return err_set(e, ERR_INVALID_ARGUMENT, "query, key and value must share B and T");
  if (in[1].dims[2] != s->Hkv * s->dk) return err_set(e, ERR_INVALID_ARGUMENT, "key must be [B, T, kv_num_heads * dk]");
  if (op_given(in, n_in, 3) && (in[3].ndims != 4 || in[3].dims[0] != s->B || in[3].dims[1] != s->Hkv ||
                                in[3].dims[2] != s->dk || in[3].dims[3] != s->dv))
    return err_set(e, ERR_INVALID_ARGUMENT, "past_state must be [B, kv_num_heads, dk, dv]");
  if (s->gating != op_given(in, n_in, 4))
    return err_set(e, ERR_INVALID_ARGUMENT, "decay is %s by this update_rule", s->gating ? "required" : "forbidden");
  if (s->delta != op_given(in, n_in, 5))
    return err_set(e, ERR_INVALID_ARGUMENT, "beta is %s by this update_rule", s->delta ? "required" : "forbidden");
  if (s->gating) {
    const eng_tensor *d = &in[4];
    if (d->ndims != 3 || d->dims[0] != s->B || d->dims[1] != s->T ||
        (d->dims[2] != s->Hkv && d->dims[2] != s->Hkv * s->dk))
      return err_set(e, ERR_INVALID_ARGUMENT, "decay must be [B, T, kv_num_heads] or [B, T, kv_num_heads * dk]");
    s->decay_per_dim = d->dims[2] == s->Hkv * s->dk && s->dk != 1;
  }
  if (s->delta) {
    const eng_tensor *b = &in[5];
    if (b->ndims != 3 || b->dims[0] != s->B || b->dims[1] != s->T || (b->dims[2] != s->Hkv && b->dims[2] != 1))
      return err_set(e, ERR_INVALID_ARGUMENT, "beta must be [B, T, kv_num_heads] or [B, T, 1]");
    s->beta_heads = b->dims[2];
  }
  return 0;
}

int eng_ops__infer_linear_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                               err *e) {
  la_shape s = {0};
  TRY(la_check(p, in, n_in, &s, e));
  out[0] = in[0];
  out[0].data = NULL;
  out[0].dims[2] = s.Hq * s.dv;
  if (n_out > 1) {
    memset(&out[1], 0, sizeof out[1]);
    out[1].dt = DT_FP32;
    out[1].ndims = 4;
    out[1].dims[0] = s.B, out[1].dims[1] = s.Hkv, out[1].dims[2] = s.dk, out[1].dims[3] = s.dv;
  }
  return 0;
}

int eng_ops__run_linear_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  la_shape s = {0};
  TRY(la_check(p, in, n_in, &s, e));
  size_t sn = (size_t)(s.B * s.Hkv * s.dk * s.dv);
  int own = !(n_out > 1 && out[1].dt != DT_INVALID);
  float *state = own ? malloc((sn ? sn : 1) * sizeof *state) : out[1].data;
  float *scratch = malloc((size_t)(s.dv > 0 ? s.dv : 1) * sizeof *scratch);
  if (!state || !scratch) {
    if (own) free(state);
    free(scratch);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (op_given(in, n_in, 3)) memcpy(state, in[3].data, sn * sizeof *state);
  else memset(state, 0, sn * sizeof *state);
  float scale = p->alpha != 0 ? p->alpha : 1.0f / sqrtf((float)s.dk);
  k_linear_attn(out[0].data, state, in[0].data, in[1].data, in[2].data, s.gating ? in[4].data : NULL,
                s.decay_per_dim, s.delta ? in[5].data : NULL, s.beta_heads, s.B, s.T, s.Hq, s.Hkv, s.dk, s.dv, scale,
                scratch);
  if (own) free(state);
  free(scratch);
  return 0;
}
