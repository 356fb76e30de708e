// kernels/base/clock.h: the monotonic clock every layer times with (stage
// timestamps, tuner budgets, launch timing, the load generator's latencies),
// in one place so all of them read the same clock in the same units.
#ifndef INFERD_BASE_CLOCK_H
#define INFERD_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

// Nanoseconds of CLOCK_MONOTONIC (never steps back; unrelated to wall time).
static inline uint64_t clock_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
