// batcher/sequence.h: Triton's sequence batcher (stateful models) for one
// model version, a pure library like batcher.h: items, sequences, slots and
// executors, an injected clock; nothing of gRPC, tensors or threads.
//
// Semantics follow Triton's sequence_batch_scheduler (docs/user_guide/
// architecture.md "Stateful Models", model_configuration.md):
//  - Every item carries a correlation ID (a non-zero number or a non-empty
//    string) and START/END flags. An item without one is refused
//    (INVALID_ARGUMENT, Triton's wording); so is an item without START for a
//    sequence the batcher does not hold (never started, ended, or idle too
//    long), and an item of more than one row.
//  - A sequence takes a slot for its lifetime, on one engine instance (the
//    one holding the fewest), where every item of the sequence runs. Direct:
//    a slot is one of the instance's max_batch_size batch rows. Oldest: one
//    of the instance's max_candidate_sequences candidates (0:
//    max_batch_size).
//    When every slot is taken a new sequence waits in a FIFO backlog (as
//    Triton's does, unbounded) and takes the first slot that frees.
//  - A sequence's items run one at a time and in arrival order: its next
//    item becomes a candidate only once the previous one completed, so a
//    batch never holds two items of one sequence.
//  - A batch is formed while an executor is free from the ready heads of
//    the slots: Direct, the heads of the slots of that executor's instance,
//    in slot order, sent at once unless max_queue_delay_us > 0, when it is
//    held until min_slot_utilization of the instance's held slots are ready
//    or its oldest head waited the delay. Oldest, the oldest heads (by
//    arrival) of that instance's candidates, as the dynamic batcher does with them: the largest preferred
//    size reached goes at once, else the batch waits up to
//    max_queue_delay_us from its oldest head (0: never waits). Triton's
//    Direct pads a batch to its highest slot with READY=0 rows; here a batch
//    holds only ready items (every one READY=1).
//  - A slot is freed when its sequence's END item completed, or when the
//    sequence was idle (nothing queued or running) for max_idle_us.
//    A START for a correlation ID still held queues behind its items
//    (Triton's back-to-back sequences of one ID).
//  - Implicit state (cfg.state_bytes > 0): a sequence in a slot keeps that
//    many bytes (the slot's, allocated at its first use and reused, so the
//    state held is bounded by the slots, not by the backlog), zeroed when
//    it takes the slot and when a START item is handed out; the caller feeds them
//    to the model and writes the model's next state into them
//    (bat_seq_item.state) before releasing the executor.
//  - A cancelled item, or one whose deadline passed, leaves without running
//    when it reaches its sequence's head (checked as batches are formed);
//    in the backlog, at a sweep every 100 ms while the backlog holds any
//    (bat_seq_next_wakeup asks for it). A backlogged sequence left with no
//    item is forgotten.
#ifndef INFERD_BATCHER_SEQUENCE_H
#define INFERD_BATCHER_SEQUENCE_H

#include <stddef.h>
#include <stdint.h>

#include "batcher/batcher.h"
#include "kernels/base/dtype.h"
#include "kernels/base/err.h"

typedef enum bat_seq_strategy { BAT_SEQ_DIRECT = 0, BAT_SEQ_OLDEST = 1 } bat_seq_strategy;

enum { BAT_SEQ_START = 1, BAT_SEQ_END = 2 };

// A correlation ID: str (len bytes, not NUL-terminated, not owned) when not
// NULL, else num. 0 / "" mean none.
typedef struct bat_seq_id {
  uint64_t num;
  const char *str;
  size_t len;
} bat_seq_id;

typedef struct bat_seq_item {
  // --- set by the caller before bat_seq_enqueue
  bat_seq_id id;
  unsigned flags;       // BAT_SEQ_START | BAT_SEQ_END
  int64_t rows;         // must be 1
  int64_t deadline_us;  // absolute; INT64_MAX none
  void *payload;
  // --- set by the batcher
  struct bat_seq_item *next;  // link of a batch or of the dropped list
  // in a batch: the sequence's state bytes (cfg.state_bytes; zeros at a
  // START), for the caller to feed the model and to write the model's next
  // state into before bat_seq_release_executor; NULL without state
  unsigned char *state;
  int64_t arrival_us;
  bat_drop_reason drop_reason;
  // --- private while queued
  struct bat_seq_seq *seq;
} bat_seq_item;

typedef struct bat_seq_config {
  bat_seq_strategy strategy;
  int max_batch_size;         // 0: the model does not batch (one item per batch, Direct: one slot per instance)
  int n_executors;            // as batcher.h's
  const int *exec_instance;   // [n_executors]: the engine instance each runs on (copied)
  int n_instances;
  int64_t max_idle_us;        // > 0
  int64_t max_queue_delay_us; // Direct's or Oldest's
  float min_slot_utilization; // Direct, 0..1
  int max_candidates;         // Oldest: slots per instance; 0: max_batch_size
  const int *preferred;       // Oldest (copied)
  size_t n_preferred;
  size_t state_bytes;         // implicit state: bytes kept per sequence (0: none)
  bat_clock_fn now;
  void *clock_ctx;
  bat_cancelled_fn cancelled;  // may be NULL
} bat_seq_config;

typedef struct bat_seq_batch {
  bat_seq_item *items;  // linked through next
  size_t n_items;
  int64_t rows;
  int executor;
} bat_seq_batch;

typedef struct bat_seq bat_seq;

int bat_seq_create(const bat_seq_config *c, bat_seq **out, err *e);
// Frees the batcher and its sequences; queued items are not touched (bat_seq_flush first).
void bat_seq_destroy(bat_seq *b);

// Queues an item (model names the model in messages). On success the
// batcher holds it until it leaves in a batch or through
// bat_seq_take_dropped; on failure (INVALID_ARGUMENT as above, or
// RESOURCE_EXHAUSTED out of memory) the caller still owns it.
int bat_seq_enqueue(bat_seq *b, bat_seq_item *it, const char *model, err *e);

// Expires idle sequences and due deadlines, then forms the next batch when
// an executor is free and the policy says go: 1 and *out (the executor is
// reserved), else 0. Call until 0, then bat_seq_take_dropped and
// bat_seq_next_wakeup.
int bat_seq_next_batch(bat_seq *b, bat_seq_batch *out);

// The executor's batch finished (answered or failed; its items may be freed
// already): each sequence's next item may run, an END item frees its
// sequence's slot; the executor takes another batch unless retire (its
// engine instance failed for good). When an instance has no executor left,
// the sequences bound to it end: their queued items are dropped
// (BAT_DROP_INSTANCE_FAILED), and new sequences go to the other instances.
void bat_seq_release_executor(bat_seq *b, int executor, int retire);

bat_seq_item *bat_seq_take_dropped(bat_seq *b);
// Drops every queued item (BAT_DROP_SHUTDOWN); sequences stay until they complete or idle out.
void bat_seq_flush(bat_seq *b);

// When to call bat_seq_next_batch again: a held batch's delay end, the
// first idle expiry; INT64_MAX when none.
int64_t bat_seq_next_wakeup(const bat_seq *b);

size_t bat_seq_queued(const bat_seq *b);
size_t bat_seq_sequences(const bat_seq *b);  // held (in a slot or the backlog)
size_t bat_seq_backlog(const bat_seq *b);
int bat_seq_free_executors(const bat_seq *b);

// A control input's value for an item, written as one element of dt at dst:
// the flags' (START, END, READY) false_true[flag] in INT32, FP32 or BOOL;
// the correlation ID for CORRID (INT32, INT64, UINT32, UINT64; a string ID
// that is a decimal number is taken as that number, as Triton's dyna
// models expect; another string, or a number out of dt's range, is refused).
int bat_seq_control_flag(dtype dt, const double false_true[2], int flag, void *dst, err *e);
int bat_seq_control_corrid(dtype dt, const bat_seq_id *id, void *dst, err *e);

#endif
