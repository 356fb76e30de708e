// server/core/repeat.h: Triton's `repeat` backend, built in (backend: "repeat"):
// a decoupled model (model_transaction_policy { decoupled: true }) that
// answers one ModelStreamInfer request with one response per element of its
// input IN (OUT = IN[i], IDX = i), each after DELAY[i] ms, then the final
// flag; the request itself is released WAIT ms after it started, and each
// version runs one request at a time (Triton's one instance, BLOCKING
// execution). Its models are the registry's (srv_version.rep, repeat_cfg.h);
// this is the runner that serves their requests: one small thread of the
// server's, whose timers never hold a CQ thread. Answers go through the
// stream's srv_stream_reply_more / srv_stream_reply_end (server/grpc/grpc_front.h).
#ifndef INFERD_SERVER_REPEAT_H
#define INFERD_SERVER_REPEAT_H

#include "kernels/base/err.h"

struct srv_server;
struct srv_request;

typedef struct srv_repeat srv_repeat;

// Starts the runner's thread.
int srv_repeat_create(srv_repeat **out, err *e);
// Joins the thread, after the gRPC transport is gone (srv_grpc_destroy waits
// for every stream message to end, which the thread does on cancellation) and
// before the registry: the jobs left, whose streams ended and whose WAIT has
// not passed, are freed here (counted as cancelled).
void srv_repeat_destroy(srv_repeat *p);

// Takes r (validated against its version's config, counted in its pending) on
// a CQ thread: its inputs are copied and it is queued for the runner's thread,
// which answers, counts and frees it. A request the backend refuses (not on a
// stream, IN and DELAY of different shapes, inputs or outputs in shared
// memory) is answered at once with one error response, as Triton's backend does.
void srv_repeat_submit(srv_repeat *p, struct srv_server *s, struct srv_request *r);

#endif
