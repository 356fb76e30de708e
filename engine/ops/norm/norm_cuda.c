// engine/ops/norm/norm_cuda.c: the normalisations (engine/ops/norm/norm.c)
// on the CUDA plan: Softmax and LogSoftmax, LayerNormalization (with its
// optional Mean and InvStdDev outputs), BatchNormalization, and
// InstanceNormalization / GroupNormalization (one kernel), each for FP32
// and FP16 storage (statistics kept in float or wider).
// Registered into the CUDA plan through engine/ops/families.h.
#include "engine/cuda/plan_cuda_internal.h"
#include "engine/cuda/plan_cuda_k.h"
#include "engine/ops/norm/norm.h"
#include "engine/ops/ops_common.h"

static int run_softmax_any(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in,
                           eng_tensor *out, int log, err *e) {
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (!o || !l || !i) return 0;
  if (in[0].dt == DT_FP16)
    return log ? k_log_softmax_f16_cuda(out[0].data, in[0].data, o, l, i, c->stream, e)
               : k_softmax_f16_cuda(out[0].data, in[0].data, o, l, i, c->stream, e);
  return log ? k_log_softmax_cuda(out[0].data, in[0].data, o, l, i, c->stream, e)
             : k_softmax_cuda(out[0].data, in[0].data, o, l, i, c->stream, e);
}

static int run_softmax(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                       eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  return run_softmax_any(c, p, in, out, 0, e);
}

static int run_log_softmax(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                           eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  return run_softmax_any(c, p, in, out, 1, e);
}

// FP32 plans run it on FP32, FP16 plans on FP16 storage (k_layer_norm_f16_cuda
// keeps the statistics in float; the optional Mean and InvStdDev outputs are
// FP32 values and so FP16 on the device too). Every float operand of a node
// shares the plan's one storage type; a mix would be a planner bug.
static int run_layernorm(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t rows = (size_t)op_prod(in[0].dims, 0, ax), cols = (size_t)op_prod(in[0].dims, ax, r);
  const eng_tensor *bt = n_in > 2 && in[2].dt != DT_INVALID ? &in[2] : NULL;
  const eng_tensor *mt = n_out > 1 && out[1].dt != DT_INVALID ? &out[1] : NULL;
  const eng_tensor *st = n_out > 2 && out[2].dt != DT_INVALID ? &out[2] : NULL;
  dtype dt = in[0].dt;
  if ((dt != DT_FP32 && dt != DT_FP16) || in[1].dt != dt || out[0].dt != dt ||
      (bt && bt->dt != dt) || (mt && mt->dt != dt) || (st && st->dt != dt))
    return err_set(e, ERR_INTERNAL, "LayerNormalization: operands of mixed or non-float types");
  if (!rows || !cols) return 0;
  void *mean = mt ? mt->data : NULL, *istd = st ? st->data : NULL;
  const void *bias = bt ? bt->data : NULL;
  if (dt == DT_FP16) {
    TRY(eng_pk_ln_stats_f16_cuda(mean, istd, in[0].data, rows, cols, p->eps, c->stream, e));
    return k_layer_norm_f16_cuda(out[0].data, in[0].data, in[1].data, bias, rows, cols, p->eps,
                                 c->stream, e);
  }
  TRY(eng_pk_ln_stats_cuda(mean, istd, in[0].data, rows, cols, p->eps, c->stream, e));
  return k_layer_norm_cuda(out[0].data, in[0].data, in[1].data, bias, rows, cols, p->eps,
                           c->stream, e);
}

static int run_batchnorm(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  size_t n = (size_t)x->dims[0], ch = (size_t)x->dims[1];
  size_t sp = (size_t)op_prod(x->dims, 2, x->ndims);
  if (!n || !ch || !sp) return 0;
  if (x->dt == DT_FP16)
    return k_batch_norm_f16_cuda(out[0].data, x->data, in[1].data, in[2].data, in[3].data,
                                 in[4].data, n, ch, sp, p->eps, c->stream, e);
  return k_batch_norm_cuda(out[0].data, x->data, in[1].data, in[2].data, in[3].data, in[4].data, n,
                           ch, sp, p->eps, c->stream, e);
}

// InstanceNormalization and GroupNormalization, one kernel (k_group_norm_cuda):
// X, scale and B in the plan's storage type (FP32, or FP16 with the
// statistics in float). Few long groups are cut into chunks over many blocks,
// which takes the workspace prepare asks for.
static int groupnorm_prepare(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                             const eng_tensor *out, int n_out, cuda_prep *r, err *e) {
  (void)c, (void)n_in, (void)out, (void)n_out, (void)e;
  size_t n, ch, groups, sp;
  int per_group;
  eng_ops__groupnorm_dims(p, in, &n, &ch, &groups, &sp, &per_group);
  r->ws_need = k_group_norm_cuda_ws(n, ch, groups, sp);
  return 0;
}

static int run_groupnorm(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  size_t n, ch, groups, sp;
  int per_group;
  eng_ops__groupnorm_dims(p, in, &n, &ch, &groups, &sp, &per_group);
  dtype dt = in[0].dt;
  if ((dt != DT_FP32 && dt != DT_FP16) || in[1].dt != dt || in[2].dt != dt || out[0].dt != dt)
    return err_set(e, ERR_INTERNAL, "%s: operands of mixed or non-float types",
                   p->axis ? "GroupNormalization" : "InstanceNormalization");
  if (!n || !ch || !sp) return 0;
  return k_group_norm_cuda(out[0].data, in[0].data, in[1].data, in[2].data, dt, n, ch, groups, sp,
                           per_group, p->eps, c->ws, c->ws_bytes, c->stream, e);
}

// FP16 plans: FP16 in and out, float statistics inside the kernels
const cuda_op eng_cuda__norm_ops[] = {
    {.op_type = "Softmax", .run = run_softmax, .half = eng_cuda__half_always},
    {.op_type = "LogSoftmax", .run = run_log_softmax, .half = eng_cuda__half_always},
    {.op_type = "LayerNormalization", .run = run_layernorm, .half = eng_cuda__half_always},
    {.op_type = "BatchNormalization", .run = run_batchnorm, .half = eng_cuda__half_always},
    {.op_type = "InstanceNormalization", .run = run_groupnorm, .half = eng_cuda__half_always,
     .prepare = groupnorm_prepare},
    {.op_type = "GroupNormalization", .run = run_groupnorm, .half = eng_cuda__half_always,
     .prepare = groupnorm_prepare},
};
const size_t eng_cuda__n_norm_ops = sizeof eng_cuda__norm_ops / sizeof eng_cuda__norm_ops[0];
