// iter.c: iteration-level scheduling over a KV block pool. See iter.h for
// the rules; the comments here say why the code looks as it does.
//
// Both the waiting queue and the running set are doubly linked lists kept
// sorted by (level, arrival order), so the same walk gives admission order,
// step order and (from the tail) the preemption victim. New arrivals and
// admissions are the youngest of their level nearly always, so sorted
// inserts walk from the tail and stop at once.
#include "batcher/iter.h"

#include <stdlib.h>
#include <string.h>

typedef struct slist {
  bat_iter_seq *head, *tail;
  size_t n;
} slist;

struct bat_iter {
  bat_iter_config cfg;
  uint32_t n_lv, default_lv;
  int32_t bt;
  slist waiting, running;
  bat_iter_work *work;  // [max_num_seqs]: a step holds at most one item per running sequence
  size_t n_work;
  int in_step;
  uint64_t next_order;
  bat_iter_seq *fin_head, *fin_tail;
  uint64_t preempted_total, prefix_hit_tokens, computed_tokens, steps;
};

const char *bat_iter_end_str(bat_iter_end end) {
  switch (end) {
    case BAT_ITER_END_NONE:
      return "not ended";
    case BAT_ITER_END_STOP:
      return "stop";
    case BAT_ITER_END_LENGTH:
      return "length";
    case BAT_ITER_END_DROPPED:
      return "dropped";
  }
  return "unknown";
}

// --- sorted lists

static int before(const bat_iter_seq *a, const bat_iter_seq *b) {
  return a->level < b->level || (a->level == b->level && a->order < b->order);
}

static void list_insert_sorted(slist *l, bat_iter_seq *q) {
  bat_iter_seq *x = l->tail;
  while (x && before(q, x)) x = x->lprev;
  // q goes after x (at the head when x is NULL)
  q->lprev = x;
  q->lnext = x ? x->lnext : l->head;
  if (q->lnext)
    q->lnext->lprev = q;
  else
    l->tail = q;
  if (x)
    x->lnext = q;
  else
    l->head = q;
  l->n++;
}

static void list_unlink(slist *l, bat_iter_seq *q) {
  if (q->lprev)
    q->lprev->lnext = q->lnext;
  else
    l->head = q->lnext;
  if (q->lnext)
    q->lnext->lprev = q->lprev;
  else
    l->tail = q->lprev;
  q->lprev = q->lnext = NULL;
  l->n--;
}

static slist *list_of(bat_iter *s, const bat_iter_seq *q) {
  return q->state == BAT_ITER_RUNNING ? &s->running : &s->waiting;
}

// --- leaving

// Takes a sequence out for good: blocks released (full computed blocks stay
// cached for later prompts), onto the finished list.
static void finish(bat_iter *s, bat_iter_seq *q, bat_iter_end end, bat_drop_reason why) {
  list_unlink(list_of(s, q), q);
  bat_kv_release(s->cfg.pool, &q->kv);
  q->state = BAT_ITER_DONE;
  q->end = end;
  q->drop_reason = why;
  q->work_idx = -1;
  q->next = NULL;
  if (s->fin_tail)
    s->fin_tail->next = q;
  else
    s->fin_head = q;
  s->fin_tail = q;
}

// Back to the waiting queue at its place, to be recomputed. A victim already
// in this step leaves it (its item is blanked, compacted after planning)
// and gives its tokens back to the budget.
static void preempt(bat_iter *s, bat_iter_seq *q, int64_t *budget) {
  if (q->work_idx >= 0) {
    bat_iter_work *w = &s->work[q->work_idx];
    *budget += w->n_tokens;
    w->seq = NULL;
    q->work_idx = -1;
  }
  list_unlink(&s->running, q);
  bat_kv_release(s->cfg.pool, &q->kv);
  q->n_computed = 0;
  q->n_preemptions++;
  q->state = BAT_ITER_WAITING;
  list_insert_sorted(&s->waiting, q);
  s->preempted_total++;
}

// --- lifecycle

int bat_iter_create(const bat_iter_config *c, bat_iter **out, err *e) {
  if (!c->pool) return err_set(e, ERR_INVALID_ARGUMENT, "iteration scheduler needs a KV block pool");
  if (!c->now) return err_set(e, ERR_INVALID_ARGUMENT, "iteration scheduler needs a clock");
  if (c->max_num_seqs <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "max_num_seqs %d must be positive", c->max_num_seqs);
  if (c->max_num_batched_tokens < c->max_num_seqs)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "max_num_batched_tokens %lld is below max_num_seqs %d: a step could not hold every decode",
                   (long long)c->max_num_batched_tokens, c->max_num_seqs);
  if (c->max_model_len < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "max_model_len %lld is negative", (long long)c->max_model_len);
  if (c->max_prefill_chunk < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "max_prefill_chunk %lld is negative", (long long)c->max_prefill_chunk);
  if (c->default_timeout_us < 0) return err_set(e, ERR_INVALID_ARGUMENT, "default queue timeout is negative");
  if (c->priority_levels && (c->default_priority_level < 1 || c->default_priority_level > c->priority_levels))
    return err_set(e, ERR_INVALID_ARGUMENT, "default_priority_level %u is outside 1..priority_levels %u",
                   c->default_priority_level, c->priority_levels);
  bat_iter *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->work = calloc((size_t)c->max_num_seqs, sizeof *s->work);
  if (!s->work) {
    free(s);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  s->cfg = *c;
  s->n_lv = c->priority_levels ? c->priority_levels : 1;
  s->default_lv = c->priority_levels ? c->default_priority_level - 1 : 0;
  s->bt = bat_kv_block_tokens(c->pool);
  *out = s;
  return 0;
}

void bat_iter_destroy(bat_iter *s) {
  if (!s) return;
  free(s->work);
  free(s);
}

void bat_iter_seq_close(bat_iter_seq *q) {
  free(q->tokens);
  q->tokens = NULL;
  bat_kv_table_close(&q->kv);
}

// --- enqueue

int bat_iter_enqueue(bat_iter *s, bat_iter_seq *q, err *e) {
  if (q->state == BAT_ITER_WAITING || q->state == BAT_ITER_RUNNING)
    return err_set(e, ERR_INVALID_ARGUMENT, "the sequence is queued already");
  if (q->state == BAT_ITER_DONE && q->tokens)
    return err_set(e, ERR_INVALID_ARGUMENT, "the sequence ended: bat_iter_seq_close it before queueing it again");
  if (q->prompt_len < 1 || !q->prompt) return err_set(e, ERR_INVALID_ARGUMENT, "the prompt is empty");
  if (q->max_tokens < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "max_tokens %lld must be at least 1", (long long)q->max_tokens);
  uint32_t lvl = 0;
  if (s->n_lv > 1) {
    if (q->priority > s->n_lv)
      return err_set(e, ERR_INVALID_ARGUMENT, "priority %u is outside 1..priority_levels %u (0 = default)", q->priority,
                     s->n_lv);
    lvl = q->priority ? q->priority - 1 : s->default_lv;
  }
  int64_t mml = s->cfg.max_model_len;
  if (mml > 0 && q->prompt_len >= mml)
    return err_set(e, ERR_INVALID_ARGUMENT, "the prompt's %lld tokens leave no room in the model's context of %lld",
                   (long long)q->prompt_len, (long long)mml);
  int64_t limit = q->max_tokens > INT64_MAX - q->prompt_len ? INT64_MAX : q->prompt_len + q->max_tokens;
  if (mml > 0 && limit > mml) limit = mml;
  // The last token generated is never fed back: limit - 1 tokens need KV.
  const bat_kv_pool *pool = s->cfg.pool;
  int64_t need = bat_kv_blocks_for(pool, limit - 1);
  if (need > bat_kv_n_blocks(pool))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "the prompt's %lld tokens plus max_tokens %lld need %lld KV blocks of %d tokens; the pool has %d "
                   "in all",
                   (long long)q->prompt_len, (long long)q->max_tokens, (long long)need, s->bt, bat_kv_n_blocks(pool));
  if (s->cfg.max_queue_size && s->waiting.n >= s->cfg.max_queue_size)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "queue is full (max_queue_size %zu)", s->cfg.max_queue_size);

  q->tokens = malloc((size_t)limit * sizeof *q->tokens);
  if (!q->tokens)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for a sequence of %lld tokens", (long long)limit);
  if (bat_kv_table_init(pool, &q->kv, limit - 1, e) != 0) {
    free(q->tokens);
    q->tokens = NULL;
    return e ? e->code : ERR_RESOURCE_EXHAUSTED;
  }
  memcpy(q->tokens, q->prompt, (size_t)q->prompt_len * sizeof *q->tokens);
  int64_t now = s->cfg.now(s->cfg.clock_ctx);
  int64_t timeout = s->cfg.default_timeout_us;
  // Triton's PolicyQueue: a request may only shorten a non-zero default.
  if (s->cfg.allow_timeout_override && q->timeout_us > 0 && q->timeout_us < timeout) timeout = q->timeout_us;
  q->timeout_at_us = timeout > 0 && now <= INT64_MAX - timeout ? now + timeout : INT64_MAX;
  q->n_tokens = q->prompt_len;
  q->n_generated = 0;
  q->n_computed = 0;
  q->arrival_us = now;
  q->n_preemptions = 0;
  q->prefix_hit_tokens = 0;
  q->end = BAT_ITER_END_NONE;
  q->drop_reason = BAT_DROP_NONE;
  q->next = NULL;
  q->order = s->next_order++;
  q->level = lvl;
  q->limit = limit;
  q->work_idx = -1;
  q->ever_ran = 0;
  q->state = BAT_ITER_WAITING;
  list_insert_sorted(&s->waiting, q);
  return 0;
}

// --- planning

static void sweep(bat_iter *s, slist *l, int64_t now) {
  bat_iter_seq *q = l->head;
  while (q) {
    bat_iter_seq *nx = q->lnext;
    if (s->cfg.cancelled && s->cfg.cancelled(q->payload))
      finish(s, q, BAT_ITER_END_DROPPED, BAT_DROP_CANCELLED);
    else if (now >= q->deadline_us)
      finish(s, q, BAT_ITER_END_DROPPED, BAT_DROP_DEADLINE);
    else if (!q->ever_ran && now >= q->timeout_at_us)
      finish(s, q, BAT_ITER_END_DROPPED, BAT_DROP_QUEUE_TIMEOUT);
    q = nx;
  }
}

// What a sequence with left tokens to compute gets of the budget.
static int64_t chunk_of(const bat_iter *s, int64_t left, int64_t budget) {
  int64_t chunk = left < budget ? left : budget;
  if (s->cfg.max_prefill_chunk > 0 && chunk > s->cfg.max_prefill_chunk) chunk = s->cfg.max_prefill_chunk;
  return chunk;
}

static void add_work(bat_iter *s, bat_iter_seq *q, int64_t chunk, int64_t *budget) {
  q->work_idx = (int32_t)s->n_work;
  s->work[s->n_work++] = (bat_iter_work){
      .seq = q, .start = q->n_computed, .n_tokens = chunk, .sample = q->n_computed + chunk == q->n_tokens};
  *budget -= chunk;
}

// Schedules a running sequence's next chunk, preempting from the tail of the
// running set while its blocks do not fit. Returns 0 when q itself was
// preempted (it was the tail: nothing after it is left to schedule).
static int schedule_running(bat_iter *s, bat_iter_seq *q, int64_t *budget, size_t *n_preempted) {
  int64_t chunk = chunk_of(s, q->n_tokens - q->n_computed, *budget);
  if (chunk <= 0) return 1;
  bat_kv_pool *pool = s->cfg.pool;
  int64_t more = q->n_computed + chunk - q->kv.n_slots;
  if (more < 0) more = 0;
  while (bat_kv_blocks_needed(pool, &q->kv, more) > bat_kv_free_blocks(pool)) {
    bat_iter_seq *victim = s->running.tail;
    preempt(s, victim, budget);
    (*n_preempted)++;
    if (victim == q) return 0;
  }
  // a victim scheduled earlier returned its tokens: the budget only grew
  err e;
  if (bat_kv_reserve(pool, &q->kv, more, &e) != 0) return 1;  // cannot happen: checked above
  add_work(s, q, chunk, budget);
  return 1;
}

// Admits the waiting head if its chunk's blocks fit after its prefix hits.
static int admit(bat_iter *s, bat_iter_seq *q, int64_t *budget) {
  bat_kv_pool *pool = s->cfg.pool;
  bat_kv_hit hit = bat_kv_match(pool, q->tokens, q->n_tokens - 1);
  int64_t hit_tokens = (int64_t)hit.blocks * s->bt;
  int64_t chunk = chunk_of(s, q->n_tokens - hit_tokens, *budget);
  int64_t need = bat_kv_blocks_for(pool, hit_tokens + chunk) - hit.blocks;
  if (need > (int64_t)bat_kv_free_blocks(pool) - hit.evictable) return 0;
  int32_t got = bat_kv_acquire_prefix(pool, &q->kv, q->tokens, hit.blocks);
  hit_tokens = (int64_t)got * s->bt;  // the same as matched: nothing ran in between
  err e;
  if (bat_kv_reserve(pool, &q->kv, chunk, &e) != 0) {
    bat_kv_release(pool, &q->kv);
    return 0;
  }
  q->n_computed = hit_tokens;
  q->prefix_hit_tokens += hit_tokens;
  s->prefix_hit_tokens += (uint64_t)hit_tokens;
  list_unlink(&s->waiting, q);
  q->state = BAT_ITER_RUNNING;
  q->ever_ran = 1;
  list_insert_sorted(&s->running, q);
  add_work(s, q, chunk, budget);
  return 1;
}

size_t bat_iter_plan(bat_iter *s, bat_iter_step *out) {
  memset(out, 0, sizeof *out);
  if (s->in_step) return 0;  // complete the step in flight first
  int64_t now = s->cfg.now(s->cfg.clock_ctx);
  sweep(s, &s->running, now);
  sweep(s, &s->waiting, now);
  s->n_work = 0;
  int64_t budget = s->cfg.max_num_batched_tokens;
  size_t n_preempted = 0, n_pass1 = 0;
  // Decodes first: one token each and the budget holds them all, so a long
  // prompt's chunks never stall the streams already generating. Then the
  // prompts of running sequences still in prefill, in order.
  for (int decode = 1; decode >= 0; decode--) {
    bat_iter_seq *q = s->running.head;
    while (q && budget > 0) {
      int is_decode = q->n_tokens - q->n_computed == 1;
      if (q->work_idx >= 0 || is_decode != decode) {
        q = q->lnext;
        continue;
      }
      if (!schedule_running(s, q, &budget, &n_preempted)) break;
      q = q->lnext;
    }
    if (decode) n_pass1 = s->n_work;
  }
  if (n_preempted == 0)
    while (s->waiting.head && s->running.n < (size_t)s->cfg.max_num_seqs && s->n_work < (size_t)s->cfg.max_num_seqs &&
           budget > 0)
      if (!admit(s, s->waiting.head, &budget)) break;
  // compact out the items of sequences preempted after they were scheduled;
  // decodes stay first
  size_t n = 0;
  for (size_t i = 0; i < s->n_work; i++) {
    if (!s->work[i].seq) continue;
    if (i < n_pass1) out->n_decode++;
    s->work[n] = s->work[i];
    s->work[n].seq->work_idx = (int32_t)n;
    n++;
  }
  s->n_work = n;
  out->work = s->work;
  out->n_work = n;
  out->n_preempted = n_preempted;
  for (size_t i = 0; i < n; i++) {
    const bat_iter_work *w = &s->work[i];
    out->n_tokens += w->n_tokens;
    out->n_sample += w->sample != 0;
  }
  s->in_step = n > 0;
  if (n) s->steps++;
  return n;
}

int bat_iter_complete(bat_iter *s, const int32_t *sampled, const uint8_t *stop, err *e) {
  if (!s->in_step) return err_set(e, ERR_FAILED_PRECONDITION, "no step in flight");
  s->in_step = 0;
  for (size_t i = 0; i < s->n_work; i++) {
    bat_iter_work *w = &s->work[i];
    bat_iter_seq *q = w->seq;
    q->work_idx = -1;
    q->n_computed += w->n_tokens;
    s->computed_tokens += (uint64_t)w->n_tokens;
    bat_kv_commit(s->cfg.pool, &q->kv, q->tokens, q->n_computed);
    if (!w->sample) continue;
    q->tokens[q->n_tokens++] = sampled[i];
    q->n_generated++;
    if (stop && stop[i])
      finish(s, q, BAT_ITER_END_STOP, BAT_DROP_NONE);
    else if (q->n_tokens >= q->limit)
      finish(s, q, BAT_ITER_END_LENGTH, BAT_DROP_NONE);
  }
  s->n_work = 0;
  return 0;
}

void bat_iter_abort(bat_iter *s) {
  // The slots reserved for the step stay reserved: the next plan schedules
  // from n_computed again and reserves only what is missing.
  for (size_t i = 0; i < s->n_work; i++) s->work[i].seq->work_idx = -1;
  s->n_work = 0;
  s->in_step = 0;
}

bat_iter_seq *bat_iter_take_finished(bat_iter *s) {
  bat_iter_seq *h = s->fin_head;
  s->fin_head = s->fin_tail = NULL;
  return h;
}

void bat_iter_flush(bat_iter *s) {
  bat_iter_abort(s);
  while (s->running.head) finish(s, s->running.head, BAT_ITER_END_DROPPED, BAT_DROP_SHUTDOWN);
  while (s->waiting.head) finish(s, s->waiting.head, BAT_ITER_END_DROPPED, BAT_DROP_SHUTDOWN);
}

int64_t bat_iter_next_wakeup(const bat_iter *s) {
  int64_t t = INT64_MAX;
  const slist *ls[2] = {&s->running, &s->waiting};
  for (int k = 0; k < 2; k++)
    for (const bat_iter_seq *q = ls[k]->head; q; q = q->lnext) {
      if (q->deadline_us < t) t = q->deadline_us;
      if (!q->ever_ran && q->timeout_at_us < t) t = q->timeout_at_us;
    }
  return t;
}

void bat_iter_stats_get(const bat_iter *s, bat_iter_stats *out) {
  const bat_kv_pool *p = s->cfg.pool;
  *out = (bat_iter_stats){.running = s->running.n,
                          .waiting = s->waiting.n,
                          .preempted_total = s->preempted_total,
                          .blocks_used = bat_kv_used_blocks(p),
                          .blocks_cached = bat_kv_cached_blocks(p),
                          .blocks_free = bat_kv_free_blocks(p),
                          .prefix_hit_tokens = s->prefix_hit_tokens,
                          .computed_tokens = s->computed_tokens,
                          .steps = s->steps};
}
