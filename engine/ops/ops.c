// engine/ops/ops.c: the CPU backend's operators: attribute parsing with
// opset-aware defaults, shape inference, and execution through the
// reference kernels (kernels/k_ref.h) and OpenBLAS for the matrix products
// (oneDNN for a Gemm with constant B); the convolution/pooling family lives
// in engine/ops/conv/conv.c.
#include "engine/ops/ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/conv_dnnl.h"
#include "engine/ops/ops_common.h"
#include "engine/ops/ops_table.h"
#include "engine/cpu/par.h"
#include "engine/cpu/plan_internal.h"
#include "kernels/k_ref.h"

// --- helpers (the shared ones are declared in ops_common.h)

#define attr_int op_attr_int
#define attr_float op_attr_float
#define prod op_prod
#define set_out op_set_out
#define numel op_numel
#define norm_axis eng_ops__norm_axis
#define need_f32 eng_ops__need_f32

int eng_ops__norm_axis(int64_t axis, int rank, int64_t *out, err *e) {
  if (axis < -rank || axis >= rank)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld out of range for rank %d", (long long)axis,
                   rank);
  *out = axis < 0 ? axis + rank : axis;
  return 0;
}

int eng_ops__need_f32(const eng_tensor *t, const char *what, err *e) {
  if (t->dt != DT_FP32)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s must be a float tensor, got %s", what,
                   dtype_wire_name(t->dt));
  return 0;
}

int eng_ops__checked_numel(int nd, const int64_t *dims, const char *what, err *e) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) {
    if (dims[i] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim %lld", what, (long long)dims[i]);
    if (dims[i] && n > ENG_MAX_NUMEL / dims[i])
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: more than %lld elements", what,
                     (long long)ENG_MAX_NUMEL);
    n *= dims[i];
  }
  return 0;
}

int eng_ops__attr_ints(const eng_node *n, const char *name, int64_t *out, int max, int *cnt,
                       err *e) {
  const eng_attr *a = eng_node_attr(n, name);
  *cnt = -1;
  if (!a) return 0;
  if (a->n_ints > (size_t)max)
    return err_set(e, ERR_INVALID_ARGUMENT, "attribute '%s' has %zu values, at most %d", name,
                   a->n_ints, max);
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  *cnt = (int)a->n_ints;
  return 0;
}

int eng_ops__enum(const char *s, const char *const *names, const char *attr, int *out, err *e) {
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = i;
      return 0;
    }
  return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %s '%s'", attr, s);
}

static int read_known(const eng_tensor *t, const char *what, int max, int *cnt, err *e) {
  if (!t->data && op_numel(t))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s is not known when planning (it depends on the input data)", what);
  if (t->ndims > 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s must be 1-D, got rank %d", what, t->ndims);
  size_t n = op_numel(t);
  if (n > (size_t)max)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s has %zu values, at most %d supported", what, n,
                   max);
  *cnt = (int)n;
  return 0;
}

int eng_ops__read_ints(const eng_tensor *t, const char *what, int64_t *out, int max, int *cnt,
                       err *e) {
  if (t->dt != DT_INT64 && t->dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s must be int64, got %s", what,
                   dtype_wire_name(t->dt));
  TRY(read_known(t, what, max, cnt, e));
  for (int i = 0; i < *cnt; i++)
    out[i] = t->dt == DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
  return 0;
}

int eng_ops__read_floats(const eng_tensor *t, const char *what, float *out, int max, int *cnt,
                         err *e) {
  TRY(need_f32(t, what, e));
  TRY(read_known(t, what, max, cnt, e));
  if (*cnt) memcpy(out, t->data, (size_t)*cnt * sizeof *out);
  return 0;
}

double eng_ops__scalar(const eng_tensor *t) {
  switch (t->dt) {
    case DT_FP32: return ((const float *)t->data)[0];
    case DT_INT64: return (double)((const int64_t *)t->data)[0];
    case DT_INT32: return ((const int32_t *)t->data)[0];
    default: return 0;
  }
}

static int attr_ints(const eng_node *n, const char *name, eng_op_params *p, err *e) {
  int cnt;
  TRY(eng_ops__attr_ints(n, name, p->ints, ENG_MAX_DIMS, &cnt, e));
  if (cnt >= 0) {
    p->n_ints = cnt;
    p->has_ints = 1;
  }
  return 0;
}

dtype eng_ops_cpu_internal_dtype(dtype t) {
  return t == DT_FP16 || t == DT_FP64 || t == DT_BF16 ? DT_FP32 : t;
}

// --- parse

static int parse_none(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)n, (void)opset, (void)p, (void)e;
  return 0;
}

static int parse_gemm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)opset, (void)e;
  p->alpha = attr_float(n, "alpha", 1.0f);
  p->beta = attr_float(n, "beta", 1.0f);
  p->trans_a = attr_int(n, "transA", 0) != 0;
  p->trans_b = attr_int(n, "transB", 0) != 0;
  // A constant B with A as is, alpha 1 and C (if any) a bias runs as a
  // oneDNN inner product (run_gemm_state), which takes fused post-ops
  const eng_value *b = n->in[1] >= 0 ? eng_graph_value(g, (size_t)n->in[1]) : NULL;
  int has_c = n->n_in > 2 && n->in[2] >= 0;
  p->fusable = b && b->kind == ENG_VALUE_CONST && b->ndims == 2 && !p->trans_a &&
               p->alpha == 1.0f && (!has_c || p->beta == 1.0f);
  return 0;
}

static int parse_leaky(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->alpha = attr_float(n, "alpha", 0.01f);
  return 0;
}

static int parse_gelu(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_attr *a = eng_node_attr(n, "approximate");
  const char *s = a ? a->s : "none";
  if (strcmp(s, "none") == 0) p->approximate = 0;
  else if (strcmp(s, "tanh") == 0) p->approximate = 1;
  else return err_set(e, ERR_INVALID_ARGUMENT, "unknown approximate '%s'", s);
  return 0;
}

static int parse_softmax(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g, (void)e;
  p->legacy = opset < 13;
  p->axis = attr_int(n, "axis", p->legacy ? 1 : -1);
  return 0;
}

static int parse_flatten(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = attr_int(n, "axis", 1);
  return 0;
}

static int parse_axis_required(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                               err *e) {
  (void)g, (void)opset;
  const eng_attr *a = eng_node_attr(n, "axis");
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'axis' is required");
  p->axis = a->i;
  return 0;
}

static int parse_reshape(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g;
  if (opset < 5) return err_set(e, ERR_INVALID_ARGUMENT, "Reshape before opset 5 is not supported");
  if (n->n_in < 2 || n->in[1] < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "the shape input is required");
  p->allowzero = attr_int(n, "allowzero", 0) != 0;
  return 0;
}

// Squeeze/Unsqueeze: axes are an attribute before opset 13, then an
// optional input (read at shape inference: host_in).
static int parse_squeeze(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g;
  if (opset < 13) return attr_ints(n, "axes", p, e);
  return 0;
}

static int parse_unsqueeze(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g;
  if (opset < 13) TRY(attr_ints(n, "axes", p, e));
  else if (n->n_in >= 2 && n->in[1] >= 0) p->has_ints = 1;
  if (!p->has_ints) return err_set(e, ERR_INVALID_ARGUMENT, "axes are required");
  return 0;
}

// The axes of Squeeze/Unsqueeze: the attribute form, else input 1's value.
static int get_axes(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *ax, int *n,
                    int *given, err *e) {
  *given = 1;
  if (op_given(in, n_in, 1)) return eng_ops__read_ints(&in[1], "axes", ax, ENG_MAX_DIMS, n, e);
  *n = p->n_ints;
  memcpy(ax, p->ints, sizeof p->ints);
  *given = p->has_ints;
  return 0;
}

static int parse_transpose(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g, (void)opset;
  return attr_ints(n, "perm", p, e);
}

static int parse_cast(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_attr *a = eng_node_attr(n, "to");
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'to' is required");
  p->to = dtype_from_onnx((int)a->i);
  switch (p->to) {
    case DT_FP32: case DT_FP16: case DT_FP64: case DT_BF16: case DT_INT64: case DT_INT32:
    case DT_INT16: case DT_INT8: case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64:
    case DT_BOOL:
      return 0;
    default:
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: Cast to ONNX type %lld",
                     (long long)a->i);
  }
}

static int parse_layernorm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = attr_int(n, "axis", -1);
  p->eps = attr_float(n, "epsilon", 1e-5f);
  return 0;
}

static int parse_batchnorm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g, (void)opset;
  p->eps = attr_float(n, "epsilon", 1e-5f);
  if (attr_int(n, "training_mode", 0) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: training_mode=1");
  for (int i = 1; i < n->n_out; i++)
    if (n->out[i] >= 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: training outputs (running statistics)");
  return 0;
}

// --- shared infer

static int infer_same_f32(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                          int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(need_f32(&in[0], "input", e));
  set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

static int infer_same(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)n_in, (void)e;
  set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
  if (n_out > 1 && out[1].dt != DT_INVALID)  // Dropout's mask
    set_out(&out[1], DT_BOOL, in[0].ndims, in[0].dims);
  return 0;
}

// Views (Reshape, Flatten, ...): the planner makes output 0 share input
// 0's bytes, so there is normally nothing to do; copy only if it could not.
static int run_view(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)p, (void)n_in, (void)e;
  size_t bytes = numel(&out[0]) * dtype_size(out[0].dt);
  if (out[0].data != in[0].data && bytes) memmove(out[0].data, in[0].data, bytes);
  if (n_out > 1 && out[1].dt != DT_INVALID) memset(out[1].data, 1, numel(&out[1]));
  return 0;
}

// --- Gemm

static int infer_gemm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  TRY(need_f32(&in[0], "A", e));
  TRY(need_f32(&in[1], "B", e));
  if (in[0].ndims != 2 || in[1].ndims != 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "A and B must be 2-D, got ranks %d and %d",
                   in[0].ndims, in[1].ndims);
  int64_t m = p->trans_a ? in[0].dims[1] : in[0].dims[0];
  int64_t k = p->trans_a ? in[0].dims[0] : in[0].dims[1];
  int64_t kb = p->trans_b ? in[1].dims[1] : in[1].dims[0];
  int64_t nn = p->trans_b ? in[1].dims[0] : in[1].dims[1];
  if (k != kb)
    return err_set(e, ERR_INVALID_ARGUMENT, "inner dimensions differ: %lld vs %lld", (long long)k,
                   (long long)kb);
  int64_t y[2] = {m, nn};
  if (n_in > 2 && in[2].dt != DT_INVALID) {
    TRY(need_f32(&in[2], "C", e));
    const eng_tensor *c = &in[2];
    if (c->ndims > 2) return err_set(e, ERR_INVALID_ARGUMENT, "C has rank %d", c->ndims);
    for (int i = 0; i < c->ndims; i++) {
      int64_t d = c->dims[i], want = y[2 - c->ndims + i];
      if (d != 1 && d != want)
        return err_set(e, ERR_INVALID_ARGUMENT, "C is not broadcastable to [%lld, %lld]",
                       (long long)m, (long long)nn);
    }
  }
  set_out(&out[0], DT_FP32, 2, y);
  return 0;
}

static int run_gemm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)n_out, (void)e;
  int64_t m = out[0].dims[0], nn = out[0].dims[1];
  int64_t k = p->trans_a ? in[0].dims[0] : in[0].dims[1];
  float *y = out[0].data;
  if (m == 0 || nn == 0) return 0;
  float beta = 0.0f;
  if (n_in > 2 && in[2].dt != DT_INVALID && p->beta != 0.0f) {
    const eng_tensor *c = &in[2];
    const float *cd = c->data;
    int64_t cr = c->ndims == 2 ? c->dims[0] : 1, cc = c->ndims >= 1 ? c->dims[c->ndims - 1] : 1;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < nn; j++)
        y[i * nn + j] = p->beta * cd[(cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j)];
    beta = 1.0f;
  } else {
    memset(y, 0, (size_t)(m * nn) * sizeof(float));
  }
  if (k == 0) return 0;
  cblas_sgemm(CblasRowMajor, p->trans_a ? CblasTrans : CblasNoTrans,
              p->trans_b ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)nn, (blasint)k,
              p->alpha, in[0].data, (blasint)in[0].dims[1], in[1].data, (blasint)in[1].dims[1],
              beta, y, (blasint)nn);
  return 0;
}

// The fast path for a constant B (p->fusable): a oneDNN inner product with
// B reordered once (OpenBLAS's sgemm packs all of B on every call, the
// bulk of a batch-1 classifier's time), with the plan's fusions as its
// post-ops. Other shapes of C run run_gemm and then the fusions.
static int run_gemm_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in,
                          int n_in, eng_tensor *out, int n_out, err *e) {
  int64_t m = out[0].dims[0], nn = out[0].dims[1], k = in[0].dims[1];
  const eng_tensor *c = n_in > 2 && in[2].dt != DT_INVALID ? &in[2] : NULL;
  int bias = !c || (c->ndims == 1 && c->dims[0] == nn) ||
             (c->ndims == 2 && c->dims[0] == 1 && c->dims[1] == nn);
  if (st->post_add && (st->post_add->dt != DT_FP32 || numel(st->post_add) != numel(&out[0])))
    return err_set(e, ERR_INTERNAL, "the fused addend does not match Y");
  if (m == 0 || nn == 0) return 0;
  if (p->fusable && bias && k > 0) {
    eng_dnnl_ctx *dc;
    TRY(eng_conv_dnnl_ctx(st, &dc, e));
    k_window g = {.n = m, .c = k, .m = nn, .group = 1};
    eng_dnnl_post post = {st->post_act, st->act_alpha, st->act_beta,
                          st->post_add ? st->post_add->data : NULL};
    return eng_dnnl_run(dc, (eng_dnnl_node **)&st->node,
                        p->trans_b ? ENG_DNNL_INNER_BT : ENG_DNNL_INNER, &g, in[1].data,
                        c ? c->data : NULL, &post, NULL, out[0].data, in[0].data, e);
  }
  TRY(run_gemm(p, in, n_in, out, n_out, e));
  float *y = out[0].data;
  size_t ny = (size_t)(m * nn);
  if (st->post_add) {
    const float *a = st->post_add->data;
    for (size_t i = 0; i < ny; i++) y[i] += a[i];
  }
  eng_dnnl_post post = {st->post_act, st->act_alpha, st->act_beta, NULL};
  eng_dnnl_act_ref(y, ny, &post);
  return 0;
}

// --- MatMul (numpy semantics)

typedef eng_mm_shape mm_shape;

int eng_ops__mm_analyse(const eng_tensor *a, const eng_tensor *b, mm_shape *s, eng_tensor *y,
                      err *e) {
  if (a->ndims < 1 || b->ndims < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "MatMul operands must have rank >= 1");
  int ra = a->ndims, rb = b->ndims;
  s->m = ra == 1 ? 1 : a->dims[ra - 2];
  s->k = a->dims[ra - 1];
  int64_t kb = rb == 1 ? b->dims[0] : b->dims[rb - 2];
  s->n = rb == 1 ? 1 : b->dims[rb - 1];
  if (s->k != kb)
    return err_set(e, ERR_INVALID_ARGUMENT, "inner dimensions differ: %lld vs %lld",
                   (long long)s->k, (long long)kb);
  int na = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0;
  s->nb = na > nbb ? na : nbb;
  for (int i = 0; i < s->nb; i++) {
    int ia = i - (s->nb - na), ib = i - (s->nb - nbb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "batch dimensions %lld and %lld do not broadcast",
                     (long long)da, (long long)db);
    s->abatch[i] = da;
    s->bbatch[i] = db;
    s->batch[i] = da == 1 ? db : da;
  }
  if (y) {
    int r = 0;
    for (int i = 0; i < s->nb; i++) y->dims[r++] = s->batch[i];
    if (ra != 1) y->dims[r++] = s->m;
    if (rb != 1) y->dims[r++] = s->n;
    y->ndims = r;
    y->dt = DT_FP32;
  }
  return 0;
}

static int infer_matmul(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(need_f32(&in[0], "A", e));
  TRY(need_f32(&in[1], "B", e));
  mm_shape s;
  return eng_ops__mm_analyse(&in[0], &in[1], &s, &out[0], e);
}

static int run_matmul(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  mm_shape s;
  TRY(eng_ops__mm_analyse(&in[0], &in[1], &s, NULL, e));
  const float *a = in[0].data, *b = in[1].data;
  float *y = out[0].data;
  int64_t total = prod(s.batch, 0, s.nb), bcount = prod(s.bbatch, 0, s.nb);
  if (total == 0 || s.m == 0 || s.n == 0) return 0;
  if (s.k == 0) {
    memset(y, 0, (size_t)(total * s.m * s.n) * sizeof(float));
    return 0;
  }
  int a_full = 1;
  for (int i = 0; i < s.nb; i++) a_full &= s.abatch[i] == s.batch[i];
  if (bcount == 1 && a_full) {
    // one weight matrix for every batch row: a single large product
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)(total * s.m), (blasint)s.n,
                (blasint)s.k, 1.0f, a, (blasint)s.k, b, (blasint)s.n, 0.0f, y, (blasint)s.n);
    return 0;
  }
  int64_t idx[ENG_MAX_DIMS] = {0};
  for (int64_t t = 0; t < total; t++) {
    int64_t ao = 0, bo = 0, as = 1, bs = 1;
    for (int i = s.nb - 1; i >= 0; i--) {
      if (s.abatch[i] != 1) ao += idx[i] * as;
      if (s.bbatch[i] != 1) bo += idx[i] * bs;
      as *= s.abatch[i];
      bs *= s.bbatch[i];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)s.m, (blasint)s.n,
                (blasint)s.k, 1.0f, a + ao * s.m * s.k, (blasint)s.k, b + bo * s.k * s.n,
                (blasint)s.n, 0.0f, y + t * s.m * s.n, (blasint)s.n);
    for (int i = s.nb - 1; i >= 0; i--) {
      if (++idx[i] < s.batch[i]) break;
      idx[i] = 0;
    }
  }
  return 0;
}

// --- binary elementwise

int eng_ops__bcast(const eng_tensor *a, const eng_tensor *b, int *nd, int64_t *y, int64_t *ad,
                 int64_t *bd, err *e) {
  int r = a->ndims > b->ndims ? a->ndims : b->ndims;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->ndims), ib = i - (r - b->ndims);
    ad[i] = ia >= 0 ? a->dims[ia] : 1;
    bd[i] = ib >= 0 ? b->dims[ib] : 1;
    if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "shapes do not broadcast at dim %d: %lld vs %lld",
                     i, (long long)ad[i], (long long)bd[i]);
    y[i] = ad[i] == 1 ? bd[i] : ad[i];
  }
  *nd = r;
  return 0;
}

static int infer_binary(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (in[0].dt != in[1].dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "input types differ: %s vs %s",
                   dtype_wire_name(in[0].dt), dtype_wire_name(in[1].dt));
  if (in[0].dt != DT_FP32 && in[0].dt != DT_INT64)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s",
                   dtype_wire_name(in[0].dt));
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  set_out(&out[0], in[0].dt, nd, y);
  return 0;
}

// k_binary_f32 split over threads (par.h) along y's first dim that is not
// 1 (the dims before it are 1 in every operand, so each part is a
// contiguous slab of y, and of a and b unless they broadcast along it).
typedef struct bin_job {
  float *y;
  const float *a, *b;
  int nd, d0;
  const int64_t *yd, *ad, *bd;
  int64_t ys, as, bs;  // elements per index of d0 in y, a, b
  k_binop op;
} bin_job;

static void bin_part(void *ctx, size_t lo, size_t hi) {
  const bin_job *j = ctx;
  int64_t yd[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS], d = j->d0, l = (int64_t)lo;
  memcpy(yd, j->yd, (size_t)j->nd * sizeof *yd);
  memcpy(ad, j->ad, (size_t)j->nd * sizeof *ad);
  memcpy(bd, j->bd, (size_t)j->nd * sizeof *bd);
  yd[d] = (int64_t)(hi - lo);
  const float *a = j->a, *b = j->b;
  if (ad[d] != 1) {
    ad[d] = yd[d];
    a += l * j->as;
  }
  if (bd[d] != 1) {
    bd[d] = yd[d];
    b += l * j->bs;
  }
  k_binary_f32(j->y + l * j->ys, a, b, j->nd, yd, ad, bd, j->op);
}

static void binary_f32_par(float *y, const float *a, const float *b, int nd, const int64_t *yd,
                           const int64_t *ad, const int64_t *bd, k_binop op) {
  bin_job j = {y, a, b, nd, 0, yd, ad, bd, 1, 1, 1, op};
  while (j.d0 < nd - 1 && yd[j.d0] == 1) j.d0++;
  for (int i = j.d0 + 1; i < nd; i++) {
    j.ys *= yd[i];
    j.as *= ad[i];
    j.bs *= bd[i];
  }
  size_t grain = (size_t)((ENG_PAR_GRAIN + j.ys - 1) / (j.ys > 0 ? j.ys : 1));
  eng_par_for((size_t)yd[j.d0], grain, bin_part, &j);
}

static int run_binary(const eng_tensor *in, eng_tensor *out, k_binop op, err *e) {
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  if (nd == 0) {  // scalars: one dim of 1 keeps the kernels' loops simple
    nd = 1;
    y[0] = ad[0] = bd[0] = 1;
  }
  if (in[0].dt == DT_FP32)
    binary_f32_par(out[0].data, in[0].data, in[1].data, nd, y, ad, bd, op);
  else
    k_binary_i64(out[0].data, in[0].data, in[1].data, nd, y, ad, bd, op);
  return 0;
}

#define BINARY_RUN(name, op)                                                                   \
  static int name(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,      \
                  int n_out, err *e) {                                                         \
    (void)p, (void)n_in, (void)n_out;                                                          \
    return run_binary(in, out, op, e);                                                         \
  }
BINARY_RUN(run_add, K_ADD)
BINARY_RUN(run_sub, K_SUB)
BINARY_RUN(run_mul, K_MUL)
BINARY_RUN(run_div, K_DIV)

// --- unary elementwise

// Each op's kernel on parts of x split over threads (par.h): elementwise,
// so the result is the same however the range is split.
typedef struct unary_job {
  float *y;
  const float *x;
  const eng_op_params *p;
} unary_job;

#define UNARY_RUN(name, call)                                                                  \
  static void name##_part(void *ctx, size_t lo, size_t hi) {                                   \
    const unary_job *j = ctx;                                                                  \
    const eng_op_params *p = j->p;                                                             \
    float *y = j->y + lo;                                                                      \
    const float *x = j->x + lo;                                                                \
    size_t n = hi - lo;                                                                        \
    (void)p;                                                                                   \
    call;                                                                                      \
  }                                                                                            \
  static int name(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,      \
                  int n_out, err *e) {                                                         \
    (void)n_in, (void)n_out, (void)e;                                                          \
    unary_job j = {out[0].data, in[0].data, p};                                                \
    eng_par_for(numel(&in[0]), ENG_PAR_GRAIN, name##_part, &j);                                \
    return 0;                                                                                  \
  }
UNARY_RUN(run_relu, k_relu(y, x, n))
UNARY_RUN(run_leaky, k_leaky_relu(y, x, n, p->alpha))
UNARY_RUN(run_sigmoid, k_sigmoid(y, x, n))
UNARY_RUN(run_tanh, k_tanh(y, x, n))
UNARY_RUN(run_erf, k_erf(y, x, n))
UNARY_RUN(run_gelu, k_gelu(y, x, n, p->approximate))

// --- Softmax / LogSoftmax

static int infer_softmax(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  int64_t ax = 0;
  TRY(need_f32(&in[0], "input", e));
  if (in[0].ndims == 0) return err_set(e, ERR_INVALID_ARGUMENT, "input must have rank >= 1");
  TRY(norm_axis(p->axis, in[0].ndims, &ax, e));
  return infer_same_f32(p, in, n_in, out, n_out, e);
}

void eng_ops__softmax_dims(const eng_op_params *p, const eng_tensor *x, size_t *outer, size_t *len,
                         size_t *inner) {
  int r = x->ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  *outer = (size_t)prod(x->dims, 0, ax);
  if (p->legacy) {  // opset < 13: the input is coerced to 2-D [outer, rest]
    *len = (size_t)prod(x->dims, ax, r);
    *inner = 1;
  } else {
    *len = (size_t)x->dims[ax];
    *inner = (size_t)prod(x->dims, ax + 1, r);
  }
}

static int run_softmax(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (o && l && i) k_softmax(out[0].data, in[0].data, o, l, i);
  return 0;
}

static int run_log_softmax(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (o && l && i) k_log_softmax(out[0].data, in[0].data, o, l, i);
  return 0;
}

// --- shape-only ops (views)

static int infer_flatten(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims;
  int64_t ax = p->axis < 0 ? p->axis + r : p->axis;
  if (ax < 0 || ax > r)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld out of range for rank %d",
                   (long long)p->axis, r);
  int64_t y[2] = {prod(in[0].dims, 0, (int)ax), prod(in[0].dims, (int)ax, r)};
  set_out(&out[0], in[0].dt, 2, y);
  return 0;
}

static int infer_reshape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t y[ENG_MAX_DIMS], shape[ENG_MAX_DIMS], known = 1;
  int infer_at = -1, ns;
  TRY(eng_ops__read_ints(&in[1], "shape", shape, ENG_MAX_DIMS, &ns, e));
  for (int i = 0; i < ns; i++) {
    int64_t d = shape[i];
    if (d == 0 && !p->allowzero) {
      if (i >= in[0].ndims)
        return err_set(e, ERR_INVALID_ARGUMENT, "shape[%d] = 0 copies a dim the input lacks", i);
      d = in[0].dims[i];
    } else if (d == -1) {
      if (infer_at >= 0) return err_set(e, ERR_INVALID_ARGUMENT, "more than one -1 in shape");
      infer_at = i;
      y[i] = -1;
      continue;
    } else if (d < 0) {
      return err_set(e, ERR_INVALID_ARGUMENT, "bad shape value %lld", (long long)d);
    }
    y[i] = d;
    if (d && known > ENG_MAX_NUMEL / d)
      return err_set(e, ERR_INVALID_ARGUMENT, "shape has more than %lld elements",
                     (long long)ENG_MAX_NUMEL);
    known *= d;
  }
  int64_t total = numel(&in[0]);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "cannot reshape %lld elements with -1",
                     (long long)total);
    y[infer_at] = total / known;
  } else if (known != total) {
    return err_set(e, ERR_INVALID_ARGUMENT, "cannot reshape %lld elements into %lld",
                   (long long)total, (long long)known);
  }
  set_out(&out[0], in[0].dt, ns, y);
  return 0;
}

static int infer_squeeze(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int r = in[0].ndims, nax, given;
  int drop[ENG_MAX_DIMS] = {0};
  int64_t axes[ENG_MAX_DIMS];
  TRY(get_axes(p, in, n_in, axes, &nax, &given, e));
  if (given) {
    for (int i = 0; i < nax; i++) {
      int64_t ax = 0;
      TRY(norm_axis(axes[i], r, &ax, e));
      if (in[0].dims[ax] != 1)
        return err_set(e, ERR_INVALID_ARGUMENT, "cannot squeeze dim %lld of size %lld",
                       (long long)ax, (long long)in[0].dims[ax]);
      drop[ax] = 1;
    }
  } else {
    for (int i = 0; i < r; i++) drop[i] = in[0].dims[i] == 1;
  }
  int64_t y[ENG_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < r; i++)
    if (!drop[i]) y[k++] = in[0].dims[i];
  set_out(&out[0], in[0].dt, k, y);
  return 0;
}

static int infer_unsqueeze(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_out;
  int64_t axes[ENG_MAX_DIMS];
  int nax, given;
  TRY(get_axes(p, in, n_in, axes, &nax, &given, e));
  int r = in[0].ndims + nax;
  if (r > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "result rank %d exceeds %d", r, ENG_MAX_DIMS);
  int ins[ENG_MAX_DIMS] = {0};
  for (int i = 0; i < nax; i++) {
    int64_t ax = 0;
    TRY(norm_axis(axes[i], r, &ax, e));
    if (ins[ax]) return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld repeated", (long long)ax);
    ins[ax] = 1;
  }
  int64_t y[ENG_MAX_DIMS];
  for (int i = 0, k = 0; i < r; i++) y[i] = ins[i] ? 1 : in[0].dims[k++];
  set_out(&out[0], in[0].dt, r, y);
  return 0;
}

// --- Transpose

int eng_ops__get_perm(const eng_op_params *p, int r, int *perm, err *e) {
  if (!p->has_ints) {
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    return 0;
  }
  if (p->n_ints != r)
    return err_set(e, ERR_INVALID_ARGUMENT, "perm has %d entries for rank %d", p->n_ints, r);
  int seen[ENG_MAX_DIMS] = {0};
  for (int i = 0; i < r; i++) {
    int64_t v = p->ints[i];
    if (v < 0 || v >= r || seen[v]) return err_set(e, ERR_INVALID_ARGUMENT, "bad perm");
    seen[v] = 1;
    perm[i] = (int)v;
  }
  return 0;
}

static int infer_transpose(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_in, (void)n_out;
  int perm[ENG_MAX_DIMS], r = in[0].ndims;
  TRY(eng_ops__get_perm(p, r, perm, e));
  int64_t y[ENG_MAX_DIMS];
  for (int i = 0; i < r; i++) y[i] = in[0].dims[perm[i]];
  set_out(&out[0], in[0].dt, r, y);
  return 0;
}

static int run_transpose(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  int perm[ENG_MAX_DIMS], r = in[0].ndims;
  TRY(eng_ops__get_perm(p, r, perm, e));
  size_t n = numel(&in[0]), esz = dtype_size(in[0].dt);
  if (!n) return 0;
  if (r == 0) memcpy(out[0].data, in[0].data, esz);
  else k_transpose(out[0].data, in[0].data, esz, r, in[0].dims, perm);
  return 0;
}

// --- Concat

static int infer_concat(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_out;
  int r = in[0].ndims;
  if (r == 0) return err_set(e, ERR_INVALID_ARGUMENT, "cannot concatenate scalars");
  int64_t ax = 0;
  TRY(norm_axis(p->axis, r, &ax, e));
  int64_t y[ENG_MAX_DIMS];
  memcpy(y, in[0].dims, sizeof y);
  for (int i = 1; i < n_in; i++) {
    if (in[i].dt != in[0].dt || in[i].ndims != r)
      return err_set(e, ERR_INVALID_ARGUMENT, "input %d differs in type or rank", i);
    for (int d = 0; d < r; d++)
      if (d != ax && in[i].dims[d] != in[0].dims[d])
        return err_set(e, ERR_INVALID_ARGUMENT, "input %d differs at dim %d: %lld vs %lld", i, d,
                       (long long)in[i].dims[d], (long long)in[0].dims[d]);
    y[ax] += in[i].dims[ax];
  }
  set_out(&out[0], in[0].dt, r, y);
  return 0;
}

static int run_concat(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t esz = dtype_size(in[0].dt), inner = (size_t)prod(in[0].dims, ax + 1, r);
  size_t outer = (size_t)prod(in[0].dims, 0, ax);
  enum { SMALL = 32 };
  const void *xs_s[SMALL];
  size_t rb_s[SMALL];
  const void **xs = xs_s;
  size_t *rb = rb_s;
  if (n_in > SMALL) {
    xs = malloc((size_t)n_in * sizeof *xs);
    rb = malloc((size_t)n_in * sizeof *rb);
    if (!xs || !rb) {
      free(xs);
      free(rb);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  for (int i = 0; i < n_in; i++) {
    xs[i] = in[i].data;
    rb[i] = (size_t)in[i].dims[ax] * inner * esz;
  }
  if (numel(&out[0])) k_concat(out[0].data, (const void *const *)xs, rb, n_in, outer);
  if (xs != xs_s) {
    free(xs);
    free(rb);
  }
  return 0;
}

// --- Cast

int eng_ops_elem_of(dtype t, k_elem *k) {
  switch (t) {
    case DT_FP32: *k = K_F32; return 0;
    case DT_FP64: *k = K_F64; return 0;
    case DT_FP16: *k = K_F16; return 0;
    case DT_INT64: *k = K_I64; return 0;
    case DT_INT32: *k = K_I32; return 0;
    case DT_INT16: *k = K_I16; return 0;
    case DT_INT8: *k = K_I8; return 0;
    case DT_UINT8: *k = K_U8; return 0;
    case DT_UINT16: *k = K_U16; return 0;
    case DT_UINT32: *k = K_U32; return 0;
    case DT_UINT64: *k = K_U64; return 0;
    case DT_BOOL: *k = K_BOOL; return 0;
    default: return -1;
  }
}

static int infer_cast(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_in, (void)n_out;
  k_elem k;
  if (eng_ops_elem_of(in[0].dt, &k) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: Cast from %s", dtype_wire_name(in[0].dt));
  set_out(&out[0], eng_ops_cpu_internal_dtype(p->to), in[0].ndims, in[0].dims);
  return 0;
}

static int run_cast(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)n_in, (void)n_out;
  k_elem xk, yk;
  // infer_cast accepted both types; checked again so no path casts from an unset element type.
  if (eng_ops_elem_of(in[0].dt, &xk) != 0 || eng_ops_elem_of(out[0].dt, &yk) != 0)
    return err_set(e, ERR_INTERNAL, "Cast from %s to %s has no kernel", dtype_wire_name(in[0].dt),
                   dtype_wire_name(out[0].dt));
  size_t n = numel(&in[0]);
  if (!n) return 0;
  k_cast(out[0].data, yk, in[0].data, xk, n);
  // Narrow float targets travel as FP32 but must carry the narrow type's
  // precision, as if stored and reloaded.
  float *y = out[0].data;
  if (p->to == DT_FP16) {
    uint16_t tmp[256];
    for (size_t i = 0; i < n; i += 256) {
      size_t c = n - i < 256 ? n - i : 256;
      k_f32_to_f16(tmp, y + i, c);
      k_f16_to_f32(y + i, tmp, c);
    }
  } else if (p->to == DT_BF16) {
    for (size_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, &y[i], 4);
      if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);  // nearest even
      u &= 0xffff0000u;
      memcpy(&y[i], &u, 4);
    }
  }
  return 0;
}

// --- normalisation

static int infer_layernorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  TRY(need_f32(&in[0], "X", e));
  int r = in[0].ndims;
  if (r == 0) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 1");
  int64_t ax = 0;
  TRY(norm_axis(p->axis, r, &ax, e));
  int64_t cols = prod(in[0].dims, (int)ax, r);
  // Scale is required (only B is optional); given as "" it was a NULL the
  // kernel read, at load when folded (found by tests/fuzz/fuzz_graph)
  if (n_in < 2 || in[1].dt == DT_INVALID) return err_set(e, ERR_INVALID_ARGUMENT, "Scale is required");
  for (int i = 1; i < n_in && i < 3; i++) {
    if (in[i].dt == DT_INVALID) continue;
    TRY(need_f32(&in[i], i == 1 ? "Scale" : "B", e));
    if (eng_numel(in[i].ndims, in[i].dims) != cols)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "unsupported: %s must have the normalized shape (%lld elements)",
                     i == 1 ? "Scale" : "B", (long long)cols);
  }
  set_out(&out[0], DT_FP32, r, in[0].dims);
  int64_t st[ENG_MAX_DIMS];
  for (int i = 0; i < r; i++) st[i] = i < ax ? in[0].dims[i] : 1;
  for (int i = 1; i < n_out && i < 3; i++)
    if (out[i].dt != DT_INVALID) set_out(&out[i], DT_FP32, r, st);
  return 0;
}

static int run_layernorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)e;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t rows = (size_t)prod(in[0].dims, 0, ax), cols = (size_t)prod(in[0].dims, ax, r);
  const float *x = in[0].data;
  const float *bias = n_in > 2 && in[2].dt != DT_INVALID ? in[2].data : NULL;
  // Mean / InvStdDev are optional training outputs; computed here, not by
  // the kernel, and before it because Y may not alias X but the stats read X.
  float *mean = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : NULL;
  float *istd = n_out > 2 && out[2].dt != DT_INVALID ? out[2].data : NULL;
  if ((mean || istd) && cols) {
    for (size_t i = 0; i < rows; i++) {
      double s = 0, ss = 0;
      for (size_t j = 0; j < cols; j++) s += x[i * cols + j];
      double mu = s / (double)cols;
      for (size_t j = 0; j < cols; j++) ss += (x[i * cols + j] - mu) * (x[i * cols + j] - mu);
      if (mean) mean[i] = (float)mu;
      if (istd) istd[i] = (float)(1.0 / sqrt(ss / (double)cols + p->eps));
    }
  }
  if (rows && cols) k_layer_norm(out[0].data, x, in[1].data, bias, rows, cols, p->eps);
  return 0;
}

static int infer_batchnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(need_f32(&in[0], "X", e));
  if (in[0].ndims < 2) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 2");
  static const char *names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; i++) {
    TRY(need_f32(&in[i], names[i], e));
    if (eng_numel(in[i].ndims, in[i].dims) != in[0].dims[1])
      return err_set(e, ERR_INVALID_ARGUMENT, "%s must have %lld elements", names[i],
                     (long long)in[0].dims[1]);
  }
  set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

static int run_batchnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  const eng_tensor *x = &in[0];
  size_t n = (size_t)x->dims[0], c = (size_t)x->dims[1];
  size_t sp = (size_t)prod(x->dims, 2, x->ndims);
  if (n && c && sp)
    k_batch_norm(out[0].data, x->data, in[1].data, in[2].data, in[3].data, in[4].data, n, c, sp,
                 p->eps);
  return 0;
}

// --- table

// Ops of other families register in their own files' tables (ops_common.h).
static const eng_op_def ops[] = {
    {"Gemm", 2, 3, 1, 1, 0, parse_gemm, infer_gemm, run_gemm, 0, run_gemm_state,
     eng_conv_state_destroy},
    {"MatMul", 2, 2, 1, 1, 0, parse_none, infer_matmul, run_matmul, 0, NULL, NULL},
    {"Add", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_binary, run_add, 0, NULL, NULL},
    {"Sub", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_binary, run_sub, 0, NULL, NULL},
    {"Mul", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_binary, run_mul, 0, NULL, NULL},
    {"Div", 2, 2, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_binary, run_div, 0, NULL, NULL},
    {"Relu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_same_f32, run_relu, 0, NULL, NULL},
    {"LeakyRelu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_leaky, infer_same_f32, run_leaky, 0, NULL, NULL},
    {"Sigmoid", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_same_f32, run_sigmoid, 0, NULL, NULL},
    {"Tanh", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_same_f32, run_tanh, 0, NULL, NULL},
    {"Erf", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_none, infer_same_f32, run_erf, 0, NULL, NULL},
    {"Gelu", 1, 1, 1, 1, ENG_OP_INPLACE | ENG_OP_ELEMWISE, parse_gelu, infer_same_f32, run_gelu, 0, NULL, NULL},
    {"Softmax", 1, 1, 1, 1, 0, parse_softmax, infer_softmax, run_softmax, 0, NULL, NULL},
    {"LogSoftmax", 1, 1, 1, 1, 0, parse_softmax, infer_softmax, run_log_softmax, 0, NULL, NULL},
    {"Flatten", 1, 1, 1, 1, ENG_OP_ALIAS, parse_flatten, infer_flatten, run_view, 0, NULL, NULL},
    {"Reshape", 2, 2, 1, 1, ENG_OP_ALIAS, parse_reshape, infer_reshape, run_view, ENG_IN(1), NULL, NULL},
    {"Squeeze", 1, 2, 1, 1, ENG_OP_ALIAS, parse_squeeze, infer_squeeze, run_view, ENG_IN(1), NULL, NULL},
    {"Unsqueeze", 1, 2, 1, 1, ENG_OP_ALIAS, parse_unsqueeze, infer_unsqueeze, run_view, ENG_IN(1), NULL, NULL},
    {"Identity", 1, 1, 1, 1, ENG_OP_ALIAS | ENG_OP_ELEMWISE, parse_none, infer_same, run_view, 0, NULL, NULL},
    {"Dropout", 1, 3, 1, 2, ENG_OP_ALIAS, parse_none, infer_same, run_view, 0, NULL, NULL},
    {"Transpose", 1, 1, 1, 1, 0, parse_transpose, infer_transpose, run_transpose, 0, NULL, NULL},
    {"Concat", 1, 1 << 20, 1, 1, 0, parse_axis_required, infer_concat, run_concat, 0, NULL, NULL},
    {"Cast", 1, 1, 1, 1, ENG_OP_ELEMWISE, parse_cast, infer_cast, run_cast, 0, NULL, NULL},
    {"LayerNormalization", 2, 3, 1, 3, 0, parse_layernorm, infer_layernorm, run_layernorm, 0, NULL, NULL},
    {"BatchNormalization", 5, 5, 1, 5, 0, parse_batchnorm, infer_batchnorm, run_batchnorm, 0, NULL, NULL},
    {"Constant", 0, 0, 1, 1, 0, NULL, NULL, NULL, 0, NULL, NULL},
};

const eng_op_def *eng_ops_cpu_find(const char *op_type) {
  static const struct {
    const eng_op_def *defs;
    const size_t *n;
  } tables[] = {{eng_ops__elem, &eng_ops__n_elem},
                {eng_ops__reduce, &eng_ops__n_reduce},
                {eng_ops__shape, &eng_ops__n_shape},
                {eng_ops__resize, &eng_ops__n_resize},
                {eng_ops__conv, &eng_ops__n_conv},
                {eng_ops__attn, &eng_ops__n_attn}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i].op_type, op_type) == 0) return &ops[i];
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (size_t i = 0; i < *tables[t].n; i++)
      if (strcmp(tables[t].defs[i].op_type, op_type) == 0) return &tables[t].defs[i];
  return NULL;
}

int eng_ops_cpu_fold(const eng_op_def *d, const eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, eng_fold_buf_fn buf, void *ctx, err *e) {
  for (int k = 0; k < n_out; k++) {
    if (out[k].dt == DT_INVALID) continue;
    out[k].bytes = eng_tensor_bytes(&out[k]);
    out[k].data = buf(ctx, k, out[k].bytes);
    if (!out[k].data)
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory folding (%zu bytes for output %d)",
                     out[k].bytes, k);
  }
  return d->run(p, in, n_in, out, n_out, e);
}

// Internal ops (inferd.*) are made by the load-time passes only: a model
// that names one is refused like any unknown op.
int eng_ops_supported(const char *op_type) {
  return strncmp(op_type, "inferd.", 7) != 0 && eng_ops_cpu_find(op_type) != NULL;
}
