// iter_harness.h: fake clock, sequences and step recording shared by the
// iteration scheduler tests. A step is recorded as "id:start+n" per work
// item, with "*" when the item samples, e.g. "0:4+1* 1:0+3".
#ifndef INFERD_TESTS_BATCHER_ITER_HARNESS_H
#define INFERD_TESTS_BATCHER_ITER_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "batcher/iter.h"
#include "check.h"

#define W_MAX_SEQS 64
#define W_MAX_PROMPT 256

typedef struct wreq {
  int id;
  int cancelled;
  int ended;  // times it came back from bat_iter_take_finished
} wreq;

typedef struct world {
  int64_t now;
  bat_kv_pool *pool;
  bat_iter *s;
  bat_iter_config cfg;
  wreq r[W_MAX_SEQS];
  bat_iter_seq q[W_MAX_SEQS];
  int32_t prompt[W_MAX_SEQS][W_MAX_PROMPT];
  int n;
  int stop_next[W_MAX_SEQS];  // report stop with its next sampled token
  char last[2048];
  bat_iter_step step;
  char ended[1024];  // "id:reason" of the sequences that ended at the last w_step / w_plan
} world;

static int64_t w_clock(void *ctx) {
  return ((world *)ctx)->now;
}
static int w_cancelled(void *p) {
  return ((wreq *)p)->cancelled;
}

// A pool of n_blocks x bt and a scheduler of max_seqs / budget.
static void w_init(world *w, int32_t n_blocks, int32_t bt, int caching, int max_seqs, int64_t budget) {
  memset(w, 0, sizeof *w);
  err e;
  bat_kv_config kc = {.n_blocks = n_blocks, .block_tokens = bt, .prefix_caching = caching};
  int rc = bat_kv_create(&kc, &w->pool, &e);
  CHECK_EQ_INT(rc, 0);
  w->cfg = (bat_iter_config){.max_num_seqs = max_seqs,
                             .max_num_batched_tokens = budget,
                             .pool = w->pool,
                             .now = w_clock,
                             .clock_ctx = w,
                             .cancelled = w_cancelled};
}

// Creates the scheduler from w->cfg (adjust cfg between w_init and w_start).
static void w_start(world *w) {
  err e;
  int rc = bat_iter_create(&w->cfg, &w->s, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "bat_iter_create: %s\n", e.msg);
}

static void w_close(world *w) {
  bat_iter_flush(w->s);
  for (bat_iter_seq *q = bat_iter_take_finished(w->s); q;) {
    bat_iter_seq *nx = q->next;
    bat_iter_seq_close(q);
    q = nx;
  }
  for (int i = 0; i < w->n; i++)
    if (w->q[i].tokens) bat_iter_seq_close(&w->q[i]);
  bat_iter_destroy(w->s);
  bat_kv_destroy(w->pool);
}

// Enqueues sequence id = w->n with prompt tokens base, base+1, ...
static int w_enq_full(world *w, int64_t prompt_len, int32_t base, int64_t max_tokens, uint32_t prio, int64_t deadline,
                      int64_t timeout, err *e) {
  int id = w->n++;
  w->r[id] = (wreq){.id = id};
  for (int64_t i = 0; i < prompt_len && i < W_MAX_PROMPT; i++) w->prompt[id][i] = base + (int32_t)i;
  w->q[id] = (bat_iter_seq){.prompt = w->prompt[id],
                            .prompt_len = prompt_len,
                            .max_tokens = max_tokens,
                            .priority = prio,
                            .deadline_us = deadline,
                            .timeout_us = timeout,
                            .payload = &w->r[id]};
  return bat_iter_enqueue(w->s, &w->q[id], e);
}

static int w_enq(world *w, int64_t prompt_len, int32_t base, int64_t max_tokens) {
  err e;
  int rc = w_enq_full(w, prompt_len, base, max_tokens, 0, INT64_MAX, 0, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "enqueue: %s\n", e.msg);
  return w->n - 1;
}

static int w_id(const world *w, const bat_iter_seq *q) {
  (void)w;
  return ((const wreq *)q->payload)->id;
}

static void w_take_ended(world *w) {
  w->ended[0] = 0;
  for (bat_iter_seq *q = bat_iter_take_finished(w->s); q; q = q->next) {
    size_t len = strlen(w->ended);
    const char *why = q->end == BAT_ITER_END_DROPPED ? "NCDTSI" + q->drop_reason
                      : q->end == BAT_ITER_END_STOP  ? "E"
                                                     : "L";
    snprintf(w->ended + len, sizeof w->ended - len, "%s%d:%c", len ? " " : "", w_id(w, q), *why);
    w->r[w_id(w, q)].ended++;
    CHECK_EQ_INT(q->state, BAT_ITER_DONE);
    CHECK_EQ_INT(q->kv.n_blocks, 0);
  }
}

// Plans a step and records it in w->last; returns the items.
static size_t w_plan(world *w) {
  size_t n = bat_iter_plan(w->s, &w->step);
  w->last[0] = 0;
  int64_t tok = 0;
  for (size_t i = 0; i < n; i++) {
    const bat_iter_work *x = &w->step.work[i];
    size_t len = strlen(w->last);
    snprintf(w->last + len, sizeof w->last - len, "%s%d:%lld+%lld%s", len ? " " : "", w_id(w, x->seq),
             (long long)x->start, (long long)x->n_tokens, x->sample ? "*" : "");
    tok += x->n_tokens;
  }
  CHECK_EQ_INT(tok, w->step.n_tokens);
  return n;
}

// The token sequence id samples as its k-th output: 1000 * (id + 1) + k.
static int32_t w_token(int id, int64_t k) {
  return 1000 * (id + 1) + (int32_t)k;
}

// Completes the planned step: every sampling item gets w_token, stop where stop_next is set.
static void w_complete(world *w) {
  int32_t sampled[W_MAX_SEQS];
  uint8_t stop[W_MAX_SEQS];
  for (size_t i = 0; i < w->step.n_work; i++) {
    const bat_iter_seq *q = w->step.work[i].seq;
    int id = w_id(w, q);
    sampled[i] = w_token(id, q->n_generated);
    stop[i] = (uint8_t)w->stop_next[id];
  }
  err e;
  if (w->step.n_work) CHECK_EQ_INT(bat_iter_complete(w->s, sampled, stop, &e), 0);
  w_take_ended(w);
}

// One whole step: plan, record, complete. Returns w->last.
static const char *w_step(world *w) {
  w_plan(w);
  w_complete(w);
  return w->last;
}

#endif
