// engine/ops/reduce/reduce_cuda.c: the reduce family (engine/ops/reduce/reduce.c) on the CUDA
// plan: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare,
// ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp on FP32 and FP16 (and
// ReduceMax, ReduceMin on BOOL: any and all) through k_reduce_cuda over axes
// that form one contiguous run once size-1 dims are set aside (a spatial
// mean, a channel sum, a last-axis max: what exported vision and transformer
// models use), and through k_reduce_axes_cuda over any other set (MVN's
// axes [0, 2, 3]). An empty set writes each op's value of nothing, as the
// CPU path (engine/ops/reduce/reduce.c). A data type without a kernel runs on
// the host when the load knows it (reduce_init). Registered into the CUDA
// plan through engine/ops/families.h.
//
// The axes are an attribute or (opset 18) a constant input, read once at
// init from the graph: the plan's copy of a constant is on the device. On
// NHWC activations (plan_cuda_layout.c; keepdims only, so the output stays
// 4-D) the axes are mapped to memory order and the output comes out NHWC.
//
// ArgMax and ArgMin (keepdims either way, select_last_index) and TopK
// (largest or smallest, any axis, K up to the axis length; always sorted,
// which serves sorted=0 too) through kernels/reduce/k_arg.cu on FP32, FP16,
// BF16, FP64, INT32 and INT64 data; TopK's K is this run's output dim (the
// planner read the K input), and columns longer than 2048 sort in the
// slot's workspace (prepare sizes it). A data type they do not take runs on
// the host (init refuses one the load knows; one only a run types fails the
// batch, naming it).
//
// CumSum too (k_cumsum_cuda: FP32, FP16, INT64, INT32), its axis a
// constant input read at init the same way; it runs on NCHW (logical)
// dims, so the layout pass hands it NCHW operands.
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/ops/ops_common.h"
#include "engine/cuda/plan_cuda_internal.h"

typedef struct reduce_node {
  int nax;  // -1: no axes given (all, unless noop_with_empty_axes)
  int64_t axes[ENG_MAX_DIMS];
} reduce_node;

// The element types the kernels take: FP32 and FP16 (accumulated in float), BOOL for Max and Min.
static int reduce_elem(dtype t, int op, k_elem *k) {
  if (t == DT_FP32) *k = K_F32;
  else if (t == DT_FP16) *k = K_F16;
  else if (t == DT_BOOL && (op == K_RMAX || op == K_RMIN)) *k = K_BOOL;
  else return -1;
  return 0;
}

// The refusal of a type reduce_elem does not take: at init where the load
// knows the type, else by the run.
static int reduce_refuse(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "reductions of %s are not supported on CUDA", dtype_wire_name(t));
}

static int reduce_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  const eng_node *n = eng_graph_node(pl->g, i);
  const eng_op_params *p = &pl->params[i];
  dtype t = eng_cuda__load_in_dt(pl, i, 0);
  k_elem k;
  if (t != DT_INVALID && reduce_elem(t, p->mode, &k) != 0) return reduce_refuse(t, e);
  reduce_node *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->nax = -1;
  if (n->n_in > 1 && n->in[1] >= 0) {
    eng_tensor t;
    if (!eng_cuda__const_input(pl, i, 1, &t)) {
      free(s);
      return err_set(e, ERR_UNIMPLEMENTED, "axes computed at run time are not supported on CUDA");
    }
    int rc = eng_ops__read_ints(&t, "axes", s->axes, ENG_MAX_DIMS, &s->nax, e);
    if (rc) {
      free(s);
      return rc;
    }
  } else if (p->has_ints) {
    s->nax = p->n_ints;
    memcpy(s->axes, p->ints, sizeof s->axes);
  }
  *state = s;
  return 0;
}

// [outer, len, inner] of x (dims d, reduced where mask), or false when the
// reduced axes are not one run (k_reduce_axes_cuda takes those).
static bool as_run(const int64_t *d, const int *mask, int r, size_t *outer, size_t *len, size_t *inner) {
  int first = -1, last = -1;
  for (int k = 0; k < r; k++)
    if (mask[k] && d[k] != 1) {
      if (first < 0) first = k;
      last = k;
    }
  *outer = 1, *len = 1, *inner = 1;
  if (first < 0) {  // only size-1 axes: a copy
    for (int k = 0; k < r; k++) *outer *= (size_t)d[k];
    return true;
  }
  for (int k = first; k <= last; k++)
    if (!mask[k] && d[k] != 1) return false;
  for (int k = 0; k < first; k++) *outer *= (size_t)d[k];
  for (int k = first; k <= last; k++) *len *= (size_t)d[k];
  for (int k = last + 1; k < r; k++) *inner *= (size_t)d[k];
  return true;
}

static int reduce_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                      eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const reduce_node *s = c->node;
  const eng_tensor *x = &in[0];
  k_elem et;
  if (reduce_elem(x->dt, p->mode, &et) != 0) return reduce_refuse(x->dt, e);
  int r = x->ndims, mask[ENG_MAX_DIMS] = {0};
  bool noop = s->nax <= 0 && p->noop_empty;
  for (int k = 0; k < r; k++) mask[k] = s->nax <= 0 && !p->noop_empty;
  for (int i = 0; i < s->nax; i++) {
    int64_t ax;
    TRY(eng_ops__norm_axis(s->axes[i], r, &ax, e));
    mask[ax] = 1;
  }
  size_t n = (size_t)eng_numel(r, x->dims);
  // an empty set (n 0, outputs left): the kernels write the value of nothing (len 0 below)
  if (noop || (n == 0 && !op_numel(&out[0]))) {
    if (n && out[0].data != x->data)
      CUDA_TRY(e, cudaMemcpyAsync(out[0].data, x->data, n * dtype_size(x->dt), cudaMemcpyDeviceToDevice,
                                  c->stream));
    return 0;
  }
  int64_t d[ENG_MAX_DIMS];
  memcpy(d, x->dims, (size_t)r * sizeof d[0]);
  if (c->nhwc && r == 4) {  // memory order N, H, W, C
    int m1 = mask[1];
    d[1] = x->dims[2], d[2] = x->dims[3], d[3] = x->dims[1];
    mask[1] = mask[2], mask[2] = mask[3], mask[3] = m1;
  }
  size_t outer, len, inner;
  if (!as_run(d, mask, r, &outer, &len, &inner))
    return k_reduce_axes_cuda(out[0].data, x->data, et, r, d, mask, (k_redop)p->mode, c->stream, e);
  return k_reduce_cuda(out[0].data, x->data, et, outer, len, inner, (k_redop)p->mode, c->stream, e);
}

static void reduce_destroy(void *state) { free(state); }

// --- CumSum

typedef struct cumsum_node {
  int64_t axis;  // as given: normalised per run against the input's rank
} cumsum_node;

// The element types k_cumsum_cuda takes.
static int cumsum_elem(dtype t, k_elem *k) {
  switch (t) {
    case DT_FP32: *k = K_F32; return 0;
    case DT_FP16: *k = K_F16; return 0;
    case DT_INT64: *k = K_I64; return 0;
    case DT_INT32: *k = K_I32; return 0;
    default: return -1;
  }
}

static int cumsum_refuse(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "CumSum of %s has no CUDA kernel", dtype_wire_name(t));
}

static int cumsum_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  dtype xt = eng_cuda__load_in_dt(pl, i, 0);
  k_elem k;
  if (xt != DT_INVALID && cumsum_elem(xt, &k) != 0) return cumsum_refuse(xt, e);
  eng_tensor t;
  if (!eng_cuda__const_input(pl, i, 1, &t))
    return err_set(e, ERR_UNIMPLEMENTED, "CumSum on CUDA takes a constant axis");
  int64_t a[1];
  int cnt;
  if (eng_numel(t.ndims, t.dims) != 1) return err_set(e, ERR_INVALID_ARGUMENT, "CumSum: axis must be a scalar");
  TRY(eng_ops__read_ints(&t, "axis", a, 1, &cnt, e));
  cumsum_node *s = malloc(sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->axis = a[0];
  *state = s;
  return 0;
}

static int cumsum_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                      eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const cumsum_node *s = c->node;
  const eng_tensor *x = &in[0];
  k_elem et;
  if (cumsum_elem(x->dt, &et) != 0) return cumsum_refuse(x->dt, e);
  int64_t ax;
  TRY(eng_ops__norm_axis(s->axis, x->ndims, &ax, e));
  size_t outer = 1, inner = 1, len = (size_t)x->dims[ax];
  for (int k = 0; k < ax; k++) outer *= (size_t)x->dims[k];
  for (int k = (int)ax + 1; k < x->ndims; k++) inner *= (size_t)x->dims[k];
  return k_cumsum_cuda(out[0].data, x->data, et, outer, len, inner, p->exclusive, p->reverse, c->stream, e);
}

// --- ArgMax, ArgMin, TopK (kernels/reduce/k_arg.cu)

// A data input whose type is known at load (eng_cuda__load_dt) and that k_arg.cu does not take runs on
// the host; one only a run types is checked there.
static int arg_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype dt = eng_cuda__load_in_dt(pl, i, 0);
  if (dt != DT_INVALID && dt != DT_FP32 && dt != DT_FP16 && dt != DT_BF16 && dt != DT_FP64 &&
      dt != DT_INT32 && dt != DT_INT64)
    return err_set(e, ERR_UNIMPLEMENTED, "%s data has no CUDA kernel (FP32, FP16, BF16, FP64, INT32, INT64)",
                   dtype_wire_name(dt));
  return 0;
}

// x as [outer, len, inner] about axis ax.
static void arg_view(const eng_tensor *x, int64_t ax, size_t *outer, size_t *len, size_t *inner) {
  *outer = (size_t)op_prod(x->dims, 0, (int)ax);
  *len = (size_t)x->dims[ax];
  *inner = (size_t)op_prod(x->dims, (int)ax + 1, x->ndims);
}

static int arg_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                   err *e) {
  (void)n_in, (void)n_out;
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, &ax, e));
  size_t outer, len, inner;
  arg_view(&in[0], ax, &outer, &len, &inner);
  if (!op_numel(&out[0])) return 0;
  return k_arg_reduce_cuda(out[0].data, in[0].data, in[0].dt, outer, len, inner, (int)p->mode, p->reverse, c->stream,
                           e);
}

// TopK's k: the planner's output dim on the axis (it read the K input for this run).
static int topk_view(const eng_op_params *p, const eng_tensor *in, const eng_tensor *out, size_t *outer, size_t *len,
                     size_t *inner, size_t *k, err *e) {
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, &ax, e));
  if (out[0].ndims != in[0].ndims) return err_set(e, ERR_INTERNAL, "TopK: rank %d into %d", in[0].ndims, out[0].ndims);
  arg_view(&in[0], ax, outer, len, inner);
  *k = (size_t)out[0].dims[ax];
  return 0;
}

static int topk_prepare(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, const eng_tensor *out,
                        int n_out, cuda_prep *r, err *e) {
  (void)c, (void)n_in, (void)n_out;
  size_t outer = 0, len = 0, inner = 0, k = 0, ws = 0, idx = 0;
  TRY(topk_view(p, in, out, &outer, &len, &inner, &k, e));
  if (n_out < 2 || out[1].dt == DT_INVALID) idx = eng_cuda__round_up(outer * k * inner * sizeof(int64_t));
  TRY(k_topk_cuda_ws(&ws, in[0].dt, outer, len, inner, k, e));
  r->ws_need = idx + ws;
  return 0;
}

static int topk_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                    err *e) {
  (void)n_in;
  size_t outer = 0, len = 0, inner = 0, k = 0;
  TRY(topk_view(p, in, out, &outer, &len, &inner, &k, e));
  if (!outer || !k || !inner) return 0;
  // without the Indices output the kernel's indices go to the front of the workspace
  uint8_t *ws = c->ws;
  size_t ws_bytes = c->ws_bytes;
  int64_t *idx = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : NULL;
  if (!idx) {
    size_t b = eng_cuda__round_up(outer * k * inner * sizeof(int64_t));
    if (!ws || ws_bytes < b) return err_set(e, ERR_INTERNAL, "TopK: workspace of %zu bytes, %zu needed", ws_bytes, b);
    idx = (int64_t *)ws;
    ws += b, ws_bytes -= b;
  }
  return k_topk_cuda(out[0].data, idx, in[0].data, in[0].dt, outer, len, inner, k, p->upper, ws, ws_bytes, c->stream,
                     e);
}

#define FAMILY(name)                                                                           \
  {.op_type = name, .run = reduce_run, .half = eng_cuda__half_always, .flags = CUDA_OP_NHWC,  \
   .init = reduce_init, .destroy = reduce_destroy}

const cuda_op eng_cuda__reduce_ops[] = {
    FAMILY("ReduceMean"),
    FAMILY("ReduceSum"),
    FAMILY("ReduceMax"),
    FAMILY("ReduceMin"),
    FAMILY("ReduceProd"),
    FAMILY("ReduceSumSquare"),
    FAMILY("ReduceL1"),
    FAMILY("ReduceL2"),
    FAMILY("ReduceLogSum"),
    FAMILY("ReduceLogSumExp"),
    {.op_type = "ArgMax", .run = arg_run, .half = eng_cuda__half_always, .init = arg_init},
    {.op_type = "ArgMin", .run = arg_run, .half = eng_cuda__half_always, .init = arg_init},
    {.op_type = "TopK", .run = topk_run, .half = eng_cuda__half_always, .init = arg_init, .prepare = topk_prepare},
    {.op_type = "CumSum", .run = cumsum_run, .half = eng_cuda__half_always, .init = cumsum_init,
     .destroy = free},
};
const size_t eng_cuda__n_reduce_ops = sizeof eng_cuda__reduce_ops / sizeof eng_cuda__reduce_ops[0];
