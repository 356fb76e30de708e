// engine/ops_elem_cuda.c: the elementwise op family (ops_elem.c) on the CUDA
// plan: HardSigmoid, HardSwish, Sqrt, Exp, Neg, Abs and Reciprocal through
// the k_unop kernels (k_unop.cu), one launcher for FP32 and FP16 storage.
// Clip too: its bounds (attributes before opset 11, constant inputs from
// 11; ReLU6 is Clip(x, 0, 6)) are read once at init from the graph, since
// the plan's copy of a constant lives on the device. Registered into
// plan_cuda.c's op table through plan_cuda_internal.h.
#include <stdlib.h>
#include <string.h>

#include "engine/plan_cuda_internal.h"

// ops_elem.c's parse put the k_unop code in p->mode and its two
// parameters (HardSigmoid's alpha and beta) in p->alpha and p->beta.
static int unop_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  if (in[0].dt != DT_FP32 && in[0].dt != DT_FP16)
    return err_set(e, ERR_UNIMPLEMENTED, "%s tensors have no CUDA kernel for this op",
                   dtype_wire_name(in[0].dt));
  return k_unop_cuda(out[0].data, in[0].data, (size_t)eng_numel(in[0].ndims, in[0].dims),
                     in[0].dt == DT_FP16 ? K_F16 : K_F32, (k_unop)p->mode, p->alpha, p->beta,
                     c->stream, e);
}

// Clip's bounds, from the graph's constants.
typedef struct clip_node {
  float lo, hi;
} clip_node;

static int clip_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  const eng_node *n = eng_graph_node(pl->g, i);
  const eng_op_params *p = &pl->params[i];
  float b[2] = {p->alpha, p->beta};
  for (int k = 1; k < 3 && k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0) continue;
    const eng_value *val = eng_graph_value(pl->g, (size_t)v);
    if (!eng_cuda__is_const(pl->g, v) || val->dt != DT_FP32 || val->bytes != sizeof(float))
      return err_set(e, ERR_UNIMPLEMENTED,
                     "Clip on CUDA takes constant FP32 scalar bounds ('%s' is not one)", val->name);
    memcpy(&b[k - 1], val->data, sizeof(float));
  }
  clip_node *s = malloc(sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->lo = b[0];
  s->hi = b[1];
  *state = s;
  return 0;
}

static int clip_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  const clip_node *s = c->node;
  if (in[0].dt != DT_FP32 && in[0].dt != DT_FP16)
    return err_set(e, ERR_UNIMPLEMENTED, "Clip of %s tensors has no CUDA kernel", dtype_wire_name(in[0].dt));
  return k_unop_cuda(out[0].data, in[0].data, (size_t)eng_numel(in[0].ndims, in[0].dims),
                     in[0].dt == DT_FP16 ? K_F16 : K_F32, K_CLIP, s->lo, s->hi, c->stream, e);
}

#define UNOP(name) \
  {.op_type = name, .run = unop_run, .half = eng_cuda__half_always, .flags = CUDA_OP_ELEMWISE}

// FP16 operands run as they are (the kernel widens each to float).
const cuda_op eng_cuda__elem_ops[] = {
    UNOP("HardSigmoid"),
    UNOP("HardSwish"),
    UNOP("Sqrt"),
    UNOP("Exp"),
    UNOP("Neg"),
    UNOP("Abs"),
    UNOP("Reciprocal"),
    {.op_type = "Clip", .run = clip_run, .half = eng_cuda__half_always, .flags = CUDA_OP_ELEMWISE,
     .init = clip_init, .destroy = free},
};
const size_t eng_cuda__n_elem_ops = sizeof eng_cuda__elem_ops / sizeof eng_cuda__elem_ops[0];
