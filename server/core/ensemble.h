// server/core/ensemble.h: running one request to an ensemble (a version whose
// srv_version.ens is set) through its steps as a dataflow graph: each step
// starts as soon as the tensors it takes exist, as an ordinary ModelInfer
// request to its composing model (a local call: that model's validation,
// scheduler, dynamic batching, instances and statistics apply), the tensors
// between steps are held by the request's run, and the answer is packed
// from the ensemble outputs the client asked for (server/core/reply.c).
#ifndef INFERD_SERVER_ENSEMBLE_H
#define INFERD_SERVER_ENSEMBLE_H

#include "server/core/request.h"
#include "server/grpc/grpc_front.h"

struct srv_server;

// How a step is run: ModelInfer's entry for a built message
// (srv_infer_msg_handler, request.h).
typedef void (*srv_ens_step_fn)(struct srv_server *s, srv_call *call, Inference__ModelInferRequest *msg, size_t bytes);

// Runs r, validated against the ensemble's config and counted pending
// (infer.c), and owns it from here: it is answered and freed once its steps
// ended (the first step to fail fails it, with that step's code and message
// naming the step's model; the steps in flight finish first). Steps run
// through step_fn (srv_infer_msg_handler), given here so that this file
// does not call back into infer.c (which calls it). Any thread; returns at
// once.
void srv_ensemble_run(struct srv_server *s, srv_request *r, srv_ens_step_fn step_fn);

#endif
