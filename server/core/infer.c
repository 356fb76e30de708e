// server/core/infer.c: ModelInfer's entry, on the CQ thread that received
// the call (or a ModelStreamInfer message): the request unpacked without
// copying its tensors, its strings checked, its model and version found,
// validated against the config (infer_validate.c) and handed to the
// scheduler (sched.c); a request refused on the way is answered at once
// (reply.c). Its answers come later, from reply.c.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/utf8.h"
#include "server/core/arena.h"
#include "server/core/ensemble.h"
#include "server/core/infer_internal.h"
#include "server/core/llm_grpc.h"
#include "server/core/repeat.h"
#include "server/core/reply.h"
#include "server/core/request.h"
#include "server/core/sched.h"
#include "server/core/server.h"
#include "server/grpc/wire.h"
#include "server/obs/log.h"

// --- strings

// proto3 string fields must be UTF-8, and protobuf-c does not check: a
// broken id or name would be echoed into the response (or a log line) where
// the client's parser fails on it. Refused, without quoting the bytes; so
// are names and ids over their limits (a 100 KB name came back in the error).
// Names (model, version, tensors, parameter keys) and ids longer than these
// are refused before anything quotes them back in an error or a log line.
#define SRV_MAX_NAME_BYTES 1024
#define SRV_MAX_ID_BYTES 4096

static int text_field(const char *what, const char *str, size_t cap, err *e) {
  if (!str) return 0;
  size_t n = strlen(str);
  if (n > cap) return err_set(e, ERR_INVALID_ARGUMENT, "%s of %zu bytes exceeds the limit of %zu", what, n, cap);
  if (utf8_valid(str, n)) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT, "%s is not valid UTF-8 (proto3 string fields must be)", what);
}

static int text_param(const char *what, const char *key, const Inference__InferParameter *v, err *e) {
  TRY(text_field(what, key, SRV_MAX_NAME_BYTES, e));
  if (v && v->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
    TRY(text_field(what, v->string_param, SRV_MAX_ID_BYTES, e));
  return 0;
}

static int check_strings(const Inference__ModelInferRequest *m, err *e) {
  TRY(text_field("model_name", m->model_name, SRV_MAX_NAME_BYTES, e));
  TRY(text_field("model_version", m->model_version, SRV_MAX_NAME_BYTES, e));
  TRY(text_field("id", m->id, SRV_MAX_ID_BYTES, e));
  for (size_t i = 0; i < m->n_parameters; i++)
    TRY(text_param("a request parameter", m->parameters[i]->key, m->parameters[i]->value, e));
  for (size_t i = 0; i < m->n_inputs; i++) {
    const Inference__ModelInferRequest__InferInputTensor *t = m->inputs[i];
    TRY(text_field("an input name", t->name, SRV_MAX_NAME_BYTES, e));
    TRY(text_field("an input datatype", t->datatype, SRV_MAX_NAME_BYTES, e));
    for (size_t k = 0; k < t->n_parameters; k++)
      TRY(text_param("an input parameter", t->parameters[k]->key, t->parameters[k]->value, e));
  }
  for (size_t i = 0; i < m->n_outputs; i++) {
    const Inference__ModelInferRequest__InferRequestedOutputTensor *t = m->outputs[i];
    TRY(text_field("an output name", t->name, SRV_MAX_NAME_BYTES, e));
    for (size_t k = 0; k < t->n_parameters; k++)
      TRY(text_param("an output parameter", t->parameters[k]->key, t->parameters[k]->value, e));
  }
  return 0;
}

// --- unpacking without copying the tensors
//
// protobuf-c copies every bytes field it unpacks, and raw_input_contents
// (the tensors' bytes) is nearly all of a request. So the wire bytes are
// scanned first: the entries of raw_input_contents are left where they lie
// and the rest (names, shapes, parameters: some hundred bytes) is unpacked
// alone; the unpacked message's raw_input_contents then point into the
// wire bytes. Those are the received message itself when it outlives the
// request's use of its inputs (a unary call from the network keeps it until
// answered, srv_call_message_kept), else one copy in the request's arena.
// A message the scan (server/grpc/wire.c) cannot follow is unpacked whole,
// as before, so protobuf-c alone decides what parses.
#define RAW_INPUT_FIELD SRV_RAW_INPUT_FIELD

static Inference__ModelInferRequest *unpack_request(srv_arena *a, const uint8_t *req, size_t len, int kept) {
  size_t n_raw = 0, rest_len = 0, pos = 0;
  srv_wire_field f;
  while (pos < len) {
    if (srv_wire_next(req, len, &pos, &f))
      return inference__model_infer_request__unpack(srv_arena_protobuf(a), len, req);
    if (f.number == RAW_INPUT_FIELD && f.type == 2) n_raw++;
    else rest_len += f.end - f.start;
  }
  if (n_raw == 0) return inference__model_infer_request__unpack(srv_arena_protobuf(a), len, req);
  if (!kept) {  // the caller's bytes go with the call: one copy the request owns
    uint8_t *copy = srv_arena_alloc(a, len);
    if (!copy) return NULL;
    memcpy(copy, req, len);
    req = copy;
  }
  uint8_t *rest = srv_arena_alloc(a, rest_len ? rest_len : 1);
  ProtobufCBinaryData *raw = srv_arena_alloc(a, n_raw * sizeof *raw);
  if (!rest || !raw) return NULL;
  size_t o = 0, k = 0;
  for (pos = 0; pos < len;) {
    srv_wire_next(req, len, &pos, &f);  // the same bytes parsed above
    if (f.number == RAW_INPUT_FIELD && f.type == 2) {
      raw[k++] = (ProtobufCBinaryData){.len = f.n, .data = (uint8_t *)req + f.data};
    } else {
      memcpy(rest + o, req + f.start, f.end - f.start);
      o += f.end - f.start;
    }
  }
  Inference__ModelInferRequest *msg = inference__model_infer_request__unpack(srv_arena_protobuf(a), rest_len, rest);
  if (!msg) return NULL;
  msg->n_raw_input_contents = n_raw;
  msg->raw_input_contents = raw;
  return msg;
}

// --- the entry

// The model and version r->msg names, referenced, and r checked against it.
static int prepare_msg(srv_server *s, srv_request *r, err *e) {
  TRY(srv_registry_find_ref(s->reg, r->msg->model_name, r->msg->model_version, &r->model, &r->version, e));
  r->reg = s->reg;
  // a decoupled model answers on ModelStreamInfer only, and says so in Triton's words (a REST
  // request arrives as a local call; so does an ensemble's step, which has no words of Triton's)
  if (r->model->decoupled && !r->stream)
    return err_set(e, ERR_UNIMPLEMENTED, "%s doesn't support models with decoupled transaction policy",
                   r->call && !srv_call_is_local(r->call) ? "ModelInfer RPC" : "HTTP end point");
  // every instance failed for good: refused here, before any queue, and
  // logged one line per 10 s (srv_version_log_failure), not per request
  if (srv_version_failed(r->model, r->version, NULL, e)) {
    srv_version_log_failure(r->model, r->version, SRV_VLOG_REFUSED, e, 1);
    return ERR_UNAVAILABLE;
  }
  return srv_infer__build_request(s, r, e);
}

int srv_infer_prepare(srv_server *s, srv_request *r, const uint8_t *req, size_t len, err *e) {
  int kept = r->call && srv_call_message_kept(r->call);
  // the tree and the message's fields but its tensors (and, where made, the message's copy)
  size_t hint = kept ? 2 * SRV_ARENA_SLACK : (len < SRV_ARENA_BIG ? len : SRV_ARENA_BIG) + SRV_ARENA_SLACK;
  // before the unpack, which would cut a string at its NUL ("mlp\0junk" served by mlp)
  TRY(srv_wire_strings_no_nul(&inference__model_infer_request__descriptor, req, len, e));
  r->arena = srv_arena_create(hint);
  if (!r->arena) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  r->msg = unpack_request(r->arena, req, len, kept);
  if (!r->msg) return err_set(e, ERR_INVALID_ARGUMENT, "malformed ModelInferRequest: the message does not parse");
  TRY(check_strings(r->msg, e));
  return prepare_msg(s, r, e);
}

// A message received in pieces (srv_infer_sliced_handler): unpacked where
// its bytes lie (infer_pieces.c), or, where that walk cannot follow them,
// copied into one run the arena keeps and unpacked as above.
int srv_infer_prepare_pieces(srv_server *s, srv_request *r, const srv_piece *v, size_t n, size_t len, err *e) {
  r->arena = srv_arena_create(2 * SRV_ARENA_SLACK);
  if (!r->arena) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = srv_infer__unpack_pieces(r->arena, v, n, len, &r->msg, &r->raw_pieces, e);
  if (rc == -1) {
    uint8_t *flat = srv_infer__join_pieces(r->arena, v, n, len);
    if (!flat) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    TRY(srv_wire_strings_no_nul(&inference__model_infer_request__descriptor, flat, len, e));
    r->msg = unpack_request(r->arena, flat, len, 1);  // kept: the arena holds the copy
    if (!r->msg) return err_set(e, ERR_INVALID_ARGUMENT, "malformed ModelInferRequest: the message does not parse");
  } else if (rc) {
    return rc;
  }
  TRY(check_strings(r->msg, e));
  return prepare_msg(s, r, e);
}

// --- the server-wide budget of request bytes in flight (--max-inflight-request-bytes)
//
// The per-connection stream cap and the per-stream queue cap bound one client's
// connection, not their sum: 3 connections x 2,000 unary calls of 256 KiB held
// 1.5 GB of inputs waiting for the model. Each admitted request charges its
// message's bytes (what it holds until answered: the received message, or its
// copy in the arena) to one atomic counter; past the budget it is refused at
// once. A request is admitted whatever its size when nothing else is in flight,
// so a budget below the largest message cannot lock a client out.
enum { INFLIGHT_LOG_US = 10 * 1000 * 1000 };

static int budget_admit(srv_server *s, srv_request *r, size_t len) {
  long long n = (long long)len;
  long long prev = atomic_fetch_add_explicit(&s->inflight_bytes, n, memory_order_relaxed);
  if (s->max_inflight_bytes > 0 && prev > 0 && prev + n > s->max_inflight_bytes) {
    atomic_fetch_sub_explicit(&s->inflight_bytes, n, memory_order_relaxed);
    return -1;
  }
  r->budget = &s->inflight_bytes;
  r->charged = n;
  return 0;
}

static void budget_log(srv_server *s, int64_t now) {
  atomic_fetch_add(&s->inflight_rejected, 1);
  long long last = atomic_load(&s->inflight_logged_us);
  if (last && now - last < INFLIGHT_LOG_US) return;
  if (!atomic_compare_exchange_strong(&s->inflight_logged_us, &last, now ? now : 1)) return;
  srv_log(SRV_LOG_WARN,
          "inference requests refused: %lld bytes of requests in flight reached --max-inflight-request-bytes=%lld "
          "(%lld refused since start; one line per 10 s)",
          (long long)atomic_load(&s->inflight_bytes), s->max_inflight_bytes,
          (long long)atomic_load(&s->inflight_rejected));
}

// ModelInfer and each message of ModelStreamInfer: unpack, validate, queue.
// msg set (an ensemble's step, srv_infer_msg_handler): the request is that
// message, already built, and len the bytes of its tensors.
static void infer_entry(srv_server *s, srv_call *call, srv_stream *st, const uint8_t *req, size_t len,
                        Inference__ModelInferRequest *msg, const srv_piece *pieces, size_t n_pieces) {
  int64_t t_recv = eng_now_us();
  // Every CQ thread writing this one line per request bounces it between
  // cores; the readers (the drain's quiet period, the idle trim) count in
  // milliseconds, so a write when it moved on by 100 us is as good.
  if (t_recv - atomic_load_explicit(&s->infer_last_call_us, memory_order_relaxed) >= 100)
    atomic_store(&s->infer_last_call_us, t_recv);
  // Draining changes nothing here: a call the transport took is served (main
  // closes the transport once calls stop arriving, see its drain).
  atomic_fetch_add(&s->infer_inflight, 1);
  err e = {0};
  srv_request *r = calloc(1, sizeof *r);
  if (!r) {
    srv_request_answer(&(srv_request){.call = call, .stream = st}, NULL, 0, ERR_RESOURCE_EXHAUSTED, "out of memory");
    atomic_fetch_sub(&s->infer_inflight, 1);
    return;
  }
  r->call = call;
  r->stream = st;
  r->t_recv_us = t_recv;
  int rc;
  if (msg) {
    r->msg = msg;
    r->arena = srv_arena_create(SRV_ARENA_SLACK);
    rc = r->arena ? prepare_msg(s, r, &e) : err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else if (pieces) {
    rc = srv_infer_prepare_pieces(s, r, pieces, n_pieces, len, &e);
  } else {
    rc = srv_infer_prepare(s, r, req, len, &e);
  }
  if (rc) {
    srv_log(SRV_LOG_DEBUG, "ModelInfer rejected: %s", e.msg);
    srv_reply_reject(s, r, (int)e.code, e.msg);
    return;
  }
  if (budget_admit(s, r, len + r->shm_copied) != 0) {
    budget_log(s, t_recv);
    char msg[256];
    snprintf(msg, sizeof msg,
             "the server holds too many request bytes in flight (--max-inflight-request-bytes=%lld): retry later",
             s->max_inflight_bytes);
    srv_reply_reject(s, r, ERR_RESOURCE_EXHAUSTED, msg);
    return;
  }
  atomic_fetch_add(&r->version->stats.pending, 1);
  if (r->version->ens) {  // no scheduler of its own: its steps are requests to their models
    srv_ensemble_run(s, r, srv_infer_msg_handler);
    return;
  }
  if (r->version->rep) {  // the built-in repeat backend: its own thread answers, several times
    srv_repeat_submit(s->repeat, s, r);
    return;
  }
  if (r->version->llm) {  // the generative backend: the version's runners answer, token by token
    srv_llm_submit_request(s, r);
    return;
  }
  r->traced = prof_trace_sample(s->trace);
  srv_sched_submit(s->sched, r);
}

void srv_infer_handler(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  infer_entry(ctx, call, NULL, req, len, NULL, NULL, 0);
}

void srv_infer_sliced_handler(void *ctx, srv_call *call, const srv_piece *pieces, size_t n_pieces, size_t len) {
  infer_entry(ctx, call, NULL, NULL, len, NULL, pieces, n_pieces);
}

void srv_infer_stream_handler(void *ctx, srv_stream *st, const uint8_t *req, size_t len) {
  infer_entry(ctx, NULL, st, req, len, NULL, NULL, 0);
}

void srv_infer_msg_handler(srv_server *s, srv_call *call, Inference__ModelInferRequest *msg, size_t bytes) {
  infer_entry(s, call, NULL, NULL, bytes, msg, NULL, 0);
}
