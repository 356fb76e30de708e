// driver.h: the asynchronous load engine. A fixed set of threads, each with
// its own completion queue, drives many unary ModelInfer calls at once (no
// thread per request) over a fixed set of channels, and records each
// outcome into a per-thread window that the measurement collects.
//
// Closed loop: exactly C calls in flight; each completion starts the next
// call on the same slot. --streaming: instead of a call per request, each
// thread keeps one ModelStreamInfer stream per connection it uses (stream.h)
// open for the whole level and sends the requests on them; at the end of a
// level the streams half-close and drain like calls in flight. Open loop: calls start on a schedule (constant or
// Poisson spacing) whatever the replies; a thread's schedule is rate/threads
// (splitting a Poisson process that way keeps it Poisson). When a thread has
// its share of LD_OPEN_MAX_INFLIGHT calls pending (streaming: when the
// stream it falls to holds its share of the thread's), a due call is not sent
// and counts as CLIENT_DROPPED.
//
// --mix (open loop, unary calls): each due call is drawn as one of the kinds
// of mix.h. An invalid one sends bad_request instead; an expire one gets its
// own deadline from the expire span; a cancel one is cancelled by its thread
// once the drawn delay has passed (a small heap of due cancels per thread,
// looked at with the schedule: the cancel is as late as a send can be).
#ifndef INFERD_CLIENTS_LOAD_DRIVER_H
#define INFERD_CLIENTS_LOAD_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/load/cli.h"
#include "clients/load/inputs.h"
#include "clients/load/mix.h"
#include "clients/load/stats.h"
#include "kernels/base/err.h"

#define LD_OPEN_MAX_INFLIGHT 16384

typedef struct ld_driver_cfg {
  const char *target;
  int connections;         // >= 1: separate TCP connections; call i of a thread goes round robin
  int threads;             // >= 1
  int timeout_ms;          // per-request deadline; 0: none
  const uint8_t *request;  // serialized ModelInferRequest, copied once and sent by every call
  size_t request_len;      // streaming: it must carry no id (each message appends its own)
  bool streaming;
  // --validate-identity: raw_output_contents[k] must equal expect[k].data for
  // every k (same count). NULL: replies are not parsed at all. Borrowed: must
  // outlive the driver.
  const ld_tensor *expect;
  size_t n_expect;
  // --mix: mix.on false sends every request as valid. bad_request (the invalid
  // kind's message) is copied like request; needed when pct[LD_REQ_INVALID] > 0.
  ld_mix mix;
  const uint8_t *bad_request;
  size_t bad_request_len;
  ld_span cancel_after;  // the cancel kind: cancelled this long after it was sent
  ld_span expire;        // the expire kind's deadline
} ld_driver_cfg;

typedef struct ld_level {
  ld_mode mode;
  double value;   // closed: concurrency; open: requests per second
  ld_dist dist;   // open loop only
  uint64_t seed;  // open loop Poisson arrivals
} ld_level;

typedef struct ld_driver ld_driver;

// Creates the channels (they connect lazily, on the first call) and the queues; starts no thread.
int ld_driver_create(const ld_driver_cfg *cfg, ld_driver **out, err *e);
// Stops a running level first.
void ld_driver_destroy(ld_driver *d);

// Starts the threads for one level; what they record before the first
// ld_driver_collect is part of the first window.
int ld_driver_start(ld_driver *d, const ld_level *lv, err *e);
// Adds every thread's records since the last collect into `into` (not its
// duration, which the caller measures) and clears them. Any thread.
void ld_driver_collect(ld_driver *d, ld_window *into);
// No new calls from here on, without waiting: the open loop's schedule and
// the closed loop's refills stop, what is in flight still ends (and is
// recorded). A caller halts before its last collect so that nothing is sent
// after it, but for a send already past the check: at most one per load
// thread. ld_driver_stop follows.
void ld_driver_halt(ld_driver *d);
// No new calls; waits for those in flight (cancelling them when they outlive
// the deadline by a second, or 10 s without one) and joins the threads.
// Streams half-close and get the same time to answer what they hold.
void ld_driver_stop(ld_driver *d);
// Every answer since the level started, warm-up windows and the drain after
// the stop included (what a server counted for this level): OK and not OK.
void ld_driver_totals(ld_driver *d, uint64_t *ok, uint64_t *errors);
// The same span by request kind: sent[k] requests of kind k were due (dropped
// ones included), out[k][s] ended with status s (OK at s = 0). After
// ld_driver_stop every sent request has exactly one outcome.
void ld_driver_kind_totals(ld_driver *d, uint64_t sent[LD_N_REQ_KINDS], uint64_t out[LD_N_REQ_KINDS][LD_N_KINDS]);

#endif
