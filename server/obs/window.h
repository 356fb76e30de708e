// server/obs/window.h: a sliding-window rate (events or amounts per second over
// the last few whole seconds), for the throughput and GPU-busy gauges. Adds
// come from completion threads, reads from the loop thread; one small mutex,
// taken once per batch, keeps second boundaries exact.
#ifndef INFERD_SERVER_WINDOW_H
#define INFERD_SERVER_WINDOW_H

#include <pthread.h>
#include <stdint.h>

#define PROF_WINDOW_SLOTS 16  // seconds kept; a rate looks back at most SLOTS - 1

typedef struct prof_window {
  pthread_mutex_t mu;
  int64_t sec[PROF_WINDOW_SLOTS];  // the second each slot counts, -1: empty
  double val[PROF_WINDOW_SLOTS];
} prof_window;

void prof_window_init(prof_window *w);
void prof_window_destroy(prof_window *w);
// Adds v to the second that contains now_us (CLOCK_MONOTONIC microseconds).
void prof_window_add(prof_window *w, int64_t now_us, double v);
// Sum over the `seconds` whole seconds before the current one, divided by
// seconds (1 .. PROF_WINDOW_SLOTS - 1): a per-second rate.
double prof_window_rate(prof_window *w, int64_t now_us, int seconds);

#endif
