// engine/ops/elem/elem_quant_cuda.c: linear quantization on the CUDA plan
// (the CPU paths are elem_quant.c's): QuantizeLinear, DequantizeLinear and
// inferd.QuantDequant (a Q -> DQ pair of an activation in one pass, which
// graph_pass_qdq.c's float form makes for GPU instances), per tensor or per
// axis, on FP32 or FP16 storage, to and from INT8, UINT8, INT16 and UINT16,
// through kernels/elem/k_quant.cu. The scale and zero point must be
// constants: they are read once at init from the graph's host copy, as
// FP32 (a half plan's device copy of a constant is FP16, too coarse for a
// scale), per axis into device arrays of this node's own. Anything else
// (blocked scales, runtime scales, 32-bit types) answers ERR_UNIMPLEMENTED
// at init, so the node runs on the host inside the plan (host fallback).
// inferd.QuantDequant also runs on NHWC activations (CUDA_OP_NHWC), per
// tensor or per channel (axis 1), so a quantized conv stack stays NHWC.
#include "engine/ops/elem/elem_quant_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/ops/ops_common.h"

typedef struct qnode {
  k_elem qt;      // the quantized type; K_BOOL: DequantizeLinear's x, read at run
  size_t n;       // scale elements: 1 per tensor, else per axis
  float s0, z0;   // per tensor
  float *d_scale, *d_zp;  // per axis: device arrays of n (d_zp NULL: zero)
} qnode;

static void qnode_free(void *st) {
  qnode *q = st;
  if (!q) return;
  if (q->d_scale) (void)cudaFree(q->d_scale);
  if (q->d_zp) (void)cudaFree(q->d_zp);
  free(q);
}

void eng_cuda__quant_destroy(void *st) { qnode_free(st); }

// Element i of an integer constant as float (every 8- and 16-bit value is exact).
static float int_at(const eng_tensor *t, size_t i) {
  switch (t->dt) {
    case DT_INT8: return ((const int8_t *)t->data)[i];
    case DT_UINT8: return ((const uint8_t *)t->data)[i];
    case DT_INT16: return ((const int16_t *)t->data)[i];
    case DT_UINT16: return ((const uint16_t *)t->data)[i];
    default: return 0.0f;
  }
}

static int unimpl(const eng_node *n, const char *why, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "%s on CUDA: %s", n->op_type, why);
}

// DequantizeLinear without a zero point reads x's type at run: whether
// k_quant.cu takes x of type t (into *qt). Asked at load (from the load's
// types) and by each run, with one message.
static bool dq_takes(dtype t, k_elem *qt) { return eng_ops_elem_of(t, qt) == 0 && k_quant_cuda_takes(*qt); }

static int dq_refuse(dtype t, err *e) {
  return err_set(e, ERR_UNIMPLEMENTED, "DequantizeLinear on CUDA of %s: no kernel", dtype_wire_name(t));
}

int eng_cuda__quant_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  const eng_node *n = eng_graph_node(pl->g, i);
  const eng_op_params *p = &pl->params[i];
  bool deq = strcmp(n->op_type, "DequantizeLinear") == 0;
  eng_tensor s, z;
  if (p->start > 0) return unimpl(n, "blocked scales have no kernel", e);
  if (!eng_cuda__const_input(pl, i, 1, &s) || s.dt != DT_FP32) return unimpl(n, "the scale is not an FP32 constant", e);
  bool has_z = n->n_in > 2 && n->in[2] >= 0;
  if (has_z && !eng_cuda__const_input(pl, i, 2, &z)) return unimpl(n, "the zero point is not a constant", e);
  size_t ns = (size_t)eng_numel(s.ndims, s.dims);
  if (ns == 0 || (ns != 1 && s.ndims != 1)) return unimpl(n, "the scale is neither one value nor 1-D", e);
  if (has_z && (size_t)eng_numel(z.ndims, z.dims) != ns) return unimpl(n, "the zero point's size is not the scale's", e);
  dtype qd = has_z ? z.dt : deq ? DT_INVALID : p->to != DT_INVALID ? p->to : DT_UINT8;
  k_elem qt = K_BOOL;  // DequantizeLinear without a zero point: x's type, at run
  if (qd != DT_INVALID && (eng_ops_elem_of(qd, &qt) != 0 || !k_quant_cuda_takes(qt)))
    return unimpl(n, "the quantized type has no kernel (INT8, UINT8, INT16, UINT16)", e);
  // that run's check, made here where the load knows x's type (DT_INVALID: the run's stands)
  k_elem xq;
  dtype xt = eng_cuda__load_in_dt(pl, i, 0);
  if (deq && !has_z && xt != DT_INVALID && !dq_takes(xt, &xq)) return dq_refuse(xt, e);
  qnode *q = calloc(1, sizeof *q);
  if (!q) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  q->qt = qt;
  q->n = ns;
  const float *sv = s.data;
  q->s0 = sv[0];
  q->z0 = has_z ? int_at(&z, 0) : 0.0f;
  if (ns > 1) {
    float *zh = has_z ? malloc(ns * sizeof *zh) : NULL;
    int rc = has_z && !zh ? err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory") : 0;
    for (size_t k = 0; zh && k < ns; k++) zh[k] = int_at(&z, k);
    if (!rc) rc = CUDA_OK(e, cudaMalloc((void **)&q->d_scale, ns * sizeof(float)));
    if (!rc) rc = CUDA_OK(e, cudaMemcpy(q->d_scale, sv, ns * sizeof(float), cudaMemcpyHostToDevice));
    if (!rc && zh) rc = CUDA_OK(e, cudaMalloc((void **)&q->d_zp, ns * sizeof(float)));
    if (!rc && zh) rc = CUDA_OK(e, cudaMemcpy(q->d_zp, zh, ns * sizeof(float), cudaMemcpyHostToDevice));
    free(zh);
    if (rc) {
      qnode_free(q);
      return rc;
    }
  }
  *state = q;
  return 0;
}

// The kernels' view of this run's parameters over x (logical dims; NHWC
// storage when nhwc, where only axis 1 runs: the channels are innermost).
static int qaxis_of(const qnode *q, const eng_op_params *p, const eng_tensor *x, bool nhwc, k_qaxis *a, err *e) {
  memset(a, 0, sizeof *a);
  a->s0 = q->s0, a->z0 = q->z0;
  if (q->n == 1) return 0;
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, x->ndims, &ax, e));
  if ((size_t)x->dims[ax] != q->n)
    return err_set(e, ERR_INVALID_ARGUMENT, "a per-axis scale of %zu elements for an axis of %lld", q->n,
                   (long long)x->dims[ax]);
  if (nhwc && (x->ndims != 4 || ax != 1))
    return err_set(e, ERR_INTERNAL, "per-axis quantization on NHWC storage along axis %lld", (long long)ax);
  a->len = q->n;
  a->inner = nhwc ? 1 : (size_t)op_prod(x->dims, (int)ax + 1, x->ndims);
  a->scale = q->d_scale, a->zp = q->d_zp;
  return 0;
}

static int float_of(dtype t, k_elem *k, err *e) {
  if (t == DT_FP32) *k = K_F32;
  else if (t == DT_FP16) *k = K_F16;
  else return err_set(e, ERR_INVALID_ARGUMENT, "linear quantization on CUDA of %s storage", dtype_wire_name(t));
  return 0;
}

int eng_cuda__quantize_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_in, (void)n_out;
  const qnode *q = c->node;
  k_elem ft = K_F32;
  k_qaxis a;
  TRY(float_of(in[0].dt, &ft, e));
  TRY(qaxis_of(q, p, &in[0], false, &a, e));
  return k_quantize_cuda(out[0].data, q->qt, in[0].data, ft, op_numel(&in[0]), &a, c->stream, e);
}

int eng_cuda__dequantize_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                             int n_out, err *e) {
  (void)n_in, (void)n_out;
  const qnode *q = c->node;
  k_elem ft = K_F32, qt = q->qt;
  k_qaxis a;
  TRY(float_of(out[0].dt, &ft, e));
  if (qt == K_BOOL && !dq_takes(in[0].dt, &qt)) return dq_refuse(in[0].dt, e);
  TRY(qaxis_of(q, p, &in[0], false, &a, e));
  return k_dequantize_cuda(out[0].data, ft, in[0].data, qt, op_numel(&in[0]), &a, c->stream, e);
}

int eng_cuda__quant_dequant_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                                eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const qnode *q = c->node;
  k_elem ft = K_F32;
  k_qaxis a;
  TRY(float_of(in[0].dt, &ft, e));
  TRY(qaxis_of(q, p, &in[0], c->nhwc && in[0].ndims == 4, &a, e));
  return k_fake_quant_cuda(out[0].data, in[0].data, ft, q->qt, op_numel(&in[0]), &a, c->stream, e);
}

bool eng_cuda__quant_dequant_nhwc(const eng_plan *pl, size_t node, const void *state) {
  const qnode *q = state;
  int64_t ax = pl->params[node].axis;
  return q->n == 1 || ax == 1 || ax == -3;  // 4-D here: -3 is axis 1
}
