// kernels/resize/k_resize_math.h: the index math of Resize/Upsample and Pad, one
// definition for the C references (kernels/resize/k_resize.c, kernels/index/k_index.c) and their CUDA
// twins (kernels/resize/k_resize.cu): how an output coordinate maps to an input one, how
// nearest rounds it, the two taps and weights of a linear axis, the
// bilinear blend, and where a padded index reads. Written once so the GPU
// picks the same source element as the CPU, bit for bit: FP32 like ONNX
// Runtime's coordinates, and the blend with explicit round-to-nearest
// operations on the device so nvcc's FMA contraction cannot round
// differently from the C build (ISO C11: no contraction). Not a public
// header: the kernels include it.
#ifndef INFERD_KERNELS_K_RESIZE_MATH_H
#define INFERD_KERNELS_K_RESIZE_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/k_ref.h"
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#define K_RS_FN static inline __host__ __device__
#else
#define K_RS_FN static inline
#endif

// a * b and a + b, each rounded once, on either side.
K_RS_FN float k_rs_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

K_RS_FN float k_rs_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// The input coordinate of output coordinate o along a dim of in_len -> out_len.
K_RS_FN float k_rs_coord(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c) {
  float x = (float)o;
  switch (c) {
    case K_COORD_HALF_PIXEL: return (x + 0.5f) / scale - 0.5f;
    case K_COORD_PYTORCH_HALF_PIXEL: return out_len > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case K_COORD_ALIGN_CORNERS: {
      // ONNX's length_resized is scale * in_len, unrounded: a downsample by
      // 0.6 of 4 spans 2.4 output pixels, not the 2 it writes (the rounded
      // length stretched the taps: test_resize_downsample_scales_linear_align_corners)
      // Where it is the written length but for the rounding of a scale
      // taken from sizes (out / in), the written one, as before.
      float len = k_rs_mul(scale, (float)in_len);
      if (fabsf(len - (float)out_len) < 1e-3f) len = (float)out_len;
      return len == 1.0f ? 0.0f : x * (float)(in_len - 1) / (len - 1.0f);
    }
    case K_COORD_TF_HALF_PIXEL: return (x + 0.5f) / scale;
    case K_COORD_HALF_PIXEL_SYMMETRIC: {
      // half_pixel about the centre: the rounding of out_len from scale * in_len
      // shifts both ends alike (ONNX's adjustment, center and offset)
      float len = k_rs_mul(scale, (float)in_len);
      float adjust = len > 0.0f ? (float)out_len / len : 1.0f;
      float offset = k_rs_mul((float)in_len / 2.0f, 1.0f - adjust);
      return k_rs_add(offset, (x + 0.5f) / scale - 0.5f);
    }
    case K_COORD_ASYMMETRIC: break;
  }
  return x / scale;
}

// Nearest source index of coordinate x in a dim of len (>= 1), clamped.
K_RS_FN int64_t k_rs_nearest(float x, float scale, k_nearest m, int64_t len) {
  int64_t i;
  switch (m) {
    case K_NEAREST_ROUND_PREFER_FLOOR:
      i = x == (float)(int64_t)x + 0.5f ? (int64_t)floorf(x) : (int64_t)roundf(x);
      break;
    case K_NEAREST_ROUND_PREFER_CEIL: i = (int64_t)roundf(x); break;
    case K_NEAREST_FLOOR: i = (int64_t)floorf(x); break;
    case K_NEAREST_CEIL: i = (int64_t)ceilf(x); break;
    default: i = scale < 1.0f ? (int64_t)ceilf(x) : (int64_t)x; break;
  }
  return i < 0 ? 0 : i >= len ? len - 1 : i;
}

// Source index of output index o of a nearest resize along one dim.
K_RS_FN int64_t k_rs_nearest_src(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c,
                                 k_nearest m) {
  return k_rs_nearest(k_rs_coord(o, scale, in_len, out_len, c), scale, m, in_len);
}

// One linear axis: the two source indices of output o and their weights.
K_RS_FN void k_rs_linear_axis(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c,
                              int64_t *i0, int64_t *i1, float *w0, float *w1) {
  float x = k_rs_coord(o, scale, in_len, out_len, c);
  if (x < 0.0f) x = 0.0f;
  if (x > (float)(in_len - 1)) x = (float)(in_len - 1);
  *i0 = (int64_t)x;
  *i1 = *i0 + 1 < in_len ? *i0 + 1 : in_len - 1;
  *w1 = x - (float)*i0;
  *w0 = 1.0f - *w1;
}

// wy0 * (wx0 * p00 + wx1 * p01) + wy1 * (wx0 * p10 + wx1 * p11), left to right.
K_RS_FN float k_rs_blend(float wy0, float wy1, float wx0, float wx1, float p00, float p01, float p10,
                         float p11) {
  float top = k_rs_add(k_rs_mul(wx0, p00), k_rs_mul(wx1, p01));
  float bot = k_rs_add(k_rs_mul(wx0, p10), k_rs_mul(wx1, p11));
  return k_rs_add(k_rs_mul(wy0, top), k_rs_mul(wy1, bot));
}

// Pad: the source index of padded index i (already shifted by the begin
// pad) in a dim of len, or -1 for the constant.
K_RS_FN int64_t k_pad_src(int64_t i, int64_t len, k_padmode mode) {
  if (i >= 0 && i < len) return i;
  switch (mode) {
    case K_PAD_EDGE: return i < 0 ? 0 : len - 1;
    case K_PAD_WRAP: {  // the data as a torus (numpy's wrap); len >= 1 (checked by the op)
      int64_t m = i % len;
      return m < 0 ? m + len : m;
    }
    case K_PAD_REFLECT: {
      if (len == 1) return 0;
      int64_t period = 2 * (len - 1);  // reflect without repeating the edge
      int64_t m = i % period;
      if (m < 0) m += period;
      return m < len ? m : period - m;
    }
    default: return -1;
  }
}

#endif
