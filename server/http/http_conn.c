// http_conn.c: one connection's life once accepted: reading (and TLS on the
// way in), the parse loop that pauses after each message so pipelined
// requests are answered one at a time, in order, with write backpressure,
// the hand-off of each request to the handler (dispatch, deferred answers),
// writing answers as whole buffers with uv_write (and TLS on the way out),
// draining after the last answer, and closing. These are one file because
// they call each other in a circle through libuv's callbacks (a finished
// write resumes parsing, parsing writes answers); http_accept.c and http.c
// call into it, and it calls only http_parse.c (tests/unit/check_circles.py).
// Memory of a connection is freed only in its close callback, and every
// write buffer lives until its write callback, so a client that vanishes
// mid-request or mid-response leaks nothing. With TLS on, bytes pass through
// server/http/http_tls.c on their way in and out; every other line is the
// same for both, and a plain connection only tests a NULL pointer.
#include <http_parser.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/http.h"
#include "server/http/http_internal.h"
#include "server/http/http_tls.h"

// Pending response bytes above which a connection stops reading (and so
// stops parsing pipelined requests) until its writes drain below LOW.
#define WRITE_HIGH_WATER (1024 * 1024)
#define WRITE_LOW_WATER (256 * 1024)

typedef struct wreq {
  uv_write_t req;
  conn *c;
  char *body;  // owned; NULL when none
  size_t total;
  char head[];  // status line and headers
} wreq;

// --- connection lifetime

void srv_http__maybe_finish(srv_http *h) {
  if (!h->closing || h->open_handles != 0) return;
  void (*cb)(void *) = h->on_closed;
  void *arg = h->closed_arg;
  srv_htls_ctx_destroy(h->tls);
  free(h);
  if (cb) cb(arg);
}

static void on_conn_closed(uv_handle_t *handle) {
  conn *c = (conn *)handle;
  srv_http *h = c->srv;
  srv_http__body_release(c);
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
  srv_http__maybe_finish(h);
}

void srv_http__conn_close(conn *c) {
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

void srv_http__read_on(conn *c) {
  if (c->reading || c->closing || c->peer_eof) return;
  int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  if (rc != 0) {
    srv_http__conn_close(c);
    return;
  }
  c->reading = 1;
}

static void read_off(conn *c) {
  if (!c->reading || c->closing) return;
  // uv_read_stop cannot fail on a TCP stream, but the contract says int.
  if (uv_read_stop((uv_stream_t *)&c->tcp) != 0) {
    srv_http__conn_close(c);
    return;
  }
  c->reading = 0;
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  conn *c = req->data;
  free(req);
  // On success the client's EOF (read on in drain mode) closes the conn.
  if (status < 0) srv_http__conn_close(c);
}

// Called once the last response is queued and, again, when writes drain.
static void drain_step(conn *c) {
  if (c->closing || c->writes_pending != 0) return;
  if (c->peer_eof) {
    srv_http__conn_close(c);
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
    srv_http__conn_close(c);
    return;
  }
  req->data = c;
  if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
    free(req);
    srv_http__conn_close(c);
    return;
  }
  c->shut = 1;
  srv_http__read_on(c);  // to see the client's EOF
}

// No more requests on c: drop unparsed input, close after the queued writes.
static void conn_finish(conn *c) {
  if (c->closing) return;
  if (!c->draining) {
    c->win_ms = uv_now(c->srv->loop);
    c->win_bytes = c->drained;
  }
  srv_http__body_release(c);  // nothing more of a body is kept
  c->draining = 1;
  c->backpressure = 0;
  c->roff = c->rlen = 0;
  drain_step(c);
}

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
    srv_http__conn_close(c);
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
    srv_http__conn_close(c);
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
    if (bad) srv_http__conn_close(c);
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
    srv_http__conn_close(c);
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
    srv_http__conn_close(c);
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
    srv_http__conn_close(c);
    return -1;
  }
  c->writes_pending++;
  c->write_bytes_pending += len;
  return 0;
}

void srv_http__send_error(conn *c, int status) {
  const char *reason = http_status_str((enum http_status)status);
  size_t len = strlen(reason) + 1;
  char *body = malloc(len + 1);
  if (!body) {
    srv_http__conn_close(c);
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
    srv_http__send_error(c, 400);
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
  srv_http__trim_buffers(c);  // the handler is done with the body (a deferred answer copied what it needs)
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
      srv_http__conn_close(c);
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

// --- a streamed answer (srv_http_stream_*): headers once, then chunks as they come

// Queues buf (owned, freed here also on failure) as it is, through TLS when the connection speaks it.
static void write_raw(conn *c, char *buf, size_t len) {
  if (c->closing || len > UINT_MAX) {
    free(buf);
    return;
  }
  if (c->tls) {
    int bad = srv_htls_write(c->tls, buf, len) != 0;
    free(buf);
    if (bad) srv_http__conn_close(c);
    else (void)tls_flush(c);
    return;
  }
  wreq *w = malloc(sizeof *w + 1);
  if (!w) {
    free(buf);
    srv_http__conn_close(c);
    return;
  }
  w->c = c;
  w->body = buf;
  w->total = len;
  w->head[0] = '\0';
  uv_buf_t b = uv_buf_init(buf, (unsigned)len);
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
    free(buf);
    free(w);
    srv_http__conn_close(c);
    return;
  }
  c->writes_pending++;
  c->write_bytes_pending += len;
}

int srv_http_stream_begin(srv_http_pending *p, int status, const char *content_type) {
  conn *c = p->c;
  if (!c || c->closing) return -1;
  // HTTP/1.0 has no chunked coding: its body runs to the connection's end
  p->chunked = !(c->parser.http_major == 1 && c->parser.http_minor == 0);
  if (!p->chunked) p->keep = 0;
  p->streaming = 1;
  const char *reason = http_status_str((enum http_status)status);
  char *head = NULL;
  int n = asprintf(&head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n%s%s\r\n", status, reason,
                   content_type, p->chunked ? "Transfer-Encoding: chunked\r\n" : "",
                   p->keep ? "" : "Connection: close\r\n");
  if (n < 0) return -1;
  c->last_active_ms = uv_now(c->srv->loop);
  write_raw(c, head, (size_t)n);
  return p->c && !c->closing ? 0 : -1;
}

int srv_http_stream_write(srv_http_pending *p, const char *data, size_t len) {
  conn *c = p->c;
  if (!c || c->closing || !p->streaming) return -1;
  if (!len) return 0;
  char *buf = malloc(len + 32);
  if (!buf) return -1;
  size_t o = p->chunked ? (size_t)snprintf(buf, 32, "%zx\r\n", len) : 0;
  memcpy(buf + o, data, len);
  o += len;
  if (p->chunked) buf[o++] = '\r', buf[o++] = '\n';
  c->last_active_ms = uv_now(c->srv->loop);
  write_raw(c, buf, o);
  return p->c && !c->closing ? 0 : -1;
}

void srv_http_stream_end(srv_http_pending *p) {
  conn *c = p->c;
  int keep = p->keep, chunked = p->chunked, streaming = p->streaming;
  free(p);
  if (!c) return;
  c->pending = NULL;
  if (c->closing) return;
  c->last_active_ms = uv_now(c->srv->loop);
  if (streaming && chunked) {
    char *end = strdup("0\r\n\r\n");
    if (end) write_raw(c, end, 5);
    else srv_http__conn_close(c);
  }
  if (c->closing) return;
  if (!keep || !streaming) {
    conn_finish(c);
    return;
  }
  if (!c->draining) process(c);  // pipelined requests, then reading again
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
    size_t n = http_parser_execute(&c->parser, &srv_http__parser_settings, c->rbuf + c->roff, c->rlen - c->roff);
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
      srv_http__send_error(c, status);
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
  if (!c->closing && !c->draining) srv_http__read_on(c);
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
    srv_http__conn_close(c);
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
    srv_http__conn_close(c);
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
      srv_http__conn_close(c);
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
    if (c->drained > (c->drain_max ? c->drain_max : DRAIN_MAX)) srv_http__conn_close(c);
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
