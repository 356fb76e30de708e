// Tests batcher/batcher.c with a fake clock: FIFO order, one request per
// execution, instance accounting, queue bounds, deadlines and cancellation.
#include <stdint.h>

#include "batcher/batcher.h"
#include "check.h"

typedef struct fake_clock { int64_t now; } fake_clock;
static int64_t fake_now(void *ctx) { return ((fake_clock *)ctx)->now; }

typedef struct req { int id; int cancelled; } req;
static int is_cancelled(void *p) { return ((req *)p)->cancelled; }

static bat_batcher *make(fake_clock *clk, int max_batch, int instances, size_t max_queue) {
  bat_config c = {.max_batch_size = max_batch, .n_instances = instances, .max_queue_size = max_queue,
                  .now = fake_now, .clock_ctx = clk, .cancelled = is_cancelled};
  bat_batcher *b = NULL;
  err e;
  CHECK_EQ_INT(bat_create(&c, &b, &e), 0);
  return b;
}

static void test_fifo_one_per_execution(void) {
  fake_clock clk = {1000};
  bat_batcher *b = make(&clk, 8, 2, 0);
  req r[5];
  bat_item it[5];
  err e;
  for (int i = 0; i < 5; i++) {
    r[i] = (req){i, 0};
    it[i] = (bat_item){.rows = 1 + i, .deadline_us = INT64_MAX, .payload = &r[i]};
    clk.now += 10;
    CHECK_EQ_INT(bat_enqueue(b, &it[i], &e), 0);
    CHECK_EQ_INT(it[i].arrival_us, clk.now);
  }
  CHECK_EQ_INT(bat_queued(b), 5);
  bat_batch bt;
  CHECK_EQ_INT(bat_next_batch(b, &bt), 1);
  CHECK_EQ_INT(((req *)bt.items->payload)->id, 0);
  CHECK_EQ_INT(bt.n_items, 1);
  CHECK_EQ_INT(bt.rows, 1);
  CHECK_EQ_INT(bt.instance, 0);
  CHECK_EQ_INT(bat_next_batch(b, &bt), 1);
  CHECK_EQ_INT(((req *)bt.items->payload)->id, 1);
  CHECK_EQ_INT(bt.rows, 2);
  CHECK_EQ_INT(bt.instance, 1);
  // both instances busy: nothing more runs, however long the queue
  CHECK_EQ_INT(bat_free_instances(b), 0);
  CHECK_EQ_INT(bat_next_batch(b, &bt), 0);
  bat_release_instance(b, 1);
  bat_release_instance(b, 1);  // a double release must not create an instance
  CHECK_EQ_INT(bat_free_instances(b), 1);
  CHECK_EQ_INT(bat_next_batch(b, &bt), 1);
  CHECK_EQ_INT(((req *)bt.items->payload)->id, 2);
  CHECK_EQ_INT(bt.instance, 1);
  CHECK_EQ_INT(bat_queued(b), 2);
  CHECK(bat_take_dropped(b) == NULL);
  bat_destroy(b);
}

static void test_bounds(void) {
  fake_clock clk = {0};
  bat_batcher *b = make(&clk, 4, 1, 2);
  req r = {0, 0};
  bat_item big = {.rows = 5, .deadline_us = INT64_MAX, .payload = &r};
  err e;
  CHECK_EQ_INT(bat_enqueue(b, &big, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "max_batch_size 4");
  bat_item zero = {.rows = 0, .deadline_us = INT64_MAX, .payload = &r};
  CHECK_EQ_INT(bat_enqueue(b, &zero, &e), ERR_INVALID_ARGUMENT);
  bat_item a = {.rows = 1, .deadline_us = INT64_MAX, .payload = &r};
  bat_item c = a, d = a;
  CHECK_EQ_INT(bat_enqueue(b, &a, &e), 0);
  CHECK_EQ_INT(bat_enqueue(b, &c, &e), 0);
  CHECK_EQ_INT(bat_enqueue(b, &d, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "max_queue_size 2");
  CHECK_EQ_INT(bat_queued(b), 2);
  bat_destroy(b);

  // max_batch_size 0: no batch dimension, any single request runs
  b = make(&clk, 0, 1, 0);
  bat_item one = {.rows = 1, .deadline_us = INT64_MAX, .payload = &r};
  CHECK_EQ_INT(bat_enqueue(b, &one, &e), 0);
  bat_destroy(b);
}

static void test_deadline_and_cancel(void) {
  fake_clock clk = {100};
  bat_batcher *b = make(&clk, 8, 1, 0);
  req r[4] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}};
  bat_item it[4];
  err e;
  for (int i = 0; i < 4; i++) {
    it[i] = (bat_item){.rows = 1, .deadline_us = INT64_MAX, .payload = &r[i]};
  }
  it[1].deadline_us = 500;
  it[3].deadline_us = 300;
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(bat_enqueue(b, &it[i], &e), 0);
  CHECK_EQ_INT(bat_next_wakeup(b), 300);

  bat_batch bt;
  CHECK_EQ_INT(bat_next_batch(b, &bt), 1);  // id 0 takes the only instance
  CHECK_EQ_INT(((req *)bt.items->payload)->id, 0);
  // the deadline of id 3 passes while the instance is busy: it is dropped anyway
  clk.now = 300;
  CHECK_EQ_INT(bat_next_batch(b, &bt), 0);
  bat_item *d = bat_take_dropped(b);
  CHECK(d != NULL);
  CHECK_EQ_INT(((req *)d->payload)->id, 3);
  CHECK(d->next == NULL);
  CHECK_EQ_INT(bat_queued(b), 2);
  CHECK_EQ_INT(bat_next_wakeup(b), 500);
  // id 2 is cancelled by its client while queued; id 1 times out exactly at its deadline
  r[2].cancelled = 1;
  clk.now = 500;
  bat_release_instance(b, 0);
  CHECK_EQ_INT(bat_next_batch(b, &bt), 0);
  int seen = 0;
  for (d = bat_take_dropped(b); d; d = d->next) seen |= 1 << ((req *)d->payload)->id;
  CHECK_EQ_INT(seen, (1 << 1) | (1 << 2));
  CHECK_EQ_INT(bat_queued(b), 0);
  CHECK_EQ_INT(bat_next_wakeup(b), INT64_MAX);
  // the tail was removed: a new item must still be queued and served
  bat_item last = {.rows = 1, .deadline_us = INT64_MAX, .payload = &r[0]};
  CHECK_EQ_INT(bat_enqueue(b, &last, &e), 0);
  CHECK_EQ_INT(bat_next_batch(b, &bt), 1);
  CHECK(bt.items == &last);
  bat_destroy(b);
}

int main(void) {
  test_fifo_one_per_execution();
  test_bounds();
  test_deadline_and_cancel();
  CHECK_DONE();
}
