// batcher/lattarget.h: the latency-target policy of the dynamic batcher
// (issue 37): instead of Triton's fixed max_queue_delay, each batch's size
// and wait are chosen from what is measured, so that a request's queue wait
// plus its batch's compute stays under a target while batches grow as large
// as the load allows. Pure: no clock of its own, no threads; the batcher
// (batcher.c) feeds it arrivals and finished batches and asks it, at every
// dispatch opportunity (an executor free, requests queued), go or wait.
//
// What it learns:
//  - compute(n): the time an executor is held by a batch of n rows, per size
//    bucket: an EWMA of the mean and of the absolute deviation; a size is
//    predicted at mean + 2.5 deviations (about the 98th percentile of a
//    normal spread), interpolated between measured buckets, extrapolated
//    above the largest along the line through the two largest measured
//    (proportionally to n while only one is), and never below a smaller
//    measured size's prediction.
//  - the arrival rate (rows per microsecond): an exponentially decaying
//    count with a time constant tied to the target.
//
// The rule (bat_lt_decide), for the batch the batcher's scan would send
// (oldest arrival t0, pending rows P):
//  - no measurement yet: go at once with what is queued (and measure);
//  - the batch is full (max rows, a shape change): go;
//  - deadline d = t0 + target x (1 - margin): when now + compute(P) >= d,
//    go now ("early": the target forced it before the batch reached its goal);
//  - the goal: the size that keeps the executors' utilisation under
//    rho (n / compute(n) >= rate / (executors x rho)), and at least the rows
//    that arrive during one batch's fixed cost per executor (rate x a /
//    executors, with compute(n) ~ a + b n: below it, waiting gains more
//    rows per executor-microsecond than it costs). P >= goal: go;
//  - otherwise wait, until the latest start t that still meets d with the
//    rows expected by then (t + compute(P + rate x (t - now)) <= d: the
//    fitted line's answer, bisected below it when the prediction disagrees;
//    a one-step guess that let every row expected by the deadline join
//    predicted a batch too big to ever start, and sent single rows), or
//    until arrivals pause (no row for GAP_FACTOR expected gaps: in a closed
//    loop every client may already be queued, and waiting longer would only
//    add latency), or until the configured max_queue_delay (a cap when
//    set), whichever is first.
// A busy executor's wait is what the oldest request has already spent when
// an executor frees (the deadline counts from its arrival), and the
// utilisation cap rho keeps that wait short.
#ifndef INFERD_BATCHER_LATTARGET_H
#define INFERD_BATCHER_LATTARGET_H

#include <stdint.h>

#include "kernels/base/err.h"

typedef struct bat_lt_config {
  int64_t target_us;    // the p99 target for queue wait + compute, > 0
  int64_t max_rows;     // the largest batch (max_batch_size), >= 1
  int n_executors;      // batches that run at once, >= 1
  int64_t max_wait_us;  // cap on a batch's wait from its oldest arrival; 0: none
} bat_lt_config;

typedef struct bat_lt bat_lt;

int bat_lt_create(const bat_lt_config *c, bat_lt **out, err *e);
void bat_lt_destroy(bat_lt *p);

// rows arrived at now.
void bat_lt_arrival(bat_lt *p, int64_t now, int64_t rows);
// A batch of `rows` held its executor compute_us (dispatch to release);
// predicted_us is what bat_lt_predict said at dispatch (for the metrics).
void bat_lt_observe(bat_lt *p, int64_t now, int64_t rows, int64_t compute_us, double predicted_us);
// Predicted compute of a batch of rows (microseconds); 0 before any measurement.
double bat_lt_predict(const bat_lt *p, int64_t rows);

// What the batcher sees at a dispatch opportunity.
typedef struct bat_lt_view {
  int64_t now;
  int64_t oldest_us;        // arrival of the oldest request of the batch
  int64_t last_arrival_us;  // the latest arrival still queued
  int64_t pending_rows;     // rows the scan gathered (at most max_rows)
  int full;                 // the scan cannot grow the batch (max rows, shape change)
} bat_lt_view;

typedef struct bat_lt_decision {
  int go;              // dispatch now
  int early;           // go was forced by the deadline before the goal was reached
  int64_t wait_until;  // when !go: ask again at this time (arrivals may ask sooner)
  int64_t goal_rows;   // the batch size the policy aims at
} bat_lt_decision;

void bat_lt_decide(bat_lt *p, const bat_lt_view *v, bat_lt_decision *d);
// The batch went out (for the metrics): its rows, how long its oldest
// request waited, whether early.
void bat_lt_dispatched(bat_lt *p, int64_t rows, int64_t waited_us, int early);

typedef struct bat_lt_stats {
  int64_t target_us;
  int64_t goal_rows;        // the last decision's goal
  int64_t last_wait_us;     // the last batch's oldest request's wait
  int64_t last_rows;        // the last batch's rows
  double rate_per_s;        // rows per second, at the last update
  uint64_t batches;         // dispatched
  uint64_t early;           // of them, sent early for the target
  uint64_t observed;        // batches measured
  double predicted_us_sum;  // over the measured batches
  double measured_us_sum;
  int64_t measured_sizes;  // size buckets with a measurement
} bat_lt_stats;

void bat_lt_stats_get(const bat_lt *p, bat_lt_stats *out);

#endif
