// proto/grpc_offload.h: gRPC 1.51's executor threads stopped, for the server
// (server/grpc_front.c, --grpc-transport-offload) and the load generator
// (clients/load, --grpc-stop-executor), the two gRPC users of this repository;
// both keep them unless asked.
//
// What it buys: when two threads contend for a connection, gRPC 1.51 moves
// the rest of that connection's transport work (reading frames, RST_STREAMs,
// completing calls) onto one of its default executor threads, and under
// steady load it stays there: one thread doing the connection's work in
// series while the completion-queue threads wait. A soak with 40 % cancelled
// or expiring calls ran at 45k req/s for 3.5 minutes and then lost half its
// throughput for good, the server's executor thread busy and its CQ threads
// idle (H100, 2026-11-26, tests/bench/RESULTS.md). With the executor's
// threads stopped that work runs on the thread that polled it.
//
// What it costs, and why neither program stops them by default: gRPC also
// runs tcp_posix's backup poller on that executor when a write fills the
// socket. Stopped, the poller runs inline on whichever thread sent (an
// instance thread, a CQ thread) and waits in grpc_pollset_work for a wakeup
// that on an idle process only its 10 s deadline brings: 19 of 60 lone 6 MB
// answers were 10-21 s late (tests/integration/test_lifecycle.py
// test_large_answers_on_an_idle_server_are_not_held). Under heavy load
// another poller hands over within milliseconds, which is why the soaks did
// not show it.
//
// The switch is gRPC's own, grpc_core::Executor::SetThreadingDefault (its
// fork support runs without those threads through it). It has no C API, so
// it is looked up by its C++ name; a gRPC build without it keeps its executor.
#ifndef INFERD_PROTO_GRPC_OFFLOAD_H
#define INFERD_PROTO_GRPC_OFFLOAD_H

#include <dlfcn.h>
#include <stdbool.h>

// Call after grpc_init(). Process-wide. 1: stopped; 0: this gRPC has no switch.
static inline int grpc_offload_stop(void) {
  void (*set)(bool);
  // POSIX guarantees dlsym's void * converts to a function pointer
  *(void **)(&set) = dlsym(RTLD_DEFAULT, "_ZN9grpc_core8Executor19SetThreadingDefaultEb");
  if (!set) return 0;
  set(false);
  return 1;
}

#endif
