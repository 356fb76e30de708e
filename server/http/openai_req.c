// server/http/openai_req.c: an OpenAI request body checked and read
// (openai_req.h). The field lists are OpenAI's API reference's.
#include "server/http/openai_req.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- the fields

typedef enum fld {
  F_MODEL,
  F_PROMPT,
  F_MESSAGES,
  F_MAX_TOKENS,
  F_MAX_COMPLETION_TOKENS,
  F_TEMPERATURE,
  F_TOP_P,
  F_N,
  F_STREAM,
  F_STREAM_OPTIONS,
  F_STOP,
  F_SEED,
  F_LOGPROBS,
  F_TOP_LOGPROBS,
  F_ECHO,
  F_PRESENCE_PENALTY,
  F_FREQUENCY_PENALTY,
  F_BEST_OF,
  F_LOGIT_BIAS,
  F_SUFFIX,
  F_USER,
  F_TOOLS,
  F_TOOL_CHOICE,
  F_PARALLEL_TOOL_CALLS,
  F_RESPONSE_FORMAT,
  F_STORE,
  F_METADATA,
  F_SERVICE_TIER,
  F_REASONING_EFFORT,
  F_MODALITIES,
  F_AUDIO,
  F_PREDICTION,
  F_FUNCTIONS,
  F_FUNCTION_CALL,
  F_N_FIELDS
} fld;

#define C_ (1 << SRV_OAI_COMPLETION)
#define H_ (1 << SRV_OAI_CHAT)
static const struct {
  const char *name;
  int kinds;
} fields[F_N_FIELDS] = {
    [F_MODEL] = {"model", C_ | H_},
    [F_PROMPT] = {"prompt", C_},
    [F_MESSAGES] = {"messages", H_},
    [F_MAX_TOKENS] = {"max_tokens", C_ | H_},
    [F_MAX_COMPLETION_TOKENS] = {"max_completion_tokens", H_},
    [F_TEMPERATURE] = {"temperature", C_ | H_},
    [F_TOP_P] = {"top_p", C_ | H_},
    [F_N] = {"n", C_ | H_},
    [F_STREAM] = {"stream", C_ | H_},
    [F_STREAM_OPTIONS] = {"stream_options", C_ | H_},
    [F_STOP] = {"stop", C_ | H_},
    [F_SEED] = {"seed", C_ | H_},
    [F_LOGPROBS] = {"logprobs", C_ | H_},
    [F_TOP_LOGPROBS] = {"top_logprobs", H_},
    [F_ECHO] = {"echo", C_},
    [F_PRESENCE_PENALTY] = {"presence_penalty", C_ | H_},
    [F_FREQUENCY_PENALTY] = {"frequency_penalty", C_ | H_},
    [F_BEST_OF] = {"best_of", C_},
    [F_LOGIT_BIAS] = {"logit_bias", C_ | H_},
    [F_SUFFIX] = {"suffix", C_},
    [F_USER] = {"user", C_ | H_},
    [F_TOOLS] = {"tools", H_},
    [F_TOOL_CHOICE] = {"tool_choice", H_},
    [F_PARALLEL_TOOL_CALLS] = {"parallel_tool_calls", H_},
    [F_RESPONSE_FORMAT] = {"response_format", H_},
    [F_STORE] = {"store", H_},
    [F_METADATA] = {"metadata", H_},
    [F_SERVICE_TIER] = {"service_tier", C_ | H_},
    [F_REASONING_EFFORT] = {"reasoning_effort", H_},
    [F_MODALITIES] = {"modalities", H_},
    [F_AUDIO] = {"audio", H_},
    [F_PREDICTION] = {"prediction", H_},
    [F_FUNCTIONS] = {"functions", H_},
    [F_FUNCTION_CALL] = {"function_call", H_},
};

static int fail(char *param, size_t cap, const char *name, err *e, const char *fmt, const char *what) {
  snprintf(param, cap, "%s", name ? name : "");
  return err_set(e, ERR_INVALID_ARGUMENT, fmt, what);
}

static int is_int(const cJSON *x, double lo, double hi, int64_t *out) {
  if (!cJSON_IsNumber(x)) return 0;
  double d = x->valuedouble;
  if (!(d >= lo && d <= hi) || floor(d) != d) return 0;
  *out = (int64_t)d;
  return 1;
}

// --- the prompt and the messages

static int read_prompt(const cJSON *x, srv_oai_req *q, char *param, size_t cap, err *e) {
  if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 1 && (cJSON_IsString(x->child) || cJSON_IsArray(x->child)))
    x = x->child;  // a batch of one prompt
  if (cJSON_IsString(x)) {
    q->prompt = x->valuestring;
    q->prompt_len = strlen(x->valuestring);
    return 0;
  }
  if (cJSON_IsArray(x) && cJSON_GetArraySize(x) > 1 && (cJSON_IsString(x->child) || cJSON_IsArray(x->child)))
    return fail(param, cap, "prompt", e, "'prompt' holds %s prompts: this server answers one prompt per request",
                "several");
  if (cJSON_IsArray(x) && cJSON_GetArraySize(x) > 0) {
    int n = cJSON_GetArraySize(x);
    q->ids = malloc((size_t)n * sizeof *q->ids);
    if (!q->ids) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    for (const cJSON *c = x->child; c; c = c->next) {
      int64_t v;
      if (!is_int(c, 0, INT32_MAX, &v))
        return fail(param, cap, "prompt", e,
                    "'prompt' is a string, a list of one string, or a list of token ids (integers of 0 or more)%s", "");
      q->ids[q->n_ids++] = (int32_t)v;
    }
    return 0;
  }
  return fail(param, cap, "prompt", e, "'prompt' is a string, a list of one string, or a list of token ids%s", "");
}

// content: a string, or a list of {"type": "text", "text": ...} parts (joined with "\n", as vLLM does).
static int read_content(const cJSON *c, int i, char **out, char *param, size_t cap, err *e) {
  snprintf(param, cap, "messages[%d].content", i);
  if (cJSON_IsString(c)) return (*out = strdup(c->valuestring)) ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "oom");
  if (!cJSON_IsArray(c))
    return err_set(e, ERR_INVALID_ARGUMENT, "messages[%d].content is a string or a list of text parts", i);
  size_t n = 0;
  for (const cJSON *p = c->child; p; p = p->next) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
    const cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
    if (!cJSON_IsObject(p) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") != 0 || !cJSON_IsString(tx))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "messages[%d].content: only text parts ({\"type\": \"text\", \"text\": ...}) are supported", i);
    n += strlen(tx->valuestring) + 1;
  }
  char *s = malloc(n + 1), *w = s;
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (const cJSON *p = c->child; p; p = p->next) {
    const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
    if (w != s) *w++ = '\n';
    size_t l = strlen(t);
    memcpy(w, t, l);
    w += l;
  }
  *w = 0;
  *out = s;
  return 0;
}

static int read_messages(const cJSON *x, srv_oai_req *q, char *param, size_t cap, err *e) {
  snprintf(param, cap, "messages");
  if (!cJSON_IsArray(x)) return err_set(e, ERR_INVALID_ARGUMENT, "'messages' is a list of messages");
  if (cJSON_GetArraySize(x) == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "'messages' is empty: it needs one message at least");
  if (!(q->messages = cJSON_CreateArray())) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int i = 0;
  for (const cJSON *m = x->child; m; m = m->next, i++) {
    snprintf(param, cap, "messages[%d]", i);
    if (!cJSON_IsObject(m)) return err_set(e, ERR_INVALID_ARGUMENT, "messages[%d] is not an object", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    snprintf(param, cap, "messages[%d].role", i);
    if (!cJSON_IsString(role))
      return err_set(e, ERR_INVALID_ARGUMENT, "messages[%d].role is missing (system, user or assistant)", i);
    const char *r = role->valuestring;
    if (strcmp(r, "developer") == 0) r = "system";  // OpenAI's newer name for the system message
    if (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "messages[%d].role '%.64s' is not supported (system, developer, user or assistant)", i,
                     role->valuestring);
    cJSON *o = cJSON_CreateObject();
    if (!o) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    cJSON_AddItemToArray(q->messages, o);
    cJSON_AddStringToObject(o, "role", r);
    for (const cJSON *f = m->child; f; f = f->next) {
      if (strcmp(f->string, "role") == 0) continue;
      if (strcmp(f->string, "content") == 0) {
        if (cJSON_IsNull(f) && strcmp(r, "assistant") == 0) continue;
        char *s = NULL;
        TRY(read_content(f, i, &s, param, cap, e));
        cJSON_AddStringToObject(o, "content", s);
        free(s);
      } else if (strcmp(f->string, "name") == 0) {
        snprintf(param, cap, "messages[%d].name", i);
        if (!cJSON_IsString(f)) return err_set(e, ERR_INVALID_ARGUMENT, "messages[%d].name is a string", i);
        cJSON_AddStringToObject(o, "name", f->valuestring);
      } else {
        snprintf(param, cap, "messages[%d].%.64s", i, f->string);
        return err_set(e, ERR_INVALID_ARGUMENT, "messages[%d]: '%.64s' is not supported", i, f->string);
      }
    }
    if (!cJSON_GetObjectItemCaseSensitive(o, "content")) {
      snprintf(param, cap, "messages[%d].content", i);
      return err_set(e, ERR_INVALID_ARGUMENT, "messages[%d].content is missing", i);
    }
  }
  param[0] = 0;
  return 0;
}

// --- the body

static int read_stop(const cJSON *x, srv_oai_req *q, char *param, size_t cap, err *e) {
  const char *msg = "'stop' is a string or a list of up to %s strings";
  if (cJSON_IsString(x)) {
    q->stop[q->n_stop++] = x->valuestring;
  } else if (cJSON_IsArray(x)) {
    for (const cJSON *c = x->child; c; c = c->next) {
      if (!cJSON_IsString(c) || q->n_stop == SRV_OAI_MAX_STOP) return fail(param, cap, "stop", e, msg, "16");
      q->stop[q->n_stop++] = c->valuestring;
    }
  } else {
    return fail(param, cap, "stop", e, msg, "16");
  }
  for (size_t i = 0; i < q->n_stop; i++)
    if (!q->stop[i][0]) return fail(param, cap, "stop", e, "'stop' strings must not be empty%s", "");
  return 0;
}

static int read_field(fld f, const cJSON *x, srv_oai_req *q, char *param, size_t cap, err *e) {
  const char *name = fields[f].name;
  int64_t iv;
  double d;
  switch (f) {
    case F_MODEL:
      if (!cJSON_IsString(x)) return fail(param, cap, name, e, "'%s' is a string", name);
      q->model = x->valuestring;
      return 0;
    case F_PROMPT:
      return read_prompt(x, q, param, cap, e);
    case F_MESSAGES:
      return read_messages(x, q, param, cap, e);
    case F_MAX_TOKENS:
    case F_MAX_COMPLETION_TOKENS:
      if (!is_int(x, -1e18, 1e18, &iv)) return fail(param, cap, name, e, "'%s' is an integer", name);
      if (iv < 1) return fail(param, cap, name, e, "'%s' must be at least 1", name);
      q->max_tokens = iv;
      return 0;
    case F_TEMPERATURE:
      if (!cJSON_IsNumber(x)) return fail(param, cap, name, e, "'%s' is a number", name);
      d = x->valuedouble;
      if (!(d >= 0 && d <= 2)) return fail(param, cap, name, e, "'%s' must be between 0 and 2", name);
      q->sampling.temperature = (float)d;
      return 0;
    case F_TOP_P:
      if (!cJSON_IsNumber(x)) return fail(param, cap, name, e, "'%s' is a number", name);
      d = x->valuedouble;
      if (!(d > 0 && d <= 1)) return fail(param, cap, name, e, "'%s' must be in (0, 1]", name);
      q->sampling.top_p = (float)d;
      return 0;
    case F_N:
    case F_BEST_OF:
      if (!is_int(x, -1e18, 1e18, &iv)) return fail(param, cap, name, e, "'%s' is an integer", name);
      if (iv != 1) return fail(param, cap, name, e, "'%s' must be 1: this server gives one choice per request", name);
      return 0;
    case F_STREAM:
      if (!cJSON_IsBool(x)) return fail(param, cap, name, e, "'%s' is a boolean", name);
      q->stream = cJSON_IsTrue(x);
      return 0;
    case F_STREAM_OPTIONS: {
      if (!cJSON_IsObject(x)) return fail(param, cap, name, e, "'%s' is an object", name);
      for (const cJSON *c = x->child; c; c = c->next) {
        if (strcmp(c->string, "include_usage") == 0 && cJSON_IsBool(c)) {
          q->include_usage = cJSON_IsTrue(c);
        } else if (strcmp(c->string, "include_obfuscation") == 0 && cJSON_IsBool(c)) {
          // OpenAI's padding against side channels: nothing to pad here
        } else {
          return fail(param, cap, "stream_options", e, "stream_options: '%.64s' is not supported (include_usage)",
                      c->string);
        }
      }
      return 0;
    }
    case F_STOP:
      return read_stop(x, q, param, cap, e);
    case F_SEED:
      if (!is_int(x, -9223372036854775808.0, 9223372036854775807.0, &iv))
        return fail(param, cap, name, e, "'%s' is an integer", name);
      q->sampling.seed = (uint64_t)iv;
      q->seeded = 1;
      return 0;
    case F_LOGPROBS:
      if (q->kind == SRV_OAI_CHAT) {  // a boolean; top_logprobs says how many alternatives
        if (!cJSON_IsBool(x)) return fail(param, cap, name, e, "'%s' is a boolean", name);
        if (cJSON_IsTrue(x) && q->logprobs < 0) q->logprobs = 0;
        if (cJSON_IsFalse(x)) q->logprobs = -2;  // refused with top_logprobs below
        return 0;
      }
      if (!is_int(x, 0, 20, &iv)) return fail(param, cap, name, e, "'%s' is an integer between 0 and 20", name);
      q->logprobs = (int)iv;
      return 0;
    case F_TOP_LOGPROBS:
      if (!is_int(x, 0, 20, &iv)) return fail(param, cap, name, e, "'%s' is an integer between 0 and 20", name);
      q->top_logprobs = (int)iv;
      return 0;
    case F_ECHO:
      if (cJSON_IsFalse(x)) return 0;
      return fail(param, cap, name, e, "'%s' is not supported by this server (only false)", name);
    case F_PRESENCE_PENALTY:
    case F_FREQUENCY_PENALTY:
      if (!cJSON_IsNumber(x)) return fail(param, cap, name, e, "'%s' is a number", name);
      if (x->valuedouble != 0) return fail(param, cap, name, e, "'%s' is not supported by this server (only 0)", name);
      return 0;
    case F_LOGIT_BIAS:
      if (cJSON_IsObject(x) && !x->child) return 0;
      return fail(param, cap, name, e, "'%s' is not supported by this server", name);
    case F_USER:
    case F_SERVICE_TIER:
      if (!cJSON_IsString(x)) return fail(param, cap, name, e, "'%s' is a string", name);
      return 0;  // who asks / which tier: nothing to do with them here
    case F_STORE:
      if (cJSON_IsFalse(x)) return 0;
      return fail(param, cap, name, e, "'%s' is not supported by this server (only false)", name);
    case F_METADATA:
      if (cJSON_IsObject(x)) return 0;
      return fail(param, cap, name, e, "'%s' is an object", name);
    default:
      return fail(param, cap, name, e, "'%s' is not supported by this server", name);
  }
}

int srv_oai_parse(srv_oai_kind kind, const cJSON *root, srv_oai_req *q, char *param, size_t cap, err *e) {
  *q = (srv_oai_req){
      .kind = kind, .max_tokens = -1, .sampling = eng_llm_sampling_greedy(), .logprobs = -1, .top_logprobs = -1};
  q->sampling.temperature = 1.0f;  // OpenAI's default: sampled (temperature 0 is greedy)
  param[0] = 0;
  int rc = 0;
  uint64_t seen = 0;
  for (const cJSON *x = root->child; x && !rc; x = x->next) {
    int f = -1;
    for (int i = 0; i < F_N_FIELDS; i++)
      if ((fields[i].kinds & (1 << kind)) && strcmp(fields[i].name, x->string) == 0) f = i;
    if (f < 0) {
      snprintf(param, cap, "%.200s", x->string);
      rc = err_set(e, ERR_INVALID_ARGUMENT, "Unrecognized request argument supplied: %.200s", x->string);
      break;
    }
    if (seen >> f & 1) {  // JSON leaves duplicate keys open; one value per field here
      rc = fail(param, cap, fields[f].name, e, "'%s' is given more than once", fields[f].name);
      break;
    }
    seen |= (uint64_t)1 << f;
    if (!cJSON_IsNull(x) || f == F_MODEL || f == F_PROMPT || f == F_MESSAGES)  // null: not given
      rc = read_field((fld)f, x, q, param, cap, e);
  }
  if (!rc && !q->model) rc = fail(param, cap, "model", e, "you must provide a model parameter%s", "");
  if (!rc && kind == SRV_OAI_COMPLETION && !q->prompt && !q->ids)
    rc = fail(param, cap, "prompt", e, "'prompt' is required%s", "");
  if (!rc && kind == SRV_OAI_CHAT && !q->messages) rc = fail(param, cap, "messages", e, "'messages' is required%s", "");
  if (!rc && kind == SRV_OAI_CHAT && q->top_logprobs >= 0 && q->logprobs < 0)
    rc = fail(param, cap, "top_logprobs", e, "'logprobs' must be true when 'top_logprobs' is given%s", "");
  if (!rc && kind == SRV_OAI_CHAT && q->logprobs >= 0 && q->top_logprobs > 0) q->logprobs = q->top_logprobs;
  if (q->logprobs < -1) q->logprobs = -1;
  if (!rc && q->include_usage && !q->stream)
    rc = fail(param, cap, "stream_options", e, "'stream_options' is only allowed when 'stream' is true%s", "");
  if (rc) srv_oai_req_close(q);
  return rc;
}

void srv_oai_req_close(srv_oai_req *q) {
  free(q->ids);
  cJSON_Delete(q->messages);
  q->ids = NULL;
  q->messages = NULL;
}
