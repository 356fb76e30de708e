// Tests batcher/order.c: responses released strictly in request order with
// out-of-order completion, drops counted as completions, ring growth, and
// misuse refused without changing state.
#include <stdint.h>
#include <stdlib.h>

#include "batcher/order.h"
#include "check.h"

static void test_out_of_order(void) {
  bat_order *o = NULL;
  err e;
  CHECK_EQ_INT(bat_order_create(&o, &e), 0);
  uint64_t s[5], got;
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT(bat_order_begin(o, &s[i], &e), 0);
    CHECK_EQ_INT(s[i], i);
  }
  CHECK_EQ_INT(bat_order_pop(o, &got), 0);
  // instance B finishes 2 and 3 before instance A finishes 0 and 1
  CHECK_EQ_INT(bat_order_complete(o, 2, &e), 0);
  CHECK_EQ_INT(bat_order_complete(o, 3, &e), 0);
  CHECK_EQ_INT(bat_order_pop(o, &got), 0);  // held: 0 is still running
  CHECK_EQ_INT(bat_order_complete(o, 0, &e), 0);
  CHECK_EQ_INT(bat_order_pop(o, &got), 1);
  CHECK_EQ_INT(got, 0);
  CHECK_EQ_INT(bat_order_pop(o, &got), 0);  // 1 not done: 2 and 3 still held
  // 1 was dropped (cancelled): it counts as complete and releases 2, 3
  CHECK_EQ_INT(bat_order_complete(o, 1, &e), 0);
  for (uint64_t want = 1; want <= 3; want++) {
    CHECK_EQ_INT(bat_order_pop(o, &got), 1);
    CHECK_EQ_INT(got, want);
  }
  CHECK_EQ_INT(bat_order_pop(o, &got), 0);
  CHECK_EQ_INT(bat_order_outstanding(o), 1);
  // misuse
  CHECK_EQ_INT(bat_order_complete(o, 2, &e), ERR_INVALID_ARGUMENT);  // already popped
  CHECK_EQ_INT(bat_order_complete(o, 9, &e), ERR_INVALID_ARGUMENT);  // never given
  CHECK_CONTAINS(e.msg, "9");
  CHECK_EQ_INT(bat_order_complete(o, 4, &e), 0);
  CHECK_EQ_INT(bat_order_complete(o, 4, &e), ERR_INVALID_ARGUMENT);  // twice
  CHECK_CONTAINS(e.msg, "twice");
  CHECK_EQ_INT(bat_order_pop(o, &got), 1);
  CHECK_EQ_INT(got, 4);
  CHECK_EQ_INT(bat_order_outstanding(o), 0);
  bat_order_destroy(o);
}

// Many outstanding (ring grows several times while a window is open),
// completed in a shuffled order: pops come out exactly 0..n-1.
static void test_growth_shuffled(void) {
  enum { N = 1000 };
  bat_order *o = NULL;
  err e;
  CHECK_EQ_INT(bat_order_create(&o, &e), 0);
  uint64_t seq, got, next_pop = 0;
  // first retire a few so the window does not start at 0 in the ring
  for (int i = 0; i < 37; i++) {
    CHECK_EQ_INT(bat_order_begin(o, &seq, &e), 0);
    CHECK_EQ_INT(bat_order_complete(o, seq, &e), 0);
    CHECK_EQ_INT(bat_order_pop(o, &got), 1);
    CHECK_EQ_INT(got, next_pop++);
  }
  uint64_t perm[N];
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(bat_order_begin(o, &seq, &e), 0);
    perm[i] = seq;
  }
  srand(7);
  for (int i = N - 1; i > 0; i--) {
    int j = rand() % (i + 1);
    uint64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int bad = 0;
  for (int i = 0; i < N; i++) {
    if (bat_order_complete(o, perm[i], &e) != 0) bad++;
    while (bat_order_pop(o, &got)) {
      if (got != next_pop) bad++;
      next_pop++;
    }
    // interleave new requests while the window is open
    if (i % 100 == 0) {
      CHECK_EQ_INT(bat_order_begin(o, &seq, &e), 0);
      CHECK_EQ_INT(bat_order_complete(o, seq, &e), 0);
    }
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(next_pop, 37 + N + 10);
  CHECK_EQ_INT(bat_order_outstanding(o), 0);
  bat_order_destroy(o);
}

int main(void) {
  test_out_of_order();
  test_growth_shuffled();
  CHECK_DONE();
}
