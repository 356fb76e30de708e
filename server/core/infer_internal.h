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

struct srv_arena;
// ModelInferRequest.raw_input_contents (proto/grpc_service.proto)
#define SRV_RAW_INPUT_FIELD 7
// A message received in pieces (infer_pieces.c) unpacked into a: its fields
// but the tensors copied into one run and unpacked (strings checked for NUL
// first), each raw_input_contents entry pointing into the pieces where it
// lies in one, else data NULL and (*raw_pieces)[k] its pieces (*raw_pieces
// NULL when no entry spans pieces). 0, or ERR_INVALID_ARGUMENT / _RESOURCE_
// EXHAUSTED with e saying why, or -1 where the walk cannot follow the bytes
// (the caller unpacks a contiguous copy: protobuf-c judges).
// The n pieces (len bytes in all) joined into one run of a (NULL: out of memory).
uint8_t *srv_infer__join_pieces(struct srv_arena *a, const srv_piece *v, size_t n, size_t len);
int srv_infer__unpack_pieces(struct srv_arena *a, const srv_piece *v, size_t n, size_t len,
                             Inference__ModelInferRequest **msg, srv_pieces **raw_pieces, err *e);

#endif
