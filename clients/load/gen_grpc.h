// gen_grpc.h: one generate request as its own ModelStreamInfer call (the
// way Triton's TensorRT-LLM clients send one): the request message, a
// half-close, then every response until the server ends the stream, each
// response's output_ids counted as it arrives. Blocking, on the caller's
// completion queue (made for pluck), so a load thread drives one call at a time.
#ifndef INFERD_CLIENTS_LOAD_GEN_GRPC_H
#define INFERD_CLIENTS_LOAD_GEN_GRPC_H

#include <grpc/grpc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

// TensorRT-LLM's inputs of one request: input_ids, input_lengths,
// request_output_len and streaming; no end_id (the server's default is none:
// only the checkpoint's eos_token_id ends a sequence early). batched: the
// model has max_batch_size > 0, every tensor then takes a leading 1.
// *buf malloc'ed.
int ld_gen_grpc_encode(const char *model, const char *version, const int32_t *ids, int64_t n_ids, int64_t out_len,
                       bool streaming, bool batched, uint8_t **buf, size_t *len, err *e);

// Called per response with its tokens (output_ids' count; may be 0).
typedef void (*ld_gen_on_tokens)(void *ctx, int64_t n);

// Sends req (a ModelInferRequest) on a new ModelStreamInfer call. 0 when
// the stream ended OK without an error response; else the error kind
// (stats.h: a gRPC status, or LD_KIND_STREAM_ERROR / LD_KIND_CLIENT) with
// the message in e. timeout_ms 0: no deadline.
int ld_gen_grpc_call(grpc_channel *ch, grpc_completion_queue *cq, const uint8_t *req, size_t len, int timeout_ms,
                     ld_gen_on_tokens cb, void *ctx, err *e);

#endif
