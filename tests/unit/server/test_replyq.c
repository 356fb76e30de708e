// Tests server/core/replyq.c: items posted from several threads at once each run
// exactly once, on the queue's threads (never the poster's); destroy runs
// what is still queued before it returns; a NULL queue and bad sizes are
// refused. Run under ThreadSanitizer by tests/run.sh.
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"
#include "server/core/replyq.h"

enum { POSTERS = 4, PER_POSTER = 2000 };

typedef struct item {
  srv_replyq_item it;  // first: the queue's
  atomic_int *runs;    // this item's run count
  pthread_t poster;
  atomic_int *on_poster;  // items that ran on their poster's thread
} item;

static void run_item(srv_replyq_item *it) {
  item *x = (item *)it;
  atomic_fetch_add(x->runs, 1);
  if (pthread_equal(pthread_self(), x->poster)) atomic_fetch_add(x->on_poster, 1);
  free(x);
}

typedef struct poster {
  srv_replyq *q;
  atomic_int *runs;  // PER_POSTER counters
  atomic_int *on_poster;
  int refused;
} poster;

static void *post_all(void *arg) {
  poster *p = arg;
  for (int i = 0; i < PER_POSTER; i++) {
    item *x = malloc(sizeof *x);
    x->it.fn = run_item;
    x->runs = &p->runs[i];
    x->poster = pthread_self();
    x->on_poster = p->on_poster;
    if (srv_replyq_post(p->q, &x->it) != 0) {
      p->refused++;
      run_item(&x->it);  // what a caller does when refused
    }
  }
  return NULL;
}

static void test_many_posters(int threads) {
  err e = {0};
  srv_replyq *q = NULL;
  CHECK_EQ_INT(srv_replyq_create(threads, &q, &e), 0);
  CHECK_EQ_INT(srv_replyq_threads(q), threads);
  static atomic_int runs[POSTERS][PER_POSTER];
  atomic_int on_poster = 0;
  for (int p = 0; p < POSTERS; p++)
    for (int i = 0; i < PER_POSTER; i++) atomic_store(&runs[p][i], 0);
  poster ps[POSTERS];
  pthread_t th[POSTERS];
  for (int p = 0; p < POSTERS; p++) {
    ps[p] = (poster){.q = q, .runs = runs[p], .on_poster = &on_poster};
    CHECK(pthread_create(&th[p], NULL, post_all, &ps[p]) == 0);
  }
  for (int p = 0; p < POSTERS; p++) pthread_join(th[p], NULL);
  srv_replyq_destroy(q);  // runs whatever is still queued
  int once = 0, refused = 0;
  for (int p = 0; p < POSTERS; p++) {
    refused += ps[p].refused;
    for (int i = 0; i < PER_POSTER; i++) once += atomic_load(&runs[p][i]) == 1;
  }
  CHECK_EQ_INT(once, POSTERS * PER_POSTER);
  CHECK_EQ_INT(refused, 0);
  CHECK_EQ_INT(atomic_load(&on_poster), 0);
}

static void test_refusals(void) {
  err e = {0};
  srv_replyq *q = NULL;
  CHECK_EQ_INT(srv_replyq_create(0, &q, &e), ERR_INVALID_ARGUMENT);
  CHECK(q == NULL);
  CHECK_CONTAINS(e.msg, "0 threads");
  srv_replyq_item it = {.fn = NULL};
  CHECK_EQ_INT(srv_replyq_post(NULL, &it), -1);  // the caller runs it itself
  CHECK_EQ_INT(srv_replyq_threads(NULL), 0);
  srv_replyq_destroy(NULL);
}

int main(void) {
  test_refusals();
  test_many_posters(1);
  test_many_posters(3);
  CHECK_DONE();
}
