// http_accept.c: new connections and the sweep over open ones. Accepting:
// the connection cap (--http-max-connections), the longest idle connection
// evicted for a new one there, a 503 for the rest. The sweep: a timer that
// closes idle connections and those past the TLS handshake, header and
// body-rate deadlines. It calls into http_conn.c (closing, reading, the 408)
// and http_parse.c (incident lines), and http.c calls it when it starts
// listening and when a limit changes (tests/unit/check_circles.py keeps calls
// one way).
#include <http_parser.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "server/http/http.h"
#include "server/http/http_internal.h"
#include "server/http/http_tls.h"

// --- accepting

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
  srv_http__maybe_finish(h);
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
  srv_http__note(h, NOTE_CAP, what);
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
  srv_http__conn_close(c);
  char what[160];
  snprintf(what, sizeof what, "at its connection cap (%zu): the longest idle connections closed for new ones",
           h->lim.max_conns);
  srv_http__note(h, NOTE_EVICT, what);
  return 0;
}

void srv_http__on_connection(uv_stream_t *server, int status) {
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
      srv_http__note(h, NOTE_ACCEPT, what);
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
    srv_http__conn_close(c);  // not accepted: it stays in the backlog until memory frees up
    return;
  }
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    srv_http__conn_close(c);
    return;
  }
  // Small responses on keep-alive connections must not wait for Nagle.
  if (uv_tcp_nodelay(&c->tcp, 1) != 0) {
    srv_http__conn_close(c);
    return;
  }
  srv_http__read_on(c);
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
  srv_http__note(c->srv, k, what);
  srv_http__send_error(c, 408);
}

// One pass over every connection: a few comparisons each, so ten thousand
// connections cost tens of microseconds a sweep.
static void on_sweep(uv_timer_t *t) {
  srv_http *h = t->data;
  uint64_t now = uv_now(h->loop);
  for (conn *c = h->conns; c; c = c->next) {  // closing unlinks only in the close callback
    if (c->closing || c->pending) continue;
    if (h->idle_ms && now - c->last_active_ms >= h->idle_ms) srv_http__conn_close(c);
    // trickling a handshake byte by byte keeps a connection active, not through it
    else if (c->tls && !srv_htls_handshake_done(c->tls) && now - c->accepted_ms >= h->handshake_ms) srv_http__conn_close(c);
    // so does trickling what follows the last answer (the client's EOF is awaited)
    else if (c->draining) {
      if (c->writes_pending) {  // a slow reader of a long answer: the window starts once it is written
        c->win_ms = now;
        c->win_bytes = c->drained;
      } else if (too_slow(h, c, c->drained, now)) {
        srv_http__conn_close(c);
      }
    } else if (c->phase == 1 && h->lim.header_ms && now - c->phase_ms >= h->lim.header_ms)
      time_out(c, NOTE_HEADER, "request headers not complete within --http-header-timeout: answered 408");
    else if (c->phase == 2 && too_slow(h, c, c->body_bytes, now))
      time_out(c, NOTE_BODY_RATE, "request body slower than --http-body-min-rate: answered 408");
  }
}

// Sweeps a few times per timeout (idle, handshake, headers), at most once a
// second (the body rate is checked after a 10 s grace: once a second is fine).
int srv_http__sweep_start(srv_http *h) {
  uint64_t every = !h->idle_ms ? 1000 : h->idle_ms / 4 ? h->idle_ms / 4 : 1;
  if (h->tls && h->handshake_ms / 4 < every) every = h->handshake_ms / 4 ? h->handshake_ms / 4 : 1;
  if (h->lim.header_ms && h->lim.header_ms / 4 < every) every = h->lim.header_ms / 4 ? h->lim.header_ms / 4 : 1;
  if (every > 1000) every = 1000;
  return uv_timer_start(&h->sweep, on_sweep, every, every);
}

void srv_http__on_sweep_closed(uv_handle_t *handle) {
  srv_http *h = handle->data;
  h->open_handles--;
  srv_http__maybe_finish(h);
}
