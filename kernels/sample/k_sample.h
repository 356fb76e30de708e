// kernels/sample/k_sample.h: a token drawn from each row of a step's logits
// (issue 35 item 5), the C reference k_sample_rows_ref and its CUDA twin
// k_sample_rows_cuda (kernels/k_cuda.h), bit for bit the same rule, so the
// GPU test compares ids exactly; engine/llm/llm_sample.c's eng_llm_sample
// draws through k_sample_rows_ref, so the host and the device agree too.
// The rule (transformers' order: repetition penalty on the seen ids,
// temperature, top_k, top_p, min_p, then the inverse-CDF walk of the host's
// uniform number u):
//  - order: the key (logit descending, id ascending); NaN counts as -inf and
//    -0 as +0. top: the first key; a row whose top logit is +-inf (or a
//    temperature <= 0) returns top's id;
//  - weights, not floating probabilities: a kept token's weight is
//    ks_weight (k_sample_rule.h): exp(logit - top logit) by ks_expf, in
//    fixed point with F = ks_wbits(vocab) fraction bits (46 at 128,256), so
//    every mass is an exact uint64 sum whose value does not depend on the
//    order of its terms (a device may sum in any order, over many blocks).
//    A token under 2^-F of the top's weight (~1.4e-14 at 46) weighs 0 and is
//    never drawn. H(c): the weight of the kept keys <= c;
//  - top_k: kept are the top_k first keys (all when top_k <= 0 or >= vocab);
//    total = their weight;
//  - top_p in (0, 1): the head up to the first key c with H(c) >=
//    ks_ceil_mul(top_p, total) (the head reaching top_p of the mass);
//  - min_p > 0: the head ends before the first key after top whose weight is
//    below ks_ceil_mul(min_p, 2^F) (min_p x the top token's weight, 2^F);
//  - the draw: kept = H(last key of the head); the token is the first key c
//    with H(c) >= ks_draw_thr(u, kept) (the first whose head's mass exceeds
//    u x kept).
// Against the floating rule (sequential double sums of float
// probabilities) this differs only on knife-edge rows, a cumulative mass
// within ~2^-F of a threshold, or a draw of a token weighing under 2^-F.
#ifndef INFERD_KERNELS_SAMPLE_K_SAMPLE_H
#define INFERD_KERNELS_SAMPLE_K_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/dtype.h"

// One row's parameters (eng_llm_sampling's meaning). mode 0: skip the row
// (its id is left as it was: a greedy row the argmax kernel picked).
typedef struct k_sample_param {
  int32_t mode;
  int32_t top_k;             // <= 0: all
  float temperature;         // <= 0: argmax of the penalised logits
  float top_p;               // (0, 1) applies
  float min_p;               // > 0 applies
  float repetition_penalty;  // > 0 and != 1 applies
  int64_t seen_off;          // the row's seen ids: seen[seen_off .. seen_off + n_seen)
  int64_t n_seen;
  double u;  // the host's uniform number in [0, 1)
} k_sample_param;

// ids[r] = row r's token under p[r] (rows with mode 0 untouched). x: rows x
// vocab logits of type dt (DT_FP32, DT_FP16, DT_BF16); seen: the penalty's
// ids (out-of-range ones ignored); scratch: 2 x vocab floats (8-byte
// aligned: the row's keys). 0, or -1 for another dtype or a vocab of 0 or
// past INT32_MAX.
int k_sample_rows_ref(int32_t *ids, const void *x, dtype dt, size_t rows, size_t vocab, const k_sample_param *p,
                      const int32_t *seen, float *scratch);

// The device workspace k_sample_rows_cuda needs for rows x vocab logits, in
// bytes (sized once, at load: nothing is allocated on the request path).
size_t k_sample_ws_bytes(size_t rows, size_t vocab);

#endif
