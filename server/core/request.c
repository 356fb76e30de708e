// server/core/request.c: the end of a ModelInfer request, the bottom of the
// request path that every answer goes through: its answer sent to the
// client (a unary call's reply or failure, a stream's message or error
// message) and its memory freed. It calls no other part of the request
// path: infer.c (a rejected request), reply.c (a batch's answers, drops)
// and order.c (an ordered answer whose turn came) all end here.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/utf8.h"
#include "server/core/arena.h"
#include "server/core/request.h"
#include "server/core/server.h"

void srv_infer_request_free(srv_request *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_shm_held; i++) srv_shm_release(r->shm_held[i]);
  free(r->shm_held);
  free(r->shm_out);
  for (size_t i = 0; i < r->n_cuda_held; i++) srv_cuda_shm_release(r->cuda_held[i]);
  free(r->cuda_held);
  for (size_t i = 0; i < r->n_cuda_copies; i++) free(r->cuda_copies[i]);
  free(r->cuda_copies);
  free(r->cuda_in);
  srv_arena_destroy(r->arena);  // msg and inputs with it
  free(r->typed_buf);
  // last: the generation (and the version this request counted on) may be freed from here
  if (r->reg) srv_registry_unref(r->reg, r->model);
  // every path that ends a request (answered, failed, dropped, cancelled) comes here once
  if (r->budget) atomic_fetch_sub_explicit(r->budget, r->charged, memory_order_relaxed);
  free(r);
}

// A stream's failed request: ModelStreamInferResponse.error_message, with
// the request's model, version and id (when known) so the client can tell
// which of its requests failed. NULL when out of memory.
static char *valid_or_empty(char *str) { return str && utf8_valid(str, strlen(str)) ? str : (char *)""; }

// triton_final_response = final, the parameter every response of a
// decoupled model carries (Triton's gRPC server sets it).
static void final_param(Inference__InferParameter *fin, Inference__ModelInferResponse__ParametersEntry *pe, int final) {
  inference__infer_parameter__init(fin);
  fin->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
  fin->bool_param = final != 0;
  inference__model_infer_response__parameters_entry__init(pe);
  pe->key = (char *)"triton_final_response";
  pe->value = fin;
}

static uint8_t *pack_stream_error(const srv_request *r, const char *msg, size_t *len) {
  Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
  Inference__ModelInferResponse ir = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  sr.error_message = (char *)(msg && *msg ? msg : "failed");
  char esc[2048];  // the message may quote what the client sent: escaped as status details are
  if (utf8_has_controls(sr.error_message, strlen(sr.error_message))) {
    utf8_escape_controls(esc, sizeof esc, sr.error_message, strlen(sr.error_message));
    sr.error_message = esc;
  }
  // a decoupled model's error ends its request: Triton marks it final as it marks every such response
  Inference__InferParameter fin;
  Inference__ModelInferResponse__ParametersEntry pe, *pes[1] = {&pe};
  final_param(&fin, &pe, 1);
  if (r && r->msg) {  // echoed so the client can match the error; a field that is not UTF-8 is not
    ir.model_name = valid_or_empty(r->msg->model_name);
    ir.model_version = valid_or_empty(r->msg->model_version);
    ir.id = valid_or_empty(r->msg->id);
    sr.infer_response = &ir;
    if (r->model && r->model->decoupled) {
      ir.n_parameters = 1;
      ir.parameters = pes;
    }
  }
  *len = inference__model_stream_infer_response__get_packed_size(&sr);
  uint8_t *buf = malloc(*len ? *len : 1);
  if (buf) inference__model_stream_infer_response__pack(&sr, buf);
  return buf;
}

uint8_t *srv_request_pack_decoupled(const srv_request *r, int final, size_t n,
                                    Inference__ModelInferResponse__InferOutputTensor **outs,
                                    ProtobufCBinaryData *raw, size_t *len) {
  Inference__ModelInferResponse ir = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  ir.model_name = r->model->name;
  ir.model_version = r->version->version_str;
  ir.id = r->msg->id ? r->msg->id : (char *)"";
  Inference__InferParameter fin;
  Inference__ModelInferResponse__ParametersEntry pe, *pes[1] = {&pe};
  final_param(&fin, &pe, final);
  ir.n_parameters = 1;
  ir.parameters = pes;
  ir.n_outputs = n;
  ir.outputs = outs;
  ir.n_raw_output_contents = n;
  ir.raw_output_contents = raw;
  Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
  sr.infer_response = &ir;
  *len = inference__model_stream_infer_response__get_packed_size(&sr);
  uint8_t *buf = malloc(*len ? *len : 1);
  if (buf) inference__model_stream_infer_response__pack(&sr, buf);
  return buf;
}

void srv_request_answer(const srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  if (r->stream) {
    if (!resp) resp = pack_stream_error(r, msg, &len);
    srv_stream_reply(r->stream, resp, resp ? len : 0);
  } else if (resp) {
    srv_call_reply(r->call, resp, len);
  } else {
    srv_call_fail(r->call, code, msg);
  }
}

void srv_request_send(srv_server *s, srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  srv_request_answer(r, resp, len, code, msg);
  srv_infer_request_free(r);
  atomic_fetch_sub(&s->infer_inflight, 1);
}

static _Thread_local int tl_locked;  // srv_request_send_locked's depth on this thread

void srv_request_send_locked(srv_server *s, srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  tl_locked++;
  srv_request_send(s, r, resp, len, code, msg);
  tl_locked--;
}

int srv_request_sending_locked(void) { return tl_locked > 0; }
