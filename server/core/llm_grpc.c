// server/core/llm_grpc.c: ModelStreamInfer to the generative backend
// (llm_grpc.h): TensorRT-LLM's tensors (input_ids ... output_ids) straight
// to the runners, or Triton's vLLM backend's (text_input, stream,
// sampling_parameters, exclude_input_in_output ... text_output) through the
// text layer (llm_text.h).
#include "server/core/llm_grpc.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grpc_service.pb-c.h"
#include "kernels/base/strwire.h"
#include "server/core/llm_text.h"
#include "server/core/llm_serve.h"
#include "server/core/reply.h"
#include "server/core/request.h"
#include "server/core/server.h"

typedef struct gsink {
  srv_server *s;
  srv_request *r;
} gsink;

// One response: output_ids [(1,) 1, n] and sequence_length [(1,) 1] (the
// requested ones), final flag as Triton's decoupled responses carry it.
static uint8_t *pack(const srv_request *r, const int32_t *ids, int64_t n, const char *text, size_t text_len, int final,
                     size_t *len) {
  int batched = r->version->llm_cfg->max_batch > 0;
  int64_t ids_shape[3] = {1, 1, n}, len_shape[2] = {1, 1};
  int32_t seq_len = (int32_t)n;
  Inference__ModelInferResponse__InferOutputTensor ot[2], *otp[2];
  ProtobufCBinaryData raw[2];
  size_t k = 0;
  uint8_t *wire = NULL;
  if (text) {  // text_output BYTES [1] ([1, 1] batched): one element, the wire layout's length then the bytes
    if (r->outputs_mask & (1u << SRV_LLM_OUT_TEXT)) {
      wire = malloc(text_len + 4);
      if (!wire) return NULL;
      strwire_put_len(wire, (uint32_t)text_len);
      memcpy(wire + 4, text, text_len);
      inference__model_infer_response__infer_output_tensor__init(&ot[k]);
      ot[k].name = (char *)"text_output";
      ot[k].datatype = (char *)"BYTES";
      ot[k].n_shape = batched ? 2 : 1;
      ot[k].shape = len_shape + (batched ? 0 : 1);
      raw[k] = (ProtobufCBinaryData){.len = text_len + 4, .data = wire};
      otp[k] = &ot[k];
      k++;
    }
  } else if (r->outputs_mask & 1) {
    inference__model_infer_response__infer_output_tensor__init(&ot[k]);
    ot[k].name = (char *)"output_ids";
    ot[k].datatype = (char *)"INT32";
    ot[k].n_shape = batched ? 3 : 2;
    ot[k].shape = batched ? ids_shape : ids_shape + 1;
    raw[k] = (ProtobufCBinaryData){.len = (size_t)n * sizeof(int32_t), .data = (uint8_t *)ids};
    otp[k] = &ot[k];
    k++;
  }
  if (!text && r->outputs_mask & 2) {
    inference__model_infer_response__infer_output_tensor__init(&ot[k]);
    ot[k].name = (char *)"sequence_length";
    ot[k].datatype = (char *)"INT32";
    ot[k].n_shape = batched ? 2 : 1;
    ot[k].shape = batched ? len_shape : len_shape + 1;
    raw[k] = (ProtobufCBinaryData){.len = sizeof seq_len, .data = (uint8_t *)&seq_len};
    otp[k] = &ot[k];
    k++;
  }
  uint8_t *buf = srv_request_pack_decoupled(r, final, k, otp, raw, len);
  free(wire);
  return buf;
}

// One answer (ids, or text when text is not NULL).
static void answer(gsink *g, const int32_t *ids, int64_t n, const char *text, size_t text_len, int final, int code,
                   const char *msg) {
  srv_request *r = g->r;
  if (!final) {
    size_t len = 0;
    uint8_t *buf = pack(r, ids, n, text, text_len, 0, &len);
    if (buf) srv_stream_reply_more(r->stream, buf, len);  // out of memory: this response is lost, the final says all
    return;
  }
  srv_server *s = g->s;
  free(g);
  if (code) {
    srv_request_send(s, r, NULL, 0, code, msg);
    return;
  }
  size_t len = 0;
  uint8_t *buf = pack(r, ids, n, text, text_len, 1, &len);
  if (!buf)
    srv_request_send(s, r, NULL, 0, ERR_RESOURCE_EXHAUSTED, "out of memory packing the final response");
  else
    srv_request_send(s, r, buf, len, 0, NULL);
}

static void emit(void *ctx, const int32_t *ids, int64_t n, int final, int code, const char *msg) {
  answer(ctx, ids, n, NULL, 0, final, code, msg);
}

static void emit_text(void *ctx, const srv_llm_text_out *o) {
  if (!o->final && !o->len) return;
  answer(ctx, NULL, 0, o->text ? o->text : "", o->len, o->final, o->code, o->msg);
}

static int cancelled(void *ctx) {
  return srv_request_cancelled(((gsink *)ctx)->r);
}
static int congested(void *ctx) {
  return srv_stream_congested(((gsink *)ctx)->r->stream);
}

static void refuse(srv_server *s, srv_request *r, int code, const char *msg) {
  atomic_fetch_sub(&r->version->stats.pending, 1);
  srv_reply_reject(s, r, code, msg);
}

// One value of a scalar input (shape [1], or [1, 1] batched): its first element; 0 when not given.
static int scalar(const srv_request *r, srv_llm_in k, void *out, size_t size, err *e) {
  const eng_tensor *t = &r->inputs[k];
  if (!t->data && !t->bytes) return 0;
  if (t->bytes != size) {
    err_set(e, ERR_INVALID_ARGUMENT, "input '%s' holds %zu values: it takes one", r->version->llm_cfg->in[k].name,
            t->bytes / size);
    return -1;
  }
  memcpy(out, t->data, size);
  return 1;
}

// What both request forms (token ids, vLLM's text) ask of the request
// itself: answers in the responses, one sequence.
static int check_one_sequence(const srv_request *r, err *e) {
  if (r->shm_out)
    return err_set(e, ERR_INVALID_ARGUMENT, "the %s backend answers in its responses, not into shared memory",
                   SRV_LLM_BACKEND);
  if (r->item.rows != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "batch size %" PRId64 ": a request carries one sequence (batch size 1)",
                   r->item.rows);
  return 0;
}

static int read_params(const srv_request *r, srv_llm_params *p, err *e) {
  const srv_llm_cfg *c = r->version->llm_cfg;
  *p = (srv_llm_params){.end_id = -1, .sampling = eng_llm_sampling_greedy(), .output_len = SRV_LLM_DEFAULT_OUTPUT_LEN};
  for (int i = 0; i < SRV_LLM_IN_TEXT; i++)
    if (!r->inputs[i].data && r->inputs[i].bytes)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': the %s backend reads its inputs from the request, not from "
                     "CUDA shared memory",
                     c->in[i].name, SRV_LLM_BACKEND);
  TRY(check_one_sequence(r, e));
  const eng_tensor *ids = &r->inputs[SRV_LLM_IN_IDS];
  p->ids = ids->data;
  p->n_ids = (int64_t)(ids->bytes / sizeof(int32_t));
  int32_t v32;
  int rc;
#define SCALAR(k, var)                         \
  do {                                         \
    rc = scalar(r, k, &(var), sizeof(var), e); \
    if (rc < 0) return e->code;                \
  } while (0)
  SCALAR(SRV_LLM_IN_LENGTHS, v32);
  if (rc && v32 != p->n_ids)
    return err_set(e, ERR_INVALID_ARGUMENT, "input_lengths says %d tokens, input_ids holds %" PRId64, v32, p->n_ids);
  SCALAR(SRV_LLM_IN_OUTPUT_LEN, v32);
  if (rc) p->output_len = v32;
  SCALAR(SRV_LLM_IN_END_ID, v32);
  if (rc) {
    if (v32 < 0) return err_set(e, ERR_INVALID_ARGUMENT, "end_id %d is negative", v32);
    p->end_id = v32;
  }
  SCALAR(SRV_LLM_IN_PAD_ID, v32);
  SCALAR(SRV_LLM_IN_TEMPERATURE, p->sampling.temperature);
  SCALAR(SRV_LLM_IN_TOP_K, p->sampling.top_k);
  SCALAR(SRV_LLM_IN_TOP_P, p->sampling.top_p);
  SCALAR(SRV_LLM_IN_MIN_P, p->sampling.min_p);
  SCALAR(SRV_LLM_IN_REP_PENALTY, p->sampling.repetition_penalty);
  SCALAR(SRV_LLM_IN_SEED, p->sampling.seed);
  p->seeded = rc;
  uint8_t b = 0;
  SCALAR(SRV_LLM_IN_STREAMING, b);
  p->streaming = b != 0;
#undef SCALAR
  const eng_tensor *sw = &r->inputs[SRV_LLM_IN_STOP_WORDS];
  if (sw->data && sw->bytes) {
    int64_t n = sw->dims[sw->ndims - 1];
    p->stop_flat = sw->data;
    p->stop_offsets = (const int32_t *)sw->data + n;
    p->n_stop = n;
  }
  p->deadline_us = r->item.deadline_us;
  p->stats = &r->version->stats;
  p->t_recv_us = r->t_recv_us;
  return 0;
}

// One BYTES element of input k (shape [1]): *s, *n; 0 when absent, 1 when read, -1 with e set.
static int one_string(const srv_request *r, srv_llm_in k, const char **s, size_t *n, err *e) {
  const eng_tensor *t = &r->inputs[k];
  if (!t->data) return 0;
  const char *name = r->version->llm_cfg->in[k].name;
  if (strwire_count(t->data, t->bytes) != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' holds one string", name), -1;
  *n = strwire_len(t->data);
  *s = (const char *)t->data + 4;
  return 1;
}

// The vLLM backend's tensors through the text layer.
static int submit_text(srv_request *r, gsink *g, err *e) {
  const srv_llm_cfg *c = r->version->llm_cfg;
  for (int i = SRV_LLM_IN_TEXT; i < SRV_LLM_IN_N; i++)
    if (!r->inputs[i].data && r->inputs[i].bytes)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': the %s backend reads its inputs from the request, not from CUDA shared memory",
                     c->in[i].name, SRV_LLM_BACKEND);
  for (int i = 0; i < SRV_LLM_IN_TEXT; i++)
    if (r->inputs[i].data || r->inputs[i].bytes)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s' does not go with text_input: the vLLM backend's form takes its sampling parameters "
                     "in sampling_parameters (JSON)",
                     c->in[i].name);
  TRY(check_one_sequence(r, e));
  srv_llm_text_params tp = {.logprobs = -1,
                            .base = {.end_id = -1,
                                     .sampling = eng_llm_sampling_greedy(),
                                     .output_len = SRV_LLM_DEFAULT_OUTPUT_LEN}};
  const char *stop_buf[SRV_LLM_TEXT_MAX_STOP];
  if (one_string(r, SRV_LLM_IN_TEXT, &tp.prompt, &tp.prompt_len, e) < 0) return e->code;
  const char *js;
  size_t jn;
  int has = one_string(r, SRV_LLM_IN_SAMPLING, &js, &jn, e);
  if (has < 0) return e->code;
  cJSON *sp = NULL;
  if (has) {
    sp = cJSON_ParseWithLength(js, jn);
    if (!cJSON_IsObject(sp)) {
      cJSON_Delete(sp);
      return err_set(e, ERR_INVALID_ARGUMENT, "input 'sampling_parameters' is not a JSON object");
    }
    if (srv_llm_text_vllm_params(sp, NULL, &tp, stop_buf, e) != 0) {
      cJSON_Delete(sp);
      return err_prefix(e, "sampling_parameters: "), e->code;
    }
  }
  uint8_t stream = 0, excl = 0;
  int has_excl = 0;
  const eng_tensor *t = &r->inputs[SRV_LLM_IN_STREAM];
  if (t->data) {
    if (t->bytes != 1) goto one_bool;
    stream = *(const uint8_t *)t->data;
  }
  t = &r->inputs[SRV_LLM_IN_EXCLUDE];
  if (t->data) {
    if (t->bytes != 1) goto one_bool;
    excl = *(const uint8_t *)t->data, has_excl = 1;
  }
  // the vLLM backend's rule: without streaming the prompt comes back first unless excluded; streaming excludes it
  if (stream && has_excl && !excl) {
    cJSON_Delete(sp);
    return err_set(e, ERR_INVALID_ARGUMENT, "when streaming, exclude_input_in_output = false is not allowed");
  }
  tp.echo_prompt = !stream && !(has_excl && excl);
  tp.add_special = 1;
  tp.base.streaming = stream != 0;
  tp.base.deadline_us = r->item.deadline_us;
  tp.base.stats = &r->version->stats;
  tp.base.t_recv_us = r->t_recv_us;
  srv_llm_text_sink sink = {.ctx = g, .emit = emit_text, .cancelled = cancelled, .congested = congested};
  int rc = srv_llm_text_submit(r->version->llm, &tp, &sink, e);
  cJSON_Delete(sp);
  return rc;
one_bool:
  cJSON_Delete(sp);
  return err_set(e, ERR_INVALID_ARGUMENT, "inputs 'stream' and 'exclude_input_in_output' hold one BOOL each");
}

void srv_llm_submit_request(srv_server *s, srv_request *r) {
  if (!r->stream) {  // infer.c refuses unary calls to a decoupled model before here
    refuse(s, r, ERR_UNIMPLEMENTED, "the inferd_llm backend answers on ModelStreamInfer only");
    return;
  }
  err e = {0};
  if (r->inputs[SRV_LLM_IN_TEXT].data || r->inputs[SRV_LLM_IN_TEXT].bytes) {
    gsink *g = malloc(sizeof *g);
    if (!g) {
      refuse(s, r, ERR_RESOURCE_EXHAUSTED, "out of memory");
      return;
    }
    *g = (gsink){.s = s, .r = r};
    if (submit_text(r, g, &e) != 0) {
      free(g);
      refuse(s, r, (int)e.code, e.msg);
    }
    return;
  }
  for (int i = SRV_LLM_IN_TEXT; i < SRV_LLM_IN_N; i++)
    if (r->inputs[i].data || r->inputs[i].bytes) {
      err_set(&e, ERR_INVALID_ARGUMENT, "input '%s' goes with text_input (the vLLM backend's form), not input_ids",
              r->version->llm_cfg->in[i].name);
      refuse(s, r, (int)e.code, e.msg);
      return;
    }
  if (!r->inputs[SRV_LLM_IN_IDS].data && !r->inputs[SRV_LLM_IN_IDS].bytes) {
    err_set(&e, ERR_INVALID_ARGUMENT, "missing input 'input_ids' (or 'text_input') for model '%s'", r->model->name);
    refuse(s, r, (int)e.code, e.msg);
    return;
  }
  srv_llm_params p;
  if (read_params(r, &p, &e) != 0) {
    refuse(s, r, (int)e.code, e.msg);
    return;
  }
  gsink *g = malloc(sizeof *g);
  if (!g) {
    refuse(s, r, ERR_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  *g = (gsink){.s = s, .r = r};
  srv_llm_sink sink = {.ctx = g, .emit = emit, .cancelled = cancelled, .congested = congested};
  if (srv_llm_submit(r->version->llm, &p, &sink, &e) != 0) {
    free(g);
    refuse(s, r, (int)e.code, e.msg);
  }
}
