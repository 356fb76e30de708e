// engine/llm/llm_internal.h: the loaded model's weights, shared by the
// loader (llm_model.c) and the step (llm_step.c) of this folder only.
#ifndef INFERD_ENGINE_LLM_LLM_INTERNAL_H
#define INFERD_ENGINE_LLM_LLM_INTERNAL_H

#include "engine/llm/llm_config.h"
#include "engine/llm/llm_model.h"

// One layer, FP32, every matrix [out, in] row-major; NULL where the family
// has no such tensor (biases, LayerNorm's bias).
typedef struct eng_llm_layer {
  float *ln1_w, *ln1_b;
  float *wqkv, *bqkv;  // [(n_heads + 2 n_kv_heads) head_dim, hidden]: Q, then K, then V
  float *wo, *bo;      // [hidden, n_heads head_dim]
  float *ln2_w, *ln2_b;
  float *w_up, *b_up;      // gated: [2 intermediate, hidden] gate then up; else fc [intermediate, hidden]
  float *w_down, *b_down;  // [hidden, intermediate]
} eng_llm_layer;

struct eng_llm_model {
  eng_llm_config cfg;
  float *embed;      // [vocab, hidden]
  float *pos_embed;  // [max_pos, hidden] (learned positions) or NULL
  float *norm_w, *norm_b;
  float *lm_head;   // [vocab, hidden]; == embed when tied
  float *inv_freq;  // [head_dim / 2] (RoPE) or NULL
  eng_llm_layer *layers;
  size_t weight_bytes;
};

#endif
