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
  int n_instances;            // instance_group counts summed: independent runners (1 without instance_group)
} srv_llm_cfg;

// Whether a config names the generative backend.
int srv_llm_cfg_is_llm(const Inference__ModelConfig *cfg);

// Checks cfg: decoupled; inputs and outputs, when listed, among the names
// above with their datatypes; instance_group of kind CPU or AUTO; every
// parameter known and in range. ERR_INVALID_ARGUMENT with every reason at
// once ("; " between).
int srv_llm_cfg_create(const Inference__ModelConfig *cfg, srv_llm_cfg **out, err *e);
void srv_llm_cfg_destroy(srv_llm_cfg *p);

#endif
