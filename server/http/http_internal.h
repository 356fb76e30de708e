// server/http/http_internal.h: what the four files of the HTTP transport
// share: the endpoint (struct srv_http), a connection (struct conn), a
// deferred answer, and the helpers they call one way: http.c (the public
// API) -> http_accept.c (accepting, the cap, the sweep) -> http_conn.c (a
// connection's reads, parse loop, answers, writes, close) -> http_parse.c
// (http-parser's callbacks, header and body limits, the body budget,
// incident lines), never the other way round (tests/unit/check_circles.py).
// Not a public header: only those four include it; everyone else sees
// server/http/http.h. Everything here runs on the loop thread.
#ifndef INFERD_SERVER_HTTP_INTERNAL_H
#define INFERD_SERVER_HTTP_INTERNAL_H

#include <http_parser.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/http/http.h"
#include "server/http/http_tls.h"

#define READ_BUF_SIZE (16 * 1024)
// After the last response of a connection we read and drop what the client
// still sends (so closing does not reset the answer away), up to this much.
#define DRAIN_MAX (1024 * 1024)

// Incident classes of srv_http_limits.note, each rate-limited on its own.
enum {
  NOTE_CAP = SRV_HTTP_REFUSED_CONNECTION,
  NOTE_ACCEPT = SRV_HTTP_ACCEPT_ERROR,
  NOTE_HEADER = SRV_HTTP_HEADER_TIMEOUT,
  NOTE_BODY_RATE = SRV_HTTP_SLOW_BODY,
  NOTE_BUDGET = SRV_HTTP_BODY_BUDGET,
  NOTE_EVICT = SRV_HTTP_IDLE_EVICTED,
  NOTE_N = SRV_HTTP_INCIDENT_N
};

typedef struct conn conn;

struct srv_http {
  uv_loop_t *loop;
  uv_tcp_t listener;
  srv_http_handler handler;
  void *ctx;
  int port;
  int closing;
  size_t open_handles;  // the listener plus every connection not yet closed back
  size_t nconns;
  size_t evicting;  // connections closed for newer ones whose close has not called back yet
  conn *conns;  // doubly linked, for srv_http_close and the idle sweep
  // A connection with no read or finished write for idle_ms is closed (a
  // client that opens connections and goes silent, or sends half a request,
  // would otherwise hold them forever); one timer sweeps them all.
  uv_timer_t sweep;
  uint64_t idle_ms;
  size_t max_body_large;  // for paths ending with SRV_HTTP_LARGE_BODY_SUFFIX
  srv_htls_ctx *tls;      // owned; NULL: plain HTTP
  uint64_t handshake_ms;  // a TLS connection not through its handshake by then is closed
  void (*on_closed)(void *arg);
  void *closed_arg;
  srv_http_limits lim;   // issue 31's limits (srv_http_set_limits); zero: off
  uint64_t body_held;    // bytes of bodies reserved across all connections
  struct {
    uint64_t last_ms;  // when this class was last noted (0: never)
    uint64_t count;    // incidents since
    uint64_t total;    // incidents since the start
  } notes[NOTE_N];
};

struct conn {
  uv_tcp_t tcp;  // first: the handle's address is the conn's
  srv_http *srv;
  conn *prev, *next;
  http_parser parser;

  // Bytes read but not yet parsed live in rbuf[roff, rlen); reading is only
  // on while that range is empty, so alloc can always hand out all of rbuf.
  size_t roff, rlen;

  // The request being parsed.
  char *url;
  size_t url_len, url_cap;
  size_t header_bytes;
  uint64_t body_bytes;
  uint64_t max_body;  // this request's limit, chosen once its path is known
  char *body;
  size_t body_cap;
  // headers as "name\0value\0" pairs; hdr_last says which part the last
  // callback appended to (http-parser may split one across reads)
  char *hdrs;
  size_t hdrs_len, hdrs_cap;
  int hdr_last;  // 0 none, 1 field, 2 value
  int fail_status;  // set by a parser callback that rejects the request
  int keep_alive;
  srv_http_pending *pending;  // a deferred answer not yet given
  // Where the request being read is, for the header deadline and the body's
  // minimum rate: 0 between requests, 1 line and headers, 2 body.
  unsigned phase;
  uint64_t phase_ms;       // uv_now when that phase began
  uint64_t body_reserved;  // this request's share of srv_http.body_held
  // The minimum rate's window (a body, or what follows the last answer):
  // when it began and the bytes read by then.
  uint64_t win_ms, win_bytes;

  size_t writes_pending;
  size_t write_bytes_pending;
  size_t drained;
  uint64_t last_active_ms;  // uv_now at the last read or finished write
  uint64_t accepted_ms;     // uv_now at accept, for the TLS handshake deadline
  srv_htls *tls;            // NULL on a plain connection

  unsigned reading : 1;      // uv_read_start is in effect
  unsigned backpressure : 1; // reading stopped until writes drain
  unsigned draining : 1;     // last response queued; input is dropped
  size_t drain_max;          // what draining reads before closing; 0: DRAIN_MAX
  unsigned shut : 1;         // uv_shutdown issued
  unsigned peer_eof : 1;     // the client shut its side
  unsigned closing : 1;      // uv_close issued
  unsigned tls_started : 1;  // the first bytes were looked at
  unsigned tls_notified : 1; // close_notify queued (or not to be sent)
  unsigned evicted : 1;      // closed at the cap for a newer connection (srv_http.evicting)

  char rbuf[READ_BUF_SIZE];
};

struct srv_http_pending {
  conn *c;  // NULL once the connection closed
  int send_body;
  int keep;
  int streaming;  // srv_http_stream_begin sent the headers
  int chunked;    // its body goes in chunks (HTTP/1.1); else it ends with the connection
};

// --- http_parse.c

// http-parser's callbacks; parser->data is the conn. A callback that
// rejects the request sets conn.fail_status.
extern const http_parser_settings srv_http__parser_settings;

// One line for an incident of class k (NOTE_*), unless one went out less
// than SRV_HTTP_NOTE_MS ago; the next one says how many came meanwhile.
void srv_http__note(srv_http *h, int k, const char *what);

// Gives back c's share of the body budget (srv_http.body_held).
void srv_http__body_release(conn *c);

// After the handler: the body budget given back, large buffers freed.
void srv_http__trim_buffers(conn *c);

// --- http_conn.c

// Frees h once it is closing and its last handle called back, then calls on_closed.
void srv_http__maybe_finish(srv_http *h);

// uv_close on c (once); c is freed in the close callback.
void srv_http__conn_close(conn *c);

// Starts reading on c unless it is closing, already reading or the client shut its side.
void srv_http__read_on(conn *c);

// Answers status with its reason as the body and ends the connection.
void srv_http__send_error(conn *c, int status);

// --- http_accept.c

// The listener's connection callback (server->data is the srv_http).
void srv_http__on_connection(uv_stream_t *server, int status);

// (Re)starts the sweep timer at a period fitting the deadlines now set.
int srv_http__sweep_start(srv_http *h);

// The sweep timer's close callback.
void srv_http__on_sweep_closed(uv_handle_t *handle);

#endif
