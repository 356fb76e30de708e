// lt_sim.h: a deterministic simulation of a served model for the latency
// target tests: the real batcher (batcher.h) on a fake clock, executors
// whose batch of n rows takes compute(n) = a + b n (times a seeded noise),
// and either open-loop arrivals (Poisson, or bursts: Poisson on/off) or
// closed-loop streams (each sends its next request a round trip after its
// answer, as inferd-load's streams do). Every figure is simulated time:
// nothing here is timed.
#ifndef INFERD_TESTS_BATCHER_LT_SIM_H
#define INFERD_TESTS_BATCHER_LT_SIM_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batcher/batcher.h"

typedef struct sim_model {
  double a_us, b_us;  // compute(n) = a + b n
  double noise;       // each batch's time times a uniform factor in [1 - noise, 1 + noise]
  int max_batch;
  int executors;
  double slow_x;  // from slow_from_us on, every batch takes slow_x times as long (0: never)
  int64_t slow_from_us;
} sim_model;

typedef enum sim_load_kind { SIM_POISSON, SIM_BURSTY, SIM_CLOSED } sim_load_kind;

typedef struct sim_load {
  sim_load_kind kind;
  double rate_per_ms;    // open loop: mean rows per millisecond (bursty: during a burst)
  double on_ms, off_ms;  // bursty: mean lengths of bursts and of the silences between them
  int streams;           // closed loop
  double rtt_us;         // closed loop: answer to next request, times [0.5, 1.5] uniform
  // Poisson with steps: the rate cycles through these, phase_ms each (n_phases 0: rate_per_ms throughout)
  const double *phase_rates;
  int n_phases;
  double phase_ms;
} sim_load;

// The open-loop rate at time t (microseconds).
static double sim_rate_at(const sim_load *ld, int64_t t) {
  if (ld->n_phases <= 0) return ld->rate_per_ms;
  return ld->phase_rates[(int64_t)((double)t / (ld->phase_ms * 1000)) % ld->n_phases];
}

typedef struct sim_policy {
  int64_t target_us;  // > 0: the latency target
  int64_t delay_us;   // Triton's max_queue_delay_microseconds
} sim_policy;

typedef struct sim_result {
  double p50_us, p99_us, mean_us;
  double throughput_per_ms;  // finished requests per millisecond, after the warm-up
  double mean_batch;
  int64_t done;
  bat_lt_stats lt;
} sim_result;

typedef struct sim_req {
  bat_item it;
  int64_t arrival;
  int stream;
} sim_req;

static uint64_t sim_rng_next(uint64_t *s) {  // splitmix64
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double sim_u01(uint64_t *s) {
  return ((double)(sim_rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}
static double sim_exp(uint64_t *s, double mean) {
  return -mean * log(sim_u01(s));
}

static int64_t sim_clock(void *ctx) {
  return *(int64_t *)ctx;
}

static int sim_cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}

// Runs n_req requests (the first tenth is warm-up, left out of the figures).
static int sim_run(const sim_model *m, const sim_load *ld, const sim_policy *pol, int n_req, uint64_t seed,
                   sim_result *out) {
  memset(out, 0, sizeof *out);
  int64_t now = 0;
  bat_config c = {.max_batch_size = m->max_batch,
                  .n_executors = m->executors,
                  .dynamic = 1,
                  .max_queue_delay_us = pol->delay_us,
                  .latency_target_us = pol->target_us,
                  .default_policy = {.timeout_action = BAT_TIMEOUT_REJECT},
                  .now = sim_clock,
                  .clock_ctx = &now};
  bat_batcher *b = NULL;
  err e;
  if (bat_create(&c, &b, &e) != 0) {
    fprintf(stderr, "bat_create: %s\n", e.msg);
    return -1;
  }
  sim_req *reqs = calloc((size_t)n_req, sizeof *reqs);
  int64_t *lat = calloc((size_t)n_req, sizeof *lat);
  int64_t *busy_until = calloc((size_t)m->executors, sizeof *busy_until);
  bat_item **running = calloc((size_t)m->executors, sizeof *running);
  int n_streams = ld->kind == SIM_CLOSED ? ld->streams : 0;
  int64_t *send_at = calloc((size_t)(n_streams ? n_streams : 1), sizeof *send_at);
  uint64_t rng = seed;
  int sent = 0, done = 0, n_lat = 0;
  int warm = n_req / 10;
  int64_t warm_at = -1;
  double rows_sum = 0;
  int64_t batches = 0;
  for (int x = 0; x < m->executors; x++) busy_until[x] = INT64_MAX;
  for (int s = 0; s < n_streams; s++) send_at[s] = (int64_t)(sim_u01(&rng) * ld->rtt_us);
  // open loop: the next arrival, and the bursty source's on/off state
  int on = 1;
  int64_t phase_end = ld->kind == SIM_BURSTY ? (int64_t)sim_exp(&rng, ld->on_ms * 1000) : INT64_MAX;
  int64_t next_arrival = ld->kind == SIM_CLOSED ? INT64_MAX : (int64_t)sim_exp(&rng, 1000.0 / sim_rate_at(ld, 0));
  while (done < n_req) {
    // the next event
    int64_t t = bat_next_wakeup(b);
    for (int x = 0; x < m->executors; x++)
      if (busy_until[x] < t) t = busy_until[x];
    if (sent < n_req) {
      if (next_arrival < t) t = next_arrival;
      for (int s = 0; s < n_streams; s++)
        if (send_at[s] < t) t = send_at[s];
    }
    if (t == INT64_MAX) break;  // nothing can happen: a stuck batcher (the tests count `done`)
    if (t > now) now = t;
    // batches that finish
    for (int x = 0; x < m->executors; x++) {
      if (busy_until[x] > now) continue;
      for (bat_item *it = running[x]; it; it = it->next) {
        sim_req *r = (sim_req *)it;
        if (done >= warm) lat[n_lat++] = now - r->arrival;
        if (++done == warm) warm_at = now;
        if (n_streams) send_at[r->stream] = now + (int64_t)(ld->rtt_us * (0.5 + sim_u01(&rng)));
      }
      running[x] = NULL;
      busy_until[x] = INT64_MAX;
      bat_batch_done(b, x);
    }
    // arrivals
    while (sent < n_req && next_arrival <= now) {
      sim_req *r = &reqs[sent];
      r->it = (bat_item){.rows = 1, .deadline_us = INT64_MAX, .payload = r};
      r->arrival = now;
      if (bat_enqueue(b, &r->it, &e) != 0) break;
      sent++;
      // the next one: a bursty source is silent between bursts
      double gap = sim_exp(&rng, 1000.0 / sim_rate_at(ld, next_arrival));
      int64_t at = next_arrival + (int64_t)gap;
      while (ld->kind == SIM_BURSTY && at >= phase_end) {
        if (on) {
          at = phase_end + (int64_t)sim_exp(&rng, ld->off_ms * 1000);
          phase_end = at;
        }
        on = !on;
        if (on) phase_end = at + (int64_t)sim_exp(&rng, ld->on_ms * 1000);
      }
      next_arrival = at;
    }
    for (int s = 0; s < n_streams && sent < n_req; s++) {
      if (send_at[s] > now) continue;
      sim_req *r = &reqs[sent];
      r->it = (bat_item){.rows = 1, .deadline_us = INT64_MAX, .payload = r};
      r->arrival = now;
      r->stream = s;
      send_at[s] = INT64_MAX;
      if (bat_enqueue(b, &r->it, &e) != 0) break;
      sent++;
    }
    // batches that start
    bat_batch bt;
    while (bat_next_batch(b, &bt)) {
      double f = 1 + m->noise * (2 * sim_u01(&rng) - 1);
      if (m->slow_x > 0 && now >= m->slow_from_us) f *= m->slow_x;
      int64_t took = (int64_t)((m->a_us + m->b_us * (double)bt.rows) * f);
      busy_until[bt.executor] = now + (took > 0 ? took : 1);
      running[bt.executor] = bt.items;
      rows_sum += (double)bt.rows;
      batches++;
    }
  }
  out->done = done;
  if (n_lat > 0) {
    qsort(lat, (size_t)n_lat, sizeof *lat, sim_cmp_i64);
    double sum = 0;
    for (int i = 0; i < n_lat; i++) sum += (double)lat[i];
    out->mean_us = sum / n_lat;
    out->p50_us = (double)lat[n_lat / 2];
    out->p99_us = (double)lat[(size_t)((n_lat - 1) * 0.99)];
    if (now > warm_at && warm_at >= 0) out->throughput_per_ms = (double)n_lat * 1000.0 / (double)(now - warm_at);
  }
  out->mean_batch = batches ? rows_sum / (double)batches : 0;
  bat_latency_stats(b, &out->lt);
  bat_destroy(b);
  free(reqs);
  free(lat);
  free(busy_until);
  free(running);
  free(send_at);
  return 0;
}

#endif
