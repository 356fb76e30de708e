// server/core/control.h: model control as Triton does it (--model-control-mode):
// RepositoryModelLoad/Unload over gRPC and HTTP in explicit mode, and a
// rescan of the repository every --repository-poll-secs in poll mode. A load
// builds the new generation aside and publishes it only once it serves, so
// a failed (re)load leaves the old one serving; a replaced generation is
// freed by the control thread once its last request has been answered.
// Loads and unloads run one at a time on the control thread, in the order
// they came: the gRPC and HTTP threads that receive them only check and
// queue them, so a load of minutes holds none of them (issue 31).
#ifndef INFERD_SERVER_CONTROL_H
#define INFERD_SERVER_CONTROL_H

#include <stdatomic.h>

#include "kernels/base/err.h"
#include "server/cli.h"
#include "server/grpc/grpc_front.h"
#include "server/core/registry.h"
#include "server/core/sched.h"

typedef struct srv_control srv_control;

// Explicit mode's start: loads the named models ("*": every model of the
// repository) into an empty registry, before the scheduler exists. A model
// that fails is kept not ready with its reason, as in none mode.
int srv_control_initial_load(srv_registry *reg, const char *repo_dir, const char *const *names, int n, err *e);

// Starts the control thread (loads and unloads; frees replaced generations;
// rescans in poll mode). cancel (borrowed, may be NULL; the server's
// draining flag): once nonzero a load's warmup stops at its next run (the
// registry reads the same flag), queued loads fail "cancelled: server
// shutting down" without loading, and poll mode rescans no more.
int srv_control_create(srv_registry *reg, srv_sched *sched, srv_control_mode mode, const char *repo_dir,
                       int poll_secs, const atomic_int *cancel, srv_control **out, err *e);
// Refuses new loads and unloads (UNAVAILABLE) and waits until every one
// queued has been answered: the shutdown calls it before the transports
// close, with cancel set, so no answer is left for a closed port.
void srv_control_quiesce(srv_control *c);
// Answers what is queued, stops the thread and frees what was retired
// (waits for its requests).
void srv_control_destroy(srv_control *c);

// The most bytes a load request's "config" override may hold: a larger one
// is refused (INVALID_ARGUMENT / HTTP 400) before it is copied or parsed.
// A real config.pbtxt is a few KiB; REST's body limit (1 MiB) already held
// it there, but gRPC takes 64 MiB messages, and the override is the one
// config text a network client writes.
#define SRV_CONFIG_OVERRIDE_MAX (1u << 20)

// Loads (or reloads) / unloads a model on the control thread and waits for
// it; refused (UNAVAILABLE) unless the mode is explicit. config_override: a
// load request's "config" parameter, NULL when none. Not from the control
// thread.
int srv_control_load(srv_control *c, const char *name, const char *config_override, err *e);
int srv_control_unload(srv_control *c, const char *name, err *e);

// Whether the control thread is loading the named model now (the
// repository index says LOADING for a model not yet in the registry).
int srv_control_loading(srv_control *c, const char *name);

// gRPC RepositoryModelLoad / RepositoryModelUnload (ctx: the srv_control),
// also the REST API's POST /v2/repository/models/{m}/load and /unload
// (server/http/rest.c runs them as local calls): checked on the calling
// thread, answered from the control thread once done.
void srv_control_load_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len);
void srv_control_unload_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len);

#endif
