// server/sec/tls_watch.h: the gRPC port's certificates while serving. Holds the
// set in service and replaces it, without a restart and without touching open
// connections, when asked (SIGHUP) or when the files change on disk (checked
// at most once a second, from the handshakes that would use them). A
// replacement that fails a check keeps the set in service and logs why,
// naming the file. Thread-safe: gRPC's threads fetch while main reloads.
#ifndef INFERD_SERVER_TLS_WATCH_H
#define INFERD_SERVER_TLS_WATCH_H

#include "kernels/base/err.h"
#include "server/sec/tls.h"

typedef struct srv_tlsw srv_tlsw;

// How reloads reach the log (this module has no logger of its own): `failed`
// is 0 for "now serving ..." and 1 for "kept the old certificates because ...".
// Called on whichever thread reloaded, with the module's mutex held.
typedef void (*srv_tlsw_note)(void *ctx, int failed, const char *msg);

// Loads the files once (srv_tls_load: errors name the file and fail the
// start). The paths are copied. `client` says whether --grpc-root-cert is
// needed. On success *out is the caller's, released with srv_tlsw_destroy
// once no server fetches from it any more.
int srv_tlsw_create(const char *cert_path, const char *key_path, const char *root_path, srv_tls_client client,
                    srv_tlsw_note note, void *note_ctx, srv_tlsw **out, err *e);
void srv_tlsw_destroy(srv_tlsw *w);

srv_tls_client srv_tlsw_client(const srv_tlsw *w);

// Reads the files again now. On success the new set serves every handshake
// from here on and 0 is returned; on failure the set in service stays and *e
// says why. Both are also noted (see srv_tlsw_note).
int srv_tlsw_reload(srv_tlsw *w, err *e);

// For the port's certificate fetcher, on any thread. First checks the files'
// change stamps if a second passed since the last look (a change reloads,
// a failure is logged and kept out of service). Then, when the set in service
// is newer than generation *seen (0 before the first call), calls
// use(ctx, set) with the mutex held (the set lives through that call only),
// stores the set's generation in *seen and returns 1; else returns 0.
int srv_tlsw_if_newer(srv_tlsw *w, unsigned long long *seen, void (*use)(void *ctx, const srv_tls *t), void *ctx);

#endif
