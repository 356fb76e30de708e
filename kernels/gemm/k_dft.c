// kernels/gemm/k_dft.c: the discrete Fourier transform along one axis (ONNX DFT),
// as a direct sum: y[k] = sum_j x[j] w^(k j), w = exp(-+2 pi i / len). O(len^2)
// per signal, summed in double with the twiddles tabulated once per call:
// exporters write DFT for FNet's token mixing and spectrogram fronts, where the
// signals are hundreds of samples long at most.
#include "kernels/k_ref.h"

#include <math.h>
#include <stdlib.h>

int k_dft_f32(float *y, const float *x, size_t outer, int64_t n, size_t inner, int complex_in, int64_t len,
              int64_t bins, int inverse) {
  if (len <= 0 || bins <= 0) return 0;
  double *tw = malloc(2 * (size_t)len * sizeof *tw);
  if (!tw) return -1;
  const double sign = inverse ? 1.0 : -1.0, pi2 = 6.283185307179586476925286766559;
  for (int64_t t = 0; t < len; t++) {
    tw[2 * t] = cos(pi2 * (double)t / (double)len);
    tw[2 * t + 1] = sign * sin(pi2 * (double)t / (double)len);
  }
  const int64_t used = n < len ? n : len;  // x zero-padded or truncated to len
  const size_t cin = complex_in ? 2 : 1;
  const double scale = inverse ? 1.0 / (double)len : 1.0;
  for (size_t o = 0; o < outer; o++)
    for (size_t i = 0; i < inner; i++) {
      const float *xs = x + (o * (size_t)n * inner + i) * cin;
      float *ys = y + (o * (size_t)bins * inner + i) * 2;
      for (int64_t k = 0; k < bins; k++) {
        double re = 0, im = 0;
        int64_t t = 0;  // (k * j) mod len, stepped by k
        for (int64_t j = 0; j < used; j++) {
          const float *v = xs + (size_t)j * inner * cin;
          double c = tw[2 * t], s = tw[2 * t + 1], a = v[0], b = complex_in ? v[1] : 0.0;
          re += a * c - b * s;
          im += a * s + b * c;
          t += k % len;
          if (t >= len) t -= len;
        }
        float *out = ys + (size_t)k * inner * 2;
        out[0] = (float)(re * scale);
        out[1] = (float)(im * scale);
      }
    }
  free(tw);
  return 0;
}
