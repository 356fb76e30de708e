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
#include "kernels/base/dtype.h"
#include "kernels/base/err.h"

typedef struct eng_llm_model eng_llm_model;

// Loads the checkpoint in dir (config.json, generation_config.json,
// model.safetensors or its sharded index). INVALID_ARGUMENT listing every
// wrong tensor or config value; UNIMPLEMENTED for an architecture or
// feature this runtime lacks; NOT_FOUND without config.json or weights.
int eng_llm_model_create(const char *dir, eng_llm_model **out, err *e);
// The same with every weight kept in the checkpoint's own element type
// (that of its embedding matrix: F32, F16 or BF16; a tensor of another of
// these is converted to it), for a runtime that computes in that type (the
// GPU runner, engine/llm/cuda/). The CPU step takes FP32 models only.
int eng_llm_model_create_stored(const char *dir, eng_llm_model **out, err *e);
void eng_llm_model_destroy(eng_llm_model *m);

const eng_llm_config *eng_llm_model_config(const eng_llm_model *m);
// Bytes the weights take in memory (FP32, or the stored type).
size_t eng_llm_model_weight_bytes(const eng_llm_model *m);
// The weights' element type: DT_FP32, or the checkpoint's (_stored).
dtype eng_llm_model_dtype(const eng_llm_model *m);

#endif
