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

// --- GridSample (onnx's reference, dimension by dimension)

// Reflect x by the nearer border until it lies in [lo, hi].
static double gs_reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = (int64_t)(dx / rng);
    double r = dx - (double)n * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = (int64_t)(dx / rng);
    double r = dx - (double)n * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

static void gs_cubic(double x, double *c) {
  const double a = -0.75;
  x = fabs(x);
  c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

// The pixel at integer index i (nd dims) of one channel, by the padding mode.
static double gs_pixel(const float *x, int nd, const int64_t *dims, const int64_t *i, int pad, const double *lo,
                       const double *hi) {
  int64_t off = 0;
  for (int k = 0; k < nd; k++) {
    int64_t v = i[k];
    if (pad == K_GS_ZEROS) {
      if (v < 0 || v >= dims[k]) return 0.0;
    } else if (pad == K_GS_BORDER) {
      v = v < 0 ? 0 : v >= dims[k] ? dims[k] - 1 : v;
    } else {
      v = (int64_t)gs_reflect((double)v, lo[k], hi[k]);
    }
    off = off * dims[k] + v;
  }
  return x[off];
}

void k_grid_sample(float *y, const float *x, const float *grid, size_t n, size_t c, int nd, const int64_t *xdims,
                   const int64_t *ydims, int mode, int pad, int align) {
  size_t xs = 1, ys = 1;
  for (int k = 0; k < nd; k++) xs *= (size_t)xdims[k], ys *= (size_t)ydims[k];
  double lo[3], hi[3];
  for (int k = 0; k < nd; k++) {
    lo[k] = align ? 0.0 : -0.5;
    hi[k] = align ? (double)xdims[k] - 1.0 : (double)xdims[k] - 0.5;
  }
  int taps = mode == K_GS_CUBIC ? 4 : mode == K_GS_LINEAR ? 2 : 1;
  for (size_t b = 0; b < n; b++)
    for (size_t o = 0; o < ys; o++) {
      const float *g = grid + (b * ys + o) * (size_t)nd;
      double pos[3];
      for (int k = 0; k < nd; k++) {
        double v = g[nd - 1 - k], len = (double)xdims[k];  // the grid lists x (the last dim) first
        float f = (float)(align ? (v + 1) / 2.0 * (len - 1) : ((v + 1) * len - 1) / 2.0);  // FP32, as the reference
        double p = f;
        if (!isfinite(p)) p = -3.0;  // a NaN or infinite coordinate samples outside (an integer cast of it is undefined)
        if (mode == K_GS_NEAREST) p = nearbyint(p);
        if (p < lo[k] || p > hi[k]) {
          if (pad == K_GS_BORDER) p = p < 0 ? 0 : p > len - 1 ? len - 1 : p;
          else if (pad == K_GS_REFLECTION) p = gs_reflect(p, lo[k], hi[k]);
        }
        pos[k] = p;
      }
      int64_t base[3], idx[3];
      double w[3][4];
      for (int k = 0; k < nd; k++) {
        if (mode == K_GS_NEAREST) {
          base[k] = (int64_t)pos[k];
          w[k][0] = 1.0;
        } else {
          double f = floor(pos[k]), t = pos[k] - f;
          base[k] = (int64_t)f - (mode == K_GS_CUBIC ? 1 : 0);
          if (mode == K_GS_CUBIC) gs_cubic(t, w[k]);
          else w[k][0] = 1.0 - t, w[k][1] = t;
        }
      }
      int total = 1;
      for (int k = 0; k < nd; k++) total *= taps;
      for (size_t ch = 0; ch < c; ch++) {
        const float *xc = x + (b * c + ch) * xs;
        double acc = 0.0;
        for (int t = 0; t < total; t++) {
          double wt = 1.0;
          for (int k = nd - 1, r = t; k >= 0; k--, r /= taps) {
            idx[k] = base[k] + r % taps;
            wt *= w[k][r % taps];
          }
          if (wt != 0.0) acc += wt * gs_pixel(xc, nd, xdims, idx, pad, lo, hi);
        }
        y[(b * c + ch) * ys + o] = (float)acc;
      }
    }
}

// --- cubic Resize over the last two dims, as onnx's reference: the four
// source taps around the coordinate (the one on the left preferred when it
// falls on a pixel), edge-padded, Keys' coefficients with a; exclude_outside
// zeroes the taps outside the input and renormalises.

static void cubic_axis(int64_t o, float scale, int64_t in_len, int64_t out_len, k_coord c, float a, int exclude,
                       int64_t *idx, double *w) {
  double x = k_resize_coord(o, scale, in_len, out_len, c), f = floor(x);
  double ratio = x == f ? 1.0 : x - f;
  int64_t base = (int64_t)(x == f ? f - 1 : f) - 1;
  double r1 = ratio + 1, r2 = 1 - ratio, r3 = 2 - ratio;
  w[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
  w[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
  w[2] = ((a + 2) * r2 - (a + 3)) * r2 * r2 + 1;
  w[3] = ((a * r3 - 5 * a) * r3 + 8 * a) * r3 - 4 * a;
  double sum = 0.0;
  for (int k = 0; k < 4; k++) {
    int64_t i = base + k;
    if (exclude && (i < 0 || i >= in_len)) w[k] = 0.0;
    sum += w[k];
    idx[k] = i < 0 ? 0 : i >= in_len ? in_len - 1 : i;
  }
  if (exclude && sum != 0.0)
    for (int k = 0; k < 4; k++) w[k] /= sum;
}

void k_resize_cubic(float *y, const float *x, size_t nc, int64_t ih, int64_t iw, int64_t oh, int64_t ow, float sh,
                    float sw, k_coord c, float a, int exclude) {
  if (ih <= 0 || iw <= 0) return;
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t ty[4];
    double wy[4];
    cubic_axis(oy, sh, ih, oh, c, a, exclude, ty, wy);
    for (int64_t ox = 0; ox < ow; ox++) {
      int64_t tx[4];
      double wx[4];
      cubic_axis(ox, sw, iw, ow, c, a, exclude, tx, wx);
      for (size_t k = 0; k < nc; k++) {
        const float *p = x + k * (size_t)(ih * iw);
        double acc = 0.0;
        for (int i = 0; i < 4; i++) {
          double row = 0.0;  // the last dim first, then the rows, as the reference nests them
          for (int j = 0; j < 4; j++) row += wx[j] * p[ty[i] * iw + tx[j]];
          acc += wy[i] * row;
        }
        y[k * (size_t)(oh * ow) + (size_t)(oy * ow + ox)] = (float)acc;
      }
    }
  }
}
