// engine/cpu/conv_dnnl.h: the oneDNN fast path of the sliding-window ops
// (Conv, ConvTranspose, MaxPool, AveragePool) on plain NC[D][H]W float
// buffers. Creating a oneDNN primitive costs far more than running a small
// one, so each node keeps a cache: one primitive per geometry (k_window:
// batch and spatial sizes included) and post-ops, created on first use,
// and the weights reordered once into each layout the primitives asked for.
#ifndef INFERD_ENGINE_CONV_DNNL_H
#define INFERD_ENGINE_CONV_DNNL_H

#include <stddef.h>

#include "kernels/base/err.h"
#include "kernels/conv/k_conv.h"

typedef enum eng_dnnl_kind {
  ENG_DNNL_CONV,
  ENG_DNNL_DECONV,
  ENG_DNNL_POOL_MAX,
  ENG_DNNL_POOL_AVG_INCLUDE,  // divides by the whole kernel (padding counts)
  ENG_DNNL_POOL_AVG_EXCLUDE,
  // Gemm's y[n, m] = x[n, c] B + b as a oneDNN inner product (g: nsp 0,
  // group 1): w is B as [c, m], or (_BT, ONNX's transB) as [m, c]
  ENG_DNNL_INNER,
  ENG_DNNL_INNER_BT,
} eng_dnnl_kind;

// One oneDNN CPU engine and stream. Used by one thread at a time (a plan's).
typedef struct eng_dnnl_ctx eng_dnnl_ctx;
int eng_dnnl_ctx_create(eng_dnnl_ctx **out, err *e);
void eng_dnnl_ctx_destroy(eng_dnnl_ctx *c);

// The activation fused after a convolution or inner product (oneDNN
// eltwise post-ops; alpha and beta as noted, unused otherwise).
typedef enum eng_dnnl_act {
  ENG_DNNL_ACT_NONE,
  ENG_DNNL_ACT_RELU,
  ENG_DNNL_ACT_SIGMOID,
  ENG_DNNL_ACT_SILU,          // x * sigmoid(x) (EfficientNet's Sigmoid + Mul)
  ENG_DNNL_ACT_HARD_SWISH,    // x * max(0, min(1, x / 6 + 0.5))
  ENG_DNNL_ACT_HARD_SIGMOID,  // max(0, min(1, alpha x + beta))
  ENG_DNNL_ACT_CLIP,          // min(max(x, alpha), beta)
} eng_dnnl_act;

// Work fused into a convolution: y = act(conv(x) + b + add).
typedef struct eng_dnnl_post {
  eng_dnnl_act act;
  float alpha, beta;  // act's parameters
  const float *add;   // NULL, or a tensor of y's shape (layout io->add_fmt), not y's bytes
} eng_dnnl_post;

// The post-ops' activation in plain C on n floats, in place: for the paths
// that run an op without oneDNN (Gemm's fallback). Matches the unfused ops
// up to rounding.
void eng_dnnl_act_ref(float *y, size_t n, const eng_dnnl_post *post);

// Activation layouts between neighbouring oneDNN nodes. A layout is an
// opaque handle that one node's run returns (y_fmt) and its readers pass
// back (x_fmt, add_fmt) in the same plan run; NULL is the plain layout.
typedef struct eng_dnnl_io {
  const void *x_fmt, *add_fmt;  // x's and the addend's layouts
  int y_keep;         // y may be left in the primitive's layout (its readers take it)
  const void *y_fmt;  // out: y's layout; valid until this node runs again
} eng_dnnl_io;

// A node's primitives and reordered weights.
typedef struct eng_dnnl_node eng_dnnl_node;
void eng_dnnl_node_destroy(eng_dnnl_node *n);

// y = op(x) for geometry g. *node is created on the first call (the caller
// owns it from then on and releases it with eng_dnnl_node_destroy). w and b
// are the node's: w NULL for pools, else constant, valid and unchanged for
// the node's life (reordered once per layout, or used in place where the
// primitive takes the stored layout); b optional, read on
// every run; post NULL or its fusions (convolutions only); io NULL (all
// plain) or the layouts of x, the addend and y. ONNX's dilation
// is converted here (oneDNN counts the gaps). The pad_r of g must make y's
// size exact: (x + pad_l + pad_r - span) / stride + 1 for conv and pools,
// (x - 1) * stride + span - pad_l - pad_r for deconvolution, with span =
// (k - 1) * dil + 1.
int eng_dnnl_run(eng_dnnl_ctx *c, eng_dnnl_node **node, eng_dnnl_kind kind, const k_window *g,
                 const float *w, const float *b, const eng_dnnl_post *post, eng_dnnl_io *io,
                 float *y, const float *x, err *e);

#endif
