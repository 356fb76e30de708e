// server/http/rest_internal.h: what the three files of the REST API share:
// the job (one request from its route to the loop thread's answer), the
// REST object, and what rest_job.c gives the other two. Not a public
// header: only server/http/rest.c (routes, metadata answers), rest_job.c (a
// request's local call and the answers' way back to the loop) and
// rest_infer.c (the infer route: Triton's JSON and binary tensors to
// ModelInferRequest, and the answer back) include it.
#ifndef INFERD_SERVER_REST_INTERNAL_H
#define INFERD_SERVER_REST_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/core/server.h"
#include "server/http/http.h"
#include "server/http/httpz.h"
#include "server/http/jsonmem.h"
#include "server/http/rest.h"

#define SVC "/inference.GRPCInferenceService/"

typedef enum kind {
  K_SERVER_META,
  K_MODEL_META,
  K_MODEL_READY,
  K_CONFIG,
  K_STATS,
  K_INDEX,
  K_INFER,
  K_SHM_STATUS,
  K_CUDA_SHM_STATUS,
  K_EMPTY,  // register/unregister: 200 with no body
  K_CONTROL,  // model load/unload: 200 with {}
} kind;

// How one requested output is answered.
typedef struct out_opt {
  char name[256];
  int binary;
} out_opt;

// One request in flight: from the route to the loop thread's answer.
typedef struct job {
  struct job *next;
  srv_rest *rest;
  srv_http_pending *pending;
  kind k;
  // writes resp from the method's packed answer (where the call ended, any
  // thread): the metadata answers' in rest.c, srv_rest__infer_answer
  void (*answer)(struct job *j, const uint8_t *pb, size_t len);
  // inference only: how outputs are answered
  int binary_default;  // request parameter binary_data_output
  size_t n_out_opts;
  out_opt *out_opts;
  srv_httpz_enc resp_enc;  // the answer's content coding (the request's Accept-Encoding)
  // the HTTP answer, written by done_cb
  srv_http_response resp;
} job;

struct gen_event;

// One generate-style request (the generate extension's or the OpenAI
// endpoints'): its deferred connection and the events its runner queues for
// the loop thread (rest_generate.c).
typedef struct gen_job {
  struct srv_rest *rest;
  srv_http_pending *pending;  // NULL when the defer found no memory: answers are dropped, the request cancelled
  int sse;
  int begun;  // the stream's headers went out (loop thread)
  _Atomic int gone;
  struct srv_model *m;  // referenced until the final answer
  struct srv_version *v;
  char *id;
  struct gen_event *final_ev;  // allocated with the job: the final answer always has its event
  void *ext;                   // the route's own state, freed with the job by ext_free
  void (*ext_free)(void *ext);
} gen_job;

struct srv_rest {
  uv_loop_t *loop;
  srv_server *s;
  uv_async_t async;
  pthread_mutex_t mu;
  job *head, *tail;  // answered, not yet given (FIFO)
  struct gen_event *gen_head, *gen_tail;  // the generate extension's answers, not yet given (rest_generate.c)
  int closing;
  srv_method methods[32];
  size_t n_methods;
};

// --- rest_job.c

// The answer: status, content type and a malloc'ed body (taken).
void srv_rest__set_text(srv_http_response *resp, int status, const char *ctype, char *body, size_t len);
// Triton's HTTP status for an err_code (gRPC status numbering).
int srv_rest__http_status(int code);
// {"error": msg} with status; falls back to a static body when out of memory.
void srv_rest__set_error(srv_http_response *resp, int status, const char *msg);
// A body srv_jsonmem_parse refused: 413, 503 (with Retry-After) or 400, and its message.
void srv_rest__json_refused(srv_http_response *resp, const err *e);
void srv_rest__job_free(job *j);
// Runs the gRPC method `method` on the packed request as a local call,
// answering through the job (which it takes).
void srv_rest__run_local(srv_rest *r, job *j, const char *method, const uint8_t *req, size_t len);
// The same, taking req (malloc'd): the call keeps it until answered, so a
// ModelInfer request's tensors are read where they lie (docs/copies.md R5).
void srv_rest__run_local_owned(srv_rest *r, job *j, const char *method, uint8_t *req, size_t len);
// The loop thread's side: hands every answered job to its connection
// (srv_rest__on_async, the REST object's uv_async, calls it).
void srv_rest__deliver(srv_rest *r);
void srv_rest__on_async(uv_async_t *a);

// --- rest_infer.c

// POST /v2/models/{model}[/versions/{version}]/infer: the request's JSON
// (and binary tensors) as a ModelInferRequest, run as a local ModelInfer.
void srv_rest__route_infer(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char *model,
                           const char *version);
// Writes the job's HTTP answer from its packed ModelInferResponse,
// compressed as the client asked. Any thread (where the answer arrived).
void srv_rest__infer_answer(job *j, const uint8_t *pb, size_t pb_len);

// --- rest_generate.c

// POST /v2/models/{model}[/versions/{version}]/generate (sse 0) or
// /generate_stream (sse 1): Triton's generate extension for the generative
// backend's models.
void srv_rest__route_generate(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char *model,
                              const char *version, int sse);
// The loop thread's side: gives every queued generate answer to its connection.
void srv_rest__generate_deliver(srv_rest *r);
// A job for model m, version v (a reference the job takes and drops when freed), with its final
// event. NULL when out of memory.
gen_job *srv_rest__gen_job_create(srv_rest *r, struct srv_model *m, struct srv_version *v, int sse);
// Frees a job that was never submitted (its reference to the model dropped).
void srv_rest__gen_job_free(gen_job *j);
// Queues one answer for the loop thread (any thread). data (taken, may be NULL when out of memory):
// with sse the bytes to write as they are ("data: ...\n\n" lines), else the whole body (JSON) of
// status. final: the last one (its event is the job's own, it never fails); the job is freed after it.
void srv_rest__gen_push(gen_job *j, char *data, int status, int final);
// A JSON string of s[0..n) (NULL when out of memory).
struct cJSON *srv_rest__json_strn(const char *s, size_t n);
// Defers req's answer to the job after its request was submitted; on failure answers resp (500).
void srv_rest__gen_defer(gen_job *j, const srv_http_request *req, srv_http_response *resp);

// --- rest_openai.c

// /v1/models, /v1/completions, /v1/chat/completions: 1 when path is one of OpenAI's (answered), else 0.
int srv_rest__route_openai(srv_rest *r, const srv_http_request *req, srv_http_response *resp);

#endif
