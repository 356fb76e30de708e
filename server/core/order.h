// server/core/order.h: preserve_ordering, in one place. A version whose config
// preserves ordering numbers its requests as the scheduler admits them; each
// answer, whenever it is ready (run or dropped, on any thread), waits here
// until every earlier request's answer has left, and then leaves. This
// module keeps the waiting answers and sends them (server/core/request.c's
// srv_request_send) under its own lock, so they leave in request order
// whatever thread finished them.
#ifndef INFERD_SERVER_ORDER_H
#define INFERD_SERVER_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct srv_order srv_order;
struct srv_request;
struct srv_server;

int srv_order_create(struct srv_server *s, srv_order **out, err *e);
// Every admitted request has been answered by then (the scheduler frees a
// version once nothing of it runs or waits).
void srv_order_destroy(srv_order *o);

// Gives r its turn (r->ord). Out of memory: RESOURCE_EXHAUSTED, r unchanged.
int srv_order_admit(srv_order *o, struct srv_request *r, err *e);

// The answer of r, admitted above: resp (malloc'ed, taken) with len, or NULL with code and msg
// (copied). Sends it, and every later one that waited only for it, in
// request order; each request is freed once sent, r maybe before this
// returns. Any thread; may be called under the scheduler's lock.
void srv_order_answer(struct srv_request *r, uint8_t *resp, size_t len, int code, const char *msg);

#endif
