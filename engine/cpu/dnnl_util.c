// engine/cpu/dnnl_util.c: the oneDNN helpers engine/cpu's oneDNN modules
// share (dnnl_util.h). Every #if on DNNL_VERSION_MAJOR for an API
// difference is here; what differs in meaning between the versions (the
// parameters of an eltwise op) stays with the op that uses it.
#include "engine/cpu/dnnl_util.h"

#include <stdlib.h>

// --- memory descriptors

#if DNNL_VERSION_MAJOR >= 3
dnnl_status_t eng_dnnl_md_strides(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t,
                                  const dnnl_dims_t s) {
  return dnnl_memory_desc_create_with_strides(md, nd, d, t, s);
}
dnnl_status_t eng_dnnl_md_tag(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t, dnnl_format_tag_t tag) {
  return dnnl_memory_desc_create_with_tag(md, nd, d, t, tag);
}
dnnl_status_t eng_dnnl_md_clone(eng_dnnl_md *out, eng_dnnl_cmd in) {
  return dnnl_memory_desc_clone(out, in);
}
void eng_dnnl_md_free(eng_dnnl_md md) {
  if (md) dnnl_memory_desc_destroy(md);
}
#else
dnnl_status_t eng_dnnl_md_strides(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t,
                                  const dnnl_dims_t s) {
  return dnnl_memory_desc_init_by_strides(md, nd, d, t, s);
}
dnnl_status_t eng_dnnl_md_tag(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t, dnnl_format_tag_t tag) {
  return dnnl_memory_desc_init_by_tag(md, nd, d, t, tag);
}
dnnl_status_t eng_dnnl_md_clone(eng_dnnl_md *out, eng_dnnl_cmd in) {
  *out = *in;
  return dnnl_success;
}
void eng_dnnl_md_free(eng_dnnl_md md) {
  (void)md;
}
#endif

void eng_dnnl_dense_strides(int nd, const int64_t *d, int64_t *s) {
  int64_t acc = 1;
  for (int i = nd - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= d[i];
  }
}

dnnl_status_t eng_dnnl_md_dense(eng_dnnl_md *md, int nd, const dnnl_dims_t d, dnnl_data_type_t t) {
  dnnl_dims_t s;
  eng_dnnl_dense_strides(nd, d, s);
  return eng_dnnl_md_strides(md, nd, d, t, s);
}

// --- attributes and primitive descriptors

#if DNNL_VERSION_MAJOR >= 3
dnnl_status_t eng_dnnl_po_eltwise(dnnl_post_ops_t po, dnnl_alg_kind_t alg, float a, float b) {
  return dnnl_post_ops_append_eltwise(po, alg, a, b);
}
dnnl_status_t eng_dnnl_po_sum(dnnl_post_ops_t po) {
  return dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef);
}
dnnl_status_t eng_dnnl_attr_src_zp(dnnl_primitive_attr_t attr) {
  return dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_SRC, 0);
}

dnnl_status_t eng_dnnl_conv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                               eng_dnnl_cmd bias, eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t dil,
                               const dnnl_dims_t pl, const dnnl_dims_t pr, const_dnnl_primitive_attr_t attr) {
  return dnnl_convolution_forward_primitive_desc_create(pd, eng, dnnl_forward_inference, dnnl_convolution_direct, src,
                                                        wts, bias, dst, strides, dil, pl, pr, attr);
}
dnnl_status_t eng_dnnl_deconv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                                 eng_dnnl_cmd bias, eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t dil,
                                 const dnnl_dims_t pl, const dnnl_dims_t pr, const_dnnl_primitive_attr_t attr) {
  return dnnl_deconvolution_forward_primitive_desc_create(pd, eng, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                          src, wts, bias, dst, strides, dil, pl, pr, attr);
}
dnnl_status_t eng_dnnl_inner_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                                eng_dnnl_cmd bias, eng_dnnl_cmd dst, const_dnnl_primitive_attr_t attr) {
  return dnnl_inner_product_forward_primitive_desc_create(pd, eng, dnnl_forward_inference, src, wts, bias, dst, attr);
}
dnnl_status_t eng_dnnl_pool_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, dnnl_alg_kind_t alg, eng_dnnl_cmd src,
                               eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t kern,
                               const dnnl_dims_t dil, const dnnl_dims_t pl, const dnnl_dims_t pr,
                               const_dnnl_primitive_attr_t attr) {
  return dnnl_pooling_forward_primitive_desc_create(pd, eng, dnnl_forward_inference, alg, src, dst, strides, kern, dil,
                                                    pl, pr, attr);
}
#else
dnnl_status_t eng_dnnl_po_eltwise(dnnl_post_ops_t po, dnnl_alg_kind_t alg, float a, float b) {
  return dnnl_post_ops_append_eltwise(po, 1.0f, alg, a, b);
}
dnnl_status_t eng_dnnl_po_sum(dnnl_post_ops_t po) {
  return dnnl_post_ops_append_sum(po, 1.0f);
}
dnnl_status_t eng_dnnl_attr_src_zp(dnnl_primitive_attr_t attr) {
  const int32_t rt = DNNL_RUNTIME_S32_VAL;  // one value (count 1, mask 0), given at run time
  return dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &rt);
}

// 2.x: an operation descriptor first, then the primitive descriptor from it.
dnnl_status_t eng_dnnl_conv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                               eng_dnnl_cmd bias, eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t dil,
                               const dnnl_dims_t pl, const dnnl_dims_t pr, const_dnnl_primitive_attr_t attr) {
  dnnl_convolution_desc_t d;
  dnnl_status_t st = dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_direct,
                                                                src, wts, bias, dst, strides, dil, pl, pr);
  return st == dnnl_success ? dnnl_primitive_desc_create(pd, &d, attr, eng, NULL) : st;
}
dnnl_status_t eng_dnnl_deconv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                                 eng_dnnl_cmd bias, eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t dil,
                                 const dnnl_dims_t pl, const dnnl_dims_t pr, const_dnnl_primitive_attr_t attr) {
  dnnl_deconvolution_desc_t d;
  dnnl_status_t st = dnnl_dilated_deconvolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                                  src, wts, bias, dst, strides, dil, pl, pr);
  return st == dnnl_success ? dnnl_primitive_desc_create(pd, &d, attr, eng, NULL) : st;
}
dnnl_status_t eng_dnnl_inner_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, eng_dnnl_cmd src, eng_dnnl_cmd wts,
                                eng_dnnl_cmd bias, eng_dnnl_cmd dst, const_dnnl_primitive_attr_t attr) {
  dnnl_inner_product_desc_t d;
  dnnl_status_t st = dnnl_inner_product_forward_desc_init(&d, dnnl_forward_inference, src, wts, bias, dst);
  return st == dnnl_success ? dnnl_primitive_desc_create(pd, &d, attr, eng, NULL) : st;
}
// pooling_v2: 2.x's pooling with dilation (3.x's only pooling).
dnnl_status_t eng_dnnl_pool_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, dnnl_alg_kind_t alg, eng_dnnl_cmd src,
                               eng_dnnl_cmd dst, const dnnl_dims_t strides, const dnnl_dims_t kern,
                               const dnnl_dims_t dil, const dnnl_dims_t pl, const dnnl_dims_t pr,
                               const_dnnl_primitive_attr_t attr) {
  dnnl_pooling_v2_desc_t d;
  dnnl_status_t st =
      dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, alg, src, dst, strides, kern, dil, pl, pr);
  return st == dnnl_success ? dnnl_primitive_desc_create(pd, &d, attr, eng, NULL) : st;
}
#endif

// --- reorders

dnnl_status_t eng_dnnl_reorder_create(dnnl_engine_t eng, eng_dnnl_cmd from, eng_dnnl_cmd to, dnnl_primitive_t *out) {
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_status_t st = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, NULL);
  if (st == dnnl_success) st = dnnl_primitive_create(out, rpd);
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  return st;
}

dnnl_status_t eng_dnnl_reorder_run(dnnl_stream_t s, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  return dnnl_primitive_execute(r, s, 2, args);
}

// --- errors

int eng_dnnl_fail(err *e, dnnl_status_t st, const char *what) {
  return err_set(e, ERR_INTERNAL, "oneDNN %s failed (status %d)", what, (int)st);
}

// --- a buffer that only grows

int eng_dnnl_buf_grow(eng_dnnl_buf *b, size_t bytes, err *e) {
  if (bytes <= b->cap) return 0;
  size_t cap = (bytes + 4095) / 4096 * 4096;  // whole pages: aligned_alloc wants a multiple of 64
  void *p = aligned_alloc(64, cap);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte oneDNN buffer", bytes);
  free(b->p);
  b->p = p;
  b->cap = cap;
  return 0;
}

void eng_dnnl_buf_close(eng_dnnl_buf *b) {
  free(b->p);
  b->p = NULL;
  b->cap = 0;
}

// --- the CPU

// The ISA values are bit sets, each a superset of those below it.
int eng_dnnl_has_vnni(void) {
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
  unsigned v512 = (unsigned)dnnl_cpu_isa_avx512_core_vnni, v2 = (unsigned)dnnl_cpu_isa_avx2_vnni;
  return (isa & v512) == v512 || (isa & v2) == v2;
}

int eng_dnnl_s8_wide(const int8_t *w, size_t n) {
  int wide = 0;
  for (size_t i = 0; i < n && !wide; i++) wide = w[i] < -64 || w[i] > 64;
  return wide;
}

void eng_dnnl_s8_split(const int8_t *w, size_t n, int8_t *hi, int8_t *lo) {
  for (size_t i = 0; i < n; i++) {
    int h = w[i] >> 1;  // floor(w / 2): arithmetic shift of a negative int is GCC's and Clang's
    hi[i] = (int8_t)h;
    lo[i] = (int8_t)(w[i] - 2 * h);
  }
}

// --- teardown

void eng_dnnl_destroy(dnnl_primitive_t *prims, size_t n_prims, dnnl_memory_t *mems, size_t n_mems) {
  for (size_t i = 0; i < n_prims; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  for (size_t i = 0; i < n_mems; i++)
    if (mems[i]) dnnl_memory_destroy(mems[i]);
}
