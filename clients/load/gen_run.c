// gen_run.c: generate mode's load threads (gen.h). Each of --concurrency
// threads takes the next request from a shared dispenser (its index, and
// with --request-rate its Poisson arrival time), builds it from the seed and
// its index alone (so request i is the same whatever thread sends it),
// sends it on its own transport (a completion queue on the shared gRPC
// channel, or its own keep-alive HTTP connection) and times every chunk of
// tokens as it arrives. A request's observations go into the run's
// histograms under one lock when it ends: requests end at most thousands of
// times a second, so the lock is not what limits the load.
#include <cjson/cJSON.h>
#include <grpc/grpc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clients/load/gen.h"
#include "clients/load/gen_grpc.h"
#include "clients/load/gen_http.h"
#include "clients/load/gen_sse.h"
#include "clients/load/model.h"
#include "clients/load/rng.h"
#include "clients/load/rpc.h"
#include "clients/load/stats.h"
#include "clients/load/stream_msg.h"
#include "kernels/base/clock.h"

#define TICK_NS 50000000ull  // a thread waiting for its send time looks at Ctrl-C this often
#define ERRBODY_MAX 512      // bytes of a refused request's body kept for its message
// send_one: the request failed; the first failure decides
#define FAIL(...)             \
  do {                        \
    obs_fail(ob, __VA_ARGS__); \
    return;                   \
  } while (0)

// --- results

int ld_gen_result_init(ld_gen_result *r) {
  memset(r, 0, sizeof *r);
  r->ttft = ld_hist_create();
  r->itl = ld_hist_create();
  r->tpot = ld_hist_create();
  r->e2e = ld_hist_create();
  r->lag = ld_hist_create();
  return r->ttft && r->itl && r->tpot && r->e2e && r->lag ? 0 : -1;
}

void ld_gen_result_close(ld_gen_result *r) {
  ld_hist_destroy(r->ttft);
  ld_hist_destroy(r->itl);
  ld_hist_destroy(r->tpot);
  ld_hist_destroy(r->e2e);
  ld_hist_destroy(r->lag);
  memset(r, 0, sizeof *r);
}

void ld_gen_result_error(ld_gen_result *r, const char *name, const char *msg) {
  r->failed++;
  if (!r->first_error[0]) snprintf(r->first_error, sizeof r->first_error, "%s: %s", name, msg);
  int k = 0;
  while (k < r->n_error_kinds && strcmp(r->error_names[k], name) != 0) k++;
  if (k == r->n_error_kinds) {
    if (k == LD_GEN_MAX_ERROR_KINDS) k--;  // the last slot takes every kind past the table
    else r->n_error_kinds++, snprintf(r->error_names[k], sizeof r->error_names[k], "%s", name);
  }
  r->error_counts[k]++;
}

// --- one request's observations

typedef struct obs {
  const ld_gen_opts *o;
  uint64_t *t;  // arrival of each chunk of tokens
  int64_t *n;   // its tokens
  size_t len, cap;
  bool failed, done;  // done: openai's [DONE] seen
  char err_name[32], err_msg[256];
  int64_t usage_prompt, usage_completion;
  int http_status;
  char body[ERRBODY_MAX];  // a non-200 answer's body, or a non-streamed completion's
  size_t body_len;
  char *full;  // a non-streamed openai completion (whole body), malloc'ed
  size_t full_len, full_cap;
} obs;

static void obs_reset(obs *ob) {
  ob->len = 0;
  ob->failed = ob->done = false;
  ob->err_name[0] = ob->err_msg[0] = '\0';
  ob->usage_prompt = ob->usage_completion = -1;
  ob->http_status = 0;
  ob->body_len = ob->full_len = 0;
}

// s cut to fit cap bytes with its NUL (messages are longer than what the report keeps).
static void copy_cut(char *dst, size_t cap, const char *s) {
  size_t n = strlen(s);
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

static void obs_fail(obs *ob, const char *name, const char *msg) {
  if (ob->failed) return;  // the first error decides
  ob->failed = true;
  copy_cut(ob->err_name, sizeof ob->err_name, name);
  copy_cut(ob->err_msg, sizeof ob->err_msg, msg);
}

static void obs_chunk(obs *ob, int64_t n) {
  uint64_t now = clock_mono_ns();
  if (n <= 0 || ob->failed) return;
  if (ob->len == ob->cap) {
    size_t c = ob->cap ? ob->cap * 2 : 256;
    uint64_t *t = realloc(ob->t, c * sizeof *t);
    if (t) ob->t = t;
    int64_t *nn = t ? realloc(ob->n, c * sizeof *nn) : NULL;
    if (!nn) {
      obs_fail(ob, "CLIENT", "out of memory recording tokens");
      return;
    }
    ob->n = nn;
    ob->cap = c;
  }
  ob->t[ob->len] = now;
  ob->n[ob->len++] = n;
}

static void on_grpc_tokens(void *ctx, int64_t n) {
  obs_chunk(ctx, n);
}

// --- SSE events

static int on_generate_event(void *ctx, const char *data, size_t len) {
  obs *ob = ctx;
  int64_t n;
  char msg[256];
  int rc = ld_gen_parse_tokens_event(data, len, &n, msg, sizeof msg);
  if (rc == 0) obs_chunk(ob, n);
  else if (rc == 1) obs_fail(ob, ld_kind_name(ld_kind_from_message(msg, strlen(msg))), msg);
  else obs_fail(ob, "BAD_EVENT", msg);
  return 0;
}

static void openai_usage(obs *ob, const ld_oai_chunk *c) {
  if (c->prompt_tokens >= 0) ob->usage_prompt = c->prompt_tokens;
  if (c->completion_tokens >= 0) ob->usage_completion = c->completion_tokens;
}

static int on_openai_event(void *ctx, const char *data, size_t len) {
  obs *ob = ctx;
  ld_oai_chunk c;
  char msg[256];
  if (ob->done) return 0;  // nothing follows [DONE]
  int rc = ld_gen_parse_openai_chunk(data, len, &c, msg, sizeof msg);
  if (rc == 1) obs_fail(ob, "API_ERROR", msg);
  else if (rc < 0) obs_fail(ob, "BAD_EVENT", msg);
  else if (c.done) ob->done = true;
  else {
    // a chunk with a choice is a token's arrival, as vLLM's benchmark counts them (its text may be empty: a
    // token whose bytes are not whole UTF-8 yet, or one that decodes to nothing, still ends a step); usage's
    // completion_tokens, when sent, is the count reported
    if (c.has_choice) obs_chunk(ob, 1);
    openai_usage(ob, &c);
  }
  return 0;
}

typedef struct http_ctx {
  obs *ob;
  ld_sse *sse;
  bool whole;  // a non-streamed answer: keep the whole body
} http_ctx;

static int on_http_body(void *ctx, const char *buf, size_t len) {
  http_ctx *h = ctx;
  obs *ob = h->ob;
  if (ob->http_status != 200) {  // an error's body: its first bytes make the message
    size_t room = sizeof ob->body - 1 - ob->body_len;
    size_t n = len < room ? len : room;
    memcpy(ob->body + ob->body_len, buf, n);
    ob->body_len += n;
    ob->body[ob->body_len] = '\0';
    return 0;
  }
  if (h->whole) {
    if (ob->full_len + len + 1 > ob->full_cap) {
      size_t c = ob->full_cap ? ob->full_cap : 4096;
      while (c < ob->full_len + len + 1) c *= 2;
      char *f = realloc(ob->full, c);
      if (!f) return -2;
      ob->full = f;
      ob->full_cap = c;
    }
    memcpy(ob->full + ob->full_len, buf, len);
    ob->full_len += len;
    return 0;
  }
  int rc = ld_sse_feed(h->sse, buf, len);
  return rc < 0 ? -2 : 0;
}

// --- the run

typedef struct shared {
  const ld_gen_opts *o;
  const volatile sig_atomic_t *interrupted;  // read by the calling thread only (the signal handler's)
  atomic_bool stop;                          // what the load threads read: set when *interrupted is
  atomic_int running;                        // load threads not yet ended
  grpc_channel *ch;
  bool batched;
  char path[512];  // http: the route
  pthread_mutex_t mu;
  uint64_t next;   // the next request's index
  double next_at;  // its arrival, seconds from t0 (rate mode)
  uint64_t t0, t_end;
  ld_gen_result *r;
} shared;

typedef struct worker {
  shared *sh;
  pthread_t th;
  grpc_completion_queue *cq;
  ld_http *http;
  ld_sse *sse;
  obs ob;
  int32_t *ids;
  size_t ids_cap;
} worker;

// The next request to send: 0 with its index and due time, -1 when the run is over.
static int dispense(shared *sh, uint64_t *i, uint64_t *due_ns) {
  const ld_gen_opts *o = sh->o;
  int rc = -1;
  pthread_mutex_lock(&sh->mu);
  double now_s = (double)(clock_mono_ns() - sh->t0) / 1e9;
  bool over = atomic_load(&sh->stop) || (o->num_requests && sh->next >= (uint64_t)o->num_requests) ||
              (o->duration_s > 0 && (o->rate > 0 ? sh->next_at : now_s) >= o->duration_s);
  if (!over) {
    *i = sh->next++;
    *due_ns = sh->t0 + (uint64_t)(sh->next_at * 1e9);
    if (o->rate > 0) {
      uint64_t s = ld_gen_req_seed(o->seed, sh->next, 1);
      sh->next_at += ld_rng_exp(&s, 1.0 / o->rate);
    }
    rc = 0;
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

static void sleep_until(shared *sh, uint64_t t) {
  for (;;) {
    uint64_t now = clock_mono_ns();
    if (now >= t || atomic_load(&sh->stop)) return;
    uint64_t d = t - now < TICK_NS ? t - now : TICK_NS;
    struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
    nanosleep(&ts, NULL);
  }
}

// The body of an http (Triton generate) request: token ids.
static char *generate_body(const int32_t *ids, int64_t n, int64_t out_len, bool stream) {
  size_t cap = (size_t)n * 12 + 128, len = 0;
  char *b = malloc(cap);
  if (!b) return NULL;
  len += (size_t)snprintf(b, cap, "{\"input_ids\": [");
  for (int64_t k = 0; k < n; k++) len += (size_t)snprintf(b + len, cap - len, "%s%d", k ? "," : "", ids[k]);
  snprintf(b + len, cap - len, "], \"input_lengths\": %lld, \"request_output_len\": %lld, \"streaming\": %s}",
           (long long)n, (long long)out_len, stream ? "true" : "false");
  return b;
}

static char *openai_body(const ld_gen_opts *o, const char *prompt, int64_t out_len) {
  cJSON *b = cJSON_CreateObject();
  if (!b) return NULL;
  cJSON_AddStringToObject(b, "model", o->model);
  cJSON_AddStringToObject(b, "prompt", prompt);
  cJSON_AddNumberToObject(b, "max_tokens", (double)out_len);
  // greedy, as vLLM's benchmark asks and as the TensorRT-LLM tensors' default is (OpenAI's default is 1)
  cJSON_AddNumberToObject(b, "temperature", 0);
  cJSON_AddBoolToObject(b, "stream", o->stream);
  if (o->stream) {
    cJSON *so = cJSON_AddObjectToObject(b, "stream_options");
    if (so) cJSON_AddBoolToObject(so, "include_usage", 1);
  }
  if (o->ignore_eos) cJSON_AddBoolToObject(b, "ignore_eos", 1);
  char *s = cJSON_PrintUnformatted(b);
  cJSON_Delete(b);
  return s;
}

// Draws request i (*prompt_len, *out_len), sends it and fills w->ob.
static void send_one(worker *w, uint64_t i, int64_t *prompt_len, int64_t *out_len) {
  shared *sh = w->sh;
  const ld_gen_opts *o = sh->o;
  obs *ob = &w->ob;
  uint64_t rng = ld_gen_req_seed(o->seed, i, 0);
  *prompt_len = ld_len_draw(&o->prompt, &rng);
  *out_len = ld_len_draw(&o->output, &rng);
  char *body = NULL, *text = NULL;
  if (o->api != LD_API_OPENAI) {
    if ((size_t)*prompt_len > w->ids_cap) {
      int32_t *p = realloc(w->ids, (size_t)*prompt_len * sizeof *p);
      if (!p) FAIL("CLIENT", "out of memory for the prompt");
      w->ids = p;
      w->ids_cap = (size_t)*prompt_len;
    }
    ld_gen_ids(w->ids, *prompt_len, o->vocab, &rng);
  } else if (!(text = ld_gen_words(*prompt_len, &rng))) {
    FAIL("CLIENT", "out of memory for the prompt");
  }
  err e = {0};
  if (o->api == LD_API_GRPC) {
    uint8_t *req = NULL;
    size_t len = 0;
    if (ld_gen_grpc_encode(o->model, o->version, w->ids, *prompt_len, *out_len, o->stream, sh->batched, &req, &len,
                           &e) != 0)
      FAIL("CLIENT", e.msg);
    int kind = ld_gen_grpc_call(sh->ch, w->cq, req, len, o->timeout_ms, on_grpc_tokens, ob, &e);
    free(req);
    if (kind) obs_fail(ob, ld_kind_name(kind), e.msg);
    return;
  }
  body = o->api == LD_API_HTTP ? generate_body(w->ids, *prompt_len, *out_len, o->stream)
                               : openai_body(o, text, *out_len);
  free(text);
  if (!body) FAIL("CLIENT", "out of memory for the request body");
  ld_sse_reset(w->sse);
  http_ctx hc = {.ob = ob, .sse = w->sse, .whole = o->api == LD_API_OPENAI && !o->stream};
  char msg[256];
  int rc = ld_http_post(w->http, sh->path, body, strlen(body), o->timeout_ms, &ob->http_status, on_http_body, &hc,
                        msg, sizeof msg);
  free(body);
  if (rc == -2) FAIL("CLIENT", "out of memory reading the answer");
  if (rc != 0) FAIL(strncmp(msg, "timed out", 9) == 0 ? "DEADLINE_EXCEEDED" : "TRANSPORT", msg);
  if (ob->http_status != 200) {
    char name[32];
    snprintf(name, sizeof name, "HTTP_%d", ob->http_status);
    FAIL(name, ob->body);
  }
  if (hc.whole) {  // a non-streamed completion: one answer, every token
    ld_oai_chunk c;
    int prc = ld_gen_parse_openai_chunk(ob->full ? ob->full : "", ob->full_len, &c, msg, sizeof msg);
    if (prc != 0) FAIL(prc == 1 ? "API_ERROR" : "BAD_ANSWER", msg);
    openai_usage(ob, &c);
    obs_chunk(ob, c.completion_tokens > 0 ? c.completion_tokens : (c.text_len > 0 ? 1 : 0));
  } else if (o->api == LD_API_OPENAI && !ob->done) {
    obs_fail(ob, "BAD_STREAM", "the event stream ended without data: [DONE]");
  }
}

// Folds one request's observations into the run's result (under sh->mu).
static void record(shared *sh, const obs *ob, uint64_t t0, uint64_t due, int64_t prompt_len, int64_t out_len) {
  const ld_gen_opts *o = sh->o;
  ld_gen_result *r = sh->r;
  uint64_t end = clock_mono_ns();
  pthread_mutex_lock(&sh->mu);
  r->sent++;
  if (sh->t_end < end) sh->t_end = end;
  if (o->rate > 0) ld_hist_record(r->lag, t0 > due ? t0 - due : 0);
  int64_t got = 0;
  for (size_t k = 0; k < ob->len; k++) got += ob->n[k];
  if (o->api == LD_API_OPENAI && ob->usage_completion >= 0) got = ob->usage_completion;
  if (!ob->failed && (got == 0 || ob->len == 0)) {  // usage may count tokens no chunk brought: nothing to time
    ld_gen_result_error(r, "NO_TOKENS", "the request ended OK without a token");
  } else if (ob->failed) {
    ld_gen_result_error(r, ob->err_name, ob->err_msg);
    if (o->verbose) fprintf(stderr, "inferd-load: request failed: %s: %s\n", ob->err_name, ob->err_msg);
  } else {
    r->ok++;
    r->output_tokens += (uint64_t)got;
    r->requested_output_tokens += (uint64_t)out_len;
    if (got < out_len) r->short_outputs++;
    if (o->api == LD_API_OPENAI && ob->usage_prompt >= 0) {
      r->prompt_tokens += (uint64_t)ob->usage_prompt;
    } else {
      r->prompt_tokens += (uint64_t)prompt_len;
      if (o->api == LD_API_OPENAI) r->prompt_tokens_estimated = true;
    }
    uint64_t ttft = ob->t[0] - t0, e2e = end - t0;
    ld_hist_record(r->ttft, ttft);
    ld_hist_record(r->e2e, e2e);
    // a chunk of n tokens g after the previous one: n gaps of g/n (one token per chunk when streaming)
    for (size_t k = 1; k < ob->len; k++) {
      uint64_t g = (ob->t[k] - ob->t[k - 1]) / (uint64_t)ob->n[k];
      for (int64_t j = 0; j < ob->n[k]; j++) ld_hist_record(r->itl, g);
    }
    // time per output token after the first (genai-perf's "inter token latency"): streamed answers only
    if (got > 1 && ob->len > 1) ld_hist_record(r->tpot, (ob->t[ob->len - 1] - ob->t[0]) / (uint64_t)(got - 1));
  }
  pthread_mutex_unlock(&sh->mu);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  shared *sh = w->sh;
  uint64_t i, due;
  while (dispense(sh, &i, &due) == 0) {
    if (sh->o->rate > 0) sleep_until(sh, due);
    if (atomic_load(&sh->stop)) break;  // Ctrl-C while waiting for its time: this one is never sent
    obs_reset(&w->ob);
    uint64_t t0 = clock_mono_ns();
    int64_t plen = 0, olen = 0;
    send_one(w, i, &plen, &olen);
    record(sh, &w->ob, t0, due, plen, olen);
  }
  atomic_fetch_sub(&sh->running, 1);
  return NULL;
}

static void worker_close(worker *w) {
  if (w->cq) {
    // a pluck queue: every batch a call started was plucked before it returned, nothing is left to drain
    grpc_completion_queue_shutdown(w->cq);
    grpc_completion_queue_destroy(w->cq);
  }
  ld_http_destroy(w->http);
  ld_sse_destroy(w->sse);
  free(w->ob.t);
  free(w->ob.n);
  free(w->ob.full);
  free(w->ids);
}

int ld_gen_run(const ld_gen_opts *o, const volatile sig_atomic_t *interrupted, ld_gen_result *r, err *e) {
  shared sh = {.o = o, .interrupted = interrupted, .r = r};
  int rc = 0, n = o->concurrency;
  worker *ws = calloc((size_t)n, sizeof *ws);
  if (!ws) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  pthread_mutex_init(&sh.mu, NULL);
  if (o->api == LD_API_GRPC) {
    sh.ch = ld_channel_create(o->url, false);
    ld_model *m = NULL;
    if (ld_model_fetch(sh.ch, o->model, o->version, 10000, &m, e) != 0) {
      rc = err_prefix(e, "cannot describe model '%s' at %s: ", o->model, o->url);
      goto out;
    }
    sh.batched = m->max_batch_size > 0;
    ld_model_destroy(m);
  } else if (o->api == LD_API_HTTP) {
    if (*o->version)
      snprintf(sh.path, sizeof sh.path, "/v2/models/%s/versions/%s/generate_stream", o->model, o->version);
    else
      snprintf(sh.path, sizeof sh.path, "/v2/models/%s/generate_stream", o->model);
  } else {
    snprintf(sh.path, sizeof sh.path, "/v1/completions");
  }
  for (int k = 0; k < n; k++) {
    worker *w = &ws[k];
    w->sh = &sh;
    w->ob.o = o;
    if (o->api == LD_API_GRPC) w->cq = grpc_completion_queue_create_for_pluck(NULL);
    else if (!(w->http = ld_http_create(o->url)) || !(w->sse = ld_sse_create(o->api == LD_API_HTTP ? on_generate_event
                                                                                                     : on_openai_event,
                                                                               &w->ob))) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "cannot use -u '%s' (want HOST:PORT)", o->url);
      goto out;
    }
  }
  sh.t0 = sh.t_end = clock_mono_ns();
  int started = 0;
  atomic_store(&sh.running, n);
  for (; started < n; started++)
    if (pthread_create(&ws[started].th, NULL, worker_main, &ws[started]) != 0) break;
  atomic_fetch_sub(&sh.running, n - started);
  // the signal handler's flag is this thread's to read (a plain volatile, not for other threads): it is
  // passed on as an atomic while the load threads run
  while (atomic_load(&sh.running) > 0) {
    if (*interrupted) atomic_store(&sh.stop, true);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  for (int k = 0; k < started; k++) pthread_join(ws[k].th, NULL);
  if (started == 0) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start a load thread");
  r->seconds = (double)(sh.t_end - sh.t0) / 1e9;
out:
  for (int k = 0; k < n; k++) worker_close(&ws[k]);
  free(ws);
  if (sh.ch) grpc_channel_destroy(sh.ch);
  pthread_mutex_destroy(&sh.mu);
  return rc;
}
