// engine/ops/attn/attn_onnx.c: ONNX's own Attention op (opset 23 and later) on the
// CPU, through the C reference k_attention (kernels/attn/k_attn.c): Q, K, V as
// 4-D [B, H, S, D] or 3-D [B, S, H*D] (q_num_heads, kv_num_heads), grouped-query
// heads, an additive or bool attn_mask broadcast to [B, Hq, Sq, T] (shorter in
// its last dim: padded with -inf), a past key/value cache and the present
// outputs, nonpad_kv_seqlen, is_causal (bottom-right aligned to the cache),
// sliding windows, softcap, scale, and the qk_matmul_output of every mode.
// softmax_precision is accepted and ignored: the softmax runs in double.
// RotaryEmbedding (opset 23) too, through k_rotary.
// attn.c's table lists it beside the fused inferd.Attention; no CUDA path yet.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/attn/attn.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// p->alpha: scale (0: 1/sqrt(head size)); p->beta: softcap; p->upper:
// is_causal; p->mode: qk_matmul_output_mode; p->ints: q_num_heads,
// kv_num_heads, left_window_size, right_window_size.
int eng_ops__parse_onnx_attn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  p->alpha = op_attr_float(n, "scale", 0.0f);
  p->beta = op_attr_float(n, "softcap", 0.0f);
  p->upper = op_attr_int(n, "is_causal", 0) != 0;
  p->mode = (int)op_attr_int(n, "qk_matmul_output_mode", 0);
  p->ints[0] = op_attr_int(n, "q_num_heads", 0);
  p->ints[1] = op_attr_int(n, "kv_num_heads", 0);
  p->ints[2] = op_attr_int(n, "left_window_size", -1);
  p->ints[3] = op_attr_int(n, "right_window_size", -1);
  p->n_ints = 4;
  if (p->mode < 0 || p->mode > 3)
    return err_set(e, ERR_INVALID_ARGUMENT, "qk_matmul_output_mode must be 0..3, got %d", p->mode);
  if (p->ints[2] < -1 || p->ints[3] < -1)
    return err_set(e, ERR_INVALID_ARGUMENT, "window sizes must be -1 or nonnegative");
  return 0;
}

typedef struct attn_dims {
  int rank;  // of Q, K, V: 3 or 4
  int64_t b, hq, hkv, sq, skv, p, t, d, dv;
} attn_dims;

static int dims_of(const eng_op_params *p, const eng_tensor *in, int n_in, attn_dims *a, err *e) {
  const eng_tensor *q = &in[0], *k = &in[1], *v = &in[2];
  memset(a, 0, sizeof *a);
  for (int i = 0; i < 3; i++) TRY(eng_ops__need_f32(&in[i], i == 0 ? "Q" : i == 1 ? "K" : "V", e));
  a->rank = q->ndims;
  if ((a->rank != 3 && a->rank != 4) || k->ndims != a->rank || v->ndims != a->rank)
    return err_set(e, ERR_INVALID_ARGUMENT, "Q, K and V must all be 3-D or all 4-D (ranks %d, %d, %d)", q->ndims,
                   k->ndims, v->ndims);
  a->b = q->dims[0];
  if (k->dims[0] != a->b || v->dims[0] != a->b)
    return err_set(e, ERR_INVALID_ARGUMENT, "Q, K and V differ in batch size");
  if (a->rank == 4) {
    a->hq = q->dims[1], a->sq = q->dims[2], a->d = q->dims[3];
    a->hkv = k->dims[1], a->skv = k->dims[2], a->dv = v->dims[3];
    if (k->dims[3] != a->d || v->dims[1] != a->hkv || v->dims[2] != a->skv)
      return err_set(e, ERR_INVALID_ARGUMENT, "K [B, H, S, D] and V [B, H, S, Dv] do not fit Q");
  } else {
    a->hq = p->ints[0], a->hkv = p->ints[1];
    if (a->hq <= 0 || a->hkv <= 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "3-D inputs need q_num_heads and kv_num_heads");
    if (q->dims[2] % a->hq || k->dims[2] % a->hkv || v->dims[2] % a->hkv)
      return err_set(e, ERR_INVALID_ARGUMENT, "hidden sizes do not split into the heads");
    a->sq = q->dims[1], a->d = q->dims[2] / a->hq;
    a->skv = k->dims[1], a->dv = v->dims[2] / a->hkv;
    if (k->dims[2] / a->hkv != a->d || v->dims[1] != a->skv)
      return err_set(e, ERR_INVALID_ARGUMENT, "K and V do not fit Q");
  }
  if (a->hkv <= 0 || a->hq % a->hkv)
    return err_set(e, ERR_INVALID_ARGUMENT, "%lld query heads are no multiple of %lld key heads", (long long)a->hq,
                   (long long)a->hkv);
  int past = op_given(in, n_in, 4), pastv = op_given(in, n_in, 5);
  if (past != pastv) return err_set(e, ERR_INVALID_ARGUMENT, "past_key and past_value come together");
  if (past) {
    const eng_tensor *pk = &in[4], *pv = &in[5];
    TRY(eng_ops__need_f32(pk, "past_key", e));
    TRY(eng_ops__need_f32(pv, "past_value", e));
    if (pk->ndims != 4 || pv->ndims != 4 || pk->dims[0] != a->b || pk->dims[1] != a->hkv || pk->dims[3] != a->d ||
        pv->dims[0] != a->b || pv->dims[1] != a->hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != a->dv)
      return err_set(e, ERR_INVALID_ARGUMENT, "past_key/past_value must be [B, kv heads, P, D] / [B, kv heads, P, Dv]");
    a->p = pk->dims[2];
  }
  a->t = a->p + a->skv;
  if (op_given(in, n_in, 6)) {
    if (past) return err_set(e, ERR_INVALID_ARGUMENT, "nonpad_kv_seqlen cannot be combined with past_key");
    if (in[6].dt != DT_INT64 || eng_numel(in[6].ndims, in[6].dims) != a->b)
      return err_set(e, ERR_INVALID_ARGUMENT, "nonpad_kv_seqlen must be INT64 [batch]");
  }
  if (op_given(in, n_in, 3)) {
    const eng_tensor *m = &in[3];
    if (m->dt != DT_FP32 && m->dt != DT_BOOL)
      return err_set(e, ERR_INVALID_ARGUMENT, "attn_mask must be a float or bool tensor, got %s",
                     dtype_wire_name(m->dt));
    if (m->ndims < 1 || m->ndims > 4) return err_set(e, ERR_INVALID_ARGUMENT, "attn_mask must have rank 1 to 4");
    const int64_t want[4] = {a->b, a->hq, a->sq, a->t};
    for (int i = 0; i < m->ndims; i++) {
      int64_t md = m->dims[m->ndims - 1 - i], w = want[3 - i];
      if (i == 0 ? md > w : md != 1 && md != w)
        return err_set(e, ERR_INVALID_ARGUMENT, "attn_mask does not broadcast to [%lld, %lld, %lld, %lld]",
                       (long long)a->b, (long long)a->hq, (long long)a->sq, (long long)a->t);
    }
  }
  return 0;
}

int eng_ops__infer_onnx_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  attn_dims a;
  TRY(dims_of(p, in, n_in, &a, e));
  if (a.rank == 4) {
    int64_t y[4] = {a.b, a.hq, a.sq, a.dv};
    op_set_out(&out[0], DT_FP32, 4, y);
  } else {
    int64_t y[3] = {a.b, a.sq, a.hq * a.dv};
    op_set_out(&out[0], DT_FP32, 3, y);
  }
  int64_t pk[4] = {a.b, a.hkv, a.t, a.d}, pv[4] = {a.b, a.hkv, a.t, a.dv}, qk[4] = {a.b, a.hq, a.sq, a.t};
  if (n_out > 1 && out[1].dt != DT_INVALID) op_set_out(&out[1], DT_FP32, 4, pk);
  if (n_out > 2 && out[2].dt != DT_INVALID) op_set_out(&out[2], DT_FP32, 4, pv);
  if (n_out > 3 && out[3].dt != DT_INVALID) op_set_out(&out[3], DT_FP32, 4, qk);
  return 0;
}

// dst [B, H, P + S, dd] = past [B, H, P, dd] then x (4-D [B, H, S, dd], or 3-D [B, S, H*dd]).
static void concat_heads(float *dst, const float *past, const float *x, int rank, const attn_dims *a, int64_t h,
                         int64_t dd) {
  for (int64_t b = 0; b < a->b; b++)
    for (int64_t k = 0; k < h; k++) {
      float *o = dst + (b * h + k) * a->t * dd;
      if (a->p) memcpy(o, past + (b * h + k) * a->p * dd, (size_t)(a->p * dd) * sizeof *o);
      o += a->p * dd;
      for (int64_t s = 0; s < a->skv; s++)
        memcpy(o + s * dd, rank == 4 ? x + ((b * h + k) * a->skv + s) * dd : x + ((b * a->skv + s) * h + k) * dd,
               (size_t)dd * sizeof *o);
    }
}

int eng_ops__run_onnx_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e) {
  attn_dims a;
  TRY(dims_of(p, in, n_in, &a, e));
  if (!a.b || !a.hq || !a.sq || !a.dv) return 0;
  size_t nq = (size_t)(a.b * a.hq * a.sq * a.d), nk = (size_t)(a.b * a.hkv * a.t * a.d);
  size_t nv = (size_t)(a.b * a.hkv * a.t * a.dv), ny = (size_t)(a.b * a.hq * a.sq * a.dv);
  float *pk = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : NULL;
  float *pv = n_out > 2 && out[2].dt != DT_INVALID ? out[2].data : NULL;
  float *qk = n_out > 3 && out[3].dt != DT_INVALID ? out[3].data : NULL;
  // scratch: Q and Y as [B, H, S, D] when 3-D, K and V with the past in front when no present output holds
  // them, a row of scores, the per-batch offsets
  size_t need = (a.rank == 3 ? nq + ny : 0) + (pk ? 0 : nk) + (pv ? 0 : nv) + (size_t)a.t + 1;
  float *work = malloc(need * sizeof *work);
  int64_t *off = malloc((size_t)(a.b > 0 ? a.b : 1) * sizeof *off);
  if (!work || !off) {
    free(work);
    free(off);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for Attention's scratch");
  }
  float *w = work, *q = in[0].data, *y = out[0].data;
  if (a.rank == 3) {
    q = w, w += nq;
    y = w, w += ny;
    const float *q3 = in[0].data;
    for (int64_t b = 0; b < a.b; b++)
      for (int64_t s = 0; s < a.sq; s++)
        for (int64_t h = 0; h < a.hq; h++)
          memcpy(q + ((b * a.hq + h) * a.sq + s) * a.d, q3 + ((b * a.sq + s) * a.hq + h) * a.d,
                 (size_t)a.d * sizeof *q);
  }
  float *kc = pk ? pk : (w += nk, w - nk), *vc = pv ? pv : (w += nv, w - nv);
  const int past = op_given(in, n_in, 4);
  concat_heads(kc, past ? in[4].data : NULL, in[1].data, a.rank, &a, a.hkv, a.d);
  concat_heads(vc, past ? in[5].data : NULL, in[2].data, a.rank, &a, a.hkv, a.dv);
  k_attention_args ka = {.b = a.b, .hq = a.hq, .hkv = a.hkv, .sq = a.sq, .t = a.t, .d = a.d, .dv = a.dv,
                         .scale = p->alpha != 0.0f ? p->alpha : (float)(1.0 / sqrt((double)a.d)),
                         .softcap = p->beta, .causal = p->upper, .offset0 = a.p, .left = p->ints[2],
                         .right = p->ints[3], .qk_mode = p->mode};
  if (op_given(in, n_in, 6)) {
    ka.nonpad = in[6].data;
    for (int64_t b = 0; b < a.b; b++) off[b] = ka.nonpad[b] - a.sq;  // external cache: bottom-right frontier
    ka.offset = off;
  }
  if (op_given(in, n_in, 3)) {
    const eng_tensor *m = &in[3];
    int64_t md[4] = {1, 1, 1, 1}, acc = 1;
    for (int i = 0; i < m->ndims; i++) md[4 - m->ndims + i] = m->dims[i];
    for (int i = 3; i >= 0; i--) {
      ka.mask_st[i] = md[i] == 1 ? 0 : acc;
      acc *= md[i];
    }
    ka.mask = m->data;
    ka.mask_bool = m->dt == DT_BOOL;
    ka.mask_len = md[3];
  }
  k_attention(y, qk, q, kc, vc, w, &ka);
  if (a.rank == 3) {  // [B, H, S, Dv] -> [B, S, H*Dv]
    float *y3 = out[0].data;
    for (int64_t b = 0; b < a.b; b++)
      for (int64_t h = 0; h < a.hq; h++)
        for (int64_t s = 0; s < a.sq; s++)
          memcpy(y3 + ((b * a.sq + s) * a.hq + h) * a.dv, y + ((b * a.hq + h) * a.sq + s) * a.dv,
                 (size_t)a.dv * sizeof *y3);
  }
  free(work);
  free(off);
  return 0;
}

// --- RotaryEmbedding: p->upper: interleaved; p->ints[0]: num_heads, [1]: rotary_embedding_dim

int eng_ops__parse_rotary(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->upper = op_attr_int(n, "interleaved", 0) != 0;
  p->ints[0] = op_attr_int(n, "num_heads", 0);
  p->ints[1] = op_attr_int(n, "rotary_embedding_dim", 0);
  p->n_ints = 2;
  return 0;
}

typedef struct rot_dims {
  int64_t b, s, h, d, rot, rows;
} rot_dims;

static int rot_dims_of(const eng_op_params *p, const eng_tensor *in, int n_in, rot_dims *r, err *e) {
  const eng_tensor *x = &in[0], *c = &in[1], *sn = &in[2];
  TRY(eng_ops__need_f32(x, "input", e));
  TRY(eng_ops__need_f32(c, "cos_cache", e));
  TRY(eng_ops__need_f32(sn, "sin_cache", e));
  if (x->ndims == 4) {
    r->b = x->dims[0], r->h = x->dims[1], r->s = x->dims[2], r->d = x->dims[3];
  } else if (x->ndims == 3) {
    r->b = x->dims[0], r->s = x->dims[1], r->h = p->ints[0];
    if (r->h <= 0 || x->dims[2] % r->h) return err_set(e, ERR_INVALID_ARGUMENT, "3-D input needs num_heads dividing its hidden size");
    r->d = x->dims[2] / r->h;
  } else {
    return err_set(e, ERR_INVALID_ARGUMENT, "input must be 3-D or 4-D");
  }
  r->rot = p->ints[1] > 0 ? p->ints[1] : r->d;
  if (r->rot > r->d || r->rot % 2) return err_set(e, ERR_INVALID_ARGUMENT, "rotary_embedding_dim must be even and <= the head size");
  int pos = op_given(in, n_in, 3);
  if (c->ndims != sn->ndims || eng_numel(c->ndims, c->dims) != eng_numel(sn->ndims, sn->dims) || c->ndims < 2 ||
      c->dims[c->ndims - 1] != r->rot / 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "cos_cache and sin_cache must be alike, with rotary_embedding_dim/2 columns");
  if (pos) {
    if (in[3].dt != DT_INT64 || eng_numel(in[3].ndims, in[3].dims) != r->b * r->s || c->ndims != 2)
      return err_set(e, ERR_INVALID_ARGUMENT, "position_ids must be INT64 [batch, sequence] with 2-D caches");
    r->rows = c->dims[0];
  } else if (c->ndims != 3 || c->dims[0] != r->b || c->dims[1] != r->s) {
    return err_set(e, ERR_INVALID_ARGUMENT, "without position_ids the caches must be [batch, sequence, rot/2]");
  }
  return 0;
}

int eng_ops__infer_rotary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)n_out;
  rot_dims r = {0};
  TRY(rot_dims_of(p, in, n_in, &r, e));
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

int eng_ops__run_rotary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  (void)n_out;
  rot_dims r = {0};
  TRY(rot_dims_of(p, in, n_in, &r, e));
  const int64_t *pos = op_given(in, n_in, 3) ? in[3].data : NULL;
  if (k_rotary(out[0].data, in[0].data, in[1].data, in[2].data, pos, r.rows, r.b, r.s, r.h, r.d, r.rot,
               in[0].ndims == 4, p->upper) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "a position id is outside the caches' %lld rows", (long long)r.rows);
  return 0;
}
