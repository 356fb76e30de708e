// engine/ops/gemm/rnn.c: the recurrent ops RNN, GRU and LSTM on the CPU through
// the C reference k_rnn (kernels/gemm/k_rnn.c): hidden_size, direction
// (forward, reverse, bidirectional), layout, clip, GRU's linear_before_reset,
// LSTM's peepholes, biases, initial states and sequence_lens (INT32 or
// INT64). The default activations only: a model naming its own is refused,
// as is LSTM's input_forget. gemm.c's table lists them; no CUDA path yet.
#include <stdlib.h>
#include <string.h>

#include "engine/ops/gemm/gemm.h"
#include "engine/ops/ops.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// p->mode: K_RNN_*; p->ints: hidden_size, direction (0 forward, 1 reverse, 2 both), layout,
// linear_before_reset; p->alpha: clip.
int eng_ops__parse_rnn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const dirs[] = {"forward", "reverse", "bidirectional", NULL};
  p->mode = strcmp(n->op_type, "LSTM") == 0 ? K_RNN_LSTM : strcmp(n->op_type, "GRU") == 0 ? K_RNN_GRU : K_RNN_RNN;
  p->ints[0] = op_attr_int(n, "hidden_size", 0);
  int d;
  TRY(eng_ops__enum(op_attr_str(n, "direction", "forward"), dirs, "direction", &d, e));
  p->ints[1] = d;
  p->ints[2] = op_attr_int(n, "layout", 0);
  p->ints[3] = op_attr_int(n, "linear_before_reset", 0);
  p->n_ints = 4;
  p->alpha = op_attr_float(n, "clip", 0.0f);
  if (p->ints[0] <= 0) return err_set(e, ERR_INVALID_ARGUMENT, "hidden_size must be positive");
  if (eng_node_attr(n, "activations"))
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: attribute 'activations' (the default activations only)");
  if (op_attr_int(n, "input_forget", 0) != 0) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: input_forget=1");
  return 0;
}

typedef struct rnn_dims {
  k_rnn_args a;
  int g;
} rnn_dims;

static int dims_of(const eng_op_params *p, const eng_tensor *in, int n_in, rnn_dims *r, err *e) {
  memset(r, 0, sizeof *r);
  k_rnn_args *a = &r->a;
  a->kind = p->mode;
  a->hidden = p->ints[0];
  a->dirs = p->ints[1] == 2 ? 2 : 1;
  a->reverse = p->ints[1] == 1;
  a->batch_first = p->ints[2] != 0;
  a->linear_before_reset = p->ints[3] != 0;
  a->clip = p->alpha;
  r->g = a->kind == K_RNN_LSTM ? 4 : a->kind == K_RNN_GRU ? 3 : 1;
  const eng_tensor *x = &in[0], *w = &in[1], *rr = &in[2];
  for (int i = 0; i < 3; i++) TRY(eng_ops__need_f32(&in[i], i == 0 ? "X" : i == 1 ? "W" : "R", e));
  if (x->ndims != 3) return err_set(e, ERR_INVALID_ARGUMENT, "X must be 3-D");
  a->seq = x->dims[a->batch_first ? 1 : 0], a->batch = x->dims[a->batch_first ? 0 : 1], a->input = x->dims[2];
  int64_t gh = r->g * a->hidden;
  if (w->ndims != 3 || w->dims[0] != a->dirs || w->dims[1] != gh || w->dims[2] != a->input)
    return err_set(e, ERR_INVALID_ARGUMENT, "W must be [%lld, %lld, %lld]", (long long)a->dirs, (long long)gh,
                   (long long)a->input);
  if (rr->ndims != 3 || rr->dims[0] != a->dirs || rr->dims[1] != gh || rr->dims[2] != a->hidden)
    return err_set(e, ERR_INVALID_ARGUMENT, "R must be [%lld, %lld, %lld]", (long long)a->dirs, (long long)gh,
                   (long long)a->hidden);
  if (op_given(in, n_in, 3)) {
    TRY(eng_ops__need_f32(&in[3], "B", e));
    if (eng_numel(in[3].ndims, in[3].dims) != a->dirs * 2 * gh) return err_set(e, ERR_INVALID_ARGUMENT, "B must be [dirs, %lld]", (long long)(2 * gh));
  }
  if (op_given(in, n_in, 4)) {
    if ((in[4].dt != DT_INT32 && in[4].dt != DT_INT64) || eng_numel(in[4].ndims, in[4].dims) != a->batch)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_lens must be INT32 or INT64 [batch]");
  }
  int64_t state = a->dirs * a->batch * a->hidden;
  for (int i = 5; i < 7 && i < n_in; i++)
    if (op_given(in, n_in, i)) {
      TRY(eng_ops__need_f32(&in[i], i == 5 ? "initial_h" : "initial_c", e));
      if (eng_numel(in[i].ndims, in[i].dims) != state)
        return err_set(e, ERR_INVALID_ARGUMENT, "%s must hold dirs x batch x hidden values", i == 5 ? "initial_h" : "initial_c");
    }
  if (op_given(in, n_in, 7)) {
    TRY(eng_ops__need_f32(&in[7], "P", e));
    if (eng_numel(in[7].ndims, in[7].dims) != a->dirs * 3 * a->hidden) return err_set(e, ERR_INVALID_ARGUMENT, "P must be [dirs, 3 x hidden]");
  }
  return 0;
}

int eng_ops__infer_rnn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  rnn_dims r;
  TRY(dims_of(p, in, n_in, &r, e));
  const k_rnn_args *a = &r.a;
  int64_t y[4] = {a->seq, a->dirs, a->batch, a->hidden}, yb[4] = {a->batch, a->seq, a->dirs, a->hidden};
  int64_t h[3] = {a->dirs, a->batch, a->hidden}, hb[3] = {a->batch, a->dirs, a->hidden};
  if (out[0].dt != DT_INVALID) op_set_out(&out[0], DT_FP32, 4, a->batch_first ? yb : y);
  for (int i = 1; i < n_out && i < 3; i++)
    if (out[i].dt != DT_INVALID) op_set_out(&out[i], DT_FP32, 3, a->batch_first ? hb : h);
  return 0;
}

int eng_ops__run_rnn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  rnn_dims r;
  TRY(dims_of(p, in, n_in, &r, e));
  const k_rnn_args *a = &r.a;
  size_t nw = (size_t)(2 * a->batch * a->hidden + 5 * a->hidden);
  float *work = malloc(nw * sizeof *work);
  int64_t *lens = malloc((size_t)(a->batch > 0 ? a->batch : 1) * sizeof *lens);
  if (!work || !lens) {
    free(work);
    free(lens);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for the recurrent op's state");
  }
  int have_lens = op_given(in, n_in, 4);
  for (int64_t b = 0; have_lens && b < a->batch; b++) {
    lens[b] = in[4].dt == DT_INT32 ? ((const int32_t *)in[4].data)[b] : ((const int64_t *)in[4].data)[b];
    if (lens[b] < 0 || lens[b] > a->seq) {
      int64_t bad = lens[b];  // read before the free below
      free(work);
      free(lens);
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                     (long long)bad, (long long)a->seq);
    }
  }
  float *y = out[0].dt != DT_INVALID ? out[0].data : NULL;
  float *yh = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : NULL;
  float *yc = n_out > 2 && out[2].dt != DT_INVALID ? out[2].data : NULL;
  k_rnn(a, y, yh, yc, in[0].data, in[1].data, in[2].data, op_given(in, n_in, 3) ? in[3].data : NULL,
        op_given(in, n_in, 7) ? in[7].data : NULL, op_given(in, n_in, 5) ? in[5].data : NULL,
        op_given(in, n_in, 6) ? in[6].data : NULL, have_lens ? lens : NULL, work);
  free(work);
  free(lens);
  return 0;
}
