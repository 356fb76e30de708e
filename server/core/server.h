// server/core/server.h: what the RPC handlers share: the registry, the
// scheduler, the reflection answers and the server's own state.
#ifndef INFERD_SERVER_SERVER_H
#define INFERD_SERVER_SERVER_H

#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>

#include "server/obs/gpumon.h"
#include "server/core/control.h"
#include "server/sec/cuda_shm.h"
#include "server/grpc/grpc_front.h"
#include "server/grpc/reflection.h"
#include "server/core/registry.h"
#include "server/core/copypool.h"
#include "server/core/replyq.h"
#include "server/core/sched.h"
#include "server/sec/shm.h"
#include "server/obs/trace.h"

typedef struct srv_server {
  srv_registry *reg;
  srv_sched *sched;
  srv_control *control;  // model load/unload/poll
  struct srv_repeat *repeat;  // the repeat backend's runner (repeat.h): after the transport, before the registry
  srv_reflection *reflection;
  prof_trace *trace;       // NULL unless --trace-file
  int trace_rate;          // --trace-rate, what a cleared trace_rate returns to
  prof_gpus *gpus;         // the visible GPUs' metrics (none: a CPU-only server)
  srv_shm *shm;            // client system shared memory; NULL unless --allow-client-shm
  srv_cuda_shm *cuda_shm;  // client CUDA shared memory; NULL unless --allow-client-shm
  struct srv_rest *rest;   // the KServe v2 REST routes (server/http/rest.h); NULL: not served
  struct srv_http *http;   // the HTTP port (loop thread only: /metrics reads its limits' counts)
  struct srv_jsonmem *jsonmem;  // REST JSON parse memory (--rest-json-max-memory); NULL: no budget
  srv_replyq *replyq;      // sends batches' answers (replyq.h); NULL: each instance thread sends its own
  // shares big batches' gathers and packs with the instance threads
  // (copypool.h); NULL: each instance thread copies alone. Set before the
  // scheduler exists, destroyed after it.
  srv_copypool *copies;
  const srv_grpc *grpc;    // set before the loop thread starts; /metrics reads its counts
  int strict_readiness;    // ready only when every model is (Triton's default)
  int allow_metrics;       // --allow-metrics: /metrics served at all
  atomic_int draining;     // set once shutdown began: not ready, new work refused
  atomic_int accept_dead;  // the gRPC listener stopped accepting (see main.c): not live
  atomic_llong infer_inflight;     // ModelInfer calls received and not yet answered
  atomic_llong infer_last_call_us; // when the last ModelInfer call arrived
  // Bytes of ModelInfer requests (gRPC unary, stream messages, REST) admitted
  // and not yet freed: charged in infer.c once a request parses, released by
  // srv_infer_request_free. The server-wide bound that the per-connection and
  // per-stream limits leave open (many connections each under theirs).
  atomic_llong inflight_bytes;
  long long max_inflight_bytes;       // --max-inflight-request-bytes; 0: no limit (the gauge still counts)
  atomic_llong inflight_rejected;     // requests refused for it (/metrics)
  atomic_llong inflight_logged_us;    // when such a refusal was last logged (one line per 10 s)
  _Atomic uint64_t http_requests;
  atomic_llong shm_fault_logged_us;  // when a shrunk shared memory object was last logged (one line per 10 s)
  atomic_llong shm_faults;           // requests failed so since the last such line
} srv_server;

#define SRV_SHM_DISABLED_MSG \
  "client shared memory is disabled: start inferd with --allow-client-shm=true to register and use regions"

// Liveness (ServerLive, /v2/health/live): false once the gRPC port can no
// longer take connections, or once a sticky CUDA error poisoned a device
// (eng_model_poisoned), so an orchestrator restarts the process.
int srv_server_live(srv_server *s);

// Every gRPC method the server answers, for srv_grpc_create.
size_t srv_methods(srv_server *s, srv_method *out, size_t cap);

// ModelInfer (server/core/infer.c)
void srv_infer_handler(void *ctx, srv_call *call, const uint8_t *req, size_t len);
// ModelInfer's big messages in the pieces they arrived in (server/core/infer_pieces.c)
void srv_infer_sliced_handler(void *ctx, srv_call *call, const srv_piece *pieces, size_t n_pieces, size_t len);
// ModelStreamInfer: each message is a ModelInferRequest answered on the
// stream by a ModelStreamInferResponse (errors in its error_message)
void srv_infer_stream_handler(void *ctx, srv_stream *st, const uint8_t *req, size_t len);

// Shared by the RPC handlers: pack and answer; unpack or answer INVALID_ARGUMENT (NULL then), also when
// a string field (nested and map ones included) is not UTF-8 or holds a NUL byte, naming the field
// without quoting it.
void srv_reply_msg(srv_call *call, const ProtobufCMessage *m);
ProtobufCMessage *srv_unpack_or_fail(srv_call *call, const ProtobufCMessageDescriptor *d, const uint8_t *req,
                                     size_t len);
// INVALID_ARGUMENT naming m's first string field that is not UTF-8 (its
// bytes are not quoted), else 0 (server/grpc/rpc_msg.c, as the two above).
int srv_strings_utf8(const ProtobufCMessage *m, err *e);
// LogSettings and TraceSetting (server/obs/settings.c)
void srv_log_settings(void *ctx, srv_call *call, const uint8_t *req, size_t len);
void srv_trace_setting(void *ctx, srv_call *call, const uint8_t *req, size_t len);

// Readiness as ServerReady, /v2/health/ready and grpc.health report it.
int srv_server_ready(srv_server *s);

// HTTP routes (server/http/endpoints.c), for srv_http_create.
struct srv_http_request;
struct srv_http_response;
void srv_http_routes(void *ctx, const struct srv_http_request *req, struct srv_http_response *resp);
// The --metrics-port listener's: /metrics alone, as Triton's metrics port.
void srv_http_metrics_routes(void *ctx, const struct srv_http_request *req, struct srv_http_response *resp);

#endif
