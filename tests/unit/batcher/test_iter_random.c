// Randomized rounds of batcher/iter.c over batcher/kvblocks.c: random pool
// and step shapes, random arrivals (prompts from a few families sharing
// prefixes), stops, cancellations and deadlines, thousands of steps each,
// with the invariants checked after every plan and every completion:
//  - every item is a running sequence's next chunk, once, within the budget
//    and the running cap; decodes first; every decoding sequence is in the
//    step; something runs whenever anything is held;
//  - blocks in use == the distinct blocks of the running tables, each
//    block's refs == the tables holding it, a block in two tables is a
//    registered (shared, full) one, waiting sequences hold none; the pool's
//    own lists are consistent;
//  - admission is FIFO per level; a victim is the last running one; no
//    admission in a step that preempted;
//  - every request ends exactly once, with the reason it should, its output
//    tokens exactly those sampled for it (nothing lost or repeated by
//    recomputation), and (one level) within a bound of steps: (requests
//    alive at its arrival + 1) x (max_num_seqs + 1) x its longest length.
#include <stdlib.h>

#include "batcher/iter.h"
#include "check.h"

#define N_REQ 400
#define MAXP 48
#define MAXOUT 32

typedef struct rseq {
  bat_iter_seq q;
  int id;
  int cancelled;
  int stopped;  // we reported stop for it
  int ended;    // times it came back
  int enqueued;
  int64_t arrive_step, end_step;
  int64_t alive_before;   // requests alive at its arrival
  int64_t deadline_step;  // INT64_MAX none
  int32_t prompt[MAXP];
  int32_t out[MAXOUT + 1];
  int64_t n_out;
  int prev_state;
} rseq;

typedef struct round_ {
  int64_t now;
  bat_kv_pool *pool;
  bat_iter *s;
  bat_iter_config cfg;
  rseq *r;
  int n;
  int alive;
  int32_t n_blocks, bt;
  int single_level;
  uint64_t rng;
  int fails;
  long preempts, prefix_hits, refused, drops, steps, max_ratio_pct, aborts;
  int64_t done_steps;  // steps completed (an aborted one made no progress)
} round_;

static uint32_t rnd(round_ *w) {
  w->rng = w->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(w->rng >> 33);
}

static int64_t r_clock(void *ctx) {
  return ((round_ *)ctx)->now;
}
static int r_cancelled(void *p) {
  return ((rseq *)p)->cancelled;
}

#define FAILIF(cond, ...)                        \
  do {                                           \
    if (cond) {                                  \
      if (w->fails++ < 5) {                      \
        fprintf(stderr, "step %ld: ", w->steps); \
        fprintf(stderr, __VA_ARGS__);            \
        fprintf(stderr, "\n");                   \
      }                                          \
    }                                            \
  } while (0)

static int before(const rseq *a, const rseq *b) {
  return a->q.level < b->q.level || (a->q.level == b->q.level && a->id < b->id);
}

static void arrive(round_ *w) {
  if (w->n >= N_REQ) return;
  rseq *x = &w->r[w->n];
  memset(x, 0, sizeof *x);
  x->id = w->n;
  int64_t plen = 1 + rnd(w) % MAXP;
  int fam = (int)(rnd(w) % 4), shared = (int)(rnd(w) % 24);
  for (int64_t i = 0; i < plen; i++) x->prompt[i] = i < shared ? fam * 1000 + (int32_t)i : (int32_t)(rnd(w) % 8);
  x->q = (bat_iter_seq){.prompt = x->prompt,
                        .prompt_len = plen,
                        .max_tokens = 1 + rnd(w) % MAXOUT,
                        .priority = w->single_level ? 0 : rnd(w) % 4,
                        .deadline_us = INT64_MAX,
                        .payload = x};
  x->deadline_step = INT64_MAX;
  if (rnd(w) % 10 == 0) {
    x->deadline_step = w->steps + 1 + rnd(w) % 200;
    x->q.deadline_us = x->deadline_step * 10;
  }
  int64_t limit = plen + x->q.max_tokens;
  int too_long = w->cfg.max_model_len > 0 && plen >= w->cfg.max_model_len;
  if (w->cfg.max_model_len > 0 && limit > w->cfg.max_model_len) limit = w->cfg.max_model_len;
  int never_fits = (limit - 1 + w->bt - 1) / w->bt > w->n_blocks;
  err e;
  int rc = bat_iter_enqueue(w->s, &x->q, &e);
  w->n++;
  if (too_long || never_fits) {
    FAILIF(rc != ERR_INVALID_ARGUMENT, "request %d (prompt %lld, limit %lld) should be refused: rc %d", x->id,
           (long long)plen, (long long)limit, rc);
    w->refused++;
    return;
  }
  FAILIF(rc != 0, "request %d refused: %s", x->id, e.msg);
  if (rc) return;
  x->enqueued = 1;
  x->arrive_step = w->done_steps;
  x->alive_before = w->alive;
  x->prev_state = BAT_ITER_WAITING;
  w->alive++;
}

static void check_blocks(round_ *w) {
  int32_t *refs = calloc((size_t)w->n_blocks, sizeof *refs);
  for (int i = 0; i < w->n; i++) {
    const bat_iter_seq *q = &w->r[i].q;
    if (!w->r[i].enqueued) continue;
    if (q->state != BAT_ITER_RUNNING) {
      FAILIF(q->kv.n_blocks != 0, "request %d is %d but holds %d blocks", i, q->state, q->kv.n_blocks);
      continue;
    }
    FAILIF(q->kv.n_blocks != (q->kv.n_slots + w->bt - 1) / w->bt, "request %d: %d blocks for %lld slots", i,
           q->kv.n_blocks, (long long)q->kv.n_slots);
    FAILIF(q->kv.n_slots < q->n_computed, "request %d: %lld slots < %lld computed", i, (long long)q->kv.n_slots,
           (long long)q->n_computed);
    for (int32_t k = 0; k < q->kv.n_blocks; k++) {
      int32_t b = q->kv.blocks[k];
      for (int32_t j = 0; j < k; j++) FAILIF(q->kv.blocks[j] == b, "request %d holds block %d twice", i, b);
      refs[b]++;
    }
  }
  int32_t distinct = 0;
  for (int32_t b = 0; b < w->n_blocks; b++) {
    distinct += refs[b] > 0;
    FAILIF(bat_kv_block_refs(w->pool, b) != refs[b], "block %d: refs %d, held by %d tables", b,
           bat_kv_block_refs(w->pool, b), refs[b]);
    FAILIF(refs[b] > 1 && !bat_kv_block_registered(w->pool, b), "private block %d in %d tables", b, refs[b]);
  }
  FAILIF(bat_kv_used_blocks(w->pool) != distinct, "%d blocks in use, tables hold %d", bat_kv_used_blocks(w->pool),
         distinct);
  err e;
  FAILIF(bat_kv_check(w->pool, &e) != 0, "pool: %s", e.msg);
  free(refs);
}

static void one_step(round_ *w) {
  for (int i = 0; i < w->n; i++) w->r[i].prev_state = w->r[i].q.state;
  // our own view of what the sweep must drop
  for (int i = 0; i < w->n; i++) {
    rseq *x = &w->r[i];
    if (x->enqueued && !x->ended && !x->cancelled && rnd(w) % 500 == 0) x->cancelled = 1;
  }
  bat_iter_step st;
  size_t n = bat_iter_plan(w->s, &st);
  w->steps++;
  w->now += 10;
  int64_t tok = 0;
  size_t running = 0, waiting = 0;
  for (int i = 0; i < w->n; i++) {
    running += w->r[i].q.state == BAT_ITER_RUNNING;
    waiting += w->r[i].q.state == BAT_ITER_WAITING;
  }
  FAILIF((running || waiting) && n == 0, "no step with %zu running and %zu waiting", running, waiting);
  FAILIF(running > (size_t)w->cfg.max_num_seqs, "%zu running > max_num_seqs", running);
  FAILIF(n > running, "%zu items for %zu running", n, running);
  for (size_t k = 0; k < n; k++) {
    const bat_iter_work *x = &st.work[k];
    const bat_iter_seq *q = x->seq;
    FAILIF(q->state != BAT_ITER_RUNNING, "item %zu: request not running", k);
    FAILIF(x->start != q->n_computed || x->n_tokens < 1 || x->start + x->n_tokens > q->n_tokens,
           "item %zu: %lld+%lld with %lld computed of %lld", k, (long long)x->start, (long long)x->n_tokens,
           (long long)q->n_computed, (long long)q->n_tokens);
    FAILIF(x->sample != (x->start + x->n_tokens == q->n_tokens), "item %zu: sample flag", k);
    FAILIF(q->kv.n_slots < x->start + x->n_tokens, "item %zu: slots %lld for %lld", k, (long long)q->kv.n_slots,
           (long long)(x->start + x->n_tokens));
    FAILIF(k < st.n_decode && (x->n_tokens != 1 || !x->sample), "item %zu: a decode of %lld", k,
           (long long)x->n_tokens);
    FAILIF(q->work_idx != (int32_t)k, "item %zu: work_idx %d", k, q->work_idx);
    tok += x->n_tokens;
  }
  FAILIF(tok != st.n_tokens || tok > w->cfg.max_num_batched_tokens, "step tokens %lld (reported %lld)", (long long)tok,
         (long long)st.n_tokens);
  size_t admitted = 0, preempted = 0;
  for (int i = 0; i < w->n; i++) {
    rseq *x = &w->r[i];
    if (!x->enqueued || x->q.state == BAT_ITER_DONE) continue;
    if (x->q.state == BAT_ITER_RUNNING && x->q.n_tokens - x->q.n_computed == 1)
      FAILIF(x->q.work_idx < 0, "request %d decodes but is not in the step", i);
    if (x->prev_state == BAT_ITER_WAITING && x->q.state == BAT_ITER_RUNNING) {
      admitted++;
      for (int j = 0; j < w->n; j++)
        if (w->r[j].enqueued && w->r[j].q.state == BAT_ITER_WAITING)
          FAILIF(before(&w->r[j], x), "request %d admitted before %d", i, j);
    }
    if (x->prev_state == BAT_ITER_RUNNING && x->q.state == BAT_ITER_WAITING) {
      preempted++;
      for (int j = 0; j < w->n; j++)
        if (w->r[j].enqueued && w->r[j].q.state == BAT_ITER_RUNNING)
          FAILIF(before(x, &w->r[j]), "request %d preempted before younger %d", i, j);
      FAILIF(x->q.n_computed != 0, "preempted %d keeps %lld computed", i, (long long)x->q.n_computed);
    }
  }
  FAILIF(preempted != st.n_preempted, "%zu preempted, step says %zu", preempted, st.n_preempted);
  FAILIF(preempted && admitted, "admitted %zu in a step that preempted", admitted);
  w->preempts += (long)preempted;
  check_blocks(w);

  if (n && rnd(w) % 50 == 0) {
    // the engine failed the step: nothing of it counts, the next plan repeats it
    bat_iter_abort(w->s);
    w->aborts++;
  } else if (n) {
    w->done_steps++;
    int32_t sampled[64];
    uint8_t stop[64];
    for (size_t k = 0; k < n; k++) {
      rseq *x = (rseq *)st.work[k].seq->payload;
      sampled[k] = (int32_t)(rnd(w) % 8);
      stop[k] = st.work[k].sample && rnd(w) % 30 == 0;
      if (st.work[k].sample) {
        if (x->n_out < MAXOUT) x->out[x->n_out] = sampled[k];
        x->n_out++;
        if (stop[k]) x->stopped = 1;
      }
    }
    err e;
    FAILIF(bat_iter_complete(w->s, sampled, stop, &e) != 0, "complete: %s", e.msg);
  }
  for (bat_iter_seq *q = bat_iter_take_finished(w->s); q; q = q->next) {
    rseq *x = (rseq *)q->payload;
    x->ended++;
    x->end_step = w->done_steps;
    w->alive--;
    FAILIF(x->ended != 1, "request %d ended %d times", x->id, x->ended);
    FAILIF(q->state != BAT_ITER_DONE || q->kv.n_blocks != 0, "request %d ended holding blocks", x->id);
    FAILIF(q->n_generated != x->n_out || q->n_tokens != q->prompt_len + x->n_out,
           "request %d: %lld generated, %lld sampled", x->id, (long long)q->n_generated, (long long)x->n_out);
    FAILIF(q->n_generated > q->max_tokens, "request %d generated %lld > %lld", x->id, (long long)q->n_generated,
           (long long)q->max_tokens);
    FAILIF(memcmp(q->tokens, x->prompt, (size_t)q->prompt_len * sizeof(int32_t)) != 0, "request %d: prompt changed",
           x->id);
    FAILIF(memcmp(q->tokens + q->prompt_len, x->out, (size_t)x->n_out * sizeof(int32_t)) != 0,
           "request %d: output differs from the tokens sampled", x->id);
    int64_t limit = q->prompt_len + q->max_tokens;
    if (w->cfg.max_model_len > 0 && limit > w->cfg.max_model_len) limit = w->cfg.max_model_len;
    switch (q->end) {
      case BAT_ITER_END_STOP:
        FAILIF(!x->stopped, "request %d: STOP not reported", x->id);
        break;
      case BAT_ITER_END_LENGTH:
        FAILIF(x->stopped || q->n_tokens != limit, "request %d: LENGTH at %lld of %lld", x->id, (long long)q->n_tokens,
               (long long)limit);
        break;
      case BAT_ITER_END_DROPPED:
        w->drops++;
        if (q->drop_reason == BAT_DROP_CANCELLED)
          FAILIF(!x->cancelled, "request %d: not cancelled", x->id);
        else if (q->drop_reason == BAT_DROP_DEADLINE)
          FAILIF(x->deadline_step == INT64_MAX || w->now - 10 < q->deadline_us, "request %d: deadline early", x->id);
        else
          FAILIF(1, "request %d dropped: %s", x->id, bat_drop_reason_str(q->drop_reason));
        break;
      default:
        FAILIF(1, "request %d ended without a reason", x->id);
    }
    w->prefix_hits += (long)q->prefix_hit_tokens;
    int64_t len = MAXP + MAXOUT;  // the longest any request of the round can be
    if (w->cfg.max_model_len > 0 && len > w->cfg.max_model_len) len = w->cfg.max_model_len;
    if (w->single_level && q->end != BAT_ITER_END_DROPPED) {
      int64_t bound = (x->alive_before + 1) * (w->cfg.max_num_seqs + 1) * len;
      int64_t took = x->end_step - x->arrive_step;
      FAILIF(took > bound, "request %d took %lld steps, bound %lld", x->id, (long long)took, (long long)bound);
      long pct = (long)(100 * took / (bound > 0 ? bound : 1));
      if (pct > w->max_ratio_pct) w->max_ratio_pct = pct;
    }
  }
  check_blocks(w);
}

static void run_round(unsigned seed, long *tot) {
  round_ W, *w = &W;
  memset(w, 0, sizeof *w);
  w->rng = seed * 0x9e3779b97f4a7c15ULL + 1;
  static const int32_t bts[] = {1, 2, 4, 16};
  w->bt = bts[rnd(w) % 4];
  w->n_blocks = (int32_t)(4 + rnd(w) % (w->bt == 1 ? 120 : w->bt == 16 ? 10 : 40));
  w->single_level = seed % 2;
  bat_kv_config kc = {.n_blocks = w->n_blocks,
                      .block_tokens = w->bt,
                      .prefix_caching = rnd(w) % 4 != 0,
                      .hash_bits = seed % 5 == 0 ? 3 : 0};
  err e;
  CHECK_EQ_INT(bat_kv_create(&kc, &w->pool, &e), 0);
  int max_seqs = 1 + (int)(rnd(w) % 8);
  w->cfg = (bat_iter_config){.max_num_seqs = max_seqs,
                             .max_num_batched_tokens = max_seqs + rnd(w) % 24,
                             .max_model_len = rnd(w) % 3 == 0 ? 20 + rnd(w) % 60 : 0,
                             .max_prefill_chunk = rnd(w) % 3 == 0 ? 1 + rnd(w) % 8 : 0,
                             .priority_levels = w->single_level ? 0 : 4,
                             .default_priority_level = 2,
                             .pool = w->pool,
                             .now = r_clock,
                             .clock_ctx = w,
                             .cancelled = r_cancelled};
  CHECK_EQ_INT(bat_iter_create(&w->cfg, &w->s, &e), 0);
  w->r = calloc(N_REQ, sizeof *w->r);
  uint32_t rate = 1 + rnd(w) % 4;  // arrivals per 8 steps, on average
  while (w->n < N_REQ && w->fails == 0) {
    uint32_t a = rnd(w) % 8;
    if (a < rate) arrive(w);
    if (a == 0 && rate > 2) arrive(w);
    one_step(w);
  }
  for (int guard = 0; w->alive > 0 && guard < 200000 && w->fails == 0; guard++) one_step(w);
  CHECK_EQ_INT(w->alive, 0);
  int lost = 0;
  for (int i = 0; i < w->n; i++) lost += w->r[i].enqueued && w->r[i].ended != 1;
  CHECK_EQ_INT(lost, 0);
  CHECK_EQ_INT(bat_kv_used_blocks(w->pool), 0);
  CHECK_EQ_INT(bat_kv_free_blocks(w->pool), w->n_blocks);
  if (w->fails)
    fprintf(stderr, "seed %u: %d invariant failures (bt %d blocks %d seqs %d budget %lld)\n", seed, w->fails, w->bt,
            w->n_blocks, max_seqs, (long long)w->cfg.max_num_batched_tokens);
  CHECK_EQ_INT(w->fails, 0);
  bat_iter_stats s;
  bat_iter_stats_get(w->s, &s);
  CHECK_EQ_INT(s.preempted_total, (uint64_t)w->preempts);
  CHECK_EQ_INT(s.prefix_hit_tokens, (uint64_t)w->prefix_hits);
  tot[0] += w->steps;
  tot[6] += w->aborts;
  tot[1] += w->preempts;
  tot[2] += w->prefix_hits;
  tot[3] += w->refused;
  tot[4] += w->drops;
  if (w->max_ratio_pct > tot[5]) tot[5] = w->max_ratio_pct;
  for (int i = 0; i < w->n; i++)
    if (w->r[i].enqueued) bat_iter_seq_close(&w->r[i].q);
  free(w->r);
  bat_iter_destroy(w->s);
  bat_kv_destroy(w->pool);
}

int main(void) {
  long tot[7] = {0};
  for (unsigned seed = 1; seed <= 60; seed++) run_round(seed, tot);
  fprintf(stderr,
          "%ld steps (%ld aborted), %ld preemptions, %ld prefix-hit tokens, %ld refused at enqueue, %ld dropped; "
          "slowest request at %ld%% of its starvation bound\n",
          tot[0], tot[6], tot[1], tot[2], tot[3], tot[4], tot[5]);
  // the rounds must have exercised what they check, not just passed
  CHECK(tot[0] > 50000);
  CHECK(tot[1] > 1000);
  CHECK(tot[2] > 10000);
  CHECK(tot[3] > 100);
  CHECK(tot[4] > 100);
  CHECK(tot[6] > 500);
  CHECK_DONE();
}
