// proto/grpc_offload.h: gRPC 1.51's executor threads stopped, for the server
// (server/grpc_front.c, --grpc-transport-offload) and the load generator
// (clients/load, the same flag), the two gRPC users of this repository.
//
// Why: when two threads contend for a connection, gRPC 1.51 moves the rest of
// that connection's transport work (reading frames, RST_STREAMs, completing
// calls) onto one of its default executor threads, and under steady load it
// stays there: one thread doing the connection's work in series while the
// completion-queue threads wait. A soak with 40 % cancelled or expiring calls
// ran at 45k req/s for 3.5 minutes and then lost half its throughput for
// good, the server's executor thread busy and its CQ threads idle (H100,
// 2026-11-26, tests/bench/RESULTS.md). With the executor's threads stopped
// that work runs on the thread that polled it.
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
