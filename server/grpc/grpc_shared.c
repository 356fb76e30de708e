// server/grpc/grpc_shared.c: what unary calls (grpc_call.c), streams
// (grpc_stream.c) and the dispatch (grpc_front.c) share: batch starts under
// the CQ's gate, contiguous messages, deadlines and the rapid-reset tally.
// It calls none of those files, so each depends on it and not the reverse.
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/grpc/grpc_front_internal.h"
#include "server/grpc/rapid_reset.h"

// A per-thread copy buffer larger than this is released after use, so one
// huge request does not pin memory in every thread forever.
#define SCRATCH_KEEP (8u << 20)

// ---------------------------------------------------------------- batches

// Starts a batch on a call bound to t's CQ unless that CQ was shut down.
grpc_call_error srv_grpc__start_batch(cq_thread *t, grpc_call *call, const grpc_op *ops, size_t n, void *tg,
                                      int *closed_out) {
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
// The reader opened on bb, *len its bytes and *s its first slice: 1 when
// the message is no more than that (*data then points at it: nothing to
// copy), 0 when more slices follow, or an error (bad compression).
static int open_message(grpc_byte_buffer *bb, grpc_byte_buffer_reader *rd, const uint8_t **data, size_t *len,
                        grpc_slice **s) {
  if (!grpc_byte_buffer_reader_init(rd, bb)) return -ERR_INVALID_ARGUMENT;
  *len = grpc_byte_buffer_length(rd->buffer_out);
  if (*len == 0 || !grpc_byte_buffer_reader_peek(rd, s)) {
    *data = (const uint8_t *)"";
    return 1;
  }
  if (GRPC_SLICE_LENGTH(**s) == *len) {
    *data = GRPC_SLICE_START_PTR(**s);
    return 1;
  }
  return 0;
}

int srv_grpc__flatten(cq_thread *t, grpc_byte_buffer *bb, grpc_byte_buffer_reader *rd, const uint8_t **data,
                      size_t *len, uint8_t **own) {
  grpc_slice *s;
  int one = open_message(bb, rd, data, len, &s);
  if (one) return one < 0 ? -one : 0;
  size_t total = *len;
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

int srv_grpc__pieces(grpc_byte_buffer *bb, grpc_byte_buffer_reader *rd, const uint8_t **data, size_t *len,
                     srv_piece **pieces, size_t *n_pieces, uint8_t **own) {
  *pieces = NULL;
  *n_pieces = 0;
  grpc_slice *s;
  int one = open_message(bb, rd, data, len, &s);
  if (one) return one < 0 ? -one : 0;
  size_t total = *len, n = 0, cap = 0, off = 0;
  uint8_t *dst = NULL;
  srv_piece *v = NULL;
  if (total < SRV_SLICED_MIN && !(dst = *own = malloc(total))) return ERR_RESOURCE_EXHAUSTED;
  do {
    size_t k = GRPC_SLICE_LENGTH(*s);
    if (k > total - off) {  // the core miscounted: never read past the end
      free(v);
      return ERR_INTERNAL;
    }
    if (dst) {
      memcpy(dst + off, GRPC_SLICE_START_PTR(*s), k);
    } else if (k) {
      if (n == cap) {
        srv_piece *w = realloc(v, (cap ? 2 * cap : 64) * sizeof *v);
        if (!w) {
          free(v);
          return ERR_RESOURCE_EXHAUSTED;
        }
        v = w;
        cap = cap ? 2 * cap : 64;
      }
      v[n++] = (srv_piece){GRPC_SLICE_START_PTR(*s), k};
    }
    off += k;
  } while (grpc_byte_buffer_reader_peek(rd, &s));
  if (off != total) {
    free(v);
    return ERR_INTERNAL;
  }
  *data = dst;
  *pieces = v;
  *n_pieces = n;
  return 0;
}

void srv_grpc__scratch_trim(cq_thread *t) {
  if (t->scratch_cap > SCRATCH_KEEP) {
    free(t->scratch);
    t->scratch = NULL;
    t->scratch_cap = 0;
  }
}

int64_t srv_grpc__now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// gpr's monotonic clock has its own epoch, so carry the time left over to
// CLOCK_MONOTONIC rather than the absolute value.
int64_t srv_grpc__deadline_to_us(gpr_timespec d) {
  if (d.tv_sec == INT64_MAX) return INT64_MAX;
  gpr_timespec left =
      gpr_time_sub(gpr_convert_clock_type(d, GPR_CLOCK_MONOTONIC), gpr_now(GPR_CLOCK_MONOTONIC));
  if (left.tv_sec > INT64_MAX / 2000000) return INT64_MAX;
  return srv_grpc__now_us() + (int64_t)left.tv_sec * 1000000 + left.tv_nsec / 1000;
}

// ---------------------------------------------------------------- rapid reset

#define RR_LOG_US 10000000  // one line per 10 s about ended connections

// The socket inode of the core's descriptor fd as handed over: the accepted TCP socket, or with TLS
// the terminator's socketpair end (0: not one of ours, or no longer).
static unsigned long conn_inode(const srv_grpc *g, int fd) {
  return g->relay ? srv_gtls_inode(g->relay, fd) : srv_gacc_inode(g->acc, fd);
}

// Appends v in decimal at p; returns the end.
static char *put_decimal(char *p, unsigned long v) {
  char d[24];
  int n = 0;
  do {
    d[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = d[--n];
  return p;
}

// Counts a new call toward its connection's tally (rapid_reset.h); returns its key.
uint64_t srv_grpc__rr_count(srv_grpc *g, grpc_call *call, int64_t now_us, int64_t *window) {
  if (!g->rr) return 0;
  char *peer = grpc_call_get_peer(call);
  uint64_t key = 0;
  char *end = NULL;
  long fd = peer && !strncmp(peer, "fd:", 3) ? strtol(peer + 3, &end, 10) : -1;
  if (fd >= 0 && fd <= INT_MAX && end != peer + 3 && !*end) {
    // One inferd accepted (grpc_accept.h): its number may come back for a later connection, so the
    // tally is the descriptor's and its socket's, recorded at the hand-over (no syscall here).
    unsigned long ino = conn_inode(g, (int)fd);
    // "fd:<fd>:<inode>", written by hand: snprintf was half of this function's time, and this runs per call
    char k[64] = "fd:";
    char *p = put_decimal(k + 3, (unsigned long)fd);
    *p++ = ':';
    *put_decimal(p, ino) = '\0';
    if (ino) key = srv_rr_call(g->rr, k, now_us, window);
  } else if (peer) {
    key = srv_rr_call(g->rr, peer, now_us, window);
  }
  gpr_free(peer);
  return key;
}

// A counted call is over. If its client cancelled it (before its answer, which
// RECV_CLOSE_ON_SERVER reports as not cancelled, and before its deadline), or
// let a deadline too short to be a real wait expire (srv_rr_classify), that
// counts, and the one that takes the connection over the limit ends it.
void srv_grpc__rr_closed(srv_grpc *g, uint64_t key, int64_t window, int cancelled, int answered_expired,
                         int64_t deadline_us, int64_t left_us) {
  if (!key || (!cancelled && !answered_expired) || draining(g)) return;
  srv_rr_kind kind = srv_rr_classify(g->rr, cancelled, answered_expired, srv_grpc__now_us(), deadline_us, left_us);
  srv_rr_verdict v;
  if (!srv_rr_cancelled(g->rr, key, window, kind, &v)) return;
  err e = {0};
  char name[SRV_RR_PEER_MAX];
  snprintf(name, sizeof name, "%s", v.peer);
  int rc;
  if (!strncmp(v.peer, "fd:", 3)) {
    // A connection of inferd's own listener: its descriptor, while this call keeps it open, and only
    // while the acceptor still holds it for the same socket (which also orders its accept before this).
    int fd;
    unsigned long ino;
    // With TLS the descriptor is the terminator's socketpair (shut down, it ends the TCP connection too):
    // the client's address is the terminator's to tell, asked first (the end makes it forget the relay).
    char tcp[SRV_RR_PEER_MAX];
    int ours = sscanf(v.peer, "fd:%d:%lu", &fd, &ino) == 2 && ino && conn_inode(g, fd) == ino;
    int named = ours && g->relay && srv_gtls_peer(g->relay, fd, ino, tcp, sizeof tcp);
    rc = ours ? srv_rr_end_fd_connection(v.peer, name, sizeof name) : 0;
    if (rc > 0 && named) snprintf(name, sizeof name, "%s", tcp);
  } else {
    rc = srv_rr_end_connection(v.peer, g->port, &e);
  }
  if (rc > 0) {
    unsigned long long ended = atomic_fetch_add_explicit(&g->rr_ended, 1, memory_order_relaxed) + 1;
    int64_t now = srv_grpc__now_us();
    long long last = atomic_load(&g->rr_logged_us);
    if (last && now - last < RR_LOG_US) return;
    if (!atomic_compare_exchange_strong(&g->rr_logged_us, &last, now ? now : 1)) return;
    unsigned long long since = ended - atomic_exchange(&g->rr_logged_ended, ended);
    LOG("ended the connection from %s: its client cancelled %u of the %u calls it opened within one second "
        "(%u of them by deadlines under %d ms that expired) (HTTP/2 rapid reset; --grpc-rapid-reset-limit %d); "
        "%llu connection(s) ended since the last such line, %llu since start (one line per 10 s at most)",
        name, v.cancels, v.calls, v.expired, g->rr_min_deadline_ms, g->rr_limit, since, ended);
  } else if (rc < 0) {
    LOG("the connection from %s is over the rapid-reset limit but could not be ended: %s", name, e.msg);
  }
}

unsigned long long srv_grpc_connections_ended(const srv_grpc *g) {
  return atomic_load_explicit(&((srv_grpc *)g)->rr_ended, memory_order_relaxed);
}
