// bench_hist: what one prof_hist_record costs (issue 5's budget: under
// 100 ns), alone and with threads recording into the same histogram at
// once, with the default 4 stripes and with 1; plus what a snapshot and
// three percentiles cost on the read side. Values are
// drawn beforehand (log-uniform 1 us .. 60 s) so only recording is timed.
// Not a test.
//
//   bench_hist [records_per_thread]
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "server/obs/hist.h"

#define N_VALUES (1 << 16)  // fits in L2 next to the histogram

static double clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double wall_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct job {
  prof_hist *h;
  const int64_t *values;
  size_t n;
  pthread_barrier_t *start;
  double ns, cpu_ns;  // wall, and this thread's CPU time (the VM is shared)
} job;

static void *run(void *arg) {
  job *j = arg;
  pthread_barrier_wait(j->start);
  double t0 = wall_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (size_t i = 0; i < j->n; i++) prof_hist_record(j->h, j->values[i & (N_VALUES - 1)]);
  j->ns = wall_ns() - t0;
  j->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  return NULL;
}

static prof_hist *make(int stripes) {
  prof_hist *h;
  err e;
  prof_hist_config c = PROF_HIST_LATENCY_US;
  c.stripes = stripes;
  if (prof_hist_create(&c, &h, &e)) {
    fprintf(stderr, "prof_hist_create: %s\n", e.msg);
    exit(1);
  }
  return h;
}

// threads record n each, into one shared histogram or one each.
static void scenario(const char *name, int threads, int shared, int stripes, const int64_t *values, size_t n) {
  prof_hist *h[4];
  job j[4];
  pthread_t t[4];
  pthread_barrier_t start;
  if (pthread_barrier_init(&start, NULL, (unsigned)threads)) exit(1);
  for (int i = 0; i < threads; i++) {
    h[i] = shared && i ? h[0] : make(stripes);
    j[i] = (job){h[i], values, n, &start, 0, 0};
    if (pthread_create(&t[i], NULL, run, &j[i])) exit(1);
  }
  double worst = 0, cpu = 0;
  for (int i = 0; i < threads; i++) {
    if (pthread_join(t[i], NULL)) exit(1);
    if (j[i].ns > worst) worst = j[i].ns;
    cpu += j[i].cpu_ns;
  }
  printf("%-46s wall %5.1f ns/record/thread, CPU %5.1f ns/record\n", name, worst / (double)n,
         cpu / (double)n / threads);
  for (int i = 0; i < threads; i++)
    if (!shared || i == 0) prof_hist_destroy(h[i]);
  pthread_barrier_destroy(&start);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000;
  int64_t *logu = malloc(N_VALUES * sizeof *logu), *same = malloc(N_VALUES * sizeof *same);
  if (!logu || !same) return 1;
  uint64_t rng = 1;
  for (size_t i = 0; i < N_VALUES; i++) {
    double u = (double)(splitmix(&rng) >> 11) * (1.0 / 9007199254740992.0);
    logu[i] = (int64_t)exp(u * log(60e6));
    same[i] = 1234;
  }
  scenario("1 thread, log-uniform values", 1, 1, 4, logu, n);
  scenario("1 thread, one value", 1, 1, 4, same, n);
  scenario("1 thread, one value, 1 stripe", 1, 1, 1, same, n);
  scenario("2 threads, shared, log-uniform", 2, 1, 4, logu, n);
  scenario("2 threads, shared, one value", 2, 1, 4, same, n);
  scenario("2 threads, shared, log-uniform, 1 stripe", 2, 1, 1, logu, n);
  scenario("2 threads, shared, one value, 1 stripe", 2, 1, 1, same, n);
  scenario("2 threads, a histogram each", 2, 0, 1, logu, n);

  // Read side: a snapshot, then p50/p99/p99.9 and the summary.
  prof_hist *h = make(4);
  for (size_t i = 0; i < N_VALUES; i++) prof_hist_record(h, logu[i]);
  prof_hist_snap *s;
  if (prof_hist_snap_create(h, &s, NULL)) return 1;
  const int reps = 2000;
  double t0 = wall_ns();
  uint64_t acc = 0;
  for (int i = 0; i < reps; i++) {
    if (prof_hist_snapshot(h, s, NULL)) return 1;
    acc += prof_hist_percentile(s, 50) + prof_hist_percentile(s, 99) + prof_hist_percentile(s, 99.9);
  }
  printf("%-48s %6.1f us (checksum %llu)\n", "snapshot + 3 percentiles", (wall_ns() - t0) / reps / 1000,
         (unsigned long long)acc);
  prof_hist_snap_destroy(s);
  prof_hist_destroy(h);
  free(logu);
  free(same);
  return 0;
}
