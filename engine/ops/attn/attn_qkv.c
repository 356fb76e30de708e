// engine/ops/attn/attn_qkv.c: the load-time pass that packs a fused attention's Q, K
// and V into one projection (attn.h's eng_attn__merge_qkv and packed mode).
//
// Why: at batch 1 a BERT-base layer's three projections are three GEMMs of
// [S, 768] x [768, 768], each too small to fill the GPU (latency-bound), and
// one GEMM [S, 768] x [768, 2304] costs about what one of them does. The
// attention kernels read their operands at any row stride and offset
// (k_attn_args), so the one product T [B, S, 3N] feeds the fused node as
// is: Q, K and V are column ranges of T, rows 3N apart. No Split, no copy.
//
// What the exporters write before the attention pass took the head
// Transposes into the node (q_perm, k_perm, v_perm all set):
//   BERT, DistilBERT, ViT (TorchScript): per operand
//     Reshape(Add(MatMul(X, W), b), shape) with W [E, N], b [N], shape
//     [B, S, H, D] (a Concat of Shape(X) parts and constants)
//   GPT-2-shaped decoders (dynamo): one Linear to [B, S, 3N], then
//     Split(axis -1 or 2, three equal parts) -> Reshape each
// Covered: either operand order of the Add, no bias on all three, the
// Split's parts in the order Q, K, V with equal sizes (num_outputs 3, no
// sizes, or constant equal sizes). Every value that disappears must be read
// by the match alone and be no graph output. The three Reshapes' shapes stay
// computed as exported and become the fused node's inputs 5..7: the planner
// folds them per input-shape signature and eng_attn__analyse checks that
// all three come to [B, S, H, D] of T [B, S, 3*H*D], so nothing is assumed
// here about shapes this pass cannot see. Not covered (left as they are):
// dynamo's K, which detours through Reshapes the attention pass keeps (its K
// is no Reshape's output), and GPT TorchScript's Q, which the divisor's
// Shape reads too.
//
// The merged constants are made once here: Wqkv [E, 3N] with row e the rows
// e of Wq, Wk, Wv side by side, bqkv [3N] = bq, bk, bv; the product is the
// three products side by side, exactly (each output element is the same dot
// product; only the GEMM's blocking may round differently).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/attn/attn.h"
#include "engine/graph/graph_internal.h"
#include "engine/ops/ops_common.h"

// The live node that produces v with op type op, or NULL.
static const eng_node *made_by(const eng_graph *g, const unsigned char *dead, int v, const char *op, int *idx) {
  long i = eng_graph__live_producer(g, dead, v, op);
  if (i < 0) return NULL;
  *idx = (int)i;
  return eng_graph_node(g, (size_t)i);
}

// v may disappear: read once (by the match) and no graph output.
static int private_value(const eng_graph *g, const int *readers, int v) {
  return v >= 0 && readers[v] == 1 && !eng_graph__is_output(g, v);
}

static const eng_value *const_f32(const eng_graph *g, int v) {
  if (v < 0) return NULL;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  return x->kind == ENG_VALUE_CONST && x->dt == DT_FP32 && x->data ? x : NULL;
}

// One node's match: T (the packed projection), the Reshapes' shapes and
// allowzero, the nodes that die, and for a merge the three projections.
typedef struct qkv {
  int t, shape[3], allowzero;
  int dead[8], n_dead;
  int merge;          // 1: three projections to merge; 0: a Split's input is T already
  int mm[3], add[3];  // node indices (add -1: no bias)
  int w[3], b[3];     // their constants (b -1: no bias)
} qkv;

static int64_t attr_int(const eng_node *n, const char *name, int64_t def) {
  const eng_attr *a = eng_node_attr(n, name);
  return a ? a->i : def;
}

// s is a Split of its input into three equal parts along the last axis of a
// rank-3 value (eng_attn__analyse checks the rank per signature).
static int equal_thirds(const eng_graph *g, const eng_node *s) {
  if (s->n_out != 3 || s->n_in < 1 || s->in[0] < 0) return 0;
  int64_t axis = attr_int(s, "axis", 0);
  if (axis != -1 && axis != 2) return 0;
  const eng_attr *no = eng_node_attr(s, "num_outputs");
  if (no && no->i != 3) return 0;
  const eng_attr *sa = eng_node_attr(s, "split");  // opset < 13
  if (sa && (sa->n_ints != 3 || sa->ints[0] != sa->ints[1] || sa->ints[1] != sa->ints[2])) return 0;
  if (s->n_in < 2 || s->in[1] < 0) return 1;
  const eng_value *c = eng_graph_value(g, (size_t)s->in[1]);
  if (c->kind != ENG_VALUE_CONST || c->dt != DT_INT64 || eng_numel(c->ndims, c->dims) != 3) return 0;
  const int64_t *z = c->data;
  return z[0] == z[1] && z[1] == z[2];
}

// src is Add(MatMul(X, W), b) (either order) or MatMul(X, W) alone; fills
// slot k of m and *x (X) when it is.
static int projection(const eng_graph *g, const unsigned char *dead, const int *readers, int src, int k, qkv *m,
                      int *x) {
  int ai = -1, mi;
  const eng_node *a = made_by(g, dead, src, "Add", &ai);
  int mv = src;
  m->add[k] = -1, m->b[k] = -1;
  if (a) {
    if (a->n_in != 2 || a->n_out != 1) return 0;
    int s = const_f32(g, a->in[1]) ? 0 : const_f32(g, a->in[0]) ? 1 : -1;
    if (s < 0) return 0;
    mv = a->in[s];
    m->add[k] = ai, m->b[k] = a->in[1 - s];
    if (!private_value(g, readers, mv)) return 0;
  }
  const eng_node *mm = made_by(g, dead, mv, "MatMul", &mi);
  if (!mm || mm->n_in != 2 || mm->n_out != 1 || mm->in[0] < 0) return 0;
  const eng_value *w = const_f32(g, mm->in[1]);
  if (!w || w->ndims != 2) return 0;
  if (m->b[k] >= 0) {
    const eng_value *b = eng_graph_value(g, (size_t)m->b[k]);
    if (b->ndims != 1 || b->dims[0] != w->dims[1]) return 0;  // broadcast along the last dim only
  }
  m->mm[k] = mi, m->w[k] = mm->in[1];
  *x = mm->in[0];
  return 1;
}

static int match(const eng_graph *g, const unsigned char *dead, const int *readers, size_t ai, qkv *m) {
  const eng_node *at = eng_graph_node(g, ai);
  memset(m, 0, sizeof *m);
  if (strcmp(at->op_type, ENG_ATTN_OP) != 0 || at->n_in != 5) return 0;
  if (attr_int(at, ENG_ATTN_QKV_PACKED, 0) || !attr_int(at, "q_perm", 0) || !attr_int(at, "k_perm", 0) ||
      !attr_int(at, "v_perm", 0))
    return 0;
  int src[3];
  for (int k = 0; k < 3; k++) {
    int ri;
    const eng_node *r = made_by(g, dead, at->in[k], "Reshape", &ri);
    if (!r || r->n_in != 2 || r->in[0] < 0 || r->in[1] < 0 || !private_value(g, readers, at->in[k])) return 0;
    int az = attr_int(r, "allowzero", 0) != 0;
    if (k && az != m->allowzero) return 0;
    m->allowzero = az;
    m->shape[k] = r->in[1];
    src[k] = r->in[0];
    m->dead[m->n_dead++] = ri;
    if (!private_value(g, readers, src[k])) return 0;
  }
  if (src[0] == src[1] || src[1] == src[2] || src[0] == src[2]) return 0;
  // a Split's three parts, in order
  int si;
  const eng_node *sp = made_by(g, dead, src[0], "Split", &si);
  if (sp) {
    if (!equal_thirds(g, sp)) return 0;
    for (int k = 0; k < 3; k++)
      if (sp->out[k] != src[k]) return 0;
    m->t = sp->in[0];
    m->dead[m->n_dead++] = si;
    return 1;
  }
  // three projections of one X by constants of one shape, all with a bias or none
  int x[3];
  for (int k = 0; k < 3; k++)
    if (!projection(g, dead, readers, src[k], k, m, &x[k])) return 0;
  const eng_value *w0 = eng_graph_value(g, (size_t)m->w[0]);
  for (int k = 1; k < 3; k++) {
    const eng_value *w = eng_graph_value(g, (size_t)m->w[k]);
    if (x[k] != x[0] || w->dims[0] != w0->dims[0] || w->dims[1] != w0->dims[1] || (m->b[k] < 0) != (m->b[0] < 0))
      return 0;
  }
  m->merge = 1;
  for (int k = 1; k < 3; k++) {
    m->dead[m->n_dead++] = m->mm[k];
    if (m->add[k] >= 0) m->dead[m->n_dead++] = m->add[k];
  }
  m->t = src[0];
  return 1;
}

// The concatenated constants, added to the graph; the first projection
// takes them (MatMul then Add, the product first as the CUDA plan's
// epilogue fusion wants it).
static int merge_constants(eng_graph *g, qkv *m, err *e) {
  const eng_value *w0 = eng_graph_value(g, (size_t)m->w[0]);
  int64_t rows = w0->dims[0], n = w0->dims[1], dims[2] = {rows, 3 * n}, bd = 3 * n;
  size_t wbytes = (size_t)(rows * 3 * n) * sizeof(float), bbytes = (size_t)bd * sizeof(float);
  float *w = malloc(wbytes ? wbytes : 1), *b = m->b[0] >= 0 ? malloc(bbytes ? bbytes : 1) : NULL;
  if (!w || (m->b[0] >= 0 && !b)) {
    free(w), free(b);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory merging Q/K/V projections");
  }
  for (int k = 0; k < 3; k++) {
    const float *src = eng_graph_value(g, (size_t)m->w[k])->data;
    for (int64_t r = 0; r < rows; r++) memcpy(w + r * 3 * n + k * n, src + r * n, (size_t)n * sizeof *w);
    if (b) memcpy(b + k * n, eng_graph_value(g, (size_t)m->b[k])->data, (size_t)n * sizeof *b);
  }
  char name[ENG_NAME_MAX];
  int wv, bv = -1;
  snprintf(name, sizeof name, "%.200s/qkv_W", eng_graph_node(g, (size_t)m->mm[0])->name);
  if (eng_graph__add_const(g, name, DT_FP32, 2, dims, w, wbytes, &wv, e) != 0) {
    free(w), free(b);
    return -1;
  }
  if (b) {
    snprintf(name, sizeof name, "%.200s/qkv_B", eng_graph_node(g, (size_t)m->mm[0])->name);
    if (eng_graph__add_const(g, name, DT_FP32, 1, &bd, b, bbytes, &bv, e) != 0) {
      free(b);
      return -1;
    }
  }
  eng_node *mm = eng_graph__node_mut(g, (size_t)m->mm[0]);
  mm->in[1] = wv;
  if (b) {
    eng_node *a = eng_graph__node_mut(g, (size_t)m->add[0]);
    a->in[0] = mm->out[0];
    a->in[1] = bv;
  }
  return 0;
}

// The fused node to packed mode: inputs T, T, T, mask, divisor, the three
// shapes; attributes qkv_packed and qkv_allowzero added.
static int pack_node(eng_graph *g, size_t ai, const qkv *m, err *e) {
  eng_node *n = eng_graph__node_mut(g, ai);
  int *in = realloc(n->in, 8 * sizeof *in);
  if (!in) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory merging Q/K/V projections");
  n->in = in;
  eng_attr *at = realloc(n->attrs, (size_t)(n->n_attrs + 2) * sizeof *at);
  if (!at) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory merging Q/K/V projections");
  n->attrs = at;
  eng_attr *p = &at[n->n_attrs], *z = &at[n->n_attrs + 1];
  memset(p, 0, 2 * sizeof *p);
  p->name = strdup(ENG_ATTN_QKV_PACKED), z->name = strdup(ENG_ATTN_QKV_ALLOWZERO);
  if (!p->name || !z->name) {
    free(p->name), free(z->name);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory merging Q/K/V projections");
  }
  p->type = z->type = 2;  // AttributeProto INT
  p->i = 1, z->i = m->allowzero;
  n->n_attrs += 2;
  for (int k = 0; k < 3; k++) in[k] = m->t, in[5 + k] = m->shape[k];
  n->n_in = 8;
  return 0;
}

int eng_attn__merge_qkv(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  const eng_graph_opts *o = eng_graph__opts(g);
  if (o->no_fuse_attention || o->no_merge_qkv) return 0;
  int *readers = eng_graph__live_readers(g, dead);
  if (!readers) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = 0;
  size_t merged = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g) && !rc; i++) {
    qkv m;
    if (dead[i] || !match(g, dead, readers, i, &m)) continue;
    if (m.merge) rc = merge_constants(g, &m, e);
    if (!rc) rc = pack_node(g, i, &m, e);
    for (int k = 0; !rc && k < m.n_dead; k++) dead[m.dead[k]] = 1;
    if (!rc) merged++;
  }
  free(readers);
  if (merged) *changed = 1;
  eng_graph__set_n_qkv_merged(g, merged);
  return rc;
}
