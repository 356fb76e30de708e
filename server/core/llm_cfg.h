// server/core/llm_cfg.h: the generative backend's model (backend:
// "inferd_llm", issue 35) as the registry holds it: its config.pbtxt checked
// once per load (the engine parameters, decoupled, instance_group) and the
// tensors it shows its clients, named as Triton's TensorRT-LLM backend names
// them (input_ids, request_output_len, ..., output_ids, sequence_length).
// Pure data, like repeat_cfg.h; the requests run on the version's runners
// (server/core/llm_serve.h).
#ifndef INFERD_SERVER_LLM_CFG_H
#define INFERD_SERVER_LLM_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "model_config.pb-c.h"

#define SRV_LLM_BACKEND "inferd_llm"

// The inputs, in the order srv_version_input shows them: every one
// optional to the validator; a request holds input_ids or text_input
// (llm_grpc.c checks).
typedef enum srv_llm_in {
  SRV_LLM_IN_IDS = 0,      // INT32 [-1]: the prompt's token ids
  SRV_LLM_IN_LENGTHS,      // INT32 [1]: input_ids' length (checked when given)
  SRV_LLM_IN_OUTPUT_LEN,   // INT32 [1]: tokens to generate at most (default SRV_LLM_DEFAULT_OUTPUT_LEN)
  SRV_LLM_IN_END_ID,       // INT32 [1]: one more end token (besides generation_config.json's)
  SRV_LLM_IN_PAD_ID,       // INT32 [1]: accepted and unused (no padding in a ragged answer)
  SRV_LLM_IN_TEMPERATURE,  // FP32 [1]: 0 (the default) is greedy
  SRV_LLM_IN_TOP_K,        // INT32 [1] runtime_top_k
  SRV_LLM_IN_TOP_P,        // FP32 [1] runtime_top_p
  SRV_LLM_IN_MIN_P,        // FP32 [1] min_p
  SRV_LLM_IN_REP_PENALTY,  // FP32 [1] repetition_penalty
  SRV_LLM_IN_SEED,         // UINT64 [1] random_seed
  SRV_LLM_IN_STREAMING,    // BOOL [1]: one response per token (else one with all)
  SRV_LLM_IN_STOP_WORDS,   // INT32 [2, -1] stop_words_list (TensorRT-LLM's: flat ids, then end offsets, -1 padded)
  // Triton's vLLM backend's tensors (issue 36): the prompt as text, the answer as text_output
  SRV_LLM_IN_TEXT,         // BYTES [1] text_input: the prompt (instead of input_ids)
  SRV_LLM_IN_STREAM,       // BOOL [1] stream: one response per delta of text
  SRV_LLM_IN_SAMPLING,     // BYTES [1] sampling_parameters: vLLM's SamplingParams as JSON (llm_text.h)
  SRV_LLM_IN_EXCLUDE,      // BOOL [1] exclude_input_in_output
  SRV_LLM_IN_N
} srv_llm_in;

typedef enum srv_llm_out { SRV_LLM_OUT_IDS = 0, SRV_LLM_OUT_SEQ_LEN, SRV_LLM_OUT_TEXT, SRV_LLM_OUT_N } srv_llm_out;

#define SRV_LLM_DEFAULT_OUTPUT_LEN 16

#define SRV_LLM_DTYPE_AUTO 0
#define SRV_LLM_MAX_GROUPS 16
#define SRV_LLM_MAX_GPUS 16

typedef enum srv_llm_kind { SRV_LLM_KIND_AUTO = 0, SRV_LLM_KIND_CPU, SRV_LLM_KIND_GPU } srv_llm_kind;

// One instance_group: `count` runners on the CPU, or `count` on each of its gpus (every visible GPU when
// none listed); KIND_AUTO is settled at load by the GPUs visible then (GPU when any, as ONNX models).
typedef struct srv_llm_group {
  srv_llm_kind kind;
  int count;
  int n_gpus;
  int gpus[SRV_LLM_MAX_GPUS];
} srv_llm_group;

typedef struct srv_llm_cfg {
  eng_io in[SRV_LLM_IN_N];
  eng_io out[SRV_LLM_OUT_N];  // output_ids INT32 [-1, -1] (beam, tokens), sequence_length INT32 [-1] (beam),
                              // text_output BYTES [-1] (text_input's answers)
  int max_batch;              // config max_batch_size: > 0 puts a batch dim (of 1) before every shape
  // the engine's parameters (config.pbtxt `parameters`), defaults filled
  int32_t kv_blocks;          // kv_cache_blocks; 0: from kv_cache_bytes once the model's block size is known
  int64_t kv_bytes;           // kv_cache_bytes (default 256 MiB) when kv_cache_blocks is not given
  int32_t block_tokens;       // kv_block_tokens (16)
  int max_num_seqs;           // max_num_seqs (16)
  int64_t max_batched;        // max_num_batched_tokens (512)
  int64_t max_model_len;      // max_model_len (0: the checkpoint's max_position_embeddings, capped at 8192)
  int64_t max_prefill_chunk;  // max_prefill_chunk (0: the step's budget)
  int prefix_caching;         // enable_prefix_caching (true)
  int kv_bytes_given;         // kv_cache_bytes was set (on a GPU it then sizes the pool, not the fraction below)
  // GPU instances (llm_serve.c): the weights' element type, the KV pool's share of free device memory,
  // CUDA graphs for decode steps
  int dtype;                // dtype: SRV_LLM_DTYPE_AUTO (the checkpoint's own) or DT_FP32 / DT_FP16 / DT_BF16
  double gpu_mem_util;      // gpu_memory_utilization (0.9): of the device memory free after the weights
  int cuda_graphs;          // cuda_graphs (true)
  int tc_prefill;           // tensor_core_prefill (false): prefill attention on tensor cores (FP16/BF16)
  int host_sampling;        // host_sampling (false): sampled rows' logits to the host even on a GPU (issue 35)
  int n_instances;          // instance_group counts summed (GPU groups once per group, whatever their gpus)
  int n_groups;             // instance_group as given; none: one KIND_AUTO runner
  srv_llm_group groups[SRV_LLM_MAX_GROUPS];
} srv_llm_cfg;

// Whether a config names the generative backend.
int srv_llm_cfg_is_llm(const Inference__ModelConfig *cfg);

// Checks cfg: decoupled; inputs and outputs, when listed, among the names
// above with their datatypes; instance_group of kind CPU, GPU or AUTO; every
// parameter known and in range. ERR_INVALID_ARGUMENT with every reason at
// once ("; " between).
int srv_llm_cfg_create(const Inference__ModelConfig *cfg, srv_llm_cfg **out, err *e);
void srv_llm_cfg_destroy(srv_llm_cfg *p);

// Where each runner runs, from instance_group (dev[i]: a CUDA ordinal, -1 the CPU): CPU groups `count`
// runners, GPU groups `count` on each of their gpus (every one of the n_gpus visible when none are listed),
// KIND_AUTO a GPU group when a GPU is visible (as ONNX models: engine/repo/config.c's
// config_resolve_kinds), else a CPU one. UNAVAILABLE for a GPU group without cuda_built (a build without
// CUDA) or without a visible GPU; INVALID_ARGUMENT for a gpus entry past the visible devices or more than
// cap runners.
int srv_llm_cfg_place(const srv_llm_cfg *c, int n_gpus, int cuda_built, int *dev, int cap, int *n_out, err *e);

#endif
