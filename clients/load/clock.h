// clock.h: the one clock inferd-load measures with (CLOCK_MONOTONIC, ns).
#ifndef INFERD_CLIENTS_LOAD_CLOCK_H
#define INFERD_CLIENTS_LOAD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t ld_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
