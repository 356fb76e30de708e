// server/grpc/rapid_reset.h: the gRPC port's guard against HTTP/2 "rapid reset"
// (CVE-2023-44487): a client that opens calls and cancels them at once frees
// its stream slots as fast as it sends, so --grpc-max-concurrent-streams never
// bounds the work it makes the server do, and on a few cores it starves every
// other client (tests/bench/RESULTS.md, "rapid reset"). gRPC's C core added its
// own mitigations in 1.60; Debian 12 ships 1.51, so the front end counts, per
// connection, the calls it opened and the calls its client cancelled before
// their answer, and ends a connection whose client cancelled at least `limit`
// calls within one second, when those were also at least half of the calls it
// opened in that second. A client whose calls are mostly real pays for a real
// request with every cancel it sends.
//
// A deadline that expires before the answer is the same gesture made by the
// clock: the client sends the call and never waits (probe F7: 200 workers
// sending 256 KiB calls with 3 ms deadlines freed their streams as fast as
// explicit cancels, and the guard counted none). So an expiry counts as a
// cancel when the call's deadline, as the server matched it, left less than
// `min_deadline` (--grpc-rapid-reset-min-deadline-ms, SRV_RR_DEFAULT_MIN_
// DEADLINE_MS); longer deadlines are a client's honest latency budget and never
// count. The half-of-the-calls rule is unchanged, so the soak's mix (30 %
// cancelled within 1 ms, 10 % with 1-500 us deadlines: at most 40 % counted)
// stays inside: at the default limit a second must hold 1,000 counted calls,
// and reaching half of 2,000+ calls at 40 % is a 9-sigma draw.
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
// A deadline shorter than this that expires before its answer counts as a
// cancel. 10 ms: below it a deadline buys nothing real from a batching server
// (a batch's queue delay and run alone take milliseconds), so a client whose
// calls mostly expire that fast is not waiting for answers; latency-budgeted
// real-time clients (ranking, ads: 20-100 ms) stay above it, so a client of
// theirs that the server cannot serve in time under load is never cut off for
// it. An attacker who moves up to 10 ms holds each stream slot 10 ms, so its
// pace per connection is bounded by --grpc-max-concurrent-streams / 10 ms, as
// an honest client's with 10 ms calls is.
#define SRV_RR_DEFAULT_MIN_DEADLINE_MS 10
#define SRV_RR_PEER_MAX 96        // "ipv6:[...]:port" fits; longer peers are not counted

typedef struct srv_rr srv_rr;

// What took a connection over the limit (srv_rr_cancelled fills it).
typedef struct srv_rr_verdict {
  char peer[SRV_RR_PEER_MAX];  // as gRPC names it: "ipv4:127.0.0.1:41234"
  unsigned calls, cancels;     // in the second that crossed the limit
  unsigned expired;            // of cancels: short deadlines that expired (SRV_RR_EXPIRED)
} srv_rr_verdict;

// limit: client cancels per second that end a connection (>= 1).
// min_deadline_ms: an expired deadline shorter than this counts as a cancel
// (0: none does; at most 60000).
int srv_rr_create(int limit, int min_deadline_ms, srv_rr **out, err *e);
void srv_rr_destroy(srv_rr *rr);

// How a counted call ended, for the guard.
typedef enum srv_rr_kind {
  SRV_RR_ANSWERED = 0,  // answered, or failed by the server: not counted
  SRV_RR_CANCEL,        // the client cancelled before its answer and its deadline
  SRV_RR_EXPIRED,       // its deadline, shorter than min_deadline when it came, expired first
} srv_rr_kind;

// Classifies a call that is over at now_us. cancelled: the core reports it
// ended before the server's status (a client cancel, an expired deadline, the
// transport gone). answered_expired: the server itself answered
// DEADLINE_EXCEEDED (refused on arrival, or dropped from a queue at its
// deadline). deadline_us: INT64_MAX when none; left_us: what was left of the
// deadline when the call arrived. A cancel within a millisecond of the
// deadline is taken for the deadline's own expiry, which is not the client's
// doing.
srv_rr_kind srv_rr_classify(const srv_rr *rr, int cancelled, int answered_expired, int64_t now_us,
                            int64_t deadline_us, int64_t left_us);

// A call arrived on the connection named `peer` (grpc_call_get_peer's string,
// borrowed) at now_us (CLOCK_MONOTONIC). Returns the key to hand to
// srv_rr_cancelled for it and sets *window to the second it was counted in;
// 0 when the connection is not counted (a peer too long, or every slot of its
// stripe busy with connections active this second: the guard fails open).
uint64_t srv_rr_call(srv_rr *rr, const char *peer, int64_t now_us, int64_t *window);

// The call with `key` and `window` ended as `kind` (srv_rr_classify; SRV_RR_
// ANSWERED counts nothing). Only a call opened in its connection's current
// second counts, so the cancels of a second are always among its calls.
// Returns 1, and fills *v, when this cancel takes its connection over the
// limit: once per connection; the caller ends it (srv_rr_end_connection).
int srv_rr_cancelled(srv_rr *rr, uint64_t key, int64_t window, srv_rr_kind kind, srv_rr_verdict *v);

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
