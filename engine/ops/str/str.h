// engine/ops/str/str.h: the STRING side of the ops the served models use.
// Inside a plan a STRING value is an array of k_str views (kernels/str/
// k_str.h says why), so the index family's views and copies (Identity,
// Reshape, Squeeze, Unsqueeze, Concat, Gather...) move strings like any
// fixed-size element; what needs string code is here. Cast lives in the
// elem family (an op type belongs to one family): its parse, shape rule
// and run hand a Cast to or from STRING to these.
#ifndef INFERD_ENGINE_OPS_STR_H
#define INFERD_ENGINE_OPS_STR_H

#include "engine/ops/ops.h"

// Whether op_type handles STRING operands: Cast, the ops that only
// move, view or select elements (the index family and Where), which copy
// k_str views like any fixed-size element, and ai.onnx.ml's LabelEncoder
// and OneHotEncoder (engine/ops/ml/ml_label.c), which read (and write) them,
// and its classifiers, whose labels may be strings (engine/ops/ml/). The planner refuses a node of
// any other op with a STRING input or output, naming it, where its kernels
// would read views as numbers.
int eng_ops_str_supports(const char *op_type);

// Whether the Cast of `from` to `to` is a string one (either is STRING).
static inline int eng_ops_str_cast(dtype from, dtype to) { return from == DT_STRING || to == DT_STRING; }

// Cast to or from STRING: the output's type and shape, and the run (a
// string that holds no number fails the run with INVALID_ARGUMENT naming
// the element, as onnxruntime's Cast fails).
int eng_ops_str_cast_infer(const eng_op_params *p, const eng_tensor *in, eng_tensor *out, err *e);
int eng_ops_str_cast_run(const eng_op_params *p, const eng_tensor *in, eng_tensor *out, err *e);

#endif
