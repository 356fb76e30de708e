// engine/llm/llm_sample.h: choosing the next token from one position's
// logits (issue 35): greedy, or a draw after temperature, top_k, top_p and
// min_p, with an optional repetition penalty over the tokens seen. Pure:
// the random number of a draw is a function of (seed, counter) alone
// (splitmix64, counter-based), so a seeded request's counter-th token is the
// same whatever it was batched with, preempted or recomputed.
#ifndef INFERD_ENGINE_LLM_LLM_SAMPLE_H
#define INFERD_ENGINE_LLM_LLM_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct eng_llm_sampling {
  float temperature;         // <= 0: greedy (argmax, the lowest id on ties, as torch.argmax)
  int32_t top_k;             // keep the k most likely; <= 0: all
  float top_p;               // keep the smallest set whose probability reaches top_p; >= 1 (or <= 0): all
  float min_p;               // drop tokens below min_p x the top probability; <= 0: off
  float repetition_penalty;  // transformers' (CTRL's): seen tokens' logits / p when > 0, x p when < 0; 1: off
  uint64_t seed;
} eng_llm_sampling;

// Defaults: greedy, nothing filtered, no penalty.
eng_llm_sampling eng_llm_sampling_greedy(void);

// Scratch for vocab entries, allocated once per runner.
typedef struct eng_llm_sampler eng_llm_sampler;
eng_llm_sampler *eng_llm_sampler_create(int64_t vocab);  // NULL when out of memory
void eng_llm_sampler_destroy(eng_llm_sampler *s);

// The token for logits[0..vocab) (not modified): greedy, the argmax of the
// penalised logits; else kernels/sample/k_sample.h's rule (k_sample_rows_ref,
// which the device sampler computes bit for bit). seen[0..n_seen): the prompt
// and the tokens generated so far (the repetition penalty's set; may be NULL
// when n_seen is 0). counter: which draw of the request this is (its
// generated-token index), with p->seed the only source of randomness.
int32_t eng_llm_sample(eng_llm_sampler *s, const float *logits, const eng_llm_sampling *p, const int32_t *seen,
                       int64_t n_seen, uint64_t counter);

// 1 when eng_llm_sample under p returns the greedy token of the raw logits
// (k_argmax_rows_ref's) whatever the logits, seen tokens and counter, so a
// runner may pick it where the logits are (eng_llm_work's greedy): no
// repetition penalty, and temperature <= 0, or top_k 1 at temperature 1
// exactly (the sorted path's first candidate: the same token on NaN-free
// logits). Not top_k 1 at another temperature: scaling can round two
// neighbouring logits equal, and the lower id then wins on the host.
int eng_llm_sampling_is_greedy(const eng_llm_sampling *p);

// The uniform number in [0, 1) of draw `counter` under `seed` (splitmix64 of both).
double eng_llm_uniform(uint64_t seed, uint64_t counter);

#endif
