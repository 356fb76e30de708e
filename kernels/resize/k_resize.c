// kernels/resize/k_resize.c: Resize/Upsample with ONNX Runtime's coordinate
// mapping: nearest over any dims (any element size) and bilinear over the
// last two dims. Coordinates are FP32 like ONNX Runtime's, so a mode that
// lands exactly on .5 rounds the same way; the index math lives in
// kernels/resize/k_resize_math.h, shared with the CUDA twins (kernels/resize/k_resize.cu).
#include "kernels/k_ref.h"
#include "kernels/resize/k_resize_math.h"

#include <math.h>
#include <string.h>

float k_resize_coord(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c) {
  return k_rs_coord(o, scale, in_len, out_len, c);
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
    src[d] = k_rs_nearest_src(0, scales[d], xdims[d], ydims[d], c, m);
  uint8_t *py = y;
  const uint8_t *px = x;
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off += src[d] * xst[d];
    memcpy(py + (size_t)i * esz, px + (size_t)off * esz, esz);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < ydims[d]) {
        src[d] = k_rs_nearest_src(idx[d], scales[d], xdims[d], ydims[d], c, m);
        break;
      }
      idx[d] = 0;
      src[d] = k_rs_nearest_src(0, scales[d], xdims[d], ydims[d], c, m);
    }
  }
}

void k_resize_linear(float *y, const float *x, size_t nc, int64_t ih, int64_t iw, int64_t oh,
                     int64_t ow, float sh, float sw, k_coord c) {
  if (ih <= 0 || iw <= 0) return;
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t y0, y1;
    float wy0, wy1;
    k_rs_linear_axis(oy, sh, ih, oh, c, &y0, &y1, &wy0, &wy1);
    for (int64_t ox = 0; ox < ow; ox++) {
      int64_t x0, x1;
      float wx0, wx1;
      k_rs_linear_axis(ox, sw, iw, ow, c, &x0, &x1, &wx0, &wx1);
      for (size_t k = 0; k < nc; k++) {
        const float *p = x + k * (size_t)(ih * iw);
        y[k * (size_t)(oh * ow) + (size_t)(oy * ow + ox)] =
            k_rs_blend(wy0, wy1, wx0, wx1, p[y0 * iw + x0], p[y0 * iw + x1], p[y1 * iw + x0],
                       p[y1 * iw + x1]);
      }
    }
  }
}
