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
#include "server/core/registry.h"
#include "server/http/rest_internal.h"

typedef struct gen_job {
  srv_rest *rest;
  srv_http_pending *pending;  // NULL when the defer found no memory: answers are dropped, the request cancelled
  int sse;
  int begun;  // the stream's headers went out (loop thread)
  _Atomic int gone;
  srv_model *m;  // referenced until the final answer
  srv_version *v;
  char *id;
  struct gen_event *final_ev;  // allocated with the job: the final answer always has its event
} gen_job;

typedef struct gen_event {
  struct gen_event *next;
  gen_job *j;
  char *data;  // JSON text
  int status;  // HTTP status of a final error answered before anything else
  int final;
} gen_event;

static void job_free(gen_job *j) {
  srv_registry_unref(j->rest->s->reg, j->m);
  free(j->id);
  free(j);
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

static void emit(void *ctx, const int32_t *ids, int64_t n, int final, int code, const char *msg) {
  gen_job *j = ctx;
  srv_rest *r = j->rest;
  gen_event *ev = final ? j->final_ev : calloc(1, sizeof *ev);
  if (!ev) return;  // a token event lost to out of memory; the final one says all
  ev->j = j;
  ev->final = final;
  if (code) {
    srv_http_response tmp = {0};
    srv_rest__set_error(&tmp, srv_rest__http_status(code), msg);
    ev->status = tmp.status;
    ev->data = tmp.free_body ? tmp.body : NULL;
  } else {
    ev->status = 200;
    ev->data = answer_json(j, ids, n);
  }
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
      if (j->begun && !atomic_load(&j->gone) && ev->data) {
        size_t n = strlen(ev->data);
        char *buf = malloc(n + 9);
        if (buf) {
          memcpy(buf, "data: ", 6);
          memcpy(buf + 6, ev->data, n);
          memcpy(buf + 6 + n, "\n\n", 2);
          if (srv_http_stream_write(j->pending, buf, n + 8) != 0) atomic_store(&j->gone, 1);
          free(buf);
        }
      }
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
    if (strcmp(key, "text_input") == 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "text_input needs a tokenizer, which this server does not have yet: send the prompt's token ids "
                     "as input_ids");
    return err_set(e, ERR_INVALID_ARGUMENT, "unexpected input '%s' (the model's inputs: %s, and 'id', 'parameters')",
                   key, names);
  }
  srv_llm_params *p = &g->p;
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
  j = calloc(1, sizeof *j);
  if (j && !(j->final_ev = calloc(1, sizeof *j->final_ev))) {
    free(j);
    j = NULL;
  }
  if (!j) {
    rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto refuse;
  }
  for (const cJSON *x = js.root->child; x && rc == 0; x = x->next) {
    if (strcmp(x->string, "id") == 0) {
      if (!cJSON_IsString(x))
        rc = err_set(&e, ERR_INVALID_ARGUMENT, "'id' is a string");
      else if (!(j->id = strdup(x->valuestring)))
        rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    } else if (strcmp(x->string, "parameters") == 0) {
      if (!cJSON_IsObject(x)) rc = err_set(&e, ERR_INVALID_ARGUMENT, "'parameters' is a JSON object");
    } else {
      rc = read_input(v->llm_cfg, x->string, x, &g, &e);
    }
  }
  if (rc) goto refuse;
  if (!g.p.ids) {
    rc = err_set(&e, ERR_INVALID_ARGUMENT, "missing input 'input_ids' for model '%s'", m->name);
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
  j->rest = r;
  j->sse = sse;
  j->m = m;
  j->v = v;
  atomic_fetch_add(&v->stats.pending, 1);
  srv_llm_sink sink = {.ctx = j, .emit = emit, .cancelled = cancelled};
  // submitted before the defer: its answers are delivered on this thread, after this handler returns
  if (srv_llm_submit(v->llm, &g.p, &sink, &e) != 0) {
    atomic_fetch_sub(&v->stats.pending, 1);
    rc = (int)e.code;
    goto refuse;
  }
  j->pending = srv_http_defer(req);
  if (!j->pending) {
    atomic_store(&j->gone, 1);  // the runner ends it; its answers are dropped, the job freed with the final one
    srv_rest__set_error(resp, 500, "out of memory");
  }
  free(g.ids);
  free(g.stop);
  srv_json_free(&js);
  return;
refuse:
  free(g.ids);
  free(g.stop);
  srv_json_free(&js);
  if (j) {
    free(j->id);
    free(j->final_ev);
  }
  free(j);
  srv_registry_unref(s->reg, m);
  srv_rest__set_error(resp, status_of((int)e.code), e.msg);
}
