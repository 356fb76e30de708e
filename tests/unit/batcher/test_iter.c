// Tests batcher/iter.c step by step with a fake clock: the exact work of
// every step (which sequence computes which positions, which samples),
// chunked prefill under the token budget, the running cap, preemption and
// recompute (with and without prefix hits), a victim leaving a step it was
// planned into, priorities, cancellation, deadlines and queue timeouts
// freeing blocks, refusals at enqueue, prefix sharing, stop and flush.
#include "iter_harness.h"

static void test_config(void) {
  world w;
  w_init(&w, 8, 4, 0, 4, 3);
  err e;
  bat_iter *s = NULL;
  CHECK_EQ_INT(bat_iter_create(&w.cfg, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "max_num_batched_tokens 3 is below max_num_seqs 4");
  w.cfg.max_num_batched_tokens = 4;
  w.cfg.pool = NULL;
  CHECK_EQ_INT(bat_iter_create(&w.cfg, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "KV block pool");
  w.cfg.pool = w.pool;
  w.cfg.priority_levels = 2;
  w.cfg.default_priority_level = 3;
  CHECK_EQ_INT(bat_iter_create(&w.cfg, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "default_priority_level 3");
  w.cfg.default_priority_level = 1;
  w_start(&w);
  w_close(&w);
}

static void test_decode(void) {
  world w;
  w_init(&w, 16, 4, 0, 4, 8);
  w_start(&w);
  CHECK_EQ_INT(w_plan(&w), 0);  // nothing queued: no step
  w_enq(&w, 3, 10, 3);
  CHECK_EQ_INT(w.q[0].state, BAT_ITER_WAITING);
  CHECK_EQ_STR(w_step(&w), "0:0+3*");
  CHECK_EQ_INT(w.step.n_decode, 0);
  CHECK_EQ_INT(w.q[0].state, BAT_ITER_RUNNING);
  CHECK_EQ_INT(w.q[0].n_computed, 3);
  CHECK_EQ_INT(w.q[0].kv.n_blocks, 1);
  CHECK_EQ_STR(w_step(&w), "0:3+1*");
  CHECK_EQ_INT(w.step.n_decode, 1);
  CHECK_EQ_INT(w.q[0].kv.n_blocks, 1);  // slots 0..3
  CHECK_EQ_STR(w_step(&w), "0:4+1*");   // the third token: max_tokens
  CHECK_EQ_STR(w.ended, "0:L");
  CHECK_EQ_INT(w.q[0].end, BAT_ITER_END_LENGTH);
  CHECK_EQ_INT(w.q[0].n_generated, 3);
  CHECK_EQ_INT(w.q[0].n_tokens, 6);
  int32_t want[6] = {10, 11, 12, 1000, 1001, 1002};
  CHECK(memcmp(w.q[0].tokens, want, sizeof want) == 0);
  CHECK_EQ_INT(bat_kv_used_blocks(w.pool), 0);
  CHECK_EQ_INT(w_plan(&w), 0);
  CHECK_EQ_STR(bat_iter_end_str(BAT_ITER_END_LENGTH), "length");
  err e;
  CHECK_EQ_INT(bat_iter_complete(w.s, NULL, NULL, &e), ERR_FAILED_PRECONDITION);
  w_close(&w);
}

// A prompt longer than the budget spreads over steps; a new sequence joins
// with what budget is left; decodes go first; the budget is filled exactly.
static void test_chunked_prefill(void) {
  world w;
  w_init(&w, 16, 4, 0, 4, 4);
  w_start(&w);
  w_enq(&w, 10, 10, 2);
  CHECK_EQ_STR(w_step(&w), "0:0+4");
  CHECK_EQ_INT(w.step.n_sample, 0);
  w_enq(&w, 5, 50, 2);
  CHECK_EQ_STR(w_step(&w), "0:4+4");  // no budget left for the newcomer
  CHECK_EQ_INT(w.q[1].state, BAT_ITER_WAITING);
  CHECK_EQ_STR(w_step(&w), "0:8+2* 1:0+2");
  CHECK_EQ_INT(w.step.n_tokens, 4);
  CHECK_EQ_STR(w_step(&w), "0:10+1* 1:2+3*");
  CHECK_EQ_INT(w.step.n_tokens, 4);
  CHECK_EQ_INT(w.step.n_decode, 1);
  CHECK_EQ_STR(w.ended, "0:L");
  CHECK_EQ_STR(w_step(&w), "1:5+1*");
  CHECK_EQ_STR(w.ended, "1:L");
  bat_iter_stats st;
  bat_iter_stats_get(w.s, &st);
  CHECK_EQ_INT(st.computed_tokens, 10 + 1 + 5 + 1);
  CHECK_EQ_INT(st.steps, 5);
  CHECK_EQ_INT(st.running, 0);
  CHECK_EQ_INT(st.blocks_used, 0);
  w_close(&w);
}

// max_num_seqs caps the running set; the budget is exactly filled by whole prompts.
static void test_caps(void) {
  world w;
  w_init(&w, 32, 4, 0, 2, 6);
  w_start(&w);
  for (int i = 0; i < 3; i++) w_enq(&w, 3, 10 * i, 2);
  CHECK_EQ_STR(w_step(&w), "0:0+3* 1:0+3*");
  CHECK_EQ_INT(w.step.n_tokens, 6);
  bat_iter_stats st;
  bat_iter_stats_get(w.s, &st);
  CHECK_EQ_INT(st.running, 2);
  CHECK_EQ_INT(st.waiting, 1);
  CHECK_EQ_STR(w_step(&w), "0:3+1* 1:3+1*");  // room in the budget, none in the running set
  CHECK_EQ_STR(w.ended, "0:L 1:L");
  CHECK_EQ_STR(w_step(&w), "2:0+3*");
  w_close(&w);
}

// The pool runs out as two sequences grow: the younger is preempted, never
// dropped (nor timed out while it waits again), recomputed from its prompt
// and its generated tokens when the older one has finished.
static void test_preempt_recompute(void) {
  world w;
  w_init(&w, 4, 2, 0, 4, 8);
  w.cfg.default_timeout_us = 10;
  w_start(&w);
  w_enq(&w, 3, 10, 5);
  w_enq(&w, 3, 20, 5);
  CHECK_EQ_STR(w_step(&w), "0:0+3* 1:0+3*");
  CHECK_EQ_INT(bat_kv_free_blocks(w.pool), 0);
  w.now += 5;
  CHECK_EQ_STR(w_step(&w), "0:3+1* 1:3+1*");  // both still in their second block
  w.now += 5;
  CHECK_EQ_STR(w_step(&w), "0:4+1*");
  CHECK_EQ_INT(w.step.n_preempted, 1);
  CHECK_EQ_INT(w.q[1].state, BAT_ITER_WAITING);
  CHECK_EQ_INT(w.q[1].n_computed, 0);
  CHECK_EQ_INT(w.q[1].kv.n_blocks, 0);
  CHECK_EQ_INT(w.q[1].n_tokens, 5);  // its generated tokens are kept
  CHECK_EQ_INT(w.q[1].n_preemptions, 1);
  bat_iter_stats st;
  bat_iter_stats_get(w.s, &st);
  CHECK_EQ_INT(st.preempted_total, 1);
  CHECK_EQ_INT(st.waiting, 1);
  CHECK_EQ_INT(st.blocks_used, 3);
  w.now += 5;
  CHECK_EQ_STR(w_step(&w), "0:5+1*");  // 3 blocks for the recompute, 1 free: it waits
  CHECK_EQ_STR(w.ended, "");
  w.now += 5;
  CHECK_EQ_STR(w_step(&w), "0:6+1*");
  CHECK_EQ_STR(w.ended, "0:L");
  w.now += 5;
  CHECK_EQ_STR(w_step(&w), "1:0+5*");
  CHECK_EQ_STR(w_step(&w), "1:5+1*");
  CHECK_EQ_STR(w_step(&w), "1:6+1*");
  CHECK_EQ_STR(w.ended, "1:L");
  int32_t want[8] = {20, 21, 22, 2000, 2001, 2002, 2003, 2004};
  CHECK(memcmp(w.q[1].tokens, want, sizeof want) == 0);
  int32_t want0[8] = {10, 11, 12, 1000, 1001, 1002, 1003, 1004};
  CHECK(memcmp(w.q[0].tokens, want0, sizeof want0) == 0);
  w_close(&w);
}

// The same with prefix caching: the preempted sequence's registered blocks
// outlive it, and its recompute is one token.
static void test_preempt_prefix_hit(void) {
  world w;
  w_init(&w, 5, 2, 1, 4, 8);
  w_start(&w);
  w_enq(&w, 3, 10, 3);
  w_enq(&w, 3, 20, 6);
  CHECK_EQ_STR(w_step(&w), "0:0+3* 1:0+3*");
  CHECK_EQ_STR(w_step(&w), "0:3+1* 1:3+1*");
  CHECK_EQ_INT(bat_kv_cached_blocks(w.pool), 4);
  CHECK_EQ_STR(w_step(&w), "0:4+1*");  // B needs a fifth block, A took the last: B preempts itself
  CHECK_EQ_INT(w.step.n_preempted, 1);
  CHECK_EQ_STR(w.ended, "0:L");
  CHECK_EQ_STR(w_step(&w), "1:4+1*");  // [20 21] [22 2000] found again
  CHECK_EQ_INT(w.q[1].prefix_hit_tokens, 4);
  bat_iter_stats st;
  bat_iter_stats_get(w.s, &st);
  CHECK_EQ_INT(st.prefix_hit_tokens, 4);
  CHECK_EQ_STR(w_step(&w), "1:5+1*");
  CHECK_EQ_STR(w_step(&w), "1:6+1*");
  CHECK_EQ_STR(w_step(&w), "1:7+1*");
  CHECK_EQ_STR(w.ended, "1:L");
  int32_t want[9] = {20, 21, 22, 2000, 2001, 2002, 2003, 2004, 2005};
  CHECK(memcmp(w.q[1].tokens, want, sizeof want) == 0);
  w_close(&w);
}

// An older (higher-priority) sequence in prefill needs the block a younger
// one's decode just took: the younger is preempted and leaves the step.
static void test_victim_leaves_step(void) {
  world w;
  w_init(&w, 4, 2, 0, 4, 4);
  w.cfg.priority_levels = 2;
  w.cfg.default_priority_level = 2;
  w_start(&w);
  err e;
  CHECK_EQ_INT(w_enq_full(&w, 1, 5, 4, 2, INT64_MAX, 0, &e), 0);  // B: low
  CHECK_EQ_STR(w_step(&w), "0:0+1*");
  CHECK_EQ_INT(w_enq_full(&w, 7, 70, 1, 1, INT64_MAX, 0, &e), 0);  // A: high, 4 blocks at most
  CHECK_EQ_STR(w_step(&w), "0:1+1* 1:0+3");
  CHECK_EQ_STR(w_step(&w), "1:3+3");  // B's decode planned, then preempted for A's chunk
  CHECK_EQ_INT(w.step.n_preempted, 1);
  CHECK_EQ_INT(w.step.n_decode, 0);
  CHECK_EQ_INT(w.q[0].state, BAT_ITER_WAITING);
  CHECK_EQ_INT(w.q[0].work_idx, -1);
  CHECK_EQ_STR(w_step(&w), "1:6+1*");
  CHECK_EQ_STR(w.ended, "1:L");
  CHECK_EQ_STR(w_step(&w), "0:0+3*");
  CHECK_EQ_STR(w_step(&w), "0:3+1*");
  CHECK_EQ_STR(w.ended, "0:L");
  int32_t want[5] = {5, 1000, 1001, 1002, 1003};
  CHECK(memcmp(w.q[0].tokens, want, sizeof want) == 0);
  w_close(&w);
}

// Two preemptions in one step, youngest first (C before B); they go back
// to the waiting queue in arrival order and come back in it.
static void test_preemption_order(void) {
  world w;
  w_init(&w, 8, 2, 0, 4, 6);
  w.cfg.priority_levels = 2;
  w.cfg.default_priority_level = 2;
  w_start(&w);
  err e;
  w_enq(&w, 2, 10, 6);  // B, low (the default level)
  w_enq(&w, 2, 20, 6);  // C, low
  CHECK_EQ_STR(w_step(&w), "0:0+2* 1:0+2*");
  CHECK_EQ_INT(w_enq_full(&w, 12, 100, 1, 1, INT64_MAX, 0, &e), 0);  // A, high: 6 blocks at most
  CHECK_EQ_STR(w_step(&w), "0:2+1* 1:2+1* 2:0+4");
  CHECK_EQ_STR(w_step(&w), "0:3+1* 1:3+1* 2:4+4");
  CHECK_EQ_INT(bat_kv_free_blocks(w.pool), 0);
  // B's decode needs a block: C goes; A's chunk needs 2 more: B goes too
  CHECK_EQ_STR(w_step(&w), "2:8+4*");
  CHECK_EQ_INT(w.step.n_preempted, 2);
  CHECK_EQ_INT(w.step.n_decode, 0);
  CHECK_EQ_STR(w.ended, "2:L");
  CHECK_EQ_INT(w.q[0].state, BAT_ITER_WAITING);
  CHECK_EQ_INT(w.q[1].state, BAT_ITER_WAITING);
  CHECK_EQ_STR(w_step(&w), "0:0+5* 1:0+1");
  CHECK_EQ_STR(w_step(&w), "0:5+1* 1:1+4*");
  w_close(&w);
}

static void test_priorities(void) {
  world w;
  w_init(&w, 16, 4, 0, 1, 4);
  w.cfg.priority_levels = 3;
  w.cfg.default_priority_level = 2;
  w_start(&w);
  err e;
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 1, 3, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 1, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 1, 1, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 1, 1, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 1, 4, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "priority 4 is outside 1..priority_levels 3");
  CHECK_EQ_STR(w_step(&w), "2:0+2*");
  CHECK_EQ_STR(w_step(&w), "3:0+2*");
  CHECK_EQ_STR(w_step(&w), "1:0+2*");
  CHECK_EQ_STR(w_step(&w), "0:0+2*");
  CHECK_EQ_INT(w_plan(&w), 0);
  w_close(&w);
}

static void test_cancel_deadline_timeout(void) {
  world w;
  w_init(&w, 8, 4, 0, 2, 8);
  w.cfg.default_timeout_us = 500;
  w.cfg.allow_timeout_override = 1;
  w_start(&w);
  err e;
  w_enq(&w, 4, 0, 10);
  w_enq(&w, 4, 10, 10);
  CHECK_EQ_INT(w_enq_full(&w, 4, 20, 10, 0, 5000, 0, &e), 0);
  CHECK_EQ_INT(w_enq_full(&w, 4, 30, 10, 0, INT64_MAX, 300, &e), 0);
  CHECK_EQ_INT(bat_iter_next_wakeup(w.s), 300);
  CHECK_EQ_STR(w_step(&w), "0:0+4* 1:0+4*");
  CHECK_EQ_INT(bat_iter_next_wakeup(w.s), 300);
  w.now = 100;
  CHECK_EQ_STR(w_step(&w), "0:4+1* 1:4+1*");
  CHECK_EQ_INT(bat_kv_used_blocks(w.pool), 4);
  w.r[0].cancelled = 1;
  w.now = 200;
  w_plan(&w);
  CHECK_EQ_STR(w.last, "1:5+1* 2:0+4*");  // the cancelled one's blocks went at once: C joins
  CHECK_EQ_INT(w.q[0].state, BAT_ITER_DONE);
  CHECK_EQ_INT(w.q[0].drop_reason, BAT_DROP_CANCELLED);
  CHECK_EQ_INT(w.q[0].kv.n_blocks, 0);
  CHECK_EQ_INT(bat_kv_used_blocks(w.pool), 3);
  w_complete(&w);
  CHECK_EQ_STR(w.ended, "0:C");
  w.now = 300;  // D's own queue timeout (inclusive)
  CHECK_EQ_STR(w_step(&w), "1:6+1* 2:4+1*");
  CHECK_EQ_STR(w.ended, "3:T");
  CHECK_EQ_INT(bat_iter_next_wakeup(w.s), 5000);
  w.now = 5000;  // C's deadline, while running
  CHECK_EQ_STR(w_step(&w), "1:7+1*");
  CHECK_EQ_STR(w.ended, "2:D");
  CHECK_EQ_INT(w.q[2].end, BAT_ITER_END_DROPPED);
  CHECK_EQ_INT(bat_kv_used_blocks(w.pool), 2);
  CHECK_EQ_INT(bat_iter_next_wakeup(w.s), INT64_MAX);
  w_close(&w);
}

static void test_refusals(void) {
  world w;
  w_init(&w, 4, 4, 0, 4, 8);
  w.cfg.max_queue_size = 2;
  w_start(&w);
  err e;
  // 10 + 7 tokens: 16 fed back at most, 4 blocks: fits; 10 + 8 does not
  CHECK_EQ_INT(w_enq_full(&w, 10, 0, 8, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "prompt's 10 tokens plus max_tokens 8 need 5 KV blocks of 4 tokens; the pool has 4");
  CHECK(w.q[0].tokens == NULL);
  CHECK_EQ_INT(w_enq_full(&w, 3, 0, INT64_MAX, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);  // no overflow
  CHECK_CONTAINS(e.msg, "the pool has 4");
  CHECK_EQ_INT(w_enq_full(&w, 0, 0, 8, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "prompt is empty");
  CHECK_EQ_INT(w_enq_full(&w, 3, 0, 0, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "max_tokens 0");
  CHECK_EQ_INT(w_enq_full(&w, 10, 0, 7, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 7, 0, INT64_MAX, 0, &e), 0);
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 7, 0, INT64_MAX, 0, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "max_queue_size 2");
  w_close(&w);

  w_init(&w, 64, 4, 0, 4, 16);
  w.cfg.max_model_len = 12;
  w_start(&w);
  CHECK_EQ_INT(w_enq_full(&w, 12, 0, 1, 0, INT64_MAX, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "context of 12");
  w_enq(&w, 10, 0, 100);  // capped by the context: 2 tokens
  CHECK_EQ_STR(w_step(&w), "1:0+10*");
  CHECK_EQ_STR(w_step(&w), "1:10+1*");
  CHECK_EQ_STR(w.ended, "1:L");
  CHECK_EQ_INT(w.q[1].n_tokens, 12);
  w_close(&w);
}

// Two requests with one prompt share its full blocks; a prompt that is all
// cached still computes its last token.
static void test_prefix_sharing(void) {
  world w;
  w_init(&w, 16, 4, 1, 4, 16);
  w_start(&w);
  w_enq(&w, 9, 1, 3);
  CHECK_EQ_STR(w_step(&w), "0:0+9*");
  w_enq(&w, 9, 1, 2);
  CHECK_EQ_STR(w_step(&w), "0:9+1* 1:8+1*");
  CHECK_EQ_INT(w.q[1].prefix_hit_tokens, 8);
  CHECK_EQ_INT(w.q[1].kv.blocks[0], w.q[0].kv.blocks[0]);
  CHECK_EQ_INT(w.q[1].kv.blocks[1], w.q[0].kv.blocks[1]);
  CHECK(w.q[1].kv.blocks[2] != w.q[0].kv.blocks[2]);
  CHECK_EQ_INT(bat_kv_block_refs(w.pool, w.q[0].kv.blocks[0]), 2);
  CHECK_EQ_INT(bat_kv_used_blocks(w.pool), 4);
  w_enq(&w, 8, 1, 1);  // 8 tokens: the last must be computed, so only the first block hits
  CHECK_EQ_STR(w_step(&w), "0:10+1* 1:9+1* 2:4+4*");
  CHECK_EQ_STR(w.ended, "0:L 1:L 2:L");
  bat_iter_stats st;
  bat_iter_stats_get(w.s, &st);
  CHECK_EQ_INT(st.prefix_hit_tokens, 12);
  CHECK_EQ_INT(st.blocks_used, 0);
  CHECK_EQ_INT(st.blocks_cached, 2);  // [1..4] [5..8]: no other block was full and computed
  w_close(&w);
}

static void test_stop(void) {
  world w;
  w_init(&w, 16, 4, 0, 4, 16);
  w_start(&w);
  w_enq(&w, 2, 7, 10);
  w_enq(&w, 2, 8, 10);
  CHECK_EQ_STR(w_step(&w), "0:0+2* 1:0+2*");
  w.stop_next[1] = 1;
  CHECK_EQ_STR(w_step(&w), "0:2+1* 1:2+1*");
  CHECK_EQ_STR(w.ended, "1:E");
  CHECK_EQ_INT(w.q[1].end, BAT_ITER_END_STOP);
  CHECK_EQ_INT(w.q[1].n_generated, 2);
  CHECK_EQ_INT(w.q[1].tokens[3], 2001);  // the stop token is the last one kept
  CHECK_EQ_STR(w_step(&w), "0:3+1*");
  w_close(&w);
}

static void test_flush(void) {
  world w;
  w_init(&w, 16, 4, 1, 1, 16);
  w_start(&w);
  w_enq(&w, 5, 0, 10);
  w_enq(&w, 5, 0, 10);
  CHECK_EQ_STR(w_step(&w), "0:0+5*");
  w_plan(&w);  // a step in flight, then shutdown
  bat_iter_flush(w.s);
  w_take_ended(&w);
  CHECK_EQ_STR(w.ended, "0:S 1:S");
  CHECK_EQ_INT(bat_kv_used_blocks(w.pool), 0);
  err e;
  CHECK_EQ_INT(bat_iter_complete(w.s, NULL, NULL, &e), ERR_FAILED_PRECONDITION);
  CHECK_EQ_INT(w_plan(&w), 0);
  w_close(&w);
}

// max_prefill_chunk: prompts share the budget instead of the oldest taking it.
static void test_prefill_chunk_cap(void) {
  world w;
  w_init(&w, 32, 4, 0, 4, 8);
  w.cfg.max_prefill_chunk = 3;
  w_start(&w);
  w_enq(&w, 7, 0, 1);
  w_enq(&w, 5, 100, 1);
  CHECK_EQ_STR(w_step(&w), "0:0+3 1:0+3");
  CHECK_EQ_STR(w_step(&w), "0:3+3 1:3+2*");
  CHECK_EQ_STR(w.ended, "1:L");
  CHECK_EQ_STR(w_step(&w), "0:6+1*");
  CHECK_EQ_STR(w.ended, "0:L");
  w_close(&w);
}

// A step the engine failed is planned again from where it was, reserving nothing more.
static void test_abort(void) {
  world w;
  w_init(&w, 16, 4, 0, 4, 4);
  w_start(&w);
  w_enq(&w, 6, 0, 2);
  err e;
  CHECK_EQ_INT(bat_iter_enqueue(w.s, &w.q[0], &e), ERR_INVALID_ARGUMENT);  // queued already
  CHECK_CONTAINS(e.msg, "queued already");
  CHECK_EQ_INT(w_plan(&w), 1);
  CHECK_EQ_STR(w.last, "0:0+4");
  CHECK_EQ_INT(w_plan(&w), 0);  // one step at a time
  bat_iter_abort(w.s);
  CHECK_EQ_INT(bat_iter_complete(w.s, NULL, NULL, &e), ERR_FAILED_PRECONDITION);
  CHECK_EQ_INT(w.q[0].n_computed, 0);
  CHECK_EQ_INT(w.q[0].kv.n_slots, 4);
  CHECK_EQ_STR(w_step(&w), "0:0+4");
  CHECK_EQ_INT(bat_kv_used_blocks(w.pool), 1);
  CHECK_EQ_STR(w_step(&w), "0:4+2*");
  CHECK_EQ_STR(w_step(&w), "0:6+1*");
  CHECK_EQ_STR(w.ended, "0:L");
  // queued again: only once closed
  CHECK_EQ_INT(bat_iter_enqueue(w.s, &w.q[0], &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "bat_iter_seq_close it");
  bat_iter_seq_close(&w.q[0]);
  CHECK_EQ_INT(bat_iter_enqueue(w.s, &w.q[0], &e), 0);
  CHECK_EQ_STR(w_step(&w), "0:0+4");
  w_close(&w);
}

// A request's own timeout only shortens a non-zero default (Triton's rule).
static void test_timeout_override(void) {
  world w;
  w_init(&w, 16, 4, 0, 1, 4);
  w.cfg.allow_timeout_override = 1;
  w_start(&w);
  err e;
  w_enq(&w, 2, 0, 3);
  CHECK_EQ_INT(w_enq_full(&w, 2, 0, 1, 0, INT64_MAX, 50, &e), 0);
  CHECK_EQ_INT(bat_iter_next_wakeup(w.s), INT64_MAX);
  w.now = 1000;
  CHECK_EQ_STR(w_step(&w), "0:0+2*");
  CHECK_EQ_STR(w.ended, "");
  w_close(&w);
}

int main(void) {
  test_config();
  test_decode();
  test_chunked_prefill();
  test_caps();
  test_preempt_recompute();
  test_preempt_prefix_hit();
  test_victim_leaves_step();
  test_preemption_order();
  test_priorities();
  test_cancel_deadline_timeout();
  test_refusals();
  test_prefix_sharing();
  test_stop();
  test_flush();
  test_prefill_chunk_cap();
  test_abort();
  test_timeout_override();
  CHECK_DONE();
}
