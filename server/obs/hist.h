// server/obs/hist.h: the profiler's log-linear histograms (HdrHistogram style).
// Recording is lock-free from any number of threads (one relaxed atomic add
// on a bucket plus one on the sum, in a copy of the counters chosen by the
// CPU it runs on; min/max take a CAS only when they move); everything else
// works on a snapshot taken on read, which adds those copies up and into
// which several histograms can be merged.
//
// Layout: with b = sub_bucket_bits, values below 2^(b+1) each get their own
// bucket (counted exactly); above that each power-of-two range [2^k, 2^(k+1))
// is split into 2^b equal buckets, so a bucket's width is at most 1/2^b of
// its lower bound. Reporting the bucket's middle keeps every percentile
// within 2^-(b+1) of the true sample: 0.39% for b = 7, and b >= 6 always
// stays under 1%. Values are integers in the caller's unit (microseconds
// for latencies, 1 for batch sizes); they are clamped to [0, max_value]
// and the clamped value is what is recorded everywhere (buckets, sum,
// min, max); how many were clamped is counted.
#ifndef INFERD_SERVER_HIST_H
#define INFERD_SERVER_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct prof_hist prof_hist;            // live, recorded into
typedef struct prof_hist_snap prof_hist_snap;  // plain counts, read and merged

typedef struct prof_hist_config {
  int64_t max_value;    // 1 .. 2^62; larger values are recorded as max_value
  int sub_bucket_bits;  // 6 .. 16: precision 2^-(b+1), exact below 2^(b+1)
  // Copies of the counters, a power of two 1 .. 64 (0 means 1); a record
  // writes the copy of the CPU it runs on (CPU number mod stripes), so
  // threads on different CPUs rarely share a cache line. Memory grows by
  // the same factor.
  int stripes;
} prof_hist_config;

// Latencies in microseconds, 1 us .. 60 s, within 0.39%: 2,560 buckets,
// 20 KiB per stripe, 80 KiB in all.
#define PROF_HIST_LATENCY_US ((prof_hist_config){.max_value = 60 * 1000 * 1000, .sub_bucket_bits = 7, .stripes = 4})
// Small integers such as batch sizes, 0 .. maxv, exact while maxv < 2048
// (maxv + 1 buckets, 8 KiB per stripe at maxv = 1024).
#define PROF_HIST_SMALL_INT(maxv) ((prof_hist_config){.max_value = (maxv), .sub_bucket_bits = 10, .stripes = 4})

// ---  live histograms

// Allocates every bucket now; nothing is allocated afterwards.
int prof_hist_create(const prof_hist_config *c, prof_hist **out, err *e);
void prof_hist_destroy(prof_hist *h);

// Safe from any thread, concurrently with other records and with snapshots.
// Negative values count as underflow and are recorded as 0; values above
// max_value count as overflow and are recorded as max_value.
void prof_hist_record(prof_hist *h, int64_t value);

// ---  snapshots (read side; not thread-safe themselves)

// An empty snapshot with h's layout.
int prof_hist_snap_create(const prof_hist *h, prof_hist_snap **out, err *e);
void prof_hist_snap_destroy(prof_hist_snap *s);
void prof_hist_snap_reset(prof_hist_snap *s);

// s = h's counts now. Taken while others record, each bucket is a value it
// held at some instant; sum and the bucket counts may disagree by the
// samples recorded during the copy. ERR_INVALID_ARGUMENT if the layouts differ.
int prof_hist_snapshot(const prof_hist *h, prof_hist_snap *s, err *e);
// dst += src (merge on read). Layouts must be equal.
int prof_hist_merge(prof_hist_snap *dst, const prof_hist *src, err *e);
int prof_hist_snap_merge(prof_hist_snap *dst, const prof_hist_snap *src, err *e);
// dst -= older, for windows: dst and older are snapshots of the same
// histogram, older taken first. min and max become bucket bounds (exact
// below 2^(b+1), within the precision above). ERR_INVALID_ARGUMENT if a
// bucket would go negative (not the same histogram, or in the wrong order).
int prof_hist_snap_sub(prof_hist_snap *dst, const prof_hist_snap *older, err *e);

typedef struct prof_hist_stats {
  uint64_t count;      // samples, = sum of the bucket counts
  uint64_t sum;        // of the recorded (clamped) values; wraps past 2^64
  uint64_t min, max;   // 0 when empty
  double mean;         // sum / count, 0 when empty
  uint64_t underflow;  // values < 0, recorded as 0
  uint64_t overflow;   // values > max_value, recorded as max_value
} prof_hist_stats;

void prof_hist_summary(const prof_hist_snap *s, prof_hist_stats *out);

// Nearest-rank percentile, p in [0, 100]: the sample of rank
// r = max(1, ceil(p/100 * count)) in sorted order is found in its bucket,
// and the bucket's middle (lo + width/2), clamped to [min, max], is
// returned. So p = 0 gives min and p = 100 gives max exactly, values below
// 2^(b+1) are exact, and any result is within 2^-(b+1) of the exact
// sample. 0 when empty.
uint64_t prof_hist_percentile(const prof_hist_snap *s, double p);

// Prometheus-style cumulative counts: counts[i] = number of samples in
// buckets that lie wholly at or below le[i], i.e. the exact count of
// samples <= L where L is the largest bucket upper bound <= le[i]
// (L = le[i] whenever le[i] < 2^(b+1) or le[i]+1 starts a bucket, and
// le[i] - L < le[i] * 2^-b otherwise). A sample above le[i] is never
// counted. le must be ascending. The +Inf bucket is stats.count.
void prof_hist_cumulative(const prof_hist_snap *s, const uint64_t *le, size_t n, uint64_t *counts);

// The bucket that holds value v (after clamping to [0, max_value]) under
// configuration c: its smallest and largest integer values.
void prof_hist_bucket_range(const prof_hist_config *c, uint64_t v, uint64_t *lo, uint64_t *hi);

#endif
