// grpc_front.h: the transport layer of the gRPC front end over the gRPC C
// core. It owns the server, one completion queue and thread per worker,
// pre-posted requests for every registered method, per-call contexts,
// a generic UNIMPLEMENTED answer for unknown methods, ping-pong bidi streams
// (server reflection), asynchronous bidi streams (ModelStreamInfer) and the
// graceful drain at shutdown. The RPC handlers
// themselves live elsewhere and see only this API.
#ifndef INFERD_SERVER_GRPC_FRONT_H
#define INFERD_SERVER_GRPC_FRONT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"
#include "server/sec/tls_watch.h"

typedef struct srv_grpc srv_grpc;
typedef struct srv_call srv_call;  // one unary call in flight

// Unary handler: runs on a CQ thread with the request's bytes (contiguous).
// They stay valid until the call is answered where srv_call_message_kept
// says so (a call from the network), else only while the handler runs. It
// must answer the call exactly once, now or later, from any thread, with
// srv_call_reply or srv_call_fail.
typedef void (*srv_unary_fn)(void *ctx, srv_call *call, const uint8_t *req, size_t len);

// A run of a received message's bytes.
typedef struct srv_piece {
  const uint8_t *p;
  size_t n;
} srv_piece;

// Unary handler for a message that arrived in several slices (big messages
// always do: HTTP/2 frames them) and is at least SRV_SLICED_MIN bytes: its
// bytes in order, not copied into one run (issue 32: that copy of every
// ResNet-50 image was 13 % of the CQ threads' time). The pieces and their
// bytes stay valid until the call is freed; otherwise as srv_unary_fn.
typedef void (*srv_unary_sliced_fn)(void *ctx, srv_call *call, const srv_piece *pieces, size_t n_pieces,
                                    size_t len);
#define SRV_SLICED_MIN ((size_t)64 << 10)

// Stream handler for bidi streams where each received message yields exactly
// one reply message (reflection): runs synchronously on a CQ thread; returns 0
// and a malloc'ed reply (owned by the front end from then on), or an error
// code (the stream then ends with that status and e->msg).
typedef int (*srv_stream_fn)(void *ctx, const uint8_t *req, size_t len, uint8_t **resp,
                             size_t *resp_len, err *e);

typedef struct srv_stream srv_stream;  // one asynchronous bidi stream

// Asynchronous bidi stream handler (ModelStreamInfer): runs on a CQ thread for
// each received message (bytes valid only while it runs; the next message is
// already being read). It must answer that message exactly once, now or
// later, from any thread, with srv_stream_reply (or, for a decoupled model,
// srv_stream_reply_more then srv_stream_reply / srv_stream_reply_end); answers leave in the order
// they are given, not the order of the requests. The stream ends with OK once
// the client has half-closed and every message has been answered.
typedef void (*srv_astream_fn)(void *ctx, srv_stream *st, const uint8_t *req, size_t len);

// Exactly one of unary/stream/astream is set (unary_sliced: beside unary, for
// the messages it takes). `path` and `ctx` must outlive the server.
typedef struct srv_method {
  const char *path;  // "/inference.GRPCInferenceService/ModelInfer"
  srv_unary_fn unary;
  srv_unary_sliced_fn unary_sliced;
  srv_stream_fn stream;
  void *ctx;
  srv_astream_fn astream;
} srv_method;

// TLS on the port, terminated by inferd (grpc_tls.h): the certificates come from `certs` (borrowed; it
// must outlive the server), fetched at start and again at each new handshake, so
// a reload serves new connections while open ones keep theirs. What is asked
// of clients is srv_tlsw_client(certs).
typedef struct srv_grpc_tls {
  srv_tlsw *certs;
} srv_grpc_tls;

// A TLS connection holds three descriptors (the client's socket and the two ends of the terminator's
// socketpair, grpc_tls.h): the default cap of a TLS port is the plaintext one's divided by this.
#define SRV_GRPC_TLS_FDS_PER_CONN 3
// At shutdown, after the core closed its connections, what the relays still hold for their clients
// has this long to go out.
#define SRV_GRPC_TLS_FLUSH_MS 2000

#define SRV_GRPC_DEFAULT_MAX_STREAMS 2048
// Per asynchronous stream (ModelStreamInfer): messages taken and not yet
// answered on the wire, and the bytes of their answers, before the stream
// stops reading (srv_grpc_opts.stream_max_queued).
#define SRV_GRPC_DEFAULT_STREAM_MAX_QUEUED 128
// A connection with no call for this long gets GOAWAY and is closed (srv_grpc_opts.max_idle_ms).
#define SRV_GRPC_DEFAULT_MAX_IDLE_MS (300 * 1000)
// A connection's TLS (or plaintext HTTP/2 setup) handshake must end within this (srv_grpc_opts.handshake_ms):
// the HTTP port's header deadline (--http-header-timeout's 10 s) rather than gRPC's 120 s.
#define SRV_GRPC_DEFAULT_HANDSHAKE_MS (10 * 1000)
#define SRV_GRPC_DEFAULT_STREAM_MAX_QUEUED_BYTES (16 << 20)
// HTTP/2's own SETTINGS_MAX_FRAME_SIZE default, which gRPC keeps (srv_grpc_opts.max_frame_bytes).
#define SRV_GRPC_DEFAULT_MAX_FRAME_BYTES 16384

typedef struct srv_grpc_opts {
  const char *addr;      // "0.0.0.0:8001"; port 0 picks a free one
  int n_threads;         // CQ threads; 0 means 2
  int calls_per_thread;  // pre-posted requests per method per CQ; 0 means 16
  // The busy method (ModelInfer) pre-posts busy_calls per CQ instead: a call
  // that arrives while none is posted waits unmatched in the core, and a
  // shutdown cancels such calls, so a burst must find enough posted.
  const char *busy_method;
  int busy_calls;
  int max_recv_bytes;    // 0 means 64 MiB, -1 unlimited
  int max_send_bytes;    // 0 means 64 MiB, -1 unlimited
  int max_streams;       // concurrent calls per connection; 0 means SRV_GRPC_DEFAULT_MAX_STREAMS
  const srv_grpc_tls *tls;  // NULL: plaintext
  // 1: gRPC's habit of moving a contended connection's transport work onto one of its default
  // executor threads (proto/grpc_offload.h says why that hurts). 0 (inferd's default): that offload
  // is declined from create on (process-wide) and the work stays on the thread that holds it; the
  // executor keeps its threads for its other work.
  int transport_offload;
  // Client cancels per second that end one connection when they are also at
  // least half of the calls it opened in that second (HTTP/2 rapid reset,
  // server/grpc/rapid_reset.h); 0 means SRV_RR_DEFAULT_LIMIT, -1 turns the guard off.
  int rapid_reset_limit;
  // A call whose deadline, when it arrived, was shorter than this many ms and expired before its
  // answer counts for that guard as a cancel; 0 means SRV_RR_DEFAULT_MIN_DEADLINE_MS, -1: none does.
  int rapid_reset_min_deadline_ms;
  // An asynchronous stream stops reading while it holds this many messages not yet answered on the
  // wire (with the handler, or answered and waiting to be written because the client does not read),
  // or answers of this many bytes; it reads again once both are down to half. HTTP/2 flow control then
  // holds the client's sends: a client that never reads cannot grow the server. 0 means the
  // SRV_GRPC_DEFAULT_STREAM_MAX_QUEUED(_BYTES) defaults.
  int stream_max_queued;
  int stream_max_queued_bytes;
  // Connections open at once; past it a new one is reset at once. The port also survives running out
  // of descriptors (grpc_accept.h). 0 means srv_gacc_default_max_conns(), divided by
  // SRV_GRPC_TLS_FDS_PER_CONN with TLS.
  int max_connections;
  // gRPC's GRPC_ARG_MAX_CONNECTION_IDLE_MS: a connection with no call in flight for this long gets
  // GOAWAY (a real client reconnects on its next call), so connections that only sent the preface, or
  // that a client forgot, do not hold descriptors and memory forever. 0 means
  // SRV_GRPC_DEFAULT_MAX_IDLE_MS, -1 never.
  int max_idle_ms;
  // GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS: a connection whose handshake (a TLS ClientHello cut short,
  // say) has not finished by then is closed. 0 means SRV_GRPC_DEFAULT_HANDSHAKE_MS.
  int handshake_ms;
  // One connection's big messages (issue 32, tests/bench/RESULTS.md "One connection, big messages"):
  // GRPC_ARG_HTTP2_MAX_FRAME_SIZE, the largest DATA frame a client may send (fewer frames per 600 KB
  // request when larger; 0 means SRV_GRPC_DEFAULT_MAX_FRAME_BYTES), and GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
  // the receive window offered each call (0: gRPC's own, 64 KiB that its BDP probe grows). Both stay at
  // gRPC's defaults: neither raised one connection's rate on the dev VM; they are there to tune.
  int max_frame_bytes;
  int stream_window_bytes;
} srv_grpc_opts;

// Where gRPC's transport work runs, as srv_grpc_create left it.
typedef enum srv_grpc_offload {
  SRV_GRPC_OFFLOAD_ON,       // asked for: gRPC's executor threads take it over when contended
  SRV_GRPC_OFFLOAD_OFF,      // declined: on the thread that holds the connection's combiner
  SRV_GRPC_OFFLOAD_UNKNOWN,  // asked off, but this gRPC is not reached by the interposer: left as gRPC has it
} srv_grpc_offload;

// Creates the server, registers `methods` (copied; the strings are not) and
// binds the address. A busy port fails with ERR_UNAVAILABLE naming the address;
// certificates gRPC rejects fail with ERR_INVALID_ARGUMENT.
int srv_grpc_create(const srv_grpc_opts *o, const srv_method *methods, size_t n_methods,
                    srv_grpc **out, err *e);

srv_grpc_offload srv_grpc_transport_offload(const srv_grpc *g);

// Connections the rapid-reset guard ended (rapid_reset.h); any thread.
unsigned long long srv_grpc_connections_ended(const srv_grpc *g);

// The bound port (useful with port 0).
int srv_grpc_port(const srv_grpc *g);

// Starts the server and its CQ threads, with every request pre-posted.
int srv_grpc_start(srv_grpc *g, err *e);

// Graceful drain: stops accepting new calls, lets every call already received
// be answered (handlers may still be completing on other threads), waits at
// most `grace_ms` then cancels what is left, and joins the threads. Call once,
// from any thread that is not a CQ thread. A reply that arrives after this
// returned is dropped (its memory freed): its call was cancelled.
void srv_grpc_shutdown(srv_grpc *g, int grace_ms);

// 1 once srv_grpc_shutdown has started draining.
int srv_grpc_draining(const srv_grpc *g);

// Shuts down first when that was not done. Blocks until every call handed to
// a handler has been answered (logging while it waits), so stop whatever
// still holds calls, letting it fail them, before destroying.
void srv_grpc_destroy(srv_grpc *g);

// --- answering a unary call
// `resp` (malloc'ed, may be NULL when len is 0) is owned by the call from here
// on and freed after sending, without a copy. Exactly one of reply/fail per
// call; afterwards `c` must not be touched. Safe from any thread.
void srv_call_reply(srv_call *c, uint8_t *resp, size_t len);

// The same, for one answer of a burst (a batch's answers, given one after
// another): sent by the call's own CQ thread, woken once for the burst,
// where a send started here would wake it once per answer for the
// completions. Adds that thread hop to the answer's latency, so a lone
// answer goes through srv_call_reply. Sent at once on the call's CQ thread.
void srv_call_reply_queued(srv_call *c, uint8_t *resp, size_t len);

// Ends the call with `code` (err_code, i.e. grpc_status_code numbering) and
// `msg` (copied; may be NULL).
void srv_call_fail(srv_call *c, int code, const char *msg);

// --- local calls: a unary handler called from inside the server (the
// KServe v2 REST routes hand their requests to the gRPC handlers this way,
// so both protocols share one validation and one scheduler). The answer goes
// to done instead of a client: resp (malloc'ed, owned by done from then on)
// with code 0, or NULL with code and msg (valid during the call only).
// done runs once, on whichever thread answers (maybe inside the handler).
typedef void (*srv_local_done)(void *arg, uint8_t *resp, size_t len, int code, const char *msg);

// A call to `method` (a path like srv_method's, kept by pointer) that
// srv_call_reply/srv_call_fail end by calling done(arg, ...); no deadline.
// NULL when out of memory.
srv_call *srv_call_create_local(const char *method, srv_local_done done, void *arg);

// Gives a local call its request's bytes (malloc'd, the handler is then
// called with them): the call frees them once answered, and until then
// srv_call_message_kept says 1, so the request points into them instead of
// copying them (a REST request's packed message: copy R5 of docs/copies.md).
void srv_call_local_own_message(srv_call *c, uint8_t *msg);

// 1 for a call made by srv_call_create_local (REST, an ensemble's step).
int srv_call_is_local(const srv_call *c);

// Marks a local call cancelled (its client went away): the scheduler then
// drops the request instead of running it. Any thread, until done ran.
void srv_call_cancel_local(srv_call *c);

// A local call made on behalf of another request (an ensemble's step): it
// takes that request's deadline and counts as cancelled once that request's
// call or stream (one of them, or neither) is. The parent must outlive c's
// answer. Before the handler is called.
void srv_call_local_inherit(srv_call *c, const srv_call *parent_call, const srv_stream *parent_stream,
                            int64_t deadline_us);

// 1 once the client cancelled or the deadline passed (best effort, lock-free).
int srv_call_cancelled(const srv_call *c);

// 1 when the bytes the unary handler was given stay valid until the call is
// answered (a call from the network keeps its message, a local call the one
// given by srv_call_local_own_message); 0 for a local call whose bytes are
// the caller's.
int srv_call_message_kept(const srv_call *c);

// Absolute CLOCK_MONOTONIC deadline in microseconds; INT64_MAX when none.
int64_t srv_call_deadline_us(const srv_call *c);

// The method path, e.g. "/inference.GRPCInferenceService/ModelInfer".
const char *srv_call_method(const srv_call *c);

// --- answering on an asynchronous stream
// One answer per message handed to the handler; `resp` (malloc'ed, may be
// NULL when len is 0) is owned by the stream from here on. After the last
// answer the handler must not touch `st`. Safe from any thread. An answer
// given after the client cancelled, or after the drain closed the transport,
// is dropped.
void srv_stream_reply(srv_stream *st, uint8_t *resp, size_t len);

// A decoupled model's answers (several for one message, Triton's decoupled
// transaction policy): srv_stream_reply_more sends one answer and leaves the
// message open; the message then ends with srv_stream_reply (a last answer)
// or srv_stream_reply_end (no further answer). Answers given so count against
// --grpc-stream-max-queued(-bytes) while they wait for the client, so a
// stream whose client does not read them stops reading new messages.
void srv_stream_reply_more(srv_stream *st, uint8_t *resp, size_t len);
void srv_stream_reply_end(srv_stream *st);

// 1 while answers waiting for the client fill the stream's caps: a producer of
// many answers for one message (a decoupled model) holds its next answer until
// this reads 0, so a client that does not read bounds what the server holds.
int srv_stream_congested(srv_stream *st);

// 1 once the client cancelled the stream or its deadline passed.
int srv_stream_cancelled(const srv_stream *st);

// The stream's absolute CLOCK_MONOTONIC deadline in microseconds; INT64_MAX when none.
int64_t srv_stream_deadline_us(const srv_stream *st);

#endif
