// server/core/repeat.h: Triton's `repeat` backend, built in (backend: "repeat"):
// a decoupled model (model_transaction_policy { decoupled: true }) that
// answers one ModelStreamInfer request with one response per element of its
// input IN (OUT = IN[i], IDX = i), each after DELAY[i] ms, then the final
// flag; the request itself is released WAIT ms after it started, and the
// model runs one request at a time (Triton's one instance, BLOCKING
// execution). A version kind beside the engine (srv_version.model) and the
// ensemble (srv_version.ens): no files, no graph. Its timers run on one small
// thread per model, never on a CQ thread; answers go through the stream's
// srv_stream_reply_more / srv_stream_reply_end (server/grpc/grpc_front.h).
#ifndef INFERD_SERVER_REPEAT_H
#define INFERD_SERVER_REPEAT_H

#include <stddef.h>

#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "model_config.pb-c.h"

struct srv_server;
struct srv_request;

typedef struct srv_repeat srv_repeat;

// Whether a config names the repeat backend.
int srv_repeat_is_repeat(const Inference__ModelConfig *cfg);

// Checks cfg as Triton's repeat backend does at load (max_batch_size 0; inputs
// IN INT32 [-1 or n], DELAY UINT32 of IN's shape, WAIT UINT32 [1]; outputs OUT
// INT32 [1], IDX UINT32 [1], in that order; decoupled), every reason at once,
// and starts its thread. ERR_INVALID_ARGUMENT with why on failure.
int srv_repeat_create(const Inference__ModelConfig *cfg, srv_repeat **out, err *e);
// Joins the thread. Every request holds a reference on the model that owns p,
// so none is left by then but one whose stream has already ended (its release
// still to come): those are freed here.
void srv_repeat_destroy(srv_repeat *p);

// The tensors the model shows its clients (config order).
size_t srv_repeat_n_inputs(const srv_repeat *p);
size_t srv_repeat_n_outputs(const srv_repeat *p);
const eng_io *srv_repeat_input(const srv_repeat *p, size_t i);
const eng_io *srv_repeat_output(const srv_repeat *p, size_t i);

// Takes r (validated against the config, on a ModelStreamInfer stream, counted
// in its version's pending) on a CQ thread: its inputs are copied and it is
// queued for the model's thread, which answers, counts and frees it. A request
// the backend refuses (IN and DELAY of different shapes, inputs in shared
// memory) is answered at once with one error response, as Triton's backend does.
void srv_repeat_submit(srv_repeat *p, struct srv_server *s, struct srv_request *r);

#endif
