// engine/graph/graph_internal.h: what load-time graph passes (graph_pass.c) may do
// to a graph that eng_graph_load is still building. Not a public header:
// after eng_graph_load returns, a graph is read-only and shared.
#ifndef INFERD_ENGINE_GRAPH_INTERNAL_H
#define INFERD_ENGINE_GRAPH_INTERNAL_H

#include "engine/graph/graph.h"

// Mutable views of node i / value v (i < n_nodes, v < n_values).
eng_node *eng_graph__node_mut(eng_graph *g, size_t i);
eng_value *eng_graph__value_mut(eng_graph *g, size_t v);

// Whether value v is one of the graph's outputs.
int eng_graph__is_output(const eng_graph *g, int v);

// For a pass matching subgraphs (dead[i] != 0: node i is removed already):
// how many live nodes read each value (n_values + 1 entries, calloc'd; NULL
// when out of memory), and the index of the live node of op_type op that
// produces value v, or -1 (v an input, a constant, or made otherwise).
int *eng_graph__live_readers(const eng_graph *g, const unsigned char *dead);
long eng_graph__live_producer(const eng_graph *g, const unsigned char *dead, int v, const char *op);

// Adds a constant called name (made unique if taken). On success the graph
// owns data (bytes long) and *vi is its index; on failure the caller still does.
int eng_graph__add_const(eng_graph *g, const char *name, dtype dt, int ndims, const int64_t *dims,
                         void *data, size_t bytes, int *vi, err *e);

// Removes the nodes with dead[i] != 0 and every value no remaining node,
// graph input or graph output refers to (freeing constants that became
// unused), renumbering what is left; topological order is kept.
int eng_graph__compact(eng_graph *g, const unsigned char *dead, err *e);
// Frees a node's attributes and leaves it with none (a pass that rewrites a node in place).
void eng_graph__free_attrs(eng_node *n);

// The options the graph was loaded with; the attention passes' counts.
const eng_graph_opts *eng_graph__opts(const eng_graph *g);
void eng_graph__set_n_attention(eng_graph *g, size_t n);
void eng_graph__set_n_qkv_merged(eng_graph *g, size_t n);
void eng_graph__add_n_qdq(eng_graph *g, size_t conv, size_t matmul);
void eng_graph__add_n_qdq_float(eng_graph *g, size_t pairs, size_t weights);
void eng_graph__set_n_qdq_nodes(eng_graph *g, size_t n);

// Constant folding's bound on one result (graph_pass.c): larger results stay
// nodes (a copy this size is not free).
#define ENG_FOLD_MAX_BYTES (64u << 20)

// The load-time passes (graph_pass.c), run once the graph is complete and
// sorted: constants folded, BatchNormalization folded into the Conv before
// it, attention subgraphs fused (attn.c) and their Q, K, V projections
// merged into one (attn_qkv.c), then nodes that repeat an earlier one merged
// into it.
int eng_graph__run_passes(eng_graph *g, err *e);

// GELU and LayerNorm written as chains of elementwise ops, fused into one
// Gelu / LayerNormalization node where exactly equivalent (graph_pass_norm.c).
// Each marks the nodes it removes in dead[] (n_nodes long) and sets *changed.
int eng_graph__fuse_gelu(eng_graph *g, unsigned char *dead, int *changed, err *e);
int eng_graph__fuse_layernorm(eng_graph *g, unsigned char *dead, int *changed, err *e);

// onnxruntime's QDQ patterns (DequantizeLinear -> Conv/MatMul -> QuantizeLinear)
// into QLinearConv / QLinearMatMul where exactly equivalent (graph_pass_qdq.c);
// run before constant folding. Marks dead[] and sets *changed as those do.
int eng_graph__fuse_qdq(eng_graph *g, unsigned char *dead, int *changed, err *e);
// The float form instead (eng_graph_opts.qdq_float): activations' QuantizeLinear
// -> DequantizeLinear pairs into inferd.QuantDequant nodes, the weights'
// DequantizeLinear left to constant folding. Same conventions.
int eng_graph__qdq_float(eng_graph *g, unsigned char *dead, int *changed, err *e);
// QuantizeLinear and DequantizeLinear nodes in the graph as it is now.
size_t eng_graph__count_qdq(const eng_graph *g);

#endif
