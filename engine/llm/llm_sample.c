// engine/llm/llm_sample.c: the next token from logits (llm_sample.h). The
// order of the filters is transformers' generate(): repetition penalty on
// the logits, then temperature, top_k, top_p, min_p on the distribution.
#include "engine/llm/llm_sample.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/k_ref.h"
#include "kernels/sample/k_sample.h"

struct eng_llm_sampler {
  int64_t vocab;
  float *logit;    // [vocab] the penalised logits (greedy)
  uint64_t *keys;  // [vocab] k_sample_rows_ref's scratch (a draw)
};

eng_llm_sampling eng_llm_sampling_greedy(void) {
  return (eng_llm_sampling){.temperature = 0, .top_k = 0, .top_p = 1, .min_p = 0, .repetition_penalty = 1, .seed = 0};
}

eng_llm_sampler *eng_llm_sampler_create(int64_t vocab) {
  if (vocab < 1) return NULL;
  eng_llm_sampler *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->vocab = vocab;
  s->logit = malloc((size_t)vocab * sizeof *s->logit);
  s->keys = malloc((size_t)vocab * sizeof *s->keys);
  if (!s->logit || !s->keys) {
    eng_llm_sampler_destroy(s);
    return NULL;
  }
  return s;
}

void eng_llm_sampler_destroy(eng_llm_sampler *s) {
  if (!s) return;
  free(s->logit);
  free(s->keys);
  free(s);
}

int eng_llm_sampling_is_greedy(const eng_llm_sampling *p) {
  if (p->repetition_penalty > 0 && p->repetition_penalty != 1) return 0;
  return !(p->temperature > 0) || (p->top_k == 1 && p->temperature == 1.0f);
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double eng_llm_uniform(uint64_t seed, uint64_t counter) {
  // two rounds: the seed's stream, then the counter's place in it
  uint64_t x = splitmix64(splitmix64(seed) ^ (counter * 0xD1B54A32D192ED03ull));
  return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

// Greedy: the argmax of the penalised logits (k_argmax_rows_ref's: the
// lowest id on ties). A draw: k_sample_rows_ref (kernels/sample/k_sample.h),
// the rule the device sampler computes bit for bit, so a request draws the
// same tokens wherever its logits are sampled.
int32_t eng_llm_sample(eng_llm_sampler *s, const float *logits, const eng_llm_sampling *p, const int32_t *seen,
                       int64_t n_seen, uint64_t counter) {
  const int64_t V = s->vocab;
  if (p->temperature > 0) {
    k_sample_param kp = {.mode = 1,
                         .top_k = p->top_k,
                         .temperature = p->temperature,
                         .top_p = p->top_p,
                         .min_p = p->min_p,
                         .repetition_penalty = p->repetition_penalty,
                         .seen_off = 0,
                         .n_seen = seen ? n_seen : 0,
                         .u = eng_llm_uniform(p->seed, counter)};
    int32_t id = 0;
    k_sample_rows_ref(&id, logits, DT_FP32, 1, (size_t)V, &kp, seen, (float *)s->keys);
    return id;
  }
  float *l = s->logit;
  memcpy(l, logits, (size_t)V * sizeof *l);
  if (p->repetition_penalty > 0 && p->repetition_penalty != 1) {
    // each seen id once: a second pass over a repeated id would penalise it twice
    float rp = p->repetition_penalty;
    for (int64_t i = 0; i < n_seen; i++) {
      int32_t t = seen[i];
      if (t < 0 || t >= V) continue;
      float orig = logits[t];
      l[t] = orig > 0 ? orig / rp : orig * rp;
    }
  }
  int32_t best = 0;
  k_argmax_rows_ref(&best, l, 1, (size_t)V);
  return best;
}
