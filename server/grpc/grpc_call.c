// server/grpc/grpc_call.c: unary calls of the gRPC transport: pooled call
// contexts, pre-posted per method and CQ thread, answered from any thread
// (srv_call_reply and friends), a burst of answers sent by the calls' own CQ
// threads through their mailboxes, and local calls (a handler run from inside
// the server, as the REST routes do).
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
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/grpc/grpc_front_internal.h"
#include "kernels/base/utf8.h"

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
  atomic_init(&c->answered_expired, 0);
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
  free(c->pieces);
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

void srv_grpc__arm_unary(cq_thread *t, const reg_method *rm) {
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

_Thread_local cq_thread *srv_grpc__tl_cq;  // grpc_front_internal.h says why

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

grpc_slice srv_grpc__details(const char *msg) {
  size_t n = strlen(msg);
  if (!utf8_has_controls(msg, n)) return grpc_slice_from_copied_buffer(msg, n);  // the common case: one scan
  char buf[2048];
  return grpc_slice_from_copied_buffer(buf, utf8_escape_controls(buf, sizeof buf, msg, n));
}

// Sends the answer (bb NULL for a failure) and hands the handler's reference
// to the send batch: here, or (queued, off the call's CQ thread) there.
static void call_finish(srv_call *c, grpc_byte_buffer *bb, grpc_status_code code, const char *msg, int queued) {
  c->send_buf = bb;
  c->send_code = code;
  if (code == GRPC_STATUS_DEADLINE_EXCEEDED) atomic_store_explicit(&c->answered_expired, 1, memory_order_relaxed);
  if (msg) {
    c->status_details = srv_grpc__details(msg);
    c->has_details = 1;
  }
  if (queued && srv_grpc__tl_cq != c->t) mail_post(c);
  else call_send(c);
}

srv_call *srv_call_create_local(const char *method, srv_local_done done, void *arg) {
  srv_call *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  atomic_init(&c->cancelled, 0);
  atomic_init(&c->refs, 1);
  atomic_init(&c->answered_expired, 0);
  c->deadline_us = INT64_MAX;
  c->local_done = done;
  c->local_arg = arg;
  c->local_method = method;
  return c;
}

void srv_call_local_own_message(srv_call *c, uint8_t *msg) { c->local_msg = msg; }

int srv_call_is_local(const srv_call *c) { return c->local_done != NULL; }

void srv_call_cancel_local(srv_call *c) { atomic_store_explicit(&c->cancelled, 1, memory_order_relaxed); }

void srv_call_local_inherit(srv_call *c, const srv_call *parent_call, const srv_stream *parent_stream,
                            int64_t deadline_us) {
  c->parent_call = parent_call;
  c->parent_stream = parent_stream;
  c->deadline_us = deadline_us;
}

// Ends a local call: the answer goes to its done callback.
static void local_finish(srv_call *c, uint8_t *resp, size_t len, int code, const char *msg) {
  srv_local_done done = c->local_done;
  void *arg = c->local_arg;
  free(c->local_msg);
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

int srv_call_message_kept(const srv_call *c) { return !c->local_done || c->local_msg; }

int srv_call_cancelled(const srv_call *c) {
  if (atomic_load_explicit(&((srv_call *)c)->cancelled, memory_order_relaxed)) return 1;
  if (c->parent_call) return srv_call_cancelled(c->parent_call);
  // the stream's flag read here (grpc_front_internal.h) rather than through grpc_stream.c, which calls this file
  return c->parent_stream ? atomic_load_explicit(&((srv_stream *)c->parent_stream)->cancelled, memory_order_relaxed) : 0;
}

int64_t srv_call_deadline_us(const srv_call *c) { return c->deadline_us; }

const char *srv_call_method(const srv_call *c) { return c->local_done ? c->local_method : c->rm->m.path; }

static void on_unary_new(cq_thread *t, srv_call *c, int ok) {
  srv_grpc *g = t->g;
  if (!ok) {  // the server is shutting down: the request was never matched
    call_release(c);
    return;
  }
  if (!draining(g)) srv_grpc__arm_unary(t, c->rm);
  int64_t now = srv_grpc__now_us();
  c->deadline_us = srv_grpc__deadline_to_us(c->deadline);
  c->left_us = c->deadline_us == INT64_MAX ? INT64_MAX : c->deadline_us - now;
  c->rr_key = srv_grpc__rr_count(g, c->call, now, &c->rr_window);
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

  if (c->left_us <= 0) {
    // Already past its deadline (the client sent it so, or it waited for a CQ thread that long): refused
    // before its message is copied, parsed, validated or queued, which is most of what such a call
    // would cost (the core has read the message already: it reads it before matching the call).
    srv_call_fail(c, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded before the call was read");
  } else if (!c->payload) {
    srv_call_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "request message missing");
  } else {
    // The message, its reader and any contiguous copy stay with the call
    // until it is freed (call_release), so a handler that answers later may
    // keep pointing into them (ModelInfer's tensors do) instead of copying.
    // A method that takes its message in pieces (ModelInfer) gets a big one
    // that way: its tensors are then copied once, into the batch, not here.
    const uint8_t *data = NULL;
    size_t len = 0, n_pieces = 0;
    int frc = c->rm->m.unary_sliced
                  ? srv_grpc__pieces(c->payload, &c->rd, &data, &len, &c->pieces, &n_pieces, &c->flat)
                  : srv_grpc__flatten(t, c->payload, &c->rd, &data, &len, &c->flat);
    if (frc == ERR_INVALID_ARGUMENT) {
      srv_call_fail(c, frc, "request message cannot be decompressed");
    } else {
      c->has_rd = 1;
      if (frc) srv_call_fail(c, frc, "request message cannot be copied");
      else if (c->pieces) c->rm->m.unary_sliced(c->rm->m.ctx, c, c->pieces, n_pieces, len);
      else c->rm->m.unary(c->rm->m.ctx, c, data, len);
    }
  }
  // c stays valid until this thread's reference goes.
  call_release(c);
}

static void on_unary_close(srv_call *c, int ok) {
  if (!ok || c->close_cancelled) atomic_store_explicit(&c->cancelled, 1, memory_order_relaxed);
  srv_grpc__rr_closed(c->t->g, c->rr_key, c->rr_window, !ok || c->close_cancelled,
                      atomic_load_explicit(&c->answered_expired, memory_order_relaxed), c->deadline_us, c->left_us);
  call_release(c);
}

void srv_grpc__call_event(cq_thread *t, tag *tg, int ok) {
  switch (tg->kind) {
    case TAG_UNARY_NEW: on_unary_new(t, tg->obj, ok); break;
    case TAG_UNARY_CLOSE: on_unary_close(tg->obj, ok); break;
    case TAG_UNARY_SEND: call_release(tg->obj); break;
    case TAG_MAIL: mail_drain(t); break;
    default: break;  // not a unary call's tag (grpc_front.c's dispatch sends none here)
  }
}
