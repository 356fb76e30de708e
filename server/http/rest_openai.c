// server/http/rest_openai.c: OpenAI's API on the HTTP port for the
// generative backend's models that have a tokenizer: GET /v1/models, POST
// /v1/completions and /v1/chat/completions, answered once (JSON) or, with
// "stream": true, as OpenAI streams: Server-Sent Events `data: {chunk}`, the
// last chunk with finish_reason, a usage chunk when stream_options asks, then
// `data: [DONE]`. Errors are OpenAI's shape: {"error": {"message", "type",
// "param", "code"}}. The request is read by openai_req.c, submitted through
// the text layer (server/core/llm_text.h: tokenizer, incremental detokenizer,
// stop strings), and its answers travel the generate extension's job and
// event queue (rest_generate.c) to the loop thread.
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/llm/chat_template.h"
#include "engine/llm/tokenizer.h"
#include "kernels/base/utf8.h"
#include "server/core/llm_serve.h"
#include "server/core/llm_text.h"
#include "server/core/registry.h"
#include "server/http/openai_req.h"
#include "server/http/rest_internal.h"

_Static_assert(SRV_OAI_MAX_STOP <= SRV_LLM_TEXT_MAX_STOP, "the text layer takes every stop string");

// --- errors in OpenAI's shape

static char *error_json(const char *msg, const char *type, const char *param, const char *code) {
  cJSON *o = cJSON_CreateObject(), *x = cJSON_AddObjectToObject(o, "error");
  cJSON_AddStringToObject(x, "message", msg ? msg : "");
  cJSON_AddStringToObject(x, "type", type);
  if (param && param[0])
    cJSON_AddStringToObject(x, "param", param);
  else
    cJSON_AddNullToObject(x, "param");
  if (code)
    cJSON_AddStringToObject(x, "code", code);
  else
    cJSON_AddNullToObject(x, "code");
  char *txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return txt;
}

static const char *error_type(int status) {
  return status >= 500 ? "server_error" : "invalid_request_error";
}

static void set_error(srv_http_response *resp, int status, const char *msg, const char *param, const char *code) {
  char *txt = error_json(msg, error_type(status), param, code);
  if (!txt) return srv_rest__set_error(resp, 500, "out of memory");
  srv_rest__set_text(resp, status, "application/json", txt, strlen(txt));
}

// --- one request's state (the job's ext): written on its runner's thread only

typedef struct oai {
  srv_oai_kind kind;
  char id[48];
  char *model;  // as the client named it
  int64_t created;
  int include_usage;
  int first;     // no chunk sent yet (chat: the role goes first)
  int logprobs;  // -1: not asked
  const eng_tok *tok;
  int64_t text_off;  // completions' text_offset of the next token
} oai;

static void oai_free(void *p) {
  oai *o = p;
  if (o) free(o->model);
  free(o);
}

static cJSON *usage(const srv_llm_text_out *t) {
  cJSON *u = cJSON_CreateObject();
  cJSON_AddNumberToObject(u, "prompt_tokens", (double)t->prompt_tokens);
  cJSON_AddNumberToObject(u, "completion_tokens", (double)t->completion_tokens);
  cJSON_AddNumberToObject(u, "total_tokens", (double)(t->prompt_tokens + t->completion_tokens));
  return u;
}

// --- log probabilities, in OpenAI's two shapes

static cJSON *tok_item(const oai *o, int32_t id, cJSON **bytes, size_t *len) {
  char *txt = NULL;
  size_t n = 0;
  err e = {0};
  if (eng_tok_decode(o->tok, &id, 1, false, &txt, &n, &e) != 0) txt = NULL, n = 0;
  cJSON *s = srv_rest__json_strn(txt ? txt : "", n);
  if (bytes) {
    *bytes = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(*bytes, cJSON_CreateNumber((unsigned char)txt[i]));
  }
  if (len) *len = n;
  free(txt);
  return s;
}

static cJSON *lp_json(oai *o, const srv_llm_text_out *t) {
  cJSON *x = cJSON_CreateObject();
  if (o->kind == SRV_OAI_CHAT) {
    cJSON *c = cJSON_AddArrayToObject(x, "content");
    for (size_t i = 0; i < t->n_lp; i++) {
      const srv_llm_text_lp *p = &t->lp[i];
      cJSON *it = cJSON_CreateObject(), *b;
      cJSON_AddItemToObject(it, "token", tok_item(o, p->id, &b, NULL));
      cJSON_AddNumberToObject(it, "logprob", p->logprob);
      cJSON_AddItemToObject(it, "bytes", b);
      cJSON *tops = cJSON_AddArrayToObject(it, "top_logprobs");
      for (int k = 0; k < p->n_top; k++) {
        cJSON *tp = cJSON_CreateObject(), *tb;
        cJSON_AddItemToObject(tp, "token", tok_item(o, p->top_id[k], &tb, NULL));
        cJSON_AddNumberToObject(tp, "logprob", p->top_lp[k]);
        cJSON_AddItemToObject(tp, "bytes", tb);
        cJSON_AddItemToArray(tops, tp);
      }
      cJSON_AddItemToArray(c, it);
    }
    cJSON_AddNullToObject(x, "refusal");
    return x;
  }
  cJSON *toks = cJSON_AddArrayToObject(x, "tokens"), *lps = cJSON_AddArrayToObject(x, "token_logprobs");
  cJSON *tops = cJSON_AddArrayToObject(x, "top_logprobs"), *offs = cJSON_AddArrayToObject(x, "text_offset");
  for (size_t i = 0; i < t->n_lp; i++) {
    const srv_llm_text_lp *p = &t->lp[i];
    size_t n = 0;
    cJSON_AddItemToArray(toks, tok_item(o, p->id, NULL, &n));
    cJSON_AddItemToArray(lps, cJSON_CreateNumber(p->logprob));
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)o->text_off));
    o->text_off += (int64_t)n;
    cJSON *m = cJSON_CreateObject();
    for (int k = 0; k < p->n_top; k++) {
      cJSON *key = tok_item(o, p->top_id[k], NULL, NULL);
      if (cJSON_IsString(key) && !cJSON_GetObjectItemCaseSensitive(m, key->valuestring))
        cJSON_AddNumberToObject(m, key->valuestring, p->top_lp[k]);
      cJSON_Delete(key);
    }
    cJSON_AddItemToArray(tops, m);
  }
  return x;
}

static void add_lp(cJSON *choice, oai *o, const srv_llm_text_out *t) {
  if (o->logprobs >= 0 && t && t->n_lp)
    cJSON_AddItemToObject(choice, "logprobs", lp_json(o, t));
  else
    cJSON_AddNullToObject(choice, "logprobs");
}

static cJSON *head(const oai *o, int chunk) {
  cJSON *x = cJSON_CreateObject();
  cJSON_AddStringToObject(x, "id", o->id);
  cJSON_AddStringToObject(
      x, "object", o->kind == SRV_OAI_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
  cJSON_AddNumberToObject(x, "created", (double)o->created);
  cJSON_AddStringToObject(x, "model", o->model);
  cJSON_AddNullToObject(x, "system_fingerprint");
  return x;
}

// One streamed chunk: text (may be NULL: none), finish (NULL: null); role: the chat's first.
static cJSON *chunk(oai *o, const char *text, size_t len, const char *finish, int role, const srv_llm_text_out *lp) {
  cJSON *x = head(o, 1), *ch = cJSON_AddArrayToObject(x, "choices"), *c = cJSON_CreateObject();
  cJSON_AddItemToArray(ch, c);
  cJSON_AddNumberToObject(c, "index", 0);
  if (o->kind == SRV_OAI_CHAT) {
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    if (role) cJSON_AddStringToObject(d, "role", "assistant");
    if (text) cJSON_AddItemToObject(d, "content", srv_rest__json_strn(text, len));
  } else {
    cJSON_AddItemToObject(c, "text", srv_rest__json_strn(text ? text : "", text ? len : 0));
  }
  add_lp(c, o, lp);
  if (finish)
    cJSON_AddStringToObject(c, "finish_reason", finish);
  else
    cJSON_AddNullToObject(c, "finish_reason");
  if (o->include_usage) cJSON_AddNullToObject(x, "usage");
  return x;
}

// Appends "data: <x>\n\n" to *buf (x deleted).
static void line(char **buf, size_t *len, cJSON *x, const char *raw) {
  char *t = x ? cJSON_PrintUnformatted(x) : NULL;
  cJSON_Delete(x);
  const char *s = x ? t : raw;
  if (!s) return;
  size_t n = strlen(s);
  char *b = realloc(*buf, *len + n + 9);
  if (b) {
    memcpy(b + *len, "data: ", 6);
    memcpy(b + *len + 6, s, n);
    memcpy(b + *len + 6 + n, "\n\n", 3);
    *len += n + 8;
    *buf = b;
  }
  free(t);
}

static void emit(void *ctx, const srv_llm_text_out *t) {
  gen_job *j = ctx;
  oai *o = j->ext;
  if (t->code) {
    int status = srv_rest__http_status(t->code);
    char *ej = error_json(t->msg, error_type(status), NULL, NULL);
    if (!j->sse) return srv_rest__gen_push(j, ej, status, 1);
    char *buf = NULL;
    size_t len = 0;
    if (ej) line(&buf, &len, NULL, ej);
    line(&buf, &len, NULL, "[DONE]");
    free(ej);
    return srv_rest__gen_push(j, buf, 200, 1);
  }
  if (!j->sse) {  // the whole answer
    cJSON *x = head(o, 0), *ch = cJSON_AddArrayToObject(x, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (o->kind == SRV_OAI_CHAT) {
      cJSON *m = cJSON_AddObjectToObject(c, "message");
      cJSON_AddStringToObject(m, "role", "assistant");
      cJSON_AddItemToObject(m, "content", srv_rest__json_strn(t->text, t->len));
      cJSON_AddNullToObject(m, "refusal");
    } else {
      cJSON_AddItemToObject(c, "text", srv_rest__json_strn(t->text, t->len));
    }
    add_lp(c, o, t);
    cJSON_AddStringToObject(c, "finish_reason", t->finish_reason);
    cJSON_AddItemToObject(x, "usage", usage(t));
    char *txt = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    return srv_rest__gen_push(j, txt, 200, 1);
  }
  char *buf = NULL;
  size_t len = 0;
  int role = o->kind == SRV_OAI_CHAT && o->first;
  if (role) line(&buf, &len, chunk(o, "", 0, NULL, 1, NULL), NULL);  // OpenAI's first chunk: the role, no text
  o->first = 0;
  int lp_given = 0;
  if (t->len) line(&buf, &len, chunk(o, t->text, t->len, NULL, 0, t), NULL), lp_given = 1;
  if (t->final) {
    line(&buf, &len, chunk(o, o->kind == SRV_OAI_CHAT ? NULL : "", 0, t->finish_reason, 0, lp_given ? NULL : t), NULL);
    if (o->include_usage) {
      cJSON *x = head(o, 1);
      cJSON_AddArrayToObject(x, "choices");
      cJSON_AddItemToObject(x, "usage", usage(t));
      line(&buf, &len, x, NULL);
    }
    line(&buf, &len, NULL, "[DONE]");
  }
  srv_rest__gen_push(j, buf, 200, t->final);
}

static int cancelled(void *ctx) {
  return atomic_load(&((gen_job *)ctx)->gone);
}

// --- routes

static void list_models(srv_rest *r, srv_http_response *resp) {
  srv_registry *reg = r->s->reg;
  cJSON *o = cJSON_CreateObject(), *d = NULL;
  cJSON_AddStringToObject(o, "object", "list");
  d = cJSON_AddArrayToObject(o, "data");
  srv_registry_rdlock(reg);
  for (size_t i = 0; i < srv_registry_n_models(reg); i++) {
    srv_model *m = srv_registry_model_at(reg, i);
    int serves = 0;
    for (size_t k = 0; m && k < m->n_versions; k++) serves |= m->versions[k].llm != NULL;
    if (!serves) continue;
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "id", m->name);
    cJSON_AddStringToObject(x, "object", "model");
    cJSON_AddNumberToObject(x, "created", 0);
    cJSON_AddStringToObject(x, "owned_by", "inferd");
    cJSON_AddItemToArray(d, x);
  }
  srv_registry_rdunlock(reg);
  char *txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!txt) return srv_rest__set_error(resp, 500, "out of memory");
  srv_rest__set_text(resp, 200, "application/json", txt, strlen(txt));
}

static void make_id(oai *o, const char *prefix, const void *salt) {
  uint64_t x = (uint64_t)eng_now_us() ^ (uint64_t)(uintptr_t)salt * 0x9E3779B97F4A7C15ull, y = x;
  y = (y ^ (y >> 30)) * 0xBF58476D1CE4E5B9ull;
  y = (y ^ (y >> 27)) * 0x94D049BB133111EBull;
  y ^= y >> 31;
  snprintf(o->id, sizeof o->id, "%s%016" PRIx64 "%08" PRIx32, prefix, y, (uint32_t)(x >> 7));
}

static void complete(srv_rest *r, const srv_http_request *req, srv_http_response *resp, srv_oai_kind kind) {
  srv_server *s = r->s;
  if (srv_http_json_nul(req->body ? req->body : "", req->body_len))
    return set_error(resp, 400, SRV_HTTP_JSON_NUL_MSG, NULL, NULL);
  // JSON is UTF-8 (RFC 8259); cJSON would pass other bytes through into the strings
  if (!utf8_valid(req->body ? req->body : "", req->body_len))
    return set_error(resp, 400, "the request body is not valid JSON: it is not UTF-8 text", NULL, NULL);
  srv_json js = {0};
  err e = {0};
  if (srv_jsonmem_parse(s->jsonmem, req->body ? req->body : "", req->body_len, &js, &e) != 0) {
    if (e.code != ERR_INVALID_ARGUMENT) return srv_rest__json_refused(resp, &e);
    return set_error(resp, 400, "the request body is not valid JSON (UTF-8 text holding one JSON value)", NULL, NULL);
  }
  if (!cJSON_IsObject(js.root)) {
    srv_json_free(&js);
    return set_error(resp, 400, "the request body is not a JSON object", NULL, NULL);
  }
  srv_oai_req q;
  char param[128];
  if (srv_oai_parse(kind, js.root, &q, param, sizeof param, &e) != 0) {
    srv_json_free(&js);
    return set_error(resp, srv_rest__http_status((int)e.code), e.msg, param, NULL);
  }
  srv_model *m = NULL;
  srv_version *v = NULL;
  gen_job *j = NULL;
  char *prompt = NULL;
  const char *pm = NULL, *code = NULL;
  if (srv_registry_find_ref(s->reg, q.model, "", &m, &v, &e) != 0) {
    if (e.code == ERR_NOT_FOUND) {
      err_set(&e, ERR_NOT_FOUND, "The model '%.200s' does not exist", q.model);
      pm = "model", code = "model_not_found";
    }
    m = NULL;
    goto refuse;
  }
  if (!v->llm) {
    err_set(&e, ERR_INVALID_ARGUMENT, "model '%.200s' is not a generative model (backend %s)", q.model,
            SRV_LLM_BACKEND);
    pm = "model";
    goto refuse;
  }
  const eng_chat_template *ct = srv_llm_chat_template(v->llm);
  if (!srv_llm_tokenizer(v->llm)) {
    err_set(&e, ERR_INVALID_ARGUMENT, SRV_LLM_NO_TOKENIZER_MSG, m->name);
    goto refuse;
  }
  size_t prompt_len = 0;
  if (kind == SRV_OAI_CHAT) {
    if (!ct) {
      err_set(&e, ERR_INVALID_ARGUMENT,
              "model '%s' has no chat template (tokenizer_config.json's chat_template or chat_template.jinja): use "
              "/v1/completions",
              m->name);
      goto refuse;
    }
    eng_chat_opts co = {.add_generation_prompt = 1};
    if (eng_chat_template_render(ct, q.messages, &co, &prompt, &prompt_len, &e) != 0) {
      pm = "messages";
      if (e.code != ERR_RESOURCE_EXHAUSTED) e.code = ERR_INVALID_ARGUMENT;
      goto refuse;
    }
  }
  j = srv_rest__gen_job_create(r, m, v, q.stream);
  oai *o = j ? calloc(1, sizeof *o) : NULL;
  if (o) o->model = strdup(q.model);
  if (!o || !o->model) {
    oai_free(o);
    err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto refuse;
  }
  j->ext = o, j->ext_free = oai_free;
  o->kind = kind;
  o->created = (int64_t)time(NULL);
  o->include_usage = q.include_usage;
  o->first = 1;
  o->logprobs = q.logprobs;
  o->tok = srv_llm_tokenizer(v->llm);
  make_id(o, kind == SRV_OAI_CHAT ? "chatcmpl-" : "cmpl-", j);
  srv_llm_text_params tp = {.base = {.end_id = -1, .sampling = q.sampling, .seeded = q.seeded}};
  if (kind == SRV_OAI_CHAT) {
    tp.prompt = prompt, tp.prompt_len = prompt_len, tp.add_special = 0;  // the template wrote the special tokens
  } else if (q.ids) {
    tp.base.ids = q.ids, tp.base.n_ids = q.n_ids;
  } else {
    tp.prompt = q.prompt, tp.prompt_len = q.prompt_len, tp.add_special = 1;
  }
  tp.stop = q.stop;
  tp.n_stop = q.n_stop;
  tp.logprobs = q.logprobs;
  tp.base.streaming = q.stream;
  tp.base.deadline_us = INT64_MAX;
  tp.base.stats = &v->stats;
  tp.base.t_recv_us = eng_now_us();
  // max_tokens not given: what the context leaves (vLLM's default); the text layer checks it against the prompt
  // (chat); a completion's is 16, as OpenAI's and vLLM's
  tp.base.output_len = q.max_tokens > 0 ? q.max_tokens : kind == SRV_OAI_CHAT ? -1 : 16;
  atomic_fetch_add(&v->stats.pending, 1);
  srv_llm_text_sink sink = {.ctx = j, .emit = emit, .cancelled = cancelled};
  if (srv_llm_text_submit(v->llm, &tp, &sink, &e) != 0) {
    atomic_fetch_sub(&v->stats.pending, 1);
    if (strstr(e.msg, "max_tokens"))
      pm = "max_tokens";
    else if (strstr(e.msg, "context length") || strstr(e.msg, "prompt"))
      pm = kind == SRV_OAI_CHAT ? "messages" : "prompt";
    goto refuse;
  }
  srv_rest__gen_defer(j, req, resp);
  free(prompt);
  srv_oai_req_close(&q);
  srv_json_free(&js);
  return;
refuse:
  free(prompt);
  srv_oai_req_close(&q);
  srv_json_free(&js);
  if (j)
    srv_rest__gen_job_free(j);
  else if (m)
    srv_registry_unref(s->reg, m);
  set_error(resp, srv_rest__http_status((int)e.code), e.msg, pm, code);
}

int srv_rest__route_openai(srv_rest *r, const srv_http_request *req, srv_http_response *resp) {
  const char *p = req->path;
  int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
  int post = strcmp(req->method, "POST") == 0;
  if (strcmp(p, "/v1/models") == 0) {
    if (!get) return set_error(resp, 405, "method not allowed (GET)", NULL, NULL), 1;
    return list_models(r, resp), 1;
  }
  srv_oai_kind kind;
  if (strcmp(p, "/v1/completions") == 0)
    kind = SRV_OAI_COMPLETION;
  else if (strcmp(p, "/v1/chat/completions") == 0)
    kind = SRV_OAI_CHAT;
  else if (strncmp(p, "/v1/", 4) == 0)
    return set_error(resp, 404, "not found (this server has /v1/models, /v1/completions and /v1/chat/completions)",
                     NULL, NULL),
           1;
  else
    return 0;
  if (!post) return set_error(resp, 405, "method not allowed (POST)", NULL, NULL), 1;
  complete(r, req, resp, kind);
  return 1;
}
