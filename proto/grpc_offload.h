// proto/grpc_offload.h: keeping gRPC 1.51's transport work off its executor,
// for the server (server/grpc/grpc_front.c, --grpc-transport-offload) and the load
// generator (clients/load, --grpc-transport-offload), the two gRPC users of this
// repository.
//
// Why: when two threads contend for a connection, gRPC 1.51's combiner hands
// the rest of that connection's transport work (reading frames, RST_STREAMs,
// completing calls) to one of its default executor threads, and under steady
// load it stays there: one thread doing the connection's work in series
// while the completion-queue threads wait. An executor thread draining a
// combiner that load keeps feeding never gets back to its own queue, and
// other connections' offloads queued there wait with it. A soak with 40 %
// cancelled or expiring calls ran at 45k req/s for 3.5 minutes and then lost
// half its throughput for good, the executor thread busy and the CQ threads
// idle (H100, 2026-11-26, tests/bench/RESULTS.md).
//
// How: the combiner offloads only when grpc_core::Executor::IsThreadedDefault()
// says the executor has threads, and that is the function's only caller in
// libgrpc (called through its PLT). grpc_offload.c defines that function in
// the executable, which the dynamic linker finds before libgrpc's: it answers
// false while declining and asks libgrpc's otherwise. The executor keeps its
// threads for everything else it runs. Stopping those threads instead
// (Executor::SetThreadingDefault(false), tried first) also moved tcp_posix's
// backup poller, which gRPC runs there for a write that filled the socket,
// onto whichever thread sent: on an idle server that thread then waited 10 s
// (test_lifecycle.py test_large_answers_on_an_idle_server_are_not_held).
//
// The interposed function is process-wide state by nature, like the combiner
// it steers: set once at start, before any call.
#ifndef INFERD_PROTO_GRPC_OFFLOAD_H
#define INFERD_PROTO_GRPC_OFFLOAD_H

#include <stdint.h>

// From now on gRPC's combiner keeps its work on the thread that holds it.
// Returns 1 when it can: the dynamic linker resolves IsThreadedDefault to ours
// and libgrpc asks through its PLT (Debian's does). 0 when it cannot: a static
// gRPC, or one linked with -Bsymbolic-functions (Ubuntu's default flags),
// which calls its own copy; its combiner then offloads as before.
int grpc_offload_decline(void);

// How many offloads were declined so far (each a contended combiner whose
// thread kept its work).
uint64_t grpc_offload_declined(void);

#endif
