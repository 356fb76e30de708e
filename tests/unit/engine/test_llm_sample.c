// tests/unit/engine/test_llm_sample.c: engine/llm/llm_sample.c: greedy,
// each filter's effect on which ids can come out, the repetition penalty's
// sign rule, and the counter-based draws (a seed and a counter give one
// token, whatever else was drawn before; different seeds differ), and which
// sampling a runner may serve with its own argmax (eng_llm_sampling_is_greedy)
// with k_argmax_rows_ref's policy (ties, -inf, NaN) equal to the sampler's.
#include <math.h>
#include <stdlib.h>

#include "engine/llm/llm_sample.h"
#include "kernels/k_ref.h"
#include "tests/unit/check.h"

#define V 8

static const float L[V] = {1.0f, 3.0f, 2.5f, -1.0f, 3.0f, 0.5f, -4.0f, 2.9f};

static void test_greedy(eng_llm_sampler *s) {
  eng_llm_sampling p = eng_llm_sampling_greedy();
  CHECK_EQ_INT(eng_llm_sample(s, L, &p, NULL, 0, 0), 1);  // 1 and 4 tie at 3.0: the lower id, as torch.argmax
  p.temperature = 0;
  p.seed = 99;
  CHECK_EQ_INT(eng_llm_sample(s, L, &p, NULL, 0, 7), 1);  // greedy ignores the seed and counter
  // penalty 2 over {1, 4}: 3.0 / 2 = 1.5 each; 7 (2.9) is the best left
  p.repetition_penalty = 2;
  int32_t seen[3] = {1, 4, 4};
  CHECK_EQ_INT(eng_llm_sample(s, L, &p, seen, 3, 0), 7);
  // a negative logit seen is multiplied (more negative), never raised
  float l2[V] = {-1, -0.5f, -3, -3, -3, -3, -3, -3};
  int32_t seen2[1] = {1};
  CHECK_EQ_INT(eng_llm_sample(s, l2, &p, seen2, 1, 0), 0);  // -0.5 * 2 = -1.0: ties 0's -1.0, lower id wins
  p.repetition_penalty = 4;
  CHECK_EQ_INT(eng_llm_sample(s, l2, &p, seen2, 1, 0), 0);
  CHECK(L[1] == 3.0f);  // the logits are not touched
}

static void test_filters(eng_llm_sampler *s) {
  eng_llm_sampling p = eng_llm_sampling_greedy();
  p.temperature = 1;
  int hist[V];
  // top_k 2: only the two largest (1 and 4, tied at 3.0) ever come out, both do
  p.top_k = 2;
  for (int i = 0; i < V; i++) hist[i] = 0;
  for (uint64_t c = 0; c < 2000; c++) hist[eng_llm_sample(s, L, &p, NULL, 0, c)]++;
  CHECK_EQ_INT(hist[1] + hist[4], 2000);
  CHECK(hist[1] > 800 && hist[4] > 800);
  // top_k 1 at any temperature is greedy
  p.top_k = 1;
  p.temperature = 5;
  for (uint64_t c = 0; c < 100; c++) CHECK_EQ_INT(eng_llm_sample(s, L, &p, NULL, 0, c), 1);
  // top_p small: the top token alone (its probability already reaches it)
  p.top_k = 0;
  p.temperature = 1;
  p.top_p = 0.05f;
  for (uint64_t c = 0; c < 100; c++) CHECK_EQ_INT(eng_llm_sample(s, L, &p, NULL, 0, c), 1);
  // top_p 0.6 at temperature 1: probabilities are ~.27 .27 .24 .20 ...: the first three (ids 1, 4, 7) reach it
  p.top_p = 0.6f;
  for (int i = 0; i < V; i++) hist[i] = 0;
  for (uint64_t c = 0; c < 3000; c++) hist[eng_llm_sample(s, L, &p, NULL, 0, c)]++;
  CHECK_EQ_INT(hist[1] + hist[4] + hist[7], 3000);
  CHECK(hist[7] > 500);
  // min_p 0.5: exp(x - 3) >= 0.5 keeps 3.0, 3.0, 2.9, 2.5 (exp(-0.5) = .61), not 1.0
  p.top_p = 1;
  p.min_p = 0.5f;
  for (int i = 0; i < V; i++) hist[i] = 0;
  for (uint64_t c = 0; c < 3000; c++) hist[eng_llm_sample(s, L, &p, NULL, 0, c)]++;
  CHECK_EQ_INT(hist[1] + hist[4] + hist[7] + hist[2], 3000);
  CHECK(hist[2] > 300);
  // nothing filtered: the frequencies follow the softmax (id 6 at e^-7 relative: ~never; id 1 ~27 %)
  p.min_p = 0;
  for (int i = 0; i < V; i++) hist[i] = 0;
  for (uint64_t c = 0; c < 20000; c++) hist[eng_llm_sample(s, L, &p, NULL, 0, c)]++;
  double z = 0;
  for (int i = 0; i < V; i++) z += exp(L[i]);
  for (int i = 0; i < V; i++) {
    double want = exp(L[i]) / z * 20000;
    if (fabs(hist[i] - want) > 5 * sqrt(want + 1) + 5)
      CHECK_FAIL_("id %d drawn %d times, expected ~%.0f", i, hist[i], want);
  }
}

static void test_reproducible(eng_llm_sampler *s) {
  eng_llm_sampling p = eng_llm_sampling_greedy();
  p.temperature = 1.5f;
  p.seed = 1234;
  int32_t a[64], b[64];
  for (uint64_t c = 0; c < 64; c++) a[c] = eng_llm_sample(s, L, &p, NULL, 0, c);
  // the same draws in another order (as batching or a recompute would interleave them) give the same tokens
  for (int64_t c = 63; c >= 0; c--) b[c] = eng_llm_sample(s, L, &p, NULL, 0, (uint64_t)c);
  int same = 1;
  for (int c = 0; c < 64; c++) same &= a[c] == b[c];
  CHECK(same);
  p.seed = 1235;
  int differ = 0;
  for (uint64_t c = 0; c < 64; c++) differ += eng_llm_sample(s, L, &p, NULL, 0, c) != a[c];
  CHECK(differ > 10);
  // the uniform numbers are in [0, 1) and spread
  double mn = 1, mx = 0, sum = 0;
  for (uint64_t c = 0; c < 10000; c++) {
    double u = eng_llm_uniform(7, c);
    if (u < mn) mn = u;
    if (u > mx) mx = u;
    sum += u;
  }
  CHECK(mn >= 0 && mn < 0.01 && mx < 1 && mx > 0.99);
  CHECK(fabs(sum / 10000 - 0.5) < 0.02);
}

// Which requests a runner may serve with its own argmax (eng_llm_work's greedy, issue 35), and the
// argmax's policy (k_argmax_rows_ref, k_argmax_rows_cuda's reference): the lowest id on ties, NaN
// never chosen unless at index 0, -inf like any value.
static void test_greedy_rule(eng_llm_sampler *s) {
  eng_llm_sampling p = eng_llm_sampling_greedy();
  CHECK_EQ_INT(eng_llm_sampling_is_greedy(&p), 1);
  p.top_k = 5;  // ignored at temperature 0
  p.top_p = 0.5f;
  CHECK_EQ_INT(eng_llm_sampling_is_greedy(&p), 1);
  p.repetition_penalty = 1.1f;  // the penalty changes the logits: host
  CHECK_EQ_INT(eng_llm_sampling_is_greedy(&p), 0);
  p = eng_llm_sampling_greedy();
  p.temperature = 0.7f;
  CHECK_EQ_INT(eng_llm_sampling_is_greedy(&p), 0);
  p.top_k = 1;  // top_k 1, but scaled logits may round equal: host
  CHECK_EQ_INT(eng_llm_sampling_is_greedy(&p), 0);
  p.temperature = 1;
  CHECK_EQ_INT(eng_llm_sampling_is_greedy(&p), 1);
  p.top_k = 2;
  CHECK_EQ_INT(eng_llm_sampling_is_greedy(&p), 0);
  // where the rule says greedy, the sampler's token is the argmax, whatever the seed and counter
  float rows[6][V] = {{1, 3, 2.5f, -1, 3, .5f, -4, 2.9f},
                      {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
                      {-INFINITY, -INFINITY, -5, -INFINITY, -5, -INFINITY, -INFINITY, -INFINITY},
                      {NAN, 1, 2, 3, 4, 5, 6, 7},
                      {0, NAN, 2, NAN, 2, 1, 0, 0},
                      {0, 0, 0, 0, 0, 0, 0, INFINITY}};
  const int32_t want[6] = {1, 0, 2, 0, 2, 7};
  int32_t got[6];
  k_argmax_rows_ref(got, rows[0], 6, V);
  for (int r = 0; r < 6; r++) {
    CHECK_EQ_INT(got[r], want[r]);
    eng_llm_sampling g = eng_llm_sampling_greedy();
    g.seed = 1234;
    CHECK_EQ_INT(eng_llm_sample(s, rows[r], &g, NULL, 0, (uint64_t)r), want[r]);
    if (r == 3 || r == 4) continue;  // the sorted path (top_k 1) is the argmax on NaN-free rows
    g.temperature = 1, g.top_k = 1;
    CHECK_EQ_INT(eng_llm_sampling_is_greedy(&g), 1);
    CHECK_EQ_INT(eng_llm_sample(s, rows[r], &g, NULL, 0, (uint64_t)r), want[r]);
  }
}

int main(void) {
  eng_llm_sampler *s = eng_llm_sampler_create(V);
  CHECK(s != NULL);
  CHECK(eng_llm_sampler_create(0) == NULL);
  if (!s) CHECK_DONE();
  test_greedy(s);
  test_filters(s);
  test_reproducible(s);
  test_greedy_rule(s);
  eng_llm_sampler_destroy(s);
  CHECK_DONE();
}
