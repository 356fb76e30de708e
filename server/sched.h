// server/sched.h: the libuv loop thread that runs the batchers. CQ threads
// hand parsed requests in through a locked inbox and uv_async_send; the loop
// forms batches (one bat_batcher per model version), gives each to an idle
// engine instance, and learns of finished batches through the same inbox.
// One uv_timer serves the nearest deadline of all queues. The loop never
// touches tensor data.
#ifndef INFERD_SERVER_SCHED_H
#define INFERD_SERVER_SCHED_H

#include <uv.h>

#include "kernels/base/err.h"
#include "server/registry.h"
#include "server/request.h"

typedef struct srv_sched srv_sched;

// What the scheduler asks of the request layer (server/infer.c). With
// `hold` set (the model preserves ordering) the answer is packed and kept
// in the request, and `release` sends it later, in request order.
typedef struct srv_sched_ops {
  // On an instance thread: answer (or hold the answers of) every request of
  // the finished batch; requests not held are freed.
  void (*complete)(void *ctx, srv_version *v, srv_request *const *reqs, size_t n, int rc, const err *e,
                   const eng_job *job, const eng_tensor *outputs, size_t n_outputs, int hold);
  // On the loop thread: a request leaves without running (rejected, timed
  // out, cancelled); freed unless held.
  void (*drop)(void *ctx, srv_request *r, int code, const char *msg, int hold);
  // On the loop thread: send a held answer and free the request.
  void (*release)(void *ctx, srv_request *r);
  void *ctx;
} srv_sched_ops;

// Creates the loop and a batcher per ready model version; the loop thread
// starts with srv_sched_start, so handles (HTTP) may be added before.
int srv_sched_create(srv_registry *reg, const srv_sched_ops *ops, srv_sched **out, err *e);
uv_loop_t *srv_sched_loop(srv_sched *s);
int srv_sched_start(srv_sched *s, err *e);

// Any thread: queue a validated request. From here the scheduler owns it
// and guarantees exactly one complete or drop.
void srv_sched_submit(srv_sched *s, srv_request *r);

// Any thread but the loop's: waits until nothing is queued or running, runs
// on_close on the loop thread (to close the caller's handles), closes the
// loop's own handles and joins the thread.
void srv_sched_stop(srv_sched *s, void (*on_close)(void *arg), void *arg);
void srv_sched_destroy(srv_sched *s);

#endif
