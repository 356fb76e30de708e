// engine/graph/graph_struct.h: the graph's representation, shared by the two
// files that build and keep it: graph.c (the values, nodes and their
// lookup; what passes and readers use) and load.c (the ONNX loader). Not a
// public header: everything else goes through graph.h / graph_internal.h.
#ifndef INFERD_ENGINE_GRAPH_STRUCT_H
#define INFERD_ENGINE_GRAPH_STRUCT_H

#include "engine/graph/graph_internal.h"

struct eng_graph {
  char *path;
  int opset;
  int opset_ml;  // the ai.onnx.ml domain's opset version; 0 when not imported
  eng_value *values;
  size_t n_values, cap_values;
  eng_node *nodes;  // topological order
  size_t n_nodes;
  int *inputs;
  eng_io *input_io;
  size_t n_inputs;
  int *outputs;
  eng_io *output_io;
  size_t n_outputs;
  size_t cap_inputs;     // entries inputs/input_io hold (a subgraph gains outer inputs while loading)
  size_t n_outer;        // a subgraph's outer inputs: the last n_outer inputs
  int *outer_in;         // per outer input: its position in the owning node's inputs
  // name -> value index, open addressing, capacity a power of two
  int *hash;
  size_t hash_cap;
  eng_graph_opts opts;   // what the load-time passes may do
  size_t n_attention;    // attention subgraphs fused (attn.c)
  size_t n_qkv_merged;   // of those, with Q, K, V packed into one projection (attn_qkv.c)
  size_t n_qdq_conv, n_qdq_matmul;  // QDQ patterns run as QLinearConv / QLinearMatMul (graph_pass_qdq.c)
  size_t n_qdq_pairs, n_qdq_weights;  // the float form's (opts.qdq_float): QuantDequant nodes, folded weight DQs
  size_t n_qdq_nodes;                 // QuantizeLinear and DequantizeLinear nodes as loaded, before the passes
};

// A copy of s ("" for NULL), or NULL when out of memory.
char *eng_graph__dup_str(const char *s);
// The value called name, or -1.
int eng_graph__find_value(const eng_graph *g, const char *name);
// Adds a new value; a name defined twice is a malformed graph.
int eng_graph__add_value(eng_graph *g, const char *name, eng_value_kind kind, int index, int *out,
                         err *e);
// Frees a node's strings, arrays and attributes (not the node itself).
void eng_graph__free_node(eng_node *n);

#endif
