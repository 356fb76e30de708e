// tests/gpu/conv_ref.h: plain C references for the test_cuda_conv binary
// (test_cuda_conv.c, test_cuda_deconv.c, test_cuda_pool.c), in double, on
// NCHW tensors with ONNX's OIHW weights: a grouped, dilated, strided
// convolution with asymmetric pads and the epilogue act(conv + bias + z),
// ONNX's ConvTranspose (W [C_in, C_out/group, kH, kW], output_padding) with
// its bias, and ONNX pooling (max, average with count_include_pad both ways,
// ceil_mode). Kept beside the test, not in kernels/, whose CPU convolution
// is another branch's. static inline: each file of the binary uses only
// some of them, and an unused static function would be a warning.
#ifndef INFERD_TESTS_GPU_CONV_REF_H
#define INFERD_TESTS_GPU_CONV_REF_H

#include <math.h>
#include <stddef.h>

#include "engine/cuda/cuda_conv.h"

static inline double ref_clamp01(double t) { return t < 0 ? 0 : t > 1 ? 1 : t; }

static inline double ref_act(const eng_cuconv_desc *d, double v) {
  double clip_max = d->clip_max;
  switch (d->act) {
    case ENG_CUCONV_ACT_NONE: return v;
    case ENG_CUCONV_ACT_RELU: return v > 0 ? v : 0;
    case ENG_CUCONV_ACT_CLIP: return v < 0 ? 0 : v > clip_max ? clip_max : v;
    case ENG_CUCONV_ACT_HARD_SIGMOID: return ref_clamp01((double)d->act_alpha * v + d->act_beta);
    case ENG_CUCONV_ACT_HARD_SWISH: return v * ref_clamp01(v / 6.0 + 0.5);
    case ENG_CUCONV_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case ENG_CUCONV_ACT_TANH: return tanh(v);
    case ENG_CUCONV_ACT_SWISH: return v / (1.0 + exp(-v));
  }
  return v;
}

// y[n,k,ho,wo] = act(sum x*w + bias[k] + z); mag = sum |x*w| + |bias| + |z|,
// the scale an element's rounding error is measured against. bias, z may
// be NULL.
static inline void ref_conv(const eng_cuconv_desc *d, int ho, int wo, const float *x,
                            const float *w, const float *bias, const float *z, double *y, double *mag) {
  int g = d->groups ? d->groups : 1, sh = d->stride_h ? d->stride_h : 1,
      sw = d->stride_w ? d->stride_w : 1, dh = d->dil_h ? d->dil_h : 1, dw = d->dil_w ? d->dil_w : 1;
  int cg = d->c / g, kg = d->k / g;
  for (int n = 0; n < d->n; n++)
    for (int k = 0; k < d->k; k++) {
      int grp = k / kg;
      for (int i = 0; i < ho; i++)
        for (int j = 0; j < wo; j++) {
          double acc = 0, m = 0;
          for (int c = 0; c < cg; c++)
            for (int r = 0; r < d->r; r++) {
              int ih = i * sh - d->pad_top + r * dh;
              if (ih < 0 || ih >= d->h) continue;
              for (int s = 0; s < d->s; s++) {
                int iw = j * sw - d->pad_left + s * dw;
                if (iw < 0 || iw >= d->w) continue;
                double t = (double)x[(((size_t)n * d->c + grp * cg + c) * d->h + ih) * d->w + iw] *
                           (double)w[(((size_t)k * cg + c) * d->r + r) * d->s + s];
                acc += t;
                m += fabs(t);
              }
            }
          size_t o = (((size_t)n * d->k + k) * ho + i) * wo + j;
          if (bias) acc += bias[k], m += fabs(bias[k]);
          if (z) acc += z[o], m += fabs(z[o]);
          y[o] = ref_act(d, acc);
          mag[o] = m;
        }
    }
}

// ONNX ConvTranspose on NCHW with W [c, k/groups, r, s], gathered: y[n, m,
// oh, ow] = bias[m] + sum of x[n, ci, ih, iw] * w[ci, m % kg, kh, kw] over
// the group's input channels and the taps with ih * stride - pad_top +
// kh * dil = oh (and likewise for columns); mag as ref_conv's. The caller
// computed ho, wo (eng_cutconv_out_dims). bias may be NULL.
static inline void ref_conv_transpose(const eng_cutconv_desc *d, int ho, int wo, const float *x,
                                      const float *w, const float *bias, double *y, double *mag) {
  int g = d->groups ? d->groups : 1, sh = d->stride_h ? d->stride_h : 1,
      sw = d->stride_w ? d->stride_w : 1, dh = d->dil_h ? d->dil_h : 1, dw = d->dil_w ? d->dil_w : 1;
  int cg = d->c / g, kg = d->k / g;
  for (int n = 0; n < d->n; n++)
    for (int m = 0; m < d->k; m++) {
      int grp = m / kg, mi = m % kg;
      for (int i = 0; i < ho; i++)
        for (int j = 0; j < wo; j++) {
          double acc = 0, mg = 0;
          for (int c = grp * cg; c < (grp + 1) * cg; c++)
            for (int r = 0; r < d->r; r++) {
              int th = i + d->pad_top - r * dh;  // = ih * sh
              if (th < 0 || th % sh || th / sh >= d->h) continue;
              for (int s = 0; s < d->s; s++) {
                int tw = j + d->pad_left - s * dw;
                if (tw < 0 || tw % sw || tw / sw >= d->w) continue;
                double t = (double)x[(((size_t)n * d->c + c) * d->h + th / sh) * d->w + tw / sw] *
                           (double)w[(((size_t)c * kg + mi) * d->r + r) * d->s + s];
                acc += t;
                mg += fabs(t);
              }
            }
          size_t o = (((size_t)n * d->k + m) * ho + i) * wo + j;
          if (bias) acc += bias[m], mg += fabs(bias[m]);
          y[o] = acc;
          mag[o] = mg;
        }
    }
}

// ONNX pooling on NCHW; the caller computed ho, wo (eng_cupool_out_dims).
static inline void ref_pool(const eng_cupool_desc *d0, int ho, int wo, const float *x, double *y) {
  eng_cupool_desc d = *d0;
  if (d.global) {
    d.kh = d.h, d.kw = d.w, d.stride_h = d.stride_w = 1;
    d.pad_top = d.pad_left = d.pad_bottom = d.pad_right = 0;
  }
  int sh = d.stride_h ? d.stride_h : 1, sw = d.stride_w ? d.stride_w : 1;
  for (int p = 0; p < d.n * d.c; p++)
    for (int i = 0; i < ho; i++)
      for (int j = 0; j < wo; j++) {
        int h0 = i * sh - d.pad_top, w0 = j * sw - d.pad_left;
        double mx = -INFINITY, sum = 0;
        for (int r = h0; r < h0 + d.kh; r++)
          for (int s = w0; s < w0 + d.kw; s++) {
            if (r < 0 || r >= d.h || s < 0 || s >= d.w) continue;
            double v = x[((size_t)p * d.h + r) * d.w + s];
            if (v > mx) mx = v;
            sum += v;
          }
        double out;
        if (d.mode == ENG_CUPOOL_MAX) {
          out = mx;
        } else {
          bool inc = d.mode == ENG_CUPOOL_AVG_INCLUDE_PAD;
          int lo_h = inc ? -d.pad_top : 0, hi_h = inc ? d.h + d.pad_bottom : d.h;
          int lo_w = inc ? -d.pad_left : 0, hi_w = inc ? d.w + d.pad_right : d.w;
          int a = h0 > lo_h ? h0 : lo_h, b = h0 + d.kh < hi_h ? h0 + d.kh : hi_h;
          int c = w0 > lo_w ? w0 : lo_w, e = w0 + d.kw < hi_w ? w0 + d.kw : hi_w;
          int cnt = (b - a) * (e - c);
          out = cnt > 0 ? sum / cnt : 0;
        }
        y[((size_t)p * ho + i) * wo + j] = out;
      }
}

#endif
