// stream.h: one ModelStreamInfer stream of the load driver (--streaming).
// Requests are queued and sent one at a time (the C core allows a single
// SEND_MESSAGE in flight per call), each the shared serialized request plus
// a distinct id (its sequence number), and matched to their answers, which
// come in completion order, by that id. One RECV_MESSAGE is always posted.
// The call opens on the first send and, when it ends or breaks, the requests
// it still held count as errors and the next send opens a new one.
//
// Single-threaded: a stream lives on its owner's thread and completion queue.
// Its tags come back from that queue and go to ld_stream_on_event.
#ifndef INFERD_CLIENTS_LOAD_STREAM_H
#define INFERD_CLIENTS_LOAD_STREAM_H

#include <grpc/grpc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/load/inputs.h"

typedef struct ld_stream ld_stream;

// One request's end: kind 0 (lat_ns from its send to its answer) or an
// error kind (stats.h; lat_ns 0). Called from ld_stream_on_event with the
// stream consistent, so it may call ld_stream_send on s.
typedef void (*ld_stream_outcome_fn)(void *ctx, ld_stream *s, int kind, uint64_t lat_ns);

// Borrowed pointers and slices must outlive the stream.
typedef struct ld_stream_cfg {
  grpc_channel *ch;
  grpc_completion_queue *cq;
  grpc_slice method;        // LD_SVC "ModelStreamInfer"
  grpc_slice request;       // serialized ModelInferRequest without an id
  size_t cap;               // most requests in flight (queued or sent); >= 1
  const ld_tensor *expect;  // --validate-identity, as in ld_driver_cfg; NULL: answers only matched
  size_t n_expect;
  ld_stream_outcome_fn on_outcome;
  void *ctx;
} ld_stream_cfg;

// NULL when out of memory. Opens no call.
ld_stream *ld_stream_create(const ld_stream_cfg *cfg);
// Only when ld_stream_idle.
void ld_stream_destroy(ld_stream *s);

// Queues one request sent at t0_ns (monotonic; its latency runs from there),
// opening a call when there is none. 0, or the kind it counts as instead:
// LD_KIND_DROPPED when cap requests are in flight, LD_KIND_CLIENT when no
// call could be started or the stream is closing.
int ld_stream_send(ld_stream *s, uint64_t t0_ns);

// A completion of one of s's batches (the tag from the CQ; ok its success).
void ld_stream_on_event(void *tag, bool ok);

// The level is over: half-close once every queued request has gone out, and
// open no call again. The server answers what it holds and ends the call.
void ld_stream_close(ld_stream *s);
// Ends the call now; what it held counts as CANCELLED. False when the core
// refused (try again later).
bool ld_stream_cancel(ld_stream *s);
// Ends the call with DEADLINE_EXCEEDED (for everything it holds) when a
// request in it has waited longer than timeout_ns: a stream cannot drop one
// request, and a stuck one would otherwise hold its slot forever.
void ld_stream_expire(ld_stream *s, uint64_t now, uint64_t timeout_ns);

// No call open: every batch has completed.
bool ld_stream_idle(const ld_stream *s);

#endif
