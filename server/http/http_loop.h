// http_loop.h: the HTTP front end's own libuv loop and thread
// ("inferd-http"). The HTTP port, the metrics port and the REST API's answer
// delivery run here, apart from the scheduler's loop (sched.h), whose timer
// starts the batchers' delayed batches: a slow request (a REST body's gzip
// inflation and JSON parse, a /metrics render, an HTTPS handshake) then
// delays only other HTTP requests, never a batch of any model.
#ifndef INFERD_SERVER_HTTP_LOOP_H
#define INFERD_SERVER_HTTP_LOOP_H

#include <uv.h>

#include "kernels/base/err.h"

typedef struct srv_hloop srv_hloop;

// Creates the loop (not yet running): handles (srv_http_create,
// srv_rest_create, timers) are added to srv_hloop_loop before start.
int srv_hloop_create(srv_hloop **out, err *e);
uv_loop_t *srv_hloop_loop(srv_hloop *h);
// Starts the thread that runs the loop.
int srv_hloop_start(srv_hloop *h, err *e);

// Any thread but the loop's: runs on_close(arg) on the loop's thread (it
// closes the caller's handles there), then runs the loop until every handle
// has closed and joins the thread. When the loop never started, on_close and
// the loop run on the calling thread instead. Once per loop.
void srv_hloop_stop(srv_hloop *h, void (*on_close)(void *arg), void *arg);
// After srv_hloop_stop (or with no handles of the caller's on the loop).
// NULL is a no-op.
void srv_hloop_destroy(srv_hloop *h);

#endif
