// batcher/batcher.h: pure request scheduling. Knows items (rows, priority,
// arrival, deadline, shape key), one queue per model and the free engine
// instances; knows nothing of gRPC, tensors or GPUs. Time is injected.
//
// This first version runs each request alone in FIFO order (what Triton
// does for a model without dynamic_batching); the dynamic batcher replaces
// the policy behind the same interface.
#ifndef INFERD_BATCHER_BATCHER_H
#define INFERD_BATCHER_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/err.h"

typedef struct bat_item {
  struct bat_item *next;  // intrusive link: owned by the batcher while queued
  int64_t rows;           // size in the batch dimension (1 when the model does not batch)
  int64_t arrival_us;     // clock time of bat_enqueue, stamped by the batcher
  int64_t deadline_us;    // absolute; INT64_MAX when none
  uint32_t priority;      // 0 = the model's default level
  uint64_t shape_key;     // items with different keys never share a batch
  void *payload;          // the caller's request
} bat_item;

typedef int64_t (*bat_clock_fn)(void *ctx);
// Asked at batch formation; a cancelled item leaves without an execution.
typedef int (*bat_cancelled_fn)(void *payload);

typedef struct bat_config {
  int max_batch_size;    // 0: the model has no batch dimension
  int n_instances;       // engine instances that can run a batch at once
  size_t max_queue_size; // 0: unbounded
  bat_clock_fn now;
  void *clock_ctx;
  bat_cancelled_fn cancelled;  // may be NULL
} bat_config;

typedef struct bat_batch {
  bat_item *items;  // linked through next, in queue order
  size_t n_items;
  int64_t rows;
  int instance;     // the instance reserved for this batch
} bat_batch;

typedef struct bat_batcher bat_batcher;

int bat_create(const bat_config *c, bat_batcher **out, err *e);
// Frees the batcher; items still queued are not touched (drain first).
void bat_destroy(bat_batcher *b);

// Queues an item. On success the batcher holds it until it leaves in a batch
// or through bat_take_dropped; on failure (queue full: RESOURCE_EXHAUSTED,
// rows out of range: INVALID_ARGUMENT) the caller still owns it.
int bat_enqueue(bat_batcher *b, bat_item *it, err *e);

// Forms the next batch when an instance is free and the policy says go.
// Returns 1 and fills *out (the instance is now reserved), else 0.
int bat_next_batch(bat_batcher *b, bat_batch *out);

// Hands back the items that left the queue without running (cancelled or
// past their deadline), linked through next; NULL when none.
bat_item *bat_take_dropped(bat_batcher *b);

// The instance finished its batch and can take another.
void bat_release_instance(bat_batcher *b, int instance);

// Absolute clock time at which bat_next_batch should be asked again even if
// nothing else happens; INT64_MAX when no timer is needed.
int64_t bat_next_wakeup(const bat_batcher *b);

size_t bat_queued(const bat_batcher *b);
int bat_free_instances(const bat_batcher *b);

#endif
