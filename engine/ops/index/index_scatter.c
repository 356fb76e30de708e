// engine/ops/index/index_scatter.c: ScatterElements (and the older Scatter) and
// ScatterND on the CPU: the output is the data with the updates written to,
// or combined by the reduction attribute (add, mul, max, min: FP32, FP64,
// INT32, INT64) into, the positions the indices name (k_scatter_elements,
// k_scatter_nd). index.c's table lists them; no CUDA path yet.
#include <string.h>

#include "engine/ops/index/index.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// p->mode: the k_scatter_red; p->axis: ScatterElements' axis.
int eng_ops__parse_scatter(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const names[] = {"none", "add", "mul", "max", "min", NULL};
  TRY(eng_ops__enum(op_attr_str(n, "reduction", "none"), names, "reduction", &p->mode, e));
  p->axis = op_attr_int(n, "axis", 0);
  return 0;
}

static int check_common(const eng_op_params *p, const eng_tensor *in, k_elem *t, err *e) {
  if (in[1].dt != DT_INT64 && in[1].dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "indices must be INT32 or INT64, got %s", dtype_wire_name(in[1].dt));
  if (in[2].dt != in[0].dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "updates are %s, data %s", dtype_wire_name(in[2].dt),
                   dtype_wire_name(in[0].dt));
  if (in[0].dt == DT_STRING || eng_ops_elem_of(in[0].dt, t) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(in[0].dt));
  if (p->mode != K_SCATTER_NONE && *t != K_F32 && *t != K_F64 && *t != K_I32 && *t != K_I64)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: a reduction on %s", dtype_wire_name(in[0].dt));
  return 0;
}

int eng_ops__infer_scatter_elements(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                    int n_out, err *e) {
  (void)n_in, (void)n_out;
  k_elem t;
  TRY(check_common(p, in, &t, e));
  int r = in[0].ndims;
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  if (in[1].ndims != r || in[2].ndims != r)
    return err_set(e, ERR_INVALID_ARGUMENT, "indices and updates must have data's rank %d", r);
  for (int i = 0; i < r; i++)
    if (in[1].dims[i] != in[2].dims[i] || (i != ax && in[1].dims[i] > in[0].dims[i]))
      return err_set(e, ERR_INVALID_ARGUMENT, "indices and updates must have one shape, within data's");
  op_set_out(&out[0], in[0].dt, r, in[0].dims);
  return 0;
}

int eng_ops__run_scatter_elements(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                  int n_out, err *e) {
  (void)n_in, (void)n_out;
  k_elem t;
  TRY(check_common(p, in, &t, e));
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, &ax, e));
  size_t esz = eng_elem_size(in[0].dt), n = op_numel(&in[0]);
  if (n && out[0].data != in[0].data) memcpy(out[0].data, in[0].data, n * esz);
  if (k_scatter_elements(out[0].data, in[2].data, esz, t, in[0].ndims, in[0].dims, (int)ax, in[1].data,
                         in[1].dt == DT_INT32, in[1].dims, (k_scatter_red)p->mode) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "an index is out of range");
  return 0;
}

int eng_ops__infer_scatter_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                              err *e) {
  (void)n_in, (void)n_out;
  k_elem t;
  TRY(check_common(p, in, &t, e));
  const eng_tensor *x = &in[0], *ix = &in[1], *u = &in[2];
  if (ix->ndims < 1) return err_set(e, ERR_INVALID_ARGUMENT, "indices must have rank >= 1");
  int64_t m = ix->dims[ix->ndims - 1];
  if (m < 1 || m > x->ndims) return err_set(e, ERR_INVALID_ARGUMENT, "indices' last dim must be 1..%d", x->ndims);
  // updates: indices' dims but the last, then data's dims from m on
  int want = ix->ndims - 1 + x->ndims - (int)m, ok = u->ndims == want;
  for (int i = 0; ok && i < want; i++)
    ok = u->dims[i] == (i < ix->ndims - 1 ? ix->dims[i] : x->dims[i - (ix->ndims - 1) + m]);
  if (!ok) return err_set(e, ERR_INVALID_ARGUMENT, "updates must be indices.shape[:-1] + data.shape[m:]");
  op_set_out(&out[0], x->dt, x->ndims, x->dims);
  return 0;
}

int eng_ops__run_scatter_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e) {
  (void)n_in, (void)n_out;
  k_elem t;
  TRY(check_common(p, in, &t, e));
  const eng_tensor *x = &in[0], *ix = &in[1];
  size_t esz = eng_elem_size(x->dt), n = op_numel(x);
  int m = (int)ix->dims[ix->ndims - 1];
  if (n && out[0].data != x->data) memcpy(out[0].data, x->data, n * esz);
  if (k_scatter_nd(out[0].data, in[2].data, esz, t, x->ndims, x->dims, ix->data, ix->dt == DT_INT32,
                   op_numel(ix) / (size_t)m, m, (k_scatter_red)p->mode) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "an index is out of range");
  return 0;
}
