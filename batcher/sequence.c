// sequence.c: Triton's sequence batcher (see sequence.h for the rules): a
// hash of the held sequences by correlation ID, slots, a FIFO backlog of
// sequences waiting for a slot, and a list of idle sequences in expiry order.
#include "batcher/sequence.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_EVERY_US 100000
#define SWEEP_ITEMS 256

typedef struct bat_seq_seq {
  struct bat_seq_seq *hnext;  // hash chain
  uint64_t hash;
  uint64_t num;
  char *str;  // owned copy of a string ID; NULL for a number
  size_t len;
  bat_seq_item *head, *tail;  // queued items, in arrival order
  size_t n_queued;
  int slot;       // -1 while in the backlog
  int in_flight;  // its head item is in a batch
  int open;       // a START was queued and no END after it: a non-START item may follow
  int64_t last_us;
  unsigned char *state;  // its slot's state bytes (b->slot_state), NULL in the backlog or without state
  // the backlog (slot -1) or the idle list (nothing queued or running), never both
  struct bat_seq_seq *lprev, *lnext;
  int in_idle;
} seqs;

typedef struct slist {
  seqs *head, *tail;
} slist;

struct bat_seq {
  bat_seq_config cfg;
  int *exec_instance;
  int *preferred;
  int max_rows;  // max_batch_size, at least 1
  int per_inst;  // slots per instance: Direct max_rows, Oldest max_candidates
  int max_pref;  // Oldest: largest preferred size (max_rows when none)
  seqs **hash;
  size_t hcap, n_seqs;
  seqs **slots;  // [n_slots]: the sequence holding it, NULL when free
  // [n_slots]: implicit state, cfg.state_bytes per slot, allocated when the
  // slot is first taken and reused by its later sequences: the state held
  // is bounded by the slots, however many sequences wait in the backlog
  unsigned char **slot_state;
  int n_slots;
  int *inst_held;  // sequences held per instance
  int *inst_live;  // executors per instance not retired; 0: the instance is dead, no new sequence goes there
  slist backlog, idle;
  size_t queued, n_backlog;
  bat_seq_item *drop_head, *drop_tail;
  unsigned char *busy;  // per executor
  // per executor, the sequences of its running batch and whether each item
  // was an END: completed at bat_seq_release_executor (the items themselves
  // may be freed by then)
  seqs **run;  // [n_executors * max_rows]
  unsigned char *run_end;
  int *run_n;
  int n_free, next_exec;
  int64_t hold_until;
  // The backlog's cancelled and expired items are looked for every
  // SWEEP_EVERY_US while it holds any (SWEEP_ITEMS at a time, from where the
  // last sweep stopped): nothing else looks at them until their sequence has
  // a slot, which an idle sequence may keep for max_idle_us.
  int64_t next_sweep;
  seqs *rover;
  bat_seq_item **cand;  // scratch: a batch's candidates, [n_slots]
};

// --- lists

static void sl_append(slist *l, seqs *s) {
  s->lnext = NULL;
  s->lprev = l->tail;
  if (l->tail) l->tail->lnext = s;
  else l->head = s;
  l->tail = s;
}

static void sl_unlink(slist *l, seqs *s) {
  if (s->lprev) s->lprev->lnext = s->lnext;
  else l->head = s->lnext;
  if (s->lnext) s->lnext->lprev = s->lprev;
  else l->tail = s->lprev;
  s->lprev = s->lnext = NULL;
}

// --- the hash of sequences by ID

static uint64_t id_hash(const bat_seq_id *id) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the string, or a mix of the number
  if (id->str) {
    for (size_t i = 0; i < id->len; i++) h = (h ^ (unsigned char)id->str[i]) * 0x100000001b3ull;
    return h;
  }
  h = id->num * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

static int id_eq(const seqs *s, const bat_seq_id *id) {
  if (!id->str) return !s->str && s->num == id->num;
  return s->str && s->len == id->len && memcmp(s->str, id->str, id->len) == 0;
}

static seqs *find(const bat_seq *b, const bat_seq_id *id, uint64_t h) {
  for (seqs *s = b->hash[h & (b->hcap - 1)]; s; s = s->hnext)
    if (s->hash == h && id_eq(s, id)) return s;
  return NULL;
}

static int grow_hash(bat_seq *b) {
  size_t cap = b->hcap * 2;
  seqs **h = calloc(cap, sizeof *h);
  if (!h) return -1;
  for (size_t i = 0; i < b->hcap; i++)
    for (seqs *s = b->hash[i], *next; s; s = next) {
      next = s->hnext;
      s->hnext = h[s->hash & (cap - 1)];
      h[s->hash & (cap - 1)] = s;
    }
  free(b->hash);
  b->hash = h;
  b->hcap = cap;
  return 0;
}

static void unhash(bat_seq *b, seqs *s) {
  seqs **p = &b->hash[s->hash & (b->hcap - 1)];
  while (*p != s) p = &(*p)->hnext;
  *p = s->hnext;
  b->n_seqs--;
}

// --- lifecycle

int bat_seq_create(const bat_seq_config *c, bat_seq **out, err *e) {
  if (c->n_executors <= 0 || c->n_instances <= 0 || !c->exec_instance)
    return err_set(e, ERR_INVALID_ARGUMENT, "sequence batcher needs executors and instances");
  if (!c->now) return err_set(e, ERR_INVALID_ARGUMENT, "sequence batcher needs a clock");
  if (c->max_batch_size < 0 || c->max_idle_us <= 0 || c->max_queue_delay_us < 0 || c->max_candidates < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "sequence batcher: negative size, delay or idle time");
  for (int x = 0; x < c->n_executors; x++)
    if (c->exec_instance[x] < 0 || c->exec_instance[x] >= c->n_instances)
      return err_set(e, ERR_INVALID_ARGUMENT, "executor %d runs on instance %d, outside 0..%d", x,
                     c->exec_instance[x], c->n_instances - 1);
  int max_rows = c->max_batch_size > 1 ? c->max_batch_size : 1;
  for (size_t i = 0; i < c->n_preferred; i++)
    if (c->preferred[i] < 1 || c->preferred[i] > max_rows)
      return err_set(e, ERR_INVALID_ARGUMENT, "preferred_batch_size %d is outside 1..%d", c->preferred[i], max_rows);
  int per_inst = c->strategy == BAT_SEQ_OLDEST && c->max_candidates ? c->max_candidates : max_rows;
  int64_t n_slots = (int64_t)per_inst * c->n_instances;
  if (n_slots > (1 << 24)) return err_set(e, ERR_INVALID_ARGUMENT, "%" PRId64 " sequence slots is too many", n_slots);
  bat_seq *b = calloc(1, sizeof *b);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  b->cfg = *c;
  b->max_rows = max_rows;
  b->per_inst = per_inst;
  b->n_slots = (int)n_slots;
  b->hcap = 64;
  b->hold_until = INT64_MAX;
  b->n_free = c->n_executors;
  b->exec_instance = malloc((size_t)c->n_executors * sizeof *b->exec_instance);
  b->preferred = malloc((c->n_preferred ? c->n_preferred : 1) * sizeof *b->preferred);
  b->hash = calloc(b->hcap, sizeof *b->hash);
  b->slots = calloc((size_t)n_slots, sizeof *b->slots);
  b->cand = calloc((size_t)n_slots, sizeof *b->cand);
  b->slot_state = calloc((size_t)n_slots, sizeof *b->slot_state);
  b->inst_held = calloc((size_t)c->n_instances, sizeof *b->inst_held);
  b->inst_live = calloc((size_t)c->n_instances, sizeof *b->inst_live);
  b->busy = calloc((size_t)c->n_executors, 1);
  b->run = calloc((size_t)c->n_executors * (size_t)max_rows, sizeof *b->run);
  b->run_end = calloc((size_t)c->n_executors * (size_t)max_rows, 1);
  b->run_n = calloc((size_t)c->n_executors, sizeof *b->run_n);
  if (!b->exec_instance || !b->preferred || !b->hash || !b->slots || !b->cand || !b->slot_state || !b->inst_held ||
      !b->inst_live ||
      !b->busy ||
      !b->run || !b->run_end || !b->run_n) {
    bat_seq_destroy(b);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  memcpy(b->exec_instance, c->exec_instance, (size_t)c->n_executors * sizeof *b->exec_instance);
  for (int x = 0; x < c->n_executors; x++) b->inst_live[c->exec_instance[x]]++;
  if (c->n_preferred) memcpy(b->preferred, c->preferred, c->n_preferred * sizeof *b->preferred);
  b->cfg.exec_instance = b->exec_instance;
  b->cfg.preferred = b->preferred;
  b->max_pref = max_rows;
  if (c->n_preferred) {
    b->max_pref = 0;
    for (size_t i = 0; i < c->n_preferred; i++)
      if (c->preferred[i] > b->max_pref) b->max_pref = c->preferred[i];
  }
  *out = b;
  return 0;
}

void bat_seq_destroy(bat_seq *b) {
  if (!b) return;
  for (size_t i = 0; b->hash && i < b->hcap; i++)
    for (seqs *s = b->hash[i], *next; s; s = next) {
      next = s->hnext;
      free(s->str);
      free(s);
    }
  free(b->hash);
  for (int k = 0; b->slot_state && k < b->n_slots; k++) free(b->slot_state[k]);
  free(b->slot_state);
  free(b->slots);
  free(b->cand);
  free(b->inst_held);
  free(b->inst_live);
  free(b->busy);
  free(b->run);
  free(b->run_end);
  free(b->run_n);
  free(b->exec_instance);
  free(b->preferred);
  free(b);
}

// --- slots

// A free slot for a new sequence, on the instance holding the fewest (new
// sequences spread over the instances); -1 when all are taken.
static int free_slot(const bat_seq *b) {
  int best = -1;
  for (int i = 0; i < b->cfg.n_instances; i++)
    if (b->inst_live[i] && b->inst_held[i] < b->per_inst && (best < 0 || b->inst_held[i] < b->inst_held[best]))
      best = i;
  if (best < 0) return -1;
  for (int k = best * b->per_inst; k < (best + 1) * b->per_inst; k++)
    if (!b->slots[k]) return k;
  return -1;
}

// 0, or -1 when slot k's state bytes cannot be allocated (the sequence
// stays where it was).
static int take_slot(bat_seq *b, seqs *s, int k) {
  if (b->cfg.state_bytes) {
    if (!b->slot_state[k] && !(b->slot_state[k] = malloc(b->cfg.state_bytes))) return -1;
    // zeros from the start, even if the sequence's START item never runs (cancelled)
    memset(b->slot_state[k], 0, b->cfg.state_bytes);
    s->state = b->slot_state[k];
  }
  s->slot = k;
  b->slots[k] = s;
  b->inst_held[k / b->per_inst]++;
  return 0;
}

// The sequence leaves the batcher: its slot goes to the first backlogged one.
static void release(bat_seq *b, seqs *s) {
  if (s->in_idle) sl_unlink(&b->idle, s), s->in_idle = 0;
  if (b->rover == s) b->rover = s->lnext;
  if (s->slot >= 0) {
    int k = s->slot;
    b->slots[k] = NULL;
    b->inst_held[k / b->per_inst]--;
    // the slot freed is on one instance, the backlog's head may take any
    // slot: free_slot picks the least held instance, this one included
    seqs *w = b->backlog.head;
    if (w) {
      int nk = free_slot(b);
      if (nk >= 0 && take_slot(b, w, nk) == 0) {
        if (b->rover == w) b->rover = w->lnext;
        sl_unlink(&b->backlog, w);
        b->n_backlog--;
      }
    }
  } else {
    sl_unlink(&b->backlog, s);
    b->n_backlog--;
  }
  unhash(b, s);
  free(s->str);
  free(s);
}

// The sequence has nothing queued or running: it idles out after max_idle_us
// unless an item comes.
static void went_idle(bat_seq *b, seqs *s, int64_t now) {
  s->last_us = now;
  if (s->slot < 0) return;  // a backlogged sequence always has items; never here
  s->in_idle = 1;
  sl_append(&b->idle, s);
}

// --- enqueue

static void fmt_id(char *buf, size_t cap, const bat_seq_id *id) {
  if (id->str) snprintf(buf, cap, "%.*s", (int)(id->len > 64 ? 64 : id->len), id->str);
  else snprintf(buf, cap, "%" PRIu64, id->num);
}

int bat_seq_enqueue(bat_seq *b, bat_seq_item *it, const char *model, err *e) {
  if (!it->id.str ? it->id.num == 0 : it->id.len == 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "inference request to model '%s' must specify a non-zero or non-empty correlation ID", model);
  if (it->rows != 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "inference request to model '%s' must specify batch-size 1 due to requirements of sequence batcher",
                   model);
  uint64_t h = id_hash(&it->id);
  seqs *s = find(b, &it->id, h);
  int start = (it->flags & BAT_SEQ_START) != 0;
  if (!start && (!s || !s->open)) {
    char id[80];
    fmt_id(id, sizeof id, &it->id);
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "inference request for sequence %s to model '%s' must specify the START flag on the first request "
                   "of the sequence",
                   id, model);
  }
  int64_t now = b->cfg.now(b->cfg.clock_ctx);
  if (!s) {
    if (b->n_seqs + 1 > b->hcap && grow_hash(b) != 0) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    s = calloc(1, sizeof *s);
    if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (it->id.str && !(s->str = malloc(it->id.len ? it->id.len : 1))) {
      free(s);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (it->id.str) memcpy(s->str, it->id.str, it->id.len);
    s->num = it->id.num;
    s->len = it->id.len;
    s->hash = h;
    s->hnext = b->hash[h & (b->hcap - 1)];
    b->hash[h & (b->hcap - 1)] = s;
    b->n_seqs++;
    int k = free_slot(b);
    if (k < 0 || take_slot(b, s, k) != 0) {
      s->slot = -1;
      sl_append(&b->backlog, s);
      b->n_backlog++;
    }
  }
  if (s->in_idle) sl_unlink(&b->idle, s), s->in_idle = 0;
  s->open = !(it->flags & BAT_SEQ_END) && (start || s->open);
  s->last_us = now;
  it->seq = s;
  it->arrival_us = now;
  it->drop_reason = BAT_DROP_NONE;
  it->next = NULL;
  if (s->tail) s->tail->next = it;
  else s->head = it;
  s->tail = it;
  s->n_queued++;
  b->queued++;
  return 0;
}

// --- leaving

static bat_seq_item *pop_head(bat_seq *b, seqs *s) {
  bat_seq_item *it = s->head;
  s->head = it->next;
  if (!s->head) s->tail = NULL;
  it->next = NULL;
  s->n_queued--;
  b->queued--;
  return it;
}

// After an item of s left (ran or dropped) and nothing of s runs: s ends
// after its END item unless a new START queued behind it; else it idles
// when nothing more is queued.
static void after_item(bat_seq *b, seqs *s, int was_end, int64_t now) {
  if (was_end && !s->head) {
    release(b, s);
    return;
  }
  if (!s->head) went_idle(b, s, now);
}

static void drop_item(bat_seq *b, bat_seq_item *it, bat_drop_reason why) {
  it->drop_reason = why;
  it->next = NULL;
  if (b->drop_tail) b->drop_tail->next = it;
  else b->drop_head = it;
  b->drop_tail = it;
}

// Drops the cancelled or expired items at the head of s (not running).
static void clean_head(bat_seq *b, seqs *s, int64_t now) {
  while (s->head && !s->in_flight) {
    bat_seq_item *it = s->head;
    bat_drop_reason why = BAT_DROP_NONE;
    if (b->cfg.cancelled && b->cfg.cancelled(it->payload)) why = BAT_DROP_CANCELLED;
    else if (it->deadline_us <= now) why = BAT_DROP_DEADLINE;
    if (why == BAT_DROP_NONE) return;
    pop_head(b, s);
    drop_item(b, it, why);
    if (!s->head) {
      after_item(b, s, (it->flags & BAT_SEQ_END) != 0, now);
      return;
    }
  }
}

// Drops the cancelled and expired items of backlogged sequences, a bounded
// number per call; a sequence left with nothing is forgotten (it never ran).
static void sweep_backlog(bat_seq *b, int64_t now) {
  size_t budget = SWEEP_ITEMS;
  while (budget && b->n_backlog) {
    seqs *s = b->rover ? b->rover : b->backlog.head;
    b->rover = s->lnext;
    for (bat_seq_item **p = &s->head, *prev = NULL; *p && budget; budget--) {
      bat_seq_item *it = *p;
      bat_drop_reason why = BAT_DROP_NONE;
      if (b->cfg.cancelled && b->cfg.cancelled(it->payload)) why = BAT_DROP_CANCELLED;
      else if (it->deadline_us <= now) why = BAT_DROP_DEADLINE;
      if (why == BAT_DROP_NONE) {
        prev = it;
        p = &it->next;
        continue;
      }
      *p = it->next;
      if (s->tail == it) s->tail = prev;
      s->n_queued--;
      b->queued--;
      drop_item(b, it, why);
    }
    if (!s->head) release(b, s);  // a backlogged sequence holds no slot: nothing else to undo
    if (!b->rover) break;  // the end of the backlog: the next sweep starts over
  }
  b->next_sweep = now + SWEEP_EVERY_US;
}

static void expire_idle(bat_seq *b, int64_t now) {
  while (b->idle.head && now - b->idle.head->last_us >= b->cfg.max_idle_us) release(b, b->idle.head);
}

// --- batches

static int head_older(const void *x, const void *y) {
  const bat_seq_item *a = *(bat_seq_item *const *)x, *c = *(bat_seq_item *const *)y;
  return a->arrival_us < c->arrival_us ? -1 : a->arrival_us > c->arrival_us;
}

// The ready heads of slots lo..hi-1 into b->cand, in slot order; *oldest
// their earliest arrival.
static int ready_heads(bat_seq *b, int lo, int hi, int64_t now, int64_t *oldest, int *held) {
  int n = 0;
  *oldest = INT64_MAX;
  *held = 0;
  for (int k = lo; k < hi; k++) {
    seqs *s = b->slots[k];
    if (!s) continue;
    (*held)++;
    clean_head(b, s, now);
    if (b->slots[k] != s) continue;  // released by the clean-up
    if (!s->head || s->in_flight) continue;
    b->cand[n++] = s->head;
    if (s->head->arrival_us < *oldest) *oldest = s->head->arrival_us;
  }
  return n;
}

static void emit(bat_seq *b, int n, int x, bat_seq_batch *out) {
  bat_seq_item *head = NULL, *tail = NULL;
  for (int i = 0; i < n; i++) {
    seqs *s = b->cand[i]->seq;
    bat_seq_item *it = pop_head(b, s);
    s->in_flight = 1;
    // a START begins from the initial state (zeros), also for an ID whose
    // previous sequence just ended (back-to-back)
    if (s->state && (it->flags & BAT_SEQ_START)) memset(s->state, 0, b->cfg.state_bytes);
    it->state = s->state;
    b->run[(size_t)x * (size_t)b->max_rows + (size_t)i] = s;
    b->run_end[(size_t)x * (size_t)b->max_rows + (size_t)i] = (it->flags & BAT_SEQ_END) != 0;
    it->seq = NULL;
    if (tail) tail->next = it;
    else head = it;
    tail = it;
  }
  out->items = head;
  out->n_items = (size_t)n;
  out->rows = n;
  out->executor = x;
  b->run_n[x] = n;
  b->busy[x] = 1;
  b->n_free--;
}

// Direct: a batch for free executor x from its instance's slots.
static int direct_batch(bat_seq *b, int x, int64_t now, bat_seq_batch *out) {
  int inst = b->exec_instance[x], held;
  int64_t oldest;
  int n = ready_heads(b, inst * b->per_inst, (inst + 1) * b->per_inst, now, &oldest, &held);
  if (n == 0) return 0;
  int64_t delay = b->cfg.max_queue_delay_us;
  if (delay > 0 && now - oldest < delay && (float)n < b->cfg.min_slot_utilization * (float)held) {
    if (oldest + delay < b->hold_until) b->hold_until = oldest + delay;
    return 0;
  }
  emit(b, n, x, out);
  return 1;
}

// Oldest: the oldest ready heads of the candidates of executor x's
// instance, as the dynamic batcher takes a queue's.
static int oldest_batch(bat_seq *b, int x, int64_t now, bat_seq_batch *out) {
  int inst = b->exec_instance[x], held;
  int64_t oldest;
  int n = ready_heads(b, inst * b->per_inst, (inst + 1) * b->per_inst, now, &oldest, &held);
  if (n == 0) return 0;
  qsort(b->cand, (size_t)n, sizeof *b->cand, head_older);
  int take = n < b->max_rows ? n : b->max_rows;
  int best = 0;
  for (size_t i = 0; i < b->cfg.n_preferred; i++)
    if (b->preferred[i] <= take && b->preferred[i] > best) best = b->preferred[i];
  if (!b->cfg.n_preferred && take == b->max_rows) best = take;
  int64_t delay = b->cfg.max_queue_delay_us;
  int waited = delay == 0 || now - oldest >= delay;
  if (best && !waited) take = best;
  else if (!waited && take < b->max_pref) {
    if (oldest + delay < b->hold_until) b->hold_until = oldest + delay;
    return 0;
  }
  emit(b, take, x, out);
  return 1;
}

int bat_seq_next_batch(bat_seq *b, bat_seq_batch *out) {
  int64_t now = b->cfg.now(b->cfg.clock_ctx);
  b->hold_until = INT64_MAX;
  expire_idle(b, now);
  if (b->n_backlog && now >= b->next_sweep) sweep_backlog(b, now);
  if (b->n_free == 0) return 0;
  if (b->queued == 0) {
    // sequences whose only items were dropped idle from here
    return 0;
  }
  int n = b->cfg.n_executors;
  for (int i = 0; i < n; i++) {
    int x = (b->next_exec + i) % n;
    if (b->busy[x]) continue;
    int got = b->cfg.strategy == BAT_SEQ_DIRECT ? direct_batch(b, x, now, out) : oldest_batch(b, x, now, out);
    if (got) {
      b->next_exec = (x + 1) % n;
      return 1;
    }
  }
  return 0;
}

void bat_seq_release_executor(bat_seq *b, int x, int retire) {
  if (x < 0 || x >= b->cfg.n_executors || !b->busy[x]) return;
  int64_t now = b->cfg.now(b->cfg.clock_ctx);
  for (int i = 0; i < b->run_n[x]; i++) {
    seqs *s = b->run[(size_t)x * (size_t)b->max_rows + (size_t)i];
    s->in_flight = 0;
    after_item(b, s, b->run_end[(size_t)x * (size_t)b->max_rows + (size_t)i], now);
  }
  b->run_n[x] = 0;
  if (!retire) {
    b->busy[x] = 0;
    b->n_free++;
    return;
  }
  // its engine instance failed for good: the executor never runs again;
  // once the instance has none left, its sequences, bound to it, end with
  // their queued items, and new sequences go to the other instances
  int inst = b->exec_instance[x];
  if (--b->inst_live[inst] > 0) return;
  for (int k = inst * b->per_inst; k < (inst + 1) * b->per_inst; k++) {
    seqs *s = b->slots[k];
    if (!s || s->in_flight) continue;  // one in flight ends when its executor is released
    while (s->head) {
      bat_seq_item *it = pop_head(b, s);
      drop_item(b, it, BAT_DROP_INSTANCE_FAILED);
    }
    release(b, s);
  }
}

bat_seq_item *bat_seq_take_dropped(bat_seq *b) {
  bat_seq_item *d = b->drop_head;
  b->drop_head = b->drop_tail = NULL;
  return d;
}

void bat_seq_flush(bat_seq *b) {
  int64_t now = b->cfg.now(b->cfg.clock_ctx);
  for (size_t i = 0; i < b->hcap; i++)
    for (seqs *s = b->hash[i], *next; s; s = next) {
      next = s->hnext;
      while (s->head) {
        bat_seq_item *it = pop_head(b, s);
        it->seq = NULL;
        drop_item(b, it, BAT_DROP_SHUTDOWN);
      }
      if (!s->in_flight && s->slot >= 0 && !s->in_idle) went_idle(b, s, now);
    }
  b->hold_until = INT64_MAX;
}

int64_t bat_seq_next_wakeup(const bat_seq *b) {
  int64_t w = b->hold_until;
  if (b->n_backlog && b->next_sweep < w) w = b->next_sweep;
  if (b->idle.head) {
    int64_t t = b->idle.head->last_us + b->cfg.max_idle_us;
    if (t < w) w = t;
  }
  return w;
}

size_t bat_seq_queued(const bat_seq *b) { return b->queued; }
size_t bat_seq_sequences(const bat_seq *b) { return b->n_seqs; }
size_t bat_seq_backlog(const bat_seq *b) { return b->n_backlog; }
int bat_seq_free_executors(const bat_seq *b) { return b->n_free; }

// --- control values

int bat_seq_control_flag(dtype dt, const double false_true[2], int flag, void *dst, err *e) {
  double v = false_true[flag ? 1 : 0];
  switch (dt) {
    case DT_INT32: *(int32_t *)dst = (int32_t)v; return 0;
    case DT_FP32: *(float *)dst = (float)v; return 0;
    case DT_BOOL: *(uint8_t *)dst = v != 0; return 0;
    default: return err_set(e, ERR_INVALID_ARGUMENT, "a sequence control flag of type %s", dtype_wire_name(dt));
  }
}

int bat_seq_control_corrid(dtype dt, const bat_seq_id *id, void *dst, err *e) {
  uint64_t v = id->num;
  if (id->str) {
    v = 0;
    int ok = id->len > 0 && id->len <= 20;
    for (size_t i = 0; ok && i < id->len; i++) {
      unsigned d = (unsigned char)id->str[i] - '0';
      ok = d <= 9 && !__builtin_mul_overflow(v, 10, &v) && !__builtin_add_overflow(v, d, &v);
    }
    if (!ok)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "correlation ID '%.*s' is a string, but the model's CORRID control takes a number (%s)",
                     (int)(id->len > 64 ? 64 : id->len), id->str, dtype_wire_name(dt));
  }
  uint64_t max = dt == DT_UINT64 ? UINT64_MAX : dt == DT_INT64 ? INT64_MAX : dt == DT_UINT32 ? UINT32_MAX : INT32_MAX;
  if (v > max)
    return err_set(e, ERR_INVALID_ARGUMENT, "correlation ID %" PRIu64 " does not fit the model's CORRID control (%s)", v,
                   dtype_wire_name(dt));
  switch (dt) {
    case DT_UINT64: *(uint64_t *)dst = v; return 0;
    case DT_INT64: *(int64_t *)dst = (int64_t)v; return 0;
    case DT_UINT32: *(uint32_t *)dst = (uint32_t)v; return 0;
    case DT_INT32: *(int32_t *)dst = (int32_t)v; return 0;
    default: return err_set(e, ERR_INVALID_ARGUMENT, "a CORRID control of type %s", dtype_wire_name(dt));
  }
}
