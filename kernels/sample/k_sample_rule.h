// kernels/sample/k_sample_rule.h: the scalar pieces of k_sample's rule
// (k_sample.h), compiled from this one text by the C reference and the CUDA
// kernel so that both compute the same bits: every product-sum is an
// explicit fmaf (no contraction choice left to either compiler), the
// divisions are IEEE (the kernels build without fast-math).
#ifndef INFERD_KERNELS_SAMPLE_K_SAMPLE_RULE_H
#define INFERD_KERNELS_SAMPLE_K_SAMPLE_RULE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define KS_HD static __host__ __device__ __forceinline__
#else
#define KS_HD static inline
#endif

// NaN as -inf, -0 as +0: the order below is then the one llm_sample.c's
// comparison gives (equal logits ordered by id).
KS_HD float ks_canon(float v) {
  if (v != v) return -INFINITY;
  return v == 0.0f ? 0.0f : v;
}

// A canonical float's place in descending order as an unsigned integer
// (smaller: larger logit); the row's total order is (ks_desc32, id).
KS_HD uint32_t ks_desc32(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  uint32_t asc = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ~asc;
}

KS_HD float ks_undesc32(uint32_t d) {
  uint32_t asc = ~d, b = (asc & 0x80000000u) ? (asc & 0x7fffffffu) : ~asc;
  float v;
  memcpy(&v, &b, sizeof v);
  return v;
}

KS_HD uint64_t ks_key(uint32_t desc, uint32_t id) {
  return ((uint64_t)desc << 32) | id;
}

// transformers' repetition penalty on a seen token's (canonical) logit.
KS_HD float ks_penalize(float orig, float rp) {
  return ks_canon(orig > 0 ? orig / rp : orig * rp);
}

// exp(x) for x <= 0: x = k ln2 + r, |r| <= ln2 / 2, exp(r) by its degree-7
// Taylor polynomial (error < 1e-8 relative), times 2^k (k >= -126: a normal
// float). 0 below -87.33 (and for NaN).
KS_HD float ks_expf(float x) {
  if (!(x >= -87.33f)) return 0.0f;
  float k = rintf(x * 1.44269504f);
  float r = fmaf(k, -0.693359375f, x);
  r = fmaf(k, 2.12194440e-4f, r);
  float p = 1.98412698e-4f;  // 1/5040
  p = fmaf(p, r, 1.38888889e-3f);
  p = fmaf(p, r, 8.33333333e-3f);
  p = fmaf(p, r, 4.16666667e-2f);
  p = fmaf(p, r, 1.66666667e-1f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  uint32_t sb = (uint32_t)((int32_t)k + 127) << 23;
  float s;
  memcpy(&s, &sb, sizeof s);
  return p * s;
}

#endif
