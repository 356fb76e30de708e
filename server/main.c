// main.c: start-up and shutdown. Loads the repository, starts the loop
// thread (scheduler + HTTP) and the gRPC front end, then waits for SIGINT or
// SIGTERM. Shutdown drains in two phases: first the server turns unready
// and refuses new inference with UNAVAILABLE while it answers what is in
// flight (the transport keeps taking calls, so none is cut off as
// CANCELLED); once nothing is in flight and no call came for a moment, the
// gRPC server shuts down, the loop stops, and the process exits 0.
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/support/log.h>

#include "engine/repo/config.h"
#if INFERD_HAVE_CUDA
#include "engine/cuda/cuda_dev.h"
#endif
#include "proto/grpc_offload.h"
#include "proto/protoset.h"
#include "server/alloc.h"
#include "server/cli.h"
#include "server/grpc/grpc_accept.h"
#include "server/http/http.h"
#include "server/http/http_loop.h"
#include "server/http/jsonmem.h"
#include "server/http/rest.h"
#include "server/obs/crash.h"
#include "server/obs/log.h"
#include "server/core/fdlimit.h"
#include "server/core/repeat.h"
#include "server/core/server.h"
#include "server/sec/shmguard.h"
#include "server/sec/tls_watch.h"

typedef struct http_close_ctx {
  srv_rest *rest;  // closed with the HTTP endpoint: its answers go there
  srv_http *http;
  srv_http *metrics;  // --metrics-port's listener, NULL when none
  uv_timer_t *trim;   // the idle trim timer (below), NULL when none
  srv_server *s;      // its http pointer (for /metrics) is cleared with the port
} http_close_ctx;

// After a burst (a storm of 1 ms deadlines, thousands of cancelled calls)
// the allocator keeps the freed memory: with glibc's per-thread arenas RSS
// rose from 190 to ~250 MB and stayed there, with no leak (LeakSanitizer
// clean across the same storm); jemalloc hands it back only as its decay
// timers run. Once no ModelInfer has arrived for a second, srv_alloc_release
// returns it at once (to ~205 MB after the same storm, glibc); once per idle
// period, never while calls arrive. Its timer is on the HTTP loop: a purge
// can take milliseconds, and the scheduler's loop runs only the batchers'
// deadlines (a model's first request after the idle second must not wait
// behind it); HTTP requests are rare then, the server being idle.
#define IDLE_TRIM_US 1000000

typedef struct idle_trim {
  uv_timer_t t;
  srv_server *s;
  long long trimmed_at;  // infer_last_call_us when last trimmed
} idle_trim;

static void on_trim_tick(uv_timer_t *t) {
  idle_trim *it = (idle_trim *)t;
  long long last = atomic_load(&it->s->infer_last_call_us);
  if (last == 0 || last == it->trimmed_at || eng_now_us() - last < IDLE_TRIM_US) return;
  it->trimmed_at = last;
  const char *how = srv_alloc_release();
  srv_log(SRV_LOG_DEBUG, "idle for %d ms: freed memory handed back to the kernel (%s)", IDLE_TRIM_US / 1000, how);
}

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
  // SIGHUP reloads the TLS certificates (main takes it like the stop signals)
  if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGHUP, &sa, NULL) != 0)
    return -1;
  signal(SIGPIPE, SIG_IGN);  // a vanished peer must not kill us
  return 0;
}

// Waits for SIGINT, SIGTERM or SIGHUP: taken by main with sigtimedwait, or
// caught by the handler in a thread that does not block them. Waiting in
// sigtimedwait rather than read() also keeps ThreadSanitizer builds
// stoppable: TSan runs handlers only inside calls it knows to block.
static int wait_stop_signal(const sigset_t *set, int signal_fd) {
  for (;;) {
    struct timespec ts = {0, 100 * 1000000L};
    int s = sigtimedwait(set, NULL, &ts);
    if (s == SIGINT || s == SIGTERM || s == SIGHUP) return s;
    unsigned char b;
    if (read(signal_fd, &b, 1) == 1) return b;
  }
}

// Loading the repository (and each model's warmup) can take minutes; until
// it ends main is not waiting for signals, and the stop signals it blocks
// would stay pending. The guard thread takes them meanwhile: while loading,
// a stop signal ends the process at once (nothing is served yet, nothing to
// drain; exit status 0, as after a drain); once main is about to wait
// itself, a signal the guard already took is handed over through the pipe.
typedef struct load_guard {
  sigset_t set;
  int fd;  // the signal pipe's read end
  atomic_int loading;
  atomic_int stop;
  pthread_t th;
  int started;
} load_guard;

static void *guard_main(void *arg) {
  load_guard *g = arg;
  while (!atomic_load(&g->stop)) {
    // pending for the process (every thread of ours blocks them), or caught
    // by a library's thread and written to the pipe
    struct timespec now = {0, 0};
    int s = sigtimedwait(&g->set, NULL, &now);
    if (s != SIGINT && s != SIGTERM) {
      struct pollfd p = {.fd = g->fd, .events = POLLIN};
      unsigned char b;
      if (poll(&p, 1, 100) == 1 && read(g->fd, &b, 1) == 1) s = b;
    }
    if (s == SIGHUP) {  // a reload asked for while loading: main does it once serving
      on_stop_signal(s);
      continue;
    }
    if (s != SIGINT && s != SIGTERM) continue;
    if (atomic_load(&g->loading)) {
      static const char msg[] = "inferd: stop signal while loading the model repository: exiting\n";
      ssize_t n = write(2, msg, sizeof msg - 1);
      (void)n;
      _exit(0);
    }
    on_stop_signal(s);
  }
  return NULL;
}

static void guard_end(load_guard *g) {
  atomic_store(&g->loading, 0);
  atomic_store(&g->stop, 1);
  if (g->started) pthread_join(g->th, NULL);
  g->started = 0;
}

// Descriptors: each connection holds one. The soft limit (often 1024) is
// raised to the hard one, so a few hundred idle connections cannot exhaust
// it; what it allows is split between the ports (server/core/fdlimit.h).
static uint64_t raise_open_files_limit(void) {
  uint64_t was = 0, now = srv_fd_raise_limit(&was);
  if (now != was)
    srv_log(SRV_LOG_INFO, "open files limit raised from %llu to %llu", (unsigned long long)was,
            (unsigned long long)now);
  return now;
}

// The HTTP endpoint's rate-limited incident lines (srv_http_limits.note).
static void on_http_note(void *arg, const char *msg) {
  (void)arg;
  srv_log(SRV_LOG_WARN, "%s", msg);
}

// The trace file reached --trace-file-max-bytes (said once).
static void on_trace_note(void *arg, const char *msg) {
  (void)arg;
  srv_log(SRV_LOG_WARN, "%s", msg);
}

// The metrics port's connections come out of the descriptor reserve.
#define METRICS_MAX_CONNECTIONS 64

// gRPC's own log lines go through ours (one format, escaped). One of them is
// the only notice that its listener died: this gRPC core (Debian 12's 1.51)
// stops accepting for good after an accept4 error other than EAGAIN (EMFILE
// once the descriptors run out), while the process would otherwise look
// healthy. Liveness then fails, so an orchestrator restarts the process.
// Neither port uses that listener any more (plaintext and TLS connections are
// accepted by grpc_accept.h, TLS terminated by grpc_tls.h); the check stays
// as the guard for any path that would bring it back.
// gpr_set_log_function takes no context: the server it marks is main's.
static srv_server *grpc_log_server;

static void on_grpc_log(gpr_log_func_args *a) {
  srv_log_level l = a->severity == GPR_LOG_SEVERITY_ERROR  ? SRV_LOG_ERROR
                    : a->severity == GPR_LOG_SEVERITY_INFO ? SRV_LOG_INFO
                                                           : SRV_LOG_DEBUG;
  srv_log(l, "grpc %s:%d: %s", a->file, a->line, a->message);
  srv_server *s = grpc_log_server;
  if (s && a->severity == GPR_LOG_SEVERITY_ERROR && strstr(a->message, "Failed accept4") &&
      !atomic_exchange(&s->accept_dead, 1))
    srv_log(SRV_LOG_ERROR,
            "the gRPC port stopped accepting connections (%s) and this gRPC core does not resume it: "
            "not live from now on (ServerLive false, /v2/health/live 503), so the process gets restarted",
            a->message);
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
    char libs[768];
    eng_cuda_libs_describe(libs, sizeof libs);
    srv_log(SRV_LOG_INFO, "CUDA libraries: %s", libs);
  }
  return n;
#else
  (void)info, (void)cap;
  srv_log(SRV_LOG_INFO, "built without CUDA: running on the CPU");
  return 0;
#endif
}

// The TLS watch's reload notes, from main (SIGHUP) or a gRPC thread (a file change).
static void on_tls_note(void *ctx, int failed, const char *msg) {
  (void)ctx;
  srv_log(failed ? SRV_LOG_ERROR : SRV_LOG_INFO, "%s", msg);
}

// SIGHUP for the HTTP port: new connections take the new certificates, open
// ones keep theirs; a failure keeps the ones in service (srv_htls_ctx_reload).
static void reload_https(srv_htls_ctx *x) {
  err e = {0};
  char served[256];
  if (srv_htls_ctx_reload(x, served, sizeof served, &e) == 0)
    srv_log(SRV_LOG_INFO, "HTTPS certificates reloaded (SIGHUP): new connections get %s", served);
  else
    srv_log(SRV_LOG_ERROR, "HTTPS certificates not reloaded (SIGHUP), the previous ones stay in service: %s", e.msg);
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
  srv_registry_rdlock(s->reg);  // poll mode's thread still runs
  for (size_t i = 0; i < srv_registry_n_models(s->reg); i++) {
    srv_model *m = srv_registry_model_at(s->reg, i);
    for (size_t j = 0; j < m->n_versions; j++) {
      srv_version *v = &m->versions[j];
      if (!srv_version_ready(v)) continue;
      srv_log(SRV_LOG_INFO, "final counts: model '%s' version %s: %llu succeeded, %llu failed", m->name,
              v->version_str, (unsigned long long)atomic_load(&v->stats.success.count),
              (unsigned long long)atomic_load(&v->stats.fail.count));
    }
  }
  srv_registry_rdunlock(s->reg);
}

// Runs on the HTTP loop's thread (srv_hloop_stop) once the scheduler has
// stopped and the reply queue has sent what it held: every REST answer is
// queued by then, and srv_rest_close gives them.
static void close_http(void *arg) {
  http_close_ctx *c = arg;
  // REST first: it gives the answers queued while the port is still open
  // (libuv writes a response at once when nothing is queued before it);
  // closed first, the port dropped them
  srv_rest_close(c->rest);
  c->rest = NULL;
  if (c->http) srv_http_close(c->http, NULL, NULL);
  if (c->s) c->s->http = NULL;
  if (c->metrics) srv_http_close(c->metrics, NULL, NULL);
  if (c->trim) uv_close((uv_handle_t *)c->trim, NULL);
  c->http = c->metrics = NULL;
  c->trim = NULL;
}

int main(int argc, char **argv) {
  srv_options o;
  int prc = srv_options_parse(argc, argv, &o);
  if (prc) return prc > 0 ? 0 : 2;
  srv_log_set_level(o.log_level);
  err ce = {0};
  if (srv_crash_install(&ce) != 0) srv_log(SRV_LOG_WARN, "%s: a crash will end without a backtrace", ce.msg);

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
  sigaddset(&stop_set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
  load_guard guard = {.set = stop_set, .fd = signal_fd, .loading = 1};
  guard.started = pthread_create(&guard.th, NULL, guard_main, &guard) == 0;

  srv_server srv = {.strict_readiness = o.strict_readiness, .allow_metrics = o.allow_metrics,
                    .trace_rate = o.trace_rate};
  uint64_t nofile = raise_open_files_limit();
  int http_cap = 0, grpc_cap = 0;
  srv_fd_plan(nofile, &http_cap, &grpc_cap);
  if (!o.http_max_connections) o.http_max_connections = http_cap;
  srv_log(SRV_LOG_INFO, "descriptors: limit %llu; HTTP port up to %d connections%s (the gRPC port's share: %d)",
          (unsigned long long)nofile, o.http_max_connections,
          o.http_max_connections == http_cap ? "" : " (--http-max-connections)", grpc_cap);
  if ((uint64_t)o.http_max_connections > nofile / 2)
    srv_log(SRV_LOG_WARN, "--http-max-connections %d is more than half the descriptor limit (%llu): the HTTP port "
            "can starve the gRPC port", o.http_max_connections, (unsigned long long)nofile);
  char alloc_name[256];
  srv_log(SRV_LOG_INFO, "memory allocator: %s", srv_alloc_describe(alloc_name, sizeof alloc_name));
  grpc_log_server = &srv;
  gpr_set_log_function(on_grpc_log);
  err e = {0};
  int status = 1;
  srv_grpc *grpc = NULL;
  http_close_ctx hc = {0};
  srv_hloop *hloop = NULL;  // the HTTP front end's loop (http_loop.h), apart from the batchers'

  // TLS files first: a wrong path fails the start at once, not after every model loaded
  srv_tlsw *tls = NULL;
  if (o.grpc_use_ssl && srv_tlsw_create(o.grpc_server_cert, o.grpc_server_key, o.grpc_root_cert,
                                        o.grpc_ssl_client_cert, on_tls_note, NULL, &tls, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "cannot start: %s", e.msg);
    guard_end(&guard);
    return 1;
  }
  srv_htls_ctx *htls = NULL;  // the HTTP port's, handed to it once it exists
  // Borrowed after the hand-over, for SIGHUP: the endpoint frees it only when
  // it closes, which is after main's signal loop.
  srv_htls_ctx *htls_live = NULL;
  if (o.http_use_ssl && srv_htls_ctx_create(o.http_server_cert, o.http_server_key, o.http_root_cert,
                                            o.http_use_ssl_mutual, &htls, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "cannot start: %s", e.msg);
    srv_tlsw_destroy(tls);
    guard_end(&guard);
    return 1;
  }

  prof_gpu_info gpu_info[MAX_GPUS];
  memset(gpu_info, 0, sizeof gpu_info);
  int n_gpus = log_devices(gpu_info, MAX_GPUS);
  if (prof_gpus_create(gpu_info, n_gpus < MAX_GPUS ? n_gpus : MAX_GPUS, &srv.gpus, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "GPU metrics: %s", e.msg);
    srv_htls_ctx_destroy(htls);
    srv_tlsw_destroy(tls);
    guard_end(&guard);
    return 1;
  }
  if (n_gpus > 0) srv_log(SRV_LOG_INFO, "%s", prof_gpus_nvml_status(srv.gpus));
  srv_registry_opts ro = {.default_max_batch_size = o.auto_complete_config ? o.default_max_batch_size
                                                                          : CONFIG_NO_AUTO_COMPLETE,
                          .n_gpus = n_gpus,
                          .max_batch_size = o.model_max_batch_size,
                          .max_priority_levels = (uint64_t)o.model_max_priority_levels,
                          .warmup_max_bytes = (uint64_t)o.warmup_max_mib << 20,
                          .store_allow = o.store_allow,
                          .n_store_allow = (size_t)o.n_store_allow,
                          .warmup_max_runs = (uint64_t)o.warmup_max_runs,
                          .prepare_budget_ms = (int64_t)o.prepare_budget_s * 1000,
                          .prepare_budget_set = 1,
                          // a stop signal ends a load's warmup at its next run (model control, poll mode)
                          .cancel = &srv.draining};
  int lrc = 0;
  if (o.control_mode == SRV_CONTROL_EXPLICIT) {
    lrc = srv_registry_create(o.model_repository, &ro, &srv.reg, &e);
    if (lrc == 0)
      lrc = srv_control_initial_load(srv.reg, o.model_repository, o.load_models, o.n_load_models, &e);
  } else {
    lrc = srv_registry_load(o.model_repository, &ro, &srv.reg, &e);
  }
  if (lrc != 0) {
    srv_registry_destroy(srv.reg);
    srv_log(SRV_LOG_ERROR, "cannot load the model repository: %s", e.msg);
    srv_htls_ctx_destroy(htls);
    srv_tlsw_destroy(tls);
    prof_gpus_destroy(srv.gpus);
    guard_end(&guard);
    return 1;
  }
  if (srv_reflection_create(inferd_protoset, inferd_protoset_len, &srv.reflection, &e) != 0) goto fail;
  if (o.trace_file && prof_trace_open(o.trace_file, o.trace_rate, &srv.trace, &e) != 0) goto fail;
  if (srv.trace) prof_trace_limit(srv.trace, (uint64_t)o.trace_file_max_bytes, on_trace_note, NULL);
  // a client that shrinks its registered object makes copies from and into
  // the mapping fault: the guard turns that into one failed request
  if (o.allow_client_shm && (srv_shmguard_install(&e) != 0 || srv_shm_create(&srv.shm, (size_t)o.shm_max_regions, &e) != 0)) goto fail;
  if (o.allow_client_shm && srv_cuda_shm_create(&srv.cuda_shm, (size_t)o.shm_max_regions, &e) != 0) goto fail;
  srv.max_inflight_bytes = o.max_inflight_request_bytes;
  if (o.rest_json_max_memory && srv_jsonmem_create((uint64_t)o.rest_json_max_memory, &srv.jsonmem, &e) != 0) goto fail;
  // before the scheduler, which gathers and packs batches through it
  if (o.copy_threads > 0 && srv_copypool_create(o.copy_threads, (size_t)o.copy_min_bytes, &srv.copies, &e) != 0)
    goto fail;
  if (srv_repeat_create(&srv.repeat, &e) != 0) goto fail;  // the repeat backend's runner (repeat.h)
  if (srv_sched_create(srv.reg, &srv, &srv.sched, &e) != 0) goto fail;
  if (srv_control_create(srv.reg, srv.sched, o.control_mode, o.model_repository, o.poll_secs, &srv.draining,
                         &srv.control, &e) != 0)
    goto fail;
  if (srv_hloop_create(&hloop, &e) != 0) goto fail;
  if (srv_http_create(srv_hloop_loop(hloop), o.http_address, o.http_port, srv_http_routes, &srv, &hc.http, &e) != 0)
    goto fail;
  srv_http_set_large_body(hc.http, (size_t)o.http_max_infer_body_bytes);
  srv_http_limits hl = {.max_conns = (size_t)o.http_max_connections,
                        .header_ms = (uint64_t)o.http_header_timeout_secs * 1000,
                        .body_min_rate = (uint64_t)o.http_body_min_rate,
                        .body_budget = (uint64_t)o.http_max_body_bytes_in_flight,
                        .note = on_http_note};
  if (srv_http_set_limits(hc.http, &hl, &e) != 0) goto fail;
  srv.http = hc.http;  // cleared by close_http, on the HTTP loop's thread (its only reader)
  hc.s = &srv;
  if (htls) {
    srv_htls_ctx *x = htls;
    htls = NULL;  // the endpoint's now, also when this fails
    if (srv_http_set_tls(hc.http, x, SRV_HTTP_TLS_HANDSHAKE_MS, &e) != 0) goto fail;
    htls_live = x;
    srv_log(SRV_LOG_INFO, "HTTP port: HTTPS%s", o.http_use_ssl_mutual ? " with client certificates (mutual TLS)" : "");
  }
  if (srv_rest_create(srv_hloop_loop(hloop), &srv, &hc.rest, &e) != 0) goto fail;
  srv.rest = hc.rest;
  if (o.allow_metrics && o.metrics_port >= 0 &&
      srv_http_create(srv_hloop_loop(hloop), o.http_address, o.metrics_port, srv_http_metrics_routes, &srv,
                      &hc.metrics, &e) != 0)
    goto fail;
  if (hc.metrics) {
    srv_http_limits ml = hl;
    ml.max_conns = METRICS_MAX_CONNECTIONS;
    if (srv_http_set_limits(hc.metrics, &ml, &e) != 0) goto fail;
  }

  idle_trim trim = {.s = &srv};
  if (uv_timer_init(srv_hloop_loop(hloop), &trim.t) == 0) {
    hc.trim = &trim.t;                 // closed with the HTTP handles
    uv_unref((uv_handle_t *)&trim.t);  // never what keeps the loop alive
    (void)uv_timer_start(&trim.t, on_trim_tick, IDLE_TRIM_US / 1000, IDLE_TRIM_US / 1000);
  }

  srv_method methods[32];
  size_t n_methods = srv_methods(&srv, methods, sizeof methods / sizeof methods[0]);
  char addr[300];
  snprintf(addr, sizeof addr, "%s:%d", o.grpc_address, o.grpc_port);
  srv_grpc_opts go = {.addr = addr, .n_threads = o.grpc_threads, .max_recv_bytes = o.grpc_max_message_bytes,
                      .max_send_bytes = o.grpc_max_message_bytes,
                      .max_streams = o.grpc_max_streams, .transport_offload = o.grpc_transport_offload,
                      .rapid_reset_limit = o.grpc_rapid_reset_limit ? o.grpc_rapid_reset_limit : -1,
                      .rapid_reset_min_deadline_ms =
                          o.grpc_rapid_reset_min_deadline_ms ? o.grpc_rapid_reset_min_deadline_ms : -1,
                      .max_idle_ms = o.grpc_max_idle_secs ? o.grpc_max_idle_secs * 1000 : -1,
                      .handshake_ms = o.grpc_handshake_secs * 1000,
                      .max_frame_bytes = o.grpc_max_frame_bytes,
                      .stream_window_bytes = o.grpc_stream_window_bytes,
                      .stream_max_queued = o.grpc_stream_max_queued,
                      .stream_max_queued_bytes = o.grpc_stream_max_queued_bytes,
                      .max_connections = o.grpc_max_connections ? o.grpc_max_connections
                                         : tls ? grpc_cap / SRV_GRPC_TLS_FDS_PER_CONN  // three descriptors each
                                               : grpc_cap};
  if (go.max_connections < 1) go.max_connections = 1;
  srv_grpc_tls gt = {.certs = tls};
  if (tls) go.tls = &gt;
  if (srv_grpc_create(&go, methods, n_methods, &grpc, &e) != 0) goto fail;
  srv.grpc = grpc;
  if (!tls)
    srv_log(SRV_LOG_INFO, "gRPC port: at most %d connections at once (--grpc-max-connections), accepted by inferd",
            go.max_connections);
  else
    srv_log(SRV_LOG_INFO, "gRPC port: TLS, at most %d connections at once (--grpc-max-connections%s), accepted by "
            "inferd and terminated by its own TLS relay", go.max_connections,
            o.grpc_max_connections ? "" : "; a third of the port's descriptors: each takes three");
  switch (srv_grpc_transport_offload(grpc)) {
    case SRV_GRPC_OFFLOAD_ON: srv_log(SRV_LOG_INFO, "gRPC transport work may move to gRPC's executor threads (gRPC's default)"); break;
    case SRV_GRPC_OFFLOAD_OFF:
      srv_log(SRV_LOG_INFO, "gRPC transport work stays on the thread that holds it (gRPC's combiner offload declined)");
      break;
    case SRV_GRPC_OFFLOAD_UNKNOWN:
      srv_log(SRV_LOG_WARN, "this gRPC's combiner cannot be kept off its executor (proto/grpc_offload.h): its transport "
                            "work may move to its executor threads");
      break;
  }
  // the batches' answers (replyq.h): by default a quarter of the CQ threads, 2 to 8
  int n_reply = o.reply_threads;
  if (n_reply < 0) {
    n_reply = o.grpc_threads / 4;
    n_reply = n_reply < 2 ? 2 : n_reply > 8 ? 8 : n_reply;
  }
  if (n_reply > 0 && srv_replyq_create(n_reply, &srv.replyq, &e) != 0) goto fail;
  if (srv_sched_start(srv.sched, &e) != 0) goto fail;
  if (srv_hloop_start(hloop, &e) != 0) goto fail;
  if (srv_grpc_start(grpc, &e) != 0) goto fail;

  srv_registry_rdlock(srv.reg);  // gRPC is serving: a load may already change the set
  size_t n_models = srv_registry_n_models(srv.reg);
  srv_registry_rdunlock(srv.reg);
  srv_log(SRV_LOG_INFO, "serving %zu model(s) from %s; ready: %s", n_models, o.model_repository,
          srv_server_ready(&srv) ? "yes" : "no (a model failed to load)");
  if (hc.metrics) fprintf(stderr, "inferd ready: grpc=%d http=%d metrics=%d\n", srv_grpc_port(grpc),
                         srv_http_port(hc.http), srv_http_port(hc.metrics));
  else fprintf(stderr, "inferd ready: grpc=%d http=%d\n", srv_grpc_port(grpc), srv_http_port(hc.http));
  fflush(stderr);

  guard_end(&guard);  // serving: main takes the signals from here on
  int sig;
  while ((sig = wait_stop_signal(&stop_set, signal_fd)) == SIGHUP) {
    err re = {0};
    if (tls) (void)srv_tlsw_reload(tls, &re);  // noted either way; a failure keeps the old set
    if (htls_live) reload_https(htls_live);
    if (!tls && !htls_live)
      srv_log(SRV_LOG_INFO, "SIGHUP: no TLS certificates to reload (--grpc-use-ssl and --http-use-ssl are off)");
  }
  srv_log(SRV_LOG_INFO, "%s: draining (up to %d s)", sig == SIGINT ? "SIGINT" : "SIGTERM", o.exit_timeout_secs);
  atomic_store(&srv.draining, 1);
  int64_t t_drain = eng_now_us();
  drain_inference(&srv, o.exit_timeout_secs * 1000 < ABSORB_MS ? o.exit_timeout_secs * 1000 : ABSORB_MS, 100);
  // a load in progress stops at its next warmup run (draining is its cancel flag); queued ones fail at
  // once: all answered before the ports close
  srv_control_quiesce(srv.control);
  int left_ms = o.exit_timeout_secs * 1000 - (int)((eng_now_us() - t_drain) / 1000);
  srv_grpc_shutdown(grpc, left_ms > 0 ? left_ms : 0);
  log_final_counts(&srv);
  if (srv_grpc_transport_offload(grpc) == SRV_GRPC_OFFLOAD_OFF)
    srv_log(SRV_LOG_INFO, "gRPC combiner offloads declined: %llu", (unsigned long long)grpc_offload_declined());
  status = 0;

fail:
  guard_end(&guard);  // a no-op after a normal run
  if (status) srv_log(SRV_LOG_ERROR, "%s", e.msg);
  srv_htls_ctx_destroy(htls);  // NULL once the HTTP endpoint took it
  // The scheduler first: it waits for every queued and running batch, and
  // from then on refuses a request at once (a REST one is answered through
  // its job as before). HTTP keeps its port open meanwhile, as it did when
  // it closed on the scheduler's loop at this point.
  if (srv.sched) srv_sched_stop(srv.sched, NULL, NULL);  // no-op when the loop never started
  // every batch has completed once the scheduler stopped: send what is queued while the calls exist
  // (REST answers among them: queued to the REST object, which is still open)
  srv_replyq_destroy(srv.replyq);
  srv.replyq = NULL;
  // the generative models' runners: what they still hold ends now (UNAVAILABLE), answered while gRPC's
  // streams and the REST object (HTTP generate) are still there to take it
  if (srv.reg) srv_registry_stop_llm(srv.reg);
  // a failed start skipped this: a model load queued from REST would be
  // answered after REST closed (a no-op wait after a drain)
  if (srv.control) srv_control_quiesce(srv.control);
  // then HTTP, on its own thread (or here when it never started): REST
  // gives the answers queued, the ports close, the trim timer stops
  srv_hloop_stop(hloop, close_http, &hc);
  srv_hloop_destroy(hloop);
  if (grpc) srv_grpc_destroy(grpc);
  // after the transport, which waited for every stream message to end (the runner ends a cancelled one's),
  // before the generations its requests hold are waited for or freed
  srv_repeat_destroy(srv.repeat);
  srv_tlsw_destroy(tls);  // after the server: its handshakes fetch from it
  // after HTTP and gRPC closed (nothing calls it any more), before the
  // scheduler: it removes the retired versions from it
  srv_control_destroy(srv.control);
  if (srv.sched) srv_sched_destroy(srv.sched);
  srv_reflection_destroy(srv.reflection);
  if (srv.trace) {
    err te = {0};
    if (prof_trace_close(srv.trace, &te) != 0) srv_log(SRV_LOG_ERROR, "trace file: %s", te.msg);
  }
  srv_shm_destroy(srv.shm);  // after the scheduler: no request holds a region any more
  srv_cuda_shm_destroy(srv.cuda_shm);
  srv_registry_destroy(srv.reg);
  srv_copypool_destroy(srv.copies);  // after the instances: none gathers or packs any more
  srv_jsonmem_destroy(srv.jsonmem);  // after HTTP closed: no tree is left
  prof_gpus_destroy(srv.gpus);
  if (status == 0) srv_log(SRV_LOG_INFO, "stopped");
  grpc_log_server = NULL;  // srv is about to go; gRPC may still log while the process exits
  return status;
}
