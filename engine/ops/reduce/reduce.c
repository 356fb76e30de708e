// engine/ops/reduce/reduce.c: ReduceMean/ReduceSum/ReduceMax/ReduceMin/ReduceProd
// over a set of axes (k_reduce: FP32, every float width inside a plan, and every
// integer type), ReduceSumSquare/ReduceL1/ReduceL2/ReduceLogSum/ReduceLogSumExp
// (FP32). ArgMax and ArgMin (k_arg_reduce: every float and integer type), TopK
// (k_topk; K known when planning), CumProd (k_cumprod). The last three: CPU only. Axes are an attribute before opset 18 (ReduceSum:
// 13) and an optional input after, read at shape inference (host_in).
// CumSum, the running sum along one axis, lives here too.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

static int parse_reduce(const eng_node *n, int opset, int input_from, k_redop op,
                        eng_op_params *p, err *e) {
  p->mode = op;
  p->keepdims = op_attr_int(n, "keepdims", 1) != 0;
  p->noop_empty = op_attr_int(n, "noop_with_empty_axes", 0) != 0;
  if (opset < input_from) {
    int cnt;
    TRY(eng_ops__attr_ints(n, "axes", p->ints, ENG_MAX_DIMS, &cnt, e));
    p->has_ints = cnt >= 0;
    p->n_ints = cnt > 0 ? cnt : 0;
    if (n->n_in > 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "axes is an input only from opset %d", input_from);
  }
  return 0;
}

#define PARSE_REDUCE(name, from, op)                                                             \
  static int name(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) { \
    (void)g;                                                                                     \
    return parse_reduce(n, opset, from, op, p, e);                                               \
  }
PARSE_REDUCE(parse_mean, 18, K_RMEAN)
PARSE_REDUCE(parse_max, 18, K_RMAX)
PARSE_REDUCE(parse_min, 18, K_RMIN)
PARSE_REDUCE(parse_sum, 13, K_RSUM)
PARSE_REDUCE(parse_prod, 18, K_RPROD)
PARSE_REDUCE(parse_sumsq, 18, K_RSUMSQ)
PARSE_REDUCE(parse_l1, 18, K_RL1)
PARSE_REDUCE(parse_l2, 18, K_RL2)
PARSE_REDUCE(parse_logsum, 18, K_RLOGSUM)
PARSE_REDUCE(parse_logsumexp, 18, K_RLOGSUMEXP)

// mask[d] = 1 for each reduced axis; *noop when nothing is reduced
// (empty axes with noop_with_empty_axes).
static int reduce_mask(const eng_op_params *p, const eng_tensor *in, int n_in, int *mask,
                       int *noop, err *e) {
  int r = in[0].ndims, nax = 0;
  int64_t axes[ENG_MAX_DIMS];
  if (op_given(in, n_in, 1)) {
    TRY(eng_ops__read_ints(&in[1], "axes", axes, ENG_MAX_DIMS, &nax, e));
  } else if (p->has_ints) {
    nax = p->n_ints;
    memcpy(axes, p->ints, sizeof axes);
  }
  *noop = nax == 0 && p->noop_empty;
  for (int d = 0; d < r; d++) mask[d] = nax == 0 && !p->noop_empty;
  for (int i = 0; i < nax; i++) {
    int64_t ax;
    TRY(eng_ops__norm_axis(axes[i], r, &ax, e));
    mask[ax] = 1;
  }
  return 0;
}

static int infer_reduce(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_out;
  k_elem t;
  int extreme = p->mode == K_RMAX || p->mode == K_RMIN;
  // BOOL: ReduceMax is any, ReduceMin all (as bytes 0/1: run_reduce)
  if (in[0].dt == DT_BOOL && !extreme)
    return err_set(e, ERR_INVALID_ARGUMENT, "data has unsupported element type BOOL (ReduceMax and ReduceMin take it)");
  if (in[0].dt == DT_FP16 || eng_ops_elem_of(in[0].dt, &t) != 0 || t == K_F64)
    return err_set(e, ERR_INVALID_ARGUMENT, "data has unsupported element type %s", dtype_wire_name(in[0].dt));
  if (in[0].dt == DT_BOOL) t = K_U8;
  if (p->mode > K_RPROD && t != K_F32)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s (this reduction takes floats)",
                   dtype_wire_name(in[0].dt));
  int mask[ENG_MAX_DIMS], noop, r = in[0].ndims, k = 0;
  TRY(reduce_mask(p, in, n_in, mask, &noop, e));
  int64_t y[ENG_MAX_DIMS];
  for (int d = 0; d < r; d++) {
    if (!mask[d]) y[k++] = in[0].dims[d];
    else if (p->keepdims) y[k++] = 1;
    // an empty set's max/min is -inf/+inf (false/true for BOOL): run_reduce
    if (mask[d] && in[0].dims[d] == 0 && extreme && t != K_F32 && in[0].dt != DT_BOOL)
      return err_set(e, ERR_INVALID_ARGUMENT, "cannot reduce an empty dim %d of %s with max/min", d,
                     dtype_wire_name(in[0].dt));
  }
  op_set_out(&out[0], in[0].dt, k, y);
  return 0;
}

static int run_reduce(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  int mask[ENG_MAX_DIMS], noop;
  TRY(reduce_mask(p, in, n_in, mask, &noop, e));
  size_t n = op_numel(&in[0]);
  if (noop) {
    if (n && out[0].data != in[0].data) memcpy(out[0].data, in[0].data, n * dtype_size(in[0].dt));
    return 0;
  }
  k_elem t;
  if (eng_ops_elem_of(in[0].dt, &t) != 0)
    return err_set(e, ERR_INTERNAL, "no reduction of %s", dtype_wire_name(in[0].dt));
  if (t == K_BOOL) t = K_U8;  // 0/1 bytes: max is any, min all
  size_t ny = op_numel(&out[0]);
  if (ny && !n && (p->mode == K_RMAX || p->mode == K_RMIN)) {  // ONNX: the extremes of the type
    int mx = p->mode == K_RMAX;
    if (t == K_F32)
      for (size_t i = 0; i < ny; i++) ((float *)out[0].data)[i] = mx ? -INFINITY : INFINITY;
    else if (t == K_U8) memset(out[0].data, mx ? 0 : 1, ny);
    else return err_set(e, ERR_INTERNAL, "no empty max/min of %s", dtype_wire_name(in[0].dt));
    return 0;
  }
  if (op_numel(&out[0]) && k_reduce(out[0].data, in[0].data, t, in[0].ndims, in[0].dims, mask,
                                    (k_redop)p->mode) != 0)
    return err_set(e, ERR_INTERNAL, "no reduction of %s", dtype_wire_name(in[0].dt));
  return 0;
}

// --- ArgMax, ArgMin: the index of the extreme along p->axis, INT64

static int parse_arg(const eng_node *n, int is_min, eng_op_params *p) {
  p->mode = is_min;
  p->axis = op_attr_int(n, "axis", 0);
  p->keepdims = op_attr_int(n, "keepdims", 1) != 0;
  p->reverse = op_attr_int(n, "select_last_index", 0) != 0;
  return 0;
}

static int parse_argmax(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  return parse_arg(n, 0, p);
}

static int parse_argmin(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  return parse_arg(n, 1, p);
}

static int infer_arg(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                     err *e) {
  (void)n_in, (void)n_out;
  k_elem t;
  if (in[0].dt == DT_FP16 || in[0].dt == DT_BOOL || eng_ops_elem_of(in[0].dt, &t) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "data has unsupported element type %s", dtype_wire_name(in[0].dt));
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, &ax, e));
  if (in[0].dims[ax] == 0) return err_set(e, ERR_INVALID_ARGUMENT, "axis %d is empty", (int)ax);
  int64_t y[ENG_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < in[0].ndims; d++)
    if (d != ax) y[k++] = in[0].dims[d];
    else if (p->keepdims) y[k++] = 1;
  op_set_out(&out[0], DT_INT64, k, y);
  return 0;
}

static int run_arg(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                   err *e) {
  (void)n_in, (void)n_out;
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, &ax, e));
  int r = in[0].ndims;
  size_t outer = (size_t)op_prod(in[0].dims, 0, (int)ax), len = (size_t)in[0].dims[ax];
  size_t inner = (size_t)op_prod(in[0].dims, (int)ax + 1, r);
  k_elem t;
  if (!op_numel(&out[0])) return 0;
  if (eng_ops_elem_of(in[0].dt, &t) != 0 ||
      k_arg_reduce(out[0].data, in[0].data, t, outer, len, inner, p->mode, p->reverse) != 0)
    return err_set(e, ERR_INTERNAL, "no ArgMax/ArgMin of %s", dtype_wire_name(in[0].dt));
  return 0;
}

// --- CumSum (running sums along one axis; the axis is an input, read at
// shape inference, so it must be known when planning: it always is a constant)

static int parse_cumsum(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                        err *e) {
  (void)g, (void)opset, (void)e;
  p->exclusive = op_attr_int(n, "exclusive", 0) != 0;
  p->reverse = op_attr_int(n, "reverse", 0) != 0;
  return 0;
}

static int cumsum_axis(const eng_tensor *in, int64_t *ax, err *e) {
  int64_t a[1];
  int cnt;
  if (op_numel(&in[1]) != 1) return err_set(e, ERR_INVALID_ARGUMENT, "axis must be a scalar");
  TRY(eng_ops__read_ints(&in[1], "axis", a, 1, &cnt, e));
  return eng_ops__norm_axis(a[0], in[0].ndims, ax, e);
}

// CumSum's and CumProd's shape once the element type passed: x's own, the
// axis checked.
static int cum_shape(const eng_tensor *in, eng_tensor *out, err *e) {
  if (in[0].ndims < 1) return err_set(e, ERR_INVALID_ARGUMENT, "x must have rank >= 1");
  int64_t ax;
  TRY(cumsum_axis(in, &ax, e));
  op_set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
  return 0;
}

// k_cumsum or k_cumprod: the running sum or product along one axis.
typedef int (*cum_kernel)(void *y, const void *x, k_elem t, size_t outer, size_t len, size_t inner, int exclusive,
                          int reverse);

// CumSum's and CumProd's run: x viewed as [outer, len, inner] around the axis
// and scanned by f; op names the op in the error.
static int run_cum(const eng_op_params *p, const eng_tensor *in, eng_tensor *out, cum_kernel f, const char *op,
                   err *e) {
  int64_t ax;
  TRY(cumsum_axis(in, &ax, e));
  int r = in[0].ndims;
  size_t outer = (size_t)op_prod(in[0].dims, 0, (int)ax), len = (size_t)in[0].dims[ax];
  size_t inner = (size_t)op_prod(in[0].dims, (int)ax + 1, r);
  k_elem k;
  if (eng_ops_elem_of(in[0].dt, &k) != 0 ||
      f(out[0].data, in[0].data, k, outer, len, inner, p->exclusive, p->reverse) != 0)
    return err_set(e, ERR_INTERNAL, "no %s of %s", op, dtype_wire_name(in[0].dt));
  return 0;
}

static int infer_cumsum(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  dtype t = in[0].dt;
  k_elem k;
  if (t == DT_FP16 || t == DT_BOOL || eng_ops_elem_of(t, &k) != 0 || k == K_F64)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(t));
  return cum_shape(in, out, e);
}

static int run_cumsum(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_in, (void)n_out;
  return run_cum(p, in, out, k_cumsum, "CumSum", e);
}

// --- CumProd: CumSum's parse, axis, shape and walk, the running product (k_cumprod)

static int infer_cumprod(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                         err *e) {
  (void)p, (void)n_in, (void)n_out;
  k_elem k;
  if (in[0].dt == DT_FP16 || eng_ops_elem_of(in[0].dt, &k) != 0 ||
      (k != K_F32 && k != K_F64 && k != K_I32 && k != K_I64))
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(in[0].dt));
  return cum_shape(in, out, e);
}

static int run_cumprod(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                       err *e) {
  (void)n_in, (void)n_out;
  return run_cum(p, in, out, k_cumprod, "CumProd", e);
}

// --- TopK: K is an input read at shape inference (host_in); p->axis, p->upper: largest

static int parse_topk(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = op_attr_int(n, "axis", -1);
  p->upper = op_attr_int(n, "largest", 1) != 0;
  return 0;  // sorted=0 may return any order: the sorted one serves it
}

static int topk_args(const eng_op_params *p, const eng_tensor *in, int64_t *ax, int64_t *k, err *e) {
  int64_t kv[1];
  int cnt;
  if (op_numel(&in[1]) != 1) return err_set(e, ERR_INVALID_ARGUMENT, "K must hold one value");
  TRY(eng_ops__read_ints(&in[1], "K", kv, 1, &cnt, e));
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, ax, e));
  if (kv[0] < 0 || kv[0] > in[0].dims[*ax])
    return err_set(e, ERR_INVALID_ARGUMENT, "K = %lld is outside [0, %lld]", (long long)kv[0],
                   (long long)in[0].dims[*ax]);
  *k = kv[0];
  return 0;
}

static int infer_topk(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  k_elem t;
  if (in[0].dt == DT_FP16 || in[0].dt == DT_BOOL || eng_ops_elem_of(in[0].dt, &t) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(in[0].dt));
  if (in[0].ndims < 1) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 1");
  int64_t ax, k, y[ENG_MAX_DIMS];
  TRY(topk_args(p, in, &ax, &k, e));
  memcpy(y, in[0].dims, (size_t)in[0].ndims * sizeof y[0]);
  y[ax] = k;
  op_set_out(&out[0], in[0].dt, in[0].ndims, y);
  if (n_out > 1 && out[1].dt != DT_INVALID) op_set_out(&out[1], DT_INT64, in[0].ndims, y);
  return 0;
}

static int run_topk(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  int64_t ax, k;
  TRY(topk_args(p, in, &ax, &k, e));
  int r = in[0].ndims;
  size_t outer = (size_t)op_prod(in[0].dims, 0, (int)ax), len = (size_t)in[0].dims[ax];
  size_t inner = (size_t)op_prod(in[0].dims, (int)ax + 1, r), ny = outer * (size_t)k * inner;
  if (!ny) return 0;
  int have_idx = n_out > 1 && out[1].dt != DT_INVALID;  // else scratch for the kernel's indices
  int64_t *idx = have_idx ? out[1].data : malloc(ny * sizeof *idx);
  if (!idx) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  k_elem t;
  int rc = eng_ops_elem_of(in[0].dt, &t) != 0 ||
           k_topk(out[0].data, idx, in[0].data, t, outer, len, inner, (size_t)k, p->upper) != 0;
  if (!have_idx) free(idx);
  if (rc) return err_set(e, ERR_INTERNAL, "no TopK of %s", dtype_wire_name(in[0].dt));
  return 0;
}

// TfIdfVectorizer (tfidf.c)
int eng_ops__parse_tfidf(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_tfidf(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_tfidf(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

const eng_op_def eng_ops__reduce[] = {
    {"TfIdfVectorizer", 1, 1, 1, 1, 0, eng_ops__parse_tfidf, eng_ops__infer_tfidf, eng_ops__run_tfidf, 0, NULL, NULL},
    {"CumProd", 2, 2, 1, 1, ENG_OP_INPLACE, parse_cumsum, infer_cumprod, run_cumprod, ENG_IN(1), NULL, NULL},
    {"TopK", 2, 2, 1, 2, 0, parse_topk, infer_topk, run_topk, ENG_IN(1), NULL, NULL},
    {"ReduceMean", 1, 2, 1, 1, 0, parse_mean, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceMax", 1, 2, 1, 1, 0, parse_max, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceMin", 1, 2, 1, 1, 0, parse_min, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceSum", 1, 2, 1, 1, 0, parse_sum, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceProd", 1, 2, 1, 1, 0, parse_prod, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceSumSquare", 1, 2, 1, 1, 0, parse_sumsq, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceL1", 1, 2, 1, 1, 0, parse_l1, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceL2", 1, 2, 1, 1, 0, parse_l2, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceLogSum", 1, 2, 1, 1, 0, parse_logsum, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceLogSumExp", 1, 2, 1, 1, 0, parse_logsumexp, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ArgMax", 1, 1, 1, 1, 0, parse_argmax, infer_arg, run_arg, 0, NULL, NULL},
    {"ArgMin", 1, 1, 1, 1, 0, parse_argmin, infer_arg, run_arg, 0, NULL, NULL},
    {"CumSum", 2, 2, 1, 1, ENG_OP_INPLACE, parse_cumsum, infer_cumsum, run_cumsum, ENG_IN(1), NULL,
     NULL},
};
const size_t eng_ops__n_reduce = sizeof eng_ops__reduce / sizeof eng_ops__reduce[0];
