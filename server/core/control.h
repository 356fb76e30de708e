// server/core/control.h: model control as Triton does it (--model-control-mode):
// RepositoryModelLoad/Unload over gRPC and HTTP in explicit mode, and a
// rescan of the repository every --repository-poll-secs in poll mode. A load
// builds the new generation aside and publishes it only once it serves, so
// a failed (re)load leaves the old one serving; a replaced generation is
// freed by the control thread once its last request has been answered.
#ifndef INFERD_SERVER_CONTROL_H
#define INFERD_SERVER_CONTROL_H

#include "kernels/base/err.h"
#include "server/cli.h"
#include "server/grpc/grpc_front.h"
#include "server/http/http.h"
#include "server/http/jsonmem.h"
#include "server/core/registry.h"
#include "server/core/sched.h"

typedef struct srv_control srv_control;

// Explicit mode's start: loads the named models ("*": every model of the
// repository) into an empty registry, before the scheduler exists. A model
// that fails is kept not ready with its reason, as in none mode.
int srv_control_initial_load(srv_registry *reg, const char *repo_dir, const char *const *names, int n, err *e);

// Starts the control thread (frees replaced generations; rescans in poll mode).
int srv_control_create(srv_registry *reg, srv_sched *sched, srv_control_mode mode, const char *repo_dir,
                       int poll_secs, srv_control **out, err *e);
// Stops the thread and frees what was retired (waits for its requests).
void srv_control_destroy(srv_control *c);

// Loads (or reloads) / unloads a model now, on the calling thread; refused
// (UNAVAILABLE) unless the mode is explicit. config_override: a load
// request's "config" parameter, NULL when none.
int srv_control_load(srv_control *c, const char *name, const char *config_override, err *e);
int srv_control_unload(srv_control *c, const char *name, err *e);

// gRPC RepositoryModelLoad / RepositoryModelUnload (ctx: the srv_control).
void srv_control_load_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len);
void srv_control_unload_rpc(void *ctx, srv_call *call, const uint8_t *req, size_t len);

// HTTP: POST /v2/repository/models/{m}/load and /unload. Returns 1 when the
// route was one of these (resp filled), 0 to let the caller route it. The
// load body is parsed within jm's budget (NULL: none).
int srv_control_http(srv_control *c, srv_jsonmem *jm, const srv_http_request *req, srv_http_response *resp);

#endif
