// test_ld_hist: clients/load/hist.c and the stability rule of stats.c.
// Percentiles are checked against exact nearest-rank percentiles of the same
// samples (sorted), within the documented 0.4% (asserted at 1%); small
// values must be exact; merging must equal recording everything in one.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "clients/load/hist.h"
#include "clients/load/rng.h"
#include "clients/load/stats.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

// Nearest rank, the definition hist.h documents (with the same slack for p*n near an integer).
static uint64_t exact(const uint64_t *sorted, size_t n, double p) {
  double want = ceil(p * (double)n / 100.0 - 1e-7);
  size_t rank = want < 1 ? 1 : (size_t)want;
  if (rank > n) rank = n;
  return sorted[rank - 1];
}

static const double PS[] = {0, 0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100};

// mean: also check the mean (not where the sum overflows 64 bits, which hist.h allows).
static void check_against_exact(const char *what, uint64_t *v, size_t n, bool mean) {
  ld_hist *h = ld_hist_create();
  double sum = 0;
  for (size_t i = 0; i < n; i++) ld_hist_record(h, v[i]), sum += (double)v[i];
  qsort(v, n, sizeof *v, cmp_u64);
  CHECK_EQ_INT(ld_hist_count(h), n);
  CHECK_EQ_INT(ld_hist_min(h), v[0]);
  CHECK_EQ_INT(ld_hist_max(h), v[n - 1]);
  if (mean) CHECK_NEAR(ld_hist_mean(h), sum / (double)n, 1e-12, 0);
  for (size_t i = 0; i < sizeof PS / sizeof PS[0]; i++) {
    uint64_t got = ld_hist_percentile(h, PS[i]), want = exact(v, n, PS[i]);
    if (fabs((double)got - (double)want) > 0.01 * (double)want)
      fprintf(stderr, "%s: p%g got %llu want %llu\n", what, PS[i], (unsigned long long)got, (unsigned long long)want);
    CHECK_NEAR(got, want, 0.01, 0);
  }
  ld_hist_destroy(h);
}

static void test_distributions(void) {
  enum { N = 200000 };
  uint64_t *v = malloc(N * sizeof *v);
  uint64_t rng = 42;
  // Log-uniform over 1 us .. 10 s in ns: every octave of the range is hit.
  for (size_t i = 0; i < N; i++) v[i] = (uint64_t)(1e3 * pow(10.0, 7.0 * ld_rng_uniform(&rng)));
  check_against_exact("log-uniform", v, N, true);
  // A latency-like body with a tail: 300 us +- noise, 1% at 20x.
  for (size_t i = 0; i < N; i++) {
    double x = 300e3 * (1 + 0.2 * (ld_rng_uniform(&rng) - 0.5));
    if (ld_rng_uniform(&rng) < 0.01) x *= 20;
    v[i] = (uint64_t)x;
  }
  check_against_exact("body+tail", v, N, true);
  // Few samples: ranks matter more than buckets.
  for (size_t n = 1; n <= 7; n++) {
    for (size_t i = 0; i < n; i++) v[i] = 1000 + ld_rng_next(&rng) % 100000;
    check_against_exact("few", v, n, true);
  }
  // Huge values still land in range.
  v[0] = UINT64_MAX, v[1] = UINT64_MAX / 3, v[2] = 1ull << 62;
  check_against_exact("huge", v, 3, false);
  free(v);
}

static void test_small_exact(void) {
  ld_hist *h = ld_hist_create();
  for (uint64_t x = 0; x < 256; x++) ld_hist_record(h, x);
  CHECK_EQ_INT(ld_hist_percentile(h, 50), 127);  // rank 128 of 0..255
  CHECK_EQ_INT(ld_hist_percentile(h, 100), 255);
  CHECK_EQ_INT(ld_hist_percentile(h, 0), 0);
  ld_hist_reset(h);
  CHECK_EQ_INT(ld_hist_count(h), 0);
  CHECK_EQ_INT(ld_hist_percentile(h, 50), 0);
  CHECK_EQ_INT(ld_hist_min(h), 0);
  CHECK(ld_hist_mean(h) == 0);
  ld_hist_record(h, 123456789);
  CHECK_EQ_INT(ld_hist_percentile(h, 1), 123456789);  // clamped to the one sample
  CHECK_EQ_INT(ld_hist_percentile(h, 99.9), 123456789);
  ld_hist_destroy(h);
}

static void test_merge(void) {
  ld_hist *a = ld_hist_create(), *b = ld_hist_create(), *all = ld_hist_create();
  uint64_t rng = 7;
  for (int i = 0; i < 50000; i++) {
    uint64_t x = ld_rng_next(&rng) % 50000000;
    ld_hist_record(i % 3 ? a : b, x);
    ld_hist_record(all, x);
  }
  ld_hist_merge(a, b);
  CHECK_EQ_INT(ld_hist_count(a), ld_hist_count(all));
  CHECK_EQ_INT(ld_hist_min(a), ld_hist_min(all));
  CHECK_EQ_INT(ld_hist_max(a), ld_hist_max(all));
  CHECK(ld_hist_mean(a) == ld_hist_mean(all));
  for (size_t i = 0; i < sizeof PS / sizeof PS[0]; i++)
    CHECK_EQ_INT(ld_hist_percentile(a, PS[i]), ld_hist_percentile(all, PS[i]));
  ld_hist *empty = ld_hist_create();
  ld_hist_merge(a, empty);  // merging nothing changes nothing
  CHECK_EQ_INT(ld_hist_count(a), ld_hist_count(all));
  ld_hist_merge(empty, a);
  CHECK_EQ_INT(ld_hist_min(empty), ld_hist_min(all));
  ld_hist_destroy(a), ld_hist_destroy(b), ld_hist_destroy(all), ld_hist_destroy(empty);
}

static void test_window(void) {
  ld_window w, x;
  CHECK_EQ_INT(ld_window_init(&w), 0);
  CHECK_EQ_INT(ld_window_init(&x), 0);
  for (int i = 1; i <= 100; i++) ld_hist_record(w.lat, (uint64_t)i * 1000), w.ok++;
  w.errors[3] = 2;
  w.errors[LD_KIND_VALIDATION] = 1;
  w.duration_ns = 500000000;
  ld_window_merge(&x, &w);
  ld_window_merge(&x, &w);
  ld_summary s;
  ld_window_summarize(&x, &s);
  CHECK_EQ_INT(s.ok, 200);
  CHECK_EQ_INT(s.errors, 6);
  CHECK_NEAR(s.rps, 200.0, 1e-12, 0);
  CHECK_NEAR(s.avg_us, 50.5, 1e-12, 0);
  CHECK_NEAR(s.p50_us, 50.0, 0.01, 0);
  CHECK_NEAR(s.p99_us, 99.0, 0.01, 0);
  CHECK_EQ_STR(ld_kind_name(3), "INVALID_ARGUMENT");
  CHECK_EQ_STR(ld_kind_name(14), "UNAVAILABLE");
  CHECK_EQ_STR(ld_kind_name(LD_KIND_VALIDATION), "VALIDATION");
  CHECK_EQ_STR(ld_kind_name(LD_KIND_DROPPED), "CLIENT_DROPPED");
  CHECK_EQ_STR(ld_kind_name(99), "?");
  ld_window_reset(&x);
  CHECK_EQ_INT(ld_window_errors(&x), 0);
  CHECK_EQ_INT(ld_hist_count(x.lat), 0);
  ld_window_close(&w), ld_window_close(&x);
}

static void test_stable(void) {
  ld_summary s[4] = {{.rps = 1000, .avg_us = 300, .p50_us = 290},
                     {.rps = 1050, .avg_us = 310, .p50_us = 300},
                     {.rps = 980, .avg_us = 295, .p50_us = 285},
                     {.rps = 1300, .avg_us = 300, .p50_us = 290}};
  CHECK(ld_stable(s, 3, 10));
  CHECK(!ld_stable(s, 3, 2));       // 1050 is 4% above the mean of 1010
  CHECK(!ld_stable(s + 1, 3, 10));  // the throughput jump
  s[1].p50_us = 400;
  CHECK(!ld_stable(s, 3, 10));  // latency alone can make it unstable
  ld_summary zero[3] = {{0}, {0}, {0}};
  CHECK(ld_stable(zero, 3, 10));  // all requests failing is a steady state too
  CHECK(!ld_stable(s, 0, 10));
}

int main(void) {
  test_distributions();
  test_small_exact();
  test_merge();
  test_window();
  test_stable();
  CHECK_DONE();
}
