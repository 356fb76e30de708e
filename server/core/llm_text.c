// server/core/llm_text.c: text requests over the generative backend
// (llm_text.h). One text_req per request, touched only by the runner thread
// that holds it (the token hook and the emits both run there).
#include "server/core/llm_text.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/tokenizer.h"

typedef struct text_req {
  srv_llm_text_sink out;
  eng_tok_stream *ds;
  char *acc;  // the generated text so far (cut at a stop string)
  size_t len, cap;
  size_t sent;  // bytes of acc already given
  char **stop;  // owned copies
  size_t *stop_len;
  size_t n_stop, max_stop;
  char *echo;  // the prompt's text, sent first (owned), or NULL
  size_t echo_len;
  int64_t prompt_tokens, n_gen;
  int stopped;     // an end token or a stop string ended it
  int stop_found;  // a stop string: no text after it
  int failed;      // out of memory or a decode error: the final answer says so
  int logprobs;    // -1 none, else alternatives per token
  int64_t vocab;
  srv_llm_text_lp *lp;  // the tokens' log probabilities not yet given
  size_t n_lp, cap_lp;
  char why[600];
} text_req;

static void treq_free(text_req *t) {
  if (!t) return;
  eng_tok_stream_destroy(t->ds);
  for (size_t i = 0; i < t->n_stop; i++) free(t->stop[i]);
  free(t->stop);
  free(t->stop_len);
  free(t->acc);
  free(t->echo);
  free(t->lp);
  free(t);
}

// The token's log probability and the k most likely (log-softmax of the raw logits).
static int record_lp(text_req *t, int32_t tok, const float *lg) {
  if (t->n_lp == t->cap_lp) {
    size_t cap = t->cap_lp ? 2 * t->cap_lp : 16;
    srv_llm_text_lp *a = realloc(t->lp, cap * sizeof *a);
    if (!a) return -1;
    t->lp = a, t->cap_lp = cap;
  }
  srv_llm_text_lp *o = &t->lp[t->n_lp++];
  int64_t V = t->vocab;
  float m = lg[0];
  for (int64_t i = 1; i < V; i++)
    if (lg[i] > m) m = lg[i];
  double sum = 0;
  for (int64_t i = 0; i < V; i++) sum += exp((double)lg[i] - m);
  double lse = m + log(sum);
  o->id = tok;
  o->logprob = (float)(lg[tok] - lse);
  int k = t->logprobs, n = 0;
  for (int64_t i = 0; i < V && k > 0; i++) {  // the k largest, kept sorted (ties: the lower id first)
    float v = lg[i];
    if (n == k && v <= lg[o->top_id[n - 1]]) continue;
    int at = n < k ? n++ : k - 1;
    while (at > 0 && lg[o->top_id[at - 1]] < v) {
      o->top_id[at] = o->top_id[at - 1];
      at--;
    }
    o->top_id[at] = (int32_t)i;
  }
  o->n_top = n;
  for (int i = 0; i < n; i++) o->top_lp[i] = (float)(lg[o->top_id[i]] - lse);
  return 0;
}

static int append(text_req *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    while (cap < t->len + n + 1) cap *= 2;
    char *a = realloc(t->acc, cap);
    if (!a) return -1;
    t->acc = a, t->cap = cap;
  }
  memcpy(t->acc + t->len, s, n);
  t->len += n;
  t->acc[t->len] = 0;
  return 0;
}

// Looks for a stop string that ends in the text added after old_len; cuts the text where the first one begins.
static int find_stop(text_req *t, size_t old_len) {
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < t->n_stop; i++) {
    size_t sl = t->stop_len[i];
    if (sl > t->len) continue;
    size_t from = old_len >= sl - 1 ? old_len - (sl - 1) : 0;
    for (size_t p = from; p + sl <= t->len && p < best; p++)
      if (memcmp(t->acc + p, t->stop[i], sl) == 0) {
        best = p;
        break;
      }
  }
  if (best == SIZE_MAX) return 0;
  t->len = best;
  t->acc[best] = 0;
  t->stop_found = 1;
  return 1;
}

// How many bytes of the text may go out now: all but a tail that is the start of a stop string.
static size_t safe_len(const text_req *t) {
  size_t hold = 0;
  for (size_t i = 0; i < t->n_stop; i++) {
    size_t sl = t->stop_len[i];
    for (size_t k = sl - 1 < t->len ? sl - 1 : t->len; k > hold; k--)
      if (memcmp(t->acc + t->len - k, t->stop[i], k) == 0) {
        hold = k;
        break;
      }
  }
  size_t n = t->len - hold;
  // never inside a UTF-8 sequence (a stop string may begin in the middle of one's bytes)
  while (n > t->sent && n < t->len && ((unsigned char)t->acc[n] & 0xC0) == 0x80) n--;
  return n < t->sent ? t->sent : n;
}

static int on_token(void *ctx, int32_t tok, int ends, const float *logits) {
  text_req *t = ctx;
  t->n_gen++;
  if (t->logprobs >= 0 && !t->failed && record_lp(t, tok, logits) != 0) {
    t->failed = 1;
    snprintf(t->why, sizeof t->why, "out of memory");
    return 1;
  }
  if (ends) {  // an end token's text is not the answer's (vLLM's and transformers' decode skip it)
    t->stopped = 1;
    return 0;
  }
  if (t->failed || t->stop_found) return 1;
  const char *d;
  size_t n;
  err e = {0};
  if (eng_tok_stream_step(t->ds, tok, &d, &n, &e) != 0) {
    t->failed = 1;
    snprintf(t->why, sizeof t->why, "detokenizing: %s", e.msg);
    return 1;
  }
  size_t old = t->len;
  if (n && append(t, d, n) != 0) {
    t->failed = 1;
    snprintf(t->why, sizeof t->why, "out of memory");
    return 1;
  }
  if (t->n_stop && find_stop(t, old)) {
    t->stopped = 1;
    return 1;
  }
  return 0;
}

static void give(text_req *t, const char *s, size_t n, int final, int code, const char *msg) {
  srv_llm_text_out o = {.text = s ? s : "",
                        .len = n,
                        .final = final,
                        .prompt_tokens = t->prompt_tokens,
                        .completion_tokens = t->n_gen,
                        .code = code,
                        .msg = msg,
                        .lp = t->lp,
                        .n_lp = code ? 0 : t->n_lp};
  if (final && !code) o.finish_reason = t->stopped ? "stop" : "length";
  t->out.emit(t->out.ctx, &o);
  if (!code) t->n_lp = 0;  // given
}

static void on_emit(void *ctx, const int32_t *ids, int64_t n, int final, int code, const char *msg) {
  (void)ids, (void)n;
  text_req *t = ctx;
  if (final && !code && !t->failed && !t->stop_found) {
    const char *d;
    size_t dn;
    err e = {0};
    size_t old = t->len;
    if (eng_tok_stream_finish(t->ds, &d, &dn, &e) != 0)
      t->failed = 1, snprintf(t->why, sizeof t->why, "detokenizing: %s", e.msg);
    else if (dn && append(t, d, dn) != 0)
      t->failed = 1, snprintf(t->why, sizeof t->why, "out of memory");
    else if (t->n_stop && find_stop(t, old))
      t->stopped = 1;
  }
  if (final && !code && t->failed) code = ERR_INTERNAL, msg = t->why;
  if (t->echo && !code) {  // the prompt's text first, in the same answer
    char *both = malloc(t->echo_len + t->len - t->sent + 1);
    if (both) {
      size_t upto = final ? t->len : safe_len(t);
      memcpy(both, t->echo, t->echo_len);
      memcpy(both + t->echo_len, t->acc ? t->acc + t->sent : "", upto - t->sent);
      free(t->echo);
      t->echo = NULL;
      size_t bl = t->echo_len + upto - t->sent;
      t->sent = upto;
      give(t, both, bl, final, 0, NULL);
      free(both);
      if (final) treq_free(t);
      return;
    }
    code = ERR_RESOURCE_EXHAUSTED, msg = "out of memory";
  }
  if (code) {
    give(t, NULL, 0, 1, code, msg);
    treq_free(t);
    return;
  }
  size_t upto = final ? t->len : safe_len(t);
  if (final || upto > t->sent) give(t, t->acc ? t->acc + t->sent : "", upto - t->sent, final, 0, NULL);
  t->sent = upto;
  if (final) treq_free(t);
}

static int on_cancelled(void *ctx) {
  text_req *t = ctx;
  return t->out.cancelled && t->out.cancelled(t->out.ctx);
}

static int on_congested(void *ctx) {
  text_req *t = ctx;
  return t->out.congested && t->out.congested(t->out.ctx);
}

int srv_llm_text_submit(srv_llm *l, const srv_llm_text_params *p, const srv_llm_text_sink *sink, err *e) {
  const eng_tok *tok = srv_llm_tokenizer(l);
  if (!tok) return err_set(e, ERR_FAILED_PRECONDITION, SRV_LLM_NO_TOKENIZER_MSG, srv_llm_name(l));
  text_req *t = calloc(1, sizeof *t);
  eng_tok_ids ids = {0};
  if (!t || !(t->ds = eng_tok_stream_create(tok, true))) goto oom;
  t->out = *sink;
  t->logprobs = p->logprobs > SRV_LLM_TEXT_MAX_TOP ? SRV_LLM_TEXT_MAX_TOP : p->logprobs;
  t->vocab = srv_llm_vocab(l);
  srv_llm_params bp = p->base;
  bp.want_logits = p->logprobs >= 0;  // log probabilities read the logits: no greedy on the device
  if (!bp.ids) {
    if (eng_tok_encode(tok, p->prompt ? p->prompt : "", p->prompt_len, p->add_special != 0, &ids, e) != 0) {
      free(ids.ids);
      treq_free(t);
      return err_prefix(e, "the prompt: "), e->code;
    }
    bp.ids = ids.ids;
    bp.n_ids = (int64_t)ids.n;
  }
  int64_t mml = srv_llm_max_model_len(l);
  if (bp.n_ids < 1) {
    err_set(e, ERR_INVALID_ARGUMENT, "the prompt is empty: it needs one token at least");
    goto fail;
  }
  if (bp.n_ids >= mml) {
    err_set(e, ERR_INVALID_ARGUMENT,
            "This model's maximum context length is %" PRId64 " tokens. However, your prompt is %" PRId64
            " tokens, which leaves no room to generate.",
            mml, bp.n_ids);
    goto fail;
  }
  if (bp.output_len < 0) bp.output_len = mml - bp.n_ids;  // not given: what the context leaves
  if (bp.output_len < 1) {
    err_set(e, ERR_INVALID_ARGUMENT, "max_tokens must be at least 1, got %" PRId64, bp.output_len);
    goto fail;
  }
  if (bp.output_len > mml - bp.n_ids) {
    err_set(e, ERR_INVALID_ARGUMENT,
            "'max_tokens' is too large: %" PRId64 ". This model's maximum context length is %" PRId64
            " tokens and your request has %" PRId64 " input tokens (%" PRId64 " > %" PRId64 " - %" PRId64 ").",
            bp.output_len, mml, bp.n_ids, bp.output_len, mml, bp.n_ids);
    goto fail;
  }
  t->prompt_tokens = bp.n_ids;
  if (p->n_stop) {
    t->stop = calloc(p->n_stop, sizeof *t->stop);
    t->stop_len = calloc(p->n_stop, sizeof *t->stop_len);
    if (!t->stop || !t->stop_len) goto oom;
    for (size_t i = 0; i < p->n_stop; i++) {
      if (!(t->stop[i] = strdup(p->stop[i]))) goto oom;
      t->n_stop = i + 1;
      t->stop_len[i] = strlen(p->stop[i]);
      if (!t->stop_len[i]) {
        err_set(e, ERR_INVALID_ARGUMENT, "stop strings must not be empty");
        goto fail;
      }
    }
  }
  if (p->echo_prompt) {
    if (p->base.ids) {
      size_t n;
      if (eng_tok_decode(tok, bp.ids, (size_t)bp.n_ids, true, &t->echo, &n, e) != 0) goto fail;
      t->echo_len = n;
    } else {
      if (!(t->echo = malloc(p->prompt_len + 1))) goto oom;
      memcpy(t->echo, p->prompt, p->prompt_len);
      t->echo_len = p->prompt_len;
    }
  }
  bp.stop_flat = bp.stop_offsets = NULL;
  bp.n_stop = 0;
  srv_llm_sink s = {.ctx = t, .emit = on_emit, .cancelled = on_cancelled, .congested = on_congested, .token = on_token};
  if (srv_llm_submit(l, &bp, &s, e) != 0) goto fail;
  free(ids.ids);
  return 0;
oom:
  err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
fail:
  free(ids.ids);
  treq_free(t);
  return e->code;
}

// --- vLLM's sampling parameters

// A number, or a string holding one (the vLLM backend converts strings).
static int num(const cJSON *x, double *out) {
  if (cJSON_IsNumber(x)) return *out = x->valuedouble, 0;
  if (!cJSON_IsString(x) || !x->valuestring[0]) return -1;
  char *end;
  double d = strtod(x->valuestring, &end);
  if (*end) return -1;
  return *out = d, 0;
}

static int integer(const cJSON *x, double lo, double hi, int64_t *out) {
  double d;
  if (num(x, &d) != 0 || !(d >= lo && d <= hi) || floor(d) != d) return -1;
  return *out = (int64_t)d, 0;
}

int srv_llm_text_vllm_params(const cJSON *obj, const char *const *skip, srv_llm_text_params *p, const char **stop_buf,
                             err *e) {
  if (!cJSON_IsObject(obj)) return err_set(e, ERR_INVALID_ARGUMENT, "the sampling parameters are a JSON object");
  eng_llm_sampling *sp = &p->base.sampling;
  for (const cJSON *x = obj->child; x; x = x->next) {
    const char *k = x->string;
    int skipped = 0;
    for (size_t i = 0; skip && skip[i]; i++) skipped |= strcmp(skip[i], k) == 0;
    if (skipped) continue;
    double d;
    int64_t iv;
    if (strcmp(k, "max_tokens") == 0) {
      if (integer(x, 1, 1e15, &iv) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "'max_tokens' is an integer of 1 or more");
      p->base.output_len = iv;
    } else if (strcmp(k, "temperature") == 0) {
      if (num(x, &d) != 0 || !(d >= 0 && d <= 1e6))
        return err_set(e, ERR_INVALID_ARGUMENT, "'temperature' is a number of 0 or more (0 is greedy)");
      sp->temperature = (float)d;
    } else if (strcmp(k, "top_p") == 0) {
      if (num(x, &d) != 0 || !(d > 0 && d <= 1))
        return err_set(e, ERR_INVALID_ARGUMENT, "'top_p' is a number in (0, 1]");
      sp->top_p = (float)d;
    } else if (strcmp(k, "min_p") == 0) {
      if (num(x, &d) != 0 || !(d >= 0 && d <= 1))
        return err_set(e, ERR_INVALID_ARGUMENT, "'min_p' is a number in [0, 1]");
      sp->min_p = (float)d;
    } else if (strcmp(k, "repetition_penalty") == 0) {
      if (num(x, &d) != 0 || !(d > 0 && d <= 1e6))
        return err_set(e, ERR_INVALID_ARGUMENT, "'repetition_penalty' is a number above 0");
      sp->repetition_penalty = (float)d;
    } else if (strcmp(k, "top_k") == 0) {
      if (integer(x, -1, INT32_MAX, &iv) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "'top_k' is an integer, -1 or 0 for all");
      sp->top_k = iv < 0 ? 0 : (int32_t)iv;
    } else if (strcmp(k, "seed") == 0) {
      if (cJSON_IsNull(x)) continue;
      if (integer(x, -9007199254740992.0, 9007199254740992.0, &iv) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "'seed' is an integer");
      sp->seed = (uint64_t)iv;
      p->base.seeded = 1;
    } else if (strcmp(k, "stop") == 0) {
      size_t n = 0;
      if (cJSON_IsNull(x)) continue;
      if (cJSON_IsString(x)) {
        stop_buf[n++] = x->valuestring;
      } else if (cJSON_IsArray(x)) {
        for (const cJSON *c = x->child; c; c = c->next) {
          if (!cJSON_IsString(c)) return err_set(e, ERR_INVALID_ARGUMENT, "'stop' is a string or a list of strings");
          if (n == SRV_LLM_TEXT_MAX_STOP)
            return err_set(e, ERR_INVALID_ARGUMENT, "'stop' holds %d strings at most", SRV_LLM_TEXT_MAX_STOP);
          stop_buf[n++] = c->valuestring;
        }
      } else {
        return err_set(e, ERR_INVALID_ARGUMENT, "'stop' is a string or a list of strings");
      }
      for (size_t i = 0; i < n; i++)
        if (!stop_buf[i][0]) return err_set(e, ERR_INVALID_ARGUMENT, "'stop' strings must not be empty");
      p->stop = stop_buf;
      p->n_stop = n;
    } else if (strcmp(k, "n") == 0 || strcmp(k, "best_of") == 0) {
      if (integer(x, 1, 1, &iv) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "'%s' must be 1: one answer per request", k);
    } else if (strcmp(k, "presence_penalty") == 0 || strcmp(k, "frequency_penalty") == 0) {
      if (num(x, &d) != 0 || d != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "'%s' is not supported (only 0); use repetition_penalty", k);
    } else {
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "unknown sampling parameter '%s' (known: max_tokens, temperature, top_p, top_k, min_p, seed, "
                     "repetition_penalty, stop, n)",
                     k);
    }
  }
  return 0;
}
