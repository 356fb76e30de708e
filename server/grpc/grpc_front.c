// grpc_front.c: the gRPC C-core transport of the front end: one completion
// queue and thread per worker, pre-posted registered-method requests re-armed
// as they fire, pooled unary call contexts answered from any thread (a burst
// of answers is sent by the calls' own CQ threads, through mailboxes), a generic
// UNIMPLEMENTED answer, ping-pong and asynchronous bidi streams and the
// graceful drain.
//
// Unary call shape: RECV_CLOSE_ON_SERVER is armed alone as soon as the call
// arrives, and the answer is one three-op batch (initial metadata, message,
// status). That costs one extra completion per call compared with a single
// four-op batch, but it is the only way srv_call_cancelled can see a client
// cancel or an expired deadline while the request still waits in the batcher,
// so dead requests can be dropped before they use the GPU.
//
// Lifetime of a unary context: a reference count (atomic, because replies
// come from any thread) with one reference for the CQ thread while it runs
// the handler, one for the pending RECV_CLOSE batch and one for the handler
// until it answers, which it hands to the send batch. The last release unrefs
// the call and returns the context to its CQ thread's pool.
//
// Every batch starts under its CQ thread's gate (a read lock) and only while
// that CQ is open: the core aborts when a batch begins on a shut-down queue,
// and a late reply after the drain would otherwise race
// grpc_completion_queue_shutdown, which runs under the write lock. A read
// lock because starts need no exclusion from each other: a send batch writes
// to the socket inline (~10 us), and under a mutex the reply threads and the
// CQ thread queued behind each other's writes (tests/bench/RESULTS.md).
#include "server/grpc/grpc_front.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/grpc_offload.h"
#include "server/grpc/rapid_reset.h"

#define DEFAULT_THREADS 2
#define DEFAULT_CALLS 16
#define DEFAULT_MAX_MSG (64 << 20)
// A per-thread copy buffer larger than this is released after use, so one
// huge request does not pin memory in every thread forever.
#define SCRATCH_KEEP (8u << 20)

typedef enum tag_kind {
  TAG_UNARY_NEW,
  TAG_UNARY_CLOSE,
  TAG_UNARY_SEND,
  TAG_STREAM_NEW,
  TAG_STREAM_CLOSE,
  TAG_STREAM_RECV,
  TAG_STREAM_SEND,
  TAG_STREAM_STATUS,
  TAG_ASTREAM_NEW,
  TAG_ASTREAM_CLOSE,
  TAG_ASTREAM_RECV,
  TAG_ASTREAM_SEND,
  TAG_ASTREAM_STATUS,
  TAG_GENERIC_NEW,
  TAG_GENERIC_DONE,
  TAG_SHUTDOWN,
  TAG_MAIL,
} tag_kind;

// Completion tags point at one of these, embedded in the object they belong to.
typedef struct tag {
  tag_kind kind;
  void *obj;
} tag;

typedef struct cq_thread cq_thread;

typedef struct reg_method {
  srv_method m;
  void *handle;  // from grpc_server_register_method
} reg_method;

struct srv_call {
  srv_call *next;  // pool link
  cq_thread *t;
  const reg_method *rm;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_byte_buffer *payload;  // the request, kept (with rd and flat) until the call is freed
  grpc_byte_buffer_reader rd;
  int has_rd;
  uint8_t *flat;  // the request made contiguous when it came in several slices
  grpc_byte_buffer *send_buf;
  grpc_status_code send_code;
  grpc_slice status_details;
  int has_details;
  srv_call *mail_next;  // in its CQ thread's mailbox, waiting to be sent
  int close_cancelled;  // written by the core through RECV_CLOSE_ON_SERVER
  atomic_int cancelled;
  atomic_int refs;
  int64_t deadline_us;
  uint64_t rr_key;  // its connection's in the rapid-reset counts (0: not counted)
  int64_t rr_window;
  tag tag_new, tag_close, tag_send;
  // local calls (srv_call_create_local) only
  srv_local_done local_done;
  void *local_arg;
  const char *local_method;
};

typedef struct stream_call {
  cq_thread *t;
  const reg_method *rm;
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_byte_buffer *recv_buf;
  grpc_byte_buffer *send_buf;
  grpc_slice status_details;
  int has_details;
  int close_cancelled;
  int md_sent;
  int pending;  // batches started and not completed; all on the CQ thread
  int done;     // no more batches will be started
  tag tag_new, tag_close, tag_recv, tag_send, tag_status;
} stream_call;

// An asynchronous stream: messages are read continuously and answered from
// any thread, so its state sits behind a mutex (taken before the CQ's). It is
// freed when no batch is pending and no message awaits its answer.
typedef struct out_msg {
  struct out_msg *next;
  grpc_byte_buffer *bb;
} out_msg;

struct srv_stream {
  cq_thread *t;
  const reg_method *rm;
  grpc_call *call;
  gpr_timespec deadline;
  int64_t deadline_us;
  uint64_t rr_key;  // its connection's in the rapid-reset counts (0: not counted)
  int64_t rr_window;
  grpc_metadata_array md;
  grpc_byte_buffer *recv_buf;
  grpc_byte_buffer *send_buf;  // the answer being sent
  int close_cancelled;
  atomic_int cancelled;
  pthread_mutex_t mu;
  int pending;      // batches started and not completed
  int outstanding;  // messages handed to the handler, unanswered
  int md_sent, sending, reading, status_sent, done;
  grpc_status_code end_code;  // the status sent once everything is answered
  grpc_slice status_details;
  int has_details;
  out_msg *q_head, *q_tail;  // answers waiting for the send in flight
  tag tag_new, tag_close, tag_recv, tag_send, tag_status;
  struct srv_stream *live_prev, *live_next;  // in srv_grpc.live, while it has a call
  int live;
};

typedef struct gen_call {
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array md;
  grpc_slice msg;
  int close_cancelled;
  tag tag_new, tag_done;
} gen_call;

struct cq_thread {
  srv_grpc *g;
  int idx;
  grpc_completion_queue *cq;
  pthread_t th;
  int th_started;
  pthread_rwlock_t gate;  // read-held by every batch start on this CQ's calls, write-held to close it
  pthread_mutex_t mu;     // guards held (and closed, written under both)
  pthread_cond_t cv;      // held reached 0 after closing
  int closed;
  int held;                          // unary calls handed to handlers, unanswered
  srv_call *pool;                    // owner-only free list
  _Atomic(srv_call *) returned;      // contexts released by any thread (push-only stack)
  _Atomic(srv_call *) mail;          // answers from other threads for this thread to send (push-only stack)
  tag mail_tag;                      // wakes this thread to send them
  uint8_t *scratch;                  // contiguous copy of multi-slice requests
  size_t scratch_cap;
};

struct srv_grpc {
  grpc_server *server;
  srv_grpc_offload offload;
  reg_method *methods;
  size_t n_methods;
  cq_thread *threads;
  int n_threads;
  int calls_per_thread;
  const char *busy_method;
  int busy_calls;
  int port;
  int started, shut;
  atomic_int streams_ending;  // set first: streams end, stream requests are no longer re-armed
  atomic_int draining;        // set next, with the GOAWAY: nothing is re-armed
  pthread_mutex_t mu;
  pthread_cond_t cv;  // CLOCK_MONOTONIC, for the grace wait
  int notified;
  tag shutdown_tag;
  // Asynchronous streams with a call, so the drain can end them: a client
  // may hold a stream open forever. Lock order: a stream's mu, then live_mu
  // is never taken; live_mu, then a stream's mu, then a CQ's gate, then its mu.
  pthread_mutex_t live_mu;
  pthread_cond_t live_cv;  // CLOCK_MONOTONIC; the live list became empty
  srv_stream *live;
  // TLS: where the certificates come from, and the generation the core holds
  // (read and written only under the watch's mutex, by the fetcher).
  srv_tlsw *tls;
  unsigned long long tls_seen;
  srv_rr *rr;  // NULL: the rapid-reset guard is off
  int rr_limit;
  atomic_ullong rr_ended;  // connections it ended
};

#define LOG(...)                               \
  do {                                         \
    fprintf(stderr, "inferd grpc: " __VA_ARGS__); \
    fputc('\n', stderr);                       \
  } while (0)

static int draining(const srv_grpc *g) { return atomic_load_explicit(&g->draining, memory_order_acquire); }
static int streams_ending(const srv_grpc *g) { return atomic_load_explicit(&g->streams_ending, memory_order_acquire); }

// ---------------------------------------------------------------- batches

// Starts a batch on a call bound to t's CQ unless that CQ was shut down.
static grpc_call_error start_batch(cq_thread *t, grpc_call *call, const grpc_op *ops, size_t n,
                                   void *tg, int *closed_out) {
  pthread_rwlock_rdlock(&t->gate);
  int closed = t->closed;
  grpc_call_error rc = closed ? GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN
                              : grpc_call_start_batch(call, ops, n, tg, NULL);
  pthread_rwlock_unlock(&t->gate);
  if (rc != GRPC_CALL_OK && !closed) LOG("grpc_call_start_batch failed: error %d", (int)rc);
  if (closed_out) *closed_out = closed;
  return rc;
}

// Copies a received message into contiguous memory unless it already is one
// slice. On success *data stays valid until the reader is destroyed, and
// (own NULL) until the thread's scratch is reused; with own set a copy goes
// into memory of its own, *own, which the caller frees.
static int flatten(cq_thread *t, grpc_byte_buffer *bb, grpc_byte_buffer_reader *rd,
                   const uint8_t **data, size_t *len, uint8_t **own) {
  if (!grpc_byte_buffer_reader_init(rd, bb)) return ERR_INVALID_ARGUMENT;  // bad compression
  size_t total = grpc_byte_buffer_length(rd->buffer_out);
  *len = total;
  grpc_slice *s;
  if (total == 0 || !grpc_byte_buffer_reader_peek(rd, &s)) {
    *data = (const uint8_t *)"";
    return 0;
  }
  if (GRPC_SLICE_LENGTH(*s) == total) {
    *data = GRPC_SLICE_START_PTR(*s);
    return 0;
  }
  uint8_t *dst;
  if (own) {
    dst = *own = malloc(total);
    if (!dst) return ERR_RESOURCE_EXHAUSTED;
  } else {
    if (t->scratch_cap < total) {
      free(t->scratch);
      t->scratch = malloc(total);
      t->scratch_cap = t->scratch ? total : 0;
      if (!t->scratch) return ERR_RESOURCE_EXHAUSTED;
    }
    dst = t->scratch;
  }
  size_t off = 0;
  do {
    size_t n = GRPC_SLICE_LENGTH(*s);
    if (n > total - off) return ERR_INTERNAL;  // the core miscounted: never copy past the end
    memcpy(dst + off, GRPC_SLICE_START_PTR(*s), n);
    off += n;
  } while (grpc_byte_buffer_reader_peek(rd, &s));
  if (off != total) return ERR_INTERNAL;
  *data = dst;
  return 0;
}

static void scratch_trim(cq_thread *t) {
  if (t->scratch_cap > SCRATCH_KEEP) {
    free(t->scratch);
    t->scratch = NULL;
    t->scratch_cap = 0;
  }
}

static int64_t mono_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// gpr's monotonic clock has its own epoch, so carry the time left over to
// CLOCK_MONOTONIC rather than the absolute value.
static int64_t deadline_to_us(gpr_timespec d) {
  if (d.tv_sec == INT64_MAX) return INT64_MAX;
  gpr_timespec left =
      gpr_time_sub(gpr_convert_clock_type(d, GPR_CLOCK_MONOTONIC), gpr_now(GPR_CLOCK_MONOTONIC));
  if (left.tv_sec > INT64_MAX / 2000000) return INT64_MAX;
  return mono_now_us() + (int64_t)left.tv_sec * 1000000 + left.tv_nsec / 1000;
}

// ---------------------------------------------------------------- rapid reset

// A client cancel closer than this to the call's deadline is taken for the
// deadline's own expiry, which is not the client's doing.
#define RR_DEADLINE_SLACK_US 1000

// Counts a new call toward its connection's tally (rapid_reset.h); returns its key.
static uint64_t rr_count(srv_grpc *g, grpc_call *call, int64_t *window) {
  if (!g->rr) return 0;
  char *peer = grpc_call_get_peer(call);
  uint64_t key = peer ? srv_rr_call(g->rr, peer, mono_now_us(), window) : 0;
  gpr_free(peer);
  return key;
}

// A counted call is over. If its client cancelled it (before its answer, which
// RECV_CLOSE_ON_SERVER reports as not cancelled, and before its deadline) the
// cancel counts, and the one that takes the connection over the limit ends it.
static void rr_closed(srv_grpc *g, uint64_t key, int64_t window, int cancelled, int64_t deadline_us) {
  if (!key || !cancelled || draining(g)) return;
  if (deadline_us != INT64_MAX && mono_now_us() >= deadline_us - RR_DEADLINE_SLACK_US) return;
  srv_rr_verdict v;
  if (!srv_rr_cancelled(g->rr, key, window, &v)) return;
  err e = {0};
  int rc = srv_rr_end_connection(v.peer, g->port, &e);
  if (rc > 0) {
    atomic_fetch_add_explicit(&g->rr_ended, 1, memory_order_relaxed);
    LOG("ended the connection from %s: its client cancelled %u of the %u calls it opened within one second "
        "(HTTP/2 rapid reset; --grpc-rapid-reset-limit %d)", v.peer, v.cancels, v.calls, g->rr_limit);
  } else if (rc < 0) {
    LOG("the connection from %s is over the rapid-reset limit but could not be ended: %s", v.peer, e.msg);
  }
}

unsigned long long srv_grpc_connections_ended(const srv_grpc *g) {
  return atomic_load_explicit(&((srv_grpc *)g)->rr_ended, memory_order_relaxed);
}

// ---------------------------------------------------------------- unary contexts

static srv_call *call_alloc(cq_thread *t) {
  srv_call *c = t->pool;
  if (!c) c = atomic_exchange_explicit(&t->returned, NULL, memory_order_acquire);
  if (c) {
    t->pool = c->next;
  } else {
    c = malloc(sizeof *c);
    if (!c) return NULL;
  }
  memset(c, 0, sizeof *c);
  c->t = t;
  atomic_init(&c->cancelled, 0);
  atomic_init(&c->refs, 1);
  grpc_metadata_array_init(&c->md);
  c->tag_new = (tag){TAG_UNARY_NEW, c};
  c->tag_close = (tag){TAG_UNARY_CLOSE, c};
  c->tag_send = (tag){TAG_UNARY_SEND, c};
  return c;
}

static void call_release(srv_call *c) {
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  if (c->has_rd) grpc_byte_buffer_reader_destroy(&c->rd);
  free(c->flat);
  if (c->payload) grpc_byte_buffer_destroy(c->payload);
  if (c->send_buf) grpc_byte_buffer_destroy(c->send_buf);
  if (c->has_details) grpc_slice_unref(c->status_details);
  grpc_metadata_array_destroy(&c->md);
  if (c->call) grpc_call_unref(c->call);
  cq_thread *t = c->t;
  srv_call *head = atomic_load_explicit(&t->returned, memory_order_relaxed);
  do {
    c->next = head;
  } while (!atomic_compare_exchange_weak_explicit(&t->returned, &head, c, memory_order_release,
                                                  memory_order_relaxed));
}

static void arm_unary(cq_thread *t, const reg_method *rm) {
  srv_call *c = call_alloc(t);
  if (!c) {
    LOG("out of memory arming %s", rm->m.path);
    return;
  }
  c->rm = rm;
  grpc_call_error rc = grpc_server_request_registered_call(t->g->server, rm->handle, &c->call,
                                                           &c->deadline, &c->md, &c->payload,
                                                           t->cq, t->cq, &c->tag_new);
  if (rc != GRPC_CALL_OK) {
    if (!draining(t->g)) LOG("request_registered_call(%s) failed: error %d", rm->m.path, (int)rc);
    call_release(c);
  }
}

// The CQ thread running on this thread, if any: an answer given there is
// sent at once. (Thread-local: which thread is running is the one fact a
// context cannot hold.)
static _Thread_local cq_thread *tl_cq;

// Starts the answer's batch and hands the handler's reference to it; on the
// call's own CQ thread (directly, or from its mailbox).
static void call_send(srv_call *c) {
  cq_thread *t = c->t;
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (c->send_buf) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = c->send_buf;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = c->send_code;
  ops[n++].data.send_status_from_server.status_details = c->has_details ? &c->status_details : NULL;
  // Everything read from c after the release below is taken now: once the
  // batch starts, its completion may free c on another thread, ordered only
  // through gRPC's internals, which ThreadSanitizer cannot see.
  grpc_call *call = c->call;
  void *send_tag = &c->tag_send;
  // The release publishes the fields above to whichever thread frees c.
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&c->refs, 1, memory_order_release);

  pthread_rwlock_rdlock(&t->gate);
  int closed = t->closed;
  grpc_call_error rc = closed ? GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN
                              : grpc_call_start_batch(call, ops, n, send_tag, NULL);
  pthread_rwlock_unlock(&t->gate);
  pthread_mutex_lock(&t->mu);
  if (--t->held == 0 && t->closed) pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  if (rc != GRPC_CALL_OK) {
    // Dropped: either the drain is over (the call was cancelled) or the core
    // refused; cancel so the client is not left waiting.
    if (!closed) LOG("answering %s: grpc_call_start_batch failed: error %d", c->rm->m.path, (int)rc);
    grpc_call_cancel(c->call, NULL);
    call_release(c);
  }
}

// Sends every answer in t's mailbox, oldest first.
static void mail_drain(cq_thread *t) {
  srv_call *c = atomic_exchange_explicit(&t->mail, NULL, memory_order_acquire), *fifo = NULL;
  while (c) {
    srv_call *next = c->mail_next;
    c->mail_next = fifo;
    fifo = c;
    c = next;
  }
  while (fifo) {
    srv_call *next = fifo->mail_next;  // read first: the send may free it
    call_send(fifo);
    fifo = next;
  }
}

// A queued answer given on another thread goes to the call's CQ thread to
// send. A send started elsewhere posts its completions to that CQ, and gRPC wakes
// the thread for each one; from a reply thread answering a batch that was
// a wakeup (and on a busy core a context switch) per answer, the largest
// part of the CQ threads' CPU per request after gRPC's own work
// (tests/bench/RESULTS.md). Through the mailbox it is one wakeup per batch
// and CQ thread: the first answer of a burst wakes it with an empty batch,
// which gRPC completes at once on the call's CQ; the rest ride along.
static void mail_post(srv_call *c) {
  cq_thread *t = c->t;
  grpc_call *call = c->call;
  // Once in the mailbox, c may be sent and freed by the CQ thread at any
  // moment: this reference keeps it, and its call for the wakeup, alive.
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  srv_call *head = atomic_load_explicit(&t->mail, memory_order_relaxed);
  do {
    c->mail_next = head;
  } while (!atomic_compare_exchange_weak_explicit(&t->mail, &head, c, memory_order_release, memory_order_relaxed));
  grpc_call_error rc = GRPC_CALL_OK;
  if (!head) {  // else the wakeup of the first is on its way
    pthread_rwlock_rdlock(&t->gate);
    rc = t->closed ? GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN
                   : grpc_call_start_batch(call, NULL, 0, &t->mail_tag, NULL);
    pthread_rwlock_unlock(&t->gate);
  }
  call_release(c);
  // The CQ is closed (or refused): no thread will come, so send them here,
  // where each fails and is cancelled as a late answer is.
  if (rc != GRPC_CALL_OK) mail_drain(t);
}

// Sends the answer (bb NULL for a failure) and hands the handler's reference
// to the send batch: here, or (queued, off the call's CQ thread) there.
static void call_finish(srv_call *c, grpc_byte_buffer *bb, grpc_status_code code, const char *msg, int queued) {
  c->send_buf = bb;
  c->send_code = code;
  if (msg) {
    c->status_details = grpc_slice_from_copied_string(msg);
    c->has_details = 1;
  }
  if (queued && tl_cq != c->t) mail_post(c);
  else call_send(c);
}

srv_call *srv_call_create_local(const char *method, srv_local_done done, void *arg) {
  srv_call *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  atomic_init(&c->cancelled, 0);
  atomic_init(&c->refs, 1);
  c->deadline_us = INT64_MAX;
  c->local_done = done;
  c->local_arg = arg;
  c->local_method = method;
  return c;
}

void srv_call_cancel_local(srv_call *c) { atomic_store_explicit(&c->cancelled, 1, memory_order_relaxed); }

// Ends a local call: the answer goes to its done callback.
static void local_finish(srv_call *c, uint8_t *resp, size_t len, int code, const char *msg) {
  srv_local_done done = c->local_done;
  void *arg = c->local_arg;
  free(c);
  done(arg, resp, len, code, msg);
}

static void call_reply(srv_call *c, uint8_t *resp, size_t len, int queued) {
  if (c->local_done) {
    local_finish(c, resp, len, 0, NULL);
    return;
  }
  grpc_slice s = len ? grpc_slice_new(resp, len, free) : grpc_empty_slice();
  if (!len) free(resp);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);  // the buffer holds its own reference
  call_finish(c, bb, GRPC_STATUS_OK, NULL, queued);
}

void srv_call_reply(srv_call *c, uint8_t *resp, size_t len) { call_reply(c, resp, len, 0); }

void srv_call_reply_queued(srv_call *c, uint8_t *resp, size_t len) { call_reply(c, resp, len, 1); }

void srv_call_fail(srv_call *c, int code, const char *msg) {
  if (c->local_done) {
    local_finish(c, NULL, 0, code ? code : ERR_INTERNAL, msg ? msg : "");
    return;
  }
  if (code <= 0 || code > GRPC_STATUS_UNAUTHENTICATED) code = GRPC_STATUS_INTERNAL;
  call_finish(c, NULL, (grpc_status_code)code, msg ? msg : "", 0);
}

int srv_call_message_kept(const srv_call *c) { return !c->local_done; }

int srv_call_cancelled(const srv_call *c) {
  return atomic_load_explicit(&((srv_call *)c)->cancelled, memory_order_relaxed);
}

int64_t srv_call_deadline_us(const srv_call *c) { return c->deadline_us; }

const char *srv_call_method(const srv_call *c) { return c->local_done ? c->local_method : c->rm->m.path; }

static void on_unary_new(cq_thread *t, srv_call *c, int ok) {
  srv_grpc *g = t->g;
  if (!ok) {  // the server is shutting down: the request was never matched
    call_release(c);
    return;
  }
  if (!draining(g)) arm_unary(t, c->rm);
  c->deadline_us = deadline_to_us(c->deadline);
  c->rr_key = rr_count(g, c->call, &c->rr_window);
  atomic_store_explicit(&c->refs, 3, memory_order_relaxed);  // this thread, close batch, handler

  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &c->close_cancelled;
  pthread_rwlock_rdlock(&t->gate);
  int closed = t->closed;
  grpc_call_error rc = closed ? GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN
                              : grpc_call_start_batch(c->call, &op, 1, &c->tag_close, NULL);
  if (rc == GRPC_CALL_OK) {  // counted before the gate opens: a close then waits for this call's answer
    pthread_mutex_lock(&t->mu);
    t->held++;
    pthread_mutex_unlock(&t->mu);
  }
  pthread_rwlock_unlock(&t->gate);
  if (rc != GRPC_CALL_OK) {
    if (!closed) LOG("%s: arming RECV_CLOSE_ON_SERVER failed: error %d", c->rm->m.path, (int)rc);
    grpc_call_cancel(c->call, NULL);
    atomic_store_explicit(&c->refs, 1, memory_order_relaxed);
    call_release(c);
    return;
  }

  if (!c->payload) {
    srv_call_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "request message missing");
  } else {
    // The message, its reader and any contiguous copy stay with the call
    // until it is freed (call_release), so a handler that answers later may
    // keep pointing into them (ModelInfer's tensors do) instead of copying.
    const uint8_t *data = NULL;
    size_t len = 0;
    int frc = flatten(t, c->payload, &c->rd, &data, &len, &c->flat);
    if (frc == ERR_INVALID_ARGUMENT) {
      srv_call_fail(c, frc, "request message cannot be decompressed");
    } else {
      c->has_rd = 1;
      if (frc) srv_call_fail(c, frc, "request message cannot be copied");
      else c->rm->m.unary(c->rm->m.ctx, c, data, len);
    }
  }
  // c stays valid until this thread's reference goes.
  call_release(c);
}

static void on_unary_close(srv_call *c, int ok) {
  if (!ok || c->close_cancelled) atomic_store_explicit(&c->cancelled, 1, memory_order_relaxed);
  rr_closed(c->t->g, c->rr_key, c->rr_window, !ok || c->close_cancelled, c->deadline_us);
  call_release(c);
}

// ---------------------------------------------------------------- streams

static void stream_free(stream_call *s) {
  if (s->recv_buf) grpc_byte_buffer_destroy(s->recv_buf);
  if (s->send_buf) grpc_byte_buffer_destroy(s->send_buf);
  if (s->has_details) grpc_slice_unref(s->status_details);
  grpc_metadata_array_destroy(&s->md);
  if (s->call) grpc_call_unref(s->call);
  free(s);
}

static void stream_maybe_free(stream_call *s) {
  if (s->pending == 0) stream_free(s);
}

static void stream_start(stream_call *s, const grpc_op *ops, size_t n, tag *tg) {
  if (s->done) return;
  if (start_batch(s->t, s->call, ops, n, tg, NULL) == GRPC_CALL_OK) {
    s->pending++;
  } else {
    s->done = 1;
    grpc_call_cancel(s->call, NULL);
  }
}

static void arm_stream(cq_thread *t, const reg_method *rm) {
  stream_call *s = calloc(1, sizeof *s);
  if (!s) {
    LOG("out of memory arming %s", rm->m.path);
    return;
  }
  s->t = t;
  s->rm = rm;
  grpc_metadata_array_init(&s->md);
  s->tag_new = (tag){TAG_STREAM_NEW, s};
  s->tag_close = (tag){TAG_STREAM_CLOSE, s};
  s->tag_recv = (tag){TAG_STREAM_RECV, s};
  s->tag_send = (tag){TAG_STREAM_SEND, s};
  s->tag_status = (tag){TAG_STREAM_STATUS, s};
  grpc_call_error rc = grpc_server_request_registered_call(
      t->g->server, rm->handle, &s->call, &s->deadline, &s->md, NULL, t->cq, t->cq, &s->tag_new);
  if (rc != GRPC_CALL_OK) {
    if (!draining(t->g)) LOG("request_registered_call(%s) failed: error %d", rm->m.path, (int)rc);
    stream_free(s);
  }
}

static void stream_recv(stream_call *s) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv_buf;
  stream_start(s, &op, 1, &s->tag_recv);
}

static void stream_status(stream_call *s, grpc_status_code code, const char *msg) {
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  if (!s->md_sent) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  s->md_sent = 1;
  if (msg) {
    s->status_details = grpc_slice_from_copied_string(msg);
    s->has_details = 1;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = code;
  ops[n++].data.send_status_from_server.status_details = msg ? &s->status_details : NULL;
  stream_start(s, ops, n, &s->tag_status);
  s->done = 1;  // nothing follows a status
}

static void on_stream_new(cq_thread *t, stream_call *s, int ok) {
  if (!ok) {
    stream_free(s);
    return;
  }
  if (!draining(t->g)) arm_stream(t, s->rm);
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &s->close_cancelled;
  stream_start(s, &op, 1, &s->tag_close);
  stream_recv(s);
  stream_maybe_free(s);
}

static void on_stream_recv(cq_thread *t, stream_call *s, int ok) {
  s->pending--;
  if (!ok || s->done) {
    s->done = 1;
    stream_maybe_free(s);
    return;
  }
  if (!s->recv_buf) {  // the client half-closed
    stream_status(s, GRPC_STATUS_OK, NULL);
    stream_maybe_free(s);
    return;
  }
  grpc_byte_buffer_reader rd;
  const uint8_t *data = NULL;
  size_t len = 0;
  uint8_t *resp = NULL;
  size_t resp_len = 0;
  err e = {0};
  int rc = flatten(t, s->recv_buf, &rd, &data, &len, NULL);
  if (rc == ERR_INVALID_ARGUMENT) {
    err_set(&e, ERR_INVALID_ARGUMENT, "request message cannot be decompressed");
  } else {
    if (rc) err_set(&e, rc, "request message cannot be copied");
    else rc = s->rm->m.stream(s->rm->m.ctx, data, len, &resp, &resp_len, &e);
    grpc_byte_buffer_reader_destroy(&rd);
  }
  scratch_trim(t);
  grpc_byte_buffer_destroy(s->recv_buf);
  s->recv_buf = NULL;
  if (rc != 0) {
    free(resp);
    if (rc < 0 || rc > GRPC_STATUS_UNAUTHENTICATED) rc = GRPC_STATUS_INTERNAL;
    stream_status(s, (grpc_status_code)rc, e.msg);
    stream_maybe_free(s);
    return;
  }
  grpc_slice sl = resp_len ? grpc_slice_new(resp, resp_len, free) : grpc_empty_slice();
  if (!resp_len) free(resp);
  s->send_buf = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  if (!s->md_sent) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  s->md_sent = 1;
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n++].data.send_message.send_message = s->send_buf;
  stream_start(s, ops, n, &s->tag_send);
  stream_maybe_free(s);
}

static void on_stream_send(stream_call *s, int ok) {
  s->pending--;
  grpc_byte_buffer_destroy(s->send_buf);
  s->send_buf = NULL;
  if (!ok) s->done = 1;
  else stream_recv(s);  // one message in flight each way at a time: ping-pong
  stream_maybe_free(s);
}

// ---------------------------------------------------------------- asynchronous streams

static void astream_drop_queue(srv_stream *s) {
  while (s->q_head) {
    out_msg *m = s->q_head;
    s->q_head = m->next;
    grpc_byte_buffer_destroy(m->bb);
    free(m);
  }
  s->q_tail = NULL;
}

static void astream_free(srv_stream *s) {
  if (s->live) {
    srv_grpc *g = s->t->g;
    pthread_mutex_lock(&g->live_mu);
    if (s->live_prev) s->live_prev->live_next = s->live_next;
    else g->live = s->live_next;
    if (s->live_next) s->live_next->live_prev = s->live_prev;
    if (!g->live) pthread_cond_broadcast(&g->live_cv);  // srv_grpc_shutdown waits for this before its GOAWAY
    pthread_mutex_unlock(&g->live_mu);
  }
  astream_drop_queue(s);
  if (s->recv_buf) grpc_byte_buffer_destroy(s->recv_buf);
  if (s->send_buf) grpc_byte_buffer_destroy(s->send_buf);
  if (s->has_details) grpc_slice_unref(s->status_details);
  grpc_metadata_array_destroy(&s->md);
  if (s->call) grpc_call_unref(s->call);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

// Unlocks s, freeing it when nothing can reach it any more.
static void astream_unlock(srv_stream *s) {
  int gone = s->pending == 0 && s->outstanding == 0;
  pthread_mutex_unlock(&s->mu);
  if (gone) astream_free(s);
}

// s->mu held. A refused batch ends the stream: cancel it, drop what waits.
static int astream_start(srv_stream *s, const grpc_op *ops, size_t n, tag *tg) {
  if (s->done) return -1;
  if (start_batch(s->t, s->call, ops, n, tg, NULL) == GRPC_CALL_OK) {
    s->pending++;
    return 0;
  }
  s->done = 1;
  s->reading = 0;
  grpc_call_cancel(s->call, NULL);
  astream_drop_queue(s);
  return -1;
}

// s->mu held: posts the next read.
static void astream_recv(srv_stream *s) {
  if (!s->reading || s->done) return;
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv_buf;
  if (astream_start(s, &op, 1, &s->tag_recv) != 0) s->reading = 0;
}

// s->mu held: sends the oldest waiting answer unless a send is in flight.
static void astream_pump(srv_stream *s) {
  if (s->sending || !s->q_head || s->done) return;
  out_msg *m = s->q_head;
  s->q_head = m->next;
  if (!s->q_head) s->q_tail = NULL;
  s->send_buf = m->bb;
  free(m);
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  if (!s->md_sent) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n++].data.send_message.send_message = s->send_buf;
  if (astream_start(s, ops, n, &s->tag_send) == 0) {
    s->md_sent = 1;
    s->sending = 1;
  } else {
    grpc_byte_buffer_destroy(s->send_buf);
    s->send_buf = NULL;
  }
}

// s->mu held: the status, once reading is over and every answer has gone.
static void astream_try_finish(srv_stream *s) {
  if (s->reading || s->outstanding || s->sending || s->q_head || s->status_sent || s->done) return;
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  if (!s->md_sent) ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = s->end_code;
  ops[n++].data.send_status_from_server.status_details = s->has_details ? &s->status_details : NULL;
  s->md_sent = 1;
  s->status_sent = 1;
  astream_start(s, ops, n, &s->tag_status);
}

// s->mu held: the drain stops reading; the stream ends once what it took is
// answered, with UNAVAILABLE unless the client had half-closed already.
static void astream_end_for_drain(srv_stream *s) {
  if (s->reading && !s->has_details) {
    s->end_code = GRPC_STATUS_UNAVAILABLE;
    s->status_details = grpc_slice_from_copied_string("the server is shutting down");
    s->has_details = 1;
  }
  s->reading = 0;
  astream_try_finish(s);
}

static void arm_astream(cq_thread *t, const reg_method *rm) {
  srv_stream *s = calloc(1, sizeof *s);
  if (!s) {
    LOG("out of memory arming %s", rm->m.path);
    return;
  }
  s->t = t;
  s->rm = rm;
  atomic_init(&s->cancelled, 0);
  pthread_mutex_init(&s->mu, NULL);
  grpc_metadata_array_init(&s->md);
  s->end_code = GRPC_STATUS_OK;
  s->tag_new = (tag){TAG_ASTREAM_NEW, s};
  s->tag_close = (tag){TAG_ASTREAM_CLOSE, s};
  s->tag_recv = (tag){TAG_ASTREAM_RECV, s};
  s->tag_send = (tag){TAG_ASTREAM_SEND, s};
  s->tag_status = (tag){TAG_ASTREAM_STATUS, s};
  grpc_call_error rc = grpc_server_request_registered_call(
      t->g->server, rm->handle, &s->call, &s->deadline, &s->md, NULL, t->cq, t->cq, &s->tag_new);
  if (rc != GRPC_CALL_OK) {
    if (!draining(t->g)) LOG("request_registered_call(%s) failed: error %d", rm->m.path, (int)rc);
    astream_free(s);
  }
}

static void on_astream_new(cq_thread *t, srv_stream *s, int ok) {
  if (!ok) {
    astream_free(s);
    return;
  }
  srv_grpc *g = t->g;
  if (!streams_ending(g)) arm_astream(t, s->rm);
  s->deadline_us = deadline_to_us(s->deadline);
  s->rr_key = rr_count(g, s->call, &s->rr_window);
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &s->close_cancelled;
  pthread_mutex_lock(&s->mu);
  s->reading = 1;
  if (astream_start(s, &op, 1, &s->tag_close) == 0) astream_recv(s);
  int alive = s->pending > 0;
  pthread_mutex_unlock(&s->mu);
  if (!alive) {
    astream_free(s);
    return;
  }
  // Only this thread completes s's batches and no message is out yet, so s
  // stays valid here without its lock.
  pthread_mutex_lock(&g->live_mu);
  s->live = 1;
  s->live_next = g->live;
  if (g->live) g->live->live_prev = s;
  g->live = s;
  pthread_mutex_unlock(&g->live_mu);
  if (streams_ending(g)) {  // the drain may have walked the list before s joined it
    pthread_mutex_lock(&s->mu);
    astream_end_for_drain(s);
    pthread_mutex_unlock(&s->mu);
  }
}

static void on_astream_recv(cq_thread *t, srv_stream *s, int ok) {
  pthread_mutex_lock(&s->mu);
  s->pending--;
  // half-closed (no message), the call is over, or the drain stopped reading
  // (a message that came anyway is not taken: the status will say why)
  if (!ok || s->done || !s->recv_buf || !s->reading) {
    s->reading = 0;
    astream_try_finish(s);
    astream_unlock(s);
    return;
  }
  grpc_byte_buffer *buf = s->recv_buf;
  s->recv_buf = NULL;
  astream_recv(s);  // the next read overlaps this message's work
  s->outstanding++;
  s->pending++;  // this thread's hold while the handler runs, whatever it answers
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&t->mu);
  t->held++;
  pthread_mutex_unlock(&t->mu);

  grpc_byte_buffer_reader rd;
  const uint8_t *data = NULL;
  size_t len = 0;
  int rc = flatten(t, buf, &rd, &data, &len, NULL);
  if (rc != ERR_INVALID_ARGUMENT) {  // the reader exists unless decompression failed
    if (rc == 0) s->rm->m.astream(s->rm->m.ctx, s, data, len);
    grpc_byte_buffer_reader_destroy(&rd);
  }
  scratch_trim(t);
  grpc_byte_buffer_destroy(buf);
  pthread_mutex_lock(&s->mu);
  s->pending--;
  if (rc != 0) {
    // Not a message the handler can read: answered here by ending the stream
    // with that status once what was accepted before has been answered.
    s->end_code = rc == ERR_INVALID_ARGUMENT ? GRPC_STATUS_INVALID_ARGUMENT : GRPC_STATUS_RESOURCE_EXHAUSTED;
    s->status_details = grpc_slice_from_copied_string(rc == ERR_INVALID_ARGUMENT
                                                          ? "request message cannot be decompressed"
                                                          : "request message cannot be copied");
    s->has_details = 1;
    s->reading = 0;
    s->outstanding--;
    pthread_mutex_lock(&t->mu);
    if (--t->held == 0 && t->closed) pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    astream_try_finish(s);
  }
  astream_unlock(s);
}

void srv_stream_reply(srv_stream *s, uint8_t *resp, size_t len) {
  grpc_slice sl = len ? grpc_slice_new(resp, len, free) : grpc_empty_slice();
  if (!len) free(resp);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  out_msg *m = malloc(sizeof *m);
  cq_thread *t = s->t;
  pthread_mutex_lock(&s->mu);
  s->outstanding--;
  if (!m || s->done || s->status_sent) {
    if (!m && !s->done) {
      LOG("%s: out of memory queueing an answer; cancelling the stream", s->rm->m.path);
      grpc_call_cancel(s->call, NULL);
    }
    grpc_byte_buffer_destroy(bb);
    free(m);
  } else {
    m->bb = bb;
    m->next = NULL;
    if (s->q_tail) s->q_tail->next = m;
    else s->q_head = m;
    s->q_tail = m;
    astream_pump(s);
  }
  astream_try_finish(s);
  // t outlives this call until held drops below (srv_grpc_destroy waits for
  // it), so s goes first and the count last.
  astream_unlock(s);
  pthread_mutex_lock(&t->mu);
  if (--t->held == 0 && t->closed) pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

int srv_stream_cancelled(const srv_stream *s) {
  return atomic_load_explicit(&((srv_stream *)s)->cancelled, memory_order_relaxed);
}

int64_t srv_stream_deadline_us(const srv_stream *s) { return s->deadline_us; }

static void on_astream_done(srv_stream *s, tag_kind kind, int ok) {
  pthread_mutex_lock(&s->mu);
  s->pending--;
  switch (kind) {
    case TAG_ASTREAM_CLOSE:
      // the call is over: cancelled, or after our status
      if (!ok || s->close_cancelled) atomic_store_explicit(&s->cancelled, 1, memory_order_relaxed);
      rr_closed(s->t->g, s->rr_key, s->rr_window, !ok || s->close_cancelled, s->deadline_us);
      s->done = 1;
      s->reading = 0;
      astream_drop_queue(s);
      break;
    case TAG_ASTREAM_SEND:
      grpc_byte_buffer_destroy(s->send_buf);
      s->send_buf = NULL;
      s->sending = 0;
      if (!ok) {
        s->done = 1;
        astream_drop_queue(s);
      }
      astream_pump(s);
      astream_try_finish(s);
      break;
    default:  // TAG_ASTREAM_STATUS
      s->done = 1;
      break;
  }
  astream_unlock(s);
}

// The drain: every live stream stops reading and, once its accepted
// messages are answered, ends with UNAVAILABLE (or OK when the client had
// already half-closed); its pending read fails when the call ends.
static void end_live_streams(srv_grpc *g) {
  pthread_mutex_lock(&g->live_mu);
  for (srv_stream *s = g->live; s; s = s->live_next) {
    pthread_mutex_lock(&s->mu);
    if (s->pending || s->outstanding) astream_end_for_drain(s);  // otherwise it is being freed
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_unlock(&g->live_mu);
}

// ---------------------------------------------------------------- unknown methods

static void arm_generic(cq_thread *t) {
  gen_call *c = calloc(1, sizeof *c);
  if (!c) {
    LOG("out of memory arming the generic request");
    return;
  }
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->md);
  c->tag_new = (tag){TAG_GENERIC_NEW, c};
  c->tag_done = (tag){TAG_GENERIC_DONE, c};
  grpc_call_error rc =
      grpc_server_request_call(t->g->server, &c->call, &c->details, &c->md, t->cq, t->cq, &c->tag_new);
  if (rc != GRPC_CALL_OK) {
    if (!draining(t->g)) LOG("grpc_server_request_call failed: error %d", (int)rc);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    free(c);
  }
}

static void gen_free(gen_call *c) {
  grpc_slice_unref(c->msg);  // the empty slice when never set
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->md);
  if (c->call) grpc_call_unref(c->call);
  free(c);
}

static void on_generic_new(cq_thread *t, gen_call *c, int ok) {
  if (!ok) {
    gen_free(c);
    return;
  }
  if (!draining(t->g)) arm_generic(t);
  char buf[512];
  snprintf(buf, sizeof buf, "method '%.*s' is not implemented", (int)GRPC_SLICE_LENGTH(c->details.method),
           (const char *)GRPC_SLICE_START_PTR(c->details.method));
  c->msg = grpc_slice_from_copied_string(buf);
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[1].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
  ops[1].data.send_status_from_server.status_details = &c->msg;
  ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[2].data.recv_close_on_server.cancelled = &c->close_cancelled;
  if (start_batch(t, c->call, ops, 3, &c->tag_done, NULL) != GRPC_CALL_OK) {
    grpc_call_cancel(c->call, NULL);
    gen_free(c);
  }
}

// ---------------------------------------------------------------- CQ threads

static void dispatch(cq_thread *t, tag *tg, int ok) {
  switch (tg->kind) {
    case TAG_UNARY_NEW: on_unary_new(t, tg->obj, ok); break;
    case TAG_UNARY_CLOSE: on_unary_close(tg->obj, ok); break;
    case TAG_UNARY_SEND: call_release(tg->obj); break;
    case TAG_STREAM_NEW: on_stream_new(t, tg->obj, ok); break;
    case TAG_STREAM_CLOSE: {
      stream_call *s = tg->obj;
      s->pending--;
      if (!ok || s->close_cancelled) s->done = 1;
      stream_maybe_free(s);
      break;
    }
    case TAG_STREAM_RECV: on_stream_recv(t, tg->obj, ok); break;
    case TAG_STREAM_SEND: on_stream_send(tg->obj, ok); break;
    case TAG_STREAM_STATUS: {
      stream_call *s = tg->obj;
      s->pending--;
      s->done = 1;
      stream_maybe_free(s);
      break;
    }
    case TAG_ASTREAM_NEW: on_astream_new(t, tg->obj, ok); break;
    case TAG_ASTREAM_RECV: on_astream_recv(t, tg->obj, ok); break;
    case TAG_ASTREAM_CLOSE:
    case TAG_ASTREAM_SEND:
    case TAG_ASTREAM_STATUS: on_astream_done(tg->obj, tg->kind, ok); break;
    case TAG_GENERIC_NEW: on_generic_new(t, tg->obj, ok); break;
    case TAG_GENERIC_DONE: gen_free(tg->obj); break;
    case TAG_MAIL: mail_drain(t); break;
    case TAG_SHUTDOWN: {
      srv_grpc *g = tg->obj;
      pthread_mutex_lock(&g->mu);
      g->notified = 1;
      pthread_cond_broadcast(&g->cv);
      pthread_mutex_unlock(&g->mu);
      break;
    }
  }
}

static void *cq_main(void *arg) {
  cq_thread *t = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-cq");  // per-thread CPU by name (tests/bench/serve_gpu)
  tl_cq = t;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(t->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type == GRPC_OP_COMPLETE) dispatch(t, ev.tag, ev.success);
  }
  return NULL;
}

// ---------------------------------------------------------------- lifecycle

static void teardown(srv_grpc *g);

// The certificate fetcher. The core calls it once while adding the port
// (where it must answer NEW) and again before each new handshake; it owns the
// config returned. Connections already open keep the certificates they
// were made with, so a reload drops none.
typedef struct fetch_ctx {
  srv_tls_client client;
  grpc_ssl_server_certificate_config *cfg;
} fetch_ctx;

static void make_config(void *ctx, const srv_tls *t) {
  fetch_ctx *f = ctx;
  grpc_ssl_pem_key_cert_pair pair = {.private_key = srv_tls_key_pem(t), .cert_chain = srv_tls_cert_pem(t)};
  // The fetcher path asserts a client CA is given (ssl_security_connector.cc,
  // "config->pem_root_certs != nullptr"), even when no client certificate is
  // asked for. Then no certificate is ever verified against it and the list
  // is not sent, so the server's own chain stands in.
  const char *root = f->client != SRV_TLS_CLIENT_NONE ? srv_tls_root_pem(t) : NULL;
  if (!root) root = srv_tls_cert_pem(t);
  f->cfg = grpc_ssl_server_certificate_config_create(root, &pair, 1);  // copies the texts
}

static grpc_ssl_certificate_config_reload_status fetch_certs(void *user_data,
                                                            grpc_ssl_server_certificate_config **config) {
  srv_grpc *g = user_data;
  fetch_ctx f = {.client = srv_tlsw_client(g->tls), .cfg = NULL};
  if (!srv_tlsw_if_newer(g->tls, &g->tls_seen, make_config, &f)) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  if (!f.cfg) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;  // out of memory: the core keeps what it has
  *config = f.cfg;
  return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

static grpc_server_credentials *tls_credentials(srv_grpc *g) {
  static const grpc_ssl_client_certificate_request_type req[] = {
      [SRV_TLS_CLIENT_NONE] = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
      [SRV_TLS_CLIENT_OPTIONAL] = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY,
      [SRV_TLS_CLIENT_REQUIRED] = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
  };
  grpc_ssl_server_credentials_options *opts =
      grpc_ssl_server_credentials_create_options_using_config_fetcher(req[srv_tlsw_client(g->tls)], fetch_certs, g);
  return opts ? grpc_ssl_server_credentials_create_with_options(opts) : NULL;  // takes opts
}

srv_grpc_offload srv_grpc_transport_offload(const srv_grpc *g) { return g->offload; }

int srv_grpc_create(const srv_grpc_opts *o, const srv_method *methods, size_t n_methods,
                    srv_grpc **out, err *e) {
  *out = NULL;
  if (!o || !o->addr) return err_set(e, ERR_INVALID_ARGUMENT, "gRPC front end: no address given");
  for (size_t i = 0; i < n_methods; i++) {
    const srv_method *m = &methods[i];
    if (!m->path || m->path[0] != '/' || (m->unary != NULL) + (m->stream != NULL) + (m->astream != NULL) != 1)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "gRPC method %zu ('%s'): needs a '/pkg.Service/Method' path and exactly one of "
                     "unary/stream/astream", i, m->path ? m->path : "(null)");
  }
  srv_grpc *g = calloc(1, sizeof *g);
  if (!g) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: out of memory");
  g->n_threads = o->n_threads > 0 ? o->n_threads : DEFAULT_THREADS;
  g->calls_per_thread = o->calls_per_thread > 0 ? o->calls_per_thread : DEFAULT_CALLS;
  g->busy_method = o->busy_method;  // a string literal of the caller's, or NULL
  g->busy_calls = o->busy_calls;
  atomic_init(&g->rr_ended, 0);
  g->rr_limit = o->rapid_reset_limit ? o->rapid_reset_limit : SRV_RR_DEFAULT_LIMIT;
  if (g->rr_limit > 0 && srv_rr_create(g->rr_limit, &g->rr, e) != 0) {
    free(g);
    return e ? e->code : ERR_INTERNAL;
  }
  atomic_init(&g->streams_ending, 0);
  atomic_init(&g->draining, 0);
  g->shutdown_tag = (tag){TAG_SHUTDOWN, g};
  pthread_mutex_init(&g->mu, NULL);
  pthread_mutex_init(&g->live_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cv, &ca);
  pthread_cond_init(&g->live_cv, &ca);
  pthread_condattr_destroy(&ca);
  grpc_init();
  g->offload = o->transport_offload  ? SRV_GRPC_OFFLOAD_ON
                : grpc_offload_decline() ? SRV_GRPC_OFFLOAD_OFF
                                         : SRV_GRPC_OFFLOAD_UNKNOWN;

  g->methods = calloc(n_methods ? n_methods : 1, sizeof *g->methods);
  g->threads = calloc((size_t)g->n_threads, sizeof *g->threads);
  if (!g->methods || !g->threads) {
    err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: out of memory");
    goto fail;
  }
  g->n_methods = n_methods;
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    t->g = g;
    t->idx = i;
    // writer first: a close is not held off by a steady stream of answers
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&t->gate, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    atomic_init(&t->returned, NULL);
    atomic_init(&t->mail, NULL);
    t->mail_tag = (tag){TAG_MAIL, t};
  }

  int max_recv = o->max_recv_bytes ? o->max_recv_bytes : DEFAULT_MAX_MSG;
  int max_send = o->max_send_bytes ? o->max_send_bytes : DEFAULT_MAX_MSG;
  grpc_arg args[4];
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[0].value.integer = max_recv;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
  args[1].value.integer = max_send;
  // Without this a second server on a busy port silently shares it.
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = GRPC_ARG_ALLOW_REUSEPORT;
  args[2].value.integer = 0;
  // One connection may not hold more calls than this (HTTP/2 SETTINGS): a client cannot pin the server's
  // memory with a single connection's streams.
  args[3].type = GRPC_ARG_INTEGER;
  args[3].key = GRPC_ARG_MAX_CONCURRENT_STREAMS;
  args[3].value.integer = o->max_streams > 0 ? o->max_streams : SRV_GRPC_DEFAULT_MAX_STREAMS;
  grpc_channel_args ch_args = {4, args};
  g->server = grpc_server_create(&ch_args, NULL);
  if (!g->server) {
    err_set(e, ERR_INTERNAL, "gRPC front end: grpc_server_create failed");
    goto fail;
  }
  for (int i = 0; i < g->n_threads; i++) {
    g->threads[i].cq = grpc_completion_queue_create_for_next(NULL);
    if (!g->threads[i].cq) {
      err_set(e, ERR_INTERNAL, "gRPC front end: cannot create completion queue %d", i);
      goto fail;
    }
    grpc_server_register_completion_queue(g->server, g->threads[i].cq, NULL);
  }
  for (size_t i = 0; i < n_methods; i++) {
    g->methods[i].m = methods[i];
    g->methods[i].handle = grpc_server_register_method(
        g->server, methods[i].path, NULL,
        methods[i].unary ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER : GRPC_SRM_PAYLOAD_NONE, 0);
    if (!g->methods[i].handle) {
      err_set(e, ERR_INVALID_ARGUMENT, "gRPC front end: cannot register method '%s' (registered twice?)",
              methods[i].path);
      goto fail;
    }
  }
  g->tls = o->tls ? o->tls->certs : NULL;
  grpc_server_credentials *creds = g->tls ? tls_credentials(g) : grpc_insecure_server_credentials_create();
  if (!creds) {
    err_set(e, o->tls ? ERR_INVALID_ARGUMENT : ERR_INTERNAL, "gRPC front end: cannot create %s credentials",
            o->tls ? "TLS" : "insecure");
    goto fail;
  }
  g->port = grpc_server_add_http2_port(g->server, o->addr, creds);
  grpc_server_credentials_release(creds);
  if (g->port <= 0) {
    // with TLS the core also fails here when it rejects the certificates (its log line says why)
    if (o->tls)
      err_set(e, ERR_INVALID_ARGUMENT,
              "gRPC front end: cannot listen on '%s' with TLS (address in use or invalid, or the "
              "certificates were rejected: see gRPC's log line above)", o->addr);
    else
      err_set(e, ERR_UNAVAILABLE, "gRPC front end: cannot listen on '%s' (address in use or invalid)",
              o->addr);
    goto fail;
  }
  *out = g;
  return 0;

fail:
  teardown(g);
  return e ? (int)e->code : ERR_INTERNAL;
}

int srv_grpc_port(const srv_grpc *g) { return g->port; }

int srv_grpc_draining(const srv_grpc *g) { return draining(g); }

static int calls_for(const srv_grpc *g, const reg_method *rm) {
  if (g->busy_method && g->busy_calls > 0 && strcmp(rm->m.path, g->busy_method) == 0) return g->busy_calls;
  return g->calls_per_thread;
}

int srv_grpc_start(srv_grpc *g, err *e) {
  if (g->started || g->shut) return err_set(e, ERR_FAILED_PRECONDITION, "gRPC front end: already started");
  grpc_server_start(g->server);
  g->started = 1;
  // Pre-post from here: the threads do not run yet, so each pool has one user.
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    for (size_t m = 0; m < g->n_methods; m++)
      for (int k = 0; k < calls_for(g, &g->methods[m]); k++) {
        if (g->methods[m].m.unary) arm_unary(t, &g->methods[m]);
        else if (g->methods[m].m.astream) arm_astream(t, &g->methods[m]);
        else arm_stream(t, &g->methods[m]);
      }
    arm_generic(t);
  }
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    int rc = pthread_create(&t->th, NULL, cq_main, t);
    if (rc != 0) {
      err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: cannot start CQ thread %d: %s", i, strerror(rc));
      srv_grpc_shutdown(g, 0);  // joins those already running, drains every CQ
      return (int)e->code;
    }
    t->th_started = 1;
  }
  return 0;
}

// Closes every CQ (no batch starts afterwards) and drains those without a
// thread on this thread.
static void close_cqs(srv_grpc *g) {
  if (!g->threads) return;
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    if (!t->cq) continue;
    pthread_rwlock_wrlock(&t->gate);
    pthread_mutex_lock(&t->mu);
    t->closed = 1;
    pthread_mutex_unlock(&t->mu);
    grpc_completion_queue_shutdown(t->cq);
    pthread_rwlock_unlock(&t->gate);
  }
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    if (t->th_started) {
      pthread_join(t->th, NULL);
      t->th_started = 0;
    } else if (t->cq) {
      cq_main(t);
    }
  }
}

// Waits until no stream has a call, or until (CLOCK_MONOTONIC) passed;
// returns how many are left.
static int wait_streams_ended(srv_grpc *g, const struct timespec *until) {
  int left = 0;
  pthread_mutex_lock(&g->live_mu);
  while (g->live && pthread_cond_timedwait(&g->live_cv, &g->live_mu, until) != ETIMEDOUT) {
  }
  for (srv_stream *s = g->live; s; s = s->live_next) left++;
  pthread_mutex_unlock(&g->live_mu);
  return left;
}

// The drain, in two steps.
// 1. Streams end while the connection is still open: each stops reading,
//    answers what it took and sends its status (UNAVAILABLE, "the server is
//    shutting down"); this waits until every one has completed. Unary calls
//    are served as before meanwhile.
// 2. grpc_server_shutdown_and_notify: the core sends a first GOAWAY and a
//    PING, and only after the PING's ack the final GOAWAY; the connection
//    closes as soon as its last call ends after that. A client that has
//    acked the PING has read every frame before it, so each stream's status,
//    written in step 1, has reached it. The order matters: when the status
//    went out after the GOAWAY (streams ended together with it), the last
//    stream's status was the last write before the close, while the client
//    was still sending on its streams; its write met the closed socket
//    (EPIPE) and its transport failed every stream still unread with
//    UNAVAILABLE "Stream removed (sendmsg: Broken pipe)" instead of the
//    status already in its receive buffer (test_shutdown_streams).
void srv_grpc_shutdown(srv_grpc *g, int grace_ms) {
  if (g->shut) return;
  g->shut = 1;
  atomic_store_explicit(&g->streams_ending, 1, memory_order_release);
  if (!g->threads || !g->threads[0].cq || !g->threads[0].th_started) {
    atomic_store_explicit(&g->draining, 1, memory_order_release);
    if (!g->threads || !g->threads[0].cq) return;  // create failed early: nothing was queued
    // Never served (or no thread came up): nothing to drain, only the notify
    // tag to collect, which close_cqs does on this thread.
    grpc_server_shutdown_and_notify(g->server, g->threads[0].cq, &g->shutdown_tag);
    grpc_server_cancel_all_calls(g->server);
    close_cqs(g);
    return;
  }
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  int64_t ns = until.tv_nsec + (int64_t)(grace_ms > 0 ? grace_ms : 0) % 1000 * 1000000;
  until.tv_sec += (grace_ms > 0 ? grace_ms : 0) / 1000 + ns / 1000000000;
  until.tv_nsec = ns % 1000000000;

  end_live_streams(g);
  int left = wait_streams_ended(g, &until);
  if (left) LOG("shutdown: %d stream(s) still unanswered at the end of the grace; closing anyway", left);
  atomic_store_explicit(&g->draining, 1, memory_order_release);
  grpc_server_shutdown_and_notify(g->server, g->threads[0].cq, &g->shutdown_tag);
  end_live_streams(g);  // one matched by a request posted before step 1 may have joined since
  pthread_mutex_lock(&g->mu);
  while (!g->notified) {
    if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT) break;
  }
  if (!g->notified) {
    pthread_mutex_unlock(&g->mu);
    LOG("shutdown: grace of %d ms over, cancelling the calls left", grace_ms);
    grpc_server_cancel_all_calls(g->server);
    pthread_mutex_lock(&g->mu);
    while (!g->notified) pthread_cond_wait(&g->cv, &g->mu);
  }
  pthread_mutex_unlock(&g->mu);
  close_cqs(g);
}

static void free_pool(srv_call *c) {
  while (c) {
    srv_call *n = c->next;
    free(c);
    c = n;
  }
}

// Releases everything; the server, if any, is shut down or was never started.
static void teardown(srv_grpc *g) {
  if (g->server) {
    if (!g->shut) srv_grpc_shutdown(g, 0);
    grpc_server_destroy(g->server);
  } else {
    close_cqs(g);
  }
  for (int i = 0; g->threads && i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    if (t->cq) grpc_completion_queue_destroy(t->cq);
    free_pool(t->pool);
    free_pool(atomic_load(&t->returned));
    free(t->scratch);
    pthread_rwlock_destroy(&t->gate);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
  }
  free(g->threads);
  free(g->methods);
  srv_rr_destroy(g->rr);
  pthread_mutex_destroy(&g->mu);
  pthread_mutex_destroy(&g->live_mu);
  pthread_cond_destroy(&g->live_cv);
  pthread_cond_destroy(&g->cv);
  free(g);
  grpc_shutdown();
}

void srv_grpc_destroy(srv_grpc *g) {
  if (!g) return;
  if (!g->shut) srv_grpc_shutdown(g, 0);
  // A handler still holding a call would touch its context (and its thread's
  // mutex) when it answers; wait for it rather than free under it.
  for (int i = 0; g->threads && i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    pthread_mutex_lock(&t->mu);
    while (t->held > 0) {
      LOG("destroy: waiting for %d unanswered call(s) on CQ %d", t->held, i);
      pthread_cond_wait(&t->cv, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
  }
  teardown(g);
}
