// fixture.h: a whole inferd inside a fuzz driver, for the drivers that go
// through the server's own transports (fuzz_stream over gRPC, fuzz_rest over
// HTTP): the registry of a repository in explicit model-control mode (every
// model loaded), client shared memory with one 4096-byte region "r0", the
// scheduler's loop and instance threads, model control, the REST routes, the
// HTTP endpoint and the gRPC server, on loopback ports the kernel picks.
// Set up once per process and never torn down (libFuzzer exits the process);
// the region's object is unlinked as soon as it is mapped.
#ifndef INFERD_TESTS_FUZZ_FIXTURE_H
#define INFERD_TESTS_FUZZ_FIXTURE_H

#include "engine/repo/config.h"
#include "server/core/registry.h"
#include "server/core/server.h"

// The registry options of every driver: auto-complete as the server's
// default, and model_warmup entries of at most 8 MiB in all, so a load
// asking more is refused at once where a GiB of warmup would take seconds
// under ASan and time the driver out (fuzz_rest: model_warmup in a config
// override).
static inline srv_registry_opts fz_registry_opts(void) {
  return (srv_registry_opts){.default_max_batch_size = CONFIG_DEFAULT_MAX_BATCH_SIZE, .warmup_max_bytes = 8u << 20};
}

typedef struct fz_server {
  srv_server srv;
  int grpc_port, http_port;
} fz_server;

// Starts everything; aborts with a message when something fails (a fuzz
// driver has nothing to fall back to).
void fz_serve(fz_server *f, const char *repo);

// Unlinks the shared memory objects /dev/shm/<stem><pid>-* that a driver
// process left behind when it died (a crash or a timeout skips its atexit
// cleanup): only those of processes that no longer exist.
void fz_shm_sweep(const char *stem);

#endif
