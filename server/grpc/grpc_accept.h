// server/grpc/grpc_accept.h: inferd's own listener for the gRPC port,
// plaintext or TLS. Debian 12's gRPC 1.51 caps no connections, and its
// listener gives up for good on any accept4 error but EAGAIN/EINTR
// (tcp_server_posix.cc, on_read): one EMFILE and the port never accepts
// again. So inferd binds and listens itself, accepts on a thread of its own
// and hands each connection over: to the core (grpc_server_add_channel_from_fd,
// which takes only insecure credentials) on a plaintext port, to the TLS
// terminator (grpc_tls.h) on a TLS one, which hands the core the plaintext.
//
// - Out of descriptors (EMFILE, ENFILE, ENOMEM, ENOBUFS): the connections
//   waiting in the backlog are accepted on a descriptor kept spare for this
//   and closed at once (their clients fail fast instead of hanging), one line
//   is logged per 10 s, and accepting resumes after a back-off of 100 ms
//   doubling to 1 s. It never gives up.
// - At `max_conns` live connections a new one is accepted and reset at once
//   (one line per 10 s). The core says nothing when it closes a connection,
//   so the acceptor keeps the socket inode of every descriptor it handed over
//   and, when the count reaches the cap (at most every 50 ms), checks each
//   with fstat: a closed descriptor (EBADF) or one reused for another file
//   (another inode) is gone. That costs one fstat per counted connection per
//   check (~0.3 us each: ~3 ms per 50 ms at 10,000 connections, only while
//   the port stays at its cap).
//
// - A client must speak first (HTTP/2's preface) within `preface_ms` of
//   connecting: until its first bytes come the connection waits here, off
//   the core (counted toward the cap), and is reset at the deadline, so idle
//   TCP connections cannot hold the slots (gRPC's own listener closed them
//   after its 120 s handshake timeout). A client's preface is normally there
//   when the connection is accepted: then nothing waits.
//
// Thread-safe where stated; the table is written by the acceptor thread only.
#ifndef INFERD_SERVER_GRPC_ACCEPT_H
#define INFERD_SERVER_GRPC_ACCEPT_H

#include "kernels/base/err.h"

typedef struct srv_gacc srv_gacc;

#define SRV_GACC_PREFACE_MS 10000  // the front end's wait for a new connection's first bytes

// Hands an accepted, non-blocking, close-on-exec TCP socket over; it owns fd from then on.
typedef void (*srv_gacc_hand_fn)(void *arg, int fd);

// Binds and listens on `addr` ("0.0.0.0:8001", "[::]:8001", "host:port"; port 0 picks a free one, a
// wildcard address listens on IPv6 and IPv4 where it can, as gRPC does) with SO_REUSEADDR and without
// SO_REUSEPORT (a second server on a busy port fails). Nothing is accepted before srv_gacc_start.
// A busy or invalid address fails with ERR_UNAVAILABLE naming it.
int srv_gacc_create(const char *addr, int max_conns, int preface_ms, srv_gacc **out, err *e);

// The bound port.
int srv_gacc_port(const srv_gacc *a);

// Starts the acceptor thread, which calls hand(arg, fd) for every connection it keeps.
int srv_gacc_start(srv_gacc *a, srv_gacc_hand_fn hand, void *arg, err *e);

// Stops accepting: joins the thread and closes the listening sockets (new
// connects are refused). Connections handed over stay the core's. Idempotent.
void srv_gacc_stop(srv_gacc *a);

// Stops, then frees. NULL is a no-op.
void srv_gacc_destroy(srv_gacc *a);

// The socket inode recorded when fd was handed over; 0 when fd was not (or is
// no longer known to be) one of its connections. Any thread, lock-free: for a
// call still referenced, whose connection therefore still holds fd.
unsigned long srv_gacc_inode(const srv_gacc *a, int fd);

// The default cap of one port's connections: min(10000, (nofile - reserve) / 2)
// from the soft RLIMIT_NOFILE, reserve = 256 (a quarter of it under 1024), at
// least 1, so the gRPC and HTTP ports together leave descriptors for models,
// logs and the rest. Read at the call: call it after the limit was raised.
int srv_gacc_default_max_conns(void);

#endif
