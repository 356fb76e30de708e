// kernels/sample/k_sample.h: a token drawn from each row of a step's logits
// (issue 35 item 5), the C reference k_sample_rows_ref and its CUDA twin
// k_sample_rows_cuda (kernels/k_cuda.h), bit for bit the same rule, so the
// GPU test compares ids exactly. The rule is engine/llm/llm_sample.c's
// (eng_llm_sample: repetition penalty on the seen ids, temperature, top_k,
// top_p, min_p, then the inverse-CDF walk of the host's uniform number u)
// with these differences, all below the ids' resolution except on
// knife-edge rows (a cumulative mass within ~1e-15 of top_p or u's target):
//  - order: logits descending, ids ascending, as llm_sample.c's sort; NaN
//    counts as -inf and -0 as +0 (the host's qsort has no total order there);
//  - exp: k_sample_expf below (explicit fmaf, identical on host and device;
//    within 2 ulp of expf; 0 below -87.33, where expf gives subnormals);
//  - sums: every double sum (the softmax's normaliser, top_p's and the
//    walk's cumulative masses) is K_SAMPLE_LANES partial sums taken in id
//    order (lane t: ids t, t + LANES, ...), then a fixed pairwise tree (the
//    CUDA block's warp shuffles); llm_sample.c sums sequentially in
//    probability order. A cumulative mass is this sum restricted to the head
//    (the ids before the cut), so it is monotone in the cut and the smallest
//    head reaching a mass is well defined whatever finds it;
//  - a row whose top logit is +-inf returns that token (the host's
//    arithmetic gives NaN probabilities there).
#ifndef INFERD_KERNELS_SAMPLE_K_SAMPLE_H
#define INFERD_KERNELS_SAMPLE_K_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/dtype.h"

#define K_SAMPLE_LANES 1024  // the sums' partials: the CUDA block's threads

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
// ids (out-of-range ones ignored); scratch: 2 x vocab floats. 0, or -1 for
// another dtype or a vocab of 0 or past INT32_MAX.
int k_sample_rows_ref(int32_t *ids, const void *x, dtype dt, size_t rows, size_t vocab, const k_sample_param *p,
                      const int32_t *seen, float *scratch);

#endif
