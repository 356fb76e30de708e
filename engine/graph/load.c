// engine/graph/load.c: ONNX file -> eng_graph. Parses the ModelProto with
// protobuf-c, copies what the planner needs into our own structs (so the
// protobuf tree, which duplicates every weight, is freed before we return),
// folds Constant nodes into initializers, widens float16/bfloat16/double
// weights to FP32, reads external data files, sorts nodes topologically and
// runs the load-time passes (graph_pass.c). The representation it fills is
// graph.c's.
#include "engine/graph/graph_struct.h"
#include "kernels/base/confine.h"
#include "kernels/base/rfile.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/ops/ops_table.h"
#include "kernels/k_ref.h"
#include "onnx.pb-c.h"

static int is_default_domain(const char *d) {
  return d == NULL || d[0] == '\0' || strcmp(d, "ai.onnx") == 0;
}

// ai.onnx.ml: its ops are registered under ENG_ML_PREFIX (graph.h).
static int is_ml_domain(const char *d) { return d && strcmp(d, "ai.onnx.ml") == 0; }



// A relative path that stays inside the model directory: no leading '/',
// no ".." component.
static int location_ok(const char *loc) {
  if (!loc[0] || loc[0] == '/') return 0;
  const char *p = loc;
  while (*p) {
    const char *q = strchr(p, '/');
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
    if (!q) break;
    p = q + 1;
  }
  return 1;
}

static int parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < 0) return -1;
  *out = v;
  return 0;
}

// The folder external data names resolve in (the model file's, its link
// not followed), and where links met on the way may lead (confine.h; NULL:
// only inside that folder).
typedef struct src_dir {
  const char *path;
  const eng_confine_roots *roots;
} src_dir;

// Reads `bytes` of external data into a new buffer *out (the caller frees
// it, also on failure when set).
static int read_external(const Onnx__TensorProto *t, const src_dir *dir, size_t bytes, void **out, err *e) {
  const char *loc = NULL;
  int64_t off = 0, len = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
    if (!k || !v) continue;
    if (strcmp(k, "location") == 0) loc = v;
    else if (strcmp(k, "offset") == 0 && parse_i64(v, &off) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "bad external data offset '%s'", v);
    else if (strcmp(k, "length") == 0 && parse_i64(v, &len) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "bad external data length '%s'", v);
  }
  if (!loc) return err_set(e, ERR_INVALID_ARGUMENT, "external data without a location");
  if (!location_ok(loc))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "external data location '%s' escapes the model directory", loc);
  if (len >= 0 && (size_t)len != bytes)
    return err_set(e, ERR_INVALID_ARGUMENT, "external data length %lld, expected %zu bytes",
                   (long long)len, bytes);
  // the name is checked above; the file it resolves to (links followed) is checked here
  FILE *f = eng_confine_fopen(dir->path, loc, dir->roots, "external data", e);
  if (!f) return e->code;
  // the file must hold the bytes before they are allocated (see tensor_from_proto)
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || (uint64_t)st.st_size < (uint64_t)off ||
      (uint64_t)st.st_size - (uint64_t)off < bytes) {
    fclose(f);
    return err_set(e, ERR_INVALID_ARGUMENT, "external data '%s/%s' is too short: need %zu bytes at offset %lld",
                   dir->path, loc, bytes, (long long)off);
  }
  void *dst = malloc(bytes ? bytes : 1);
  if (!dst) {
    fclose(f);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory (%zu bytes)", bytes);
  }
  *out = dst;
  int rc = 0;
  if (fseeko(f, (off_t)off, SEEK_SET) != 0 || (bytes && fread(dst, 1, bytes, f) != bytes))
    rc = err_set(e, ERR_INVALID_ARGUMENT, "external data '%s/%s' is too short: need %zu bytes at offset %lld",
                 dir->path, loc, bytes, (long long)off);
  fclose(f);
  return rc;
}

// --- tensors

static void bf16_to_f32(float *y, const uint16_t *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)x[i] << 16;
    memcpy(&y[i], &u, 4);
  }
}

// Fills v (dt, dims, data, bytes) from a TensorProto. Float types wider or
// narrower than FP32 are stored as FP32 because every float op computes in
// FP32. Assumes a little-endian host, as raw_data is little-endian.
static int tensor_from_proto(const Onnx__TensorProto *t, const src_dir *dir, eng_value *v, err *e) {
  dtype src = dtype_from_onnx(t->data_type);
  if (src == DT_INVALID || src == DT_STRING)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported tensor data type %d", (int)t->data_type);
  if (t->n_dims > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%zu dims, at most %d supported", t->n_dims,
                   ENG_MAX_DIMS);
  if (t->segment) return err_set(e, ERR_INVALID_ARGUMENT, "segmented tensors are not supported");
  int64_t numel = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0 || (t->dims[i] && numel > (INT64_C(1) << 40) / t->dims[i]))
      return err_set(e, ERR_INVALID_ARGUMENT, "bad dims");
    numel *= t->dims[i];
    v->dims[i] = t->dims[i];
  }
  v->ndims = (int)t->n_dims;
  size_t n = (size_t)numel, esz = dtype_size(src), bytes = n * esz;
  int external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  // the data in the file must match the dims before anything is allocated:
  // a few bytes of model declaring 2^40 elements must not cost a
  // terabyte-sized malloc (found by tests/fuzz/fuzz_graph)
  size_t have = n;
  if (!external && !t->has_raw_data) {
    switch (src) {
      case DT_FP32: have = t->n_float_data; break;
      case DT_FP64: have = t->n_double_data; break;
      case DT_INT64: have = t->n_int64_data; break;
      case DT_UINT32:
      case DT_UINT64: have = t->n_uint64_data; break;
      default: have = t->n_int32_data; break;
    }
  }
  if (!external && t->has_raw_data && t->raw_data.len != bytes)
    return err_set(e, ERR_INVALID_ARGUMENT, "raw_data has %zu bytes, expected %zu", t->raw_data.len, bytes);
  if (have != n) return err_set(e, ERR_INVALID_ARGUMENT, "has %zu typed values, expected %zu", have, n);
  void *raw = NULL;
  int rc = 0;
  if (external) {
    rc = read_external(t, dir, bytes, &raw, e);
  } else if (!(raw = malloc(bytes ? bytes : 1))) {
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory (%zu bytes)", bytes);
  } else if (t->has_raw_data) {
    if (bytes) memcpy(raw, t->raw_data.data, bytes);
  } else {
    for (size_t i = 0; i < n; i++) {
      switch (src) {
        case DT_FP32: ((float *)raw)[i] = t->float_data[i]; break;
        case DT_FP64: ((double *)raw)[i] = t->double_data[i]; break;
        case DT_INT64: ((int64_t *)raw)[i] = t->int64_data[i]; break;
        case DT_UINT32: ((uint32_t *)raw)[i] = (uint32_t)t->uint64_data[i]; break;
        case DT_UINT64: ((uint64_t *)raw)[i] = t->uint64_data[i]; break;
        case DT_INT32: ((int32_t *)raw)[i] = t->int32_data[i]; break;
        case DT_INT16: ((int16_t *)raw)[i] = (int16_t)t->int32_data[i]; break;
        case DT_UINT16:
        case DT_FP16:
        case DT_BF16: ((uint16_t *)raw)[i] = (uint16_t)t->int32_data[i]; break;
        case DT_INT8: ((int8_t *)raw)[i] = (int8_t)t->int32_data[i]; break;
        default: ((uint8_t *)raw)[i] = (uint8_t)t->int32_data[i]; break;  // UINT8, BOOL
      }
    }
  }
  if (rc) {
    free(raw);
    return rc;
  }
  if (src == DT_FP16 || src == DT_BF16 || src == DT_FP64) {
    float *f = malloc(n ? n * sizeof(float) : 1);
    if (!f) {
      free(raw);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (src == DT_FP16) k_f16_to_f32(f, raw, n);
    else if (src == DT_BF16) bf16_to_f32(f, raw, n);
    else
      for (size_t i = 0; i < n; i++) f[i] = (float)((double *)raw)[i];
    free(raw);
    raw = f;
    src = DT_FP32;
    bytes = n * sizeof(float);
  }
  v->dt = src;
  v->data = raw;
  v->bytes = bytes;
  return 0;
}

static int add_const_proto(eng_graph *g, const char *name, const Onnx__TensorProto *t,
                           const src_dir *dir, err *e) {
  int vi;
  TRY(eng_graph__add_value(g, name, ENG_VALUE_CONST, -1, &vi, e));
  if (tensor_from_proto(t, dir, &g->values[vi], e) != 0)
    return err_prefix(e, "initializer '%s': ", name);
  return 0;
}

// Constant node -> initializer. value_float(s)/value_int(s) become FP32/INT64.
static int fold_constant(eng_graph *g, const Onnx__NodeProto *np, const char *nname,
                         const src_dir *dir, err *e) {
  if (np->n_output != 1 || np->n_attribute != 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "node '%s' (op_type 'Constant'): needs one output and one attribute", nname);
  const Onnx__AttributeProto *a = np->attribute[0];
  const char *an = a->name ? a->name : "";
  const char *out = np->output[0];
  if (strcmp(an, "value") == 0 && a->t) {
    int vi;
    TRY(eng_graph__add_value(g, out, ENG_VALUE_CONST, -1, &vi, e));
    if (tensor_from_proto(a->t, dir, &g->values[vi], e) != 0)
      return err_prefix(e, "node '%s' (op_type 'Constant'): ", nname);
    return 0;
  }
  int is_f = strcmp(an, "value_float") == 0, is_fs = strcmp(an, "value_floats") == 0;
  int is_i = strcmp(an, "value_int") == 0, is_is = strcmp(an, "value_ints") == 0;
  if (!is_f && !is_fs && !is_i && !is_is)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "node '%s' (op_type 'Constant'): unsupported attribute '%s'", nname, an);
  size_t n = is_f || is_i ? 1 : is_fs ? a->n_floats : a->n_ints;
  int vi;
  TRY(eng_graph__add_value(g, out, ENG_VALUE_CONST, -1, &vi, e));
  eng_value *v = &g->values[vi];
  v->dt = is_f || is_fs ? DT_FP32 : DT_INT64;
  v->ndims = is_f || is_i ? 0 : 1;
  v->dims[0] = (int64_t)n;
  v->bytes = n * dtype_size(v->dt);
  v->data = malloc(v->bytes ? v->bytes : 1);
  if (!v->data) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (is_f) *(float *)v->data = a->f;
  else if (is_i) *(int64_t *)v->data = a->i;
  else if (is_fs && n) memcpy(v->data, a->floats, v->bytes);
  else if (n) memcpy(v->data, a->ints, v->bytes);
  return 0;
}

// --- nodes

static int copy_attrs(eng_node *n, const Onnx__NodeProto *np, const src_dir *dir, err *e) {
  n->attrs = calloc(np->n_attribute ? np->n_attribute : 1, sizeof *n->attrs);
  if (!n->attrs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  n->n_attrs = (int)np->n_attribute;
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    eng_attr *d = &n->attrs[i];
    d->name = eng_graph__dup_str(a->name);
    d->type = a->has_type ? (int)a->type : 0;
    d->f = a->f;
    d->i = a->i;
    d->s = malloc(a->s.len + 1);
    if (!d->name || !d->s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (a->s.len) memcpy(d->s, a->s.data, a->s.len);
    d->s[a->s.len] = '\0';
    if (a->n_floats) {
      d->floats = malloc(a->n_floats * sizeof(float));
      if (!d->floats) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      memcpy(d->floats, a->floats, a->n_floats * sizeof(float));
      d->n_floats = a->n_floats;
    }
    if (a->n_ints) {
      d->ints = malloc(a->n_ints * sizeof(int64_t));
      if (!d->ints) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      memcpy(d->ints, a->ints, a->n_ints * sizeof(int64_t));
      d->n_ints = a->n_ints;
    }
    // a STRING tensor attribute (LabelEncoder's keys_tensor) is kept as its strings
    int str_t = a->t && dtype_from_onnx(a->t->data_type) == DT_STRING;
    size_t ns = str_t ? a->t->n_string_data : a->n_strings;
    const ProtobufCBinaryData *ss = str_t ? a->t->string_data : a->strings;
    if (ns) {
      d->strings = calloc(ns, sizeof *d->strings);
      if (!d->strings) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      d->n_strings = ns;
      for (size_t k = 0; k < ns; k++) {
        d->strings[k] = malloc(ss[k].len + 1);
        if (!d->strings[k]) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
        if (ss[k].len) memcpy(d->strings[k], ss[k].data, ss[k].len);
        d->strings[k][ss[k].len] = '\0';
      }
    }
    if (a->t && !str_t) {  // ConstantOfShape's value
      d->t = calloc(1, sizeof *d->t);
      if (!d->t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      if (tensor_from_proto(a->t, dir, d->t, e) != 0)
        return err_prefix(e, "node '%s' (op_type '%s'): attribute '%s': ", n->name, n->op_type,
                          d->name);
    }
  }
  return 0;
}


// Kahn's algorithm over node indices; stable for already-sorted files.
static int toposort(eng_graph *g, err *e) {
  size_t n = g->n_nodes;
  if (!n) return 0;
  int *deps = calloc(n, sizeof *deps), *order = malloc(n * sizeof *order);
  int *cnt = calloc(n + 1, sizeof *cnt), *adj = NULL;
  int rc = 0;
  size_t n_edges = 0;
  if (!deps || !order || !cnt) goto oom;
  // consumers of each node in CSR form
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++) {
      int v = g->nodes[i].in[k];
      if (v >= 0 && g->values[v].kind == ENG_VALUE_NODE) {
        cnt[g->values[v].index + 1]++;
        deps[i]++;
        n_edges++;
      }
    }
  for (size_t i = 0; i < n; i++) cnt[i + 1] += cnt[i];
  adj = malloc((n_edges ? n_edges : 1) * sizeof *adj);
  int *fill = calloc(n, sizeof *fill);
  if (!adj || !fill) {
    free(fill);
    goto oom;
  }
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++) {
      int v = g->nodes[i].in[k];
      if (v >= 0 && g->values[v].kind == ENG_VALUE_NODE) {
        int p = g->values[v].index;
        adj[cnt[p] + fill[p]++] = (int)i;
      }
    }
  free(fill);
  size_t head = 0, tail = 0;
  for (size_t i = 0; i < n; i++)
    if (!deps[i]) order[tail++] = (int)i;
  while (head < tail) {
    int u = order[head++];
    for (int j = cnt[u]; j < cnt[u + 1]; j++)
      if (--deps[adj[j]] == 0) order[tail++] = adj[j];
  }
  if (tail < n) {
    for (size_t i = 0; i < n; i++)
      if (deps[i]) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "graph has a cycle through node '%s' (op_type '%s')",
                     g->nodes[i].name, g->nodes[i].op_type);
        break;
      }
    goto done;
  }
  {
    eng_node *sorted = malloc(n * sizeof *sorted);
    int *pos = malloc(n * sizeof *pos);
    if (!sorted || !pos) {
      free(sorted);
      free(pos);
      goto oom;
    }
    for (size_t i = 0; i < n; i++) {
      sorted[i] = g->nodes[order[i]];
      pos[order[i]] = (int)i;
    }
    for (size_t v = 0; v < g->n_values; v++)
      if (g->values[v].kind == ENG_VALUE_NODE) g->values[v].index = pos[g->values[v].index];
    free(g->nodes);
    g->nodes = sorted;
    free(pos);
  }
  goto done;
oom:
  rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
done:
  free(deps);
  free(order);
  free(cnt);
  free(adj);
  return rc;
}

// --- graph inputs / outputs

static int io_from_value_info(const Onnx__ValueInfoProto *vi, eng_io *io, err *e) {
  memset(io, 0, sizeof *io);
  snprintf(io->name, sizeof io->name, "%s", vi->name ? vi->name : "");
  if (strlen(vi->name ? vi->name : "") >= sizeof io->name)
    return err_set(e, ERR_INVALID_ARGUMENT, "name '%.40s...' is too long", vi->name);
  io->ndims = -1;
  if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return err_set(e, ERR_INVALID_ARGUMENT, "'%s' is not a tensor", io->name);
  const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
  io->dt = tt->has_elem_type ? dtype_from_onnx(tt->elem_type) : DT_INVALID;
  if (tt->has_elem_type && io->dt == DT_INVALID)
    return err_set(e, ERR_INVALID_ARGUMENT, "'%s' has unsupported element type %d", io->name,
                   (int)tt->elem_type);
  if (tt->shape) {
    if (tt->shape->n_dim > ENG_MAX_DIMS)
      return err_set(e, ERR_INVALID_ARGUMENT, "'%s' has %zu dims, at most %d supported", io->name,
                     tt->shape->n_dim, ENG_MAX_DIMS);
    io->ndims = (int)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      io->dims[i] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                            d->dim_value >= 0
                        ? d->dim_value
                        : -1;
    }
  }
  return 0;
}

// --- load

// The names a graph being built can read: its own values, then those of the
// graphs enclosing it (a subgraph's outer-scope references).
typedef struct scope {
  eng_graph *g;
  struct scope *parent;  // NULL for the model's graph
} scope;

// Appends a graph input (io copied) as value *vi; the arrays grow as a
// subgraph gains outer inputs.
static int add_input(eng_graph *g, const eng_io *io, const char *name, int *vi, err *e) {
  if (g->n_inputs == g->cap_inputs) {
    size_t cap = g->cap_inputs ? g->cap_inputs * 2 : 8;
    int *in = realloc(g->inputs, cap * sizeof *in);
    if (!in) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    g->inputs = in;
    eng_io *io2 = realloc(g->input_io, cap * sizeof *io2);
    if (!io2) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    g->input_io = io2;
    g->cap_inputs = cap;
  }
  g->input_io[g->n_inputs] = *io;
  TRY(eng_graph__add_value(g, name, ENG_VALUE_INPUT, (int)g->n_inputs, vi, e));
  eng_value *v = &g->values[*vi];
  v->dt = io->dt;
  v->ndims = io->ndims;
  memcpy(v->dims, io->dims, sizeof v->dims);
  g->inputs[g->n_inputs++] = *vi;
  return 0;
}

// The value `name` reads in scope sc (*vi; -1 when no scope defines it). A
// name only an enclosing graph defines becomes an outer input of sc's
// graph (and of every graph between), its type and shape those of the run.
static int resolve(scope *sc, const char *name, int *vi, err *e) {
  *vi = eng_graph__find_value(sc->g, name);
  if (*vi >= 0 || !sc->parent) return 0;
  int pv;
  TRY(resolve(sc->parent, name, &pv, e));
  if (pv < 0) return 0;
  eng_io io;
  memset(&io, 0, sizeof io);
  if (strlen(name) >= sizeof io.name)
    return err_set(e, ERR_INVALID_ARGUMENT, "name '%.40s...' is too long", name);
  snprintf(io.name, sizeof io.name, "%s", name);
  io.dt = DT_INVALID;  // any: the enclosing value's, run by run
  io.ndims = -1;
  TRY(add_input(sc->g, &io, name, vi, e));
  int *o = realloc(sc->g->outer_in, (sc->g->n_outer + 1) * sizeof *o);
  if (!o) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  sc->g->outer_in = o;
  o[sc->g->n_outer++] = -1;  // set by the owning node (load_subgraphs)
  return 0;
}

// Inside a subgraph every float computes as FP32 and travels so between the
// enclosing plan and the subgraph's: its declared edges say so.
static dtype sub_edge_dtype(dtype t) {
  return t == DT_FP16 || t == DT_BF16 || t == DT_FP64 ? DT_FP32 : t;
}

static int build_graph(eng_graph *g, const Onnx__GraphProto *gp, const src_dir *dir, scope *sc, err *e);

// Node n's GRAPH attributes (np's), each loaded as a subgraph whose outer
// names resolve in sc; their outer inputs become n's implicit inputs.
static int load_subgraphs(eng_node *n, const Onnx__NodeProto *np, const src_dir *dir, scope *sc, err *e) {
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    if (!a->g) continue;
    if (!a->has_type || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) continue;
    eng_attr *d = &n->attrs[i];
    int depth = 0;
    for (const scope *s = sc; s; s = s->parent) depth++;
    if (depth > 32)  // each level is a plan inside a node's run: bounded, as the stack is
      return err_set(e, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s'): subgraphs nested more than 32 deep",
                     n->name, n->op_type);
    eng_graph *sub = calloc(1, sizeof *sub);
    if (!sub) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    d->g = sub;  // owned by the attribute from here on, also on failure
    sub->opset = sc->g->opset;
    sub->opts = sc->g->opts;
    scope child = {sub, sc};
    if (build_graph(sub, a->g, dir, &child, e) != 0)
      return err_prefix(e, "node '%s' (op_type '%s'): subgraph '%s': ", n->name, n->op_type, d->name);
    for (size_t j = 0; j < sub->n_outer; j++) {
      const char *name = sub->values[sub->inputs[sub->n_inputs - sub->n_outer + j]].name;
      int vi;
      TRY(resolve(sc, name, &vi, e));
      int pos = -1;
      for (int k = n->n_in - n->n_implicit; k < n->n_in && pos < 0; k++)
        if (n->in[k] == vi) pos = k;
      if (pos < 0) {
        int *in = realloc(n->in, (size_t)(n->n_in + 1) * sizeof *in);
        if (!in) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
        n->in = in;
        pos = n->n_in++;
        n->in[pos] = vi;
        n->n_implicit++;
      }
      sub->outer_in[j] = pos;
    }
  }
  return 0;
}

// Fills g from gp: initializers, inputs, nodes (Constants folded,
// subgraphs loaded), outputs, then sorts and runs the load-time passes.
// sc->parent is NULL for the model's graph; a subgraph's inputs may leave
// their type or shape unsaid and its names may be its enclosing graphs'.
static int build_graph(eng_graph *g, const Onnx__GraphProto *gp, const src_dir *dir, scope *sc, err *e) {
  int sub = sc->parent != NULL;
  if (gp->n_sparse_initializer)
    return err_set(e, ERR_INVALID_ARGUMENT, "sparse initializers are not supported");

  for (size_t i = 0; i < gp->n_initializer; i++)
    TRY(add_const_proto(g, gp->initializer[i]->name, gp->initializer[i], dir, e));

  // inputs that are not initializers (older exporters list weights as inputs)
  g->cap_inputs = gp->n_input + 1;
  g->inputs = malloc(g->cap_inputs * sizeof *g->inputs);
  g->input_io = malloc(g->cap_inputs * sizeof *g->input_io);
  if (!g->inputs || !g->input_io) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *name = gp->input[i]->name;
    int vi = name ? eng_graph__find_value(g, name) : -1;
    if (vi >= 0 && g->values[vi].kind == ENG_VALUE_CONST) continue;
    eng_io io;
    if (sub && (!gp->input[i]->type || gp->input[i]->type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)) {
      // a subgraph's input may say nothing of its type: the run's
      memset(&io, 0, sizeof io);
      snprintf(io.name, sizeof io.name, "%s", name ? name : "");
      io.ndims = -1;
    } else if (io_from_value_info(gp->input[i], &io, e) != 0) {
      return err_prefix(e, "graph input: ");
    }
    if (!sub && (io.dt == DT_INVALID || io.ndims < 0))
      return err_set(e, ERR_INVALID_ARGUMENT, "graph input '%s' has no element type or shape",
                     io.name);
    if (sub) io.dt = sub_edge_dtype(io.dt);
    TRY(add_input(g, &io, name, &vi, e));
  }

  // nodes: fold Constants, define every output first (files need not be sorted)
  g->nodes = calloc(gp->n_node ? gp->n_node : 1, sizeof *g->nodes);
  if (!g->nodes) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  const Onnx__NodeProto **kept = malloc((gp->n_node ? gp->n_node : 1) * sizeof *kept);
  if (!kept) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = 0;
  err_list unsupported = {0};
  err one = {0};  // the message when a single node is unsupported
  for (size_t i = 0; i < gp->n_node && !rc; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    char fallback[32];
    snprintf(fallback, sizeof fallback, "#%zu", i);
    const char *nname = np->name && np->name[0] ? np->name : fallback;
    const char *op = np->op_type ? np->op_type : "";
    // unsupported nodes are collected, not fatal at once: the author of an
    // exported model wants the whole list of what is missing
    char ml_op[160];
    if (is_ml_domain(np->domain)) {
      if (strcmp(op, "ZipMap") == 0) {
        // a sequence of maps has no KServe form: the converter can leave it out
        err_list_add(&unsupported, "'%s' (op_type 'ZipMap', domain 'ai.onnx.ml'): its output, a sequence of maps, "
                     "cannot be served over KServe; convert without it (skl2onnx: options={id(model): {'zipmap': "
                     "False}}) to get the probabilities as a tensor", nname);
        err_set(&one, ERR_INVALID_ARGUMENT, "node '%s' (op_type 'ZipMap', domain 'ai.onnx.ml'): its output, a "
                "sequence of maps, cannot be served over KServe; convert without it (skl2onnx: options={id(model): "
                "{'zipmap': False}}) to get the probabilities as a tensor", nname);
        continue;
      }
      snprintf(ml_op, sizeof ml_op, "%s%s", ENG_ML_PREFIX, op);
      if (!eng_ops_supported(ml_op)) {
        err_list_add(&unsupported, "'%s' (op_type '%s', domain 'ai.onnx.ml')", nname, op);
        err_set(&one, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s', domain 'ai.onnx.ml'): unsupported op", nname, op);
        continue;
      }
      op = ml_op;
    } else if (!is_default_domain(np->domain)) {
      err_list_add(&unsupported, "'%s' (op_type '%s', domain '%s')", nname, op, np->domain);
      err_set(&one, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s'): unsupported domain '%s'",
              nname, op, np->domain);
      continue;
    }
    if (op != ml_op && strcmp(op, "Constant") == 0) {
      rc = fold_constant(g, np, nname, dir, e);
      continue;
    }
    if (op != ml_op && !eng_ops_supported(op)) {
      err_list_add(&unsupported, "'%s' (op_type '%s')", nname, op);
      err_set(&one, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s'): unsupported op", nname, op);
      continue;
    }
    size_t ni = g->n_nodes;
    eng_node *n = &g->nodes[ni];
    kept[ni] = np;
    g->n_nodes++;
    n->name = eng_graph__dup_str(nname);
    n->op_type = eng_graph__dup_str(op);
    n->in = malloc((np->n_input + 1) * sizeof *n->in);
    n->out = malloc((np->n_output + 1) * sizeof *n->out);
    if (!n->name || !n->op_type || !n->in || !n->out) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    n->n_in = (int)np->n_input;
    n->n_out = (int)np->n_output;
    for (size_t k = 0; k < np->n_output && !rc; k++) {
      n->out[k] = -1;
      if (np->output[k][0]) rc = eng_graph__add_value(g, np->output[k], ENG_VALUE_NODE, (int)ni, &n->out[k], e);
    }
    if (!rc) rc = copy_attrs(n, np, dir, e);
  }
  if (!rc && unsupported.n == 1) {
    *e = one;
    rc = one.code;
  } else if (!rc && unsupported.n) {
    rc = err_list_set(&unsupported, e, ERR_INVALID_ARGUMENT, "unsupported nodes");
  }
  for (size_t i = 0; i < g->n_nodes && !rc; i++) {
    eng_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_in && !rc; k++) {
      const char *name = kept[i]->input[k];
      n->in[k] = -1;
      if (!name[0]) continue;
      rc = resolve(sc, name, &n->in[k], e);
      if (!rc && n->in[k] < 0)
        rc = err_set(e, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s'): input '%s' is not defined",
                     n->name, n->op_type, name);
    }
    if (!rc) rc = load_subgraphs(n, kept[i], dir, sc, e);
  }
  free(kept);
  TRY(rc);

  g->outputs = malloc((gp->n_output + 1) * sizeof *g->outputs);
  g->output_io = malloc((gp->n_output + 1) * sizeof *g->output_io);
  if (!g->outputs || !g->output_io) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (!gp->n_output) return err_set(e, ERR_INVALID_ARGUMENT, "the graph has no outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vo = gp->output[i];
    if (sub && (!vo->type || vo->type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)) {
      memset(&g->output_io[i], 0, sizeof g->output_io[i]);
      snprintf(g->output_io[i].name, sizeof g->output_io[i].name, "%s", vo->name ? vo->name : "");
      g->output_io[i].ndims = -1;
    } else if (io_from_value_info(vo, &g->output_io[i], e) != 0) {
      return err_prefix(e, "graph output: ");
    }
    if (sub) g->output_io[i].dt = sub_edge_dtype(g->output_io[i].dt);
    int vi;
    TRY(resolve(sc, g->output_io[i].name, &vi, e));
    if (vi < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "graph output '%s' is not produced by any node",
                     g->output_io[i].name);
    g->outputs[i] = vi;
    g->n_outputs++;
  }
  TRY(toposort(g, e));
  return eng_graph__run_passes(g, e);
}

static int build(eng_graph *g, const Onnx__ModelProto *m, const src_dir *dir, err *e) {
  g->opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++)
    if (is_default_domain(m->opset_import[i]->domain))
      g->opset = (int)m->opset_import[i]->version;
    else if (is_ml_domain(m->opset_import[i]->domain))
      g->opset_ml = (int)m->opset_import[i]->version;
  if (!m->graph) return err_set(e, ERR_INVALID_ARGUMENT, "the model has no graph");
  // a model of ai.onnx.ml ops alone may import that domain only
  if (g->opset < 1 && g->opset_ml < 1) return err_set(e, ERR_INVALID_ARGUMENT, "the model imports no ONNX opset");
  scope top = {g, NULL};
  return build_graph(g, m->graph, dir, &top, e);
}

int eng_graph_load(const char *onnx_path, eng_graph **out, err *e) {
  return eng_graph_load_opts(onnx_path, NULL, out, e);
}

int eng_graph_load_opts(const char *onnx_path, const eng_graph_opts *opts, eng_graph **out,
                        err *e) {
  *out = NULL;
  uint8_t *buf = NULL;
  size_t len = 0;
  // a regular file only: a FIFO named model.onnx would block the load until written (rfile.h)
  if (rfile_read_all(onnx_path, "model file", SIZE_MAX, &buf, &len, e) != 0) return err_prefix(e, "loading model: ");
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
  free(buf);
  if (!m)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "loading model '%s': not a valid ONNX model (protobuf parse failed)", onnx_path);
  eng_graph *g = calloc(1, sizeof *g);
  char *dir = eng_graph__dup_str(onnx_path);
  int rc;
  if (!g || !dir || !(g->path = eng_graph__dup_str(onnx_path))) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    if (opts) g->opts = *opts;
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else strcpy(dir, ".");
    src_dir sd = {.path = dir, .roots = g->opts.roots};
    g->opts.roots = NULL;  // the caller's, read during the load only
    rc = build(g, m, &sd, e);
    if (rc) err_prefix(e, "loading model '%s': ", onnx_path);
  }
  free(dir);
  onnx__model_proto__free_unpacked(m, NULL);
  if (rc) {
    eng_graph_destroy(g);
    return rc;
  }
  *out = g;
  return 0;
}
