// http.c: HTTP/1.1 transport on the libuv loop. Requests are parsed with
// nodejs http-parser (pausing after each message, so pipelined requests are
// answered one at a time, in order, with write backpressure); responses are
// whole buffers written with uv_write. Memory of a connection is freed only
// in its close callback, and every write buffer lives until its write
// callback, so a client that vanishes mid-request or mid-response leaks
// nothing. With TLS on (srv_http_set_tls), bytes pass through
// server/http/http_tls.c on their way in and out; every other line is the same
// for both, and a plain connection only tests a NULL pointer.
#include "server/http/http.h"

#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kernels/base/utf8.h"
#include "server/http/http_tls.h"

#define READ_BUF_SIZE (16 * 1024)
// Pending response bytes above which a connection stops reading (and so
// stops parsing pipelined requests) until its writes drain below LOW.
#define WRITE_HIGH_WATER (1024 * 1024)
#define WRITE_LOW_WATER (256 * 1024)
// After the last response of a connection we read and drop what the client
// still sends (so closing does not reset the answer away), up to this much.
#define DRAIN_MAX (1024 * 1024)
// A body refused for its declared Content-Length is read and dropped whole up
// to this much, so a client still sending it gets to read the 413 rather than
// a reset (tests/integration/test_rest.py sends 2.3 MB at a 2 MB limit).
#define DRAIN_DECLARED_MAX (64u * 1024 * 1024)
// Rough bytes a header line costs beyond its name and value (": ", CRLF).
#define HEADER_LINE_OVERHEAD 4
// Buffers a connection keeps between requests (body, headers) are
// freed when larger than this: an idle keep-alive connection that once sent
// a 1 MiB body must not hold 1 MiB (ten thousand of them would hold 10 GB).
#define KEEP_BUF_MAX (16 * 1024)

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
};

typedef struct wreq {
  uv_write_t req;
  conn *c;
  char *body;  // owned; NULL when none
  size_t total;
  char head[];  // status line and headers
} wreq;

// --- connection lifetime

static void maybe_finish(srv_http *h) {
  if (!h->closing || h->open_handles != 0) return;
  void (*cb)(void *) = h->on_closed;
  void *arg = h->closed_arg;
  srv_htls_ctx_destroy(h->tls);
  free(h);
  if (cb) cb(arg);
}

// One line for an incident of class k, unless one went out less than
// SRV_HTTP_NOTE_MS ago; the next one says how many came meanwhile.
static void note(srv_http *h, int k, const char *what) {
  h->notes[k].count++;
  h->notes[k].total++;
  if (!h->lim.note) return;
  uint64_t now = uv_now(h->loop);
  if (h->notes[k].last_ms && now - h->notes[k].last_ms < SRV_HTTP_NOTE_MS) return;
  char msg[320];
  snprintf(msg, sizeof msg, "HTTP port %d: %s (%llu time%s since the last such line)", h->port, what,
           (unsigned long long)h->notes[k].count, h->notes[k].count == 1 ? "" : "s");
  h->notes[k].last_ms = now ? now : 1;
  h->notes[k].count = 0;
  h->lim.note(h->lim.note_arg, msg);
}

// Grows this request's body reservation to total bytes: -1 when the budget
// across all connections cannot take it (nothing reserved then).
static int body_reserve(conn *c, uint64_t total) {
  srv_http *h = c->srv;
  if (total <= c->body_reserved) return 0;
  uint64_t more = total - c->body_reserved;
  if (h->lim.body_budget && h->body_held + more > h->lim.body_budget) return -1;
  h->body_held += more;
  c->body_reserved = total;
  return 0;
}

static void body_release(conn *c) {
  c->srv->body_held -= c->body_reserved;
  c->body_reserved = 0;
}

// The request's buffers once it was handled: large ones go (see KEEP_BUF_MAX).
static void trim_buffers(conn *c) {
  body_release(c);
  if (c->body_cap > KEEP_BUF_MAX) {
    free(c->body);
    c->body = NULL;
    c->body_cap = 0;
  }
  if (c->hdrs_cap > KEEP_BUF_MAX) {
    free(c->hdrs);
    c->hdrs = NULL;
    c->hdrs_cap = c->hdrs_len = 0;
  }
}

static void on_conn_closed(uv_handle_t *handle) {
  conn *c = (conn *)handle;
  srv_http *h = c->srv;
  body_release(c);
  if (c->prev) c->prev->next = c->next;
  else h->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  h->nconns--;
  h->evicting -= c->evicted;
  h->open_handles--;
  if (c->pending) c->pending->c = NULL;  // the deferred answer is dropped when given
  free(c->url);
  free(c->body);
  free(c->hdrs);
  srv_htls_destroy(c->tls);
  free(c);
  maybe_finish(h);
}

static void conn_close(conn *c) {
  if (c->closing) return;
  c->closing = 1;
  c->reading = 0;
  // Cancels queued writes and shutdowns: their callbacks run (ECANCELED)
  // before on_conn_closed, so they may still touch c.
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn *c = (conn *)handle;
  *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void process(conn *c);
static void respond(conn *c, srv_http_response *r, int send_body, int keep);
static int tls_flush(conn *c);

static void read_on(conn *c) {
  if (c->reading || c->closing || c->peer_eof) return;
  int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  if (rc != 0) {
    conn_close(c);
    return;
  }
  c->reading = 1;
}

static void read_off(conn *c) {
  if (!c->reading || c->closing) return;
  // uv_read_stop cannot fail on a TCP stream, but the contract says int.
  if (uv_read_stop((uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  c->reading = 0;
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  conn *c = req->data;
  free(req);
  // On success the client's EOF (read on in drain mode) closes the conn.
  if (status < 0) conn_close(c);
}

// Called once the last response is queued and, again, when writes drain.
static void drain_step(conn *c) {
  if (c->closing || c->writes_pending != 0) return;
  if (c->peer_eof) {
    conn_close(c);
    return;
  }
  if (c->shut) return;
  if (c->tls && !c->tls_notified) {  // close_notify first: the client can tell an end from a cut
    c->tls_notified = 1;
    srv_htls_shutdown(c->tls);
    if (tls_flush(c) != 0 || c->writes_pending != 0) return;  // on_write comes back here
  }
  uv_shutdown_t *req = malloc(sizeof *req);
  if (!req) {
    conn_close(c);
    return;
  }
  req->data = c;
  if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
    free(req);
    conn_close(c);
    return;
  }
  c->shut = 1;
  read_on(c);  // to see the client's EOF
}

// No more requests on c: drop unparsed input, close after the queued writes.
static void conn_finish(conn *c) {
  if (c->closing) return;
  if (!c->draining) {
    c->win_ms = uv_now(c->srv->loop);
    c->win_bytes = c->drained;
  }
  body_release(c);  // nothing more of a body is kept
  c->draining = 1;
  c->backpressure = 0;
  c->roff = c->rlen = 0;
  drain_step(c);
}

// --- parser callbacks (parser->data is the conn)

static int count_header(conn *c, size_t len) {
  c->header_bytes += len;
  if (c->header_bytes > SRV_HTTP_MAX_HEADER) {
    c->fail_status = 431;
    return -1;
  }
  return 0;
}

static int on_message_begin(http_parser *p) {
  conn *c = p->data;
  body_release(c);
  c->url_len = 0;
  c->header_bytes = 0;
  c->body_bytes = 0;
  c->hdrs_len = 0;
  c->hdr_last = 0;
  c->fail_status = 0;
  return 0;
}

// Appends n bytes (and, with nul, a terminating '\0' first) to the header store.
static int hdr_append(conn *c, int nul, const char *at, size_t n) {
  size_t need = c->hdrs_len + n + 2;
  if (need > c->hdrs_cap) {
    size_t cap = c->hdrs_cap ? c->hdrs_cap : 1024;
    while (cap < need) cap *= 2;
    char *q = realloc(c->hdrs, cap);
    if (!q) {
      c->fail_status = 500;
      return -1;
    }
    c->hdrs = q;
    c->hdrs_cap = cap;
  }
  if (nul) c->hdrs[c->hdrs_len++] = '\0';
  memcpy(c->hdrs + c->hdrs_len, at, n);
  c->hdrs_len += n;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (count_header(c, len) != 0) return -1;
  if (c->url_len + len + 1 > c->url_cap) {
    size_t cap = c->url_cap ? c->url_cap : 256;
    while (cap < c->url_len + len + 1) cap *= 2;
    char *u = realloc(c->url, cap);
    if (!u) {
      c->fail_status = 500;
      return -1;
    }
    c->url = u;
    c->url_cap = cap;
  }
  memcpy(c->url + c->url_len, at, len);
  c->url_len += len;
  c->url[c->url_len] = '\0';
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (count_header(c, len + HEADER_LINE_OVERHEAD) != 0) return -1;
  int rc = hdr_append(c, c->hdr_last == 2, at, len);
  c->hdr_last = 1;
  return rc;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (count_header(c, len) != 0) return -1;
  // a field without value callbacks still gets its (empty) value below
  int rc = hdr_append(c, c->hdr_last == 1, at, len);
  c->hdr_last = 2;
  return rc;
}

// 1 when the request target's path (before any '?') ends with suffix.
static int path_ends_with(const conn *c, const char *suffix) {
  size_t n = 0;
  while (n < c->url_len && c->url[n] != '?' && c->url[n] != '#') n++;
  size_t k = strlen(suffix);
  return n >= k && memcmp(c->url + n - k, suffix, k) == 0;
}

static int on_headers_complete(http_parser *p) {
  conn *c = p->data;
  if (c->hdr_last && hdr_append(c, 1, "", 0) != 0) return -1;  // ends the last value
  if (c->hdr_last == 1 && hdr_append(c, 1, "", 0) != 0) return -1;  // a field without value
  c->hdr_last = 0;
  c->max_body = SRV_HTTP_MAX_BODY;
  if (c->srv->max_body_large > SRV_HTTP_MAX_BODY && path_ends_with(c, SRV_HTTP_LARGE_BODY_SUFFIX))
    c->max_body = c->srv->max_body_large;
  c->phase = 2;
  c->phase_ms = c->win_ms = uv_now(c->srv->loop);
  c->win_bytes = 0;
  int over = (p->flags & F_CONTENTLENGTH) && p->content_length > c->max_body;
  // the declared length is reserved against the budget of all connections
  // before any of it is read (Content-Length 0 reserves nothing)
  if (!over && (p->flags & F_CONTENTLENGTH) && p->content_length && body_reserve(c, p->content_length) != 0) {
    note(c->srv, NOTE_BUDGET, "request bodies in flight at --http-max-body-bytes-in-flight: answered 503");
    c->fail_status = 503;
    over = 1;
  }
  if (over) {
    if (!c->fail_status) c->fail_status = 413;
    if (p->content_length <= DRAIN_DECLARED_MAX) c->drain_max = (size_t)p->content_length + DRAIN_MAX;
    return -1;  // anything but 0, 1 and 2 is an error for http-parser
  }
  // the declared length is allocated at once (one allocation for large bodies)
  if ((p->flags & F_CONTENTLENGTH) && p->content_length + 1 > c->body_cap) {
    char *b = realloc(c->body, (size_t)p->content_length + 1);
    if (!b) {
      c->fail_status = 500;
      return -1;
    }
    c->body = b;
    c->body_cap = (size_t)p->content_length + 1;
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (c->body_bytes + len > c->max_body) {
    c->fail_status = 413;
    return -1;
  }
  // a chunked body is reserved as it comes (a declared length already is)
  if (body_reserve(c, c->body_bytes + len) != 0) {
    note(c->srv, NOTE_BUDGET, "request bodies in flight at --http-max-body-bytes-in-flight: answered 503");
    c->fail_status = 503;
    return -1;
  }
  if (c->body_bytes + len + 1 > c->body_cap) {  // chunked: grows by doubling
    size_t cap = c->body_cap ? c->body_cap : 4096;
    while (cap < c->body_bytes + len + 1) cap *= 2;
    char *b = realloc(c->body, cap);
    if (!b) {
      c->fail_status = 500;
      return -1;
    }
    c->body = b;
    c->body_cap = cap;
  }
  memcpy(c->body + c->body_bytes, at, len);
  c->body_bytes += len;
  c->body[c->body_bytes] = '\0';  // JSON parsers may want a string
  return 0;
}

static int on_message_complete(http_parser *p) {
  conn *c = p->data;
  // Read here: http_should_keep_alive is defined in this callback.
  c->keep_alive = http_should_keep_alive(p);
  c->phase = 0;
  // Stop after this message so it is answered before the next is parsed.
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

// --- responses

static void on_write(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  conn *c = w->c;
  c->writes_pending--;
  c->write_bytes_pending -= w->total;
  free(w->body);
  free(w);
  if (c->closing) return;
  c->last_active_ms = uv_now(c->srv->loop);
  if (status < 0) {
    conn_close(c);
    return;
  }
  if (c->draining) {
    drain_step(c);
    return;
  }
  if (c->backpressure && c->write_bytes_pending <= WRITE_LOW_WATER) {
    c->backpressure = 0;
    process(c);
  }
}

// Queues one response. body is owned (freed here, also on failure); with
// send_body 0 only the headers go out (HEAD), Content-Length still says len.
static void send_response(conn *c, int status, const char *content_type, const char *extra, char *body,
                          size_t len, int send_body, int keep_alive) {
  if (c->closing) {
    free(body);
    return;
  }
  if (status < 100 || status > 999) status = 500;
  if (len > UINT_MAX) {  // uv_buf_t lengths are unsigned int
    free(body);
    body = NULL;
    len = 0;
    status = 500;
  }
  if (!content_type) content_type = "text/plain; charset=utf-8";
  const char *reason = http_status_str((enum http_status)status);
  // HTTP/1.0 clients that asked for keep-alive need it said back.
  const char *conn_hdr = !keep_alive ? "Connection: close\r\n"
                         : c->parser.http_major == 1 && c->parser.http_minor == 0
                             ? "Connection: keep-alive\r\n"
                             : "";
  if (!extra) extra = "";
  const char *fmt = "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n";
  int n = snprintf(NULL, 0, fmt, status, reason, content_type, len, extra, conn_hdr);
  wreq *w = n < 0 ? NULL : malloc(sizeof *w + (size_t)n + 1);
  if (!w) {
    free(body);
    conn_close(c);
    return;
  }
  snprintf(w->head, (size_t)n + 1, fmt, status, reason, content_type, len, extra, conn_hdr);
  if (!send_body) {
    free(body);
    body = NULL;
    len = 0;
  }
  if (c->tls) {  // head and body leave as records, in one buffer
    int bad = srv_htls_write(c->tls, w->head, (size_t)n) != 0 || srv_htls_write(c->tls, body, len) != 0;
    free(body);
    free(w);
    if (bad) conn_close(c);
    else (void)tls_flush(c);
    return;
  }
  w->c = c;
  w->body = body;
  w->total = (size_t)n + len;
  uv_buf_t bufs[2] = {uv_buf_init(w->head, (unsigned)n), uv_buf_init(body, (unsigned)len)};
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, len ? 2 : 1, on_write);
  if (rc != 0) {
    free(w->body);
    free(w);
    conn_close(c);
    return;
  }
  c->writes_pending++;
  c->write_bytes_pending += w->total;
}

// Queues the ciphertext TLS produced (records, handshake messages, alerts,
// close_notify) as one write. 0, or -1 when the connection is closing.
static int tls_flush(conn *c) {
  size_t len = 0;
  char *out = srv_htls_take_output(c->tls, &len);
  if (len == 0) return c->closing ? -1 : 0;
  wreq *w = out && !c->closing && len <= UINT_MAX ? malloc(sizeof *w + 1) : NULL;
  if (!w) {
    free(out);
    conn_close(c);
    return -1;
  }
  w->c = c;
  w->body = out;
  w->total = len;
  w->head[0] = '\0';
  uv_buf_t b = uv_buf_init(out, (unsigned)len);
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
    free(out);
    free(w);
    conn_close(c);
    return -1;
  }
  c->writes_pending++;
  c->write_bytes_pending += len;
  return 0;
}

static void send_error(conn *c, int status) {
  const char *reason = http_status_str((enum http_status)status);
  size_t len = strlen(reason) + 1;
  char *body = malloc(len + 1);
  if (!body) {
    conn_close(c);
    return;
  }
  memcpy(body, reason, len - 1);
  body[len - 1] = '\n';
  body[len] = '\0';
  // 503 is a passing state (connections, body budget): a client may retry
  send_response(c, status, NULL, status == 503 ? "Retry-After: 1\r\n" : NULL, body, len, 1, 0);
  conn_finish(c);
}

// One complete request: route it through the handler and queue the answer.
static void dispatch(conn *c) {
  srv_http *h = c->srv;
  int is_connect = c->parser.method == HTTP_CONNECT;
  int keep = c->keep_alive && !c->parser.upgrade && !is_connect;
  struct http_parser_url u;
  http_parser_url_init(&u);
  if (c->url_len == 0 || http_parser_parse_url(c->url, c->url_len, is_connect, &u) != 0) {
    send_error(c, 400);
    return;
  }
  // url has one spare byte, and '?' and '#' end the path and query, so both
  // can be terminated in place.
  const char *path = "/", *query = NULL;
  if (u.field_set & (1 << UF_PATH)) {
    path = c->url + u.field_data[UF_PATH].off;
    c->url[u.field_data[UF_PATH].off + u.field_data[UF_PATH].len] = '\0';
  }
  if (u.field_set & (1 << UF_QUERY)) {
    query = c->url + u.field_data[UF_QUERY].off;
    c->url[u.field_data[UF_QUERY].off + u.field_data[UF_QUERY].len] = '\0';
  }
  enum http_method m = (enum http_method)c->parser.method;
  srv_http_request req = {.method = http_method_str(m), .path = path, .query = query,
                          .body = c->body_bytes ? c->body : NULL, .body_len = (size_t)c->body_bytes,
                          .body_max = (size_t)c->max_body,
                          .headers_ = c->hdrs, .headers_len_ = c->hdrs_len, .conn_ = c};
  srv_http_response resp = {.status = 200};
  h->handler(h->ctx, &req, &resp);
  trim_buffers(c);  // the handler is done with the body (a deferred answer copied what it needs)
  if (c->pending) {
    c->pending->send_body = m != HTTP_HEAD;
    c->pending->keep = keep;
    return;  // srv_http_complete answers
  }
  respond(c, &resp, m != HTTP_HEAD, keep);
}

// Queues the handler's answer; afterwards the connection goes on (keep) or ends.
static void respond(conn *c, srv_http_response *r, int send_body, int keep) {
  srv_http_response resp = *r;
  char *body = resp.body;
  if (!resp.free_body && resp.len) {
    body = malloc(resp.len);
    if (!body) {
      conn_close(c);
      return;
    }
    memcpy(body, resp.body, resp.len);
  } else if (!resp.len && resp.free_body) {
    free(body);
    body = NULL;
  } else if (!resp.len) {
    body = NULL;
  }
  send_response(c, resp.status, resp.content_type, resp.headers, body, resp.len, send_body, keep);
  if (!keep) conn_finish(c);
}

const char *srv_http_request_header(const srv_http_request *req, const char *name) {
  const char *p = req->headers_, *end = p ? p + req->headers_len_ : NULL;
  while (p && p < end) {
    const char *value = p + strlen(p) + 1;
    if (value >= end) return NULL;
    if (strcasecmp(p, name) == 0) return value;
    p = value + strlen(value) + 1;
  }
  return NULL;
}

srv_http_pending *srv_http_defer(const srv_http_request *req) {
  conn *c = req->conn_;
  srv_http_pending *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->c = c;
  c->pending = p;
  return p;
}

void srv_http_complete(srv_http_pending *p, srv_http_response *resp) {
  conn *c = p->c;
  int send_body = p->send_body, keep = p->keep;
  free(p);
  if (!c) {
    if (resp->free_body) free(resp->body);
    return;
  }
  c->pending = NULL;
  c->last_active_ms = uv_now(c->srv->loop);
  respond(c, resp, send_body, keep);
  if (keep && !c->closing && !c->draining) process(c);  // pipelined requests, then reading again
}

// Fills rbuf with the plaintext TLS holds (advancing the handshake on the
// way) and sends what that produced. 1 when rbuf has new bytes; 0 when TLS
// wants more from the socket, or the connection ended or failed.
static int tls_pull(conn *c) {
  long n = srv_htls_read(c->tls, c->rbuf, sizeof c->rbuf);
  if (tls_flush(c) != 0) return 0;  // handshake messages, session tickets, alerts
  if (n > 0) {
    c->roff = 0;
    c->rlen = (size_t)n;
    return 1;
  }
  if (n == SRV_HTLS_WANT_INPUT) return 0;
  // close_notify is the client's end of the stream, like EOF; a failure has
  // had its alert queued above, and the connection ends after it
  if (n == SRV_HTLS_FAILED) c->tls_notified = 1;
  conn_finish(c);
  return 0;
}

// Parses what is buffered, answering each complete request, until the
// buffer is empty, the connection ends, or writes back up.
static void process(conn *c) {
again:
  while (!c->closing && !c->draining && c->roff < c->rlen) {
    if (c->phase == 0) {  // bytes of a request (even the CRLFs before one): its header clock starts
      c->phase = 1;
      c->phase_ms = uv_now(c->srv->loop);
    }
    size_t n = http_parser_execute(&c->parser, &parser_settings, c->rbuf + c->roff, c->rlen - c->roff);
    c->roff += n;
    enum http_errno pe = HTTP_PARSER_ERRNO(&c->parser);
    if (pe == HPE_PAUSED) {
      http_parser_pause(&c->parser, 0);
      dispatch(c);
      if (c->pending) return;  // reading stays off until srv_http_complete
      if (c->write_bytes_pending > WRITE_HIGH_WATER && !c->closing && !c->draining) {
        c->backpressure = 1;
        read_off(c);
        return;
      }
      continue;
    }
    if (pe != HPE_OK) {
      int status = c->fail_status ? c->fail_status : pe == HPE_HEADER_OVERFLOW ? 431 : 400;
      send_error(c, status);
      return;
    }
    if (c->parser.upgrade) {
      // Unreachable in practice (message_complete pauses first); be safe.
      conn_finish(c);
      return;
    }
  }
  if (c->closing || c->draining || c->roff != c->rlen) return;
  if (c->tls && tls_pull(c)) goto again;
  if (!c->closing && !c->draining) read_on(c);
}

// --- reading and accepting

// A plain HTTP request on the TLS port: said so in plain text (an alert
// would read as garbage), and the connection ends.
static void refuse_plain_http(conn *c) {
  static const char msg[] = "this port speaks HTTPS: use https://\n";
  srv_htls_destroy(c->tls);
  c->tls = NULL;  // the answer itself is plain; the connection ends with it
  char *body = malloc(sizeof msg - 1);
  if (!body) {
    conn_close(c);
    return;
  }
  memcpy(body, msg, sizeof msg - 1);
  c->draining = 1;  // nothing of this request is parsed
  send_response(c, 400, NULL, NULL, body, sizeof msg - 1, 1, 0);
  conn_finish(c);
}

// Ciphertext arrived in rbuf: it moves into TLS, and rbuf takes plaintext.
static void tls_on_read(conn *c, size_t n) {
  if (!c->tls_started) {
    c->tls_started = 1;
    if (srv_htls_looks_like_plain_http(c->rbuf, n)) {
      refuse_plain_http(c);
      return;
    }
  }
  if (srv_htls_feed(c->tls, c->rbuf, n) != 0) {
    conn_close(c);
    return;
  }
  c->roff = c->rlen = 0;
  read_off(c);  // back on once TLS wants more
  process(c);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  conn *c = (conn *)stream;
  if (c->closing) return;
  if (nread < 0) {
    if (nread != UV_EOF) {
      conn_close(c);
      return;
    }
    read_off(c);
    c->peer_eof = 1;
    // A half-closed client still gets the answers already queued; a request
    // cut short gets none.
    c->draining = 1;
    c->roff = c->rlen = 0;
    drain_step(c);
    return;
  }
  if (nread == 0) return;
  c->last_active_ms = uv_now(c->srv->loop);
  if (c->draining) {
    c->drained += (size_t)nread;
    if (c->drained > (c->drain_max ? c->drain_max : DRAIN_MAX)) conn_close(c);
    return;
  }
  if (c->tls) {
    tls_on_read(c, (size_t)nread);
    return;
  }
  c->roff = 0;
  c->rlen = (size_t)nread;
  read_off(c);  // back on once rbuf is parsed, unless writes are backed up
  process(c);
}

// A connection past srv_http_limits.max_conns: accepted (libuv stops
// watching the listener until a connection is taken), told 503 in one
// non-blocking write and closed; it holds its descriptor only until then.
typedef struct refused {
  uv_tcp_t tcp;
  srv_http *h;
} refused;

static void on_refused_closed(uv_handle_t *handle) {
  refused *r = (refused *)handle;
  srv_http *h = r->h;
  free(r);
  h->open_handles--;
  maybe_finish(h);
}

static void refuse_connection(srv_http *h, uv_stream_t *server) {
  static const char msg[] =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 34\r\n"
      "Retry-After: 1\r\nConnection: close\r\n\r\ntoo many connections to this port\n";
  refused *r = malloc(sizeof *r);
  if (!r) return;  // stays in the backlog
  if (uv_tcp_init(h->loop, &r->tcp) != 0) {
    free(r);
    return;
  }
  r->h = h;
  h->open_handles++;
  if (uv_accept(server, (uv_stream_t *)&r->tcp) == 0 && !h->tls) {  // a TLS client could not read plain text
    uv_buf_t b = uv_buf_init((char *)msg, sizeof msg - 1);
    (void)uv_try_write((uv_stream_t *)&r->tcp, &b, 1);  // a fresh socket's buffer takes it whole
    // What the client already sent is read away, so that closing sends a
    // FIN after the answer rather than a reset that may discard it.
    uv_os_fd_t fd;
    char sink[4096];
    if (uv_fileno((uv_handle_t *)&r->tcp, &fd) == 0) {
      for (int i = 0; i < 4 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
      }
      (void)shutdown(fd, SHUT_WR);
    }
  }
  uv_close((uv_handle_t *)&r->tcp, on_refused_closed);
  char what[128];
  snprintf(what, sizeof what, "at --http-max-connections (%zu), none idle: new connections answered 503 and closed",
           h->lim.max_conns);
  note(h, NOTE_CAP, what);
}

// At the cap a connection that holds nothing (between requests, nothing
// buffered, no answer pending or being written: a client that connected and
// went silent, or a keep-alive one at rest) gives way to a new one, the one
// idle longest first (nginx's reusable connections): otherwise a client
// holding the cap in silent sockets, renewed before the idle timeout, locks
// everyone out. Connections mid-request are not taken (their headers and
// bodies have deadlines of their own). Evictions whose close has not called
// back still hold a descriptor: at most EVICT_MAX at once, so a burst of
// accepts in one loop turn cannot overshoot the cap by more. One pass over
// the list, only at the cap: 10,000 connections cost tens of microseconds.
#define EVICT_MAX 64

static conn *idlest(srv_http *h) {
  conn *best = NULL;
  for (conn *c = h->conns; c; c = c->next) {
    if (c->closing || c->pending || c->phase != 0 || c->roff != c->rlen || c->writes_pending || c->draining)
      continue;
    // <=: the list is newest first, so of those idle since the same tick the one accepted first goes
    if (!best || c->last_active_ms <= best->last_active_ms) best = c;
  }
  return best;
}

static int evict_idle(srv_http *h) {
  if (h->evicting >= EVICT_MAX || h->evicting >= h->lim.max_conns) return -1;
  conn *c = idlest(h);
  if (!c) return -1;
  c->evicted = 1;
  h->evicting++;
  conn_close(c);
  char what[160];
  snprintf(what, sizeof what, "at its connection cap (%zu): the longest idle connections closed for new ones",
           h->lim.max_conns);
  note(h, NOTE_EVICT, what);
  return 0;
}

static void on_connection(uv_stream_t *server, int status) {
  srv_http *h = server->data;
  if (status < 0) {
    // On EMFILE/ENFILE libuv (src/unix/stream.c, uv__emfile_trick) closes
    // its reserve descriptor, accepts and closes every pending connection
    // and reopens the reserve, so the listener goes on and nothing spins;
    // the dropped clients see a reset. It calls back only when that trick
    // fails itself (it hides the EMFILE it recovers from): keeping the cap
    // under the descriptor limit is what prevents both.
    if (!h->closing) {
      char what[128];
      snprintf(what, sizeof what, "accept failed: %s (pending connections dropped)", uv_strerror(status));
      note(h, NOTE_ACCEPT, what);
    }
    return;
  }
  if (h->closing) return;
  // closing evicted connections still count in nconns until they call back
  if (h->lim.max_conns && h->nconns - h->evicting >= h->lim.max_conns && evict_idle(h) != 0) {
    refuse_connection(h, server);
    return;
  }
  conn *c = calloc(1, sizeof *c);
  // Without memory the connection stays in the backlog; libuv resumes
  // accepting on the next uv_accept.
  if (!c) return;
  if (uv_tcp_init(h->loop, &c->tcp) != 0) {
    free(c);
    return;
  }
  c->srv = h;
  c->next = h->conns;
  if (h->conns) h->conns->prev = c;
  h->conns = c;
  h->nconns++;
  h->open_handles++;
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  c->last_active_ms = c->accepted_ms = uv_now(h->loop);
  if (h->tls && !(c->tls = srv_htls_create(h->tls))) {
    conn_close(c);  // not accepted: it stays in the backlog until memory frees up
    return;
  }
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  // Small responses on keep-alive connections must not wait for Nagle.
  if (uv_tcp_nodelay(&c->tcp, 1) != 0) {
    conn_close(c);
    return;
  }
  read_on(c);
}

// --- idle sweep

// 1 when `bytes` since `since` are fewer than the minimum rate asks, once
// SRV_HTTP_BODY_GRACE_MS have passed.
// Windows of SRV_HTTP_BODY_GRACE_MS (the first is the grace) must each
// bring the minimum rate's bytes, so a body that comes fast and then stalls
// is caught within two windows, not once its average since the headers
// falls (59 MB then a stall: half an hour at 32 KiB/s).
static int too_slow(const srv_http *h, conn *c, uint64_t bytes, uint64_t now) {
  uint64_t ms = now - c->win_ms;
  if (!h->lim.body_min_rate || ms < SRV_HTTP_BODY_GRACE_MS) return 0;
  if ((bytes - c->win_bytes) * 1000 < h->lim.body_min_rate * ms) return 1;
  c->win_ms = now;
  c->win_bytes = bytes;
  return 0;
}

// A request past its deadline: 408, and the connection ends.
static void time_out(conn *c, int k, const char *what) {
  note(c->srv, k, what);
  send_error(c, 408);
}

// One pass over every connection: a few comparisons each, so ten thousand
// connections cost tens of microseconds a sweep.
static void on_sweep(uv_timer_t *t) {
  srv_http *h = t->data;
  uint64_t now = uv_now(h->loop);
  for (conn *c = h->conns; c; c = c->next) {  // closing unlinks only in the close callback
    if (c->closing || c->pending) continue;
    if (h->idle_ms && now - c->last_active_ms >= h->idle_ms) conn_close(c);
    // trickling a handshake byte by byte keeps a connection active, not through it
    else if (c->tls && !srv_htls_handshake_done(c->tls) && now - c->accepted_ms >= h->handshake_ms) conn_close(c);
    // so does trickling what follows the last answer (the client's EOF is awaited)
    else if (c->draining) {
      if (c->writes_pending) {  // a slow reader of a long answer: the window starts once it is written
        c->win_ms = now;
        c->win_bytes = c->drained;
      } else if (too_slow(h, c, c->drained, now)) {
        conn_close(c);
      }
    } else if (c->phase == 1 && h->lim.header_ms && now - c->phase_ms >= h->lim.header_ms)
      time_out(c, NOTE_HEADER, "request headers not complete within --http-header-timeout: answered 408");
    else if (c->phase == 2 && too_slow(h, c, c->body_bytes, now))
      time_out(c, NOTE_BODY_RATE, "request body slower than --http-body-min-rate: answered 408");
  }
}

// Sweeps a few times per timeout (idle, handshake, headers), at most once a
// second (the body rate is checked after a 10 s grace: once a second is fine).
static int sweep_start(srv_http *h) {
  uint64_t every = !h->idle_ms ? 1000 : h->idle_ms / 4 ? h->idle_ms / 4 : 1;
  if (h->tls && h->handshake_ms / 4 < every) every = h->handshake_ms / 4 ? h->handshake_ms / 4 : 1;
  if (h->lim.header_ms && h->lim.header_ms / 4 < every) every = h->lim.header_ms / 4 ? h->lim.header_ms / 4 : 1;
  if (every > 1000) every = 1000;
  return uv_timer_start(&h->sweep, on_sweep, every, every);
}

static void on_sweep_closed(uv_handle_t *handle) {
  srv_http *h = handle->data;
  h->open_handles--;
  maybe_finish(h);
}

int srv_http_set_idle_timeout(srv_http *h, uint64_t ms, err *e) {
  int rc = uv_timer_stop(&h->sweep);
  h->idle_ms = ms;
  if (rc == 0) rc = sweep_start(h);  // also with ms 0: the other deadlines need it
  if (rc != 0) return err_set(e, ERR_INTERNAL, "http endpoint: idle sweep timer: %s", uv_strerror(rc));
  return 0;
}

// --- public API

static void on_listener_closed(uv_handle_t *handle) {
  srv_http *h = handle->data;
  h->open_handles--;
  maybe_finish(h);
}

// Creates, binds and listens on a socket by hand, so that a busy port fails
// before any uv handle exists and nothing is left closing on the loop.
static int open_listen_socket(const char *host, int port, int *fd_out, err *e) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(host, service, &hints, &res);
  if (gai != 0) {
    return err_set(e, ERR_INVALID_ARGUMENT, "http endpoint %s:%d: cannot resolve host: %s", host, port,
                   gai_strerror(gai));
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int en = errno;
    freeaddrinfo(res);
    return err_set(e, ERR_INTERNAL, "http endpoint %s:%d: socket: %s", host, port, strerror(en));
  }
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
    int en = errno;
    freeaddrinfo(res);
    close(fd);
    err_code code = en == EADDRINUSE || en == EADDRNOTAVAIL || en == EACCES ? ERR_UNAVAILABLE : ERR_INTERNAL;
    return err_set(e, code, "http endpoint %s:%d: cannot listen: %s", host, port, strerror(en));
  }
  freeaddrinfo(res);
  *fd_out = fd;
  return 0;
}

int srv_http_create(uv_loop_t *loop, const char *host, int port, srv_http_handler handler, void *ctx,
                    srv_http **out, err *e) {
  if (!loop || !handler || !out || port < 0 || port > 65535) {
    return err_set(e, ERR_INVALID_ARGUMENT, "srv_http_create: loop, handler and out are required, port in [0, 65535]");
  }
  if (!host || !*host) host = "0.0.0.0";
  int fd = -1;
  TRY(open_listen_socket(host, port, &fd, e));

  struct sockaddr_storage ss;
  socklen_t sslen = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
    int en = errno;
    close(fd);
    return err_set(e, ERR_INTERNAL, "http endpoint %s:%d: getsockname: %s", host, port, strerror(en));
  }
  int bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);

  srv_http *h = calloc(1, sizeof *h);
  if (!h) {
    close(fd);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "http endpoint %s:%d: out of memory", host, port);
  }
  h->loop = loop;
  h->handler = handler;
  h->ctx = ctx;
  h->port = bound;
  int rc = uv_tcp_init(loop, &h->listener);
  if (rc != 0) {
    close(fd);
    free(h);
    return err_set(e, ERR_INTERNAL, "http endpoint %s:%d: uv_tcp_init: %s", host, port, uv_strerror(rc));
  }
  h->listener.data = h;
  h->open_handles = 1;
  h->idle_ms = SRV_HTTP_IDLE_MS;
  rc = uv_timer_init(loop, &h->sweep);
  if (rc == 0) {
    h->sweep.data = h;
    h->open_handles++;
    rc = sweep_start(h);
  }
  if (rc == 0) rc = uv_tcp_open(&h->listener, fd);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&h->listener, SOMAXCONN, on_connection);
  if (rc != 0) {
    // The handle exists now; it can only be freed from its close callback.
    if (uv_fileno((uv_handle_t *)&h->listener, &(uv_os_fd_t){0}) != 0) close(fd);
    h->closing = 1;
    if (h->open_handles > 1) uv_close((uv_handle_t *)&h->sweep, on_sweep_closed);
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
    return err_set(e, ERR_INTERNAL, "http endpoint %s:%d: listen: %s", host, port, uv_strerror(rc));
  }
  *out = h;
  return 0;
}

int srv_http_port(const srv_http *h) { return h->port; }

void srv_http_set_large_body(srv_http *h, size_t max_bytes) { h->max_body_large = max_bytes; }

int srv_http_set_tls(srv_http *h, srv_htls_ctx *tls, uint64_t handshake_ms, err *e) {
  if (h->tls || h->nconns || !tls || handshake_ms == 0) {
    srv_htls_ctx_destroy(tls);
    return err_set(e, ERR_INVALID_ARGUMENT, "http endpoint: TLS is set once, before any connection, with a timeout");
  }
  h->tls = tls;
  h->handshake_ms = handshake_ms;
  int rc = uv_timer_stop(&h->sweep);
  if (rc == 0) rc = sweep_start(h);
  if (rc != 0) return err_set(e, ERR_INTERNAL, "http endpoint: idle sweep timer: %s", uv_strerror(rc));
  return 0;
}

size_t srv_http_connections(const srv_http *h) { return h->nconns; }

uint64_t srv_http_body_bytes(const srv_http *h) { return h->body_held; }

uint64_t srv_http_incidents(const srv_http *h, srv_http_incident k) {
  return k < SRV_HTTP_INCIDENT_N ? h->notes[k].total : 0;
}

int srv_http_set_limits(srv_http *h, const srv_http_limits *l, err *e) {
  h->lim = *l;
  int rc = uv_timer_stop(&h->sweep);
  if (rc == 0) rc = sweep_start(h);
  if (rc != 0) return err_set(e, ERR_INTERNAL, "http endpoint: idle sweep timer: %s", uv_strerror(rc));
  return 0;
}

void srv_http_close(srv_http *h, void (*on_closed)(void *arg), void *arg) {
  h->closing = 1;
  h->on_closed = on_closed;
  h->closed_arg = arg;
  uv_close((uv_handle_t *)&h->sweep, on_sweep_closed);
  uv_close((uv_handle_t *)&h->listener, on_listener_closed);
  for (conn *c = h->conns; c; c = c->next) conn_close(c);
}

int srv_http_decode_segment(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n) return -1;
      char hex[3] = {s[i + 1], s[i + 2], 0};
      char *end;
      long v = strtol(hex, &end, 16);
      if (*end || v == 0) return -1;
      c = (char)v;
      i += 2;
    }
    if (o + 1 >= cap) return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  // a name that is not UTF-8 would be echoed into the JSON answer (an
  // unknown model's error), which is then not JSON (found by fuzz_rest)
  return utf8_valid(out, o) ? 0 : -1;
}

int srv_http_json_nul(const char *s, size_t n) {
  if (!s || !n) return 0;
  if (memchr(s, 0, n)) return 1;
  for (size_t i = 0; i + 1 < n; i++) {
    if (s[i] != '\\') continue;
    // an escape: \u0000 is NUL; any other (\\ included) is skipped whole,
    // so the u of "\\u0000" (a backslash, then text) is not taken for one
    if (s[i + 1] == 'u' && n - i >= 6 && memcmp(s + i + 2, "0000", 4) == 0) return 1;
    i++;
  }
  return 0;
}
