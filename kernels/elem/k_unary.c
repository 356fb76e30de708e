// kernels/elem/k_unary.c: elementwise activations of k_ref.h, the integer unary
// ops (Neg, Abs, Sign, Clip: one body over K_INT_TYPES, k_unary), and the unary ops
// with a bool result (IsNaN, IsInf) or operand (Not). Each loop reads x[i]
// before writing y[i], so y may alias x where the element sizes match.
#include "kernels/k_ref.h"

#include <math.h>

#include "kernels/elem/k_unop_math.h"
#include <string.h>

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

void k_unary_f32(float *y, const float *x, size_t n, k_unop op, float a, float b) {
  switch (op) {
    case K_SQRT: for (size_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); break;
    case K_EXP: for (size_t i = 0; i < n; i++) y[i] = expf(x[i]); break;
    case K_NEG: for (size_t i = 0; i < n; i++) y[i] = -x[i]; break;
    case K_ABS: for (size_t i = 0; i < n; i++) y[i] = fabsf(x[i]); break;
    case K_RECIP: for (size_t i = 0; i < n; i++) y[i] = 1.0f / x[i]; break;
    // NaN in, NaN out (as PyTorch's); fminf/fmaxf alone would turn it into a bound, and a
    // compiler may turn the clamp into a saturating instruction that gives 0 (nvcc does)
    case K_HARD_SIGMOID:
      for (size_t i = 0; i < n; i++) {
        float t = a * x[i] + b;
        y[i] = t != t ? t : fmaxf(0.0f, fminf(1.0f, t));
      }
      break;
    case K_HARD_SWISH:  // x * HardSigmoid(x) with alpha 1/6, beta 0.5
      for (size_t i = 0; i < n; i++) {
        float v = x[i], t = v * (1.0f / 6.0f) + 0.5f;
        y[i] = t != t ? t : v * fmaxf(0.0f, fminf(1.0f, t));
      }
      break;
    case K_CLIP:  // min(max(v, a), b): with a > b every element is b, as ONNX says; comparisons, so NaN passes
      for (size_t i = 0; i < n; i++) {
        float v = x[i] < a ? a : x[i];
        y[i] = v > b ? b : v;
      }
      break;
    case K_SIGN:  // 0 and NaN are their own sign
      for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v;
      }
      break;
    default:  // K_LOG on: one expression each, shared with the CUDA twin
      for (size_t i = 0; i < n; i++) y[i] = k_unop_math(op, x[i], a, b);
      break;
  }
}

// --- integers: one body per op for every K_INT_TYPES type. Signed values
// are negated through uint64_t (wrapping, no overflow); the sign tests go
// through int64_t, which holds every signed value, and are skipped for
// unsigned types by S, a constant.
#define I_NEG(S, T, v) ((T)(0 - (uint64_t)(v)))
#define I_ABS(S, T, v) ((S) && (int64_t)(v) < 0 ? I_NEG(S, T, v) : (v))
#define I_SIGN(S, T, v) ((S) && (int64_t)(v) < 0 ? (T)-1 : (T)((v) != 0))

#define DEF_UNARY_INT(K, T, S)                                                        \
  static void un_##K(T *y, const T *x, size_t n, k_unop op, const T *lo, const T *hi) { \
    switch (op) {                                                                     \
      case K_NEG: for (size_t i = 0; i < n; i++) y[i] = I_NEG(S, T, x[i]); break;     \
      case K_ABS: for (size_t i = 0; i < n; i++) y[i] = I_ABS(S, T, x[i]); break;     \
      case K_SIGN: for (size_t i = 0; i < n; i++) y[i] = I_SIGN(S, T, x[i]); break;   \
      case K_CLIP:                                                                    \
        for (size_t i = 0; i < n; i++) {                                              \
          T v = lo && x[i] < *lo ? *lo : x[i]; /* then hi: with lo > hi, hi wins */   \
          y[i] = hi && v > *hi ? *hi : v;                                             \
        }                                                                             \
        break;                                                                        \
      default: break; /* refused by k_unary_takes */                                  \
    }                                                                                 \
  }
K_INT_TYPES(DEF_UNARY_INT)

int k_unary_takes(k_elem t, k_unop op) {
  switch (t) {
    case K_I8: case K_I16: case K_I32: case K_I64:
      return op == K_NEG || op == K_ABS || op == K_SIGN || op == K_CLIP;
    case K_U8: case K_U16: case K_U32: case K_U64:  // ONNX's Neg takes signed types only
      return op == K_ABS || op == K_SIGN || op == K_CLIP;
    default: return 0;
  }
}

int k_unary(void *y, const void *x, k_elem t, size_t n, k_unop op, const void *lo, const void *hi) {
  if (!k_unary_takes(t, op)) return -1;
  switch (t) {
#define CASE_UN(K, T, S) \
    case K: un_##K(y, x, n, op, lo, hi); return 0;
    K_INT_TYPES(CASE_UN)
#undef CASE_UN
    default: return -1;
  }
}

void k_unary_i64(int64_t *y, const int64_t *x, size_t n, k_unop op, int64_t a, int64_t b) {
  if (k_unary(y, x, K_I64, n, op, &a, &b) != 0 && y != x) memmove(y, x, n * sizeof *y);  // others copy
}

// --- bool results and operands

void k_not(uint8_t *y, const uint8_t *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = !x[i];
}

void k_isnan(uint8_t *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] != x[i];
}

void k_isinf(uint8_t *y, const float *x, size_t n, int neg, int pos) {
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = (pos && v == INFINITY) || (neg && v == -INFINITY);
  }
}

// SwiGLU's gate: y = silu(g) * u = g * sigmoid(g) * u (the MLP of Llama,
// Qwen2, Mistral). y may alias g or u.
void k_silu_mul(float *y, const float *g, const float *u, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float v = g[i];
    y[i] = v / (1.0f + expf(-v)) * u[i];
  }
}
