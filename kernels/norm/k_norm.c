// kernels/norm/k_norm.c: layer, RMS, group (and instance) normalisation and inference-time batch
// normalisation. Layer norm takes the mean first and the variance of the
// centred values second (two passes, double accumulation), which stays
// accurate when the mean is large compared with the spread.
#include "kernels/k_ref.h"

#include <math.h>

void k_layer_norm(float *y, const float *x, const float *scale, const float *bias, size_t rows,
                  size_t cols, float eps) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    double s = 0.0;
    for (size_t j = 0; j < cols; j++) s += xr[j];
    double mean = s / (double)cols;
    double ss = 0.0;
    for (size_t j = 0; j < cols; j++) {
      double d = xr[j] - mean;
      ss += d * d;
    }
    double inv_std = 1.0 / sqrt(ss / (double)cols + (double)eps);
    for (size_t j = 0; j < cols; j++) {
      double v = (xr[j] - mean) * inv_std * scale[j];
      if (bias) v += bias[j];
      yr[j] = (float)v;
    }
  }
}

void k_rms_norm(float *y, const float *x, const float *scale, size_t rows, size_t cols, float eps) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    double ss = 0.0;
    for (size_t j = 0; j < cols; j++) ss += (double)xr[j] * xr[j];
    // the root and the scale in float, as transformers' LlamaRMSNorm and ONNX's
    // default stash_type (FP32) take them: a decoder's greedy tokens match
    // transformers' exactly (tests/llm)
    float inv = 1.0f / sqrtf((float)(ss / (double)cols) + eps);
    for (size_t j = 0; j < cols; j++) yr[j] = scale[j] * (xr[j] * inv);
  }
}

void k_group_norm(float *y, const float *x, const float *scale, const float *bias, size_t n, size_t c,
                  size_t groups, size_t spatial, int per_group, float eps) {
  size_t cg = c / groups, len = cg * spatial;
  if (len == 0) return;
  for (size_t i = 0; i < n * groups; i++) {
    const float *xg = x + i * len;
    float *yg = y + i * len;
    double s = 0.0, ss = 0.0;
    for (size_t j = 0; j < len; j++) s += xg[j];
    double mean = s / (double)len;
    for (size_t j = 0; j < len; j++) ss += (xg[j] - mean) * (xg[j] - mean);
    double inv_std = 1.0 / sqrt(ss / (double)len + (double)eps);
    for (size_t k = 0; k < cg; k++) {
      size_t ch = per_group ? i % groups : (i % groups) * cg + k;
      for (size_t j = k * spatial; j < (k + 1) * spatial; j++)
        yg[j] = (float)((xg[j] - mean) * inv_std * scale[ch] + bias[ch]);
    }
  }
}

void k_batch_norm(float *y, const float *x, const float *scale, const float *bias,
                  const float *mean, const float *var, size_t n, size_t c, size_t spatial,
                  float eps) {
  // Centre first rather than folding the mean into the bias: (x - mean) is
  // exact when x is near the mean, the folded form cancels badly there.
  for (size_t ch = 0; ch < c; ch++) {
    float k = (float)((double)scale[ch] / sqrt((double)var[ch] + (double)eps));
    float m = mean[ch], b = bias ? bias[ch] : 0.0f;
    for (size_t i = 0; i < n; i++) {
      const float *xs = x + (i * c + ch) * spatial;
      float *ys = y + (i * c + ch) * spatial;
      for (size_t s = 0; s < spatial; s++) ys[s] = (xs[s] - m) * k + b;
    }
  }
}

// --- NegativeLogLikelihoodLoss (and SoftmaxCrossEntropyLoss after a log-softmax)

int k_nll_loss(float *loss, const float *x, const int64_t *target, const float *weight, size_t n, size_t c,
               size_t d, int has_ignore, int64_t ignore, int reduction) {
  double sum = 0.0, wsum = 0.0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < d; k++) {
      int64_t t = target[i * d + k];
      double w = 0.0, l = 0.0;
      if (!(has_ignore && t == ignore)) {
        if (t < 0 || (uint64_t)t >= c) return -1;
        w = weight ? weight[t] : 1.0;
        l = -(double)x[(i * c + (size_t)t) * d + k] * w;
      }
      if (reduction == 0) loss[i * d + k] = (float)l;
      sum += l;
      wsum += w;
    }
  if (reduction == 1) loss[0] = (float)sum;
  // mean: weighted by the gathered weights (0 for ignored targets), as ONNX's reference
  if (reduction == 2) loss[0] = (float)(weight || has_ignore ? sum / wsum : sum / (double)(n * d));
  return 0;
}

// --- LRN: across channels, x viewed as [n, c, spatial]

void k_lrn(float *y, const float *x, size_t n, size_t c, size_t spatial, int64_t size, float alpha, float beta,
           float bias) {
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // floor below, ceil above, as ONNX says
  for (size_t i = 0; i < n; i++)
    for (size_t ch = 0; ch < c; ch++)
      for (size_t s = 0; s < spatial; s++) {
        double sq = 0.0;
        int64_t from = (int64_t)ch - lo < 0 ? 0 : (int64_t)ch - lo;
        int64_t to = (int64_t)ch + hi >= (int64_t)c ? (int64_t)c - 1 : (int64_t)ch + hi;
        for (int64_t k = from; k <= to; k++) {
          double v = x[(i * c + (size_t)k) * spatial + s];
          sq += v * v;
        }
        size_t at = (i * c + ch) * spatial + s;
        y[at] = (float)(x[at] / pow((double)bias + (double)alpha / (double)size * sq, (double)beta));
      }
}
