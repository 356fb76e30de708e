// engine/cpu/dnnl_util.h: what the oneDNN modules of engine/cpu (conv_dnnl.c,
// qconv_dnnl.c, qgemm_dnnl.c) share, in one place so each difference between
// oneDNN's C APIs is bridged once:
// - the 2.x / 3.x shim: Debian 12 ships oneDNN 2.x, Ubuntu 24.04's CUDA
//   images 3.x. In 3.x memory descriptors are handles (created and
//   destroyed), primitive descriptors are created in one call, post-op
//   calls lost the scale argument and the source zero point is a mask alone;
// - a oneDNN status as an err, and ENG_DNNL_TRY to return it early;
// - a host buffer that only grows (scratchpads, layouts between reorders);
// - reorders between two layouts;
// - whether the CPU's int8 kernels sum in int32 (VNNI).
// Not a public header: engine/cpu's oneDNN modules include it, nothing else.
#ifndef INFERD_ENGINE_DNNL_UTIL_H
#define INFERD_ENGINE_DNNL_UTIL_H

#include <dnnl.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

// --- memory descriptors, 2.x / 3.x

#if DNNL_VERSION_MAJOR >= 3
typedef dnnl_memory_desc_t eng_dnnl_md;  // a handle, freed with eng_dnnl_md_free
typedef const_dnnl_memory_desc_t eng_dnnl_cmd;
#define ENG_DNNL_MDP(md) (md)
#else
typedef dnnl_memory_desc_t eng_dnnl_md;  // a plain struct
typedef const dnnl_memory_desc_t *eng_dnnl_cmd;
#define ENG_DNNL_MDP(md) (&(md))
#endif
// ENG_DNNL_MDP(md): the eng_dnnl_cmd that oneDNN's calls take for an
// eng_dnnl_md variable. Every eng_dnnl_md starts as {0}, so that
// eng_dnnl_md_free may be called on one never made.

// An md of dims d[0..nd) with strides s.
dnnl_status_t eng_dnnl_md_strides(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t,
                                  const dnnl_dims_t s);
// An md of dims d[0..nd) dense in row-major order (the plan's plain layout).
dnnl_status_t eng_dnnl_md_dense(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t);
// An md of a format tag (dnnl_format_tag_any: the primitive chooses).
dnnl_status_t eng_dnnl_md_tag(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t, dnnl_format_tag_t tag);
// A copy of `in` that outlives the primitive descriptor it was queried from.
dnnl_status_t eng_dnnl_md_clone(eng_dnnl_md *out, eng_dnnl_cmd in);
void eng_dnnl_md_free(eng_dnnl_md md);

// Dense row-major strides s[0..nd) of dims d[0..nd).
void eng_dnnl_dense_strides(int nd, const int64_t *d, int64_t *s);

// --- attributes and primitive descriptors, 2.x / 3.x

// Post-ops with a scale of 1: an eltwise op, and a sum that adds what dst holds.
dnnl_status_t eng_dnnl_po_eltwise(dnnl_post_ops_t po, dnnl_alg_kind_t alg, float a, float b);
dnnl_status_t eng_dnnl_po_sum(dnnl_post_ops_t po);
// The source's zero point as one runtime int32 (DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC).
dnnl_status_t eng_dnnl_attr_src_zp(dnnl_primitive_attr_t attr);

// Forward-inference primitive descriptors; bias may be NULL. dil counts
// the gaps between taps (ONNX's dilation - 1).
dnnl_status_t eng_dnnl_conv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                               eng_dnnl_cmd bias, eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t dil,
                               const dnnl_dims_t pl, const dnnl_dims_t pr, const_dnnl_primitive_attr_t attr);
dnnl_status_t eng_dnnl_deconv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                                 eng_dnnl_cmd bias, eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t dil,
                                 const dnnl_dims_t pl, const dnnl_dims_t pr, const_dnnl_primitive_attr_t attr);
dnnl_status_t eng_dnnl_inner_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                                eng_dnnl_cmd bias, eng_dnnl_cmd dst, const_dnnl_primitive_attr_t attr);
dnnl_status_t eng_dnnl_pool_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, dnnl_alg_kind_t alg, eng_dnnl_cmd src,
                               eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t kern,
                               const dnnl_dims_t dil, const dnnl_dims_t pl, const dnnl_dims_t pr,
                               const_dnnl_primitive_attr_t attr);

// --- reorders

// A reorder primitive from layout `from` to layout `to`, both on eng.
dnnl_status_t eng_dnnl_reorder_create(dnnl_engine_t eng, eng_dnnl_cmd from, eng_dnnl_cmd to, dnnl_primitive_t *out);
// Runs reorder r from memory `from` into `to` on s (not waited for).
dnnl_status_t eng_dnnl_reorder_run(dnnl_stream_t s, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to);

// --- errors

// Sets e to ERR_INTERNAL "oneDNN <what> failed (status <st>)" and returns that code.
int eng_dnnl_fail(err *e, dnnl_status_t st, const char *what);
// Runs a oneDNN call; where it fails, the caller returns eng_dnnl_fail's code.
#define ENG_DNNL_TRY(e, call, what)                                  \
  do {                                                               \
    dnnl_status_t st_ = (call);                                      \
    if (st_ != dnnl_success) return eng_dnnl_fail((e), st_, (what)); \
  } while (0)

// --- a buffer that only grows

// A 64-byte aligned host buffer whose contents do not outlive one run.
// Caller-allocated: zeroed is empty; eng_dnnl_buf_close frees it.
typedef struct eng_dnnl_buf {
  void *p;
  size_t cap;
} eng_dnnl_buf;

// At least `bytes` bytes in b->p (the old contents are not kept).
int eng_dnnl_buf_grow(eng_dnnl_buf *b, size_t bytes, err *e);
void eng_dnnl_buf_close(eng_dnnl_buf *b);

// --- the CPU

// Whether the CPU's int8 kernels sum UINT8 x INT8 products in int32 (VNNI);
// without, they add product pairs in int16 and may saturate.
int eng_dnnl_has_vnni(void);

// Whether any of w[0..n) lies outside [-64, 64]: such INT8 weights may
// saturate those int16 pairs, so without VNNI they run split.
int eng_dnnl_s8_wide(const int8_t *w, size_t n);
// The split: w = 2 hi + lo with hi = floor(w / 2) in [-64, 63], lo in {0, 1}.
void eng_dnnl_s8_split(const int8_t *w, size_t n, int8_t *hi, int8_t *lo);

// --- teardown

// Destroys the primitives and memories of the lists that are not NULL.
void eng_dnnl_destroy(dnnl_primitive_t *prims, size_t n_prims, dnnl_memory_t *mems, size_t n_mems);

#endif
