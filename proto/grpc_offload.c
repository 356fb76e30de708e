// proto/grpc_offload.c: see grpc_offload.h.
#include "proto/grpc_offload.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>

#define IS_THREADED_DEFAULT "_ZN9grpc_core8Executor17IsThreadedDefaultEv"

// grpc_offload.h says why these two are process-wide.
static atomic_int declining;
static atomic_ullong declined;

// bool grpc_core::Executor::IsThreadedDefault(): a static member function
// without arguments, so a C function of the same symbol name has its ABI.
// Exported from the executable (CMake: --export-dynamic-symbol).
bool grpc_offload_is_threaded_default(void) __asm__(IS_THREADED_DEFAULT);
bool grpc_offload_is_threaded_default(void) {
  if (atomic_load_explicit(&declining, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&declined, 1, memory_order_relaxed);
    return false;
  }
  bool (*real)(void);
  // POSIX guarantees dlsym's void * converts to a function pointer
  *(void **)(&real) = dlsym(RTLD_NEXT, IS_THREADED_DEFAULT);
  return real ? real() : false;
}

int grpc_offload_decline(void) {
  atomic_store_explicit(&declining, 1, memory_order_relaxed);
  void *found = dlsym(RTLD_DEFAULT, IS_THREADED_DEFAULT);
  return found == (void *)grpc_offload_is_threaded_default;
}

uint64_t grpc_offload_declined(void) { return atomic_load_explicit(&declined, memory_order_relaxed); }
