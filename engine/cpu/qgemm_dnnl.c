// engine/cpu/qgemm_dnnl.c: the int8 GEMM of qgemm_dnnl.h on oneDNN's
// BLAS-like dnnl_gemm_u8s8s32 (the same call in oneDNN 2.x and 3.x).
// Exactness as in qconv_dnnl.c: on CPUs without VNNI oneDNN adds UINT8 x
// INT8 product pairs in int16 and may saturate, so a b with values outside
// [-64, 64] runs split, b = 2 bh + bl (bh = floor(b / 2), bl in {0, 1}), as
// two GEMMs; INT8 a runs as UINT8 a + 128 with a_zp + 128. The split and
// converted copies are made per call (the GEMM packs b on every call anyway).
#include "engine/cpu/qgemm_dnnl.h"

#include <dnnl.h>
#include <stdlib.h>

#include "engine/cpu/dnnl_util.h"

static int gemm(int32_t *c, const uint8_t *a, uint8_t ao, const int8_t *b, size_t m, size_t k, size_t n, err *e) {
  const int32_t co = 0;
  dnnl_status_t st = dnnl_gemm_u8s8s32('N', 'N', 'F', (dnnl_dim_t)m, (dnnl_dim_t)n, (dnnl_dim_t)k, 1.0f, a,
                                       (dnnl_dim_t)k, ao, b, (dnnl_dim_t)n, 0, 0.0f, c, (dnnl_dim_t)n, &co);
  return st == dnnl_success ? 0 : eng_dnnl_fail(e, st, "int8 GEMM");
}

int eng_dnnl_qgemm(int32_t *c, const void *a, int a_signed, int32_t a_zp, const int8_t *b, size_t m, size_t k,
                   size_t n, err *e) {
  if (m == 0 || n == 0) return 0;
  size_t na = m * k, nb = k * n;
  uint8_t *au = NULL;
  int8_t *bh = NULL;
  int32_t *lo = NULL;
  int rc = 0;
  const uint8_t *ua = a;
  if (a_signed) {  // a + 128 as UINT8: flipping the sign bit
    if (!(au = malloc(na ? na : 1))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t i = 0; i < na; i++) au[i] = ((const uint8_t *)a)[i] ^ 0x80u;
    ua = au, a_zp += 128;
  }
  if (!eng_dnnl_s8_wide(b, nb) || eng_dnnl_has_vnni()) {
    rc = gemm(c, ua, (uint8_t)a_zp, b, m, k, n, e);
  } else {
    bh = malloc(2 * nb);
    lo = malloc(m * n * sizeof *lo);
    if (!bh || !lo) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (!rc) eng_dnnl_s8_split(b, nb, bh, bh + nb);
    if (!rc) rc = gemm(c, ua, (uint8_t)a_zp, bh, m, k, n, e);
    if (!rc) rc = gemm(lo, ua, (uint8_t)a_zp, bh + nb, m, k, n, e);
    for (size_t i = 0; !rc && i < m * n; i++) c[i] = (int32_t)((uint32_t)c[i] * 2u + (uint32_t)lo[i]);
  }
  free(au);
  free(bh);
  free(lo);
  return rc;
}
