// engine/cpu/plan.c: static memory planning and execution of a graph on the CPU.
// Layout = for every value the arena buffer ("root") it lives in and that
// buffer's offset. Views share their input's root; elementwise ops share it
// when their input dies at that node. Buffers are placed greedily, largest
// first, at the lowest offset free during their whole lifetime.
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/attn/attn.h"
#include "engine/ops/ops.h"
#include "engine/ops/str/str.h"
#include "kernels/base/strwire.h"
#include "kernels/k_ref.h"
#include "kernels/str/k_str.h"

#define ALIGN 64


static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static const char *node_desc_name(const eng_node *n) { return n->name; }

// --- shape inference for the shapes now in p->cur (inputs already set)

// Folded value v's buffer, grown to hold at least `bytes` (contents not
// kept); NULL when out of memory.
static void *fold_reserve(eng_plan *p, int v, size_t bytes) {
  if (bytes <= p->fold_cap[v] && p->fold_buf[v]) return p->fold_buf[v];
  free(p->fold_buf[v]);
  p->fold_cap[v] = 0;
  p->fold_buf[v] = malloc(bytes ? bytes : 1);
  if (p->fold_buf[v]) p->fold_cap[v] = bytes;
  return p->fold_buf[v];
}

// Whether node i, its shapes just inferred into p->tout, can run now: it
// has a run function, every input it reads is known and every output is small.
static int foldable(const eng_plan *p, size_t i, const eng_node *n) {
  if (!p->defs[i]->run) return 0;
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] >= 0 && !p->known[n->in[k]] && !(p->defs[i]->flags & ENG_OP_SHAPE_ONLY))
      return 0;
  for (int k = 0; k < n->n_out; k++)
    if (n->out[k] >= 0 && eng_numel(p->tout[k].ndims, p->tout[k].dims) > ENG_FOLD_MAX_ELEMS)
      return 0;
  return 1;
}

typedef struct fold_ctx {
  eng_plan *p;
  const eng_node *n;
} fold_ctx;

static void *fold_buf(void *ctx, int k, size_t bytes) {
  fold_ctx *f = ctx;
  return f->n->out[k] < 0 ? NULL : fold_reserve(f->p, f->n->out[k], bytes);
}

// Runs node i on plan-owned host memory (p->tin already set).
static int fold_node(eng_plan *p, size_t i, const eng_node *n, err *e) {
  fold_ctx f = {p, n};
  TRY(eng_ops_cpu_fold(p->defs[i], &p->params[i], p->tin, n->n_in, p->tout, n->n_out, fold_buf, &f, e));
  p->folded[i] = 1;
  p->folds++;
  return 0;
}

// Whether value v, for the shapes and folded bytes now in p->cur, repeats
// along the dim `ax` places from the end (ax 2: a mask's query rows): its
// size there is 1 or it has no such dim; or its bytes are known and every
// slice along it equals the first; or an ENG_OP_ELEMWISE node made it from
// such values (broadcasting aligns dims from the end, so the dim is the
// same one in every operand). A bounded walk back: false when unsure.
static int repeats_along(const eng_plan *p, int v, int ax, int depth) {
  const eng_tensor *t = &p->cur[v];
  int d = t->ndims - ax;
  if (d < 0 || t->dims[d] == 1) return 1;
  if (p->known[v]) {
    if (!t->data) return 0;
    size_t el = dtype_size(t->dt), inner = el, outer = 1;
    for (int i = d + 1; i < t->ndims; i++) inner *= (size_t)t->dims[i];
    for (int i = 0; i < d; i++) outer *= (size_t)t->dims[i];
    const unsigned char *b = t->data;
    size_t slab = inner * (size_t)t->dims[d];
    for (size_t o = 0; o < outer; o++)
      for (int64_t r = 1; r < t->dims[d]; r++)
        if (memcmp(b + o * slab, b + o * slab + (size_t)r * inner, inner) != 0) return 0;
    return 1;
  }
  const eng_value *x = eng_graph_value(p->g, (size_t)v);  // its producer: an earlier node (sorted graph)
  if (depth <= 0 || x->kind != ENG_VALUE_NODE) return 0;
  size_t j = (size_t)x->index;
  if (!(p->defs[j]->flags & ENG_OP_ELEMWISE)) return 0;
  const eng_node *n = eng_graph_node(p->g, j);
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] >= 0 && !(p->defs[j]->host_in & ENG_IN(k)) && !repeats_along(p, n->in[k], ax, depth - 1))
      return 0;
  return 1;
}

// Node i, an inferd.Attention with a mask: whether its mask's query rows
// are all one row. Exporters write the padding mask [B, Sk] expanded to
// [B, 1, Sq, Sk] (and through Where to 0/-inf); read with a row stride of
// 0, the kernels fetch one row per (batch, head) from cache instead of Sq
// rows from memory.
static int mask_rows_shared(const eng_plan *p, const eng_node *n) {
  if (strcmp(n->op_type, ENG_ATTN_OP) != 0 || n->n_in < 4 || n->in[3] < 0) return 0;
  return repeats_along(p, n->in[3], 2, 12);
}

// Node n, its shapes just inferred into p->tin/tout: a STRING operand only
// where its op handles the plan's string views (engine/ops/str/str.h);
// elsewhere a kernel would read them as numbers.
static int strings_taken(const eng_plan *p, const eng_node *n, err *e) {
  int any = 0;
  for (int k = 0; k < n->n_in; k++) any |= n->in[k] >= 0 && p->tin[k].dt == DT_STRING;
  for (int k = 0; k < n->n_out; k++) any |= n->out[k] >= 0 && p->tout[k].dt == DT_STRING;
  if (!any || eng_ops_str_supports(n->op_type)) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT,
                 "node '%s' (op_type '%s'): STRING tensors are not supported by this op (only by Cast and the "
                 "index ops)", node_desc_name(n), n->op_type);
}

// Every node's type and shape (and folds) for the input shapes now in p->cur
// (plan_internal.h).
int eng_plan__infer_nodes(eng_plan *p, int vals_known, err *e) {
  const eng_graph *g = p->g;
  for (size_t v = 0; v < p->n_values; v++) {
    const eng_value *x = eng_graph_value(g, v);
    // a value input's bytes are this run's (eng_plan__load_value_inputs)
    p->known[v] = x->kind == ENG_VALUE_CONST || (vals_known && x->kind == ENG_VALUE_INPUT && p->val_in[x->index]);
  }
  p->mask_rows_shared = 0;
  for (size_t i = 0; i < p->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    const eng_op_def *d = p->defs[i];
    p->folded[i] = 0;
    p->params[i].mask_rows_same = mask_rows_shared(p, n);
    p->mask_rows_shared += (size_t)p->params[i].mask_rows_same;
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0) {
        memset(&p->tin[k], 0, sizeof p->tin[k]);
        continue;
      }
      p->tin[k] = p->cur[v];
      // bytes are visible at planning time only when they are known
      if (!p->known[v]) p->tin[k].data = NULL;
      if ((d->host_in & ENG_IN(k)) && !p->known[v])
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "node '%s' (op_type '%s'): input %d ('%s') must be known when planning "
                       "(a constant, a graph input, or computed from those and input shapes), but it "
                       "depends on data computed at run time",
                       node_desc_name(n), n->op_type, k, eng_graph_value(g, (size_t)v)->name);
    }
    for (int k = 0; k < n->n_out; k++) {
      memset(&p->tout[k], 0, sizeof p->tout[k]);
      // a wanted output is marked with any valid type; infer overwrites it
      if (n->out[k] >= 0) p->tout[k].dt = DT_FP32;
    }
    if (d->infer(&p->params[i], p->tin, n->n_in, p->tout, n->n_out, e) != 0)
      return err_prefix(e, "node '%s' (op_type '%s'): ", node_desc_name(n), n->op_type);
    TRY(strings_taken(p, n, e));
    int fold = foldable(p, i, n);
    if (fold && fold_node(p, i, n, e) != 0)
      return err_prefix(e, "node '%s' (op_type '%s'), folding: ", node_desc_name(n), n->op_type);
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] >= 0) {
        p->cur[n->out[k]] = p->tout[k];
        if (!fold) p->cur[n->out[k]].data = NULL;
        p->known[n->out[k]] = (uint8_t)fold;
      }
  }
  return 0;
}

// Shape inference (and folding) for the input shapes now in p->cur, unless
// they are the signature already inferred: every inferred shape and folded
// value depends on the input types and shapes alone, and on the bytes of
// the value inputs (p->val_dirty when they changed).
static int infer_all(eng_plan *p, err *e) {
  int same = p->have_sig && !p->val_dirty;
  for (size_t i = 0; i < p->n_inputs && same; i++) {
    const eng_tensor *t = &p->cur[eng_graph_input_value(p->g, i)], *s = &p->sig[i];
    same = t->dt == s->dt && t->ndims == s->ndims &&
           memcmp(t->dims, s->dims, (size_t)t->ndims * sizeof t->dims[0]) == 0;
  }
  if (same) return 0;
  p->have_sig = 0;
  TRY(eng_plan__infer_nodes(p, 1, e));
  for (size_t i = 0; i < p->n_inputs; i++) p->sig[i] = p->cur[eng_graph_input_value(p->g, i)];
  p->have_sig = 1;
  p->val_dirty = 0;
  return 0;
}

// --- layout

static int same_shape(const eng_tensor *a, const eng_tensor *b) {
  if (a->dt != b->dt || a->ndims != b->ndims) return 0;
  for (int i = 0; i < a->ndims; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

// A float scalar whose value is known for the current shapes (Clip's
// bounds), into *x; absent (v < 0) leaves *x.
static int known_scalar(const eng_plan *p, int v, float *x) {
  if (v < 0) return 1;
  const eng_tensor *t = &p->cur[v];
  if (!p->known[v] || t->dt != DT_FP32 || !t->data || eng_numel(t->ndims, t->dims) != 1) return 0;
  *x = *(const float *)t->data;
  return 1;
}

// The parameters of node i's activation for the current shapes; 0 where
// they are not known (a Clip bound computed at run time).
static int act_params(eng_plan *p, size_t i) {
  int r = p->fuse_act[i];
  const eng_op_params *ap = &p->params[r];
  p->fuse_alpha[i] = p->fuse_beta[i] = 0.0f;
  if (p->fuse_kind[i] == ENG_DNNL_ACT_HARD_SIGMOID) {
    p->fuse_alpha[i] = ap->alpha;
    p->fuse_beta[i] = ap->beta;
  } else if (p->fuse_kind[i] == ENG_DNNL_ACT_CLIP) {
    const eng_node *n = eng_graph_node(p->g, (size_t)r);
    float lo = ap->alpha, hi = ap->beta;
    if (!known_scalar(p, n->n_in > 1 ? n->in[1] : -1, &lo) ||
        !known_scalar(p, n->n_in > 2 ? n->in[2] : -1, &hi))
      return 0;
    p->fuse_alpha[i] = lo;
    p->fuse_beta[i] = hi;
  }
  return 1;
}

// Switches each fusion found at create on or off for the shapes in p->cur:
// on where nothing was folded, everything is FP32, the Add needs no
// broadcasting (both operands have its output's shape) and the
// activation's parameters are known.
static void switch_fusions(eng_plan *p) {
  const eng_graph *g = p->g;
  memset(p->fused, 0, p->n_nodes);
  for (size_t i = 0; i < p->n_nodes; i++) {
    p->fuse_on[i] = 0;
    int a = p->fuse_add[i], r = p->fuse_act[i], r2 = p->fuse_act2[i];
    if (a < 0 && r < 0) continue;
    int v = eng_graph_node(g, i)->out[0];
    int on = !p->folded[i] && p->cur[v].dt == DT_FP32;
    if (on && a >= 0) {
      const eng_tensor *w = &p->cur[eng_graph_node(g, (size_t)a)->out[0]];
      on = !p->folded[a] && !p->known[p->fuse_add_val[i]] && same_shape(&p->cur[v], w) &&
           same_shape(&p->cur[p->fuse_add_val[i]], w);
    }
    if (!on) continue;
    // an activation that cannot fold leaves the Add's fusion standing
    int act = r >= 0 && !p->folded[r] && (r2 < 0 || !p->folded[r2]) && act_params(p, i);
    if (a < 0 && !act) continue;
    p->fuse_on[i] = (uint8_t)(FUSE_ON | (act ? FUSE_ACT_ON : 0));
    if (a >= 0) p->fused[a] = 1;
    if (act) p->fused[r] = 1;
    if (act && r2 >= 0) p->fused[r2] = 1;
  }
}

// The value node i's run writes last: the end of its fused chain.
static int chain_end(const eng_plan *p, size_t i) {
  const eng_graph *g = p->g;
  if (p->fuse_on[i] & FUSE_ACT_ON) return eng_graph_node(g, (size_t)p->fuse_act[i])->out[0];
  if (p->fuse_on[i] && p->fuse_add[i] >= 0) return eng_graph_node(g, (size_t)p->fuse_add[i])->out[0];
  return eng_graph_node(g, i)->out[0];
}

// Whether node j may read value v in a oneDNN layout: it is a layouts op
// reading v as input 0, or v is the addend of an Add that a layouts op
// absorbed.
static int takes_layout(const eng_plan *p, size_t j, int k, int v) {
  if (p->fused[j]) {
    int o = p->fuse_owner[j];
    return o >= 0 && p->fuse_add[o] == (int)j && p->fuse_add_val[o] == v && p->params[o].layouts;
  }
  return k == 0 && p->params[j].layouts && p->defs[j]->run_state;
}

// keep_out for the shapes in p->cur (after switch_fusions).
static void switch_layouts(eng_plan *p) {
  const eng_graph *g = p->g;
  for (size_t i = 0; i < p->n_nodes; i++) {
    p->keep_out[i] = 0;
    if (!p->params[i].layouts || p->folded[i] || p->fused[i] || !p->defs[i]->run_state) continue;
    int v = chain_end(p, i), keep = !p->known[v];
    for (size_t j = 0; j < p->n_outputs && keep; j++)
      if (eng_graph_output_value(g, j) == v) keep = 0;
    for (size_t j = 0; j < p->n_nodes && keep; j++) {
      const eng_node *n = eng_graph_node(g, j);
      for (int k = 0; k < n->n_in && keep; k++)
        if (n->in[k] == v && !takes_layout(p, j, k, v)) keep = 0;
    }
    p->keep_out[i] = (uint8_t)keep;
  }
}

// Roots and per-root byte needs for the shapes in p->cur.
static void compute_roots(eng_plan *p) {
  const eng_graph *g = p->g;
  switch_fusions(p);
  switch_layouts(p);
  for (size_t v = 0; v < p->n_values; v++) {
    p->new_root[v] = (int)v;
    p->group_last[v] = p->last_use[v];
  }
  for (size_t i = 0; i < p->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    if (n->n_in < 1 || n->n_out < 1 || n->in[0] < 0 || n->out[0] < 0 || p->folded[i]) continue;
    int in0 = p->fused[i] ? p->fuse_src[i] : n->in[0], out0 = n->out[0], r = p->new_root[in0];
    int share = 0;
    if (p->fused[i]) {
      share = 1;  // the absorbing node writes this output into its own buffer
    } else if (p->defs[i]->flags & ENG_OP_ALIAS) {
      share = 1;
    } else if (p->defs[i]->flags & ENG_OP_INPLACE) {
      // in place only when nothing reads the buffer after this node and no
      // other operand is a view of it: not even one of the same shape, since
      // only elementwise ops read element j just before writing it; a
      // scatter's indices or updates, a norm's scale, a cumulative sum's
      // axis would be read after the op overwrote them
      share = !p->known[r] && p->group_last[r] == (int)i && same_shape(&p->cur[in0], &p->cur[out0]);
      for (int k = 1; k < n->n_in && share; k++)
        if (n->in[k] >= 0 && p->new_root[n->in[k]] == r) share = 0;
    }
    if (share) {
      p->new_root[out0] = r;
      if (p->last_use[out0] > p->group_last[r]) p->group_last[r] = p->last_use[out0];
    }
  }
  for (size_t v = 0; v < p->n_values; v++) p->need[v] = 0;
  for (size_t v = 0; v < p->n_values; v++) {
    if (p->known[v]) continue;  // constants and folded values live outside the arena
    size_t b = eng_tensor_bytes(&p->cur[v]);
    int r = p->new_root[v];
    if (b > p->need[r]) p->need[r] = b;
  }
}

// Declared output type, or the computed one when the ValueInfo has none.
dtype eng_plan__out_dtype(const eng_plan *p, size_t j) {
  dtype d = eng_graph_output(p->g, j)->dt;
  return d == DT_INVALID ? p->cur[eng_graph_output_value(p->g, j)].dt : d;
}

static int output_needs_edge(const eng_plan *p, size_t j) {
  int v = eng_graph_output_value(p->g, j);
  // a STRING output leaves as its wire layout, in p->str_out (eng_plan_run)
  if (eng_plan__out_dtype(p, j) == DT_STRING) return 0;
  int r = p->new_root[v];
  return p->known[r] || eng_plan__out_dtype(p, j) != p->cur[v].dt;
}

static size_t edge_bytes(const eng_plan *p, size_t j) {
  const eng_tensor *t = &p->cur[eng_graph_output_value(p->g, j)];
  return (size_t)eng_numel(t->ndims, t->dims) * dtype_size(eng_plan__out_dtype(p, j));
}

// Whether the layout in force holds the shapes in p->cur.
static int layout_fits(const eng_plan *p) {
  if (!p->have_layout) return 0;
  for (size_t v = 0; v < p->n_values; v++) {
    if (p->new_root[v] != p->root[v]) return 0;
    if ((int)v == p->root[v] && p->need[v] > p->cap[v]) return 0;
  }
  for (size_t j = 0; j < p->n_outputs; j++) {
    if (output_needs_edge(p, j) != p->edge[j]) return 0;
    if (p->edge[j] && edge_bytes(p, j) > p->edge_cap[j]) return 0;
  }
  return 1;
}

typedef struct buf {
  int start, end;  // node steps, inclusive; -1 = before the first node
  size_t size, off;
  size_t *off_out;
} buf;

static int by_size_desc(const void *a, const void *b) {
  const buf *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? 1 : -1;
  return x->start - y->start;
}

static int by_off(const void *a, const void *b) {
  const buf *const *x = a, *const *y = b;
  return (*x)->off < (*y)->off ? -1 : (*x)->off > (*y)->off;
}

// Builds a new layout from new_root/need and grows the arena if needed.
static int assign(eng_plan *p, err *e) {
  const eng_graph *g = p->g;
  size_t nb = 0;
  buf *bufs = malloc((p->n_values + p->n_outputs + 1) * sizeof *bufs);
  buf **placed = malloc((p->n_values + p->n_outputs + 1) * sizeof *placed);
  if (!bufs || !placed) {
    free(bufs);
    free(placed);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory planning buffers");
  }
  p->naive_bytes = 0;
  for (size_t v = 0; v < p->n_values; v++) {
    const eng_value *val = eng_graph_value(g, v);
    p->root[v] = p->new_root[v];
    if (val->kind == ENG_VALUE_NODE && !p->known[v])
      p->naive_bytes += round_up(eng_tensor_bytes(&p->cur[v]));
    if (p->known[v] || p->new_root[v] != (int)v) continue;
    p->cap[v] = round_up(p->need[v]);
    bufs[nb++] = (buf){val->kind == ENG_VALUE_INPUT ? -1 : val->index, p->group_last[v], p->cap[v],
                       0, &p->off[v]};
  }
  for (size_t j = 0; j < p->n_outputs; j++) {
    p->edge[j] = output_needs_edge(p, j);
    if (!p->edge[j]) continue;
    p->edge_cap[j] = round_up(edge_bytes(p, j));
    bufs[nb++] = (buf){(int)p->n_nodes, (int)p->n_nodes, p->edge_cap[j], 0, &p->edge_off[j]};
  }
  qsort(bufs, nb, sizeof *bufs, by_size_desc);
  size_t total = 0;
  for (size_t i = 0; i < nb; i++) {
    size_t np = 0;
    for (size_t k = 0; k < i; k++)
      if (bufs[k].start <= bufs[i].end && bufs[i].start <= bufs[k].end) placed[np++] = &bufs[k];
    qsort(placed, np, sizeof *placed, by_off);
    size_t off = 0;
    for (size_t k = 0; k < np; k++) {
      if (placed[k]->off >= off + bufs[i].size) break;  // fits in the gap before it
      size_t endk = placed[k]->off + placed[k]->size;
      if (endk > off) off = endk;
    }
    bufs[i].off = off;
    *bufs[i].off_out = off;
    if (off + bufs[i].size > total) total = off + bufs[i].size;
  }
  free(bufs);
  free(placed);
  p->arena_need = total;
  p->have_layout = 1;
  p->layouts++;
  // never a NULL arena, even when every intermediate is empty (a [0,3]
  // input): tensors point at arena + offset, and arithmetic on NULL is UB
  // (found by tests/fuzz/fuzz_graph)
  if (p->host_arena && (total > p->arena_alloc || !p->arena)) {
    free(p->arena);
    p->arena_alloc = 0;
    if (total == 0) total = ALIGN;
    p->arena = aligned_alloc(ALIGN, total);
    if (!p->arena) {
      p->have_layout = 0;
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot allocate a %zu-byte arena", total);
    }
    p->arena_alloc = total;
  }
  return 0;
}

// --- create / destroy

static int set_planned_inputs(eng_plan *p, int *all_known) {
  *all_known = 1;
  for (size_t i = 0; i < p->n_inputs; i++) {
    const eng_io *io = eng_graph_input(p->g, i);
    eng_tensor *t = &p->cur[eng_graph_input_value(p->g, i)];
    memset(t, 0, sizeof *t);
    t->dt = eng_ops_cpu_internal_dtype(io->dt);
    t->ndims = io->ndims;
    memcpy(t->dims, io->dims, sizeof t->dims);
    if (p->max_batch > 0) t->dims[0] = p->max_batch;
    if (io->ndims < 0 || io->dt == DT_INVALID) *all_known = 0;  // a subgraph's: the run says
    for (int d = 0; d < t->ndims; d++)
      if (t->dims[d] < 0) *all_known = 0;
  }
  return 0;
}

int eng_plan_create(const eng_graph *g, int max_batch, eng_plan **out, err *e) {
  return eng_plan__create(g, max_batch, 1, out, e);
}

int eng_plan__create(const eng_graph *g, int max_batch, int host_arena, eng_plan **out, err *e) {
  *out = NULL;
  if (max_batch < 0) return err_set(e, ERR_INVALID_ARGUMENT, "max_batch %d < 0", max_batch);
  eng_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  p->g = g;
  p->max_batch = max_batch;
  p->host_arena = host_arena;
  p->n_nodes = eng_graph_n_nodes(g);
  p->n_values = eng_graph_n_values(g);
  p->n_inputs = eng_graph_n_inputs(g);
  p->n_outputs = eng_graph_n_outputs(g);
  size_t nn = p->n_nodes + 1, nv = p->n_values + 1, no = p->n_outputs + 1;
  p->defs = calloc(nn, sizeof *p->defs);
  p->params = calloc(nn, sizeof *p->params);
  p->op_state = calloc(nn, sizeof *p->op_state);
  p->cur = calloc(nv, sizeof *p->cur);
  p->last_use = calloc(nv, sizeof(int));
  p->group_last = calloc(nv, sizeof(int));
  p->new_root = calloc(nv, sizeof(int));
  p->root = calloc(nv, sizeof(int));
  p->need = calloc(nv, sizeof(size_t));
  p->cap = calloc(nv, sizeof(size_t));
  p->off = calloc(nv, sizeof(size_t));
  p->edge = calloc(no, sizeof(int));
  p->edge_cap = calloc(no, sizeof(size_t));
  p->edge_off = calloc(no, sizeof(size_t));
  p->str_out = calloc(no, sizeof *p->str_out);
  p->str_out_cap = calloc(no, sizeof *p->str_out_cap);
  p->folded = calloc(nn, 1);
  p->known = calloc(nv, 1);
  p->fold_buf = calloc(nv, sizeof *p->fold_buf);
  p->fold_cap = calloc(nv, sizeof *p->fold_cap);
  p->sig = calloc(p->n_inputs + 1, sizeof *p->sig);
  p->fuse_add = malloc(nn * sizeof(int));
  p->fuse_add_val = malloc(nn * sizeof(int));
  p->fuse_act = malloc(nn * sizeof(int));
  p->fuse_act2 = malloc(nn * sizeof(int));
  p->fuse_kind = calloc(nn, 1);
  p->fuse_alpha = calloc(nn, sizeof(float));
  p->fuse_beta = calloc(nn, sizeof(float));
  p->fuse_src = malloc(nn * sizeof(int));
  p->fuse_owner = malloc(nn * sizeof(int));
  p->fuse_on = calloc(nn, 1);
  p->fused = calloc(nn, 1);
  p->keep_out = calloc(nn, 1);
  p->fmt = calloc(nv, sizeof *p->fmt);
  p->load_dt = calloc(nv, sizeof *p->load_dt);  // DT_INVALID (0) until eng_plan__probe_types
  int max_in = 1, max_out = 1;
  for (size_t i = 0; i < p->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    if (n->n_in > max_in) max_in = n->n_in;
    if (n->n_out > max_out) max_out = n->n_out;
  }
  p->tin = calloc((size_t)max_in, sizeof *p->tin);
  p->tout = calloc((size_t)max_out, sizeof *p->tout);
  // the widest node: other backends size their own per-node operand arrays from it
  // (the CUDA plan's host snapshots, plan_cuda_host.c)
  p->max_arity_in = max_in;
  p->max_arity_out = max_out;
  int rc = 0;
  if (!p->defs || !p->params || !p->op_state || !p->cur || !p->last_use || !p->group_last || !p->new_root ||
      !p->root || !p->need || !p->cap || !p->off || !p->edge || !p->edge_cap || !p->edge_off ||
      !p->str_out || !p->str_out_cap ||
      !p->tin || !p->tout || !p->folded || !p->known || !p->fold_buf || !p->fold_cap ||
      !p->sig || !p->fuse_add || !p->fuse_add_val || !p->fuse_act || !p->fuse_act2 ||
      !p->fuse_kind || !p->fuse_alpha || !p->fuse_beta || !p->fuse_src ||
      !p->fuse_owner || !p->fuse_on || !p->fused || !p->keep_out || !p->fmt || !p->load_dt) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nn; i++)
    p->fuse_add[i] = p->fuse_add_val[i] = p->fuse_act[i] = p->fuse_act2[i] = p->fuse_src[i] =
        p->fuse_owner[i] = -1;
  int opset = eng_graph_opset(g);
  // every node's arity and attributes are checked before failing, so one
  // load reports all of a model's problems (err_list)
  err_list bad = {0};
  err one = {0};
  for (size_t i = 0; i < p->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    const eng_op_def *d = eng_ops_cpu_find(n->op_type);
    p->defs[i] = d;
    int any_out = 0;
    for (int k = 0; k < n->n_out; k++) any_out |= n->out[k] >= 0;
    if (!d || !d->run) {
      err_set(&one, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s'): unsupported op", n->name,
              n->op_type);
    } else if (n->n_in < d->min_in || n->n_in > d->max_in || n->n_out < d->min_out ||
               n->n_out > d->max_out || (n->n_in && n->in[0] < 0 && !(d->flags & ENG_OP_IN0_OPTIONAL))) {
      err_set(&one, ERR_INVALID_ARGUMENT,
              "node '%s' (op_type '%s'): %d inputs and %d outputs, expected %d..%d and %d..%d",
              n->name, n->op_type, n->n_in, n->n_out, d->min_in, d->max_in, d->min_out,
              d->max_out);
    } else if (!any_out || (n->out[0] < 0 && !(d->flags & ENG_OP_OUT0_OPTIONAL))) {
      // an omitted first output: only where the op writes it conditionally
      err_set(&one, ERR_INVALID_ARGUMENT, "node '%s' (op_type '%s'): output 0 %s", n->name, n->op_type,
              any_out ? "is omitted (\"\"), which this op requires" : "and every other output are omitted");
    } else if (d->parse(g, n, opset, &p->params[i], &one) != 0) {
      err_prefix(&one, "node '%s' (op_type '%s'): ", n->name, n->op_type);
    } else {
      p->params[i].sub = &eng_plan__sub_api;  // read by the ops with subgraphs only
      continue;
    }
    if (!bad.n && e) *e = one;
    err_list_add(&bad, "%s", one.msg);
  }
  if (bad.n > 1) rc = err_list_set(&bad, e, ERR_INVALID_ARGUMENT, "nodes cannot be planned");
  else if (bad.n) rc = one.code;
  if (rc) goto fail;
  // Only the CPU plan runs fused nodes (its ops' run_state); another
  // backend executes every node itself.
  if (host_arena && (rc = eng_plan__find_fusions(p, e)) != 0) goto fail;
  if ((rc = eng_plan__find_value_inputs(p, e)) != 0) goto fail;

  // lifetimes: a value lives from its producer to its last reader; graph
  // outputs live past the last node (step n_nodes, where edges are copied)
  for (size_t v = 0; v < p->n_values; v++) {
    const eng_value *val = eng_graph_value(g, v);
    p->last_use[v] = val->kind == ENG_VALUE_NODE ? val->index : -1;
    if (val->kind == ENG_VALUE_CONST) {
      eng_tensor *t = &p->cur[v];
      t->dt = val->dt;
      t->ndims = val->ndims;
      memcpy(t->dims, val->dims, sizeof t->dims);
      t->data = val->data;
      t->bytes = val->bytes;
    }
  }
  for (size_t i = 0; i < p->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) p->last_use[n->in[k]] = (int)i;
  }
  for (size_t j = 0; j < p->n_outputs; j++) p->last_use[eng_graph_output_value(g, j)] = (int)p->n_nodes;

  for (size_t i = 0; i < p->n_inputs; i++) {
    const eng_io *io = eng_graph_input(g, i);
    if (max_batch > 0 && io->ndims < 1) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is a scalar but max_batch is %d", io->name,
                   max_batch);
      goto fail;
    }
  }
  int known;
  set_planned_inputs(p, &known);
  if (known && !p->n_val_in) {  // value inputs: planned at the first run, which brings their bytes
    if ((rc = infer_all(p, e)) != 0) goto fail;
    for (size_t j = 0; j < p->n_outputs && !rc; j++) {
      int v = eng_graph_output_value(g, j);
      if (eng_ops_cpu_internal_dtype(eng_plan__out_dtype(p, j)) != p->cur[v].dt)
        rc = err_set(e, ERR_INVALID_ARGUMENT, "output '%s' is declared %s but computes %s",
                     eng_graph_output(g, j)->name, dtype_wire_name(eng_plan__out_dtype(p, j)),
                     dtype_wire_name(p->cur[v].dt));
    }
    if (rc) goto fail;
    compute_roots(p);
    if ((rc = assign(p, e)) != 0) goto fail;
  }
  *out = p;
  return 0;
fail:
  eng_plan_destroy(p);
  return rc;
}

void eng_plan_destroy(eng_plan *p) {
  if (!p) return;
  for (size_t i = 0; p->op_state && i < p->n_nodes; i++)
    if (p->op_state[i] && p->defs[i]->destroy) p->defs[i]->destroy(p->op_state[i]);
  free(p->op_state);
  eng_op_ctx_destroy(p->op_ctx);
  free(p->defs);
  free(p->params);
  free(p->cur);
  free(p->tin);
  free(p->tout);
  free(p->last_use);
  free(p->group_last);
  free(p->new_root);
  free(p->need);
  free(p->root);
  free(p->cap);
  free(p->off);
  free(p->edge);
  free(p->edge_cap);
  free(p->edge_off);
  for (size_t j = 0; p->str_out && j < p->n_outputs; j++) free(p->str_out[j]);
  free(p->str_out);
  free(p->str_out_cap);
  free(p->arena);
  for (size_t v = 0; p->fold_buf && v < p->n_values; v++) free(p->fold_buf[v]);
  free(p->fold_buf);
  free(p->fold_cap);
  free(p->folded);
  free(p->known);
  free(p->sig);
  free(p->fuse_add);
  free(p->fuse_add_val);
  free(p->fuse_act);
  free(p->fuse_act2);
  free(p->fuse_kind);
  free(p->fuse_alpha);
  free(p->fuse_beta);
  free(p->fuse_src);
  free(p->fuse_owner);
  free(p->fuse_on);
  free(p->fused);
  free(p->keep_out);
  free(p->fmt);
  free(p->load_dt);
  eng_plan__free_value_inputs(p);
  free(p);
}

size_t eng_plan_arena_bytes(const eng_plan *p) { return p->have_layout ? p->arena_need : 0; }
size_t eng_plan_naive_bytes(const eng_plan *p) { return p->have_layout ? p->naive_bytes : 0; }

// --- run

// A subgraph's input may declare no type (DT_INVALID) or no shape (ndims
// -1): any is taken. need_bytes 0: types and shapes only (eng_plan_infer).
static int check_input(const eng_plan *p, size_t i, const eng_tensor *t, int need_bytes, err *e) {
  const eng_io *io = eng_graph_input(p->g, i);
  if (t->dt != io->dt && io->dt != DT_INVALID)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': dtype %s, expected %s", io->name,
                   dtype_wire_name(t->dt), dtype_wire_name(io->dt));
  if (io->ndims < 0) {
    if (t->ndims < 0 || t->ndims > ENG_MAX_DIMS)
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': rank %d", io->name, t->ndims);
  } else if (t->ndims != io->ndims)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': rank %d, expected %d", io->name, t->ndims,
                   io->ndims);
  for (int d = 0; d < t->ndims; d++) {
    if (d == 0 && p->max_batch > 0) {
      if (t->dims[0] < 1 || t->dims[0] > p->max_batch)
        return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': batch size %lld not in 1..%d",
                       io->name, (long long)t->dims[0], p->max_batch);
    } else if (t->dims[d] < 0 || (io->ndims >= 0 && io->dims[d] >= 0 && t->dims[d] != io->dims[d])) {
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': dim %d is %lld, expected %lld",
                     io->name, d, (long long)t->dims[d], (long long)io->dims[d]);
    }
  }
  if (!need_bytes) return 0;
  if (t->dt == DT_STRING) {  // the wire layout: exactly one element per position of the shape
    const char *why;
    uint64_t at, n = (uint64_t)eng_numel(t->ndims, t->dims);
    if ((n || t->bytes) && !t->data)
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': no bytes given", io->name);
    if (strwire_check(t->data, t->bytes, n, &why, &at) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': %zu bytes of BYTES data for %llu elements: it %s (element %llu)", io->name,
                     t->bytes, (unsigned long long)n, why, (unsigned long long)at);
    return 0;
  }
  size_t want = (size_t)eng_numel(t->ndims, t->dims) * dtype_size(t->dt);
  if (want && (!t->data || t->bytes < want))
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': %zu bytes given, shape needs %zu",
                   io->name, t->data ? t->bytes : 0, want);
  return 0;
}

// The inputs' element types and shapes into the plan's values, their bytes
// where shapes read them (runtime parameters), then every node's shape.
// full: a run's inputs (check_input's full check); else shapes only, where
// an input whose bytes shapes read must still carry them.
static int infer_from_inputs(eng_plan *p, const eng_tensor *inputs, size_t n_in, int full, err *e) {
  const eng_graph *g = p->g;
  for (size_t i = 0; i < n_in; i++) {
    TRY(check_input(p, i, &inputs[i], full, e));
    if (!full && p->val_in[i] && !inputs[i].data)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s' must be known when planning (its bytes are read while inferring shapes), but it "
                     "depends on data computed at run time", eng_graph_input(g, i)->name);
    eng_tensor *t = &p->cur[eng_graph_input_value(g, i)];
    t->dt = eng_ops_cpu_internal_dtype(inputs[i].dt);
    t->ndims = inputs[i].ndims;
    memcpy(t->dims, inputs[i].dims, sizeof t->dims);
  }
  TRY(eng_plan__load_value_inputs(p, inputs, e));
  return infer_all(p, e);
}

void eng_plan__to_edge(void *dst, dtype dt, const eng_tensor *src, size_t n) {
  if (dt == DT_FP16) k_f32_to_f16(dst, src->data, n);
  else if (dt == DT_FP64) k_cast(dst, K_F64, src->data, K_F32, n);
  else if (dt == DT_BF16)
    for (size_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, (const float *)src->data + i, 4);
      if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
      ((uint16_t *)dst)[i] = (uint16_t)(u >> 16);
    }
  else memcpy(dst, src->data, n * dtype_size(dt));
}

int eng_plan__prepare(eng_plan *p, const eng_tensor *inputs, size_t n_in, size_t n_out, err *e) {
  const eng_graph *g = p->g;
  if (n_in != p->n_inputs)
    return err_set(e, ERR_INVALID_ARGUMENT, "%zu inputs given, the model has %zu", n_in,
                   p->n_inputs);
  if (n_out != p->n_outputs)
    return err_set(e, ERR_INVALID_ARGUMENT, "%zu outputs requested, the model has %zu", n_out,
                   p->n_outputs);
  TRY(infer_from_inputs(p, inputs, n_in, 1, e));
  compute_roots(p);
  if (!layout_fits(p)) {
    for (size_t j = 0; j < p->n_outputs; j++) {
      int v = eng_graph_output_value(g, j);
      if (eng_ops_cpu_internal_dtype(eng_plan__out_dtype(p, j)) != p->cur[v].dt)
        return err_set(e, ERR_INVALID_ARGUMENT, "output '%s' is declared %s but computes %s",
                       eng_graph_output(g, j)->name, dtype_wire_name(eng_plan__out_dtype(p, j)),
                       dtype_wire_name(p->cur[v].dt));
    }
    TRY(assign(p, e));
  }
  return 0;
}

// Graph output j, a STRING value t of n views, into its wire layout in
// p->str_out[j] (grown when this run's strings need more). Long views
// point into the run's inputs, which are still the caller's here.
static int string_out(eng_plan *p, size_t j, const eng_tensor *t, size_t n, eng_tensor *o, err *e) {
  size_t bytes = n ? k_str_wire_bytes(t->data, n) : 0;
  if (bytes > p->str_out_cap[j] || !p->str_out[j]) {
    free(p->str_out[j]);
    p->str_out_cap[j] = 0;
    if (!(p->str_out[j] = malloc(bytes ? bytes : 1)))
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for %zu bytes of output '%s'", bytes,
                     eng_graph_output(p->g, j)->name);
    p->str_out_cap[j] = bytes;
  }
  if (n) k_str_to_wire(p->str_out[j], t->data, n);
  o->data = p->str_out[j];
  o->bytes = bytes;
  return 0;
}

int eng_plan_infer(eng_plan *p, const eng_tensor *inputs, size_t n_in, eng_tensor *outputs,
                   size_t n_out, err *e) {
  const eng_graph *g = p->g;
  if (n_in != p->n_inputs || n_out != p->n_outputs)
    return err_set(e, ERR_INVALID_ARGUMENT, "%zu inputs and %zu outputs given, the graph has %zu and %zu", n_in,
                   n_out, p->n_inputs, p->n_outputs);
  TRY(infer_from_inputs(p, inputs, n_in, 0, e));
  for (size_t j = 0; j < n_out; j++) {
    int v = eng_graph_output_value(g, j);
    outputs[j] = p->cur[v];
    if (!p->known[v]) outputs[j].data = NULL;
    // a graph input passed straight out: its bytes are the caller's
    const eng_value *x = eng_graph_value(g, (size_t)v);
    if (x->kind == ENG_VALUE_INPUT && !p->val_in[x->index]) outputs[j].data = inputs[x->index].data;
    outputs[j].bytes = eng_tensor_bytes(&outputs[j]);
  }
  return 0;
}

int eng_plan_run(eng_plan *p, const eng_tensor *inputs, size_t n_in, eng_tensor *outputs,
                 size_t n_out, err *e) {
  const eng_graph *g = p->g;
  TRY(eng_plan__prepare(p, inputs, n_in, n_out, e));
  for (size_t v = 0; v < p->n_values; v++) {
    if (p->known[v]) continue;  // data already points at the constant or folded bytes
    int r = p->root[v];
    eng_tensor *t = &p->cur[v];
    t->data = p->known[r] ? p->cur[r].data : p->arena + p->off[r];
    t->bytes = eng_tensor_bytes(t);
  }
  for (size_t i = 0; i < n_in; i++) {
    if (p->val_in[i]) continue;  // already in plan memory (eng_plan__load_value_inputs)
    const eng_tensor *t = &p->cur[eng_graph_input_value(g, i)];
    size_t n = (size_t)eng_numel(t->ndims, t->dims);
    if (n) eng_plan__to_internal(t->data, &inputs[i], n);
  }
  memset(p->fmt, 0, p->n_values * sizeof *p->fmt);  // every value starts plain
  for (size_t i = 0; i < p->n_nodes; i++) {
    // folded: its outputs were computed while planning; fused: an earlier
    // node computed them
    if (p->folded[i] || p->fused[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++) {
      if (n->in[k] >= 0) p->tin[k] = p->cur[n->in[k]];
      else memset(&p->tin[k], 0, sizeof p->tin[k]);
    }
    for (int k = 0; k < n->n_out; k++) {
      if (n->out[k] >= 0) p->tout[k] = p->cur[n->out[k]];
      else memset(&p->tout[k], 0, sizeof p->tout[k]);
    }
    const eng_op_def *d = p->defs[i];
    int rc;
    if (d->run_state) {
      eng_op_state st = {.node = p->op_state[i], .ctx = &p->op_ctx};
      if (p->fuse_on[i]) {
        if (p->fuse_add[i] >= 0) {
          st.post_add = &p->cur[p->fuse_add_val[i]];
          st.add_fmt = p->fmt[p->fuse_add_val[i]];
        }
        if (p->fuse_on[i] & FUSE_ACT_ON) {
          st.post_act = (eng_dnnl_act)p->fuse_kind[i];
          st.act_alpha = p->fuse_alpha[i];
          st.act_beta = p->fuse_beta[i];
        }
      }
      if (n->in[0] >= 0) st.in_fmt = p->fmt[n->in[0]];
      st.out_keep = p->keep_out[i];
      rc = d->run_state(&st, &p->params[i], p->tin, n->n_in, p->tout, n->n_out, e);
      p->op_state[i] = st.node;  // kept even on failure, so destroy frees it
      p->fmt[chain_end(p, i)] = st.out_keep ? st.out_fmt : NULL;
    } else {
      rc = d->run(&p->params[i], p->tin, n->n_in, p->tout, n->n_out, e);
    }
    if (rc != 0) return err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
  }
  for (size_t j = 0; j < n_out; j++) {
    const eng_tensor *t = &p->cur[eng_graph_output_value(g, j)];
    eng_tensor *o = &outputs[j];
    o->dt = eng_plan__out_dtype(p, j);
    o->ndims = t->ndims;
    memcpy(o->dims, t->dims, sizeof o->dims);
    size_t n = (size_t)eng_numel(t->ndims, t->dims);
    o->bytes = n * dtype_size(o->dt);
    if (o->dt == DT_STRING) {
      TRY(string_out(p, j, t, n, o, e));
    } else if (p->edge[j]) {
      o->data = p->arena + p->edge_off[j];
      if (n) eng_plan__to_edge(o->data, o->dt, t, n);
    } else {
      o->data = t->data;
    }
  }
  return 0;
}

// --- the subgraph runner of the ops with subgraphs (eng_sub_api, ops.h):
// each subgraph becomes a plan of its own, max_batch 0, planned at its first
// run and re-planned when a run's shapes differ, as any plan. Here, not in a
// file of its own, since the plan sets it into every node's params.

static int sub_create(const eng_graph *g, void **plan, err *e) {
  eng_plan *p = NULL;
  TRY(eng_plan_create(g, 0, &p, e));
  *plan = p;
  return 0;
}

static void sub_destroy(void *plan) { eng_plan_destroy(plan); }

static int sub_infer(void *plan, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out, err *e) {
  return eng_plan_infer(plan, in, n_in, out, n_out, e);
}

static int sub_run(void *plan, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out, err *e) {
  return eng_plan_run(plan, in, n_in, out, n_out, e);
}

const eng_sub_api eng_plan__sub_api = {sub_create, sub_destroy, sub_infer, sub_run};
