// engine/ops/ctrl/ctrl_common.c: what If and Loop (ctrl.c) and Scan
// (ctrl_scan.c) share (ctrl.h): subgraph attributes and arity, the
// subgraph inputs with their outer-scope values, the plans a node keeps.
#include "engine/ops/ctrl/ctrl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ctrl__graph(const eng_node *n, const char *name, const eng_graph **out, err *e) {
  const eng_attr *a = eng_node_attr(n, name);
  if (!a || !a->g) return err_set(e, ERR_INVALID_ARGUMENT, "needs the graph attribute '%s'", name);
  *out = a->g;
  return 0;
}

size_t ctrl__n_own(const eng_graph *g) { return eng_graph_n_inputs(g) - eng_graph_n_outer(g); }

int ctrl__check_arity(const eng_graph *g, const char *what, size_t n_in, size_t n_out, err *e) {
  if (ctrl__n_own(g) != n_in || eng_graph_n_outputs(g) != n_out)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s has %zu inputs and %zu outputs, expected %zu and %zu", what,
                   ctrl__n_own(g), eng_graph_n_outputs(g), n_in, n_out);
  if (eng_graph_n_inputs(g) > CTRL_MAX_IO || n_out > CTRL_MAX_IO)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s has %zu inputs (outer-scope values included) and %zu outputs, "
                   "at most %d supported", what, eng_graph_n_inputs(g), n_out, CTRL_MAX_IO);
  return 0;
}

int ctrl__no_string(const eng_tensor *t, const char *what, size_t k, err *e) {
  if (t->dt != DT_STRING) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT, "%s %zu is a STRING tensor: strings cannot cross a subgraph's edge", what, k);
}

void ctrl__inputs(const eng_graph *g, const eng_tensor *own, size_t n_own, const eng_tensor *node_in,
                  eng_tensor *sub_in) {
  for (size_t k = 0; k < n_own; k++) sub_in[k] = own[k];
  for (size_t j = 0; j < eng_graph_n_outer(g); j++) sub_in[n_own + j] = node_in[eng_graph_outer_input(g, j)];
}

int ctrl__plan(const eng_op_params *p, ctrl_plans *st, int which, const eng_graph *g, void **plan, err *e) {
  if (!p->sub)
    return err_set(e, ERR_UNIMPLEMENTED, "a subgraph runs only inside a plan (not while folding constants at load)");
  if (!st) return p->sub->create(g, plan, e);
  if (!st->plan[which]) TRY(p->sub->create(g, &st->plan[which], e));
  *plan = st->plan[which];
  return 0;
}

void ctrl__plans_destroy(void *v) {
  ctrl_plans *st = v;
  if (!st) return;
  for (int k = 0; k < 2; k++)
    if (st->plan[k]) st->sub->destroy(st->plan[k]);
  free(st);
}

int ctrl__state(eng_op_state *st, const eng_op_params *p, ctrl_plans **out, err *e) {
  if (!p->sub) return err_set(e, ERR_UNIMPLEMENTED, "a subgraph runs only inside a plan");
  if (!st->node) {
    ctrl_plans *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    c->sub = p->sub;
    st->node = c;
  }
  *out = st->node;
  return 0;
}

size_t ctrl__bytes(const eng_tensor *t) { return (size_t)eng_numel(t->ndims, t->dims) * dtype_size(t->dt); }

int ctrl__same(const eng_tensor *a, const eng_tensor *b) {
  return a->dt == b->dt && a->ndims == b->ndims &&
         (a->ndims <= 0 || memcmp(a->dims, b->dims, (size_t)a->ndims * sizeof a->dims[0]) == 0);
}

const char *ctrl__desc(const eng_tensor *t, char *buf, size_t cap) {
  size_t at = (size_t)snprintf(buf, cap, "%s [", dtype_wire_name(t->dt));
  for (int d = 0; d < t->ndims && at < cap; d++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
  if (at < cap) snprintf(buf + at, cap - at, "]");
  return buf;
}

