// server/grpc/grpc_tls.h: the TLS terminator of the gRPC port (--grpc-use-ssl).
// Debian 12's gRPC 1.51 hands an accepted descriptor to a server only with
// insecure credentials (grpc_server_add_channel_from_fd), so a TLS port used to
// keep gRPC's own listener: no connection cap, and no accepting again after
// the first EMFILE (issue 31). Now inferd's listener (grpc_accept.h) accepts
// TLS connections as it does plaintext ones, under the same cap, back-off and
// first-bytes wait, and hands each to this terminator, which does the TLS
// handshake with OpenSSL (TLS 1.2 at least, ALPN h2, the client-certificate
// mode of the certificate set) and then relays plaintext both ways over a
// socketpair whose other end goes to the core as an insecure connection.
//
// - One thread ("inferd-tls") with epoll runs every connection's handshake
//   and relay, non-blocking. Each direction holds at most one read's worth of
//   bytes (RELAY_CHUNK): while those wait for the other side, that side's
//   source is not read, so a slow reader holds its writer back through TCP
//   or the socketpair and nothing grows without bound.
// - A handshake not finished within `handshake_ms` of the hand-over is
//   closed, as gRPC's GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS did (the core's own
//   deadline then covers only its HTTP/2 setup on the socketpair).
// - Either side's end ends the other: the client's (close_notify, EOF, an
//   error) shuts the socketpair down once its last bytes reached the core;
//   the core's (it closed the connection) flushes what it wrote to the client,
//   sends close_notify and closes. The TCP descriptor, which the acceptor
//   counts toward --grpc-max-connections, is closed only once both ends are
//   done (or 5 s after the first one, whichever comes first).
// - Certificates: before each handshake the watch (server/sec/tls_watch.h) is
//   asked for a newer set, as gRPC's certificate fetcher was; a new set builds
//   a new context that serves new handshakes, while open connections keep the
//   one they were made with.
// - The core names such a connection "fd:<n>" after its end of the
//   socketpair; srv_gtls_inode and srv_gtls_peer map that back to the socket
//   and to the client's TCP address (for the rapid-reset guard).
#ifndef INFERD_SERVER_GRPC_TLS_H
#define INFERD_SERVER_GRPC_TLS_H

#include <stddef.h>

#include "kernels/base/err.h"
#include "server/sec/tls_watch.h"

typedef struct srv_gtls srv_gtls;

// Hands the plaintext end of a connection whose handshake finished over; the callee owns fd.
typedef void (*srv_gtls_hand_fn)(void *arg, int fd);

typedef struct srv_gtls_opts {
  srv_tlsw *certs;   // borrowed: must outlive the terminator
  int handshake_ms;  // >= 1
  srv_gtls_hand_fn hand;
  void *arg;
} srv_gtls_opts;

// Builds the first context from the certificate set (errors name the flag and OpenSSL's reason).
// Nothing runs before srv_gtls_start. On success *out is the caller's (srv_gtls_destroy).
int srv_gtls_create(const srv_gtls_opts *o, srv_gtls **out, err *e);

// Starts the thread.
int srv_gtls_start(srv_gtls *t, err *e);

// Takes an accepted TCP connection (non-blocking; the client has sent its first bytes); owns fd from
// then on. Any thread; the signature of srv_gacc_hand_fn, with `t` as arg. After srv_gtls_drain or
// stop the connection is closed.
void srv_gtls_take(void *t, int fd);

// From here on no connection is handed to the core (those still in their handshake are closed, those
// taken later too); relays already handed over go on. Returns once no hand-over is in progress, so the
// core can shut down afterwards. Idempotent.
void srv_gtls_drain(srv_gtls *t);

// Drains, waits up to grace_ms for the relays to end (the core closing its connections flushes their
// last bytes, GOAWAY and statuses, to the clients), then closes what is left and joins the thread.
// Idempotent.
void srv_gtls_stop(srv_gtls *t, int grace_ms);

// Stops (without a grace), then frees. NULL is a no-op.
void srv_gtls_destroy(srv_gtls *t);

// The socket inode of the core's end of a relay, by its descriptor (the "fd:<n>" gRPC names the
// connection by); 0 when fd is not (or no longer) one. Any thread, lock-free, as srv_gacc_inode.
unsigned long srv_gtls_inode(const srv_gtls *t, int fd);

// The client's TCP address ("ipv4:127.0.0.1:41234", gRPC's form) of the relay whose core end is fd
// with socket inode `ino`, into name (cap bytes). 1 when found, else 0 and name untouched. Any thread.
int srv_gtls_peer(srv_gtls *t, int fd, unsigned long ino, char *name, size_t cap);

#endif
