// engine/graph/graph_pass.c: load-time rewrites of a complete, sorted graph, run
// once per model before any plan sees it (graph_internal.h). Each pass keeps
// the graph's meaning for every input, so the plans and the reference CPU
// path stay one and the same.
//
// BatchNormalization after Conv (inference form: Y = scale * (X - mean) /
// sqrt(var + eps) + B, per channel) is an affine map per output channel, so
// it folds into the convolution's weights and bias:
//   s = scale / sqrt(var + eps);  W'[k] = W[k] * s[k];  B'[k] = (B[k] - mean[k]) * s[k] + bias[k]
// Exporters in eval mode usually fold it already (torch's do both); models
// exported in training mode, from other frameworks or by hand keep it, and
// then it costs a full pass over the activation and a kernel launch per
// layer. Folding happens in double precision, so the folded weights are the
// correctly rounded values of the exact product.
#include "engine/ops/attn/attn.h"
#include "engine/graph/graph_internal.h"
#include "engine/ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Constant subgraphs: a node whose inputs are all constants computes the
// same tensor for every request, so it runs once here, on the CPU op's own
// run function, and its outputs become constants: the planners then see
// initializers (uploaded once by a GPU plan) instead of nodes. Exporters
// emit many (Cast or Reshape of a weight, Mul of two scalars, Shape
// arithmetic on constant shapes). Nodes that depend on input shapes are
// left to the planner's per-signature folding (plan.c).

// The folded outputs' buffers (eng_ops_cpu_fold's buf), fresh for the graph to own.
typedef struct fold_bufs {
  void *buf[8];
  int oom;
} fold_bufs;

static void *fold_alloc(void *ctx, int k, size_t bytes) {
  fold_bufs *f = ctx;
  f->buf[k] = calloc(1, bytes ? bytes : 1);
  if (!f->buf[k]) f->oom = 1;
  return f->buf[k];
}

static int fold_constant_node(eng_graph *g, size_t i, int opset, int *folded, err *e) {
  const eng_node *n = eng_graph_node(g, i);
  *folded = 0;
  const eng_op_def *d = eng_ops_cpu_find(n->op_type);
  if (!d || !d->run || d->run_state || n->n_out < 1 || n->n_out > 8 || n->n_in > 16) return 0;
  if (d->flags & ENG_OP_SHAPE_ONLY) return 0;  // Shape of a constant: rare, and the plan folds it
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] >= 0 && eng_graph_value(g, (size_t)n->in[k])->kind != ENG_VALUE_CONST) return 0;
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] < 0 || eng_graph__is_output(g, n->out[k])) return 0;
  eng_op_params prm;
  memset(&prm, 0, sizeof prm);
  err pe = {0};
  if (d->parse && d->parse(g, n, opset, &prm, &pe) != 0) return 0;  // the planner reports it
  if (n->n_in < d->min_in || n->n_in > d->max_in || n->n_out < d->min_out || n->n_out > d->max_out) return 0;
  eng_tensor in[16], out[8];
  for (int k = 0; k < n->n_in; k++) {
    memset(&in[k], 0, sizeof in[k]);
    if (n->in[k] < 0) continue;
    const eng_value *v = eng_graph_value(g, (size_t)n->in[k]);
    in[k].dt = v->dt;
    in[k].ndims = v->ndims;
    memcpy(in[k].dims, v->dims, sizeof in[k].dims);
    in[k].data = v->data;
    in[k].bytes = v->bytes;
  }
  for (int k = 0; k < n->n_out; k++) {
    memset(&out[k], 0, sizeof out[k]);
    out[k].dt = DT_FP32;  // wanted; infer sets the real type
  }
  if (d->infer(&prm, in, n->n_in, out, n->n_out, &pe) != 0) return 0;
  for (int k = 0; k < n->n_out; k++)  // strings and large results stay nodes
    if (dtype_size(out[k].dt) == 0 || eng_tensor_bytes(&out[k]) > ENG_FOLD_MAX_BYTES) return 0;
  fold_bufs fb = {{0}, 0};
  // a run that fails (an index out of range...) leaves the node to the planner, which says so
  if (eng_ops_cpu_fold(d, &prm, in, n->n_in, out, n->n_out, fold_alloc, &fb, &pe) != 0) {
    for (int k = 0; k < n->n_out; k++) free(fb.buf[k]);
    return fb.oom ? err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory folding node '%s'", n->name) : 0;
  }
  for (int k = 0; k < n->n_out; k++) {  // the graph owns the buffers from here
    eng_value *v = eng_graph__value_mut(g, (size_t)n->out[k]);
    v->kind = ENG_VALUE_CONST;
    v->index = -1;
    v->dt = out[k].dt;
    v->ndims = out[k].ndims;
    memcpy(v->dims, out[k].dims, sizeof v->dims);
    v->data = out[k].data;
    v->bytes = out[k].bytes;
  }
  *folded = 1;
  return 0;
}

static int pass_fold_constants(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  int opset = eng_graph_opset(g);
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    if (dead[i]) continue;
    int folded = 0;
    TRY(fold_constant_node(g, i, opset, &folded, e));
    if (folded) {
      dead[i] = 1;
      *changed = 1;
    }
  }
  return 0;
}

// Consumers of each value in the graph as it is now.
static int *count_consumers(eng_graph *g) {
  size_t nv = eng_graph_n_values(g);
  int *c = calloc(nv + 1, sizeof *c);
  if (!c) return NULL;
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) c[n->in[k]]++;
  }
  return c;
}

static const eng_value *const_f32(const eng_graph *g, int v) {
  if (v < 0) return NULL;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  return x->kind == ENG_VALUE_CONST && x->dt == DT_FP32 ? x : NULL;
}

static float attr_f(const eng_node *n, const char *name, float def) {
  const eng_attr *a = eng_node_attr(n, name);
  return a ? a->f : def;
}

// Folds BatchNormalization node `bn` into Conv node `conv` when every
// operand it needs is a constant of the right shape; returns 1 if folded.
static int fold_bn(eng_graph *g, size_t conv_i, size_t bn_i, err *e) {
  eng_node *conv = eng_graph__node_mut(g, conv_i);
  const eng_node *bn = eng_graph_node(g, bn_i);
  if (bn->n_in != 5 || bn->n_out < 1 || bn->out[0] < 0) return 0;
  for (int k = 1; k < bn->n_out; k++)
    if (bn->out[k] >= 0) return 0;  // training outputs: left for the op to refuse
  const eng_attr *tm = eng_node_attr(bn, "training_mode");
  if (tm && tm->i) return 0;
  const eng_value *w = const_f32(g, conv->in[1]);
  const eng_value *b = conv->n_in > 2 ? const_f32(g, conv->in[2]) : NULL;
  if (!w || w->ndims < 3 || (conv->n_in > 2 && conv->in[2] >= 0 && !b)) return 0;
  int64_t k_out = w->dims[0];
  if (b && (b->ndims != 1 || b->dims[0] != k_out)) return 0;
  const eng_value *p[4];
  for (int j = 0; j < 4; j++) {
    p[j] = const_f32(g, bn->in[1 + j]);
    if (!p[j] || eng_numel(p[j]->ndims, p[j]->dims) != k_out) return 0;
  }
  const float *scale = p[0]->data, *bias = p[1]->data, *mean = p[2]->data, *var = p[3]->data;
  double eps = attr_f(bn, "epsilon", 1e-5f);
  size_t per = (size_t)(eng_numel(w->ndims, w->dims) / (k_out ? k_out : 1));
  size_t wbytes = w->bytes, bbytes = (size_t)k_out * sizeof(float);
  float *nw = malloc(wbytes ? wbytes : 1), *nb = malloc(bbytes ? bbytes : 1);
  if (!nw || !nb) {
    free(nw);
    free(nb);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory folding BatchNormalization");
  }
  const float *ow = w->data, *ob = b ? b->data : NULL;
  for (int64_t k = 0; k < k_out; k++) {
    double s = (double)scale[k] / sqrt((double)var[k] + eps);
    for (size_t i = 0; i < per; i++) nw[(size_t)k * per + i] = (float)((double)ow[(size_t)k * per + i] * s);
    nb[k] = (float)(((ob ? (double)ob[k] : 0.0) - (double)mean[k]) * s + (double)bias[k]);
  }
  char name[ENG_NAME_MAX];
  int wv, bv;
  int64_t wdims[ENG_MAX_DIMS];
  memcpy(wdims, w->dims, sizeof wdims);
  int wnd = w->ndims;
  snprintf(name, sizeof name, "%.200s/bn_folded_W", conv->name);
  if (eng_graph__add_const(g, name, DT_FP32, wnd, wdims, nw, wbytes, &wv, e) != 0) {
    free(nw);
    free(nb);
    return -1;
  }
  snprintf(name, sizeof name, "%.200s/bn_folded_B", conv->name);
  if (eng_graph__add_const(g, name, DT_FP32, 1, &k_out, nb, bbytes, &bv, e) != 0) {
    free(nb);
    return -1;
  }
  conv = eng_graph__node_mut(g, conv_i);
  if (conv->n_in < 3) {
    int *in = realloc(conv->in, 3 * sizeof *in);
    if (!in) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory folding BatchNormalization");
    conv->in = in;
    conv->n_in = 3;
  }
  conv->in[1] = wv;
  conv->in[2] = bv;
  // The Conv now produces what the BatchNormalization did; its old output has no reader left.
  int y = bn->out[0];
  eng_graph__value_mut(g, (size_t)y)->index = (int)conv_i;
  conv->out[0] = y;
  return 1;
}

static int pass_fold_batchnorm(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  int *uses = count_consumers(g);
  if (!uses) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g) && !rc; i++) {
    const eng_node *bn = eng_graph_node(g, i);
    if (strcmp(bn->op_type, "BatchNormalization") != 0 || bn->n_in < 1 || bn->in[0] < 0) continue;
    int x = bn->in[0];
    const eng_value *xv = eng_graph_value(g, (size_t)x);
    if (xv->kind != ENG_VALUE_NODE || uses[x] != 1 || eng_graph__is_output(g, x)) continue;
    size_t ci = (size_t)xv->index;
    const eng_node *conv = eng_graph_node(g, ci);
    if (strcmp(conv->op_type, "Conv") != 0 || conv->n_out != 1 || conv->n_in < 2 || dead[ci]) continue;
    int r = fold_bn(g, ci, i, e);
    if (r < 0) rc = -1;
    else if (r == 1) {
      dead[i] = 1;
      *changed = 1;
    }
  }
  free(uses);
  return rc;
}

// Common subexpressions: a node whose op, attributes and inputs are those
// of an earlier node (constant inputs compared by value) computes the same
// outputs, so its readers read the earlier node's instead and it goes.
// torch's TorchScript exporter writes the attention mask of every layer of
// BERT, DistilBERT and ViT as its own Where(mask, 0, -inf), each with its own
// Constant nodes of the same values: on the GPU that was one kernel writing a
// [B, 1, S, S] tensor per layer, 2-3% of BERT-base's device time at batch
// 32-64 (ncu, H200). Ops that draw random numbers are never merged, nor a node
// that writes a graph output, nor one with subgraph attributes.
static int same_tensor(const eng_value *x, const eng_value *y) {
  return x->dt == y->dt && dtype_size(x->dt) > 0 && x->ndims == y->ndims &&
         memcmp(x->dims, y->dims, (size_t)x->ndims * sizeof x->dims[0]) == 0 && x->bytes == y->bytes &&
         (x->bytes == 0 || (x->data && y->data && memcmp(x->data, y->data, x->bytes) == 0));
}

static int same_input(const eng_graph *g, int a, int b) {
  if (a == b) return 1;
  if (a < 0 || b < 0) return 0;
  const eng_value *x = eng_graph_value(g, (size_t)a), *y = eng_graph_value(g, (size_t)b);
  return x->kind == ENG_VALUE_CONST && y->kind == ENG_VALUE_CONST && same_tensor(x, y);
}

enum { ATTR_GRAPH = 5, ATTR_GRAPHS = 10 };  // onnx.proto's AttributeType

static int same_attr(const eng_attr *a, const eng_attr *b) {
  if (a->type != b->type || a->type == ATTR_GRAPH || a->type == ATTR_GRAPHS || a->i != b->i) return 0;
  if (memcmp(&a->f, &b->f, sizeof a->f) != 0) return 0;  // bitwise: a NaN equals itself
  if ((a->s == NULL) != (b->s == NULL) || (a->s && strcmp(a->s, b->s) != 0)) return 0;
  if (a->n_floats != b->n_floats || a->n_ints != b->n_ints) return 0;
  if (a->n_floats && memcmp(a->floats, b->floats, a->n_floats * sizeof *a->floats) != 0) return 0;
  if (a->n_ints && memcmp(a->ints, b->ints, a->n_ints * sizeof *a->ints) != 0) return 0;
  if ((a->t == NULL) != (b->t == NULL)) return 0;
  return !a->t || same_tensor(a->t, b->t);
}

static int same_node(const eng_graph *g, const eng_node *a, const eng_node *b) {
  if (strcmp(a->op_type, b->op_type) != 0 || a->n_in != b->n_in || a->n_out != b->n_out ||
      a->n_attrs != b->n_attrs)
    return 0;
  for (int k = 0; k < a->n_in; k++)
    if (!same_input(g, a->in[k], b->in[k])) return 0;
  for (int k = 0; k < a->n_out; k++)  // an output b leaves out that a writes: not b's to give
    if (a->out[k] >= 0 && b->out[k] < 0) return 0;
  for (int k = 0; k < a->n_attrs; k++) {
    const eng_attr *o = eng_node_attr(b, a->attrs[k].name);
    if (!o || !same_attr(&a->attrs[k], o)) return 0;
  }
  return 1;
}

static int mergeable(const eng_graph *g, const eng_node *n) {
  static const char *const random_ops[] = {"RandomNormal", "RandomNormalLike", "RandomUniform",
                                           "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (size_t k = 0; k < sizeof random_ops / sizeof random_ops[0]; k++)
    if (strcmp(n->op_type, random_ops[k]) == 0) return 0;
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] >= 0 && eng_graph__is_output(g, n->out[k])) return 0;
  return n->n_out > 0;
}

// The hash bucket candidates share: op type and first input (a constant by
// its bytes' first word, so equal constants of other nodes land together).
static uint64_t cse_key(const eng_graph *g, const eng_node *n) {
  uint64_t h = 1469598103934665603ull;
  for (const char *c = n->op_type; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
  int v = n->n_in > 0 ? n->in[0] : -1;
  uint64_t w = (uint64_t)(int64_t)v;
  if (v >= 0) {
    const eng_value *x = eng_graph_value(g, (size_t)v);
    if (x->kind == ENG_VALUE_CONST) {
      w = 0x9e3779b97f4a7c15ull ^ x->bytes;
      if (x->data && x->bytes) memcpy(&w, x->data, x->bytes < sizeof w ? x->bytes : sizeof w);
    }
  }
  return (h ^ w) * 1099511628211ull;
}

static int pass_cse(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  size_t n = eng_graph_n_nodes(g), cap = 64;
  while (cap < 2 * n) cap *= 2;
  long *head = malloc(cap * sizeof *head), *next = malloc((n + 1) * sizeof *next);
  int *alias = malloc((eng_graph_n_values(g) + 1) * sizeof *alias);  // value -> the value it reads as
  if (!head || !next || !alias) {
    free(head), free(next), free(alias);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (size_t b = 0; b < cap; b++) head[b] = -1;
  for (size_t v = 0; v < eng_graph_n_values(g); v++) alias[v] = (int)v;
  for (size_t i = 0; i < n; i++) {
    if (dead[i]) continue;
    eng_node *x = eng_graph__node_mut(g, i);
    for (int k = 0; k < x->n_in; k++)  // read what earlier merges left (topological order)
      if (x->in[k] >= 0) x->in[k] = alias[x->in[k]];
    if (!mergeable(g, x)) continue;
    size_t b = (size_t)(cse_key(g, x) & (cap - 1));
    long j = head[b];
    while (j >= 0 && !same_node(g, x, eng_graph_node(g, (size_t)j))) j = next[j];
    if (j < 0) {
      next[i] = head[b];
      head[b] = (long)i;
      continue;
    }
    const eng_node *y = eng_graph_node(g, (size_t)j);
    for (int k = 0; k < x->n_out; k++)
      if (x->out[k] >= 0) alias[x->out[k]] = y->out[k];
    dead[i] = 1;
    *changed = 1;
  }
  // graph outputs name values; none of a merged node's (mergeable), so nothing else reads the old ones
  free(head), free(next), free(alias);
  return 0;
}

// Operand order of Add and Mul: exporters write a linear layer on a 3-D
// activation as MatMul then Add(bias, product), the constant first (torch's
// TorchScript exporter does). The planners run an elementwise op in place on
// its first operand only, so such an Add got a buffer of its own, and with
// it the CUDA plan could not carry the bias in the product's cuBLASLt
// epilogue (it fuses only an Add that writes over the product): a full
// extra pass per projection of a BERT layer. Both ops commute exactly in
// IEEE arithmetic and broadcast symmetrically, so putting the computed
// operand first changes no value; it runs last, after the fusions that
// match the exporters' own order.
static void pass_operand_order(eng_graph *g, const unsigned char *dead) {
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    if (dead[i]) continue;
    eng_node *n = eng_graph__node_mut(g, i);
    if (n->n_in != 2 || n->in[0] < 0 || n->in[1] < 0) continue;
    if (strcmp(n->op_type, "Add") != 0 && strcmp(n->op_type, "Mul") != 0) continue;
    if (eng_graph_value(g, (size_t)n->in[0])->kind != ENG_VALUE_CONST ||
        eng_graph_value(g, (size_t)n->in[1])->kind == ENG_VALUE_CONST)
      continue;
    int t = n->in[0];
    n->in[0] = n->in[1];
    n->in[1] = t;
  }
}

int eng_graph__run_passes(eng_graph *g, err *e) {
  size_t n = eng_graph_n_nodes(g);
  unsigned char *dead = calloc(n + 1, 1);
  if (!dead) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int changed = 0;
  eng_graph__set_n_qdq_nodes(g, eng_graph__count_qdq(g));
  // before folding, which would turn the weights' DequantizeLinear into FP32 constants
  // (the float form wants exactly that: its pass leaves them to folding)
  int rc = eng_graph__opts(g)->qdq_float ? eng_graph__qdq_float(g, dead, &changed, e)
                                         : eng_graph__fuse_qdq(g, dead, &changed, e);
  // constants first: a BatchNormalization whose parameters are computed from constants folds too
  if (!rc) rc = pass_fold_constants(g, dead, &changed, e);
  if (!rc) rc = pass_fold_batchnorm(g, dead, &changed, e);
  // after the constants: an exporter's sqrt(2) or epsilon may be computed from constants
  if (!rc) rc = eng_graph__fuse_gelu(g, dead, &changed, e);
  if (!rc) rc = eng_graph__fuse_layernorm(g, dead, &changed, e);
  // after folding, so the scales are constants (attn.c)
  if (!rc) rc = eng_attn__fuse(g, dead, &changed, e);
  // on the fused nodes: their Q, K, V projections into one (attn_qkv.c)
  if (!rc) rc = eng_attn__merge_qkv(g, dead, &changed, e);
  // after the fusions, whose patterns want each chain's nodes its own (two LayerNorms of one
  // input share no ReduceMean), and after folding: Constant nodes compared as values
  if (!rc) rc = pass_cse(g, dead, &changed, e);
  // last: the fusions above match the exporters' operand order
  if (!rc) pass_operand_order(g, dead);
  if (!rc && changed) rc = eng_graph__compact(g, dead, e);
  free(dead);
  return rc;
}
