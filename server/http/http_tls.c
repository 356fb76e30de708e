// http_tls.c: the HTTP endpoint's TLS, libssl over two memory BIOs. The
// socket stays libuv's (server/http/http_conn.c): OpenSSL never touches a descriptor,
// so its handshake is non-blocking by construction and every byte still goes
// through the endpoint's limits and idle sweep. The certificate files are
// read and checked by server/sec/tls.c, the gRPC port's checker, so both ports
// refuse the same bad files with the same messages.
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

// The client offered ALPN protocols: http/1.1 is the only one spoken here.
// A client that offers ALPN without it (h2 only) would speak something else
// after the handshake: it gets no_application_protocol instead.
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                   unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  static const unsigned char ours[] = "\x08http/1.1";
  unsigned char *sel = NULL;
  if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

static int ctx_fail(err *e, const char *what) {
  char why[256];
  unsigned long code = ERR_peek_last_error();
  if (code) ERR_error_string_n(code, why, sizeof why);
  else snprintf(why, sizeof why, "unknown reason");
  ERR_clear_error();
  return err_set(e, ERR_INVALID_ARGUMENT, "TLS on HTTP: %s: %s", what, why);
}

// Certificate chain (leaf first), key and, for mutual TLS, the client CAs,
// from the PEM texts server/sec/tls.c checked.
static int use_pems(SSL_CTX *ctx, const srv_tls *t, err *e) {
  BIO *b = BIO_new_mem_buf(srv_tls_cert_pem(t), -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS on HTTP: out of memory");
  X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
  int ok = x && SSL_CTX_use_certificate(ctx, x) == 1;
  X509_free(x);
  while (ok && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
    ok = SSL_CTX_add0_chain_cert(ctx, x) == 1;  // takes x on success
    if (!ok) X509_free(x);
  }
  BIO_free(b);
  ERR_clear_error();  // the chain loop ends on "no start line"
  if (!ok) return ctx_fail(e, "--http-server-cert");

  b = BIO_new_mem_buf(srv_tls_key_pem(t), -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS on HTTP: out of memory");
  EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, (void *)"");
  BIO_free(b);
  ok = k && SSL_CTX_use_PrivateKey(ctx, k) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(k);
  if (!ok) return ctx_fail(e, "--http-server-key");

  if (!srv_tls_root_pem(t)) return 0;  // loaded for mutual TLS alone (srv_htls_ctx_create)
  b = BIO_new_mem_buf(srv_tls_root_pem(t), -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS on HTTP: out of memory");
  X509_STORE *store = SSL_CTX_get_cert_store(ctx);
  int n = 0;
  ok = 1;
  while (ok && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
    // the CA names also go in the CertificateRequest, so a client with
    // several certificates can pick the right one
    ok = X509_STORE_add_cert(store, x) == 1 && SSL_CTX_add_client_CA(ctx, x) == 1;
    X509_free(x);
    n++;
  }
  BIO_free(b);
  ERR_clear_error();
  if (!ok || n == 0) return ctx_fail(e, "--http-root-cert");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  return 0;
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
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) {
    srv_tls_destroy(t);
    ERR_clear_error();
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS on HTTP: cannot create the OpenSSL context");
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Client-initiated renegotiation costs the server a handshake per request
  // of a hostile client; HTTP/1.1 has no use for it.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Idle keep-alive connections give their record buffers back.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  // Without a session id context, resumed sessions fail under client verification.
  static const unsigned char sid[] = "inferd-http";
  SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
  SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
  int rc = use_pems(ctx, t, e);
  if (rc == 0 && served && cap) snprintf(served, cap, "%s", srv_tls_describe(t));
  srv_tls_destroy(t);  // the key now lives only in the context
  if (rc) {
    SSL_CTX_free(ctx);
    return rc;
  }
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
