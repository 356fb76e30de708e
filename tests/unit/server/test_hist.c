// test_hist: server/obs/hist.c. Percentiles and cumulative counts are checked
// against exact answers computed by sorting the same samples; small
// integers must come out exact; merging must equal recording everything in
// one histogram; and threads recording at once must lose nothing.
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "server/obs/hist.h"

// ---  helpers

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double unit(uint64_t *s) {
  return (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

// Nearest rank, the definition hist.h documents.
static uint64_t exact_percentile(const uint64_t *sorted, size_t n, double p) {
  double want = ceil(p / 100.0 * (double)n);
  size_t rank = want < 1 ? 1 : (size_t)want;
  return sorted[rank - 1];
}

static uint64_t exact_count_le(const uint64_t *sorted, size_t n, uint64_t le) {
  size_t lo = 0, hi = n;  // first index with value > le
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] <= le)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static prof_hist *make(prof_hist_config c) {
  prof_hist *h;
  err e;
  if (prof_hist_create(&c, &h, &e)) {
    fprintf(stderr, "prof_hist_create: %s\n", e.msg);
    exit(1);
  }
  return h;
}

static prof_hist_snap *snap_of(const prof_hist *h) {
  prof_hist_snap *s;
  err e;
  if (prof_hist_snap_create(h, &s, &e) || prof_hist_snapshot(h, s, &e)) {
    fprintf(stderr, "snapshot: %s\n", e.msg);
    exit(1);
  }
  return s;
}

// Two snapshots hold the same counts in every bucket: their cumulative
// counts agree at every bucket's upper bound.
static void check_same_counts(const prof_hist_config *c, const prof_hist_snap *a, const prof_hist_snap *b) {
  size_t nb = 0;
  uint64_t lo, hi;
  for (uint64_t v = 0; v <= (uint64_t)c->max_value; v = hi + 1) {
    prof_hist_bucket_range(c, v, &lo, &hi);
    nb++;
  }
  uint64_t *le = malloc(nb * sizeof *le), *ca = malloc(nb * sizeof *ca), *cb = malloc(nb * sizeof *cb);
  if (!le || !ca || !cb) exit(1);
  size_t k = 0;
  for (uint64_t v = 0; v <= (uint64_t)c->max_value; v = hi + 1) {
    prof_hist_bucket_range(c, v, &lo, &hi);
    le[k++] = hi;
  }
  prof_hist_cumulative(a, le, nb, ca);
  prof_hist_cumulative(b, le, nb, cb);
  size_t diff = 0;
  for (k = 0; k < nb; k++) diff += ca[k] != cb[k];
  CHECK_EQ_INT(diff, 0);
  prof_hist_stats sa, sb;
  prof_hist_summary(a, &sa);
  prof_hist_summary(b, &sb);
  CHECK_EQ_INT(sa.count, sb.count);
  CHECK_EQ_INT(sa.sum, sb.sum);
  CHECK_EQ_INT(sa.min, sb.min);
  CHECK_EQ_INT(sa.max, sb.max);
  free(le);
  free(ca);
  free(cb);
}

// ---  layout

static void test_layout(prof_hist_config c) {
  uint64_t exact_below = 2ull << c.sub_bucket_bits;
  uint64_t lo, hi, prev_hi = 0;
  size_t buckets = 0, bad_exact = 0, bad_width = 0, bad_contig = 0;
  for (uint64_t v = 0; v <= (uint64_t)c.max_value; v = hi + 1) {
    prof_hist_bucket_range(&c, v, &lo, &hi);
    if (lo != v || (buckets && lo != prev_hi + 1)) bad_contig++;
    if (v < exact_below && hi != lo) bad_exact++;
    // width <= lo / 2^b: what makes the middle within 2^-(b+1)
    if (v >= exact_below && (hi - lo + 1) > (lo >> c.sub_bucket_bits)) bad_width++;
    prev_hi = hi;
    buckets++;
  }
  CHECK_EQ_INT(bad_contig, 0);
  CHECK_EQ_INT(bad_exact, 0);
  CHECK_EQ_INT(bad_width, 0);
  CHECK_EQ_INT(prev_hi, c.max_value);  // the last bucket ends at max_value
  prof_hist_bucket_range(&c, UINT64_MAX, &lo, &hi);
  CHECK_EQ_INT(hi, c.max_value);
  // A value above the exact range sits strictly inside its bucket's bounds.
  if (c.max_value >= 1000000) {
    prof_hist_bucket_range(&c, 1000000, &lo, &hi);
    CHECK(lo < 1000000 && 1000000 < hi);
  }
}

static void test_bad_config(void) {
  prof_hist *h = (prof_hist *)1;
  err e;
  prof_hist_config c = {.max_value = 100, .sub_bucket_bits = 5};
  CHECK_EQ_INT(prof_hist_create(&c, &h, &e), ERR_INVALID_ARGUMENT);
  CHECK(h == NULL);
  CHECK_CONTAINS(e.msg, "sub_bucket_bits");
  c = (prof_hist_config){.max_value = 0, .sub_bucket_bits = 7};
  CHECK_EQ_INT(prof_hist_create(&c, &h, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "max_value");
  c = (prof_hist_config){.max_value = 100, .sub_bucket_bits = 7, .stripes = 3};
  CHECK_EQ_INT(prof_hist_create(&c, &h, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "stripes");
  c.stripes = 128;
  CHECK_EQ_INT(prof_hist_create(&c, &h, &e), ERR_INVALID_ARGUMENT);
  c.stripes = 64;
  CHECK_EQ_INT(prof_hist_create(&c, &h, &e), 0);
  prof_hist_destroy(h);
}

// ---  percentiles against sorted samples

typedef enum dist { UNIFORM, LOG_UNIFORM, BIMODAL, CONSTANT, TINY } dist;
static const char *dist_name[] = {"uniform", "log-uniform", "bimodal", "constant", "tiny"};

static uint64_t draw(dist d, uint64_t *rng) {
  switch (d) {
    case UNIFORM:
      return (uint64_t)(unit(rng) * 60e6);
    case LOG_UNIFORM:
      return (uint64_t)exp(unit(rng) * log(60e6));  // 1 us .. 60 s
    case BIMODAL:                                   // a fast path near 300 us and a slow one near 40 ms
      return unit(rng) < 0.8 ? 250 + (uint64_t)(unit(rng) * 100) : 30000 + (uint64_t)(unit(rng) * 20000);
    case CONSTANT:
      return 12345;
    case TINY:
      return splitmix(rng) % 300;  // crosses the exact range's end (256)
  }
  return 0;
}

static void test_percentiles(dist d, size_t n) {
  prof_hist_config c = PROF_HIST_LATENCY_US;
  prof_hist *h = make(c);
  uint64_t *xs = malloc(n * sizeof *xs), rng = 42 + d;
  if (!xs) exit(1);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) {
    xs[i] = draw(d, &rng);
    sum += xs[i];
    prof_hist_record(h, (int64_t)xs[i]);
  }
  qsort(xs, n, sizeof *xs, cmp_u64);
  prof_hist_snap *s = snap_of(h);
  prof_hist_stats st;
  prof_hist_summary(s, &st);
  CHECK_EQ_INT(st.count, n);
  CHECK_EQ_INT(st.sum, sum);
  CHECK_EQ_INT(st.min, xs[0]);
  CHECK_EQ_INT(st.max, xs[n - 1]);
  CHECK_NEAR(st.mean, (double)sum / (double)n, 1e-12, 0);
  CHECK_EQ_INT(st.underflow + st.overflow, 0);

  const double ps[] = {0, 1, 50, 90, 99, 99.9, 100, 12.5, 75, 99.99};
  const double bound = 1.0 / 256;  // 2^-(7+1)
  double worst = 0;
  for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
    uint64_t want = exact_percentile(xs, n, ps[k]);
    uint64_t got = prof_hist_percentile(s, ps[k]);
    double rel = want ? fabs((double)got - (double)want) / (double)want : (double)got;
    if (rel > worst) worst = rel;
    if (rel > bound)
      fprintf(stderr, "  %s p%g: %llu vs exact %llu\n", dist_name[d], ps[k], (unsigned long long)got,
              (unsigned long long)want);
    CHECK(rel <= bound);
    if (want < 256) CHECK_EQ_INT(got, want);  // exact range
  }
  CHECK(worst <= 0.01);
  CHECK_EQ_INT(prof_hist_percentile(s, 0), xs[0]);
  CHECK_EQ_INT(prof_hist_percentile(s, 100), xs[n - 1]);

  // Cumulative counts at Prometheus-like bounds (us, ascending). Each must be
  // the exact count at the last bucket bound L <= le, never above le.
  const uint64_t le[] = {0,     100,   255,   256,    300,    500,     1000,     2500,     5000,
                         10000, 25000, 50000, 100000, 250000, 1000000, 10000000, 60000000, 100000000};
  const size_t nle = sizeof le / sizeof le[0];
  uint64_t counts[sizeof le / sizeof le[0]];
  prof_hist_cumulative(s, le, nle, counts);
  for (size_t k = 0; k < nle; k++) {
    uint64_t lo, hi;
    prof_hist_bucket_range(&c, le[k], &lo, &hi);
    uint64_t L = (hi == le[k] || le[k] >= (uint64_t)c.max_value) ? le[k] : lo - 1;
    CHECK_EQ_INT(counts[k], exact_count_le(xs, n, L));
    CHECK(counts[k] <= exact_count_le(xs, n, le[k]));
    CHECK(counts[k] >= exact_count_le(xs, n, (uint64_t)((double)le[k] * (1.0 - 1.0 / 128))));
    if (le[k] < 256) CHECK_EQ_INT(counts[k], exact_count_le(xs, n, le[k]));
  }
  CHECK_EQ_INT(counts[nle - 1], n);
  prof_hist_snap_destroy(s);
  prof_hist_destroy(h);
  free(xs);
}

// ---  small integers (batch sizes)

static void test_small_ints(void) {
  prof_hist_config c = PROF_HIST_SMALL_INT(1024);
  prof_hist *h = make(c);
  size_t n = 0;
  uint64_t *xs = malloc(1024 * 8 * sizeof *xs);
  if (!xs) exit(1);
  for (uint64_t v = 1; v <= 1024; v++)
    for (uint64_t k = 0; k < v % 7 + 1; k++) {
      xs[n++] = v;
      prof_hist_record(h, (int64_t)v);
    }
  qsort(xs, n, sizeof *xs, cmp_u64);
  prof_hist_snap *s = snap_of(h);
  size_t bad = 0;
  for (double p = 0; p <= 100; p += 0.25) bad += prof_hist_percentile(s, p) != exact_percentile(xs, n, p);
  CHECK_EQ_INT(bad, 0);
  uint64_t le[1026], counts[1026];
  for (size_t v = 0; v < 1026; v++) le[v] = v;
  prof_hist_cumulative(s, le, 1026, counts);
  bad = 0;
  for (size_t v = 0; v < 1026; v++) bad += counts[v] != exact_count_le(xs, n, v);
  CHECK_EQ_INT(bad, 0);
  prof_hist_stats st;
  prof_hist_summary(s, &st);
  CHECK_EQ_INT(st.count, n);
  CHECK_EQ_INT(st.min, 1);
  CHECK_EQ_INT(st.max, 1024);
  prof_hist_snap_destroy(s);
  prof_hist_destroy(h);
  free(xs);
}

// ---  clamping, empty, merge, windows

static void test_clamp_and_empty(void) {
  prof_hist_config c = {.max_value = 1000, .sub_bucket_bits = 6};
  prof_hist *h = make(c);
  prof_hist_snap *s = snap_of(h);
  prof_hist_stats st;
  prof_hist_summary(s, &st);
  CHECK_EQ_INT(st.count, 0);
  CHECK_EQ_INT(st.min, 0);
  CHECK_EQ_INT(st.max, 0);
  CHECK(st.mean == 0);
  CHECK_EQ_INT(prof_hist_percentile(s, 50), 0);
  uint64_t le = 1000, cnt = 7;
  prof_hist_cumulative(s, &le, 1, &cnt);
  CHECK_EQ_INT(cnt, 0);

  prof_hist_record(h, -5);
  prof_hist_record(h, 500);
  prof_hist_record(h, 1100);
  prof_hist_record(h, INT64_MAX);
  CHECK_EQ_INT(prof_hist_snapshot(h, s, NULL), 0);
  prof_hist_summary(s, &st);
  CHECK_EQ_INT(st.count, 4);
  CHECK_EQ_INT(st.underflow, 1);
  CHECK_EQ_INT(st.overflow, 2);
  CHECK_EQ_INT(st.min, 0);
  CHECK_EQ_INT(st.max, 1000);
  CHECK_EQ_INT(st.sum, 2500);
  CHECK_EQ_INT(prof_hist_percentile(s, 100), 1000);
  CHECK_EQ_INT(prof_hist_percentile(s, 0), 0);
  prof_hist_cumulative(s, &le, 1, &cnt);
  CHECK_EQ_INT(cnt, 4);  // the clamped ones are <= max_value, and counted
  prof_hist_snap_destroy(s);
  prof_hist_destroy(h);
}

static void test_merge(void) {
  prof_hist_config c = PROF_HIST_LATENCY_US;
  prof_hist *a = make(c), *b = make(c), *all = make(c);
  uint64_t rng = 7;
  for (int i = 0; i < 50000; i++) {
    uint64_t v = draw(LOG_UNIFORM, &rng);
    prof_hist_record(i % 3 ? a : b, (int64_t)v);
    prof_hist_record(all, (int64_t)v);
  }
  prof_hist_record(a, -1);
  prof_hist_record(all, -1);
  prof_hist_record(b, 70000000);
  prof_hist_record(all, 70000000);
  prof_hist_snap *want = snap_of(all);

  // Merge on read: live histograms into one snapshot.
  prof_hist_snap *got = snap_of(a);
  err e;
  CHECK_EQ_INT(prof_hist_merge(got, b, &e), 0);
  check_same_counts(&c, got, want);
  prof_hist_stats sg, sw;
  prof_hist_summary(got, &sg);
  prof_hist_summary(want, &sw);
  CHECK_EQ_INT(sg.underflow, 1);
  CHECK_EQ_INT(sg.overflow, 1);
  CHECK_EQ_INT(sw.underflow, 1);
  CHECK_EQ_INT(sw.overflow, 1);
  for (double p = 0; p <= 100; p += 0.5) CHECK_EQ_INT(prof_hist_percentile(got, p), prof_hist_percentile(want, p));

  // Snapshots into a snapshot.
  prof_hist_snap *sa = snap_of(a), *sb = snap_of(b);
  CHECK_EQ_INT(prof_hist_snap_merge(sa, sb, &e), 0);
  check_same_counts(&c, sa, want);

  // Windows: (all after more samples) - (all before) = the new samples.
  prof_hist *fresh = make(c);
  for (int i = 0; i < 1000; i++) {
    uint64_t v = 2000 + (uint64_t)i * 3;
    prof_hist_record(all, (int64_t)v);
    prof_hist_record(fresh, (int64_t)v);
  }
  prof_hist_snap *later = snap_of(all), *fs = snap_of(fresh);
  CHECK_EQ_INT(prof_hist_snap_sub(later, want, &e), 0);
  prof_hist_stats sl, sf;
  prof_hist_summary(later, &sl);
  prof_hist_summary(fs, &sf);
  CHECK_EQ_INT(sl.count, 1000);
  CHECK_EQ_INT(sl.sum, sf.sum);
  CHECK_EQ_INT(sl.underflow + sl.overflow, 0);
  CHECK(sl.min <= 2000 && sl.min >= 2000 - 2000 / 128);
  CHECK(sl.max >= 4997 && sl.max <= 4997 + 4997 / 128);
  for (double p = 1; p < 100; p += 7) CHECK_EQ_INT(prof_hist_percentile(later, p), prof_hist_percentile(fs, p));
  // In the wrong order it refuses.
  prof_hist_snap *again = snap_of(all);
  CHECK_EQ_INT(prof_hist_snap_sub(want, again, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "negative");

  // Different layouts do not merge.
  prof_hist *other = make(PROF_HIST_SMALL_INT(64));
  CHECK_EQ_INT(prof_hist_merge(got, other, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "layouts differ");
  CHECK_EQ_INT(prof_hist_snapshot(other, got, &e), ERR_INVALID_ARGUMENT);
  prof_hist_snap *so = snap_of(other);
  CHECK_EQ_INT(prof_hist_snap_merge(got, so, &e), ERR_INVALID_ARGUMENT);
  check_same_counts(&c, got, want);  // untouched by the refusals

  prof_hist_snap_destroy(so);
  prof_hist_snap_destroy(again);
  prof_hist_snap_destroy(later);
  prof_hist_snap_destroy(fs);
  prof_hist_snap_destroy(sa);
  prof_hist_snap_destroy(sb);
  prof_hist_snap_destroy(got);
  prof_hist_snap_destroy(want);
  prof_hist_destroy(other);
  prof_hist_destroy(fresh);
  prof_hist_destroy(a);
  prof_hist_destroy(b);
  prof_hist_destroy(all);
}

// ---  threads

#define THREAD_RECORDS 1000000

typedef struct worker {
  prof_hist *h;
  uint64_t seed, sum;
} worker;

static void *record_many(void *arg) {
  worker *w = arg;
  uint64_t rng = w->seed;
  for (int i = 0; i < THREAD_RECORDS; i++) {
    uint64_t v = splitmix(&rng) % 5000000;
    w->sum += v;
    prof_hist_record(w->h, (int64_t)v);
  }
  return NULL;
}

typedef struct reader {
  prof_hist *h;
  int *stop;  // set by main after the workers joined
  int snapshots, bad;
} reader;

// Takes snapshots while the workers record: counts never go backwards and
// percentiles stay inside [min, max].
static void *read_while_recording(void *arg) {
  reader *r = arg;
  prof_hist_snap *s;
  if (prof_hist_snap_create(r->h, &s, NULL)) return NULL;
  uint64_t last = 0;
  while (!__atomic_load_n(r->stop, __ATOMIC_ACQUIRE) || r->snapshots == 0) {
    if (prof_hist_snapshot(r->h, s, NULL)) r->bad++;
    prof_hist_stats st;
    prof_hist_summary(s, &st);
    if (st.count < last) r->bad++;
    last = st.count;
    uint64_t p99 = prof_hist_percentile(s, 99);
    if (st.count && (p99 < st.min || p99 > st.max)) r->bad++;
    r->snapshots++;
  }
  prof_hist_snap_destroy(s);
  return NULL;
}

static void test_threads(int n_threads, int stripes) {
  prof_hist_config c = PROF_HIST_LATENCY_US;
  c.stripes = stripes;
  prof_hist *h = make(c);
  worker w[4];
  pthread_t t[4], rt;
  int stop = 0;
  reader r = {h, &stop, 0, 0};
  CHECK_EQ_INT(pthread_create(&rt, NULL, read_while_recording, &r), 0);
  for (int i = 0; i < n_threads; i++) {
    w[i] = (worker){h, 1000 + (uint64_t)i, 0};
    CHECK_EQ_INT(pthread_create(&t[i], NULL, record_many, &w[i]), 0);
  }
  uint64_t sum = 0;
  for (int i = 0; i < n_threads; i++) {
    CHECK_EQ_INT(pthread_join(t[i], NULL), 0);
    sum += w[i].sum;
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  CHECK_EQ_INT(pthread_join(rt, NULL), 0);
  CHECK(r.snapshots > 0);
  CHECK_EQ_INT(r.bad, 0);

  prof_hist_snap *s = snap_of(h);
  prof_hist_stats st;
  prof_hist_summary(s, &st);
  CHECK_EQ_INT(st.count, (uint64_t)n_threads * THREAD_RECORDS);
  CHECK_EQ_INT(st.sum, sum);

  // Same values recorded by one thread: every bucket agrees.
  prof_hist *one = make(c);
  for (int i = 0; i < n_threads; i++) {
    uint64_t rng = 1000 + (uint64_t)i;
    for (int k = 0; k < THREAD_RECORDS; k++) prof_hist_record(one, (int64_t)(splitmix(&rng) % 5000000));
  }
  prof_hist_snap *so = snap_of(one);
  check_same_counts(&c, s, so);
  prof_hist_snap_destroy(so);
  prof_hist_snap_destroy(s);
  prof_hist_destroy(one);
  prof_hist_destroy(h);
}

int main(void) {
  test_layout(PROF_HIST_LATENCY_US);
  test_layout(PROF_HIST_SMALL_INT(1024));
  test_layout((prof_hist_config){.max_value = INT64_C(1) << 62, .sub_bucket_bits = 6});
  test_bad_config();
  for (dist d = UNIFORM; d <= TINY; d++) test_percentiles(d, 200000);
  test_percentiles(LOG_UNIFORM, 7);  // few samples: ranks round up
  test_small_ints();
  test_clamp_and_empty();
  test_merge();
  test_threads(2, 4);
  test_threads(4, 4);
  test_threads(4, 1);  // every thread on the same counters
  CHECK_DONE();
}
