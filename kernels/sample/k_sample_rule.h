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

// --- the integer weights (k_sample.h): every mass is an exact uint64 sum

// A weight's fraction bits for a vocabulary of V: V x 2^F <= 2^63, so any
// sum of weights (each <= 2^F) fits, whatever its order.
KS_HD int ks_wbits(uint32_t V) {
  int b = 0;
  while (b < 32 && ((uint64_t)1 << b) < V) b++;
  return 63 - b;
}

// A kept token's weight: its exp (x = logit - top logit <= 0, so <= 1) in
// fixed point with F fraction bits, truncated (the product is exact: a float
// times a power of two in double).
KS_HD uint64_t ks_weight(float x, int F) {
  return (uint64_t)((double)ks_expf(x) * (double)((uint64_t)1 << F));
}

// The smallest integer >= q x n (the product rounded once in double), 0 for
// q x n <= 0, UINT64_MAX past it: a head's mass H >= q x n iff H >= this.
KS_HD uint64_t ks_ceil_mul(double q, double n) {
  double y = ceil(q * n);
  if (!(y > 0)) return 0;
  return y >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)y;
}

// The draw's threshold: the first head whose mass H exceeds u x kept, i.e.
// H >= floor(u x kept) + 1 (kept at most, so a head always reaches it).
KS_HD uint64_t ks_draw_thr(double u, uint64_t kept) {
  double y = floor(u * (double)kept);
  uint64_t t = y >= 18446744073709551615.0 ? UINT64_MAX : (y > 0 ? (uint64_t)y : 0) + 1;
  return t < kept ? t : kept;
}

// --- the device kernel's workspace (kernels/sample/k_sample.cu; its size,
// k_sample_ws_bytes, in k_sample.c). Per row, 256-byte aligned: the keys'
// high words (uint32 x V), the bins' weights (uint64 x KS_BINS) and counts
// (uint32 x KS_BINS), the blocks' tops (uint64 x KS_GMAX), min_p's first
// key (uint64).
#define KS_BINS 1024  // bins of logit - top: KS_BIN_SCALE a nat, the last one holding the rest
#define KS_BIN_SCALE 16.0f
#define KS_CHUNK 2048  // keys per block of the first two launches (at most KS_GMAX blocks a row)
#define KS_GMAX 64

KS_HD uint32_t ks_groups(uint32_t V) {
  uint32_t g = (V + KS_CHUNK - 1) / KS_CHUNK;
  return g < 1 ? 1 : g > KS_GMAX ? KS_GMAX : g;
}
KS_HD size_t ks_align256(size_t n) {
  return (n + 255) & ~(size_t)255;
}
KS_HD size_t ks_off_w(uint32_t V) {
  return ks_align256((size_t)V * 4);
}
KS_HD size_t ks_off_n(uint32_t V) {
  return ks_off_w(V) + KS_BINS * 8;
}
KS_HD size_t ks_off_part(uint32_t V) {
  return ks_off_n(V) + KS_BINS * 4;
}
KS_HD size_t ks_off_first(uint32_t V) {
  return ks_off_part(V) + KS_GMAX * 8;
}
KS_HD size_t ks_row_bytes(uint32_t V) {
  return ks_align256(ks_off_first(V) + 8);
}

#endif
