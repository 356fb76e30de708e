// engine/llm/llm_sample.c: the next token from logits (llm_sample.h). The
// order of the filters is transformers' generate(): repetition penalty on
// the logits, then temperature, top_k, top_p, min_p on the distribution.
#include "engine/llm/llm_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/k_ref.h"

struct eng_llm_sampler {
  int64_t vocab;
  float *logit;  // [vocab] the penalised, tempered logits
  int32_t *idx;  // [vocab] candidate ids, most likely first
  float *prob;   // [vocab] their probabilities, in idx order
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
  s->idx = malloc((size_t)vocab * sizeof *s->idx);
  s->prob = malloc((size_t)vocab * sizeof *s->prob);
  if (!s->logit || !s->idx || !s->prob) {
    eng_llm_sampler_destroy(s);
    return NULL;
  }
  return s;
}

void eng_llm_sampler_destroy(eng_llm_sampler *s) {
  if (!s) return;
  free(s->logit);
  free(s->idx);
  free(s->prob);
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

// Descending logit, then ascending id: a total order, so the candidates (and
// the draw) do not depend on the sort's stability.
static int by_logit(const void *a, const void *b, void *ctx) {
  const float *l = ctx;
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  if (l[x] != l[y]) return l[x] > l[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

int32_t eng_llm_sample(eng_llm_sampler *s, const float *logits, const eng_llm_sampling *p, const int32_t *seen,
                       int64_t n_seen, uint64_t counter) {
  const int64_t V = s->vocab;
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
  if (!(p->temperature > 0)) {
    int32_t best = 0;
    k_argmax_rows_ref(&best, l, 1, (size_t)V);
    return best;
  }
  float inv_t = 1.0f / p->temperature;
  for (int64_t i = 0; i < V; i++) {
    l[i] *= inv_t;
    s->idx[i] = (int32_t)i;
  }
  int64_t n = V;
  if (p->top_k > 0 && p->top_k < n) n = p->top_k;
  qsort_r(s->idx, (size_t)V, sizeof *s->idx, by_logit, l);
  // softmax over the top_k candidates (the ones below are -inf after top_k)
  float mx = l[s->idx[0]];
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += (s->prob[i] = expf(l[s->idx[i]] - mx));
  for (int64_t i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
  if (p->top_p > 0 && p->top_p < 1) {
    // the smallest head whose mass reaches top_p (transformers keeps the token that crosses it)
    double c = 0;
    int64_t k = 0;
    while (k < n) {
      c += s->prob[k++];
      if (c >= p->top_p) break;
    }
    n = k;
  }
  if (p->min_p > 0) {
    float floor_p = p->min_p * s->prob[0];
    int64_t k = 1;
    while (k < n && s->prob[k] >= floor_p) k++;
    n = k;
  }
  double mass = 0;
  for (int64_t i = 0; i < n; i++) mass += s->prob[i];
  double u = eng_llm_uniform(p->seed, counter) * mass, c = 0;
  for (int64_t i = 0; i < n; i++) {
    c += s->prob[i];
    if (u < c) return s->idx[i];
  }
  return s->idx[n - 1];
}
