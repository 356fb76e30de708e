// server/core/replyq.c: see replyq.h. A FIFO of intrusive items under one
// mutex; the threads wait on a condition variable. Posts come from a few
// instance threads at the batch rate (not per request), so one lock is not
// contended enough to matter.
#include "server/core/replyq.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct srv_replyq {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  srv_replyq_item *head, *tail;
  int stopping;
  int n_threads;
  pthread_t *threads;
};

static void *replyq_main(void *arg) {
  srv_replyq *q = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-reply");  // per-thread CPU by name (tests/bench/serve_gpu)
  for (;;) {
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
    srv_replyq_item *it = q->head;
    if (it) {
      q->head = it->next;
      if (!q->head) q->tail = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    if (!it) return NULL;  // stopping and drained
    it->fn(it);
  }
}

int srv_replyq_create(int n_threads, srv_replyq **out, err *e) {
  *out = NULL;
  if (n_threads < 1) return err_set(e, ERR_INVALID_ARGUMENT, "reply queue: %d threads", n_threads);
  srv_replyq *q = calloc(1, sizeof *q);
  if (!q || !(q->threads = calloc((size_t)n_threads, sizeof *q->threads))) {
    free(q);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "reply queue: out of memory");
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  for (int i = 0; i < n_threads; i++) {
    if (pthread_create(&q->threads[i], NULL, replyq_main, q) != 0) {
      srv_replyq_destroy(q);  // joins the ones started
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "reply queue: cannot start thread %d of %d", i + 1, n_threads);
    }
    q->n_threads = i + 1;
  }
  *out = q;
  return 0;
}

int srv_replyq_post(srv_replyq *q, srv_replyq_item *it) {
  if (!q) return -1;
  it->next = NULL;
  pthread_mutex_lock(&q->mu);
  if (q->stopping) {
    pthread_mutex_unlock(&q->mu);
    return -1;
  }
  if (q->tail) q->tail->next = it;
  else q->head = it;
  q->tail = it;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
  return 0;
}

int srv_replyq_threads(const srv_replyq *q) { return q ? q->n_threads : 0; }

void srv_replyq_destroy(srv_replyq *q) {
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->stopping = 1;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  for (int i = 0; i < q->n_threads; i++) pthread_join(q->threads[i], NULL);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q->threads);
  free(q);
}
