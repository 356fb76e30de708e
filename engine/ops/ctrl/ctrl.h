// engine/ops/ctrl/ctrl.h: what the control-flow ops (If and Loop in ctrl.c,
// Scan in ctrl_scan.c) share: their subgraphs, planned and run through the
// backend's runner (eng_op_params.sub, eng_sub_api), the outer-scope values
// a subgraph reads, and the node state that keeps a subgraph's plans
// between runs. Not a public header.
#ifndef INFERD_ENGINE_OPS_CTRL_H
#define INFERD_ENGINE_OPS_CTRL_H

#include "engine/ops/ops_common.h"

// The most inputs a subgraph may take (its own and outer ones) and the
// most outputs: bounds for the ops' stack arrays.
#define CTRL_MAX_IO 64

// The GRAPH attribute `name` of node n, or an error naming it.
int ctrl__graph(const eng_node *n, const char *name, const eng_graph **out, err *e);
// How many of g's inputs are its own (the rest are outer-scope values).
size_t ctrl__n_own(const eng_graph *g);
// Checks g has n_in own inputs and n_out outputs, within CTRL_MAX_IO.
int ctrl__check_arity(const eng_graph *g, const char *what, size_t n_in, size_t n_out, err *e);
// No STRING tensor crosses a subgraph's edge (the plans' string views and
// the wire layout differ); an error naming the edge otherwise.
int ctrl__no_string(const eng_tensor *t, const char *what, size_t k, err *e);

// sub_in[0..own) = own[], then g's outer inputs from the node's inputs
// node_in (the outer-scope values, eng_graph_outer_input).
void ctrl__inputs(const eng_graph *g, const eng_tensor *own, size_t n_own, const eng_tensor *node_in,
                  eng_tensor *sub_in);

// The plans of a node's subgraphs (at most 2: If's branches), made on
// first use; a stateless run (constant folding) makes and frees its own.
typedef struct ctrl_plans {
  const eng_sub_api *sub;
  void *plan[2];
} ctrl_plans;
// *plan for subgraph `which` of g: st's cached one (made now if missing)
// when st is set, else a new one the caller frees with p->sub->destroy.
int ctrl__plan(const eng_op_params *p, ctrl_plans *st, int which, const eng_graph *g, void **plan, err *e);
void ctrl__plans_destroy(void *st);
// st->node as ctrl_plans (made when NULL).
int ctrl__state(eng_op_state *st, const eng_op_params *p, ctrl_plans **out, err *e);

// A tensor's bytes for its shape and type.
size_t ctrl__bytes(const eng_tensor *t);
// Whether a and b have one type and shape.
int ctrl__same(const eng_tensor *a, const eng_tensor *b);
// "FP32 [2, 3]" into buf.
const char *ctrl__desc(const eng_tensor *t, char *buf, size_t cap);

// Scan (ctrl_scan.c), listed in ctrl.c's table. The rest above: ctrl_common.c.
int ctrl__parse_scan(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int ctrl__infer_scan(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int ctrl__run_scan(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int ctrl__run_scan_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e);

#endif
