// proto/grpc_offload.c: see grpc_offload.h.
#include "proto/grpc_offload.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>

#define IS_THREADED_DEFAULT "_ZN9grpc_core8Executor17IsThreadedDefaultEv"

// grpc_offload.h says why this state is process-wide.
static atomic_int declining;
static atomic_ullong declined;
static _Atomic(void *) real;  // libgrpc's IsThreadedDefault, once looked up

// bool grpc_core::Executor::IsThreadedDefault(): a static member function
// without arguments, so a C function of the same symbol name has its ABI.
// Exported from the executable (CMake: --export-dynamic-symbol).
bool grpc_offload_is_threaded_default(void) __asm__(IS_THREADED_DEFAULT);
bool grpc_offload_is_threaded_default(void) {
  if (atomic_load_explicit(&declining, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&declined, 1, memory_order_relaxed);
    return false;
  }
  // gRPC's own answer; looked up once (a lookup per contended combiner would cost more than the offload)
  void *p = atomic_load_explicit(&real, memory_order_acquire);
  if (!p) {
    p = dlsym(RTLD_NEXT, IS_THREADED_DEFAULT);
    if (!p) return false;  // no gRPC below us: nothing to offload to
    atomic_store_explicit(&real, p, memory_order_release);
  }
  bool (*f)(void);
  *(void **)(&f) = p;  // POSIX guarantees dlsym's void * converts to a function pointer
  return f();
}

int grpc_offload_decline(void) {
  atomic_store_explicit(&declining, 1, memory_order_relaxed);
  void *found = dlsym(RTLD_DEFAULT, IS_THREADED_DEFAULT);
  return found == (void *)grpc_offload_is_threaded_default;
}

uint64_t grpc_offload_declined(void) { return atomic_load_explicit(&declined, memory_order_relaxed); }
