// engine/ops/index/index_cuda.c: the shape and index ops of
// engine/ops/index/index.c on the CUDA plan. The views (Flatten, Reshape,
// Squeeze, Unsqueeze, Identity, Dropout) share their input's bytes and copy
// only when the layout could not make them; Transpose through
// k_transpose_cuda; Concat as one 2-D copy per input. The ops transformer
// exports run on data (embeddings, attention masks, heads, rotary halves):
// Gather, Expand, GatherElements, GatherND (batch_dims), Trilu through
// kernels/index/k_index.cu, and Split as one 2-D copy per output (Concat's inverse). Each
// moves elements as they are, so FP16-stored values run as they are. The
// shapes come from the planner (the outputs' dims are this run's); Trilu's
// k is a constant input read once at init, since the plan's copy of a
// constant lives on the device. Slice (any steps) through k_slice_cuda, its
// starts, ends, axes and steps read on the host at each prepare (the planner
// knows them for every signature: constants, folded values or parameters
// given as graph inputs). Range, Shape, Size and ConstantOfShape run only
// folded (on the host). Registered into the CUDA plan through
// engine/ops/families.h.
//
// ScatterElements (and Scatter) and ScatterND, every reduction, through
// kernels/index/k_scatter.cu: the output starts as a copy of the data (none
// when the planner ran it in place) and the updates land on it, duplicates
// combined in the CPU path's order (k_scatter.cu says how). Reduction none
// takes any element type; add, mul, max and min FP32, FP16, BF16, FP64,
// INT32 and INT64, as stored (a half plan's FP32 data combines in FP16).
//
// An index out of range cannot fail a launch that is already enqueued: the
// gather kernels write zero bytes for it (k_cuda.h) and never read outside
// the data, the scatter kernels skip its update, and both raise the node's
// flag (cuda_ctx.oob), which fails the batch when it finishes, as the CPU
// path refuses the request.
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/ops/ops_common.h"
#include "engine/cuda/plan_cuda_internal.h"
#include "engine/ops/index/index.h"

static size_t dims_prod(const int64_t *d, int from, int to) {
  size_t n = 1;
  for (int k = from; k < to; k++) n *= (size_t)d[k];
  return n;
}

// --- views, Transpose, Concat

// Views share their input's bytes by the layout; copy only if they do not.
static int run_view(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in;
  size_t bytes = eng_tensor_bytes(&out[0]);
  if (out[0].data != in[0].data && bytes)
    CUDA_TRY(e, cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice,
                                c->stream));
  if (n_out > 1 && out[1].dt != DT_INVALID && op_numel(&out[1]))  // Dropout's mask: all kept
    CUDA_TRY(e, cudaMemsetAsync(out[1].data, 1, op_numel(&out[1]), c->stream));
  return 0;
}

static int run_transpose(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int perm[ENG_MAX_DIMS], r = in[0].ndims;
  TRY(eng_ops__get_perm(p, r, perm, e));
  size_t n = op_numel(&in[0]), esz = dtype_size(in[0].dt);
  if (!n) return 0;
  if (r == 0) {
    CUDA_TRY(e, cudaMemcpyAsync(out[0].data, in[0].data, esz, cudaMemcpyDeviceToDevice, c->stream));
    return 0;
  }
  return k_transpose_cuda(out[0].data, in[0].data, esz, r, in[0].dims, perm, c->stream, e);
}

// Concat along ax: each input is a [outer, rows_i] block of bytes placed at
// its column offset of the [outer, sum rows_i] output, one 2-D copy each.
static int run_concat(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                      eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t esz = dtype_size(in[0].dt), inner = (size_t)op_prod(in[0].dims, ax + 1, r);
  size_t outer = (size_t)op_prod(in[0].dims, 0, ax);
  size_t pitch = (size_t)out[0].dims[ax] * inner * esz;
  if (!outer || !pitch) return 0;
  size_t col = 0;
  for (int i = 0; i < n_in; i++) {
    size_t w = (size_t)in[i].dims[ax] * inner * esz;
    if (w)
      CUDA_TRY(e, cudaMemcpy2DAsync((uint8_t *)out[0].data + col, pitch, in[i].data, w, w, outer,
                                    cudaMemcpyDeviceToDevice, c->stream));
    col += w;
  }
  return 0;
}

// --- Gather, Expand, GatherElements, GatherND

static int gather_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims;
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  return k_gather_cuda(out[0].data, in[0].data, dtype_size(in[0].dt), dims_prod(in[0].dims, 0, (int)ax),
                       in[0].dims[ax], dims_prod(in[0].dims, (int)ax + 1, r), in[1].data, in[1].dt == DT_INT32,
                       (size_t)eng_numel(in[1].ndims, in[1].dims), c->oob, c->stream, e);
}

// Expand: the planner's output dims are this run's target shape (the shape
// input was read while shapes were inferred); x left-padded to that rank.
static int expand_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  int nd = out[0].ndims;
  int64_t xd[ENG_MAX_DIMS];
  if (in[0].ndims > nd) return err_set(e, ERR_INTERNAL, "Expand: rank %d into %d", in[0].ndims, nd);
  op_pad_dims(&in[0], nd, xd);
  return k_expand_cuda(out[0].data, in[0].data, dtype_size(in[0].dt), nd, out[0].dims, xd, c->stream, e);
}

// Tile: the planner's output dims are this run's (the repeats were read while shapes were inferred).
static int tile_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (in[0].ndims != out[0].ndims) return err_set(e, ERR_INTERNAL, "Tile: rank %d into %d", in[0].ndims, out[0].ndims);
  return k_tile_cuda(out[0].data, in[0].data, dtype_size(in[0].dt), out[0].ndims, out[0].dims, in[0].dims,
                     c->stream, e);
}

static int gather_elements_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                               eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims;
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  return k_gather_elements_cuda(out[0].data, in[0].data, dtype_size(in[0].dt), r, in[0].dims, (int)ax,
                                in[1].data, in[1].dt == DT_INT32, in[1].dims, c->oob, c->stream, e);
}

// engine/ops/index/index.c's view: x as [batch, d_0..d_{m-1}, slice], indices as
// [batch, n_tuples, m]; the planner already checked the shapes.
static int gather_nd_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims, q = in[1].ndims, b = (int)p->batch_dims;
  if (q < 1 || b >= r || b >= q)
    return err_set(e, ERR_INTERNAL, "GatherND: batch_dims %d for ranks %d and %d", b, r, q);
  int m = (int)in[1].dims[q - 1];
  if (m < 1 || m > r - b) return err_set(e, ERR_INTERNAL, "GatherND: tuples of %d for rank %d", m, r);
  return k_gather_nd_cuda(out[0].data, in[0].data, dtype_size(in[0].dt), dims_prod(in[0].dims, 0, b), m,
                          in[0].dims + b, dims_prod(in[0].dims, b + m, r), in[1].data,
                          in[1].dt == DT_INT32, dims_prod(in[1].dims, b, q - 1), c->oob, c->stream, e);
}

// --- Trilu

typedef struct trilu_node {
  int64_t k;
} trilu_node;

static int trilu_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  const eng_node *n = eng_graph_node(pl->g, i);
  int64_t k = 0;
  if (n->n_in > 1 && n->in[1] >= 0) {
    const eng_value *v = eng_graph_value(pl->g, (size_t)n->in[1]);
    if (!eng_cuda__is_const(pl->g, n->in[1]) || v->dt != DT_INT64 || v->bytes != sizeof k)
      return err_set(e, ERR_UNIMPLEMENTED,
                     "Trilu on CUDA takes a constant int64 scalar k ('%s' is not one)", v->name);
    memcpy(&k, v->data, sizeof k);
  }
  trilu_node *s = malloc(sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->k = k;
  *state = s;
  return 0;
}

static int trilu_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_in, (void)n_out;
  const trilu_node *s = c->node;
  int r = in[0].ndims;
  if (r < 2) return err_set(e, ERR_INTERNAL, "Trilu: rank %d", r);
  return k_trilu_cuda(out[0].data, in[0].data, dtype_size(in[0].dt), dims_prod(in[0].dims, 0, r - 2),
                      in[0].dims[r - 2], in[0].dims[r - 1], s->k, p->upper, c->stream, e);
}

// --- Split: the planner's output dims are this run's part sizes, so the
// sizes input (read while shapes are inferred) is not needed here.

static int split_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  const eng_node *n = eng_graph_node(pl->g, i);
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] < 0)
      return err_set(e, ERR_UNIMPLEMENTED, "Split with an omitted output (%d) is not supported on CUDA", k);
  return 0;
}

static int split_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_in;
  int r = in[0].ndims;
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  size_t esz = dtype_size(in[0].dt), inner = dims_prod(in[0].dims, (int)ax + 1, r) * esz;
  size_t outer = dims_prod(in[0].dims, 0, (int)ax), pitch = (size_t)in[0].dims[ax] * inner;
  if (!outer || !pitch) return 0;
  size_t col = 0;
  for (int i = 0; i < n_out; i++) {
    size_t w = (size_t)out[i].dims[ax] * inner;
    if (col + w > pitch)
      return err_set(e, ERR_INTERNAL, "Split: the parts exceed the axis (%lld)", (long long)in[0].dims[ax]);
    if (w)
      CUDA_TRY(e, cudaMemcpy2DAsync(out[i].data, w, (const uint8_t *)in[0].data + col, pitch, w, outer,
                                    cudaMemcpyDeviceToDevice, c->stream));
    col += w;
  }
  return 0;
}

// --- Slice: starts, ends, axes and steps are host_in operands, known on the host for each signature

typedef struct slice_node {
  const eng_plan *pl;  // borrowed: the CUDA plan owns it and destroys node states first
  size_t node;
  int64_t first[ENG_MAX_DIMS], steps[ENG_MAX_DIMS];  // this run's, left by prepare for run
} slice_node;

static int slice_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  slice_node *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->pl = pl;
  s->node = i;
  *state = s;
  return 0;
}

static int slice_prepare(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, const eng_tensor *out,
                         int n_out, cuda_prep *r, err *e) {
  (void)in, (void)out, (void)n_out, (void)r;
  slice_node *s = c->node;
  const eng_node *n = eng_graph_node(s->pl->g, s->node);
  eng_tensor h[5];
  if (n_in > 5) return err_set(e, ERR_INTERNAL, "Slice with %d inputs", n_in);
  // the planner's view: this run's types and shapes, host bytes of the parameters (in[0]'s data unused)
  for (int k = 0; k < n_in; k++) {
    int v = k < n->n_in ? n->in[k] : -1;
    if (v < 0) {
      memset(&h[k], 0, sizeof h[k]);
      continue;
    }
    h[k] = s->pl->cur[v];
    if (!s->pl->known[v]) h[k].data = NULL;
    if (k > 0 && !h[k].data && eng_numel(h[k].ndims, h[k].dims) > 0)
      return err_set(e, ERR_INTERNAL, "Slice: input %d ('%s') is not known on the host", k,
                     eng_graph_value(s->pl->g, (size_t)v)->name);
  }
  int64_t y[ENG_MAX_DIMS];
  return eng_ops__slice_dims(p, h, n_in, s->first, s->steps, y, e);
}

static int slice_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                     err *e) {
  (void)p, (void)n_in, (void)n_out;
  const slice_node *s = c->node;
  if (in[0].ndims != out[0].ndims) return err_set(e, ERR_INTERNAL, "Slice: rank %d into %d", in[0].ndims, out[0].ndims);
  if (in[0].ndims == 0) {  // a scalar passes through
    CUDA_TRY(e, cudaMemcpyAsync(out[0].data, in[0].data, dtype_size(in[0].dt), cudaMemcpyDeviceToDevice, c->stream));
    return 0;
  }
  return k_slice_cuda(out[0].data, in[0].data, dtype_size(in[0].dt), in[0].ndims, in[0].dims, s->first, s->steps,
                      out[0].dims, c->stream, e);
}

// --- ScatterElements, Scatter, ScatterND (kernels/index/k_scatter.cu)

// The output starts as the data (unless the planner ran the node in place).
static int scatter_start(cuda_ctx *c, const eng_tensor *in, eng_tensor *out, err *e) {
  size_t bytes = op_numel(&in[0]) * dtype_size(in[0].dt);
  if (bytes && out[0].data != in[0].data)
    CUDA_TRY(e, cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, c->stream));
  return 0;
}

// Whether k_scatter.cu runs reduction `mode` on data of type t: a plain
// scatter moves bytes of any type; the reductions take these types only.
// Asked at load (scatter_init) and by each run, so both say the same.
static bool scatter_takes(int mode, dtype t) {
  return mode == K_SCATTER_NONE || t == DT_FP32 || t == DT_FP16 || t == DT_BF16 || t == DT_FP64 ||
         t == DT_INT32 || t == DT_INT64;
}

static int scatter_refuse(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "a scatter reduction on %s has no CUDA kernel", dtype_wire_name(t));
}

// A reduction of a type known at load and that has no kernel runs on the
// host from load (DT_INVALID: the run's check below stands).
static int scatter_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half, (void)state;
  dtype t = eng_cuda__load_in_dt(pl, i, 0);
  if (t != DT_INVALID && !scatter_takes(pl->params[i].mode, t)) return scatter_refuse(t, e);
  return 0;
}

static int scatter_types(const eng_op_params *p, const eng_tensor *in, err *e) {
  if (in[2].dt != in[0].dt)
    return err_set(e, ERR_INTERNAL, "updates are %s, data %s", dtype_wire_name(in[2].dt), dtype_wire_name(in[0].dt));
  if (!scatter_takes(p->mode, in[0].dt)) return scatter_refuse(in[0].dt, e);
  return 0;
}

static int scatter_elements_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(scatter_types(p, in, e));
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, &ax, e));
  TRY(scatter_start(c, in, out, e));
  return k_scatter_elements_cuda(out[0].data, in[2].data, in[0].dt, dtype_size(in[0].dt), in[0].ndims, in[0].dims,
                                 (int)ax, in[1].data, in[1].dt == DT_INT32, in[1].dims, (int)p->mode, c->oob,
                                 c->stream, e);
}

static int scatter_nd_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                          int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(scatter_types(p, in, e));
  const eng_tensor *ix = &in[1];
  if (ix->ndims < 1) return err_set(e, ERR_INTERNAL, "ScatterND: indices of rank 0");
  int m = (int)ix->dims[ix->ndims - 1];
  TRY(scatter_start(c, in, out, e));
  size_t n_tuples = m > 0 ? op_numel(ix) / (size_t)m : 0;
  return k_scatter_nd_cuda(out[0].data, in[2].data, in[0].dt, dtype_size(in[0].dt), in[0].ndims, in[0].dims, ix->data,
                           ix->dt == DT_INT32, n_tuples, m, (int)p->mode, c->oob, c->stream, e);
}

const cuda_op eng_cuda__index_ops[] = {
    {.op_type = "Flatten", .run = run_view, .half = eng_cuda__half_always},
    {.op_type = "Reshape", .run = run_view, .half = eng_cuda__half_always},
    {.op_type = "Squeeze", .run = run_view, .half = eng_cuda__half_always},
    {.op_type = "Unsqueeze", .run = run_view, .half = eng_cuda__half_always},
    {.op_type = "Identity", .run = run_view, .half = eng_cuda__half_always},
    {.op_type = "Dropout", .run = run_view, .half = eng_cuda__half_always},
    {.op_type = "Transpose", .run = run_transpose, .half = eng_cuda__half_always},
    {.op_type = "Concat", .run = run_concat, .half = eng_cuda__half_always},
    {.op_type = "Gather", .run = gather_run, .half = eng_cuda__half_always},
    {.op_type = "Expand", .run = expand_run, .half = eng_cuda__half_always},
    {.op_type = "Tile", .run = tile_run, .half = eng_cuda__half_always},
    {.op_type = "GatherElements", .run = gather_elements_run, .half = eng_cuda__half_always},
    {.op_type = "GatherND", .run = gather_nd_run, .half = eng_cuda__half_always},
    {.op_type = "ScatterElements", .run = scatter_elements_run, .half = eng_cuda__half_always, .init = scatter_init},
    {.op_type = "Scatter", .run = scatter_elements_run, .half = eng_cuda__half_always, .init = scatter_init},
    {.op_type = "ScatterND", .run = scatter_nd_run, .half = eng_cuda__half_always, .init = scatter_init},
    {.op_type = "Trilu", .run = trilu_run, .half = eng_cuda__half_always, .init = trilu_init, .destroy = free},
    {.op_type = "Split", .run = split_run, .half = eng_cuda__half_always, .init = split_init},
    {.op_type = "Slice",
     .run = slice_run,
     .half = eng_cuda__half_always,
     .init = slice_init,
     .prepare = slice_prepare,
     .destroy = free},
};
const size_t eng_cuda__n_index_ops = sizeof eng_cuda__index_ops / sizeof eng_cuda__index_ops[0];
