// batcher/iter.h: the iteration-level (continuous) scheduler of a decoder
// model, for one engine instance and its KV block pool (batcher/kvblocks.h).
// Pure like batcher.h: sequences, token counts and block ids, an injected
// clock and cancel callback; nothing of gRPC, tensors, GPUs or threads.
//
// The caller's loop: bat_iter_enqueue as requests arrive; then, one step at
// a time, bat_iter_plan (what the step computes), run the model on it,
// bat_iter_complete (the tokens sampled, which sequences stopped), and
// bat_iter_take_finished. One step is in flight at a time.
//
// Semantics (vLLM's v1 scheduler, TensorRT-LLM's in-flight batching):
//  - A step holds the next token of every running sequence that is decoding
//    (one each), then the rest of the prompts of running sequences still in
//    prefill, then chunks of waiting prompts (chunked prefill), under a
//    token budget per step (max_num_batched_tokens) and a cap on running
//    sequences (max_num_seqs). A chunk is min(tokens left, budget left,
//    max_prefill_chunk when set): a prompt longer than the budget spreads
//    over several steps; the budget is filled exactly when there is enough
//    work. The budget must hold max_num_seqs tokens, so every decode fits. A chunk that reaches the end
//    of a sequence's known tokens samples its next token (work.sample).
//  - New sequences join at the next plan; finished ones leave at complete:
//    the caller reports the token each sampling chunk produced and whether
//    it ended the sequence (EOS or a stop sequence); the scheduler ends it
//    itself at max_tokens or when prompt + output reach max_model_len.
//  - Order: running sequences and the waiting queue are ordered by priority
//    level (as batcher.h: 1..priority_levels, level 1 first; 0 = the default
//    level), then arrival (FIFO). Waiting sequences are admitted strictly in
//    that order: when the head cannot get its chunk's KV blocks, nothing
//    behind it is admitted (no starvation of long prompts by short ones).
//    A waiting sequence never preempts a running one, whatever its level
//    (vLLM's priority policy would; here a high level waits for blocks).
//  - KV blocks: a running sequence's tokens for the step need blocks. When
//    the pool has too few, the last running sequence in the order above (the
//    lowest level, then the youngest) is preempted: its blocks released, its
//    computed count reset, and it goes back to the waiting queue at its
//    place (ahead of everything that arrived after it) to be recomputed from
//    its prompt and the tokens it already generated; it is never dropped. A
//    sequence that is itself the last preempts itself. A preempted sequence
//    scheduled earlier in the same step leaves the step. No waiting
//    sequence is admitted in a step that preempted (it would thrash).
//  - Prefix caching (the pool's): a sequence admitted takes the registered
//    full blocks its tokens start with (at most all but its last token, which
//    must be computed to sample) and computes only the rest; a recomputed
//    sequence usually finds its own blocks again.
//  - A sequence whose prompt plus max_tokens (capped by max_model_len) can
//    never fit the pool alone is refused at enqueue, so the oldest running
//    sequence can always progress and every sequence ends.
//  - Cancellation (the callback) and deadlines are checked at every plan, for
//    every sequence, running or waiting (a plan costs O(running + waiting)):
//    it leaves at once, its blocks released, with a reason. The queue
//    timeout (REJECT; Triton's ModelQueuePolicy default_timeout) applies only
//    until a sequence is first scheduled. Every boundary is inclusive.
//  - Not here yet: planning step n+1 while step n runs (vLLM's async
//    scheduling), speculative tokens, swapping KV to host memory.
#ifndef INFERD_BATCHER_ITER_H
#define INFERD_BATCHER_ITER_H

#include <stddef.h>
#include <stdint.h>

#include "batcher/batcher.h"
#include "batcher/kvblocks.h"
#include "kernels/base/err.h"

typedef enum bat_iter_state {
  BAT_ITER_NEW = 0,  // not enqueued
  BAT_ITER_WAITING,  // queued (never run, or preempted)
  BAT_ITER_RUNNING,  // holds KV blocks; in every step until it ends or is preempted
  BAT_ITER_DONE,     // on the finished list or taken from it
} bat_iter_state;

typedef enum bat_iter_end {
  BAT_ITER_END_NONE = 0,
  BAT_ITER_END_STOP,     // the caller reported EOS or a stop sequence
  BAT_ITER_END_LENGTH,   // max_tokens generated, or the context (max_model_len) full
  BAT_ITER_END_DROPPED,  // left unfinished: drop_reason says why
} bat_iter_end;

const char *bat_iter_end_str(bat_iter_end end);

typedef struct bat_iter_seq {
  // --- set by the caller before bat_iter_enqueue
  const int32_t *prompt;  // token ids, copied at enqueue
  int64_t prompt_len;     // >= 1
  int64_t max_tokens;     // tokens to generate at most, >= 1
  uint32_t priority;      // 1..priority_levels, 0 = default
  int64_t deadline_us;    // absolute client deadline; INT64_MAX none
  int64_t timeout_us;     // its own queue timeout (may shorten a non-zero default), 0 none
  void *payload;          // the caller's request; given to the cancel callback
  // --- set by the scheduler, read-only to the caller
  struct bat_iter_seq *next;  // link of the finished list
  bat_iter_state state;
  int32_t *tokens;  // prompt then generated tokens [n_tokens]; freed by bat_iter_seq_close
  int64_t n_tokens;
  int64_t n_generated;
  int64_t n_computed;  // leading tokens whose KV is in kv's blocks
  bat_kv_table kv;     // the block table the engine reads
  int64_t arrival_us;
  uint32_t n_preemptions;
  int64_t prefix_hit_tokens;  // served from the prefix cache, over all its admissions
  bat_iter_end end;
  bat_drop_reason drop_reason;  // with BAT_ITER_END_DROPPED
  // --- private to the scheduler
  struct bat_iter_seq *lprev, *lnext;  // its list (waiting or running)
  uint64_t order;                      // arrival order: ties of the clock broken
  uint32_t level;                      // 0-based
  int64_t timeout_at_us;
  int64_t limit;     // total tokens at most: min(prompt + max_tokens, max_model_len)
  int32_t work_idx;  // its item in the planned step; -1 none
  uint8_t ever_ran;
} bat_iter_seq;

typedef struct bat_iter_config {
  int max_num_seqs;                // running sequences at most, > 0
  int64_t max_num_batched_tokens;  // tokens per step, >= max_num_seqs (every decode fits)
  int64_t max_model_len;           // prompt + output tokens at most; 0: no cap but the pool
  // A sequence's chunk at most per step, 0: the budget (vLLM's
  // long_prefill_token_threshold): several prompts then share a step's
  // budget instead of the oldest taking it all, at the cost of its TTFT.
  int64_t max_prefill_chunk;
  uint32_t priority_levels;         // 0: one level, priorities ignored
  uint32_t default_priority_level;  // 1..priority_levels when levels are set
  int64_t default_timeout_us;       // queue timeout (REJECT) until first scheduled; 0 none
  int allow_timeout_override;       // a sequence's timeout_us may shorten a non-zero default
  size_t max_queue_size;            // waiting sequences at most at enqueue; 0 unbounded
  bat_kv_pool *pool;                // borrowed; this scheduler is its only user
  bat_clock_fn now;
  void *clock_ctx;
  bat_cancelled_fn cancelled;  // may be NULL
} bat_iter_config;

// One sequence's share of a step: compute the KV of tokens[start ..
// start + n_tokens) (positions start..), position p written in block
// kv.blocks[p / block_tokens] at slot p % block_tokens, attending to every
// position before it through the same table.
typedef struct bat_iter_work {
  bat_iter_seq *seq;
  int64_t start;
  int64_t n_tokens;
  int sample;  // the chunk ends at the sequence's last token: sample the next one
} bat_iter_work;

typedef struct bat_iter_step {
  const bat_iter_work *work;  // n_work items; valid until the next plan
  size_t n_work;
  int64_t n_tokens;    // over all items, <= max_num_batched_tokens
  size_t n_decode;     // the first items: running sequences' single decode tokens
  size_t n_sample;     // items that sample
  size_t n_preempted;  // preemptions while planning it
} bat_iter_step;

typedef struct bat_iter_stats {
  size_t running, waiting;
  uint64_t preempted_total;
  int32_t blocks_used, blocks_cached, blocks_free;
  uint64_t prefix_hit_tokens;  // tokens admissions took from the prefix cache
  uint64_t computed_tokens;    // tokens the steps computed (prefill, recompute and decode)
  uint64_t steps;
} bat_iter_stats;

typedef struct bat_iter bat_iter;

int bat_iter_create(const bat_iter_config *c, bat_iter **out, err *e);
// Frees the scheduler; sequences still held are not touched (bat_iter_flush first).
void bat_iter_destroy(bat_iter *s);

// Queues a sequence (state NEW, or DONE and closed). On success the scheduler holds it until it comes back
// from bat_iter_take_finished (then the caller frees its memory with
// bat_iter_seq_close); on failure the caller still owns it (nothing to
// close): INVALID_ARGUMENT for an empty prompt, max_tokens < 1, a priority
// out of range, a prompt that does not fit max_model_len, or one that with
// its output can never fit the KV pool; RESOURCE_EXHAUSTED when the queue
// is full or out of memory.
int bat_iter_enqueue(bat_iter *s, bat_iter_seq *q, err *e);

// Drops cancelled and expired sequences, then plans the next step. Returns
// its number of work items (0: nothing to do, no step in flight); with work,
// the step is in flight until bat_iter_complete. Never fails: everything a
// step needs was allocated at enqueue.
size_t bat_iter_plan(bat_iter *s, bat_iter_step *out);

// The step in flight ran. sampled[i] and stop[i] are for the step's work[i]
// (read only where it samples): the token produced and whether it ended the
// sequence. FAILED_PRECONDITION when no step is in flight.
int bat_iter_complete(bat_iter *s, const int32_t *sampled, const uint8_t *stop, err *e);

// The step in flight did not run (the engine failed it): nothing of it
// counts; the next plan schedules the same sequences from where they were.
// Sequences to fail go through the cancel callback.
void bat_iter_abort(bat_iter *s);

// The sequences that ended (finished or dropped), in the order they ended,
// linked through next; NULL when none.
bat_iter_seq *bat_iter_take_finished(bat_iter *s);

// Frees what the scheduler allocated for a finished sequence (its tokens).
void bat_iter_seq_close(bat_iter_seq *q);

// Drops every sequence, running or waiting (BAT_DROP_SHUTDOWN). Between
// steps only: a step in flight is forgotten.
void bat_iter_flush(bat_iter *s);

// When to plan again though nothing else happens (the earliest deadline or
// queue timeout); INT64_MAX when none. With sequences running the caller
// steps anyway.
int64_t bat_iter_next_wakeup(const bat_iter *s);

void bat_iter_stats_get(const bat_iter *s, bat_iter_stats *out);

#endif
