// server/http/rest_generate.c: Triton's generate extension on the HTTP port
// (POST /v2/models/{m}[/versions/{v}]/generate and /generate_stream) for the
// generative backend (server/core/llm_serve.h). The request's JSON keys
// name input tensors (TensorRT-LLM's: input_ids, request_output_len,
// temperature, ...; a scalar or an array each), "id" and "parameters" are
// the request's own; the answer's keys are the output tensors (output_ids,
// sequence_length) with model_name, model_version and id. /generate answers
// once with every token (application/json); /generate_stream answers as
// Server-Sent Events, `data: {...}` per step's tokens (streaming defaults to
// true there; false gives one event with every token). Errors before the
// first answer are HTTP statuses with {"error": msg}; after it, an event
// {"error": msg} ends the stream.
//
// With text_input (Triton's vLLM backend's form) the prompt is text, the
// sampling parameters are vLLM's (max_tokens, temperature, top_p, seed,
// stop, ..., at the top level or in "parameters"), and the answer is
// text_output (server/core/llm_text.h); "stream" is the vLLM backend's name
// for streaming and exclude_input_in_output its echo switch.
//
// The job and its event queue are shared with the OpenAI endpoints
// (rest_openai.c), which format their own events.
//
// The runner's answers come on its thread; each becomes an event queued on
// the REST object and given to the connection on the loop thread
// (srv_rest__generate_deliver). A connection that fails a write marks the
// request gone, which the runner reads as a cancellation at its next step.
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/llm_serve.h"
#include "server/core/llm_text.h"
#include "server/core/registry.h"
#include "server/http/rest_internal.h"

typedef struct gen_event {
  struct gen_event *next;
  gen_job *j;
  char *data;  // sse: the bytes to write; else the answer's JSON body
  int status;  // HTTP status of the answer (non-sse)
  int final;
} gen_event;

gen_job *srv_rest__gen_job_create(srv_rest *r, srv_model *m, srv_version *v, int sse) {
  gen_job *j = calloc(1, sizeof *j);
  if (j && !(j->final_ev = calloc(1, sizeof *j->final_ev))) {
    free(j);
    j = NULL;
  }
  if (!j) return NULL;
  j->rest = r;
  j->m = m;
  j->v = v;
  j->sse = sse;
  return j;
}

static void job_free(gen_job *j) {
  srv_registry_unref(j->rest->s->reg, j->m);
  if (j->ext_free) j->ext_free(j->ext);
  free(j->id);
  free(j);
}

void srv_rest__gen_job_free(gen_job *j) {
  if (!j) return;
  free(j->final_ev);
  job_free(j);
}

void srv_rest__gen_push(gen_job *j, char *data, int status, int final) {
  srv_rest *r = j->rest;
  gen_event *ev = final ? j->final_ev : calloc(1, sizeof *ev);
  if (!ev) {  // an event lost to out of memory; the final one says all
    free(data);
    return;
  }
  ev->j = j;
  ev->final = final;
  ev->status = status;
  ev->data = data;
  pthread_mutex_lock(&r->mu);
  if (r->gen_tail)
    r->gen_tail->next = ev;
  else
    r->gen_head = ev;
  r->gen_tail = ev;
  int closing = r->closing;
  pthread_mutex_unlock(&r->mu);
  // the runners are stopped before REST closes (main.c), so nothing arrives after
  if (!closing) uv_async_send(&r->async);
}

void srv_rest__gen_defer(gen_job *j, const srv_http_request *req, srv_http_response *resp) {
  j->pending = srv_http_defer(req);
  if (!j->pending) {
    atomic_store(&j->gone, 1);  // the runner ends it; its answers are dropped, the job freed with the final one
    srv_rest__set_error(resp, 500, "out of memory");
  }
}

cJSON *srv_rest__json_strn(const char *s, size_t n) {
  char *t = malloc(n + 1);
  if (!t) return NULL;
  memcpy(t, s, n);
  t[n] = 0;
  cJSON *x = cJSON_CreateString(t);
  free(t);
  return x;
}

// "data: " json "\n\n" (json taken).
static char *sse_line(char *json) {
  if (!json) return NULL;
  size_t n = strlen(json);
  char *buf = malloc(n + 9);
  if (buf) {
    memcpy(buf, "data: ", 6);
    memcpy(buf + 6, json, n);
    memcpy(buf + 6 + n, "\n\n", 3);
  }
  free(json);
  return buf;
}

// --- the runner's side (its thread)

static char *answer_json(const gen_job *j, const int32_t *ids, int64_t n) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "model_name", j->m->name);
  cJSON_AddStringToObject(o, "model_version", j->v->version_str);
  if (j->id) cJSON_AddStringToObject(o, "id", j->id);
  cJSON *a = cJSON_AddArrayToObject(o, "output_ids");
  for (int64_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
  cJSON_AddNumberToObject(o, "sequence_length", (double)n);
  char *txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return txt;
}

static void push_answer(gen_job *j, char *json, int final, int code, const char *msg) {
  int status = 200;
  if (code) {
    srv_http_response tmp = {0};
    srv_rest__set_error(&tmp, srv_rest__http_status(code), msg);
    status = tmp.status;
    json = tmp.free_body ? tmp.body : NULL;
  }
  srv_rest__gen_push(j, j->sse ? sse_line(json) : json, status, final);
}

static void emit(void *ctx, const int32_t *ids, int64_t n, int final, int code, const char *msg) {
  gen_job *j = ctx;
  push_answer(j, code ? NULL : answer_json(j, ids, n), final, code, msg);
}

// text_input's answers: {"model_name", "model_version", "id", "text_output"}
static void emit_text(void *ctx, const srv_llm_text_out *o) {
  gen_job *j = ctx;
  char *json = NULL;
  if (!o->code) {
    cJSON *x = cJSON_CreateObject();
    if (x) {
      cJSON_AddStringToObject(x, "model_name", j->m->name);
      cJSON_AddStringToObject(x, "model_version", j->v->version_str);
      if (j->id) cJSON_AddStringToObject(x, "id", j->id);
      cJSON_AddItemToObject(x, "text_output", srv_rest__json_strn(o->text, o->len));
      if (o->final) cJSON_AddStringToObject(x, "finish_reason", o->finish_reason);
      json = cJSON_PrintUnformatted(x);
      cJSON_Delete(x);
    }
  }
  push_answer(j, json, o->final, o->code, o->msg);
}

static int cancelled(void *ctx) {
  return atomic_load(&((gen_job *)ctx)->gone);
}

// --- the loop thread's side

void srv_rest__generate_deliver(srv_rest *r) {
  pthread_mutex_lock(&r->mu);
  gen_event *ev = r->gen_head;
  r->gen_head = r->gen_tail = NULL;
  pthread_mutex_unlock(&r->mu);
  while (ev) {
    gen_event *next = ev->next;
    gen_job *j = ev->j;
    if (j->sse) {
      if (j->pending && !j->begun && !atomic_load(&j->gone)) {
        j->begun = 1;
        if (srv_http_stream_begin(j->pending, 200, "text/event-stream; charset=utf-8") != 0) atomic_store(&j->gone, 1);
      }
      if (j->begun && !atomic_load(&j->gone) && ev->data && ev->data[0])
        if (srv_http_stream_write(j->pending, ev->data, strlen(ev->data)) != 0) atomic_store(&j->gone, 1);
      if (ev->final) {
        if (j->pending) {
          if (j->begun) {
            srv_http_stream_end(j->pending);
          } else {
            srv_http_response resp = {0};
            srv_rest__set_error(&resp, 500, "the stream could not start");
            srv_http_complete(j->pending, &resp);
          }
        }
        job_free(j);
      }
    } else if (ev->final) {
      if (j->pending) {
        srv_http_response resp = {0};
        if (ev->data)
          srv_rest__set_text(&resp, ev->status, "application/json", ev->data, strlen(ev->data));
        else
          srv_rest__set_error(&resp, 500, "out of memory");
        ev->data = NULL;  // taken
        srv_http_complete(j->pending, &resp);
      }
      job_free(j);
    }
    free(ev->data);
    free(ev);
    ev = next;
  }
}

// --- the route: the JSON keys as the inputs' values

// A JSON number that is an integer within [lo, hi].
static int json_int(const cJSON *x, double lo, double hi, int64_t *out) {
  if (!cJSON_IsNumber(x)) return -1;
  double d = x->valuedouble;
  if (!(d >= lo && d <= hi) || floor(d) != d) return -1;
  *out = (int64_t)d;
  return 0;
}

// A scalar input: a value, or an array holding one.
static const cJSON *one(const cJSON *x) {
  if (cJSON_IsArray(x)) {
    if (cJSON_GetArraySize(x) != 1) return NULL;
    x = x->child;
    if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 1) x = x->child;  // [[v]], as a batched client writes it
  }
  return x;
}

// The flat ints of x (nested arrays flattened) appended to out[*n] (cap entries).
static int flat_ints(const cJSON *x, int32_t *out, int64_t cap, int64_t *n) {
  if (cJSON_IsArray(x)) {
    for (const cJSON *c = x->child; c; c = c->next)
      if (flat_ints(c, out, cap, n) != 0) return -1;
    return 0;
  }
  int64_t v;
  if (json_int(x, INT32_MIN, INT32_MAX, &v) != 0 || *n >= cap) return -1;
  out[(*n)++] = (int32_t)v;
  return 0;
}

static int count_leaves(const cJSON *x) {
  if (!cJSON_IsArray(x)) return 1;
  int n = 0;
  for (const cJSON *c = x->child; c; c = c->next) n += count_leaves(c);
  return n;
}

typedef struct gen_in {
  srv_llm_params p;
  int32_t *ids, *stop;  // owned
  int has_len, streaming_set;
  int64_t len;
} gen_in;

static int read_input(const srv_llm_cfg *c, const char *key, const cJSON *x, gen_in *g, err *e) {
  int k = -1;
  for (int i = 0; i < SRV_LLM_IN_N; i++)
    if (strcmp(c->in[i].name, key) == 0) k = i;
  if (k < 0) {
    char names[600] = "";
    size_t o = 0;
    for (int i = 0; i < SRV_LLM_IN_N && o < sizeof names; i++)
      o += (size_t)snprintf(names + o, sizeof names - o, "%s'%s'", i ? ", " : "", c->in[i].name);
    return err_set(e, ERR_INVALID_ARGUMENT, "unexpected input '%s' (the model's inputs: %s, and 'id', 'parameters')",
                   key, names);
  }
  srv_llm_params *p = &g->p;
  if (k >= SRV_LLM_IN_TEXT)
    return err_set(e, ERR_INVALID_ARGUMENT, "'%s' goes with text_input (the vLLM backend's form), not input_ids", key);
  if (k == SRV_LLM_IN_IDS) {
    int n = count_leaves(x);
    g->ids = malloc((size_t)(n ? n : 1) * sizeof *g->ids);
    if (!g->ids) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    int64_t got = 0;
    if (flat_ints(x, g->ids, n, &got) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "input 'input_ids': token ids are integers (INT32), in an array");
    p->ids = g->ids;
    p->n_ids = got;
    return 0;
  }
  if (k == SRV_LLM_IN_STOP_WORDS) {
    // [[ids...], [offsets...]] (or batched: [[[ids], [offsets]]])
    if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 1 && cJSON_IsArray(x->child)) x = x->child;
    const cJSON *a = cJSON_IsArray(x) && cJSON_GetArraySize(x) == 2 ? x->child : NULL;
    int n = a && cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (n < 0 || !cJSON_IsArray(a->next) || cJSON_GetArraySize(a->next) != n)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input 'stop_words_list': two rows of equal length, [[token ids], [end offsets, -1 padded]]");
    g->stop = malloc((size_t)(2 * n + 1) * sizeof *g->stop);
    if (!g->stop) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    int64_t got = 0;
    if (flat_ints(a, g->stop, n, &got) != 0 || flat_ints(a->next, g->stop + n, 2 * n, &got) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "input 'stop_words_list': integers (INT32) only");
    p->stop_flat = g->stop;
    p->stop_offsets = g->stop + n;
    p->n_stop = n;
    return 0;
  }
  const cJSON *v = one(x);
  if (!v) return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' takes one value", key);
  int64_t iv = 0;
  switch (k) {
    case SRV_LLM_IN_STREAMING:
      if (!cJSON_IsBool(v)) return err_set(e, ERR_INVALID_ARGUMENT, "input 'streaming' is a boolean");
      p->streaming = cJSON_IsTrue(v);
      g->streaming_set = 1;
      return 0;
    case SRV_LLM_IN_TEMPERATURE:
    case SRV_LLM_IN_TOP_P:
    case SRV_LLM_IN_MIN_P:
    case SRV_LLM_IN_REP_PENALTY: {
      if (!cJSON_IsNumber(v)) return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is a number (FP32)", key);
      float f = (float)v->valuedouble;
      if (k == SRV_LLM_IN_TEMPERATURE)
        p->sampling.temperature = f;
      else if (k == SRV_LLM_IN_TOP_P)
        p->sampling.top_p = f;
      else if (k == SRV_LLM_IN_MIN_P)
        p->sampling.min_p = f;
      else
        p->sampling.repetition_penalty = f;
      return 0;
    }
    case SRV_LLM_IN_SEED:
      if (json_int(v, 0, 9007199254740992.0, &iv) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "input 'random_seed' is an integer in [0, 2^53] (JSON's exact range)");
      p->sampling.seed = (uint64_t)iv;
      p->seeded = 1;
      return 0;
    default:
      if (json_int(v, INT32_MIN, INT32_MAX, &iv) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is an integer (INT32)", key);
      if (k == SRV_LLM_IN_OUTPUT_LEN)
        p->output_len = iv;
      else if (k == SRV_LLM_IN_TOP_K)
        p->sampling.top_k = (int32_t)iv;
      else if (k == SRV_LLM_IN_LENGTHS)
        g->has_len = 1, g->len = iv;
      else if (k == SRV_LLM_IN_END_ID) {
        if (iv < 0) return err_set(e, ERR_INVALID_ARGUMENT, "end_id %" PRId64 " is negative", iv);
        p->end_id = (int32_t)iv;
      }
      return 0;  // pad_id: accepted, unused
  }
}

static int status_of(int code) {
  return srv_rest__http_status(code);
}

// The vLLM backend's form: text_input, its sampling parameters at the top level or in "parameters",
// stream and exclude_input_in_output; submitted through the text layer.
static int submit_text(gen_job *j, const cJSON *root, int sse, err *e) {
  srv_version *v = j->v;
  srv_llm_text_params tp = {.logprobs = -1,
                            .base = {.end_id = -1,
                                     .sampling = eng_llm_sampling_greedy(),
                                     .output_len = SRV_LLM_DEFAULT_OUTPUT_LEN}};
  const char *stop_buf[SRV_LLM_TEXT_MAX_STOP];
  static const char *const own[] = {"text_input", "id", "parameters", "stream", "exclude_input_in_output", NULL};
  const cJSON *ti = cJSON_GetObjectItemCaseSensitive(root, "text_input");
  if (cJSON_IsArray(ti) && cJSON_GetArraySize(ti) == 1) ti = ti->child;  // ["..."], as a tensor's data
  if (!cJSON_IsString(ti)) return err_set(e, ERR_INVALID_ARGUMENT, "'text_input' is a string");
  TRY(srv_llm_text_vllm_params(root, own, &tp, stop_buf, e));
  const cJSON *pa = cJSON_GetObjectItemCaseSensitive(root, "parameters");
  static const char *const pown[] = {"stream", "exclude_input_in_output", NULL};
  if (pa) TRY(srv_llm_text_vllm_params(pa, pown, &tp, stop_buf, e));
  int stream = sse, excl = -1;
  for (int k = 0; k < 2; k++) {
    const cJSON *src = k ? pa : root;
    const cJSON *st = src ? cJSON_GetObjectItemCaseSensitive(src, "stream") : NULL;
    const cJSON *ex = src ? cJSON_GetObjectItemCaseSensitive(src, "exclude_input_in_output") : NULL;
    if (st && !cJSON_IsBool(st)) return err_set(e, ERR_INVALID_ARGUMENT, "'stream' is a boolean");
    if (ex && !cJSON_IsBool(ex)) return err_set(e, ERR_INVALID_ARGUMENT, "'exclude_input_in_output' is a boolean");
    if (st) stream = cJSON_IsTrue(st);
    if (ex) excl = cJSON_IsTrue(ex);
  }
  if (!sse) stream = 0;
  // the vLLM backend's rule: the prompt comes back first unless excluded, which streaming requires
  if (stream && excl == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "when streaming, exclude_input_in_output = false is not allowed");
  tp.echo_prompt = !stream && excl != 1;
  tp.prompt = ti->valuestring;
  tp.prompt_len = strlen(ti->valuestring);
  tp.add_special = 1;
  tp.base.streaming = stream;
  tp.base.deadline_us = INT64_MAX;
  tp.base.stats = &v->stats;
  tp.base.t_recv_us = eng_now_us();
  atomic_fetch_add(&v->stats.pending, 1);
  srv_llm_text_sink sink = {.ctx = j, .emit = emit_text, .cancelled = cancelled};
  if (srv_llm_text_submit(v->llm, &tp, &sink, e) != 0) {
    atomic_fetch_sub(&v->stats.pending, 1);
    return e->code;
  }
  return 0;
}

void srv_rest__route_generate(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char *model,
                              const char *version, int sse) {
  srv_server *s = r->s;
  if (srv_http_json_nul(req->body ? req->body : "", req->body_len))
    return srv_rest__set_error(resp, 400, SRV_HTTP_JSON_NUL_MSG);
  srv_json js = {0};
  err e = {0};
  if (srv_jsonmem_parse(s->jsonmem, req->body ? req->body : "", req->body_len, &js, &e) != 0) {
    if (e.code != ERR_INVALID_ARGUMENT) return srv_rest__json_refused(resp, &e);
    return srv_rest__set_error(resp, 400, "the request body is not JSON");
  }
  if (!cJSON_IsObject(js.root)) {
    srv_json_free(&js);
    return srv_rest__set_error(resp, 400, "the request body is not a JSON object");
  }
  srv_model *m = NULL;
  srv_version *v = NULL;
  if (srv_registry_find_ref(s->reg, model, version, &m, &v, &e) != 0) {
    srv_json_free(&js);
    return srv_rest__set_error(resp, status_of((int)e.code), e.msg);
  }
  gen_job *j = NULL;
  gen_in g = {.p = {.end_id = -1, .sampling = eng_llm_sampling_greedy(), .output_len = SRV_LLM_DEFAULT_OUTPUT_LEN}};
  int rc = 0;
  if (!v->llm) {
    rc = err_set(&e, ERR_INVALID_ARGUMENT,
                 "model '%s' is not a generative model: the generate extension serves backend '%s' models here "
                 "(use /infer for the others)",
                 m->name, SRV_LLM_BACKEND);
    goto refuse;
  }
  j = srv_rest__gen_job_create(r, m, v, sse);
  if (!j) {
    rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto refuse;
  }
  const cJSON *idj = cJSON_GetObjectItemCaseSensitive(js.root, "id");
  if (idj && !cJSON_IsString(idj)) {
    rc = err_set(&e, ERR_INVALID_ARGUMENT, "'id' is a string");
    goto refuse;
  }
  if (idj && !(j->id = strdup(idj->valuestring))) {
    rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto refuse;
  }
  if (cJSON_GetObjectItemCaseSensitive(js.root, "text_input")) {
    if (cJSON_GetObjectItemCaseSensitive(js.root, "input_ids")) {
      rc = err_set(&e, ERR_INVALID_ARGUMENT, "give the prompt as text_input or as input_ids, not both");
      goto refuse;
    }
    if ((rc = submit_text(j, js.root, sse, &e)) != 0) goto refuse;
    srv_rest__gen_defer(j, req, resp);
    srv_json_free(&js);
    return;
  }
  for (const cJSON *x = js.root->child; x && rc == 0; x = x->next) {
    if (strcmp(x->string, "id") == 0) {
      continue;
    } else if (strcmp(x->string, "parameters") == 0) {
      if (!cJSON_IsObject(x)) rc = err_set(&e, ERR_INVALID_ARGUMENT, "'parameters' is a JSON object");
    } else {
      rc = read_input(v->llm_cfg, x->string, x, &g, &e);
    }
  }
  if (rc) goto refuse;
  if (!g.p.ids) {
    rc = err_set(&e, ERR_INVALID_ARGUMENT, "missing input 'input_ids' (or 'text_input') for model '%s'", m->name);
    goto refuse;
  }
  if (g.has_len && g.len != g.p.n_ids) {
    rc = err_set(&e, ERR_INVALID_ARGUMENT, "input_lengths says %" PRId64 " tokens, input_ids holds %" PRId64, g.len,
                 g.p.n_ids);
    goto refuse;
  }
  // /generate answers once: every token in one response; /generate_stream streams unless told not to
  if (!sse)
    g.p.streaming = 0;
  else if (!g.streaming_set)
    g.p.streaming = 1;
  g.p.deadline_us = INT64_MAX;
  g.p.stats = &v->stats;
  g.p.t_recv_us = eng_now_us();
  atomic_fetch_add(&v->stats.pending, 1);
  srv_llm_sink sink = {.ctx = j, .emit = emit, .cancelled = cancelled};
  // submitted before the defer: its answers are delivered on this thread, after this handler returns
  if (srv_llm_submit(v->llm, &g.p, &sink, &e) != 0) {
    atomic_fetch_sub(&v->stats.pending, 1);
    rc = (int)e.code;
    goto refuse;
  }
  srv_rest__gen_defer(j, req, resp);
  free(g.ids);
  free(g.stop);
  srv_json_free(&js);
  return;
refuse:
  free(g.ids);
  free(g.stop);
  srv_json_free(&js);
  if (j)
    srv_rest__gen_job_free(j);  // drops the model's reference
  else
    srv_registry_unref(s->reg, m);
  srv_rest__set_error(resp, status_of((int)e.code), e.msg);
}
