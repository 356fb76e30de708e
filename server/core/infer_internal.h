// server/core/infer_internal.h: what the two files of ModelInfer's entry
// share. Not a public header: only server/core/infer.c (unpack, string
// checks, model lookup, queueing) and infer_validate.c (the checks against
// the model's config) include it.
#ifndef INFERD_SERVER_INFER_INTERNAL_H
#define INFERD_SERVER_INFER_INTERNAL_H

#include "kernels/base/err.h"
#include "server/core/request.h"

struct srv_server;

// r's message unpacked, its model and version found: validates every input
// and output against the config, points r->inputs at their bytes, takes the
// shared memory regions they name, and reads the scheduling parameters. On
// failure e says why (the code is the RPC status); r keeps what it took,
// released with srv_infer_request_free.
int srv_infer__build_request(struct srv_server *s, srv_request *r, err *e);

#endif
