// engine/cpu/qconv_dnnl.c: oneDNN int8 convolutions (qconv_dnnl.h). x comes
// plain NC[D]HW in 8 bits and is reordered into the layout the primitive
// chose (format any: oneDNN's int8 JIT kernels want channels innermost); the
// int32 sums come back the same way. x's zero point is a runtime argument
// (one primitive serves every value), set only where it is not 0, since
// oneDNN then adds a compensation pass. Written against the C API of
// oneDNN 2.x (Debian 12) and 3.x, as conv_dnnl.c, over dnnl_util.h's shim
// (the zero-point attribute: 2.x a count, a mask and DNNL_RUNTIME_S32_VAL,
// 3.x a mask). The runtime argument itself is the same in both.
// Exactness on CPUs without VNNI (AVX2, AVX-512 before Cascade Lake): there
// oneDNN multiplies UINT8 by INT8 with vpmaddubsw, which adds two products in
// int16 and saturates (255 * 127 * 2 > 32767): measured on the dev VM's
// AVX2, full-range weights gave wrong sums in most outputs (test_qconv.c).
// onnxruntime's MLAS has the same limit (hence its reduce_range option).
// Weights in [-64, 64] cannot saturate (255 * 64 * 2 < 32767; onnxruntime's
// reduce_range writes such 7-bit weights); others are
// split, W = 2 Wh + Wl with Wh = floor(W / 2) in [-64, 63] and Wl in {0, 1},
// and run as two convolutions, y = 2 conv(x, Wh) + conv(x, Wl): exact, at
// twice the int8 work. With VNNI (vpdpbusd sums in int32) one convolution.
// INT8 x runs as UINT8 x + 128 with zero point x_zp + 128, the same
// differences: oneDNN's own INT8-x path on such CPUs halves the weights
// (its weights reorder scales them by 0.5), which loses their last bit.
#include "engine/cpu/qconv_dnnl.h"

#include <stdlib.h>
#include <string.h>

#include "engine/cpu/dnnl_internal.h"
#include "engine/cpu/dnnl_util.h"

#define QCACHE_SLOTS 4  // geometries per node (batch sizes)

// oneDNN's messages for this file's failures say "int8"
#define QTRY(e, call, what) ENG_DNNL_TRY((e), (call), "int8 " what)

// --- node

typedef struct qentry {
  int used, x_signed, zp;  // zp: made with x's zero point as a runtime argument
  k_window g;
  dnnl_primitive_t prim, x_in, y_out;  // the convolution; x -> src, dst -> y (NULL: same layout)
  dnnl_memory_t src, dst, dst_lo, wts, wts_lo, zpm, scratch, ux, uy;
  void *wdata, *wdata_lo;  // the weights in the primitive's layout (split: Wh, and Wl)
  int dst_cl;              // dst is plain channels-last (nwc, nhwc, ndhwc)
  size_t src_bytes, dst_bytes, scratch_bytes;
} qentry;

struct eng_dnnl_qnode {
  qentry e[QCACHE_SLOTS];
  int next;
  int split;  // -1 until decided: whether the weights run as Wh and Wl (see the top)
  int8_t *w_hi, *w_lo;  // the split weights in ONNX's layout, when split
  eng_dnnl_buf src, dst, lo, scratch, xu;  // xu: INT8 x moved to UINT8
  int32_t zp;  // the runtime zero point's memory
};

static void qentry_clear(qentry *en) {
  dnnl_primitive_t prims[] = {en->prim, en->x_in, en->y_out};
  dnnl_memory_t mems[] = {en->src, en->dst, en->dst_lo, en->wts, en->wts_lo, en->zpm, en->scratch, en->ux, en->uy};
  eng_dnnl_destroy(prims, sizeof prims / sizeof prims[0], mems, sizeof mems / sizeof mems[0]);
  free(en->wdata);
  free(en->wdata_lo);
  memset(en, 0, sizeof *en);
}

void eng_dnnl_qnode_destroy(eng_dnnl_qnode *n) {
  if (!n) return;
  for (int i = 0; i < QCACHE_SLOTS; i++) qentry_clear(&n->e[i]);
  eng_dnnl_buf_close(&n->src);
  eng_dnnl_buf_close(&n->dst);
  eng_dnnl_buf_close(&n->lo);
  eng_dnnl_buf_close(&n->xu);
  eng_dnnl_buf_close(&n->scratch);
  free(n->w_hi);
  free(n->w_lo);
  free(n);
}

// ONNX's W [m, c/g, k...] as oneDNN's ([g,] o, i, k...): plain (ONNX's
// strides) or any.
static dnnl_status_t w_md(eng_dnnl_md *md, const k_window *g, int any) {
  dnnl_dims_t d;
  int at = 0, gr = g->group > 1;
  if (gr) d[at++] = g->group;
  d[at++] = g->m / g->group;
  d[at++] = g->c / g->group;
  for (int i = 0; i < g->nsp; i++) d[at + i] = g->k[i];
  int nd = at + g->nsp;
  return any ? eng_dnnl_md_tag(md, nd, d, dnnl_s8, dnnl_format_tag_any) : eng_dnnl_md_dense(md, nd, d, dnnl_s8);
}

static dnnl_status_t make_pd(dnnl_primitive_desc_t *pd, eng_dnnl_ctx *c, const k_window *g, int x_signed, int zp) {
  dnnl_dims_t strides, dil, pl, pr;
  for (int i = 0; i < g->nsp; i++) {
    strides[i] = g->stride[i];
    dil[i] = g->dil[i] - 1;  // oneDNN counts the gaps between taps
    pl[i] = g->pad_l[i];
    pr[i] = g->pad_r[i];
  }
  eng_dnnl_md src = {0}, wts = {0}, dst = {0};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_status_t st = eng_dnnl__act_md(&src, g, g->c, g->x, x_signed ? dnnl_s8 : dnnl_u8, 1);
  if (st == dnnl_success) st = w_md(&wts, g, 1);
  if (st == dnnl_success) st = eng_dnnl__act_md(&dst, g, g->m, g->y, dnnl_s32, 1);
  if (st == dnnl_success) st = dnnl_primitive_attr_create(&attr);
  if (st == dnnl_success) st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (st == dnnl_success && zp) st = eng_dnnl_attr_src_zp(attr);
  if (st == dnnl_success)
    st = eng_dnnl_conv_pd(pd, eng_dnnl__engine(c), ENG_DNNL_MDP(src), ENG_DNNL_MDP(wts), NULL, ENG_DNNL_MDP(dst),
                          strides, dil, pl, pr, attr);
  eng_dnnl_md_free(src);
  eng_dnnl_md_free(wts);
  eng_dnnl_md_free(dst);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return st;
}

// The weights in the primitive's layout `want`, reordered from ONNX's (the
// reorder also writes the compensation the layout's extra part asks for).
static dnnl_status_t make_weights(eng_dnnl_ctx *c, dnnl_memory_t *mem, void **data, eng_dnnl_cmd want,
                                  const k_window *g, const int8_t *w) {
  eng_dnnl_md user = {0};
  dnnl_memory_t um = NULL;
  dnnl_primitive_t r = NULL;
  size_t bytes = dnnl_memory_desc_get_size(want);
  dnnl_status_t st = w_md(&user, g, 0);
  if (st == dnnl_success && !(*data = aligned_alloc(64, (bytes + 63) / 64 * 64))) st = dnnl_out_of_memory;
  if (st == dnnl_success) st = dnnl_memory_create(&um, ENG_DNNL_MDP(user), eng_dnnl__engine(c), (void *)w);
  if (st == dnnl_success) st = dnnl_memory_create(mem, want, eng_dnnl__engine(c), *data);
  if (st == dnnl_success) st = eng_dnnl_reorder_create(eng_dnnl__engine(c), ENG_DNNL_MDP(user), want, &r);
  if (st == dnnl_success) st = eng_dnnl_reorder_run(eng_dnnl__stream(c), r, um, *mem);
  if (st == dnnl_success) st = dnnl_stream_wait(eng_dnnl__stream(c));
  if (r) dnnl_primitive_destroy(r);
  if (um) dnnl_memory_destroy(um);
  eng_dnnl_md_free(user);
  return st;
}

static int qentry_create(eng_dnnl_ctx *c, eng_dnnl_qnode *n, qentry *en, const k_window *g, int x_signed, int zp,
                         const int8_t *w, err *e) {
  en->g = *g;
  en->x_signed = x_signed;
  en->zp = zp;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t st = make_pd(&pd, c, g, x_signed, zp);
  if (st != dnnl_success)
    return err_set(e, ERR_UNIMPLEMENTED, "oneDNN has no int8 convolution for this geometry (status %d)", (int)st);
  eng_dnnl_md px = {0}, py = {0};
  dnnl_engine_t eng = eng_dnnl__engine(c);
  eng_dnnl_cmd psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  eng_dnnl_cmd pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  eng_dnnl_cmd pw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  eng_dnnl_cmd smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  en->src_bytes = dnnl_memory_desc_get_size(psrc);
  en->dst_bytes = dnnl_memory_desc_get_size(pdst);
  en->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
  st = eng_dnnl__act_md(&px, g, g->c, g->x, x_signed ? dnnl_s8 : dnnl_u8, 0);
  if (st == dnnl_success) st = eng_dnnl__act_md(&py, g, g->m, g->y, dnnl_s32, 0);
  if (st == dnnl_success) {
    eng_dnnl_md cl = {0};
    dnnl_dims_t d;
    d[0] = g->n, d[1] = g->m;
    for (int i = 0; i < g->nsp; i++) d[2 + i] = g->y[i];
    dnnl_format_tag_t tag = g->nsp == 1 ? dnnl_acb : g->nsp == 2 ? dnnl_acdb : dnnl_acdeb;
    st = eng_dnnl_md_tag(&cl, 2 + g->nsp, d, dnnl_s32, tag);
    if (st == dnnl_success) en->dst_cl = dnnl_memory_desc_equal(ENG_DNNL_MDP(cl), pdst);
    eng_dnnl_md_free(cl);
  }
  if (st == dnnl_success) st = make_weights(c, &en->wts, &en->wdata, pw, g, n->split > 0 ? n->w_hi : w);
  if (st == dnnl_success && n->split > 0) st = make_weights(c, &en->wts_lo, &en->wdata_lo, pw, g, n->w_lo);
  if (st == dnnl_success && n->split > 0) st = dnnl_memory_create(&en->dst_lo, pdst, eng, DNNL_MEMORY_NONE);
  if (st == dnnl_success) st = dnnl_primitive_create(&en->prim, pd);
  if (st == dnnl_success) st = dnnl_memory_create(&en->src, psrc, eng, DNNL_MEMORY_NONE);
  if (st == dnnl_success) st = dnnl_memory_create(&en->dst, pdst, eng, DNNL_MEMORY_NONE);
  if (st == dnnl_success && en->scratch_bytes) st = dnnl_memory_create(&en->scratch, smd, eng, DNNL_MEMORY_NONE);
  if (st == dnnl_success && !dnnl_memory_desc_equal(ENG_DNNL_MDP(px), psrc)) {
    st = dnnl_memory_create(&en->ux, ENG_DNNL_MDP(px), eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = eng_dnnl_reorder_create(eng_dnnl__engine(c), ENG_DNNL_MDP(px), psrc, &en->x_in);
  }
  if (st == dnnl_success && !dnnl_memory_desc_equal(ENG_DNNL_MDP(py), pdst)) {
    st = dnnl_memory_create(&en->uy, ENG_DNNL_MDP(py), eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = eng_dnnl_reorder_create(eng_dnnl__engine(c), pdst, ENG_DNNL_MDP(py), &en->y_out);
  }
  if (st == dnnl_success && zp) {
    eng_dnnl_md zmd = {0};
    dnnl_dims_t one = {1}, unit = {1};
    st = eng_dnnl_md_strides(&zmd, 1, one, dnnl_s32, unit);
    if (st == dnnl_success) st = dnnl_memory_create(&en->zpm, ENG_DNNL_MDP(zmd), eng, &n->zp);
    eng_dnnl_md_free(zmd);
  }
  dnnl_primitive_desc_destroy(pd);
  eng_dnnl_md_free(px);
  eng_dnnl_md_free(py);
  int rc = st == dnnl_success ? 0 : eng_dnnl_fail(e, st, "int8 primitive creation");
  if (!rc && en->x_in) rc = eng_dnnl_buf_grow(&n->src, en->src_bytes, e);
  if (!rc && en->y_out) rc = eng_dnnl_buf_grow(&n->dst, en->dst_bytes, e);
  if (!rc && n->split > 0) rc = eng_dnnl_buf_grow(&n->lo, en->dst_bytes, e);
  if (!rc) rc = eng_dnnl_buf_grow(&n->scratch, en->scratch_bytes, e);
  if (rc) qentry_clear(en);
  else en->used = 1;
  return rc;
}

// Splits the weights (n->split, w_hi, w_lo) unless VNNI or all in [-64, 64].
static int decide_split(eng_dnnl_qnode *n, const k_window *g, const int8_t *w, err *e) {
  size_t nw = (size_t)(g->m * (g->c / g->group));
  for (int i = 0; i < g->nsp; i++) nw *= (size_t)g->k[i];
  n->split = eng_dnnl_s8_wide(w, nw) && !eng_dnnl_has_vnni() ? 1 : -1;
  if (n->split < 0) return 0;
  n->w_hi = malloc(nw);
  n->w_lo = malloc(nw);
  if (!n->w_hi || !n->w_lo) {
    free(n->w_hi), free(n->w_lo);
    n->w_hi = n->w_lo = NULL;
    n->split = 0;
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  eng_dnnl_s8_split(w, nw, n->w_hi, n->w_lo);
  return 0;
}

int eng_dnnl_qconv_run(eng_dnnl_ctx *c, eng_dnnl_qnode **node, const k_window *g, int x_signed, int32_t x_zp,
                       const int8_t *w, int32_t *y, int *y_cl, const void *x, err *e) {
  if (y_cl) *y_cl = 0;
  if (!*node && !(*node = calloc(1, sizeof **node))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  eng_dnnl_qnode *n = *node;
  if (n->split == 0 && !n->w_hi) TRY(decide_split(n, g, w, e));
  if (x_signed) {  // x + 128 as UINT8: flipping the sign bit
    size_t nx = (size_t)(g->n * g->c);
    for (int i = 0; i < g->nsp; i++) nx *= (size_t)g->x[i];
    TRY(eng_dnnl_buf_grow(&n->xu, nx, e));
    const uint8_t *xs = x;
    uint8_t *xu = n->xu.p;
    for (size_t i = 0; i < nx; i++) xu[i] = xs[i] ^ 0x80u;
    x = xu, x_signed = 0, x_zp += 128;
  }
  int zp = x_zp != 0;
  qentry *en = NULL;
  for (int i = 0; i < QCACHE_SLOTS && !en; i++) {
    qentry *t = &n->e[i];
    if (t->used && t->x_signed == x_signed && t->zp == zp && memcmp(&t->g, g, sizeof *g) == 0) en = t;
  }
  if (!en) {
    int slot = -1;
    for (int i = 0; i < QCACHE_SLOTS && slot < 0; i++)
      if (!n->e[i].used) slot = i;
    if (slot < 0) {
      slot = n->next;
      n->next = (n->next + 1) % QCACHE_SLOTS;
      qentry_clear(&n->e[slot]);
    }
    en = &n->e[slot];
    TRY(qentry_create(c, n, en, g, x_signed, zp, w, e));
  }
  n->zp = x_zp;
  dnnl_stream_t s = eng_dnnl__stream(c);
  int cl = y_cl && en->dst_cl;  // the sums stay channels-last, in y
  void *src = en->x_in ? n->src.p : (void *)x, *dst = en->y_out && !cl ? n->dst.p : (void *)y;
  QTRY(e, dnnl_memory_set_data_handle(en->src, src), "set src");
  QTRY(e, dnnl_memory_set_data_handle(en->dst, dst), "set dst");
  if (en->x_in) {
    QTRY(e, dnnl_memory_set_data_handle(en->ux, (void *)x), "set x");
    QTRY(e, eng_dnnl_reorder_run(eng_dnnl__stream(c), en->x_in, en->ux, en->src), "src reorder");
  }
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, en->src}, {DNNL_ARG_WEIGHTS, en->wts}, {DNNL_ARG_DST, en->dst}};
  int na = 3;
  if (en->scratch) {
    QTRY(e, dnnl_memory_set_data_handle(en->scratch, n->scratch.p), "set scratchpad");
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, en->scratch};
  }
  if (en->zpm) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, en->zpm};
  QTRY(e, dnnl_primitive_execute(en->prim, s, na, args), "execute");
  if (n->split > 0) {  // y = 2 conv(x, Wh) + conv(x, Wl), in dst's layout (padding included: harmless)
    QTRY(e, dnnl_memory_set_data_handle(en->dst_lo, n->lo.p), "set dst");
    args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, en->wts_lo};
    args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, en->dst_lo};
    QTRY(e, dnnl_primitive_execute(en->prim, s, na, args), "execute");
    QTRY(e, dnnl_stream_wait(s), "stream wait");
    int32_t *hi = dst;
    const int32_t *lo = n->lo.p;
    size_t cnt = en->dst_bytes / sizeof(int32_t);
    for (size_t i = 0; i < cnt; i++) hi[i] = (int32_t)((uint32_t)hi[i] * 2u + (uint32_t)lo[i]);
  }
  if (en->y_out && !cl) {
    QTRY(e, dnnl_memory_set_data_handle(en->uy, y), "set y");
    QTRY(e, eng_dnnl_reorder_run(eng_dnnl__stream(c), en->y_out, en->dst, en->uy), "dst reorder");
  }
  QTRY(e, dnnl_stream_wait(s), "stream wait");
  if (y_cl) *y_cl = cl;
  return 0;
}
