// server/grpc/grpc_stream.c: bidi streams of the gRPC transport. Ping-pong
// streams (server reflection): one message in flight each way, each answered
// on the CQ thread by the handler's reply. Asynchronous streams
// (ModelStreamInfer): messages read continuously, each handed to the handler
// and answered from any thread, in the order answers are given; and their
// end at the drain, before the GOAWAY (grpc_front.c, srv_grpc_shutdown).
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/grpc/grpc_front_internal.h"

// At most one "stream stopped reading" line this often (it counts the others).
#define PAUSE_LOG_EVERY_US (10 * 1000000LL)

// ---------------------------------------------------------------- ping-pong streams

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
  if (srv_grpc__start_batch(s->t, s->call, ops, n, tg, NULL) == GRPC_CALL_OK) {
    s->pending++;
  } else {
    s->done = 1;
    grpc_call_cancel(s->call, NULL);
  }
}

void srv_grpc__arm_stream(cq_thread *t, const reg_method *rm) {
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
    s->status_details = srv_grpc__details(msg);
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
  if (!draining(t->g)) srv_grpc__arm_stream(t, s->rm);
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
  int rc = srv_grpc__flatten(t, s->recv_buf, &rd, &data, &len, NULL);
  if (rc == ERR_INVALID_ARGUMENT) {
    err_set(&e, ERR_INVALID_ARGUMENT, "request message cannot be decompressed");
  } else {
    if (rc) err_set(&e, rc, "request message cannot be copied");
    else rc = s->rm->m.stream(s->rm->m.ctx, data, len, &resp, &resp_len, &e);
    grpc_byte_buffer_reader_destroy(&rd);
  }
  srv_grpc__scratch_trim(t);
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
  s->queued = 0;
  s->queued_bytes = 0;
}

// s->mu held. Messages taken and not yet written, and their answers' bytes,
// at or past the stream's cap: stop reading.
static int astream_full(const srv_stream *s) {
  const srv_grpc *g = s->t->g;
  return s->outstanding + s->queued + s->sending >= g->stream_max_queued ||
         s->queued_bytes + s->send_len >= g->stream_max_queued_bytes;
}

// s->mu held. Down to half of both caps: read again. The gap between the two
// marks keeps a client that reads slowly from toggling the read per answer.
static int astream_low(const srv_stream *s) {
  const srv_grpc *g = s->t->g;
  return s->outstanding + s->queued + s->sending <= g->stream_max_queued / 2 &&
         s->queued_bytes + s->send_len <= g->stream_max_queued_bytes / 2;
}

// One line per PAUSE_LOG_EVERY_US for every stream paused meanwhile: a client
// that never reads pauses its stream once, a slow reader again and again.
static void astream_log_pause(srv_stream *s) {
  srv_grpc *g = s->t->g;
  unsigned long long n = atomic_fetch_add_explicit(&g->stream_pauses, 1, memory_order_relaxed) + 1;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long now = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
  long long last = atomic_load_explicit(&g->stream_pause_log_us, memory_order_relaxed);
  if (last && now - last < PAUSE_LOG_EVERY_US) return;
  if (!atomic_compare_exchange_strong(&g->stream_pause_log_us, &last, now)) return;  // another thread logs
  atomic_fetch_sub_explicit(&g->stream_pauses, n, memory_order_relaxed);
  LOG("%s: %llu stream(s) stopped reading until their clients take their answers: %d messages taken and "
      "not yet answered on the wire, %zu bytes of answers waiting (--grpc-stream-max-queued %d, "
      "--grpc-stream-max-queued-bytes %zu)",
      s->rm->m.path, n, s->outstanding + s->queued + s->sending, s->queued_bytes + s->send_len,
      g->stream_max_queued, g->stream_max_queued_bytes);
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
  if (srv_grpc__start_batch(s->t, s->call, ops, n, tg, NULL) == GRPC_CALL_OK) {
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
  s->paused = 0;
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
  s->send_len = m->len;
  s->queued--;
  s->queued_bytes -= m->len;
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
    s->send_len = 0;
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
  s->paused = 0;  // a paused stream has no read to fail: it ends here once its answers are written
  astream_try_finish(s);
}

void srv_grpc__arm_astream(cq_thread *t, const reg_method *rm) {
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
  if (!streams_ending(g)) srv_grpc__arm_astream(t, s->rm);
  int64_t now = srv_grpc__now_us();
  s->deadline_us = srv_grpc__deadline_to_us(s->deadline);
  s->left_us = s->deadline_us == INT64_MAX ? INT64_MAX : s->deadline_us - now;
  s->rr_key = srv_grpc__rr_count(g, s->call, now, &s->rr_window);
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
  s->outstanding++;
  if (!astream_full(s)) {
    astream_recv(s);  // the next read overlaps this message's work
  } else {
    // Enough taken and not yet written: no read until the client has taken
    // its answers down to half (TAG_ASTREAM_SEND). The messages it keeps
    // sending wait in HTTP/2's windows, then its sends block.
    s->paused = 1;
    astream_log_pause(s);
  }
  s->pending++;  // this thread's hold while the handler runs, whatever it answers
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_lock(&t->mu);
  t->held++;
  pthread_mutex_unlock(&t->mu);

  grpc_byte_buffer_reader rd;
  const uint8_t *data = NULL;
  size_t len = 0;
  int rc = srv_grpc__flatten(t, buf, &rd, &data, &len, NULL);
  if (rc != ERR_INVALID_ARGUMENT) {  // the reader exists unless decompression failed
    if (rc == 0) s->rm->m.astream(s->rm->m.ctx, s, data, len);
    grpc_byte_buffer_reader_destroy(&rd);
  }
  srv_grpc__scratch_trim(t);
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

// Queues one answer (bb may be NULL: none) and, when `last`, ends the
// message's accounting: it no longer counts as taken and unanswered, and the
// CQ thread's hold on the stream goes. Answers before the last (a decoupled
// model's) count against the caps as queued answers from the moment they are
// given, so a client that does not read them pauses the stream's reading.
static void astream_answer(srv_stream *s, grpc_byte_buffer *bb, size_t len, int last) {
  out_msg *m = bb ? malloc(sizeof *m) : NULL;
  cq_thread *t = s->t;
  pthread_mutex_lock(&s->mu);
  if (last) s->outstanding--;
  if (!bb) {
    // nothing to send: the end of the message's answers alone
  } else if (!m || s->done || s->status_sent) {
    if (!m && !s->done) {
      LOG("%s: out of memory queueing an answer; cancelling the stream", s->rm->m.path);
      grpc_call_cancel(s->call, NULL);
    }
    grpc_byte_buffer_destroy(bb);
    free(m);
  } else {
    m->bb = bb;
    m->len = len;
    m->next = NULL;
    s->queued++;
    s->queued_bytes += len;
    if (s->q_tail) s->q_tail->next = m;
    else s->q_head = m;
    s->q_tail = m;
    astream_pump(s);
  }
  if (!last) {  // the message still holds the stream: it cannot be freed here
    pthread_mutex_unlock(&s->mu);
    return;
  }
  astream_try_finish(s);
  // t outlives this call until held drops below (srv_grpc_destroy waits for
  // it), so s goes first and the count last.
  astream_unlock(s);
  pthread_mutex_lock(&t->mu);
  if (--t->held == 0 && t->closed) pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static grpc_byte_buffer *astream_buffer(uint8_t *resp, size_t len) {
  grpc_slice sl = len ? grpc_slice_new(resp, len, free) : grpc_empty_slice();
  if (!len) free(resp);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  return bb;
}

void srv_stream_reply(srv_stream *s, uint8_t *resp, size_t len) { astream_answer(s, astream_buffer(resp, len), len, 1); }

void srv_stream_reply_more(srv_stream *s, uint8_t *resp, size_t len) {
  astream_answer(s, astream_buffer(resp, len), len, 0);
}

void srv_stream_reply_end(srv_stream *s) { astream_answer(s, NULL, 0, 1); }

int srv_stream_congested(srv_stream *s) {
  pthread_mutex_lock(&s->mu);
  const srv_grpc *g = s->t->g;
  int full = s->queued + s->sending >= g->stream_max_queued ||
             s->queued_bytes + s->send_len >= g->stream_max_queued_bytes;
  pthread_mutex_unlock(&s->mu);
  return full;
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
      // a stream past its deadline is ended by the core's timer (cancelled), before its status
      srv_grpc__rr_closed(s->t->g, s->rr_key, s->rr_window, !ok || s->close_cancelled, 0, s->deadline_us, s->left_us);
      s->done = 1;
      s->reading = 0;
      astream_drop_queue(s);
      break;
    case TAG_ASTREAM_SEND:
      grpc_byte_buffer_destroy(s->send_buf);
      s->send_buf = NULL;
      s->send_len = 0;
      s->sending = 0;
      if (!ok) {
        s->done = 1;
        astream_drop_queue(s);
      }
      astream_pump(s);
      if (s->paused && astream_low(s)) astream_recv(s);  // the client took enough: read again
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
void srv_grpc__end_live_streams(srv_grpc *g) {
  pthread_mutex_lock(&g->live_mu);
  for (srv_stream *s = g->live; s; s = s->live_next) {
    pthread_mutex_lock(&s->mu);
    if (s->pending || s->outstanding) astream_end_for_drain(s);  // otherwise it is being freed
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_unlock(&g->live_mu);
}

void srv_grpc__stream_event(cq_thread *t, tag *tg, int ok) {
  switch (tg->kind) {
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
    default: break;  // not a stream's tag (grpc_front.c's dispatch sends none here)
  }
}
