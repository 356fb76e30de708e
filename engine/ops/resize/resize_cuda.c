// engine/ops/resize/resize_cuda.c: the resize family (engine/ops/resize/resize.c) on the CUDA
// plan: Resize and Upsample (nearest over any dims with every coordinate
// and nearest mode the CPU takes, linear over the last two dims) and Pad
// (constant, reflect, edge; negative pads crop), through kernels/resize/k_resize.cu.
// Registered into the CUDA plan through engine/ops/families.h.
//
// What the kernels need from the operands read at planning (scales, sizes,
// pads, axes: host_in) is computed on the host by the CPU op's own rules
// (engine/ops/resize/resize.h) from the shared plan's view of them: a constant's bytes or
// a value folded from the input shapes (plan.c), both in pl->cur for the
// current signature. The plan's device copies of constants are no use to a
// host computation and folded values have none, so prepare (every submit,
// before any capture) computes this run's numbers into the node state and
// run passes them to the kernel by value; a captured graph is keyed by the
// input signature, which fixes them.
//
// NHWC (plan_cuda_layout.c): 4-D Resize and Pad follow their input's
// layout (an upsampling between convolutions stays channels-last); the
// kernels walk memory order, so dims, scales and pads are permuted to
// (N, H, W, C) and bilinear sees [N, H, W, C] as [outer N, ih, iw, inner C].
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/ops/ops_common.h"
#include "engine/ops/resize/resize.h"
#include "engine/cuda/plan_cuda_internal.h"

typedef struct rs_node {
  const eng_plan *pl;  // borrowed: the CUDA plan owns it and destroys node states first
  size_t node;
  // this run's, left by prepare for run
  float scales[ENG_MAX_DIMS];   // Resize
  int64_t begin[ENG_MAX_DIMS];  // Pad
  uint8_t value[8];             // Pad: the constant in the stored element type
} rs_node;

// Whether k_resize.cu's linear kernel takes data of type t. Asked at load
// (rs_init, from the load's types) and by each run, so both say the same.
static bool linear_takes(dtype t) { return t == DT_FP32 || t == DT_FP16; }

static int linear_refuse(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "linear resize of %s on CUDA", dtype_wire_name(t));
}

static int rs_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  const eng_node *n = eng_graph_node(pl->g, i);
  // Pad's constant_value is no host_in operand: the planner never reads it,
  // so only an initializer's bytes are sure to be on the host
  if (strcmp(n->op_type, "Pad") == 0 && n->n_in > 2 && n->in[2] >= 0 && !eng_cuda__is_const(pl->g, n->in[2]))
    return err_set(e, ERR_UNIMPLEMENTED,
                   "Pad's constant_value ('%s') must be a constant on CUDA, where it is read on the host "
                   "at load (it is computed by the graph)",
                   eng_graph_value(pl->g, (size_t)n->in[2])->name);
  if (strcmp(n->op_type, "Pad") != 0 && pl->params[i].mode == ENG_RESIZE_CUBIC)
    return err_set(e, ERR_UNIMPLEMENTED, "Resize's cubic mode has no CUDA path (the CPU runs it)");
  // nearest moves elements of any type; a type unknown at load (DT_INVALID) is the run's to check
  dtype t = eng_cuda__load_in_dt(pl, i, 0);
  if (strcmp(n->op_type, "Pad") != 0 && pl->params[i].mode != ENG_RESIZE_NEAREST && t != DT_INVALID &&
      !linear_takes(t))
    return linear_refuse(t, e);
  rs_node *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->pl = pl;
  s->node = i;
  *state = s;
  return 0;
}

// The node's operands as the planner sees them: types and shapes of this
// run, and host bytes for those known at planning (NULL data otherwise).
static int host_operands(const rs_node *s, eng_tensor *h, int n_in, err *e) {
  const eng_node *n = eng_graph_node(s->pl->g, s->node);
  for (int k = 0; k < n_in; k++) {
    int v = k < n->n_in ? n->in[k] : -1;
    if (v < 0) {
      memset(&h[k], 0, sizeof h[k]);
      continue;
    }
    h[k] = s->pl->cur[v];
    if (!s->pl->known[v]) h[k].data = NULL;
    // the planner refuses unknown host_in operands before this; an empty one
    // (a roi or scales of 0 elements) has no bytes to read
    if (k > 0 && !h[k].data && eng_numel(h[k].ndims, h[k].dims) > 0)
      return err_set(e, ERR_UNIMPLEMENTED, "input %d ('%s') is not known on the host", k,
                     eng_graph_value(s->pl->g, (size_t)v)->name);
  }
  return 0;
}

static int resize_prepare(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                          const eng_tensor *out, int n_out, cuda_prep *r, err *e) {
  (void)in, (void)out, (void)n_out, (void)r;
  rs_node *s = c->node;
  eng_tensor h[4];
  if (n_in > 4) return err_set(e, ERR_INTERNAL, "Resize with %d inputs", n_in);
  TRY(host_operands(s, h, n_in, e));
  const eng_node *n = eng_graph_node(s->pl->g, s->node);
  return eng_ops__resize_scales(p, h, n_in, s->pl->cur[n->out[0]].dims, s->scales, e);
}

static int pad_prepare(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                       const eng_tensor *out, int n_out, cuda_prep *r, err *e) {
  (void)out, (void)n_out, (void)r;
  rs_node *s = c->node;
  eng_tensor h[4];
  if (n_in > 4) return err_set(e, ERR_INTERNAL, "Pad with %d inputs", n_in);
  TRY(host_operands(s, h, n_in, e));
  int64_t en[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(eng_ops__pad_dims(p, h, n_in, s->begin, en, y, e));
  uint8_t v[8] = {0};
  size_t isz = dtype_size(h[0].dt);
  if (isz > sizeof v) return err_set(e, ERR_INTERNAL, "Pad of %zu-byte elements", isz);
  if (op_given(h, n_in, 2)) memcpy(v, h[2].data, isz);
  else if (h[0].dt == DT_FP32) memcpy(v, &p->alpha, sizeof p->alpha);
  memset(s->value, 0, sizeof s->value);
  if (in[0].dt == DT_FP16 && h[0].dt == DT_FP32) {  // an FP16 plan stores the data in half
    float f;
    uint16_t bits;
    memcpy(&f, v, sizeof f);
    k_f32_to_f16(&bits, &f, 1);
    memcpy(s->value, &bits, sizeof bits);
  } else {
    memcpy(s->value, v, sizeof v);
  }
  return 0;
}

// Logical NCHW dims in memory order (N, H, W, C) for an NHWC run.
static void to_nhwc(const int64_t *d, int64_t *m) {
  m[0] = d[0], m[1] = d[2], m[2] = d[3], m[3] = d[1];
}

static int copy_scalar(cuda_ctx *c, const eng_tensor *x, eng_tensor *y, err *e) {
  CUDA_TRY(e, cudaMemcpyAsync(y->data, x->data, dtype_size(x->dt), cudaMemcpyDeviceToDevice, c->stream));
  return 0;
}

static int resize_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                      eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const rs_node *s = c->node;
  const eng_tensor *x = &in[0];
  eng_tensor *y = &out[0];
  int r = x->ndims;
  if (!eng_numel(y->ndims, y->dims)) return 0;
  if (r == 0) return copy_scalar(c, x, y, e);
  bool nhwc = c->nhwc && r == 4;
  if (p->mode == ENG_RESIZE_NEAREST) {
    int64_t xd[ENG_MAX_DIMS], yd[ENG_MAX_DIMS];
    float sc[ENG_MAX_DIMS];
    memcpy(xd, x->dims, sizeof xd);
    memcpy(yd, y->dims, sizeof yd);
    memcpy(sc, s->scales, sizeof sc);
    if (nhwc) {
      to_nhwc(x->dims, xd);
      to_nhwc(y->dims, yd);
      sc[1] = s->scales[2], sc[2] = s->scales[3], sc[3] = s->scales[1];
    }
    return k_resize_nearest_cuda(y->data, x->data, dtype_size(x->dt), r, xd, yd, sc, (k_coord)p->coord,
                                 (k_nearest)p->nearest, c->stream, e);
  }
  if (!linear_takes(x->dt)) return linear_refuse(x->dt, e);
  k_elem et = x->dt == DT_FP16 ? K_F16 : K_F32;
  size_t outer = nhwc ? (size_t)x->dims[0] : (size_t)eng_numel(r - 2, x->dims);
  size_t inner = nhwc ? (size_t)x->dims[1] : 1;
  return k_resize_linear_cuda(y->data, x->data, et, outer, x->dims[r - 2], x->dims[r - 1], inner,
                              y->dims[r - 2], y->dims[r - 1], s->scales[r - 2], s->scales[r - 1],
                              (k_coord)p->coord, c->stream, e);
}

static int pad_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                   eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  const rs_node *s = c->node;
  const eng_tensor *x = &in[0];
  eng_tensor *y = &out[0];
  int r = x->ndims;
  if (!eng_numel(y->ndims, y->dims)) return 0;
  if (r == 0) return copy_scalar(c, x, y, e);
  int64_t xd[ENG_MAX_DIMS], yd[ENG_MAX_DIMS], b[ENG_MAX_DIMS];
  memcpy(xd, x->dims, sizeof xd);
  memcpy(yd, y->dims, sizeof yd);
  memcpy(b, s->begin, sizeof b);
  if (c->nhwc && r == 4) {
    to_nhwc(x->dims, xd);
    to_nhwc(y->dims, yd);
    to_nhwc(s->begin, b);
  }
  return k_pad_cuda(y->data, x->data, dtype_size(x->dt), r, xd, b, yd, (k_padmode)p->mode, s->value,
                    c->stream, e);
}

// Nearest and Pad move elements as they are and linear takes FP16, so FP16
// operands run as they are.
#define RESIZE(name)                                                                          \
  {.op_type = name, .run = resize_run, .half = eng_cuda__half_always, .flags = CUDA_OP_NHWC, \
   .init = rs_init, .prepare = resize_prepare, .destroy = free}

const cuda_op eng_cuda__resize_ops[] = {
    RESIZE("Resize"),
    RESIZE("Upsample"),
    {.op_type = "Pad", .run = pad_run, .half = eng_cuda__half_always, .flags = CUDA_OP_NHWC,
     .init = rs_init, .prepare = pad_prepare, .destroy = free},
};
const size_t eng_cuda__n_resize_ops = sizeof eng_cuda__resize_ops / sizeof eng_cuda__resize_ops[0];
