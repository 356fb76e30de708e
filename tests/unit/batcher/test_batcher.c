// Tests batcher/batcher.c with a fake clock, the way Triton's L0_batcher
// does: how many executions ran at each batch size, which requests went
// together, when a held batch goes, and why dropped requests left.
#include "harness.h"

static char dbuf[512];
#define DROPS(h) h_drops((h), dbuf, sizeof dbuf)

// --- no batching

static void test_no_dynamic_batching(void) {
  harness h;
  bat_config c = h_config(&h, 8, 2);
  c.dynamic = 0;
  int pref[] = {4};
  c.preferred_batch_sizes = pref;  // ignored without dynamic batching
  c.n_preferred = 1;
  c.max_queue_delay_us = 1000;
  h_init(&h, &c);
  h.now = 1000;
  for (int i = 0; i < 5; i++) {
    h.now += 10;
    h_enq(&h, 1 + i);
    CHECK_EQ_INT(h.it[i].arrival_us, h.now);
  }
  CHECK_EQ_INT(bat_queued(h.b), 5);
  CHECK_EQ_INT(h_next(&h), 1);  // runs at once, alone, no delay
  CHECK_EQ_STR(h.last, "0");
  CHECK_EQ_INT(h.last_exec, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "1");
  CHECK_EQ_INT(h.last_rows, 2);
  CHECK_EQ_INT(h.last_exec, 1);
  // both executors busy: nothing more runs, however long the queue
  CHECK_EQ_INT(bat_free_executors(h.b), 0);
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), INT64_MAX);
  bat_release_executor(h.b, 1);
  bat_release_executor(h.b, 1);  // a double release must not create an executor
  CHECK_EQ_INT(bat_free_executors(h.b), 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "2");
  CHECK_EQ_INT(h.last_exec, 1);
  CHECK_EQ_INT(bat_queued(h.b), 2);
  CHECK(bat_take_dropped(h.b) == NULL);
  bat_destroy(h.b);
}

static void test_max_batch_size_0(void) {
  harness h;
  bat_config c = h_config(&h, 0, 1);
  c.max_queue_delay_us = 500;
  h_init(&h, &c);
  h_enq(&h, 1);
  h_enq(&h, 1);
  h_enq(&h, 1);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(h_next(&h), 1);
    CHECK_EQ_INT(h.last_rows, 1);
    CHECK_EQ_INT(h_next(&h), 0);
    bat_release_executor(h.b, 0);
  }
  CHECK_EQ_INT(h.execs[1], 3);
  CHECK_EQ_STR(h.last, "2");
  bat_destroy(h.b);
}

static void test_bounds(void) {
  harness h;
  bat_config c = h_config(&h, 4, 1);
  c.default_policy.max_queue_size = 2;
  h_init(&h, &c);
  err e;
  CHECK_EQ_INT(h_enq_full(&h, 5, 0, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "max_batch_size 4");
  CHECK_EQ_INT(h_enq_full(&h, 0, 0, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "max_queue_size 2");
  CHECK_EQ_INT(bat_queued(h.b), 2);
  // levels not configured: any priority is accepted and ignored
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "2 3");
  CHECK_EQ_INT(h_enq_full(&h, 1, 7, 0, INT64_MAX, 0, &e), 0);
  bat_destroy(h.b);

  // bad configs
  bat_batcher *b = NULL;
  c = h_config(&h, 4, 1);
  int bad_pref[] = {5};
  c.preferred_batch_sizes = bad_pref;
  c.n_preferred = 1;
  CHECK_EQ_INT(bat_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "preferred_batch_size 5");
  c = h_config(&h, 4, 1);
  c.priority_levels = 2;
  c.default_priority_level = 3;
  CHECK_EQ_INT(bat_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "default_priority_level 3");
  c.default_priority_level = 1;
  bat_level_policy lp = {.level = 3};
  c.level_policies = &lp;
  c.n_level_policies = 1;
  CHECK_EQ_INT(bat_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  c = h_config(&h, 4, 0);
  CHECK_EQ_INT(bat_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
}

// --- preferred sizes and the queue delay

// The trap: a preferred size must not be waited for when the queue is idle
// and the delay is 0.
static void test_idle_queue_delay0(void) {
  harness h;
  bat_config c = h_config(&h, 8, 1);
  int pref[] = {4, 8};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 2;
  h_init(&h, &c);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0");
  CHECK_EQ_INT(bat_next_wakeup(h.b), INT64_MAX);
  // while the executor is busy the queue grows; the largest reachable
  // preferred size (4 of 5 pending) goes first, then the rest at once
  for (int i = 0; i < 5; i++) h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "1 2 3 4");
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "5");
  CHECK_EQ_INT(h.execs[1], 2);
  CHECK_EQ_INT(h.execs[4], 1);
  CHECK_EQ_INT(h.n_execs, 3);
  bat_destroy(h.b);
}

static void test_idle_queue_with_delay(void) {
  harness h;
  bat_config c = h_config(&h, 8, 1);
  int pref[] = {4, 8};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 2;
  c.max_queue_delay_us = 100;
  h_init(&h, &c);
  h.now = 1000;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);  // held for the delay
  CHECK_EQ_INT(bat_next_wakeup(h.b), 1100);
  h.now = 1099;
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), 1100);
  h.now = 1100;  // at arrival + delay exactly the batch goes
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0");
  CHECK_EQ_INT(bat_next_wakeup(h.b), INT64_MAX);
  bat_release_executor(h.b, 0);

  // arrivals within the delay: the one completing preferred 4 sends at once
  h.now = 2000;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);
  h.now = 2030;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), 2100);  // from the oldest, not the newest
  h.now = 2060;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);
  h.now = 2090;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "1 2 3 4");
  CHECK_EQ_INT(h.execs[4], 1);
  CHECK_EQ_INT(h.execs[1], 1);
  bat_destroy(h.b);
}

static void test_delay_and_preferred_interaction(void) {
  harness h;
  bat_config c = h_config(&h, 16, 1);
  int pref[] = {8, 4};  // order in the config does not matter
  c.preferred_batch_sizes = pref;
  c.n_preferred = 2;
  c.max_queue_delay_us = 100;
  h_init(&h, &c);
  int first = h_enq(&h, 1);
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 1);  // waited its delay: alone
  CHECK_EQ_STR(h.last, "0");
  (void)first;
  // busy: 10 arrive at t=110..119
  for (int i = 0; i < 10; i++) {
    h.now = 110 + i;
    h_enq(&h, 1);
  }
  h.now = 150;  // oldest waited 40 < 100: largest reachable preferred, 8
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_rows, 8);
  CHECK_EQ_STR(h.last, "1 2 3 4 5 6 7 8");
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 0);  // 2 left, reach no preferred size: held
  CHECK_EQ_INT(bat_next_wakeup(h.b), 118 + 100);
  h.now = 218;
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "9 10");

  // delay exceeded with 10 pending: everything that fits goes, not 8
  for (int i = 0; i < 10; i++) h_enq(&h, 1);  // ids 11..20 at t=218
  h.now = 318;
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_rows, 10);
  // delay exceeded with 20 pending: max_batch_size 16 goes, then 4 (preferred) at once
  for (int i = 0; i < 20; i++) h_enq(&h, 1);  // ids 21..40 at t=318
  h.now = 418;
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_rows, 16);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_rows, 4);
  CHECK_EQ_STR(h.last, "37 38 39 40");
  CHECK_EQ_INT(h.execs[1], 1);
  CHECK_EQ_INT(h.execs[8], 1);
  CHECK_EQ_INT(h.execs[2], 1);
  CHECK_EQ_INT(h.execs[10], 1);
  CHECK_EQ_INT(h.execs[16], 1);
  CHECK_EQ_INT(h.execs[4], 1);
  CHECK_EQ_INT(h.n_execs, 6);
  bat_destroy(h.b);
}

// Without preferred sizes the full batch is the preferred one (Triton's
// config normalisation): a partial batch waits, a full one goes at once.
static void test_no_preferred_sizes(void) {
  harness h;
  bat_config c = h_config(&h, 4, 1);
  c.max_queue_delay_us = 100;
  h_init(&h, &c);
  for (int i = 0; i < 3; i++) {
    h.now = i;
    h_enq(&h, 1);
    CHECK_EQ_INT(h_next(&h), 0);
  }
  CHECK_EQ_INT(bat_next_wakeup(h.b), 100);
  h.now = 10;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1 2 3");
  bat_release_executor(h.b, 0);
  // delay 0, no preferred: whatever is pending goes at once
  bat_destroy(h.b);
  c.max_queue_delay_us = 0;
  h_init(&h, &c);
  h_enq(&h, 1);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1");
  bat_destroy(h.b);
}

// --- rows > 1

static void test_rows_packing(void) {
  harness h;
  bat_config c = h_config(&h, 8, 1);
  c.max_queue_delay_us = 100;
  h_init(&h, &c);
  // 3+3 held (no preferred = 8 reached), 2 more rows complete a full batch
  h_enq(&h, 3);
  h_enq(&h, 3);
  CHECK_EQ_INT(h_next(&h), 0);
  h.now = 5;
  h_enq(&h, 2);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1 2");
  CHECK_EQ_INT(h.last_rows, 8);
  bat_release_executor(h.b, 0);
  // 3+3 then a 3 that does not fit: the 6 rows go at once, within the delay
  h.now = 10;
  h_enq(&h, 3);
  h_enq(&h, 3);
  h_enq(&h, 3);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "3 4");
  CHECK_EQ_INT(h.last_rows, 6);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 0);  // the lone 3 waits its delay
  CHECK_EQ_INT(bat_next_wakeup(h.b), 110);
  h.now = 110;
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "5");
  bat_release_executor(h.b, 0);
  // a later small request never jumps over one that does not fit
  h_enq(&h, 7);  // 6
  h_enq(&h, 2);  // 7
  h_enq(&h, 1);  // 8
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "6");
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 0);
  bat_destroy(h.b);

  // passing the largest preferred size: the rows gathered before it go
  c = h_config(&h, 8, 1);
  int pref[] = {4};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 1;
  c.max_queue_delay_us = 100;
  h_init(&h, &c);
  h_enq(&h, 3);
  h_enq(&h, 3);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0");
  bat_release_executor(h.b, 0);
  bat_destroy(h.b);
  // ... unless the delay has passed: then everything that fits
  h_init(&h, &c);
  h_enq(&h, 3);
  h_enq(&h, 3);
  h_enq(&h, 3);
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1");
  CHECK_EQ_INT(h.last_rows, 6);
  bat_destroy(h.b);
}

// --- shapes

static void test_shape_keys(void) {
  harness h;
  bat_config c = h_config(&h, 8, 1);
  int pref[] = {4};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 1;
  c.max_queue_delay_us = 100;
  h_init(&h, &c);
  err e;
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 11, INT64_MAX, 0, &e), 0);  // 0
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 11, INT64_MAX, 0, &e), 0);  // 1
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 22, INT64_MAX, 0, &e), 0);  // 2
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 11, INT64_MAX, 0, &e), 0);  // 3
  // a different shape ends the batch and sends it as it is (Triton)
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1");
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "2");
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 0);  // 3 alone with its shape: waits the delay
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "3");
  bat_release_executor(h.b, 0);
  // equal shapes batch as usual
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(h_enq_full(&h, 1, 0, 22, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "4 5 6 7");
  bat_destroy(h.b);
}

// --- padding to the longest sequence

static bat_config pad_config(harness *h, double ratio) {
  bat_config c = h_config(h, 8, 1);
  static int pref[] = {4};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 1;
  c.max_queue_delay_us = 100;
  c.pad = 1;
  c.pad_max_ratio = ratio;
  return c;
}

// Unbounded: lengths 3, 5, 8 share one batch padded to 8; a different
// shape key (the non-padded dims) still ends it.
static void test_pad_unbounded(void) {
  harness h;
  bat_config c = pad_config(&h, 0);
  h_init(&h, &c);
  err e;
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 3, &e), 0);   // 0
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 5, &e), 0);   // 1
  CHECK_EQ_INT(h_enq_seq(&h, 2, 7, 8, &e), 0);   // 2
  CHECK_EQ_INT(h_enq_seq(&h, 1, 9, 5, &e), 0);   // 3: other shape key
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1 2");  // 4 rows: preferred, goes at once
  CHECK_EQ_INT(h.last_rows, 4);
  CHECK_EQ_INT(h.last_seq, 8);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 0);  // 3 alone waits its delay
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "3");
  CHECK_EQ_INT(h.last_seq, 5);
  CHECK_EQ_INT(h.execs[4], 1);
  CHECK_EQ_INT(h.execs[1], 1);
  bat_destroy(h.b);
}

// pad_max_ratio 2: the first item that would make longest > 2 x shortest
// stops the scan and the batch so far goes at once (as a shape change);
// the boundary is inclusive; a later shorter item counts as well.
static void test_pad_ratio(void) {
  harness h;
  bat_config c = pad_config(&h, 2);
  h_init(&h, &c);
  err e;
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 3, &e), 0);  // 0
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 5, &e), 0);  // 1: 5 <= 2 x 3
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 8, &e), 0);  // 2: 8 > 2 x 3
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 4, &e), 0);  // 3: 8 == 2 x 4
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 3, &e), 0);  // 4: 8 > 2 x 3
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1");
  CHECK_EQ_INT(h.last_seq, 5);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);  // 2 3 stop before 4: sent at once too
  CHECK_EQ_STR(h.last, "2 3");
  CHECK_EQ_INT(h.last_seq, 8);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 0);  // 4 alone: held for the delay
  CHECK_EQ_INT(bat_next_wakeup(h.b), 100);
  // joined by compatible lengths until the preferred size
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 6, &e), 0);  // 5: 6 <= 2 x 3
  CHECK_EQ_INT(h_enq_seq(&h, 2, 7, 2, &e), 0);  // 6: the longest, 6, > 2 x 2: stops the scan
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "4 5");
  CHECK_EQ_INT(h.last_seq, 6);
  bat_release_executor(h.b, 0);
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "6");
  CHECK_EQ_INT(h.last_rows, 2);
  CHECK_EQ_INT(h.last_seq, 2);
  bat_destroy(h.b);
}

// Equal lengths under ratio 1 batch as without padding; a length 0 only
// with other 0s; without pad, seq_len is not looked at (the server then
// keeps the lengths in the shape key).
static void test_pad_ratio_one_and_zero(void) {
  harness h;
  bat_config c = pad_config(&h, 1);
  h_init(&h, &c);
  err e;
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 0, &e), 0);
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 1, &e), 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1 2 3");
  CHECK_EQ_INT(h.last_seq, 0);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 2, &e), 0);  // 5: 2 > 1 x 1
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "4");
  CHECK_EQ_INT(h.last_seq, 1);
  bat_destroy(h.b);

  c = pad_config(&h, 0);
  c.pad = 0;
  h_init(&h, &c);
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(h_enq_seq(&h, 1, 7, 1 + i, &e), 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 1 2 3");
  CHECK_EQ_INT(h.last_seq, 0);
  bat_destroy(h.b);
}

static void test_pad_bad_config(void) {
  harness h;
  bat_config c = pad_config(&h, 0.5);
  bat_batcher *b = NULL;
  err e;
  CHECK_EQ_INT(bat_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "pad_max_ratio 0.5");
  c.pad_max_ratio = -1;
  CHECK_EQ_INT(bat_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  c.pad_max_ratio = 1.0 / 0.0;
  CHECK_EQ_INT(bat_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  c.pad = 0;  // not read without padding
  CHECK_EQ_INT(bat_create(&c, &b, &e), 0);
  bat_destroy(b);
  c = pad_config(&h, 2);
  h_init(&h, &c);
  CHECK_EQ_INT(h_enq_seq(&h, 1, 7, -1, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "sequence length -1");
  CHECK_EQ_INT(bat_queued(h.b), 0);
  bat_destroy(h.b);
}

// --- executors

static void test_instances_busy_queue_grows(void) {
  harness h;
  bat_config c = h_config(&h, 8, 2);
  h_init(&h, &c);  // delay 0, no preferred: whatever is pending goes
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_exec, 0);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_exec, 1);
  for (int i = 0; i < 5; i++) h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);
  bat_release_executor(h.b, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_exec, 1);
  CHECK_EQ_STR(h.last, "2 3 4 5 6");
  for (int i = 0; i < 11; i++) h_enq(&h, 1);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_rows, 8);
  CHECK_EQ_INT(h_next(&h), 0);
  bat_release_executor(h.b, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h.last_rows, 3);
  CHECK_EQ_INT(h.execs[1], 2);
  CHECK_EQ_INT(h.execs[5], 1);
  CHECK_EQ_INT(h.execs[8], 1);
  CHECK_EQ_INT(h.execs[3], 1);
  bat_destroy(h.b);
}

// --- priorities and queue policies

static void test_priorities(void) {
  harness h;
  bat_config c = h_config(&h, 2, 1);
  c.priority_levels = 3;
  c.default_priority_level = 2;
  h_init(&h, &c);
  err e;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);  // 0 takes the executor
  CHECK_EQ_INT(h_enq_full(&h, 1, 3, 0, INT64_MAX, 0, &e), 0);  // 1: level 3
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), 0);  // 2: default level 2
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);  // 3: level 1
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, INT64_MAX, 0, &e), 0);  // 4: level 2
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);  // 5: level 1
  CHECK_EQ_INT(h_enq_full(&h, 1, 4, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "priority 4");
  CHECK_EQ_INT(bat_queued(h.b), 5);
  const char *want[] = {"3 5", "2 4", "1"};
  for (int i = 0; i < 3; i++) {
    bat_release_executor(h.b, 0);
    CHECK_EQ_INT(h_next(&h), 1);
    CHECK_EQ_STR(h.last, want[i]);
  }
  bat_destroy(h.b);
}

// Levels far apart, on both sides of the bitmap words' edges (64, 65, 128):
// a batch takes the lowest non-empty level first, and an emptied level is
// skipped afterwards.
static void test_many_levels(void) {
  harness h;
  bat_config c = h_config(&h, 4, 1);
  c.priority_levels = 1024;
  c.default_priority_level = 1024;
  h_init(&h, &c);
  err e;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);  // 0 takes the executor
  CHECK_EQ_INT(h_enq_full(&h, 1, 128, 0, INT64_MAX, 0, &e), 0);  // 1
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), 0);    // 2: default, level 1024
  CHECK_EQ_INT(h_enq_full(&h, 1, 65, 0, INT64_MAX, 0, &e), 0);   // 3
  CHECK_EQ_INT(h_enq_full(&h, 1, 64, 0, INT64_MAX, 0, &e), 0);   // 4
  CHECK_EQ_INT(h_enq_full(&h, 1, 65, 0, INT64_MAX, 0, &e), 0);   // 5
  CHECK_EQ_INT(h_enq_full(&h, 1, 1025, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bat_queued(h.b), 5);
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "4 3 5 1");  // 64, 65, 65, 128: four rows fill the batch
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, INT64_MAX, 0, &e), 0);  // 7 (6 was refused)
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "7 2");
  CHECK_EQ_INT(bat_queued(h.b), 0);
  bat_destroy(h.b);
}

static void test_queue_policy_reject_and_delay(void) {
  harness h;
  bat_config c = h_config(&h, 4, 1);
  c.priority_levels = 2;
  c.default_priority_level = 2;
  c.default_policy = (bat_queue_policy){.timeout_action = BAT_TIMEOUT_DELAY, .default_timeout_us = 100};
  bat_level_policy lp = {.level = 1, .policy = {.timeout_action = BAT_TIMEOUT_REJECT, .default_timeout_us = 100}};
  c.level_policies = &lp;
  c.n_level_policies = 1;
  h_init(&h, &c);
  err e;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);  // 0 busy on the only executor
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);  // 1: level 1, REJECT at 100
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, INT64_MAX, 0, &e), 0);  // 2: level 2, DELAY at 100
  h.now = 50;
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, INT64_MAX, 0, &e), 0);  // 3: level 2, DELAY at 150
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), 100);
  h.now = 99;
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "");
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "1:T");  // rejected even while every executor is busy
  CHECK_EQ_INT(bat_queued(h.b), 2);
  CHECK_EQ_INT(bat_next_wakeup(h.b), 150);
  h.now = 120;
  bat_release_executor(h.b, 0);
  // 2 timed out with DELAY: it still runs, behind the unexpired 3
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "3 2");
  CHECK_EQ_INT(bat_next_wakeup(h.b), INT64_MAX);
  CHECK_EQ_INT(bat_queued(h.b), 0);
  bat_destroy(h.b);
}

static void test_timeout_override(void) {
  harness h;
  bat_config c = h_config(&h, 4, 1);
  c.default_policy = (bat_queue_policy){.default_timeout_us = 100, .allow_timeout_override = 1};
  h_init(&h, &c);
  err e;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);                                    // busy
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 30, &e), 0);   // 1: shortened to 30
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 300, &e), 0);  // 2: cannot lengthen: 100
  CHECK_EQ_INT(bat_next_wakeup(h.b), 30);
  h.now = 30;
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "1:T");
  CHECK_EQ_INT(bat_next_wakeup(h.b), 100);
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "2:T");
  bat_destroy(h.b);

  // without allow_timeout_override the request's timeout is ignored
  c.default_policy.allow_timeout_override = 0;
  h_init(&h, &c);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 30, &e), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), 100);
  bat_destroy(h.b);

  // with no default timeout an override sets none (Triton's PolicyQueue)
  c.default_policy = (bat_queue_policy){.allow_timeout_override = 1};
  h_init(&h, &c);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 30, &e), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), INT64_MAX);
  bat_destroy(h.b);
  // client deadline and queue timeout at the same instant: the deadline wins
  c.default_policy = (bat_queue_policy){.default_timeout_us = 100};
  h_init(&h, &c);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, 100, 0, &e), 0);
  h.now = 100;
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "1:D");
  bat_destroy(h.b);
}

static void test_priority_with_timeouts(void) {
  // level 1 requests time out (DELAY) and then rank behind fresh level-1
  // ones but still ahead of level 2
  harness h;
  bat_config c = h_config(&h, 1, 1);  // one request per execution: shows the order
  c.max_batch_size = 8;
  c.priority_levels = 2;
  c.default_priority_level = 2;
  bat_level_policy lp = {.level = 1, .policy = {.timeout_action = BAT_TIMEOUT_DELAY, .default_timeout_us = 50}};
  c.level_policies = &lp;
  c.n_level_policies = 1;
  int pref[] = {1};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 1;
  h_init(&h, &c);
  err e;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);  // 1: L1, delayed at 50
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, INT64_MAX, 0, &e), 0);  // 2: L2
  h.now = 60;
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);  // 3: L1 fresh
  const char *want[] = {"3", "1", "2"};
  for (int i = 0; i < 3; i++) {
    bat_release_executor(h.b, 0);
    CHECK_EQ_INT(h_next(&h), 1);
    CHECK_EQ_STR(h.last, want[i]);
  }
  bat_destroy(h.b);
}

static void test_max_queue_size_per_level(void) {
  harness h;
  bat_config c = h_config(&h, 4, 1);
  c.priority_levels = 2;
  c.default_priority_level = 2;
  c.default_policy.max_queue_size = 2;
  bat_level_policy lp = {.level = 1, .policy = {.max_queue_size = 1}};
  c.level_policies = &lp;
  c.n_level_policies = 1;
  int pref[] = {1};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 1;
  h_init(&h, &c);
  err e;
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "priority level 1");
  CHECK_CONTAINS(e.msg, "max_queue_size 1");
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, INT64_MAX, 0, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "priority level 2");
  CHECK_EQ_INT(bat_queued(h.b), 3);
  CHECK_EQ_INT(h_next(&h), 1);  // the level-1 request leaves: room again
  CHECK_EQ_STR(h.last, "0");
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);
  bat_destroy(h.b);
}

// --- deadlines and cancellation

static void test_deadline_and_cancel(void) {
  harness h;
  bat_config c = h_config(&h, 8, 1);
  c.dynamic = 0;
  h_init(&h, &c);
  h.now = 100;
  err e;
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), 0);  // 0
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, 500, 0, &e), 0);        // 1
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, INT64_MAX, 0, &e), 0);  // 2
  CHECK_EQ_INT(h_enq_full(&h, 1, 0, 0, 300, 0, &e), 0);        // 3
  CHECK_EQ_INT(bat_next_wakeup(h.b), 300);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0");
  h.now = 300;  // 3's deadline passes while the executor is busy: dropped anyway
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "3:D");
  CHECK_EQ_INT(bat_queued(h.b), 2);
  CHECK_EQ_INT(bat_next_wakeup(h.b), 500);
  h.r[2].cancelled = 1;
  h.now = 500;  // 1 expires exactly at its deadline; 2 was cancelled
  bat_release_executor(h.b, 0);
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "1:D 2:C");
  CHECK_EQ_INT(bat_queued(h.b), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), INT64_MAX);
  // the lists were emptied from the middle and the tail: still usable
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "4");
  bat_destroy(h.b);
}

// The trap: the oldest request, which armed the delay timer, is cancelled.
static void test_cancel_oldest_moves_wakeup(void) {
  harness h;
  bat_config c = h_config(&h, 8, 1);
  int pref[] = {4};
  c.preferred_batch_sizes = pref;
  c.n_preferred = 1;
  c.max_queue_delay_us = 100;
  h_init(&h, &c);
  h_enq(&h, 1);  // 0 at t=0
  h.now = 40;
  h_enq(&h, 1);  // 1 at t=40
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), 100);
  h.r[0].cancelled = 1;
  h.now = 60;  // any event: the cancelled head leaves, the timer follows 1
  CHECK_EQ_INT(h_next(&h), 0);
  CHECK_EQ_STR(DROPS(&h), "0:C");
  CHECK_EQ_INT(bat_next_wakeup(h.b), 140);
  h.now = 139;
  CHECK_EQ_INT(h_next(&h), 0);
  h.now = 140;
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "1");
  CHECK_EQ_INT(h.n_execs, 1);
  bat_destroy(h.b);

  // a cancellation inside a forming batch does not count towards its size
  h_init(&h, &c);
  h_enq(&h, 1);
  h_enq(&h, 1);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);
  h.r[1].cancelled = 1;
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 0);  // only 3 live: no preferred 4 yet
  CHECK_EQ_STR(DROPS(&h), "1:C");
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  CHECK_EQ_STR(h.last, "0 2 3 4");
  bat_destroy(h.b);
}

// A cancelled request deep in a queue whose executors are all busy still
// leaves within a bounded number of calls (rolling sweep).
static void test_cancel_sweep_while_busy(void) {
  harness h;
  bat_config c = h_config(&h, 1, 1);
  c.dynamic = 0;
  h_init(&h, &c);
  h_enq(&h, 1);
  CHECK_EQ_INT(h_next(&h), 1);
  for (int i = 0; i < 40; i++) h_enq(&h, 1);
  h.r[35].cancelled = 1;
  h.r[12].cancelled = 1;
  int calls = 0;
  char got[600] = "";
  while (calls < 10 && bat_queued(h.b) > 38) {
    CHECK_EQ_INT(h_next(&h), 0);
    calls++;
    DROPS(&h);
    if (dbuf[0]) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", got[0] ? " " : "", dbuf);
  }
  CHECK(calls <= 5);  // 40 items, 8 looked at per call
  CHECK_EQ_STR(got, "12:C 35:C");
  bat_destroy(h.b);
}

static void test_flush(void) {
  harness h;
  bat_config c = h_config(&h, 4, 1);
  c.priority_levels = 2;
  c.default_priority_level = 1;
  c.max_queue_delay_us = 1000;
  h_init(&h, &c);
  err e;
  CHECK_EQ_INT(h_enq_full(&h, 1, 2, 0, 50, 0, &e), 0);
  CHECK_EQ_INT(h_enq_full(&h, 1, 1, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(h_next(&h), 0);
  bat_flush(h.b);
  CHECK_EQ_STR(DROPS(&h), "1:S 0:S");
  CHECK_EQ_INT(bat_queued(h.b), 0);
  CHECK_EQ_INT(bat_next_wakeup(h.b), INT64_MAX);
  CHECK_EQ_STR(bat_drop_reason_str(BAT_DROP_QUEUE_TIMEOUT), "Request timeout expired");
  bat_destroy(h.b);
}

int main(void) {
  test_no_dynamic_batching();
  test_max_batch_size_0();
  test_bounds();
  test_idle_queue_delay0();
  test_idle_queue_with_delay();
  test_delay_and_preferred_interaction();
  test_no_preferred_sizes();
  test_rows_packing();
  test_shape_keys();
  test_pad_unbounded();
  test_pad_ratio();
  test_pad_ratio_one_and_zero();
  test_pad_bad_config();
  test_instances_busy_queue_grows();
  test_priorities();
  test_many_levels();
  test_queue_policy_reject_and_delay();
  test_timeout_override();
  test_priority_with_timeouts();
  test_max_queue_size_per_level();
  test_deadline_and_cancel();
  test_cancel_oldest_moves_wakeup();
  test_cancel_sweep_while_busy();
  test_flush();
  CHECK_DONE();
}
