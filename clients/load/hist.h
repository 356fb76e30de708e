// hist.h: the load generator's latency histogram. Log-linear buckets in the
// style of HdrHistogram: values below 256 are exact, above that every power
// of two is cut into 128 equal buckets, so a reported value is within 0.4%
// of a sample of that rank (the bucket's midpoint, clamped to the observed
// min/max). Fixed size (about 58 KiB), no allocation on record, mergeable:
// each load thread records into its own and the measurement merges them.
#ifndef INFERD_CLIENTS_LOAD_HIST_H
#define INFERD_CLIENTS_LOAD_HIST_H

#include <stdint.h>

typedef struct ld_hist ld_hist;

// NULL when out of memory.
ld_hist *ld_hist_create(void);
void ld_hist_destroy(ld_hist *h);
void ld_hist_reset(ld_hist *h);

// Any unit; the load generator records nanoseconds. The full uint64 range is covered.
void ld_hist_record(ld_hist *h, uint64_t v);
// dst += src.
void ld_hist_merge(ld_hist *dst, const ld_hist *src);

uint64_t ld_hist_count(const ld_hist *h);
// Exact (kept as a 64-bit sum: nanosecond latencies overflow it only after
// 584 years in total); 0 when empty.
double ld_hist_mean(const ld_hist *h);
// Exact; 0 when empty.
uint64_t ld_hist_min(const ld_hist *h);
uint64_t ld_hist_max(const ld_hist *h);
// Nearest-rank percentile: the sample of rank ceil(p/100 * n) (1-based, at
// least 1) in sorted order, within the bucket error. p in [0, 100]; 0 when empty.
uint64_t ld_hist_percentile(const ld_hist *h, double p);

#endif
