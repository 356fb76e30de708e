// driver.c: asynchronous ModelInfer calls (or ModelStreamInfer streams) on
// gRPC C-core completion queues.
//
// Threading: each worker thread owns its CQ, its call contexts (or streams)
// and its in-flight count; only its window is shared (with the measuring
// thread, under the worker's mutex, which nobody else contends for). Every
// unary call is one batch (send metadata + message + close, receive
// metadata + message + status), so one completion ends a call and its
// context can be reused. Streams (stream.c) take their own completions and
// report each request's outcome back here.
//
// --mix: a cancel-kind call is cancelled by the thread that owns it, from a
// min-heap of (time, context, generation): a context's generation moves on
// each time it starts a call, so an entry whose call ended already (and whose
// context may carry another call now) is recognised and skipped.
#include "clients/load/driver.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/base/clock.h"
#include "clients/load/request.h"
#include "clients/load/rng.h"
#include "clients/load/rpc.h"
#include "clients/load/stream.h"

#define IDLE_WAIT_NS 100000000ull  // how often an idle thread looks at the stop flag
#define DRAIN_GRACE_NS 10000000000ull
#define EXPIRE_EVERY_NS IDLE_WAIT_NS  // how often streamed requests are checked against --timeout-ms
// Sends and cancels wait in the completion queue, whose waits end on gRPC's
// millisecond timer: a send goes out up to about 1 ms late (the schedule lag
// shows it). Waiting out the last millisecond in 20 us naps between
// non-blocking polls cut the lag p50 to ~20 us but cost 0.3-0.6 of a core
// more at 2-10k req/s (2-core VM, 2026-11-26): the cores a soak needs to keep
// its schedule at all.

typedef struct worker worker;

typedef struct call_ctx {
  worker *w;
  int channel;
  grpc_call *call;  // non-NULL while in flight
  grpc_byte_buffer *send, *recv;
  ld_call_end end;
  uint64_t t0;
  ld_req_kind kind;
  uint64_t gen;  // calls started on this context so far
  struct call_ctx *next_free;
} call_ctx;

typedef struct due_cancel {
  uint64_t at, gen;
  call_ctx *c;
} due_cancel;

struct worker {
  ld_driver *d;
  int idx;
  grpc_completion_queue *cq;
  pthread_t th;
  int started;
  pthread_mutex_t mu;
  ld_window win;  // guarded by mu
  uint64_t all_ok, all_errors;  // guarded by mu
  // guarded by mu: every request of the level by kind, as all_ok and all_errors
  uint64_t all_sent[LD_N_REQ_KINDS], all_by_kind[LD_N_REQ_KINDS][LD_N_KINDS];
  int said_errors;              // failed calls printed (the first 3 of the driver's life): the level's every answer (no window resets them)

  // Owned by the worker thread while a level runs, by the driver otherwise.
  call_ctx **all;  // every context made, freed at destroy
  size_t n_all, cap_all;
  call_ctx *free_list;
  size_t inflight;
  size_t slots;        // closed loop: calls kept in flight
  size_t cap;          // open loop: in-flight cap
  double mean_gap_ns;  // open loop: this thread's mean spacing
  uint64_t first_due_ns;
  uint64_t rng;
  uint64_t mix_rng;  // kinds, cancel delays and short deadlines: apart from rng, so a mix keeps the arrivals
  uint64_t sends;
  due_cancel *cancels;  // min-heap on at
  size_t n_cancels, cap_cancels;
  ld_stream **streams;  // streaming: the k-th on connection (idx + k*threads) % connections
  size_t n_streams;
};

struct ld_driver {
  ld_driver_cfg cfg;
  grpc_slice req;      // one refcounted copy of the request; each call's byte buffer refs it
  grpc_slice bad_req;  // the same for --mix's invalid kind (empty without)
  grpc_slice method, stream_method;
  grpc_channel **ch;
  worker *w;
  ld_level level;
  atomic_bool stop;
  int running;
};

// gpr's monotonic clock has its own epoch: deadlines are built relative to its now.
static gpr_timespec in_ns(uint64_t ns) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos((int64_t)ns, GPR_TIMESPAN));
}

// --- recording

// One outcome of a request of kind req; kind is its status (0: OK).
static void record(worker *w, ld_req_kind req, int kind, uint64_t lat_ns) {
  pthread_mutex_lock(&w->mu);
  w->win.by_kind[req][kind]++;
  w->all_by_kind[req][kind]++;
  if (kind == 0)
    w->all_ok++;
  else
    w->all_errors++;
  if (req == LD_REQ_VALID) {
    if (kind == 0) {
      w->win.ok++;
      ld_hist_record(w->win.lat, lat_ns);
    } else {
      w->win.errors[kind]++;
    }
  }
  pthread_mutex_unlock(&w->mu);
}

// A request of kind req became due; lag_ns: how late it goes out (open loop), or no lag (closed loop).
static void record_sent(worker *w, ld_req_kind req, bool open, uint64_t lag_ns) {
  pthread_mutex_lock(&w->mu);
  w->win.sent[req]++;
  w->all_sent[req]++;
  if (open) ld_hist_record(w->win.lag, lag_ns);
  pthread_mutex_unlock(&w->mu);
}

// The next request's kind: --mix's draw, else valid.
static ld_req_kind pick_kind(worker *w) {
  const ld_driver *d = w->d;
  return d->cfg.mix.on ? ld_mix_pick(&d->cfg.mix, ld_rng_uniform(&w->mix_rng)) : LD_REQ_VALID;
}

static bool outputs_match(const ld_driver *d, grpc_byte_buffer *bb) {
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb)) return false;
  grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  bool ok = ld_response_matches(GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all), d->cfg.expect, d->cfg.n_expect);
  grpc_slice_unref(all);
  return ok;
}

// --- due cancels (--mix's cancel kind)

static void heap_swap(due_cancel *h, size_t a, size_t b) {
  due_cancel t = h[a];
  h[a] = h[b];
  h[b] = t;
}

// -1 when out of memory (the caller cancels at once instead).
static int cancel_push(worker *w, uint64_t at, call_ctx *c) {
  if (w->n_cancels == w->cap_cancels) {
    size_t cap = w->cap_cancels ? 2 * w->cap_cancels : 256;
    due_cancel *n = realloc(w->cancels, cap * sizeof *n);
    if (!n) return -1;
    w->cancels = n;
    w->cap_cancels = cap;
  }
  due_cancel *h = w->cancels;
  size_t i = w->n_cancels++;
  h[i] = (due_cancel){at, c->gen, c};
  while (i > 0 && h[(i - 1) / 2].at > h[i].at) {
    heap_swap(h, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  return 0;
}

static void cancel_pop(worker *w) {
  due_cancel *h = w->cancels;
  h[0] = h[--w->n_cancels];
  size_t i = 0, n = w->n_cancels;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && h[l].at < h[m].at) m = l;
    if (r < n && h[r].at < h[m].at) m = r;
    if (m == i) return;
    heap_swap(h, i, m);
    i = m;
  }
}

// Cancels every call whose time has come and that is still the call its entry was made for.
static void cancels_run(worker *w, uint64_t now) {
  while (w->n_cancels && w->cancels[0].at <= now) {
    due_cancel dc = w->cancels[0];
    cancel_pop(w);
    if (dc.c->call && dc.c->gen == dc.gen) grpc_call_cancel(dc.c->call, NULL);
  }
}

// --- calls

static call_ctx *ctx_get(worker *w) {
  call_ctx *c = w->free_list;
  if (c) {
    w->free_list = c->next_free;
    return c;
  }
  if (w->n_all == w->cap_all) {
    size_t cap = w->cap_all ? 2 * w->cap_all : 64;
    call_ctx **n = realloc(w->all, cap * sizeof *n);
    if (!n) return NULL;
    w->all = n;
    w->cap_all = cap;
  }
  c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->w = w;
  w->all[w->n_all++] = c;
  return c;
}

static void ctx_put(worker *w, call_ctx *c) {
  c->next_free = w->free_list;
  w->free_list = c;
}

// Releases what one call used; the context stays for the next.
static void call_cleanup(call_ctx *c) {
  if (c->send) grpc_byte_buffer_destroy(c->send);
  if (c->recv) grpc_byte_buffer_destroy(c->recv);
  c->send = c->recv = NULL;
  ld_call_end_destroy(&c->end);
  if (c->call) grpc_call_unref(c->call);
  c->call = NULL;
}

// Starts a call of kind c->kind.
static int call_start(worker *w, call_ctx *c) {
  ld_driver *d = w->d;
  gpr_timespec deadline;
  if (c->kind == LD_REQ_EXPIRE)
    deadline = in_ns(ld_span_pick(&d->cfg.expire, ld_rng_uniform(&w->mix_rng)));
  else
    deadline =
        d->cfg.timeout_ms > 0 ? in_ns((uint64_t)d->cfg.timeout_ms * 1000000ull) : gpr_inf_future(GPR_CLOCK_REALTIME);
  c->call = grpc_channel_create_call(d->ch[c->channel], NULL, GRPC_PROPAGATE_DEFAULTS, w->cq, d->method, NULL, deadline,
                                     NULL);
  if (!c->call) {
    record(w, c->kind, LD_KIND_CLIENT, 0);
    return -1;
  }
  c->gen++;
  // refs the shared slice: no copy per call
  c->send = grpc_raw_byte_buffer_create(c->kind == LD_REQ_INVALID ? &d->bad_req : &d->req, 1);
  c->recv = NULL;
  ld_call_end_init(&c->end);
  // The ops array is read during start_batch only; what the ops point at lives in c.
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ld_call_send_ops(ops, c->send);
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &c->recv;
  ld_call_end_ops(&c->end, &ops[3], &ops[5]);
  c->t0 = clock_mono_ns();
  if (grpc_call_start_batch(c->call, ops, 6, c, NULL) != GRPC_CALL_OK) {
    call_cleanup(c);
    record(w, c->kind, LD_KIND_CLIENT, 0);
    return -1;
  }
  w->inflight++;
  if (c->kind == LD_REQ_CANCEL) {
    // 0 us: at once (a due cancel waits for the completion queue's next
    // wakeup, whose timeouts gRPC rounds up to a millisecond, by when a local
    // server has answered)
    uint64_t after = ld_span_pick(&d->cfg.cancel_after, ld_rng_uniform(&w->mix_rng));
    if (after == 0 || cancel_push(w, c->t0 + after, c) != 0) grpc_call_cancel(c->call, NULL);
  }
  return 0;
}

static void call_done(worker *w, call_ctx *c) {
  ld_driver *d = w->d;
  uint64_t lat = clock_mono_ns() - c->t0;
  int kind = 0;
  if (c->end.status != GRPC_STATUS_OK) {
    kind = ld_kind_from_status((int)c->end.status);
    // the first few of each thread, with the transport's words (a status alone does not say who answered
    // it); valid requests only: the mix's other kinds fail on purpose
    if (c->kind == LD_REQ_VALID && w->said_errors < 3) {
      w->said_errors++;
      char *msg = grpc_slice_to_c_string(c->end.details);
      fprintf(stderr, "inferd-load: thread %d: call failed: %s: %s\n", w->idx, ld_kind_name(kind), msg);
      gpr_free(msg);
    }
  } else if (!c->recv)
    kind = LD_KIND_NO_MESSAGE;
  else if (d->cfg.expect && !outputs_match(d, c->recv))
    kind = LD_KIND_VALIDATION;
  record(w, c->kind, kind, lat);
  call_cleanup(c);
  w->inflight--;
  if (d->level.mode == LD_CLOSED && !atomic_load(&d->stop)) {
    c->kind = pick_kind(w);
    record_sent(w, c->kind, false, 0);
    if (call_start(w, c) == 0) return;
  }
  ctx_put(w, c);
}

// --- streams

// Streams carry valid requests only (--mix needs unary calls).
static void stream_send(worker *w, ld_stream *s) {
  int kind = ld_stream_send(s, clock_mono_ns());
  if (kind) record(w, LD_REQ_VALID, kind, 0);
}

static void stream_outcome(void *ctx, ld_stream *s, int kind, uint64_t lat_ns) {
  worker *w = ctx;
  record(w, LD_REQ_VALID, kind, lat_ns);
  if (w->d->level.mode == LD_CLOSED && !atomic_load(&w->d->stop)) {
    record_sent(w, LD_REQ_VALID, false, 0);
    stream_send(w, s);
  }
}

static size_t gcd(size_t a, size_t b) {
  while (b) {
    size_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static void streams_destroy(worker *w) {
  for (size_t k = 0; k < w->n_streams; k++) ld_stream_destroy(w->streams[k]);
  free(w->streams);
  w->streams = NULL;
  w->n_streams = 0;
}

// One stream per connection the worker's calls would go to (its k-th call
// goes to (idx + k*T) % C, a cycle of C/gcd(T, C) connections), closed loop:
// no more than it has slots. Each holds its share of the worker's requests.
static int streams_create(worker *w) {
  ld_driver *d = w->d;
  size_t T = (size_t)d->cfg.threads, C = (size_t)d->cfg.connections, cycle = C / gcd(T, C);
  bool open = d->level.mode == LD_OPEN;
  size_t n = open ? cycle : w->slots < cycle ? w->slots : cycle;
  if (n == 0) return 0;
  w->streams = calloc(n, sizeof *w->streams);
  if (!w->streams) return -1;
  for (size_t k = 0; k < n; k++) {
    ld_stream_cfg sc = {
        .ch = d->ch[(w->idx + k * T) % C],
        .cq = w->cq,
        .method = d->stream_method,
        .request = d->req,
        .cap = open ? (w->cap + n - 1) / n : w->slots / n + (k < w->slots % n ? 1 : 0),
        .expect = d->cfg.expect,
        .n_expect = d->cfg.n_expect,
        .on_outcome = stream_outcome,
        .ctx = w,
    };
    w->streams[k] = ld_stream_create(&sc);
    if (!w->streams[k]) return -1;  // the caller destroys what was made
    w->n_streams = k + 1;
  }
  return 0;
}

// --- what the loop does, with calls or with streams

// Closed loop: fills slot j at the start of a level.
static void start_slot(worker *w, size_t j) {
  ld_driver *d = w->d;
  ld_req_kind kind = pick_kind(w);
  record_sent(w, kind, false, 0);
  if (d->cfg.streaming) {
    stream_send(w, w->streams[j % w->n_streams]);
    return;
  }
  call_ctx *c = ctx_get(w);
  if (!c) {
    record(w, kind, LD_KIND_CLIENT, 0);
    return;
  }
  c->kind = kind;
  c->channel = (int)((w->idx + j * (size_t)d->cfg.threads) % (size_t)d->cfg.connections);
  if (call_start(w, c) != 0) ctx_put(w, c);
}

// Open loop: the call due at `due`, or a drop when this thread is at its cap.
static void send_scheduled(worker *w, uint64_t due) {
  ld_driver *d = w->d;
  ld_req_kind kind = pick_kind(w);
  uint64_t now = clock_mono_ns();
  record_sent(w, kind, true, now > due ? now - due : 0);
  if (d->cfg.streaming) {
    stream_send(w, w->streams[w->sends++ % w->n_streams]);
    return;
  }
  call_ctx *c = w->inflight < w->cap ? ctx_get(w) : NULL;
  if (!c) {
    record(w, kind, LD_KIND_DROPPED, 0);
    return;
  }
  c->kind = kind;
  c->channel = (int)((w->idx + w->sends * (uint64_t)d->cfg.threads) % (uint64_t)d->cfg.connections);
  w->sends++;
  if (call_start(w, c) != 0) ctx_put(w, c);
}

static bool drained(const worker *w) {
  if (!w->d->cfg.streaming) return w->inflight == 0;
  for (size_t k = 0; k < w->n_streams; k++)
    if (!ld_stream_idle(w->streams[k])) return false;
  return true;
}

// False when the core refused one: the loop tries again on its next pass.
static bool cancel_all(worker *w) {
  bool all = true;
  for (size_t k = 0; k < w->n_streams; k++) all &= ld_stream_cancel(w->streams[k]);
  for (size_t i = 0; i < w->n_all; i++)
    if (w->all[i]->call && grpc_call_cancel(w->all[i]->call, NULL) != GRPC_CALL_OK) all = false;
  return all;
}

static uint64_t next_gap(worker *w) {
  double g = w->d->level.dist == LD_DIST_POISSON ? ld_rng_exp(&w->rng, w->mean_gap_ns) : w->mean_gap_ns;
  return (uint64_t)(g + 0.5);
}

// --- the worker thread

static void *worker_main(void *arg) {
  worker *w = arg;
  // per-thread CPU by name (tests/bench/soak: the client's share beside gRPC's own threads)
  (void)pthread_setname_np(pthread_self(), "ld-worker");
  ld_driver *d = w->d;
  bool open = d->level.mode == LD_OPEN;
  uint64_t start = clock_mono_ns();
  for (size_t j = 0; !open && j < w->slots; j++) start_slot(w, j);
  // Due times are computed from the start (constant) or accumulated gaps
  // (Poisson), never from when a call went out, so a late thread catches up
  // instead of drifting below the rate.
  uint64_t due = start + w->first_due_ns;
  uint64_t stop_seen = 0, next_expire = start + EXPIRE_EVERY_NS;
  bool cancelled = false;
  uint64_t timeout_ns = (uint64_t)d->cfg.timeout_ms * 1000000ull;
  uint64_t grace = timeout_ns ? timeout_ns + 1000000000ull : DRAIN_GRACE_NS;
  for (;;) {
    uint64_t now = clock_mono_ns();
    bool stop = atomic_load(&d->stop);
    if (open && !stop) {
      // a late thread catches up in a burst: it looks at the flag before each send
      while (due <= now && !atomic_load(&d->stop)) {
        send_scheduled(w, due);
        due += next_gap(w);
      }
    }
    cancels_run(w, now);
    if (stop) {
      if (!stop_seen) {
        stop_seen = now;
        for (size_t k = 0; k < w->n_streams; k++) ld_stream_close(w->streams[k]);
      }
      if (drained(w)) break;
      if (!cancelled && now - stop_seen > grace) cancelled = cancel_all(w);
    }
    if (timeout_ns && now >= next_expire) {
      for (size_t k = 0; k < w->n_streams; k++) ld_stream_expire(w->streams[k], now, timeout_ns);
      next_expire = now + EXPIRE_EVERY_NS;
    }
    uint64_t wait = IDLE_WAIT_NS;
    if (open && !stop && due > now && due - now < wait) wait = due - now;
    if (w->n_cancels && w->cancels[0].at - now < wait) wait = w->cancels[0].at - now;  // at > now: cancels_run ran
    grpc_event ev = grpc_completion_queue_next(w->cq, in_ns(wait), NULL);
    if (ev.type != GRPC_OP_COMPLETE) continue;
    if (d->cfg.streaming)
      ld_stream_on_event(ev.tag, ev.success != 0);
    else
      call_done(w, ev.tag);
  }
  w->n_cancels = 0;  // every call ended: what is left is stale
  return NULL;
}

// --- lifecycle

int ld_driver_create(const ld_driver_cfg *cfg, ld_driver **out, err *e) {
  *out = NULL;
  if (cfg->threads < 1 || cfg->connections < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "threads and connections must be >= 1");
  if (cfg->mix.on && cfg->streaming) return err_set(e, ERR_INVALID_ARGUMENT, "a request mix needs unary calls");
  if (cfg->mix.on && cfg->mix.pct[LD_REQ_INVALID] > 0 && !cfg->bad_request)
    return err_set(e, ERR_INVALID_ARGUMENT, "a mix with invalid requests needs the invalid request");
  ld_driver *d = calloc(1, sizeof *d);
  if (!d) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  d->cfg = *cfg;
  d->req = grpc_slice_from_copied_buffer((const char *)cfg->request, cfg->request_len);
  d->bad_req = cfg->bad_request ? grpc_slice_from_copied_buffer((const char *)cfg->bad_request, cfg->bad_request_len)
                                : grpc_empty_slice();
  d->method = grpc_slice_from_static_string(LD_SVC "ModelInfer");
  d->stream_method = grpc_slice_from_static_string(LD_SVC "ModelStreamInfer");
  d->ch = calloc((size_t)cfg->connections, sizeof *d->ch);
  d->w = calloc((size_t)cfg->threads, sizeof *d->w);
  atomic_init(&d->stop, false);
  if (!d->ch || !d->w) {
    ld_driver_destroy(d);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  // Each channel gets its own connection only when there are several: one
  // channel may then share the control channel's connection, which is harmless.
  for (int i = 0; i < cfg->connections; i++) {
    d->ch[i] = ld_channel_create(cfg->target, cfg->connections > 1);
    if (!d->ch[i]) {
      ld_driver_destroy(d);
      return err_set(e, ERR_UNAVAILABLE, "cannot create a channel to %s", cfg->target);
    }
  }
  for (int i = 0; i < cfg->threads; i++) {
    worker *w = &d->w[i];
    w->d = d;
    w->idx = i;
    pthread_mutex_init(&w->mu, NULL);
    w->cq = grpc_completion_queue_create_for_next(NULL);
    if (ld_window_init(&w->win) != 0 || !w->cq) {
      ld_driver_destroy(d);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  *out = d;
  return 0;
}

int ld_driver_start(ld_driver *d, const ld_level *lv, err *e) {
  if (d->running) return err_set(e, ERR_FAILED_PRECONDITION, "a level is already running");
  d->level = *lv;
  atomic_store(&d->stop, false);
  int T = d->cfg.threads;
  for (int i = 0; i < T; i++) {
    worker *w = &d->w[i];
    pthread_mutex_lock(&w->mu);
    ld_window_reset(&w->win);
    w->all_ok = w->all_errors = 0;
    memset(w->all_sent, 0, sizeof w->all_sent);
    memset(w->all_by_kind, 0, sizeof w->all_by_kind);
    pthread_mutex_unlock(&w->mu);
    w->sends = 0;
    w->slots = 0;
    if (lv->mode == LD_CLOSED) {
      size_t c = (size_t)lv->value;
      w->slots = c / (size_t)T + ((size_t)i < c % (size_t)T ? 1 : 0);
    } else {
      w->cap = LD_OPEN_MAX_INFLIGHT / (size_t)T;
      if (w->cap < 1) w->cap = 1;
      w->mean_gap_ns = 1e9 * (double)T / lv->value;
      w->rng = lv->seed * 0x9e3779b97f4a7c15ull + (uint64_t)i + 1;
      w->mix_rng = lv->seed * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull * ((uint64_t)i + 1);
      // Constant spacing: threads interleave (thread i offset by i/rate) so
      // the merged stream is evenly spaced too.
      w->first_due_ns = lv->dist == LD_DIST_POISSON ? (uint64_t)ld_rng_exp(&w->rng, w->mean_gap_ns)
                                                    : (uint64_t)(1e9 * (double)i / lv->value);
    }
  }
  for (int i = 0; d->cfg.streaming && i < T; i++) {
    if (streams_create(&d->w[i]) != 0) {
      for (int k = 0; k <= i; k++) streams_destroy(&d->w[k]);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for the streams of load thread %d", i);
    }
  }
  d->running = 1;
  for (int i = 0; i < T; i++) {
    worker *w = &d->w[i];
    if (lv->mode == LD_CLOSED && w->slots == 0) continue;  // nothing to drive at this level
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
      ld_driver_stop(d);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start load thread %d", i);
    }
    w->started = 1;
  }
  return 0;
}

void ld_driver_collect(ld_driver *d, ld_window *into) {
  for (int i = 0; i < d->cfg.threads; i++) {
    worker *w = &d->w[i];
    pthread_mutex_lock(&w->mu);
    ld_window_merge(into, &w->win);
    ld_window_reset(&w->win);
    pthread_mutex_unlock(&w->mu);
  }
}

void ld_driver_totals(ld_driver *d, uint64_t *ok, uint64_t *errors) {
  *ok = *errors = 0;
  for (int i = 0; i < d->cfg.threads; i++) {
    worker *w = &d->w[i];
    pthread_mutex_lock(&w->mu);
    *ok += w->all_ok;
    *errors += w->all_errors;
    pthread_mutex_unlock(&w->mu);
  }
}

void ld_driver_kind_totals(ld_driver *d, uint64_t sent[LD_N_REQ_KINDS], uint64_t out[LD_N_REQ_KINDS][LD_N_KINDS]) {
  memset(sent, 0, LD_N_REQ_KINDS * sizeof *sent);
  memset(out, 0, LD_N_REQ_KINDS * sizeof *out);
  for (int i = 0; i < d->cfg.threads; i++) {
    worker *w = &d->w[i];
    pthread_mutex_lock(&w->mu);
    for (int r = 0; r < LD_N_REQ_KINDS; r++) {
      sent[r] += w->all_sent[r];
      for (int k = 0; k < LD_N_KINDS; k++) out[r][k] += w->all_by_kind[r][k];
    }
    pthread_mutex_unlock(&w->mu);
  }
}

void ld_driver_halt(ld_driver *d) {
  if (d->running) atomic_store(&d->stop, true);
}

void ld_driver_stop(ld_driver *d) {
  if (!d->running) return;
  atomic_store(&d->stop, true);
  for (int i = 0; i < d->cfg.threads; i++) {
    if (!d->w[i].started) continue;
    pthread_join(d->w[i].th, NULL);
    d->w[i].started = 0;
  }
  for (int i = 0; i < d->cfg.threads; i++) streams_destroy(&d->w[i]);  // the threads drained them
  d->running = 0;
}

void ld_driver_destroy(ld_driver *d) {
  if (!d) return;
  ld_driver_stop(d);
  for (int i = 0; d->w && i < d->cfg.threads; i++) {
    worker *w = &d->w[i];
    if (!w->d) continue;                                    // creation stopped before this one
    for (size_t k = 0; k < w->n_all; k++) free(w->all[k]);  // all idle: the threads drained them
    free(w->all);
    free(w->cancels);
    if (w->cq) {
      grpc_completion_queue_shutdown(w->cq);
      while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
      }
      grpc_completion_queue_destroy(w->cq);
    }
    ld_window_close(&w->win);
    pthread_mutex_destroy(&w->mu);
  }
  for (int i = 0; d->ch && i < d->cfg.connections; i++)
    if (d->ch[i]) grpc_channel_destroy(d->ch[i]);
  free(d->ch);
  free(d->w);
  grpc_slice_unref(d->req);
  grpc_slice_unref(d->bad_req);
  free(d);
}
