// engine/cpu/qconv_dnnl.h: the oneDNN int8 convolution behind QLinearConv and
// ConvInteger's fast path (engine/ops/conv/qconv.c): 8-bit x, INT8 weights
// with no zero point, int32 sums; the caller requantizes. Primitives are
// cached per geometry in a node, the weights reordered once per layout (with
// oneDNN's compensation for x's zero point and for INT8 x on CPUs without
// VNNI computed in that reorder), as conv_dnnl.h does for FP32.
#ifndef INFERD_ENGINE_QCONV_DNNL_H
#define INFERD_ENGINE_QCONV_DNNL_H

#include <stdint.h>

#include "engine/cpu/conv_dnnl.h"
#include "kernels/base/err.h"
#include "kernels/conv/k_conv.h"

typedef struct eng_dnnl_qnode eng_dnnl_qnode;
void eng_dnnl_qnode_destroy(eng_dnnl_qnode *n);

// y[n, m, ...] = sum (x - x_zp) * w over each window, int32, plain NC[D][H]W;
// x plain NC[D][H]W UINT8 (x_signed 0) or INT8 (run as UINT8, see the .c); w ONNX's [m, c/group, k...]
// INT8, constant and valid for the node's life. *node is created on the first
// call (the caller owns it from then on: eng_dnnl_qnode_destroy). g's pad_r
// must make y exact (as eng_dnnl_run). ERR_UNIMPLEMENTED when oneDNN has no
// int8 kernel for the geometry (the caller falls back to the reference).
// y_cl NULL: y plain; else y may be left channels-last ([n, spatial..., m],
// the same size) where that is the primitive's own layout, saving a reorder
// of the int32 sums, and *y_cl says whether it was.
int eng_dnnl_qconv_run(eng_dnnl_ctx *c, eng_dnnl_qnode **node, const k_window *g, int x_signed, int32_t x_zp,
                       const int8_t *w, int32_t *y, int *y_cl, const void *x, err *e);

#endif
