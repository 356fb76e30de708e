// batcher/kvblocks.h: the paged KV cache's bookkeeping for one engine
// instance: which fixed-size block of the pool holds which tokens of which
// sequence. Pure host-side numbers (block ids, reference counts, prefix
// identities); the device memory the ids index is allocated by the decoder
// runtime (engine/llm/, to come), which reads the block tables this module
// keeps. No clock, threads or GPU.
//
// Why here and not behind an interface injected into the scheduler: the
// iteration scheduler (batcher/iter.h) decides admission and preemption from
// exact block arithmetic (how many blocks a chunk needs after prefix hits,
// how many a hit takes out of the evictable set), and there is one pool
// implementation; an interface would only hide that arithmetic. batcher/ is
// the lowest scheduling layer and includes nothing of engine/, so the pool
// lives here and the engine is handed plain int32 block tables.
//
// Model (as vLLM's block pool and PagedAttention):
//  - n_blocks blocks of block_tokens token slots each, fixed at create.
//  - A sequence owns a table (bat_kv_table): logical block i -> physical
//    block id, grown as tokens are appended (bat_kv_reserve), all of it
//    released at once (bat_kv_release) on finish, cancel or preemption.
//  - Prefix caching: a full block whose KV has been computed is registered
//    (bat_kv_commit) under its identity, (the registered block holding the
//    previous logical block, its token ids). A new sequence whose tokens
//    start with registered blocks takes them (bat_kv_acquire_prefix)
//    instead of computing them: the block's reference count counts its
//    tables. Only full, computed blocks are ever shared, and nobody writes a
//    full block again, so no copy-on-write is needed: the partial last block
//    of a table is always private.
//  - The identity is exact, not a hash: a hash of (parent, tokens) only picks
//    a bucket; a lookup compares the parent block (id and incarnation) and
//    every token id. A hash collision, accidental or crafted by a client,
//    cannot hand one request another's KV. A parent evicted and reused gets
//    a new incarnation, so blocks registered under the old one are never
//    matched again (they age out of the LRU).
//  - A block whose reference count falls to 0 stays registered and
//    reusable by a later hit; it is evicted (least recently released first)
//    only when an allocation finds no block without identity. A table is
//    released last block first, so a prompt's tail is evicted before its
//    head, which more prompts share.
//  - Two sequences that computed the same prefix before either registered
//    it hold two copies; the second registration finds the first and keeps
//    its own copy private (block tables are append-only: the device already
//    wrote the KV there), its chain continuing from the registered copy.
#ifndef INFERD_BATCHER_KVBLOCKS_H
#define INFERD_BATCHER_KVBLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct bat_kv_config {
  int32_t n_blocks;      // > 0
  int32_t block_tokens;  // token slots per block, > 0 (16 is usual)
  int prefix_caching;    // register full blocks and share them
  // Tests only: keep this many low bits of the bucket hash (0: all 64), so
  // unrelated blocks share buckets and the exact comparison is exercised.
  int hash_bits;
} bat_kv_config;

typedef struct bat_kv_pool bat_kv_pool;

// One sequence's block table. Caller-allocated: bat_kv_table_init /
// bat_kv_table_close; the pool fills it. Read-only to the caller.
typedef struct bat_kv_table {
  int32_t *blocks;  // [n_blocks] physical block ids in logical order
  int32_t n_blocks;
  int32_t cap;      // blocks the array can hold (the sequence's maximum)
  int64_t n_slots;  // tokens reserved: the blocks hold room for this many
  // --- private to the pool: the prefix chain
  int32_t n_committed;  // leading blocks whose identity is settled
  int32_t chain_id;     // registered block standing for logical block n_committed-1; -1 none
  uint64_t chain_gen;   // its incarnation
  int chain_broken;     // that block was evicted meanwhile: nothing more is registered
} bat_kv_table;

// What bat_kv_match found for a token prefix.
typedef struct bat_kv_hit {
  int32_t blocks;     // leading full blocks already registered
  int32_t evictable;  // of those, blocks nobody holds (taking them shrinks the free count)
} bat_kv_hit;

int bat_kv_create(const bat_kv_config *c, bat_kv_pool **out, err *e);
void bat_kv_destroy(bat_kv_pool *p);

// A table for a sequence of at most max_tokens tokens. RESOURCE_EXHAUSTED
// when out of memory.
int bat_kv_table_init(const bat_kv_pool *p, bat_kv_table *t, int64_t max_tokens, err *e);
// Frees the table's memory; its blocks must have been released.
void bat_kv_table_close(bat_kv_table *t);

int32_t bat_kv_block_tokens(const bat_kv_pool *p);
int32_t bat_kv_n_blocks(const bat_kv_pool *p);
// Blocks for n tokens: ceil(n / block_tokens).
int64_t bat_kv_blocks_for(const bat_kv_pool *p, int64_t n_tokens);

// Blocks an allocation can take now: those without identity plus the
// registered ones nobody holds (evicted on demand).
int32_t bat_kv_free_blocks(const bat_kv_pool *p);
// Blocks held by at least one table.
int32_t bat_kv_used_blocks(const bat_kv_pool *p);
// Registered blocks (held or not): what the prefix cache knows.
int32_t bat_kv_cached_blocks(const bat_kv_pool *p);
// Registered blocks evicted so far.
uint64_t bat_kv_evictions(const bat_kv_pool *p);

// Blocks the table must gain to hold n_more more tokens beyond n_slots.
int64_t bat_kv_blocks_needed(const bat_kv_pool *p, const bat_kv_table *t, int64_t n_more);

// The leading full blocks of tokens[0..n_tokens) that are registered (with
// prefix caching off, none). Takes nothing. A sequence must compute at
// least its last token to get logits, so a scheduler passes n_tokens - 1.
bat_kv_hit bat_kv_match(const bat_kv_pool *p, const int32_t *tokens, int64_t n_tokens);

// Blocks a new sequence of these tokens must allocate to hold them all
// after its prefix hits (matched over all but its last token, as a
// scheduler does); *hit (may be NULL) gets the match. Taking the hits also
// removes hit->evictable blocks from bat_kv_free_blocks.
int64_t bat_kv_prompt_need(const bat_kv_pool *p, const int32_t *tokens, int64_t n_tokens, bat_kv_hit *hit);

// Into an empty table, takes the first n_blocks blocks bat_kv_match just
// found for the same tokens (a reference each); n_slots becomes
// n_blocks * block_tokens. Returns the blocks taken (fewer only if the
// match changed in between, which a single-threaded caller never sees).
int32_t bat_kv_acquire_prefix(bat_kv_pool *p, bat_kv_table *t, const int32_t *tokens, int32_t n_blocks);

// Grows the table so it holds n_slots + n_more tokens, evicting unheld
// registered blocks when no plain free block is left. All or nothing:
// RESOURCE_EXHAUSTED (and the table unchanged) when the pool has too few
// free blocks; INVALID_ARGUMENT past the table's capacity.
int bat_kv_reserve(bat_kv_pool *p, bat_kv_table *t, int64_t n_more, err *e);

// The KV of tokens[0..n_computed) is now in the table's blocks: registers
// the full blocks among them not registered yet (prefix caching on).
// tokens are the sequence's (prompt, then generated), n_computed <= n_slots.
void bat_kv_commit(bat_kv_pool *p, bat_kv_table *t, const int32_t *tokens, int64_t n_computed);

// Releases every block of the table (last block first, see above); the
// table is empty after and can be filled again.
void bat_kv_release(bat_kv_pool *p, bat_kv_table *t);

// Tests and metrics: a block's reference count, whether it is registered.
int32_t bat_kv_block_refs(const bat_kv_pool *p, int32_t block);
int bat_kv_block_registered(const bat_kv_pool *p, int32_t block);

// Checks the pool's internal consistency (lists, counts, buckets): 0, or
// INTERNAL with what is wrong. For tests; O(n_blocks).
int bat_kv_check(const bat_kv_pool *p, err *e);

#endif
