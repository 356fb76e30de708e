// kernels/conv/k_conv.h: plain C references for the sliding-window ops
// (convolution, transposed convolution, max/average pooling) on NC + 1..3
// spatial dims. Direct loops, no im2col: they are the oracles the fast
// paths (oneDNN on the CPU, cuDNN later) are checked against.
#ifndef INFERD_KERNELS_K_CONV_H
#define INFERD_KERNELS_K_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/k_ref.h"

#define K_CONV_MAX_SP 3

// One window geometry for every op of the family. x: the input's spatial
// dims, y: the output's; pad_r is what the window may overhang the input on
// the right (pools count it for count_include_pad). Convolutions: c input
// channels, m output channels, `group` groups. Pools: m == c, group unused.
typedef struct k_window {
  int nsp;  // spatial rank, 1..K_CONV_MAX_SP
  int64_t n, c, m, group;
  int64_t x[K_CONV_MAX_SP], y[K_CONV_MAX_SP], k[K_CONV_MAX_SP];
  int64_t stride[K_CONV_MAX_SP], dil[K_CONV_MAX_SP];  // dil is ONNX's: 1 = dense
  int64_t pad_l[K_CONV_MAX_SP], pad_r[K_CONV_MAX_SP];
} k_window;

// Conv: y[n, m, ...] = b[m] + sum over the group's channels and the taps of
// x * w; w is ONNX's [m, c/group, k...]; b may be NULL.
void k_conv_ref(float *y, const float *x, const float *w, const float *b, const k_window *s);

// ConvTranspose: every input element scatters x * w into y at
// i * stride - pad_l + t * dil (taps landing outside y are dropped); w is
// ONNX's [c, m/group, k...]; b may be NULL.
void k_conv_transpose_ref(float *y, const float *x, const float *w, const float *b,
                          const k_window *s);

typedef enum k_pool_kind {
  K_POOL_MAX,
  K_POOL_AVG_INCLUDE,  // divides by the taps inside [-pad_l, x + pad_r)
  K_POOL_AVG_EXCLUDE,  // divides by the taps inside the input
} k_pool_kind;

// Pooling over windows of k taps (dilated by dil) starting at
// o * stride - pad_l; taps outside the input are ignored by max and count
// as zeros for the include-padding average (onnxruntime's semantics).
void k_pool_ref(float *y, const float *x, const k_window *s, k_pool_kind kind);

// Integer convolution (ConvInteger, QLinearConv; kernels/conv/k_qconv.c):
// y[n, m, ...] = sum over the group's channels and the taps of
// (x - x_zp) * (w - w_zp[m]) in int32; x and w are K_U8 or K_I8 (w ONNX's
// [m, c/group, k...]); w_zp NULL (0), one value, or one per output channel
// (w_zp_per_m). Taps in the padding add 0. -1 for other types.
int k_conv_int_ref(int32_t *y, const void *x, k_elem xt, int32_t x_zp, const void *w, k_elem wt,
                   const int32_t *w_zp, int w_zp_per_m, const k_window *s);

#endif
