// tests/unit/engine/onnx_build.h: builds small ONNX models in C with the
// protobuf-c structs and writes them to files, so op and plan tests state
// each case (graph, inputs, reference loops) in one place. Test-only, header
// only; every allocation is tracked and freed by ob_save.
#ifndef INFERD_TESTS_ONNX_BUILD_H
#define INFERD_TESTS_ONNX_BUILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

typedef struct ob {
  Onnx__ModelProto m;
  Onnx__GraphProto g;
  Onnx__OperatorSetIdProto opset;
  Onnx__OperatorSetIdProto *opsets[1];
  void **allocs;
  size_t n_allocs;
} ob;

static inline void *ob_alloc(ob *b, size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) abort();
  b->allocs = realloc(b->allocs, (b->n_allocs + 1) * sizeof *b->allocs);
  if (!b->allocs) abort();
  b->allocs[b->n_allocs++] = p;
  return p;
}

static inline char *ob_str(ob *b, const char *s) {
  char *d = ob_alloc(b, strlen(s) + 1);
  strcpy(d, s);
  return d;
}

#define OB_PUSH(b, arr, n, item)                                          \
  do {                                                                    \
    void *np_ = ob_alloc((b), ((n) + 1) * sizeof *(arr));                 \
    if ((n)) memcpy(np_, (arr), (n) * sizeof *(arr));                     \
    (arr) = np_;                                                          \
    (arr)[(n)++] = (item);                                                \
  } while (0)

static inline ob *ob_new(int opset) {
  ob *b = calloc(1, sizeof *b);
  if (!b) abort();
  onnx__model_proto__init(&b->m);
  onnx__graph_proto__init(&b->g);
  onnx__operator_set_id_proto__init(&b->opset);
  b->opset.domain = "";
  b->opset.has_version = 1;
  b->opset.version = opset;
  b->opsets[0] = &b->opset;
  b->m.n_opset_import = 1;
  b->m.opset_import = b->opsets;
  b->m.has_ir_version = 1;
  b->m.ir_version = 8;
  b->m.graph = &b->g;
  b->g.name = "t";
  return b;
}

// dims: -1 becomes a dim_param; nd < 0 leaves the shape out.
static inline Onnx__ValueInfoProto *ob_vi(ob *b, const char *name, int onnx_type, int nd,
                                   const int64_t *dims) {
  Onnx__ValueInfoProto *v = ob_alloc(b, sizeof *v);
  onnx__value_info_proto__init(v);
  v->name = ob_str(b, name);
  Onnx__TypeProto *t = ob_alloc(b, sizeof *t);
  onnx__type_proto__init(t);
  Onnx__TypeProto__Tensor *tt = ob_alloc(b, sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1;
  tt->elem_type = onnx_type;
  if (nd >= 0) {
    Onnx__TensorShapeProto *s = ob_alloc(b, sizeof *s);
    onnx__tensor_shape_proto__init(s);
    for (int i = 0; i < nd; i++) {
      Onnx__TensorShapeProto__Dimension *d = ob_alloc(b, sizeof *d);
      onnx__tensor_shape_proto__dimension__init(d);
      if (dims[i] >= 0) {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = dims[i];
      } else {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = ob_str(b, i == 0 ? "N" : "T");
      }
      OB_PUSH(b, s->dim, s->n_dim, d);
    }
    tt->shape = s;
  }
  t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  t->tensor_type = tt;
  v->type = t;
  return v;
}

static inline void ob_input(ob *b, const char *name, int onnx_type, int nd, const int64_t *dims) {
  OB_PUSH(b, b->g.input, b->g.n_input, ob_vi(b, name, onnx_type, nd, dims));
}

static inline void ob_output(ob *b, const char *name, int onnx_type, int nd, const int64_t *dims) {
  OB_PUSH(b, b->g.output, b->g.n_output, ob_vi(b, name, onnx_type, nd, dims));
}

static inline Onnx__TensorProto *ob_tensor(ob *b, const char *name, int onnx_type, int nd,
                                    const int64_t *dims, const void *data, size_t bytes) {
  Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
  onnx__tensor_proto__init(t);
  t->name = ob_str(b, name);
  t->has_data_type = 1;
  t->data_type = onnx_type;
  t->n_dims = (size_t)nd;
  t->dims = ob_alloc(b, (size_t)nd * sizeof(int64_t));
  if (nd) memcpy(t->dims, dims, (size_t)nd * sizeof(int64_t));
  t->has_raw_data = 1;
  t->raw_data.len = bytes;
  t->raw_data.data = ob_alloc(b, bytes);
  if (bytes) memcpy(t->raw_data.data, data, bytes);
  return t;
}

static inline void ob_init(ob *b, const char *name, int onnx_type, int nd, const int64_t *dims,
                    const void *data, size_t bytes) {
  OB_PUSH(b, b->g.initializer, b->g.n_initializer,
          ob_tensor(b, name, onnx_type, nd, dims, data, bytes));
}

// ins / outs: comma-separated names; an empty field is an omitted optional.
static inline Onnx__NodeProto *ob_node(ob *b, const char *op, const char *name, const char *ins,
                                const char *outs) {
  Onnx__NodeProto *n = ob_alloc(b, sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = ob_str(b, op);
  n->name = ob_str(b, name);
  for (int pass = 0; pass < 2; pass++) {
    const char *s = pass ? outs : ins;
    if (!s || !*s) continue;
    char *copy = ob_str(b, s);
    for (char *tok = copy;;) {
      char *comma = strchr(tok, ',');
      if (comma) *comma = '\0';
      if (pass) OB_PUSH(b, n->output, n->n_output, tok);
      else OB_PUSH(b, n->input, n->n_input, tok);
      if (!comma) break;
      tok = comma + 1;
    }
  }
  OB_PUSH(b, b->g.node, b->g.n_node, n);
  return n;
}

static inline Onnx__AttributeProto *ob_attr(ob *b, Onnx__NodeProto *n, const char *name, int type) {
  Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = ob_str(b, name);
  a->has_type = 1;
  a->type = type;
  OB_PUSH(b, n->attribute, n->n_attribute, a);
  return a;
}

static inline void ob_attr_i(ob *b, Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = v;
}

static inline void ob_attr_f(ob *b, Onnx__NodeProto *n, const char *name, float v) {
  Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = 1;
  a->f = v;
}

static inline void ob_attr_s(ob *b, Onnx__NodeProto *n, const char *name, const char *v) {
  Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  a->has_s = 1;
  a->s.len = strlen(v);
  a->s.data = (uint8_t *)ob_str(b, v);
}

static inline void ob_attr_ints(ob *b, Onnx__NodeProto *n, const char *name, int cnt, const int64_t *v) {
  Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->n_ints = (size_t)cnt;
  a->ints = ob_alloc(b, (size_t)cnt * sizeof(int64_t));
  memcpy(a->ints, v, (size_t)cnt * sizeof(int64_t));
}

static inline void ob_attr_t(ob *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t) {
  Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  a->t = t;
}

// A GRAPH attribute (If's branches, Loop's and Scan's body): sub's graph,
// built with its own ob_new/ob_input/ob_node/ob_output calls. b takes sub
// over: ob_save(b) frees it (sub is not saved on its own).
static inline void ob_attr_g(ob *b, Onnx__NodeProto *n, const char *name, ob *sub) {
  Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
  a->g = &sub->g;
  b->allocs = realloc(b->allocs, (b->n_allocs + sub->n_allocs + 1) * sizeof *b->allocs);
  if (!b->allocs) abort();
  for (size_t i = 0; i < sub->n_allocs; i++) b->allocs[b->n_allocs++] = sub->allocs[i];
  b->allocs[b->n_allocs++] = sub;
  free(sub->allocs);
  sub->allocs = NULL;
  sub->n_allocs = 0;
}

// Writes the model and frees the builder; returns 0 on success.
static inline int ob_save(ob *b, const char *path) {
  size_t n = onnx__model_proto__get_packed_size(&b->m);
  uint8_t *buf = malloc(n ? n : 1);
  int rc = -1;
  if (buf) {
    onnx__model_proto__pack(&b->m, buf);
    FILE *f = fopen(path, "wb");
    if (f) {
      rc = fwrite(buf, 1, n, f) == n ? 0 : -1;
      if (fclose(f) != 0) rc = -1;
    }
    free(buf);
  }
  for (size_t i = 0; i < b->n_allocs; i++) free(b->allocs[i]);
  free(b->allocs);
  free(b);
  return rc;
}

#endif
