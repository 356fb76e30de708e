// gen_dist.h: generate mode's workload pieces that need no server: length
// distributions (fixed, uniform, normal, lognormal; bounded, seeded), random
// prompts as token ids within a vocabulary or as words, and the per-request
// seed that makes request i the same whatever thread builds it.
#ifndef INFERD_CLIENTS_LOAD_GEN_DIST_H
#define INFERD_CLIENTS_LOAD_GEN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef enum ld_len_kind { LD_LEN_FIXED = 0, LD_LEN_UNIFORM, LD_LEN_NORMAL, LD_LEN_LOGNORMAL } ld_len_kind;

#define LD_LEN_MAX 1000000  // tokens: a bound no prompt or output of a benchmark reaches

// A length distribution over whole numbers in [lo, hi].
// fixed: a; uniform: integers a..b; normal: mean a, standard deviation b;
// lognormal: the lengths' own mean a and standard deviation b (so "lognormal:200:100"
// centres where "normal:200:100" does, with a long right tail). Draws outside
// [lo, hi] are drawn again (up to 64 times), then clamped.
typedef struct ld_len_dist {
  ld_len_kind kind;
  double a, b;
  int64_t lo, hi;
} ld_len_dist;

// "N" or "fixed:N", "uniform:LO:HI", "normal:MEAN:SD[:LO:HI]",
// "lognormal:MEAN:SD[:LO:HI]" (bounds default to 1 and LD_LEN_MAX).
int ld_len_parse(const char *s, ld_len_dist *d, err *e);
// The spec back as text (for the report), e.g. "normal:64:16:1:128".
void ld_len_str(const ld_len_dist *d, char *buf, size_t cap);
int64_t ld_len_draw(const ld_len_dist *d, uint64_t *rng);

// A standard normal draw (Box-Muller on ld_rng_uniform).
double ld_rng_normal(uint64_t *rng);

// The RNG state of request i of a run seeded with seed, and of its arrival
// gap: independent streams so that lengths do not depend on the arrival mode.
uint64_t ld_gen_req_seed(uint64_t seed, uint64_t i, uint64_t stream);

// n token ids uniform in [0, vocab).
void ld_gen_ids(int32_t *out, int64_t n, int64_t vocab, uint64_t *rng);
// n words drawn from a fixed list of common English words (each about one
// token for BPE tokenizers), separated by spaces; malloc'ed, NULL when out of memory.
char *ld_gen_words(int64_t n, uint64_t *rng);

#endif
