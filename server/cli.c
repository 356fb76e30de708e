// cli.c: flag parsing ("--name value" and "--name=value").
#include "server/cli.h"

#include "server/grpc/grpc_front.h"
#include "server/grpc/rapid_reset.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void srv_options_usage(const char *prog) {
  fprintf(stdout,
          "Usage: %s --model-repository DIR [options]\n"
          "\n"
          "inferd serves the ONNX models of a Triton-style repository over the KServe v2\n"
          "gRPC protocol (inference.GRPCInferenceService) and a small HTTP endpoint.\n"
          "\n"
          "  --model-repository DIR       repository: DIR/<model>/config.pbtxt, DIR/<model>/<version>/model.onnx\n"
          "  --model-store-allow DIR      a folder outside the repository that symbolic links in it may\n"
          "                               lead into (a Hugging Face cache's blobs, a mounted volume);\n"
          "                               repeatable. Links may always lead anywhere inside the repository\n"
          "                               itself; a name a load request's config override gives may not\n"
          "                               leave its model's directory\n"
          "  --grpc-address ADDR          gRPC listen address (default 0.0.0.0)\n"
          "  --grpc-port N                gRPC port, 0 picks a free one (default 8001)\n"
          "  --http-address ADDR          HTTP listen address (default 0.0.0.0)\n"
          "  --http-port N                HTTP port for /v2/health/live, /v2/health/ready, /metrics;\n"
          "                               0 picks a free one (default 8000)\n"
          "  --grpc-threads N             gRPC completion-queue threads (default: one per CPU in the\n"
          "                               process's affinity mask)\n"
          "  --grpc-max-message-bytes N   largest request or response message (default 67108864);\n"
          "                               larger requests get RESOURCE_EXHAUSTED\n"
          "  --reply-threads N            threads that send a finished batch's answers (default a quarter\n"
          "                               of the CQ threads, 2 to 8; 0: the thread that ran the batch sends them)\n"
          "  --copy-threads N             threads that share a big batch's host copies with its instance\n"
          "                               thread: gathering the inputs, packing the answers (default 4;\n"
          "                               0: each instance thread copies alone)\n"
          "  --copy-min-bytes N           a batch's inputs or outputs of fewer bytes are copied by its\n"
          "                               instance thread alone (default 1048576)\n"
          "  --grpc-transport-offload BOOL let gRPC's executor threads take over a busy connection's\n"
          "                               transport work (gRPC's habit; default false: it stays on the\n"
          "                               thread that holds it, which held p99 far lower under load)\n"
          "  --grpc-max-concurrent-streams N calls one connection may hold at once (default 2048;\n"
          "                               HTTP/2's setting: a client waits for a free stream)\n"
          "  --grpc-rapid-reset-limit N   end a gRPC connection whose client cancels N calls within one\n"
          "                               second, half or more of those it opened (HTTP/2 rapid reset;\n"
          "                               default 1000; 0: never)\n"
          "  --grpc-rapid-reset-min-deadline-ms MS  for that guard, a call whose deadline was under MS\n"
          "                               when it arrived and expired before its answer counts as a\n"
          "                               cancel (default 10; 0: expiries never count; at most 60000)\n"
          "  --grpc-max-connections N     connections the plaintext gRPC port holds at once; more are reset\n"
          "                               at once (default min(10000, (open files limit - 256) / 2))\n"
          "  --grpc-max-connection-idle SECS  a gRPC connection with no call for SECS gets GOAWAY and is\n"
          "                               closed; clients reconnect on their next call (default 300; 0: never)\n"
          "  --grpc-handshake-timeout SECS  a gRPC connection's handshake (TLS) must end within SECS, else\n"
          "                               it is closed (default 10)\n"
          "  --grpc-max-frame-bytes N     largest HTTP/2 DATA frame a client may send (16384 to 16777215;\n"
          "                               default 16384, HTTP/2's and gRPC's; larger: fewer frames per big\n"
          "                               message, more head-of-line blocking of small ones)\n"
          "  --grpc-stream-window-bytes N HTTP/2 receive window the server offers each call (65535 to\n"
          "                               1073741824; default 0: gRPC's own, 64 KiB grown by its BDP probe)\n"
          "  --grpc-stream-max-queued N   ModelStreamInfer: messages one stream holds taken and not yet\n"
          "                               answered on the wire before it stops reading (default 128); it\n"
          "                               reads again at half, so a client that never reads is held by\n"
          "                               HTTP/2 flow control instead of growing the server\n"
          "  --grpc-stream-max-queued-bytes N the same for the bytes of its waiting answers (default 16777216)\n"
          "  --http-max-infer-body-bytes N largest body of a REST inference request (default 67108864);\n"
          "                               larger ones get 413 (other HTTP requests: 1 MiB)\n"
          "  --http-max-connections N     connections the HTTP port holds at once; past it a new one gets\n"
          "                               503 and is closed (default min(10000, (descriptor limit - 256) / 2),\n"
          "                               so the gRPC port always keeps its half)\n"
          "  --http-header-timeout SECS   a request's line and headers must arrive within SECS of its first\n"
          "                               byte, however they trickle (default 10; 0: no limit); else 408\n"
          "  --http-body-min-rate N       from 10 s after its headers a request body must average N bytes/s\n"
          "                               (default 32768; 0: no limit); else 408 and the connection ends\n"
          "  --http-max-body-bytes-in-flight N  bytes of request bodies buffered at once over all HTTP\n"
          "                               connections (default 1073741824; 0: no limit); a body that does\n"
          "                               not fit gets 503 with Retry-After: 1\n"
          "  --rest-json-max-memory N     memory the REST API's JSON trees may take at once, estimated\n"
          "                               before parsing (default 536870912; 0: no limit); a body needing\n"
          "                               more gets 413, one that does not fit now 503\n"
          "  --max-inflight-request-bytes N  bytes of inference requests (gRPC, streams, REST) admitted\n"
          "                               and not yet answered, over the whole server (default: 1/16 of\n"
          "                               physical memory, at most 536870912; 0: no limit); past it a new\n"
          "                               request gets RESOURCE_EXHAUSTED / 429 at once\n"
          "  --default-max-batch-size N   max_batch_size given to models whose config.pbtxt is missing\n"
          "                               and whose first dimension is dynamic (default 4)\n"
          "  --model-max-batch-size N     largest max_batch_size a model config may set (default 65536):\n"
          "                               a load asking more fails with INVALID_ARGUMENT\n"
          "  --model-max-priority-levels N  most dynamic_batching.priority_levels a model config may set\n"
          "                               (default 1024): a load asking more fails with INVALID_ARGUMENT\n"
          "  --model-warmup-max-mib N     input one load's model_warmup may feed in all (every entry's\n"
          "                               runs x instances x one run's input; default 1024): a load\n"
          "                               asking more fails at once, saying so\n"
          "  --model-warmup-max-runs N    executions one load's model_warmup may run in all (every\n"
          "                               entry's count x instances; default 1000): a load asking\n"
          "                               more fails at once, saying so\n"
          "  --model-prepare-budget-s N   seconds each instance may spend at load preparing batch sizes\n"
          "                               beyond 1, the preferred sizes and max_batch_size (CUDA graphs,\n"
          "                               cuDNN plans, GEMM choices; default 60): the sizes left out run\n"
          "                               padded to the next prepared one; ready only after it\n"
          "  --disable-auto-complete-config  Triton's flag: take config.pbtxt as written (no tensors,\n"
          "                               max_batch_size or dynamic_batching filled in from the model)\n"
          "  --strict-readiness BOOL      ready only when every model loaded (default true)\n"
          "  --exit-timeout-secs N        on SIGTERM/SIGINT, how long in-flight requests may take\n"
          "                               before they are cancelled (default 30)\n"
          "  --metrics-port N             also serve /metrics alone on this port (Triton's 8002;\n"
          "                               default: only on the HTTP port; 0 picks a free one)\n"
          "  --allow-metrics BOOL         serve /metrics at all (default true)\n"
          "  --allow-client-shm BOOL      let clients register system and CUDA shared memory regions\n"
          "                               and pass tensors through them (Triton's flag; default false)\n"
          "  --shm-max-regions N          system (and, apart, CUDA) shared memory regions registered at\n"
          "                               once (default 4096; 0: no limit); past it RESOURCE_EXHAUSTED / 429\n"
          "  --trace-file PATH            write every Nth request (--trace-rate) as Chrome trace events\n"
          "                               (one span per stage), a file Perfetto and chrome://tracing open\n"
          "  --trace-rate N               trace every Nth request (default 1000)\n"
          "  --trace-file-max-bytes N     the trace file's cap (default 1073741824; 0: none): past it\n"
          "                               tracing stops, one log line says so (any client may raise the\n"
          "                               rate through the trace settings API)\n"
          "  --model-control-mode MODE    none (load the repository once, default), explicit (load the\n"
          "                               --load-model ones; RepositoryModelLoad/Unload change the set)\n"
          "                               or poll (rescan the repository every --repository-poll-secs)\n"
          "  --load-model NAME            explicit mode: load NAME at start (repeatable; '*' for all)\n"
          "  --repository-poll-secs N     poll mode: seconds between rescans (default 15)\n"
          "  --grpc-use-ssl [BOOL]        TLS on the gRPC port (Triton's flag; default false); needs\n"
          "                               --grpc-server-cert and --grpc-server-key\n"
          "  --grpc-server-cert FILE      the server's PEM certificate (chain)\n"
          "  --grpc-server-key FILE       its PEM private key (unencrypted)\n"
          "  --grpc-root-cert FILE        PEM CA certificates that client certificates must chain to\n"
          "  --grpc-use-ssl-mutual [BOOL] mutual TLS: clients must present a certificate signed by\n"
          "                               --grpc-root-cert (implies --grpc-use-ssl)\n"
          "  --http-use-ssl [BOOL]        HTTPS on the HTTP port (TLS 1.2+, default false); needs\n"
          "                               --http-server-cert and --http-server-key\n"
          "  --http-server-cert FILE      the HTTP port's PEM certificate (chain)\n"
          "  --http-server-key FILE       its PEM private key (unencrypted)\n"
          "  --http-root-cert FILE        PEM CA certificates that HTTPS client certificates must chain to\n"
          "  --http-use-ssl-mutual [BOOL] mutual TLS on the HTTP port: clients must present a certificate\n"
          "                               signed by --http-root-cert (implies --http-use-ssl)\n"
          "  --grpc-ssl-client-cert MODE  none, optional or required (implies --grpc-use-ssl): optional\n"
          "                               serves clients without a certificate and verifies the ones\n"
          "                               sent against --grpc-root-cert; required = --grpc-use-ssl-mutual.\n"
          "                               SIGHUP, or a change of the files, reloads the certificates for\n"
          "                               new connections (open ones keep theirs; gRPC port only)\n"
          "  --log-level LEVEL            error, warn, info or debug (default info)\n"
          "  --log-verbose N              Triton's flag: N > 0 means --log-level debug\n"
          "  --help                       this text\n"
          "  --version                    print the version\n"
          "\n"
          "When serving, one line 'inferd ready: grpc=<port> http=<port>' goes to stderr.\n",
          prog);
}

static int parse_int(const char *flag, const char *v, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    fprintf(stderr, "inferd: %s expects an integer in %ld..%ld, got '%s'\n", flag, lo, hi, v);
    return -1;
  }
  *out = (int)x;
  return 0;
}

static int parse_ll(const char *flag, const char *v, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    fprintf(stderr, "inferd: %s expects an integer in %lld..%lld, got '%s'\n", flag, lo, hi, v);
    return -1;
  }
  *out = x;
  return 0;
}

static int parse_bool(const char *flag, const char *v, int *out) {
  if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "yes")) *out = 1;
  else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no")) *out = 0;
  else {
    fprintf(stderr, "inferd: %s expects true or false, got '%s'\n", flag, v);
    return -1;
  }
  return 0;
}

// The default number of CQ threads, from the CPUs the process may run on (its
// affinity mask, so a server started under taskset or a container's cpuset
// sizes itself to what it was given, not to the machine): one per CPU. On the
// 16-core H200 machine (2026-11-26, inferd on 8 cores, loadc on the other 8,
// tests/bench/RESULTS.md) 8 CQ threads carried the seed MLP 1.05-1.25x faster
// than 16 at 512 streams and 1.02-1.22x at 64, in three model setups: 16 CQ
// threads spent 3.2-4.1 cores' worth of time runnable but waiting for a CPU
// at 512 streams (8: 1.3-1.9), behind each other and the instances' threads,
// which waited as long as they ran. 6 and 12 were slower
// than 8 at 512 streams (12 was 1.04-1.14x faster at 64). (On 2026-11-24,
// before the answers went through the CQ threads' mailboxes, 16 beat 8.)
// On a single CPU a second thread would only wait for gRPC's one poller to
// kick it, a context switch on the same core (2-core VM, 2026-11-26).
static int default_grpc_threads(void) {
  cpu_set_t set;
  long n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 1) return 1;
  return n > 256 ? 256 : (int)n;
}

// --max-inflight-request-bytes' default: 1/16 of physical memory, at most
// 512 MiB, at least 128 MiB (two 64 MiB messages, gRPC's default largest). The
// bytes charged are only the requests' own; each also holds gRPC's buffers, its
// answer and allocator slack, so RSS runs to about 2.5 times the budget under a
// flood (probe F1b, 3 connections x 2,000 calls of 256 KiB: peak RSS 0.79 GB
// at 256 MiB, 1.3 GB at 512 MiB, killed past 1.9 GB at 1 GiB). 512 MiB of
// inputs waiting is seconds of work for any model this server runs and far
// above what a full queue of max-size batches needs; a client past it gets
// RESOURCE_EXHAUSTED at once and retries, rather than the server being killed.
static long long srv_default_inflight_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  long long v = 512LL << 20;
  if (pages > 0 && psize > 0 && (long long)pages * psize / 16 < v) v = (long long)pages * psize / 16;
  return v < (128LL << 20) ? 128LL << 20 : v;
}

int srv_options_parse(int argc, char **argv, srv_options *o) {
  *o = (srv_options){.grpc_address = "0.0.0.0", .http_address = "0.0.0.0", .grpc_port = 8001, .http_port = 8000,
                     .grpc_threads = default_grpc_threads(), .grpc_max_message_bytes = 64 << 20,
                     .grpc_max_streams = 0,  // the gRPC front's default (2048)
                     .grpc_rapid_reset_limit = SRV_RR_DEFAULT_LIMIT,
                     .grpc_rapid_reset_min_deadline_ms = SRV_RR_DEFAULT_MIN_DEADLINE_MS,
                     .grpc_max_idle_secs = SRV_GRPC_DEFAULT_MAX_IDLE_MS / 1000,
                     .grpc_handshake_secs = SRV_GRPC_DEFAULT_HANDSHAKE_MS / 1000,
                     .grpc_max_frame_bytes = SRV_GRPC_DEFAULT_MAX_FRAME_BYTES,
                     .grpc_stream_max_queued = SRV_GRPC_DEFAULT_STREAM_MAX_QUEUED,
                     .grpc_stream_max_queued_bytes = SRV_GRPC_DEFAULT_STREAM_MAX_QUEUED_BYTES,
                     .reply_threads = -1,    // half the cores given, 2 to 8 (main.c)
                     .copy_threads = 4, .copy_min_bytes = 1 << 20,
                     .http_max_infer_body_bytes = 64 << 20,
                     .http_header_timeout_secs = 10, .http_body_min_rate = 32768,
                     .http_max_body_bytes_in_flight = 1LL << 30, .rest_json_max_memory = 512LL << 20,
                     .max_inflight_request_bytes = -1,
                     .default_max_batch_size = 4, .model_max_batch_size = 65536, .model_max_priority_levels = 1024, .warmup_max_mib = 1024, .warmup_max_runs = 1000, .prepare_budget_s = 60, .auto_complete_config = 1, .strict_readiness = 1, .exit_timeout_secs = 30,
                     .log_level = SRV_LOG_INFO, .trace_rate = 1000, .trace_file_max_bytes = 1LL << 30, .allow_metrics = 1, .metrics_port = -1, .shm_max_regions = 4096, .poll_secs = 15};
  int client_cert = -1;  // --grpc-ssl-client-cert, -1 when not given
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      srv_options_usage(argv[0]);
      return 1;
    }
    if (!strcmp(a, "--version")) {
      printf("inferd %s\n", INFERD_VERSION);
      return 1;
    }
    if (!strcmp(a, "--disable-auto-complete-config")) {
      o->auto_complete_config = 0;
      continue;
    }
    // Triton's spelling is "--grpc-use-ssl=true"; the bare flag means true too
    if (!strcmp(a, "--grpc-use-ssl") || !strcmp(a, "--grpc-use-ssl-mutual")) {
      int v = 1, *dst = !strcmp(a, "--grpc-use-ssl") ? &o->grpc_use_ssl : &o->grpc_use_ssl_mutual;
      if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 && parse_bool(a, argv[i + 1], &v) != 0) return -1;
      if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) i++;
      *dst = v;
      continue;
    }
    if (!strcmp(a, "--http-use-ssl") || !strcmp(a, "--http-use-ssl-mutual")) {  // as the gRPC ones above
      int v = 1, *dst = !strcmp(a, "--http-use-ssl") ? &o->http_use_ssl : &o->http_use_ssl_mutual;
      if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 && parse_bool(a, argv[i + 1], &v) != 0) return -1;
      if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) i++;
      *dst = v;
      continue;
    }
    if (strncmp(a, "--", 2) != 0) {
      fprintf(stderr, "inferd: unexpected argument '%s' (see --help)\n", a);
      return -1;
    }
    char name[64];
    const char *val = NULL, *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    if (nlen >= sizeof name) nlen = sizeof name - 1;
    memcpy(name, a, nlen);
    name[nlen] = '\0';
    if (eq) val = eq + 1;
    else if (i + 1 < argc) val = argv[++i];
    if (!val) {
      fprintf(stderr, "inferd: %s needs a value (see --help)\n", name);
      return -1;
    }
    int rc = 0, lv;
    if (!strcmp(name, "--model-repository")) o->model_repository = val;
    else if (!strcmp(name, "--grpc-address")) o->grpc_address = val;
    else if (!strcmp(name, "--http-address")) o->http_address = val;
    else if (!strcmp(name, "--grpc-port")) rc = parse_int(name, val, 0, 65535, &o->grpc_port);
    else if (!strcmp(name, "--http-port")) rc = parse_int(name, val, 0, 65535, &o->http_port);
    else if (!strcmp(name, "--grpc-threads")) rc = parse_int(name, val, 1, 256, &o->grpc_threads);
    else if (!strcmp(name, "--grpc-max-message-bytes")) rc = parse_int(name, val, 1024, INT_MAX, &o->grpc_max_message_bytes);
    else if (!strcmp(name, "--grpc-max-concurrent-streams")) rc = parse_int(name, val, 1, INT_MAX, &o->grpc_max_streams);
    else if (!strcmp(name, "--grpc-transport-offload")) rc = parse_bool(name, val, &o->grpc_transport_offload);
    else if (!strcmp(name, "--grpc-rapid-reset-limit")) rc = parse_int(name, val, 0, INT_MAX, &o->grpc_rapid_reset_limit);
    else if (!strcmp(name, "--grpc-rapid-reset-min-deadline-ms"))
      rc = parse_int(name, val, 0, 60000, &o->grpc_rapid_reset_min_deadline_ms);
    else if (!strcmp(name, "--grpc-max-connections")) rc = parse_int(name, val, 1, 1 << 24, &o->grpc_max_connections);
    else if (!strcmp(name, "--grpc-max-connection-idle")) rc = parse_int(name, val, 0, 7 * 86400, &o->grpc_max_idle_secs);
    else if (!strcmp(name, "--grpc-handshake-timeout")) rc = parse_int(name, val, 1, 3600, &o->grpc_handshake_secs);
    else if (!strcmp(name, "--grpc-max-frame-bytes"))
      rc = parse_int(name, val, 16384, 16777215, &o->grpc_max_frame_bytes);  // HTTP/2's bounds (RFC 9113 6.5.2)
    else if (!strcmp(name, "--grpc-stream-window-bytes")) {
      rc = parse_int(name, val, 0, 1 << 30, &o->grpc_stream_window_bytes);
      if (rc == 0 && o->grpc_stream_window_bytes > 0 && o->grpc_stream_window_bytes < 65535) {
        fprintf(stderr, "inferd: --grpc-stream-window-bytes must be 0 (gRPC's own) or 65535 to 1073741824, got %s\n", val);
        rc = -1;
      }
    }
    else if (!strcmp(name, "--grpc-stream-max-queued")) rc = parse_int(name, val, 1, 1 << 20, &o->grpc_stream_max_queued);
    else if (!strcmp(name, "--grpc-stream-max-queued-bytes"))
      rc = parse_int(name, val, 4096, INT_MAX, &o->grpc_stream_max_queued_bytes);
    else if (!strcmp(name, "--reply-threads")) rc = parse_int(name, val, 0, 64, &o->reply_threads);
    else if (!strcmp(name, "--copy-threads")) rc = parse_int(name, val, 0, 64, &o->copy_threads);
    else if (!strcmp(name, "--copy-min-bytes")) rc = parse_ll(name, val, 65536, 1LL << 40, &o->copy_min_bytes);
    else if (!strcmp(name, "--http-max-infer-body-bytes"))
      rc = parse_int(name, val, 1 << 20, INT_MAX, &o->http_max_infer_body_bytes);
    else if (!strcmp(name, "--http-max-connections")) rc = parse_int(name, val, 1, 1 << 24, &o->http_max_connections);
    else if (!strcmp(name, "--http-header-timeout")) rc = parse_int(name, val, 0, 3600, &o->http_header_timeout_secs);
    else if (!strcmp(name, "--http-body-min-rate")) rc = parse_int(name, val, 0, 1 << 30, &o->http_body_min_rate);
    else if (!strcmp(name, "--http-max-body-bytes-in-flight"))
      rc = parse_ll(name, val, 0, 1LL << 50, &o->http_max_body_bytes_in_flight);
    else if (!strcmp(name, "--max-inflight-request-bytes"))
      rc = parse_ll(name, val, 0, 1LL << 50, &o->max_inflight_request_bytes);
    else if (!strcmp(name, "--rest-json-max-memory")) rc = parse_ll(name, val, 0, 1LL << 50, &o->rest_json_max_memory);
    else if (!strcmp(name, "--default-max-batch-size")) rc = parse_int(name, val, 0, 1 << 20, &o->default_max_batch_size);
    else if (!strcmp(name, "--model-max-batch-size")) rc = parse_int(name, val, 1, 1 << 24, &o->model_max_batch_size);
    else if (!strcmp(name, "--model-max-priority-levels"))
      rc = parse_int(name, val, 1, 1 << 20, &o->model_max_priority_levels);
    else if (!strcmp(name, "--model-warmup-max-mib")) rc = parse_int(name, val, 1, 1 << 20, &o->warmup_max_mib);
    else if (!strcmp(name, "--model-warmup-max-runs")) rc = parse_int(name, val, 1, 1 << 30, &o->warmup_max_runs);
    else if (!strcmp(name, "--model-prepare-budget-s")) rc = parse_int(name, val, 0, 86400, &o->prepare_budget_s);
    else if (!strcmp(name, "--trace-file")) o->trace_file = val;
    else if (!strcmp(name, "--trace-rate")) rc = parse_int(name, val, 1, INT_MAX, &o->trace_rate);
    else if (!strcmp(name, "--trace-file-max-bytes")) rc = parse_ll(name, val, 0, 1LL << 50, &o->trace_file_max_bytes);
    else if (!strcmp(name, "--grpc-server-cert")) o->grpc_server_cert = val;
    else if (!strcmp(name, "--grpc-server-key")) o->grpc_server_key = val;
    else if (!strcmp(name, "--grpc-root-cert")) o->grpc_root_cert = val;
    else if (!strcmp(name, "--grpc-use-ssl")) rc = parse_bool(name, val, &o->grpc_use_ssl);
    else if (!strcmp(name, "--grpc-use-ssl-mutual")) rc = parse_bool(name, val, &o->grpc_use_ssl_mutual);
    else if (!strcmp(name, "--http-server-cert")) o->http_server_cert = val;
    else if (!strcmp(name, "--http-server-key")) o->http_server_key = val;
    else if (!strcmp(name, "--http-root-cert")) o->http_root_cert = val;
    else if (!strcmp(name, "--http-use-ssl")) rc = parse_bool(name, val, &o->http_use_ssl);
    else if (!strcmp(name, "--http-use-ssl-mutual")) rc = parse_bool(name, val, &o->http_use_ssl_mutual);
    else if (!strcmp(name, "--grpc-ssl-client-cert")) {
      if (!strcmp(val, "none")) client_cert = SRV_TLS_CLIENT_NONE;
      else if (!strcmp(val, "optional")) client_cert = SRV_TLS_CLIENT_OPTIONAL;
      else if (!strcmp(val, "required")) client_cert = SRV_TLS_CLIENT_REQUIRED;
      else {
        fprintf(stderr, "inferd: --grpc-ssl-client-cert expects none, optional or required, got '%s'\n", val);
        rc = -1;
      }
    }
    else if (!strcmp(name, "--strict-readiness")) rc = parse_bool(name, val, &o->strict_readiness);
    else if (!strcmp(name, "--allow-client-shm")) rc = parse_bool(name, val, &o->allow_client_shm);
    else if (!strcmp(name, "--shm-max-regions")) rc = parse_int(name, val, 0, 1 << 20, &o->shm_max_regions);
    else if (!strcmp(name, "--allow-metrics")) rc = parse_bool(name, val, &o->allow_metrics);
    else if (!strcmp(name, "--metrics-port")) rc = parse_int(name, val, 0, 65535, &o->metrics_port);
    else if (!strcmp(name, "--exit-timeout-secs")) rc = parse_int(name, val, 0, 24 * 3600, &o->exit_timeout_secs);
    else if (!strcmp(name, "--repository-poll-secs")) rc = parse_int(name, val, 1, 24 * 3600, &o->poll_secs);
    else if (!strcmp(name, "--model-control-mode")) {
      if (!strcmp(val, "none")) o->control_mode = SRV_CONTROL_NONE;
      else if (!strcmp(val, "poll")) o->control_mode = SRV_CONTROL_POLL;
      else if (!strcmp(val, "explicit")) o->control_mode = SRV_CONTROL_EXPLICIT;
      else {
        fprintf(stderr, "inferd: --model-control-mode expects none, poll or explicit, got '%s'\n", val);
        rc = -1;
      }
    } else if (!strcmp(name, "--model-store-allow")) {
      struct stat st;
      int serr = val[0] && stat(val, &st) != 0 ? errno : 0;
      if (o->n_store_allow == SRV_MAX_STORE_ALLOW) {
        fprintf(stderr, "inferd: more than %d --model-store-allow flags\n", SRV_MAX_STORE_ALLOW);
        rc = -1;
      } else if (!val[0] || serr || !S_ISDIR(st.st_mode)) {
        // a typo would otherwise surface only as models failing to load
        fprintf(stderr, "inferd: --model-store-allow '%s' is not a folder: %s\n", val,
                !val[0] ? "empty name" : serr ? strerror(serr) : "not a directory");
        rc = -1;
      } else {
        o->store_allow[o->n_store_allow++] = val;
      }
    } else if (!strcmp(name, "--load-model")) {
      if (o->n_load_models == SRV_MAX_LOAD_MODELS) {
        fprintf(stderr, "inferd: more than %d --load-model flags\n", SRV_MAX_LOAD_MODELS);
        rc = -1;
      } else {
        o->load_models[o->n_load_models++] = val;
      }
    } else if (!strcmp(name, "--log-verbose")) {
      rc = parse_int(name, val, 0, 1000, &lv);
      if (rc == 0 && lv > 0) o->log_level = SRV_LOG_DEBUG;
    } else if (!strcmp(name, "--log-level")) {
      rc = srv_log_parse_level(val, &o->log_level);
      if (rc) fprintf(stderr, "inferd: --log-level expects error, warn, info or debug, got '%s'\n", val);
    } else {
      fprintf(stderr, "inferd: unknown flag '%s' (see --help)\n", name);
      return -1;
    }
    if (rc) return -1;
  }
  if (!o->model_repository) {
    fprintf(stderr, "inferd: --model-repository is required (see --help)\n");
    return -1;
  }
  if (o->grpc_use_ssl_mutual && client_cert >= 0 && client_cert != SRV_TLS_CLIENT_REQUIRED) {
    fprintf(stderr, "inferd: --grpc-use-ssl-mutual means --grpc-ssl-client-cert required, not %s\n",
            client_cert == SRV_TLS_CLIENT_NONE ? "none" : "optional");
    return -1;
  }
  if (o->grpc_use_ssl_mutual) client_cert = SRV_TLS_CLIENT_REQUIRED;
  if (client_cert == SRV_TLS_CLIENT_REQUIRED) o->grpc_use_ssl_mutual = 1;
  if (client_cert > SRV_TLS_CLIENT_NONE) o->grpc_use_ssl = 1;  // as Triton does for the mutual flag
  o->grpc_ssl_client_cert = client_cert > 0 ? (srv_tls_client)client_cert : SRV_TLS_CLIENT_NONE;
  // Certificates given without TLS on would leave an operator believing the
  // port is encrypted: refuse rather than serve plaintext.
  if (!o->grpc_use_ssl && (o->grpc_server_cert || o->grpc_server_key || o->grpc_root_cert)) {
    fprintf(stderr, "inferd: --grpc-server-cert/--grpc-server-key/--grpc-root-cert need --grpc-use-ssl "
                    "(or --grpc-use-ssl-mutual)\n");
    return -1;
  }
  if (o->grpc_use_ssl && (!o->grpc_server_cert || !o->grpc_server_key)) {
    fprintf(stderr, "inferd: --grpc-use-ssl needs --grpc-server-cert FILE and --grpc-server-key FILE\n");
    return -1;
  }
  if (o->grpc_ssl_client_cert != SRV_TLS_CLIENT_NONE && !o->grpc_root_cert) {
    fprintf(stderr, "inferd: %s needs --grpc-root-cert FILE (the CA of the client certificates)\n",
            o->grpc_ssl_client_cert == SRV_TLS_CLIENT_REQUIRED ? "--grpc-use-ssl-mutual" : "--grpc-ssl-client-cert optional");
    return -1;
  }
  if (o->http_use_ssl_mutual) o->http_use_ssl = 1;
  if (!o->http_use_ssl && (o->http_server_cert || o->http_server_key || o->http_root_cert)) {
    fprintf(stderr, "inferd: --http-server-cert/--http-server-key/--http-root-cert need --http-use-ssl "
                    "(or --http-use-ssl-mutual)\n");
    return -1;
  }
  if (o->http_use_ssl && (!o->http_server_cert || !o->http_server_key)) {
    fprintf(stderr, "inferd: --http-use-ssl needs --http-server-cert FILE and --http-server-key FILE\n");
    return -1;
  }
  if (o->http_use_ssl_mutual && !o->http_root_cert) {
    fprintf(stderr, "inferd: --http-use-ssl-mutual needs --http-root-cert FILE (the CA of the client certificates)\n");
    return -1;
  }
  // a largest body that could never be admitted would turn every such request into a 503
  if (o->http_max_body_bytes_in_flight && o->http_max_body_bytes_in_flight < o->http_max_infer_body_bytes) {
    fprintf(stderr, "inferd: --http-max-body-bytes-in-flight (%lld) must be 0 or at least --http-max-infer-body-bytes (%d)\n",
            o->http_max_body_bytes_in_flight, o->http_max_infer_body_bytes);
    return -1;
  }
  // every model without config.pbtxt would otherwise fail to load
  if (o->default_max_batch_size > o->model_max_batch_size) {
    fprintf(stderr, "inferd: --default-max-batch-size (%d) must be at most --model-max-batch-size (%d)\n",
            o->default_max_batch_size, o->model_max_batch_size);
    return -1;
  }
  // Triton refuses --load-model outside explicit mode rather than ignore it
  if (o->n_load_models && o->control_mode != SRV_CONTROL_EXPLICIT) {
    fprintf(stderr, "inferd: --load-model needs --model-control-mode explicit\n");
    return -1;
  }
  if (o->max_inflight_request_bytes < 0) o->max_inflight_request_bytes = srv_default_inflight_bytes();
  return 0;
}
