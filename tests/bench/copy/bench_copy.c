// bench_copy: a big batch's host copies on one thread against the copy pool
// (server/core/copypool.h), in MB/s, the two shapes of issue 32:
//   gather:  24 ResNet-50 FP32 images (602,112 bytes each), each request's
//            own buffer, into one contiguous staging buffer (pinned on a
//            GPU; here plain memory, touched once before timing, as the
//            plan's staging is);
//   scatter: 34 BERT-base answers (393,216 bytes each) out of one batch
//            output, each into a fresh malloc'd buffer, as pack_reply does
//            (the allocation and its first touch are part of the cost).
// Usage: bench_copy [reps] [max_threads]; prints one line per shape and
// thread count (0: the caller alone, no pool).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/clock.h"
#include "server/core/copypool.h"

enum { GATHER_N = 24, SCATTER_N = 34 };
#define GATHER_BYTES ((size_t)602112)
#define SCATTER_BYTES ((size_t)393216)

typedef struct scatter {
  const uint8_t *src;
  uint8_t *out[SCATTER_N];
} scatter;

static void scatter_one(void *ctx, size_t i) {
  scatter *s = ctx;
  uint8_t *b = malloc(SCATTER_BYTES);
  memcpy(b, s->src + i * SCATTER_BYTES, SCATTER_BYTES);
  s->out[i] = b;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50;
  int max_threads = argc > 2 ? atoi(argv[2]) : 4;
  if (reps < 1) reps = 1;
  uint8_t *reqs[GATHER_N];
  for (int i = 0; i < GATHER_N; i++) {
    reqs[i] = malloc(GATHER_BYTES);
    memset(reqs[i], i + 1, GATHER_BYTES);
  }
  uint8_t *stage = malloc(GATHER_N * GATHER_BYTES);
  memset(stage, 0, GATHER_N * GATHER_BYTES);
  uint8_t *batch_out = malloc(SCATTER_N * SCATTER_BYTES);
  memset(batch_out, 7, SCATTER_N * SCATTER_BYTES);
  uint64_t *ns = calloc((size_t)reps, sizeof *ns);
  printf("%-8s %8s %12s %10s\n", "shape", "threads", "median_us", "MB/s");
  for (int th = 0; th <= max_threads; th++) {
    srv_copypool *p = NULL;
    err e = {0};
    if (th > 0 && srv_copypool_create(th, 0, &p, &e) != 0) {
      fprintf(stderr, "%s\n", e.msg);
      return 1;
    }
    srv_copy_seg segs[GATHER_N];
    for (int r = 0; r < reps; r++) {
      memset(segs, 0, sizeof segs);
      for (int i = 0; i < GATHER_N; i++) {
        segs[i].dst = stage + (size_t)i * GATHER_BYTES;
        segs[i].src = reqs[i];
        segs[i].n = GATHER_BYTES;
      }
      uint64_t t = clock_mono_ns();
      srv_copypool_copy(p, segs, GATHER_N);
      ns[r] = clock_mono_ns() - t;
    }
    qsort(ns, (size_t)reps, sizeof *ns, cmp_u64);
    double med = (double)ns[reps / 2];
    printf("%-8s %8d %12.0f %10.0f\n", "gather", th, med / 1e3, GATHER_N * GATHER_BYTES / (med / 1e9) / 1e6);
    for (int r = 0; r < reps; r++) {
      scatter s = {.src = batch_out};
      uint64_t t = clock_mono_ns();
      srv_copypool_for(p, SCATTER_N, scatter_one, &s);
      ns[r] = clock_mono_ns() - t;
      for (int i = 0; i < SCATTER_N; i++) free(s.out[i]);
    }
    qsort(ns, (size_t)reps, sizeof *ns, cmp_u64);
    med = (double)ns[reps / 2];
    printf("%-8s %8d %12.0f %10.0f\n", "scatter", th, med / 1e3, SCATTER_N * SCATTER_BYTES / (med / 1e9) / 1e6);
    srv_copypool_destroy(p);
  }
  if (stage[GATHER_BYTES] != 2) return 1;  // the copies happened
  for (int i = 0; i < GATHER_N; i++) free(reqs[i]);
  free(stage);
  free(batch_out);
  free(ns);
  return 0;
}
