// control.c: model load/unload/poll. Loads run on the caller's thread (one
// at a time, under c->mu); the control thread only frees retired
// generations (once no request holds them) and rescans in poll mode, so no
// caller ever waits for in-flight requests: an HTTP load on the loop thread
// cannot deadlock against a request whose batch that loop must form.
#include "server/core/control.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/repo/repo.h"
#include "grpc_service.pb-c.h"
#include "kernels/base/utf8.h"
#include "server/obs/log.h"
#include "server/http/http.h"
#include "server/core/server.h"

typedef struct retired {
  srv_model *m;
  struct retired *next;
} retired;

struct srv_control {
  srv_registry *reg;
  srv_sched *sched;
  srv_control_mode mode;
  char repo_dir[4096];
  int poll_secs;
  pthread_mutex_t mu;  // one load/unload/rescan at a time; guards the fields below
  pthread_cond_t cv;   // wakes the thread: something retired, or stop
  retired *retired;
  repo_skip *skips;  // poll mode: the directories the last scan left out, already warned about
  size_t n_skips;
  int stop;
  pthread_t thread;
  int started;
};

// A name that is not UTF-8 would be quoted in the error (and the log): the
// JSON answer and the gRPC status details then break the client's parser
// (found by fuzz_rest). Refused without quoting it, as is one with control
// characters, which no repository scan takes as a model (repo_name_problem):
// a failed load would otherwise list it in the index.
static int check_name(const char *name, err *e) {
  if (!name || !name[0]) return err_set(e, ERR_INVALID_ARGUMENT, "a model name is required");
  if (!utf8_valid(name, strlen(name)))
    return err_set(e, ERR_INVALID_ARGUMENT, "the model name is not valid UTF-8 (proto3 string fields must be)");
  const char *why = repo_name_problem(name);
  if (why) return err_set(e, ERR_INVALID_ARGUMENT, "the model name %s", why);
  return 0;
}

int srv_control_initial_load(srv_registry *reg, const char *repo_dir, const char *const *names, int n, err *e) {
  repo_model *rms = NULL;
  size_t n_all = 0;
  int all = 0;
  for (int i = 0; i < n; i++) all |= strcmp(names[i], "*") == 0;
  if (all) {
    repo_skip *skips = NULL;
    size_t n_skips = 0;
    TRY(repo_scan(repo_dir, &rms, &n_all, &skips, &n_skips, e));
    srv_registry_warn_skipped(skips, n_skips);
    free(skips);
  }
  size_t total = all ? n_all : (size_t)n;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < total; i++) {
    const char *name = all ? rms[i].name : names[i];
    if (srv_registry_current(reg, name)) continue;  // named twice
    err ne = {0};
    if (!all && check_name(name, &ne) != 0) {  // not a model to list: one line, the name escaped (srv_log)
      srv_log(SRV_LOG_ERROR, "--load-model '%s' skipped: %s", name, ne.msg);
      continue;
    }
    srv_model *m;
    rc = srv_registry_build(reg, name, NULL, &m, e);
    if (rc) break;
    if (m->status.code) srv_log(SRV_LOG_ERROR, "--load-model '%s': %s", name, m->status.msg);
    srv_registry_publish(reg, m);
  }
  repo_free(rms, n_all);
  return rc;
}

static void retire(srv_control *c, srv_model *m) {
  if (!m) return;
  retired *x = malloc(sizeof *x);
  if (!x) {  // cannot queue it: wait here rather than leak or free under a request
    srv_registry_wait_idle(c->reg, m);
    srv_sched_remove_model(c->sched, m);
    srv_model_free(m);
    return;
  }
  x->m = m;
  x->next = c->retired;
  c->retired = x;
  pthread_cond_signal(&c->cv);
}

// Under c->mu.
static int do_load(srv_control *c, const char *name, const char *config_text, err *e) {
  srv_model *m;
  TRY(srv_registry_build(c->reg, name, config_text, &m, e));
  int serving = 0;
  for (size_t j = 0; j < m->n_versions; j++) serving |= m->versions[j].model != NULL;
  err se = {0};
  if (serving && srv_sched_add_model(c->sched, m, &se) != 0) {
    serving = 0;
    m->status = se;
  }
  srv_model *cur = srv_registry_current(c->reg, name);
  int cur_serving = 0;
  for (size_t j = 0; cur && j < cur->n_versions; j++) cur_serving |= cur->versions[j].model != NULL;
  if (!serving) {
    err why = m->status.code ? m->status : (err){.code = ERR_UNAVAILABLE};
    if (!why.msg[0]) snprintf(why.msg, sizeof why.msg, "no version of the model loaded");
    if (!cur && why.code == ERR_NOT_FOUND) {
      srv_model_free(m);  // no such directory: nothing to list in the index
    } else if (cur_serving) {
      // the old generation keeps serving; the index says why the new one did not
      srv_log(SRV_LOG_ERROR, "model '%s' failed to reload, the loaded version keeps serving: %s", name, why.msg);
      srv_registry_set_error(c->reg, name, why.msg);
      srv_model_free(m);
    } else {
      srv_log(SRV_LOG_ERROR, "model '%s' failed to load: %s", name, why.msg);
      retire(c, srv_registry_publish(c->reg, m));
    }
    return err_set(e, why.code ? why.code : ERR_UNAVAILABLE, "failed to load '%s': %s", name, why.msg);
  }
  srv_model *old = srv_registry_publish(c->reg, m);
  srv_log(SRV_LOG_INFO, "model '%s' %s", name, old && !old->unloaded ? "reloaded" : "loaded");
  retire(c, old);
  return 0;
}

static int do_unload(srv_control *c, const char *name, err *e) {
  srv_model *cur = srv_registry_current(c->reg, name);
  if (!cur) return err_set(e, ERR_NOT_FOUND, "failed to unload '%s': no model of that name was loaded", name);
  if (cur->unloaded) return 0;
  srv_model *shell = srv_registry_shell(name, "unloaded");
  if (!shell) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  retire(c, srv_registry_publish(c->reg, shell));
  srv_log(SRV_LOG_INFO, "model '%s' unloaded (requests in flight finish on it)", name);
  return 0;
}

static int explicit_or_fail(srv_control *c, err *e) {
  if (c->mode == SRV_CONTROL_EXPLICIT) return 0;
  return err_set(e, ERR_UNAVAILABLE, "explicit model load / unload is not allowed unless --model-control-mode is "
                                     "explicit (this server runs in %s mode)",
                 c->mode == SRV_CONTROL_POLL ? "poll" : "none");
}

int srv_control_load(srv_control *c, const char *name, const char *config_override, err *e) {
  TRY(explicit_or_fail(c, e));
  TRY(check_name(name, e));
  if (config_override) {
    // its strings would be quoted in errors and served in ModelConfig (found by fuzz_rest)
    if (!utf8_valid(config_override, strlen(config_override)))
      return err_set(e, ERR_INVALID_ARGUMENT, "the config override is not valid UTF-8 (proto3 string fields must be)");
    const char *p = config_override;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    // Triton sends the override as JSON; inferd has a config.pbtxt parser but no JSON one
    if (*p == '{')
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "the 'config' override is JSON, which inferd does not parse: send it as config.pbtxt text "
                     "(protobuf text format), e.g. 'max_batch_size: 4 input [...]'");
    if (!*p) return err_set(e, ERR_INVALID_ARGUMENT, "the 'config' override is empty");
  }
  pthread_mutex_lock(&c->mu);
  int rc = do_load(c, name, config_override, e);
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int srv_control_unload(srv_control *c, const char *name, err *e) {
  TRY(explicit_or_fail(c, e));
  TRY(check_name(name, e));
  pthread_mutex_lock(&c->mu);
  int rc = do_unload(c, name, e);
  pthread_mutex_unlock(&c->mu);
  return rc;
}

// Poll mode, under c->mu: the warning for a directory left out for its name
// comes once, when it appears (it comes again if it goes and comes back),
// not at every poll. Takes ownership of skips (sorted, as repo_scan gives them).
static void warn_new_skips(srv_control *c, repo_skip *skips, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int seen = 0;
    for (size_t j = 0; j < c->n_skips && !seen; j++) seen = strcmp(c->skips[j].name, skips[i].name) == 0;
    if (!seen) srv_registry_warn_skipped(&skips[i], 1);
  }
  free(c->skips);
  c->skips = skips;
  c->n_skips = n;
}

// Poll mode, under c->mu: new or changed models (re)load, removed ones unload.
static void rescan(srv_control *c) {
  repo_model *rms = NULL;
  size_t n = 0;
  repo_skip *skips = NULL;
  size_t n_skips = 0;
  err e = {0};
  if (repo_scan(c->repo_dir, &rms, &n, &skips, &n_skips, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "repository poll: %s", e.msg);
    return;
  }
  warn_new_skips(c, skips, n_skips);
  for (size_t i = 0; i < n; i++) {
    srv_model *cur = srv_registry_current(c->reg, rms[i].name);
    if (cur && !cur->unloaded && cur->signature == srv_registry_scan_signature(&rms[i])) continue;
    // a failed reload keeps its signature unchanged: retried only once the files change again
    if (do_load(c, rms[i].name, NULL, &e) != 0 && cur && !cur->unloaded) cur->signature = srv_registry_scan_signature(&rms[i]);
  }
  srv_registry_rdlock(c->reg);
  size_t nm = srv_registry_n_models(c->reg);
  char(*names)[256] = calloc(nm ? nm : 1, sizeof *names);
  for (size_t i = 0; names && i < nm; i++) {
    srv_model *m = srv_registry_model_at(c->reg, i);
    if (!m->unloaded) memcpy(names[i], m->name, sizeof names[i]);
  }
  srv_registry_rdunlock(c->reg);
  for (size_t i = 0; names && i < nm; i++) {
    if (!names[i][0]) continue;
    int found = 0;
    for (size_t j = 0; j < n && !found; j++) found = strcmp(rms[j].name, names[i]) == 0;
    if (!found) do_unload(c, names[i], &e);
  }
  free(names);
  repo_free(rms, n);
}

// Frees the retired generations nobody holds any more; under c->mu.
static void reap(srv_control *c) {
  for (retired **p = &c->retired; *p;) {
    retired *x = *p;
    if (atomic_load(&x->m->refs) > 0) {
      p = &x->next;
      continue;
    }
    *p = x->next;
    srv_sched_remove_model(c->sched, x->m);  // waits for its last jobs' bookkeeping
    srv_model_free(x->m);
    free(x);
  }
}

static void deadline_in(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  int64_t ns = ts->tv_nsec + (ms % 1000) * 1000000;
  ts->tv_sec += (time_t)(ms / 1000 + ns / 1000000000);
  ts->tv_nsec = (long)(ns % 1000000000);
}

static void *control_main(void *arg) {
  srv_control *c = arg;
  struct timespec next_poll;
  deadline_in(&next_poll, (int64_t)c->poll_secs * 1000);
  pthread_mutex_lock(&c->mu);
  while (!c->stop) {
    reap(c);
    struct timespec now, wake;
    clock_gettime(CLOCK_REALTIME, &now);
    if (c->mode == SRV_CONTROL_POLL &&
        (now.tv_sec > next_poll.tv_sec || (now.tv_sec == next_poll.tv_sec && now.tv_nsec >= next_poll.tv_nsec))) {
      rescan(c);
      deadline_in(&next_poll, (int64_t)c->poll_secs * 1000);
      continue;
    }
    // Retired generations wait for their requests (each answered within its
    // own deadline): look again shortly. Otherwise sleep until the next poll.
    if (c->retired) deadline_in(&wake, 20);
    else if (c->mode == SRV_CONTROL_POLL) wake = next_poll;
    else deadline_in(&wake, 3600 * 1000);
    int rc = pthread_cond_timedwait(&c->cv, &c->mu, &wake);
    if (rc && rc != ETIMEDOUT) srv_log(SRV_LOG_ERROR, "control thread: %s", strerror(rc));
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int srv_control_create(srv_registry *reg, srv_sched *sched, srv_control_mode mode, const char *repo_dir,
                       int poll_secs, srv_control **out, err *e) {
  srv_control *c = calloc(1, sizeof *c);
  if (!c) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  c->reg = reg;
  c->sched = sched;
  c->mode = mode;
  c->poll_secs = poll_secs > 0 ? poll_secs : 15;
  snprintf(c->repo_dir, sizeof c->repo_dir, "%s", repo_dir);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  if (mode == SRV_CONTROL_POLL) {  // the load warned about these: the first poll does not again
    size_t n = 0;
    const repo_skip *s = srv_registry_load_skipped(reg, &n);
    if (n && (c->skips = malloc(n * sizeof *s)) != NULL) {
      memcpy(c->skips, s, n * sizeof *s);
      c->n_skips = n;
    }
  }
  if (pthread_create(&c->thread, NULL, control_main, c) != 0) {
    srv_control_destroy(c);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start the model control thread");
  }
  c->started = 1;
  *out = c;
  return 0;
}

void srv_control_destroy(srv_control *c) {
  if (!c) return;
  if (c->started) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
  }
  while (c->retired) {
    retired *x = c->retired;
    c->retired = x->next;
    srv_registry_wait_idle(c->reg, x->m);
    srv_sched_remove_model(c->sched, x->m);
    srv_model_free(x->m);
    free(x);
  }
  free(c->skips);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

// --- gRPC

// The "config" parameter's text (NULL when absent); *other set when a
// parameter we do not take (Triton's "file:" model contents) is present.
static const char *config_param(size_t n, Inference__RepositoryModelLoadRequest__ParametersEntry **ps, int *other) {
  const char *cfg = NULL;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(ps[i]->key, "config") == 0) cfg = ps[i]->value && ps[i]->value->string_param ? ps[i]->value->string_param : "";
    else *other = 1;
  }
  return cfg;
}

void srv_control_load_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_control *c = ctx;
  Inference__RepositoryModelLoadRequest *q = (Inference__RepositoryModelLoadRequest *)srv_unpack_or_fail(
      call, &inference__repository_model_load_request__descriptor, req, len);
  if (!q) return;
  err e = {0};
  int other = 0;
  const char *cfg = config_param(q->n_parameters, q->parameters, &other);
  if (other && explicit_or_fail(c, &e) == 0)
    err_set(&e, ERR_INVALID_ARGUMENT, "load parameters other than 'config' (model files) are not supported");
  if (e.code || srv_control_load(c, q->model_name, cfg, &e) != 0) {
    srv_call_fail(call, (int)e.code, e.msg);
  } else {
    Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
    srv_reply_msg(call, &r.base);
  }
  inference__repository_model_load_request__free_unpacked(q, NULL);
}

void srv_control_unload_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_control *c = ctx;
  Inference__RepositoryModelUnloadRequest *q = (Inference__RepositoryModelUnloadRequest *)srv_unpack_or_fail(
      call, &inference__repository_model_unload_request__descriptor, req, len);
  if (!q) return;
  err e = {0};
  if (srv_control_unload(c, q->model_name, &e) != 0) {
    srv_call_fail(call, (int)e.code, e.msg);
  } else {
    Inference__RepositoryModelUnloadResponse r = INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
    srv_reply_msg(call, &r.base);
  }
  inference__repository_model_unload_request__free_unpacked(q, NULL);
}

// --- HTTP

static int http_status(int code) {
  switch (code) {
    case ERR_INVALID_ARGUMENT: return 400;
    case ERR_NOT_FOUND: return 404;
    case ERR_UNAVAILABLE: return 503;
    default: return 500;
  }
}

static void json_error(srv_http_response *resp, int status, const char *msg) {
  size_t cap = 2 * strlen(msg) + 16;
  char *b = malloc(cap);
  if (!b) {
    *resp = (srv_http_response){.status = 500, .content_type = "text/plain", .body = "out of memory\n", .len = 14};
    return;
  }
  size_t n = (size_t)snprintf(b, cap, "{\"error\":\"");
  for (const char *p = msg; *p && n + 4 < cap; p++) {
    if (*p == '"' || *p == '\\') b[n++] = '\\';
    b[n++] = (*p == '\n') ? ' ' : *p;
  }
  n += (size_t)snprintf(b + n, cap - n, "\"}");
  *resp = (srv_http_response){.status = status, .content_type = "application/json", .body = b, .len = n, .free_body = 1};
}

int srv_control_http(srv_control *c, srv_jsonmem *jm, const srv_http_request *req, srv_http_response *resp) {
  static const char prefix[] = "/v2/repository/models/";
  if (strncmp(req->path, prefix, sizeof prefix - 1) != 0) return 0;
  const char *name = req->path + sizeof prefix - 1;
  const char *slash = strrchr(name, '/');
  if (!slash || (strcmp(slash, "/load") != 0 && strcmp(slash, "/unload") != 0)) return 0;
  if (strcmp(req->method, "POST") != 0) {
    json_error(resp, 405, "method not allowed: POST a load or unload");
    return 1;
  }
  char model[256];
  size_t n = (size_t)(slash - name);
  // percent-decoded as every other route's names (tritonclient quotes them)
  if (n == 0 || srv_http_decode_segment(name, n, model, sizeof model) != 0 || !model[0]) {
    json_error(resp, 400, "bad model name in the path: empty, too long, malformed percent-encoding or not valid UTF-8");
    return 1;
  }
  err e = {0};
  // Triton's load body: {"parameters": {"config": "..."}}, the config override (config.pbtxt text here;
  // srv_control_load refuses JSON with its reason). An empty body loads as the repository has it.
  srv_json js = {0};
  const char *override = NULL;
  if (srv_http_json_nul(req->body, req->body_len)) {  // the config text would be read cut at it
    json_error(resp, 400, SRV_HTTP_JSON_NUL_MSG);
    return 1;
  }
  if (req->body && req->body_len) {
    err pe = {0};
    if (srv_jsonmem_parse(jm, req->body, req->body_len, &js, &pe) != 0 && pe.code != ERR_INVALID_ARGUMENT) {
      json_error(resp, srv_json_status(pe.code), pe.msg);
      return 1;
    }
    const cJSON *body = js.root;
    const cJSON *params = body ? cJSON_GetObjectItemCaseSensitive(body, "parameters") : NULL;
    const cJSON *cfg = params ? cJSON_GetObjectItemCaseSensitive(params, "config") : NULL;
    if (!body || (params && !cJSON_IsObject(params)) || (cfg && !cJSON_IsString(cfg))) {
      srv_json_free(&js);
      json_error(resp, 400, "the load body must be JSON: {\"parameters\": {\"config\": \"<config.pbtxt text>\"}}");
      return 1;
    }
    if (cfg) override = cfg->valuestring;
  }
  int rc = strcmp(slash, "/load") == 0 ? srv_control_load(c, model, override, &e) : srv_control_unload(c, model, &e);
  srv_json_free(&js);
  if (rc) json_error(resp, http_status((int)e.code), e.msg);
  else *resp = (srv_http_response){.status = 200, .content_type = "application/json", .body = "{}", .len = 2};
  return 1;
}
