// engine/ops/ops_common.h: helpers shared by the op families' files
// (engine/ops/<family>/<family>.c, and the CUDA paths that reuse a shape rule)
// and the families' CPU tables, which eng_ops_cpu_find searches
// (engine/ops/families.h lists them). Defined in engine/ops/ops_common.c; the
// tables are walked by engine/ops/registry.c. Not a
// public header.
#ifndef INFERD_ENGINE_OPS_COMMON_H
#define INFERD_ENGINE_OPS_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/graph/graph.h"
#include "engine/ops/families.h"
#include "engine/ops/ops.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"

// --- attributes

static inline int64_t op_attr_int(const eng_node *n, const char *name, int64_t def) {
  const eng_attr *a = eng_node_attr(n, name);
  return a ? a->i : def;
}

static inline float op_attr_float(const eng_node *n, const char *name, float def) {
  const eng_attr *a = eng_node_attr(n, name);
  return a ? a->f : def;
}

static inline const char *op_attr_str(const eng_node *n, const char *name, const char *def) {
  const eng_attr *a = eng_node_attr(n, name);
  return a ? a->s : def;
}

static inline int op_parse_none(const eng_graph *g, const eng_node *n, int opset,
                                eng_op_params *p, err *e) {
  (void)g, (void)n, (void)opset, (void)p, (void)e;
  return 0;
}

// For ops that read their attributes from the node at infer and run
// (p->node): keeps it.
static inline int op_parse_node(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->node = n;
  return 0;
}

// Copies the ints attribute `name` into out (at most max); *n = -1 when absent.
int eng_ops__attr_ints(const eng_node *n, const char *name, int64_t *out, int max, int *cnt,
                       err *e);

// Index of `s` in the NULL-terminated list `names`, or an error naming the attribute.
int eng_ops__enum(const char *s, const char *const *names, const char *attr, int *out, err *e);

// --- shapes

static inline int64_t op_prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= d[i];
  return p;
}

static inline size_t op_numel(const eng_tensor *t) {
  return (size_t)eng_numel(t->ndims, t->dims);
}

static inline void op_set_out(eng_tensor *o, dtype dt, int ndims, const int64_t *dims) {
  o->dt = dt;
  o->ndims = ndims;
  for (int i = 0; i < ndims; i++) o->dims[i] = dims[i];
}

static inline int op_given(const eng_tensor *in, int n_in, int k) {
  return k < n_in && in[k].dt != DT_INVALID;
}

int eng_ops__norm_axis(int64_t axis, int rank, int64_t *out, err *e);
int eng_ops__need_f32(const eng_tensor *t, const char *what, err *e);
// Any type with a fixed element size in a plan: STRING's is its view's
// (engine/ops/str/str.h), which the index ops copy like numbers.
int eng_ops__need_elem(const eng_tensor *t, const char *what, err *e);

// Broadcast shapes of a and b left-padded to *nd dims: y, ad, bd.
int eng_ops__bcast(const eng_tensor *a, const eng_tensor *b, int *nd, int64_t *y, int64_t *ad,
                   int64_t *bd, err *e);

// Largest element count a shape computed from a model's values may have:
// dims come from hostile files, so products are checked before use.
#define ENG_MAX_NUMEL ((int64_t)1 << 40)
// Checked product of dims; an error (naming `what`) past ENG_MAX_NUMEL or for a negative dim.
int eng_ops__checked_numel(int nd, const int64_t *dims, const char *what, err *e);

// Reads an int64/int32 tensor of rank <= 1 whose bytes are known (a
// host_in input) into out[0..*cnt), at most max values.
int eng_ops__read_ints(const eng_tensor *t, const char *what, int64_t *out, int max, int *cnt,
                       err *e);
// Same for a float tensor (Resize scales).
int eng_ops__read_floats(const eng_tensor *t, const char *what, float *out, int max, int *cnt,
                         err *e);
// One element of a numeric tensor as double (Range's scalars, Clip bounds).
double eng_ops__scalar(const eng_tensor *t);

// Shape of t left-padded with 1s to nd dims (broadcasting).
static inline void op_pad_dims(const eng_tensor *t, int nd, int64_t *out) {
  for (int i = 0; i < nd; i++) out[i] = i < nd - t->ndims ? 1 : t->dims[i - (nd - t->ndims)];
}

// --- infer

// A float input 0 and one FP32 output of its shape (the activations, Softmax).
int eng_ops__infer_same_f32(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                            int n_out, err *e);

// --- the families' CPU tables (engine/ops/families.h): eng_ops__<family>[] and its count
#define ENG_OPS_CPU_TABLE(f)            \
  extern const eng_op_def eng_ops__##f[]; \
  extern const size_t eng_ops__n_##f;
ENG_OPS_FAMILIES(ENG_OPS_CPU_TABLE)
#undef ENG_OPS_CPU_TABLE

#endif
