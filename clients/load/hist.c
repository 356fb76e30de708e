// hist.c: log-linear latency histogram (see hist.h for the error bound).
#include "clients/load/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// 2^SUB_BITS buckets per power of two. Index: v itself below 2*SUB, else
// shift*SUB + (v >> shift) with shift = msb - SUB_BITS, so (v >> shift) is in
// [SUB, 2*SUB) and a bucket spans 2^shift values starting at >= SUB << shift:
// relative width <= 1/SUB, midpoint error <= 1/(2*SUB) = 0.39%.
#define SUB_BITS 7
#define SUB (1u << SUB_BITS)
#define MAX_SHIFT (63 - SUB_BITS)
#define NBUCKETS ((MAX_SHIFT + 2) * SUB)

struct ld_hist {
  uint64_t count, sum, min, max;
  uint64_t b[NBUCKETS];
};

static unsigned bucket_of(uint64_t v) {
  if (v < 2 * SUB) return (unsigned)v;
  unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - SUB_BITS;
  return shift * SUB + (unsigned)(v >> shift);
}

static uint64_t bucket_lo(unsigned i) {
  if (i < 2 * SUB) return i;
  unsigned shift = i / SUB - 1;
  return (uint64_t)(i - shift * SUB) << shift;
}

static uint64_t bucket_hi(unsigned i) {
  if (i < 2 * SUB) return i;
  unsigned shift = i / SUB - 1;
  return bucket_lo(i) + ((1ull << shift) - 1);
}

ld_hist *ld_hist_create(void) {
  ld_hist *h = malloc(sizeof *h);
  if (h) ld_hist_reset(h);
  return h;
}

void ld_hist_destroy(ld_hist *h) {
  free(h);
}

void ld_hist_reset(ld_hist *h) {
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

void ld_hist_record(ld_hist *h, uint64_t v) {
  h->b[bucket_of(v)]++;
  h->count++;
  h->sum += v;
  if (v < h->min) h->min = v;
  if (v > h->max) h->max = v;
}

void ld_hist_merge(ld_hist *dst, const ld_hist *src) {
  if (!src->count) return;
  for (unsigned i = 0; i < NBUCKETS; i++) dst->b[i] += src->b[i];
  dst->count += src->count;
  dst->sum += src->sum;
  if (src->min < dst->min) dst->min = src->min;
  if (src->max > dst->max) dst->max = src->max;
}

uint64_t ld_hist_count(const ld_hist *h) {
  return h->count;
}
double ld_hist_mean(const ld_hist *h) {
  return h->count ? (double)h->sum / (double)h->count : 0.0;
}
uint64_t ld_hist_min(const ld_hist *h) {
  return h->count ? h->min : 0;
}
uint64_t ld_hist_max(const ld_hist *h) {
  return h->max;
}

uint64_t ld_hist_percentile(const ld_hist *h, double p) {
  if (!h->count) return 0;
  if (!(p > 0)) p = 0;
  if (p > 100) p = 100;
  // The small slack keeps 99.9% of 1000 at rank 999 although 99.9 is not exact in binary.
  uint64_t rank = (uint64_t)ceil(p * (double)h->count / 100.0 - 1e-7);
  if (rank < 1) rank = 1;
  if (rank > h->count) rank = h->count;
  uint64_t seen = 0;
  for (unsigned i = 0; i < NBUCKETS; i++) {
    seen += h->b[i];
    if (seen < rank) continue;
    // The midpoint halves the worst case; clamping keeps p0/p100 exact and
    // never reports a value outside what was seen.
    uint64_t lo = bucket_lo(i), hi = bucket_hi(i);
    uint64_t v = lo + (hi - lo) / 2;
    if (v < h->min) v = h->min;
    if (v > h->max) v = h->max;
    return v;
  }
  return h->max;
}
