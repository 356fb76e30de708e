// engine/warmup.h: Triton's model_warmup: before a model version is declared
// ready, each config warmup entry runs `count` times (at least once) on
// every instance, with zero, random or file data, so the first real request
// does not pay for lazy work (CUDA graph capture of a new shape, page faults
// in arenas, cuBLASLt heuristics). A warmup that cannot run fails the load,
// as in Triton.
#ifndef INFERD_ENGINE_WARMUP_H
#define INFERD_ENGINE_WARMUP_H

#include <stdint.h>

#include "engine/model.h"
#include "engine/repo/model_config.h"
#include "kernels/base/confine.h"
#include "kernels/base/err.h"

// model_dir holds the "warmup" folder that input_data_file names resolve in;
// links met on the way may lead out of it only into roots
// (kernels/base/confine.h): pass NULL when the entries came from a load
// request's config override (a network client's names).
// On success *runs is the number of executions done (entries x count x
// instances). Errors name the entry and the input.
// The most runs one entry may ask for: caches, allocators, cuBLASLt and cuDNN
// choices settle within the first few; a count of millions only keeps the
// server unready (a load error names the entry).
#define ENG_WARMUP_MAX_COUNT 1000
// The default of the most input bytes one entry may feed in all (one run's
// inputs x count x instances; inferd --model-warmup-max-mib): 1 GiB, e.g.
// ResNet-50 at batch 128 (77 MB) 13 times on one instance. Past it a load
// only keeps the server unready for minutes (a config override can ask for
// it over the network), where a few runs warm everything there is to warm.
#define ENG_WARMUP_MAX_BYTES (1ull << 30)

// max_bytes: the most input bytes one entry may feed in all (0: ENG_WARMUP_MAX_BYTES).
int eng_warmup_run(eng_model *m, const eng_model_config *cfg, const char *model_dir, const eng_confine_roots *roots,
                   uint64_t max_bytes, uint64_t *runs, err *e);

#endif
