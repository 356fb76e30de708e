// tests/unit/proto/fake_grpc_def.c: a stand-in for libgrpc's
// grpc_core::Executor::IsThreadedDefault() (same symbol name; a static member
// function without arguments has a C function's ABI). Its caller lives in
// another file, so only the linker decides how the call binds.
#include <stdbool.h>

bool fake_is_threaded_default(void) __asm__("_ZN9grpc_core8Executor17IsThreadedDefaultEv");
bool fake_is_threaded_default(void) { return true; }
