// server/http/rest_job.c: a REST request's way through the server and back
// (rest_internal.h): the job runs its gRPC method as a local call
// (srv_rest__run_local), the answer is written where the call ends (any
// thread) by the job's own answer function, and the loop thread hands the
// finished jobs to their connections (srv_rest__deliver). Also the HTTP
// answers every route writes (text, errors). It calls nothing in rest.c or
// rest_infer.c (their answers come in through job.answer), so both depend
// on it and not the reverse.
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/rest_internal.h"
#include "kernels/base/utf8.h"

// --- answers

void srv_rest__set_text(srv_http_response *resp, int status, const char *ctype, char *body, size_t len) {
  resp->status = status;
  resp->content_type = ctype;
  resp->body = body;
  resp->len = len;
  resp->free_body = 1;
}

int srv_rest__http_status(int code) {
  switch (code) {
    case ERR_INVALID_ARGUMENT:
    case ERR_FAILED_PRECONDITION:
    case ERR_CANCELLED: return 400;
    case ERR_NOT_FOUND: return 404;
    case ERR_ALREADY_EXISTS: return 409;
    case ERR_RESOURCE_EXHAUSTED: return 429;
    case ERR_UNIMPLEMENTED: return 501;
    case ERR_UNAVAILABLE: return 503;
    case ERR_DEADLINE_EXCEEDED: return 504;
    default: return 500;
  }
}

// {"error": msg}; falls back to a static body when out of memory.
void srv_rest__set_error(srv_http_response *resp, int status, const char *msg) {
  // messages quote what clients sent: a control character would come back
  // as a JSON escape that the client's decoder turns raw again
  char esc[2048];
  if (msg && utf8_has_controls(msg, strlen(msg))) {
    utf8_escape_controls(esc, sizeof esc, msg, strlen(msg));
    msg = esc;
  }
  cJSON *o = cJSON_CreateObject();
  char *txt = NULL;
  if (o && cJSON_AddStringToObject(o, "error", msg ? msg : "")) txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!txt) {
    static const char oom[] = "{\"error\":\"out of memory\"}";
    resp->status = 500;
    resp->content_type = "application/json";
    resp->body = (char *)oom;
    resp->len = sizeof oom - 1;
    resp->free_body = 0;
    return;
  }
  srv_rest__set_text(resp, status, "application/json", txt, strlen(txt));
}

void srv_rest__json_refused(srv_http_response *resp, const err *e) {
  int status = srv_json_status(e->code);
  srv_rest__set_error(resp, status, e->msg);
  if (status == 503) snprintf(resp->headers, sizeof resp->headers, "Retry-After: 1\r\n");
}

// --- the local call's end (any thread) and the loop thread's delivery

void srv_rest__job_free(job *j) {
  free(j->out_opts);
  free(j);
}

static void done_cb(void *arg, uint8_t *resp, size_t len, int code, const char *msg) {
  job *j = arg;
  if (!resp && code) srv_rest__set_error(&j->resp, srv_rest__http_status(code), msg);
  else j->answer(j, resp, len);
  free(resp);
  srv_rest *r = j->rest;
  pthread_mutex_lock(&r->mu);
  j->next = NULL;
  if (r->tail) r->tail->next = j;
  else r->head = j;
  r->tail = j;
  int closing = r->closing;
  pthread_mutex_unlock(&r->mu);
  // After srv_rest_close nothing reaches here: the scheduler had stopped and
  // the reply queue had drained (main.c), and a later request is refused on
  // the closing loop's own thread before the close.
  if (!closing) uv_async_send(&r->async);
}

void srv_rest__deliver(srv_rest *r) {
  pthread_mutex_lock(&r->mu);
  job *j = r->head;
  r->head = r->tail = NULL;
  pthread_mutex_unlock(&r->mu);
  while (j) {
    job *next = j->next;
    srv_http_complete(j->pending, &j->resp);
    srv_rest__job_free(j);
    j = next;
  }
}

void srv_rest__on_async(uv_async_t *a) { srv_rest__deliver(a->data); }

// Runs the gRPC method `method` on the packed request, answering through
// the job (which it takes).
void srv_rest__run_local(srv_rest *r, job *j, const char *method, const uint8_t *req, size_t len) {
  const srv_method *m = NULL;
  for (size_t i = 0; i < r->n_methods; i++)
    if (strcmp(r->methods[i].path, method) == 0) m = &r->methods[i];
  srv_call *call = m && m->unary ? srv_call_create_local(m->path, done_cb, j) : NULL;
  if (!call) {
    done_cb(j, NULL, 0, m ? ERR_RESOURCE_EXHAUSTED : ERR_INTERNAL, m ? "out of memory" : "no such method");
    return;
  }
  m->unary(m->ctx, call, req, len);
}

void srv_rest__run_local_owned(srv_rest *r, job *j, const char *method, uint8_t *req, size_t len) {
  const srv_method *m = NULL;
  for (size_t i = 0; i < r->n_methods; i++)
    if (strcmp(r->methods[i].path, method) == 0) m = &r->methods[i];
  srv_call *call = m && m->unary ? srv_call_create_local(m->path, done_cb, j) : NULL;
  if (!call) {
    free(req);
    done_cb(j, NULL, 0, m ? ERR_RESOURCE_EXHAUSTED : ERR_INTERNAL, m ? "out of memory" : "no such method");
    return;
  }
  srv_call_local_own_message(call, req);  // freed when answered, maybe inside the handler: not read after it
  m->unary(m->ctx, call, req, len);
}
