// server/cli.h: command-line options, with Triton's flag names where
// Triton has the flag.
#ifndef INFERD_SERVER_CLI_H
#define INFERD_SERVER_CLI_H

#include "server/obs/log.h"
#include "server/sec/tls.h"

// Triton's --model-control-mode: NONE loads the whole repository once;
// EXPLICIT loads the --load-model ones and takes load/unload requests; POLL
// rescans the repository every --repository-poll-secs.
typedef enum srv_control_mode { SRV_CONTROL_NONE, SRV_CONTROL_POLL, SRV_CONTROL_EXPLICIT } srv_control_mode;
#define SRV_MAX_LOAD_MODELS 256
#define SRV_MAX_STORE_ALLOW 64

typedef struct srv_options {
  const char *model_repository;
  // --model-store-allow: folders outside the repository that symbolic links
  // placed in it may lead into (kernels/base/confine.h), each checked to be a folder
  const char *store_allow[SRV_MAX_STORE_ALLOW];
  int n_store_allow;
  const char *grpc_address, *http_address;
  int grpc_port, http_port;
  int grpc_threads;
  int grpc_max_message_bytes;
  int grpc_max_streams;  // concurrent calls per connection (--grpc-max-concurrent-streams)
  int grpc_transport_offload;  // --grpc-transport-offload (srv_grpc_opts.transport_offload)
  int grpc_rapid_reset_limit;  // --grpc-rapid-reset-limit; 0 off (srv_grpc_opts.rapid_reset_limit)
  int grpc_rapid_reset_min_deadline_ms;  // --grpc-rapid-reset-min-deadline-ms; 0: expiries never count
  int grpc_stream_max_queued, grpc_stream_max_queued_bytes;  // --grpc-stream-max-queued(-bytes) (srv_grpc_opts)
  int grpc_max_idle_secs;       // --grpc-max-connection-idle; 0: never (srv_grpc_opts.max_idle_ms)
  int grpc_handshake_secs;      // --grpc-handshake-timeout (srv_grpc_opts.handshake_ms)
  int grpc_max_frame_bytes;     // --grpc-max-frame-bytes (srv_grpc_opts.max_frame_bytes)
  int grpc_stream_window_bytes; // --grpc-stream-window-bytes; 0: gRPC's own (srv_grpc_opts.stream_window_bytes)
  int grpc_max_connections;  // --grpc-max-connections; 0: srv_gacc_default_max_conns() once the limit is raised
  int reply_threads;     // --reply-threads: threads sending batches' answers; -1 auto, 0 none (replyq.h)
  int copy_threads;      // --copy-threads: threads sharing big batches' host copies; 0 none (copypool.h)
  long long copy_min_bytes;  // --copy-min-bytes: smaller gathers and scatters stay on one thread
  int http_max_infer_body_bytes;  // body limit of POST .../infer on the HTTP port
  // issue 31's limits of the HTTP port (0: off, but http_max_connections 0: derived from the descriptor limit in main)
  int http_max_connections;      // --http-max-connections
  int http_header_timeout_secs;  // --http-header-timeout
  int http_body_min_rate;        // --http-body-min-rate, bytes/s
  long long http_max_body_bytes_in_flight;  // --http-max-body-bytes-in-flight
  long long rest_json_max_memory;           // --rest-json-max-memory, bytes
  long long max_inflight_request_bytes;     // --max-inflight-request-bytes; 0 no limit, -1 derived (cli.c)
  int default_max_batch_size;
  // the most a model config may ask (config_check_limits; a load's config
  // override comes over the network and these size what a load allocates)
  int model_max_batch_size;       // --model-max-batch-size
  int model_max_priority_levels;  // --model-max-priority-levels
  int warmup_max_mib;   // --model-warmup-max-mib: input one load's model_warmup may feed in all
  int warmup_max_runs;  // --model-warmup-max-runs: executions one load's model_warmup may run in all
  int prepare_budget_s;  // --model-prepare-budget-s: batch sizes prepared per instance at load (engine/batch_sizes.h)
  int auto_complete_config;  // Triton's auto-complete; --disable-auto-complete-config clears it
  int strict_readiness;
  int allow_client_shm;  // Triton's --allow-client-shm
  int shm_max_regions;   // --shm-max-regions: per registry (system, CUDA); 0 no limit
  int allow_metrics;     // Triton's --allow-metrics (default 1)
  int metrics_port;      // Triton's --metrics-port; -1: /metrics only on the HTTP port
  int exit_timeout_secs;
  srv_log_level log_level;
  const char *trace_file;  // NULL: no trace
  int trace_rate;
  long long trace_file_max_bytes;  // --trace-file-max-bytes; 0 no cap
  srv_control_mode control_mode;  // --model-control-mode
  const char *load_models[SRV_MAX_LOAD_MODELS];  // --load-model (explicit mode), "*" = every model
  int n_load_models;
  int poll_secs;  // --repository-poll-secs (poll mode)
  // Triton's gRPC TLS flags; --grpc-use-ssl-mutual implies --grpc-use-ssl
  int grpc_use_ssl, grpc_use_ssl_mutual;
  const char *grpc_server_cert, *grpc_server_key, *grpc_root_cert;  // PEM files; NULL when not given
  // the same for the HTTP port (HTTPS); --http-use-ssl-mutual implies --http-use-ssl
  int http_use_ssl, http_use_ssl_mutual;
  const char *http_server_cert, *http_server_key, *http_root_cert;
  // What the port asks of clients (--grpc-ssl-client-cert, ours: Triton has
  // only the mutual flag, which means REQUIRED); settled by the parse.
  srv_tls_client grpc_ssl_client_cert;
} srv_options;

// Parses argv. Returns 0 to run, 1 when --help/--version printed and the
// program should exit 0, -1 on a bad flag (message printed).
int srv_options_parse(int argc, char **argv, srv_options *o);
void srv_options_usage(const char *prog);

#endif
