// batcher/order.h: response ordering for preserve_ordering. Requests get
// sequence numbers in arrival order; finished ones (run or dropped) are
// marked complete in any order; pop hands back sequence numbers strictly in
// order, each once every earlier one is complete, so the caller can hold
// finished responses and send them in request order. Pure bookkeeping, no
// threads, no clock.
#ifndef INFERD_BATCHER_ORDER_H
#define INFERD_BATCHER_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct bat_order bat_order;

int bat_order_create(bat_order **out, err *e);
void bat_order_destroy(bat_order *o);

// Gives the next sequence number (0, 1, 2, ...). Every number given out must
// be completed once, also for a request that is then refused or dropped,
// or every later response waits forever. Out of memory: RESOURCE_EXHAUSTED.
int bat_order_begin(bat_order *o, uint64_t *seq, err *e);

// The request with this number finished (its response or error is ready).
// A number never given out, already completed or already popped:
// INVALID_ARGUMENT, nothing changes.
int bat_order_complete(bat_order *o, uint64_t seq, err *e);

// Returns 1 and the oldest sequence number when it is complete (it is then
// forgotten); 0 while it is not, or when nothing is outstanding.
int bat_order_pop(bat_order *o, uint64_t *seq);

// Numbers given out and not yet popped.
size_t bat_order_outstanding(const bat_order *o);

#endif
