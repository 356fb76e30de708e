// rng.c: splitmix64 (Steele, Lea, Flood 2014), good enough for load shaping.
#include "clients/load/rng.h"

#include <math.h>

uint64_t ld_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double ld_rng_uniform(uint64_t *s) {
  return (double)(ld_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

double ld_rng_exp(uint64_t *s, double mean) {
  // 1 - u is in (0, 1], so the log is finite.
  return -mean * log(1.0 - ld_rng_uniform(s));
}
