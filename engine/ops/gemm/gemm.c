// engine/ops/gemm/gemm.c: the matrix products on the CPU: Gemm (alpha, beta,
// transA, transB, C broadcast to [M, N]) through OpenBLAS, or as a oneDNN
// inner product when B is constant (run_gemm_state, which takes the CPU
// plan's fused post-ops), and MatMul with numpy semantics (batched,
// broadcasting) through OpenBLAS. Their CUDA path is gemm_cuda.c.
#include "engine/ops/gemm/gemm.h"

#include <cblas.h>
#include <string.h>

#include "engine/cpu/conv_dnnl.h"
#include "engine/ops/ops_common.h"

// --- Gemm

static int parse_gemm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)opset, (void)e;
  p->alpha = op_attr_float(n, "alpha", 1.0f);
  p->beta = op_attr_float(n, "beta", 1.0f);
  p->trans_a = op_attr_int(n, "transA", 0) != 0;
  p->trans_b = op_attr_int(n, "transB", 0) != 0;
  // A constant B with A as is, alpha 1 and C (if any) a bias runs as a
  // oneDNN inner product (run_gemm_state), which takes fused post-ops
  const eng_value *b = n->in[1] >= 0 ? eng_graph_value(g, (size_t)n->in[1]) : NULL;
  int has_c = n->n_in > 2 && n->in[2] >= 0;
  p->fusable = b && b->kind == ENG_VALUE_CONST && b->ndims == 2 && !p->trans_a &&
               p->alpha == 1.0f && (!has_c || p->beta == 1.0f);
  return 0;
}

static int infer_gemm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  TRY(eng_ops__need_f32(&in[0], "A", e));
  TRY(eng_ops__need_f32(&in[1], "B", e));
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
    TRY(eng_ops__need_f32(&in[2], "C", e));
    const eng_tensor *c = &in[2];
    if (c->ndims > 2) return err_set(e, ERR_INVALID_ARGUMENT, "C has rank %d", c->ndims);
    for (int i = 0; i < c->ndims; i++) {
      int64_t d = c->dims[i], want = y[2 - c->ndims + i];
      if (d != 1 && d != want)
        return err_set(e, ERR_INVALID_ARGUMENT, "C is not broadcastable to [%lld, %lld]",
                       (long long)m, (long long)nn);
    }
  }
  op_set_out(&out[0], DT_FP32, 2, y);
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
  if (st->post_add && (st->post_add->dt != DT_FP32 || op_numel(st->post_add) != op_numel(&out[0])))
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
  TRY(eng_ops__need_f32(&in[0], "A", e));
  TRY(eng_ops__need_f32(&in[1], "B", e));
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
  int64_t total = op_prod(s.batch, 0, s.nb), bcount = op_prod(s.bbatch, 0, s.nb);
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

// --- table

const eng_op_def eng_ops__gemm[] = {
    {"Gemm", 2, 3, 1, 1, 0, parse_gemm, infer_gemm, run_gemm, 0, run_gemm_state,
     eng_conv_state_destroy},
    {"MatMul", 2, 2, 1, 1, 0, op_parse_none, infer_matmul, run_matmul, 0, NULL, NULL},
    {"RNN", 3, 6, 0, 2, ENG_OP_OUT0_OPTIONAL, eng_ops__parse_rnn, eng_ops__infer_rnn, eng_ops__run_rnn, 0, NULL, NULL},
    {"GRU", 3, 6, 0, 2, ENG_OP_OUT0_OPTIONAL, eng_ops__parse_rnn, eng_ops__infer_rnn, eng_ops__run_rnn, 0, NULL, NULL},
    {"LSTM", 3, 8, 0, 3, ENG_OP_OUT0_OPTIONAL, eng_ops__parse_rnn, eng_ops__infer_rnn, eng_ops__run_rnn, 0, NULL, NULL},
    {"Einsum", 1, K_EINSUM_MAX_IN, 1, 1, 0, eng_ops__parse_einsum, eng_ops__infer_einsum, eng_ops__run_einsum, 0,
     NULL, NULL},
    {"DFT", 1, 3, 1, 1, 0, eng_ops__parse_dft, eng_ops__infer_dft, eng_ops__run_dft, ENG_IN(1) | ENG_IN(2), NULL,
     NULL},
    {"STFT", 2, 4, 1, 1, 0, eng_ops__parse_stft, eng_ops__infer_stft, eng_ops__run_stft, ENG_IN(1) | ENG_IN(3), NULL,
     NULL},
    {"HannWindow", 1, 1, 1, 1, 0, eng_ops__parse_window, eng_ops__infer_window, eng_ops__run_window, ENG_IN(0), NULL,
     NULL},
    {"HammingWindow", 1, 1, 1, 1, 0, eng_ops__parse_window, eng_ops__infer_window, eng_ops__run_window, ENG_IN(0),
     NULL, NULL},
    {"BlackmanWindow", 1, 1, 1, 1, 0, eng_ops__parse_window, eng_ops__infer_window, eng_ops__run_window, ENG_IN(0),
     NULL, NULL},
    {"Det", 1, 1, 1, 1, 0, op_parse_none, eng_ops__infer_det, eng_ops__run_det, 0, NULL, NULL},
};
const size_t eng_ops__n_gemm = sizeof eng_ops__gemm / sizeof eng_ops__gemm[0];
