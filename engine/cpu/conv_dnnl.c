// engine/cpu/conv_dnnl.c: oneDNN primitives for the sliding-window ops, cached
// per node and geometry (see conv_dnnl.h). The plan's activations are plain
// NC[D]HW; a convolution is created with every layout left to oneDNN
// (format_tag any), so it gets its blocked JIT kernels, and the activations
// are reordered into and out of the chosen layouts around it. Weights are
// reordered once into their layout. Written against the C API of oneDNN 2.x
// (Debian 12) and 3.x (Ubuntu 24.04's CUDA images): the API differences are
// bridged in dnnl_util.c, the eltwise parameters that differ in meaning here.
// Why blocked: with plain NCHW src/dst oneDNN 2.6 can only offer its
// im2col + sgemm convolution ("gemm:jit"); profiled on the 2-core dev
// machine, ResNet-18 at batch 1 ran every convolution that way. The
// reorders at the edges cost far less than the blocked kernels save (see
// tests/bench/RESULTS.md, "Vision CPU path vs onnxruntime").
// Pools keep the plain layout: oneDNN's JIT pooling runs on NCHW directly.
// Gemm with constant B runs here too, as an inner product with B reordered
// once: OpenBLAS's sgemm packs all of B on every call, which for the seed
// CNN's 200704 x 512 classifier at batch 1 was half of the model's time.
// Scratchpads are user-managed: one buffer in the context, grown to the
// largest primitive's need, instead of oneDNN's per-thread global ones.
#include "engine/cpu/conv_dnnl.h"
#include "engine/cpu/dnnl_internal.h"
#include "engine/cpu/dnnl_util.h"

#include <dnnl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 8    // geometries per node: batch sizes 1, preferred, max...
#define WEIGHT_SLOTS 4   // weights layouts per node (usually one)
#define IP_PLAIN_ROWS 4  // see make_desc

// --- context

struct eng_dnnl_ctx {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  // Shared by every node of the plan (one runs at a time): a convolution's
  // src and dst in the primitive's layouts, and the scratchpad.
  eng_dnnl_buf src, dst, scratch;
};

int eng_dnnl_ctx_create(eng_dnnl_ctx **out, err *e) {
  *out = NULL;
  eng_dnnl_ctx *c = calloc(1, sizeof *c);
  if (!c) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  dnnl_status_t st = dnnl_engine_create(&c->engine, dnnl_cpu, 0);
  if (st == dnnl_success) st = dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags);
  if (st != dnnl_success) {
    eng_dnnl_ctx_destroy(c);
    return eng_dnnl_fail(e, st, "engine/stream creation");
  }
  *out = c;
  return 0;
}

dnnl_engine_t eng_dnnl__engine(eng_dnnl_ctx *c) { return c->engine; }
dnnl_stream_t eng_dnnl__stream(eng_dnnl_ctx *c) { return c->stream; }

void eng_dnnl_ctx_destroy(eng_dnnl_ctx *c) {
  if (!c) return;
  if (c->stream) dnnl_stream_destroy(c->stream);
  if (c->engine) dnnl_engine_destroy(c->engine);
  eng_dnnl_buf_close(&c->src);
  eng_dnnl_buf_close(&c->dst);
  eng_dnnl_buf_close(&c->scratch);
  free(c);
}

// --- node cache

typedef struct weights {
  eng_dnnl_md md;       // the layout a primitive asked for
  void *data;    // the weights reordered into it; NULL where that is the model's layout
  dnnl_memory_t mem;
} weights;

typedef struct act_spec {
  eng_dnnl_act act;
  float alpha, beta;
} act_spec;

static int same_act(const act_spec *a, const act_spec *b) {
  return a->act == b->act && a->alpha == b->alpha && a->beta == b->beta;
}

typedef struct entry {
  int used;
  eng_dnnl_kind kind;
  k_window g;
  act_spec act;         // the post-ops (act, sum) and y_keep the primitive was made for
  int sum, keep;
  eng_dnnl_md x_md, add_md;    // the layouts of x and of the addend it was made for
  dnnl_primitive_t prim;
  // the primitive's operands, handles set per run: src and dst in its own
  // layouts (the context's buffers where x or y is in another)
  dnnl_memory_t src, dst, bias, scratch;
  eng_dnnl_md dst_md;  // dst's layout: what a kept y is in (eng_dnnl_io.y_fmt)
  int y_kept;    // y is left in dst's layout, which is not the plain one
  int y_direct;  // y is written in dst's layout (plain, or kept)
  // x, y and the addend in their own layouts, with the reorders between
  // them and src/dst; NULL where no reorder is needed
  dnnl_memory_t ux, uy, uadd;
  dnnl_primitive_t x_in, add_in, y_out;  // x->src, addend->dst, dst->y
  size_t src_bytes, dst_bytes, scratch_bytes;
  int wi;  // index into node->w; -1 for pools
} entry;

struct eng_dnnl_node {
  entry e[CACHE_SLOTS];
  int next;  // round-robin victim when every slot is used
  weights w[WEIGHT_SLOTS];
  int n_w;
};

static void entry_clear(entry *en) {
  dnnl_primitive_t prims[] = {en->prim, en->x_in, en->add_in, en->y_out};
  dnnl_memory_t mems[] = {en->src, en->dst, en->bias, en->scratch, en->ux, en->uy, en->uadd};
  eng_dnnl_destroy(prims, sizeof prims / sizeof prims[0], mems, sizeof mems / sizeof mems[0]);
  eng_dnnl_md_free(en->x_md);
  eng_dnnl_md_free(en->add_md);
  eng_dnnl_md_free(en->dst_md);
  memset(en, 0, sizeof *en);
}

void eng_dnnl_node_destroy(eng_dnnl_node *n) {
  if (!n) return;
  for (int i = 0; i < CACHE_SLOTS; i++) entry_clear(&n->e[i]);
  for (int i = 0; i < n->n_w; i++) {
    if (n->w[i].mem) dnnl_memory_destroy(n->w[i].mem);
    eng_dnnl_md_free(n->w[i].md);
    free(n->w[i].data);
  }
  free(n);
}

static int same_geom(const k_window *a, const k_window *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

dnnl_status_t eng_dnnl__act_md(eng_dnnl_md *md, const k_window *g, int64_t ch, const int64_t *sp, dnnl_data_type_t t,
                               int any) {
  dnnl_dims_t d;
  d[0] = g->n;
  d[1] = ch;
  for (int i = 0; i < g->nsp; i++) d[2 + i] = sp[i];
  return any ? eng_dnnl_md_tag(md, 2 + g->nsp, d, t, dnnl_format_tag_any) : eng_dnnl_md_dense(md, 2 + g->nsp, d, t);
}

// The FP32 activation's md (eng_dnnl__act_md).
static dnnl_status_t act_md(eng_dnnl_md *md, const k_window *g, int64_t ch, const int64_t *sp, int any) {
  return eng_dnnl__act_md(md, g, ch, sp, dnnl_f32, any);
}

// The weights as oneDNN names their dims ([g,] o, i, k...) with the strides
// of ONNX's layout: Conv W is [m, c/g, k...] (= g, m/g, c/g, k),
// ConvTranspose W is [c, m/g, k...] (= g, c/g, m/g, k, so o and i swap:
// `swapped`, as for Gemm's B [c, m] without transB).
static void weights_dims(const k_window *g, int swapped, int *nd, dnnl_dims_t d, dnnl_dims_t s) {
  int64_t gr = g->group, og = g->m / gr, ig = g->c / gr, ksz = 1;
  for (int i = 0; i < g->nsp; i++) ksz *= g->k[i];
  int grouped = gr > 1, at = 0;
  if (grouped) d[at++] = gr;
  d[at++] = og;
  d[at++] = ig;
  for (int i = 0; i < g->nsp; i++) d[at + i] = g->k[i];
  *nd = at + g->nsp;
  dnnl_dims_t ks;
  eng_dnnl_dense_strides(g->nsp, g->k, ks);
  for (int i = 0; i < g->nsp; i++) s[at + i] = ks[i];
  int64_t so = swapped ? ksz : ig * ksz, si = swapped ? og * ksz : ksz;
  s[at - 2] = so;
  s[at - 1] = si;
  if (grouped) s[0] = og * ig * ksz;
}

// The eltwise post-ops of one activation. HardSwish's and HardSigmoid's
// parameters are fixed in oneDNN 2.x (hardswish is x * relu6(x + 3) / 6,
// ONNX's; no hardsigmoid: linear then clip), explicit in 3.x.
static dnnl_status_t po_act(dnnl_post_ops_t po, const act_spec *a) {
  switch (a->act) {
    case ENG_DNNL_ACT_NONE: return dnnl_success;
    case ENG_DNNL_ACT_RELU: return eng_dnnl_po_eltwise(po, dnnl_eltwise_relu, 0.0f, 0.0f);
    case ENG_DNNL_ACT_SIGMOID: return eng_dnnl_po_eltwise(po, dnnl_eltwise_logistic, 0.0f, 0.0f);
    case ENG_DNNL_ACT_SILU: return eng_dnnl_po_eltwise(po, dnnl_eltwise_swish, 1.0f, 0.0f);
    case ENG_DNNL_ACT_HARD_SWISH:
#if DNNL_VERSION_MAJOR >= 3
      return eng_dnnl_po_eltwise(po, dnnl_eltwise_hardswish, 1.0f / 6.0f, 0.5f);
#else
      return eng_dnnl_po_eltwise(po, dnnl_eltwise_hardswish, 0.0f, 0.0f);
#endif
    case ENG_DNNL_ACT_HARD_SIGMOID: {
#if DNNL_VERSION_MAJOR >= 3
      return eng_dnnl_po_eltwise(po, dnnl_eltwise_hardsigmoid, a->alpha, a->beta);
#else
      dnnl_status_t st = eng_dnnl_po_eltwise(po, dnnl_eltwise_linear, a->alpha, a->beta);
      return st == dnnl_success ? eng_dnnl_po_eltwise(po, dnnl_eltwise_clip, 0.0f, 1.0f) : st;
#endif
    }
    case ENG_DNNL_ACT_CLIP: return eng_dnnl_po_eltwise(po, dnnl_eltwise_clip, a->alpha, a->beta);
  }
  return dnnl_invalid_arguments;
}

// The attributes every primitive gets: a user scratchpad, and for the
// convolutions the fused post-ops (sum first: y = act(conv + add)).
static dnnl_status_t make_attr(dnnl_primitive_attr_t *attr, const act_spec *act, int sum) {
  dnnl_status_t st = dnnl_primitive_attr_create(attr);
  if (st == dnnl_success) st = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
  if (st != dnnl_success || (act->act == ENG_DNNL_ACT_NONE && !sum)) return st;
  dnnl_post_ops_t po = NULL;
  st = dnnl_post_ops_create(&po);
  if (st == dnnl_success && sum) st = eng_dnnl_po_sum(po);
  if (st == dnnl_success) st = po_act(po, act);
  if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(*attr, po);
  if (po) dnnl_post_ops_destroy(po);
  return st;
}

static int is_conv(eng_dnnl_kind k) { return k == ENG_DNNL_CONV || k == ENG_DNNL_DECONV; }
static int is_inner(eng_dnnl_kind k) { return k == ENG_DNNL_INNER || k == ENG_DNNL_INNER_BT; }
// Whether w's [o, i] are stored the other way round from oneDNN's order.
static int w_swapped(eng_dnnl_kind k) { return k == ENG_DNNL_DECONV || k == ENG_DNNL_INNER; }

// The primitive descriptor for src and dst (either may be format any).
static dnnl_status_t make_desc(dnnl_primitive_desc_t *pd, eng_dnnl_ctx *c, eng_dnnl_kind kind,
                               const k_window *g, eng_dnnl_cmd src, eng_dnnl_cmd dst, int has_bias,
                               const act_spec *act,
                               int sum) {
  dnnl_dims_t strides, dil, pl, pr, kern;
  for (int i = 0; i < g->nsp; i++) {
    strides[i] = g->stride[i];
    dil[i] = g->dil[i] - 1;  // oneDNN counts the gaps between taps
    pl[i] = g->pad_l[i];
    pr[i] = g->pad_r[i];
    kern[i] = g->k[i];
  }
  int wts = is_conv(kind) || is_inner(kind);
  eng_dnnl_md wmd = {0}, bmd = {0};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_status_t st = make_attr(&attr, act, sum);
  if (st == dnnl_success && wts) {
    int nd;
    dnnl_dims_t wd, ws;
    weights_dims(g, w_swapped(kind), &nd, wd, ws);
    // An inner product of fewer than IP_PLAIN_ROWS rows reads B as the
    // model stores it (oneDNN's gemv-like kernel; no copy of B is made);
    // more rows get the blocked layout. Measured on the seed CNN's 200704 x
    // 512 B, one thread of the 2-core dev VM: rows 1/2/4/8 took 24/34/68/121
    // ms plain against 37/49/58/103 ms blocked.
    st = is_inner(kind) && g->n < IP_PLAIN_ROWS ? eng_dnnl_md_strides(&wmd, nd, wd, dnnl_f32, ws)
                                                 : eng_dnnl_md_tag(&wmd, nd, wd, dnnl_f32, dnnl_format_tag_any);
    if (st == dnnl_success && has_bias) {
      dnnl_dims_t bd = {g->m}, bs = {1};
      st = eng_dnnl_md_strides(&bmd, 1, bd, dnnl_f32, bs);
    }
  }
  if (st == dnnl_success) {
    eng_dnnl_cmd w = ENG_DNNL_MDP(wmd), bias = has_bias ? ENG_DNNL_MDP(bmd) : NULL;
    if (kind == ENG_DNNL_CONV)
      st = eng_dnnl_conv_pd(pd, c->engine, src, w, bias, dst, strides, dil, pl, pr, attr);
    else if (kind == ENG_DNNL_DECONV)
      st = eng_dnnl_deconv_pd(pd, c->engine, src, w, bias, dst, strides, dil, pl, pr, attr);
    else if (wts)
      st = eng_dnnl_inner_pd(pd, c->engine, src, w, bias, dst, attr);
    else
      st = eng_dnnl_pool_pd(pd, c->engine,
                            kind == ENG_DNNL_POOL_MAX           ? dnnl_pooling_max
                            : kind == ENG_DNNL_POOL_AVG_INCLUDE ? dnnl_pooling_avg_include_padding
                                                                : dnnl_pooling_avg_exclude_padding,
                            src, dst, strides, kern, dil, pl, pr, attr);
  }
  eng_dnnl_md_free(wmd);
  eng_dnnl_md_free(bmd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return st;
}

// The index of the node's weights in the layout `want`, reordering the
// ONNX weights into it the first time.
static int get_weights(eng_dnnl_ctx *c, eng_dnnl_node *n, eng_dnnl_cmd want, const k_window *g,
                       int swapped, const float *w, int *out, err *e) {
  for (int i = 0; i < n->n_w; i++)
    if (dnnl_memory_desc_equal(ENG_DNNL_MDP(n->w[i].md), want)) {
      *out = i;
      return 0;
    }
  if (n->n_w == WEIGHT_SLOTS)
    return err_set(e, ERR_INTERNAL, "more than %d weight layouts for one node", WEIGHT_SLOTS);
  weights *wt = &n->w[n->n_w];
  int nd;
  dnnl_dims_t wd, ws;
  weights_dims(g, swapped, &nd, wd, ws);
  eng_dnnl_md user = {0};
  dnnl_memory_t umem = NULL;
  dnnl_primitive_t rp = NULL;
  int rc = 0;
  dnnl_status_t st = eng_dnnl_md_strides(&user, nd, wd, dnnl_f32, ws);
  if (st == dnnl_success) st = eng_dnnl_md_clone(&wt->md, want);
  size_t bytes = dnnl_memory_desc_get_size(want);
  if (st == dnnl_success && dnnl_memory_desc_equal(ENG_DNNL_MDP(user), want)) {
    // the model's own layout: its constant bytes serve as they are
    st = dnnl_memory_create(&wt->mem, want, c->engine, (void *)w);
    eng_dnnl_md_free(user);
    n->n_w++;
    if (st != dnnl_success) return eng_dnnl_fail(e, st, "weights memory");
    *out = n->n_w - 1;
    return 0;
  }
  if (st == dnnl_success) {
    wt->data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!wt->data) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for %zu bytes of weights", bytes);
  }
  if (st == dnnl_success && !rc) st = dnnl_memory_create(&umem, ENG_DNNL_MDP(user), c->engine, (void *)w);
  if (st == dnnl_success && !rc) st = dnnl_memory_create(&wt->mem, want, c->engine, wt->data);
  if (st == dnnl_success && !rc) st = eng_dnnl_reorder_create(c->engine, ENG_DNNL_MDP(user), want, &rp);
  if (st == dnnl_success && !rc) {
    st = eng_dnnl_reorder_run(c->stream, rp, umem, wt->mem);
    if (st == dnnl_success) st = dnnl_stream_wait(c->stream);
  }
  if (rp) dnnl_primitive_destroy(rp);
  if (umem) dnnl_memory_destroy(umem);
  eng_dnnl_md_free(user);
  if (st != dnnl_success && !rc) rc = eng_dnnl_fail(e, st, "weights reorder");
  n->n_w++;  // counted even on failure so destroy frees what was made
  if (rc) return rc;
  *out = n->n_w - 1;
  return 0;
}

// A memory object over `have` (handle set per run) and the reorder from
// it to `want` (to == 0) or from `want` to it (to == 1); nothing where the
// two are the same layout.
static dnnl_status_t bridge(eng_dnnl_ctx *c, eng_dnnl_cmd have, eng_dnnl_cmd want, int to, dnnl_memory_t *mem,
                            dnnl_primitive_t *r) {
  if (dnnl_memory_desc_equal(have, want)) return dnnl_success;
  dnnl_status_t st = dnnl_memory_create(mem, have, c->engine, DNNL_MEMORY_NONE);
  if (st == dnnl_success) st = eng_dnnl_reorder_create(c->engine, to ? want : have, to ? have : want, r);
  return st;
}

static int entry_create(eng_dnnl_ctx *c, eng_dnnl_node *n, entry *en, eng_dnnl_kind kind,
                        const k_window *g, const float *w, const float *b, const act_spec *act, int sum,
                        int keep, eng_dnnl_cmd x_md, eng_dnnl_cmd add_md, err *e) {
  int conv = is_conv(kind), wts = conv || is_inner(kind);
  int64_t ych = wts ? g->m : g->c;
  en->kind = kind;
  en->g = *g;
  en->act = *act;
  en->sum = sum;
  en->keep = keep;
  en->wi = -1;
  eng_dnnl_md plain_x = {0}, plain_y = {0}, any_x = {0}, any_y = {0};
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t st = eng_dnnl_md_clone(&en->x_md, x_md);
  if (st == dnnl_success) st = eng_dnnl_md_clone(&en->add_md, add_md);
  if (st == dnnl_success) st = act_md(&plain_x, g, g->c, g->x, 0);
  if (st == dnnl_success) st = act_md(&plain_y, g, ych, g->y, 0);
  if (st == dnnl_success) st = act_md(&any_x, g, g->c, g->x, 1);
  if (st == dnnl_success) st = act_md(&any_y, g, ych, g->y, 1);
  if (st == dnnl_success) {
    // A convolution takes x in the layout it comes in (a neighbour's kept
    // one), else chooses; a pool reads x as it is. dst is chosen (and y
    // reordered to plain if it may not be kept) except for a pool on a plain
    // x whose y must be plain, and for inner products.
    int x_plain = dnnl_memory_desc_equal(x_md, ENG_DNNL_MDP(plain_x));
    eng_dnnl_cmd src = conv && x_plain ? ENG_DNNL_MDP(any_x) : x_md;
    eng_dnnl_cmd dst = conv || keep || (!x_plain && !is_inner(kind)) ? ENG_DNNL_MDP(any_y) : ENG_DNNL_MDP(plain_y);
    st = make_desc(&pd, c, kind, g, src, dst, wts && b, act, sum);
    // no kernel for x's layout: reorder x into one that has
    if (st != dnnl_success && !x_plain)
      st = make_desc(&pd, c, kind, g, conv ? ENG_DNNL_MDP(any_x) : ENG_DNNL_MDP(plain_x), dst, wts && b, act, sum);
  }
  eng_dnnl_md_free(any_x);
  eng_dnnl_md_free(any_y);
  eng_dnnl_md_free(plain_x);
  if (st != dnnl_success) {
    eng_dnnl_md_free(plain_y);
    entry_clear(en);
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "unsupported: oneDNN has no implementation for this geometry (status %d)",
                   (int)st);
  }
  int rc = 0;
  if (wts)
    rc = get_weights(c, n, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), g,
                     w_swapped(kind), w, &en->wi, e);
  eng_dnnl_cmd psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  eng_dnnl_cmd pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  en->src_bytes = dnnl_memory_desc_get_size(psrc);
  en->dst_bytes = dnnl_memory_desc_get_size(pdst);
  // y stays in dst's layout when that is plain, or when kept and no larger
  // than the plain tensor (the plan's buffer)
  en->y_kept = keep && !dnnl_memory_desc_equal(pdst, ENG_DNNL_MDP(plain_y)) &&
               en->dst_bytes <= dnnl_memory_desc_get_size(ENG_DNNL_MDP(plain_y));
  en->y_direct = en->y_kept || dnnl_memory_desc_equal(pdst, ENG_DNNL_MDP(plain_y));
  if (!rc) st = dnnl_primitive_create(&en->prim, pd);
  if (!rc && st == dnnl_success) st = dnnl_memory_create(&en->src, psrc, c->engine, DNNL_MEMORY_NONE);
  if (!rc && st == dnnl_success) st = dnnl_memory_create(&en->dst, pdst, c->engine, DNNL_MEMORY_NONE);
  if (!rc && st == dnnl_success) st = eng_dnnl_md_clone(&en->dst_md, pdst);
  if (!rc && st == dnnl_success) st = bridge(c, x_md, psrc, 0, &en->ux, &en->x_in);
  if (!rc && st == dnnl_success && sum) st = bridge(c, add_md, pdst, 0, &en->uadd, &en->add_in);
  if (!rc && st == dnnl_success && !en->y_direct)
    st = bridge(c, ENG_DNNL_MDP(plain_y), pdst, 1, &en->uy, &en->y_out);
  if (!rc && st == dnnl_success && wts && b)
    st = dnnl_memory_create(&en->bias, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1),
                            c->engine, DNNL_MEMORY_NONE);
  if (!rc && st == dnnl_success) {
    eng_dnnl_cmd smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    en->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (en->scratch_bytes)
      st = dnnl_memory_create(&en->scratch, smd, c->engine, DNNL_MEMORY_NONE);
  }
  dnnl_primitive_desc_destroy(pd);
  eng_dnnl_md_free(plain_y);
  if (!rc && st != dnnl_success) rc = eng_dnnl_fail(e, st, "primitive creation");
  // the context's buffers are sized when the entry is made, not per run
  if (!rc && en->ux) rc = eng_dnnl_buf_grow(&c->src, en->src_bytes, e);
  if (!rc && !en->y_direct) rc = eng_dnnl_buf_grow(&c->dst, en->dst_bytes, e);
  if (!rc) rc = eng_dnnl_buf_grow(&c->scratch, en->scratch_bytes, e);
  if (rc) entry_clear(en);
  else en->used = 1;
  return rc;
}

int eng_dnnl_run(eng_dnnl_ctx *c, eng_dnnl_node **node, eng_dnnl_kind kind, const k_window *g,
                 const float *w, const float *b, const eng_dnnl_post *post, eng_dnnl_io *io,
                 float *y, const float *x, err *e) {
  act_spec act = {ENG_DNNL_ACT_NONE, 0.0f, 0.0f};
  if (post) act = (act_spec){post->act, post->alpha, post->beta};
  int sum = post && post->add;
  int keep = io && io->y_keep && !is_inner(kind);
  if (io) io->y_fmt = NULL;
  if ((act.act != ENG_DNNL_ACT_NONE || sum) && !is_conv(kind) && !is_inner(kind))
    return err_set(e, ERR_INTERNAL, "post-ops are for the convolutions and inner products only");
  if (!*node) {
    *node = calloc(1, sizeof **node);
    if (!*node) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  eng_dnnl_node *n = *node;
  int64_t ych = is_conv(kind) || is_inner(kind) ? g->m : g->c;
  eng_dnnl_md plain_x = {0}, plain_y = {0};
  dnnl_status_t mst = act_md(&plain_x, g, g->c, g->x, 0);
  if (mst == dnnl_success) mst = act_md(&plain_y, g, ych, g->y, 0);
  if (mst != dnnl_success) {
    eng_dnnl_md_free(plain_x);
    eng_dnnl_md_free(plain_y);
    return eng_dnnl_fail(e, mst, "memory descriptor");
  }
  eng_dnnl_cmd x_md = io && io->x_fmt ? ENG_DNNL_MDP(*(const eng_dnnl_md *)io->x_fmt) : ENG_DNNL_MDP(plain_x);
  eng_dnnl_cmd add_md =
      sum && io && io->add_fmt ? ENG_DNNL_MDP(*(const eng_dnnl_md *)io->add_fmt) : ENG_DNNL_MDP(plain_y);
  entry *en = NULL;
  for (int i = 0; i < CACHE_SLOTS && !en; i++) {
    entry *t = &n->e[i];
    if (t->used && t->kind == kind && same_act(&t->act, &act) && t->sum == sum && t->keep == keep &&
        same_geom(&t->g, g) && dnnl_memory_desc_equal(ENG_DNNL_MDP(t->x_md), x_md) &&
        dnnl_memory_desc_equal(ENG_DNNL_MDP(t->add_md), add_md))
      en = t;
  }
  int rc = 0;
  if (!en) {
    int slot = -1;
    for (int i = 0; i < CACHE_SLOTS && slot < 0; i++)
      if (!n->e[i].used) slot = i;
    if (slot < 0) {
      slot = n->next;
      n->next = (n->next + 1) % CACHE_SLOTS;
      entry_clear(&n->e[slot]);
    }
    en = &n->e[slot];
    rc = entry_create(c, n, en, kind, g, w, b, &act, sum, keep, x_md, add_md, e);
  }
  eng_dnnl_md_free(plain_x);
  eng_dnnl_md_free(plain_y);
  TRY(rc);
  void *src = en->ux ? c->src.p : (void *)x, *dst = en->y_direct ? y : c->dst.p;
  ENG_DNNL_TRY(e, dnnl_memory_set_data_handle(en->src, src), "set src");
  ENG_DNNL_TRY(e, dnnl_memory_set_data_handle(en->dst, dst), "set dst");
  if (en->ux) {
    ENG_DNNL_TRY(e, dnnl_memory_set_data_handle(en->ux, (void *)x), "set x");
    ENG_DNNL_TRY(e, eng_dnnl_reorder_run(c->stream, en->x_in, en->ux, en->src), "src reorder");
  }
  if (sum) {
    // the sum post-op adds what dst holds: the addend, in dst's layout
    if (en->uadd) {
      ENG_DNNL_TRY(e, dnnl_memory_set_data_handle(en->uadd, (void *)post->add), "set addend");
      ENG_DNNL_TRY(e, eng_dnnl_reorder_run(c->stream, en->add_in, en->uadd, en->dst), "addend reorder");
    } else if (post->add != dst) {
      memmove(dst, post->add, en->dst_bytes);
    }
  }
  // B may be an activation, so its address is set per run like X's and Y's
  if (en->bias) ENG_DNNL_TRY(e, dnnl_memory_set_data_handle(en->bias, (void *)b), "set bias");
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, en->src}, {DNNL_ARG_DST, en->dst}};
  int nargs = 2;
  if (en->wi >= 0) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, n->w[en->wi].mem};
  if (en->bias) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, en->bias};
  if (en->scratch) {
    ENG_DNNL_TRY(e, dnnl_memory_set_data_handle(en->scratch, c->scratch.p), "set scratchpad");
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, en->scratch};
  }
  ENG_DNNL_TRY(e, dnnl_primitive_execute(en->prim, c->stream, nargs, args), "execute");
  if (!en->y_direct) {
    ENG_DNNL_TRY(e, dnnl_memory_set_data_handle(en->uy, y), "set y");
    ENG_DNNL_TRY(e, eng_dnnl_reorder_run(c->stream, en->y_out, en->dst, en->uy), "dst reorder");
  }
  ENG_DNNL_TRY(e, dnnl_stream_wait(c->stream), "stream wait");
  // a y left in a layout other than the plain one is described for its readers
  if (io && en->y_kept) io->y_fmt = &en->dst_md;
  return 0;
}

void eng_dnnl_act_ref(float *y, size_t n, const eng_dnnl_post *post) {
  float a = post->alpha, b = post->beta;
  switch (post->act) {
    case ENG_DNNL_ACT_NONE: break;
    case ENG_DNNL_ACT_RELU:
      for (size_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0;
      break;
    case ENG_DNNL_ACT_SIGMOID:
      for (size_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-y[i]));
      break;
    case ENG_DNNL_ACT_SILU:
      for (size_t i = 0; i < n; i++) y[i] = y[i] / (1.0f + expf(-y[i]));
      break;
    case ENG_DNNL_ACT_HARD_SWISH:
      for (size_t i = 0; i < n; i++) {
        float h = y[i] / 6.0f + 0.5f;
        y[i] *= h < 0 ? 0 : h > 1 ? 1 : h;
      }
      break;
    case ENG_DNNL_ACT_HARD_SIGMOID:
      for (size_t i = 0; i < n; i++) {
        float h = a * y[i] + b;
        y[i] = h < 0 ? 0 : h > 1 ? 1 : h;
      }
      break;
    case ENG_DNNL_ACT_CLIP:
      for (size_t i = 0; i < n; i++) y[i] = y[i] < a ? a : y[i] > b ? b : y[i];
      break;
  }
}
