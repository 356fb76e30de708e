// bench_batcher: the batcher's own cost per request, enqueue to dispatch,
// on a synthetic load of a million requests (issue 3's benchmark; not a
// test). The clock is simulated (200k requests/s arriving, each batch
// "executing" for a fixed time), so only the batcher's work is timed.
//
//   bench_batcher [n_requests]
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "batcher/batcher.h"

typedef struct sim {
  int64_t now;
} sim;

static int64_t sim_now(void *ctx) { return ((sim *)ctx)->now; }

static double wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef struct scenario {
  const char *name;
  int dynamic, max_batch, n_pref, prefs[4], executors, levels;
  int64_t delay_us, timeout_us;
} scenario;

static void run(const scenario *sc, size_t n) {
  sim clk = {0};
  bat_level_policy lp = {1, {BAT_TIMEOUT_DELAY, sc->timeout_us, 1, 0}};
  bat_config c = {.max_batch_size = sc->max_batch, .n_executors = sc->executors, .dynamic = sc->dynamic,
                  .preferred_batch_sizes = sc->prefs, .n_preferred = (size_t)sc->n_pref,
                  .max_queue_delay_us = sc->delay_us, .priority_levels = (uint32_t)sc->levels,
                  .default_priority_level = sc->levels ? (uint32_t)sc->levels : 0,
                  .default_policy = {BAT_TIMEOUT_REJECT, sc->timeout_us, 1, 0},
                  .level_policies = sc->levels ? &lp : NULL, .n_level_policies = sc->levels ? 1 : 0,
                  .now = sim_now, .clock_ctx = &clk};
  bat_batcher *b;
  err e;
  if (bat_create(&c, &b, &e)) {
    fprintf(stderr, "bat_create: %s\n", e.msg);
    exit(1);
  }
  bat_item *items = calloc(n, sizeof *items);
  int64_t *busy_until = calloc((size_t)sc->executors, sizeof *busy_until);
  if (!items || !busy_until) exit(1);
  const int64_t gap_ns = 5000;      // 200k requests/s
  const int64_t exec_us = 150;      // a batch's simulated execution
  size_t next = 0, dispatched = 0, dropped = 0, batches = 0;
  int64_t t_ns = 0;
  double t0 = wall_ns();
  while (dispatched + dropped < n) {
    clk.now = t_ns / 1000;
    for (int i = 0; i < sc->executors; i++)
      if (busy_until[i] && busy_until[i] <= clk.now) {
        busy_until[i] = 0;
        bat_release_executor(b, i);
      }
    if (next < n) {
      bat_item *it = &items[next];
      it->rows = 1;
      it->deadline_us = INT64_MAX;
      it->priority = sc->levels ? (uint32_t)(next % 2 + 1) : 0;
      if (bat_enqueue(b, it, &e) == 0) next++;
    }
    bat_batch bt;
    while (bat_next_batch(b, &bt)) {
      dispatched += bt.n_items;
      batches++;
      busy_until[bt.executor] = clk.now + exec_us;
    }
    for (bat_item *d = bat_take_dropped(b); d; d = d->next) dropped++;
    t_ns += gap_ns;
  }
  double el = wall_ns() - t0;
  printf("%-44s %8zu requests %7zu batches (mean %5.1f) %5zu dropped  %6.1f ns/request\n", sc->name, n, batches,
         (double)dispatched / (double)(batches ? batches : 1), dropped, el / (double)n);
  bat_destroy(b);
  free(items);
  free(busy_until);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1000000;
  const scenario scs[] = {
      {"no dynamic batching, 4 executors", 0, 64, 0, {0}, 4, 0, 0, 0},
      {"dynamic, max 64, delay 500us, 4 executors", 1, 64, 0, {0}, 4, 0, 500, 0},
      {"dynamic, preferred [8,32], delay 500us", 1, 64, 2, {8, 32}, 4, 0, 500, 0},
      {"dynamic, preferred [32], 2 priorities, timeouts", 1, 64, 1, {32}, 4, 2, 500, 100000},
  };
  for (size_t i = 0; i < sizeof scs / sizeof scs[0]; i++) run(&scs[i], n);
  return 0;
}
