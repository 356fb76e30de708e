// server/grpc/rapid_reset.h: the gRPC port's guard against HTTP/2 "rapid reset"
// (CVE-2023-44487): a client that opens calls and cancels them at once frees
// its stream slots as fast as it sends, so --grpc-max-concurrent-streams never
// bounds the work it makes the server do, and on a few cores it starves every
// other client (tests/bench/RESULTS.md, "rapid reset"). gRPC's C core added its
// own mitigations in 1.60; Debian 12 ships 1.51, so the front end counts, per
// connection, the calls it opened and the calls its client cancelled before
// their answer (deadline expiries are not cancels), and ends a connection whose
// client cancelled at least `limit` calls within one second, when those were
// also at least half of the calls it opened in that second. A client whose
// calls are mostly real pays for a real request with every cancel it sends;
// the soak's mix (30 % cancelled) stays well inside.
//
// Ending a connection is shutdown(2) of its socket, found by its addresses in
// the kernel's TCP table and its inode among this process's descriptor links,
// so no other thread's descriptor is touched. gRPC's transport then sees the
// peer gone, cancels that connection's calls and closes it; every other
// connection is untouched. The C core gives no handle on a server-side
// connection to close it any other way.
//
// Thread-safe: the counts sit in a few stripes, each behind its own mutex, so
// CQ threads seldom meet; a call costs one peer string from the core and one
// uncontended lock.
#ifndef INFERD_SERVER_RAPID_RESET_H
#define INFERD_SERVER_RAPID_RESET_H

#include <stdint.h>

#include "kernels/base/err.h"

#define SRV_RR_DEFAULT_LIMIT 1000  // client cancels per second on one connection
#define SRV_RR_PEER_MAX 96        // "ipv6:[...]:port" fits; longer peers are not counted

typedef struct srv_rr srv_rr;

// What took a connection over the limit (srv_rr_cancelled fills it).
typedef struct srv_rr_verdict {
  char peer[SRV_RR_PEER_MAX];  // as gRPC names it: "ipv4:127.0.0.1:41234"
  unsigned calls, cancels;     // in the second that crossed the limit
} srv_rr_verdict;

// limit: client cancels per second that end a connection (>= 1).
int srv_rr_create(int limit, srv_rr **out, err *e);
void srv_rr_destroy(srv_rr *rr);

// A call arrived on the connection named `peer` (grpc_call_get_peer's string,
// borrowed) at now_us (CLOCK_MONOTONIC). Returns the key to hand to
// srv_rr_cancelled for it and sets *window to the second it was counted in;
// 0 when the connection is not counted (a peer too long, or every slot of its
// stripe busy with connections active this second: the guard fails open).
uint64_t srv_rr_call(srv_rr *rr, const char *peer, int64_t now_us, int64_t *window);

// The client cancelled the call with `key` and `window` before its answer and
// before its deadline. Only a call opened in its connection's current second
// counts, so the cancels of a second are always among its calls. Returns 1, and
// fills *v, when this cancel takes its connection over the limit: once per
// connection; the caller ends it (srv_rr_end_connection).
int srv_rr_cancelled(srv_rr *rr, uint64_t key, int64_t window, srv_rr_verdict *v);

// Ends the established TCP connection between local port `port` and `peer`
// (gRPC's peer string) by shutdown(2) of its socket. Returns 1 when it did, 0
// when no such connection is open (the client already left) or `peer` is not
// a TCP address gRPC writes; -1 with *e when the descriptors cannot be read.
int srv_rr_end_connection(const char *peer, int port, err *e);

// The same for a connection inferd accepted itself and handed to gRPC
// (grpc_accept.h), which gRPC names "fd:<n>"; the front end counts it as
// "fd:<n>:<socket inode>" so a descriptor reused for a later connection
// starts a tally of its own. shutdown(2) of descriptor n, only while it is
// still that socket (same inode): call it while one of the connection's calls
// is still referenced, which keeps the descriptor open. Returns 1 when it
// did, 0 when not (gone, or `peer` not of that form); *name (name_len bytes)
// gets its client's address as gRPC writes one ("ipv4:127.0.0.1:41234"), or
// `peer` when unknown.
int srv_rr_end_fd_connection(const char *peer, char *name, size_t name_len);

#endif
