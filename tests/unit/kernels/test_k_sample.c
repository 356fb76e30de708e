// tests/unit/kernels/test_k_sample.c: kernels/sample/k_sample.c (the C
// reference of the device sampler) against the rule of k_sample.h computed
// here a second way: no sort, every cut found by bisection over the 64-bit
// keys with the masses summed straight from the definition (the old
// reference's shape), over thousands of random rows and parameters
// (temperature, top_k, top_p, min_p, repetition penalty over seen ids with
// repeats and out-of-range ones; logits with and without ties;
// vocabularies from 1 to 3000; FP32, FP16 and BF16). eng_llm_sample (which
// draws through k_sample_rows_ref) on the widened FP32 values must give the
// same ids. Then the edges the rule states itself: mode 0 rows untouched,
// NaN as -inf, -0 as +0, a row of -inf or with +inf, a top_p met exactly,
// the argument checks.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/llm_sample.h"
#include "kernels/k_ref.h"
#include "kernels/sample/k_sample.h"
#include "kernels/sample/k_sample_rule.h"
#include "tests/unit/check.h"

static uint64_t rng_s = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_s ^= rng_s >> 12;
  rng_s ^= rng_s << 25;
  rng_s ^= rng_s >> 27;
  return rng_s * 2685821657736338717ull;
}
static float unif(float lo, float hi) {
  return lo + (hi - lo) * (float)((rnd() >> 40) * (1.0 / 16777216.0));
}

static uint16_t to_bf16(float v) {  // round to nearest even (finite inputs)
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float v;
  memcpy(&v, &b, sizeof v);
  return v;
}

// --- the rule straight from its definition (k_sample.h), no sorting

typedef struct brute {
  const float *v;  // the penalised, tempered, canonical logits
  int64_t V;
  float mx;
  int F;
  uint64_t ck;  // top_k's last key (UINT64_MAX: all)
} brute;

static uint64_t bkey(const brute *b, int64_t i) {
  return ks_key(ks_desc32(b->v[i]), (uint32_t)i);
}
static uint64_t bweight(const brute *b, int64_t i) {
  return ks_weight(b->v[i] - b->mx, b->F);
}
// The count (by_count) or the weight of the kept keys <= c.
static uint64_t bsum(const brute *b, uint64_t c, int by_count) {
  uint64_t s = 0;
  for (int64_t i = 0; i < b->V; i++) {
    uint64_t k = bkey(b, i);
    if (k <= c && k <= b->ck) s += by_count ? 1 : bweight(b, i);
  }
  return s;
}
// The smallest c in [lo, hi] with bsum(c) >= need (bsum(hi) >= need).
static uint64_t bsearch_key(const brute *b, uint64_t lo, uint64_t hi, uint64_t need, int by_count) {
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (bsum(b, mid, by_count) >= need)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

static int32_t brute_sample(const float *l, int64_t V, const k_sample_param *p, const int32_t *seen) {
  float *v = malloc((size_t)V * sizeof *v);
  for (int64_t i = 0; i < V; i++) v[i] = ks_canon(l[i]);
  if (p->repetition_penalty > 0 && p->repetition_penalty != 1)
    for (int64_t j = 0; j < p->n_seen; j++) {
      int32_t t = seen[p->seen_off + j];
      if (t >= 0 && t < V) v[t] = ks_penalize(ks_canon(l[t]), p->repetition_penalty);
    }
  int greedy = !(p->temperature > 0);
  if (!greedy)
    for (int64_t i = 0; i < V; i++) v[i] = ks_canon(v[i] * (1.0f / p->temperature));
  brute b = {v, V, 0, ks_wbits((uint32_t)V), UINT64_MAX};
  uint64_t top = UINT64_MAX, maxk = 0;
  for (int64_t i = 0; i < V; i++) {
    uint64_t k = bkey(&b, i);
    top = k < top ? k : top;
    maxk = k > maxk ? k : maxk;
  }
  b.mx = ks_undesc32((uint32_t)(top >> 32));
  int32_t id = (int32_t)(uint32_t)top;
  if (greedy || isinf(b.mx)) goto done;
  if (p->top_k > 0 && p->top_k < V) b.ck = bsearch_key(&b, top, maxk, (uint64_t)p->top_k, 1);
  uint64_t cut = b.ck < maxk ? b.ck : maxk, total = bsum(&b, cut, 0);
  if (p->top_p > 0 && p->top_p < 1) {
    uint64_t thr = ks_ceil_mul(p->top_p, (double)total);
    if (thr < total) cut = bsearch_key(&b, top, cut, thr, 0);
  }
  if (p->min_p > 0) {
    uint64_t floor_w = ks_ceil_mul(p->min_p, (double)((uint64_t)1 << b.F)), first = UINT64_MAX;
    for (int64_t i = 0; i < V; i++) {
      uint64_t k = bkey(&b, i);
      if (k > top && k <= cut && bweight(&b, i) < floor_w && k < first) first = k;
    }
    if (first != UINT64_MAX) cut = first - 1;
  }
  uint64_t kept = bsum(&b, cut, 0);
  id = (int32_t)(uint32_t)bsearch_key(&b, top, cut, ks_draw_thr(p->u, kept), 0);
done:
  free(v);
  return id;
}

// One random row: k_sample_rows_ref on x (type dt) against brute_sample and
// eng_llm_sample on its FP32 values. Returns 1 when the ids match.
static int one_row(int64_t V, dtype dt, int ties, int64_t *n_sampled_draws) {
  float *l = malloc((size_t)V * sizeof *l), *scratch = malloc((size_t)V * 2 * sizeof *scratch);
  uint16_t *h = malloc((size_t)V * sizeof *h);
  for (int64_t i = 0; i < V; i++) {
    l[i] = unif(-8, 8);
    if (ties) l[i] = roundf(l[i] * 2) / 2;  // 33 values: many ties, at the top too
  }
  const void *x = l;
  if (dt == DT_FP16) {
    k_f32_to_f16(h, l, (size_t)V);
    k_f16_to_f32(l, h, (size_t)V);
    x = h;
  } else if (dt == DT_BF16) {
    for (int64_t i = 0; i < V; i++) l[i] = from_bf16(h[i] = to_bf16(l[i]));
    x = h;
  }
  static const float temps[] = {0, 0.25f, 0.7f, 1, 1.5f, 3};
  static const float tps[] = {1, 0.5f, 0.9f, 0.95f, 0.2f, 1};
  static const float rps[] = {1, 1, 1.3f, 0.8f, 2};
  eng_llm_sampling p = eng_llm_sampling_greedy();
  p.temperature = temps[rnd() % 6];
  int64_t ks[] = {0, 0, 1, 5, 50, V, V + 3};
  p.top_k = (int32_t)ks[rnd() % 7];
  p.top_p = tps[rnd() % 6];
  p.min_p = rnd() % 3 == 0 ? 0.05f : 0;
  p.repetition_penalty = rps[rnd() % 5];
  p.seed = rnd();
  uint64_t counter = rnd() % 1000;
  int32_t seen[40];
  int64_t n_seen = (int64_t)(rnd() % 40);
  for (int64_t j = 0; j < n_seen; j++) {
    seen[j] = (int32_t)(rnd() % (uint64_t)(V + 2)) - 1;  // -1 and V: outside, ignored
    if (j > 0 && rnd() % 4 == 0) seen[j] = seen[j - 1];  // repeats
  }
  // the seen ids sit at an offset in a shared array, as the runner packs them
  int32_t packed[48] = {7, 7, 7};
  memcpy(packed + 3, seen, (size_t)n_seen * sizeof *seen);
  k_sample_param kp = {.mode = 1,
                       .top_k = p.top_k,
                       .temperature = p.temperature,
                       .top_p = p.top_p,
                       .min_p = p.min_p,
                       .repetition_penalty = p.repetition_penalty,
                       .seen_off = 3,
                       .n_seen = n_seen,
                       .u = eng_llm_uniform(p.seed, counter)};
  eng_llm_sampler *s = eng_llm_sampler_create(V);
  int32_t want = brute_sample(l, V, &kp, packed), host = eng_llm_sample(s, l, &p, seen, n_seen, counter), got = -5;
  CHECK_EQ_INT(k_sample_rows_ref(&got, x, dt, 1, (size_t)V, &kp, packed, scratch), 0);
  if (got != want || host != want)
    fprintf(stderr,
            "V %lld %s ties %d: temperature %g top_k %d top_p %g min_p %g rp %g seen %lld u %.17g: "
            "rule %d, llm_sample %d, k_sample %d\n",
            (long long)V, dtype_wire_name(dt), ties, p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty,
            (long long)n_seen, kp.u, want, host, got);
  *n_sampled_draws += p.temperature > 0;
  eng_llm_sampler_destroy(s);
  free(l), free(scratch), free(h);
  return got == want && host == want;
}

static void test_random_rows(void) {
  static const int64_t vocabs[] = {1, 2, 7, 64, 1000, 1024, 1500, 3000};
  static const dtype dts[] = {DT_FP32, DT_FP16, DT_BF16};
  int64_t rows = 0, same = 0, draws = 0;
  for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++)
    for (size_t d = 0; d < 3; d++)
      for (int ties = 0; ties < 2; ties++) {
        int n = vocabs[v] >= 1000 ? 40 : 150;
        for (int k = 0; k < n; k++, rows++) same += one_row(vocabs[v], dts[d], ties, &draws);
      }
  printf(
      "k_sample_rows_ref vs the rule by bisection and eng_llm_sample: %lld of %lld rows the same id (%lld drawn, the "
      "rest greedy)\n",
      (long long)same, (long long)rows, (long long)draws);
  CHECK_EQ_INT(same, rows);
  CHECK(draws > rows / 2);
}

static int32_t ref1(const float *l, int64_t V, k_sample_param p) {
  uint64_t scratch[32];  // the keys: 8-byte aligned
  int32_t id = -7;
  CHECK(V <= 32);
  CHECK_EQ_INT(k_sample_rows_ref(&id, l, DT_FP32, 1, (size_t)V, &p, NULL, (float *)scratch), 0);
  return id;
}

static void test_edges(void) {
  k_sample_param p = {.mode = 1, .temperature = 1, .top_p = 1, .repetition_penalty = 1, .u = 0.5};
  // mode 0: untouched
  float l[4] = {1, 2, 3, 4};
  uint64_t scratch[4];
  int32_t ids[2] = {-3, -3};
  k_sample_param two[2] = {p, p};
  two[0].mode = 0;
  CHECK_EQ_INT(k_sample_rows_ref(ids, l, DT_FP32, 2, 2, two, NULL, (float *)scratch), 0);
  CHECK_EQ_INT(ids[0], -3);
  CHECK(ids[1] == 0 || ids[1] == 1);
  // u 0 takes the first in order, u just below 1 the last kept; -0 and +0 tie (the lower id first)
  float z[3] = {-0.0f, 0.0f, -50.0f};
  p.u = 0;
  CHECK_EQ_INT(ref1(z, 3, p), 0);
  p.u = 0.9999999;
  p.top_k = 2;
  CHECK_EQ_INT(ref1(z, 3, p), 1);
  // two equal logits: top_p 0.5 is met exactly by the first (the head stops there, whatever u); just above it
  // both stay, and u picks the half
  float eq[3] = {2.0f, 2.0f, -90.0f};
  p.top_k = 0;
  p.top_p = 0.5f;
  for (double u = 0; u < 1; u += 0.0625) {
    p.u = u;
    CHECK_EQ_INT(ref1(eq, 3, p), 0);
  }
  p.top_p = 0.5000001f;
  p.u = 0.49;
  CHECK_EQ_INT(ref1(eq, 3, p), 0);
  p.u = 0.51;
  CHECK_EQ_INT(ref1(eq, 3, p), 1);
  // -90 nats down weighs 0 (under 2^-F of the top): never drawn, even at u just below 1
  p.top_p = 1;
  p.u = 0.9999999999;
  CHECK_EQ_INT(ref1(eq, 3, p), 1);
  // min_p at exactly the top's weight keeps the equal one (not below the floor) and drops the rest
  float mp[3] = {1.0f, 1.0f, 0.999f};
  p.min_p = 1;
  p.u = 0.9999999;
  CHECK_EQ_INT(ref1(mp, 3, p), 1);
  p.min_p = 0;
  // NaN is -inf: never drawn, greedy never picks it, even at id 0
  float n[3] = {NAN, 1.0f, 0.5f};
  p.top_k = 0;
  for (double u = 0; u < 1; u += 0.125) {
    p.u = u;
    CHECK(ref1(n, 3, p) != 0);
  }
  p.temperature = 0;
  CHECK_EQ_INT(ref1(n, 3, p), 1);
  // every logit -inf: the first id; +inf: that token
  float ninf[3] = {-INFINITY, -INFINITY, -INFINITY}, pinf[3] = {1, INFINITY, 2};
  p.temperature = 1;
  p.u = 0.7;
  CHECK_EQ_INT(ref1(ninf, 3, p), 0);
  CHECK_EQ_INT(ref1(pinf, 3, p), 1);
  // the penalty at temperature 0 is the argmax of the penalised logits (llm_sample.c's example)
  float L[8] = {1.0f, 3.0f, 2.5f, -1.0f, 3.0f, 0.5f, -4.0f, 2.9f};
  int32_t seen[3] = {1, 4, 4};
  k_sample_param g = {.mode = 1, .temperature = 0, .top_p = 1, .repetition_penalty = 2, .n_seen = 3};
  uint64_t sc[8];
  int32_t id = -1;
  CHECK_EQ_INT(k_sample_rows_ref(&id, L, DT_FP32, 1, 8, &g, seen, (float *)sc), 0);
  CHECK_EQ_INT(id, 7);
  // refused: another dtype, vocab 0
  CHECK_EQ_INT(k_sample_rows_ref(&id, L, DT_INT32, 1, 8, &g, seen, (float *)sc), -1);
  CHECK_EQ_INT(k_sample_rows_ref(&id, L, DT_FP32, 1, 0, &g, seen, (float *)sc), -1);
}

int main(void) {
  test_edges();
  test_random_rows();
  CHECK_DONE();
}
