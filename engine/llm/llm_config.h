// engine/llm/llm_config.h: a Hugging Face decoder checkpoint's config.json
// (and generation_config.json when present) read into the numbers the
// runtime computes with. Families: Llama (2, 3.x with "llama3" RoPE
// scaling), Qwen2, Mistral, GPT-2. A field that would change the math and
// is not implemented (an unknown rope_scaling type, a sliding window where
// Qwen2 turns it on, quantization) fails the parse naming it; every problem
// is reported at once.
#ifndef INFERD_ENGINE_LLM_LLM_CONFIG_H
#define INFERD_ENGINE_LLM_LLM_CONFIG_H

#include <stdint.h>

#include "kernels/base/err.h"
#include "kernels/k_ref.h"

typedef enum eng_llm_family { ENG_LLM_LLAMA = 0, ENG_LLM_QWEN2, ENG_LLM_MISTRAL, ENG_LLM_GPT2 } eng_llm_family;
typedef enum eng_llm_act { ENG_LLM_SILU = 0, ENG_LLM_GELU_TANH, ENG_LLM_GELU } eng_llm_act;

#define ENG_LLM_MAX_EOS 8

typedef struct eng_llm_config {
  eng_llm_family family;
  char arch[64];  // architectures[0] or model_type, for messages
  int64_t hidden, intermediate, n_heads, n_kv_heads, head_dim, n_layers, vocab, max_pos;
  float norm_eps;
  int layer_norm;   // LayerNorm with bias (GPT-2); else RMSNorm
  int learned_pos;  // learned position embeddings (GPT-2); else RoPE
  double rope_theta;
  k_rope_scaling rope;
  int tie_embeddings;
  eng_llm_act act;  // SwiGLU's gate (SILU) or the MLP's GELU
  int gated_mlp;    // gate and up projections (Llama); else fc then proj (GPT-2)
  int qkv_bias, o_bias, mlp_bias;
  int64_t sliding_window;  // 0: none
  int32_t bos_id;          // -1: none
  int32_t eos_ids[ENG_LLM_MAX_EOS];
  int n_eos;
} eng_llm_config;

// Parses config.json text (and generation_config.json text, or NULL); its
// eos ids win over config.json's as transformers' generate() does.
// INVALID_ARGUMENT listing every problem; UNIMPLEMENTED for an unknown
// architecture or a math-changing field this runtime lacks.
int eng_llm_config_parse(const char *config_json, const char *gen_json, eng_llm_config *c, err *e);

// Reads dir/config.json and dir/generation_config.json (optional).
int eng_llm_config_load(const char *dir, eng_llm_config *c, err *e);

const char *eng_llm_family_name(eng_llm_family f);

#endif
