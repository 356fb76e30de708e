// engine/cuda/plan_cuda_util.c: what the CUDA plan (plan_cuda.c and its
// files) and the op families' CUDA paths (engine/ops/<family>/<family>_cuda.c)
// share, declared in plan_cuda_internal.h: the graph questions fusion hooks
// and init hooks ask (who consumes a value, is it a constant, does it exist
// before a node). It calls nothing in the plan or the families, so both
// depend on it and not on each other; the CUDA op registry that lists the
// families is engine/ops/registry_cuda.c.
#include <stddef.h>
#include <string.h>

#include "engine/cuda/plan_cuda_internal.h"

bool eng_cuda__half_always(const eng_op_params *p, const eng_tensor *in, int n_in) {
  (void)p, (void)in, (void)n_in;
  return true;
}

// --- fusion candidates (static; each run checks the layout still shares the buffers)

int eng_cuda__sole_consumer(const eng_graph *g, size_t n_nodes, int v) {
  for (size_t j = 0; j < eng_graph_n_outputs(g); j++)
    if (eng_graph_output_value(g, j) == v) return -1;
  int found = -1;
  for (size_t i = 0; i < n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] == v) {
        if (found >= 0) return -1;  // a second use, by this node or another
        found = (int)i;
      }
  }
  return found;
}

bool eng_cuda__is_const(const eng_graph *g, int v) {
  return v >= 0 && eng_graph_value(g, (size_t)v)->kind == ENG_VALUE_CONST;
}

bool eng_cuda__const_input(const eng_plan *pl, size_t node, int k, eng_tensor *t) {
  const eng_node *n = eng_graph_node(pl->g, node);
  if (k >= n->n_in || n->in[k] < 0 || !eng_cuda__is_const(pl->g, n->in[k])) return false;
  const eng_value *v = eng_graph_value(pl->g, (size_t)n->in[k]);
  *t = (eng_tensor){.dt = v->dt, .ndims = v->ndims, .data = v->data, .bytes = v->bytes};
  memcpy(t->dims, v->dims, sizeof t->dims);
  return true;
}

bool eng_cuda__made_before(const eng_plan *pl, int v, size_t i) {
  for (size_t k = i; k < pl->n_nodes; k++) {
    const eng_node *n = eng_graph_node(pl->g, k);
    for (int o = 0; o < n->n_out; o++)
      if (n->out[o] == v) return false;
  }
  return true;
}

dtype eng_cuda__load_dt(const eng_plan *pl, int v) {
  if (v < 0) return DT_INVALID;
  const eng_value *x = eng_graph_value(pl->g, (size_t)v);
  // without planned shapes, the type the create's probe inferred (DT_INVALID where it could not)
  if (x->kind == ENG_VALUE_NODE && !pl->have_layout) return pl->load_dt[v];
  return pl->cur[v].dt;
}

dtype eng_cuda__load_in_dt(const eng_plan *pl, size_t node, int k) {
  const eng_node *n = eng_graph_node(pl->g, node);
  return k < n->n_in ? eng_cuda__load_dt(pl, n->in[k]) : DT_INVALID;
}
