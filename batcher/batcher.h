// batcher/batcher.h: pure request scheduling for one model version. Knows
// items (rows, priority, arrival, deadline, timeout, shape key), the queue
// policies and the free executors (an executor runs one batch at a time: an
// engine instance is one, or several when it pipelines batches); knows
// nothing of gRPC, tensors, GPUs or threads. Time comes from an injected clock.
//
// Semantics follow Triton's dynamic batcher (dynamic_batch_scheduler.cc):
//  - Without dynamic batching (cfg.dynamic = 0), or with max_batch_size 0,
//    every request runs alone, in queue order.
//  - With dynamic batching a batch is formed only while an executor is free.
//    The queue is scanned from its head (priority level 1 first, FIFO within
//    a level, requests whose queue timeout passed with action DELAY behind
//    the others of their level). The scan stops before a request that would
//    push the rows over max_batch_size, or whose shape key differs from the
//    first one's, or (with padding, see below) whose sequence length would
//    stretch the batch's padding past pad_max_ratio; any of these stops
//    sends the rows gathered so far at once. The
//    largest preferred size met during the scan is sent at once; if the
//    rows pass the largest preferred size without meeting one, the rows
//    gathered just before passing it are sent. Otherwise the batch is held
//    while the oldest request in it has waited less than
//    max_queue_delay_us (at arrival + delay exactly it goes), unless the
//    delay is 0, which never waits. With no preferred sizes configured the
//    only preferred size is max_batch_size (what Triton's config
//    normalisation does).
//  - Requests leave without running when the client cancels (checked when
//    the request is looked at for a batch, plus a few per call in a rolling
//    sweep), when the client deadline passes, or when the queue policy
//    timeout passes with action REJECT. Each such item carries a reason.
//  - Every boundary is inclusive: a deadline or timeout at t is expired at t.
//  - Padding (cfg.pad, an inferd extension; Triton leaves padding to the
//    client): items of equal shape key but different seq_len may share a
//    batch, each to be padded to the batch's longest. With pad_max_ratio r >
//    0 the batch's longest is at most r times its shortest (so no request
//    pays more than r times its own length), checked in the same FIFO scan:
//    the first item that would break it stops the scan as a shape change
//    does. seq_len 0 pads only with other 0s under a ratio. Without cfg.pad,
//    seq_len is ignored (the caller keeps lengths in the shape key).
//  - Latency target (cfg.latency_target_us > 0, an inferd extension, issue
//    37; with dynamic batching and max_batch_size > 1): the same scan forms
//    the batch, but whether it goes now or waits is lattarget.h's policy,
//    not max_queue_delay_us (which, when non-zero, caps the wait). A batch
//    that reaches the largest preferred size, max_batch_size or a shape
//    change still goes at once, and the largest preferred size met in the
//    scan is still what is sent. The policy learns compute times from
//    bat_batch_done (dispatch to release, on the injected clock).
#ifndef INFERD_BATCHER_BATCHER_H
#define INFERD_BATCHER_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "batcher/lattarget.h"
#include "kernels/base/err.h"

typedef enum bat_drop_reason {
  BAT_DROP_NONE = 0,
  BAT_DROP_CANCELLED,      // the client cancelled: CANCELLED
  BAT_DROP_DEADLINE,       // the client's deadline passed: DEADLINE_EXCEEDED
  BAT_DROP_QUEUE_TIMEOUT,  // queue policy timeout, action REJECT (Triton: UNAVAILABLE "Request timeout expired")
  BAT_DROP_SHUTDOWN,       // bat_flush
  BAT_DROP_INSTANCE_FAILED,  // sequence.h: the engine instance its sequence is bound to failed for good
} bat_drop_reason;

// Short human text for a reason, for status messages.
const char *bat_drop_reason_str(bat_drop_reason r);

typedef struct bat_item {
  // --- set by the caller before bat_enqueue
  int64_t rows;         // size in the batch dimension (1 when the model does not batch)
  int64_t deadline_us;  // absolute client deadline; INT64_MAX when none
  int64_t timeout_us;   // the request's own queue timeout (relative); 0 = none
  uint32_t priority;    // 0 = the model's default level
  uint64_t shape_key;   // items with different keys never share a batch
  int64_t seq_len;      // length in the padded dim (read only with cfg.pad)
  void *payload;        // the caller's request
  // --- set by the batcher
  struct bat_item *next;        // link of a batch or of the dropped list
  int64_t arrival_us;           // clock time of bat_enqueue
  bat_drop_reason drop_reason;  // why it left without running; NONE in a batch
  // --- private to the batcher while queued
  struct bat_item *prev;
  int64_t timeout_at_us;  // absolute queue-policy timeout not yet applied; INT64_MAX none
  size_t heap_idx;        // position in the timer heap; SIZE_MAX when not in it
  uint32_t level;         // 0-based priority level
  uint8_t delayed;        // in its level's delayed list (DELAY timeout passed)
} bat_item;

typedef int64_t (*bat_clock_fn)(void *ctx);
// Asked when an item is looked at; a cancelled item leaves without an execution.
typedef int (*bat_cancelled_fn)(void *payload);

typedef enum bat_timeout_action { BAT_TIMEOUT_REJECT = 0, BAT_TIMEOUT_DELAY = 1 } bat_timeout_action;

// Triton's ModelQueuePolicy.
typedef struct bat_queue_policy {
  bat_timeout_action timeout_action;
  int64_t default_timeout_us;  // 0: requests never time out in the queue
  int allow_timeout_override;  // item timeout_us may shorten a non-zero default (as Triton: never sets one)
  size_t max_queue_size;       // per level, delayed requests included; 0: unbounded
} bat_queue_policy;

// One entry of Triton's priority_queue_policy map.
typedef struct bat_level_policy {
  uint32_t level;  // 1..priority_levels
  bat_queue_policy policy;
} bat_level_policy;

typedef struct bat_config {
  int max_batch_size;  // 0: the model has no batch dimension (each request alone)
  int n_executors;    // batches that can run at once (engine instances x their pipeline depth)
  int dynamic;         // the model has dynamic_batching
  // dynamic_batching fields (read only when dynamic); the arrays are copied
  const int *preferred_batch_sizes;  // each in 1..max_batch_size
  size_t n_preferred;
  int64_t max_queue_delay_us;
  uint32_t priority_levels;         // 0: one level, item priority ignored
  uint32_t default_priority_level;  // 1..priority_levels when levels are set
  bat_queue_policy default_policy;  // for every level without its own entry
  const bat_level_policy *level_policies;
  size_t n_level_policies;
  // padding (read only when dynamic): items of one shape key and different
  // seq_len share a batch; pad_max_ratio 0: unbounded, else >= 1
  int pad;
  double pad_max_ratio;
  // latency target (read only when dynamic and max_batch_size > 1): p99
  // queue wait + compute in microseconds; 0: Triton's fixed delay
  int64_t latency_target_us;
  // environment
  bat_clock_fn now;
  void *clock_ctx;
  bat_cancelled_fn cancelled;  // may be NULL
} bat_config;

typedef struct bat_batch {
  bat_item *items;  // linked through next, in queue order
  size_t n_items;
  int64_t rows;
  int64_t seq_len;  // the largest item seq_len: what every item is padded to (0 without cfg.pad)
  int executor;     // the executor reserved for this batch (free ones are taken round robin)
} bat_batch;

typedef struct bat_batcher bat_batcher;

int bat_create(const bat_config *c, bat_batcher **out, err *e);
// Frees the batcher; items still queued are not touched (bat_flush first).
void bat_destroy(bat_batcher *b);

// Queues an item. On success the batcher holds it until it leaves in a batch
// or through bat_take_dropped; on failure the caller still owns it: rows out
// of range or priority above priority_levels: INVALID_ARGUMENT; its level's
// max_queue_size reached: RESOURCE_EXHAUSTED; out of memory:
// RESOURCE_EXHAUSTED.
int bat_enqueue(bat_batcher *b, bat_item *it, err *e);

// Applies expired deadlines and timeouts, then forms the next batch when an
// executor is free and the policy says go. Returns 1 and fills *out (the
// executor is now reserved), else 0. Call until it returns 0, then
// bat_take_dropped and bat_next_wakeup.
int bat_next_batch(bat_batcher *b, bat_batch *out);

// Hands back the items that left the queue without running, in the order
// they left, linked through next, each with its drop_reason; NULL when none.
bat_item *bat_take_dropped(bat_batcher *b);

// Moves every queued item to the dropped list with BAT_DROP_SHUTDOWN.
void bat_flush(bat_batcher *b);

// The executor finished its batch and can take another.
void bat_release_executor(bat_batcher *b, int executor);
// The same for a batch that ran to its end: with a latency target, the time
// from its dispatch to now teaches the policy its compute time (a batch
// that failed or was never submitted is released with bat_release_executor,
// so a fast failure does not pass for a fast batch).
void bat_batch_done(bat_batcher *b, int executor);

// The latency policy's figures (lattarget.h); 0 when the batcher has no
// target, else 1 with *out filled.
int bat_latency_stats(const bat_batcher *b, bat_lt_stats *out);

// Absolute clock time at which bat_next_batch should be asked again even if
// nothing else happens (earliest client deadline or queue timeout; the end
// of the queue delay of a held batch); INT64_MAX when no timer is needed.
// Valid after the last bat_next_batch; a cancellation noticed later can only
// make it early, never late.
int64_t bat_next_wakeup(const bat_batcher *b);

size_t bat_queued(const bat_batcher *b);
int bat_free_executors(const bat_batcher *b);

#endif
