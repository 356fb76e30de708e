// server/obs/hist.c: log-linear histograms for the profiler (see hist.h for the
// layout and the error bound). The record path is a handful of relaxed
// atomics on the recording CPU's stripe and no branch that is taken in
// steady state; the read side adds the stripes into a plain snapshot and
// answers from there.
#include "server/obs/hist.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// One copy of the counters per stripe. A record touches only the stripe
// of the CPU it runs on, so threads on different CPUs mostly write
// different cache lines (with one copy, two threads on two cores paid
// 120-160 ns per record, see tests/bench/RESULTS.md); snapshots add the
// stripes up.
typedef struct stripe {
  _Atomic uint64_t sum, min, max, underflow, overflow;
  char pad_[64 - 5 * sizeof(uint64_t)];  // buckets start on their own line
  _Atomic uint64_t buckets[];
} stripe;
_Static_assert(sizeof(stripe) == 64, "stripe header is one cache line");

struct prof_hist {
  uint64_t max_value;
  unsigned bits, stripe_mask;
  size_t n_buckets, n_stripes, stripe_size;  // stripe_size: bytes, a multiple of 64
  _Alignas(64) unsigned char data[];         // n_stripes stripes
};

static stripe *stripe_at(prof_hist *h, size_t i) {
  return (stripe *)(void *)(h->data + i * h->stripe_size);
}
static const stripe *cstripe_at(const prof_hist *h, size_t i) {
  return (const stripe *)(const void *)(h->data + i * h->stripe_size);
}

struct prof_hist_snap {
  uint64_t max_value;
  unsigned bits;
  size_t n_buckets;
  uint64_t sum, min, max, underflow, overflow;  // min = UINT64_MAX when empty
  uint64_t buckets[];
};

// ---  layout

// Values below 2^(bits+1) map to themselves; above, the shift drops the low
// bits so that 2^bits buckets remain per power of two. OR-ing in 2^bits
// keeps clz defined for 0 and makes the shift 0 for small values.
static inline size_t bucket_of(unsigned bits, uint64_t v) {
  unsigned msb = 63u - (unsigned)__builtin_clzll(v | (1ull << bits));
  unsigned shift = msb - bits;
  return ((size_t)shift << bits) + (size_t)(v >> shift);
}

static void bucket_bounds(unsigned bits, size_t i, uint64_t *lo, uint64_t *hi) {
  size_t top = i >> bits;
  unsigned shift = top > 1 ? (unsigned)(top - 1) : 0;
  *lo = (uint64_t)(i - ((size_t)shift << bits)) << shift;
  *hi = *lo + ((1ull << shift) - 1);
}

// As bucket_bounds, but the last bucket ends at max_value: nothing larger
// is ever recorded.
static void bounds(unsigned bits, uint64_t max_value, size_t i, uint64_t *lo, uint64_t *hi) {
  bucket_bounds(bits, i, lo, hi);
  if (*hi > max_value) *hi = max_value;
}

static int check_config(const prof_hist_config *c, err *e) {
  if (!c) return err_set(e, ERR_INVALID_ARGUMENT, "histogram: no configuration");
  if (c->sub_bucket_bits < 6 || c->sub_bucket_bits > 16)
    return err_set(e, ERR_INVALID_ARGUMENT, "histogram: sub_bucket_bits %d is outside 6..16", c->sub_bucket_bits);
  if (c->max_value < 1 || c->max_value > (INT64_C(1) << 62))
    return err_set(e, ERR_INVALID_ARGUMENT, "histogram: max_value %lld is outside 1..2^62", (long long)c->max_value);
  if (c->stripes < 0 || c->stripes > 64 || (c->stripes & (c->stripes - 1)))
    return err_set(e, ERR_INVALID_ARGUMENT, "histogram: stripes %d is not a power of two in 1..64", c->stripes);
  return 0;
}

void prof_hist_bucket_range(const prof_hist_config *c, uint64_t v, uint64_t *lo, uint64_t *hi) {
  unsigned bits = (unsigned)c->sub_bucket_bits;
  uint64_t max = (uint64_t)c->max_value;
  bounds(bits, max, bucket_of(bits, v > max ? max : v), lo, hi);
}

// ---  live histograms

int prof_hist_create(const prof_hist_config *c, prof_hist **out, err *e) {
  *out = NULL;
  TRY(check_config(c, e));
  unsigned bits = (unsigned)c->sub_bucket_bits;
  size_t n = bucket_of(bits, (uint64_t)c->max_value) + 1;
  size_t n_stripes = c->stripes ? (size_t)c->stripes : 1;
  size_t stripe_size = (sizeof(stripe) + n * sizeof(_Atomic uint64_t) + 63) & ~(size_t)63;
  prof_hist *h = aligned_alloc(64, sizeof(prof_hist) + n_stripes * stripe_size);
  if (!h) return err_set(e, ERR_RESOURCE_EXHAUSTED, "histogram: out of memory for %zu x %zu buckets", n_stripes, n);
  h->max_value = (uint64_t)c->max_value;
  h->bits = bits;
  h->stripe_mask = (unsigned)n_stripes - 1;
  h->n_buckets = n;
  h->n_stripes = n_stripes;
  h->stripe_size = stripe_size;
  for (size_t k = 0; k < n_stripes; k++) {
    stripe *st = stripe_at(h, k);
    atomic_init(&st->sum, 0);
    atomic_init(&st->min, UINT64_MAX);
    atomic_init(&st->max, 0);
    atomic_init(&st->underflow, 0);
    atomic_init(&st->overflow, 0);
    for (size_t i = 0; i < n; i++) atomic_init(&st->buckets[i], 0);
  }
  *out = h;
  return 0;
}

void prof_hist_destroy(prof_hist *h) {
  free(h);
}

void prof_hist_record(prof_hist *h, int64_t value) {
  // sched_getcpu is a load from the rseq area on glibc >= 2.35; its -1 on
  // failure just picks the last stripe.
  stripe *st = stripe_at(h, h->stripe_mask ? (unsigned)sched_getcpu() & h->stripe_mask : 0);
  uint64_t v;
  if (__builtin_expect(value < 0, 0)) {
    atomic_fetch_add_explicit(&st->underflow, 1, memory_order_relaxed);
    v = 0;
  } else if (__builtin_expect((uint64_t)value > h->max_value, 0)) {
    atomic_fetch_add_explicit(&st->overflow, 1, memory_order_relaxed);
    v = h->max_value;
  } else {
    v = (uint64_t)value;
  }
  atomic_fetch_add_explicit(&st->buckets[bucket_of(h->bits, v)], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&st->sum, v, memory_order_relaxed);
  // min and max settle quickly, so after warm-up these are plain loads.
  uint64_t cur = atomic_load_explicit(&st->min, memory_order_relaxed);
  while (v < cur &&
         !atomic_compare_exchange_weak_explicit(&st->min, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
  }
  cur = atomic_load_explicit(&st->max, memory_order_relaxed);
  while (v > cur &&
         !atomic_compare_exchange_weak_explicit(&st->max, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

// ---  snapshots

int prof_hist_snap_create(const prof_hist *h, prof_hist_snap **out, err *e) {
  *out = NULL;
  prof_hist_snap *s = malloc(sizeof(prof_hist_snap) + h->n_buckets * sizeof(uint64_t));
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "histogram: out of memory for a snapshot");
  s->max_value = h->max_value;
  s->bits = h->bits;
  s->n_buckets = h->n_buckets;
  prof_hist_snap_reset(s);
  *out = s;
  return 0;
}

void prof_hist_snap_destroy(prof_hist_snap *s) {
  free(s);
}

void prof_hist_snap_reset(prof_hist_snap *s) {
  s->sum = s->max = s->underflow = s->overflow = 0;
  s->min = UINT64_MAX;
  memset(s->buckets, 0, s->n_buckets * sizeof(uint64_t));
}

static int same_layout(uint64_t max_a, unsigned bits_a, uint64_t max_b, unsigned bits_b, err *e) {
  if (max_a != max_b || bits_a != bits_b)
    return err_set(e, ERR_INVALID_ARGUMENT, "histogram: layouts differ (max_value %llu, %u bits vs %llu, %u bits)",
                   (unsigned long long)max_a, bits_a, (unsigned long long)max_b, bits_b);
  return 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}
static uint64_t max_u64(uint64_t a, uint64_t b) {
  return a > b ? a : b;
}

// The window's extremes after a subtraction: the outer bounds of its first
// and last non-empty buckets (min = UINT64_MAX, max = 0 when empty).
static void extremes_from_buckets(prof_hist_snap *s) {
  size_t first = 0, last = s->n_buckets;
  while (first < s->n_buckets && s->buckets[first] == 0) first++;
  if (first == s->n_buckets) {
    s->min = UINT64_MAX;
    s->max = 0;
    return;
  }
  while (s->buckets[last - 1] == 0) last--;
  uint64_t lo, hi;
  bounds(s->bits, s->max_value, first, &s->min, &hi);
  bounds(s->bits, s->max_value, last - 1, &lo, &s->max);
}

int prof_hist_merge(prof_hist_snap *dst, const prof_hist *src, err *e) {
  TRY(same_layout(dst->max_value, dst->bits, src->max_value, src->bits, e));
  for (size_t k = 0; k < src->n_stripes; k++) {
    const stripe *st = cstripe_at(src, k);
    uint64_t min = atomic_load_explicit(&st->min, memory_order_relaxed);
    uint64_t max = atomic_load_explicit(&st->max, memory_order_relaxed);
    size_t first = SIZE_MAX, last = 0;
    for (size_t i = 0; i < src->n_buckets; i++) {
      uint64_t c = atomic_load_explicit(&st->buckets[i], memory_order_relaxed);
      if (c) {
        if (first == SIZE_MAX) first = i;
        last = i;
        dst->buckets[i] += c;
      }
    }
    // A record racing with this copy may have reached a bucket but not yet
    // min/max, or the other way round: keep the stripe's extremes inside its
    // outermost non-empty buckets, which is all the percentile bound needs.
    if (first != SIZE_MAX) {
      uint64_t lo, hi;
      bounds(src->bits, src->max_value, first, &lo, &hi);
      if (min < lo || min > hi) min = lo;
      bounds(src->bits, src->max_value, last, &lo, &hi);
      if (max < lo || max > hi) max = hi;
      dst->min = min_u64(dst->min, min);
      dst->max = max_u64(dst->max, max);
    }
    dst->sum += atomic_load_explicit(&st->sum, memory_order_relaxed);
    dst->underflow += atomic_load_explicit(&st->underflow, memory_order_relaxed);
    dst->overflow += atomic_load_explicit(&st->overflow, memory_order_relaxed);
  }
  return 0;
}

int prof_hist_snapshot(const prof_hist *h, prof_hist_snap *s, err *e) {
  TRY(same_layout(s->max_value, s->bits, h->max_value, h->bits, e));
  prof_hist_snap_reset(s);
  return prof_hist_merge(s, h, e);
}

int prof_hist_snap_merge(prof_hist_snap *dst, const prof_hist_snap *src, err *e) {
  TRY(same_layout(dst->max_value, dst->bits, src->max_value, src->bits, e));
  for (size_t i = 0; i < src->n_buckets; i++) dst->buckets[i] += src->buckets[i];
  dst->sum += src->sum;
  dst->min = min_u64(dst->min, src->min);
  dst->max = max_u64(dst->max, src->max);
  dst->underflow += src->underflow;
  dst->overflow += src->overflow;
  return 0;
}

int prof_hist_snap_sub(prof_hist_snap *dst, const prof_hist_snap *older, err *e) {
  TRY(same_layout(dst->max_value, dst->bits, older->max_value, older->bits, e));
  for (size_t i = 0; i < dst->n_buckets; i++)
    if (dst->buckets[i] < older->buckets[i])
      return err_set(e, ERR_INVALID_ARGUMENT, "histogram: bucket %zu would go negative (%llu - %llu)", i,
                     (unsigned long long)dst->buckets[i], (unsigned long long)older->buckets[i]);
  for (size_t i = 0; i < dst->n_buckets; i++) dst->buckets[i] -= older->buckets[i];
  dst->sum -= older->sum;
  dst->underflow -= older->underflow;
  dst->overflow -= older->overflow;
  // The window's extremes are unknown: take the outer bounds of its
  // first and last buckets, then clamp to the whole run's extremes.
  uint64_t run_min = dst->min, run_max = dst->max;
  extremes_from_buckets(dst);
  if (dst->min != UINT64_MAX) {
    dst->min = max_u64(dst->min, run_min);
    dst->max = min_u64(dst->max, run_max);
  }
  return 0;
}

// ---  queries

static uint64_t total(const prof_hist_snap *s) {
  uint64_t n = 0;
  for (size_t i = 0; i < s->n_buckets; i++) n += s->buckets[i];
  return n;
}

void prof_hist_summary(const prof_hist_snap *s, prof_hist_stats *out) {
  uint64_t n = total(s);
  out->count = n;
  out->sum = s->sum;
  out->min = n ? s->min : 0;
  out->max = n ? s->max : 0;
  out->mean = n ? (double)s->sum / (double)n : 0.0;
  out->underflow = s->underflow;
  out->overflow = s->overflow;
}

uint64_t prof_hist_percentile(const prof_hist_snap *s, double p) {
  uint64_t n = total(s);
  if (n == 0) return 0;
  if (!(p > 0)) p = 0;  // also catches NaN
  if (p > 100) p = 100;
  double want = ceil(p / 100.0 * (double)n);
  uint64_t rank = want < 1 ? 1 : want > (double)n ? n : (uint64_t)want;
  if (rank == 1) return s->min;  // the extremes are known exactly
  if (rank == n) return s->max;
  uint64_t seen = 0;
  size_t i = 0;
  for (; i < s->n_buckets; i++) {
    seen += s->buckets[i];
    if (seen >= rank) break;
  }
  uint64_t lo, hi;
  bounds(s->bits, s->max_value, i, &lo, &hi);
  uint64_t v = lo + ((hi - lo + 1) >> 1);
  if (v < s->min) v = s->min;
  if (v > s->max) v = s->max;
  return v;
}

void prof_hist_cumulative(const prof_hist_snap *s, const uint64_t *le, size_t n, uint64_t *counts) {
  uint64_t seen = 0;
  size_t i = 0;
  for (size_t k = 0; k < n; k++) {
    for (; i < s->n_buckets; i++) {
      uint64_t lo, hi;
      bounds(s->bits, s->max_value, i, &lo, &hi);
      if (hi > le[k]) break;
      seen += s->buckets[i];
    }
    counts[k] = seen;
  }
}
