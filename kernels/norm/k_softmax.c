// kernels/norm/k_softmax.c: softmax and log-softmax over one axis of a tensor
// viewed as [outer, axis_len, inner]. The max is subtracted before exp so
// large inputs cannot overflow; sums are accumulated in double. When
// inner > 1, columns are processed in blocks held on the stack so every pass
// reads rows of the axis contiguously and nothing is allocated.
#include "kernels/k_ref.h"

#include <math.h>

#define COL_BLOCK 256

// One block of `w` columns starting at x (row stride `inner`), for both ops.
static void block(float *y, const float *x, size_t axis_len, size_t inner, size_t w, int log_form) {
  float mx[COL_BLOCK];
  double sum[COL_BLOCK];
  for (size_t j = 0; j < w; j++) {
    mx[j] = x[j];
    sum[j] = 0.0;
  }
  for (size_t r = 1; r < axis_len; r++) {
    const float *xr = x + r * inner;
    for (size_t j = 0; j < w; j++)
      if (xr[j] > mx[j]) mx[j] = xr[j];
  }
  if (log_form) {
    for (size_t r = 0; r < axis_len; r++) {
      const float *xr = x + r * inner;
      for (size_t j = 0; j < w; j++) sum[j] += expf(xr[j] - mx[j]);
    }
    // y = x - max - log(sum): never forms log of a tiny probability.
    float shift[COL_BLOCK];
    for (size_t j = 0; j < w; j++) shift[j] = mx[j] + (float)log(sum[j]);
    for (size_t r = 0; r < axis_len; r++) {
      const float *xr = x + r * inner;
      float *yr = y + r * inner;
      for (size_t j = 0; j < w; j++) yr[j] = xr[j] - shift[j];
    }
  } else {
    for (size_t r = 0; r < axis_len; r++) {
      const float *xr = x + r * inner;
      float *yr = y + r * inner;
      for (size_t j = 0; j < w; j++) {
        float e = expf(xr[j] - mx[j]);
        yr[j] = e;
        sum[j] += e;
      }
    }
    float inv[COL_BLOCK];
    for (size_t j = 0; j < w; j++) inv[j] = (float)(1.0 / sum[j]);
    for (size_t r = 0; r < axis_len; r++) {
      float *yr = y + r * inner;
      for (size_t j = 0; j < w; j++) yr[j] *= inv[j];
    }
  }
}

static void run(float *y, const float *x, size_t outer, size_t axis_len, size_t inner, int log_form) {
  if (axis_len == 0 || inner == 0) return;
  size_t plane = axis_len * inner;
  for (size_t o = 0; o < outer; o++) {
    for (size_t j0 = 0; j0 < inner; j0 += COL_BLOCK) {
      size_t w = inner - j0 < COL_BLOCK ? inner - j0 : COL_BLOCK;
      block(y + o * plane + j0, x + o * plane + j0, axis_len, inner, w, log_form);
    }
  }
}

void k_softmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner) {
  run(y, x, outer, axis_len, inner, 0);
}

void k_log_softmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner) {
  run(y, x, outer, axis_len, inner, 1);
}

// --- Hardmax, LpNormalization: the same [outer, axis_len, inner] view

void k_hardmax(float *y, const float *x, size_t outer, size_t axis_len, size_t inner) {
  for (size_t o = 0; o < outer; o++)
    for (size_t c = 0; c < inner; c++) {
      const float *xp = x + o * axis_len * inner + c;
      float *yp = y + o * axis_len * inner + c;
      size_t at = 0;
      for (size_t l = 1; l < axis_len; l++)
        if (xp[l * inner] > xp[at * inner]) at = l;  // the first maximum wins
      for (size_t l = 0; l < axis_len; l++) yp[l * inner] = l == at ? 1.0f : 0.0f;
    }
}

void k_lp_norm(float *y, const float *x, size_t outer, size_t axis_len, size_t inner, int p) {
  for (size_t o = 0; o < outer; o++)
    for (size_t c = 0; c < inner; c++) {
      const float *xp = x + o * axis_len * inner + c;
      float *yp = y + o * axis_len * inner + c;
      double s = 0.0;
      for (size_t l = 0; l < axis_len; l++) s += p == 1 ? fabs(xp[l * inner]) : (double)xp[l * inner] * xp[l * inner];
      double norm = p == 1 ? s : sqrt(s);
      for (size_t l = 0; l < axis_len; l++) yp[l * inner] = norm == 0.0 ? 0.0f : (float)(xp[l * inner] / norm);
    }
}
