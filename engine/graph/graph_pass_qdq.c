// engine/graph/graph_pass_qdq.c: onnxruntime's QDQ form of a quantized model
// (onnxruntime.quantization.quantize_static with QuantFormat.QDQ) turned into
// the integer ops, so the convolutions and products run in 8-bit integers
// with int32 sums instead of dequantized FP32:
//   DequantizeLinear(x) -> Conv(., DequantizeLinear(W), DequantizeLinear(B)) -> QuantizeLinear
//     becomes QLinearConv(x, W, B int32)
//   DequantizeLinear(a) -> MatMul(., DequantizeLinear(B)) -> QuantizeLinear
//     becomes QLinearMatMul(a, B)
//   DequantizeLinear(a) -> Gemm(., DequantizeLinear(B INT8), DequantizeLinear(C INT32)) -> QuantizeLinear
//     (alpha 1, beta 1, no transA; transB's B transposed once here) becomes
//     inferd.QLinearGemm(a, B, C): QLinearMatMul with the bias added to the sums
// This is onnxruntime's own CPU rewrite (its QDQ selectors), so the results
// are the ones it computes: the same int32 sums, the same requantization up
// to rounding at a tie. A pattern fuses only where the integer op means
// exactly the same: scales and zero points constant, per tensor for the
// activations, per tensor or per output channel (Conv: axis 0; MatMul: B's
// columns) for the weights, an INT32 bias whose scale is x_scale * w_scale
// with no zero point, and the product read by its QuantizeLinear alone. Every
// other node (Add, pools, Concat, Softmax...) keeps its DequantizeLinear and
// QuantizeLinear and runs in FP32 between them. Runs before constant
// folding, which would otherwise turn DequantizeLinear(W) into FP32 weights.
// Graphs for GPU instances take the float form below instead
// (eng_graph__qdq_float).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph/graph_internal.h"
#include "engine/ops/ops.h"

static const eng_value *const_of(const eng_graph *g, int v) {
  if (v < 0) return NULL;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  return x->kind == ENG_VALUE_CONST ? x : NULL;
}

static int64_t numel(const eng_value *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndims; i++) n *= v->dims[i];
  return n;
}

static int is8(dtype t) { return t == DT_UINT8 || t == DT_INT8; }

// A DequantizeLinear or QuantizeLinear node's parameters, when constant:
// scale FP32, zero point (required: it gives the integer type) of an 8-bit
// type (or INT32 for a bias, zero point optional), no blocks.
typedef struct qdq {
  long node;
  int x, scale, zp;  // value indices (zp -1 when absent)
  const eng_value *s, *z;
  int64_t axis;      // as written (default 1)
  int64_t n;         // scale's element count
} qdq;

static int qdq_of(const eng_graph *g, const unsigned char *dead, int v, const char *op, qdq *q) {
  memset(q, 0, sizeof *q);
  q->node = eng_graph__live_producer(g, dead, v, op);
  if (q->node < 0) return 0;
  const eng_node *n = eng_graph_node(g, (size_t)q->node);
  if (n->n_in < 2 || n->n_out != 1) return 0;
  const eng_attr *bs = eng_node_attr(n, "block_size");
  if (bs && bs->i != 0) return 0;
  q->x = n->in[0];
  q->scale = n->in[1];
  q->zp = n->n_in > 2 ? n->in[2] : -1;
  q->s = const_of(g, q->scale);
  q->z = q->zp >= 0 ? const_of(g, q->zp) : NULL;
  if (!q->s || q->s->dt != DT_FP32 || (q->zp >= 0 && !q->z)) return 0;
  q->n = numel(q->s);
  if (q->z && (numel(q->z) != q->n || (q->n != 1 && q->z->ndims != q->s->ndims))) return 0;
  const eng_attr *ax = eng_node_attr(n, "axis");
  q->axis = ax ? ax->i : 1;
  return 1;
}

// Per tensor with an 8-bit zero point (the activations).
static int per_tensor8(const qdq *q) { return q->n == 1 && q->s->ndims <= 1 && q->z && is8(q->z->dt); }

// Whether the zero point is absent or all zeros.
static int zp_zero(const qdq *q) {
  if (!q->z) return 1;
  const unsigned char *b = q->z->data;
  for (size_t i = 0; i < q->z->bytes; i++)
    if (b[i]) return 0;
  return 1;
}

// Conv's bias: DequantizeLinear of an INT32 vector of m with no zero point and
// the scale x_scale * w_scale[i] (to FP32 rounding), as onnxruntime writes it.
static int bias_ok(const eng_graph *g, const qdq *b, const qdq *x, const qdq *w, int64_t m) {
  const eng_value *bv = const_of(g, b->x);
  if (!bv || bv->dt != DT_INT32 || bv->ndims != 1 || bv->dims[0] != m || !zp_zero(b)) return 0;
  if (b->n != 1 && (b->n != m || b->s->ndims != 1)) return 0;
  float xs = *(const float *)x->s->data;
  for (int64_t i = 0; i < m; i++) {
    float want = xs * ((const float *)w->s->data)[w->n == 1 ? 0 : i];
    float have = ((const float *)b->s->data)[b->n == 1 ? 0 : i];
    if (fabsf(have - want) > 1e-6f * fabsf(want)) return 0;
  }
  return 1;
}

// Node i now reads ins[] as `op` and writes value out (the QuantizeLinear's
// output) in place of its own.
static int retarget(eng_graph *g, size_t i, const char *op, const int *ins, int n_in, int out, err *e) {
  eng_node *n = eng_graph__node_mut(g, i);
  char *op_copy = strdup(op);
  int *in = malloc((size_t)n_in * sizeof *in);
  if (!op_copy || !in) {
    free(op_copy), free(in);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory fusing node '%s'", n->name);
  }
  memcpy(in, ins, (size_t)n_in * sizeof *in);
  free(n->op_type);
  n->op_type = op_copy;
  free(n->in);
  n->in = in;
  n->n_in = n_in;
  n->out[0] = out;
  eng_value *v = eng_graph__value_mut(g, (size_t)out);
  v->index = (int)i;
  return 0;
}

// The QuantizeLinear that alone reads node i's output, per tensor, or -1.
static int sole_quantize(const eng_graph *g, const unsigned char *dead, const int *uses, size_t i, qdq *q) {
  const eng_node *n = eng_graph_node(g, i);
  if (n->n_out != 1 || n->out[0] < 0 || uses[n->out[0]] != 1 || eng_graph__is_output(g, n->out[0])) return 0;
  for (size_t j = i + 1; j < eng_graph_n_nodes(g); j++) {
    if (dead[j]) continue;
    const eng_node *r = eng_graph_node(g, j);
    for (int k = 0; k < r->n_in; k++)
      if (r->in[k] == n->out[0]) {
        if (strcmp(r->op_type, "QuantizeLinear") != 0 || k != 0 || r->n_in < 3 || r->n_out != 1) return 0;
        if (!qdq_of(g, dead, r->out[0], "QuantizeLinear", q) || !per_tensor8(q)) return 0;
        return 1;
      }
  }
  return 0;
}

static int fuse_conv(eng_graph *g, unsigned char *dead, const int *uses, size_t i, int *fused, err *e) {
  const eng_node *n = eng_graph_node(g, i);
  *fused = 0;
  if (n->n_in < 2 || n->n_in > 3) return 0;
  qdq x, w, b, y;
  if (!qdq_of(g, dead, n->in[0], "DequantizeLinear", &x) || !per_tensor8(&x)) return 0;
  if (!qdq_of(g, dead, n->in[1], "DequantizeLinear", &w) || !w.z || !is8(w.z->dt)) return 0;
  const eng_value *wv = const_of(g, w.x);
  if (!wv || wv->dt != w.z->dt || wv->ndims < 3) return 0;
  int64_t m = wv->dims[0];
  int64_t ax = w.axis < 0 ? w.axis + wv->ndims : w.axis;
  if (!(w.n == 1 && w.s->ndims <= 1) && !(w.s->ndims == 1 && w.n == m && ax == 0)) return 0;
  int has_b = n->n_in == 3 && n->in[2] >= 0;
  if (has_b && (!qdq_of(g, dead, n->in[2], "DequantizeLinear", &b) || !bias_ok(g, &b, &x, &w, m))) return 0;
  if (!sole_quantize(g, dead, uses, i, &y)) return 0;
  const eng_node *qn = eng_graph_node(g, (size_t)y.node);
  int ins[9] = {x.x, x.scale, x.zp, w.x, w.scale, w.zp, y.scale, y.zp, has_b ? b.x : -1};
  TRY(retarget(g, i, "QLinearConv", ins, has_b ? 9 : 8, qn->out[0], e));
  dead[y.node] = 1;
  *fused = 1;
  return 0;
}

static int fuse_matmul(eng_graph *g, unsigned char *dead, const int *uses, size_t i, int *fused, err *e) {
  const eng_node *n = eng_graph_node(g, i);
  *fused = 0;
  if (n->n_in != 2) return 0;
  qdq a, b, y;
  if (!qdq_of(g, dead, n->in[0], "DequantizeLinear", &a) || !per_tensor8(&a)) return 0;
  if (!qdq_of(g, dead, n->in[1], "DequantizeLinear", &b) || !b.z || !is8(b.z->dt)) return 0;
  const eng_value *bv = const_of(g, b.x);
  if (!bv || bv->dt != b.z->dt || bv->ndims != 2) return 0;
  int64_t ax = b.axis < 0 ? b.axis + 2 : b.axis;
  if (!(b.n == 1 && b.s->ndims <= 1) && !(b.s->ndims == 1 && b.n == bv->dims[1] && ax == 1)) return 0;
  if (!sole_quantize(g, dead, uses, i, &y)) return 0;
  const eng_node *qn = eng_graph_node(g, (size_t)y.node);
  int ins[8] = {a.x, a.scale, a.zp, b.x, b.scale, b.zp, y.scale, y.zp};
  TRY(retarget(g, i, "QLinearMatMul", ins, 8, qn->out[0], e));
  dead[y.node] = 1;
  *fused = 1;
  return 0;
}

static double attr_f(const eng_node *n, const char *name, double def) {
  const eng_attr *a = eng_node_attr(n, name);
  return a ? a->f : def;
}

static int fuse_gemm(eng_graph *g, unsigned char *dead, const int *uses, size_t i, int *fused, err *e) {
  const eng_node *n = eng_graph_node(g, i);
  *fused = 0;
  if (n->n_in < 2 || n->n_in > 3) return 0;
  const eng_attr *ta = eng_node_attr(n, "transA"), *tb = eng_node_attr(n, "transB");
  int trans_b = tb && tb->i;
  if ((ta && ta->i) || attr_f(n, "alpha", 1.0) != 1.0 || attr_f(n, "beta", 1.0) != 1.0) return 0;
  qdq a, b, c, y;
  if (!qdq_of(g, dead, n->in[0], "DequantizeLinear", &a) || !per_tensor8(&a)) return 0;
  if (!qdq_of(g, dead, n->in[1], "DequantizeLinear", &b) || !b.z || b.z->dt != DT_INT8 || !zp_zero(&b)) return 0;
  const eng_value *bv = const_of(g, b.x);
  if (!bv || bv->dt != DT_INT8 || bv->ndims != 2) return 0;
  int64_t kk = bv->dims[trans_b ? 1 : 0], nn = bv->dims[trans_b ? 0 : 1];
  int64_t ax = b.axis < 0 ? b.axis + 2 : b.axis;
  if (!(b.n == 1 && b.s->ndims <= 1) && !(b.s->ndims == 1 && b.n == nn && ax == (trans_b ? 0 : 1))) return 0;
  int has_c = n->n_in == 3 && n->in[2] >= 0;
  if (has_c && (!qdq_of(g, dead, n->in[2], "DequantizeLinear", &c) || !bias_ok(g, &c, &a, &b, nn))) return 0;
  if (!sole_quantize(g, dead, uses, i, &y)) return 0;
  int bx = b.x;
  if (trans_b) {  // B [n, k] as the [k, n] QLinearMatMul reads
    int8_t *t = malloc((size_t)(kk * nn));
    if (!t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    const int8_t *s = bv->data;
    for (int64_t r = 0; r < nn; r++)
      for (int64_t q = 0; q < kk; q++) t[q * nn + r] = s[r * kk + q];
    int64_t dims[2] = {kk, nn};
    int rc = eng_graph__add_const(g, bv->name, DT_INT8, 2, dims, t, (size_t)(kk * nn), &bx, e);
    if (rc) {
      free(t);
      return rc;
    }
  }
  const eng_node *qn = eng_graph_node(g, (size_t)y.node);
  int ins[9] = {a.x, a.scale, a.zp, bx, b.scale, b.zp, y.scale, y.zp, has_c ? c.x : -1};
  TRY(retarget(g, i, ENG_QLINEAR_GEMM_OP, ins, has_c ? 9 : 8, qn->out[0], e));
  eng_graph__free_attrs(eng_graph__node_mut(g, i));  // alpha, beta, transA, transB: met above
  dead[y.node] = 1;
  *fused = 1;
  return 0;
}

int eng_graph__fuse_qdq(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  int *uses = eng_graph__live_readers(g, dead);
  if (!uses) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = 0, any = 0;
  size_t n_conv = 0, n_mm = 0;
  for (size_t i = 0; !rc && i < eng_graph_n_nodes(g); i++) {
    if (dead[i]) continue;
    const char *op = eng_graph_node(g, i)->op_type;
    int fused = 0;
    if (strcmp(op, "Conv") == 0) rc = fuse_conv(g, dead, uses, i, &fused, e), n_conv += (size_t)fused;
    else if (strcmp(op, "MatMul") == 0) rc = fuse_matmul(g, dead, uses, i, &fused, e), n_mm += (size_t)fused;
    else if (strcmp(op, "Gemm") == 0) rc = fuse_gemm(g, dead, uses, i, &fused, e), n_mm += (size_t)fused;
    any |= fused;
  }
  free(uses);
  eng_graph__add_n_qdq(g, n_conv, n_mm);
  if (rc || !any) return rc;
  *changed = 1;
  // DequantizeLinear nodes no live node reads any more (the weights', and an
  // activation's read by the fused node alone) go too
  uses = eng_graph__live_readers(g, dead);
  if (!uses) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = eng_graph_n_nodes(g); i-- > 0;) {
    const eng_node *n = eng_graph_node(g, i);
    if (dead[i] || strcmp(n->op_type, "DequantizeLinear") != 0 || n->n_out != 1 || n->out[0] < 0) continue;
    if (uses[n->out[0]] || eng_graph__is_output(g, n->out[0])) continue;
    dead[i] = 1;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) uses[n->in[k]]--;
  }
  free(uses);
  return 0;
}

// --- the float form (eng_graph_opts.qdq_float: GPU instances)
//
// The CUDA plan has no integer convolution or product, so a QDQ model runs
// there as the graph it writes: the weights' DequantizeLinear nodes are left
// to constant folding (FP32 weights, FP16 on the device in half plans), and
// each activation's QuantizeLinear -> DequantizeLinear pair becomes one
// inferd.QuantDequant node (round, clamp, rescale in one pass), so the Conv,
// MatMul, Gemm, Add... between them run on the float CUDA ops. A pair fuses
// when both nodes' scales and zero points are the same constants (by value)
// on the same axis; the QuantizeLinear goes when nothing else reads it.

// Whether two constants hold the same type, element count and bytes.
static int same_const(const eng_value *a, const eng_value *b) {
  if (!a || !b) return a == b;
  return a->dt == b->dt && numel(a) == numel(b) && a->bytes == b->bytes && !memcmp(a->data, b->data, a->bytes);
}

static int quant_type_default(const eng_node *q) {
  const eng_attr *od = eng_node_attr(q, "output_dtype");
  return !od || od->i == 0 || dtype_from_onnx((int)od->i) == DT_UINT8;
}

int eng_graph__qdq_float(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  size_t n_pairs = 0, n_weights = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    if (dead[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    if (strcmp(n->op_type, "DequantizeLinear") != 0 || n->n_out != 1 || n->out[0] < 0) continue;
    const eng_value *w = const_of(g, n->in[0]);
    if (w) {  // a weight or bias: constant folding makes it FP32 (a larger one stays a node, run per batch)
      n_weights += (uint64_t)numel(w) * sizeof(float) <= ENG_FOLD_MAX_BYTES;
      continue;
    }
    qdq d, q;
    if (!qdq_of(g, dead, n->out[0], "DequantizeLinear", &d)) continue;
    if (!qdq_of(g, dead, d.x, "QuantizeLinear", &q)) continue;
    if (!same_const(q.s, d.s) || !same_const(q.z, d.z)) continue;
    if (q.n != 1 && q.axis != d.axis) continue;
    const eng_node *qn = eng_graph_node(g, (size_t)q.node);
    if (!q.z && !quant_type_default(qn)) continue;  // DequantizeLinear alone cannot say the type
    int ins[3] = {q.x, q.scale, q.zp};
    TRY(retarget(g, i, ENG_QUANT_DEQUANT_OP, ins, q.zp >= 0 ? 3 : 2, n->out[0], e));
    n_pairs++;
  }
  eng_graph__add_n_qdq_float(g, n_pairs, n_weights);
  if (!n_pairs) return 0;
  *changed = 1;
  // QuantizeLinear nodes whose every reader became a QuantDequant
  int *uses = eng_graph__live_readers(g, dead);
  if (!uses) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    const eng_node *n = eng_graph_node(g, i);
    if (dead[i] || strcmp(n->op_type, "QuantizeLinear") != 0 || n->n_out != 1 || n->out[0] < 0) continue;
    if (!uses[n->out[0]] && !eng_graph__is_output(g, n->out[0])) dead[i] = 1;
  }
  free(uses);
  return 0;
}

size_t eng_graph__count_qdq(const eng_graph *g) {
  size_t c = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    const char *op = eng_graph_node(g, i)->op_type;
    c += !strcmp(op, "QuantizeLinear") || !strcmp(op, "DequantizeLinear");
  }
  return c;
}
