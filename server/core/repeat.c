// server/core/repeat.c: Triton's `repeat` backend, built in (repeat.h). Each
// request becomes a job on the runner's thread, which sleeps on a
// condition variable until the next job's next event: a response due (its
// DELAY passed), the request's release (its WAIT passed), or a look at
// cancelled streams (at least every CANCEL_LOOK_US while jobs are held, so a
// cancelled or drained stream lets go of its job promptly however long its
// delays). No CQ thread ever waits here.
#include "server/core/repeat.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model.h"
#include "grpc_service.pb-c.h"
#include "server/core/repeat_cfg.h"
#include "server/core/reply.h"
#include "server/core/request.h"
#include "server/core/server.h"
#include "server/obs/log.h"

#define CANCEL_LOOK_US 50000    // how often held jobs look whether their stream was cancelled
#define CONGESTED_RETRY_US 200  // how soon a response held by a full stream first tries again (then doubling)

typedef struct job {
  struct job *next;
  srv_server *s;
  srv_request *r;
  int32_t *in;
  uint32_t *delay;
  uint32_t n, sent;        // responses in all, and sent so far
  int64_t start_us;        // when the model took it (after the one before it was released)
  int64_t release_us;      // start + WAIT
  int64_t due_us;          // the next response's time (or the final flag's)
  int released, ended;     // statistics counted; the stream's message ended (nothing more goes to it)
  int empty_final;         // triton_enable_empty_final_response: the final flag as an empty response
  int want_out, want_idx;  // the outputs the request asked for
  int64_t backoff_us;      // while its stream is congested: how long until it looks again
} job;

struct srv_repeat {
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job *jobs;  // unordered; a handful at a time
  int added;  // a job was submitted since the worker last took the list
  int stop;
};

// --- answers

// One ModelStreamInferResponse of the job: a response (OUT and IDX of element
// i, those asked for) or, i < 0, the empty final one.
static uint8_t *pack(const job *j, int64_t i, size_t *len) {
  const srv_request *r = j->r;
  Inference__ModelInferResponse__InferOutputTensor ot[2], *otp[2];
  ProtobufCBinaryData raw[2];
  int64_t shape1 = 1;
  int32_t outv = 0;
  uint32_t idxv = (uint32_t)i;
  size_t n = 0;
  if (i >= 0) {
    outv = j->in[i];
    for (int k = 0; k < 2; k++) {
      if (!(k ? j->want_idx : j->want_out)) continue;
      inference__model_infer_response__infer_output_tensor__init(&ot[n]);
      ot[n].name = k ? (char *)"IDX" : (char *)"OUT";
      ot[n].datatype = k ? (char *)"UINT32" : (char *)"INT32";
      ot[n].n_shape = 1;
      ot[n].shape = &shape1;
      raw[n] = (ProtobufCBinaryData){.len = 4, .data = k ? (uint8_t *)&idxv : (uint8_t *)&outv};
      otp[n] = &ot[n];
      n++;
    }
  }
  return srv_request_pack_decoupled(r, i < 0, n, otp, raw, len);
}

// --- statistics (as Triton's backend reports them: the execution spans start to release)

static void count_release(job *j, int64_t now) {
  srv_request *r = j->r;
  srv_stats *st = &r->version->stats;
  int64_t q = j->start_us - r->t_recv_us, x = now - j->start_us, all = now - r->t_recv_us;
  atomic_fetch_add(&st->success.count, 1);
  atomic_fetch_add(&st->success.ns, (uint64_t)all * 1000);
  atomic_fetch_add(&st->queue.count, 1);
  atomic_fetch_add(&st->queue.ns, (uint64_t)q * 1000);
  atomic_fetch_add(&st->compute_input.count, 1);
  atomic_fetch_add(&st->compute_infer.count, 1);
  atomic_fetch_add(&st->compute_infer.ns, (uint64_t)x * 1000);
  atomic_fetch_add(&st->compute_output.count, 1);
  atomic_fetch_add(&st->inference_count, 1);
  atomic_fetch_add(&st->execution_count, 1);
  srv_batch_stat *b = srv_stats_batch(st, 1);
  if (b) {
    atomic_fetch_add(&b->count, 1);
    atomic_fetch_add(&b->infer_ns, (uint64_t)x * 1000);
  }
  atomic_store(&st->last_inference_ms, srv_wall_ms());
  prof_hist_record(st->h_request, all);
  prof_hist_record(st->h_queue, q);
  prof_hist_record(st->h_infer, x);
  prof_window_add(&st->win_requests, now, 1.0);
  prof_window_add(&st->win_rows, now, 1.0);
  atomic_fetch_sub(&st->pending, 1);
}

static void count_cancel(job *j) {
  srv_request *r = j->r;
  srv_stats *st = &r->version->stats;
  atomic_fetch_add(&st->fail.count, 1);
  atomic_fetch_add(&st->fail.ns, (uint64_t)(eng_now_us() - r->t_recv_us) * 1000);
  atomic_fetch_add(&st->fail_by_reason[SRV_FAIL_CANCELED], 1);
  atomic_fetch_sub(&st->pending, 1);
}

static void job_free(job *j) {
  srv_server *s = j->s;
  srv_infer_request_free(j->r);
  atomic_fetch_sub(&s->infer_inflight, 1);
  free(j->in);
  free(j->delay);
  free(j);
}

// p->mu not held. Moves j on as far as `now` allows; 1 when it is over (freed).
static int job_step(srv_repeat *p, job *j, int64_t now) {
  if (!j->ended && srv_request_cancelled(j->r)) {
    // the client went away: what was left to send is dropped; a request not yet
    // released counts as cancelled rather than as a success, and gives the
    // instance back now rather than at the end of its WAIT when it is the last
    // holder (later requests already have their times)
    if (!j->released) {
      count_cancel(j);
      j->released = 1;
      pthread_mutex_lock(&p->mu);
      if (j->r->version->rep_free_at_us == j->release_us) j->r->version->rep_free_at_us = now;
      pthread_mutex_unlock(&p->mu);
    }
    srv_stream_reply_end(j->r->stream);
    j->ended = 1;
  }
  if (!j->released && now >= j->release_us) {
    count_release(j, now);
    j->released = 1;
  }
  while (!j->ended && now >= j->due_us) {
    if (j->sent < j->n) {
      if (srv_stream_congested(j->r->stream)) {
        // the client reads slower than we answer: hold on, looking again soon while it reads and
        // ever less often while it does not (an unread stream costs a few wakes a second)
        j->backoff_us = j->backoff_us ? j->backoff_us * 2 : CONGESTED_RETRY_US;
        if (j->backoff_us > CANCEL_LOOK_US) j->backoff_us = CANCEL_LOOK_US;
        j->due_us = now + j->backoff_us;
        break;
      }
      j->backoff_us = 0;
      size_t len = 0;
      uint8_t *buf = pack(j, j->sent, &len);
      if (!buf) {
        srv_log(SRV_LOG_ERROR, "model '%s': out of memory packing a response; ending the request", j->r->model->name);
        j->sent = j->n;
        continue;
      }
      srv_stream_reply_more(j->r->stream, buf, len);
      j->sent++;
      // Triton's backend sleeps DELAY[i] before response i: measured from the one before
      if (j->sent < j->n) j->due_us = now + (int64_t)j->delay[j->sent] * 1000;
      continue;
    }
    // every response sent: the final flag, as an empty response when asked, else alone
    uint8_t *buf = NULL;
    size_t len = 0;
    if (j->empty_final && (buf = pack(j, -1, &len)) != NULL)
      srv_stream_reply(j->r->stream, buf, len);
    else
      srv_stream_reply_end(j->r->stream);
    j->ended = 1;
  }
  if (j->ended && j->released) {
    job_free(j);
    return 1;
  }
  return 0;
}

static int64_t job_next_us(const job *j) {
  int64_t t = INT64_MAX;
  if (!j->released) t = j->release_us;
  if (!j->ended && j->due_us < t) t = j->due_us;
  return t;
}

static void *worker(void *arg) {
  srv_repeat *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (p->stop) break;
    p->added = 0;  // the jobs taken below include every one submitted so far
    int64_t now = eng_now_us();
    // take the jobs that are due (or may have been cancelled) out, step them unlocked
    job *ready = NULL, **pp = &p->jobs;
    int64_t next = INT64_MAX;
    int any = p->jobs != NULL;
    while (*pp) {
      job *j = *pp;
      *pp = j->next;
      j->next = ready;
      ready = j;
    }
    pthread_mutex_unlock(&p->mu);
    job *keep = NULL;
    while (ready) {
      job *j = ready;
      ready = j->next;
      if (job_step(p, j, now)) continue;
      int64_t t = job_next_us(j);
      if (t < next) next = t;
      j->next = keep;
      keep = j;
    }
    pthread_mutex_lock(&p->mu);
    while (keep) {
      job *j = keep;
      keep = j->next;
      j->next = p->jobs;
      p->jobs = j;
    }
    if (p->stop) break;
    if (p->added) continue;  // submitted while the others were stepped: its signal came before any wait
    if (any && next > now + CANCEL_LOOK_US) next = now + CANCEL_LOOK_US;
    if (!p->jobs) {
      pthread_cond_wait(&p->cv, &p->mu);
      continue;
    }
    struct timespec ts = {.tv_sec = next / 1000000, .tv_nsec = (long)(next % 1000000) * 1000};
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

// --- the request's entry

static int bool_param(const Inference__ModelInferRequest *m, const char *key) {
  for (size_t i = 0; i < m->n_parameters; i++) {
    const Inference__InferParameter *v = m->parameters[i]->value;
    if (v && strcmp(m->parameters[i]->key, key) == 0 &&
        v->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
      return v->bool_param != 0;
  }
  return 0;
}

static void refuse(srv_server *s, srv_request *r, const char *msg) {
  atomic_fetch_sub(&r->version->stats.pending, 1);
  srv_reply_reject(s, r, ERR_INVALID_ARGUMENT, msg);
}

void srv_repeat_submit(srv_repeat *p, srv_server *s, srv_request *r) {
  if (!p) {  // main.c creates the runner before any request can come
    refuse(s, r, "the repeat backend is not running");
    return;
  }
  if (!r->stream) {  // infer.c refuses unary calls to a decoupled model before here
    refuse(s, r, "the repeat backend answers on ModelStreamInfer only");
    return;
  }
  for (size_t i = 0; i < 3; i++)
    if (!r->inputs[i].data && r->inputs[i].bytes) {
      refuse(s, r, "the repeat backend reads its inputs from the request, not from CUDA shared memory");
      return;
    }
  if (r->shm_out) {
    refuse(s, r, "the repeat backend answers in its responses, not into shared memory");
    return;
  }
  const eng_tensor *in = &r->inputs[0], *dl = &r->inputs[1], *wt = &r->inputs[2];
  if (in->ndims != dl->ndims || memcmp(in->dims, dl->dims, (size_t)in->ndims * sizeof in->dims[0]) != 0) {
    char a[128], b[128], msg[320];
    srv_repeat_shape_str(a, sizeof a, (size_t)in->ndims, in->dims);
    srv_repeat_shape_str(b, sizeof b, (size_t)dl->ndims, dl->dims);
    snprintf(msg, sizeof msg, "expected IN and DELAY shape to match, got %s and %s", a, b);
    refuse(s, r, msg);
    return;
  }
  if (wt->bytes != sizeof(uint32_t)) {
    refuse(s, r, "unexpected size for WAIT input");
    return;
  }
  uint32_t n = (uint32_t)(in->bytes / sizeof(int32_t)), wait_ms;
  memcpy(&wait_ms, wt->data, sizeof wait_ms);
  job *j = calloc(1, sizeof *j);
  if (j) {
    j->in = malloc(n ? n * sizeof(int32_t) : 1);
    j->delay = malloc(n ? n * sizeof(uint32_t) : 1);
  }
  if (!j || !j->in || !j->delay) {
    if (j) {
      free(j->in);
      free(j->delay);
    }
    free(j);
    atomic_fetch_sub(&r->version->stats.pending, 1);
    srv_reply_reject(s, r, ERR_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  if (n) {  // copies: the request's memory is not read again after its release
    memcpy(j->in, in->data, n * sizeof(int32_t));
    memcpy(j->delay, dl->data, n * sizeof(uint32_t));
  }
  j->s = s;
  j->r = r;
  j->n = n;
  j->empty_final = bool_param(r->msg, "triton_enable_empty_final_response");
  j->want_out = (int)(r->outputs_mask & 1);
  j->want_idx = (int)(r->outputs_mask >> 1 & 1);
  int64_t now = eng_now_us();
  pthread_mutex_lock(&p->mu);
  // one instance per version, BLOCKING: a request starts once the one before it was released
  srv_version *v = r->version;
  j->start_us = v->rep_free_at_us > now ? v->rep_free_at_us : now;
  j->release_us = j->start_us + (int64_t)wait_ms * 1000;
  v->rep_free_at_us = j->release_us;
  j->due_us = j->start_us + (n ? (int64_t)j->delay[0] * 1000 : 0);
  j->next = p->jobs;
  p->jobs = j;
  p->added = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

int srv_repeat_create(srv_repeat **out, err *e) {
  *out = NULL;
  srv_repeat *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&p->thread, NULL, worker, p) != 0) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start the repeat backend's thread");
  }
  p->started = 1;
  *out = p;
  return 0;
}

void srv_repeat_destroy(srv_repeat *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  if (p->started) pthread_join(p->thread, NULL);
  while (p->jobs) {  // what is left (repeat.h): ended or not, each job lets go of its stream and request
    job *j = p->jobs;
    p->jobs = j->next;
    if (!j->ended) srv_stream_reply_end(j->r->stream);
    if (!j->released) count_cancel(j);
    job_free(j);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p);
}
