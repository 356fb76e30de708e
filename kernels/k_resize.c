// kernels/k_resize.c: Resize/Upsample with ONNX Runtime's coordinate
// mapping: nearest over any dims (any element size) and bilinear over the
// last two dims. Coordinates are FP32 like ONNX Runtime's, so a mode that
// lands exactly on .5 rounds the same way.
#include "kernels/k_ref.h"

#include <math.h>
#include <string.h>

float k_resize_coord(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c) {
  float x = (float)o;
  switch (c) {
    case K_COORD_HALF_PIXEL: return (x + 0.5f) / scale - 0.5f;
    case K_COORD_PYTORCH_HALF_PIXEL: return out_len > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case K_COORD_ALIGN_CORNERS:
      return out_len == 1 ? 0.0f : x * (float)(in_len - 1) / (float)(out_len - 1);
    case K_COORD_TF_HALF_PIXEL: return (x + 0.5f) / scale;
    case K_COORD_ASYMMETRIC: break;
  }
  return x / scale;
}

static int64_t nearest(float x, float scale, k_nearest m, int64_t len) {
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

void k_resize_nearest(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                      const int64_t *ydims, const float *scales, k_coord c, k_nearest m) {
  int64_t n = 1, idx[K_MAX_DIMS] = {0}, src[K_MAX_DIMS], xst[K_MAX_DIMS], acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    n *= ydims[d];
    xst[d] = acc;
    acc *= xdims[d];
  }
  if (n <= 0 || acc <= 0) return;
  for (int d = 0; d < ndim; d++)
    src[d] = nearest(k_resize_coord(0, scales[d], xdims[d], ydims[d], c), scales[d], m, xdims[d]);
  uint8_t *py = y;
  const uint8_t *px = x;
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off += src[d] * xst[d];
    memcpy(py + (size_t)i * esz, px + (size_t)off * esz, esz);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < ydims[d]) {
        src[d] = nearest(k_resize_coord(idx[d], scales[d], xdims[d], ydims[d], c), scales[d], m,
                         xdims[d]);
        break;
      }
      idx[d] = 0;
      src[d] = nearest(k_resize_coord(0, scales[d], xdims[d], ydims[d], c), scales[d], m,
                       xdims[d]);
    }
  }
}

// One axis of the bilinear weights: the two source indices and their weights.
static void lin(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c, int64_t *i0,
                int64_t *i1, float *w0, float *w1) {
  float x = k_resize_coord(o, scale, in_len, out_len, c);
  if (x < 0.0f) x = 0.0f;
  if (x > (float)(in_len - 1)) x = (float)(in_len - 1);
  *i0 = (int64_t)x;
  *i1 = *i0 + 1 < in_len ? *i0 + 1 : in_len - 1;
  *w1 = x - (float)*i0;
  *w0 = 1.0f - *w1;
}

void k_resize_linear(float *y, const float *x, size_t nc, int64_t ih, int64_t iw, int64_t oh,
                     int64_t ow, float sh, float sw, k_coord c) {
  if (ih <= 0 || iw <= 0) return;
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t y0, y1;
    float wy0, wy1;
    lin(oy, sh, ih, oh, c, &y0, &y1, &wy0, &wy1);
    for (int64_t ox = 0; ox < ow; ox++) {
      int64_t x0, x1;
      float wx0, wx1;
      lin(ox, sw, iw, ow, c, &x0, &x1, &wx0, &wx1);
      for (size_t k = 0; k < nc; k++) {
        const float *p = x + k * (size_t)(ih * iw);
        y[k * (size_t)(oh * ow) + (size_t)(oy * ow + ox)] =
            wy0 * (wx0 * p[y0 * iw + x0] + wx1 * p[y0 * iw + x1]) +
            wy1 * (wx0 * p[y1 * iw + x0] + wx1 * p[y1 * iw + x1]);
      }
    }
  }
}
