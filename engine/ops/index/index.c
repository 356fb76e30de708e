// engine/ops/index/index.c: the shape and index ops on the CPU. The views
// (Flatten, Reshape, Squeeze, Unsqueeze, Identity, Dropout), which share
// their input's bytes; Transpose and Concat; the shape arithmetic exporters
// emit around Reshape: Shape, Size, Gather, Slice, ConstantOfShape, Range and
// Expand; and the index ops transformers' masks and heads need:
// GatherElements, GatherND, Trilu and Split; ScatterElements, Scatter and
// ScatterND live in index_scatter.c, DepthToSpace, SpaceToDepth, ReverseSequence and EyeLike in
// index_space.c (CPU only).
// The shape arithmetic's results are mostly small int64 tensors computed
// from input shapes, which the planner folds per input-shape signature
// (plan.c); they also run as ordinary ops on any element type when their
// inputs are data. Their CUDA path is index_cuda.c.
#include "engine/ops/index/index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// Any type with a fixed element size in a plan: STRING's is its view's
// (engine/ops/str/str.h), which these ops copy like numbers.
static int need_elem(const eng_tensor *t, const char *what, err *e) {
  if (eng_elem_size(t->dt) == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s has unsupported element type %s", what,
                   dtype_wire_name(t->dt));
  return 0;
}

// --- views: Flatten, Reshape, Squeeze, Unsqueeze, Identity, Dropout

static int attr_ints(const eng_node *n, const char *name, eng_op_params *p, err *e) {
  int cnt;
  TRY(eng_ops__attr_ints(n, name, p->ints, ENG_MAX_DIMS, &cnt, e));
  if (cnt >= 0) {
    p->n_ints = cnt;
    p->has_ints = 1;
  }
  return 0;
}

static int infer_same(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)n_in, (void)e;
  op_set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
  if (n_out > 1 && out[1].dt != DT_INVALID)  // Dropout's mask
    op_set_out(&out[1], DT_BOOL, in[0].ndims, in[0].dims);
  return 0;
}

// Views (Reshape, Flatten, ...): the planner makes output 0 share input
// 0's bytes, so there is normally nothing to do; copy only if it could not.
static int run_view(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)p, (void)n_in, (void)e;
  size_t bytes = op_numel(&out[0]) * eng_elem_size(out[0].dt);
  if (out[0].data != in[0].data && bytes) memmove(out[0].data, in[0].data, bytes);
  if (n_out > 1 && out[1].dt != DT_INVALID) memset(out[1].data, 1, op_numel(&out[1]));
  return 0;
}

// Dropout is the identity at inference (its mask all true). Training mode
// (a true training_mode input, opset 12+) would draw a random mask and scale
// the kept values: an inference server does not train, so it is refused with
// a message rather than run silently as the identity (issue 34).
static int run_dropout(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                       err *e) {
  int training = n_in > 2 && in[2].dt == DT_BOOL && in[2].data && op_numel(&in[2]) && *(const uint8_t *)in[2].data;
  double ratio = 0.5;  // the spec's default when the input is left out
  if (n_in > 1 && in[1].data && op_numel(&in[1])) {
    if (in[1].dt == DT_FP32) ratio = *(const float *)in[1].data;
    else if (in[1].dt == DT_FP64) ratio = *(const double *)in[1].data;
  }
  if (training && ratio != 0.0)  // a ratio of 0 keeps everything, unscaled: the identity, exactly
    return err_set(e, ERR_UNIMPLEMENTED,
                   "Dropout with training_mode true (random masking, a training step) is not supported: "
                   "inference runs Dropout as the identity; send training_mode false or leave it out");
  return run_view(p, in, n_in, out, n_out, e);
}

static int parse_flatten(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = op_attr_int(n, "axis", 1);
  return 0;
}

static int parse_reshape(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g;
  if (opset < 5) return err_set(e, ERR_INVALID_ARGUMENT, "Reshape before opset 5 is not supported");
  if (n->n_in < 2 || n->in[1] < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "the shape input is required");
  p->allowzero = op_attr_int(n, "allowzero", 0) != 0;
  return 0;
}

// Squeeze/Unsqueeze: axes are an attribute before opset 13, then an
// optional input (read at shape inference: host_in).
static int parse_squeeze(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g;
  if (opset < 13) return attr_ints(n, "axes", p, e);
  return 0;
}

static int parse_unsqueeze(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g;
  if (opset < 13) TRY(attr_ints(n, "axes", p, e));
  else if (n->n_in >= 2 && n->in[1] >= 0) p->has_ints = 1;
  if (!p->has_ints) return err_set(e, ERR_INVALID_ARGUMENT, "axes are required");
  return 0;
}

// The axes of Squeeze/Unsqueeze: the attribute form, else input 1's value.
static int get_axes(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *ax, int *n,
                    int *given, err *e) {
  *given = 1;
  if (op_given(in, n_in, 1)) return eng_ops__read_ints(&in[1], "axes", ax, ENG_MAX_DIMS, n, e);
  *n = p->n_ints;
  memcpy(ax, p->ints, sizeof p->ints);
  *given = p->has_ints;
  return 0;
}

static int infer_flatten(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims;
  int64_t ax = p->axis < 0 ? p->axis + r : p->axis;
  if (ax < 0 || ax > r)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld out of range for rank %d",
                   (long long)p->axis, r);
  int64_t y[2] = {op_prod(in[0].dims, 0, (int)ax), op_prod(in[0].dims, (int)ax, r)};
  op_set_out(&out[0], in[0].dt, 2, y);
  return 0;
}

static int infer_reshape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t y[ENG_MAX_DIMS], shape[ENG_MAX_DIMS], known = 1;
  int infer_at = -1, ns;
  TRY(eng_ops__read_ints(&in[1], "shape", shape, ENG_MAX_DIMS, &ns, e));
  for (int i = 0; i < ns; i++) {
    int64_t d = shape[i];
    if (d == 0 && !p->allowzero) {
      if (i >= in[0].ndims)
        return err_set(e, ERR_INVALID_ARGUMENT, "shape[%d] = 0 copies a dim the input lacks", i);
      d = in[0].dims[i];
    } else if (d == -1) {
      if (infer_at >= 0) return err_set(e, ERR_INVALID_ARGUMENT, "more than one -1 in shape");
      infer_at = i;
      y[i] = -1;
      continue;
    } else if (d < 0) {
      return err_set(e, ERR_INVALID_ARGUMENT, "bad shape value %lld", (long long)d);
    }
    y[i] = d;
    if (d && known > ENG_MAX_NUMEL / d)
      return err_set(e, ERR_INVALID_ARGUMENT, "shape has more than %lld elements",
                     (long long)ENG_MAX_NUMEL);
    known *= d;
  }
  int64_t total = op_numel(&in[0]);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "cannot reshape %lld elements with -1",
                     (long long)total);
    y[infer_at] = total / known;
  } else if (known != total) {
    return err_set(e, ERR_INVALID_ARGUMENT, "cannot reshape %lld elements into %lld",
                   (long long)total, (long long)known);
  }
  op_set_out(&out[0], in[0].dt, ns, y);
  return 0;
}

static int infer_squeeze(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims, nax, given;
  int drop[ENG_MAX_DIMS] = {0};
  int64_t axes[ENG_MAX_DIMS];
  TRY(get_axes(p, in, n_in, axes, &nax, &given, e));
  if (given) {
    for (int i = 0; i < nax; i++) {
      int64_t ax = 0;
      TRY(eng_ops__norm_axis(axes[i], r, &ax, e));
      if (in[0].dims[ax] != 1)
        return err_set(e, ERR_INVALID_ARGUMENT, "cannot squeeze dim %lld of size %lld",
                       (long long)ax, (long long)in[0].dims[ax]);
      drop[ax] = 1;
    }
  } else {
    for (int i = 0; i < r; i++) drop[i] = in[0].dims[i] == 1;
  }
  int64_t y[ENG_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < r; i++)
    if (!drop[i]) y[k++] = in[0].dims[i];
  op_set_out(&out[0], in[0].dt, k, y);
  return 0;
}

static int infer_unsqueeze(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_out;
  int64_t axes[ENG_MAX_DIMS];
  int nax, given;
  TRY(get_axes(p, in, n_in, axes, &nax, &given, e));
  int r = in[0].ndims + nax;
  if (r > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "result rank %d exceeds %d", r, ENG_MAX_DIMS);
  int ins[ENG_MAX_DIMS] = {0};
  for (int i = 0; i < nax; i++) {
    int64_t ax = 0;
    TRY(eng_ops__norm_axis(axes[i], r, &ax, e));
    if (ins[ax]) return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld repeated", (long long)ax);
    ins[ax] = 1;
  }
  int64_t y[ENG_MAX_DIMS];
  for (int i = 0, k = 0; i < r; i++) y[i] = ins[i] ? 1 : in[0].dims[k++];
  op_set_out(&out[0], in[0].dt, r, y);
  return 0;
}

// --- Transpose

static int parse_transpose(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g, (void)opset;
  return attr_ints(n, "perm", p, e);
}

int eng_ops__get_perm(const eng_op_params *p, int r, int *perm, err *e) {
  if (!p->has_ints) {
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    return 0;
  }
  if (p->n_ints != r)
    return err_set(e, ERR_INVALID_ARGUMENT, "perm has %d entries for rank %d", p->n_ints, r);
  int seen[ENG_MAX_DIMS] = {0};
  for (int i = 0; i < r; i++) {
    int64_t v = p->ints[i];
    if (v < 0 || v >= r || seen[v]) return err_set(e, ERR_INVALID_ARGUMENT, "bad perm");
    seen[v] = 1;
    perm[i] = (int)v;
  }
  return 0;
}

static int infer_transpose(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_in, (void)n_out;
  int perm[ENG_MAX_DIMS], r = in[0].ndims;
  TRY(eng_ops__get_perm(p, r, perm, e));
  int64_t y[ENG_MAX_DIMS];
  for (int i = 0; i < r; i++) y[i] = in[0].dims[perm[i]];
  op_set_out(&out[0], in[0].dt, r, y);
  return 0;
}

static int run_transpose(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int perm[ENG_MAX_DIMS], r = in[0].ndims;
  TRY(eng_ops__get_perm(p, r, perm, e));
  size_t n = op_numel(&in[0]), esz = eng_elem_size(in[0].dt);
  if (!n) return 0;
  if (r == 0) memcpy(out[0].data, in[0].data, esz);
  else k_transpose(out[0].data, in[0].data, esz, r, in[0].dims, perm);
  return 0;
}

// --- Concat

static int parse_axis_required(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                               err *e) {
  (void)g, (void)opset;
  const eng_attr *a = eng_node_attr(n, "axis");
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'axis' is required");
  p->axis = a->i;
  return 0;
}

static int infer_concat(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_out;
  int r = in[0].ndims;
  if (r == 0) return err_set(e, ERR_INVALID_ARGUMENT, "cannot concatenate scalars");
  int64_t ax = 0;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  int64_t y[ENG_MAX_DIMS];
  memcpy(y, in[0].dims, sizeof y);
  for (int i = 1; i < n_in; i++) {
    if (in[i].dt != in[0].dt || in[i].ndims != r)
      return err_set(e, ERR_INVALID_ARGUMENT, "input %d differs in type or rank", i);
    for (int d = 0; d < r; d++)
      if (d != ax && in[i].dims[d] != in[0].dims[d])
        return err_set(e, ERR_INVALID_ARGUMENT, "input %d differs at dim %d: %lld vs %lld", i, d,
                       (long long)in[i].dims[d], (long long)in[0].dims[d]);
    y[ax] += in[i].dims[ax];
  }
  op_set_out(&out[0], in[0].dt, r, y);
  return 0;
}

static int run_concat(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t esz = eng_elem_size(in[0].dt), inner = (size_t)op_prod(in[0].dims, ax + 1, r);
  size_t outer = (size_t)op_prod(in[0].dims, 0, ax);
  enum { SMALL = 32 };
  const void *xs_s[SMALL];
  size_t rb_s[SMALL];
  const void **xs = xs_s;
  size_t *rb = rb_s;
  if (n_in > SMALL) {
    xs = malloc((size_t)n_in * sizeof *xs);
    rb = malloc((size_t)n_in * sizeof *rb);
    if (!xs || !rb) {
      free(xs);
      free(rb);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  for (int i = 0; i < n_in; i++) {
    xs[i] = in[i].data;
    rb[i] = (size_t)in[i].dims[ax] * inner * esz;
  }
  if (op_numel(&out[0])) k_concat(out[0].data, (const void *const *)xs, rb, n_in, outer);
  if (xs != xs_s) {
    free(xs);
    free(rb);
  }
  return 0;
}

// --- Shape (start/end from opset 15)

static int parse_shape(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                       err *e) {
  (void)g, (void)e;
  p->start = opset >= 15 ? op_attr_int(n, "start", 0) : 0;
  p->has_end = opset >= 15 && eng_node_attr(n, "end") != NULL;
  p->end = p->has_end ? op_attr_int(n, "end", 0) : 0;
  return 0;
}

static void shape_range(const eng_op_params *p, int r, int64_t *s, int64_t *en) {
  int64_t a = p->start < 0 ? p->start + r : p->start, b = p->has_end ? p->end : r;
  if (b < 0) b += r;
  *s = a < 0 ? 0 : a > r ? r : a;
  *en = b < 0 ? 0 : b > r ? r : b;
  if (*en < *s) *en = *s;
}

static int infer_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  int64_t s, en;
  shape_range(p, in[0].ndims, &s, &en);
  int64_t d = en - s;
  op_set_out(&out[0], DT_INT64, 1, &d);
  return 0;
}

static int run_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  int64_t s, en;
  shape_range(p, in[0].ndims, &s, &en);
  for (int64_t i = s; i < en; i++) ((int64_t *)out[0].data)[i - s] = in[0].dims[i];
  return 0;
}

// --- Size: the element count, an INT64 scalar; like Shape it reads only
// its input's shape, so the planner folds it (on both backends)

static int infer_size(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)in, (void)n_in, (void)n_out, (void)e;
  op_set_out(&out[0], DT_INT64, 0, NULL);
  return 0;
}

static int run_size(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  *(int64_t *)out[0].data = (int64_t)op_numel(&in[0]);
  return 0;
}

// --- Gather

static int parse_gather(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                        err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = op_attr_int(n, "axis", 0);
  return 0;
}

static int infer_gather(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(need_elem(&in[0], "data", e));
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

static int run_gather(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
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

static int infer_gather_elements(const eng_op_params *p, const eng_tensor *in, int n_in,
                                 eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(need_elem(&in[0], "data", e));
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

static int run_gather_elements(const eng_op_params *p, const eng_tensor *in, int n_in,
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

static int parse_gather_nd(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
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

static int infer_gather_nd(const eng_op_params *p, const eng_tensor *in, int n_in,
                           eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(need_elem(&in[0], "data", e));
  TRY(need_index(&in[1], e));
  gnd s;
  TRY(gather_nd_dims(p, in, &s, e));
  op_set_out(&out[0], in[0].dt, s.ny, s.y);
  return 0;
}

static int run_gather_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
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

// --- Slice (starts/ends/axes as attributes before opset 10, inputs with steps after)

static int parse_slice(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                       err *e) {
  (void)g;
  if (opset >= 10) {
    if (n->n_in < 3) return err_set(e, ERR_INVALID_ARGUMENT, "starts and ends are required");
    return 0;
  }
  if (n->n_in > 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "Slice before opset 10 takes 1 input, got %d", n->n_in);
  int ns, ne, na;
  TRY(eng_ops__attr_ints(n, "starts", p->starts, ENG_MAX_DIMS, &ns, e));
  TRY(eng_ops__attr_ints(n, "ends", p->ends, ENG_MAX_DIMS, &ne, e));
  TRY(eng_ops__attr_ints(n, "axes", p->ints, ENG_MAX_DIMS, &na, e));
  if (ns < 0 || ne != ns || (na >= 0 && na != ns))
    return err_set(e, ERR_INVALID_ARGUMENT, "starts, ends (and axes) must be given, same length");
  p->n_se = ns;
  p->has_ints = na >= 0;
  p->n_ints = na > 0 ? na : 0;
  return 0;
}

// Per dim of the data: first index, step and result length.
static int slice_dims(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *first,
                      int64_t *steps, int64_t *y, err *e) {
  int r = in[0].ndims, n, na = -1, nst = -1;
  int64_t st[ENG_MAX_DIMS], en[ENG_MAX_DIMS], ax[ENG_MAX_DIMS], sp[ENG_MAX_DIMS];
  if (op_given(in, n_in, 1)) {
    int ne;
    TRY(eng_ops__read_ints(&in[1], "starts", st, ENG_MAX_DIMS, &n, e));
    TRY(eng_ops__read_ints(&in[2], "ends", en, ENG_MAX_DIMS, &ne, e));
    if (ne != n) return err_set(e, ERR_INVALID_ARGUMENT, "%d starts but %d ends", n, ne);
    if (op_given(in, n_in, 3)) TRY(eng_ops__read_ints(&in[3], "axes", ax, ENG_MAX_DIMS, &na, e));
    if (op_given(in, n_in, 4)) TRY(eng_ops__read_ints(&in[4], "steps", sp, ENG_MAX_DIMS, &nst, e));
  } else {
    n = p->n_se;
    memcpy(st, p->starts, sizeof st);
    memcpy(en, p->ends, sizeof en);
    if (p->has_ints) {
      na = p->n_ints;
      memcpy(ax, p->ints, sizeof ax);
    }
  }
  if ((na >= 0 && na != n) || (nst >= 0 && nst != n))
    return err_set(e, ERR_INVALID_ARGUMENT, "starts, ends, axes and steps differ in length");
  int seen[ENG_MAX_DIMS] = {0};
  for (int d = 0; d < r; d++) {
    first[d] = 0;
    steps[d] = 1;
    y[d] = in[0].dims[d];
  }
  for (int i = 0; i < n; i++) {
    int64_t a = i;
    if (na >= 0) TRY(eng_ops__norm_axis(ax[i], r, &a, e));
    else if (i >= r) return err_set(e, ERR_INVALID_ARGUMENT, "%d starts for rank %d", n, r);
    if (seen[a]++) return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld repeated", (long long)a);
    int64_t dim = in[0].dims[a], step = nst >= 0 ? sp[i] : 1, s = st[i], t = en[i];
    if (step == 0) return err_set(e, ERR_INVALID_ARGUMENT, "step 0 on axis %lld", (long long)a);
    if (step < -INT64_MAX) step = -INT64_MAX;  // so -step exists
    if (s < 0) s = s < -dim ? -1 : s + dim;
    if (t < 0) t = t < -dim ? -1 : t + dim;
    int64_t len;
    if (step > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      t = t < 0 ? 0 : t > dim ? dim : t;
      len = t > s ? (t - s - 1) / step + 1 : 0;
    } else {
      s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
      t = t < -1 ? -1 : t > dim - 1 ? dim - 1 : t;
      len = s > t ? (s - t - 1) / -step + 1 : 0;
    }
    first[a] = len ? s : 0;
    steps[a] = step;
    y[a] = len;
  }
  return 0;
}

static int infer_slice(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_out;
  TRY(need_elem(&in[0], "data", e));
  int64_t first[ENG_MAX_DIMS], steps[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(slice_dims(p, in, n_in, first, steps, y, e));
  op_set_out(&out[0], in[0].dt, in[0].ndims, y);
  return 0;
}

static int run_slice(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_out;
  int64_t first[ENG_MAX_DIMS], steps[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(slice_dims(p, in, n_in, first, steps, y, e));
  size_t esz = eng_elem_size(in[0].dt);
  if (in[0].ndims == 0) memcpy(out[0].data, in[0].data, esz);
  else k_slice(out[0].data, in[0].data, esz, in[0].ndims, in[0].dims, first, steps, y);
  return 0;
}

// --- ConstantOfShape

static int parse_const_of_shape(const eng_graph *g, const eng_node *n, int opset,
                                eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_attr *a = eng_node_attr(n, "value");
  p->value_dt = DT_FP32;
  memset(p->value, 0, sizeof p->value);
  if (!a) return 0;
  if (!a->t || eng_numel(a->t->ndims, a->t->dims) != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'value' must be a one-element tensor");
  k_elem k;
  if (eng_ops_elem_of(a->t->dt, &k) != 0 || eng_elem_size(a->t->dt) > sizeof p->value)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: value of type %s",
                   dtype_wire_name(a->t->dt));
  p->value_dt = a->t->dt;
  memcpy(p->value, a->t->data, eng_elem_size(a->t->dt));
  return 0;
}

static int infer_const_of_shape(const eng_op_params *p, const eng_tensor *in, int n_in,
                                eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t y[ENG_MAX_DIMS];
  int n;
  TRY(eng_ops__read_ints(&in[0], "shape", y, ENG_MAX_DIMS, &n, e));
  TRY(eng_ops__checked_numel(n, y, "shape", e));
  op_set_out(&out[0], p->value_dt, n, y);
  return 0;
}

static int run_const_of_shape(const eng_op_params *p, const eng_tensor *in, int n_in,
                              eng_tensor *out, int n_out, err *e) {
  (void)in, (void)n_in, (void)n_out, (void)e;
  size_t n = op_numel(&out[0]), esz = eng_elem_size(p->value_dt);
  for (size_t i = 0; i < n; i++) memcpy((uint8_t *)out[0].data + i * esz, p->value, esz);
  return 0;
}

// --- Range

// ONNX's Range types: FP32 (every float width inside a plan) and the
// signed integers INT16, INT32, INT64.
static int range_int(dtype t, k_elem *k) {
  if (t != DT_INT64 && t != DT_INT32 && t != DT_INT16) return -1;
  return eng_ops_elem_of(t, k);
}

// An integer scalar of type k, exact.
static int64_t range_scalar(const eng_tensor *t, k_elem k) {
  int64_t v;
  k_cast(&v, K_I64, t->data, k, 1);
  return v;
}

static int range_count(const eng_tensor *in, int64_t *count, err *e) {
  dtype t = in[0].dt;
  k_elem k = K_F32;
  if (t != DT_FP32 && range_int(t, &k) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(t));
  for (int i = 0; i < 3; i++) {
    if (in[i].dt != t || op_numel(&in[i]) != 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "start, limit and delta must be %s scalars",
                     dtype_wire_name(t));
    if (!in[i].data)
      return err_set(e, ERR_INVALID_ARGUMENT, "input %d is not known when planning", i);
  }
  if (t == DT_FP32) {
    double s = eng_ops__scalar(&in[0]), l = eng_ops__scalar(&in[1]), d = eng_ops__scalar(&in[2]);
    if (d == 0) return err_set(e, ERR_INVALID_ARGUMENT, "delta is 0");
    double c = ceil((l - s) / d);
    if (!(c <= (double)ENG_MAX_NUMEL))  // also NaN
      return err_set(e, ERR_INVALID_ARGUMENT, "range of %g elements", c);
    *count = c > 0 ? (int64_t)c : 0;
    return 0;
  }
  // exact, without the double's 53 bits
  int64_t s = range_scalar(&in[0], k), l = range_scalar(&in[1], k), d = range_scalar(&in[2], k);
  if (d == 0) return err_set(e, ERR_INVALID_ARGUMENT, "delta is 0");
  uint64_t span = d > 0 ? (l > s ? (uint64_t)l - (uint64_t)s : 0)
                        : (s > l ? (uint64_t)s - (uint64_t)l : 0);
  uint64_t ad = d > 0 ? (uint64_t)d : 0 - (uint64_t)d;
  uint64_t c = span ? (span - 1) / ad + 1 : 0;
  if (c > (uint64_t)ENG_MAX_NUMEL)
    return err_set(e, ERR_INVALID_ARGUMENT, "range of %llu elements", (unsigned long long)c);
  *count = (int64_t)c;
  return 0;
}

static int infer_range(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  int64_t c = 0;
  TRY(range_count(in, &c, e));
  op_set_out(&out[0], in[0].dt, 1, &c);
  return 0;
}

// Accumulates like ONNX Runtime (value += delta), so FP32 results match bit
// for bit; integers in uint64_t, each value narrowed to the type (k_cast
// wraps), which the count keeps in range.
static int run_range(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  size_t n = op_numel(&out[0]);
  k_elem k;
  if (in[0].dt == DT_FP32) {
    float v = *(const float *)in[0].data, d = *(const float *)in[2].data;
    for (size_t i = 0; i < n; i++, v += d) ((float *)out[0].data)[i] = v;
  } else if (range_int(in[0].dt, &k) == 0) {
    uint64_t v = (uint64_t)range_scalar(&in[0], k), d = (uint64_t)range_scalar(&in[2], k);
    size_t esz = dtype_size(in[0].dt);
    for (size_t i = 0; i < n; i++, v += d) {
      int64_t x = (int64_t)v;
      k_cast((char *)out[0].data + i * esz, k, &x, K_I64, 1);
    }
  } else {
    return err_set(e, ERR_INTERNAL, "no Range of %s", dtype_wire_name(in[0].dt));
  }
  return 0;
}

// --- Expand (bidirectional broadcast of the data with the shape input)

static int expand_dims(const eng_tensor *in, int *nd, int64_t *y, int64_t *xd, err *e) {
  eng_tensor s = {DT_INT64, 0, {0}, NULL, 0};
  TRY(eng_ops__read_ints(&in[1], "shape", s.dims, ENG_MAX_DIMS, &s.ndims, e));
  for (int i = 0; i < s.ndims; i++)
    if (s.dims[i] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "negative dim %lld in shape", (long long)s.dims[i]);
  int64_t sd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &s, nd, y, xd, sd, e));
  return eng_ops__checked_numel(*nd, y, "result", e);
}

static int infer_expand(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(need_elem(&in[0], "input", e));
  int nd;
  int64_t y[ENG_MAX_DIMS], xd[ENG_MAX_DIMS];
  TRY(expand_dims(in, &nd, y, xd, e));
  op_set_out(&out[0], in[0].dt, nd, y);
  return 0;
}

static int run_expand(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  int nd;
  int64_t y[ENG_MAX_DIMS], xd[ENG_MAX_DIMS];
  TRY(expand_dims(in, &nd, y, xd, e));
  if (nd == 0) memcpy(out[0].data, in[0].data, eng_elem_size(in[0].dt));
  else k_expand(out[0].data, in[0].data, eng_elem_size(in[0].dt), nd, y, xd);
  return 0;
}

// --- Tile (repeats read while planning: DeBERTa's relative-position bias, torch's repeat)

static int tile_dims(const eng_tensor *in, int64_t *y, err *e) {
  int64_t reps[ENG_MAX_DIMS];
  int nr;
  TRY(eng_ops__read_ints(&in[1], "repeats", reps, ENG_MAX_DIMS, &nr, e));
  if (nr != in[0].ndims)
    return err_set(e, ERR_INVALID_ARGUMENT, "repeats has %d values for an input of rank %d", nr, in[0].ndims);
  for (int i = 0; i < nr; i++) {
    if (reps[i] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "negative repeat %lld", (long long)reps[i]);
    if (__builtin_mul_overflow(in[0].dims[i], reps[i], &y[i]))
      return err_set(e, ERR_INVALID_ARGUMENT, "dim %d overflows", i);
  }
  return eng_ops__checked_numel(nr, y, "result", e);
}


static int run_tile(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                    err *e) {
  (void)p, (void)n_in, (void)n_out;
  int64_t y[ENG_MAX_DIMS];
  TRY(tile_dims(in, y, e));
  k_tile(out[0].data, in[0].data, eng_elem_size(in[0].dt), in[0].ndims, y, in[0].dims);
  return 0;
}

// --- Trilu (upper or lower triangle of the last two dims; k shifts the diagonal)

static int parse_trilu(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                       err *e) {
  (void)g, (void)opset, (void)e;
  p->upper = op_attr_int(n, "upper", 1) != 0;
  return 0;
}

static int infer_trilu(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)p, (void)n_out;
  TRY(need_elem(&in[0], "input", e));
  if (in[0].ndims < 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "input must have rank >= 2, got %d", in[0].ndims);
  if (op_given(in, n_in, 1) && (in[1].dt != DT_INT64 || op_numel(&in[1]) != 1))
    return err_set(e, ERR_INVALID_ARGUMENT, "k must be an int64 scalar");
  op_set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
  return 0;
}

static int run_trilu(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_out, (void)e;
  int r = in[0].ndims;
  int64_t k = op_given(in, n_in, 1) ? *(const int64_t *)in[1].data : 0;
  k_trilu(out[0].data, in[0].data, eng_elem_size(in[0].dt), (size_t)op_prod(in[0].dims, 0, r - 2),
          in[0].dims[r - 2], in[0].dims[r - 1], k, p->upper);
  return 0;
}

// --- Split (sizes from the attribute before opset 13, the optional input
// after; without them equal parts: exact before opset 18, ceil-sized with a
// smaller last part from 18, where num_outputs must match the outputs)

enum { SPLIT_MAX = 64 };

static int parse_split(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                       err *e) {
  (void)g;
  p->axis = op_attr_int(n, "axis", 0);
  if (n->n_out > SPLIT_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%d outputs, at most %d supported", n->n_out,
                   SPLIT_MAX);
  if (opset < 13) {
    int cnt;
    TRY(eng_ops__attr_ints(n, "split", p->ints, ENG_MAX_DIMS, &cnt, e));
    p->has_ints = cnt >= 0;
    p->n_ints = cnt > 0 ? cnt : 0;
    if (n->n_in > 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "split is an input only from opset 13");
  }
  int given = n->n_in > 1 && n->in[1] >= 0;
  if (opset >= 18) {
    const eng_attr *a = eng_node_attr(n, "num_outputs");
    if (a && given)
      return err_set(e, ERR_INVALID_ARGUMENT, "both the split input and num_outputs are given");
    if (!a && !given)
      return err_set(e, ERR_INVALID_ARGUMENT, "either the split input or num_outputs is required");
    if (a && a->i != n->n_out)
      return err_set(e, ERR_INVALID_ARGUMENT, "num_outputs is %lld but the node has %d outputs",
                     (long long)a->i, n->n_out);
  }
  p->mode = opset >= 18;  // uneven equal parts allowed
  return 0;
}

// The size of each of the n_out parts along the (normalised) axis.
static int split_sizes(const eng_op_params *p, const eng_tensor *in, int n_in, int n_out,
                       int64_t *ax, int64_t *sz, err *e) {
  int r = in[0].ndims;
  if (r < 1) return err_set(e, ERR_INVALID_ARGUMENT, "input must have rank >= 1");
  TRY(eng_ops__norm_axis(p->axis, r, ax, e));
  int64_t dim = in[0].dims[*ax];
  int cnt = -1;
  if (op_given(in, n_in, 1)) {
    TRY(eng_ops__read_ints(&in[1], "split", sz, SPLIT_MAX, &cnt, e));
  } else if (p->has_ints) {
    cnt = p->n_ints;
    memcpy(sz, p->ints, (size_t)cnt * sizeof *sz);
  }
  if (cnt >= 0) {
    if (cnt != n_out)
      return err_set(e, ERR_INVALID_ARGUMENT, "split has %d sizes for %d outputs", cnt, n_out);
    int64_t sum = 0;
    for (int i = 0; i < cnt; i++) {
      if (sz[i] < 0 || sz[i] > dim)
        return err_set(e, ERR_INVALID_ARGUMENT, "split size %lld out of range", (long long)sz[i]);
      sum += sz[i];
    }
    if (sum != dim)
      return err_set(e, ERR_INVALID_ARGUMENT, "split sizes sum to %lld, the axis has %lld",
                     (long long)sum, (long long)dim);
    return 0;
  }
  int64_t part = (dim + n_out - 1) / n_out;
  if (!p->mode && dim % n_out != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis of %lld does not split into %d equal parts",
                   (long long)dim, n_out);
  if (p->mode && n_out > 1 && part * (n_out - 1) > dim)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis of %lld cannot give %d parts of %lld",
                   (long long)dim, n_out, (long long)part);
  for (int i = 0; i < n_out; i++) sz[i] = i < n_out - 1 ? part : dim - part * (n_out - 1);
  return 0;
}

static int infer_split(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  TRY(need_elem(&in[0], "input", e));
  int64_t ax, sz[SPLIT_MAX];
  TRY(split_sizes(p, in, n_in, n_out, &ax, sz, e));
  for (int i = 0; i < n_out; i++) {
    if (out[i].dt == DT_INVALID) continue;  // omitted
    op_set_out(&out[i], in[0].dt, in[0].ndims, in[0].dims);
    out[i].dims[ax] = sz[i];
  }
  return 0;
}

static int run_split(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  int64_t ax, sz[SPLIT_MAX];
  TRY(split_sizes(p, in, n_in, n_out, &ax, sz, e));
  void *ys[SPLIT_MAX];
  size_t rb[SPLIT_MAX];
  size_t inner = (size_t)op_prod(in[0].dims, (int)ax + 1, in[0].ndims) * eng_elem_size(in[0].dt);
  for (int i = 0; i < n_out; i++) {
    ys[i] = out[i].dt == DT_INVALID ? NULL : out[i].data;
    rb[i] = (size_t)sz[i] * inner;
  }
  k_split(ys, rb, n_out, in[0].data, (size_t)op_prod(in[0].dims, 0, (int)ax));
  return 0;
}

// --- table

const eng_op_def eng_ops__index[] = {
    {"DepthToSpace", 1, 1, 1, 1, 0, eng_ops__parse_space, eng_ops__infer_space, eng_ops__run_space, 0, NULL, NULL},
    {"SpaceToDepth", 1, 1, 1, 1, 0, eng_ops__parse_space, eng_ops__infer_space, eng_ops__run_space, 0, NULL, NULL},
    {"ReverseSequence", 2, 2, 1, 1, 0, eng_ops__parse_revseq, eng_ops__infer_revseq, eng_ops__run_revseq, 0, NULL,
     NULL},
    {"OneHot", 3, 3, 1, 1, 0, eng_ops__parse_onehot, eng_ops__infer_onehot, eng_ops__run_onehot, ENG_IN(1), NULL,
     NULL},
    {"EyeLike", 1, 1, 1, 1, ENG_OP_SHAPE_ONLY, eng_ops__parse_eyelike, eng_ops__infer_eyelike, eng_ops__run_eyelike, 0,
     NULL, NULL},
    {"ScatterElements", 3, 3, 1, 1, ENG_OP_INPLACE, eng_ops__parse_scatter, eng_ops__infer_scatter_elements,
     eng_ops__run_scatter_elements, 0, NULL, NULL},
    {"Scatter", 3, 3, 1, 1, ENG_OP_INPLACE, eng_ops__parse_scatter, eng_ops__infer_scatter_elements,
     eng_ops__run_scatter_elements, 0, NULL, NULL},
    {"ScatterND", 3, 3, 1, 1, ENG_OP_INPLACE, eng_ops__parse_scatter, eng_ops__infer_scatter_nd,
     eng_ops__run_scatter_nd, 0, NULL, NULL},
    {"Flatten", 1, 1, 1, 1, ENG_OP_ALIAS, parse_flatten, infer_flatten, run_view, 0, NULL, NULL},
    {"Reshape", 2, 2, 1, 1, ENG_OP_ALIAS, parse_reshape, infer_reshape, run_view, ENG_IN(1), NULL, NULL},
    {"Squeeze", 1, 2, 1, 1, ENG_OP_ALIAS, parse_squeeze, infer_squeeze, run_view, ENG_IN(1), NULL, NULL},
    {"Unsqueeze", 1, 2, 1, 1, ENG_OP_ALIAS, parse_unsqueeze, infer_unsqueeze, run_view, ENG_IN(1), NULL, NULL},
    {"Identity", 1, 1, 1, 1, ENG_OP_ALIAS | ENG_OP_ELEMWISE, op_parse_none, infer_same, run_view, 0, NULL, NULL},
    {"Dropout", 1, 3, 1, 2, ENG_OP_ALIAS, op_parse_none, infer_same, run_dropout, 0, NULL, NULL},
    {"Transpose", 1, 1, 1, 1, 0, parse_transpose, infer_transpose, run_transpose, 0, NULL, NULL},
    {"Concat", 1, 1 << 20, 1, 1, 0, parse_axis_required, infer_concat, run_concat, 0, NULL, NULL},
    {"Shape", 1, 1, 1, 1, ENG_OP_SHAPE_ONLY, parse_shape, infer_shape, run_shape, 0, NULL, NULL},
    {"Size", 1, 1, 1, 1, ENG_OP_SHAPE_ONLY, op_parse_none, infer_size, run_size, 0, NULL, NULL},
    {"Gather", 2, 2, 1, 1, 0, parse_gather, infer_gather, run_gather, 0, NULL, NULL},
    {"Slice", 1, 5, 1, 1, 0, parse_slice, infer_slice, run_slice,
     ENG_IN(1) | ENG_IN(2) | ENG_IN(3) | ENG_IN(4), NULL, NULL},
    {"ConstantOfShape", 1, 1, 1, 1, ENG_OP_ELEMWISE, parse_const_of_shape, infer_const_of_shape,
     run_const_of_shape, ENG_IN(0), NULL, NULL},
    {"Range", 3, 3, 1, 1, 0, op_parse_none, infer_range, run_range,
     ENG_IN(0) | ENG_IN(1) | ENG_IN(2), NULL, NULL},
    {"Expand", 2, 2, 1, 1, ENG_OP_ELEMWISE, op_parse_none, infer_expand, run_expand, ENG_IN(1), NULL, NULL},
    {"Tile", 2, 2, 1, 1, 0, op_parse_none, eng_ops__infer_tile, run_tile, ENG_IN(1), NULL, NULL},
    {"GatherElements", 2, 2, 1, 1, 0, parse_gather, infer_gather_elements, run_gather_elements, 0,
     NULL, NULL},
    {"GatherND", 2, 2, 1, 1, 0, parse_gather_nd, infer_gather_nd, run_gather_nd, 0, NULL, NULL},
    {"Trilu", 1, 2, 1, 1, ENG_OP_INPLACE, parse_trilu, infer_trilu, run_trilu, 0, NULL, NULL},
    {"Split", 1, 2, 1, SPLIT_MAX, 0, parse_split, infer_split, run_split, ENG_IN(1), NULL, NULL},
};
const size_t eng_ops__n_index = sizeof eng_ops__index / sizeof eng_ops__index[0];
