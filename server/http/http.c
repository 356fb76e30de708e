// http.c: HTTP/1.1 transport on the libuv loop: the endpoint's public API
// (server/http/http.h): the listening socket, the options (body sizes, TLS,
// timeouts, limits), the counters /metrics reads, closing, and the pure
// helpers routes use (URL segments, NUL in JSON). The rest lies below it,
// calling one way: http_accept.c (new connections, the cap, the sweep) ->
// http_conn.c (a connection's reads, parse loop, answers, writes, close) ->
// http_parse.c (http-parser's callbacks, header and body limits, the body
// budget, incident lines); http_internal.h is what they share.
#include "server/http/http.h"

#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kernels/base/utf8.h"
#include "server/http/http_internal.h"
#include "server/http/http_tls.h"

int srv_http_set_idle_timeout(srv_http *h, uint64_t ms, err *e) {
  int rc = uv_timer_stop(&h->sweep);
  h->idle_ms = ms;
  if (rc == 0) rc = srv_http__sweep_start(h);  // also with ms 0: the other deadlines need it
  if (rc != 0) return err_set(e, ERR_INTERNAL, "http endpoint: idle sweep timer: %s", uv_strerror(rc));
  return 0;
}

// --- public API

static void on_listener_closed(uv_handle_t *handle) {
  srv_http *h = handle->data;
  h->open_handles--;
  srv_http__maybe_finish(h);
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
    rc = srv_http__sweep_start(h);
  }
  if (rc == 0) rc = uv_tcp_open(&h->listener, fd);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&h->listener, SOMAXCONN, srv_http__on_connection);
  if (rc != 0) {
    // The handle exists now; it can only be freed from its close callback.
    if (uv_fileno((uv_handle_t *)&h->listener, &(uv_os_fd_t){0}) != 0) close(fd);
    h->closing = 1;
    if (h->open_handles > 1) uv_close((uv_handle_t *)&h->sweep, srv_http__on_sweep_closed);
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
  if (rc == 0) rc = srv_http__sweep_start(h);
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
  if (rc == 0) rc = srv_http__sweep_start(h);
  if (rc != 0) return err_set(e, ERR_INTERNAL, "http endpoint: idle sweep timer: %s", uv_strerror(rc));
  return 0;
}

void srv_http_close(srv_http *h, void (*on_closed)(void *arg), void *arg) {
  h->closing = 1;
  h->on_closed = on_closed;
  h->closed_arg = arg;
  uv_close((uv_handle_t *)&h->sweep, srv_http__on_sweep_closed);
  uv_close((uv_handle_t *)&h->listener, on_listener_closed);
  for (conn *c = h->conns; c; c = c->next) srv_http__conn_close(c);
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
