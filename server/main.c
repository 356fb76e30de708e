// main.c: start-up and shutdown. Loads the repository, starts the loop
// thread (scheduler + HTTP) and the gRPC front end, then waits for SIGINT or
// SIGTERM with sigwait (every thread has them blocked, so no handler runs
// inside another thread). Shutdown drains: stop accepting, answer what is
// in flight, stop the loop, exit 0.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/protoset.h"
#include "server/cli.h"
#include "server/http.h"
#include "server/log.h"
#include "server/server.h"

typedef struct http_close_ctx {
  srv_http *http;
} http_close_ctx;

static void on_http_closed(void *arg) { (void)arg; }

// Runs on the loop thread once the scheduler is idle.
static void close_http(void *arg) {
  http_close_ctx *c = arg;
  if (c->http) srv_http_close(c->http, on_http_closed, NULL);
}

int main(int argc, char **argv) {
  srv_options o;
  int prc = srv_options_parse(argc, argv, &o);
  if (prc) return prc > 0 ? 0 : 2;
  srv_log_set_level(o.log_level);

  // Block the stop signals before any thread exists, so all inherit the mask
  // and only sigwait below sees them. A vanished peer must not kill us.
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
  signal(SIGPIPE, SIG_IGN);

  srv_server srv = {.strict_readiness = o.strict_readiness};
  err e = {0};
  int status = 1;
  srv_grpc *grpc = NULL;
  http_close_ctx hc = {0};

  if (srv_registry_load(o.model_repository, o.default_max_batch_size, &srv.reg, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "cannot load the model repository: %s", e.msg);
    return 1;
  }
  if (srv_reflection_create(inferd_protoset, inferd_protoset_len, &srv.reflection, &e) != 0) goto fail;
  srv_sched_ops ops = srv_infer_sched_ops(&srv);
  if (srv_sched_create(srv.reg, &ops, &srv.sched, &e) != 0) goto fail;
  if (srv_http_create(srv_sched_loop(srv.sched), o.http_address, o.http_port, srv_http_routes, &srv, &hc.http, &e) != 0)
    goto fail;

  srv_method methods[32];
  size_t n_methods = srv_methods(&srv, methods, sizeof methods / sizeof methods[0]);
  char addr[300];
  snprintf(addr, sizeof addr, "%s:%d", o.grpc_address, o.grpc_port);
  srv_grpc_opts go = {.addr = addr, .n_threads = o.grpc_threads, .max_recv_bytes = o.grpc_max_message_bytes,
                      .max_send_bytes = o.grpc_max_message_bytes};
  if (srv_grpc_create(&go, methods, n_methods, &grpc, &e) != 0) goto fail;
  if (srv_sched_start(srv.sched, &e) != 0) goto fail;
  if (srv_grpc_start(grpc, &e) != 0) goto fail;

  srv_log(SRV_LOG_INFO, "serving %zu model(s) from %s; ready: %s", srv_registry_n_models(srv.reg),
          o.model_repository, srv_server_ready(&srv) ? "yes" : "no (a model failed to load)");
  fprintf(stderr, "inferd ready: grpc=%d http=%d\n", srv_grpc_port(grpc), srv_http_port(hc.http));
  fflush(stderr);

  int sig = 0;
  if (sigwait(&stop_set, &sig) != 0) sig = SIGTERM;
  srv_log(SRV_LOG_INFO, "%s: draining (up to %d s)", sig == SIGINT ? "SIGINT" : "SIGTERM", o.exit_timeout_secs);
  atomic_store(&srv.draining, 1);
  srv_grpc_shutdown(grpc, o.exit_timeout_secs * 1000);
  status = 0;

fail:
  if (status) srv_log(SRV_LOG_ERROR, "%s", e.msg);
  if (srv.sched) srv_sched_stop(srv.sched, close_http, &hc);  // no-op when the loop never started
  if (grpc) srv_grpc_destroy(grpc);
  if (srv.sched) {
    if (hc.http && status) {
      // the loop never ran: close HTTP's handles by running the loop here
      srv_http_close(hc.http, on_http_closed, NULL);
      uv_run(srv_sched_loop(srv.sched), UV_RUN_DEFAULT);
    }
    srv_sched_destroy(srv.sched);
  }
  srv_reflection_destroy(srv.reflection);
  srv_registry_destroy(srv.reg);
  if (status == 0) srv_log(SRV_LOG_INFO, "stopped");
  return status;
}
