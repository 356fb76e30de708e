// engine/llm/llm_model.h: a decoder checkpoint loaded for the CPU: its
// config (llm_config.h) and every weight the family needs, checked by name,
// shape and dtype against the config (every wrong tensor named at once,
// missing and unexpected ones too) and converted to FP32 in the layout the
// step computes with (Q, K and V fused into one matrix, gate and up into
// one, GPT-2's Conv1D weights transposed to [out, in]).
#ifndef INFERD_ENGINE_LLM_LLM_MODEL_H
#define INFERD_ENGINE_LLM_LLM_MODEL_H

#include <stddef.h>

#include "engine/llm/llm_config.h"
#include "kernels/base/err.h"

typedef struct eng_llm_model eng_llm_model;

// Loads the checkpoint in dir (config.json, generation_config.json,
// model.safetensors or its sharded index). INVALID_ARGUMENT listing every
// wrong tensor or config value; UNIMPLEMENTED for an architecture or
// feature this runtime lacks; NOT_FOUND without config.json or weights.
int eng_llm_model_create(const char *dir, eng_llm_model **out, err *e);
void eng_llm_model_destroy(eng_llm_model *m);

const eng_llm_config *eng_llm_model_config(const eng_llm_model *m);
// FP32 bytes the weights take in memory.
size_t eng_llm_model_weight_bytes(const eng_llm_model *m);

#endif
