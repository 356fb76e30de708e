// test_http_tls: server/http/http_tls.c against an OpenSSL client, both over
// memory BIOs in this process (no sockets): the handshake completes with
// ALPN http/1.1 and TLS 1.2 or later; bytes go both ways unchanged, one
// record at a time into a small buffer and a 1 MiB response whole;
// close_notify both ways; TLS 1.1, garbage and an h2-only client fail with
// an alert for the client; mutual TLS refuses no certificate and a
// certificate of another CA and takes the right one; plain-HTTP sniffing;
// bad files fail the context naming the --http-* flag; a reload serves new
// connections the new certificate while an open one keeps the old, a bad
// reload keeps the one in service, and reloads race connection creation.
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "server/http/http_tls.h"
#include "tls_test_pem.h"

static ttp_dir pem;  // this test's PEM files

static const char *path(const char *name) { return ttp_path(&pem, name); }

static void make_pair(const char *name) { ttp_write_pair(&pem, name, 0, 3600); }

// --- a client and a server connection joined by hand

typedef struct pair {
  SSL_CTX *cctx;
  SSL *c;
  BIO *crb, *cwb;  // the client's: what it reads, what it wrote
  srv_htls *s;
} pair;

// client: trusts srv.crt; `client_cert` (NULL: none) is presented when asked
static void pair_open(pair *p, srv_htls_ctx *x, const char *client_cert, int max_version, const char *alpn,
                      size_t alpn_len) {
  memset(p, 0, sizeof *p);
  p->cctx = SSL_CTX_new(TLS_client_method());
  if (!p->cctx) exit(2);
  if (SSL_CTX_load_verify_locations(p->cctx, path("srv.crt"), NULL) != 1) exit(2);
  SSL_CTX_set_verify(p->cctx, SSL_VERIFY_PEER, NULL);
  if (max_version) {
    SSL_CTX_set_security_level(p->cctx, 0);  // TLS 1.1 needs SHA-1 signatures
    SSL_CTX_set_min_proto_version(p->cctx, TLS1_VERSION);
    SSL_CTX_set_max_proto_version(p->cctx, max_version);
    SSL_CTX_set_cipher_list(p->cctx, "DEFAULT:@SECLEVEL=0");
  }
  if (client_cert) {
    char crt[80], key[80];
    snprintf(crt, sizeof crt, "%s.crt", client_cert);
    snprintf(key, sizeof key, "%s.key", client_cert);
    if (SSL_CTX_use_certificate_file(p->cctx, path(crt), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_use_PrivateKey_file(p->cctx, path(key), SSL_FILETYPE_PEM) != 1)
      exit(2);
  }
  if (alpn) SSL_CTX_set_alpn_protos(p->cctx, (const unsigned char *)alpn, (unsigned)alpn_len);
  p->c = SSL_new(p->cctx);
  p->crb = BIO_new(BIO_s_mem());
  p->cwb = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(p->crb, -1);
  SSL_set_bio(p->c, p->crb, p->cwb);
  SSL_set_connect_state(p->c);
  p->s = srv_htls_create(x);
  if (!p->c || !p->s) exit(2);
}

static void pair_close(pair *p) {
  SSL_free(p->c);
  SSL_CTX_free(p->cctx);
  srv_htls_destroy(p->s);
}

// Client output into the server, one srv_htls_read, server output to the client.
static long pump(pair *p, char *buf, size_t cap) {
  char tmp[1 << 16];
  int n;
  while ((n = BIO_read(p->cwb, tmp, sizeof tmp)) > 0) CHECK_EQ_INT(srv_htls_feed(p->s, tmp, (size_t)n), 0);
  long r = srv_htls_read(p->s, buf, cap);
  size_t len = 0;
  char *out = srv_htls_take_output(p->s, &len);
  CHECK(out != NULL || len == 0);
  if (out) {
    BIO_write(p->crb, out, (int)len);
    free(out);
  }
  return r;
}

// 1 when both sides finished the handshake, 0 when the server failed it.
static int handshake(pair *p) {
  char b[16];
  for (int i = 0; i < 8; i++) {
    int rc = SSL_do_handshake(p->c);
    long r = pump(p, b, sizeof b);
    CHECK(r <= 0);  // no application data yet
    if (r == SRV_HTLS_FAILED) return 0;
    if (rc == 1 && srv_htls_handshake_done(p->s)) return 1;
  }
  return 0;
}

static srv_htls_ctx *make_ctx(int mutual) {
  srv_htls_ctx *x = NULL;
  err e = {0};
  int rc = srv_htls_ctx_create(path("srv.crt"), path("srv.key"), mutual ? path("cli.crt") : NULL, mutual, &x, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "%s\n", e.msg);
    exit(1);
  }
  return x;
}

// The client's SSL_read after the server failed: an error, not data.
static void check_client_sees_alert(pair *p) {
  char b[16];
  ERR_clear_error();
  CHECK(SSL_read(p->c, b, sizeof b) <= 0);
  CHECK_EQ_INT(SSL_get_error(p->c, 0), SSL_ERROR_SSL);
  ERR_clear_error();
}

// --- tests

static void test_round_trip(void) {
  srv_htls_ctx *x = make_ctx(0);
  pair p;
  static const char alpn[] = "\x02h2\x08http/1.1";
  pair_open(&p, x, NULL, 0, alpn, sizeof alpn - 1);
  CHECK_EQ_INT(srv_htls_handshake_done(p.s), 0);
  CHECK_EQ_INT(handshake(&p), 1);
  CHECK(SSL_version(p.c) >= TLS1_2_VERSION);
  const unsigned char *sel = NULL;
  unsigned sel_len = 0;
  SSL_get0_alpn_selected(p.c, &sel, &sel_len);
  CHECK_EQ_INT(sel_len, 8);
  CHECK(sel && memcmp(sel, "http/1.1", 8) == 0);
  CHECK_EQ_STR(srv_htls_failure(p.s), "");

  // a request in, read through a buffer smaller than it: nothing lost or reordered
  static const char req[] = "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n";
  CHECK_EQ_INT(SSL_write(p.c, req, (int)sizeof req - 1), (int)sizeof req - 1);
  char got[256] = {0};
  size_t have = 0;
  long r;
  while ((r = pump(&p, got + have, 7)) > 0) have += (size_t)r;
  CHECK_EQ_INT(r, SRV_HTLS_WANT_INPUT);
  CHECK_EQ_INT(have, sizeof req - 1);
  CHECK_EQ_STR(got, req);

  // a 1 MiB response out, in one take of the output
  size_t big = 1 << 20;
  char *body = malloc(big), *back = malloc(big);
  for (size_t i = 0; i < big; i++) body[i] = (char)(i * 7 + 3);
  CHECK_EQ_INT(srv_htls_write(p.s, body, big), 0);
  size_t len = 0;
  char *out = srv_htls_take_output(p.s, &len);
  CHECK(out != NULL && len > big);
  BIO_write(p.crb, out, (int)len);
  free(out);
  CHECK(srv_htls_take_output(p.s, &len) == NULL && len == 0);  // taken: nothing left
  size_t n = 0;
  int k;
  while (n < big && (k = SSL_read(p.c, back + n, (int)(big - n))) > 0) n += (size_t)k;
  CHECK_EQ_INT(n, big);
  CHECK(memcmp(body, back, big) == 0);
  free(body);
  free(back);
  // still usable after the write BIO was swapped for a fresh one
  CHECK_EQ_INT(srv_htls_write(p.s, "ok", 2), 0);
  out = srv_htls_take_output(p.s, &len);
  BIO_write(p.crb, out, (int)len);
  free(out);
  char ok[4] = {0};
  CHECK_EQ_INT(SSL_read(p.c, ok, sizeof ok), 2);
  CHECK_EQ_STR(ok, "ok");

  // the client's close_notify ends the stream; ours answers it, once
  SSL_shutdown(p.c);
  CHECK_EQ_INT(pump(&p, got, sizeof got), SRV_HTLS_CLOSED);
  srv_htls_shutdown(p.s);
  srv_htls_shutdown(p.s);
  out = srv_htls_take_output(p.s, &len);
  CHECK(out != NULL && len > 0 && len < 100);
  BIO_write(p.crb, out, (int)len);
  free(out);
  CHECK(SSL_read(p.c, ok, sizeof ok) <= 0);
  CHECK_EQ_INT(SSL_get_error(p.c, 0), SSL_ERROR_ZERO_RETURN);
  CHECK_EQ_INT(srv_htls_write(p.s, "x", 1), -1);  // nothing after close_notify
  pair_close(&p);
  srv_htls_ctx_destroy(x);
}

static void test_refused_clients(void) {
  srv_htls_ctx *x = make_ctx(0);
  pair p;
  // TLS 1.1: a protocol_version alert
  pair_open(&p, x, NULL, TLS1_1_VERSION, NULL, 0);
  CHECK_EQ_INT(handshake(&p), 0);
  CHECK_CONTAINS(srv_htls_failure(p.s), "protocol");
  check_client_sees_alert(&p);
  CHECK_EQ_INT(srv_htls_read(p.s, (char[8]){0}, 8), SRV_HTLS_FAILED);  // stays failed
  CHECK_EQ_INT(srv_htls_write(p.s, "x", 1), -1);
  pair_close(&p);
  // an h2-only client: no_application_protocol
  static const char h2[] = "\x02h2";
  pair_open(&p, x, NULL, 0, h2, sizeof h2 - 1);
  CHECK_EQ_INT(handshake(&p), 0);
  check_client_sees_alert(&p);
  pair_close(&p);
  // garbage instead of a ClientHello
  srv_htls *s = srv_htls_create(x);
  static const char junk[] = "\x16\x03\x01\x00\x05\xff\xff\xff\xff\xff";
  CHECK_EQ_INT(srv_htls_feed(s, junk, sizeof junk - 1), 0);
  char b[16];
  CHECK_EQ_INT(srv_htls_read(s, b, sizeof b), SRV_HTLS_FAILED);
  CHECK(strlen(srv_htls_failure(s)) > 0);
  srv_htls_shutdown(s);  // no close_notify after a failure: only the alert waits
  size_t len = 0;
  char *out = srv_htls_take_output(s, &len);
  CHECK(out != NULL && len == 7 && out[0] == 0x15);  // one alert record
  free(out);
  srv_htls_destroy(s);
  // half a handshake: just waiting
  s = srv_htls_create(x);
  CHECK_EQ_INT(srv_htls_feed(s, junk, 3), 0);
  CHECK_EQ_INT(srv_htls_read(s, b, sizeof b), SRV_HTLS_WANT_INPUT);
  CHECK_EQ_INT(srv_htls_handshake_done(s), 0);
  srv_htls_shutdown(s);  // before the handshake: nothing to send
  CHECK(srv_htls_take_output(s, &len) == NULL && len == 0);
  srv_htls_destroy(s);
  srv_htls_destroy(NULL);
  srv_htls_ctx_destroy(x);
}

static void test_mutual(void) {
  srv_htls_ctx *x = make_ctx(1);
  pair p;
  pair_open(&p, x, "cli", 0, NULL, 0);
  CHECK_EQ_INT(handshake(&p), 1);
  CHECK_EQ_INT(SSL_write(p.c, "hi", 2), 2);
  char b[8] = {0};
  CHECK_EQ_INT(pump(&p, b, sizeof b), 2);
  CHECK_EQ_STR(b, "hi");
  pair_close(&p);
  pair_open(&p, x, NULL, 0, NULL, 0);
  CHECK_EQ_INT(handshake(&p), 0);
  CHECK_CONTAINS(srv_htls_failure(p.s), "certificate");
  check_client_sees_alert(&p);
  pair_close(&p);
  pair_open(&p, x, "oth", 0, NULL, 0);
  CHECK_EQ_INT(handshake(&p), 0);
  CHECK_CONTAINS(srv_htls_failure(p.s), "certificate");
  check_client_sees_alert(&p);
  pair_close(&p);
  srv_htls_ctx_destroy(x);
}

static void test_sniffing(void) {
  CHECK_EQ_INT(srv_htls_looks_like_plain_http("GET / HTTP/1.1", 14), 1);
  CHECK_EQ_INT(srv_htls_looks_like_plain_http("POST", 4), 1);
  CHECK_EQ_INT(srv_htls_looks_like_plain_http("\x16\x03\x01", 3), 0);
  CHECK_EQ_INT(srv_htls_looks_like_plain_http("get", 3), 0);
  CHECK_EQ_INT(srv_htls_looks_like_plain_http("G", 0), 0);
}

static void check_ctx_refused(const char *cert, const char *key, const char *root, int mutual, const char *n1,
                              const char *n2) {
  srv_htls_ctx *x = (srv_htls_ctx *)1;
  err e = {0};
  CHECK_EQ_INT(srv_htls_ctx_create(cert, key, root, mutual, &x, &e), ERR_INVALID_ARGUMENT);
  CHECK(x == NULL);
  CHECK_CONTAINS(e.msg, n1);
  CHECK_CONTAINS(e.msg, n2);
  CHECK(strstr(e.msg, "--grpc-") == NULL);
}

static void test_bad_files(void) {
  char crt[256], key[256];
  snprintf(crt, sizeof crt, "%s", path("srv.crt"));
  snprintf(key, sizeof key, "%s", path("srv.key"));
  check_ctx_refused(crt, path("missing.key"), NULL, 0, "--http-server-key", "missing.key");
  check_ctx_refused(path("missing.crt"), key, NULL, 0, "--http-server-cert", "No such file");
  check_ctx_refused(crt, path("cli.key"), NULL, 0, "--http-server-key", "is not the private key of the certificate");
  check_ctx_refused(crt, key, NULL, 1, "--http-use-ssl-mutual needs --http-root-cert", "");
  check_ctx_refused(crt, key, path("missing_ca.crt"), 1, "--http-root-cert", "missing_ca.crt");
  check_ctx_refused(NULL, key, NULL, 0, "--http-server-cert FILE", "");
  check_ctx_refused(crt, NULL, NULL, 0, "--http-server-key FILE", "");
  // without mutual the root is not read: a missing one does not matter
  srv_htls_ctx *x = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_htls_ctx_create(crt, key, path("missing_ca.crt"), 0, &x, &e), 0);
  srv_htls_ctx_destroy(x);
  srv_htls_ctx_destroy(NULL);
}

// --- reload

static X509 *read_cert(const char *name) {
  FILE *f = fopen(path(name), "rb");
  X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
  if (f) fclose(f);
  if (!x) exit(2);
  return x;
}

// A connection whose client trusts `trusted` (a .crt of this test), after
// its handshake; 1 when the server's certificate equals want.
static int open_and_check_peer(pair *p, srv_htls_ctx *x, const char *trusted, X509 *want) {
  pair_open(p, x, NULL, 0, NULL, 0);
  if (SSL_CTX_load_verify_locations(p->cctx, path(trusted), NULL) != 1) exit(2);
  CHECK_EQ_INT(handshake(p), 1);
  X509 *got = SSL_get1_peer_certificate(p->c);
  int same = got && X509_cmp(got, want) == 0;
  X509_free(got);
  return same;
}

static void check_echo(pair *p, const char *msg) {
  int n = (int)strlen(msg);
  CHECK_EQ_INT(SSL_write(p->c, msg, n), n);
  char b[32] = {0};
  CHECK_EQ_INT(pump(p, b, sizeof b - 1), n);
  CHECK_EQ_STR(b, msg);
  CHECK_EQ_INT(srv_htls_write(p->s, b, (size_t)n), 0);
  CHECK(pump(p, b, sizeof b) <= 0);  // moves the record to the client
  char c[32] = {0};
  CHECK_EQ_INT(SSL_read(p->c, c, sizeof c - 1), n);
  CHECK_EQ_STR(c, msg);
}

typedef struct reloader {
  srv_htls_ctx *x;
  int n, failed;
} reloader;

static void *reload_loop(void *arg) {
  reloader *r = arg;
  for (int i = 0; i < r->n; i++) {
    err e = {0};
    if (srv_htls_ctx_reload(r->x, NULL, 0, &e) != 0) r->failed++;
  }
  return NULL;
}

static void test_reload(void) {
  make_pair("lv");
  X509 *a = read_cert("lv.crt");
  srv_htls_ctx *x = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_htls_ctx_create(path("lv.crt"), path("lv.key"), NULL, 0, &x, &e), 0);
  if (!x) exit(1);
  pair old;
  CHECK_EQ_INT(open_and_check_peer(&old, x, "lv.crt", a), 1);
  check_echo(&old, "before");

  rename(path("lv.crt"), path("lv_a.crt"));  // the client of `old` keeps trusting A's file
  make_pair("lv");                            // B: another key, another certificate
  X509 *b = read_cert("lv.crt");
  CHECK(X509_cmp(a, b) != 0);
  char served[256] = "";
  CHECK_EQ_INT(srv_htls_ctx_reload(x, served, sizeof served, &e), 0);
  CHECK_CONTAINS(served, "CN=lv");
  pair fresh;
  CHECK_EQ_INT(open_and_check_peer(&fresh, x, "lv.crt", b), 1);
  check_echo(&fresh, "new");
  // the connection made with A goes on: its SSL holds the replaced SSL_CTX
  check_echo(&old, "after");
  pair_close(&fresh);
  pair_close(&old);

  // a bad replacement is refused, naming flag and file; B stays
  FILE *f = fopen(path("lv.crt"), "w");
  if (!f) exit(2);
  fputs("not a certificate\n", f);
  fclose(f);
  memset(&e, 0, sizeof e);
  served[0] = 0;
  CHECK_EQ_INT(srv_htls_ctx_reload(x, served, sizeof served, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "--http-server-cert");
  CHECK_CONTAINS(e.msg, "lv.crt");
  CHECK_EQ_STR(served, "");
  f = fopen(path("lv_a.crt"), "w");  // the client's trust: B's certificate
  if (!f || !PEM_write_X509(f, b)) exit(2);
  fclose(f);
  CHECK_EQ_INT(open_and_check_peer(&fresh, x, "lv_a.crt", b), 1);
  pair_close(&fresh);

  // reloads on one thread while connections are made on this one (TSan's case)
  f = fopen(path("lv.crt"), "w");
  if (!f || !PEM_write_X509(f, b)) exit(2);
  fclose(f);
  reloader r = {.x = x, .n = 40};
  pthread_t th;
  CHECK_EQ_INT(pthread_create(&th, NULL, reload_loop, &r), 0);
  for (int i = 0; i < 40; i++) {
    CHECK_EQ_INT(open_and_check_peer(&fresh, x, "lv.crt", b), 1);
    pair_close(&fresh);
  }
  pthread_join(th, NULL);
  CHECK_EQ_INT(r.failed, 0);

  srv_htls_ctx_destroy(x);
  X509_free(a);
  X509_free(b);
  const char *names[] = {"lv.crt", "lv.key", "lv_a.crt"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(path(names[i]));
}

int main(void) {
  if (ttp_open(&pem, "test_http_tls")) return 2;
  make_pair("srv");
  make_pair("cli");
  make_pair("oth");
  test_round_trip();
  test_refused_clients();
  test_mutual();
  test_sniffing();
  test_bad_files();
  test_reload();
  const char *names[] = {"srv.crt", "srv.key", "cli.crt", "cli.key", "oth.crt", "oth.key"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(path(names[i]));
  rmdir(pem.dir);
  CHECK_DONE();
}
