// test_grpc_tls: server/grpc/grpc_tls.c, the gRPC port's TLS terminator, between a real OpenSSL client on a
// loopback TCP connection and the test itself standing in for gRPC's core on the socketpair end it is
// handed. Checks: ALPN h2 is selected; 48 MiB each way arrive byte for byte; while the "core" does not read,
// the client can push only a bounded amount (the socket buffers and one relay chunk, well under 24 MiB)
// before its writes stall, and the same the other way while the client does not read; a client's
// close_notify reaches the core as end of stream and the core's close reaches the client as close_notify; a
// client offering only http/1.1 fails the handshake and nothing is handed over; a connection that never
// finishes its handshake is closed (at the handshake timeout; no time is asserted).
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "server/grpc/grpc_tls.h"
#include "tls_test_pem.h"

#define BIG (48u << 20)
#define STALL_BOUND (24u << 20)

static ttp_dir pem;

// --- the "core": the descriptors the terminator hands over, in order

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int handed[16];
static int n_handed;

static void hand(void *arg, int fd) {
  (void)arg;
  pthread_mutex_lock(&mu);
  if (n_handed < 16) handed[n_handed++] = fd;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static int await_handed(int n) {  // the n-th descriptor handed over (1-based), waiting for it
  pthread_mutex_lock(&mu);
  while (n_handed < n) pthread_cond_wait(&cv, &mu);
  int fd = handed[n - 1];
  pthread_mutex_unlock(&mu);
  return fd;
}

// --- sockets

static int lfd;

static void listen_any(void) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 16) != 0) exit(2);
}

// A client socket connected to the listener, and the server's end given to the terminator.
static int connect_and_take(srv_gtls *t) {
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  getsockname(lfd, (struct sockaddr *)&a, &al);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0) exit(2);
  int s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (s < 0) exit(2);
  srv_gtls_take(t, s);
  return c;
}

static SSL *tls_client(SSL_CTX **cctx, int fd, const char *alpn, size_t alpn_len) {
  *cctx = SSL_CTX_new(TLS_client_method());
  if (!*cctx || SSL_CTX_load_verify_locations(*cctx, ttp_path(&pem, "srv.crt"), NULL) != 1) exit(2);
  SSL_CTX_set_verify(*cctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_alpn_protos(*cctx, (const unsigned char *)alpn, (unsigned)alpn_len);
  SSL *s = SSL_new(*cctx);
  if (!s || SSL_set_fd(s, fd) != 1) exit(2);
  return s;
}

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + (i >> 13)); }

static void set_nonblock(int fd, int on) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) != 0) exit(2);
}

// Non-blocking SSL_write of the pattern from *sent until BIG or no progress for 300 ms.
static void client_push(SSL *s, int fd, size_t *sent) {
  static unsigned char chunk[65536];
  while (*sent < BIG) {
    size_t n = BIG - *sent < sizeof chunk ? BIG - *sent : sizeof chunk, done = 0;
    for (size_t i = 0; i < n; i++) chunk[i] = pattern(*sent + i);
    if (SSL_write_ex(s, chunk, n, &done) == 1) {
      *sent += done;
      continue;
    }
    int e = SSL_get_error(s, 0);
    if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) exit(3);
    struct pollfd p = {.fd = fd, .events = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
    if (poll(&p, 1, 300) == 0) return;  // stalled
  }
}

// --- cases

static void test_relay(srv_gtls *t) {
  SSL_CTX *cctx;
  int c = connect_and_take(t);
  SSL *s = tls_client(&cctx, c, "\x02h2", 3);
  CHECK(SSL_connect(s) == 1);
  const unsigned char *alpn = NULL;
  unsigned alpn_len = 0;
  SSL_get0_alpn_selected(s, &alpn, &alpn_len);
  CHECK(alpn_len == 2 && !memcmp(alpn, "h2", 2));
  int core = await_handed(1);
  unsigned long ino = srv_gtls_inode(t, core);
  CHECK(ino != 0);
  char name[64] = "";
  CHECK(srv_gtls_peer(t, core, ino, name, sizeof name) == 1);
  CHECK(!strncmp(name, "ipv4:127.0.0.1:", 15));
  CHECK(srv_gtls_peer(t, core, ino + 1, name, sizeof name) == 0);

  // up: the core reads nothing, the client stalls bounded; then the core reads it all, in order
  set_nonblock(c, 1);
  size_t sent = 0;
  client_push(s, c, &sent);
  printf("client stalled after %zu bytes while the core did not read\n", sent);
  CHECK(sent > 0 && sent < STALL_BOUND);
  size_t got = 0, bad = 0;
  static unsigned char buf[65536];
  set_nonblock(core, 1);
  while (got < BIG) {
    ssize_t n = recv(core, buf, sizeof buf, 0);
    if (n > 0) {
      for (ssize_t i = 0; i < n; i++) bad += buf[i] != pattern(got + (size_t)i);
      got += (size_t)n;
      continue;
    }
    if (n == 0) break;
    if (errno != EAGAIN) break;
    client_push(s, c, &sent);  // room again: the client goes on
    struct pollfd p = {.fd = core, .events = POLLIN};
    poll(&p, 1, 100);
  }
  CHECK_EQ_INT(got, BIG);
  CHECK_EQ_INT(bad, 0);

  // down: the client reads nothing, the core stalls bounded; then the client reads it all, in order
  size_t wrote = 0;
  static unsigned char out[65536];
  for (;;) {
    size_t n = BIG - wrote < sizeof out ? BIG - wrote : sizeof out;
    for (size_t i = 0; i < n; i++) out[i] = pattern(wrote + i);
    ssize_t w = n ? send(core, out, n, MSG_NOSIGNAL) : 0;
    if (w > 0) {
      wrote += (size_t)w;
      continue;
    }
    struct pollfd p = {.fd = core, .events = POLLOUT};
    if (!n || poll(&p, 1, 300) == 0) break;
  }
  printf("core stalled after %zu bytes while the client did not read\n", wrote);
  CHECK(wrote > 0 && wrote < STALL_BOUND);
  set_nonblock(c, 0);
  got = bad = 0;
  while (got < BIG) {
    size_t n = 0;
    if (SSL_read_ex(s, buf, sizeof buf, &n) != 1) break;
    for (size_t i = 0; i < n; i++) bad += buf[i] != pattern(got + i);
    got += n;
    while (wrote < BIG) {  // the core goes on as the client reads
      size_t m = BIG - wrote < sizeof out ? BIG - wrote : sizeof out;
      for (size_t i = 0; i < m; i++) out[i] = pattern(wrote + i);
      ssize_t w = send(core, out, m, MSG_NOSIGNAL);
      if (w <= 0) break;
      wrote += (size_t)w;
    }
  }
  CHECK_EQ_INT(got, BIG);
  CHECK_EQ_INT(bad, 0);

  // the client's close_notify: the core reads its end of stream
  CHECK(SSL_shutdown(s) >= 0);
  set_nonblock(core, 0);
  CHECK(recv(core, buf, sizeof buf, 0) == 0);
  // the core closes: the client gets close_notify
  close(core);
  size_t n = 0;
  CHECK(SSL_read_ex(s, buf, sizeof buf, &n) == 0);
  CHECK_EQ_INT(SSL_get_error(s, 0), SSL_ERROR_ZERO_RETURN);
  SSL_free(s);
  SSL_CTX_free(cctx);
  close(c);
}

static void test_http11_only_refused(srv_gtls *t) {
  SSL_CTX *cctx;
  int c = connect_and_take(t);
  SSL *s = tls_client(&cctx, c, "\x08http/1.1", 9);
  CHECK(SSL_connect(s) != 1);  // no_application_protocol
  ERR_clear_error();
  pthread_mutex_lock(&mu);
  CHECK_EQ_INT(n_handed, 1);  // nothing new for the core
  pthread_mutex_unlock(&mu);
  SSL_free(s);
  SSL_CTX_free(cctx);
  close(c);
}

static void test_stalled_handshake_closed(srv_gtls *t) {
  int c = connect_and_take(t);
  const unsigned char partial[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};  // a ClientHello cut short
  CHECK(send(c, partial, sizeof partial, 0) == (ssize_t)sizeof partial);
  char b;
  ssize_t n = recv(c, &b, 1, 0);  // blocks until the terminator closes it
  CHECK(n <= 0);
  close(c);
}

int main(void) {
  if (ttp_open(&pem, "grpc_tls") != 0) return 2;
  ttp_write_pair(&pem, "srv", 0, 3600);
  listen_any();
  err e = {0};
  srv_tlsw *w = NULL;
  if (srv_tlsw_create(ttp_path(&pem, "srv.crt"), ttp_path(&pem, "srv.key"), NULL, SRV_TLS_CLIENT_NONE, NULL, NULL, &w,
                      &e) != 0) {
    fprintf(stderr, "%s\n", e.msg);
    return 2;
  }
  srv_gtls *t = NULL;
  srv_gtls_opts o = {.certs = w, .handshake_ms = 300, .hand = hand};
  CHECK(srv_gtls_create(&o, &t, &e) == 0);
  CHECK(srv_gtls_start(t, &e) == 0);
  test_relay(t);
  test_http11_only_refused(t);
  test_stalled_handshake_closed(t);
  srv_gtls_stop(t, 1000);
  srv_gtls_destroy(t);
  srv_tlsw_destroy(w);
  close(lfd);
  CHECK_DONE();
}
