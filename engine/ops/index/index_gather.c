// engine/ops/index/index_gather.c: Gather, GatherElements and GatherND on the
// CPU (the index ops transformers' embeddings, masks and heads need), listed
// in index.c's table; their CUDA path is index_cuda.c.
#include "engine/ops/index/index.h"

#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// --- Gather

int eng_ops__parse_gather(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                        err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = op_attr_int(n, "axis", 0);
  return 0;
}

int eng_ops__infer_gather(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(eng_ops__need_elem(&in[0], "data", e));
  if (in[1].dt != DT_INT64 && in[1].dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "indices must be int64 or int32, got %s",
                   dtype_wire_name(in[1].dt));
  int r = in[0].ndims, q = in[1].ndims;
  if (r < 1) return err_set(e, ERR_INVALID_ARGUMENT, "data must have rank >= 1");
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  if (r - 1 + q > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "result rank %d exceeds %d", r - 1 + q, ENG_MAX_DIMS);
  int64_t y[ENG_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < ax; i++) y[k++] = in[0].dims[i];
  for (int i = 0; i < q; i++) y[k++] = in[1].dims[i];
  for (int i = (int)ax + 1; i < r; i++) y[k++] = in[0].dims[i];
  TRY(eng_ops__checked_numel(k, y, "result", e));
  op_set_out(&out[0], in[0].dt, k, y);
  return 0;
}

int eng_ops__run_gather(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t outer = (size_t)op_prod(in[0].dims, 0, ax), inner = (size_t)op_prod(in[0].dims, ax + 1, r);
  if (!op_numel(&out[0])) return 0;
  if (k_gather(out[0].data, in[0].data, eng_elem_size(in[0].dt), outer, in[0].dims[ax], inner,
               in[1].data, in[1].dt == DT_INT32, op_numel(&in[1])) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "an index is out of range for axis %d of size %lld",
                   ax, (long long)in[0].dims[ax]);
  return 0;
}

static int need_index(const eng_tensor *t, err *e) {
  if (t->dt != DT_INT64 && t->dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "indices must be int64 or int32, got %s",
                   dtype_wire_name(t->dt));
  return 0;
}

// --- GatherElements (same-rank indices pick one element each along axis)

int eng_ops__infer_gather_elements(const eng_op_params *p, const eng_tensor *in, int n_in,
                                 eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(eng_ops__need_elem(&in[0], "data", e));
  TRY(need_index(&in[1], e));
  int r = in[0].ndims;
  if (r < 1) return err_set(e, ERR_INVALID_ARGUMENT, "data must have rank >= 1");
  if (in[1].ndims != r)
    return err_set(e, ERR_INVALID_ARGUMENT, "indices have rank %d, data rank %d", in[1].ndims, r);
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  for (int d = 0; d < r; d++)
    if (d != ax && in[1].dims[d] > in[0].dims[d])
      return err_set(e, ERR_INVALID_ARGUMENT, "indices dim %d (%lld) exceeds data's (%lld)", d,
                     (long long)in[1].dims[d], (long long)in[0].dims[d]);
  op_set_out(&out[0], in[0].dt, r, in[1].dims);
  return 0;
}

int eng_ops__run_gather_elements(const eng_op_params *p, const eng_tensor *in, int n_in,
                               eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims, ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  if (k_gather_elements(out[0].data, in[0].data, eng_elem_size(in[0].dt), r, in[0].dims, ax,
                        in[1].data, in[1].dt == DT_INT32, in[1].dims) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "an index is out of range for axis %d of size %lld",
                   ax, (long long)in[0].dims[ax]);
  return 0;
}

// --- GatherND (batch_dims leading dims shared; each index tuple picks a slice)

int eng_ops__parse_gather_nd(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g, (void)opset;
  p->batch_dims = op_attr_int(n, "batch_dims", 0);
  if (p->batch_dims < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "batch_dims %lld is negative",
                   (long long)p->batch_dims);
  return 0;
}

// The view k_gather_nd takes: batch, tuple length m, tuples per batch and
// slice elements; y the result shape (ny dims).
typedef struct gnd {
  size_t batch, n_tuples, slice;
  int m, ny;
  int64_t y[ENG_MAX_DIMS];
} gnd;

static int gather_nd_dims(const eng_op_params *p, const eng_tensor *in, gnd *s, err *e) {
  int r = in[0].ndims, q = in[1].ndims, b = (int)p->batch_dims;
  if (r < 1 || q < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "data and indices must have rank >= 1, got %d and %d",
                   r, q);
  if (p->batch_dims >= r || p->batch_dims >= q)
    return err_set(e, ERR_INVALID_ARGUMENT, "batch_dims %lld must be below both ranks (%d, %d)",
                   (long long)p->batch_dims, r, q);
  int64_t m = in[1].dims[q - 1];
  if (m < 1 || m > r - b)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "the last dim of indices (%lld) must be between 1 and %d (data rank - batch_dims)",
                   (long long)m, r - b);
  for (int d = 0; d < b; d++)
    if (in[0].dims[d] != in[1].dims[d])
      return err_set(e, ERR_INVALID_ARGUMENT, "batch dim %d differs: data %lld, indices %lld", d,
                     (long long)in[0].dims[d], (long long)in[1].dims[d]);
  s->m = (int)m;
  s->batch = (size_t)op_prod(in[0].dims, 0, b);
  s->n_tuples = (size_t)op_prod(in[1].dims, b, q - 1);
  s->slice = (size_t)op_prod(in[0].dims, b + s->m, r);
  s->ny = q - 1 + r - b - s->m;
  if (s->ny > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "result rank %d exceeds %d", s->ny, ENG_MAX_DIMS);
  int k = 0;
  for (int d = 0; d < q - 1; d++) s->y[k++] = in[1].dims[d];
  for (int d = b + s->m; d < r; d++) s->y[k++] = in[0].dims[d];
  return eng_ops__checked_numel(s->ny, s->y, "result", e);
}

int eng_ops__infer_gather_nd(const eng_op_params *p, const eng_tensor *in, int n_in,
                           eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(eng_ops__need_elem(&in[0], "data", e));
  TRY(need_index(&in[1], e));
  gnd s;
  TRY(gather_nd_dims(p, in, &s, e));
  op_set_out(&out[0], in[0].dt, s.ny, s.y);
  return 0;
}

int eng_ops__run_gather_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  gnd s;
  TRY(gather_nd_dims(p, in, &s, e));
  if (k_gather_nd(out[0].data, in[0].data, eng_elem_size(in[0].dt), s.batch, s.m,
                  in[0].dims + p->batch_dims, s.slice, in[1].data, in[1].dt == DT_INT32,
                  s.n_tuples) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "an index tuple is out of range for data of rank %d",
                   in[0].ndims);
  return 0;
}

