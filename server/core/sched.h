// server/core/sched.h: the batchers, one per model version, behind one mutex.
// A CQ thread queues a request and, when an engine instance is free, hands
// it the batch on the spot; an instance thread that finished a batch starts
// the next one. The libuv loop thread serves the batchers' deadlines (one
// timerfd for the nearest of all queues) and the stop, and nothing else: the
// HTTP front end has its own loop (server/http/http_loop.h), so a slow HTTP
// request never delays a batch. No thread touches tensor data under the lock.
#ifndef INFERD_SERVER_SCHED_H
#define INFERD_SERVER_SCHED_H

#include <uv.h>

#include "kernels/base/err.h"
#include "server/core/registry.h"
#include "server/core/request.h"

typedef struct srv_sched srv_sched;

// Creates the loop and a batcher per ready model version; the loop thread
// starts with srv_sched_start, so handles may be added before (the fuzz
// fixture's HTTP; the server keeps this loop to the batchers).
// Finished and dropped requests are answered through server/core/reply.h
// (srv_reply_batch, srv_reply_drop) with srv.
struct srv_server;
int srv_sched_create(srv_registry *reg, struct srv_server *srv, srv_sched **out, err *e);
uv_loop_t *srv_sched_loop(srv_sched *s);
int srv_sched_start(srv_sched *s, err *e);

// Any thread: queue a validated request, and start its batch at once when
// the batcher forms one. From here the scheduler owns it and guarantees
// exactly one complete or drop (which may run before this returns).
void srv_sched_submit(srv_sched *s, srv_request *r);

// Any thread but the loop's: waits until nothing is queued or running, runs
// on_close on the loop thread (to close the caller's handles), closes the
// loop's own handles and joins the thread.
// Model control: schedules every ready version of a new generation (all or
// none), and takes a replaced generation's versions out once no request
// holds it (waits for their last jobs to finish; then they may be freed).
int srv_sched_add_model(srv_sched *s, srv_model *m, err *e);
void srv_sched_remove_model(srv_sched *s, srv_model *m);

// The latency-target policy's figures of version v (batcher/lattarget.h),
// for /metrics: 1 with *out filled when v is scheduled with a
// latency_target_ms, else 0. Takes the scheduler's lock for the copy.
int srv_sched_latency_stats(srv_sched *s, const srv_version *v, bat_lt_stats *out);

void srv_sched_stop(srv_sched *s, void (*on_close)(void *arg), void *arg);
void srv_sched_destroy(srv_sched *s);

#endif
