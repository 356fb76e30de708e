// batcher.c: Triton-style dynamic batching over per-priority-level queues,
// with a timer heap for client deadlines and queue-policy timeouts. See
// batcher.h for the rules; the comments here say why the code looks as it
// does.
#include "batcher/batcher.h"

#include <math.h>
#include <stdlib.h>

// Cancelled items are found when a batch scan reaches them; this many more
// are checked per bat_next_batch call by a rolling sweep, so a cancelled
// request deep in a long queue still leaves in bounded time without an
// O(queue) walk per call.
#define SWEEP_PER_CALL 8

typedef struct blist {
  bat_item *head, *tail;
} blist;

typedef struct level {
  blist main;     // FIFO of requests whose queue timeout has not passed
  blist delayed;  // DELAY timeouts passed: served after main, in expiry order
  size_t count;   // both lists, for max_queue_size
  bat_queue_policy pol;
} level;

struct bat_batcher {
  bat_config cfg;
  int single;             // each request alone: no dynamic batching or max_batch_size <= 1
  int64_t max_rows;       // max_batch_size, for the scan
  int64_t max_pref;       // largest preferred size
  int pad;                // items of different seq_len may share a batch
  unsigned char *is_pref; // [0..max_rows]
  level *lv;
  uint32_t n_lv;
  // One bit per level holding items (count > 0): finding the next queued
  // item skips empty levels a word at a time. Walking them one by one made
  // every batch cost O(priority_levels): with 16M levels a victim's p50
  // went from 22 to 194 ms.
  uint64_t *busy_lv;
  uint32_t default_lv;    // 0-based
  size_t queued;
  bat_item **heap;        // min-heap on min(deadline, timeout_at)
  size_t heap_n, heap_cap;
  bat_item *drop_head, *drop_tail;
  bat_item *rover;        // next item the cancellation sweep looks at; NULL: start over
  int64_t hold_until;     // end of the queue delay of the batch held by the last call
  unsigned char *busy;    // per executor
  int n_free;
  int next_exec;          // where the round-robin search for a free executor starts
  // latency target (lattarget.h): the policy, the latest arrival, and per
  // executor its batch's dispatch time, rows and predicted compute
  bat_lt *lt;
  int64_t last_arrival;
  int64_t *x_start, *x_rows;
  double *x_pred;
};

const char *bat_drop_reason_str(bat_drop_reason r) {
  switch (r) {
    case BAT_DROP_NONE: return "not dropped";
    case BAT_DROP_CANCELLED: return "request cancelled while queued";
    case BAT_DROP_DEADLINE: return "request deadline exceeded while queued";
    case BAT_DROP_QUEUE_TIMEOUT: return "Request timeout expired";
    case BAT_DROP_SHUTDOWN: return "server is shutting down";
    case BAT_DROP_INSTANCE_FAILED: return "the model instance running its sequence failed permanently";
  }
  return "unknown";
}

// --- timer heap

static int64_t key_of(const bat_item *it) {
  return it->deadline_us < it->timeout_at_us ? it->deadline_us : it->timeout_at_us;
}

static void heap_set(bat_batcher *b, size_t i, bat_item *it) {
  b->heap[i] = it;
  it->heap_idx = i;
}

static void heap_up(bat_batcher *b, size_t i) {
  bat_item *it = b->heap[i];
  int64_t k = key_of(it);
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (key_of(b->heap[p]) <= k) break;
    heap_set(b, i, b->heap[p]);
    i = p;
  }
  heap_set(b, i, it);
}

static void heap_down(bat_batcher *b, size_t i) {
  bat_item *it = b->heap[i];
  int64_t k = key_of(it);
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= b->heap_n) break;
    if (c + 1 < b->heap_n && key_of(b->heap[c + 1]) < key_of(b->heap[c])) c++;
    if (key_of(b->heap[c]) >= k) break;
    heap_set(b, i, b->heap[c]);
    i = c;
  }
  heap_set(b, i, it);
}

static int heap_reserve(bat_batcher *b) {
  if (b->heap_n < b->heap_cap) return 0;
  size_t cap = b->heap_cap ? b->heap_cap * 2 : 64;
  bat_item **h = realloc(b->heap, cap * sizeof *h);
  if (!h) return -1;
  b->heap = h;
  b->heap_cap = cap;
  return 0;
}

// Room must have been reserved. Keys arriving in increasing order (the usual
// case: one default timeout, or deadlines of similar length) stop at once.
static void heap_push(bat_batcher *b, bat_item *it) {
  heap_set(b, b->heap_n++, it);
  heap_up(b, it->heap_idx);
}

static void heap_remove(bat_batcher *b, bat_item *it) {
  size_t i = it->heap_idx;
  if (i == SIZE_MAX) return;
  it->heap_idx = SIZE_MAX;
  bat_item *last = b->heap[--b->heap_n];
  if (last == it) return;
  heap_set(b, i, last);
  heap_up(b, i);
  heap_down(b, last->heap_idx);
}

// --- queue order: level 0 main, level 0 delayed, level 1 main, ...

static blist *list_of(bat_batcher *b, const bat_item *it) {
  level *l = &b->lv[it->level];
  return it->delayed ? &l->delayed : &l->main;
}

static void mark_busy(bat_batcher *b, uint32_t lvl) { b->busy_lv[lvl / 64] |= (uint64_t)1 << (lvl % 64); }
static void mark_idle(bat_batcher *b, uint32_t lvl) { b->busy_lv[lvl / 64] &= ~((uint64_t)1 << (lvl % 64)); }

// The first level at or after lvl that holds items; n_lv when none does.
static uint32_t next_busy(const bat_batcher *b, uint32_t lvl) {
  if (lvl >= b->n_lv) return b->n_lv;
  uint32_t w = lvl / 64, n_words = (b->n_lv + 63) / 64;
  uint64_t bits = b->busy_lv[w] & (~(uint64_t)0 << (lvl % 64));
  while (!bits) {
    if (++w >= n_words) return b->n_lv;
    bits = b->busy_lv[w];
  }
  return w * 64 + (uint32_t)__builtin_ctzll(bits);
}

static bat_item *first_from(const bat_batcher *b, uint32_t lvl, int delayed) {
  for (;;) {
    uint32_t l = next_busy(b, lvl);
    if (l >= b->n_lv) return NULL;
    if (l != lvl) delayed = 0;  // a later level: from its main list on
    if (!delayed && b->lv[l].main.head) return b->lv[l].main.head;
    if (b->lv[l].delayed.head) return b->lv[l].delayed.head;
    lvl = l + 1;
    delayed = 0;
  }
}

static bat_item *first(const bat_batcher *b) { return first_from(b, 0, 0); }

static bat_item *succ(const bat_batcher *b, const bat_item *it) {
  if (it->next) return it->next;
  if (!it->delayed) return first_from(b, it->level, 1);
  return first_from(b, it->level + 1, 0);
}

static void list_append(blist *l, bat_item *it) {
  it->next = NULL;
  it->prev = l->tail;
  if (l->tail) l->tail->next = it;
  else l->head = it;
  l->tail = it;
}

static void list_unlink(blist *l, bat_item *it) {
  if (it->prev) it->prev->next = it->next;
  else l->head = it->next;
  if (it->next) it->next->prev = it->prev;
  else l->tail = it->prev;
  it->next = it->prev = NULL;
}

// Takes the item out of every structure; the caller decides where it goes.
static void take_out(bat_batcher *b, bat_item *it) {
  if (b->rover == it) b->rover = succ(b, it);
  list_unlink(list_of(b, it), it);
  heap_remove(b, it);
  if (--b->lv[it->level].count == 0) mark_idle(b, it->level);
  b->queued--;
}

static void drop(bat_batcher *b, bat_item *it, bat_drop_reason why) {
  take_out(b, it);
  it->drop_reason = why;
  if (b->drop_tail) b->drop_tail->next = it;
  else b->drop_head = it;
  b->drop_tail = it;
}

static int is_cancelled(const bat_batcher *b, const bat_item *it) {
  return b->cfg.cancelled && b->cfg.cancelled(it->payload);
}

// --- lifecycle

int bat_create(const bat_config *c, bat_batcher **out, err *e) {
  if (c->n_executors <= 0) return err_set(e, ERR_INVALID_ARGUMENT, "batcher needs at least one executor");
  if (!c->now) return err_set(e, ERR_INVALID_ARGUMENT, "batcher needs a clock");
  if (c->max_batch_size < 0) return err_set(e, ERR_INVALID_ARGUMENT, "max_batch_size %d is negative", c->max_batch_size);
  int dyn = c->dynamic != 0;
  uint32_t n_lv = dyn && c->priority_levels ? c->priority_levels : 1;
  if (dyn) {
    if (c->max_queue_delay_us < 0) return err_set(e, ERR_INVALID_ARGUMENT, "max_queue_delay_microseconds is negative");
    for (size_t i = 0; i < c->n_preferred; i++)
      if (c->preferred_batch_sizes[i] < 1 || c->preferred_batch_sizes[i] > (c->max_batch_size > 1 ? c->max_batch_size : 1))
        return err_set(e, ERR_INVALID_ARGUMENT, "preferred_batch_size %d is outside 1..max_batch_size %d",
                       c->preferred_batch_sizes[i], c->max_batch_size);
    if (c->priority_levels && (c->default_priority_level < 1 || c->default_priority_level > c->priority_levels))
      return err_set(e, ERR_INVALID_ARGUMENT, "default_priority_level %u is outside 1..priority_levels %u",
                     c->default_priority_level, c->priority_levels);
    for (size_t i = 0; i < c->n_level_policies; i++)
      if (c->level_policies[i].level < 1 || c->level_policies[i].level > n_lv)
        return err_set(e, ERR_INVALID_ARGUMENT, "priority_queue_policy level %u is outside 1..priority_levels %u",
                       c->level_policies[i].level, c->priority_levels);
    if (c->pad && !(c->pad_max_ratio == 0 || (c->pad_max_ratio >= 1 && isfinite(c->pad_max_ratio))))
      return err_set(e, ERR_INVALID_ARGUMENT, "pad_max_ratio %g must be 0 (unbounded) or a finite number >= 1",
                     c->pad_max_ratio);
  }

  bat_batcher *b = calloc(1, sizeof *b);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  b->cfg = *c;
  b->cfg.preferred_batch_sizes = NULL;  // copied below; the caller's arrays may go away
  b->cfg.level_policies = NULL;
  b->single = !dyn || c->max_batch_size <= 1;
  b->pad = dyn && c->pad;
  b->max_rows = c->max_batch_size > 1 ? c->max_batch_size : 1;
  b->n_lv = n_lv;
  b->default_lv = dyn && c->priority_levels ? c->default_priority_level - 1 : 0;
  b->hold_until = INT64_MAX;
  b->n_free = c->n_executors;
  b->busy = calloc((size_t)c->n_executors, 1);
  b->lv = calloc(n_lv, sizeof *b->lv);
  b->busy_lv = calloc(((size_t)n_lv + 63) / 64, sizeof *b->busy_lv);
  b->is_pref = calloc((size_t)b->max_rows + 1, 1);
  if (!b->busy || !b->lv || !b->busy_lv || !b->is_pref) {
    bat_destroy(b);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (dyn && c->latency_target_us > 0 && !b->single) {
    bat_lt_config lc = {.target_us = c->latency_target_us, .max_rows = b->max_rows, .n_executors = c->n_executors,
                        .max_wait_us = c->max_queue_delay_us};
    b->x_start = calloc((size_t)c->n_executors, sizeof *b->x_start);
    b->x_rows = calloc((size_t)c->n_executors, sizeof *b->x_rows);
    b->x_pred = calloc((size_t)c->n_executors, sizeof *b->x_pred);
    if (!b->x_start || !b->x_rows || !b->x_pred) {
      bat_destroy(b);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (bat_lt_create(&lc, &b->lt, e) != 0) {
      bat_destroy(b);
      return e ? e->code : ERR_INVALID_ARGUMENT;
    }
  }
  if (dyn) {
    for (size_t i = 0; i < c->n_preferred; i++) b->is_pref[c->preferred_batch_sizes[i]] = 1;
    if (c->n_preferred == 0) b->is_pref[b->max_rows] = 1;
    for (int64_t s = 1; s <= b->max_rows; s++)
      if (b->is_pref[s]) b->max_pref = s;
    for (uint32_t l = 0; l < n_lv; l++) b->lv[l].pol = c->default_policy;
    for (size_t i = 0; i < c->n_level_policies; i++) b->lv[c->level_policies[i].level - 1].pol = c->level_policies[i].policy;
  }
  *out = b;
  return 0;
}

void bat_destroy(bat_batcher *b) {
  if (!b) return;
  free(b->heap);
  free(b->is_pref);
  free(b->lv);
  free(b->busy_lv);
  free(b->busy);
  bat_lt_destroy(b->lt);
  free(b->x_start);
  free(b->x_rows);
  free(b->x_pred);
  free(b);
}

// --- enqueue

int bat_enqueue(bat_batcher *b, bat_item *it, err *e) {
  if (it->rows < 1 || (b->cfg.max_batch_size > 0 && it->rows > b->cfg.max_batch_size))
    return err_set(e, ERR_INVALID_ARGUMENT, "batch size %lld is outside 1..max_batch_size %d",
                   (long long)it->rows, b->cfg.max_batch_size);
  if (b->pad && it->seq_len < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "sequence length %lld is negative", (long long)it->seq_len);
  uint32_t lvl = 0;
  if (b->n_lv > 1) {
    if (it->priority > b->n_lv)
      return err_set(e, ERR_INVALID_ARGUMENT, "priority %u is outside 1..priority_levels %u (0 = default)",
                     it->priority, b->n_lv);
    lvl = it->priority ? it->priority - 1 : b->default_lv;
  }
  level *l = &b->lv[lvl];
  if (l->pol.max_queue_size && l->count >= l->pol.max_queue_size) {
    if (b->n_lv > 1)
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "queue of priority level %u is full (max_queue_size %zu)", lvl + 1,
                     l->pol.max_queue_size);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "queue is full (max_queue_size %zu)", l->pol.max_queue_size);
  }
  int64_t now = b->cfg.now(b->cfg.clock_ctx);
  // Triton's PolicyQueue: the request may only shorten a non-zero default.
  int64_t timeout = l->pol.default_timeout_us;
  if (l->pol.allow_timeout_override && it->timeout_us > 0 && it->timeout_us < timeout) timeout = it->timeout_us;
  it->timeout_at_us = timeout > 0 && now <= INT64_MAX - timeout ? now + timeout : INT64_MAX;
  it->arrival_us = now;
  it->level = lvl;
  it->delayed = 0;
  it->drop_reason = BAT_DROP_NONE;
  it->heap_idx = SIZE_MAX;
  if (key_of(it) != INT64_MAX) {
    if (heap_reserve(b) != 0) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    heap_push(b, it);
  }
  list_append(&l->main, it);
  if (l->count++ == 0) mark_busy(b, lvl);
  b->queued++;
  if (b->lt) {
    bat_lt_arrival(b->lt, now, it->rows);
    b->last_arrival = now;
  }
  return 0;
}

// --- batch formation

// Applies every deadline and queue timeout that is due.
static void expire(bat_batcher *b, int64_t now) {
  while (b->heap_n && key_of(b->heap[0]) <= now) {
    bat_item *it = b->heap[0];
    if (it->deadline_us <= it->timeout_at_us) {
      drop(b, it, BAT_DROP_DEADLINE);
      continue;
    }
    if (b->lv[it->level].pol.timeout_action == BAT_TIMEOUT_REJECT) {
      drop(b, it, BAT_DROP_QUEUE_TIMEOUT);
      continue;
    }
    // DELAY: behind the unexpired requests of its level, still runs; only
    // the client deadline remains to watch.
    if (b->rover == it) b->rover = succ(b, it);
    level *l = &b->lv[it->level];
    list_unlink(&l->main, it);
    it->delayed = 1;
    list_append(&l->delayed, it);
    it->timeout_at_us = INT64_MAX;
    if (it->deadline_us == INT64_MAX) heap_remove(b, it);
    else heap_down(b, it->heap_idx);
  }
}

static void sweep_cancelled(bat_batcher *b) {
  if (!b->cfg.cancelled) return;
  size_t budget = b->queued < SWEEP_PER_CALL ? b->queued : SWEEP_PER_CALL;
  for (size_t i = 0; i < budget; i++) {
    bat_item *it = b->rover ? b->rover : first(b);
    if (!it) return;
    b->rover = succ(b, it);
    if (is_cancelled(b, it)) drop(b, it, BAT_DROP_CANCELLED);
  }
}

// Round robin over the free executors: a lightly loaded server still spreads
// its batches over every executor (and GPU) instead of reusing the first.
static int take_executor(bat_batcher *b) {
  int n = b->cfg.n_executors, x = b->next_exec;
  while (b->busy[x]) x = (x + 1) % n;
  b->next_exec = (x + 1) % n;
  b->busy[x] = 1;
  b->n_free--;
  return x;
}

// Moves the first n queued items into *out; they were checked by the scan.
static void emit(bat_batcher *b, size_t n, bat_batch *out) {
  bat_item *head = NULL, *tail = NULL;
  int64_t rows = 0, seq = 0;
  for (size_t i = 0; i < n; i++) {
    bat_item *it = first(b);
    take_out(b, it);
    rows += it->rows;
    if (b->pad && it->seq_len > seq) seq = it->seq_len;
    if (tail) tail->next = it;
    else head = it;
    tail = it;
  }
  out->items = head;
  out->n_items = n;
  out->rows = rows;
  out->seq_len = seq;
  out->executor = take_executor(b);
  if (b->lt) {
    int x = out->executor;
    b->x_start[x] = b->cfg.now(b->cfg.clock_ctx);
    b->x_rows[x] = rows;
    b->x_pred[x] = bat_lt_predict(b->lt, rows);
  }
}

// The first live item, dropping cancelled ones on the way.
static bat_item *live_head(bat_batcher *b) {
  bat_item *it;
  while ((it = first(b)) && is_cancelled(b, it)) drop(b, it, BAT_DROP_CANCELLED);
  return it;
}

// Whether an item of length l may join a batch whose lengths span lo..hi.
static int pad_fits(const bat_batcher *b, int64_t lo, int64_t hi, int64_t l) {
  double ratio = b->cfg.pad_max_ratio;
  if (ratio == 0) return 1;
  if (l < lo) lo = l;
  if (l > hi) hi = l;
  return (double)hi <= ratio * (double)lo;
}

// With a latency target the policy says go or wait for the batch the scan
// found (n items, pending rows, best_n: the largest preferred size met).
static int target_batch(bat_batcher *b, int64_t now, int64_t oldest, size_t n, size_t best_n, int64_t pending,
                        int send_now, bat_batch *out) {
  bat_lt_view v = {.now = now, .oldest_us = oldest, .last_arrival_us = b->last_arrival,
                   .pending_rows = pending < b->max_rows ? pending : b->max_rows,
                   .full = send_now || pending >= b->max_pref};
  bat_lt_decision d;
  bat_lt_decide(b->lt, &v, &d);
  if (!d.go) {
    b->hold_until = d.wait_until;
    return 0;
  }
  emit(b, best_n ? best_n : n, out);
  bat_lt_dispatched(b->lt, out->rows, now - oldest, d.early);
  return 1;
}

int bat_next_batch(bat_batcher *b, bat_batch *out) {
  int64_t now = b->cfg.now(b->cfg.clock_ctx);
  b->hold_until = INT64_MAX;
  expire(b, now);
  sweep_cancelled(b);
  if (b->n_free == 0 || b->queued == 0) return 0;

  if (b->single) {
    if (!live_head(b)) return 0;
    emit(b, 1, out);
    return 1;
  }

  // Triton's GetDynamicBatch, scanning from the head each time (no payload
  // can grow after it was handed out: an executor runs it at once). The scan
  // looks at no more than max_batch_size + 1 live items.
  int64_t pending = 0;
  size_t n = 0, best_n = 0;
  int send_now = 0;
  int64_t oldest = INT64_MAX;
  uint64_t shape = 0;
  int64_t lo = 0, hi = 0;  // shortest and longest seq_len so far (padding)
  bat_item *it = first(b);
  while (it) {
    if (is_cancelled(b, it)) {
      bat_item *next = succ(b, it);
      drop(b, it, BAT_DROP_CANCELLED);
      it = next;
      continue;
    }
    int64_t r = it->rows, l = it->seq_len;
    if (n == 0) {
      shape = it->shape_key;
      lo = hi = l;
    } else {
      // Passing the largest preferred size without meeting one: remember
      // the batch so far, but keep scanning to learn the queue delay.
      if (pending + r > b->max_pref && best_n == 0) best_n = n;
      if (pending + r > b->max_rows || it->shape_key != shape || (b->pad && !pad_fits(b, lo, hi, l))) {
        send_now = 1;
        break;
      }
      if (l < lo) lo = l;
      if (l > hi) hi = l;
    }
    pending += r;
    n++;
    if (it->arrival_us < oldest) oldest = it->arrival_us;
    if (pending <= b->max_rows && b->is_pref[pending]) best_n = n;
    it = succ(b, it);
  }
  if (n == 0) return 0;
  if (b->lt) return target_batch(b, now, oldest, n, best_n, pending, send_now, out);
  int64_t delay = b->cfg.max_queue_delay_us;
  int delay_exceeded = delay != 0 && now - oldest >= delay;
  if (best_n && !delay_exceeded) {
    emit(b, best_n, out);
    return 1;
  }
  if (send_now || pending >= b->max_pref || delay_exceeded || delay == 0) {
    emit(b, n, out);
    return 1;
  }
  b->hold_until = oldest + delay;
  return 0;
}

bat_item *bat_take_dropped(bat_batcher *b) {
  bat_item *d = b->drop_head;
  b->drop_head = b->drop_tail = NULL;
  return d;
}

void bat_flush(bat_batcher *b) {
  bat_item *it;
  while ((it = first(b))) drop(b, it, BAT_DROP_SHUTDOWN);
  b->hold_until = INT64_MAX;
}

void bat_release_executor(bat_batcher *b, int executor) {
  if (executor < 0 || executor >= b->cfg.n_executors || !b->busy[executor]) return;
  b->busy[executor] = 0;
  b->n_free++;
}

void bat_batch_done(bat_batcher *b, int executor) {
  if (executor < 0 || executor >= b->cfg.n_executors || !b->busy[executor]) return;
  if (b->lt) {
    int64_t now = b->cfg.now(b->cfg.clock_ctx);
    bat_lt_observe(b->lt, now, b->x_rows[executor], now - b->x_start[executor], b->x_pred[executor]);
  }
  bat_release_executor(b, executor);
}

int bat_latency_stats(const bat_batcher *b, bat_lt_stats *out) {
  if (!b->lt) return 0;
  bat_lt_stats_get(b->lt, out);
  return 1;
}

int64_t bat_next_wakeup(const bat_batcher *b) {
  int64_t w = b->heap_n ? key_of(b->heap[0]) : INT64_MAX;
  return b->hold_until < w ? b->hold_until : w;
}

size_t bat_queued(const bat_batcher *b) { return b->queued; }
int bat_free_executors(const bat_batcher *b) { return b->n_free; }
