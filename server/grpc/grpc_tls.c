// server/grpc/grpc_tls.c: see grpc_tls.h. OpenSSL works on the TCP socket
// itself (a socket BIO, non-blocking); the plaintext side is a socketpair.
#include "server/grpc/grpc_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/sec/tls_ssl.h"

#define RELAY_CHUNK (64 * 1024)    // one read of either side; what a direction holds at most
#define TURN_BYTES (1024 * 1024)   // per direction, connection and wake-up: one busy one cannot starve the rest
#define CLOSE_GRACE_US 5000000LL   // from one side's end to closing the other regardless
#define PAIR_BUF (256 * 1024)      // the socketpair's send buffers (each way)
#define LOG_EVERY_US 10000000LL    // one line per incident class this often, counting the rest
#define EPOLL_BATCH 64
#define TABLE_MAX (1u << 22)       // descriptors tracked at most, as grpc_accept.c
#define PEER_MAX 64

// gRPC's own TLS 1.2 suites (its GRPC_SSL_CIPHER_SUITES default): AEAD with forward secrecy, which
// HTTP/2 requires of TLS 1.2 (RFC 9113 9.2.2), so clients that refuse the rest are served as before.
#define GRPC_TLS12_CIPHERS \
  "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"

#define LOG(...)                                  \
  do {                                            \
    fprintf(stderr, "inferd grpc: " __VA_ARGS__); \
    fputc('\n', stderr);                          \
  } while (0)

typedef struct dir {  // one direction's bytes read and not yet written on
  char *buf;          // RELAY_CHUNK bytes while in use, else NULL (an idle connection holds none)
  size_t off, len;
} dir;

typedef struct gconn gconn;
typedef struct clist {
  gconn *head, *tail;
} clist;

struct gconn {
  int tcp, mine, core;  // the client's socket; our end of the socketpair; the core's end (its number), -1 before
  unsigned long core_ino;
  SSL *ssl;
  int relaying;  // handshake done, handed to the core
  int dead;      // closed; freed at the end of the loop's turn
  dir up;        // client -> core: plaintext out of SSL_read
  dir down;      // core -> client: plaintext for SSL_write
  unsigned tcp_eof : 1;      // the client sends nothing more (close_notify or EOF)
  unsigned tcp_dead : 1;     // nothing more can reach the client (an error, a TLS failure)
  unsigned core_eof : 1;     // the core ended its side
  unsigned core_shut : 1;    // the socketpair was shut down toward the core
  unsigned up_wants_out : 1;    // SSL_read needs the socket writable
  unsigned down_wants_in : 1;   // SSL_write needs the socket readable
  unsigned hs_wants_out : 1;
  uint32_t ev_tcp, ev_mine;  // interest registered in epoll (0: not registered)
  int64_t deadline_us;       // of the handshake, or of the close once one side ended
  clist *in;                 // the handshake or closing list it is on, ordered by deadline
  gconn *prev, *next;
  gconn *rprev, *rnext;  // the ready list: OpenSSL holds bytes the socket will not signal
  int ready;
  gconn *aprev, *anext;  // every live connection
  char peer[PEER_MAX];
};

struct srv_gtls {
  srv_tlsw *certs;
  srv_tls_ssl_opts ssl_opts;
  unsigned long long seen;  // generation of the set `ctx` was built from
  SSL_CTX *ctx;             // the relay thread's (built on the creating thread first)
  char ctx_err[sizeof(((err *)0)->msg)];  // why the last build failed, "" when it did not
  int64_t hs_us;
  srv_gtls_hand_fn hand;
  void *arg;
  int ep, wake;
  pthread_t th;
  int started;
  // Connections the acceptor handed over, not yet taken by the thread.
  pthread_mutex_t mu;
  int *q;
  size_t qn, qcap;
  int stopping;              // under mu
  int64_t stop_deadline_us;  // under mu
  pthread_mutex_t hand_mu;   // held across a hand-over to the core
  int draining;              // under hand_mu
  // By the core's descriptor: its socket inode (lock-free readers), the connection (under peer_mu).
  atomic_ulong *ino;
  size_t n_ino;
  pthread_mutex_t peer_mu;
  gconn **by_core;
  // The thread's own.
  clist hs, closing;
  gconn *ready, *all, *grave;
  int n_conns;
  int64_t fail_log_us, slow_log_us, short_log_us;
  unsigned long fail_n, slow_n, short_n;
};

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// ---------------------------------------------------------------- lists

static void list_add(clist *l, gconn *c) {
  c->in = l;
  c->next = NULL;
  c->prev = l->tail;
  if (l->tail) l->tail->next = c;
  else l->head = c;
  l->tail = c;
}

static void list_del(gconn *c) {
  clist *l = c->in;
  if (!l) return;
  if (c->prev) c->prev->next = c->next;
  else l->head = c->next;
  if (c->next) c->next->prev = c->prev;
  else l->tail = c->prev;
  c->in = NULL;
  c->prev = c->next = NULL;
}

static void ready_add(srv_gtls *t, gconn *c) {
  if (c->ready) return;
  c->ready = 1;
  c->rprev = NULL;
  c->rnext = t->ready;
  if (t->ready) t->ready->rprev = c;
  t->ready = c;
}

static void ready_del(srv_gtls *t, gconn *c) {
  if (!c->ready) return;
  if (c->rprev) c->rprev->rnext = c->rnext;
  else t->ready = c->rnext;
  if (c->rnext) c->rnext->rprev = c->rprev;
  c->ready = 0;
  c->rprev = c->rnext = NULL;
}

// ---------------------------------------------------------------- log lines, one per class per 10 s

static void log_failed(srv_gtls *t, const gconn *c, const char *why) {
  t->fail_n++;
  int64_t now = now_us();
  if (t->fail_log_us && now - t->fail_log_us < LOG_EVERY_US) return;
  LOG("TLS handshake with %s failed: %s (%lu failed handshake(s) since the last such line; one line per %lld s)",
      c->peer, why, t->fail_n, LOG_EVERY_US / 1000000);
  t->fail_log_us = now;
  t->fail_n = 0;
}

static void log_slow(srv_gtls *t, const gconn *c) {
  t->slow_n++;
  int64_t now = now_us();
  if (t->slow_log_us && now - t->slow_log_us < LOG_EVERY_US) return;
  LOG("closed the TLS connection from %s: its handshake did not finish within %lld ms (--grpc-handshake-timeout; "
      "%lu such connection(s) since the last line; one line per %lld s)", c->peer, (long long)(t->hs_us / 1000),
      t->slow_n, LOG_EVERY_US / 1000000);
  t->slow_log_us = now;
  t->slow_n = 0;
}

static void log_short(srv_gtls *t, const gconn *c, const char *what, int why) {
  t->short_n++;
  int64_t now = now_us();
  if (t->short_log_us && now - t->short_log_us < LOG_EVERY_US) return;
  LOG("closed the TLS connection from %s: %s: %s (%lu since the last such line; one line per %lld s)", c->peer, what,
      strerror(why), t->short_n, LOG_EVERY_US / 1000000);
  t->short_log_us = now;
  t->short_n = 0;
}

// ---------------------------------------------------------------- context

// The watch's set is newer than the context (tls_watch.h calls this with its mutex held).
static void rebuild(void *ctx, const srv_tls *set) {
  srv_gtls *t = ctx;
  err e = {0};
  SSL_CTX *fresh = NULL;
  if (srv_tls_ssl_ctx(set, &t->ssl_opts, &fresh, &e) != 0) {
    snprintf(t->ctx_err, sizeof t->ctx_err, "%s", e.msg);
    if (t->ctx)
      LOG("TLS: the new certificates could not be put in service (%s); new connections keep the previous ones", e.msg);
    return;
  }
  t->ctx_err[0] = 0;
  SSL_CTX_free(t->ctx);  // drops our reference; open connections hold theirs
  t->ctx = fresh;
}

// ---------------------------------------------------------------- connections

static void set_interest(srv_gtls *t, gconn *c, int fd, uint32_t *reg, uint32_t want) {
  if (fd < 0 || *reg == want) return;
  // unregistered rather than registered for nothing: EPOLLHUP and EPOLLERR come regardless, and a
  // side not wanted (held back by the other) would wake the loop for them over and over
  struct epoll_event ev = {.events = want, .data.ptr = c};
  int rc = !want ? epoll_ctl(t->ep, EPOLL_CTL_DEL, fd, NULL)
           : *reg ? epoll_ctl(t->ep, EPOLL_CTL_MOD, fd, &ev)
                  : epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &ev);
  if (rc == 0) *reg = want;
}

// Closes both sides now and forgets the core's descriptor; the memory goes at the end of the turn
// (an event later in the same batch may still name it).
static void conn_kill(srv_gtls *t, gconn *c) {
  if (c->dead) return;
  c->dead = 1;
  list_del(c);
  ready_del(t, c);
  if (c->aprev) c->aprev->anext = c->anext;
  else t->all = c->anext;
  if (c->anext) c->anext->aprev = c->aprev;
  t->n_conns--;
  if (c->core >= 0) {  // the core's end may already carry another number's socket: only ours is cleared
    unsigned long ino = c->core_ino;
    atomic_compare_exchange_strong(&t->ino[c->core], &ino, 0UL);
    pthread_mutex_lock(&t->peer_mu);
    if (t->by_core[c->core] == c) t->by_core[c->core] = NULL;
    pthread_mutex_unlock(&t->peer_mu);
  }
  SSL_free(c->ssl);
  c->ssl = NULL;
  if (c->mine >= 0) close(c->mine);  // also leaves epoll
  close(c->tcp);  // the acceptor stops counting the connection when it next looks
  c->mine = c->tcp = -1;
  c->anext = t->grave;
  t->grave = c;
}

static void fail_handshake(srv_gtls *t, gconn *c, const char *why) {
  log_failed(t, c, why);
  conn_kill(t, c);  // any alert OpenSSL wrote is in the socket already
}

// OpenSSL's reason for the failure just seen, or `dflt`.
static const char *ssl_reason(const char *dflt) {
  unsigned long code = ERR_peek_last_error();
  const char *r = code ? ERR_reason_error_string(code) : NULL;
  ERR_clear_error();
  return r ? r : dflt;
}

static void pump(srv_gtls *t, gconn *c);

// The socketpair of a relay, in a function of its own for ThreadSanitizer's sake: gRPC closes its end where
// TSan cannot see (tests/unit/server/grpc_tsan.supp), so the number's next owner reads as racing this call.
__attribute__((noinline)) static int open_pair(int sv[2]) {
  return socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv);
}

// The handshake finished: a socketpair, one end to the core.
static int to_core(srv_gtls *t, gconn *c) {
  int sv[2];
  if (open_pair(sv) != 0) {
    log_short(t, c, "cannot open its socketpair to gRPC", errno);
    conn_kill(t, c);
    return -1;
  }
  struct stat st;
  if ((size_t)sv[1] >= t->n_ino || fstat(sv[1], &st) != 0) {
    log_short(t, c, "its socketpair to gRPC is past the descriptor table", EMFILE);
    close(sv[0]);
    close(sv[1]);
    conn_kill(t, c);
    return -1;
  }
  int buf = PAIR_BUF;
  for (int i = 0; i < 2; i++) (void)setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  c->mine = sv[0];
  c->core = sv[1];
  c->core_ino = (unsigned long)st.st_ino;
  pthread_mutex_lock(&t->peer_mu);
  t->by_core[sv[1]] = c;
  pthread_mutex_unlock(&t->peer_mu);
  // release: a CQ thread reading it (acquire) for a call of this connection sees what came before, which
  // ThreadSanitizer cannot see through the core's hand-over (uninstrumented), as in grpc_accept.c
  atomic_store_explicit(&t->ino[sv[1]], c->core_ino, memory_order_release);
  pthread_mutex_lock(&t->hand_mu);
  int ok = !t->draining;
  if (ok) t->hand(t->arg, sv[1]);  // the core owns sv[1] from here
  pthread_mutex_unlock(&t->hand_mu);
  if (!ok) {
    close(sv[1]);
    conn_kill(t, c);
    return -1;
  }
  c->relaying = 1;
  return 0;
}

static void handshake(srv_gtls *t, gconn *c) {
  ERR_clear_error();
  int r = SSL_do_handshake(c->ssl);
  if (r == 1) {
    const unsigned char *p = NULL;
    unsigned int n = 0;
    SSL_get0_alpn_selected(c->ssl, &p, &n);
    if (n == 0) {  // gRPC's own check: its peer must have negotiated h2
      fail_handshake(t, c, "the client offered no ALPN protocol (gRPC needs h2)");
      return;
    }
    list_del(c);
    if (to_core(t, c) == 0) pump(t, c);  // the client's first frames may be in OpenSSL's buffer already
    return;
  }
  switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ: c->hs_wants_out = 0; break;
    case SSL_ERROR_WANT_WRITE: c->hs_wants_out = 1; break;
    case SSL_ERROR_SYSCALL:
      if (!ERR_peek_error()) {
        fail_handshake(t, c, errno ? strerror(errno) : "the client closed the connection");
        return;
      }
      fail_handshake(t, c, ssl_reason("connection failed"));
      return;
    default: fail_handshake(t, c, ssl_reason("connection failed")); return;
  }
  set_interest(t, c, c->tcp, &c->ev_tcp, c->hs_wants_out ? EPOLLOUT : EPOLLIN);
}

static int dir_empty(const dir *d) { return d->off == d->len; }

static int dir_buf(dir *d) {
  if (!d->buf) d->buf = malloc(RELAY_CHUNK);
  return d->buf != NULL;
}

static void dir_drop(dir *d) {
  free(d->buf);
  d->buf = NULL;
  d->off = d->len = 0;
}

// Client -> core: SSL_read into `up`, written to our end. Returns 1 when OpenSSL may still hold
// bytes that the socket will not signal (the turn's budget ran out).
static int pump_up(gconn *c) {
  size_t budget = TURN_BYTES;
  for (;;) {
    if (dir_empty(&c->up)) {
      if (c->tcp_eof || c->tcp_dead || c->core_eof) return 0;
      if (budget == 0) return SSL_has_pending(c->ssl);
      if (!dir_buf(&c->up)) {  // out of memory: this connection cannot go on
        c->tcp_dead = c->tcp_eof = 1;
        return 0;
      }
      size_t got = 0;
      ERR_clear_error();
      c->up_wants_out = 0;
      if (SSL_read_ex(c->ssl, c->up.buf, RELAY_CHUNK, &got) == 1) {
        c->up.off = 0;
        c->up.len = got;
        budget = got < budget ? budget - got : 0;
      } else {
        switch (SSL_get_error(c->ssl, 0)) {
          case SSL_ERROR_WANT_READ: return 0;
          case SSL_ERROR_WANT_WRITE: c->up_wants_out = 1; return 0;
          case SSL_ERROR_ZERO_RETURN: c->tcp_eof = 1; return 0;  // close_notify: it may still read
          default:  // EOF without close_notify, a reset, a bad record: the client is gone
            ERR_clear_error();
            c->tcp_eof = c->tcp_dead = 1;
            return 0;
        }
      }
    }
    ssize_t w = send(c->mine, c->up.buf + c->up.off, c->up.len - c->up.off, MSG_NOSIGNAL);
    if (w > 0) {
      c->up.off += (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;  // the core reads no faster: the client is not read until it does
    } else {
      c->core_eof = 1;  // the core's end is gone
      dir_drop(&c->up);
      return 0;
    }
  }
}

// Core -> client: read from our end into `down`, SSL_write to the client. Once nothing can reach the
// client, what the core writes is read and dropped, so it finishes and closes.
static void pump_down(gconn *c) {
  size_t budget = TURN_BYTES;
  for (;;) {
    if (dir_empty(&c->down)) {
      if (c->core_eof || budget == 0) return;
      if (!dir_buf(&c->down)) {
        c->tcp_dead = c->tcp_eof = 1;
        return;
      }
      ssize_t n = recv(c->mine, c->down.buf, RELAY_CHUNK, 0);
      if (n > 0) {
        c->down.off = 0;
        c->down.len = (size_t)n;
        budget = (size_t)n < budget ? budget - (size_t)n : 0;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        c->core_eof = 1;
        return;
      }
    }
    if (c->tcp_dead) {
      c->down.off = c->down.len;
      continue;
    }
    size_t done = 0;
    ERR_clear_error();
    c->down_wants_in = 0;
    if (SSL_write_ex(c->ssl, c->down.buf + c->down.off, c->down.len - c->down.off, &done) == 1) {
      c->down.off += done;
      continue;
    }
    switch (SSL_get_error(c->ssl, 0)) {
      case SSL_ERROR_WANT_WRITE: return;  // the client reads no faster: the core is not read until it does
      case SSL_ERROR_WANT_READ: c->down_wants_in = 1; return;
      default:
        ERR_clear_error();
        c->tcp_dead = c->tcp_eof = 1;
        break;
    }
  }
}

// Moves what it can both ways, then ends the connection or waits for the sockets it needs.
static void pump(srv_gtls *t, gconn *c) {
  if (c->dead) return;
  if (!c->relaying) {
    handshake(t, c);
    return;
  }
  int more = pump_up(c);
  pump_down(c);
  if (c->up_wants_out || c->down_wants_in) more |= pump_up(c);  // one side's socket need may be the other's
  if (dir_empty(&c->up) && c->up.buf) dir_drop(&c->up);
  if (dir_empty(&c->down) && c->down.buf) dir_drop(&c->down);
  // the client's side ended and its last bytes reached the core: the core reads its end of stream
  if ((c->tcp_eof || c->core_eof) && !c->core_shut && dir_empty(&c->up)) {
    (void)shutdown(c->mine, SHUT_WR);
    c->core_shut = 1;
  }
  // the core's side ended and what it wrote reached the client (or cannot): done
  if (c->core_eof && (dir_empty(&c->down) || c->tcp_dead)) {
    if (!c->tcp_dead) {
      ERR_clear_error();
      (void)SSL_shutdown(c->ssl);  // close_notify, so the client can tell an end from a cut
      ERR_clear_error();
    }
    conn_kill(t, c);
    return;
  }
  if ((c->tcp_eof || c->core_eof) && c->in != &t->closing) {
    c->deadline_us = now_us() + CLOSE_GRACE_US;
    list_add(&t->closing, c);
  }
  uint32_t wt = 0, wm = 0;
  if (!c->tcp_dead) {
    if ((dir_empty(&c->up) && !c->tcp_eof && !c->core_eof && !c->up_wants_out) || c->down_wants_in) wt |= EPOLLIN;
    if (c->up_wants_out || (!dir_empty(&c->down) && !c->down_wants_in)) wt |= EPOLLOUT;
  }
  if (!c->core_eof) {
    if (dir_empty(&c->down)) wm |= EPOLLIN;
    if (!dir_empty(&c->up)) wm |= EPOLLOUT;
  }
  set_interest(t, c, c->tcp, &c->ev_tcp, wt);
  set_interest(t, c, c->mine, &c->ev_mine, wm);
  if (more) ready_add(t, c);
}

static void peer_name(int fd, char *out, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char ip[INET6_ADDRSTRLEN];
  snprintf(out, cap, "fd:%d", fd);
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) return;
  const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
  if (ss.ss_family == AF_INET && inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip))
    snprintf(out, cap, "ipv4:%s:%d", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
  else if (ss.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
           inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], ip, sizeof ip))  // the dual-stack socket's IPv4 client
    snprintf(out, cap, "ipv4:%s:%d", ip, ntohs(s6->sin6_port));
  else if (ss.ss_family == AF_INET6 && inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip))
    snprintf(out, cap, "ipv6:[%s]:%d", ip, ntohs(s6->sin6_port));
}

// A connection from the acceptor: its handshake starts (the ClientHello is usually here already).
static void conn_new(srv_gtls *t, int fd) {
  // a newer set on disk or from SIGHUP serves from this handshake on, as gRPC's fetcher did
  (void)srv_tlsw_if_newer(t->certs, &t->seen, rebuild, t);
  gconn *c = calloc(1, sizeof *c);
  SSL *ssl = c ? SSL_new(t->ctx) : NULL;  // takes its own reference to the context
  if (!ssl || SSL_set_fd(ssl, fd) != 1) {
    ERR_clear_error();
    SSL_free(ssl);
    free(c);
    close(fd);
    return;
  }
  c->ssl = ssl;
  c->tcp = fd;
  c->mine = c->core = -1;
  SSL_set_accept_state(ssl);
  // a record at a time costs two reads per record without read-ahead; partial writes let the relay
  // advance by what each SSL_write took and retry the rest from where it moved to
  SSL_set_read_ahead(ssl, 1);
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  peer_name(fd, c->peer, sizeof c->peer);
  c->anext = t->all;
  if (t->all) t->all->aprev = c;
  t->all = c;
  t->n_conns++;
  c->deadline_us = now_us() + t->hs_us;
  list_add(&t->hs, c);
  pump(t, c);
}

// ---------------------------------------------------------------- the thread

static int take_queued(srv_gtls *t, int *stopping, int64_t *stop_deadline) {
  pthread_mutex_lock(&t->mu);
  int *q = t->q;
  size_t n = t->qn;
  t->q = NULL;
  t->qn = t->qcap = 0;
  *stopping = t->stopping;
  *stop_deadline = t->stop_deadline_us;
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < n; i++) {
    if (*stopping) close(q[i]);
    else conn_new(t, q[i]);
  }
  free(q);
  return (int)n;
}

static int next_timeout_ms(srv_gtls *t, int stopping, int64_t stop_deadline) {
  if (t->ready) return 0;
  int64_t next = INT64_MAX, now = now_us();
  if (t->hs.head) next = t->hs.head->deadline_us;
  if (t->closing.head && t->closing.head->deadline_us < next) next = t->closing.head->deadline_us;
  if (stopping && stop_deadline < next) next = stop_deadline;
  if (next == INT64_MAX) return -1;
  return next <= now ? 0 : (int)((next - now + 999) / 1000);
}

static void expire(srv_gtls *t) {
  int64_t now = now_us();
  while (t->hs.head && t->hs.head->deadline_us <= now) {
    log_slow(t, t->hs.head);
    conn_kill(t, t->hs.head);
  }
  while (t->closing.head && t->closing.head->deadline_us <= now) conn_kill(t, t->closing.head);
}

static void bury(srv_gtls *t) {
  while (t->grave) {
    gconn *c = t->grave;
    t->grave = c->anext;
    free(c->up.buf);
    free(c->down.buf);
    free(c);
  }
}

static void *relay_main(void *arg) {
  srv_gtls *t = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-tls");
  struct epoll_event evs[EPOLL_BATCH];
  int stopping = 0;
  int64_t stop_deadline = 0;
  for (;;) {
    int n = epoll_wait(t->ep, evs, EPOLL_BATCH, next_timeout_ms(t, stopping, stop_deadline));
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == NULL) {  // the wake-up: new connections, or stop
        uint64_t v;
        while (read(t->wake, &v, sizeof v) < 0 && errno == EINTR) {
        }
        take_queued(t, &stopping, &stop_deadline);
        continue;
      }
      pump(t, evs[i].data.ptr);
    }
    // connections OpenSSL holds bytes for, each once this turn (a pump may queue it again for the next;
    // only a connection's own pump kills it, so the rest of the detached list stays valid)
    gconn *r = t->ready;
    t->ready = NULL;
    while (r) {
      gconn *c = r;
      r = c->rnext;
      if (r) r->rprev = NULL;
      c->rnext = c->rprev = NULL;
      c->ready = 0;
      pump(t, c);
    }
    if (stopping) {
      while (t->hs.head) conn_kill(t, t->hs.head);  // never the core's now
      if (!t->all || now_us() >= stop_deadline) {
        while (t->all) conn_kill(t, t->all);
        bury(t);
        break;
      }
    }
    expire(t);
    bury(t);
  }
  return NULL;
}

// ---------------------------------------------------------------- API

int srv_gtls_create(const srv_gtls_opts *o, srv_gtls **out, err *e) {
  *out = NULL;
  if (!o || !o->certs || !o->hand || o->handshake_ms < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "gRPC TLS: certificates, a hand-over and a handshake timeout are needed");
  srv_gtls *t = calloc(1, sizeof *t);
  if (!t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC TLS: out of memory");
  t->ep = t->wake = -1;
  t->certs = o->certs;
  t->hs_us = (int64_t)o->handshake_ms * 1000;
  t->hand = o->hand;
  t->arg = o->arg;
  t->ssl_opts = (srv_tls_ssl_opts){.alpn = "\x02h2", .client = srv_tlsw_client(o->certs),
                                   .ciphers_tls12 = GRPC_TLS12_CIPHERS, .flag_prefix = "--grpc-",
                                   .what = "TLS on gRPC", .session_id = "inferd-grpc"};
  pthread_mutex_init(&t->mu, NULL);
  pthread_mutex_init(&t->hand_mu, NULL);
  pthread_mutex_init(&t->peer_mu, NULL);
  struct rlimit rl;
  rlim_t nf = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  t->n_ino = nf == RLIM_INFINITY || nf > TABLE_MAX ? TABLE_MAX : (size_t)nf;
  t->ino = calloc(t->n_ino, sizeof *t->ino);  // untouched pages cost no memory
  t->by_core = calloc(t->n_ino, sizeof *t->by_core);
  t->ep = epoll_create1(EPOLL_CLOEXEC);
  t->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (!t->ino || !t->by_core || t->ep < 0 || t->wake < 0 || epoll_ctl(t->ep, EPOLL_CTL_ADD, t->wake, &ev) != 0) {
    err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC TLS: cannot set up the terminator: %s", strerror(errno));
    srv_gtls_destroy(t);
    return ERR_RESOURCE_EXHAUSTED;
  }
  (void)srv_tlsw_if_newer(t->certs, &t->seen, rebuild, t);
  if (!t->ctx) {
    err_set(e, ERR_INVALID_ARGUMENT, "%s", t->ctx_err[0] ? t->ctx_err : "TLS on gRPC: no certificates");
    srv_gtls_destroy(t);
    return ERR_INVALID_ARGUMENT;
  }
  *out = t;
  return 0;
}

int srv_gtls_start(srv_gtls *t, err *e) {
  if (t->started) return err_set(e, ERR_FAILED_PRECONDITION, "gRPC TLS: already started");
  int rc = pthread_create(&t->th, NULL, relay_main, t);
  if (rc != 0) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC TLS: cannot start its thread: %s", strerror(rc));
  t->started = 1;
  return 0;
}

static void wake(srv_gtls *t) {
  uint64_t one = 1;
  while (write(t->wake, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void srv_gtls_take(void *arg, int fd) {
  srv_gtls *t = arg;
  pthread_mutex_lock(&t->mu);
  if (!t->stopping && t->qn == t->qcap) {
    size_t cap = t->qcap ? t->qcap * 2 : 64;
    int *q = realloc(t->q, cap * sizeof *q);
    if (q) {
      t->q = q;
      t->qcap = cap;
    }
  }
  if (t->stopping || t->qn == t->qcap) {  // stopped, or out of memory
    pthread_mutex_unlock(&t->mu);
    close(fd);
    return;
  }
  t->q[t->qn++] = fd;
  int first = t->qn == 1;
  pthread_mutex_unlock(&t->mu);
  if (first) wake(t);  // one wake-up takes the whole queue
}

void srv_gtls_drain(srv_gtls *t) {
  if (!t) return;
  pthread_mutex_lock(&t->hand_mu);
  t->draining = 1;
  pthread_mutex_unlock(&t->hand_mu);
}

void srv_gtls_stop(srv_gtls *t, int grace_ms) {
  if (!t) return;
  srv_gtls_drain(t);
  pthread_mutex_lock(&t->mu);
  int was = t->stopping;
  t->stopping = 1;
  t->stop_deadline_us = now_us() + (int64_t)(grace_ms > 0 ? grace_ms : 0) * 1000;
  for (size_t i = 0; i < t->qn; i++) close(t->q[i]);
  t->qn = 0;
  pthread_mutex_unlock(&t->mu);
  if (was || !t->started) return;
  wake(t);
  pthread_join(t->th, NULL);
  t->started = 0;
}

void srv_gtls_destroy(srv_gtls *t) {
  if (!t) return;
  srv_gtls_stop(t, 0);
  SSL_CTX_free(t->ctx);
  if (t->ep >= 0) close(t->ep);
  if (t->wake >= 0) close(t->wake);
  free(t->q);
  free(t->ino);
  free(t->by_core);
  pthread_mutex_destroy(&t->mu);
  pthread_mutex_destroy(&t->hand_mu);
  pthread_mutex_destroy(&t->peer_mu);
  free(t);
}

unsigned long srv_gtls_inode(const srv_gtls *t, int fd) {
  if (!t || fd < 0 || (size_t)fd >= t->n_ino) return 0;
  return atomic_load_explicit(&t->ino[fd], memory_order_acquire);
}

int srv_gtls_peer(srv_gtls *t, int fd, unsigned long ino, char *name, size_t cap) {
  if (!t || fd < 0 || (size_t)fd >= t->n_ino) return 0;
  int found = 0;
  pthread_mutex_lock(&t->peer_mu);
  const gconn *c = t->by_core[fd];
  if (c && c->core_ino == ino) {
    snprintf(name, cap, "%s", c->peer);
    found = 1;
  }
  pthread_mutex_unlock(&t->peer_mu);
  return found;
}
