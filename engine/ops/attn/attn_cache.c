// engine/ops/attn/attn_cache.c: TensorScatter (opset 24, beside Attention):
// writes update's positions along `axis` into a copy of past_cache at each
// batch row's write_indices (0 when omitted), linearly or wrapping around
// (circular): a KV cache's in-place update as a value. Listed in attn.c's table.
#include <string.h>

#include "engine/ops/attn/attn.h"
#include "engine/ops/ops_common.h"

int eng_ops__parse_tensor_scatter(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const modes[] = {"linear", "circular", NULL};
  TRY(eng_ops__enum(op_attr_str(n, "mode", "linear"), modes, "mode", &p->mode, e));
  p->axis = op_attr_int(n, "axis", -2);
  return 0;
}

static int ts_check(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *axis, err *e) {
  const eng_tensor *c = &in[0], *u = &in[1];
  TRY(eng_ops__norm_axis(p->axis, c->ndims, axis, e));
  if (*axis == 0) return err_set(e, ERR_INVALID_ARGUMENT, "axis must not be the batch axis 0");
  if (u->dt != c->dt || u->ndims != c->ndims) return err_set(e, ERR_INVALID_ARGUMENT, "update must match past_cache's type and rank");
  for (int d = 0; d < c->ndims; d++)
    if (d == *axis ? u->dims[d] > c->dims[d] : u->dims[d] != c->dims[d])
      return err_set(e, ERR_INVALID_ARGUMENT, "update's dim %d (%lld) does not fit past_cache's (%lld)", d,
                     (long long)u->dims[d], (long long)c->dims[d]);
  if (op_given(in, n_in, 2) && (in[2].dt != DT_INT64 || op_numel(&in[2]) != (size_t)c->dims[0]))
    return err_set(e, ERR_INVALID_ARGUMENT, "write_indices must be INT64 [batch]");
  return 0;
}

int eng_ops__infer_tensor_scatter(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                  int n_out, err *e) {
  (void)n_out;
  int64_t axis;
  TRY(ts_check(p, in, n_in, &axis, e));
  out[0] = in[0];
  out[0].data = NULL;
  return 0;
}

int eng_ops__run_tensor_scatter(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                                err *e) {
  (void)n_out;
  int64_t axis;
  TRY(ts_check(p, in, n_in, &axis, e));
  const eng_tensor *c = &in[0], *u = &in[1];
  size_t esz = dtype_size(c->dt), inner = (size_t)op_prod(c->dims, (int)axis + 1, c->ndims) * esz;
  size_t outer = (size_t)op_prod(c->dims, 1, (int)axis), L = (size_t)c->dims[axis], S = (size_t)u->dims[axis];
  if (out[0].data != c->data) memcpy(out[0].data, c->data, op_numel(c) * esz);
  const int64_t *wi = op_given(in, n_in, 2) ? in[2].data : NULL;
  unsigned char *o = out[0].data;
  const unsigned char *src = u->data;
  for (int64_t b = 0; b < c->dims[0]; b++) {
    int64_t w = wi ? wi[b] : 0;
    for (size_t s = 0; s < S; s++) {
      int64_t pos = w + (int64_t)s;
      if (p->mode == 1) pos = ((pos % (int64_t)L) + (int64_t)L) % (int64_t)L;
      if (pos < 0 || pos >= (int64_t)L)
        return err_set(e, ERR_INVALID_ARGUMENT, "write_indices[%lld] + %zu = %lld is outside the cache (%zu)",
                       (long long)b, s, (long long)pos, L);
      for (size_t m = 0; m < outer; m++)
        memcpy(o + (((size_t)b * outer + m) * L + (size_t)pos) * inner, src + (((size_t)b * outer + m) * S + s) * inner,
               inner);
    }
  }
  return 0;
}
