// engine/cpu/qgemm_dnnl.h: the integer matrix product behind QLinearMatMul's
// and MatMulInteger's fast path (engine/ops/elem/elem_quant.c): oneDNN's
// int8 GEMM (dnnl_gemm_u8s8s32), exact on every CPU (see the .c).
#ifndef INFERD_ENGINE_QGEMM_DNNL_H
#define INFERD_ENGINE_QGEMM_DNNL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

// c[m, n] = (a - a_zp) b in int32, row-major and dense; a [m, k] UINT8
// (a_signed 0) or INT8, a_zp in a's type's range; b [k, n] INT8 with no zero point.
int eng_dnnl_qgemm(int32_t *c, const void *a, int a_signed, int32_t a_zp, const int8_t *b, size_t m, size_t k,
                   size_t n, err *e);

#endif
