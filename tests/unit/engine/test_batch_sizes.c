// Tests engine/batch_sizes.c: the order batch sizes are prepared in (the
// must-haves first, a ladder between them, every size once), the budget
// that stops it (with a fake cost per size: no clock), the estimate from
// measured sizes, and the bucket a batch of an unprepared size pads to.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/batch_sizes.h"

// Prepares as the engine does, each size costing cost(rows) ns of a fake
// clock; the chosen sizes ascending as "1 2 4 8".
static const char *run(eng_bsizes *b, uint64_t (*cost)(int)) {
  static char buf[4096];
  int64_t t = 0;
  for (int s; (s = eng_bsizes_next(b, t)) != 0;) {
    t += (int64_t)cost(s);
    eng_bsizes_measured(b, s, cost(s));
  }
  int *v = malloc((b->n_done + 1) * sizeof *v);
  size_t n = eng_bsizes_sorted(b, v), o = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n && o < sizeof buf; i++) o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%d", i ? " " : "", v[i]);
  free(v);
  return buf;
}

static uint64_t flat_ms(int rows) {
  (void)rows;
  return 1000000;
}
static uint64_t linear(int rows) { return 1000000 + (uint64_t)rows * 100000; }  // 1 ms + 0.1 ms a row

static void test_order(void) {
  eng_bsizes b;
  err e = {0};
  int pref[] = {6, 6, 0, 99};  // a duplicate and sizes outside 1..max are ignored
  CHECK_EQ_INT(eng_bsizes_init(&b, 16, pref, 4, -1, 0, &e), 0);
  CHECK_EQ_INT((int)b.n_must, 3);
  CHECK_EQ_INT(b.order[0], 1);
  CHECK_EQ_INT(b.order[1], 16);
  CHECK_EQ_INT(b.order[2], 6);
  CHECK_EQ_INT(b.order[3], 2);  // then powers of two
  CHECK_EQ_INT(b.order[4], 4);
  CHECK_EQ_INT(b.order[5], 8);
  CHECK_EQ_INT((int)b.n_order, 16);  // every size exactly once
  int seen[17] = {0};
  for (size_t i = 0; i < b.n_order; i++) seen[b.order[i]]++;
  for (int s = 1; s <= 16; s++) CHECK_EQ_INT(seen[s], 1);
  // unbounded: every size
  CHECK_EQ_STR(run(&b, flat_ms), "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16");
  eng_bsizes_close(&b);

  // no batch dimension: the one size 1
  CHECK_EQ_INT(eng_bsizes_init(&b, 0, NULL, 0, -1, 0, &e), 0);
  CHECK_EQ_STR(run(&b, flat_ms), "1");
  eng_bsizes_close(&b);
}

static void test_budget(void) {
  eng_bsizes b;
  err e = {0};
  int pref[] = {12};
  // 1 ms a size, 5 ms in all: the must-haves (1, 32, 12), then 2 and 4
  CHECK_EQ_INT(eng_bsizes_init(&b, 32, pref, 1, 5000000, 0, &e), 0);
  CHECK_EQ_STR(run(&b, flat_ms), "1 2 4 12 32");
  eng_bsizes_close(&b);

  // a budget of nothing still prepares the must-haves
  CHECK_EQ_INT(eng_bsizes_init(&b, 32, pref, 1, 0, 0, &e), 0);
  CHECK_EQ_STR(run(&b, flat_ms), "1 12 32");
  eng_bsizes_close(&b);

  // costs growing with the size: 1 (1.1 ms) and 64 (7.4 ms) cost 8.5 ms; with
  // 15 ms, powers of two while their interpolated cost fits (16 at 2.6 ms does
  // not: 12.9 ms spent by then), then a smaller size of the 1.25x ladder does
  CHECK_EQ_INT(eng_bsizes_init(&b, 64, NULL, 0, 15000000, 0, &e), 0);
  CHECK_EQ_STR(run(&b, linear), "1 2 3 4 8 64");
  eng_bsizes_close(&b);

  // the cap bounds the sizes prepared, never below the must-haves
  int many[] = {3, 5, 7, 9, 11};
  CHECK_EQ_INT(eng_bsizes_init(&b, 1000, many, 5, -1, 4, &e), 0);
  CHECK_EQ_STR(run(&b, flat_ms), "1 3 5 7 9 11 1000");
  eng_bsizes_close(&b);
  CHECK_EQ_INT(eng_bsizes_init(&b, 1000, NULL, 0, -1, 0, &e), 0);
  run(&b, flat_ms);
  CHECK_EQ_INT((int)b.n_done, ENG_PREPARE_MAX_SIZES);
  eng_bsizes_close(&b);
}

static void test_estimate(void) {
  eng_bsizes b;
  err e = {0};
  CHECK_EQ_INT(eng_bsizes_init(&b, 100, NULL, 0, -1, 0, &e), 0);
  CHECK_EQ_INT((int)eng_bsizes_estimate(&b, 50), 0);  // nothing measured
  eng_bsizes_measured(&b, 10, 1000);
  CHECK_EQ_INT((int)eng_bsizes_estimate(&b, 5), 1000);   // the nearest beyond
  CHECK_EQ_INT((int)eng_bsizes_estimate(&b, 90), 1000);
  eng_bsizes_measured(&b, 90, 9000);
  CHECK_EQ_INT((int)eng_bsizes_estimate(&b, 50), 5000);  // linear between
  CHECK_EQ_INT((int)eng_bsizes_estimate(&b, 90), 9000);
  eng_bsizes_measured(&b, 90, 3000);                     // measured again: replaced
  CHECK_EQ_INT((int)eng_bsizes_estimate(&b, 90), 3000);
  CHECK_EQ_INT((int)b.n_done, 2);
  eng_bsizes_close(&b);
}

static void test_bucket(void) {
  int s[] = {1, 2, 4, 8, 13};
  CHECK_EQ_INT(eng_bsizes_bucket(s, 5, 1), 1);
  CHECK_EQ_INT(eng_bsizes_bucket(s, 5, 3), 4);
  CHECK_EQ_INT(eng_bsizes_bucket(s, 5, 8), 8);
  CHECK_EQ_INT(eng_bsizes_bucket(s, 5, 9), 13);
  CHECK_EQ_INT(eng_bsizes_bucket(s, 5, 14), 0);  // larger than every prepared size
  CHECK_EQ_INT(eng_bsizes_bucket(s, 0, 1), 0);
}

static void test_parse(void) {
  int *v = NULL;
  size_t n = 0;
  err e = {0};
  CHECK_EQ_INT(eng_bsizes_parse("1,4,8", 8, &v, &n, &e), 0);
  CHECK_EQ_INT((int)n, 3);
  CHECK_EQ_INT(v[0], 1);
  CHECK_EQ_INT(v[2], 8);
  free(v);
  CHECK_EQ_INT(eng_bsizes_parse("1,9", 8, &v, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "1..8");
  CHECK_EQ_INT(eng_bsizes_parse("", 8, &v, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_bsizes_parse("2,,3", 8, &v, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_bsizes_parse("2x", 8, &v, &n, &e), ERR_INVALID_ARGUMENT);
}

int main(void) {
  test_order();
  test_budget();
  test_estimate();
  test_bucket();
  test_parse();
  CHECK_DONE();
}
