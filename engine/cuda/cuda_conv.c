// cuda_conv.c: convolution and pooling plans on cuDNN's legacy C API.
//
// Choices that shape this file:
// - Asymmetric pads. Legacy descriptors take one pad per dimension, applied
//   on both sides. We give cuDNN the smaller pad of each pair and copy the
//   input into a zero-filled buffer (in the run's workspace) that carries
//   the difference: a cudaMemsetAsync plus a strided cudaMemcpy3DAsync,
//   both plain graph nodes, no kernel of ours. Padding the larger side and
//   cropping the output instead only works when the stride divides the
//   difference, which the common stride-2 "SAME" pads (0, 1) break.
// - The epilogue. cudnnConvolutionBiasActivationForward fuses bias, the
//   residual z and ReLU (or identity, but identity only with the
//   IMPLICIT_PRECOMP_GEMM algorithm). Everything else (other activations, or
//   an algorithm the fused call refuses) runs split: the residual is copied
//   into y and the convolution accumulates onto it (beta = 1), then
//   cudnnAddTensor adds the bias and cudnnActivationForward runs in place.
// - Algorithm choice. The v7 heuristic lists algorithms for the plain
//   convolution; whether the fused call takes one for this shape, layout and
//   type is only known by calling it. So each candidate (algorithm, math
//   type, fused or split) is run once at plan time on borrowed buffers, and
//   the plan keeps the first that works (HEURISTIC) or the fastest (timed,
//   EXHAUSTIVE). The first call also pays cuDNN's one-off costs (kernel
//   loading, runtime compilation) at load instead of on a request.
// - Transposed convolutions are cudnnConvolutionBackwardData of the forward
//   convolution whose filter is ONNX's ConvTranspose weight. cuDNN takes
//   one pad per dimension and wants dx and dy consistent, so asymmetric
//   pads (and an output_padding past dx's reach) compute a dx with the
//   smaller pad into the workspace and copy y out of it with
//   cudnnTransformTensor over strided views (which also converts layouts:
//   an NHWC shape that no candidate runs computes NCHW between transforms).
//   Non-deterministic algorithms (ALGO_0's atomics) come last, so graph
//   replays give the bits plain launches give.
// - FP32 runs with CUDNN_FMA_MATH: CUDNN_DEFAULT_MATH lets cuDNN use TF32
//   tensor cores for float on Ampere and later, which is ENG_CUCONV_FP32_TF32.
// - Pooling. Symmetric pads without a ceil_mode overhang are exactly
//   cudnnPoolingForward. Otherwise the input is padded explicitly (-inf for
//   max, 0 for average) to exactly the extent the output needs, cuDNN pools
//   it without padding, and averages whose ONNX divisor differs from the
//   window area at some positions are multiplied by a per-position map
//   (cudnnOpTensor with broadcast), which covers count_include_pad both ways
//   and ceil_mode's clipped windows.
#include "engine/cuda/cuda_conv.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "kernels/k_cuda.h"
#include "kernels/k_ref.h"

// --- host-side helpers (built with or without cuDNN)

const char *eng_cuconv_dtype_name(eng_cuconv_dtype dt) {
  switch (dt) {
    case ENG_CUCONV_FP32: return "fp32";
    case ENG_CUCONV_FP32_TF32: return "fp32_tf32";
    case ENG_CUCONV_FP16: return "fp16";
  }
  return "?";
}

const char *eng_cuconv_act_name(eng_cuconv_act a) {
  switch (a) {
    case ENG_CUCONV_ACT_NONE: return "none";
    case ENG_CUCONV_ACT_RELU: return "relu";
    case ENG_CUCONV_ACT_CLIP: return "clip";
    case ENG_CUCONV_ACT_SIGMOID: return "sigmoid";
    case ENG_CUCONV_ACT_TANH: return "tanh";
    case ENG_CUCONV_ACT_SWISH: return "swish";
    case ENG_CUCONV_ACT_HARD_SIGMOID: return "hard_sigmoid";
    case ENG_CUCONV_ACT_HARD_SWISH: return "hard_swish";
  }
  return "?";
}

const char *eng_cuconv_strategy_name(eng_cuconv_strategy s) {
  switch (s) {
    case ENG_CUCONV_PLAIN: return "plain";
    case ENG_CUCONV_FUSED: return "fused";
    case ENG_CUCONV_SPLIT: return "split";
  }
  return "?";
}

static size_t esize(eng_cuconv_dtype dt) { return dt == ENG_CUCONV_FP16 ? 2 : 4; }
static int or1(int v) { return v == 0 ? 1 : v; }
static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// Normalised copy: zero strides, dilations and groups become 1.
static eng_cuconv_desc conv_norm(const eng_cuconv_desc *d) {
  eng_cuconv_desc n = *d;
  n.stride_h = or1(n.stride_h);
  n.stride_w = or1(n.stride_w);
  n.dil_h = or1(n.dil_h);
  n.dil_w = or1(n.dil_w);
  n.groups = or1(n.groups);
  return n;
}

static int conv_validate(const eng_cuconv_desc *d, int *ho, int *wo, err *e) {
  if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "conv: NULL descriptor");
  eng_cuconv_desc n = conv_norm(d);
  if (n.n < 1 || n.c < 1 || n.h < 1 || n.w < 1 || n.k < 1 || n.r < 1 || n.s < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv: sizes must be >= 1 (n=%d c=%d h=%d w=%d k=%d r=%d s=%d)", n.n, n.c, n.h,
                   n.w, n.k, n.r, n.s);
  if (n.pad_top < 0 || n.pad_left < 0 || n.pad_bottom < 0 || n.pad_right < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: negative pad (%d %d %d %d)", n.pad_top,
                   n.pad_left, n.pad_bottom, n.pad_right);
  if (n.stride_h < 1 || n.stride_w < 1 || n.dil_h < 1 || n.dil_w < 1 || n.groups < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv: strides, dilations and groups must be >= 1 (%d %d, %d %d, %d)",
                   n.stride_h, n.stride_w, n.dil_h, n.dil_w, n.groups);
  if (n.c % n.groups || n.k % n.groups)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: c=%d and k=%d must be multiples of groups=%d",
                   n.c, n.k, n.groups);
  if ((unsigned)n.dtype > ENG_CUCONV_FP16 || (unsigned)n.layout > ENG_CUCONV_NHWC ||
      (unsigned)n.act > ENG_CUCONV_ACT_HARD_SWISH)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: unknown dtype %d, layout %d or act %d",
                   (int)n.dtype, (int)n.layout, (int)n.act);
  if (n.act == ENG_CUCONV_ACT_CLIP && !(n.clip_max > 0.0f))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: clip activation needs clip_max > 0 (got %g)",
                   (double)n.clip_max);
  if (n.act == ENG_CUCONV_ACT_HARD_SIGMOID && !(isfinite(n.act_alpha) && isfinite(n.act_beta)))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: hard_sigmoid needs finite alpha, beta (got %g, %g)",
                   (double)n.act_alpha, (double)n.act_beta);
  long long eh = (long long)n.dil_h * (n.r - 1) + 1, ew = (long long)n.dil_w * (n.s - 1) + 1;
  long long ph = (long long)n.h + n.pad_top + n.pad_bottom - eh;
  long long pw = (long long)n.w + n.pad_left + n.pad_right - ew;
  if (ph < 0 || pw < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv: the dilated %lldx%lld kernel is larger than the padded %lldx%lld input",
                   eh, ew, ph + eh, pw + ew);
  long long oh = ph / n.stride_h + 1, ow = pw / n.stride_w + 1;
  // cuDNN's legacy descriptors count elements in int
  long long big = INT_MAX;
  long long hp = (long long)n.h + n.pad_top + n.pad_bottom, wp = (long long)n.w + n.pad_left + n.pad_right;
  if ((long long)n.n * n.c * hp * wp > big || (long long)n.n * n.k * oh * ow > big ||
      (long long)n.k * (n.c / n.groups) * n.r * n.s > big)
    return err_set(e, ERR_UNIMPLEMENTED, "conv: a tensor has more than 2^31-1 elements");
  if (ho) *ho = (int)oh;
  if (wo) *wo = (int)ow;
  return 0;
}

int eng_cuconv_out_dims(const eng_cuconv_desc *d, int *ho, int *wo, err *e) {
  return conv_validate(d, ho, wo, e);
}

size_t eng_cuconv_x_bytes(const eng_cuconv_desc *d) {
  if (conv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->n * d->c * d->h * d->w * esize(d->dtype);
}

size_t eng_cuconv_y_bytes(const eng_cuconv_desc *d) {
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  if (conv_validate(d, &ho, &wo, NULL)) return 0;
  return (size_t)d->n * d->k * ho * wo * esize(d->dtype);
}

size_t eng_cuconv_w_bytes(const eng_cuconv_desc *d) {
  if (conv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->k * (d->c / or1(d->groups)) * d->r * d->s * esize(d->dtype);
}

size_t eng_cuconv_bias_bytes(const eng_cuconv_desc *d) {
  if (conv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->k * esize(d->dtype);
}

// Stores n floats as the descriptor's storage type.
static void store(eng_cuconv_dtype dt, void *dst, size_t at, const float *src, size_t n) {
  if (dt == ENG_CUCONV_FP16) k_f32_to_f16((uint16_t *)dst + at, src, n);
  else memcpy((float *)dst + at, src, n * sizeof(float));
}

// Filters [kk][cc][r][s] (fp32, ONNX order) into the layout's order (KCRS
// as they are, or KRSC: c innermost) and the storage type.
static int pack_filter(eng_cuconv_dtype dt, eng_cuconv_layout l, const float *src, void *dst,
                       size_t kk, size_t cc, size_t r, size_t s, err *e) {
  if (l == ENG_CUCONV_NCHW) {  // KCRS is the ONNX order: a type conversion at most
    store(dt, dst, 0, src, kk * cc * r * s);
    return 0;
  }
  // KRSC: gather one filter (c innermost) at a time, then store it
  float *f = malloc(cc * r * s * sizeof *f);
  if (!f) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv: out of host memory packing weights");
  for (size_t o = 0; o < kk; o++) {
    const float *so = src + o * cc * r * s;
    for (size_t i = 0; i < cc; i++)
      for (size_t y = 0; y < r; y++)
        for (size_t x = 0; x < s; x++) f[(y * s + x) * cc + i] = so[(i * r + y) * s + x];
    store(dt, dst, o * cc * r * s, f, cc * r * s);
  }
  free(f);
  return 0;
}

int eng_cuconv_pack_weights(const eng_cuconv_desc *d, const float *oihw, void *dst,
                            size_t dst_bytes, err *e) {
  TRY(conv_validate(d, NULL, NULL, e));
  size_t need = eng_cuconv_w_bytes(d);
  if (!oihw || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: pack_weights needs %zu bytes (got %zu%s)", need,
                   dst_bytes, !oihw || !dst ? ", NULL pointer" : "");
  return pack_filter(d->dtype, d->layout, oihw, dst, (size_t)d->k, (size_t)(d->c / or1(d->groups)),
                     (size_t)d->r, (size_t)d->s, e);
}

int eng_cuconv_pack_bias(const eng_cuconv_desc *d, const float *bias, void *dst, size_t dst_bytes,
                         err *e) {
  TRY(conv_validate(d, NULL, NULL, e));
  size_t need = eng_cuconv_bias_bytes(d);
  if (!bias || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: pack_bias needs %zu bytes (got %zu%s)", need,
                   dst_bytes, !bias || !dst ? ", NULL pointer" : "");
  store(d->dtype, dst, 0, bias, (size_t)d->k);
  return 0;
}

// --- transposed convolution: shapes and packing

static eng_cutconv_desc tconv_norm(const eng_cutconv_desc *d) {
  eng_cutconv_desc n = *d;
  n.stride_h = or1(n.stride_h);
  n.stride_w = or1(n.stride_w);
  n.dil_h = or1(n.dil_h);
  n.dil_w = or1(n.dil_w);
  n.groups = or1(n.groups);
  return n;
}

// One spatial dim of a transposed convolution as cuDNN computes it.
// cuDNN's backward data takes one pad for both ends and wants its dx and dy
// to be those of a forward convolution: floor((D + 2p - span) / s) + 1 == x
// for dx extent D, i.e. D in [F - 2p, F - 2p + s - 1], where F = s (x - 1)
// + span is the full output (nothing cropped). dx is full[p, p + D); ONNX's
// y is full[pl, pl + Y) with zeros past F (output_padding), so y starts at
// dx[pl - p]. p is the largest pad up to min(pl, pr) for which some D in
// that range holds every y element inside the full output: with symmetric
// pads and output_padding < stride, p = pad and D = Y (cuDNN writes y).
typedef struct tdim {
  long long y;     // ONNX's output extent Y
  int p;           // cuDNN's pad
  long long dx;    // cuDNN's output extent D
  int crop;        // y's first element in dx (pl - p)
  long long copy;  // y elements [0, copy) come from dx; the rest are zeros (before the bias)
} tdim;

static void tconv_dim(long long x, int k, int s, int dil, int pl, int pr, int op, tdim *t) {
  long long span = (long long)dil * (k - 1) + 1, full = s * (x - 1) + span;
  t->y = full + op - pl - pr;
  int p = pl < pr ? pl : pr;
  for (; p > 0; p--) {
    long long lo = full - 2LL * p, hi = lo + s - 1;
    // covered: D reaches the end of y, or dx's end lies past the full
    // output (p <= s - 1), so what it misses is zeros
    if (lo >= 1 && (pl - p + t->y <= hi || p <= s - 1)) break;
  }
  // p = 0 always works: D in [F, F + s - 1] covers the full output
  long long lo = full - 2LL * p, hi = lo + s - 1, want = pl - p + t->y;
  t->p = p;
  t->dx = want < lo ? lo : want > hi ? hi : want;
  t->crop = pl - p;
  t->copy = t->dx - t->crop < t->y ? t->dx - t->crop : t->y;
  if (t->copy < 0) t->copy = 0;
}

static void tconv_dims(const eng_cutconv_desc *n, tdim *th, tdim *tw) {
  tconv_dim(n->h, n->r, n->stride_h, n->dil_h, n->pad_top, n->pad_bottom, n->out_pad_h, th);
  tconv_dim(n->w, n->s, n->stride_w, n->dil_w, n->pad_left, n->pad_right, n->out_pad_w, tw);
}

static int tconv_validate(const eng_cutconv_desc *d, int *ho, int *wo, err *e) {
  if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL descriptor");
  eng_cutconv_desc n = tconv_norm(d);
  if (n.n < 1 || n.c < 1 || n.h < 1 || n.w < 1 || n.k < 1 || n.r < 1 || n.s < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: sizes must be >= 1 (n=%d c=%d h=%d w=%d k=%d r=%d s=%d)", n.n,
                   n.c, n.h, n.w, n.k, n.r, n.s);
  if (n.pad_top < 0 || n.pad_left < 0 || n.pad_bottom < 0 || n.pad_right < 0 || n.out_pad_h < 0 ||
      n.out_pad_w < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: negative pad (%d %d %d %d) or output padding (%d %d)",
                   n.pad_top, n.pad_left, n.pad_bottom, n.pad_right, n.out_pad_h, n.out_pad_w);
  if (n.stride_h < 1 || n.stride_w < 1 || n.dil_h < 1 || n.dil_w < 1 || n.groups < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: strides, dilations and groups must be >= 1 (%d %d, %d %d, %d)",
                   n.stride_h, n.stride_w, n.dil_h, n.dil_w, n.groups);
  if (n.c % n.groups || n.k % n.groups)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: c=%d and k=%d must be multiples of groups=%d", n.c, n.k,
                   n.groups);
  if ((unsigned)n.dtype > ENG_CUCONV_FP16 || (unsigned)n.layout > ENG_CUCONV_NHWC)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: unknown dtype %d or layout %d",
                   (int)n.dtype, (int)n.layout);
  tdim th, tw;
  tconv_dims(&n, &th, &tw);
  if (th.y < 1 || tw.y < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: the output is %lldx%lld after padding", th.y, tw.y);
  // cuDNN's legacy descriptors count elements in int; dx may exceed y
  long long big = INT_MAX;
  if ((long long)n.n * n.c * n.h * n.w > big || (long long)n.n * n.k * th.y * tw.y > big ||
      (long long)n.n * n.k * th.dx * tw.dx > big || (long long)n.c * (n.k / n.groups) * n.r * n.s > big)
    return err_set(e, ERR_UNIMPLEMENTED, "conv_transpose: a tensor has more than 2^31-1 elements");
  if (ho) *ho = (int)th.y;
  if (wo) *wo = (int)tw.y;
  return 0;
}

int eng_cutconv_out_dims(const eng_cutconv_desc *d, int *ho, int *wo, err *e) {
  return tconv_validate(d, ho, wo, e);
}

int eng_cutconv_geometry(const eng_cutconv_desc *d, eng_cutconv_geom *g, err *e) {
  TRY(tconv_validate(d, NULL, NULL, e));
  if (!g) return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL geometry");
  eng_cutconv_desc n = tconv_norm(d);
  tdim th, tw;
  tconv_dims(&n, &th, &tw);  // validate bounded every extent by INT_MAX
  *g = (eng_cutconv_geom){.pad_h = th.p, .pad_w = tw.p, .dx_h = (int)th.dx, .dx_w = (int)tw.dx,
                          .crop_h = th.crop, .crop_w = tw.crop, .copy_h = (int)th.copy,
                          .copy_w = (int)tw.copy};
  return 0;
}

size_t eng_cutconv_x_bytes(const eng_cutconv_desc *d) {
  if (tconv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->n * d->c * d->h * d->w * esize(d->dtype);
}

size_t eng_cutconv_y_bytes(const eng_cutconv_desc *d) {
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  if (tconv_validate(d, &ho, &wo, NULL)) return 0;
  return (size_t)d->n * d->k * ho * wo * esize(d->dtype);
}

size_t eng_cutconv_w_bytes(const eng_cutconv_desc *d) {
  if (tconv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->c * (d->k / or1(d->groups)) * d->r * d->s * esize(d->dtype);
}

size_t eng_cutconv_bias_bytes(const eng_cutconv_desc *d) {
  if (tconv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->k * esize(d->dtype);
}

int eng_cutconv_pack_weights(const eng_cutconv_desc *d, const float *ckrs, void *dst,
                             size_t dst_bytes, err *e) {
  TRY(tconv_validate(d, NULL, NULL, e));
  size_t need = eng_cutconv_w_bytes(d);
  if (!ckrs || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: pack_weights needs %zu bytes (got %zu%s)", need, dst_bytes,
                   !ckrs || !dst ? ", NULL pointer" : "");
  // the backward-data filter: K = c (x's channels), C = k / groups
  return pack_filter(d->dtype, d->layout, ckrs, dst, (size_t)d->c, (size_t)(d->k / or1(d->groups)),
                     (size_t)d->r, (size_t)d->s, e);
}

int eng_cutconv_pack_bias(const eng_cutconv_desc *d, const float *bias, void *dst,
                          size_t dst_bytes, err *e) {
  TRY(tconv_validate(d, NULL, NULL, e));
  size_t need = eng_cutconv_bias_bytes(d);
  if (!bias || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: pack_bias needs %zu bytes (got %zu%s)",
                   need, dst_bytes, !bias || !dst ? ", NULL pointer" : "");
  store(d->dtype, dst, 0, bias, (size_t)d->k);
  return 0;
}

static eng_cupool_desc pool_norm(const eng_cupool_desc *d) {
  eng_cupool_desc n = *d;
  if (n.global) {
    n.kh = n.h;
    n.kw = n.w;
    n.pad_top = n.pad_left = n.pad_bottom = n.pad_right = 0;
    n.stride_h = n.stride_w = 1;
    n.ceil_mode = false;
  }
  n.stride_h = or1(n.stride_h);
  n.stride_w = or1(n.stride_w);
  if (n.dtype == ENG_CUCONV_FP32_TF32) n.dtype = ENG_CUCONV_FP32;
  return n;
}

// One dimension of ONNX's output size rule. With ceil_mode, a last window
// that would start at or past the input plus the leading pad is dropped
// (PyTorch and onnxruntime do the same).
static long long pool_out_1d(long long in, int k, int s, int pad0, int pad1, bool ceil_mode) {
  long long span = in + pad0 + pad1 - k;
  if (span < 0) return 0;
  long long out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad0) out--;
  return out;
}

static int pool_validate(const eng_cupool_desc *d, int *ho, int *wo, err *e) {
  if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "pool: NULL descriptor");
  eng_cupool_desc n = pool_norm(d);
  if (n.n < 1 || n.c < 1 || n.h < 1 || n.w < 1 || n.kh < 1 || n.kw < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: sizes must be >= 1 (n=%d c=%d h=%d w=%d k=%dx%d)",
                   n.n, n.c, n.h, n.w, n.kh, n.kw);
  if (n.pad_top < 0 || n.pad_left < 0 || n.pad_bottom < 0 || n.pad_right < 0 || n.stride_h < 1 ||
      n.stride_w < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: negative pad or stride");
  if ((unsigned)n.mode > ENG_CUPOOL_AVG_EXCLUDE_PAD || (unsigned)n.dtype > ENG_CUCONV_FP16 ||
      (unsigned)n.layout > ENG_CUCONV_NHWC)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: unknown mode %d, dtype %d or layout %d",
                   (int)n.mode, (int)n.dtype, (int)n.layout);
  long long oh = pool_out_1d(n.h, n.kh, n.stride_h, n.pad_top, n.pad_bottom, n.ceil_mode);
  long long ow = pool_out_1d(n.w, n.kw, n.stride_w, n.pad_left, n.pad_right, n.ceil_mode);
  if (oh < 1 || ow < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: the %dx%d window does not fit the padded input",
                   n.kh, n.kw);
  long long hp = (oh - 1) * n.stride_h + n.kh, wp = (ow - 1) * n.stride_w + n.kw;
  if (hp < n.h + n.pad_top) hp = n.h + n.pad_top;
  if (wp < n.w + n.pad_left) wp = n.w + n.pad_left;
  if ((long long)n.n * n.c * hp * wp > INT_MAX)
    return err_set(e, ERR_UNIMPLEMENTED, "pool: a tensor has more than 2^31-1 elements");
  if (ho) *ho = (int)oh;
  if (wo) *wo = (int)ow;
  return 0;
}

int eng_cupool_out_dims(const eng_cupool_desc *d, int *ho, int *wo, err *e) {
  return pool_validate(d, ho, wo, e);
}

size_t eng_cupool_x_bytes(const eng_cupool_desc *d) {
  if (pool_validate(d, NULL, NULL, NULL)) return 0;
  eng_cupool_desc n = pool_norm(d);
  return (size_t)n.n * n.c * n.h * n.w * esize(n.dtype);
}

size_t eng_cupool_y_bytes(const eng_cupool_desc *d) {
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  if (pool_validate(d, &ho, &wo, NULL)) return 0;
  eng_cupool_desc n = pool_norm(d);
  return (size_t)n.n * n.c * ho * wo * esize(n.dtype);
}

#if defined(INFERD_HAVE_CUDNN) && INFERD_HAVE_CUDNN

#include <cudnn.h>

// --- cuDNN plumbing

static int cudnn_check(cudnnStatus_t st, err *e, const char *file, int line, const char *call) {
  if (st == CUDNN_STATUS_SUCCESS) return 0;
  char last[256] = "";
  cudnnGetLastErrorString(last, sizeof last);
  err_code code = ERR_INTERNAL;
  if (st / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) code = ERR_UNIMPLEMENTED;
  if (st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    code = ERR_RESOURCE_EXHAUSTED;
  (void)cudaGetLastError();
  return err_set(e, code, "%s:%d: %s failed: %s%s%s", file, line, call, cudnnGetErrorString(st),
                 last[0] ? ": " : "", last);
}
#define CUDNN_OK(e, call) cudnn_check((call), (e), __FILE__, __LINE__, #call)
#define CUDNN_TRY(e, call)                    \
  do {                                        \
    int cudnn_try_rc_ = CUDNN_OK(e, call);    \
    if (cudnn_try_rc_ != 0) return cudnn_try_rc_; \
  } while (0)

struct eng_cudnn {
  cudnnHandle_t h;
  int device;
};

bool eng_cuconv_available(void) { return true; }
size_t eng_cudnn_version(void) { return cudnnGetVersion(); }

int eng_cudnn_create(eng_cudnn **out, err *e) {
  if (!out) return err_set(e, ERR_INVALID_ARGUMENT, "cudnn: NULL out");
  *out = NULL;
  eng_cudnn *h = calloc(1, sizeof *h);
  if (!h) return err_set(e, ERR_RESOURCE_EXHAUSTED, "cudnn: out of host memory");
  int rc = CUDA_OK(e, cudaGetDevice(&h->device));
  if (!rc) rc = CUDNN_OK(e, cudnnCreate(&h->h));
  if (rc) {
    free(h);
    return rc;
  }
  *out = h;
  return 0;
}

void eng_cudnn_destroy(eng_cudnn *h) {
  if (!h) return;
  if (h->h) (void)cudnnDestroy(h->h);
  free(h);
}

static cudnnDataType_t dt_cudnn(eng_cuconv_dtype dt) {
  return dt == ENG_CUCONV_FP16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}
static cudnnTensorFormat_t fmt_cudnn(eng_cuconv_layout l) {
  return l == ENG_CUCONV_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

static const char *algo_name(int a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
  }
  return "?";
}

// Copies a dense [outer][rows][row_bytes] tensor into the interior of a
// [outer][rows_p][row_bytes_p] buffer at (row0, byte0): the explicit pad.
// Rows past rows_p (never read by any window) are not copied.
static int copy_into_padded(void *dst, size_t row_bytes_p, size_t rows_p, size_t byte0, size_t row0,
                            const void *src, size_t row_bytes, size_t rows, size_t outer,
                            size_t copy_bytes, size_t copy_rows, cudaStream_t stream, err *e) {
  struct cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  // linear memory: widths and x positions are in bytes
  p.srcPtr = (struct cudaPitchedPtr){.ptr = (void *)src, .pitch = row_bytes, .xsize = row_bytes, .ysize = rows};
  p.dstPtr = (struct cudaPitchedPtr){.ptr = dst, .pitch = row_bytes_p, .xsize = row_bytes_p, .ysize = rows_p};
  p.dstPos = (struct cudaPos){.x = byte0, .y = row0, .z = 0};
  p.extent = (struct cudaExtent){.width = copy_bytes, .height = copy_rows, .depth = outer};
  p.kind = cudaMemcpyDeviceToDevice;
  CUDA_TRY(e, cudaMemcpy3DAsync(&p, stream));
  return 0;
}

// --- convolution

typedef struct cand {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
  eng_cuconv_strategy strategy;
  size_t ws;  // cuDNN's workspace for this algorithm
  float ms;
} cand;

struct eng_cuconv_plan {
  eng_cuconv_desc d;  // normalised
  int ho, wo;
  // explicit pad: extra rows/columns before and after, padded input extents
  int et, eb, el, er, hp, wp;
  bool explicit_pad;
  size_t pad_bytes;  // padded input, at workspace offset 0
  cudnnTensorDescriptor_t xd, yd, bd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnActivationDescriptor_t ad_fused;  // RELU or IDENTITY for the fused call
  cudnnActivationDescriptor_t ad_split;  // the epilogue's activation, split strategy
  void *zero_bias;  // k zeros: the fused call needs a bias even when d has none
  cand chosen;
  int candidates;
  char log[768];  // what plan time tried, for eng_cuconv_info
};

void eng_cuconv_plan_destroy(eng_cuconv_plan *p) {
  if (!p) return;
  if (p->xd) (void)cudnnDestroyTensorDescriptor(p->xd);
  if (p->yd) (void)cudnnDestroyTensorDescriptor(p->yd);
  if (p->bd) (void)cudnnDestroyTensorDescriptor(p->bd);
  if (p->wd) (void)cudnnDestroyFilterDescriptor(p->wd);
  if (p->cd) (void)cudnnDestroyConvolutionDescriptor(p->cd);
  if (p->ad_fused) (void)cudnnDestroyActivationDescriptor(p->ad_fused);
  if (p->ad_split) (void)cudnnDestroyActivationDescriptor(p->ad_split);
  if (p->zero_bias) (void)cudaFree(p->zero_bias);
  (void)cudaGetLastError();
  free(p);
}

size_t eng_cuconv_plan_workspace(const eng_cuconv_plan *p) {
  return p->pad_bytes + p->chosen.ws;
}

const eng_cuconv_desc *eng_cuconv_plan_desc(const eng_cuconv_plan *p) { return &p->d; }

void eng_cuconv_plan_info(const eng_cuconv_plan *p, eng_cuconv_info *info) {
  memset(info, 0, sizeof *info);
  info->algo = (int)p->chosen.algo;
  info->algo_name = algo_name((int)p->chosen.algo);
  info->math = (int)p->chosen.math;
  info->strategy = p->chosen.strategy;
  info->explicit_pad = p->explicit_pad;
  info->workspace_bytes = eng_cuconv_plan_workspace(p);
  info->candidates = p->candidates;
  info->time_ms = p->chosen.ms;
  info->log = p->log;
}

// Appends to the plan's log, silently truncated when full.
static void plan_log(eng_cuconv_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plan_log(eng_cuconv_plan *p, const char *fmt, ...) {
  size_t used = strlen(p->log);
  if (used + 1 >= sizeof p->log) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->log + used, sizeof p->log - used, fmt, ap);
  va_end(ap);
}

static bool needs_epilogue(const eng_cuconv_desc *d) {
  return d->has_bias || d->has_z || d->act != ENG_CUCONV_ACT_NONE;
}

// Activations cuDNN has no mode for: our unary kernel runs them over y
// after cuDNN's conv (+ bias + z), in place.
static bool act_after(eng_cuconv_act a) {
  return a == ENG_CUCONV_ACT_HARD_SIGMOID || a == ENG_CUCONV_ACT_HARD_SWISH;
}

static int run_act_after(const eng_cuconv_plan *p, cudaStream_t stream, void *y, err *e) {
  const eng_cuconv_desc *d = &p->d;
  size_t n = (size_t)d->n * d->k * p->ho * p->wo;
  bool sig = d->act == ENG_CUCONV_ACT_HARD_SIGMOID;
  return k_unop_cuda(y, y, n, d->dtype == ENG_CUCONV_FP16 ? K_F16 : K_F32,
                     sig ? K_HARD_SIGMOID : K_HARD_SWISH, sig ? d->act_alpha : 0.0f,
                     sig ? d->act_beta : 0.0f, stream, e);
}

// The run itself, with candidate c (the plan's chosen one at run time).
static int conv_enqueue(const eng_cuconv_plan *p, const cand *c, cudnnHandle_t h,
                        cudaStream_t stream, const void *x, const void *w, const void *bias,
                        const void *z, void *y, void *ws, err *e) {
  const eng_cuconv_desc *d = &p->d;
  size_t es = esize(d->dtype);
  const void *xin = x;
  if (p->explicit_pad) {
    // zero the whole buffer: the workspace is shared with other ops, so the
    // border cannot be assumed still zero from an earlier run
    CUDA_TRY(e, cudaMemsetAsync(ws, 0, p->pad_bytes, stream));
    if (d->layout == ENG_CUCONV_NCHW)
      TRY(copy_into_padded(ws, (size_t)p->wp * es, (size_t)p->hp, (size_t)p->el * es, (size_t)p->et,
                           x, (size_t)d->w * es, (size_t)d->h, (size_t)d->n * d->c,
                           (size_t)d->w * es, (size_t)d->h, stream, e));
    else
      TRY(copy_into_padded(ws, (size_t)p->wp * d->c * es, (size_t)p->hp,
                           (size_t)p->el * d->c * es, (size_t)p->et, x, (size_t)d->w * d->c * es,
                           (size_t)d->h, (size_t)d->n, (size_t)d->w * d->c * es, (size_t)d->h,
                           stream, e));
    xin = ws;
  }
  void *cws = c->ws ? (char *)ws + p->pad_bytes : NULL;
  // the descriptor holds the chosen math type; only plan-time trials change it
  if (c != &p->chosen) CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, c->math));
  const float one = 1.0f, zero = 0.0f;
  switch (c->strategy) {
    case ENG_CUCONV_PLAIN:
      CUDNN_TRY(e, cudnnConvolutionForward(h, &one, p->xd, xin, p->wd, w, p->cd, c->algo, cws, c->ws,
                                           &zero, p->yd, y));
      return 0;
    case ENG_CUCONV_FUSED: {
      const void *zz = d->has_z ? z : y;  // alpha2 = 0 makes it unread
      const void *bb = d->has_bias ? bias : p->zero_bias;
      CUDNN_TRY(e, cudnnConvolutionBiasActivationForward(
                       h, &one, p->xd, xin, p->wd, w, p->cd, c->algo, cws, c->ws,
                       d->has_z ? &one : &zero, p->yd, zz, p->bd, bb, p->ad_fused, p->yd, y));
      return act_after(d->act) ? run_act_after(p, stream, y, e) : 0;
    }
    case ENG_CUCONV_SPLIT: {
      if (d->has_z && z != y) {
        int ho = p->ho, wo = p->wo;
        size_t yb = (size_t)d->n * d->k * ho * wo * es;
        CUDA_TRY(e, cudaMemcpyAsync(y, z, yb, cudaMemcpyDeviceToDevice, stream));
      }
      CUDNN_TRY(e, cudnnConvolutionForward(h, &one, p->xd, xin, p->wd, w, p->cd, c->algo, cws, c->ws,
                                           d->has_z ? &one : &zero, p->yd, y));
      if (d->has_bias) CUDNN_TRY(e, cudnnAddTensor(h, &one, p->bd, bias, &one, p->yd, y));
      if (act_after(d->act)) return run_act_after(p, stream, y, e);
      if (d->act != ENG_CUCONV_ACT_NONE)
        CUDNN_TRY(e, cudnnActivationForward(h, p->ad_split, &one, p->yd, y, &zero, p->yd, y));
      return 0;
    }
  }
  return err_set(e, ERR_INTERNAL, "conv: unknown strategy %d", (int)c->strategy);
}

static int conv_descriptors(eng_cuconv_plan *p, err *e) {
  const eng_cuconv_desc *d = &p->d;
  cudnnDataType_t t = dt_cudnn(d->dtype);
  cudnnTensorFormat_t f = fmt_cudnn(d->layout);
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->xd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->yd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->bd));
  CUDNN_TRY(e, cudnnCreateFilterDescriptor(&p->wd));
  CUDNN_TRY(e, cudnnCreateConvolutionDescriptor(&p->cd));
  CUDNN_TRY(e, cudnnCreateActivationDescriptor(&p->ad_fused));
  CUDNN_TRY(e, cudnnCreateActivationDescriptor(&p->ad_split));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->xd, f, t, d->n, d->c, p->hp, p->wp));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->yd, f, t, d->n, d->k, p->ho, p->wo));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->bd, f, t, 1, d->k, 1, 1));
  CUDNN_TRY(e, cudnnSetFilter4dDescriptor(p->wd, t, f, d->k, d->c / d->groups, d->r, d->s));
  int ph = d->pad_top < d->pad_bottom ? d->pad_top : d->pad_bottom;
  int pw = d->pad_left < d->pad_right ? d->pad_left : d->pad_right;
  CUDNN_TRY(e, cudnnSetConvolution2dDescriptor(p->cd, ph, pw, d->stride_h, d->stride_w, d->dil_h,
                                               d->dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_TRY(e, cudnnSetConvolutionGroupCount(p->cd, d->groups));
  int n_, k_, h_, w_;
  CUDNN_TRY(e, cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &n_, &k_, &h_, &w_));
  if (n_ != d->n || k_ != d->k || h_ != p->ho || w_ != p->wo)
    return err_set(e, ERR_INTERNAL, "conv: cuDNN's output %dx%dx%dx%d is not ours %dx%dx%dx%d", n_,
                   k_, h_, w_, d->n, d->k, p->ho, p->wo);
  bool relu = d->act == ENG_CUCONV_ACT_RELU;
  CUDNN_TRY(e, cudnnSetActivationDescriptor(p->ad_fused,
                                            relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                            CUDNN_PROPAGATE_NAN, 0.0));
  cudnnActivationMode_t am = CUDNN_ACTIVATION_RELU;
  double coef = 0.0;
  switch (d->act) {
    case ENG_CUCONV_ACT_NONE:
    case ENG_CUCONV_ACT_RELU: am = CUDNN_ACTIVATION_RELU; break;
    case ENG_CUCONV_ACT_CLIP: am = CUDNN_ACTIVATION_CLIPPED_RELU, coef = d->clip_max; break;
    case ENG_CUCONV_ACT_SIGMOID: am = CUDNN_ACTIVATION_SIGMOID; break;
    case ENG_CUCONV_ACT_TANH: am = CUDNN_ACTIVATION_TANH; break;
    case ENG_CUCONV_ACT_SWISH: am = CUDNN_ACTIVATION_SWISH; break;
    case ENG_CUCONV_ACT_HARD_SIGMOID:  // run_act_after's: ad_split is unused
    case ENG_CUCONV_ACT_HARD_SWISH: am = CUDNN_ACTIVATION_IDENTITY; break;
  }
  CUDNN_TRY(e, cudnnSetActivationDescriptor(p->ad_split, am, CUDNN_PROPAGATE_NAN, coef));
  if (d->act == ENG_CUCONV_ACT_SWISH)
    CUDNN_TRY(e, cudnnSetActivationDescriptorSwishBeta(p->ad_split, 1.0));
  // FP32 must not use TF32 tensor cores, which CUDNN_DEFAULT_MATH allows
  cudnnMathType_t m0 = d->dtype == ENG_CUCONV_FP32 ? CUDNN_FMA_MATH
                       : d->dtype == ENG_CUCONV_FP16 ? CUDNN_TENSOR_OP_MATH
                                                     : CUDNN_DEFAULT_MATH;
  CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, m0));
  return 0;
}

// Candidates from the v7 heuristic, in its order: each usable (algorithm,
// math) pair once, as fused (where cuDNN documents it) and as split; the
// fused ones first.
static int conv_candidates(eng_cuconv_plan *p, eng_cudnn *h, size_t cap, cand *out, int max,
                           int *count, err *e) {
  const eng_cuconv_desc *d = &p->d;
  int n_algo = 0;
  CUDNN_TRY(e, cudnnGetConvolutionForwardAlgorithmMaxCount(h->h, &n_algo));
  if (n_algo < 1) n_algo = 1;
  cudnnConvolutionFwdAlgoPerf_t *perf = calloc((size_t)n_algo, sizeof *perf);
  if (!perf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv: out of host memory");
  int got = 0;
  int rc = CUDNN_OK(e, cudnnGetConvolutionForwardAlgorithm_v7(h->h, p->xd, p->wd, p->cd, p->yd,
                                                              n_algo, &got, perf));
  int n = 0;
  for (int i = 0; !rc && i < got && n + 2 <= max; i++) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    cudnnMathType_t math = perf[i].mathType;
    if (d->dtype == ENG_CUCONV_FP32) {
      if (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      math = CUDNN_FMA_MATH;
    }
    bool dup = false;
    for (int j = 0; j < n; j++) dup |= out[j].algo == perf[i].algo && out[j].math == math;
    if (dup) continue;
    // the workspace for this algorithm with this math type
    size_t ws = 0;
    if (cudnnSetConvolutionMathType(p->cd, math) != CUDNN_STATUS_SUCCESS) continue;
    if (cudnnGetConvolutionForwardWorkspaceSize(h->h, p->xd, p->wd, p->cd, p->yd, perf[i].algo,
                                                &ws) != CUDNN_STATUS_SUCCESS)
      continue;
    if (perf[i].memory > ws) ws = perf[i].memory;
    if (ws + p->pad_bytes > cap) continue;
    cand c = {.algo = perf[i].algo, .math = math, .ws = ws, .ms = 0};
    if (!needs_epilogue(d)) {
      c.strategy = ENG_CUCONV_PLAIN;
      out[n++] = c;
      continue;
    }
    // (an act_after one rides on an identity fused kernel, as NONE does)
    bool fusable = d->act == ENG_CUCONV_ACT_RELU ||
                   ((d->act == ENG_CUCONV_ACT_NONE || act_after(d->act)) &&
                    perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
    if (fusable) {
      c.strategy = ENG_CUCONV_FUSED;
      out[n++] = c;
    }
    c.strategy = ENG_CUCONV_SPLIT;
    out[n++] = c;
  }
  free(perf);
  // one pass over y beats three: every fused candidate before any split one
  // (stable, so each group keeps the heuristic's order)
  int nf = 0;
  cand tmp[64];
  for (int i = 0; i < n && i < 64; i++)
    if (out[i].strategy != ENG_CUCONV_SPLIT) tmp[nf++] = out[i];
  for (int i = 0, j = nf; i < n && i < 64; i++)
    if (out[i].strategy == ENG_CUCONV_SPLIT) tmp[j++] = out[i];
  memcpy(out, tmp, (size_t)n * sizeof *out);
  *count = n;
  return rc;
}

int eng_cuconv_plan_create(eng_cuconv_plan **out, eng_cudnn *h, const eng_cuconv_desc *desc,
                           const eng_cuconv_opts *opts, err *e) {
  if (!out || !h) return err_set(e, ERR_INVALID_ARGUMENT, "conv: NULL %s", !out ? "out" : "handle");
  *out = NULL;
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  TRY(conv_validate(desc, &ho, &wo, e));
  eng_cuconv_opts o = opts ? *opts : (eng_cuconv_opts){0};
  size_t cap = o.workspace_cap ? o.workspace_cap : (size_t)64 << 20;
  if ((unsigned)o.search > ENG_CUCONV_SEARCH_EXHAUSTIVE)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: unknown search %d", (int)o.search);

  eng_cuconv_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv: out of host memory");
  p->d = conv_norm(desc);
  const eng_cuconv_desc *d = &p->d;
  p->ho = ho;
  p->wo = wo;
  int ph = d->pad_top < d->pad_bottom ? d->pad_top : d->pad_bottom;
  int pw = d->pad_left < d->pad_right ? d->pad_left : d->pad_right;
  p->et = d->pad_top - ph;
  p->eb = d->pad_bottom - ph;
  p->el = d->pad_left - pw;
  p->er = d->pad_right - pw;
  p->hp = d->h + p->et + p->eb;
  p->wp = d->w + p->el + p->er;
  p->explicit_pad = p->et || p->eb || p->el || p->er;
  size_t es = esize(d->dtype);
  if (p->explicit_pad) p->pad_bytes = align256((size_t)d->n * d->c * p->hp * p->wp * es);

  // borrowed for the trials, freed below
  void *bx = NULL, *bw = NULL, *by = NULL, *bz = NULL, *bb = NULL, *bws = NULL;
  cudaStream_t s = NULL;
  cudaEvent_t ev0 = NULL, ev1 = NULL;
  bool stream_set = false;
  cand cands[40];
  int n = 0, rc;
  if ((rc = conv_descriptors(p, e)) != 0) goto fail;
  if (p->pad_bytes > cap) {
    rc = err_set(e, ERR_UNIMPLEMENTED, "conv: the padded input (%zu bytes) exceeds the workspace cap %zu",
                 p->pad_bytes, cap);
    goto fail;
  }
  if ((rc = conv_candidates(p, h, cap, cands, (int)(sizeof cands / sizeof cands[0]), &n, e)) != 0)
    goto fail;
  if (n == 0) {
    rc = err_set(e, ERR_UNIMPLEMENTED, "conv: cuDNN offers no algorithm within %zu workspace bytes", cap);
    goto fail;
  }
  size_t ws_max = 0;
  for (int i = 0; i < n; i++)
    if (cands[i].ws > ws_max) ws_max = cands[i].ws;
  size_t yb = (size_t)d->n * d->k * ho * wo * es;
#define STEP(call)                             \
  do {                                         \
    if ((rc = CUDA_OK(e, call)) != 0) goto fail; \
  } while (0)
  STEP(cudaMalloc(&bx, (size_t)d->n * d->c * d->h * d->w * es));
  STEP(cudaMalloc(&bw, (size_t)d->k * (d->c / d->groups) * d->r * d->s * es));
  STEP(cudaMalloc(&by, yb));
  if (d->has_z) STEP(cudaMalloc(&bz, yb));
  if (d->has_bias) STEP(cudaMalloc(&bb, (size_t)d->k * es));
  if (p->pad_bytes + ws_max) STEP(cudaMalloc(&bws, p->pad_bytes + ws_max));
  if (needs_epilogue(d) && !d->has_bias) {
    STEP(cudaMalloc(&p->zero_bias, (size_t)d->k * es));
    STEP(cudaMemset(p->zero_bias, 0, (size_t)d->k * es));
  }
  STEP(cudaMemset(bx, 0, (size_t)d->n * d->c * d->h * d->w * es));
  STEP(cudaMemset(bw, 0, (size_t)d->k * (d->c / d->groups) * d->r * d->s * es));
  if (bz) STEP(cudaMemset(bz, 0, yb));
  if (bb) STEP(cudaMemset(bb, 0, (size_t)d->k * es));
  STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  STEP(cudaEventCreate(&ev0));
  STEP(cudaEventCreate(&ev1));
  // the timing runs on a stream of its own; afterwards the handle is left on the default stream,
  // never 'restored' to the caller's, which may be gone by then (cuDNN records an event on
  // whatever stream it is given: a destroyed one crashed); every run sets its stream first
  if ((rc = CUDNN_OK(e, cudnnSetStream(h->h, s))) != 0) goto fail;
  stream_set = true;

  int best = -1;
  err first = {0};
  for (int i = 0; i < n; i++) {
    err ce = {0};
    int crc = conv_enqueue(p, &cands[i], h->h, s, bx, bw, bb, bz, by, bws, &ce);
    if (!crc) crc = CUDA_OK(&ce, cudaStreamSynchronize(s));
    p->candidates++;
    plan_log(p, "%s%s/m%d/%s:%s", i ? " " : "", algo_name((int)cands[i].algo), (int)cands[i].math,
             eng_cuconv_strategy_name(cands[i].strategy), crc ? err_code_name(ce.code) : "ok");
    if (crc) {
      // cuDNN refusing a candidate leaves nothing behind; a failed
      // synchronisation is a broken context, where trying on is pointless
      if (!first.code) first = ce;
      if (strstr(ce.msg, "cudaStreamSynchronize")) {
        *e = ce;
        rc = ce.code;
        goto fail;
      }
      continue;
    }
    if (o.search == ENG_CUCONV_SEARCH_HEURISTIC) {
      best = i;
      break;
    }
    // EXHAUSTIVE: two more warm-up runs, then the better of two rounds of
    // 10 (a first measurement on an idle GPU runs at low clocks; on the
    // H100 a single round of 5 picked candidates up to 3x slower). Stream
    // time, so the legacy API's per-call host cost counts where it is
    // the bottleneck.
    const int reps = 10;
    for (int r = 0; r < 2 && !crc; r++)
      crc = conv_enqueue(p, &cands[i], h->h, s, bx, bw, bb, bz, by, bws, &ce);
    float best_ms = 0;
    for (int round = 0; round < 2 && !crc; round++) {
      STEP(cudaEventRecord(ev0, s));
      for (int r = 0; r < reps && !crc; r++)
        crc = conv_enqueue(p, &cands[i], h->h, s, bx, bw, bb, bz, by, bws, &ce);
      STEP(cudaEventRecord(ev1, s));
      STEP(cudaEventSynchronize(ev1));
      float ms = 0;
      STEP(cudaEventElapsedTime(&ms, ev0, ev1));
      if (round == 0 || ms < best_ms) best_ms = ms;
    }
    if (crc) continue;
    cands[i].ms = best_ms / reps;
    plan_log(p, "(%.3fms)", (double)cands[i].ms);
    if (best < 0 || cands[i].ms < cands[best].ms) best = i;
  }
#undef STEP
  if (best < 0) {
    rc = err_set(e, ERR_UNIMPLEMENTED, "conv: none of %d cuDNN candidates runs this shape; first: %s", n,
                 first.msg);
    goto fail;
  }
  p->chosen = cands[best];
  if (first.code) plan_log(p, "; first refusal: %s", first.msg);
  if ((rc = CUDNN_OK(e, cudnnSetConvolutionMathType(p->cd, p->chosen.math))) != 0) goto fail;
  (void)cudnnSetStream(h->h, NULL);
  stream_set = false;
  cudaFree(bx), cudaFree(bw), cudaFree(by), cudaFree(bz), cudaFree(bb), cudaFree(bws);
  cudaEventDestroy(ev0), cudaEventDestroy(ev1), cudaStreamDestroy(s);
  *out = p;
  return 0;
fail:
  if (stream_set) (void)cudnnSetStream(h->h, NULL);
  if (s) (void)cudaStreamSynchronize(s);
  cudaFree(bx), cudaFree(bw), cudaFree(by), cudaFree(bz), cudaFree(bb), cudaFree(bws);
  if (ev0) cudaEventDestroy(ev0);
  if (ev1) cudaEventDestroy(ev1);
  if (s) cudaStreamDestroy(s);
  eng_cuconv_plan_destroy(p);
  return rc;
}

int eng_cuconv_run(const eng_cuconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   const void *w, const void *bias, const void *z, void *y, void *workspace,
                   size_t workspace_bytes, err *e) {
  if (!p || !h || !x || !w || !y)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: NULL %s",
                   !p ? "plan" : !h ? "handle" : !x ? "x" : !w ? "w" : "y");
  if (p->d.has_bias != (bias != NULL) || p->d.has_z != (z != NULL))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: the plan %s a bias and %s a residual z",
                   p->d.has_bias ? "takes" : "takes no", p->d.has_z ? "takes" : "takes no");
  size_t need = eng_cuconv_plan_workspace(p);
  if (workspace_bytes < need || (need && !workspace))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: the plan needs %zu workspace bytes (got %zu)",
                   need, workspace ? workspace_bytes : 0);
  CUDNN_TRY(e, cudnnSetStream(h->h, stream));
  return conv_enqueue(p, &p->chosen, h->h, stream, x, w, bias, z, y, workspace, e);
}

// --- transposed convolution (cudnnConvolutionBackwardData)

static const char *bwd_algo_name(int a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
  }
  return "?";
}

typedef struct tcand {
  cudnnConvolutionBwdDataAlgo_t algo;
  cudnnMathType_t math;
  size_t ws;  // cuDNN's workspace for this algorithm
  float ms;
} tcand;

struct eng_cutconv_plan {
  eng_cutconv_desc d;  // normalised
  tdim th, tw;         // per spatial dim: cuDNN's pad and dx extent, the crop
  int ho, wo;
  bool direct;    // cuDNN writes y itself: no crop, no relayout
  bool tail;      // part of y lies past dx: y is cleared before the copy
  bool relayout;  // NHWC refused: x and w transformed to NCHW, computed NCHW
  // workspace: [x NCHW][w KCRS] (relayout), [dx] (unless direct), cuDNN's
  size_t xr_bytes, wr_bytes, dx_bytes;
  size_t src_off;  // elements: y's first element in dx
  cudnnTensorDescriptor_t xd;    // x as cuDNN reads it (the forward convolution's dy)
  cudnnTensorDescriptor_t dxd;   // what cuDNN writes (dx)
  cudnnTensorDescriptor_t yd;    // y, dense in d's layout (the bias is added there)
  cudnnTensorDescriptor_t bd;    // bias, [1, k, 1, 1]
  cudnnTensorDescriptor_t src_v, dst_v;          // the copy: y's part of dx, and where it lands in y
  cudnnTensorDescriptor_t x_in, w_in, w_out;     // relayout: x and w as given (NHWC), w as KCRS
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  tcand chosen;
  int candidates;
  char log[768];
};

static void tconv_free_desc(eng_cutconv_plan *p) {
  cudnnTensorDescriptor_t *t[] = {&p->xd, &p->dxd, &p->yd, &p->bd, &p->src_v, &p->dst_v,
                                  &p->x_in, &p->w_in, &p->w_out};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if (*t[i]) (void)cudnnDestroyTensorDescriptor(*t[i]);
    *t[i] = NULL;
  }
  if (p->wd) (void)cudnnDestroyFilterDescriptor(p->wd);
  if (p->cd) (void)cudnnDestroyConvolutionDescriptor(p->cd);
  p->wd = NULL;
  p->cd = NULL;
}

void eng_cutconv_plan_destroy(eng_cutconv_plan *p) {
  if (!p) return;
  tconv_free_desc(p);
  (void)cudaGetLastError();
  free(p);
}

size_t eng_cutconv_plan_workspace(const eng_cutconv_plan *p) {
  return p->xr_bytes + p->wr_bytes + p->dx_bytes + p->chosen.ws;
}

const eng_cutconv_desc *eng_cutconv_plan_desc(const eng_cutconv_plan *p) { return &p->d; }

void eng_cutconv_plan_info(const eng_cutconv_plan *p, eng_cutconv_info *info) {
  memset(info, 0, sizeof *info);
  info->algo = (int)p->chosen.algo;
  info->algo_name = bwd_algo_name((int)p->chosen.algo);
  info->math = (int)p->chosen.math;
  info->cropped = p->th.crop || p->tw.crop || p->th.dx != p->ho || p->tw.dx != p->wo;
  info->relayout = p->relayout;
  info->workspace_bytes = eng_cutconv_plan_workspace(p);
  info->candidates = p->candidates;
  info->time_ms = p->chosen.ms;
  info->log = p->log;
}

static void tplan_log(eng_cutconv_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tplan_log(eng_cutconv_plan *p, const char *fmt, ...) {
  size_t used = strlen(p->log);
  if (used + 1 >= sizeof p->log) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->log + used, sizeof p->log - used, fmt, ap);
  va_end(ap);
}

// Element strides of a dense [n, c, h, w] tensor in format f, as cudnnSetTensor4dDescriptorEx takes them.
static void dense_strides(cudnnTensorFormat_t f, int c, int h, int w, int st[4]) {
  if (f == CUDNN_TENSOR_NHWC) {
    st[0] = h * w * c, st[1] = 1, st[2] = w * c, st[3] = c;
  } else {
    st[0] = c * h * w, st[1] = h * w, st[2] = w, st[3] = 1;
  }
}

static size_t tconv_y_bytes(const eng_cutconv_plan *p) {
  return (size_t)p->d.n * p->d.k * p->ho * p->wo * esize(p->d.dtype);
}

// The descriptors for p->relayout (set before).
static int tconv_build(eng_cutconv_plan *p, err *e) {
  const eng_cutconv_desc *d = &p->d;
  cudnnDataType_t t = dt_cudnn(d->dtype);
  cudnnTensorFormat_t f = fmt_cudnn(d->layout);
  cudnnTensorFormat_t cf = p->relayout ? CUDNN_TENSOR_NCHW : f;  // the layout cuDNN computes in
  size_t es = esize(d->dtype);
  int kg = d->k / d->groups, dxh = (int)p->th.dx, dxw = (int)p->tw.dx;
  p->direct = !p->relayout && p->th.crop == 0 && p->tw.crop == 0 && dxh == p->ho && dxw == p->wo;
  p->tail = !p->direct && (p->th.copy < p->ho || p->tw.copy < p->wo);
  p->xr_bytes = p->relayout ? align256((size_t)d->n * d->c * d->h * d->w * es) : 0;
  p->wr_bytes = p->relayout ? align256((size_t)d->c * kg * d->r * d->s * es) : 0;
  p->dx_bytes = p->direct ? 0 : align256((size_t)d->n * d->k * dxh * dxw * es);
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->xd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->dxd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->yd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->bd));
  CUDNN_TRY(e, cudnnCreateFilterDescriptor(&p->wd));
  CUDNN_TRY(e, cudnnCreateConvolutionDescriptor(&p->cd));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->xd, cf, t, d->n, d->c, d->h, d->w));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->dxd, cf, t, d->n, d->k, dxh, dxw));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->yd, f, t, d->n, d->k, p->ho, p->wo));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->bd, f, t, 1, d->k, 1, 1));
  // the forward convolution k -> c whose backward data this is: filter [c, k/groups, r, s]
  CUDNN_TRY(e, cudnnSetFilter4dDescriptor(p->wd, t, cf, d->c, kg, d->r, d->s));
  CUDNN_TRY(e, cudnnSetConvolution2dDescriptor(p->cd, p->th.p, p->tw.p, d->stride_h, d->stride_w,
                                               d->dil_h, d->dil_w, CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT));
  CUDNN_TRY(e, cudnnSetConvolutionGroupCount(p->cd, d->groups));
  // dx and dy must be a forward convolution's input and output (tconv_dim's invariant)
  int n_, c_, h_, w_;
  CUDNN_TRY(e, cudnnGetConvolution2dForwardOutputDim(p->cd, p->dxd, p->wd, &n_, &c_, &h_, &w_));
  if (n_ != d->n || c_ != d->c || h_ != d->h || w_ != d->w)
    return err_set(e, ERR_INTERNAL,
                   "conv_transpose: the forward convolution of the %dx%d dx gives %dx%dx%dx%d, not "
                   "x's %dx%dx%dx%d",
                   dxh, dxw, n_, c_, h_, w_, d->n, d->c, d->h, d->w);
  if (!p->direct && p->th.copy > 0 && p->tw.copy > 0) {
    // y[.., i, j] = dx[.., i + crop_h, j + crop_w] for i < copy_h, j < copy_w: strided views of both
    int sx[4], sy[4];
    dense_strides(cf, d->k, dxh, dxw, sx);
    dense_strides(f, d->k, p->ho, p->wo, sy);
    int ch = (int)p->th.copy, cw = (int)p->tw.copy;
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->src_v));
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->dst_v));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptorEx(p->src_v, t, d->n, d->k, ch, cw, sx[0], sx[1], sx[2], sx[3]));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptorEx(p->dst_v, t, d->n, d->k, ch, cw, sy[0], sy[1], sy[2], sy[3]));
    p->src_off = (size_t)p->th.crop * sx[2] + (size_t)p->tw.crop * sx[3];
  }
  if (p->relayout) {
    // w as given is KRSC [c][r][s][k/groups]: a 4-D tensor [c, k/groups, r, s] in NHWC
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->x_in));
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->w_in));
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->w_out));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->x_in, f, t, d->n, d->c, d->h, d->w));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->w_in, f, t, d->c, kg, d->r, d->s));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->w_out, CUDNN_TENSOR_NCHW, t, d->c, kg, d->r, d->s));
  }
  cudnnMathType_t m0 = d->dtype == ENG_CUCONV_FP32 ? CUDNN_FMA_MATH
                       : d->dtype == ENG_CUCONV_FP16 ? CUDNN_TENSOR_OP_MATH
                                                     : CUDNN_DEFAULT_MATH;
  CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, m0));
  return 0;
}

// The run itself, with candidate c (the plan's chosen one at run time).
static int tconv_enqueue(const eng_cutconv_plan *p, const tcand *c, cudnnHandle_t h,
                         cudaStream_t stream, const void *x, const void *w, const void *bias,
                         void *y, void *ws, err *e) {
  const eng_cutconv_desc *d = &p->d;
  const float one = 1.0f, zero = 0.0f;
  char *base = ws;
  const void *xin = x, *win = w;
  if (p->relayout) {
    CUDNN_TRY(e, cudnnTransformTensor(h, &one, p->x_in, x, &zero, p->xd, base));
    CUDNN_TRY(e, cudnnTransformTensor(h, &one, p->w_in, w, &zero, p->w_out, base + p->xr_bytes));
    xin = base;
    win = base + p->xr_bytes;
  }
  char *dx = p->direct ? (char *)y : base + p->xr_bytes + p->wr_bytes;
  void *cws = c->ws ? base + p->xr_bytes + p->wr_bytes + p->dx_bytes : NULL;
  // the descriptor holds the chosen math type; only plan-time trials change it
  if (c != &p->chosen) CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, c->math));
  CUDNN_TRY(e, cudnnConvolutionBackwardData(h, &one, p->wd, win, p->xd, xin, p->cd, c->algo, cws,
                                            c->ws, &zero, p->dxd, dx));
  if (!p->direct) {
    // y is the part of dx past the smaller pad; what lies past dx is zeros
    if (p->tail) CUDA_TRY(e, cudaMemsetAsync(y, 0, tconv_y_bytes(p), stream));
    if (p->src_v)
      CUDNN_TRY(e, cudnnTransformTensor(h, &one, p->src_v, dx + p->src_off * esize(d->dtype), &zero,
                                        p->dst_v, y));
  }
  if (d->has_bias) CUDNN_TRY(e, cudnnAddTensor(h, &one, p->bd, bias, &one, p->yd, y));
  return 0;
}

// Candidates from the v7 heuristic, in its order: each usable (algorithm,
// math) pair once; non-deterministic algorithms (ALGO_0 accumulates with
// atomics) only after every deterministic one, so a plan replays the same
// bits whenever anything else runs.
static int tconv_candidates(eng_cutconv_plan *p, eng_cudnn *h, size_t cap, tcand *out, int max,
                            int *count, err *e) {
  const eng_cutconv_desc *d = &p->d;
  int n_algo = 0;
  CUDNN_TRY(e, cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h->h, &n_algo));
  if (n_algo < 1) n_algo = 1;
  cudnnConvolutionBwdDataAlgoPerf_t *perf = calloc((size_t)n_algo, sizeof *perf);
  if (!perf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv_transpose: out of host memory");
  int got = 0;
  int rc = CUDNN_OK(e, cudnnGetConvolutionBackwardDataAlgorithm_v7(h->h, p->wd, p->xd, p->cd, p->dxd,
                                                                   n_algo, &got, perf));
  size_t fixed = p->xr_bytes + p->wr_bytes + p->dx_bytes;
  int n = 0;
  for (int pass = 0; pass < 2 && !rc; pass++)
    for (int i = 0; i < got && n < max; i++) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      bool det = perf[i].determinism == CUDNN_DETERMINISTIC &&
                 perf[i].algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
      if (det != (pass == 0)) continue;
      cudnnMathType_t math = perf[i].mathType;
      if (d->dtype == ENG_CUCONV_FP32) {
        if (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
        math = CUDNN_FMA_MATH;
      }
      bool dup = false;
      for (int j = 0; j < n; j++) dup |= out[j].algo == perf[i].algo && out[j].math == math;
      if (dup) continue;
      size_t ws = 0;
      if (cudnnSetConvolutionMathType(p->cd, math) != CUDNN_STATUS_SUCCESS) continue;
      if (cudnnGetConvolutionBackwardDataWorkspaceSize(h->h, p->wd, p->xd, p->cd, p->dxd,
                                                       perf[i].algo, &ws) != CUDNN_STATUS_SUCCESS)
        continue;
      if (perf[i].memory > ws) ws = perf[i].memory;
      if (ws + fixed > cap) continue;
      out[n++] = (tcand){.algo = perf[i].algo, .math = math, .ws = ws, .ms = 0};
    }
  free(perf);
  *count = n;
  return rc;
}

// Tries the candidates for the current descriptors on borrowed buffers and
// sets p->chosen. *fatal: a broken context or no memory, where trying
// another layout is pointless.
static int tconv_choose(eng_cutconv_plan *p, eng_cudnn *h, const eng_cuconv_opts *o, size_t cap,
                        bool *fatal, err *e) {
  const eng_cutconv_desc *d = &p->d;
  *fatal = false;
  size_t es = esize(d->dtype);
  size_t xb = (size_t)d->n * d->c * d->h * d->w * es;
  size_t wb = (size_t)d->c * (d->k / d->groups) * d->r * d->s * es;
  size_t yb = tconv_y_bytes(p), bb = (size_t)d->k * es;
  size_t fixed = p->xr_bytes + p->wr_bytes + p->dx_bytes;
  if (fixed > cap)
    return err_set(e, ERR_UNIMPLEMENTED,
                   "conv_transpose: the intermediate buffers (%zu bytes) exceed the workspace cap %zu",
                   fixed, cap);
  tcand cands[32];
  int n = 0;
  TRY(tconv_candidates(p, h, cap, cands, (int)(sizeof cands / sizeof cands[0]), &n, e));
  if (n == 0)
    return err_set(e, ERR_UNIMPLEMENTED,
                   "conv_transpose: cuDNN offers no algorithm within %zu workspace bytes", cap);
  size_t ws_max = 0;
  for (int i = 0; i < n; i++)
    if (cands[i].ws > ws_max) ws_max = cands[i].ws;
  void *bx = NULL, *bw = NULL, *by = NULL, *bb_ = NULL, *bws = NULL;
  cudaStream_t s = NULL;
  cudaEvent_t ev0 = NULL, ev1 = NULL;
  bool stream_set = false;
  int rc = 0, best = -1;
  err first = {0};
#define STEP(call)                                 \
  do {                                             \
    if ((rc = CUDA_OK(e, call)) != 0) goto out; \
  } while (0)
  STEP(cudaMalloc(&bx, xb));
  STEP(cudaMalloc(&bw, wb));
  STEP(cudaMalloc(&by, yb));
  if (d->has_bias) STEP(cudaMalloc(&bb_, bb));
  if (fixed + ws_max) STEP(cudaMalloc(&bws, fixed + ws_max));
  STEP(cudaMemset(bx, 0, xb));
  STEP(cudaMemset(bw, 0, wb));
  if (bb_) STEP(cudaMemset(bb_, 0, bb));
  STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  STEP(cudaEventCreate(&ev0));
  STEP(cudaEventCreate(&ev1));
  if ((rc = CUDNN_OK(e, cudnnSetStream(h->h, s))) != 0) goto out;
  stream_set = true;
  for (int i = 0; i < n; i++) {
    err ce = {0};
    int crc = tconv_enqueue(p, &cands[i], h->h, s, bx, bw, bb_, by, bws, &ce);
    if (!crc) crc = CUDA_OK(&ce, cudaStreamSynchronize(s));
    p->candidates++;
    tplan_log(p, " %s/m%d:%s", bwd_algo_name((int)cands[i].algo), (int)cands[i].math,
              crc ? err_code_name(ce.code) : "ok");
    if (crc) {
      if (!first.code) first = ce;
      if (strstr(ce.msg, "cudaStreamSynchronize")) {  // a broken context: trying on is pointless
        *e = ce;
        rc = ce.code;
        *fatal = true;
        goto out;
      }
      continue;
    }
    if (o->search == ENG_CUCONV_SEARCH_HEURISTIC) {
      best = i;
      break;
    }
    // EXHAUSTIVE, as the forward plan times: two warm-ups, the better of two rounds of 10
    const int reps = 10;
    for (int r = 0; r < 2 && !crc; r++) crc = tconv_enqueue(p, &cands[i], h->h, s, bx, bw, bb_, by, bws, &ce);
    float best_ms = 0;
    for (int round = 0; round < 2 && !crc; round++) {
      STEP(cudaEventRecord(ev0, s));
      for (int r = 0; r < reps && !crc; r++)
        crc = tconv_enqueue(p, &cands[i], h->h, s, bx, bw, bb_, by, bws, &ce);
      STEP(cudaEventRecord(ev1, s));
      STEP(cudaEventSynchronize(ev1));
      float ms = 0;
      STEP(cudaEventElapsedTime(&ms, ev0, ev1));
      if (round == 0 || ms < best_ms) best_ms = ms;
    }
    if (crc) continue;
    cands[i].ms = best_ms / reps;
    tplan_log(p, "(%.3fms)", (double)cands[i].ms);
    if (best < 0 || cands[i].ms < cands[best].ms) best = i;
  }
#undef STEP
  if (best < 0) {
    rc = err_set(e, ERR_UNIMPLEMENTED,
                 "conv_transpose: none of %d cuDNN candidates runs this shape; first: %s", n,
                 first.msg);
    goto out;
  }
  p->chosen = cands[best];
  if (first.code) tplan_log(p, "; first refusal: %s", first.msg);
  rc = CUDNN_OK(e, cudnnSetConvolutionMathType(p->cd, p->chosen.math));
out:
  if (rc && rc != ERR_UNIMPLEMENTED) *fatal = true;
  if (stream_set) (void)cudnnSetStream(h->h, NULL);
  if (s) (void)cudaStreamSynchronize(s);
  cudaFree(bx), cudaFree(bw), cudaFree(by), cudaFree(bb_), cudaFree(bws);
  if (ev0) cudaEventDestroy(ev0);
  if (ev1) cudaEventDestroy(ev1);
  if (s) cudaStreamDestroy(s);
  (void)cudaGetLastError();
  return rc;
}

int eng_cutconv_plan_create(eng_cutconv_plan **out, eng_cudnn *h, const eng_cutconv_desc *desc,
                            const eng_cuconv_opts *opts, err *e) {
  if (!out || !h)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL %s", !out ? "out" : "handle");
  *out = NULL;
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  TRY(tconv_validate(desc, &ho, &wo, e));
  eng_cuconv_opts o = opts ? *opts : (eng_cuconv_opts){0};
  size_t cap = o.workspace_cap ? o.workspace_cap : (size_t)64 << 20;
  if ((unsigned)o.search > ENG_CUCONV_SEARCH_EXHAUSTIVE)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: unknown search %d", (int)o.search);
  eng_cutconv_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv_transpose: out of host memory");
  p->d = tconv_norm(desc);
  p->ho = ho;
  p->wo = wo;
  tconv_dims(&p->d, &p->th, &p->tw);
  bool fatal = false;
  err first = {0};
  int rc = tconv_build(p, &first);
  if (!rc) rc = tconv_choose(p, h, &o, cap, &fatal, &first);
  if (rc && !fatal && p->d.layout == ENG_CUCONV_NHWC) {
    // no NHWC candidate: compute NCHW between cudnnTransformTensor passes
    tplan_log(p, "; NHWC refused (%s): NCHW with transforms:", first.msg);
    tconv_free_desc(p);
    p->relayout = true;
    rc = tconv_build(p, e);
    if (!rc) rc = tconv_choose(p, h, &o, cap, &fatal, e);
  } else if (rc && e) {
    *e = first;
  }
  if (rc) {
    eng_cutconv_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int eng_cutconv_run(const eng_cutconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                    const void *w, const void *bias, void *y, void *workspace,
                    size_t workspace_bytes, err *e) {
  if (!p || !h || !x || !w || !y)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL %s",
                   !p ? "plan" : !h ? "handle" : !x ? "x" : !w ? "w" : "y");
  if (p->d.has_bias != (bias != NULL))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: the plan %s a bias",
                   p->d.has_bias ? "takes" : "takes no");
  size_t need = eng_cutconv_plan_workspace(p);
  if (workspace_bytes < need || (need && !workspace))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: the plan needs %zu workspace bytes (got %zu)", need,
                   workspace ? workspace_bytes : 0);
  CUDNN_TRY(e, cudnnSetStream(h->h, stream));
  return tconv_enqueue(p, &p->chosen, h->h, stream, x, w, bias, y, workspace, e);
}

// --- pooling

struct eng_cupool_plan {
  eng_cupool_desc d;  // normalised
  int ho, wo;
  bool explicit_pad, rescaled;
  int hp, wp;          // padded input extents (explicit_pad)
  size_t pad_bytes;    // at workspace offset 0
  size_t tmp_bytes;    // pooled result before the rescale, after the padded input
  cudnnTensorDescriptor_t xd, yd, md;
  cudnnPoolingDescriptor_t pd;
  cudnnOpTensorDescriptor_t od;
  void *map;  // [ho, wo] of window area / divisor, in the storage type
  uint8_t ninf[4];  // what cudnnSetTensor takes for -inf in this tensor's type (half_ninf)
};

void eng_cupool_plan_destroy(eng_cupool_plan *p) {
  if (!p) return;
  if (p->xd) (void)cudnnDestroyTensorDescriptor(p->xd);
  if (p->yd) (void)cudnnDestroyTensorDescriptor(p->yd);
  if (p->md) (void)cudnnDestroyTensorDescriptor(p->md);
  if (p->pd) (void)cudnnDestroyPoolingDescriptor(p->pd);
  if (p->od) (void)cudnnDestroyOpTensorDescriptor(p->od);
  if (p->map) (void)cudaFree(p->map);
  (void)cudaGetLastError();
  free(p);
}

size_t eng_cupool_plan_workspace(const eng_cupool_plan *p) { return p->pad_bytes + p->tmp_bytes; }

void eng_cupool_plan_info(const eng_cupool_plan *p, eng_cupool_info *info) {
  memset(info, 0, sizeof *info);
  info->explicit_pad = p->explicit_pad;
  info->rescaled = p->rescaled;
  info->workspace_bytes = eng_cupool_plan_workspace(p);
}

// ONNX's divisor along one dimension for output index i: the window clipped
// to the padded extent (count_include_pad) or to the input.
static int pool_count_1d(int i, int s, int k, int pad0, int pad1, int in, bool include_pad) {
  int lo = i * s - pad0, hi = lo + k;
  int a = include_pad ? -pad0 : 0, b = include_pad ? in + pad1 : in;
  if (lo < a) lo = a;
  if (hi > b) hi = b;
  return hi > lo ? hi - lo : 0;
}

// The value to hand cudnnSetTensor for -inf in a HALF tensor. Its
// documentation says the value has the tensor's type, but cuDNN 9.19 reads
// a float there (the scaling-parameter rule) and turned the half 0xfc00
// into +0, so max pools over an explicit pad lost to their padding. Asked
// once per plan rather than assumed: a float first, then a half.
static int half_ninf(cudnnHandle_t h, uint8_t out[4], err *e) {
  const float f = -INFINITY;
  const uint16_t hv = 0xfc00;
  const void *tries[2] = {&f, &hv};
  size_t sizes[2] = {sizeof f, sizeof hv};
  cudnnTensorDescriptor_t td = NULL;
  void *dv = NULL;
  int rc = 0, found = -1;
  if (cudnnCreateTensorDescriptor(&td) != CUDNN_STATUS_SUCCESS ||
      cudnnSetTensor4dDescriptor(td, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, 1, 1, 1, 1) !=
          CUDNN_STATUS_SUCCESS)
    rc = err_set(e, ERR_INTERNAL, "pool: a HALF tensor descriptor failed");
  if (!rc) rc = CUDA_OK(e, cudaMalloc(&dv, 256));
  // the default stream, waited for below (the handle's own is set again by every run)
  if (!rc && cudnnSetStream(h, NULL) != CUDNN_STATUS_SUCCESS)
    rc = err_set(e, ERR_INTERNAL, "pool: cudnnSetStream failed");
  for (int i = 0; i < 2 && !rc && found < 0; i++) {
    uint16_t got = 0;
    if (cudnnSetTensor(h, td, dv, tries[i]) != CUDNN_STATUS_SUCCESS) continue;
    rc = CUDA_OK(e, cudaMemcpy(&got, dv, sizeof got, cudaMemcpyDeviceToHost));
    if (!rc && got == hv) found = i;
  }
  if (dv) (void)cudaFree(dv);
  if (td) (void)cudnnDestroyTensorDescriptor(td);
  if (rc) return rc;
  if (found < 0) return err_set(e, ERR_UNIMPLEMENTED, "pool: cudnnSetTensor cannot write a half -inf");
  memset(out, 0, 4);
  memcpy(out, tries[found], sizes[found]);
  return 0;
}

static int pool_build(eng_cupool_plan *p, cudnnHandle_t h, err *e) {
  const eng_cupool_desc *d = &p->d;
  cudnnDataType_t t = dt_cudnn(d->dtype);
  cudnnTensorFormat_t f = fmt_cudnn(d->layout);
  size_t es = esize(d->dtype);
  bool sym = d->pad_top == d->pad_bottom && d->pad_left == d->pad_right && d->pad_top < d->kh &&
             d->pad_left < d->kw;
  // cuDNN's output size: floor, symmetric pads
  int ch = (d->h + 2 * d->pad_top - d->kh) / d->stride_h + 1;
  int cw = (d->w + 2 * d->pad_left - d->kw) / d->stride_w + 1;
  p->explicit_pad = !(sym && ch == p->ho && cw == p->wo);
  cudnnPoolingMode_t mode = d->mode == ENG_CUPOOL_MAX ? CUDNN_POOLING_MAX
                            : d->mode == ENG_CUPOOL_AVG_INCLUDE_PAD
                                ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  int ph = d->pad_top, pw = d->pad_left;
  p->hp = d->h;
  p->wp = d->w;
  if (p->explicit_pad) {
    // exactly the extent the output's windows cover; cuDNN pads nothing
    p->hp = (p->ho - 1) * d->stride_h + d->kh;
    p->wp = (p->wo - 1) * d->stride_w + d->kw;
    ph = pw = 0;
    p->pad_bytes = align256((size_t)d->n * d->c * p->hp * p->wp * es);
    if (d->mode == ENG_CUPOOL_MAX) {
      if (d->dtype == ENG_CUCONV_FP16) {
        TRY(half_ninf(h, p->ninf, e));
      } else {
        const float ninf = -INFINITY;
        memcpy(p->ninf, &ninf, sizeof ninf);
      }
    } else {
      // pool the zero-padded buffer as a plain window average, then rescale
      mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
      bool inc = d->mode == ENG_CUPOOL_AVG_INCLUDE_PAD;
      float area = (float)d->kh * (float)d->kw;
      size_t m = (size_t)p->ho * p->wo;
      float *map = malloc(m * sizeof *map);
      if (!map) return err_set(e, ERR_RESOURCE_EXHAUSTED, "pool: out of host memory");
      for (int i = 0; i < p->ho; i++)
        for (int j = 0; j < p->wo; j++) {
          int cnt = pool_count_1d(i, d->stride_h, d->kh, d->pad_top, d->pad_bottom, d->h, inc) *
                    pool_count_1d(j, d->stride_w, d->kw, d->pad_left, d->pad_right, d->w, inc);
          map[(size_t)i * p->wo + j] = cnt ? area / (float)cnt : 0.0f;
          if (cnt != d->kh * d->kw) p->rescaled = true;
        }
      if (p->rescaled) {
        void *host = map;
        uint16_t *h16 = NULL;
        if (d->dtype == ENG_CUCONV_FP16) {
          h16 = malloc(m * sizeof *h16);
          if (!h16) {
            free(map);
            return err_set(e, ERR_RESOURCE_EXHAUSTED, "pool: out of host memory");
          }
          k_f32_to_f16(h16, map, m);
          host = h16;
        }
        int rc = CUDA_OK(e, cudaMalloc(&p->map, m * es));
        if (!rc) rc = CUDA_OK(e, cudaMemcpy(p->map, host, m * es, cudaMemcpyHostToDevice));
        free(h16);
        if (rc) {
          free(map);
          return rc;
        }
        p->tmp_bytes = align256((size_t)d->n * d->c * p->ho * p->wo * es);
      }
      free(map);
    }
  }
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->xd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->yd));
  CUDNN_TRY(e, cudnnCreatePoolingDescriptor(&p->pd));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->xd, f, t, d->n, d->c, p->hp, p->wp));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->yd, f, t, d->n, d->c, p->ho, p->wo));
  CUDNN_TRY(e, cudnnSetPooling2dDescriptor(p->pd, mode, CUDNN_PROPAGATE_NAN, d->kh, d->kw, ph, pw,
                                           d->stride_h, d->stride_w));
  int n_, c_, h_, w_;
  CUDNN_TRY(e, cudnnGetPooling2dForwardOutputDim(p->pd, p->xd, &n_, &c_, &h_, &w_));
  if (h_ != p->ho || w_ != p->wo)
    return err_set(e, ERR_INTERNAL, "pool: cuDNN's output %dx%d is not ours %dx%d", h_, w_, p->ho,
                   p->wo);
  if (p->rescaled) {
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->md));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->md, CUDNN_TENSOR_NCHW, t, 1, 1, p->ho, p->wo));
    CUDNN_TRY(e, cudnnCreateOpTensorDescriptor(&p->od));
    CUDNN_TRY(e, cudnnSetOpTensorDescriptor(p->od, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
                                            CUDNN_PROPAGATE_NAN));
  }
  return 0;
}

int eng_cupool_plan_create(eng_cupool_plan **out, eng_cudnn *h, const eng_cupool_desc *desc, err *e) {
  if (!out || !h) return err_set(e, ERR_INVALID_ARGUMENT, "pool: NULL %s", !out ? "out" : "handle");
  *out = NULL;
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  TRY(pool_validate(desc, &ho, &wo, e));
  eng_cupool_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "pool: out of host memory");
  p->d = pool_norm(desc);
  p->ho = ho;
  p->wo = wo;
  int rc = pool_build(p, h->h, e);
  if (rc) {
    eng_cupool_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int eng_cupool_run(const eng_cupool_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   void *y, void *workspace, size_t workspace_bytes, err *e) {
  if (!p || !h || !x || !y)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: NULL %s", !p ? "plan" : !h ? "handle" : !x ? "x" : "y");
  size_t need = eng_cupool_plan_workspace(p);
  if (workspace_bytes < need || (need && !workspace))
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: the plan needs %zu workspace bytes (got %zu)",
                   need, workspace ? workspace_bytes : 0);
  const eng_cupool_desc *d = &p->d;
  size_t es = esize(d->dtype);
  CUDNN_TRY(e, cudnnSetStream(h->h, stream));
  const void *xin = x;
  if (p->explicit_pad) {
    if (d->mode == ENG_CUPOOL_MAX) {
      // -inf, so padding never wins a max (encoded as half_ninf found at plan time)
      CUDNN_TRY(e, cudnnSetTensor(h->h, p->xd, workspace, p->ninf));
    } else {
      CUDA_TRY(e, cudaMemsetAsync(workspace, 0, p->pad_bytes, stream));
    }
    // the input rows and columns that some window reads
    int rows = d->h < p->hp - d->pad_top ? d->h : p->hp - d->pad_top;
    int cols = d->w < p->wp - d->pad_left ? d->w : p->wp - d->pad_left;
    if (d->layout == ENG_CUCONV_NCHW)
      TRY(copy_into_padded(workspace, (size_t)p->wp * es, (size_t)p->hp, (size_t)d->pad_left * es,
                           (size_t)d->pad_top, x, (size_t)d->w * es, (size_t)d->h,
                           (size_t)d->n * d->c, (size_t)cols * es, (size_t)rows, stream, e));
    else
      TRY(copy_into_padded(workspace, (size_t)p->wp * d->c * es, (size_t)p->hp,
                           (size_t)d->pad_left * d->c * es, (size_t)d->pad_top, x,
                           (size_t)d->w * d->c * es, (size_t)d->h, (size_t)d->n,
                           (size_t)cols * d->c * es, (size_t)rows, stream, e));
    xin = workspace;
  }
  const float one = 1.0f, zero = 0.0f;
  void *dst = p->rescaled ? (char *)workspace + p->pad_bytes : y;
  CUDNN_TRY(e, cudnnPoolingForward(h->h, p->pd, &one, p->xd, xin, &zero, p->yd, dst));
  if (p->rescaled)
    CUDNN_TRY(e, cudnnOpTensor(h->h, p->od, &one, p->yd, dst, &one, p->md, p->map, &zero, p->yd, y));
  return 0;
}

#else  // no cuDNN in this build: the GPU entry points say so

struct eng_cudnn {
  int unused;
};
struct eng_cuconv_plan {
  eng_cuconv_desc d;
};
struct eng_cutconv_plan {
  eng_cutconv_desc d;
};
struct eng_cupool_plan {
  int unused;
};

#define NO_CUDNN(e) err_set((e), ERR_UNIMPLEMENTED, "built without cuDNN (INFERD_CUDNN, CUDNN_ROOT)")

bool eng_cuconv_available(void) { return false; }
size_t eng_cudnn_version(void) { return 0; }
int eng_cudnn_create(eng_cudnn **out, err *e) {
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cudnn_destroy(eng_cudnn *h) { (void)h; }
int eng_cuconv_plan_create(eng_cuconv_plan **out, eng_cudnn *h, const eng_cuconv_desc *d,
                           const eng_cuconv_opts *opts, err *e) {
  (void)h, (void)d, (void)opts;
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cuconv_plan_destroy(eng_cuconv_plan *p) { (void)p; }
size_t eng_cuconv_plan_workspace(const eng_cuconv_plan *p) {
  (void)p;
  return 0;
}
void eng_cuconv_plan_info(const eng_cuconv_plan *p, eng_cuconv_info *info) {
  (void)p;
  memset(info, 0, sizeof *info);
  info->log = "";
}
const eng_cuconv_desc *eng_cuconv_plan_desc(const eng_cuconv_plan *p) { return &p->d; }
int eng_cuconv_run(const eng_cuconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   const void *w, const void *bias, const void *z, void *y, void *workspace,
                   size_t workspace_bytes, err *e) {
  (void)p, (void)h, (void)stream, (void)x, (void)w, (void)bias, (void)z, (void)y, (void)workspace,
      (void)workspace_bytes;
  return NO_CUDNN(e);
}
int eng_cutconv_plan_create(eng_cutconv_plan **out, eng_cudnn *h, const eng_cutconv_desc *d,
                            const eng_cuconv_opts *opts, err *e) {
  (void)h, (void)d, (void)opts;
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cutconv_plan_destroy(eng_cutconv_plan *p) { (void)p; }
size_t eng_cutconv_plan_workspace(const eng_cutconv_plan *p) {
  (void)p;
  return 0;
}
void eng_cutconv_plan_info(const eng_cutconv_plan *p, eng_cutconv_info *info) {
  (void)p;
  memset(info, 0, sizeof *info);
  info->log = "";
}
const eng_cutconv_desc *eng_cutconv_plan_desc(const eng_cutconv_plan *p) { return &p->d; }
int eng_cutconv_run(const eng_cutconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                    const void *w, const void *bias, void *y, void *workspace,
                    size_t workspace_bytes, err *e) {
  (void)p, (void)h, (void)stream, (void)x, (void)w, (void)bias, (void)y, (void)workspace,
      (void)workspace_bytes;
  return NO_CUDNN(e);
}
int eng_cupool_plan_create(eng_cupool_plan **out, eng_cudnn *h, const eng_cupool_desc *d, err *e) {
  (void)h, (void)d;
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cupool_plan_destroy(eng_cupool_plan *p) { (void)p; }
size_t eng_cupool_plan_workspace(const eng_cupool_plan *p) {
  (void)p;
  return 0;
}
void eng_cupool_plan_info(const eng_cupool_plan *p, eng_cupool_info *info) {
  (void)p;
  memset(info, 0, sizeof *info);
}
int eng_cupool_run(const eng_cupool_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   void *y, void *workspace, size_t workspace_bytes, err *e) {
  (void)p, (void)h, (void)stream, (void)x, (void)y, (void)workspace, (void)workspace_bytes;
  return NO_CUDNN(e);
}

#endif
