// server/grpc/grpc_front_internal.h: what the four files of the gRPC
// transport share: the completion tags, the per-call contexts (unary calls,
// ping-pong streams, asynchronous streams, unknown methods), the CQ threads
// and the server object, and the helpers they call: grpc_front.c's dispatch
// calls into grpc_call.c and grpc_stream.c, and all three call grpc_shared.c,
// never the other way round. Not a public header: only server/grpc/
// grpc_front.c (CQ threads, dispatch, unknown methods, lifecycle),
// grpc_call.c (unary calls and their mailboxes), grpc_stream.c (streams) and
// grpc_shared.c (batch starts, messages, deadlines, the rapid-reset tally)
// include it; everyone else sees grpc_front.h.
//
// Every batch starts under its CQ thread's gate (a read lock) and only while
// that CQ is open: the core aborts when a batch begins on a shut-down queue,
// and a late reply after the drain would otherwise race
// grpc_completion_queue_shutdown, which runs under the write lock. A read
// lock because starts need no exclusion from each other: a send batch writes
// to the socket inline (~10 us), and under a mutex the reply threads and the
// CQ thread queued behind each other's writes (tests/bench/RESULTS.md).
#ifndef INFERD_SERVER_GRPC_FRONT_INTERNAL_H
#define INFERD_SERVER_GRPC_FRONT_INTERNAL_H

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "server/grpc/grpc_accept.h"
#include "server/grpc/grpc_front.h"
#include "server/grpc/grpc_tls.h"
#include "server/grpc/rapid_reset.h"

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
  srv_piece *pieces;  // or its slices, for a method with unary_sliced (srv_grpc__pieces)
  grpc_byte_buffer *send_buf;
  grpc_status_code send_code;
  grpc_slice status_details;
  int has_details;
  srv_call *mail_next;  // in its CQ thread's mailbox, waiting to be sent
  int close_cancelled;  // written by the core through RECV_CLOSE_ON_SERVER
  atomic_int cancelled;
  atomic_int refs;
  int64_t deadline_us;
  int64_t left_us;  // of the deadline when the call arrived (INT64_MAX: none)
  // Set when the server answers DEADLINE_EXCEEDED, read by the close: atomic since the answer may come
  // from another thread, ordered before the close only inside gRPC.
  atomic_int answered_expired;
  uint64_t rr_key;  // its connection's in the rapid-reset counts (0: not counted)
  int64_t rr_window;
  tag tag_new, tag_close, tag_send;
  // local calls (srv_call_create_local) only
  srv_local_done local_done;
  void *local_arg;
  const char *local_method;
  uint8_t *local_msg;  // srv_call_local_own_message: freed once answered
  const srv_call *parent_call;    // srv_call_local_inherit: cancelled with it (NULL: none)
  const srv_stream *parent_stream;
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
  size_t len;
} out_msg;

struct srv_stream {
  cq_thread *t;
  const reg_method *rm;
  grpc_call *call;
  gpr_timespec deadline;
  int64_t deadline_us;
  int64_t left_us;  // of the deadline when the stream arrived (INT64_MAX: none)
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
  // Flow control of answers: messages taken and not yet written (outstanding
  // + queued + the one sending) and the bytes of the answers among them.
  // Past srv_grpc.stream_max_queued / _bytes no read is posted (paused) until
  // the client has taken the backlog down to half; HTTP/2 flow control then
  // holds the client's sends, so a client that never reads cannot grow us.
  int queued;          // answers in q_head..q_tail
  size_t queued_bytes;  // their bytes plus the one sending
  size_t send_len;      // the bytes of the answer being sent
  int paused;           // a read is due but held back by the backlog
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
  int stream_max_queued;         // per asynchronous stream: messages taken and not yet written
  size_t stream_max_queued_bytes;  // and the bytes of their answers
  atomic_llong stream_pause_log_us;  // when the last "stream paused" line was written (rate limit)
  atomic_ullong stream_pauses;       // streams paused since then, told in the next line
  // The port's own listener (grpc_accept.h), the TLS terminator its connections go through with
  // --grpc-use-ssl (grpc_tls.h; NULL for plaintext), and the insecure credentials the core gets every
  // connection with (TLS or not: the terminator hands over plaintext).
  srv_gacc *acc;
  srv_gtls *relay;
  grpc_server_credentials *fd_creds;
  srv_rr *rr;  // NULL: the rapid-reset guard is off
  int rr_limit;
  int rr_min_deadline_ms;  // 0: expired deadlines never count
  atomic_ullong rr_ended;  // connections it ended
  atomic_llong rr_logged_us;  // when an ended connection was last logged (one line per 10 s: a client that
                             // reconnects at once would otherwise write lines as fast as it is cut off)
  atomic_ullong rr_logged_ended;  // rr_ended at that line (written by the thread that won the line)
};

#define LOG(...)                                  \
  do {                                            \
    fprintf(stderr, "inferd grpc: " __VA_ARGS__); \
    fputc('\n', stderr);                          \
  } while (0)

static inline int draining(const srv_grpc *g) { return atomic_load_explicit(&g->draining, memory_order_acquire); }
static inline int streams_ending(const srv_grpc *g) {
  return atomic_load_explicit(&g->streams_ending, memory_order_acquire);
}

// --- grpc_front.c: batches, messages, deadlines, the rapid-reset tally

// Starts a batch on a call bound to t's CQ unless that CQ was shut down.
grpc_call_error srv_grpc__start_batch(cq_thread *t, grpc_call *call, const grpc_op *ops, size_t n, void *tg,
                                      int *closed_out);

// Copies a received message into contiguous memory unless it already is one
// slice. On success *data stays valid until the reader is destroyed, and
// (own NULL) until the thread's scratch is reused; with own set a copy goes
// into memory of its own, *own, which the caller frees.
int srv_grpc__flatten(cq_thread *t, grpc_byte_buffer *bb, grpc_byte_buffer_reader *rd, const uint8_t **data,
                      size_t *len, uint8_t **own);
// As srv_grpc__flatten, but a message of several slices and at least
// SRV_SLICED_MIN bytes is not copied: *pieces (malloc'd, the caller frees)
// lists its slices in order, *n_pieces of them, and *data is NULL.
int srv_grpc__pieces(grpc_byte_buffer *bb, grpc_byte_buffer_reader *rd, const uint8_t **data, size_t *len,
                     srv_piece **pieces, size_t *n_pieces, uint8_t **own);

// Releases the thread's copy buffer when one huge message grew it.
void srv_grpc__scratch_trim(cq_thread *t);

// A call's gpr deadline as CLOCK_MONOTONIC microseconds; INT64_MAX when none.
int64_t srv_grpc__deadline_to_us(gpr_timespec d);

// CLOCK_MONOTONIC in microseconds (the clock of deadline_us and the rapid-reset counts).
int64_t srv_grpc__now_us(void);

// Counts a new call, arrived at now_us, toward its connection's tally (rapid_reset.h); returns its key.
uint64_t srv_grpc__rr_count(srv_grpc *g, grpc_call *call, int64_t now_us, int64_t *window);

// A counted call is over (cancelled: before the server's status; answered_expired: the server answered
// DEADLINE_EXCEEDED; left_us: its deadline's time left when it arrived); its client's cancel, or a short
// deadline that expired, may end the connection.
void srv_grpc__rr_closed(srv_grpc *g, uint64_t key, int64_t window, int cancelled, int answered_expired,
                         int64_t deadline_us, int64_t left_us);

// --- grpc_call.c: unary calls

// The CQ thread running on this thread, if any: an answer given there is
// sent at once. (Thread-local: which thread is running is the one fact a
// context cannot hold.) Set by cq_main.
extern _Thread_local cq_thread *srv_grpc__tl_cq;

// Pre-posts one request for a unary method on t's CQ.
void srv_grpc__arm_unary(cq_thread *t, const reg_method *rm);

// A completion of TAG_UNARY_NEW, TAG_UNARY_CLOSE, TAG_UNARY_SEND or TAG_MAIL.
void srv_grpc__call_event(cq_thread *t, tag *tg, int ok);

// --- grpc_stream.c: ping-pong and asynchronous streams

// Pre-post one request for a ping-pong (stream) or asynchronous (astream) method on t's CQ.
void srv_grpc__arm_stream(cq_thread *t, const reg_method *rm);
void srv_grpc__arm_astream(cq_thread *t, const reg_method *rm);

// A completion of any TAG_STREAM_* or TAG_ASTREAM_* tag.
void srv_grpc__stream_event(cq_thread *t, tag *tg, int ok);

// The drain: every live asynchronous stream stops reading and ends once
// what it took is answered.
void srv_grpc__end_live_streams(srv_grpc *g);

// A status message as status details: control characters, bidi controls
// and bytes that are not UTF-8 (error messages quote names, ids and keys
// clients sent) escaped (utf8_escape_controls), so a client's terminal
// escape or forged line never comes back raw to whoever reads the error.
grpc_slice srv_grpc__details(const char *msg);

#endif
