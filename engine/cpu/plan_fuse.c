// engine/cpu/plan_fuse.c: the CPU plan's fusions, found once at create
// (eng_plan__find_fusions, plan_internal.h): the Add and activation that
// fold into a fusable node before them, each the sole reader of the value
// it takes.
#include "engine/cpu/plan_internal.h"

#include <stdlib.h>
#include <string.h>

// The node that alone consumes value v, or -1 (none, several, or v is a
// graph output).
static int sole_consumer(const eng_plan *p, const int *n_readers, int v) {
  if (v < 0 || n_readers[v] != 1) return -1;
  for (size_t j = 0; j < p->n_outputs; j++)
    if (eng_graph_output_value(p->g, j) == v) return -1;
  for (size_t i = 0; i < p->n_nodes; i++) {
    const eng_node *n = eng_graph_node(p->g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] == v) return (int)i;
  }
  return -1;
}

static int is_op(const eng_plan *p, int i, const char *op) {
  return i >= 0 && strcmp(eng_graph_node(p->g, (size_t)i)->op_type, op) == 0;
}

// The activation that may fold into node i, whose chain so far ends at
// value v (read by j alone, or j < 0): a unary activation that is v's
// sole reader, or a gated one: v read by a gate and by a Mul of v and the
// gate's output, the Mul being that output's sole reader. Gates: Sigmoid
// (SiLU, EfficientNet) and HardSigmoid(alpha 1/6, beta 0.5), which makes
// HardSwish (how MobileNetV3 exports before opset 14).
static void find_act(eng_plan *p, const int *n_readers, size_t i, int v, int j) {
  static const struct {
    const char *op;
    eng_dnnl_act act;
  } unary[] = {{"Relu", ENG_DNNL_ACT_RELU},
               {"Sigmoid", ENG_DNNL_ACT_SIGMOID},
               {"HardSwish", ENG_DNNL_ACT_HARD_SWISH},
               {"HardSigmoid", ENG_DNNL_ACT_HARD_SIGMOID},
               {"Clip", ENG_DNNL_ACT_CLIP}};
  const eng_graph *g = p->g;
  for (size_t k = 0; k < sizeof unary / sizeof unary[0]; k++) {
    if (!is_op(p, j, unary[k].op)) continue;
    p->fuse_act[i] = j;
    p->fuse_kind[i] = (uint8_t)unary[k].act;
    p->fuse_src[j] = v;
    p->fuse_owner[j] = (int)i;
    return;
  }
  if (j >= 0 || v < 0 || n_readers[v] != 2) return;
  for (size_t j2 = 0; j2 < p->n_outputs; j2++)
    if (eng_graph_output_value(g, j2) == v) return;
  int s = -1, m = -1;
  for (size_t k = 0; k < p->n_nodes; k++) {
    const eng_node *n = eng_graph_node(g, k);
    for (int q = 0; q < n->n_in; q++) {
      if (n->in[q] != v) continue;
      if (is_op(p, (int)k, "Sigmoid") || is_op(p, (int)k, "HardSigmoid")) s = (int)k;
      else if (is_op(p, (int)k, "Mul")) m = (int)k;
      break;
    }
  }
  if (s < 0 || m < 0) return;
  int so = eng_graph_node(g, (size_t)s)->out[0];
  const eng_node *mn = eng_graph_node(g, (size_t)m);
  if (sole_consumer(p, n_readers, so) != m || mn->n_in != 2 ||
      !((mn->in[0] == v && mn->in[1] == so) || (mn->in[0] == so && mn->in[1] == v)))
    return;
  eng_dnnl_act act = ENG_DNNL_ACT_SILU;
  if (is_op(p, s, "HardSigmoid")) {
    if (p->params[s].alpha != 1.0f / 6.0f || p->params[s].beta != 0.5f) return;
    act = ENG_DNNL_ACT_HARD_SWISH;
  }
  p->fuse_act[i] = m;
  p->fuse_act2[i] = s;
  p->fuse_kind[i] = (uint8_t)act;
  p->fuse_src[s] = p->fuse_src[m] = v;
  p->fuse_owner[s] = p->fuse_owner[m] = (int)i;
}

// Finds, for every fusable node, the Add and/or activation that may fold
// into it: node -> act, node -> Add(out, r) -> act, node -> Add(out, r),
// each link the sole reader of the value before it (SiLU: see find_act). r must be computed before the
// node (or be a graph input), since the node reads it.
int eng_plan__find_fusions(eng_plan *p, err *e) {
  const eng_graph *g = p->g;
  int *n_readers = calloc(p->n_values + 1, sizeof *n_readers);
  if (!n_readers) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < p->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) n_readers[n->in[k]]++;
  }
  for (size_t i = 0; i < p->n_nodes; i++) {
    if (!p->params[i].fusable) continue;
    int v = eng_graph_node(g, i)->out[0], j = sole_consumer(p, n_readers, v);
    if (is_op(p, j, "Add")) {
      const eng_node *a = eng_graph_node(g, (size_t)j);
      int r = a->in[0] == v ? a->in[1] : a->in[0];
      const eng_value *rv = r >= 0 ? eng_graph_value(g, (size_t)r) : NULL;
      int ready = rv && (rv->kind == ENG_VALUE_INPUT ||
                         (rv->kind == ENG_VALUE_NODE && rv->index < (int)i));
      if (ready && r != v) {
        p->fuse_add[i] = j;
        p->fuse_add_val[i] = r;
        p->fuse_src[j] = v;
        p->fuse_owner[j] = (int)i;
        v = a->out[0];
        j = sole_consumer(p, n_readers, v);
      } else {
        j = -1;
      }
    }
    find_act(p, n_readers, i, v, j);
  }
  free(n_readers);
  return 0;
}
