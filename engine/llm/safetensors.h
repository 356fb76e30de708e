// engine/llm/safetensors.h: the tensors of a Hugging Face checkpoint folder,
// model.safetensors or the shards model.safetensors.index.json names, each
// file mapped read-only (mmap) and its JSON header checked: known dtype,
// offsets inside the file and matching the shape, no overlaps with the
// header. The data stay in the page cache; nothing is copied here.
#ifndef INFERD_ENGINE_LLM_SAFETENSORS_H
#define INFERD_ENGINE_LLM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/dtype.h"
#include "kernels/base/err.h"

#define ENG_LLM_ST_MAX_DIMS 8

typedef struct eng_llm_tensor {
  char *name;
  dtype dt;          // DT_FP32, DT_FP16, DT_BF16, or another the loader refuses
  char dt_name[16];  // as the file spells it ("BF16", "F8_E4M3")
  int ndim;
  int64_t shape[ENG_LLM_ST_MAX_DIMS];
  const void *data;  // inside the mapping
  size_t nbytes;
  int file;  // which shard
} eng_llm_tensor;

typedef struct eng_llm_st eng_llm_st;

// Opens dir/model.safetensors, or the shards of dir/model.safetensors.index.json
// when that exists. Every tensor of every shard is listed; a tensor the
// index maps to another shard than the one holding it is an error.
int eng_llm_st_open(const char *dir, eng_llm_st **out, err *e);
void eng_llm_st_close(eng_llm_st *s);

size_t eng_llm_st_count(const eng_llm_st *s);
const eng_llm_tensor *eng_llm_st_at(const eng_llm_st *s, size_t i);
// NULL when no tensor has that name.
const eng_llm_tensor *eng_llm_st_find(const eng_llm_st *s, const char *name);
// Files mapped, total bytes.
size_t eng_llm_st_files(const eng_llm_st *s);
size_t eng_llm_st_bytes(const eng_llm_st *s);

// Converts n elements of t (FP32, FP16 or BF16) starting at element off
// into FP32.
void eng_llm_st_to_f32(float *dst, const eng_llm_tensor *t, size_t off, size_t n);
// The same into dt (DT_FP32, DT_FP16 or DT_BF16): t's own bits when dt is
// its type, else converted through float (rounded to nearest even).
void eng_llm_st_convert(void *dst, dtype dt, const eng_llm_tensor *t, size_t off, size_t n);

#endif
