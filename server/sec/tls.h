// server/sec/tls.h: the certificates of the gRPC port's TLS, read and checked
// once at start so a wrong file fails the start with a message naming it,
// instead of every handshake failing later with a message only the client sees.
#ifndef INFERD_SERVER_TLS_H
#define INFERD_SERVER_TLS_H

#include "kernels/base/err.h"

typedef struct srv_tls srv_tls;

// What the port asks of clients: NONE asks for no certificate; OPTIONAL asks
// and verifies one if sent (clients without one are served); REQUIRED is
// mutual TLS. OPTIONAL and REQUIRED verify against --grpc-root-cert.
typedef enum srv_tls_client { SRV_TLS_CLIENT_NONE, SRV_TLS_CLIENT_OPTIONAL, SRV_TLS_CLIENT_REQUIRED } srv_tls_client;

// Reads the PEM files: the server's certificate (chain) and private key, and
// the CA certificates client certificates are verified against (`root_path`;
// required when `root_required`, optional otherwise: NULL). Checks that each
// parses as what it should be, that the key belongs to the certificate and
// that the certificate has not expired. Errors (ERR_INVALID_ARGUMENT) name the
// flag and the file: missing, unreadable, empty, not PEM, key and certificate
// not a pair, expired (with its notAfter). On success *out is the caller's,
// released with srv_tls_destroy.
int srv_tls_load(const char *cert_path, const char *key_path, const char *root_path, int root_required,
                 srv_tls **out, err *e);
void srv_tls_destroy(srv_tls *t);

// The PEM texts, NUL-terminated, owned by `t`; root is NULL when none was given.
const char *srv_tls_cert_pem(const srv_tls *t);
const char *srv_tls_key_pem(const srv_tls *t);
const char *srv_tls_root_pem(const srv_tls *t);
// "subject CN=..., serial 1A2B, notAfter Nov 26 19:00:00 2026 GMT": which
// certificate serves, for the log after a start or a reload. Owned by `t`.
const char *srv_tls_describe(const srv_tls *t);

#endif
