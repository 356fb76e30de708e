// server/core/reply.h: ModelInfer's answers (server/core/reply.c): a finished
// batch's, a dropped request's, a rejected one's. The scheduler hands its
// batches and drops here; each request is answered (in its turn, through
// server/core/order.c, when its model preserves ordering) and freed once
// its answer is sent.
#ifndef INFERD_SERVER_REPLY_H
#define INFERD_SERVER_REPLY_H

#include <stddef.h>

#include "engine/model.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "server/core/registry.h"
#include "server/core/request.h"

struct srv_server;

// On an instance thread: answers every request of the finished batch (rc 0:
// outputs hold the batch's results; else e says why it failed). Packs every
// answer first, then accounts the statistics, then sends.
void srv_reply_batch(struct srv_server *s, srv_version *v, srv_request *const *reqs, size_t n, int rc, const err *e,
                     const eng_job *job, const eng_tensor *outputs, size_t n_outputs);

// Under the scheduler's lock, on any thread: a request leaves without
// running (rejected, timed out, cancelled), answered with code and msg.
void srv_reply_drop(struct srv_server *s, srv_request *r, int code, const char *msg);

// An ensemble's request once its steps ended (server/core/ensemble.c; any
// thread): rc 0 packs the answer from outputs (the ensemble's config
// outputs in config order, those the request asked for set), else e says
// why; its statistics counted, answered and freed.
void srv_reply_ensemble(struct srv_server *s, srv_request *r, int rc, const err *e, const eng_tensor *outputs,
                        size_t n_outputs);

// On the CQ thread that received it: a request refused before it was
// queued (malformed, unknown model, failed validation), counted as rejected
// against its version when one was found, answered and freed.
void srv_reply_reject(struct srv_server *s, srv_request *r, int code, const char *msg);

#endif
