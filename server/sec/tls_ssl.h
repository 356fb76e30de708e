// server/sec/tls_ssl.h: an OpenSSL server context (SSL_CTX) from a checked
// certificate set (tls.h), for the two TLS terminators inferd runs itself:
// the HTTP port's (server/http/http_tls.c, over memory BIOs) and the gRPC
// port's (server/grpc/grpc_tls.c, on the socket). One place for what both
// want: TLS 1.2 at least, no renegotiation, the chain, the key, the client
// CAs and what is asked of clients, ALPN.
#ifndef INFERD_SERVER_TLS_SSL_H
#define INFERD_SERVER_TLS_SSL_H

#include <stddef.h>

#include "kernels/base/err.h"
#include "server/sec/tls.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

typedef struct srv_tls_ssl_opts {
  // The application protocols spoken, in ALPN's wire format, preferred first ("\x08http/1.1"); a
  // string literal (the context points at it). A client that offers ALPN without any of them gets
  // no_application_protocol; one that offers none is let through (the caller decides).
  const char *alpn;
  // What is asked of clients: OPTIONAL and REQUIRED verify against the set's root certificates, which
  // are also named in the CertificateRequest; NONE ignores any root the set holds.
  srv_tls_client client;
  // TLS 1.2 cipher list (OpenSSL's syntax); NULL: OpenSSL's defaults. TLS 1.3's suites stay OpenSSL's.
  const char *ciphers_tls12;
  const char *flag_prefix;  // "--http-" or "--grpc-": errors name the flag of the file that failed
  const char *what;         // "TLS on HTTP": errors start with it
  const char *session_id;   // the session id context, so resumption works under client verification
} srv_tls_ssl_opts;

// Builds the context from the PEM texts of `t` (already checked by srv_tls_load). On success *out is
// the caller's (SSL_CTX_free); `t` may be destroyed afterwards. Errors name the flag and OpenSSL's reason.
int srv_tls_ssl_ctx(const srv_tls *t, const srv_tls_ssl_opts *o, struct ssl_ctx_st **out, err *e);

#endif
