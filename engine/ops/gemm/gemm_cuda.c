// engine/ops/gemm/gemm_cuda.c: Gemm and MatMul (engine/ops/gemm/gemm.c) on
// the CUDA plan, through cuBLASLt (engine/cuda/cuda_gemm.h): FP32, TF32 or
// FP16 by the plan's precision. N-D left operands times a 2-D weight are
// one GEMM of M = prod(leading dims), so [B,S,K] x [K,N] runs as 2-D does;
// broadcast batch dims run one product per output matrix.
//
// Fusion (gemm_fuse): a Gemm/MatMul whose result only feeds an in-place
// bias Add and/or Relu / Gelu (the planner gave them the product's buffer)
// runs them as the cuBLASLt epilogue and the fused nodes are skipped: same
// buffer, same values, one kernel instead of three. A MatMul also takes a
// residual Add after it (or after its bias Add) through cuBLASLt's C
// operand: a transformer's projection + bias + residual in one GEMM. The
// plan checks the buffers per run (engine/cuda/plan_cuda_fuse.c).
// Registered into the CUDA plan through engine/ops/families.h.
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/plan_cuda_internal.h"
#include "engine/cuda/plan_cuda_k.h"
#include "engine/ops/gemm/gemm.h"
#include "engine/ops/ops_common.h"

static eng_gemm_dtype gemm_dt(const cuda_ctx *c, const eng_tensor *t) {
  return t->dt == DT_FP16 ? ENG_GEMM_FP16 : c->gemm32;
}

static eng_gemm_epilogue epilogue(bool bias, k_act act) {
  switch (act) {
    case K_ACT_RELU: return bias ? ENG_GEMM_EPI_BIAS_RELU : ENG_GEMM_EPI_RELU;
    case K_ACT_GELU:  // FP16 plans only (eng_cuda__settle_fusions)
    case K_ACT_GELU_TANH: return bias ? ENG_GEMM_EPI_BIAS_GELU : ENG_GEMM_EPI_GELU;
    default: return bias ? ENG_GEMM_EPI_BIAS : ENG_GEMM_EPI_NONE;
  }
}

// --- ops. Tensors carry device pointers; shapes were checked by infer.

// Gemm's C is a linear layer's bias when it is per column with unit alpha and beta.
static bool gemm_bias_fits(const eng_op_params *p, const eng_tensor *ct, int64_t n) {
  int64_t cr = ct->ndims == 2 ? ct->dims[0] : 1;
  int64_t cc = ct->ndims >= 1 ? ct->dims[ct->ndims - 1] : 1;
  return p->alpha == 1.0f && p->beta == 1.0f && cr == 1 && cc == n;
}

static const eng_tensor *gemm_c(const eng_op_params *p, const eng_tensor *in, int n_in) {
  return n_in > 2 && in[2].dt != DT_INVALID && p->beta != 0.0f ? &in[2] : NULL;
}

static bool half_gemm(const eng_op_params *p, const eng_tensor *in, int n_in) {
  const eng_tensor *ct = gemm_c(p, in, n_in);
  int64_t n = p->trans_b ? in[1].dims[0] : in[1].dims[1];
  return ct ? gemm_bias_fits(p, ct, n) : p->alpha == 1.0f;
}

static int run_gemm(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int64_t m = out[0].dims[0], n = out[0].dims[1];
  int64_t k = p->trans_a ? in[0].dims[0] : in[0].dims[1];
  void *y = out[0].data;
  if (m == 0 || n == 0) return 0;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "Gemm [%lld x %lld x %lld] exceeds int range",
                   (long long)m, (long long)k, (long long)n);
  const eng_tensor *ct = gemm_c(p, in, n_in);
  int64_t cr = 1, cc = 1;
  if (ct) {
    cr = ct->ndims == 2 ? ct->dims[0] : 1;
    cc = ct->ndims >= 1 ? ct->dims[ct->ndims - 1] : 1;
  }
  bool bias = ct && gemm_bias_fits(p, ct, n);
  if (c->act != K_ACT_NONE && ((ct && !bias) || (!ct && p->alpha != 1.0f) || k == 0))
    return err_set(e, ERR_INTERNAL, "Gemm: fused activation without an epilogue to carry it");
  if (k == 0) {  // y = beta * C, as the CPU op
    CUDA_TRY(e, cudaMemsetAsync(y, 0, (size_t)(m * n) * dtype_size(out[0].dt), c->stream));
    return ct ? eng_pk_gemm_scale_cuda(y, ct->data, m, n, cr, cc, 1.0f, p->beta, c->stream, e) : 0;
  }
  TRY(eng_gemm_lt_run(c->gemm, y, in[0].data, in[1].data, bias ? ct->data : NULL, (int)m, (int)n,
                      (int)k, p->trans_a, p->trans_b, epilogue(bias, c->act), gemm_dt(c, &out[0]),
                      c->stream, e));
  if (!bias && (ct || p->alpha != 1.0f))
    TRY(eng_pk_gemm_scale_cuda(y, ct ? ct->data : NULL, m, n, cr, cc, p->alpha, p->beta,
                               c->stream, e));
  return 0;
}

static int run_matmul(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                      eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  eng_mm_shape s;
  TRY(eng_ops__mm_analyse(&in[0], &in[1], &s, NULL, e));
  size_t esz = dtype_size(out[0].dt);
  const uint8_t *a = in[0].data, *b = in[1].data;
  uint8_t *y = out[0].data;
  eng_gemm_dtype dt = gemm_dt(c, &out[0]);
  int64_t total = op_prod(s.batch, 0, s.nb), bcount = op_prod(s.bbatch, 0, s.nb);
  if (total == 0 || s.m == 0 || s.n == 0) return 0;
  bool fused = c->act != K_ACT_NONE || c->bias || c->z;
  if (s.k == 0) {
    if (fused) return err_set(e, ERR_INTERNAL, "MatMul: fused epilogue on an empty product");
    CUDA_TRY(e, cudaMemsetAsync(y, 0, (size_t)(total * s.m * s.n) * esz, c->stream));
    return 0;
  }
  int a_full = 1;
  for (int i = 0; i < s.nb; i++) a_full &= s.abatch[i] == s.batch[i];
  if (bcount == 1 && a_full) {  // one weight matrix for every row: one product
    if (total * s.m > INT_MAX || s.n > INT_MAX || s.k > INT_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT, "MatMul exceeds int range");
    return eng_gemm_lt_run_res(c->gemm, y, a, b, c->bias, c->z, (int)(total * s.m), (int)s.n,
                               (int)s.k, false, false, epilogue(c->bias != NULL, c->act), dt,
                               c->stream, e);
  }
  if (fused) return err_set(e, ERR_INTERNAL, "MatMul: fused epilogue on a broadcast product");
  if (s.m > INT_MAX || s.n > INT_MAX || s.k > INT_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "MatMul exceeds int range");
  // broadcast batch dims: one product per output matrix (the shape cache
  // makes every call after the first a lookup)
  int64_t idx[ENG_MAX_DIMS] = {0};
  for (int64_t t = 0; t < total; t++) {
    int64_t ao = 0, bo = 0, as = 1, bs = 1;
    for (int i = s.nb - 1; i >= 0; i--) {
      if (s.abatch[i] != 1) ao += idx[i] * as;
      if (s.bbatch[i] != 1) bo += idx[i] * bs;
      as *= s.abatch[i];
      bs *= s.bbatch[i];
    }
    TRY(eng_gemm_lt_run(c->gemm, y + (size_t)(t * s.m * s.n) * esz, a + (size_t)(ao * s.m * s.k) * esz,
                        b + (size_t)(bo * s.k * s.n) * esz, NULL, (int)s.m, (int)s.n, (int)s.k,
                        false, false, ENG_GEMM_EPI_NONE, dt, c->stream, e));
    for (int i = s.nb - 1; i >= 0; i--) {
      if (++idx[i] < s.batch[i]) break;
      idx[i] = 0;
    }
  }
  return 0;
}

// --- fusion candidates (static; each run checks the layout still shares the buffers)

// A Gemm/MatMul whose result only feeds an in-place bias Add, (MatMul) a
// residual Add and/or Relu / tanh-Gelu: the cuBLASLt epilogue carries them.
static void gemm_fuse(const eng_plan *pl, size_t i, cuda_fusion *f) {
  const eng_graph *g = pl->g;
  const eng_node *n = eng_graph_node(g, i);
  bool gemm = strcmp(n->op_type, "Gemm") == 0;
  if (n->n_out < 1 || n->out[0] < 0) return;
  const eng_op_params *pp = &pl->params[i];
  bool has_c = gemm && n->n_in > 2 && n->in[2] >= 0 && pp->beta != 0.0f;
  const eng_value *b = n->n_in > 1 && n->in[1] >= 0 ? eng_graph_value(g, (size_t)n->in[1]) : NULL;
  if (!b || b->kind != ENG_VALUE_CONST || b->ndims != 2) return;  // one weight matrix
  int64_t ncols = gemm && pp->trans_b ? b->dims[0] : b->dims[1];
  if (gemm) {  // the epilogue must carry the whole op: unit alpha, C absent or a bias
    if (pp->alpha != 1.0f) return;
    if (has_c) {
      const eng_value *c = eng_graph_value(g, (size_t)n->in[2]);
      bool row = c->kind == ENG_VALUE_CONST && pp->beta == 1.0f &&
                 ((c->ndims == 1 && c->dims[0] == ncols) ||
                  (c->ndims == 2 && c->dims[0] == 1 && c->dims[1] == ncols));
      if (!row) return;
    }
  }
  int v = n->out[0];
  int j = eng_cuda__sole_consumer(g, pl->n_nodes, v);
  if (j < 0) return;
  const eng_node *nj = eng_graph_node(g, (size_t)j);
  f->mid_value = v;
  if (!has_c && strcmp(nj->op_type, "Add") == 0 && nj->n_in == 2) {
    int other = nj->in[0] == v ? nj->in[1] : nj->in[0];
    const eng_value *c = eng_cuda__is_const(g, other) ? eng_graph_value(g, (size_t)other) : NULL;
    if (c && c->dt == DT_FP32 &&
        ((c->ndims == 1 && c->dims[0] == ncols) ||
         (c->ndims == 2 && c->dims[0] == 1 && c->dims[1] == ncols))) {
      f->bias_node = j;
      f->bias_value = other;
      f->add_value = nj->out[0];
      v = nj->out[0];
      j = eng_cuda__sole_consumer(g, pl->n_nodes, v);
      if (j < 0) return;
      nj = eng_graph_node(g, (size_t)j);
    }
  }
  // MatMul: a residual Add (a transformer's Add(projection + bias, x)) rides in cuBLASLt's C
  // operand; the residual is read by the product, so it must exist before this node runs.
  // Its shape (no broadcast) and the buffers are checked per run (eng_cuda__settle_fusions).
  if (!gemm && strcmp(nj->op_type, "Add") == 0 && nj->n_in == 2 && nj->in[0] >= 0 &&
      nj->in[1] >= 0 && nj->in[0] != nj->in[1]) {
    int z = nj->in[0] == v ? nj->in[1] : nj->in[0];
    if (!eng_cuda__is_const(g, z) && eng_cuda__made_before(pl, z, i)) {
      f->res_node = j;
      f->res_z = z;
      f->res_value = nj->out[0];
      v = nj->out[0];
      j = eng_cuda__sole_consumer(g, pl->n_nodes, v);
      if (j < 0) return;
      nj = eng_graph_node(g, (size_t)j);
    }
  }
  if (strcmp(nj->op_type, "Relu") == 0) {
    f->act = K_ACT_RELU;
    f->act_node = j;
  } else if (strcmp(nj->op_type, "Gelu") == 0) {
    // cuBLASLt's GELU is the tanh form only; the exact (erf) one rides in it
    // in FP16 plans alone (eng_cuda__settle_fusions)
    f->act = pl->params[j].approximate ? K_ACT_GELU_TANH : K_ACT_GELU;
    f->act_node = j;
  }
}

const cuda_op eng_cuda__gemm_ops[] = {
    {.op_type = "Gemm", .run = run_gemm, .half = half_gemm, .fuse = gemm_fuse},
    {.op_type = "MatMul", .run = run_matmul, .half = eng_cuda__half_always, .fuse = gemm_fuse},
};
const size_t eng_cuda__n_gemm_ops = sizeof eng_cuda__gemm_ops / sizeof eng_cuda__gemm_ops[0];
