// tls_ssl.c: see tls_ssl.h. Moved here from server/http/http_tls.c when the
// gRPC port got a terminator of its own, so both build their contexts alike.
#include "server/sec/tls_ssl.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

// The client offered ALPN protocols: pick ours (the callback's arg, in wire format) in our order. A
// client that offers ALPN without any of them would speak something else after the handshake: it
// gets no_application_protocol instead.
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                   unsigned int inlen, void *arg) {
  (void)ssl;
  const unsigned char *ours = arg;
  unsigned char *sel = NULL;
  if (SSL_select_next_proto(&sel, outlen, ours, (unsigned int)strlen((const char *)ours), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

static int ctx_fail(err *e, const srv_tls_ssl_opts *o, const char *file) {
  char why[256];
  unsigned long code = ERR_peek_last_error();
  if (code) ERR_error_string_n(code, why, sizeof why);
  else snprintf(why, sizeof why, "unknown reason");
  ERR_clear_error();
  return err_set(e, ERR_INVALID_ARGUMENT, "%s: %s%s: %s", o->what, o->flag_prefix, file, why);
}

// Certificate chain (leaf first), key and, when clients are asked for a
// certificate, the CAs it must chain to.
static int use_pems(SSL_CTX *ctx, const srv_tls *t, const srv_tls_ssl_opts *o, err *e) {
  BIO *b = BIO_new_mem_buf(srv_tls_cert_pem(t), -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: out of memory", o->what);
  X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
  int ok = x && SSL_CTX_use_certificate(ctx, x) == 1;
  X509_free(x);
  while (ok && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
    ok = SSL_CTX_add0_chain_cert(ctx, x) == 1;  // takes x on success
    if (!ok) X509_free(x);
  }
  BIO_free(b);
  ERR_clear_error();  // the chain loop ends on "no start line"
  if (!ok) return ctx_fail(e, o, "server-cert");

  b = BIO_new_mem_buf(srv_tls_key_pem(t), -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: out of memory", o->what);
  EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, (void *)"");
  BIO_free(b);
  ok = k && SSL_CTX_use_PrivateKey(ctx, k) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(k);
  if (!ok) return ctx_fail(e, o, "server-key");

  if (o->client == SRV_TLS_CLIENT_NONE) return 0;
  if (!srv_tls_root_pem(t)) return err_set(e, ERR_INVALID_ARGUMENT, "%s: client certificates need %sroot-cert FILE",
                                           o->what, o->flag_prefix);
  b = BIO_new_mem_buf(srv_tls_root_pem(t), -1);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: out of memory", o->what);
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
  if (!ok || n == 0) return ctx_fail(e, o, "root-cert");
  // OPTIONAL: a certificate that is sent must verify; REQUIRED: one must be sent
  int mode = SSL_VERIFY_PEER | (o->client == SRV_TLS_CLIENT_REQUIRED ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
  SSL_CTX_set_verify(ctx, mode, NULL);
  return 0;
}

int srv_tls_ssl_ctx(const srv_tls *t, const srv_tls_ssl_opts *o, SSL_CTX **out, err *e) {
  *out = NULL;
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) {
    ERR_clear_error();
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: cannot create the OpenSSL context", o->what);
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Client-initiated renegotiation costs the server a handshake per request
  // of a hostile client; neither HTTP/1.1 here nor HTTP/2 (RFC 9113 9.2.1) has a use for it.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Idle keep-alive connections give their record buffers back.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (o->session_id)
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)o->session_id, (unsigned int)strlen(o->session_id));
  if (o->alpn) SSL_CTX_set_alpn_select_cb(ctx, on_alpn, (void *)o->alpn);
  if (o->ciphers_tls12 && SSL_CTX_set_cipher_list(ctx, o->ciphers_tls12) != 1) {
    int rc = ctx_fail(e, o, "use-ssl (cipher list)");
    SSL_CTX_free(ctx);
    return rc;
  }
  int rc = use_pems(ctx, t, o, e);
  if (rc) {
    SSL_CTX_free(ctx);
    return rc;
  }
  *out = ctx;
  return 0;
}
