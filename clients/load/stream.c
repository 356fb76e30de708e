// stream.c: ModelStreamInfer streams on the gRPC C core (see stream.h).
//
// A call has four kinds of batch: LIFE (send and receive initial metadata,
// receive the status) completes only when the call is over, so a broken
// stream is noticed at once; RECV is reposted after every answer; SEND and
// CLOSE each have at most one in flight. The call is over when no batch is
// pending: only then are its resources released and what it held counted,
// since until then the core may still write into them.
#include "clients/load/stream.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/base/clock.h"
#include "clients/load/request.h"
#include "clients/load/rpc.h"
#include "clients/load/stats.h"
#include "clients/load/stream_msg.h"

typedef enum op_kind { OP_LIFE, OP_SEND, OP_RECV, OP_CLOSE, N_OPS } op_kind;

typedef struct op_tag {
  ld_stream *s;
  op_kind kind;
} op_tag;

typedef struct slot {
  uint64_t seq;  // the request's id
  uint64_t t0;
  bool busy;
} slot;

struct ld_stream {
  ld_stream_cfg cfg;
  op_tag tags[N_OPS];
  // Requests in flight: request seq sits in slots[seq % cap], so an answer's
  // id finds its send time without a search. Sequence numbers are picked to
  // land on a free slot, which keeps them unique and increasing.
  slot *slots;
  uint32_t *free_slots;
  size_t n_free;
  uint64_t *queue;  // seqs not sent yet, a ring of cap
  size_t q_head, q_len;
  uint64_t next_seq;
  bool closing;

  // The current call; reset when it is over.
  grpc_call *call;
  int pending;     // batches started and not completed
  bool ending;     // the call is going away: start no more sends
  bool cancelled;  // grpc_call_cancel* succeeded once
  bool sending, half_closed;
  int fail_kind;  // nonzero: what the held requests count as, whatever the status says
  grpc_byte_buffer *send_buf, *recv_buf;
  ld_call_end end;
};

// --- requests

static void slots_reset(ld_stream *s) {
  size_t cap = s->cfg.cap;
  // reversed so that slot 0 is taken first: ids then start at 0, 1, 2...
  for (size_t i = 0; i < cap; i++) {
    s->slots[i].busy = false;
    s->free_slots[i] = (uint32_t)(cap - 1 - i);
  }
  s->n_free = cap;
  s->q_head = s->q_len = 0;
}

static void slot_release(ld_stream *s, slot *sl) {
  sl->busy = false;
  s->free_slots[s->n_free++] = (uint32_t)(sl - s->slots);
}

// The request sent first among those held: the one an answer without a
// usable id stands for (each request is answered exactly once).
static slot *oldest(ld_stream *s) {
  slot *best = NULL;
  for (size_t i = 0; i < s->cfg.cap; i++)
    if (s->slots[i].busy && (!best || s->slots[i].seq < best->seq)) best = &s->slots[i];
  return best;
}

// --- the call

static void cancel_call(ld_stream *s, grpc_status_code code, const char *why) {
  s->ending = true;
  if (!s->call || s->cancelled) return;
  grpc_call_error rc = code == GRPC_STATUS_CANCELLED ? grpc_call_cancel(s->call, NULL)
                                                     : grpc_call_cancel_with_status(s->call, code, why, NULL);
  // Refused only for a bad argument; the owner's grace timer tries again.
  s->cancelled = rc == GRPC_CALL_OK;
}

// A batch the core refused: the call cannot go on.
static void fail(ld_stream *s, int kind) {
  if (!s->fail_kind) s->fail_kind = kind;
  cancel_call(s, GRPC_STATUS_CANCELLED, NULL);
}

static int start(ld_stream *s, const grpc_op *ops, size_t n, op_kind k) {
  if (grpc_call_start_batch(s->call, ops, n, &s->tags[k], NULL) != GRPC_CALL_OK) {
    fail(s, LD_KIND_CLIENT);
    return -1;
  }
  s->pending++;
  return 0;
}

static void post_recv(ld_stream *s) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv_buf;
  start(s, &op, 1, OP_RECV);
}

static void release_call(ld_stream *s) {
  if (s->send_buf) grpc_byte_buffer_destroy(s->send_buf);
  if (s->recv_buf) grpc_byte_buffer_destroy(s->recv_buf);
  s->send_buf = s->recv_buf = NULL;
  ld_call_end_destroy(&s->end);
  grpc_call_unref(s->call);
  s->call = NULL;
}

static int open_call(ld_stream *s) {
  // No deadline: the stream lives as long as the level; requests have their own (ld_stream_expire).
  s->call = grpc_channel_create_call(s->cfg.ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cfg.cq, s->cfg.method, NULL,
                                     gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  if (!s->call) return -1;
  s->pending = 0;
  s->ending = s->cancelled = s->sending = s->half_closed = false;
  s->fail_kind = 0;
  ld_call_end_init(&s->end);
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ld_call_end_ops(&s->end, &ops[1], &ops[2]);
  if (grpc_call_start_batch(s->call, ops, 3, &s->tags[OP_LIFE], NULL) != GRPC_CALL_OK) {
    release_call(s);  // nothing is pending on it
    return -1;
  }
  s->pending = 1;
  post_recv(s);  // when refused, the call is cancelled and LIFE's completion ends it
  return 0;
}

// Starts the next send, or the half-close once nothing waits.
static void pump(ld_stream *s) {
  if (!s->call || s->ending || s->sending) return;
  size_t cap = s->cfg.cap;
  while (s->q_len) {
    uint64_t seq = s->queue[s->q_head];
    s->q_head = (s->q_head + 1) % cap;
    s->q_len--;
    const slot *sl = &s->slots[seq % cap];
    if (!sl->busy || sl->seq != seq) continue;  // already retired by an answer that named no id
    uint8_t tail[LD_ID_FIELD_MAX];
    size_t n = ld_id_field_seq(seq, tail);
    // The shared request is referenced, not copied; only the id is per message.
    grpc_slice parts[2] = {s->cfg.request, grpc_slice_from_copied_buffer((const char *)tail, n)};
    s->send_buf = grpc_raw_byte_buffer_create(parts, 2);
    grpc_slice_unref(parts[1]);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = s->send_buf;
    if (start(s, &op, 1, OP_SEND) == 0) s->sending = true;
    return;
  }
  if (s->closing && !s->half_closed) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (start(s, &op, 1, OP_CLOSE) == 0) s->half_closed = true;
  }
}

// The call is over: what it still held counts as its failure, and the
// stream is ready for a new call. The outcomes go last, once the stream is
// consistent, because the owner may send again from them.
static void finish(ld_stream *s) {
  int kind = s->fail_kind                  ? s->fail_kind
             : s->end.status != GRPC_STATUS_OK ? ld_kind_from_status((int)s->end.status)
                                           : LD_KIND_NO_MESSAGE;  // ended OK with requests unanswered
  size_t held = s->cfg.cap - s->n_free;
  release_call(s);
  slots_reset(s);
  for (size_t i = 0; i < held; i++) s->cfg.on_outcome(s->cfg.ctx, s, kind, 0);
}

static void on_answer(ld_stream *s, grpc_byte_buffer *bb) {
  uint64_t now = clock_mono_ns();
  int kind = LD_KIND_STREAM_ERROR;
  slot *sl = NULL;
  grpc_byte_buffer_reader rd;
  if (grpc_byte_buffer_reader_init(&rd, bb)) {
    grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    ld_answer a;
    uint64_t seq;
    if (ld_answer_scan(GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all), &a) == 0) {
      if (ld_id_parse(a.id, a.id_len, &seq)) {
        slot *c = &s->slots[seq % s->cfg.cap];
        if (c->busy && c->seq == seq) sl = c;
      }
      if (a.error_len)
        kind = ld_kind_from_message(a.error, a.error_len);
      else if (!a.resp)
        kind = LD_KIND_NO_MESSAGE;
      else if (s->cfg.expect && !ld_response_matches(a.resp, a.resp_len, s->cfg.expect, s->cfg.n_expect))
        kind = LD_KIND_VALIDATION;
      else
        kind = 0;
    }
    grpc_slice_unref(all);
  }
  if (!sl) {
    // Not an id this stream sent (a server that does not echo ids, or
    // failed before reading the request): a success cannot be timed.
    sl = oldest(s);
    if (kind == 0) kind = LD_KIND_STREAM_ERROR;
  }
  if (!sl) return;  // nothing was asked: not a request's outcome
  uint64_t lat = kind == 0 ? now - sl->t0 : 0;
  slot_release(s, sl);
  s->cfg.on_outcome(s->cfg.ctx, s, kind, lat);
}

// --- the interface

ld_stream *ld_stream_create(const ld_stream_cfg *cfg) {
  if (cfg->cap < 1 || cfg->cap > UINT32_MAX) return NULL;
  ld_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cfg = *cfg;
  s->slots = calloc(cfg->cap, sizeof *s->slots);
  s->free_slots = calloc(cfg->cap, sizeof *s->free_slots);
  s->queue = calloc(cfg->cap, sizeof *s->queue);
  if (!s->slots || !s->free_slots || !s->queue) {
    ld_stream_destroy(s);
    return NULL;
  }
  for (int k = 0; k < N_OPS; k++) s->tags[k] = (op_tag){s, (op_kind)k};
  slots_reset(s);
  return s;
}

void ld_stream_destroy(ld_stream *s) {
  if (!s) return;
  free(s->slots);
  free(s->free_slots);
  free(s->queue);
  free(s);
}

int ld_stream_send(ld_stream *s, uint64_t t0_ns) {
  size_t cap = s->cfg.cap;
  if (s->closing) return LD_KIND_CLIENT;
  if (s->n_free == 0 || s->q_len == cap) return LD_KIND_DROPPED;
  if (!s->call && open_call(s) != 0) return LD_KIND_CLIENT;
  uint32_t i = s->free_slots[--s->n_free];
  uint64_t seq = s->next_seq + (i + cap - s->next_seq % cap) % cap;
  s->next_seq = seq + 1;
  s->slots[i] = (slot){.seq = seq, .t0 = t0_ns, .busy = true};
  s->queue[(s->q_head + s->q_len) % cap] = seq;
  s->q_len++;
  pump(s);
  return 0;
}

void ld_stream_on_event(void *tag, bool ok) {
  op_tag *t = tag;
  ld_stream *s = t->s;
  s->pending--;
  switch (t->kind) {
    case OP_SEND:
      grpc_byte_buffer_destroy(s->send_buf);
      s->send_buf = NULL;
      s->sending = false;
      if (ok)
        pump(s);
      else
        s->ending = true;  // the call is over; LIFE brings the status
      break;
    case OP_RECV:
      // No message: the server ended the stream, or the call broke.
      if (ok && s->recv_buf) {
        grpc_byte_buffer *bb = s->recv_buf;
        s->recv_buf = NULL;
        post_recv(s);
        on_answer(s, bb);
        grpc_byte_buffer_destroy(bb);
      }
      break;
    case OP_LIFE:
    case OP_CLOSE:
    case N_OPS:
      break;
  }
  if (s->pending == 0) finish(s);
}

void ld_stream_close(ld_stream *s) {
  s->closing = true;
  pump(s);
}

bool ld_stream_cancel(ld_stream *s) {
  cancel_call(s, GRPC_STATUS_CANCELLED, NULL);
  return !s->call || s->cancelled;
}

void ld_stream_expire(ld_stream *s, uint64_t now, uint64_t timeout_ns) {
  if (!s->call || s->ending) return;  // already going, for its own reason
  for (size_t i = 0; i < s->cfg.cap; i++) {
    const slot *sl = &s->slots[i];
    if (sl->busy && now > sl->t0 && now - sl->t0 > timeout_ns) {
      s->fail_kind = GRPC_STATUS_DEADLINE_EXCEEDED;
      cancel_call(s, GRPC_STATUS_DEADLINE_EXCEEDED, "a request of this stream passed --timeout-ms");
      return;
    }
  }
}

bool ld_stream_idle(const ld_stream *s) {
  return s->call == NULL;
}
