// Randomised invariant test for batcher/batcher.c: random configurations
// and thousands of random enqueue / cancel / clock / release operations per
// round, driven like the server's loop (bat_next_batch until 0, then the
// dropped list), checked against a model of each item. Invariants: every
// item that entered leaves exactly once (a batch or a drop with a true
// reason); refusals match the rules; rows never exceed max_batch_size;
// shape keys never mix; with padding, a batch's longest seq_len is at most
// pad_max_ratio times its shortest and is the batch's seq_len (0 without
// padding); a batch is a prefix of the queue in priority order
// (FIFO within a level, DELAY-expired behind the rest); nothing due stays
// queued; nothing happens before bat_next_wakeup without an event.
#include <stdint.h>
#include <stdlib.h>

#include "batcher/batcher.h"
#include "check.h"

#define NMAX 3000
#define MAXI 3

enum { ST_NONE, ST_QUEUED, ST_RUNNING, ST_DONE };

typedef struct mreq {
  int id, cancelled, state;
  uint32_t level;  // 1-based, model's view
  int64_t timeout_at;
  bat_item it;
} mreq;

typedef struct world {
  int64_t now;
  bat_batcher *b;
  bat_config c;
  bat_level_policy lp[3];
  int pref[4];
  uint32_t n_lv;
  mreq r[NMAX];
  int n;
  int busy[MAXI];
  int running[MAXI][64];  // ids per executor
  int n_running[MAXI];
  int fails;  // invariant failures (reported once per kind through CHECK)
  long batches, drops, multi, mixed;  // mixed: batches of several seq_len (padded)
} world;

static int64_t w_clock(void *ctx) { return ((world *)ctx)->now; }
static int w_cancelled(void *p) { return ((mreq *)p)->cancelled; }

static uint32_t rnd(uint32_t n) { return (uint32_t)(rand() % (int)n); }

static const bat_queue_policy *pol_of(world *w, uint32_t level) {
  for (size_t i = 0; i < w->c.n_level_policies; i++)
    if (w->lp[i].level == level) return &w->lp[i].policy;
  return &w->c.default_policy;
}

static int delayed(const world *w, const mreq *m) {
  return m->timeout_at <= w->now && pol_of((world *)w, m->level)->timeout_action == BAT_TIMEOUT_DELAY;
}

#define INV(cond)                        \
  do {                                   \
    if (!(cond)) {                       \
      if (w->fails++ < 5) CHECK(cond);   \
    }                                    \
  } while (0)

static void take_drops(world *w, int shutdown) {
  for (bat_item *it = bat_take_dropped(w->b); it; it = it->next) {
    mreq *m = it->payload;
    INV(m->state == ST_QUEUED);
    m->state = ST_DONE;
    w->drops++;
    switch (it->drop_reason) {
      case BAT_DROP_CANCELLED: INV(m->cancelled); break;
      case BAT_DROP_DEADLINE: INV(m->it.deadline_us <= w->now); break;
      case BAT_DROP_QUEUE_TIMEOUT:
        INV(m->timeout_at <= w->now && pol_of(w, m->level)->timeout_action == BAT_TIMEOUT_REJECT);
        break;
      case BAT_DROP_SHUTDOWN: INV(shutdown); break;
      default: INV(0);
    }
  }
}

static void check_batch(world *w, const bat_batch *bt) {
  INV(bt->executor >= 0 && bt->executor < w->c.n_executors && !w->busy[bt->executor]);
  w->busy[bt->executor] = 1;
  w->n_running[bt->executor] = 0;
  int single = !w->c.dynamic || w->c.max_batch_size <= 1;
  if (single) INV(bt->n_items == 1);
  else INV(bt->rows <= w->c.max_batch_size);
  int64_t rows = 0, lo = INT64_MAX, hi = 0;
  size_t n = 0;
  uint32_t max_level = 0;
  const mreq *prev = NULL;
  for (bat_item *it = bt->items; it; it = it->next) {
    mreq *m = it->payload;
    INV(m->state == ST_QUEUED);
    INV(!m->cancelled);  // looked at in this very call
    INV(m->it.deadline_us > w->now);
    m->state = ST_RUNNING;
    if (n < 64) w->running[bt->executor][w->n_running[bt->executor]++] = m->id;
    rows += it->rows;
    n++;
    if (it->seq_len < lo) lo = it->seq_len;
    if (it->seq_len > hi) hi = it->seq_len;
    if (prev) {
      INV(m->it.shape_key == prev->it.shape_key);
      INV(m->level >= prev->level);
      if (m->level == prev->level && !delayed(w, prev)) INV(delayed(w, m) || m->id > prev->id);
      if (m->level == prev->level && delayed(w, prev)) INV(delayed(w, m));
    }
    if (m->level > max_level) max_level = m->level;
    prev = m;
  }
  INV(n == bt->n_items && rows == bt->rows);
  int pad = w->c.dynamic && w->c.pad;
  INV(bt->seq_len == (pad ? hi : 0));
  if (pad && w->c.pad_max_ratio > 0) INV((double)hi <= w->c.pad_max_ratio * (double)lo);
  w->mixed += pad && lo != hi && n > 1;
  // prefix of the queue: nothing live left behind ranks before a batch item
  for (int i = 0; i < w->n; i++) {
    mreq *y = &w->r[i];
    if (y->state != ST_QUEUED || y->cancelled) continue;
    INV(y->level >= max_level);
    for (bat_item *it = bt->items; it; it = it->next) {
      mreq *x = it->payload;
      if (x->level != y->level || delayed(w, y)) continue;
      INV(!delayed(w, x) && x->id < y->id);
    }
  }
  w->batches++;
  w->multi += n > 1;
}

// What the server's loop does after any event.
static void pump(world *w) {
  bat_batch bt;
  for (;;) {
    int got = bat_next_batch(w->b, &bt);
    take_drops(w, 0);  // drops of this call happened before its batch formed
    if (!got) break;
    check_batch(w, &bt);
  }
  // nothing due is still queued
  for (int i = 0; i < w->n; i++) {
    mreq *m = &w->r[i];
    if (m->state != ST_QUEUED) continue;
    INV(m->it.deadline_us > w->now);
    INV(!(m->timeout_at <= w->now && pol_of(w, m->level)->timeout_action == BAT_TIMEOUT_REJECT));
    // the wakeup is never later than anything due for a queued item
    int64_t wake = bat_next_wakeup(w->b);
    INV(wake <= m->it.deadline_us);
    if (m->timeout_at > w->now) INV(wake <= m->timeout_at);
  }
  int64_t wake = bat_next_wakeup(w->b);
  INV(wake > w->now);
}

static void release(world *w, int inst) {
  for (int i = 0; i < w->n_running[inst]; i++) {
    mreq *m = &w->r[w->running[inst][i]];
    INV(m->state == ST_RUNNING);
    m->state = ST_DONE;
  }
  w->n_running[inst] = 0;
  w->busy[inst] = 0;
  bat_release_executor(w->b, inst);
}

static void enqueue(world *w) {
  if (w->n >= NMAX) return;
  mreq *m = &w->r[w->n];
  int mbs = w->c.max_batch_size;
  int64_t rows = mbs > 1 ? 1 + rnd((uint32_t)mbs) : 1;
  if (rnd(50) == 0) rows = mbs > 0 ? mbs + 1 : 0;  // refused
  uint32_t prio = rnd(w->n_lv + 2);                   // sometimes above the levels
  *m = (mreq){.id = w->n};
  m->it = (bat_item){.rows = rows, .priority = prio, .shape_key = rnd(6) == 0 ? 2 : 1, .payload = m,
                     .seq_len = rnd(8) == 0 ? 0 : 1 + rnd(12),
                     .deadline_us = rnd(4) == 0 ? w->now + 1 + rnd(400) : INT64_MAX,
                     .timeout_us = rnd(3) == 0 ? 1 + rnd(300) : 0};
  // expected outcome
  int want = 0;
  uint32_t level = 1;
  if (rows < 1 || (mbs > 0 && rows > mbs)) want = ERR_INVALID_ARGUMENT;
  else if (w->n_lv > 1 && prio > w->n_lv) want = ERR_INVALID_ARGUMENT;
  if (w->n_lv > 1 && prio <= w->n_lv) level = prio ? prio : w->c.default_priority_level;
  const bat_queue_policy *p = pol_of(w, level);
  if (!want && p->max_queue_size) {
    size_t count = 0;
    for (int i = 0; i < w->n; i++) count += w->r[i].state == ST_QUEUED && w->r[i].level == level;
    if (count >= p->max_queue_size) want = ERR_RESOURCE_EXHAUSTED;
  }
  int64_t t = p->default_timeout_us;
  if (p->allow_timeout_override && m->it.timeout_us > 0 && m->it.timeout_us < t) t = m->it.timeout_us;
  m->timeout_at = t > 0 ? w->now + t : INT64_MAX;
  m->level = level;
  err e;
  int rc = bat_enqueue(w->b, &m->it, &e);
  INV(rc == want);
  if (rc == 0) m->state = ST_QUEUED;
  w->n++;
}

static void setup(world *w, unsigned seed) {
  srand(seed);
  memset(w, 0, sizeof *w);
  static const int mbs_choice[] = {0, 1, 2, 4, 8, 16};
  bat_config c = {.max_batch_size = mbs_choice[rnd(6)], .n_executors = 1 + (int)rnd(MAXI),
                  .dynamic = rnd(5) != 0, .now = w_clock, .clock_ctx = w, .cancelled = w_cancelled};
  static const int64_t delays[] = {0, 0, 50, 200};
  c.max_queue_delay_us = delays[rnd(4)];
  size_t np = 0;
  for (int s = 1; s <= c.max_batch_size && np < 4; s *= 2)
    if (rnd(2)) w->pref[np++] = s;
  c.preferred_batch_sizes = w->pref;
  c.n_preferred = np;
  // sometimes levels over several 64-bit words of the batcher's bitmap of
  // non-empty levels, items spread thinly over them
  c.priority_levels = rnd(5) == 0 ? 60 + rnd(140) : rnd(4);
  c.default_priority_level = c.priority_levels ? 1 + rnd(c.priority_levels) : 0;
  static const int64_t timeouts[] = {0, 0, 100, 300};
  c.default_policy = (bat_queue_policy){.timeout_action = rnd(2) ? BAT_TIMEOUT_DELAY : BAT_TIMEOUT_REJECT,
                                        .default_timeout_us = timeouts[rnd(4)],
                                        .allow_timeout_override = (int)rnd(2),
                                        .max_queue_size = rnd(3) == 0 ? 5 + rnd(20) : 0};
  for (uint32_t l = 1; l <= c.priority_levels && c.n_level_policies < 3; l++) {
    if (rnd(c.priority_levels > 4 ? 40 : 2)) continue;
    w->lp[c.n_level_policies++] = (bat_level_policy){
        .level = l,
        .policy = {.timeout_action = rnd(2) ? BAT_TIMEOUT_DELAY : BAT_TIMEOUT_REJECT,
                   .default_timeout_us = timeouts[rnd(4)], .allow_timeout_override = (int)rnd(2),
                   .max_queue_size = rnd(3) == 0 ? 3 + rnd(10) : 0}};
  }
  c.level_policies = w->lp;
  static const double ratios[] = {0, 1, 1.5, 2, 4};
  c.pad = (int)rnd(2);
  c.pad_max_ratio = ratios[rnd(5)];
  w->c = c;
  w->n_lv = c.dynamic && c.priority_levels ? c.priority_levels : 1;
  if (!c.dynamic) {  // the batcher ignores dynamic_batching fields: so does the model
    w->c.n_level_policies = 0;
    w->c.default_policy = (bat_queue_policy){0};
  }
  err e;
  int rc = bat_create(&c, &w->b, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "seed %u: %s\n", seed, e.msg);
}

static int live_cancelled_queued(const world *w) {
  for (int i = 0; i < w->n; i++)
    if (w->r[i].state == ST_QUEUED && w->r[i].cancelled) return 1;
  return 0;
}

static void round_(unsigned seed, int ops, long totals[4]) {
  static world w_;
  world *w = &w_;
  setup(w, seed);
  if (!w->b) return;
  for (int op = 0; op < ops; op++) {
    uint32_t k = rnd(100);
    if (k < 45) {
      enqueue(w);
      pump(w);
    } else if (k < 52) {
      // client cancels: the batcher is not told; it notices on its own
      int i = w->n ? (int)rnd((uint32_t)w->n) : 0;
      if (w->n && w->r[i].state == ST_QUEUED) w->r[i].cancelled = 1;
    } else if (k < 72) {
      int inst = (int)rnd((uint32_t)w->c.n_executors);
      if (w->busy[inst]) {
        release(w, inst);
        pump(w);
      }
    } else if (k < 85) {
      // the timer fires: jump to the wakeup (or a bit), as the loop would
      int64_t wake = bat_next_wakeup(w->b);
      w->now = wake != INT64_MAX && wake - w->now < 1000 ? wake : w->now + 1 + rnd(100);
      pump(w);
    } else if (k < 95) {
      // quiet time before the wakeup: nothing may happen
      int64_t wake = bat_next_wakeup(w->b);
      if (live_cancelled_queued(w)) continue;
      int64_t room = wake == INT64_MAX ? 500 : wake - w->now;
      if (room > 1) w->now += rnd((uint32_t)(room > 500 ? 500 : room - 1));
      bat_batch bt;
      int got = bat_next_batch(w->b, &bt);
      INV(got == 0);
      if (got) check_batch(w, &bt);
      INV(bat_take_dropped(w->b) == NULL);
    } else {
      w->now += rnd(20);
      pump(w);
    }
  }
  // drain: finish everything running, let the queue empty, then flush
  for (int guard = 0; guard < 100000 && bat_queued(w->b); guard++) {
    for (int i = 0; i < w->c.n_executors; i++)
      if (w->busy[i]) release(w, i);
    w->now += 50;
    pump(w);
  }
  for (int i = 0; i < w->c.n_executors; i++)
    if (w->busy[i]) release(w, i);
  bat_flush(w->b);
  take_drops(w, 1);
  CHECK_EQ_INT(bat_queued(w->b), 0);
  CHECK_EQ_INT(bat_free_executors(w->b), w->c.n_executors);
  int left = 0;
  for (int i = 0; i < w->n; i++) left += w->r[i].state != ST_DONE && w->r[i].state != ST_NONE;
  CHECK_EQ_INT(left, 0);
  if (w->fails) fprintf(stderr, "seed %u: %d invariant failures (mbs %d dyn %d inst %d levels %u)\n", seed, w->fails,
                        w->c.max_batch_size, w->c.dynamic, w->c.n_executors, w->c.priority_levels);
  CHECK_EQ_INT(w->fails, 0);
  totals[0] += w->batches;
  totals[1] += w->multi;
  totals[2] += w->drops;
  totals[3] += w->mixed;
  bat_destroy(w->b);
}

int main(void) {
  long totals[4] = {0, 0, 0, 0};
  for (unsigned seed = 1; seed <= 60; seed++) round_(seed, 4000, totals);
  fprintf(stderr, "%ld batches (%ld of several requests, %ld of several sequence lengths), %ld drops\n", totals[0],
          totals[1], totals[3], totals[2]);
  // the rounds must have exercised batching and dropping, not just passed
  CHECK(totals[1] > 1000);
  CHECK(totals[2] > 1000);
  CHECK(totals[3] > 300);
  CHECK_DONE();
}
