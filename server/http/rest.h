// rest.h: the KServe v2 HTTP/REST API (Triton's routes and JSON) on the
// server's HTTP endpoint. Every route hands its request, as the protobuf
// message the gRPC client would send, to the same handler the gRPC method
// runs (a local call, server/grpc/grpc_front.h), so both protocols share one
// validation, one scheduler and one set of statistics; the protobuf answer
// is turned into Triton's JSON (and, for inference, Triton's binary tensor
// extension). Answers come back on any thread (inference answers on an
// engine instance thread, which also writes their JSON) and are handed to
// the HTTP loop's thread (http_loop.h) through a uv_async.
#ifndef INFERD_SERVER_REST_H
#define INFERD_SERVER_REST_H

#include <uv.h>

#include "kernels/base/err.h"
#include "server/http/http.h"

struct srv_server;
typedef struct srv_rest srv_rest;

// On the loop thread, before it runs (or on it). s must outlive the object.
int srv_rest_create(uv_loop_t *loop, struct srv_server *s, srv_rest **out, err *e);

// Loop thread: answers the request when its path is a REST route (every path
// under /v2 but the health routes, which endpoints.c keeps) and returns 1;
// returns 0, touching nothing, for any other path.
int srv_rest_route(srv_rest *r, const srv_http_request *req, srv_http_response *resp);


// Loop thread, once no answer can come any more (the scheduler stopped and
// the reply queue sent what it held; a request submitted after is refused
// at once, on this thread): gives the answers still queued, closes the
// async handle; r is freed once it has closed. NULL is a no-op.
void srv_rest_close(srv_rest *r);

#endif
