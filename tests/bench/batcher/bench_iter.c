// bench_iter: the iteration scheduler's own cost per step (bat_iter_plan +
// bat_iter_complete over batcher/kvblocks.c), at serving sizes (issue 35;
// not a test). Every request is queued at once: 512-token prompts whose
// first 128 tokens are one shared system prompt, 256 output tokens each;
// the "model" samples a random token, so only the scheduler's work is timed.
// A GPU decode step of a 1B model takes milliseconds: the scheduler should
// stay in the tens of microseconds.
//
//   bench_iter [n_requests]
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "batcher/iter.h"

static int64_t no_clock(void *ctx) {
  (void)ctx;
  return 0;
}

static double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct scenario {
  const char *name;
  int max_seqs;
  int32_t n_blocks;
  int64_t budget;
} scenario;

static void run(const scenario *sc, int n_req) {
  err e;
  bat_kv_pool *pool;
  bat_kv_config kc = {.n_blocks = sc->n_blocks, .block_tokens = 16, .prefix_caching = 1};
  if (bat_kv_create(&kc, &pool, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    exit(1);
  }
  bat_iter_config c = {
      .max_num_seqs = sc->max_seqs, .max_num_batched_tokens = sc->budget, .pool = pool, .now = no_clock};
  bat_iter *s;
  if (bat_iter_create(&c, &s, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    exit(1);
  }
  bat_iter_seq *q = calloc((size_t)n_req, sizeof *q);
  int32_t *prompts = malloc((size_t)n_req * 512 * sizeof *prompts);
  srand(1);
  for (int i = 0; i < n_req; i++) {
    int32_t *p = prompts + (size_t)i * 512;
    for (int k = 0; k < 512; k++) p[k] = k < 128 ? k : rand() % 32000;
    q[i] = (bat_iter_seq){.prompt = p, .prompt_len = 512, .max_tokens = 256, .deadline_us = INT64_MAX};
    if (bat_iter_enqueue(s, &q[i], &e)) {
      fprintf(stderr, "%s\n", e.msg);
      exit(1);
    }
  }
  int32_t *tok = calloc((size_t)sc->max_seqs, sizeof *tok);
  size_t cap = 1 << 16, steps = 0, decode_only = 0;
  double *lat = malloc(cap * sizeof *lat), total = 0;
  bat_iter_step st;
  for (;;) {
    double t0 = wall_us();
    size_t n = bat_iter_plan(s, &st);
    if (!n) break;
    for (size_t i = 0; i < n; i++) tok[i] = rand() % 32000;
    bat_iter_complete(s, tok, NULL, &e);
    double dt = wall_us() - t0;
    for (bat_iter_seq *f = bat_iter_take_finished(s); f;) {
      bat_iter_seq *nx = f->next;
      bat_iter_seq_close(f);
      f = nx;
    }
    if (steps < cap) lat[steps] = dt;
    total += dt;
    steps++;
    decode_only += st.n_decode == n;
  }
  size_t nl = steps < cap ? steps : cap;
  qsort(lat, nl, sizeof *lat, cmp_double);
  bat_iter_stats x;
  bat_iter_stats_get(s, &x);
  printf("| %s | %zu (%zu decode only) | %.1f | %.1f | %.1f | %llu | %llu |\n", sc->name, steps, decode_only,
         total / (double)steps, lat[nl / 2], lat[nl * 99 / 100], (unsigned long long)x.preempted_total,
         (unsigned long long)x.prefix_hit_tokens);
  free(lat);
  free(tok);
  free(prompts);
  free(q);
  bat_iter_destroy(s);
  bat_kv_destroy(pool);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2048;
  static const scenario sc[] = {
      {"256 seqs, 16384 blocks (pool holds them all)", 256, 16384, 8192},
      {"256 seqs, 8192 blocks (preemption)", 256, 8192, 8192},
      {"64 seqs, 4096 blocks", 64, 4096, 2048},
  };
  printf("%d requests of 512 + 256 tokens, blocks of 16, prefix caching on\n\n", n);
  printf(
      "| scenario | steps | mean us/step | p50 | p99 | preemptions | prefix-hit tokens "
      "|\n|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) run(&sc[i], n);
  return 0;
}
