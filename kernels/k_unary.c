// kernels/k_unary.c: elementwise activations of k_ref.h. Each loop reads
// x[i] before writing y[i], so y may alias x.
#include "kernels/k_ref.h"

#include <math.h>

void k_relu(float *y, const float *x, size_t n) {
  // `v < 0` is false for NaN, so NaN propagates as in max(x, 0) of ONNX Runtime.
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

void k_leaky_relu(float *y, const float *x, size_t n, float alpha) {
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = v < 0.0f ? alpha * v : v;
  }
}

void k_sigmoid(float *y, const float *x, size_t n) {
  // exp is only ever taken of a non-positive number, so it cannot overflow
  // and the result never becomes inf/inf for large |x|.
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    if (v >= 0.0f) {
      y[i] = 1.0f / (1.0f + expf(-v));
    } else {
      float e = expf(v);
      y[i] = e / (1.0f + e);
    }
  }
}

void k_tanh(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

void k_erf(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = erff(x[i]);
}

void k_gelu(float *y, const float *x, size_t n, int approximate) {
  const float inv_sqrt2 = 0.70710678118654752440f;
  const float sqrt_2_over_pi = 0.79788456080286535588f;
  if (approximate) {
    for (size_t i = 0; i < n; i++) {
      float v = x[i];
      float inner = sqrt_2_over_pi * (v + 0.044715f * v * v * v);
      y[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      float v = x[i];
      y[i] = 0.5f * v * (1.0f + erff(v * inv_sqrt2));
    }
  }
}
