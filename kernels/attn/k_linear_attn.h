// kernels/attn/k_linear_attn.h: linear attention's recurrence (ONNX's
// LinearAttention: linear, gated, delta and gated-delta update rules) as
// the reference defines it, one step per position. C reference only.
#ifndef INFERD_KERNELS_K_LINEAR_ATTN_H
#define INFERD_KERNELS_K_LINEAR_ATTN_H

#include <stdint.h>

// q [B, T, Hq * dk], k [B, T, Hkv * dk], v [B, T, Hkv * dv]; state [B, Hkv,
// dk, dv] in (the past) and out (the present). decay (NULL: no gating) [B,
// T, Hkv * (decay_per_dim ? dk : 1)], applied as exp(decay); beta (NULL: no
// delta correction) [B, T, beta_heads] with beta_heads Hkv or 1. out [B, T,
// Hq * dv] = scale * q . state after each step, query head h reading kv
// head h / (Hq / Hkv). scratch: dv floats.
void k_linear_attn(float *out, float *state, const float *q, const float *k, const float *v, const float *decay,
                   int decay_per_dim, const float *beta, int64_t beta_heads, int64_t B, int64_t T, int64_t Hq,
                   int64_t Hkv, int64_t dk, int64_t dv, float scale, float *scratch);

#endif
