// Tests proto/grpc_offload.c against a stand-in libgrpc.so (fake_grpc_*.c)
// linked two ways: through its PLT, as Debian builds libgrpc, the library's
// own question reaches our definition, which forwards to the library's answer
// until declining and then answers false, counting each; with
// -Bsymbolic-functions (Ubuntu's default flags) the library calls its own copy,
// and grpc_offload_decline says it cannot help. FAKE_GRPC_VIA_PLT says which
// of the two this executable links.
#include "check.h"
#include "proto/grpc_offload.h"

int fake_grpc_ask(void);

int main(void) {
  int plt = FAKE_GRPC_VIA_PLT;
  CHECK_EQ_INT(fake_grpc_ask(), 1);  // the library's own answer, before declining
  CHECK_EQ_INT((int)grpc_offload_declined(), 0);
  CHECK_EQ_INT(grpc_offload_decline(), plt);
  CHECK_EQ_INT(fake_grpc_ask(), plt ? 0 : 1);
  CHECK_EQ_INT(fake_grpc_ask(), plt ? 0 : 1);
  CHECK_EQ_INT((int)grpc_offload_declined(), plt ? 2 : 0);
  CHECK_DONE();
}
