// rng.h: a small seeded generator (splitmix64) for input data and Poisson
// arrivals: reproducible across runs and platforms, one state per thread.
#ifndef INFERD_CLIENTS_LOAD_RNG_H
#define INFERD_CLIENTS_LOAD_RNG_H

#include <stdint.h>

uint64_t ld_rng_next(uint64_t *state);
// Uniform in [0, 1).
double ld_rng_uniform(uint64_t *state);
// Exponentially distributed with the given mean (inter-arrival of a Poisson process).
double ld_rng_exp(uint64_t *state, double mean);

#endif
