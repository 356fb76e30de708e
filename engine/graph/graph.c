// engine/graph/graph.c: the graph's representation: its values (with a
// name index), nodes and attributes, the read-only accessors of graph.h, the
// mutations load-time passes may make (graph_internal.h) and destroy. The
// ONNX loader that fills it is load.c.
#include "engine/graph/graph_struct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *eng_graph__dup_str(const char *s) {
  if (!s) s = "";
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

int eng_graph__find_value(const eng_graph *g, const char *name) {
  if (!g->hash_cap) return -1;
  size_t m = g->hash_cap - 1;
  for (size_t i = hash_name(name) & m;; i = (i + 1) & m) {
    int v = g->hash[i];
    if (v < 0) return -1;
    if (strcmp(g->values[v].name, name) == 0) return v;
  }
}

static int hash_insert(eng_graph *g, int v, err *e) {
  if ((g->n_values + 1) * 2 > g->hash_cap) {
    size_t cap = g->hash_cap ? g->hash_cap * 2 : 64;
    int *h = malloc(cap * sizeof *h);
    if (!h) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t i = 0; i < cap; i++) h[i] = -1;
    free(g->hash);
    g->hash = h;
    g->hash_cap = cap;
    for (int j = 0; j < v; j++) {
      size_t k = hash_name(g->values[j].name) & (cap - 1);
      while (h[k] >= 0) k = (k + 1) & (cap - 1);
      h[k] = j;
    }
  }
  size_t k = hash_name(g->values[v].name) & (g->hash_cap - 1);
  while (g->hash[k] >= 0) k = (k + 1) & (g->hash_cap - 1);
  g->hash[k] = v;
  return 0;
}

int eng_graph__add_value(eng_graph *g, const char *name, eng_value_kind kind, int index, int *out,
                         err *e) {
  if (!name || !name[0]) return err_set(e, ERR_INVALID_ARGUMENT, "a value has an empty name");
  if (eng_graph__find_value(g, name) >= 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "value '%s' is defined more than once", name);
  if (g->n_values == g->cap_values) {
    size_t cap = g->cap_values ? g->cap_values * 2 : 64;
    eng_value *nv = realloc(g->values, cap * sizeof *nv);
    if (!nv) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    g->values = nv;
    g->cap_values = cap;
  }
  eng_value *v = &g->values[g->n_values];
  memset(v, 0, sizeof *v);
  v->name = eng_graph__dup_str(name);
  if (!v->name) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  v->kind = kind;
  v->index = index;
  TRY(hash_insert(g, (int)g->n_values, e));
  *out = (int)g->n_values++;
  return 0;
}


void eng_graph__free_attrs(eng_node *n) {
  for (int i = 0; i < n->n_attrs; i++) {
    free(n->attrs[i].name);
    free(n->attrs[i].s);
    free(n->attrs[i].floats);
    free(n->attrs[i].ints);
    for (size_t k = 0; k < n->attrs[i].n_strings; k++) free(n->attrs[i].strings[k]);
    free(n->attrs[i].strings);
    if (n->attrs[i].t) free(n->attrs[i].t->data);
    free(n->attrs[i].t);
    eng_graph_destroy(n->attrs[i].g);
  }
  free(n->attrs);
  n->attrs = NULL;
  n->n_attrs = 0;
}

void eng_graph__free_node(eng_node *n) {
  free(n->name);
  free(n->op_type);
  free(n->in);
  free(n->out);
  eng_graph__free_attrs(n);
}

void eng_graph_destroy(eng_graph *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_values; i++) {
    free(g->values[i].name);
    free(g->values[i].data);
  }
  free(g->values);
  // nodes beyond n_nodes were never filled (calloc'd), freeing them is a no-op
  for (size_t i = 0; i < g->n_nodes; i++) eng_graph__free_node(&g->nodes[i]);
  free(g->nodes);
  free(g->inputs);
  free(g->input_io);
  free(g->outputs);
  free(g->output_io);
  free(g->outer_in);
  free(g->hash);
  free(g->path);
  free(g);
}

// --- for the load-time passes (graph_internal.h)

eng_node *eng_graph__node_mut(eng_graph *g, size_t i) { return &g->nodes[i]; }
eng_value *eng_graph__value_mut(eng_graph *g, size_t v) { return &g->values[v]; }

size_t eng_graph_n_outer(const eng_graph *g) { return g->n_outer; }
int eng_graph_outer_input(const eng_graph *g, size_t j) { return g->outer_in[j]; }

const eng_graph_opts *eng_graph__opts(const eng_graph *g) { return &g->opts; }
void eng_graph__set_n_attention(eng_graph *g, size_t n) { g->n_attention = n; }
size_t eng_graph_n_attention(const eng_graph *g) { return g->n_attention; }
void eng_graph__set_n_qkv_merged(eng_graph *g, size_t n) { g->n_qkv_merged = n; }
size_t eng_graph_n_qkv_merged(const eng_graph *g) { return g->n_qkv_merged; }
void eng_graph__add_n_qdq(eng_graph *g, size_t conv, size_t matmul) {
  g->n_qdq_conv += conv;
  g->n_qdq_matmul += matmul;
}
void eng_graph__add_n_qdq_float(eng_graph *g, size_t pairs, size_t weights) {
  g->n_qdq_pairs += pairs;
  g->n_qdq_weights += weights;
}
void eng_graph__set_n_qdq_nodes(eng_graph *g, size_t n) { g->n_qdq_nodes = n; }
size_t eng_graph_n_qdq_nodes(const eng_graph *g) { return g->n_qdq_nodes; }
size_t eng_graph_n_qdq_pairs(const eng_graph *g) { return g->n_qdq_pairs; }
size_t eng_graph_n_qdq_weights(const eng_graph *g) { return g->n_qdq_weights; }
size_t eng_graph_n_qdq_conv(const eng_graph *g) { return g->n_qdq_conv; }
size_t eng_graph_n_qdq_matmul(const eng_graph *g) { return g->n_qdq_matmul; }

int eng_graph__is_output(const eng_graph *g, int v) {
  for (size_t j = 0; j < g->n_outputs; j++)
    if (g->outputs[j] == v) return 1;
  return 0;
}

int *eng_graph__live_readers(const eng_graph *g, const unsigned char *dead) {
  int *c = calloc(eng_graph_n_values(g) + 1, sizeof *c);
  if (!c) return NULL;
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) {
    if (dead[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) c[n->in[k]]++;
  }
  return c;
}

long eng_graph__live_producer(const eng_graph *g, const unsigned char *dead, int v, const char *op) {
  if (v < 0) return -1;
  const eng_value *x = eng_graph_value(g, (size_t)v);
  if (x->kind != ENG_VALUE_NODE || dead[x->index]) return -1;
  return strcmp(eng_graph_node(g, (size_t)x->index)->op_type, op) == 0 ? x->index : -1;
}

int eng_graph__add_const(eng_graph *g, const char *name, dtype dt, int ndims, const int64_t *dims,
                         void *data, size_t bytes, int *vi, err *e) {
  char buf[ENG_NAME_MAX + 32];
  snprintf(buf, sizeof buf, "%s", name);
  for (int k = 1; eng_graph__find_value(g, buf) >= 0; k++) snprintf(buf, sizeof buf, "%.*s#%d", ENG_NAME_MAX, name, k);
  TRY(eng_graph__add_value(g, buf, ENG_VALUE_CONST, -1, vi, e));
  eng_value *v = &g->values[*vi];
  v->dt = dt;
  v->ndims = ndims;
  for (int d = 0; d < ndims; d++) v->dims[d] = dims[d];
  v->data = data;
  v->bytes = bytes;
  return 0;
}

int eng_graph__compact(eng_graph *g, const unsigned char *dead, err *e) {
  int *vmap = malloc((g->n_values + 1) * sizeof *vmap);
  int *nmap = malloc((g->n_nodes + 1) * sizeof *nmap);
  int *h = NULL;
  if (!vmap || !nmap) goto oom;
  for (size_t v = 0; v < g->n_values; v++) vmap[v] = -1;
  for (size_t i = 0; i < g->n_inputs; i++) vmap[g->inputs[i]] = 0;
  for (size_t i = 0; i < g->n_outputs; i++) vmap[g->outputs[i]] = 0;
  size_t nn = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    eng_node *n = &g->nodes[i];
    if (dead[i]) {
      nmap[i] = -1;
      eng_graph__free_node(n);
      continue;
    }
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) vmap[n->in[k]] = 0;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) vmap[n->out[k]] = 0;
    nmap[i] = (int)nn;
    g->nodes[nn++] = *n;
  }
  g->n_nodes = nn;
  size_t nv = 0;
  for (size_t v = 0; v < g->n_values; v++) {
    if (vmap[v] < 0) {
      free(g->values[v].name);
      free(g->values[v].data);
      continue;
    }
    vmap[v] = (int)nv;
    g->values[nv] = g->values[v];
    if (g->values[nv].kind == ENG_VALUE_NODE) g->values[nv].index = nmap[g->values[nv].index];
    nv++;
  }
  g->n_values = nv;
  for (size_t i = 0; i < nn; i++) {
    eng_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) n->in[k] = vmap[n->in[k]];
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) n->out[k] = vmap[n->out[k]];
  }
  for (size_t i = 0; i < g->n_inputs; i++) g->inputs[i] = vmap[g->inputs[i]];
  for (size_t i = 0; i < g->n_outputs; i++) g->outputs[i] = vmap[g->outputs[i]];
  // the name index, rebuilt for the new numbering
  h = malloc(g->hash_cap * sizeof *h);
  if (!h) goto oom;
  for (size_t i = 0; i < g->hash_cap; i++) h[i] = -1;
  for (size_t v = 0; v < nv; v++) {
    size_t k = hash_name(g->values[v].name) & (g->hash_cap - 1);
    while (h[k] >= 0) k = (k + 1) & (g->hash_cap - 1);
    h[k] = (int)v;
  }
  free(g->hash);
  g->hash = h;
  free(vmap);
  free(nmap);
  return 0;
oom:
  free(vmap);
  free(nmap);
  return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
}

// --- accessors

size_t eng_graph_n_inputs(const eng_graph *g) { return g->n_inputs; }
const eng_io *eng_graph_input(const eng_graph *g, size_t i) {
  return i < g->n_inputs ? &g->input_io[i] : NULL;
}
size_t eng_graph_n_outputs(const eng_graph *g) { return g->n_outputs; }
const eng_io *eng_graph_output(const eng_graph *g, size_t i) {
  return i < g->n_outputs ? &g->output_io[i] : NULL;
}
int eng_graph_opset(const eng_graph *g) { return g->opset; }
int eng_graph_opset_ml(const eng_graph *g) { return g->opset_ml; }

size_t eng_graph_n_ml_nodes(const eng_graph *g) {
  size_t n = 0;
  for (size_t i = 0; i < g->n_nodes; i++) n += strncmp(g->nodes[i].op_type, ENG_ML_PREFIX, strlen(ENG_ML_PREFIX)) == 0;
  return n;
}
size_t eng_graph_n_nodes(const eng_graph *g) { return g->n_nodes; }
const eng_node *eng_graph_node(const eng_graph *g, size_t i) {
  return i < g->n_nodes ? &g->nodes[i] : NULL;
}
size_t eng_graph_n_values(const eng_graph *g) { return g->n_values; }
const eng_value *eng_graph_value(const eng_graph *g, size_t i) {
  return i < g->n_values ? &g->values[i] : NULL;
}
int eng_graph_input_value(const eng_graph *g, size_t i) {
  return i < g->n_inputs ? g->inputs[i] : -1;
}
int eng_graph_output_value(const eng_graph *g, size_t i) {
  return i < g->n_outputs ? g->outputs[i] : -1;
}
const eng_attr *eng_node_attr(const eng_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}
