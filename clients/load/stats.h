// stats.h: what one measurement window saw (successful latencies, errors by
// kind), its summary in microseconds, and perf_analyzer's stability rule.
#ifndef INFERD_CLIENTS_LOAD_STATS_H
#define INFERD_CLIENTS_LOAD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/load/hist.h"
#include "clients/load/mix.h"

// Error kinds: gRPC status codes 0..16 keep their numbers (OK is never
// counted as an error), then failures the client itself decided.
enum {
  LD_KIND_VALIDATION = 17,  // status OK but the output differed from the input (--validate-identity)
  LD_KIND_DROPPED,          // open loop: not sent because the in-flight cap was reached
  LD_KIND_NO_MESSAGE,       // status OK without a response message
  LD_KIND_CLIENT,           // the call could not be started locally
  LD_KIND_STREAM_ERROR,     // --streaming: an answer's error_message implies no status, or it cannot be read
  LD_N_KINDS
};

// "INVALID_ARGUMENT", ..., "VALIDATION", "CLIENT_DROPPED"; "?" out of range.
const char *ld_kind_name(int kind);
// The kind a call's non-OK gRPC status counts as: itself, UNKNOWN when out of range.
int ld_kind_from_status(int status);

// Caller-allocated; init/close. lat, ok and errors are about the valid
// requests (every request when there is no --mix): the mix's other kinds are
// only counted, in by_kind.
typedef struct ld_window {
  ld_hist *lat;                 // successful valid requests only, nanoseconds
  ld_hist *lag;                 // open loop: how late each request went out against its schedule, nanoseconds
  uint64_t ok;                  // successful valid requests
  uint64_t errors[LD_N_KINDS];  // of the valid requests; [0] (OK) stays 0
  uint64_t by_kind[LD_N_REQ_KINDS][LD_N_KINDS];  // every outcome by request kind and status ([k][0]: OK)
  uint64_t sent[LD_N_REQ_KINDS];                 // requests due by the schedule or the loop, dropped ones included
  uint64_t duration_ns;                          // wall time the window covered (merge adds)
} ld_window;

// -1 when out of memory.
int ld_window_init(ld_window *w);
void ld_window_close(ld_window *w);
void ld_window_reset(ld_window *w);
void ld_window_merge(ld_window *dst, const ld_window *src);
uint64_t ld_window_errors(const ld_window *w);

typedef struct ld_summary {
  uint64_t ok, errors;
  double seconds;
  double rps;  // successful requests per second
  double avg_us, p50_us, p90_us, p95_us, p99_us, p999_us, min_us, max_us;
} ld_summary;

void ld_window_summarize(const ld_window *w, ld_summary *s);

// perf_analyzer's rule: throughput, average and p50 latency of each of the n
// windows lie within pct percent of their mean over the n. A metric whose
// mean is 0 (every request failed) counts as stable.
bool ld_stable(const ld_summary *s, size_t n, double pct);

#endif
