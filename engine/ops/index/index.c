// engine/ops/index/index.c: the shape and index ops on the CPU, and the
// family's table. Here: the views (Flatten, Reshape, Squeeze, Unsqueeze,
// Identity, Dropout), which share their input's bytes; Transpose and Concat;
// Trilu and Split. The shape arithmetic exporters emit around Reshape
// (Shape, Size, Slice, ConstantOfShape, Range, Expand) lives in
// index_shape.c; Gather, GatherElements and GatherND in index_gather.c;
// ScatterElements, Scatter and ScatterND in index_scatter.c; DepthToSpace,
// SpaceToDepth, ReverseSequence, EyeLike, Tile and OneHot in index_space.c (both
// CPU only). The CUDA path is index_cuda.c.
#include "engine/ops/index/index.h"

#include <stdlib.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

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
  TRY(eng_ops__need_elem(&in[0], "input", e));
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
  TRY(eng_ops__need_elem(&in[0], "input", e));
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
    {"Shape", 1, 1, 1, 1, ENG_OP_SHAPE_ONLY, eng_ops__parse_shape, eng_ops__infer_shape, eng_ops__run_shape, 0, NULL, NULL},
    {"Size", 1, 1, 1, 1, ENG_OP_SHAPE_ONLY, op_parse_none, eng_ops__infer_size, eng_ops__run_size, 0, NULL, NULL},
    {"Gather", 2, 2, 1, 1, 0, eng_ops__parse_gather, eng_ops__infer_gather, eng_ops__run_gather, 0, NULL, NULL},
    {"Slice", 1, 5, 1, 1, 0, eng_ops__parse_slice, eng_ops__infer_slice, eng_ops__run_slice,
     ENG_IN(1) | ENG_IN(2) | ENG_IN(3) | ENG_IN(4), NULL, NULL},
    {"ConstantOfShape", 1, 1, 1, 1, ENG_OP_ELEMWISE, eng_ops__parse_const_of_shape, eng_ops__infer_const_of_shape,
     eng_ops__run_const_of_shape, ENG_IN(0), NULL, NULL},
    {"Range", 3, 3, 1, 1, 0, op_parse_none, eng_ops__infer_range, eng_ops__run_range,
     ENG_IN(0) | ENG_IN(1) | ENG_IN(2), NULL, NULL},
    {"Expand", 2, 2, 1, 1, ENG_OP_ELEMWISE, op_parse_none, eng_ops__infer_expand, eng_ops__run_expand, ENG_IN(1), NULL, NULL},
    {"Tile", 2, 2, 1, 1, 0, op_parse_none, eng_ops__infer_tile, eng_ops__run_tile, ENG_IN(1), NULL, NULL},
    {"GatherElements", 2, 2, 1, 1, 0, eng_ops__parse_gather, eng_ops__infer_gather_elements, eng_ops__run_gather_elements, 0,
     NULL, NULL},
    {"GatherND", 2, 2, 1, 1, 0, eng_ops__parse_gather_nd, eng_ops__infer_gather_nd, eng_ops__run_gather_nd, 0, NULL, NULL},
    {"Trilu", 1, 2, 1, 1, ENG_OP_INPLACE, parse_trilu, infer_trilu, run_trilu, 0, NULL, NULL},
    {"Split", 1, 2, 1, SPLIT_MAX, 0, parse_split, infer_split, run_split, ENG_IN(1), NULL, NULL},
};
const size_t eng_ops__n_index = sizeof eng_ops__index / sizeof eng_ops__index[0];
