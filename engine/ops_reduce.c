// engine/ops_reduce.c: ReduceMean/ReduceSum/ReduceMax/ReduceMin over a set
// of axes (k_reduce_f32). Axes are an attribute before opset 18 (ReduceSum:
// 13) and an optional input after, read at shape inference (host_in).
#include <string.h>

#include "engine/ops_common.h"
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
  TRY(eng_ops__need_f32(&in[0], "data", e));
  int mask[ENG_MAX_DIMS], noop, r = in[0].ndims, k = 0;
  TRY(reduce_mask(p, in, n_in, mask, &noop, e));
  int64_t y[ENG_MAX_DIMS];
  for (int d = 0; d < r; d++) {
    if (!mask[d]) y[k++] = in[0].dims[d];
    else if (p->keepdims) y[k++] = 1;
    if (mask[d] && in[0].dims[d] == 0 && p->mode != K_RSUM && p->mode != K_RMEAN)
      return err_set(e, ERR_INVALID_ARGUMENT, "cannot reduce an empty dim %d with max/min", d);
  }
  op_set_out(&out[0], DT_FP32, k, y);
  return 0;
}

static int run_reduce(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  int mask[ENG_MAX_DIMS], noop;
  TRY(reduce_mask(p, in, n_in, mask, &noop, e));
  size_t n = op_numel(&in[0]);
  if (noop) {
    if (n && out[0].data != in[0].data) memcpy(out[0].data, in[0].data, n * sizeof(float));
    return 0;
  }
  if (op_numel(&out[0]))
    k_reduce_f32(out[0].data, in[0].data, in[0].ndims, in[0].dims, mask, (k_redop)p->mode);
  return 0;
}

const eng_op_def eng_ops__reduce[] = {
    {"ReduceMean", 1, 2, 1, 1, 0, parse_mean, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceMax", 1, 2, 1, 1, 0, parse_max, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceMin", 1, 2, 1, 1, 0, parse_min, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
    {"ReduceSum", 1, 2, 1, 1, 0, parse_sum, infer_reduce, run_reduce, ENG_IN(1), NULL, NULL},
};
const size_t eng_ops__n_reduce = sizeof eng_ops__reduce / sizeof eng_ops__reduce[0];
