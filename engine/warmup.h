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

#include <stdatomic.h>

// The most runs one entry may ask for: caches, allocators, cuBLASLt and cuDNN
// choices settle within the first few; a count of millions only keeps the
// server unready (a load error names the entry).
#define ENG_WARMUP_MAX_COUNT 1000
// The default of the most input bytes one load's warmup may feed in all (every
// entry's inputs x count x instances, summed; inferd --model-warmup-max-mib):
// 1 GiB, e.g. ResNet-50 at batch 128 (77 MB) 13 times on one instance. Past
// it a load only keeps the model unready for minutes (a config override can
// ask for it over the network), where a few runs warm everything there is to
// warm. Per load, not per entry: 5,000 entries each under a per-entry budget
// held one load for half an hour (issue 31).
#define ENG_WARMUP_MAX_BYTES (1ull << 30)
// The default of the most executions one load's warmup may run in all (every
// entry's count x instances, summed; inferd --model-warmup-max-runs): a config
// that warms each of 8 batch sizes 4 times on 8 instances (two on each of 4
// GPUs) runs 256; 1,000 leaves room for that and bounds what a config
// override sent over the network can make a load do (5,000 entries of count
// 1,000 on one instance were 5 million runs).
#define ENG_WARMUP_MAX_RUNS 1000

// What one load's warmup may do, and how it is told to stop.
typedef struct eng_warmup_limits {
  uint64_t max_bytes;  // input fed by all entries' runs together (0: ENG_WARMUP_MAX_BYTES)
  uint64_t max_runs;   // executions of all entries together (0: ENG_WARMUP_MAX_RUNS)
  // Read between runs (borrowed, may be NULL): once nonzero the warmup stops
  // before its next run and fails with ERR_UNAVAILABLE "cancelled: server
  // shutting down" (a stop signal must not wait for minutes of warmup).
  const atomic_int *cancel;
} eng_warmup_limits;

// Checks the whole warmup against the limits from the config alone, before
// anything is allocated or run: each entry's count (ENG_WARMUP_MAX_COUNT), the runs (each entry's count, at least 1, x
// n_instances) and the input bytes (each entry's rows x its inputs' dims and
// types, x count x n_instances), summed over the entries without wrapping.
// One error names every limit passed, its figures and its flag.
int eng_warmup_check(const eng_model_config *cfg, int n_instances, const eng_warmup_limits *lim, err *e);

// model_dir holds the "warmup" folder that input_data_file names resolve in;
// links met on the way may lead out of it only into roots
// (kernels/base/confine.h): pass NULL when the entries came from a load
// request's config override (a network client's names).
// Runs eng_warmup_check first. On success *runs is the number of executions
// done (entries x count x instances). Errors name the entry and the input.
int eng_warmup_run(eng_model *m, const eng_model_config *cfg, const char *model_dir, const eng_confine_roots *roots,
                   const eng_warmup_limits *lim, uint64_t *runs, err *e);

#endif
