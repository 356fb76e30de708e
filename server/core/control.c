// control.c: model load/unload/poll, all on the control thread: a load or
// unload request is checked on the caller's thread, queued, and answered
// from the control thread once done (srv_call_reply from any thread). A load
// (graph, instances, a warmup of minutes) held the caller's thread before:
// a gRPC CQ thread, so calls matched to that CQ (ServerLive on new
// connections, inference) waited for the whole load, or the HTTP loop thread,
// so every HTTP request did (issue 31). The control thread also frees retired
// generations (once no request holds them) and rescans in poll mode; it never
// waits for in-flight requests, so no load can deadlock against a request
// whose batch the loop must form.
#include "server/core/control.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/repo/repo.h"
#include "grpc_service.pb-c.h"
#include "model_config.pb-c.h"
#include "server/core/cfgjson.h"
#include "server/core/ensemble_plan.h"
#include "kernels/base/utf8.h"
#include "server/obs/log.h"
#include "server/core/server.h"

typedef struct retired {
  srv_model *m;
  struct retired *next;
} retired;

// One load or unload waiting for the control thread. done runs there, once,
// with the outcome (e->code 0: done), and owns arg from then on.
enum { UNLOAD = 1, UNLOAD_DEPENDENTS = 2 };  // op.unload: with Triton's unload_dependents

typedef struct op {
  int unload;  // 0: a load; UNLOAD; UNLOAD_DEPENDENTS
  char *name;    // owned
  char *config;  // owned; NULL: the repository's config.pbtxt
  void (*done)(void *arg, const err *e);
  void *arg;
  struct op *next;
} op;

struct srv_control {
  srv_registry *reg;
  srv_sched *sched;
  srv_control_mode mode;
  char repo_dir[4096];
  int poll_secs;
  const atomic_int *cancel;  // borrowed, may be NULL: the server is stopping (loads fail at once)
  pthread_mutex_t mu;        // guards the queue and the flags below (never held while loading)
  pthread_cond_t cv;         // wakes the thread: an op queued, or stop
  pthread_cond_t idle_cv;    // the queue emptied and no op runs (srv_control_quiesce)
  op *head, *tail;
  int busy;     // the thread runs an op
  char loading[256];  // the model the thread is loading now; "" when none (srv_control_loading)
  int closing;  // new ops are refused (srv_control_quiesce, destroy)
  int stop;
  // the control thread's alone (and destroy's, after the join)
  retired *retired;
  repo_skip *skips;  // poll mode: the directories the last scan left out, already warned about
  size_t n_skips;
  pthread_t thread;
  int started;
  // loads refused for their name (not a directory name, or no such model):
  // counted, one log line per NAME_LOG_SECS at most (callers' threads and the control thread)
  atomic_ullong n_name_refusals;
  atomic_llong name_log_at;  // CLOCK_MONOTONIC seconds of the last such line; 0: none yet
};

#define NAME_LOG_SECS 10

static int cancelled(const srv_control *c) { return c->cancel && atomic_load(c->cancel); }

// A load refused for its name: the client has the answer; the log gets one
// line per NAME_LOG_SECS with the count, not one per request (a flood of
// such names logged two lines each).
static void note_name_refusal(srv_control *c, const err *e) {
  unsigned long long n = atomic_fetch_add(&c->n_name_refusals, 1) + 1;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long now = (long long)ts.tv_sec + 1, last = atomic_load(&c->name_log_at);  // +1: 0 stays "never"
  if (last && now - last < NAME_LOG_SECS) return;
  if (!atomic_compare_exchange_strong(&c->name_log_at, &last, now)) return;  // another thread logs this period
  srv_log(SRV_LOG_WARN, "model loads refused for their name: %llu so far (at most one line per %d s); latest: %s", n,
          NAME_LOG_SECS, e->msg);
}

// A name that is not UTF-8 would be quoted in the error (and the log): the
// JSON answer and the gRPC status details then break the client's parser
// (found by fuzz_rest). Refused without quoting it, as is one with control
// characters, which no repository scan takes as a model (repo_name_problem):
// a failed load would otherwise list it in the index.
static int check_name(const char *name, err *e) {
  if (!name || !name[0]) return err_set(e, ERR_INVALID_ARGUMENT, "a model name is required");
  if (!utf8_valid(name, strlen(name)))
    return err_set(e, ERR_INVALID_ARGUMENT, "the model name is not valid UTF-8 (proto3 string fields must be)");
  // Nor one that cannot be a directory of the repository ('a/b', '..', 256 bytes or more): the
  // load used to fail with the model listed UNAVAILABLE, and strict readiness then said NOT READY
  // until someone unloaded that exact name; a flood of such names grew the index without bound.
  const char *why = repo_model_name_problem(name);
  if (why) return err_set(e, ERR_INVALID_ARGUMENT, "the model name %s", why);
  return 0;
}

static int initial_build(srv_registry *reg, const char *name, int depth, err *e);

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
    rc = initial_build(reg, name, 0, e);
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
}

static void set_loading(srv_control *c, const char *name) {
  pthread_mutex_lock(&c->mu);
  snprintf(c->loading, sizeof c->loading, "%s", name);
  pthread_mutex_unlock(&c->mu);
}

int srv_control_loading(srv_control *c, const char *name) {
  pthread_mutex_lock(&c->mu);
  int yes = c->loading[0] && strcmp(c->loading, name) == 0;
  pthread_mutex_unlock(&c->mu);
  return yes;
}

static int do_load_now(srv_control *c, const char *name, const char *config_text, int depth, err *e);

// On the control thread.
static int do_load(srv_control *c, const char *name, const char *config_text, err *e) {
  set_loading(c, name);
  int rc = do_load_now(c, name, config_text, 0, e);
  set_loading(c, "");
  return rc;
}

static int model_serving(const srv_model *m) {
  int serving = 0;
  for (size_t j = 0; m && !m->unloaded && j < m->n_versions; j++) serving |= srv_version_ready(&m->versions[j]);
  return serving;
}

// Ensembles nest at most this deep when their members are loaded with them
// (a member that is itself an ensemble loads its own); past it, or around a
// cycle of ensembles, the last one built says which members it lacks.
#define ENSEMBLE_LOAD_DEPTH 8

// An ensemble is loaded with its composing models, as Triton does in
// explicit mode: each member that does not serve yet is loaded from the
// repository first (a failure is left for the ensemble's build to report).
// 1 when it tried any, so the ensemble is built again.
static int load_members(srv_control *c, const srv_model *m, int depth) {
  const Inference__ModelEnsembling *es = m->config->ensemble_scheduling;
  int tried = 0;
  for (size_t i = 0; es && depth < ENSEMBLE_LOAD_DEPTH && i < es->n_step; i++) {
    const char *mn = es->step[i]->model_name;
    if (!mn || !mn[0] || strcmp(mn, m->name) == 0 || repo_model_name_problem(mn)) continue;
    if (model_serving(srv_registry_current(c->reg, mn))) continue;
    err me = {0};
    if (do_load_now(c, mn, NULL, depth + 1, &me) != 0)
      srv_log(SRV_LOG_ERROR, "ensemble '%s': composing model '%s' failed to load: %s", m->name, mn, me.msg);
    else
      srv_log(SRV_LOG_INFO, "ensemble '%s': composing model '%s' loaded with it", m->name, mn);
    tried = 1;
  }
  return tried;
}

// --load-model, before the server serves: builds and publishes `name`, and
// for an ensemble first each member that does not serve, as a load request
// would (load_members).
static int initial_build(srv_registry *reg, const char *name, int depth, err *e) {
  srv_model *m;
  TRY(srv_registry_build(reg, name, NULL, &m, e));
  const Inference__ModelEnsembling *es = m->config ? m->config->ensemble_scheduling : NULL;
  if (!m->ens && srv_ens_is_ensemble(m->config) && m->n_versions && es && depth < ENSEMBLE_LOAD_DEPTH) {
    int tried = 0;
    for (size_t i = 0; i < es->n_step; i++) {
      const char *mn = es->step[i]->model_name;
      if (!mn || !mn[0] || strcmp(mn, name) == 0 || repo_model_name_problem(mn)) continue;
      if (model_serving(srv_registry_current(reg, mn))) continue;
      if (initial_build(reg, mn, depth + 1, e) != 0) {
        srv_model_free(m);
        return (int)e->code;
      }
      tried = 1;
    }
    if (tried) {
      srv_model_free(m);
      TRY(srv_registry_build(reg, name, NULL, &m, e));
    }
  }
  if (m->status.code) srv_log(SRV_LOG_ERROR, "--load-model '%s': %s", name, m->status.msg);
  srv_model_free(srv_registry_publish(reg, m));  // a member built again: nothing serves yet, nothing holds it
  return 0;
}

static int do_load_now(srv_control *c, const char *name, const char *config_text, int depth, err *e) {
  srv_model *m;
  TRY(srv_registry_build(c->reg, name, config_text, &m, e));
  if (!m->ens && srv_ens_is_ensemble(m->config) && m->n_versions && load_members(c, m, depth)) {
    srv_model_free(m);
    TRY(srv_registry_build(c->reg, name, config_text, &m, e));
  }
  int serving = model_serving(m);
  err se = {0};
  if (serving && srv_sched_add_model(c->sched, m, &se) != 0) {
    serving = 0;
    m->status = se;
  }
  srv_model *cur = srv_registry_current(c->reg, name);
  int cur_serving = 0;
  for (size_t j = 0; cur && j < cur->n_versions; j++) cur_serving |= srv_version_ready(&cur->versions[j]);
  if (!serving) {
    err why = m->status.code ? m->status : (err){.code = ERR_UNAVAILABLE};
    if (!why.msg[0]) snprintf(why.msg, sizeof why.msg, "no version of the model loaded");
    if (!cur && why.code == ERR_NOT_FOUND) {
      srv_model_free(m);  // no such directory: nothing to list in the index
      note_name_refusal(c, &why);
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

static int do_unload(srv_control *c, const char *name, int dependents, err *e);

// Triton's unload_dependents: the loaded ensembles that name `name` as a
// step go too (and theirs, in turn).
static void unload_dependents(srv_control *c, const char *name) {
  srv_registry_rdlock(c->reg);
  size_t nm = srv_registry_n_models(c->reg);
  char(*names)[256] = calloc(nm ? nm : 1, sizeof *names);
  for (size_t i = 0; names && i < nm; i++) {
    srv_model *m = srv_registry_model_at(c->reg, i);
    const Inference__ModelEnsembling *es = m->unloaded || !srv_ens_is_ensemble(m->config) ? NULL
                                                                                         : m->config->ensemble_scheduling;
    for (size_t k = 0; es && k < es->n_step && !names[i][0]; k++)
      if (es->step[k]->model_name && strcmp(es->step[k]->model_name, name) == 0) memcpy(names[i], m->name, sizeof names[i]);
  }
  srv_registry_rdunlock(c->reg);
  for (size_t i = 0; names && i < nm; i++) {
    err e = {0};
    if (names[i][0] && do_unload(c, names[i], 1, &e) == 0)
      srv_log(SRV_LOG_INFO, "ensemble '%s' unloaded with its composing model '%s' (unload_dependents)", names[i], name);
  }
  free(names);
}

static int do_unload(srv_control *c, const char *name, int dependents, err *e) {
  srv_model *cur = srv_registry_current(c->reg, name);
  if (!cur) return err_set(e, ERR_NOT_FOUND, "failed to unload '%s': no model of that name was loaded", name);
  if (cur->unloaded) return 0;
  srv_model *shell = srv_registry_shell(name, "unloaded");
  if (!shell) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  retire(c, srv_registry_publish(c->reg, shell));
  srv_log(SRV_LOG_INFO, "model '%s' unloaded (requests in flight finish on it)", name);
  if (dependents) unload_dependents(c, name);
  return 0;
}

static int explicit_or_fail(srv_control *c, err *e) {
  if (c->mode == SRV_CONTROL_EXPLICIT) return 0;
  return err_set(e, ERR_UNAVAILABLE, "explicit model load / unload is not allowed unless --model-control-mode is "
                                     "explicit (this server runs in %s mode)",
                 c->mode == SRV_CONTROL_POLL ? "poll" : "none");
}

// What a load request is checked for on the caller's thread, before it is queued.
static int check_load(srv_control *c, const char *name, const char *config_override, err *e) {
  TRY(explicit_or_fail(c, e));
  if (check_name(name, e) != 0) {
    note_name_refusal(c, e);
    return (int)e->code;
  }
  if (config_override) {
    size_t len = strnlen(config_override, (size_t)SRV_CONFIG_OVERRIDE_MAX + 1);
    if (len > SRV_CONFIG_OVERRIDE_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "failed to load '%s': the 'config' override is larger than %u bytes (1 MiB), the most accepted",
                     name, (unsigned)SRV_CONFIG_OVERRIDE_MAX);
    // its strings would be quoted in errors and served in ModelConfig (found by fuzz_rest)
    if (!utf8_valid(config_override, len))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "failed to load '%s': the config override is not valid UTF-8 (proto3 string fields must be)", name);
    const char *p = config_override;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (!*p) return err_set(e, ERR_INVALID_ARGUMENT, "failed to load '%s': the 'config' override is empty", name);
  }
  return 0;
}

// Queues a load (config: NULL for the files) or unload; done(arg, outcome)
// runs exactly once: on the control thread, or here when refused.
static void enqueue(srv_control *c, int unload, const char *name, const char *config,
                    void (*done)(void *, const err *), void *arg) {
  err e = {0};
  op *o = calloc(1, sizeof *o);
  if (o) {
    o->unload = unload;
    o->name = strdup(name);
    o->config = config ? strdup(config) : NULL;
    o->done = done;
    o->arg = arg;
  }
  if (!o || !o->name || (config && !o->config)) {
    if (o) free(o->name), free(o->config), free(o);
    err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    done(arg, &e);
    return;
  }
  pthread_mutex_lock(&c->mu);
  int refused = c->closing || c->stop;
  if (!refused) {
    if (c->tail) c->tail->next = o;
    else c->head = o;
    c->tail = o;
    pthread_cond_signal(&c->cv);
  }
  pthread_mutex_unlock(&c->mu);
  if (refused) {
    free(o->name), free(o->config), free(o);
    err_set(&e, ERR_UNAVAILABLE, "the server is shutting down: no model %s", unload ? "unload" : "load");
    done(arg, &e);
  }
}

// Triton sends the override as JSON (an object); inferd also takes config.pbtxt text.
static int is_json(const char *cfg) {
  while (*cfg == ' ' || *cfg == '\t' || *cfg == '\n' || *cfg == '\r') cfg++;
  return *cfg == '{';
}

// On the control thread: runs one op and answers it.
static void run_op(srv_control *c, op *o) {
  err e = {0};
  if (o->unload) {
    (void)do_unload(c, o->name, o->unload == UNLOAD_DEPENDENTS, &e);
  } else if (cancelled(c)) {  // queued behind a load when the drain began
    err_set(&e, ERR_UNAVAILABLE, "failed to load '%s': cancelled: server shutting down", o->name);
    srv_log(SRV_LOG_ERROR, "model '%s' failed to load: cancelled: server shutting down", o->name);
  } else if (o->config && is_json(o->config)) {
    // Triton's form; turned into config.pbtxt text here, one load at a time (cfgjson.h)
    char *text = NULL;
    if (srv_cfgjson_to_text(&inference__model_config__descriptor, o->config, strlen(o->config), &text, &e) != 0) {
      err_prefix(&e, "failed to load '%s': ", o->name);
      srv_log(SRV_LOG_ERROR, "model '%s' failed to load: %s", o->name, e.msg);
    } else {
      (void)do_load(c, o->name, text, &e);
    }
    free(text);
  } else {
    (void)do_load(c, o->name, o->config, &e);
  }
  o->done(o->arg, &e);
  free(o->name);
  free(o->config);
  free(o);
}

// The synchronous form: a caller that may block (not the control thread).
typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  err e;
} waiter;

static void wake_waiter(void *arg, const err *e) {
  waiter *w = arg;
  pthread_mutex_lock(&w->mu);
  w->e = *e;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int run_and_wait(srv_control *c, int unload, const char *name, const char *config, err *e) {
  waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  enqueue(c, unload, name, config, wake_waiter, &w);
  pthread_mutex_lock(&w.mu);
  while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
  if (w.e.code) *e = w.e;
  return (int)w.e.code;
}

int srv_control_load(srv_control *c, const char *name, const char *config_override, err *e) {
  TRY(check_load(c, name, config_override, e));
  return run_and_wait(c, 0, name, config_override, e);
}

int srv_control_unload(srv_control *c, const char *name, err *e) {
  TRY(explicit_or_fail(c, e));
  TRY(check_name(name, e));
  return run_and_wait(c, 1, name, NULL, e);
}

void srv_control_quiesce(srv_control *c) {
  pthread_mutex_lock(&c->mu);
  c->closing = 1;
  while (c->started && (c->head || c->busy)) pthread_cond_wait(&c->idle_cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

// Poll mode, on the control thread: the warning for a directory left out for its name
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

// Poll mode, on the control thread: new or changed models (re)load, removed ones unload.
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
  for (size_t i = 0; i < n && !cancelled(c); i++) {  // stopping: the rest waits for no load
    srv_model *cur = srv_registry_current(c->reg, rms[i].name);
    if (cur && !cur->unloaded && cur->signature == srv_registry_scan_signature(&rms[i])) continue;
    // a failed reload keeps its signature unchanged: retried only once the files change again
    if (do_load(c, rms[i].name, NULL, &e) != 0 && cur && !cur->unloaded) cur->signature = srv_registry_scan_signature(&rms[i]);
  }
  // An ensemble that failed only for members not ready (UNAVAILABLE: the repository lacked them, or
  // they failed) is tried again once every member serves, its own files unchanged; a failure then for
  // another reason is INVALID_ARGUMENT and is not retried.
  for (size_t i = 0; i < n && !cancelled(c); i++) {
    srv_model *cur = srv_registry_current(c->reg, rms[i].name);
    if (!cur || cur->unloaded || cur->ens || cur->status.code != ERR_UNAVAILABLE || !srv_ens_is_ensemble(cur->config))
      continue;
    const Inference__ModelEnsembling *es = cur->config->ensemble_scheduling;
    int all = es && es->n_step > 0;
    for (size_t k = 0; all && k < es->n_step; k++)
      all = es->step[k]->model_name && model_serving(srv_registry_current(c->reg, es->step[k]->model_name));
    if (all && do_load(c, rms[i].name, NULL, &e) == 0)
      srv_log(SRV_LOG_INFO, "repository poll: ensemble '%s' loaded now that its composing models serve", rms[i].name);
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
    if (!found) do_unload(c, names[i], 0, &e);
  }
  free(names);
  repo_free(rms, n);
}

// Frees the retired generations nobody holds any more; on the control thread.
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
  while (!c->stop || c->head) {  // every op queued is answered, also at stop
    if (c->head) {
      op *o = c->head;
      c->head = o->next;
      if (!c->head) c->tail = NULL;
      c->busy = 1;
      pthread_mutex_unlock(&c->mu);  // enqueue never waits for a load
      run_op(c, o);
      pthread_mutex_lock(&c->mu);
      c->busy = 0;
      if (!c->head) pthread_cond_broadcast(&c->idle_cv);
      continue;
    }
    pthread_mutex_unlock(&c->mu);
    reap(c);
    struct timespec now, wake;
    clock_gettime(CLOCK_REALTIME, &now);
    int poll_due = c->mode == SRV_CONTROL_POLL && (now.tv_sec > next_poll.tv_sec ||
                                                   (now.tv_sec == next_poll.tv_sec && now.tv_nsec >= next_poll.tv_nsec));
    if (poll_due && !cancelled(c)) {
      rescan(c);
      deadline_in(&next_poll, (int64_t)c->poll_secs * 1000);
    }
    pthread_mutex_lock(&c->mu);
    if (poll_due || c->head || c->stop) continue;
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
                       int poll_secs, const atomic_int *cancel, srv_control **out, err *e) {
  srv_control *c = calloc(1, sizeof *c);
  if (!c) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  c->reg = reg;
  c->sched = sched;
  c->mode = mode;
  c->poll_secs = poll_secs > 0 ? poll_secs : 15;
  c->cancel = cancel;
  snprintf(c->repo_dir, sizeof c->repo_dir, "%s", repo_dir);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  pthread_cond_init(&c->idle_cv, NULL);
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
    c->closing = c->stop = 1;  // the thread answers what is queued first
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
  pthread_cond_destroy(&c->idle_cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

// --- gRPC

// The "config" parameter's text (NULL when absent); *files set when Triton's
// "file:<version>/<name>" model contents are present, *other when another
// parameter we do not take is.
static const char *config_param(size_t n, Inference__RepositoryModelLoadRequest__ParametersEntry **ps, int *files,
                                int *other) {
  const char *cfg = NULL;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(ps[i]->key, "config") == 0) cfg = ps[i]->value && ps[i]->value->string_param ? ps[i]->value->string_param : "";
    else if (strncmp(ps[i]->key, "file:", 5) == 0) *files = 1;
    else *other = 1;
  }
  return cfg;
}

// The answer of a queued RepositoryModelLoad/Unload, on the control thread.
static void answer_load(void *arg, const err *e) {
  srv_call *call = arg;
  if (e->code) {
    srv_call_fail(call, (int)e->code, e->msg);
  } else {
    Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
    srv_reply_msg(call, &r.base);
  }
}

static void answer_unload(void *arg, const err *e) {
  srv_call *call = arg;
  if (e->code) {
    srv_call_fail(call, (int)e->code, e->msg);
  } else {
    Inference__RepositoryModelUnloadResponse r = INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
    srv_reply_msg(call, &r.base);
  }
}

// Checked here, on the CQ thread (or the REST route's local call), and
// answered from the control thread once loaded: the caller's thread is free
// meanwhile.
void srv_control_load_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_control *c = ctx;
  Inference__RepositoryModelLoadRequest *q = (Inference__RepositoryModelLoadRequest *)srv_unpack_or_fail(
      call, &inference__repository_model_load_request__descriptor, req, len);
  if (!q) return;
  err e = {0};
  int files = 0, other = 0;
  const char *cfg = config_param(q->n_parameters, q->parameters, &files, &other);
  if (files && explicit_or_fail(c, &e) == 0 && check_name(q->model_name, &e) == 0)
    // Triton answers INTERNAL "failed to poll from model repository" when it
    // cannot write the files it was sent, and its clients test for exactly
    // that; inferd writes none, so every such load fails the same way.
    err_set(&e, ERR_INTERNAL,
            "failed to load '%s': failed to poll from model repository: model files sent with the load "
            "('file:' parameters) are not supported by inferd; put them in the repository",
            q->model_name);
  else if (other && explicit_or_fail(c, &e) == 0)
    err_set(&e, ERR_INVALID_ARGUMENT, "load parameters other than 'config' (model files) are not supported");
  if (e.code || check_load(c, q->model_name, cfg, &e) != 0) srv_call_fail(call, (int)e.code, e.msg);
  else enqueue(c, 0, q->model_name, cfg, answer_load, call);
  inference__repository_model_load_request__free_unpacked(q, NULL);
}

void srv_control_unload_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_control *c = ctx;
  Inference__RepositoryModelUnloadRequest *q = (Inference__RepositoryModelUnloadRequest *)srv_unpack_or_fail(
      call, &inference__repository_model_unload_request__descriptor, req, len);
  if (!q) return;
  err e = {0};
  int how = UNLOAD;
  for (size_t i = 0; i < q->n_parameters; i++) {
    const Inference__ModelRepositoryParameter *v = q->parameters[i]->value;
    if (q->parameters[i]->key && strcmp(q->parameters[i]->key, "unload_dependents") == 0 && v &&
        v->parameter_choice_case == INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM && v->bool_param)
      how = UNLOAD_DEPENDENTS;
  }
  if (explicit_or_fail(c, &e) != 0 || check_name(q->model_name, &e) != 0) srv_call_fail(call, (int)e.code, e.msg);
  else enqueue(c, how, q->model_name, NULL, answer_unload, call);
  inference__repository_model_unload_request__free_unpacked(q, NULL);
}
