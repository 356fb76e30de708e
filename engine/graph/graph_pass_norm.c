// engine/graph/graph_pass_norm.c: load-time fusion of GELU and LayerNorm where an
// exporter wrote them as chains of elementwise ops (graph_internal.h). Each
// chain costs a kernel launch and a full pass over the activation per op
// (nine for a split LayerNorm, five to eight for a GELU); the fused Gelu and
// LayerNormalization ops read and write the tensor once, and on the GPU the
// tanh form then rides the GEMM epilogue (engine/ops/gemm/gemm_cuda.c).
//
// A chain is fused only when it computes exactly what the op computes:
// every constant is a scalar (rank 0, so no broadcast can change the output
// shape) equal to the op's constant up to FP32 rounding, every intermediate
// is read by the chain alone and is no graph output. Anything else (another
// constant, a second reader, a trailing axis that is not the last) is left
// as it was.
//
// GELU, exact:  y = 0.5 * x * (1 + erf(x / sqrt(2)))      (or x * (1/sqrt(2)))
// GELU, tanh:   y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//               (x^3 as Pow(x, 3) or x * x * x)
// with the outer product in any of the three orders exporters write:
//   x * (0.5 * a)   (x * a) * 0.5   (x * 0.5) * a     (a = 1 + erf/tanh(..))
// LayerNorm over the trailing axes (torch before opset 17, Keras, hand-made):
//   m = ReduceMean(x); d = x - m; v = ReduceMean(d^2); y = d / sqrt(v + eps) * g (+ b)
#include "engine/graph/graph_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SQRT2 1.41421356237309504880
#define SQRT_2_OVER_PI 0.79788456080286535588
#define GELU_TANH_C 0.044715

// The most nodes one chain spans (split LayerNorm: 9; tanh GELU: 10).
#define CHAIN_MAX 12

// ONNX AttributeProto types used by the fused nodes.
enum { ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3 };

// --- reading the graph

// The live node producing value v with the given op_type and input count, or -1.
static long producer(const eng_graph *g, const unsigned char *dead, int v, const char *op, int n_in) {
  long i = eng_graph__live_producer(g, dead, v, op);
  if (i < 0) return -1;
  const eng_node *n = eng_graph_node(g, (size_t)i);
  return n->n_in == n_in && n->n_out == 1 ? i : -1;
}

// Whether value v is a rank-0 FP32 constant equal to want (within rel, 0 for exactly).
static int scalar_is(const eng_graph *g, int v, double want, double rel) {
  if (v < 0) return 0;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  if (x->kind != ENG_VALUE_CONST || x->dt != DT_FP32 || x->ndims != 0 || !x->data) return 0;
  double got = *(const float *)x->data;
  return fabs(got - want) <= rel * fabs(want);
}

// FP32 constants of exporters are the nearest float to the real number; a
// few ulp more allow for a constant computed in float (1 / sqrt(2)).
#define REL_FP32 1e-6

// Of binary node n's two inputs, the one that is not `known` (-2 if neither is).
static int other_input(const eng_node *n, int known) {
  if (n->in[0] == known) return n->in[1];
  if (n->in[1] == known) return n->in[0];
  return -2;
}

// A chain being matched: its nodes, the last one first (the matchers add at
// most 10; over says one more did not fit, and the chain is not fused).
typedef struct chain {
  size_t node[CHAIN_MAX];
  int n, over;
} chain;

static void chain_add(chain *c, long i) {
  if (c->n < CHAIN_MAX) c->node[c->n++] = (size_t)i;
  else c->over = 1;
}

// Whether intermediate value v is read n times, all by the chain (the
// caller knows how many of its reads are the chain's), and is no graph output.
static int private_value(const eng_graph *g, const int *uses, int v, int n) {
  return v >= 0 && uses[v] == n && !eng_graph__is_output(g, v);
}

// --- rewriting

// Turns node i into `op` reading ins[0..n_in) with the given attributes
// (names and strings copied); it keeps its name, position and output, so
// every reader of the chain's result reads the fused op's instead.
static int rewrite_node(eng_graph *g, size_t i, const char *op, const int *ins, int n_in,
                        const eng_attr *attrs, int n_attrs, err *e) {
  eng_node *n = eng_graph__node_mut(g, i);
  char *op_copy = strdup(op);
  int *in = malloc((size_t)n_in * sizeof *in);
  eng_attr *at = calloc((size_t)n_attrs + 1, sizeof *at);
  int ok = op_copy && in && at;
  for (int k = 0; ok && k < n_attrs; k++) {
    at[k] = attrs[k];
    at[k].name = strdup(attrs[k].name);
    at[k].s = attrs[k].s ? strdup(attrs[k].s) : NULL;
    at[k].floats = NULL, at[k].ints = NULL, at[k].t = NULL;
    at[k].n_floats = 0, at[k].n_ints = 0;
    at[k].strings = NULL, at[k].n_strings = 0;
    ok = at[k].name && (!attrs[k].s || at[k].s);
  }
  if (!ok) {
    for (int k = 0; at && k < n_attrs; k++) free(at[k].name), free(at[k].s);
    free(at), free(in), free(op_copy);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory fusing node '%s'", n->name);
  }
  memcpy(in, ins, (size_t)n_in * sizeof *in);
  free(n->op_type);
  n->op_type = op_copy;
  free(n->in);
  n->in = in;
  n->n_in = n_in;
  eng_graph__free_attrs(n);
  n->attrs = at;
  n->n_attrs = n_attrs;
  return 0;
}

// Replaces chain c by one node: its first node becomes `op` (rewrite_node),
// the others die, and the read counts follow.
static int chain_fuse(eng_graph *g, const chain *c, unsigned char *dead, int *uses, const char *op,
                      const int *ins, int n_in, const eng_attr *attrs, int n_attrs, err *e) {
  for (int k = 0; k < c->n; k++) {  // the reads as they were, the fused node's included
    const eng_node *d = eng_graph_node(g, c->node[k]);
    for (int j = 0; j < d->n_in; j++)
      if (d->in[j] >= 0) uses[d->in[j]]--;
    if (k) dead[c->node[k]] = 1;
  }
  TRY(rewrite_node(g, c->node[0], op, ins, n_in, attrs, n_attrs, e));
  for (int j = 0; j < n_in; j++)
    if (ins[j] >= 0) uses[ins[j]]++;
  return 0;
}

// --- GELU

// x^3 as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x): adds its nodes to c.
static int match_cube(const eng_graph *g, const unsigned char *dead, const int *uses, int v, int x,
                      chain *c) {
  long p = producer(g, dead, v, "Pow", 2);
  if (p >= 0) {
    const eng_node *n = eng_graph_node(g, (size_t)p);
    if (n->in[0] != x || !scalar_is(g, n->in[1], 3.0, 0)) return 0;
    chain_add(c, p);
    return 1;
  }
  long m = producer(g, dead, v, "Mul", 2);
  if (m < 0) return 0;
  const eng_node *n = eng_graph_node(g, (size_t)m);
  int sq = other_input(n, x);
  long s = producer(g, dead, sq, "Mul", 2);
  if (s < 0 || !private_value(g, uses, sq, 1)) return 0;
  const eng_node *ns = eng_graph_node(g, (size_t)s);
  if (ns->in[0] != x || ns->in[1] != x) return 0;
  chain_add(c, m);
  chain_add(c, s);
  return 1;
}

// a = 1 + erf(x / sqrt2) (approx 0) or 1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))
// (approx 1), every intermediate private; adds a's nodes to c.
static int match_gelu_inner(const eng_graph *g, const unsigned char *dead, const int *uses, int a,
                            int x, chain *c, int *approx) {
  long add1 = producer(g, dead, a, "Add", 2);
  if (add1 < 0 || !private_value(g, uses, a, 1)) return 0;
  const eng_node *na = eng_graph_node(g, (size_t)add1);
  int core = scalar_is(g, na->in[0], 1.0, 0) ? na->in[1] : scalar_is(g, na->in[1], 1.0, 0) ? na->in[0] : -1;
  if (core < 0 || !private_value(g, uses, core, 1)) return 0;
  chain_add(c, add1);
  long erf = producer(g, dead, core, "Erf", 1);
  if (erf >= 0) {
    int t = eng_graph_node(g, (size_t)erf)->in[0];
    if (!private_value(g, uses, t, 1)) return 0;
    long dv = producer(g, dead, t, "Div", 2), mu = producer(g, dead, t, "Mul", 2);
    if (dv >= 0) {
      const eng_node *n = eng_graph_node(g, (size_t)dv);
      if (n->in[0] != x || !scalar_is(g, n->in[1], SQRT2, REL_FP32)) return 0;
      chain_add(c, dv);
    } else if (mu >= 0) {
      const eng_node *n = eng_graph_node(g, (size_t)mu);
      if (!scalar_is(g, other_input(n, x), 1.0 / SQRT2, REL_FP32)) return 0;
      chain_add(c, mu);
    } else {
      return 0;
    }
    chain_add(c, erf);
    *approx = 0;
    return 1;
  }
  long th = producer(g, dead, core, "Tanh", 1);
  if (th < 0) return 0;
  chain_add(c, th);
  int u = eng_graph_node(g, (size_t)th)->in[0];  // sqrt(2/pi) * s
  long mk = producer(g, dead, u, "Mul", 2);
  if (mk < 0 || !private_value(g, uses, u, 1)) return 0;
  const eng_node *nk = eng_graph_node(g, (size_t)mk);
  int s = scalar_is(g, nk->in[0], SQRT_2_OVER_PI, REL_FP32)   ? nk->in[1]
          : scalar_is(g, nk->in[1], SQRT_2_OVER_PI, REL_FP32) ? nk->in[0]
                                                               : -1;
  long as = producer(g, dead, s, "Add", 2);  // x + 0.044715 * x^3
  if (as < 0 || !private_value(g, uses, s, 1)) return 0;
  chain_add(c, mk);
  chain_add(c, as);
  int cc = other_input(eng_graph_node(g, (size_t)as), x);  // 0.044715 * x^3
  long mc = producer(g, dead, cc, "Mul", 2);
  if (mc < 0 || !private_value(g, uses, cc, 1)) return 0;
  const eng_node *nc = eng_graph_node(g, (size_t)mc);
  int cube = scalar_is(g, nc->in[0], GELU_TANH_C, REL_FP32)   ? nc->in[1]
             : scalar_is(g, nc->in[1], GELU_TANH_C, REL_FP32) ? nc->in[0]
                                                               : -1;
  if (cube < 0 || !private_value(g, uses, cube, 1)) return 0;
  chain_add(c, mc);
  if (!match_cube(g, dead, uses, cube, x, c)) return 0;
  *approx = 1;
  return 1;
}

// Whether Mul node `last` ends a GELU chain; fills c (last first), *x and *approx.
static int match_gelu(const eng_graph *g, const unsigned char *dead, const int *uses, size_t last,
                      chain *c, int *x, int *approx) {
  const eng_node *n = eng_graph_node(g, last);
  if (strcmp(n->op_type, "Mul") != 0 || n->n_in != 2 || n->n_out != 1) return 0;
  for (int side = 0; side < 2; side++) {
    int p = n->in[side], q = n->in[1 - side];
    long m = producer(g, dead, p, "Mul", 2);
    // (x * a) * 0.5 : p = x * a, q = 0.5; either operand of p may be x
    if (m >= 0 && scalar_is(g, q, 0.5, 0) && private_value(g, uses, p, 1)) {
      const eng_node *nm = eng_graph_node(g, (size_t)m);
      for (int k = 0; k < 2; k++) {
        c->n = 0;
        chain_add(c, (long)last);
        chain_add(c, m);
        if (match_gelu_inner(g, dead, uses, nm->in[1 - k], nm->in[k], c, approx)) {
          *x = nm->in[k];
          return 1;
        }
      }
    }
    if (m < 0 || !private_value(g, uses, p, 1)) continue;
    const eng_node *nm = eng_graph_node(g, (size_t)m);
    // x * (0.5 * a) : p = 0.5 * a, q = x
    int a = scalar_is(g, nm->in[0], 0.5, 0) ? nm->in[1] : scalar_is(g, nm->in[1], 0.5, 0) ? nm->in[0] : -1;
    if (a >= 0) {
      c->n = 0;
      chain_add(c, (long)last);
      chain_add(c, m);
      if (match_gelu_inner(g, dead, uses, a, q, c, approx)) {
        *x = q;
        return 1;
      }
    }
    // (x * 0.5) * a : p = x * 0.5, q = a
    int xx = scalar_is(g, nm->in[1], 0.5, 0) ? nm->in[0] : scalar_is(g, nm->in[0], 0.5, 0) ? nm->in[1] : -1;
    if (xx >= 0) {
      c->n = 0;
      chain_add(c, (long)last);
      chain_add(c, m);
      if (match_gelu_inner(g, dead, uses, q, xx, c, approx)) {
        *x = xx;
        return 1;
      }
    }
  }
  return 0;
}

int eng_graph__fuse_gelu(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  int *uses = eng_graph__live_readers(g, dead);
  if (!uses) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g) && !rc; i++) {
    if (dead[i]) continue;
    chain c = {{0}, 0, 0};
    int x = -1, approx = 0;
    if (!match_gelu(g, dead, uses, i, &c, &x, &approx) || c.over) continue;
    eng_attr a;
    memset(&a, 0, sizeof a);
    a.name = "approximate";
    a.type = ATTR_STRING;
    a.s = approx ? "tanh" : "none";
    rc = chain_fuse(g, &c, dead, uses, "Gelu", &x, 1, &a, 1, e);
    if (rc) break;
    *changed = 1;
  }
  free(uses);
  return rc;
}

// --- LayerNorm

// ReduceMean node r over the trailing axes -m..-1 (m >= 1) with keepdims; returns m, or 0.
static int trailing_mean(const eng_graph *g, const eng_node *r, int opset) {
  const eng_attr *kd = eng_node_attr(r, "keepdims");
  if (kd && kd->i != 1) return 0;
  int64_t ax[ENG_MAX_DIMS];
  size_t na = 0;
  if (opset >= 18) {
    if (r->n_in != 2 || r->in[1] < 0) return 0;
    const eng_value *v = eng_graph_value(g, (size_t)r->in[1]);
    if (v->kind != ENG_VALUE_CONST || v->dt != DT_INT64 || v->ndims != 1 || !v->data) return 0;
    na = (size_t)v->dims[0];
    if (na < 1 || na > ENG_MAX_DIMS) return 0;
    memcpy(ax, v->data, na * sizeof *ax);
  } else {
    const eng_attr *a = eng_node_attr(r, "axes");
    if (r->n_in != 1 || !a || a->n_ints < 1 || a->n_ints > ENG_MAX_DIMS) return 0;
    na = a->n_ints;
    memcpy(ax, a->ints, na * sizeof *ax);
  }
  // negative axes only: which axis a positive one names depends on the input's rank
  for (size_t k = 0; k < na; k++) {
    int found = 0;
    for (size_t j = 0; j < na; j++) found |= ax[j] == -(int64_t)(k + 1);
    if (!found) return 0;
  }
  return (int)na;
}

// A LayerNorm Scale or B: an FP32 constant of rank m (the normalized axes)
// with no dimension 1, so the broadcast in Mul/Add is valid exactly when it
// has the normalized shape, as LayerNormalization requires.
static int affine_ok(const eng_graph *g, int v, int m) {
  if (v < 0) return 0;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  if (x->kind != ENG_VALUE_CONST || x->dt != DT_FP32 || x->ndims != m) return 0;
  for (int k = 0; k < m; k++)
    if (x->dims[k] <= 1) return 0;
  return 1;
}

// Whether Mul node `mul` (y = d / sqrt(v + eps) * g) heads a split LayerNorm;
// fills c, x, scale, eps, m.
static int match_layernorm(const eng_graph *g, const unsigned char *dead, const int *uses, int opset,
                           size_t mul, chain *c, int *x, int *scale, float *eps, int *m) {
  const eng_node *nm = eng_graph_node(g, mul);
  if (strcmp(nm->op_type, "Mul") != 0 || nm->n_in != 2 || nm->n_out != 1) return 0;
  for (int side = 0; side < 2; side++) {
    int nv = nm->in[side];
    long dv = producer(g, dead, nv, "Div", 2);
    if (dv < 0 || !private_value(g, uses, nv, 1)) continue;
    const eng_node *nd = eng_graph_node(g, (size_t)dv);
    int d = nd->in[0], s = nd->in[1];
    long sq = producer(g, dead, s, "Sqrt", 1);
    if (sq < 0 || !private_value(g, uses, s, 1)) continue;
    int ve = eng_graph_node(g, (size_t)sq)->in[0];
    long ae = producer(g, dead, ve, "Add", 2);
    if (ae < 0 || !private_value(g, uses, ve, 1)) continue;
    const eng_node *na = eng_graph_node(g, (size_t)ae);
    int var = -1, epsv = -1;
    for (int k = 0; k < 2; k++) {
      if (na->in[k] < 0) continue;  // an omitted ("") input: no value (found by tests/fuzz/fuzz_graph)
      const eng_value *cv = eng_graph_value(g, (size_t)na->in[k]);
      if (cv->kind == ENG_VALUE_CONST && cv->dt == DT_FP32 && cv->ndims == 0 && cv->data)
        epsv = na->in[k], var = na->in[1 - k];
    }
    long rv = producer(g, dead, var, "ReduceMean", opset >= 18 ? 2 : 1);
    if (epsv < 0 || rv < 0 || !private_value(g, uses, var, 1)) continue;
    int p2 = eng_graph_node(g, (size_t)rv)->in[0];
    long pw = producer(g, dead, p2, "Pow", 2), sqd = producer(g, dead, p2, "Mul", 2);
    int d_uses;
    if (pw >= 0) {
      const eng_node *np = eng_graph_node(g, (size_t)pw);
      if (np->in[0] != d || !scalar_is(g, np->in[1], 2.0, 0)) continue;
      d_uses = 2;
    } else if (sqd >= 0) {
      const eng_node *np = eng_graph_node(g, (size_t)sqd);
      if (np->in[0] != d || np->in[1] != d) continue;
      d_uses = 3;
      pw = sqd;
    } else {
      continue;
    }
    if (!private_value(g, uses, p2, 1) || !private_value(g, uses, d, d_uses)) continue;
    long sb = producer(g, dead, d, "Sub", 2);
    if (sb < 0) continue;
    const eng_node *ns = eng_graph_node(g, (size_t)sb);
    int mean = ns->in[1];
    long rm = producer(g, dead, mean, "ReduceMean", opset >= 18 ? 2 : 1);
    if (rm < 0 || !private_value(g, uses, mean, 1) || eng_graph_node(g, (size_t)rm)->in[0] != ns->in[0])
      continue;
    int m1 = trailing_mean(g, eng_graph_node(g, (size_t)rm), opset);
    int m2 = trailing_mean(g, eng_graph_node(g, (size_t)rv), opset);
    if (!m1 || m1 != m2 || !affine_ok(g, nm->in[1 - side], m1)) continue;
    c->n = 0;
    chain_add(c, (long)mul);
    chain_add(c, dv), chain_add(c, sq), chain_add(c, ae), chain_add(c, rv);
    chain_add(c, pw), chain_add(c, sb), chain_add(c, rm);
    *x = ns->in[0];
    *scale = nm->in[1 - side];
    *eps = *(const float *)eng_graph_value(g, (size_t)epsv)->data;
    *m = m1;
    return 1;
  }
  return 0;
}

int eng_graph__fuse_layernorm(eng_graph *g, unsigned char *dead, int *changed, err *e) {
  int *uses = eng_graph__live_readers(g, dead);
  if (!uses) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int opset = eng_graph_opset(g), rc = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g) && !rc; i++) {
    if (dead[i]) continue;
    chain c = {{0}, 0, 0};
    int x = -1, scale = -1, m = 0;
    float eps = 0;
    if (!match_layernorm(g, dead, uses, opset, i, &c, &x, &scale, &eps, &m) || c.over) continue;
    int ins[3] = {x, scale, -1}, n_in = 2;
    // + B: the Mul's only reader is an Add of a constant of the normalized shape
    int y = eng_graph_node(g, i)->out[0];
    size_t head = i;
    if (uses[y] == 1 && !eng_graph__is_output(g, y)) {
      for (size_t j = i + 1; j < eng_graph_n_nodes(g); j++) {
        const eng_node *nb = eng_graph_node(g, j);
        if (dead[j] || nb->n_in != 2 || (nb->in[0] != y && nb->in[1] != y)) continue;
        int b = other_input(nb, y);
        if (strcmp(nb->op_type, "Add") == 0 && nb->n_out == 1 && b != y && affine_ok(g, b, m)) {
          ins[2] = b;
          n_in = 3;
          head = j;
        }
        break;
      }
    }
    if (head != i) {  // the Add is rewritten; the Mul joins the dead
      if (c.n >= CHAIN_MAX) continue;
      memmove(&c.node[1], &c.node[0], (size_t)c.n * sizeof c.node[0]);
      c.node[0] = head;
      c.n++;
    }
    eng_attr a[2];
    memset(a, 0, sizeof a);
    a[0].name = "axis";
    a[0].type = ATTR_INT;
    a[0].i = -m;
    a[1].name = "epsilon";
    a[1].type = ATTR_FLOAT;
    a[1].f = eps;
    rc = chain_fuse(g, &c, dead, uses, "LayerNormalization", ins, n_in, a, 2, e);
    if (rc) break;
    *changed = 1;
  }
  free(uses);
  return rc;
}
