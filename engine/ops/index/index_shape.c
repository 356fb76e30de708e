// engine/ops/index/index_shape.c: the shape arithmetic exporters emit around
// Reshape, on the CPU: Shape, Size, Slice, ConstantOfShape, Range and Expand,
// listed in index.c's table. Their results are mostly small int64 tensors
// computed from input shapes, which the planner folds per input-shape
// signature (plan.c); they also run as ordinary ops on any element type when
// their inputs are data. Of these only Expand has a CUDA path (index_cuda.c).
#include "engine/ops/index/index.h"

#include <math.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// --- Shape (start/end from opset 15)

int eng_ops__parse_shape(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
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

int eng_ops__infer_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  int64_t s, en;
  shape_range(p, in[0].ndims, &s, &en);
  int64_t d = en - s;
  op_set_out(&out[0], DT_INT64, 1, &d);
  return 0;
}

int eng_ops__run_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  int64_t s, en;
  shape_range(p, in[0].ndims, &s, &en);
  for (int64_t i = s; i < en; i++) ((int64_t *)out[0].data)[i - s] = in[0].dims[i];
  return 0;
}

// --- Size: the element count, an INT64 scalar; like Shape it reads only
// its input's shape, so the planner folds it (on both backends)

int eng_ops__infer_size(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)in, (void)n_in, (void)n_out, (void)e;
  op_set_out(&out[0], DT_INT64, 0, NULL);
  return 0;
}

int eng_ops__run_size(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  *(int64_t *)out[0].data = (int64_t)op_numel(&in[0]);
  return 0;
}

// --- Slice (starts/ends/axes as attributes before opset 10, inputs with steps after)

int eng_ops__parse_slice(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
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

int eng_ops__slice_dims(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *first, int64_t *steps,
                        int64_t *y, err *e) {
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

int eng_ops__infer_slice(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_out;
  TRY(eng_ops__need_elem(&in[0], "data", e));
  int64_t first[ENG_MAX_DIMS], steps[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(eng_ops__slice_dims(p, in, n_in, first, steps, y, e));
  op_set_out(&out[0], in[0].dt, in[0].ndims, y);
  return 0;
}

int eng_ops__run_slice(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_out;
  int64_t first[ENG_MAX_DIMS], steps[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(eng_ops__slice_dims(p, in, n_in, first, steps, y, e));
  size_t esz = eng_elem_size(in[0].dt);
  if (in[0].ndims == 0) memcpy(out[0].data, in[0].data, esz);
  else k_slice(out[0].data, in[0].data, esz, in[0].ndims, in[0].dims, first, steps, y);
  return 0;
}

// --- ConstantOfShape

int eng_ops__parse_const_of_shape(const eng_graph *g, const eng_node *n, int opset,
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

int eng_ops__infer_const_of_shape(const eng_op_params *p, const eng_tensor *in, int n_in,
                                eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t y[ENG_MAX_DIMS];
  int n;
  TRY(eng_ops__read_ints(&in[0], "shape", y, ENG_MAX_DIMS, &n, e));
  TRY(eng_ops__checked_numel(n, y, "shape", e));
  op_set_out(&out[0], p->value_dt, n, y);
  return 0;
}

int eng_ops__run_const_of_shape(const eng_op_params *p, const eng_tensor *in, int n_in,
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

int eng_ops__infer_range(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
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
int eng_ops__run_range(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
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

int eng_ops__infer_expand(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(eng_ops__need_elem(&in[0], "input", e));
  int nd;
  int64_t y[ENG_MAX_DIMS], xd[ENG_MAX_DIMS];
  TRY(expand_dims(in, &nd, y, xd, e));
  op_set_out(&out[0], in[0].dt, nd, y);
  return 0;
}

int eng_ops__run_expand(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  int nd;
  int64_t y[ENG_MAX_DIMS], xd[ENG_MAX_DIMS];
  TRY(expand_dims(in, &nd, y, xd, e));
  if (nd == 0) memcpy(out[0].data, in[0].data, eng_elem_size(in[0].dt));
  else k_expand(out[0].data, in[0].data, eng_elem_size(in[0].dt), nd, y, xd);
  return 0;
}

