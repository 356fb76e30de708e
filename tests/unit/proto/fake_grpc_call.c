// tests/unit/proto/fake_grpc_call.c: the stand-in for libgrpc's combiner,
// which asks IsThreadedDefault() before offloading.
#include <stdbool.h>

bool fake_is_threaded_default(void) __asm__("_ZN9grpc_core8Executor17IsThreadedDefaultEv");
int fake_grpc_ask(void);
int fake_grpc_ask(void) { return fake_is_threaded_default(); }
