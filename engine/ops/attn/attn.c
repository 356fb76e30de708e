// engine/ops/attn/attn.c: scaled-dot-product attention (attn.h): the load-time pass
// that fuses the exporters' subgraph, and the fused op's parsing, shape
// rule and CPU path.
//
// What the exporters write (tests/models/zoo/graphs), from the scores on:
//   torch SDPA (TorchScript opset 17 and dynamo opset 18: BERT, DistilBERT, ViT)
//     MatMul(Mul(Q, c), Mul(Kt, c)) -> Add(., mask) -> Softmax(-1)
//       -> Where(IsNaN(P), 0, P) -> MatMul(., V)
//     c = sqrt(1/sqrt(D)) on both sides; the mask a Where(bool, 0, -inf)
//     (-FLT_MAX in dynamo) that stays its own node and is read as is.
//   GPT-style decoders (TorchScript and dynamo)
//     Div(MatMul(Q, Kt), d) -> Add(., causal) -> Softmax(-1) -> MatMul(., V)
//     d a constant (dynamo) or Pow(Cast(Gather(Shape(Q), 3)), 0.5), which
//     the planner folds per input-shape signature (the fused node's divisor
//     input, read when planning).
// Covered: either operand order of Add and Mul, a constant scalar Mul on
// Q and/or Kt, one Mul by a constant scalar or Div by a constant or
// shape-derived scalar on the scores, no mask, and the IsNaN/Where pair or
// none. Every value inside the match must be read by the match alone and be
// no graph output, so nothing else sees an intermediate that disappears.
// Scaling Q and K by sqrt(c) each and the scores by c are the same product;
// only the float rounding of the intermediate differs.
//
// The heads' layout. Both exporters split the projections into heads as
//   Q, V: Reshape [B, S, H, D] -> Transpose(0,2,1,3) -> [B, H, S, D]
//   K:    Reshape [B, S, H, D] -> Transpose(0,2,3,1) -> Kt [B, H, D, S]
//   O:    [B, H, Sq, Dv] -> Transpose(0,2,1,3) -> Reshape [B, Sq, H*Dv]
// (TorchScript's Q, Kt, V and O; dynamo's Q, V and O, its K taking a detour
// through Reshapes that stays). Each Transpose is a full copy of the
// activation and a kernel launch; the kernels read and write rows at any
// stride (k_attn_args' row strides), so the pass takes a Transpose with
// exactly that perm on Q (under the scalar Mul), on Kt and on V when the
// match alone reads its output, and feeds the node the 4-D value before it;
// and when a Transpose(0,2,1,3) alone reads the node's output, the node
// writes [B, Sq, H, Dv] itself, in the Transpose's place and as its output
// value. The node records what it absorbed as int attributes q_perm,
// k_perm, v_perm, o_perm (1: absorbed; eng_attn__analyse then reads the
// operand, or lays out the output, through that perm). GPT's Q stays when
// the divisor's Shape reads it too.
//
// CPU path: per (batch, head) two OpenBLAS GEMMs around a max-subtracted
// softmax (sums in double) over a scratch [Sq, Sk] block the node keeps.
#include "engine/ops/attn/attn.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph/graph_internal.h"
#include "engine/ops/ops_common.h"

// --- the pass

// Readers of each value: CSR over (node) lists, built once per pass.
typedef struct readers {
  int *start;  // per value, n_values + 1 entries
  int *node;
} readers;

// Nodes already marked dead (folded by an earlier pass) read nothing.
static int readers_build(const eng_graph *g, const unsigned char *dead, readers *r) {
  size_t nv = eng_graph_n_values(g), nn = eng_graph_n_nodes(g), total = 0;
  r->start = calloc(nv + 2, sizeof *r->start);
  for (size_t i = 0; r->start && i < nn; i++) {
    if (dead[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) r->start[n->in[k] + 1]++, total++;
  }
  r->node = malloc((total + 1) * sizeof *r->node);
  if (!r->start || !r->node) return -1;
  for (size_t v = 0; v < nv; v++) r->start[v + 1] += r->start[v];
  int *fill = calloc(nv + 1, sizeof *fill);
  if (!fill) return -1;
  for (size_t i = 0; i < nn; i++) {
    if (dead[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) r->node[r->start[n->in[k]] + fill[n->in[k]]++] = (int)i;
  }
  free(fill);
  return 0;
}

static void readers_free(readers *r) {
  free(r->start);
  free(r->node);
}

static int n_readers(const readers *r, int v) { return r->start[v + 1] - r->start[v]; }

// The node that produces v, or NULL (an input or a constant).
static const eng_node *producer(const eng_graph *g, int v, int *idx) {
  if (v < 0) return NULL;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  if (x->kind != ENG_VALUE_NODE) return NULL;
  if (idx) *idx = x->index;
  return eng_graph_node(g, (size_t)x->index);
}

static int is(const eng_node *n, const char *op, int n_in) {
  return n && strcmp(n->op_type, op) == 0 && n->n_in == n_in && n->n_out == 1 && n->out[0] >= 0;
}

// v is an intermediate the match may remove: read once, by the match, and no graph output.
static int private_value(const eng_graph *g, const readers *r, int v, int uses) {
  return v >= 0 && n_readers(r, v) == uses && !eng_graph__is_output(g, v);
}

// A float constant with one element and rank <= 1: Mul or Div by it never
// changes the other operand's shape (every operand here has rank >= 2).
static int const_scalar(const eng_graph *g, int v, double *x) {
  if (v < 0) return 0;
  const eng_value *c = eng_graph_value(g, (size_t)v);
  if (c->kind != ENG_VALUE_CONST || c->dt != DT_FP32 || c->ndims > 1 ||
      eng_numel(c->ndims, c->dims) != 1)
    return 0;
  *x = ((const float *)c->data)[0];
  return 1;
}

// v is computed from constants and input shapes alone (never input data),
// so the planner folds it for every signature.
static int shape_derived(const eng_graph *g, int v, int depth) {
  if (v < 0 || depth > 16) return 0;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  if (x->kind == ENG_VALUE_CONST) return 1;
  if (x->kind != ENG_VALUE_NODE) return 0;
  const eng_node *n = eng_graph_node(g, (size_t)x->index);
  if (strcmp(n->op_type, "Shape") == 0) return 1;
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] >= 0 && !shape_derived(g, n->in[k], depth + 1)) return 0;
  return 1;
}

// v looks like the scores: a MatMul's output, or a Mul/Div of one.
static int scores_like(const eng_graph *g, int v) {
  const eng_node *n = producer(g, v, NULL);
  if (is(n, "MatMul", 2)) return 1;
  if (!is(n, "Mul", 2) && !is(n, "Div", 2)) return 0;
  return is(producer(g, n->in[0], NULL), "MatMul", 2) ||
         (n->op_type[0] == 'M' && is(producer(g, n->in[1], NULL), "MatMul", 2));
}

// One match, found from its Softmax.
typedef struct match {
  int q, kt, v, mask, div;  // the fused node's inputs (-1: none)
  double scale;
  int nan_zero;
  int perm[4];        // Transposes absorbed: q, k, v, o (attn.h's q_perm...)
  int last;           // the final MatMul, or the Transpose after it: rewritten into the fused node
  int dead[16], n_dead;  // the other nodes of the match
} match;

static const int64_t PERM_ROWS[4] = {0, 2, 1, 3};  // Q, V and O: [B, S, H, D] <-> [B, H, S, D]
static const int64_t PERM_KT[4] = {0, 2, 3, 1};    // K: [B, S, H, D] -> Kt [B, H, D, S]

// v is a Transpose's output with exactly perm, read by the match alone:
// returns the Transpose's input (the node joins the match), else v.
static int untranspose(const eng_graph *g, const readers *r, int v, const int64_t *perm, int *flag,
                       match *m) {
  int ti;
  const eng_node *t = producer(g, v, &ti);
  if (!is(t, "Transpose", 1) || t->in[0] < 0 || !private_value(g, r, v, 1)) return v;
  const eng_attr *pa = eng_node_attr(t, "perm");
  if (!pa || pa->n_ints != 4) return v;
  for (int k = 0; k < 4; k++)
    if (pa->ints[k] != perm[k]) return v;
  *flag = 1;
  m->dead[m->n_dead++] = ti;
  return t->in[0];
}

// The final MatMul's output read by one Transpose(0,2,1,3) alone: that
// Transpose becomes the fused node (writing its layout, as its output), the
// MatMul joins the match.
static void absorb_output(const eng_graph *g, const readers *r, match *m) {
  const eng_node *last = eng_graph_node(g, (size_t)m->last);
  int y = last->out[0];
  if (!private_value(g, r, y, 1)) return;
  int ti = r->node[r->start[y]];
  const eng_node *t = eng_graph_node(g, (size_t)ti);
  const eng_attr *pa = eng_node_attr(t, "perm");
  if (!is(t, "Transpose", 1) || t->in[0] != y || !pa || pa->n_ints != 4) return;
  for (int k = 0; k < 4; k++)
    if (pa->ints[k] != PERM_ROWS[k]) return;
  m->perm[3] = 1;
  m->dead[m->n_dead++] = m->last;
  m->last = ti;
}

// Strips a Mul by a constant scalar off operand v of the first MatMul.
static int unscale(const eng_graph *g, const readers *r, int v, match *m) {
  int pi;
  const eng_node *n = producer(g, v, &pi);
  double c;
  if (!is(n, "Mul", 2) || !private_value(g, r, v, 1)) return v;
  for (int s = 0; s < 2; s++)
    if (const_scalar(g, n->in[1 - s], &c)) {
      m->scale *= c;
      m->dead[m->n_dead++] = pi;
      return n->in[s];
    }
  return v;
}

static int match_at(const eng_graph *g, const readers *r, const unsigned char *dead, size_t si,
                    match *m) {
  const eng_node *sm = eng_graph_node(g, si);
  memset(m, 0, sizeof *m);
  m->mask = m->div = -1;
  m->scale = 1.0;
  if (!is(sm, "Softmax", 1)) return 0;
  const eng_attr *ax = eng_node_attr(sm, "axis");
  if (ax ? ax->i != -1 : eng_graph_opset(g) < 13) return 0;  // the last axis, whatever the rank
  m->dead[m->n_dead++] = (int)si;
  // after: MatMul(P, V), or MatMul(Where(IsNaN(P), 0, P), V)
  int p = sm->out[0], pv = p;
  if (private_value(g, r, p, 2)) {
    const eng_node *a = eng_graph_node(g, (size_t)r->node[r->start[p]]);
    const eng_node *b = eng_graph_node(g, (size_t)r->node[r->start[p] + 1]);
    int ai = r->node[r->start[p]], bi = r->node[r->start[p] + 1];
    if (is(b, "IsNaN", 1)) {
      const eng_node *t = a;
      a = b, b = t;
      int ti = ai;
      ai = bi, bi = ti;
    }
    double zero;
    if (!is(a, "IsNaN", 1) || !is(b, "Where", 3) || ai == bi) return 0;
    if (b->in[0] != a->out[0] || b->in[2] != p || !private_value(g, r, a->out[0], 1) ||
        !const_scalar(g, b->in[1], &zero) || zero != 0.0)
      return 0;
    m->nan_zero = 1;
    m->dead[m->n_dead++] = ai;
    m->dead[m->n_dead++] = bi;
    pv = b->out[0];
  }
  if (!private_value(g, r, pv, 1)) return 0;
  int li = r->node[r->start[pv]];
  const eng_node *last = eng_graph_node(g, (size_t)li);
  if (!is(last, "MatMul", 2) || last->in[0] != pv || last->in[1] == pv) return 0;
  m->last = li;
  m->v = last->in[1];
  // before: [Add(scores, mask)] on [Mul(., c) | Div(., d)] on MatMul(Q', Kt')
  int x = sm->in[0], xi;
  const eng_node *n = producer(g, x, &xi);
  if (!private_value(g, r, x, 1) || !n) return 0;
  if (is(n, "Add", 2)) {
    int s = -1;
    for (int k = 0; k < 2 && s < 0; k++)
      if (scores_like(g, n->in[k]) && n->in[k] != n->in[1 - k]) s = k;
    if (s < 0) return 0;
    m->mask = n->in[1 - s];
    m->dead[m->n_dead++] = xi;
    x = n->in[s];
    if (!private_value(g, r, x, 1) || !(n = producer(g, x, &xi))) return 0;
  }
  double c;
  if (is(n, "Mul", 2) || is(n, "Div", 2)) {
    int div = n->op_type[0] == 'D', s = -1;
    for (int k = 0; k < (div ? 1 : 2) && s < 0; k++) {
      const eng_node *o = producer(g, n->in[k], NULL);
      if (is(o, "MatMul", 2)) s = k;
    }
    if (s < 0) return 0;
    int f = n->in[1 - s];
    if (const_scalar(g, f, &c)) {
      if (div && c == 0.0) return 0;  // leave x / 0 to the unfused graph
      m->scale = div ? 1.0 / c : c;
    } else if (div && shape_derived(g, f, 0)) {
      m->div = f;
    } else {
      return 0;
    }
    m->dead[m->n_dead++] = xi;
    x = n->in[s];
    if (!private_value(g, r, x, 1) || !(n = producer(g, x, &xi))) return 0;
  }
  if (!is(n, "MatMul", 2)) return 0;
  m->dead[m->n_dead++] = xi;
  m->q = unscale(g, r, n->in[0], m);
  m->kt = unscale(g, r, n->in[1], m);
  m->q = untranspose(g, r, m->q, PERM_ROWS, &m->perm[0], m);
  m->kt = untranspose(g, r, m->kt, PERM_KT, &m->perm[1], m);
  m->v = untranspose(g, r, m->v, PERM_ROWS, &m->perm[2], m);
  absorb_output(g, r, m);
  for (int k = 0; k < m->n_dead; k++)
    if (dead[m->dead[k]]) return 0;
  return !dead[m->last] && isfinite(m->scale);
}

static const char *const PERM_ATTR[4] = {"q_perm", "k_perm", "v_perm", "o_perm"};
enum { N_ATTRS = 6 };  // scale, nan_zero, the four perm flags

// Rewrites the match's last node (the final MatMul, or the Transpose that
// alone read it) into the fused node.
static int rewrite(eng_graph *g, const match *m, err *e) {
  eng_node *n = eng_graph__node_mut(g, (size_t)m->last);
  int *in = realloc(n->in, 5 * sizeof *in);
  eng_attr *at = calloc(N_ATTRS, sizeof *at);
  char *op = strdup(ENG_ATTN_OP), *names[N_ATTRS] = {strdup("scale"), strdup("nan_zero")};
  int oom = !in || !at || !op;
  for (int k = 0; k < N_ATTRS; k++) {
    if (k >= 2) names[k] = strdup(PERM_ATTR[k - 2]);
    oom = oom || !names[k];
  }
  if (oom) {
    if (in) n->in = in;
    free(at), free(op);
    for (int k = 0; k < N_ATTRS; k++) free(names[k]);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory fusing attention");
  }
  in[0] = m->q, in[1] = m->kt, in[2] = m->v, in[3] = m->mask, in[4] = m->div;
  n->in = in;
  n->n_in = 5;
  free(n->op_type);
  n->op_type = op;
  eng_graph__free_attrs(n);  // MatMul has none; the Transpose its perm
  for (int k = 0; k < N_ATTRS; k++) at[k].name = names[k], at[k].type = 2;  // AttributeProto INT
  at[0].type = 1, at[0].f = (float)m->scale;                                // FLOAT
  at[1].i = m->nan_zero;
  for (int k = 0; k < 4; k++) at[2 + k].i = m->perm[k];
  n->attrs = at;
  n->n_attrs = N_ATTRS;
  return 0;
}

size_t eng_attn_n_transposes(const eng_graph *g) {
  size_t c = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    const eng_node *n = eng_graph_node(g, i);
    if (strcmp(n->op_type, ENG_ATTN_OP) != 0) continue;
    for (int k = 0; k < 4; k++) c += op_attr_int(n, PERM_ATTR[k], 0) != 0;
  }
  return c;
}

int eng_attn__fuse(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  if (eng_graph__opts(g)->no_fuse_attention) return 0;
  readers r = {0};
  if (readers_build(g, dead, &r) != 0) {
    readers_free(&r);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  int rc = 0;
  size_t fused = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g) && !rc; i++) {
    match m;
    if (dead[i] || !match_at(g, &r, dead, i, &m)) continue;
    rc = rewrite(g, &m, e);
    for (int k = 0; !rc && k < m.n_dead; k++) dead[m.dead[k]] = 1;
    if (!rc) fused++;
  }
  readers_free(&r);
  if (fused) *changed = 1;
  eng_graph__set_n_attention(g, fused);
  return rc;
}

// --- the op: parsing and shapes

// The perm flags go to ints[0..3] (q, k, v, o: attn.c's PERM_ATTR), the
// packed-QKV flag and its Reshapes' allowzero (attn_qkv.c) to ints[4..5].
static int parse_attn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->alpha = op_attr_float(n, "scale", 1.0f);
  p->nan_zero = op_attr_int(n, "nan_zero", 0) != 0;
  p->n_ints = 6;
  for (int k = 0; k < 4; k++) p->ints[k] = op_attr_int(n, PERM_ATTR[k], 0) != 0;
  p->ints[4] = op_attr_int(n, ENG_ATTN_QKV_PACKED, 0) != 0;
  p->ints[5] = op_attr_int(n, ENG_ATTN_QKV_ALLOWZERO, 0) != 0;
  return 0;
}

// The view nd dims bd at element strides bs, read through perm when not
// NULL (dim i of the result is the view's dim perm[i]).
static void logical(int nd, const int64_t *bd, const int64_t *bs, const int64_t *perm,
                    int64_t *dims, int64_t *str) {
  for (int i = 0; i < nd; i++) {
    int src = perm ? (int)perm[i] : i;
    dims[i] = bd[src], str[i] = bs[src];
  }
}

// A tensor's own dims at packed strides.
static void packed_strides(const eng_tensor *t, int64_t *str) {
  int64_t acc = 1;
  for (int i = t->ndims - 1; i >= 0; i--) str[i] = acc, acc *= t->dims[i];
}

static const char *const SWITCH_HINT =
    " (the fused attention cannot; parameters { key: \"fuse_attention\" value: { string_value: "
    "\"0\" } } leaves the graph unfused)";
static const char *const QKV_HINT =
    " (parameters { key: \"merge_qkv\" value: { string_value: \"0\" } } keeps the projections "
    "apart)";

// Packed mode (attn.h): in[0] is T [B, S, 3N] (in[1] and in[2] the same
// value) and in[5..7] the shapes the exporter's Reshapes of Q, K and V
// asked for, resolved here by Reshape's rules against [B, S, N]; each must
// be [B, S, H, D] with H*D = N, the same for all three. Operand k is then
// the view [B, S, H, D] of T at element offset k*N, rows 3N apart.
static int packed_views(const eng_op_params *p, const eng_tensor *in, int n_in,
                        int64_t bd[3][ENG_MAX_DIMS], int64_t bs[3][ENG_MAX_DIMS], int64_t *off,
                        err *e) {
  const eng_tensor *t = &in[0];
  if (n_in < 8 || t->ndims != 3 || t->dims[2] % 3 != 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "attention: packed Q/K/V of rank %d, not [B, S, 3*H*D] with its three shapes%s",
                   t->ndims, QKV_HINT);
  for (int k = 1; k < 3; k++)
    if (in[k].ndims != 3 || memcmp(in[k].dims, t->dims, 3 * sizeof *t->dims) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "attention: packed operands differ in shape");
  int64_t b = t->dims[0], sl = t->dims[1], c = t->dims[2], n = c / 3;
  int64_t first[4] = {0};
  for (int k = 0; k < 3; k++) {
    const eng_tensor *sh = &in[5 + k];
    if (sh->dt != DT_INT64 || eng_numel(sh->ndims, sh->dims) != 4 || !sh->data)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "attention: packed Q/K/V: shape %d is not 4 INT64 known when planning", k);
    const int64_t *want = sh->data;
    int64_t r[4], known = 1, src[3] = {b, sl, n};
    int infer = -1;
    for (int i = 0; i < 4; i++) {
      r[i] = want[i];
      if (r[i] == 0 && !p->ints[5]) {
        if (i >= 3)
          return err_set(e, ERR_INVALID_ARGUMENT,
                         "attention: packed Q/K/V: shape copies dim 3 of a rank-3 input");
        r[i] = src[i];
      }
      if (r[i] == -1 && infer < 0) infer = i;
      else if (r[i] < 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "attention: packed Q/K/V: bad shape entry %lld",
                       (long long)r[i]);
      else known *= r[i];
    }
    if (infer >= 0) r[infer] = known ? b * sl * n / known : 0;
    if (r[0] != b || r[1] != sl || r[2] * r[3] != n || (k && memcmp(r, first, sizeof r) != 0))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "attention: packed Q/K/V: heads [%lld, %lld, %lld, %lld] from [%lld, %lld, %lld]%s",
                     (long long)r[0], (long long)r[1], (long long)r[2], (long long)r[3],
                     (long long)b, (long long)sl, (long long)n, QKV_HINT);
    memcpy(first, r, sizeof r);
  }
  for (int k = 0; k < 3; k++) {
    memcpy(bd[k], first, sizeof first);
    bs[k][0] = sl * c, bs[k][1] = c, bs[k][2] = first[3], bs[k][3] = 1;
    off[k] = (int64_t)k * n;
  }
  return 0;
}

int eng_attn__analyse(const eng_op_params *p, const eng_tensor *in, int n_in, eng_attn_shape *s,
                      eng_tensor *y, err *e) {
  memset(s, 0, sizeof *s);
  static const char *names[] = {"Q", "Kt", "V", "mask", "divisor"};
  for (int k = 0; k < 3; k++) {
    TRY(eng_ops__need_f32(&in[k], names[k], e));
    if (in[k].ndims < 2)
      return err_set(e, ERR_UNIMPLEMENTED, "attention: %s has rank %d, not >= 2%s", names[k],
                     in[k].ndims, SWITCH_HINT);
  }
  const eng_tensor *mk = op_given(in, n_in, 3) ? &in[3] : NULL;
  // Q, Kt and V as the product reads them: dims and element strides, through
  // an absorbed Transpose's perm where the node has one
  int perm[4] = {0}, packed = p->n_ints >= 6 && p->ints[4] != 0;
  for (int k = 0; k < 4; k++) perm[k] = p->n_ints >= 4 && p->ints[k] != 0;
  // each operand's own view (dims, strides; rank[k]) before its perm
  int64_t bd[3][ENG_MAX_DIMS], bs[3][ENG_MAX_DIMS];
  int rank[3];
  if (packed) {
    if (!perm[0] || !perm[1] || !perm[2])
      return err_set(e, ERR_INVALID_ARGUMENT, "attention: packed Q/K/V without the head transposes");
    TRY(packed_views(p, in, n_in, bd, bs, s->off, e));
    rank[0] = rank[1] = rank[2] = 4;
  } else {
    for (int k = 0; k < 3; k++) {
      memcpy(bd[k], in[k].dims, sizeof bd[k]);
      packed_strides(&in[k], bs[k]);
      rank[k] = in[k].ndims;
    }
  }
  int64_t ld[3][ENG_MAX_DIMS], ls[3][ENG_MAX_DIMS];
  for (int k = 0; k < 3; k++) {
    if (perm[k] && rank[k] != 4)
      return err_set(e, ERR_INVALID_ARGUMENT, "attention: %s has rank %d, not 4 (its head transpose)",
                     names[k], rank[k]);
    logical(rank[k], bd[k], bs[k], perm[k] ? (k == 1 ? PERM_KT : PERM_ROWS) : NULL, ld[k], ls[k]);
  }
  int rq = rank[0], rk = rank[1], rv = rank[2];
  s->sq = ld[0][rq - 2], s->d = ld[0][rq - 1], s->q_ss = ls[0][rq - 2];
  s->sk = ld[1][rk - 1], s->k_sd = ls[1][rk - 2], s->k_sk = ls[1][rk - 1];
  s->dv = ld[2][rv - 1], s->v_ss = ls[2][rv - 2];
  if (ld[1][rk - 2] != s->d)
    return err_set(e, ERR_INVALID_ARGUMENT, "attention: inner dimensions differ: %lld vs %lld",
                   (long long)s->d, (long long)ld[1][rk - 2]);
  if (ld[2][rv - 2] != s->sk)
    return err_set(e, ERR_INVALID_ARGUMENT, "attention: inner dimensions differ: %lld vs %lld",
                   (long long)s->sk, (long long)ld[2][rv - 2]);
  int nb = 0;
  for (int k = 0; k < 4; k++)
    if (k < 3 || mk) {
      int r = (k < 3 ? rank[k] : in[k].ndims) - 2;
      if (r > nb) nb = r;
    }
  if (nb + 2 > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "attention: rank %d exceeds %d", nb + 2, ENG_MAX_DIMS);
  if (perm[3] && nb != 2)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "attention: %d batch dimensions, not 2, for the [B, Sq, H, Dv] output", nb);
  s->nb = nb;
  // padded dims of every operand (mask included, its last two dims apart),
  // and the strides of Q, Kt and V padded alike (a padded dim has size 1)
  int64_t pd[4][ENG_MAX_DIMS], ps[3][ENG_MAX_DIMS];
  for (int k = 0; k < 4; k++) {
    if (k == 3 && !mk) {
      for (int i = 0; i < nb + 2; i++) pd[k][i] = 1;
      continue;
    }
    if (k == 3) {
      op_pad_dims(&in[k], nb + 2, pd[k]);
      continue;
    }
    int lead = nb + 2 - rank[k];
    for (int i = 0; i < nb + 2; i++) {
      pd[k][i] = i < lead ? 1 : ld[k][i - lead];
      ps[k][i] = i < lead ? 0 : ls[k][i - lead];
    }
  }
  if (mk) {
    TRY(eng_ops__need_f32(mk, "mask", e));
    int64_t a = pd[3][nb], b = pd[3][nb + 1];
    if ((a != 1 && a != s->sq) || (b != 1 && b != s->sk))
      return err_set(e, ERR_UNIMPLEMENTED,
                     "attention: mask [.., %lld, %lld] does not broadcast to the scores [.., %lld, %lld]%s",
                     (long long)a, (long long)b, (long long)s->sq, (long long)s->sk, SWITCH_HINT);
    s->has_mask = 1;
    s->m_sk = b == 1 ? 0 : 1;
    // the planner proved the rows equal (plan.c mask_rows_shared): one row serves them all
    s->m_sq = a == 1 || p->mask_rows_same ? 0 : b;
  }
  for (int i = 0; i < nb; i++) {
    int64_t d = 1;
    for (int k = 0; k < 4; k++)
      if (pd[k][i] != 1) {
        if (d != 1 && pd[k][i] != d)
          return err_set(e, ERR_INVALID_ARGUMENT,
                         "attention: batch dimensions %lld and %lld do not broadcast",
                         (long long)d, (long long)pd[k][i]);
        d = pd[k][i];
      }
    s->batch[i] = d;
  }
  TRY(eng_ops__checked_numel(nb, s->batch, "attention batch", e));
  int64_t *st[5] = {s->qs, s->ks, s->vs, s->ms, s->os};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < nb; i++) st[k][i] = pd[k][i] == 1 ? 0 : ps[k][i];
  // the mask and a plain output are packed; an output in the absorbed
  // Transpose's place is [B, Sq, H, Dv]
  int64_t acc = pd[3][nb] * pd[3][nb + 1];
  for (int i = nb - 1; i >= 0; i--) {
    s->ms[i] = pd[3][i] == 1 ? 0 : acc;
    acc *= pd[3][i];
  }
  if (perm[3]) {
    s->o_ss = s->batch[1] * s->dv;
    s->os[0] = s->batch[0] == 1 ? 0 : s->sq * s->o_ss;
    s->os[1] = s->batch[1] == 1 ? 0 : s->dv;
  } else {
    s->o_ss = s->dv;
    acc = s->sq * s->dv;
    for (int i = nb - 1; i >= 0; i--) {
      s->os[i] = s->batch[i] == 1 ? 0 : acc;
      acc *= s->batch[i];
    }
  }
  double scale = p->alpha;
  if (op_given(in, n_in, 4)) {
    const eng_tensor *dv = &in[4];
    TRY(eng_ops__need_f32(dv, "divisor", e));
    if (eng_numel(dv->ndims, dv->dims) != 1 || dv->ndims > nb + 2)
      return err_set(e, ERR_INVALID_ARGUMENT, "attention: the divisor must be a scalar");
    if (!dv->data)
      return err_set(e, ERR_INVALID_ARGUMENT, "attention: the divisor is not known when planning");
    scale /= ((const float *)dv->data)[0];
  }
  s->scale = (float)scale;
  if (y) {
    for (int i = 0; i < nb; i++) y->dims[i] = s->batch[i];
    y->dims[nb] = s->sq;
    y->dims[nb + 1] = s->dv;
    if (perm[3])  // [B, Sq, H, Dv]
      y->dims[1] = s->sq, y->dims[2] = s->batch[1];
    y->ndims = nb + 2;
    y->dt = DT_FP32;
    TRY(eng_ops__checked_numel(y->ndims, y->dims, "attention output", e));
  }
  return 0;
}

int eng_attn__kernel_args(const eng_attn_shape *s, k_attn_args *a, err *e) {
  // merge batch dims i-1 and i where every operand steps through them as one
  int64_t dims[ENG_MAX_DIMS], str[5][ENG_MAX_DIMS];
  const int64_t *src[5] = {s->qs, s->ks, s->vs, s->ms, s->os};
  int n = 0;
  for (int i = 0; i < s->nb; i++) {
    if (s->batch[i] == 1) continue;
    int merge = n > 0;
    for (int k = 0; k < 5 && merge; k++)
      merge = str[k][n - 1] == src[k][i] * s->batch[i];
    if (merge) {
      dims[n - 1] *= s->batch[i];
      for (int k = 0; k < 5; k++) str[k][n - 1] = src[k][i];
      continue;
    }
    dims[n] = s->batch[i];
    for (int k = 0; k < 5; k++) str[k][n] = src[k][i];
    n++;
  }
  if (n > 2)
    return err_set(e, ERR_UNIMPLEMENTED,
                   "attention: %d batch dimensions that do not merge into two%s", n, SWITCH_HINT);
  memset(a, 0, sizeof *a);
  a->b = n == 2 ? dims[0] : 1;
  a->h = n >= 1 ? dims[n - 1] : 1;
  int64_t *sb[5] = {&a->q_sb, &a->k_sb, &a->v_sb, &a->m_sb, &a->o_sb};
  int64_t *sh[5] = {&a->q_sh, &a->k_sh, &a->v_sh, &a->m_sh, &a->o_sh};
  for (int k = 0; k < 5; k++) {
    *sb[k] = n == 2 ? str[k][0] : 0;
    *sh[k] = n >= 1 ? str[k][n - 1] : 0;
  }
  a->sq = s->sq, a->sk = s->sk, a->d = s->d, a->dv = s->dv;
  a->q_ss = s->q_ss, a->k_sd = s->k_sd, a->k_sk = s->k_sk, a->v_ss = s->v_ss, a->o_ss = s->o_ss;
  a->m_sq = s->m_sq, a->m_sk = s->m_sk;
  a->scale = s->scale;
  return 0;
}

static int infer_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  eng_attn_shape s;
  return eng_attn__analyse(p, in, n_in, &s, &out[0], e);
}

// --- the op: CPU path

// One head: S = scale * Q Kt (+ mask), softmax by rows in place, O = S V.
// Rows at their strides: the leading dimensions; Kt stored key-major (an
// absorbed K Transpose: k_sd 1) is K [Sk, D] with rows k_sk apart, taken
// transposed by the GEMM itself.
static void head(float *o, const float *q, const float *kt, const float *v, const float *mask,
                 const eng_attn_shape *s, int nan_zero, float *sc) {
  int64_t sq = s->sq, sk = s->sk, d = s->d, dv = s->dv;
  int kmaj = s->k_sk != 1;  // analyse gives k_sk 1 (packed Kt) or k_sd 1 (key-major)
  int64_t ldk = kmaj ? s->k_sk : s->k_sd;
  // one head dim (d 1, one head) makes key-major K look packed with k_sd 1:
  // that row stride is never stepped, but OpenBLAS wants it >= Sk
  if (!kmaj && ldk < sk) ldk = sk;
  if (d > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, kmaj ? CblasTrans : CblasNoTrans, (blasint)sq,
                (blasint)sk, (blasint)d, s->scale, q, (blasint)s->q_ss, kt, (blasint)ldk, 0.0f,
                sc, (blasint)sk);
  else
    memset(sc, 0, (size_t)(sq * sk) * sizeof *sc);
  for (int64_t i = 0; i < sq; i++) {
    float *row = sc + i * sk;
    if (mask)
      for (int64_t j = 0; j < sk; j++) row[j] += mask[i * s->m_sq + j * s->m_sk];
    // max-subtracted; undefined (NaN, as Softmax gives) when the max is not
    // finite or a score is NaN, then 0 with nan_zero (IsNaN/Where)
    float mx = -INFINITY;
    int bad = 0;
    for (int64_t j = 0; j < sk; j++) {
      if (isnan(row[j])) bad = 1;
      else if (row[j] > mx) mx = row[j];
    }
    if (bad || !isfinite(mx)) {
      float fill = nan_zero ? 0.0f : NAN;
      for (int64_t j = 0; j < sk; j++) row[j] = fill;
      continue;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < sk; j++) {
      row[j] = expf(row[j] - mx);
      sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < sk; j++) row[j] *= inv;
  }
  if (sk > 0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)sq, (blasint)dv, (blasint)sk,
                1.0f, sc, (blasint)sk, v, (blasint)s->v_ss, 0.0f, o, (blasint)s->o_ss);
  } else {
    for (int64_t i = 0; i < sq; i++) memset(o + i * s->o_ss, 0, (size_t)dv * sizeof *o);
  }
}

// sc: s.sq * s.sk floats of scratch.
static void run_with(const eng_op_params *p, const eng_tensor *in, const eng_attn_shape *sp,
                     eng_tensor *out, float *sc) {
  const eng_attn_shape s = *sp;
  const float *q = (const float *)in[0].data + s.off[0], *kt = (const float *)in[1].data + s.off[1],
              *v = (const float *)in[2].data + s.off[2];
  const float *m = s.has_mask ? in[3].data : NULL;
  float *o = out[0].data;
  int64_t total = 1;
  for (int i = 0; i < s.nb; i++) total *= s.batch[i];
  if (!total || !s.sq || !s.dv) return;
  int64_t idx[ENG_MAX_DIMS] = {0};
  for (int64_t t = 0; t < total; t++) {
    int64_t qo = 0, ko = 0, vo = 0, mo = 0, oo = 0;
    for (int i = 0; i < s.nb; i++) {
      qo += idx[i] * s.qs[i], ko += idx[i] * s.ks[i], vo += idx[i] * s.vs[i];
      mo += idx[i] * s.ms[i], oo += idx[i] * s.os[i];
    }
    head(o + oo, q + qo, kt + ko, v + vo, m ? m + mo : NULL, &s, p->nan_zero, sc);
    for (int i = s.nb - 1; i >= 0; i--) {
      if (++idx[i] < s.batch[i]) break;
      idx[i] = 0;
    }
  }
}

static int run_attn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                    int n_out, err *e) {
  (void)n_out;
  eng_attn_shape s;
  TRY(eng_attn__analyse(p, in, n_in, &s, NULL, e));
  size_t n = (size_t)(s.sq * s.sk);
  float *sc = malloc((n ? n : 1) * sizeof *sc);
  if (!sc) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory (attention scores)");
  run_with(p, in, &s, out, sc);
  free(sc);
  return 0;
}

// The plan's path: the scores' scratch lives with the node, grown to the
// largest shape seen, so a run allocates only when a signature grows it.
typedef struct attn_state {
  float *sc;
  size_t cap;
} attn_state;

static int run_attn_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in,
                          eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  attn_state *a = st->node;
  if (!a) {
    if (!(a = calloc(1, sizeof *a))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    st->node = a;
  }
  eng_attn_shape s;
  TRY(eng_attn__analyse(p, in, n_in, &s, NULL, e));
  size_t n = (size_t)(s.sq * s.sk);
  if (n > a->cap || !a->sc) {
    free(a->sc);
    a->cap = 0;
    if (!(a->sc = malloc((n ? n : 1) * sizeof *a->sc)))
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory (attention scores)");
    a->cap = n;
  }
  run_with(p, in, &s, out, a->sc);
  return 0;
}

static void destroy_attn(void *node_state) {
  attn_state *a = node_state;
  if (a) free(a->sc);
  free(a);
}

const eng_op_def eng_ops__attn[] = {
    {ENG_ATTN_OP, 3, 8, 1, 1, 0, parse_attn, infer_attn, run_attn,
     ENG_IN(4) | ENG_IN(5) | ENG_IN(6) | ENG_IN(7), run_attn_state, destroy_attn},
    {"Attention", 3, 7, 1, 4, 0, eng_ops__parse_onnx_attn, eng_ops__infer_onnx_attn, eng_ops__run_onnx_attn, 0,
     NULL, NULL},
    {"TensorScatter", 2, 3, 1, 1, ENG_OP_INPLACE, eng_ops__parse_tensor_scatter, eng_ops__infer_tensor_scatter,
     eng_ops__run_tensor_scatter, 0, NULL, NULL},
    {"LinearAttention", 3, 6, 1, 2, 0, eng_ops__parse_linear_attn, eng_ops__infer_linear_attn,
     eng_ops__run_linear_attn, 0, NULL, NULL},
    {"RotaryEmbedding", 3, 4, 1, 1, ENG_OP_INPLACE, eng_ops__parse_rotary, eng_ops__infer_rotary, eng_ops__run_rotary,
     0, NULL, NULL},
};
const size_t eng_ops__n_attn = sizeof eng_ops__attn / sizeof eng_ops__attn[0];
