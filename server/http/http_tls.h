// server/http/http_tls.h: TLS for the HTTP endpoint, with OpenSSL's libssl over
// memory BIOs, so server/http/http_conn.c keeps its libuv reads and writes and only
// passes bytes through: ciphertext read from the socket goes in with
// srv_htls_feed, plaintext for the HTTP parser comes out of srv_htls_read
// (which also drives the non-blocking handshake), response bytes go in with
// srv_htls_write, and what must reach the client (handshake messages,
// records, alerts, close_notify) comes out of srv_htls_take_output.
// Single-threaded per connection; the context may be shared by every
// connection of one loop, and reloaded from another thread meanwhile.
#ifndef INFERD_SERVER_HTTP_TLS_H
#define INFERD_SERVER_HTTP_TLS_H

#include <stddef.h>

#include "kernels/base/err.h"

typedef struct srv_htls_ctx srv_htls_ctx;  // certificates and settings (an SSL_CTX)
typedef struct srv_htls srv_htls;          // one connection's TLS state

// Reads and checks the PEM files with server/sec/tls.c's checks (errors name the
// --http-* flag and the file), then builds the context: TLS 1.2 minimum,
// ALPN http/1.1, no renegotiation. With `mutual` every client must present a
// certificate that chains to `root_path`; without it root_path is ignored
// (as on the gRPC port). On success *out is the caller's, released with
// srv_htls_ctx_destroy after every connection made from it is destroyed.
int srv_htls_ctx_create(const char *cert_path, const char *key_path, const char *root_path, int mutual,
                        srv_htls_ctx **out, err *e);
void srv_htls_ctx_destroy(srv_htls_ctx *x);

// Reads and checks the same files again (as srv_htls_ctx_create does, same
// messages). On success connections created from here on use the new
// certificates, connections already open keep theirs until they close, and
// *served (cap bytes; may be NULL) says which certificate now serves
// (srv_tls_describe). On failure the certificates in service stay and *e
// names the file and the reason. Safe on any thread while another thread
// calls srv_htls_create; not concurrently with itself or destroy.
int srv_htls_ctx_reload(srv_htls_ctx *x, char *served, size_t cap, err *e);

// A server-side connection in its handshake; NULL when out of memory.
srv_htls *srv_htls_create(srv_htls_ctx *x);
void srv_htls_destroy(srv_htls *t);

// 1 when the first bytes a client sent on the TLS port cannot start a TLS
// record but look like an HTTP request line (an uppercase method): such a
// client is told in plain text to use https:// instead of getting an alert
// it cannot read.
int srv_htls_looks_like_plain_http(const char *data, size_t n);

// Ciphertext read from the socket. 0, or -1 when out of memory.
int srv_htls_feed(srv_htls *t, const char *data, size_t n);

// What srv_htls_read returns besides a count of plaintext bytes.
#define SRV_HTLS_WANT_INPUT 0L  // nothing more without more ciphertext
#define SRV_HTLS_CLOSED (-1L)   // the client sent close_notify: its end of the stream
#define SRV_HTLS_FAILED (-2L)   // handshake or record failure; srv_htls_failure says why

// Advances the handshake and decrypts: n > 0 bytes of plaintext into buf
// (cap >= 1), or one of the values above. Call until it is not > 0 before
// reading more from the socket: only then is all buffered ciphertext used,
// which is what bounds the buffers (one socket read plus one partial record).
// Afterwards take the output: the handshake or an alert may have produced some.
long srv_htls_read(srv_htls *t, char *buf, size_t cap);

// Encrypts n plaintext bytes into the output. 0, or -1 (out of memory, or
// the connection failed or is shut down).
int srv_htls_write(srv_htls *t, const char *data, size_t n);

// Queues close_notify, once, when the handshake finished and nothing failed.
void srv_htls_shutdown(srv_htls *t);

// Ciphertext waiting to be sent, in a new malloc'ed buffer of *len bytes that
// the caller frees; NULL with *len 0 when nothing waits, NULL with *len > 0
// when out of memory (the connection cannot go on).
char *srv_htls_take_output(srv_htls *t, size_t *len);

int srv_htls_handshake_done(const srv_htls *t);

// Why the connection failed (OpenSSL's reason: "wrong version number",
// "peer did not return a certificate"), "" when it did not.
const char *srv_htls_failure(const srv_htls *t);

#endif
