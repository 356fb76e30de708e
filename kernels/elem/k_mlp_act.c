// kernels/elem/k_mlp_act.c: the C reference of a decoder MLP's activation
// (k_ref.h: k_mlp_act): SwiGLU and GeGLU on the fused gate+up rows, or a
// plain SiLU / GELU. The per-element math is k_silu_mul's and k_gelu's
// (kernels/elem/k_unary.c), so engine/llm/llm_step.c's results and this agree
// bit for bit; kernels/elem/k_mlp_act.cu is its CUDA twin.
#include <math.h>

#include "kernels/k_ref.h"

static float act1(float v, k_mlp_kind act) {
  if (act == K_MLP_SILU) return v / (1.0f + expf(-v));
  float y;
  k_gelu(&y, &v, 1, act == K_MLP_GELU_TANH);
  return y;
}

void k_mlp_act(float *y, const float *x, size_t rows, size_t cols, k_mlp_kind act, int gated) {
  size_t xs = gated ? 2 * cols : cols;
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      float g = act1(x[r * xs + c], act);
      y[r * cols + c] = gated ? g * x[r * xs + cols + c] : g;
    }
}
