// server/core/copypool.c: the copy threads (copypool.h). Jobs wait in a
// FIFO under one mutex; a helper takes the next index of the job at the
// head, a job leaves the FIFO once its last index is taken, and its caller
// (who took indices of its own job meanwhile) waits until the last one it
// did not run has returned. The job lives on the caller's stack: no helper
// touches it after counting its index done under the mutex, and the caller
// returns only after seeing that count.
#include "server/core/copypool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sec/shmguard.h"

typedef struct job {
  struct job *next;
  srv_copypool_fn fn;
  void *ctx;
  size_t n;
  size_t taken;  // indices handed out (under mu)
  size_t done;   // indices whose call returned (under mu)
} job;

struct srv_copypool {
  pthread_mutex_t mu;
  pthread_cond_t work;  // a job was queued, or stop
  pthread_cond_t done;  // some job's last index returned
  job *head, *tail;     // jobs with indices left to take
  int stop;
  size_t min_bytes;
  int n_threads, started;
  pthread_t *th;
};

// --- under mu

// Takes j off the queue (few jobs wait at once: a walk is short).
static void unqueue(srv_copypool *p, job *j) {
  job **at = &p->head, *prev = NULL;
  while (*at && *at != j) prev = *at, at = &(*at)->next;
  if (!*at) return;
  *at = j->next;
  if (p->tail == j) p->tail = prev;
}

// The next index of j, or n when none is left. j leaves the queue with its
// last index, so a job in the queue always has one to give.
static size_t take(srv_copypool *p, job *j) {
  if (j->taken == j->n) return j->n;
  size_t i = j->taken++;
  if (j->taken == j->n) unqueue(p, j);
  return i;
}

static void finish_one(srv_copypool *p, job *j) {
  if (++j->done == j->n) pthread_cond_broadcast(&p->done);
}

// --- helpers

static void *helper_main(void *arg) {
  srv_copypool *p = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-copy");
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->head && !p->stop) pthread_cond_wait(&p->work, &p->mu);
    if (!p->head) break;  // stopping with nothing queued
    job *j = p->head;
    size_t i = take(p, j);
    pthread_mutex_unlock(&p->mu);
    j->fn(j->ctx, i);
    pthread_mutex_lock(&p->mu);
    finish_one(p, j);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

// --- the API

int srv_copypool_create(int n_threads, size_t min_bytes, srv_copypool **out, err *e) {
  if (n_threads < 1) return err_set(e, ERR_INVALID_ARGUMENT, "a copy pool needs a thread at least");
  srv_copypool *p = calloc(1, sizeof *p);
  if (!p || !(p->th = calloc((size_t)n_threads, sizeof *p->th))) {
    free(p);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  p->min_bytes = min_bytes;
  p->n_threads = n_threads;
  for (; p->started < n_threads; p->started++)
    if (pthread_create(&p->th[p->started], NULL, helper_main, p) != 0) {
      int which = p->started + 1;  // read before the pool is freed
      srv_copypool_destroy(p);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start copy thread %d of %d", which, n_threads);
    }
  *out = p;
  return 0;
}

void srv_copypool_destroy(srv_copypool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->th[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  free(p->th);
  free(p);
}

int srv_copypool_threads(const srv_copypool *p) { return p ? p->n_threads : 0; }

size_t srv_copypool_min_bytes(const srv_copypool *p) { return p ? p->min_bytes : SIZE_MAX; }

void srv_copypool_for(srv_copypool *p, size_t n, srv_copypool_fn fn, void *ctx) {
  if (!p || n < 2) {
    for (size_t i = 0; i < n; i++) fn(ctx, i);
    return;
  }
  job j = {.fn = fn, .ctx = ctx, .n = n};
  pthread_mutex_lock(&p->mu);
  if (p->tail) p->tail->next = &j;
  else p->head = &j;
  p->tail = &j;
  // as many helpers as there are indices for, less the caller's
  if (n - 1 >= (size_t)p->n_threads) pthread_cond_broadcast(&p->work);
  else
    for (size_t k = 0; k < n - 1; k++) pthread_cond_signal(&p->work);
  for (;;) {
    size_t i = take(p, &j);
    if (i == n) break;
    pthread_mutex_unlock(&p->mu);
    fn(ctx, i);
    pthread_mutex_lock(&p->mu);
    finish_one(p, &j);
  }
  // j left the queue with its last index (take): only helpers' calls remain
  while (j.done < n) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

// --- copy lists

static size_t boundary(size_t total, size_t parts, size_t k) {
  if (k == 0) return 0;
  if (k >= parts) return total;
  // total <= 2^40 in practice (request limits) and parts small: no overflow
  size_t b = (size_t)((unsigned __int128)total * k / parts);
  return b & ~(size_t)63;
}

void srv_copy_piece(srv_copy_seg *segs, size_t n_segs, size_t total, size_t parts, size_t k, srv_copy_span_fn span,
                    void *ctx) {
  if (parts == 0 || k >= parts) return;
  size_t lo = boundary(total, parts, k), hi = boundary(total, parts, k + 1);
  size_t at = 0;  // the running offset of segment s's first byte
  for (size_t s = 0; s < n_segs && at < hi; s++) {
    size_t a = at, b = at + segs[s].n;
    at = b;
    if (b <= lo) continue;
    size_t from = a > lo ? a : lo, to = b < hi ? b : hi;
    if (to > from) span(ctx, &segs[s], from - a, to - from);
  }
}

size_t srv_copy_parts(const srv_copypool *p, size_t total) {
  if (!p || total < p->min_bytes) return 1;
  size_t parts = (size_t)p->n_threads + 1;
  size_t most = total / SRV_COPY_PIECE_MIN;
  if (parts > most) parts = most;
  return parts ? parts : 1;
}

static void copy_span(void *ctx, srv_copy_seg *seg, size_t offset, size_t bytes) {
  (void)ctx;
  uint8_t *dst = (uint8_t *)seg->dst + offset;
  const uint8_t *src = (const uint8_t *)seg->src + offset;
  if (!seg->guarded) memcpy(dst, src, bytes);
  else if (srv_shmguard_read(dst, src, bytes) != 0) atomic_store_explicit(&seg->faulted, 1, memory_order_relaxed);
}

typedef struct split {
  srv_copy_seg *segs;
  size_t n_segs, total, parts;
} split;

static void run_piece(void *ctx, size_t k) {
  split *s = ctx;
  srv_copy_piece(s->segs, s->n_segs, s->total, s->parts, k, copy_span, NULL);
}

void srv_copypool_copy(srv_copypool *p, srv_copy_seg *segs, size_t n_segs) {
  size_t total = 0;
  for (size_t i = 0; i < n_segs; i++) total += segs[i].n;
  size_t parts = srv_copy_parts(p, total);
  if (parts < 2) {
    for (size_t i = 0; i < n_segs; i++)
      if (segs[i].n) copy_span(NULL, &segs[i], 0, segs[i].n);
    return;
  }
  split s = {.segs = segs, .n_segs = n_segs, .total = total, .parts = parts};
  srv_copypool_for(p, parts, run_piece, &s);
}
