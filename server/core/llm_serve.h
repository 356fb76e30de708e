// server/core/llm_serve.h: the generative backend's runners (backend
// "inferd_llm", issue 35). One srv_llm per model version: the checkpoint's
// weights, loaded once and shared, and instance_group's count of runners,
// each its own thread, iteration scheduler (batcher/iter.h), KV block pool
// (batcher/kvblocks.h) and engine runner (engine/llm/llm_step.h). A
// runner's loop: plan a step, run it, sample each finished position
// (engine/llm/llm_sample.h), complete it, and send what it produced; new
// requests join at the next plan, cancelled and expired ones leave there and
// give their KV blocks back at once.
//
// Requests arrive as parameters plus a sink (how answers leave): the gRPC
// ModelStreamInfer path (llm_grpc.c builds both from a validated
// srv_request) and the HTTP generate extension (server/http/rest_generate.c)
// share everything from there on.
#ifndef INFERD_SERVER_LLM_SERVE_H
#define INFERD_SERVER_LLM_SERVE_H

#include <stdint.h>

#include "engine/llm/llm_sample.h"
#include "kernels/base/err.h"
#include "server/core/llm_cfg.h"
#include "server/obs/hist.h"

struct srv_stats;

typedef struct srv_llm srv_llm;

// How a request's answers leave. Called on a runner thread only, never
// under its lock. emit: one response with n new token ids (n may be 0 with
// final); final 1 on the last call, after which the runner never touches
// ctx again; code != 0 (with final): the request failed with msg after the
// responses before it. cancelled: the client went away (checked at each
// step). congested: may be NULL; 1 holds streamed tokens back (they go out
// together once it reads 0).
typedef struct srv_llm_sink {
  void *ctx;
  void (*emit)(void *ctx, const int32_t *ids, int64_t n, int final, int code, const char *msg);
  int (*cancelled)(void *ctx);
  int (*congested)(void *ctx);
  // token: may be NULL; called with every token sampled for the request, in order, before it is
  // counted (on the runner thread); ends: the token ends the sequence (an end id or a stop word);
  // logits: the position's raw logits (srv_llm_vocab entries), borrowed for the call (log
  // probabilities); NULL unless the request's want_logits is set (greedy tokens are picked where the
  // logits are, on the GPU, and the logits never reach the host). Returning 1 ends the sequence with this token (the
  // text layer's stop strings).
  int (*token)(void *ctx, int32_t tok, int ends, const float *logits);
} srv_llm_sink;

// One request, as the runner takes it; everything pointed to is borrowed
// until srv_llm_submit returns (it copies).
typedef struct srv_llm_params {
  const int32_t *ids;
  int64_t n_ids;
  int64_t output_len;  // tokens to generate at most, >= 1
  int32_t end_id;      // -1: none besides generation_config.json's
  eng_llm_sampling sampling;
  int seeded;  // sampling.seed is the client's; else the runner picks one
  int want_logits;  // the sink's token hook reads every token's logits (log probabilities)
  int streaming;
  // TensorRT-LLM's stop_words_list: words of flat[offsets[i-1] .. offsets[i]) (offsets end at -1 or n_offsets)
  const int32_t *stop_flat;
  const int32_t *stop_offsets;
  int64_t n_stop;       // entries of each row
  int64_t deadline_us;  // absolute, eng_now_us's clock; INT64_MAX none
  // statistics: counted (success, failure, pending--) when the request ends; may be NULL
  struct srv_stats *stats;
  int64_t t_recv_us;
} srv_llm_params;

// Loads the checkpoint in dir (and its tokenizer and chat template when
// dir holds tokenizer.json: a broken one fails the load) and starts the runners instance_group asks
// for (llm_cfg.h): KIND_CPU ones compute in FP32 on the CPU; KIND_GPU ones
// (KIND_AUTO too when n_gpus > 0) on the GPU runner, `count` on each of the
// group's gpus (every one of the n_gpus visible when none are listed), with
// the weights uploaded once per device in parameter dtype's type (auto: the
// checkpoint's, FP16 and BF16 kept) and shared by that device's runners. The
// KV pool per runner: cfg->kv_blocks, or as many blocks as kv_bytes holds
// (on a GPU, when kv_cache_bytes is not given: gpu_memory_utilization of
// the device memory free after the weights, split over its runners).
// INVALID_ARGUMENT / NOT_FOUND / UNIMPLEMENTED as the checkpoint's loader
// says, or when the parameters do not fit the model (max_model_len past its
// learned positions, a pool smaller than one max_model_len sequence);
// UNAVAILABLE for KIND_GPU without a visible GPU or in a build without CUDA;
// RESOURCE_EXHAUSTED when the device memory does not hold the weights and
// one sequence's pool.
int srv_llm_create(const srv_llm_cfg *cfg, const char *dir, const char *model_name, int n_gpus, srv_llm **out,
                   err *e);
// The runners started, and where they run ("2 on GPU 0 (float16)"), for the ready line.
int srv_llm_n_runners(const srv_llm *l);
const char *srv_llm_where(const srv_llm *l);
// Stops the runners: every request held ends (final, UNAVAILABLE "the
// server is shutting down"), their threads are joined; later submits are
// refused. Idempotent; any thread but a runner's.
void srv_llm_stop(srv_llm *l);
// Stops, then frees. NULL is a no-op.
void srv_llm_destroy(srv_llm *l);

// Checks p against the model (ids in the vocabulary, the prompt within
// max_model_len and the pool, output_len in range) and queues it on the
// least loaded runner. 0: the runner owns the request and answers through
// sink until final. Else e says why (INVALID_ARGUMENT; UNAVAILABLE when
// stopped; RESOURCE_EXHAUSTED out of memory) and nothing was taken.
int srv_llm_submit(srv_llm *l, const srv_llm_params *p, const srv_llm_sink *sink, err *e);

int64_t srv_llm_vocab(const srv_llm *l);
// The checkpoint's tokenizer (tokenizer.json) and chat template (tokenizer_config.json's chat_template
// or chat_template.jinja), loaded once with the weights and immutable; NULL when the checkpoint has none.
const struct eng_tok *srv_llm_tokenizer(const srv_llm *l);
const struct eng_chat_template *srv_llm_chat_template(const srv_llm *l);
const char *srv_llm_name(const srv_llm *l);
int64_t srv_llm_max_model_len(const srv_llm *l);

// Totals over the version's runners, for /metrics.
typedef struct srv_llm_metrics {
  uint64_t prompt_tokens, generated_tokens, preemptions, prefix_hit_tokens;
  int64_t blocks_used, blocks_total, running, waiting;
  const prof_hist *ttft_us, *itl_us;  // time to first token, inter-token latency (microseconds)
  // per answered request (not dropped ones): arrival to the answer (microseconds), and its generated tokens
  // over that time, times 100 (the histogram holds integers; 0.01 token/s resolution)
  const prof_hist *e2e_us, *tps_x100;
} srv_llm_metrics;
void srv_llm_metrics_get(const srv_llm *l, srv_llm_metrics *out);

#endif
