// engine/ops/elem/elem_quant.c: linear quantization on the CPU (kernels/elem/k_quant.c):
// QuantizeLinear and DequantizeLinear (per tensor, per axis, per block; the
// integer types of k_quant_takes), DynamicQuantizeLinear, and the integer
// products MatMulInteger and QLinearMatMul (per-tensor scales and zero
// points, B's per column too; batch dims equal, or B 2-D; A 1-D with B 2-D), 8-bit A by INT8 B
// through oneDNN's int8 GEMM (engine/cpu/qgemm_dnnl.c), other types through
// k_matmul_int; and inferd.QLinearGemm, QLinearMatMul plus an INT32 bias
// (graph_pass_qdq.c makes it of a QDQ Gemm; fast path types only); and
// inferd.QuantDequant, a QuantizeLinear -> DequantizeLinear pair in one pass
// (graph_pass_qdq.c's float form, for GPU instances). elem.c's table lists
// them; the CUDA paths of QuantizeLinear, DequantizeLinear and
// inferd.QuantDequant are elem_quant_cuda.c's.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/qgemm_dnnl.h"
#include "engine/ops/elem/elem_internal.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

static int int_elem(dtype t, k_elem *k, const char *what, err *e) {
  if (eng_ops_elem_of(t, k) != 0 || !k_quant_takes(*k))
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %s of type %s (INT8, UINT8, INT16, UINT16, INT32, UINT32)",
                   what, dtype_wire_name(t));
  return 0;
}

// --- QuantizeLinear, DequantizeLinear: p->axis, p->start: block_size, p->to: output_dtype (QuantizeLinear)

int eng_ops__parse_qdq(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = op_attr_int(n, "axis", 1);
  p->start = op_attr_int(n, "block_size", 0);
  int64_t od = op_attr_int(n, "output_dtype", 0);
  p->to = od ? dtype_from_onnx((int)od) : DT_INVALID;
  return 0;
}

// The layout of x against scale (and zp) for the op's axis and block size.
static int layout_of(const eng_op_params *p, const eng_tensor *x, const eng_tensor *scale, const eng_tensor *zp,
                     k_quant_layout *l, err *e) {
  memset(l, 0, sizeof *l);
  int64_t ns = eng_numel(scale->ndims, scale->dims);
  l->outer = op_numel(x), l->len = 1, l->inner = 1;
  // one element is one element whatever its rank (onnxruntime's quantizer writes a [1] scale with a scalar zero point)
  if (zp && (eng_numel(zp->ndims, zp->dims) != ns || (ns != 1 && zp->ndims != scale->ndims)))
    return err_set(e, ERR_INVALID_ARGUMENT, "the zero point must have the scale's shape");
  if (p->start <= 0 && ns == 1 && scale->ndims <= 1) return 0;  // per tensor
  int64_t ax;
  TRY(eng_ops__norm_axis(p->axis, x->ndims, &ax, e));
  l->outer = (size_t)op_prod(x->dims, 0, (int)ax), l->len = (size_t)x->dims[ax];
  l->inner = (size_t)op_prod(x->dims, (int)ax + 1, x->ndims);
  if (p->start <= 0) {
    if (scale->ndims != 1 || scale->dims[0] != x->dims[ax])
      return err_set(e, ERR_INVALID_ARGUMENT, "a per-axis scale must be 1-D of %lld elements", (long long)x->dims[ax]);
    l->per_axis = 1;
    return 0;
  }
  l->block = (size_t)p->start;
  int ok = scale->ndims == x->ndims;
  for (int i = 0; ok && i < x->ndims; i++)
    ok = scale->dims[i] == (i == ax ? (x->dims[i] + p->start - 1) / p->start : x->dims[i]);
  if (!ok) return err_set(e, ERR_INVALID_ARGUMENT, "a blocked scale must have x's shape with the axis divided into blocks");
  return 0;
}

// The quantized type: the zero point's, else output_dtype's, else UINT8
// (QuantizeLinear's y, inferd.QuantDequant's middle step).
static dtype quant_type(const eng_op_params *p, const eng_tensor *zp) {
  return zp ? zp->dt : p->to != DT_INVALID ? p->to : DT_UINT8;
}

// QuantizeLinear's and inferd.QuantDequant's shape: FP32 x and scale, an
// integer quantized type (what names it in the error), x's layout against
// the scale; the output x's shape in out_dt, or the quantized type when
// DT_INVALID.
static int infer_from_float(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                            const char *what, dtype out_dt, err *e) {
  TRY(eng_ops__need_f32(&in[0], "x", e));
  TRY(eng_ops__need_f32(&in[1], "y_scale", e));
  const eng_tensor *zp = op_given(in, n_in, 2) ? &in[2] : NULL;
  dtype yt = quant_type(p, zp);
  k_elem k;
  TRY(int_elem(yt, &k, what, e));
  k_quant_layout l;
  TRY(layout_of(p, &in[0], &in[1], zp, &l, e));
  op_set_out(&out[0], out_dt != DT_INVALID ? out_dt : yt, in[0].ndims, in[0].dims);
  return 0;
}

// What QuantizeLinear, DequantizeLinear and inferd.QuantDequant run: one
// kernel each over the same checks and layout.
typedef enum lin_kind { LIN_QUANT, LIN_DEQUANT, LIN_FAKE_QUANT } lin_kind;

static int run_linear(lin_kind kind, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      err *e) {
  const eng_tensor *zp = op_given(in, n_in, 2) ? &in[2] : NULL;
  // the integer side: y's type, x's, or the one in the middle
  dtype t = kind == LIN_QUANT ? out[0].dt : kind == LIN_DEQUANT ? in[0].dt : quant_type(p, zp);
  k_elem k;
  k_quant_layout l;
  TRY(int_elem(t, &k, kind == LIN_QUANT ? "y" : kind == LIN_DEQUANT ? "x" : "the quantized type", e));
  TRY(layout_of(p, &in[0], &in[1], zp, &l, e));
  const void *z = zp ? zp->data : NULL;
  int rc = kind == LIN_QUANT     ? k_quantize(out[0].data, k, in[0].data, in[1].data, z, &l)
           : kind == LIN_DEQUANT ? k_dequantize(out[0].data, in[0].data, k, in[1].data, z, &l)
                                 : k_fake_quant(out[0].data, in[0].data, k, in[1].data, z, &l);
  if (rc == 0) return 0;
  if (kind == LIN_DEQUANT) return err_set(e, ERR_INTERNAL, "no DequantizeLinear of %s", dtype_wire_name(t));
  return err_set(e, ERR_INTERNAL, "no QuantizeLinear to %s", dtype_wire_name(t));
}

int eng_ops__infer_quantize(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e) {
  (void)n_out;
  return infer_from_float(p, in, n_in, out, "y", DT_INVALID, e);
}

int eng_ops__run_quantize(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)n_out;
  return run_linear(LIN_QUANT, p, in, n_in, out, e);
}

int eng_ops__infer_dequantize(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                              err *e) {
  (void)n_out;
  k_elem k;
  TRY(int_elem(in[0].dt, &k, "x", e));
  TRY(eng_ops__need_f32(&in[1], "x_scale", e));
  const eng_tensor *zp = op_given(in, n_in, 2) ? &in[2] : NULL;
  if (zp && zp->dt != in[0].dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "x_zero_point is %s, x %s", dtype_wire_name(zp->dt),
                   dtype_wire_name(in[0].dt));
  k_quant_layout l;
  TRY(layout_of(p, &in[0], &in[1], zp, &l, e));
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

int eng_ops__run_dequantize(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e) {
  (void)n_out;
  return run_linear(LIN_DEQUANT, p, in, n_in, out, e);
}

// --- inferd.QuantDequant (ENG_QUANT_DEQUANT_OP): a QuantizeLinear -> DequantizeLinear pair
// on FP32 in one pass, as graph_pass_qdq.c makes it for plans that run a QDQ
// model in float (GPU instances): QuantizeLinear's inputs and attributes;
// the quantized type is the zero point's, else output_dtype's, else UINT8.

int eng_ops__infer_quant_dequant(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                 int n_out, err *e) {
  (void)n_out;
  return infer_from_float(p, in, n_in, out, "the quantized type", DT_FP32, e);
}

int eng_ops__run_quant_dequant(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                               int n_out, err *e) {
  (void)n_out;
  return run_linear(LIN_FAKE_QUANT, p, in, n_in, out, e);
}

// --- DynamicQuantizeLinear: y UINT8, y_scale FP32 scalar, y_zero_point UINT8 scalar

int eng_ops__infer_dynquant(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e) {
  (void)p, (void)n_in;
  TRY(eng_ops__need_f32(&in[0], "x", e));
  op_set_out(&out[0], DT_UINT8, in[0].ndims, in[0].dims);
  if (n_out > 1 && out[1].dt != DT_INVALID) op_set_out(&out[1], DT_FP32, 0, NULL);
  if (n_out > 2 && out[2].dt != DT_INVALID) op_set_out(&out[2], DT_UINT8, 0, NULL);
  return 0;
}

int eng_ops__run_dynquant(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)p, (void)n_in, (void)e;
  float s;
  uint8_t z;
  k_dynamic_quantize(out[0].data, &s, &z, in[0].data, op_numel(&in[0]));
  if (n_out > 1 && out[1].dt != DT_INVALID) *(float *)out[1].data = s;
  if (n_out > 2 && out[2].dt != DT_INVALID) *(uint8_t *)out[2].data = z;
  return 0;
}

// --- MatMulInteger (A, B, a_zero_point, b_zero_point) and QLinearMatMul (a, a_scale, a_zp, b, b_scale,
// b_zp, y_scale, y_zp); p->mode: 1 for QLinearMatMul

typedef struct mm_dims {
  size_t batch, a_bs, b_bs, m, k, n;
  int nd;
  int64_t y[ENG_MAX_DIMS];
} mm_dims;

static int mm_dims_of(const eng_tensor *a, const eng_tensor *b, mm_dims *d, err *e) {
  if (a->ndims == 1 && b->ndims == 2) {  // numpy's rule: [k] as [1, k], the 1 dropped again: y [n]
    eng_tensor a2 = *a;
    a2.ndims = 2, a2.dims[0] = 1, a2.dims[1] = a->dims[0];
    TRY(mm_dims_of(&a2, b, d, e));
    d->nd = 1, d->y[0] = (int64_t)d->n;
    return 0;
  }
  if (a->ndims < 2 || b->ndims < 2) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: 1-D B, or 1-D A with B of rank 3 or more");
  d->m = (size_t)a->dims[a->ndims - 2], d->k = (size_t)a->dims[a->ndims - 1], d->n = (size_t)b->dims[b->ndims - 1];
  if ((size_t)b->dims[b->ndims - 2] != d->k) return err_set(e, ERR_INVALID_ARGUMENT, "inner dims differ");
  size_t ab = (size_t)op_prod(a->dims, 0, a->ndims - 2);
  int same = a->ndims == b->ndims;
  for (int i = 0; same && i < a->ndims - 2; i++) same = a->dims[i] == b->dims[i];
  if (!same && b->ndims != 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: batch dims that broadcast (equal ones, or B 2-D)");
  d->batch = ab, d->a_bs = d->m * d->k, d->b_bs = b->ndims == 2 ? 0 : d->k * d->n;
  d->nd = a->ndims;
  memcpy(d->y, a->dims, (size_t)a->ndims * sizeof d->y[0]);
  d->y[d->nd - 1] = (int64_t)d->n;
  return 0;
}

// A scalar of a per-tensor parameter (one element), as a double.
static int scalar_of(const eng_tensor *t, const char *what, double *v, err *e) {
  if (op_numel(t) != 1) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %s must be one element (per tensor)", what);
  k_elem k;
  if (t->dt == DT_FP32) *v = *(const float *)t->data;
  else if (eng_ops_elem_of(t->dt, &k) == 0 && k_quant_takes(k)) {
    switch (k) {
      case K_I8: *v = *(const int8_t *)t->data; break;
      case K_U8: *v = *(const uint8_t *)t->data; break;
      case K_I16: *v = *(const int16_t *)t->data; break;
      case K_U16: *v = *(const uint16_t *)t->data; break;
      case K_I32: *v = *(const int32_t *)t->data; break;
      default: *v = *(const uint32_t *)t->data; break;
    }
  } else {
    return err_set(e, ERR_INVALID_ARGUMENT, "%s has unsupported type %s", what, dtype_wire_name(t->dt));
  }
  return 0;
}

// A and B (MatMulInteger's inputs 0 and 1, QLinearMatMul's 0 and 3 when q)
// and their element types, each an integer type.
static int mm_operands(int q, const eng_tensor *in, const eng_tensor **a, const eng_tensor **b, k_elem *ka,
                       k_elem *kb, err *e) {
  *a = &in[0], *b = &in[q ? 3 : 1];
  TRY(int_elem((*a)->dt, ka, "A", e));
  return int_elem((*b)->dt, kb, "B", e);
}

int eng_ops__infer_matmul_int(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                              err *e) {
  (void)n_out;
  int q = p->mode;
  const eng_tensor *a, *b;
  k_elem ka, kb, ky = K_I32;
  TRY(mm_operands(q, in, &a, &b, &ka, &kb, e));
  dtype yt = DT_INT32;
  if (q) {
    yt = in[7].dt;
    TRY(int_elem(yt, &ky, "y", e));
  }
  mm_dims d;
  TRY(mm_dims_of(a, b, &d, e));
  if (q == 2) {  // inferd.QLinearGemm: the fast path's types, and an INT32 bias of n (or none)
    if ((ka != K_U8 && ka != K_I8) || kb != K_I8)
      return err_set(e, ERR_INVALID_ARGUMENT, "inferd.QLinearGemm takes 8-bit A and INT8 B");
    if (op_given(in, n_in, 8) && (in[8].dt != DT_INT32 || op_numel(&in[8]) != d.n))
      return err_set(e, ERR_INVALID_ARGUMENT, "inferd.QLinearGemm's bias must be INT32 of %zu", d.n);
  }
  op_set_out(&out[0], yt, d.nd, d.y);
  return 0;
}

// A per-column parameter (b_scale, b_zero_point): one element, or n as a
// 1-D tensor; into *col (malloc'd, n values) when per column, else *v.
static int column_of(const eng_tensor *t, size_t n, const char *what, double *v, double **col, err *e) {
  *col = NULL;
  if (op_numel(t) == 1) return scalar_of(t, what, v, e);
  if (t->ndims != 1 || (size_t)t->dims[0] != n)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %s must be one element or one per column of B (%zu)", what, n);
  if (!(*col = malloc(n * sizeof **col))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < n; i++) {
    eng_tensor one = *t;
    one.ndims = 0;
    one.data = (char *)t->data + i * dtype_size(t->dt);
    int rc = scalar_of(&one, what, &(*col)[i], e);
    if (rc) {
      free(*col);
      *col = NULL;
      return rc;
    }
  }
  return 0;
}

// The fast path (8-bit a, INT8 b with no zero point): oneDNN's int8 GEMM per
// batch (engine/cpu/qgemm_dnnl.c), then QLinearMatMul's requantization per
// column (k_requantize, the multipliers in FP32 as above).
static int matmul_fast(eng_tensor *out, const void *a, int a_signed, int32_t azp, const int8_t *b, const mm_dims *d,
                       k_elem ky, double mul, const double *mul_col, double yzp, const int32_t *bias, err *e) {
  size_t rows = d->batch * d->m, ny = rows * d->n;
  int32_t *acc = ky == K_I32 ? out[0].data : malloc((ny ? ny : 1) * sizeof *acc);
  float *mf = malloc((mul_col ? d->n : 1) * sizeof *mf);
  int rc = !acc || !mf ? err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory") : 0;
  for (size_t bi = 0; !rc && bi < d->batch; bi++)
    rc = eng_dnnl_qgemm(acc + bi * d->m * d->n, (const int8_t *)a + bi * d->a_bs, a_signed, azp, b + bi * d->b_bs, d->m,
                        d->k, d->n, e);
  for (size_t c = 0; !rc && ky != K_I32 && c < (mul_col ? d->n : 1); c++)
    if (!isfinite(mf[c] = (float)(mul_col ? mul_col[c] : mul)))
      rc = err_set(e, ERR_INVALID_ARGUMENT, "a_scale * b_scale / y_scale is not a finite number (column %zu)", c);
  if (!rc && ky != K_I32) {
    k_requantize(out[0].data, ky, acc, bias, mf, mul_col != NULL, (int32_t)yzp, rows, d->n, 1);
  }
  if (acc != out[0].data) free(acc);
  free(mf);
  return rc;
}

int eng_ops__run_matmul_int(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e) {
  (void)n_out;
  int q = p->mode;
  const eng_tensor *a, *b;
  k_elem ka, kb, ky = K_I32;
  TRY(mm_operands(q, in, &a, &b, &ka, &kb, e));
  mm_dims d;
  TRY(mm_dims_of(a, b, &d, e));
  double azp = 0, bzp = 0, mul = 0, yzp = 0, *bzp_col = NULL, *bs_col = NULL;
  int rc = 0;
  if (q) {
    double as, bs = 0, ys;
    TRY(int_elem(out[0].dt, &ky, "y", e));
    TRY(scalar_of(&in[1], "a_scale", &as, e));
    TRY(scalar_of(&in[2], "a_zero_point", &azp, e));
    TRY(scalar_of(&in[6], "y_scale", &ys, e));
    TRY(scalar_of(&in[7], "y_zero_point", &yzp, e));
    rc = column_of(&in[4], d.n, "b_scale", &bs, &bs_col, e);
    if (!rc) rc = column_of(&in[5], d.n, "b_zero_point", &bzp, &bzp_col, e);
    // the multiplier in FP32, as onnxruntime computes it
    for (size_t c = 0; !rc && bs_col && c < d.n; c++) bs_col[c] = (double)((float)as * (float)bs_col[c] / (float)ys);
    mul = (double)((float)as * (float)bs / (float)ys);
    if (!rc && !bs_col && mul == 0.0) mul = 1e-300;  // a zero scale still requantizes (to y_zero_point)
  } else {
    if (op_given(in, n_in, 2)) TRY(scalar_of(&in[2], "a_zero_point", &azp, e));
    if (op_given(in, n_in, 3)) rc = column_of(&in[3], d.n, "b_zero_point", &bzp, &bzp_col, e);
  }
  int b_zero = bzp == 0.0;
  for (size_t c = 0; bzp_col && c < d.n; c++) b_zero &= bzp_col[c] == 0.0;
  const int32_t *bias = q == 2 && op_given(in, n_in, 8) ? in[8].data : NULL;
  if (!rc && q == 2 && !b_zero) rc = err_set(e, ERR_INVALID_ARGUMENT, "inferd.QLinearGemm takes no B zero point");
  if (!rc && (ka == K_U8 || ka == K_I8) && kb == K_I8 && b_zero && (ky == K_I32 || ky == K_U8 || ky == K_I8))
    rc = matmul_fast(out, a->data, ka == K_I8, (int32_t)azp, b->data, &d, ky, mul, bs_col, yzp, bias, e);
  else if (!rc && k_matmul_int(out[0].data, ky, a->data, ka, b->data, kb, azp, bzp, bzp_col, d.batch, d.a_bs, d.b_bs,
                               d.m, d.k, d.n, mul, bs_col, yzp) != 0)
    rc = err_set(e, ERR_INTERNAL, "no integer MatMul of these types");
  free(bzp_col);
  free(bs_col);
  return rc;
}

int eng_ops__parse_qlinear_matmul(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->mode = strcmp(n->op_type, ENG_QLINEAR_GEMM_OP) == 0 ? 2 : 1;
  return 0;
}
