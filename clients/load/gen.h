// gen.h: inferd-load's generate mode (`inferd-load generate ...`), a serving
// benchmark for generative models in the manner of vLLM's
// benchmark_serving and genai-perf: requests with prompt and output lengths
// drawn from seeded distributions, sent at a Poisson rate or at a fixed
// concurrency over gRPC ModelStreamInfer (TensorRT-LLM's tensors), Triton's
// HTTP generate_stream (SSE) or OpenAI's /v1/completions, and reported as
// TTFT, inter-token latency, time per output token, end-to-end latency and
// token throughputs. Calling one way: gen_cli.c (options) -> gen_run.c (the
// load threads) -> gen_grpc.c / gen_http.c + gen_sse.c (transports) and
// gen_report.c (text and JSON); gen_dist.c draws the workload.
#ifndef INFERD_CLIENTS_LOAD_GEN_H
#define INFERD_CLIENTS_LOAD_GEN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "clients/load/gen_dist.h"
#include "clients/load/hist.h"
#include "kernels/base/err.h"

typedef enum ld_gen_api { LD_API_GRPC = 0, LD_API_HTTP = 1, LD_API_OPENAI = 2 } ld_gen_api;

const char *ld_gen_api_name(ld_gen_api a);

#define LD_GEN_MAX_CONCURRENCY 4096
#define LD_GEN_DEFAULT_REQUESTS 100

// Caller-allocated; ld_gen_opts_parse fills it. Strings point into argv.
typedef struct ld_gen_opts {
  ld_gen_api api;
  const char *url;      // default localhost:8001 (grpc) or localhost:8000 (http, openai)
  const char *model;    // -m, required
  const char *version;  // -x, default "" (grpc, http)
  int64_t num_requests; // 0: until --duration-s ends
  double duration_s;    // 0: until num_requests are done
  double rate;          // requests/s, Poisson arrivals; 0: as fast as the concurrency allows
  int concurrency;      // requests in flight at most (load threads)
  ld_len_dist prompt, output;
  int64_t vocab;           // --vocab-size, or from --model-config; needed for token prompts (grpc, http)
  const char *model_config;  // a checkpoint's config.json (or its folder): vocab_size
  bool stream;             // default true
  bool ignore_eos;         // openai: "ignore_eos": true (vLLM's extension)
  int timeout_ms;          // per request, default 600000; 0: none
  uint64_t seed;
  const char *json;
  int verbose;
  bool help;
} ld_gen_opts;

// argv[0] is "generate". 0 or ERR_INVALID_ARGUMENT naming the option.
int ld_gen_opts_parse(int argc, char **argv, ld_gen_opts *o, err *e);
void ld_gen_usage(FILE *f);
// vocab_size from a Hugging Face config.json, or from config.json inside a folder.
int ld_gen_vocab_from_config(const char *path, int64_t *vocab, err *e);

// Error tallies by name ("INVALID_ARGUMENT", "HTTP_400", "CONNECT", ...).
#define LD_GEN_MAX_ERROR_KINDS 32

// What a run measured; init/close. Histograms in nanoseconds.
typedef struct ld_gen_result {
  uint64_t sent, ok, failed;
  uint64_t short_outputs;  // ok, but fewer tokens than requested (an end token, or max_model_len)
  uint64_t prompt_tokens, output_tokens, requested_output_tokens;
  bool prompt_tokens_estimated;  // openai without usage: words counted as tokens
  double seconds;                // from the first send to the last answer
  ld_hist *ttft, *itl, *tpot, *e2e, *lag;
  char error_names[LD_GEN_MAX_ERROR_KINDS][32];
  uint64_t error_counts[LD_GEN_MAX_ERROR_KINDS];
  int n_error_kinds;
  char first_error[256];
} ld_gen_result;

int ld_gen_result_init(ld_gen_result *r);  // -1 when out of memory
void ld_gen_result_close(ld_gen_result *r);
void ld_gen_result_error(ld_gen_result *r, const char *name, const char *msg);

// Runs the load of o against the server (r from ld_gen_result_init). Fails
// (exit 1) only when nothing could be set up; request errors are counted in
// r. *interrupted (Ctrl-C) stops new sends; those in flight still end.
int ld_gen_run(const ld_gen_opts *o, const volatile sig_atomic_t *interrupted, ld_gen_result *r, err *e);

void ld_gen_report_text(FILE *f, const ld_gen_opts *o, const ld_gen_result *r);
int ld_gen_report_json(const char *path, const ld_gen_opts *o, const ld_gen_result *r, err *e);

// The mode's main: argv[0] is "generate". Exit status as inferd-load's: 0
// ran (request errors included), 1 the server or model could not be reached
// or described (or every request failed to connect), or the JSON not written, 2 usage.
int ld_gen_main(int argc, char **argv, const volatile sig_atomic_t *interrupted);

#endif
