// server/core/replyq.h: a few threads that send a finished batch's answers, so
// the instance thread that ran the batch (engine/model_run.c's done thread on a
// GPU, the instance thread on the CPU) frees its slot and runs the next
// batch while the answers go out. Sending one gRPC answer cost the calling
// thread ~10-20 us (gRPC's transport work ran inline on the caller); one
// thread answering a 72-request batch kept the GPU 90% idle at 512 streams
// (tests/bench/RESULTS.md, issue 13). Unary answers now go to their CQ
// threads' mailboxes (grpc_front.c), ~1.5 us each here, and still leave the
// instance thread sooner this way: on the 2-core VM, answering from the
// instance thread itself cost more CPU per request than the hop.
//
// Items are the caller's: a struct whose first member is srv_replyq_item,
// run once by `fn` on one of the queue's threads, which frees it.
#ifndef INFERD_SERVER_REPLYQ_H
#define INFERD_SERVER_REPLYQ_H

#include "kernels/base/err.h"

typedef struct srv_replyq srv_replyq;

typedef struct srv_replyq_item {
  struct srv_replyq_item *next;  // the queue's
  void (*fn)(struct srv_replyq_item *it);
} srv_replyq_item;

// n_threads >= 1.
int srv_replyq_create(int n_threads, srv_replyq **out, err *e);

// Queues it->fn(it). Returns -1 without queueing once the queue is being
// destroyed (or q is NULL): the caller then runs it->fn(it) itself.
int srv_replyq_post(srv_replyq *q, srv_replyq_item *it);

// How many threads the queue runs (0 for NULL).
int srv_replyq_threads(const srv_replyq *q);

// Runs every item already queued, then joins the threads. NULL is a no-op.
void srv_replyq_destroy(srv_replyq *q);

#endif
