// sched.c: the loop thread, its inbox and the per-version batchers.
#include "server/sched.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/log.h"

typedef struct vsched vsched;

// One per engine instance: the batch that instance is running. The batcher
// never gives an instance a second batch before this one is released.
typedef struct batch_slot {
  srv_sched *s;
  vsched *vs;
  int instance;
  eng_job job;
  srv_request **reqs;
  size_t n;
  struct batch_slot *next_done;  // link in the inbox's done list
} batch_slot;

struct vsched {
  srv_version *v;
  bat_batcher *bat;
  batch_slot *slots;
  int n_slots;
};

struct srv_sched {
  srv_registry *reg;
  srv_sched_ops ops;
  uv_loop_t loop;
  uv_async_t async;
  uv_timer_t timer;
  pthread_t thread;
  int started;
  vsched *vs;
  size_t n_vs;
  int64_t inflight;  // loop thread only: requests taken in and not yet finished
  int closing;       // loop thread only
  int have_loop, have_async, have_timer;  // what srv_sched_create got to
  // the inbox, shared with every other thread
  pthread_mutex_t mu;
  srv_request *in_head, *in_tail;
  batch_slot *done;
  int stop_requested;
  void (*on_close)(void *);
  void *on_close_arg;
};

static int64_t clock_now(void *ctx) {
  (void)ctx;
  return eng_now_us();
}

static int request_cancelled(void *payload) {
  const srv_request *r = payload;
  return srv_call_cancelled(r->call);
}

// --- instance thread side

static void on_job_done(eng_job *job, int rc, const err *e, const eng_tensor *outputs, size_t n_outputs) {
  batch_slot *slot = job->ctx;
  srv_sched *s = slot->s;
  s->ops.complete(s->ops.ctx, slot->vs->v, slot->reqs, slot->n, rc, e, job, outputs, n_outputs);
  pthread_mutex_lock(&s->mu);
  slot->next_done = s->done;
  s->done = slot;
  pthread_mutex_unlock(&s->mu);
  int urc = uv_async_send(&s->async);
  if (urc) srv_log(SRV_LOG_ERROR, "uv_async_send: %s", uv_strerror(urc));
}

// --- loop thread side

static void drop(srv_sched *s, srv_request *r, int code, const char *msg) {
  s->inflight--;
  s->ops.drop(s->ops.ctx, r, code, msg);
}

static void take_dropped(srv_sched *s, vsched *vs) {
  bat_item *it = bat_take_dropped(vs->bat);
  while (it) {
    bat_item *next = it->next;
    srv_request *r = it->payload;
    if (srv_call_cancelled(r->call)) drop(s, r, ERR_CANCELLED, "request cancelled while queued");
    else drop(s, r, ERR_DEADLINE_EXCEEDED, "request timed out while queued");
    it = next;
  }
}

static void run_batches(srv_sched *s, vsched *vs) {
  bat_batch b;
  while (bat_next_batch(vs->bat, &b)) {
    batch_slot *slot = &vs->slots[b.instance];
    slot->n = 0;
    for (bat_item *it = b.items; it; it = it->next) slot->reqs[slot->n++] = it->payload;
    srv_request *first = slot->reqs[0];
    // One request per batch in this batcher: the engine reads its tensors in place.
    slot->job = (eng_job){.rows = b.rows, .inputs = first->inputs, .done = on_job_done, .ctx = slot};
    err e;
    if (b.n_items != 1) {
      err_set(&e, ERR_INTERNAL, "batches of %zu requests are not supported yet", b.n_items);
    } else if (eng_model_submit(vs->v->model, b.instance, &slot->job, &e) == 0) {
      continue;
    }
    for (size_t i = 0; i < slot->n; i++) drop(s, slot->reqs[i], e.code, e.msg);
    bat_release_instance(vs->bat, b.instance);
  }
  take_dropped(s, vs);
}

static void on_timer(uv_timer_t *t);

static void arm_timer(srv_sched *s) {
  int64_t wake = INT64_MAX;
  for (size_t i = 0; i < s->n_vs; i++) {
    int64_t w = bat_next_wakeup(s->vs[i].bat);
    if (w < wake) wake = w;
  }
  if (wake == INT64_MAX) {
    uv_timer_stop(&s->timer);
    return;
  }
  int64_t delay_us = wake - eng_now_us();
  uint64_t delay_ms = delay_us <= 0 ? 0 : (uint64_t)((delay_us + 999) / 1000);
  int rc = uv_timer_start(&s->timer, on_timer, delay_ms, 0);
  if (rc) srv_log(SRV_LOG_ERROR, "uv_timer_start: %s", uv_strerror(rc));
}

static void pump(srv_sched *s) {
  for (size_t i = 0; i < s->n_vs; i++) run_batches(s, &s->vs[i]);
  arm_timer(s);
}

static void on_timer(uv_timer_t *t) { pump(t->data); }

static void on_handle_closed(uv_handle_t *h) { (void)h; }

static void on_async(uv_async_t *a) {
  srv_sched *s = a->data;
  pthread_mutex_lock(&s->mu);
  srv_request *in = s->in_head;
  s->in_head = s->in_tail = NULL;
  batch_slot *done = s->done;
  s->done = NULL;
  int stop = s->stop_requested;
  pthread_mutex_unlock(&s->mu);

  for (; done; done = done->next_done) {
    s->inflight -= (int64_t)done->n;
    bat_release_instance(done->vs->bat, done->instance);
  }
  while (in) {
    srv_request *r = in;
    in = in->next_inbox;
    s->inflight++;
    vsched *vs = r->version->sched;
    err e;
    if (!vs) {
      drop(s, r, ERR_UNAVAILABLE, "model version is not scheduled");
      continue;
    }
    r->t_enqueue_us = eng_now_us();
    r->item.payload = r;
    if (bat_enqueue(vs->bat, &r->item, &e) != 0) drop(s, r, e.code, e.msg);
  }
  pump(s);
  if (stop && s->inflight == 0 && !s->closing) {
    s->closing = 1;
    if (s->on_close) s->on_close(s->on_close_arg);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->async, on_handle_closed);
  }
}

static void *loop_main(void *arg) {
  srv_sched *s = arg;
  int rc = uv_run(&s->loop, UV_RUN_DEFAULT);
  if (rc) srv_log(SRV_LOG_WARN, "loop ended with active handles");
  return NULL;
}

// --- lifecycle

static int add_version(srv_sched *s, srv_model *m, srv_version *v, err *e) {
  vsched *vs = &s->vs[s->n_vs];
  memset(vs, 0, sizeof *vs);
  vs->v = v;
  int n_inst = eng_model_n_instances(v->model);
  bat_config c = {.max_batch_size = m->config->max_batch_size, .n_instances = n_inst,
                  .now = clock_now, .cancelled = request_cancelled};
  TRY(bat_create(&c, &vs->bat, e));
  s->n_vs++;
  vs->slots = calloc((size_t)n_inst, sizeof *vs->slots);
  if (!vs->slots) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  size_t max_reqs = m->config->max_batch_size > 0 ? (size_t)m->config->max_batch_size : 1;
  for (int i = 0; i < n_inst; i++) {
    vs->n_slots++;
    vs->slots[i] = (batch_slot){.s = s, .vs = vs, .instance = i};
    if (!(vs->slots[i].reqs = calloc(max_reqs, sizeof *vs->slots[i].reqs)))
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  v->sched = vs;
  return 0;
}

int srv_sched_create(srv_registry *reg, const srv_sched_ops *ops, srv_sched **out, err *e) {
  srv_sched *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->reg = reg;
  s->ops = *ops;
  pthread_mutex_init(&s->mu, NULL);
  size_t n = 0;
  for (size_t i = 0; i < srv_registry_n_models(reg); i++) n += srv_registry_model_at(reg, i)->n_versions;
  s->vs = calloc(n ? n : 1, sizeof *s->vs);
  int rc = s->vs ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; rc == 0 && i < srv_registry_n_models(reg); i++) {
    srv_model *m = srv_registry_model_at(reg, i);
    for (size_t j = 0; rc == 0 && j < m->n_versions; j++)
      if (m->versions[j].model) rc = add_version(s, m, &m->versions[j], e);
  }
  int urc = 0;
  if (rc == 0 && (urc = uv_loop_init(&s->loop)) != 0) rc = err_set(e, ERR_INTERNAL, "uv_loop_init: %s", uv_strerror(urc));
  s->have_loop = rc == 0;
  if (rc == 0 && (urc = uv_async_init(&s->loop, &s->async, on_async)) != 0)
    rc = err_set(e, ERR_INTERNAL, "uv_async_init: %s", uv_strerror(urc));
  s->have_async = rc == 0;
  if (rc == 0 && (urc = uv_timer_init(&s->loop, &s->timer)) != 0)
    rc = err_set(e, ERR_INTERNAL, "uv_timer_init: %s", uv_strerror(urc));
  s->have_timer = rc == 0;
  if (rc) {
    srv_sched_destroy(s);  // only partly built: handles may not exist, destroy copes
    return rc;
  }
  s->async.data = s;
  s->timer.data = s;
  *out = s;
  return 0;
}

uv_loop_t *srv_sched_loop(srv_sched *s) { return &s->loop; }

int srv_sched_start(srv_sched *s, err *e) {
  if (pthread_create(&s->thread, NULL, loop_main, s) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start the loop thread");
  s->started = 1;
  return 0;
}

void srv_sched_submit(srv_sched *s, srv_request *r) {
  r->next_inbox = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->in_tail) s->in_tail->next_inbox = r;
  else s->in_head = r;
  s->in_tail = r;
  pthread_mutex_unlock(&s->mu);
  int rc = uv_async_send(&s->async);
  if (rc) srv_log(SRV_LOG_ERROR, "uv_async_send: %s", uv_strerror(rc));
}

void srv_sched_stop(srv_sched *s, void (*on_close)(void *arg), void *arg) {
  if (!s->started) return;
  pthread_mutex_lock(&s->mu);
  s->stop_requested = 1;
  s->on_close = on_close;
  s->on_close_arg = arg;
  pthread_mutex_unlock(&s->mu);
  int rc = uv_async_send(&s->async);
  if (rc) srv_log(SRV_LOG_ERROR, "uv_async_send: %s", uv_strerror(rc));
  pthread_join(s->thread, NULL);
  s->started = 0;
}

void srv_sched_destroy(srv_sched *s) {
  if (!s) return;
  if (s->have_loop) {
    if (!s->closing) {
      // never stopped through the loop: close our handles and let their callbacks run
      if (s->have_async) uv_close((uv_handle_t *)&s->async, on_handle_closed);
      if (s->have_timer) uv_close((uv_handle_t *)&s->timer, on_handle_closed);
      uv_run(&s->loop, UV_RUN_DEFAULT);
    }
    int rc = uv_loop_close(&s->loop);
    if (rc) srv_log(SRV_LOG_WARN, "uv_loop_close: %s", uv_strerror(rc));
  }
  for (size_t i = 0; i < s->n_vs; i++) {
    for (int j = 0; j < s->vs[i].n_slots; j++) free(s->vs[i].slots[j].reqs);
    free(s->vs[i].slots);
    bat_destroy(s->vs[i].bat);
    s->vs[i].v->sched = NULL;
  }
  free(s->vs);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
