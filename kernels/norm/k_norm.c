// kernels/norm/k_norm.c: layer normalisation and inference-time batch
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

// RMSNorm as Llama, Qwen2 and Mistral have it (transformers' LlamaRMSNorm):
// x * rsqrt(mean(x^2) + eps) * weight, the mean of squares taken in double
// and the scale applied in float as the FP32 reference does.
void k_rms_norm(float *y, const float *x, const float *weight, size_t rows, size_t cols, float eps) {
  if (cols == 0) return;
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    double ss = 0.0;
    for (size_t j = 0; j < cols; j++) ss += (double)xr[j] * xr[j];
    float inv = 1.0f / sqrtf((float)(ss / (double)cols) + eps);
    for (size_t j = 0; j < cols; j++) yr[j] = weight[j] * (xr[j] * inv);
  }
}
