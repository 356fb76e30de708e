// engine/graph/graph.h: an ONNX model loaded into an immutable graph: named values
// (graph inputs, constant initializers, node outputs) and nodes in
// topological order. Loading validates everything that does not depend on
// shapes (supported ops and domains, defined inputs, no cycles) so a bad
// model fails at load, not on the first request. A graph is read-only after
// eng_graph_load, so any number of plans may share it across threads.
#ifndef INFERD_ENGINE_GRAPH_H
#define INFERD_ENGINE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tensor.h"
#include "kernels/base/confine.h"
#include "kernels/base/err.h"

typedef struct eng_graph eng_graph;

// What the load-time passes may do; zeroed = every pass on.
typedef struct eng_graph_opts {
  int no_fuse_attention;  // leave attention subgraphs unfused (attn.c)
  int no_merge_qkv;       // keep an attention's Q, K, V projections apart (attn_qkv.c)
  // a QDQ model in float (graph_pass_qdq.c's eng_graph__qdq_float): weights
  // dequantized at load, activations' Q -> DQ pairs as inferd.QuantDequant,
  // instead of the integer ops (QLinearConv...) the CPU runs. GPU instances'
  // graphs; a config's parameters { key: "qdq_integer" value: "0" } asks it
  // of CPU instances too.
  int qdq_float;
  // where links met on the way to external data may lead besides the model
  // file's folder (kernels/base/confine.h: the repository and the
  // --model-store-allow folders); NULL: nowhere else. Read during the load only.
  const eng_confine_roots *roots;
} eng_graph_opts;

// Loads and validates an ONNX file. External data files are resolved
// relative to the model file's directory. On success *out owns the graph.
// eng_graph_load is eng_graph_load_opts with every pass on (opts NULL).
int eng_graph_load(const char *onnx_path, eng_graph **out, err *e);
int eng_graph_load_opts(const char *onnx_path, const eng_graph_opts *opts, eng_graph **out,
                        err *e);
void eng_graph_destroy(eng_graph *g);

// Graph inputs (initializers excluded) and outputs as declared by their
// ValueInfo: dims of -1 are symbolic or missing; ndims is -1 when the
// ValueInfo has no shape at all.
size_t eng_graph_n_inputs(const eng_graph *g);
const eng_io *eng_graph_input(const eng_graph *g, size_t i);
size_t eng_graph_n_outputs(const eng_graph *g);
const eng_io *eng_graph_output(const eng_graph *g, size_t i);
// The model's default-domain ("" / "ai.onnx") opset version.
int eng_graph_opset(const eng_graph *g);
// The ai.onnx.ml domain (scikit-learn's models through skl2onnx): its
// nodes' op_type is the op's name after ENG_ML_PREFIX ("ai.onnx.ml.Scaler"),
// so an op of that domain never meets a default-domain op of the same name.
// Its opset version (0 when the model does not import it), and how many of
// the graph's nodes are of that domain (no GPU path runs them: KIND_AUTO
// keeps such a model on the CPU, engine/repo/config.h).
#define ENG_ML_PREFIX "ai.onnx.ml."
int eng_graph_opset_ml(const eng_graph *g);
size_t eng_graph_n_ml_nodes(const eng_graph *g);
// Attention subgraphs the load-time pass fused into inferd.Attention nodes.
size_t eng_graph_n_attention(const eng_graph *g);
// Fused attention nodes whose Q, K and V the load-time pass packed into one
// projection (one MatMul, or the exporter's own through a Split; attn_qkv.c).
size_t eng_graph_n_qkv_merged(const eng_graph *g);
// onnxruntime's QDQ patterns the load-time pass runs as integer ops
// (DequantizeLinear -> Conv / MatMul -> QuantizeLinear as QLinearConv / QLinearMatMul).
size_t eng_graph_n_qdq_conv(const eng_graph *g);
size_t eng_graph_n_qdq_matmul(const eng_graph *g);
// QuantizeLinear and DequantizeLinear nodes of the model as loaded (before
// the passes): nonzero for a quantized model in QDQ form.
size_t eng_graph_n_qdq_nodes(const eng_graph *g);
// The float form's (eng_graph_opts.qdq_float): QuantizeLinear ->
// DequantizeLinear pairs run as one inferd.QuantDequant node, and the
// weights' DequantizeLinear nodes folded into float constants.
size_t eng_graph_n_qdq_pairs(const eng_graph *g);
size_t eng_graph_n_qdq_weights(const eng_graph *g);

// --- internal representation, for the planner and the ops

typedef enum eng_value_kind {
  ENG_VALUE_INPUT = 1,  // a graph input; index = input position
  ENG_VALUE_CONST = 2,  // an initializer or folded Constant; data holds it
  ENG_VALUE_NODE = 3,   // produced by node `index`
} eng_value_kind;

typedef struct eng_value {
  char *name;
  eng_value_kind kind;
  int index;
  // CONST: the stored type (float16/bfloat16/double already widened to
  // FP32) and exact shape. INPUT: the declared type and dims. NODE: unused.
  dtype dt;
  int ndims;
  int64_t dims[ENG_MAX_DIMS];
  void *data;  // CONST only
  size_t bytes;
} eng_value;

typedef struct eng_attr {
  char *name;
  int type;  // ONNX AttributeProto.AttributeType
  float f;
  int64_t i;
  char *s;  // NUL-terminated copy of the bytes
  size_t n_floats;
  float *floats;
  size_t n_ints;
  int64_t *ints;
  // a STRINGS attribute (ai.onnx.ml's modes, keys and labels): NUL-terminated copies
  size_t n_strings;
  char **strings;
  eng_value *t;  // a TENSOR attribute decoded like an initializer; NULL otherwise
  // a GRAPH attribute (If's branches, Loop's and Scan's body) loaded like the
  // model's graph, owned by the attribute; NULL otherwise. Its names from the
  // enclosing scopes are its outer inputs (eng_graph_n_outer).
  eng_graph *g;
} eng_attr;

typedef struct eng_node {
  char *name;  // the node's name, or "#<position in the file>" when it has none
  char *op_type;
  int n_in;
  int *in;  // value indices; -1 for an omitted optional input ("")
  int n_out;
  int *out;  // value indices; -1 for an omitted optional output
  int n_attrs;
  eng_attr *attrs;
  // The last n_implicit inputs are values of this graph that the node's
  // subgraphs read from the enclosing scope (outer-scope references), after
  // the op's own inputs; 0 for a node with no subgraph.
  int n_implicit;
} eng_node;

size_t eng_graph_n_nodes(const eng_graph *g);
// Nodes in topological order.
const eng_node *eng_graph_node(const eng_graph *g, size_t i);
size_t eng_graph_n_values(const eng_graph *g);
const eng_value *eng_graph_value(const eng_graph *g, size_t i);
// Value index of graph input / output i.
int eng_graph_input_value(const eng_graph *g, size_t i);
int eng_graph_output_value(const eng_graph *g, size_t i);
// A subgraph's outer inputs: its last eng_graph_n_outer graph inputs stand
// for names of the enclosing scopes it reads; outer input j (0-based among
// them) is input eng_graph_outer_input(g, j) of the node that owns the
// subgraph. 0 for the model's graph.
size_t eng_graph_n_outer(const eng_graph *g);
int eng_graph_outer_input(const eng_graph *g, size_t j);
// The attribute called `name`, or NULL.
const eng_attr *eng_node_attr(const eng_node *n, const char *name);

#endif
