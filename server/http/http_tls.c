// http_tls.c: the HTTP endpoint's TLS, libssl over two memory BIOs. The
// socket stays libuv's (server/http/http_conn.c): OpenSSL never touches a descriptor,
// so its handshake is non-blocking by construction and every byte still goes
// through the endpoint's limits and idle sweep. The certificate files are
// read and checked by server/sec/tls.c, the gRPC port's checker, so both ports
// refuse the same bad files with the same messages; the context is built by
// server/sec/tls_ssl.c, as the gRPC port's terminator builds its own.
#include "server/http/http_tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sec/tls.h"
#include "server/sec/tls_ssl.h"

// Above this much ciphertext in one take, the write BIO is replaced by a
// fresh one: a memory BIO keeps its largest size, and an idle keep-alive
// connection should not hold a large response's worth of memory.
#define WBIO_KEEP_BYTES (256 * 1024)

// The paths are kept for reloads. `mu` guards `ctx` alone: main swaps it on
// SIGHUP while the loop thread makes connections from it. A connection's SSL
// holds its own reference to the SSL_CTX it was made from (SSL_new takes one,
// SSL_free drops it), so a swap leaves open connections on the old context,
// which is freed with the last of them.
struct srv_htls_ctx {
  pthread_mutex_t mu;
  SSL_CTX *ctx;
  char *cert_path, *key_path, *root_path;  // root_path NULL without mutual TLS
  int mutual;
};

struct srv_htls {
  SSL *ssl;
  BIO *rbio, *wbio;  // owned by ssl
  int failed, shut;
  char why[160];
};

// --- context

// srv_tls_load names the gRPC flags in its messages; the checks are the
// same for HTTP, so the names are turned into the HTTP port's (same length).
static void rename_flags(err *e) {
  for (char *p = strstr(e->msg, "--grpc-"); p; p = strstr(p + 7, "--grpc-")) memcpy(p, "--http-", 7);
}

static char *dup_or_null(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

// Reads, checks and builds one SSL_CTX from the files; *served (cap bytes,
// may be NULL) gets which certificate it serves (srv_tls_describe).
static int build_ctx(const char *cert_path, const char *key_path, const char *root_path, int mutual,
                     SSL_CTX **out, char *served, size_t cap, err *e) {
  *out = NULL;
  srv_tls *t = NULL;
  if (srv_tls_load(cert_path, key_path, mutual ? root_path : NULL, mutual, &t, e) != 0) {
    rename_flags(e);
    return e ? e->code : ERR_INVALID_ARGUMENT;
  }
  // ALPN http/1.1: a client offering only h2 gets no_application_protocol
  srv_tls_ssl_opts o = {.alpn = "\x08http/1.1", .client = mutual ? SRV_TLS_CLIENT_REQUIRED : SRV_TLS_CLIENT_NONE,
                        .flag_prefix = "--http-", .what = "TLS on HTTP", .session_id = "inferd-http"};
  SSL_CTX *ctx = NULL;
  int rc = srv_tls_ssl_ctx(t, &o, &ctx, e);
  if (rc == 0 && served && cap) snprintf(served, cap, "%s", srv_tls_describe(t));
  srv_tls_destroy(t);  // the key now lives only in the context
  if (rc) return rc;
  *out = ctx;
  return 0;
}

int srv_htls_ctx_create(const char *cert_path, const char *key_path, const char *root_path, int mutual,
                        srv_htls_ctx **out, err *e) {
  *out = NULL;
  if (!cert_path) return err_set(e, ERR_INVALID_ARGUMENT, "TLS on HTTP needs --http-server-cert FILE");
  if (!key_path) return err_set(e, ERR_INVALID_ARGUMENT, "TLS on HTTP needs --http-server-key FILE");
  if (mutual && !root_path)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "--http-use-ssl-mutual needs --http-root-cert FILE (the CA that signs client certificates)");
  SSL_CTX *ctx = NULL;
  int rc = build_ctx(cert_path, key_path, root_path, mutual, &ctx, NULL, 0, e);
  if (rc) return rc;
  srv_htls_ctx *x = calloc(1, sizeof *x);
  if (x) {
    x->cert_path = dup_or_null(cert_path);
    x->key_path = dup_or_null(key_path);
    x->root_path = mutual ? dup_or_null(root_path) : NULL;
  }
  if (!x || !x->cert_path || !x->key_path || (mutual && !x->root_path) || pthread_mutex_init(&x->mu, NULL) != 0) {
    if (x) {
      free(x->cert_path);
      free(x->key_path);
      free(x->root_path);
    }
    free(x);
    SSL_CTX_free(ctx);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS on HTTP: out of memory");
  }
  x->ctx = ctx;
  x->mutual = mutual;
  *out = x;
  return 0;
}

int srv_htls_ctx_reload(srv_htls_ctx *x, char *served, size_t cap, err *e) {
  SSL_CTX *fresh = NULL;
  int rc = build_ctx(x->cert_path, x->key_path, x->root_path, x->mutual, &fresh, served, cap, e);
  if (rc) return rc;  // the context in service stays
  pthread_mutex_lock(&x->mu);
  SSL_CTX *old = x->ctx;
  x->ctx = fresh;
  pthread_mutex_unlock(&x->mu);
  SSL_CTX_free(old);  // drops our reference; open connections hold theirs
  return 0;
}

void srv_htls_ctx_destroy(srv_htls_ctx *x) {
  if (!x) return;
  SSL_CTX_free(x->ctx);
  pthread_mutex_destroy(&x->mu);
  free(x->cert_path);
  free(x->key_path);
  free(x->root_path);
  free(x);
}

// --- connection

srv_htls *srv_htls_create(srv_htls_ctx *x) {
  srv_htls *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  pthread_mutex_lock(&x->mu);
  t->ssl = SSL_new(x->ctx);  // takes its own reference to the context in service
  pthread_mutex_unlock(&x->mu);
  t->rbio = BIO_new(BIO_s_mem());
  t->wbio = BIO_new(BIO_s_mem());
  if (!t->ssl || !t->rbio || !t->wbio) {
    SSL_free(t->ssl);
    BIO_free(t->rbio);
    BIO_free(t->wbio);
    free(t);
    ERR_clear_error();
    return NULL;
  }
  // an empty read BIO means "wait for more", not end of stream
  BIO_set_mem_eof_return(t->rbio, -1);
  SSL_set_bio(t->ssl, t->rbio, t->wbio);  // ssl owns both from here
  SSL_set_accept_state(t->ssl);
  return t;
}

void srv_htls_destroy(srv_htls *t) {
  if (!t) return;
  SSL_free(t->ssl);
  free(t);
}

int srv_htls_looks_like_plain_http(const char *data, size_t n) {
  // A TLS connection starts with a handshake record (type 22); HTTP methods
  // are uppercase tokens ("GET", "POST", "PRI" for h2c).
  return n > 0 && data[0] >= 'A' && data[0] <= 'Z';
}

int srv_htls_feed(srv_htls *t, const char *data, size_t n) {
  size_t written = 0;
  if (n && (BIO_write_ex(t->rbio, data, n, &written) != 1 || written != n)) {
    ERR_clear_error();
    return -1;
  }
  return 0;
}

static long fail(srv_htls *t) {
  t->failed = 1;
  unsigned long code = ERR_peek_last_error();
  if (code) ERR_error_string_n(code, t->why, sizeof t->why);
  else snprintf(t->why, sizeof t->why, "connection failed");
  ERR_clear_error();
  return SRV_HTLS_FAILED;
}

long srv_htls_read(srv_htls *t, char *buf, size_t cap) {
  if (t->failed) return SRV_HTLS_FAILED;
  size_t got = 0;
  ERR_clear_error();
  if (SSL_read_ex(t->ssl, buf, cap, &got) == 1) return (long)got;  // got <= cap <= the read buffer
  switch (SSL_get_error(t->ssl, 0)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:  // a memory BIO takes every write; kept for completeness
      return SRV_HTLS_WANT_INPUT;
    case SSL_ERROR_ZERO_RETURN:
      return SRV_HTLS_CLOSED;
    default:
      return fail(t);
  }
}

int srv_htls_write(srv_htls *t, const char *data, size_t n) {
  if (t->failed || t->shut) return -1;
  size_t done = 0;
  ERR_clear_error();
  // A memory BIO never pushes back, so one call writes everything or fails.
  if (n && (SSL_write_ex(t->ssl, data, n, &done) != 1 || done != n)) {
    fail(t);
    return -1;
  }
  return 0;
}

void srv_htls_shutdown(srv_htls *t) {
  if (t->failed || t->shut || !SSL_is_init_finished(t->ssl)) return;
  t->shut = 1;
  ERR_clear_error();
  // Writes close_notify; returns 0 (the client's not seen yet), which is
  // all a server that closes afterwards needs.
  (void)SSL_shutdown(t->ssl);
  ERR_clear_error();
}

char *srv_htls_take_output(srv_htls *t, size_t *len) {
  size_t n = BIO_ctrl_pending(t->wbio);
  *len = n;
  if (n == 0) return NULL;
  char *out = malloc(n);
  size_t got = 0;
  if (!out || BIO_read_ex(t->wbio, out, n, &got) != 1 || got != n) {
    free(out);
    ERR_clear_error();
    return NULL;  // *len > 0: the caller closes
  }
  if (n > WBIO_KEEP_BYTES) {
    BIO *fresh = BIO_new(BIO_s_mem());
    if (fresh) {  // without one the old BIO simply stays
      SSL_set0_wbio(t->ssl, fresh);  // frees the old one
      t->wbio = fresh;
    }
  }
  return out;
}

int srv_htls_handshake_done(const srv_htls *t) { return SSL_is_init_finished(t->ssl); }

const char *srv_htls_failure(const srv_htls *t) { return t->why; }
