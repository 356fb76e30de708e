// main.c: start-up and shutdown. Loads the repository, starts the loop
// thread (scheduler + HTTP) and the gRPC front end, then waits for SIGINT or
// SIGTERM. Shutdown drains in two phases: first the server turns unready
// and refuses new inference with UNAVAILABLE while it answers what is in
// flight (the transport keeps taking calls, so none is cut off as
// CANCELLED); once nothing is in flight and no call came for a moment, the
// gRPC server shuts down, the loop stops, and the process exits 0.
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/config.h"
#if INFERD_HAVE_CUDA
#include "engine/cuda_dev.h"
#endif
#include "proto/protoset.h"
#include "server/cli.h"
#include "server/http.h"
#include "server/rest.h"
#include "server/log.h"
#include "server/server.h"

typedef struct http_close_ctx {
  srv_rest *rest;  // closed with the HTTP endpoint: its answers go there
  srv_http *http;
  srv_http *metrics;  // --metrics-port's listener, NULL when none
} http_close_ctx;

static void on_http_closed(void *arg) { (void)arg; }

// The write end of the self-pipe the signal handler wakes main through. A
// handler can only reach file-scope state; it is set once before the
// handlers are installed. Threads that libraries start before main (the
// OpenBLAS pool) do not have the signals blocked, so sigwait alone would let
// the default action kill the process: a real handler is needed.
static int signal_pipe_w = -1;

static void on_stop_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t n = write(signal_pipe_w, &b, 1);
  (void)n;  // the pipe is non-blocking; a full pipe already holds a wake-up
  errno = saved;
}

static int install_stop_signals(int *read_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) return -1;
  signal_pipe_w = fds[1];
  *read_fd = fds[0];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) return -1;
  signal(SIGPIPE, SIG_IGN);  // a vanished peer must not kill us
  return 0;
}

// Waits for SIGINT or SIGTERM: taken by main with sigtimedwait, or caught by
// the handler in a thread that does not block them. Waiting in
// sigtimedwait rather than read() also keeps ThreadSanitizer builds
// stoppable: TSan runs handlers only inside calls it knows to block.
static int wait_stop_signal(const sigset_t *set, int signal_fd) {
  for (;;) {
    struct timespec ts = {0, 100 * 1000000L};
    int s = sigtimedwait(set, NULL, &ts);
    if (s == SIGINT || s == SIGTERM) return s;
    unsigned char b;
    if (read(signal_fd, &b, 1) == 1) return b;
  }
}

// A CUDA-enabled build starts on machines without a GPU (or a driver) and
// serves on the CPU; the log says which. Returns the visible devices (the
// first `cap` of them described in info, for the GPU metrics).
#define MAX_GPUS 16
static int log_devices(prof_gpu_info *info, int cap) {
#if INFERD_HAVE_CUDA
  eng_cuda_dev devs[MAX_GPUS];
  int n = 0;
  err e = {0};
  if (eng_cuda_devices(devs, MAX_GPUS, &n, &e) != 0) {
    srv_log(SRV_LOG_WARN, "CUDA: %s; running on the CPU", e.msg);
    return 0;
  } else if (n == 0) {
    srv_log(SRV_LOG_INFO, "CUDA: %s; running on the CPU", e.msg[0] ? e.msg : "no device");
  } else {
    for (int i = 0; i < n && i < MAX_GPUS; i++) {
      char d[512];
      eng_cuda_dev_describe(&devs[i], d, sizeof d);
      srv_log(SRV_LOG_INFO, "CUDA device %d: %s", i, d);
      if (i < cap) {
        snprintf(info[i].uuid, sizeof info[i].uuid, "%s", devs[i].uuid);
        snprintf(info[i].name, sizeof info[i].name, "%s", devs[i].name);
      }
    }
  }
  return n;
#else
  (void)info, (void)cap;
  srv_log(SRV_LOG_INFO, "built without CUDA: running on the CPU");
  return 0;
#endif
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Phase one of the drain: readiness is off and calls are still served, until
// every ModelInfer call is answered and none arrived for quiet_ms, or
// timeout_ms passed. Phase two (srv_grpc_shutdown) sends GOAWAY and closes
// the listener; the core cancels calls whose request is still arriving then,
// so phase one lets a burst arrive first. Under a load balancer calls never
// stop: ABSORB_MS bounds phase one, after which GOAWAY moves the balancer to
// the other servers (the refuse-with-UNAVAILABLE alternative kept it sending
// here for the whole exit timeout).
#define ABSORB_MS 1000
static void drain_inference(srv_server *s, int timeout_ms, int quiet_ms) {
  int64_t end = eng_now_us() + (int64_t)timeout_ms * 1000;
  while (eng_now_us() < end) {
    int64_t idle_us = eng_now_us() - atomic_load(&s->infer_last_call_us);
    if (atomic_load(&s->infer_inflight) == 0 && idle_us >= (int64_t)quiet_ms * 1000) return;
    sleep_ms(5);
  }
  if (atomic_load(&s->infer_inflight))
    srv_log(SRV_LOG_INFO, "calls still arriving or in flight after %d ms of draining: closing the transport",
            timeout_ms);
}

// Every answer has left: the final tally per model version, for the log
// (and for whoever must reconcile a drain with what clients received).
static void log_final_counts(srv_server *s) {
  for (size_t i = 0; i < srv_registry_n_models(s->reg); i++) {
    srv_model *m = srv_registry_model_at(s->reg, i);
    for (size_t j = 0; j < m->n_versions; j++) {
      srv_version *v = &m->versions[j];
      if (!v->model) continue;
      srv_log(SRV_LOG_INFO, "final counts: model '%s' version %s: %llu succeeded, %llu failed", m->name,
              v->version_str, (unsigned long long)atomic_load(&v->stats.success.count),
              (unsigned long long)atomic_load(&v->stats.fail.count));
    }
  }
}

// Runs on the loop thread once the scheduler is idle.
static void close_http(void *arg) {
  http_close_ctx *c = arg;
  if (c->http) srv_http_close(c->http, on_http_closed, NULL);
  srv_rest_close(c->rest);
  c->rest = NULL;
  if (c->metrics) srv_http_close(c->metrics, on_http_closed, NULL);
  c->http = c->metrics = NULL;  // closed once: main's fallback below must not again
}

int main(int argc, char **argv) {
  srv_options o;
  int prc = srv_options_parse(argc, argv, &o);
  if (prc) return prc > 0 ? 0 : 2;
  srv_log_set_level(o.log_level);

  int signal_fd = -1;
  if (install_stop_signals(&signal_fd) != 0) {
    srv_log(SRV_LOG_ERROR, "cannot install signal handlers: %s", strerror(errno));
    return 1;
  }
  // Threads started from here on (ours, gRPC's) inherit a mask without the
  // stop signals, so the kernel hands them to main's sigtimedwait (or to a
  // library thread started before main, whose handler writes the pipe).
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_set, NULL);

  srv_server srv = {.strict_readiness = o.strict_readiness, .allow_metrics = o.allow_metrics,
                    .trace_rate = o.trace_rate};
  err e = {0};
  int status = 1;
  srv_grpc *grpc = NULL;
  http_close_ctx hc = {0};

  prof_gpu_info gpu_info[MAX_GPUS];
  memset(gpu_info, 0, sizeof gpu_info);
  int n_gpus = log_devices(gpu_info, MAX_GPUS);
  if (prof_gpus_create(gpu_info, n_gpus < MAX_GPUS ? n_gpus : MAX_GPUS, &srv.gpus, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "GPU metrics: %s", e.msg);
    return 1;
  }
  if (n_gpus > 0) srv_log(SRV_LOG_INFO, "%s", prof_gpus_nvml_status(srv.gpus));
  int default_max_batch = o.auto_complete_config ? o.default_max_batch_size : CONFIG_NO_AUTO_COMPLETE;
  if (srv_registry_load(o.model_repository, default_max_batch, n_gpus, &srv.reg, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "cannot load the model repository: %s", e.msg);
    prof_gpus_destroy(srv.gpus);
    return 1;
  }
  if (srv_reflection_create(inferd_protoset, inferd_protoset_len, &srv.reflection, &e) != 0) goto fail;
  if (o.trace_file && prof_trace_open(o.trace_file, o.trace_rate, &srv.trace, &e) != 0) goto fail;
  if (o.allow_client_shm && srv_shm_create(&srv.shm, &e) != 0) goto fail;
  srv_sched_ops ops = srv_infer_sched_ops(&srv);
  if (srv_sched_create(srv.reg, &ops, &srv.sched, &e) != 0) goto fail;
  if (srv_http_create(srv_sched_loop(srv.sched), o.http_address, o.http_port, srv_http_routes, &srv, &hc.http, &e) != 0)
    goto fail;
  srv_http_set_large_body(hc.http, (size_t)o.http_max_infer_body_bytes);
  if (srv_rest_create(srv_sched_loop(srv.sched), &srv, &hc.rest, &e) != 0) goto fail;
  srv.rest = hc.rest;
  if (o.allow_metrics && o.metrics_port >= 0 &&
      srv_http_create(srv_sched_loop(srv.sched), o.http_address, o.metrics_port, srv_http_metrics_routes, &srv,
                      &hc.metrics, &e) != 0)
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
  if (hc.metrics) fprintf(stderr, "inferd ready: grpc=%d http=%d metrics=%d\n", srv_grpc_port(grpc),
                         srv_http_port(hc.http), srv_http_port(hc.metrics));
  else fprintf(stderr, "inferd ready: grpc=%d http=%d\n", srv_grpc_port(grpc), srv_http_port(hc.http));
  fflush(stderr);

  int sig = wait_stop_signal(&stop_set, signal_fd);
  srv_log(SRV_LOG_INFO, "%s: draining (up to %d s)", sig == SIGINT ? "SIGINT" : "SIGTERM", o.exit_timeout_secs);
  atomic_store(&srv.draining, 1);
  int64_t t_drain = eng_now_us();
  drain_inference(&srv, o.exit_timeout_secs * 1000 < ABSORB_MS ? o.exit_timeout_secs * 1000 : ABSORB_MS, 100);
  int left_ms = o.exit_timeout_secs * 1000 - (int)((eng_now_us() - t_drain) / 1000);
  srv_grpc_shutdown(grpc, left_ms > 0 ? left_ms : 0);
  log_final_counts(&srv);
  status = 0;

fail:
  if (status) srv_log(SRV_LOG_ERROR, "%s", e.msg);
  if (srv.sched) srv_sched_stop(srv.sched, close_http, &hc);  // no-op when the loop never started
  if (grpc) srv_grpc_destroy(grpc);
  if (srv.sched) {
    if (hc.http || hc.metrics || hc.rest) {
      // the loop never ran: close HTTP's handles by running the loop here
      close_http(&hc);
      uv_run(srv_sched_loop(srv.sched), UV_RUN_DEFAULT);
    }
    srv_sched_destroy(srv.sched);
  }
  srv_reflection_destroy(srv.reflection);
  if (srv.trace) {
    err te = {0};
    if (prof_trace_close(srv.trace, &te) != 0) srv_log(SRV_LOG_ERROR, "trace file: %s", te.msg);
  }
  srv_shm_destroy(srv.shm);  // after the scheduler: no request holds a region any more
  srv_registry_destroy(srv.reg);
  prof_gpus_destroy(srv.gpus);
  if (status == 0) srv_log(SRV_LOG_INFO, "stopped");
  return status;
}
