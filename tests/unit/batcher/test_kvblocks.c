// Tests batcher/kvblocks.c: block tables growing and released, the free
// count, all-or-nothing reservations, prefix sharing with reference counts,
// LRU eviction of cached blocks (a prompt's tail first), exact identity under
// forced hash collisions, a parent's new incarnation hiding its old
// children, two copies of one prefix, and a randomized run checking the
// pool's invariants after every operation.
#include <stdlib.h>

#include "batcher/kvblocks.h"
#include "check.h"

static bat_kv_pool *mk(int32_t n, int32_t bt, int caching, int hash_bits) {
  bat_kv_config c = {.n_blocks = n, .block_tokens = bt, .prefix_caching = caching, .hash_bits = hash_bits};
  bat_kv_pool *p = NULL;
  err e;
  int rc = bat_kv_create(&c, &p, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "bat_kv_create: %s\n", e.msg);
  return p;
}

static void check_pool(const bat_kv_pool *p) {
  err e;
  int rc = bat_kv_check(p, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "bat_kv_check: %s\n", e.msg);
}

static void seq_tokens(int32_t *t, int n, int base) {
  for (int i = 0; i < n; i++) t[i] = base + i;
}

static void test_config(void) {
  bat_kv_pool *p = NULL;
  err e;
  CHECK_EQ_INT(bat_kv_create(&(bat_kv_config){.n_blocks = 0, .block_tokens = 16}, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "n_blocks 0");
  CHECK_EQ_INT(bat_kv_create(&(bat_kv_config){.n_blocks = 4, .block_tokens = 0}, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "block_tokens 0");
  p = mk(4, 16, 1, 0);
  bat_kv_table t;
  CHECK_EQ_INT(bat_kv_table_init(p, &t, 65, &e), ERR_INVALID_ARGUMENT);  // 5 blocks > 4
  CHECK_CONTAINS(e.msg, "need 5 KV blocks; the pool has 4");
  bat_kv_table_close(&t);
  CHECK_EQ_INT(bat_kv_table_init(p, &t, INT64_MAX, &e), ERR_INVALID_ARGUMENT);  // no overflow on the way
  bat_kv_table_close(&t);
  CHECK_EQ_INT(bat_kv_blocks_for(p, INT64_MAX), INT64_MAX / 16 + 1);
  CHECK_EQ_INT(bat_kv_table_init(p, &t, 64, &e), 0);
  CHECK_EQ_INT(t.cap, 4);
  CHECK_EQ_INT(bat_kv_blocks_needed(p, &t, INT64_MAX), INT64_MAX / 16 + 1);
  CHECK_EQ_INT(bat_kv_reserve(p, &t, INT64_MAX, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bat_kv_reserve(p, &t, 65, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "65 more tokens exceed the sequence's 4 KV blocks");
  bat_kv_table_close(&t);
  bat_kv_destroy(p);
}

static void test_grow_and_release(void) {
  bat_kv_pool *p = mk(8, 4, 0, 0);
  bat_kv_table a, b;
  err e;
  CHECK_EQ_INT(bat_kv_table_init(p, &a, 32, &e), 0);
  CHECK_EQ_INT(bat_kv_table_init(p, &b, 32, &e), 0);
  CHECK_EQ_INT(bat_kv_blocks_for(p, 0), 0);
  CHECK_EQ_INT(bat_kv_blocks_for(p, 4), 1);
  CHECK_EQ_INT(bat_kv_blocks_for(p, 5), 2);
  CHECK_EQ_INT(bat_kv_blocks_needed(p, &a, 5), 2);
  CHECK_EQ_INT(bat_kv_reserve(p, &a, 5, &e), 0);  // 5 tokens: blocks 0 1
  CHECK_EQ_INT(a.n_blocks, 2);
  CHECK_EQ_INT(a.blocks[0], 0);
  CHECK_EQ_INT(a.blocks[1], 1);
  CHECK_EQ_INT(a.n_slots, 5);
  CHECK_EQ_INT(bat_kv_blocks_needed(p, &a, 3), 0);  // slots 6..8 fit in block 1
  CHECK_EQ_INT(bat_kv_blocks_needed(p, &a, 4), 1);
  CHECK_EQ_INT(bat_kv_reserve(p, &a, 3, &e), 0);
  CHECK_EQ_INT(a.n_blocks, 2);
  CHECK_EQ_INT(bat_kv_reserve(p, &a, 1, &e), 0);  // the 9th token opens block 2
  CHECK_EQ_INT(a.n_blocks, 3);
  CHECK_EQ_INT(a.blocks[2], 2);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 5);
  CHECK_EQ_INT(bat_kv_used_blocks(p), 3);
  // b wants 24 tokens = 6 blocks, 5 free: refused, nothing taken
  CHECK_EQ_INT(bat_kv_reserve(p, &b, 24, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "6 blocks needed, 5 free");
  CHECK_EQ_INT(b.n_blocks, 0);
  CHECK_EQ_INT(b.n_slots, 0);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 5);
  CHECK_EQ_INT(bat_kv_reserve(p, &b, 20, &e), 0);  // exactly the 5 left
  CHECK_EQ_INT(bat_kv_free_blocks(p), 0);
  CHECK_EQ_INT(bat_kv_reserve(p, &a, 4, &e), ERR_RESOURCE_EXHAUSTED);
  // past the table's own capacity
  CHECK_EQ_INT(bat_kv_reserve(p, &b, 13, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "13 more tokens exceed the sequence's 8 KV blocks (20 tokens held)");
  check_pool(p);
  bat_kv_release(p, &a);
  CHECK_EQ_INT(a.n_blocks, 0);
  CHECK_EQ_INT(a.n_slots, 0);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 3);
  CHECK_EQ_INT(bat_kv_used_blocks(p), 0 + 5);
  // without prefix caching nothing is registered and nothing matches
  int32_t tk[16];
  seq_tokens(tk, 16, 100);
  bat_kv_commit(p, &b, tk, 16);
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 0);
  CHECK_EQ_INT(bat_kv_match(p, tk, 16).blocks, 0);
  bat_kv_release(p, &b);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 8);
  check_pool(p);
  bat_kv_table_close(&a);
  bat_kv_table_close(&b);
  bat_kv_destroy(p);
}

// A computes a 10-token prompt (2 full blocks of 4 + 2 tokens); B shares
// its 2 full blocks; refs count tables; released blocks stay cached.
static void test_prefix_sharing(void) {
  bat_kv_pool *p = mk(8, 4, 1, 0);
  bat_kv_table a, b, c;
  err e;
  bat_kv_table_init(p, &a, 32, &e);
  bat_kv_table_init(p, &b, 32, &e);
  bat_kv_table_init(p, &c, 32, &e);
  int32_t pa[10], pb[13];
  seq_tokens(pa, 10, 1);
  seq_tokens(pb, 13, 1);
  pb[9] = 77;  // B differs from A at token 9, in the third block
  CHECK_EQ_INT(bat_kv_match(p, pa, 9).blocks, 0);
  CHECK_EQ_INT(bat_kv_reserve(p, &a, 10, &e), 0);
  bat_kv_commit(p, &a, pa, 6);  // a chunk of 6 computed: only block 0 is full
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 1);
  CHECK_EQ_INT(bat_kv_match(p, pb, 11).blocks, 1);
  bat_kv_commit(p, &a, pa, 10);  // the rest: block 1 full, block 2 partial (private)
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 2);
  CHECK(bat_kv_block_registered(p, a.blocks[0]));
  CHECK(bat_kv_block_registered(p, a.blocks[1]));
  CHECK(!bat_kv_block_registered(p, a.blocks[2]));
  bat_kv_hit h = bat_kv_match(p, pb, 11);
  CHECK_EQ_INT(h.blocks, 2);
  CHECK_EQ_INT(h.evictable, 0);  // A holds them
  CHECK_EQ_INT(bat_kv_acquire_prefix(p, &b, pb, h.blocks), 2);
  CHECK_EQ_INT(b.blocks[0], a.blocks[0]);
  CHECK_EQ_INT(b.blocks[1], a.blocks[1]);
  CHECK_EQ_INT(b.n_slots, 8);
  CHECK_EQ_INT(bat_kv_block_refs(p, a.blocks[0]), 2);
  CHECK_EQ_INT(bat_kv_used_blocks(p), 3);         // shared blocks count once
  CHECK_EQ_INT(bat_kv_reserve(p, &b, 4, &e), 0);  // B's own third block
  CHECK(b.blocks[2] != a.blocks[2]);
  bat_kv_commit(p, &b, pb, 12);  // B's third block differs from A's (token 9): registered apart
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 3);
  CHECK_EQ_INT(bat_kv_used_blocks(p), 4);
  check_pool(p);
  bat_kv_release(p, &a);
  CHECK_EQ_INT(bat_kv_block_refs(p, b.blocks[0]), 1);
  CHECK_EQ_INT(bat_kv_used_blocks(p), 3);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 5);  // A's private block freed
  int32_t b0 = b.blocks[0], b1 = b.blocks[1], b2 = b.blocks[2];
  bat_kv_release(p, &b);
  CHECK_EQ_INT(bat_kv_used_blocks(p), 0);
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 3);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 8);
  // C brings B's whole prompt back: 3 hits, all evictable
  h = bat_kv_match(p, pb, 12);
  CHECK_EQ_INT(h.blocks, 3);
  CHECK_EQ_INT(h.evictable, 3);
  bat_kv_hit ph;
  CHECK_EQ_INT(bat_kv_prompt_need(p, pb, 12, &ph), 1);  // 12 tokens: the last block is matched over 11, so it misses
  CHECK_EQ_INT(ph.blocks, 2);
  CHECK_EQ_INT(ph.evictable, 2);
  CHECK_EQ_INT(bat_kv_prompt_need(p, pb, 13, NULL), 1);  // 13: three hits, the 13th token alone
  CHECK_EQ_INT(bat_kv_prompt_need(p, pa, 10, NULL), 1);  // A's 2 blocks hit, its third differs from B's
  CHECK_EQ_INT(bat_kv_acquire_prefix(p, &c, pb, 3), 3);
  CHECK_EQ_INT(c.blocks[0], b0);
  CHECK_EQ_INT(c.blocks[1], b1);
  CHECK_EQ_INT(c.blocks[2], b2);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 5);
  check_pool(p);
  bat_kv_release(p, &c);
  bat_kv_table_close(&a);
  bat_kv_table_close(&b);
  bat_kv_table_close(&c);
  bat_kv_destroy(p);
}

// Cached blocks are evicted only when no plain free block is left, least
// recently released first, and a released table's tail goes first.
static void test_eviction_order(void) {
  bat_kv_pool *p = mk(6, 2, 1, 0);
  bat_kv_table a, b, x;
  err e;
  bat_kv_table_init(p, &a, 12, &e);
  bat_kv_table_init(p, &b, 12, &e);
  bat_kv_table_init(p, &x, 12, &e);
  int32_t ta[6], tb[4];
  seq_tokens(ta, 6, 10);
  seq_tokens(tb, 4, 50);
  bat_kv_reserve(p, &a, 6, &e);  // blocks 0 1 2
  bat_kv_commit(p, &a, ta, 6);
  bat_kv_reserve(p, &b, 4, &e);  // blocks 3 4
  bat_kv_commit(p, &b, tb, 4);
  bat_kv_release(p, &a);  // LRU: 2 1 0
  bat_kv_release(p, &b);  // LRU: 2 1 0 4 3
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 5);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 6);
  // 2 blocks for X: block 5 (never used) first, then the LRU head, A's tail (block 2)
  CHECK_EQ_INT(bat_kv_reserve(p, &x, 4, &e), 0);
  CHECK_EQ_INT(x.blocks[0], 5);
  CHECK_EQ_INT(x.blocks[1], 2);
  CHECK_EQ_INT(bat_kv_evictions(p), 1);
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 4);
  CHECK_EQ_INT(bat_kv_match(p, ta, 6).blocks, 2);  // A's head still hits
  CHECK_EQ_INT(bat_kv_reserve(p, &x, 4, &e), 0);   // then A's block 1, then block 0
  CHECK_EQ_INT(x.blocks[2], 1);
  CHECK_EQ_INT(x.blocks[3], 0);
  CHECK_EQ_INT(bat_kv_match(p, ta, 6).blocks, 0);
  CHECK_EQ_INT(bat_kv_match(p, tb, 4).blocks, 2);
  check_pool(p);
  bat_kv_release(p, &x);
  bat_kv_table_close(&a);
  bat_kv_table_close(&b);
  bat_kv_table_close(&x);
  bat_kv_destroy(p);
}

// With 1-bit hashes every block shares one of two buckets: only exact
// (parent, tokens) matches hit.
static void test_collisions_exact(void) {
  bat_kv_pool *p = mk(64, 4, 1, 1);
  bat_kv_table t[8];
  err e;
  int32_t tk[8][16];
  for (int s = 0; s < 8; s++) {
    bat_kv_table_init(p, &t[s], 16, &e);
    seq_tokens(tk[s], 16, 0);
    tk[s][4 * (s % 4) + 1] = 1000 + s % 4;  // each differs in one token of one block
    CHECK_EQ_INT(bat_kv_reserve(p, &t[s], 16, &e), 0);
    bat_kv_commit(p, &t[s], tk[s], 16);
  }
  // sequences s and s+4 are equal: the second's registrations found the first's
  for (int s = 0; s < 8; s++) {
    bat_kv_hit h = bat_kv_match(p, tk[s], 16);
    CHECK_EQ_INT(h.blocks, 4);
  }
  int32_t probe[16];
  seq_tokens(probe, 16, 0);  // seq 3's first 3 blocks (its last one changed)
  CHECK_EQ_INT(bat_kv_match(p, probe, 16).blocks, 3);
  probe[13] = 1003;
  CHECK_EQ_INT(bat_kv_match(p, probe, 16).blocks, 4);
  probe[13] = 13;
  probe[1] = 1000;
  probe[15] = -5;
  CHECK_EQ_INT(bat_kv_match(p, probe, 16).blocks, 3);
  check_pool(p);
  for (int s = 0; s < 8; s++) {
    bat_kv_release(p, &t[s]);
    bat_kv_table_close(&t[s]);
  }
  bat_kv_destroy(p);
}

// A cached child of a block that is evicted goes first when it was released
// first (the tail of a prompt before its head).
static void test_child_evicted_first(void) {
  bat_kv_pool *p = mk(2, 2, 1, 0);
  bat_kv_table a, b;
  err e;
  bat_kv_table_init(p, &a, 4, &e);
  bat_kv_table_init(p, &b, 4, &e);
  int32_t ta[4] = {1, 2, 3, 4}, tb[2] = {9, 9};
  bat_kv_reserve(p, &a, 4, &e);  // blocks 0 [1 2], 1 [3 4] (parent 0)
  bat_kv_commit(p, &a, ta, 4);
  bat_kv_release(p, &a);  // LRU: 1 0
  bat_kv_reserve(p, &b, 2, &e);
  CHECK_EQ_INT(b.blocks[0], 1);
  bat_kv_commit(p, &b, tb, 2);  // block 1 = [9 9], a root now
  bat_kv_release(p, &b);
  CHECK_EQ_INT(bat_kv_match(p, ta, 4).blocks, 1);  // A's block 0 still there, its child gone
  CHECK_EQ_INT(bat_kv_match(p, tb, 2).blocks, 1);
  check_pool(p);
  bat_kv_table_close(&a);
  bat_kv_table_close(&b);
  bat_kv_destroy(p);
}

// Two copies of one prefix, then the registered parent is evicted and its
// block registered again with other tokens (a new incarnation): the child
// registered under the old one must not follow it.
static void test_parent_incarnation(void) {
  bat_kv_pool *p = mk(3, 2, 1, 0);
  bat_kv_table a, b, x;
  err e;
  bat_kv_table_init(p, &a, 6, &e);
  bat_kv_table_init(p, &b, 6, &e);
  bat_kv_table_init(p, &x, 6, &e);
  int32_t t1[4] = {1, 2, 3, 4}, tx[4] = {7, 7, 3, 4};
  // A and B compute [1 2] at once: two copies; A registers first
  bat_kv_reserve(p, &a, 2, &e);  // block 0
  bat_kv_reserve(p, &b, 4, &e);  // blocks 1 2
  bat_kv_commit(p, &a, t1, 2);
  bat_kv_commit(p, &b, t1, 4);  // B's block 1 stays private; block 2 registered under A's block 0
  CHECK(bat_kv_block_registered(p, 0));
  CHECK(!bat_kv_block_registered(p, 1));
  CHECK(bat_kv_block_registered(p, 2));
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 2);
  bat_kv_hit h = bat_kv_match(p, t1, 4);
  CHECK_EQ_INT(h.blocks, 2);  // A's block 0, then B's block 2
  bat_kv_release(p, &a);      // block 0 cached, unheld
  // X needs a block: none free, so block 0 is evicted and holds [7 7]
  CHECK_EQ_INT(bat_kv_reserve(p, &x, 2, &e), 0);
  CHECK_EQ_INT(x.blocks[0], 0);
  CHECK_EQ_INT(bat_kv_evictions(p), 1);
  bat_kv_commit(p, &x, tx, 2);
  CHECK(bat_kv_block_registered(p, 0));
  // block 2 ([3 4] after [1 2]) must not be taken as [3 4] after [7 7]
  CHECK_EQ_INT(bat_kv_match(p, tx, 4).blocks, 1);
  CHECK_EQ_INT(bat_kv_match(p, t1, 4).blocks, 0);
  // B's chain runs through its own block 2 now, not the evicted one
  CHECK_EQ_INT(b.chain_broken, 0);
  check_pool(p);
  bat_kv_release(p, &b);
  bat_kv_release(p, &x);
  CHECK_EQ_INT(bat_kv_free_blocks(p), 3);
  check_pool(p);
  bat_kv_table_close(&a);
  bat_kv_table_close(&b);
  bat_kv_table_close(&x);
  bat_kv_destroy(p);
}

// A table whose chain ran through a copy evicted since stops registering.
static void test_chain_broken(void) {
  bat_kv_pool *p = mk(4, 2, 1, 0);
  bat_kv_table a, b, x;
  err e;
  bat_kv_table_init(p, &a, 8, &e);
  bat_kv_table_init(p, &b, 8, &e);
  bat_kv_table_init(p, &x, 8, &e);
  int32_t t1[6] = {1, 2, 3, 4, 5, 6};
  bat_kv_reserve(p, &a, 2, &e);  // block 0
  bat_kv_reserve(p, &b, 6, &e);  // blocks 1 2 3
  bat_kv_commit(p, &a, t1, 2);
  bat_kv_commit(p, &b, t1, 2);  // B's block 1 is a copy; its chain runs through block 0
  bat_kv_release(p, &a);
  bat_kv_reserve(p, &x, 2, &e);  // evicts block 0
  CHECK_EQ_INT(x.blocks[0], 0);
  bat_kv_commit(p, &b, t1, 6);
  CHECK_EQ_INT(b.chain_broken, 1);
  CHECK(!bat_kv_block_registered(p, 2));
  CHECK(!bat_kv_block_registered(p, 3));
  CHECK_EQ_INT(bat_kv_cached_blocks(p), 0);
  check_pool(p);
  bat_kv_release(p, &b);
  bat_kv_release(p, &x);
  bat_kv_table_close(&a);
  bat_kv_table_close(&b);
  bat_kv_table_close(&x);
  bat_kv_destroy(p);
}

// --- randomized: tables grow, commit, release and take prefixes at random

static uint64_t rng_state;
static uint32_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng_state >> 33);
}

#define R_SEQ 12
#define R_MAXTOK 40

static void test_random(void) {
  long hits = 0, evict = 0, refused = 0;
  for (unsigned seed = 1; seed <= 40; seed++) {
    rng_state = seed;
    bat_kv_pool *p = mk(20, 4, 1, seed % 3 == 0 ? 2 : 0);
    bat_kv_table t[R_SEQ];
    int32_t tok[R_SEQ][R_MAXTOK];
    int64_t len[R_SEQ], computed[R_SEQ];
    err e;
    for (int s = 0; s < R_SEQ; s++) {
      bat_kv_table_init(p, &t[s], R_MAXTOK, &e);
      len[s] = computed[s] = 0;
    }
    for (int step = 0; step < 3000; step++) {
      int s = (int)(rnd() % R_SEQ);
      uint32_t op = rnd() % 10;
      if (t[s].n_blocks == 0 && op < 8) {
        // a new prompt from a small alphabet of shared prefixes
        len[s] = 4 + rnd() % 30;
        int family = (int)(rnd() % 3);
        for (int i = 0; i < len[s]; i++) tok[s][i] = family * 100 + (i < 12 ? i : (int)(rnd() % 4));
        bat_kv_hit h = bat_kv_match(p, tok[s], len[s] - 1);
        int64_t need = bat_kv_blocks_for(p, len[s]) - h.blocks;
        if (need > bat_kv_free_blocks(p) - h.evictable) {
          refused++;
          continue;
        }
        CHECK_EQ_INT(bat_kv_acquire_prefix(p, &t[s], tok[s], h.blocks), h.blocks);
        hits += h.blocks;
        uint64_t ev = bat_kv_evictions(p);
        CHECK_EQ_INT(bat_kv_reserve(p, &t[s], len[s] - t[s].n_slots, &e), 0);
        evict += (long)(bat_kv_evictions(p) - ev);
        computed[s] = len[s];
        bat_kv_commit(p, &t[s], tok[s], computed[s]);
      } else if (t[s].n_blocks > 0 && op < 6 && len[s] < R_MAXTOK) {
        // decode one token
        if (bat_kv_blocks_needed(p, &t[s], 1) > bat_kv_free_blocks(p)) {
          CHECK_EQ_INT(bat_kv_reserve(p, &t[s], 1, &e), ERR_RESOURCE_EXHAUSTED);
          continue;
        }
        CHECK_EQ_INT(bat_kv_reserve(p, &t[s], 1, &e), 0);
        tok[s][len[s]++] = (int32_t)(rnd() % 3);
        computed[s] = len[s];
        bat_kv_commit(p, &t[s], tok[s], computed[s]);
      } else if (t[s].n_blocks > 0) {
        bat_kv_release(p, &t[s]);
      }
      // invariants: held blocks = distinct blocks of the tables; refs =
      // tables holding; a private block in one table only
      int32_t refs[20] = {0};
      for (int q = 0; q < R_SEQ; q++)
        for (int32_t i = 0; i < t[q].n_blocks; i++) refs[t[q].blocks[i]]++;
      int32_t distinct = 0;
      for (int32_t b = 0; b < 20; b++) {
        distinct += refs[b] > 0;
        CHECK_EQ_INT(bat_kv_block_refs(p, b), refs[b]);
        if (refs[b] > 1) CHECK(bat_kv_block_registered(p, b));
      }
      CHECK_EQ_INT(bat_kv_used_blocks(p), distinct);
      err ce;
      int rc = bat_kv_check(p, &ce);
      if (rc) {
        fprintf(stderr, "seed %u step %d: %s\n", seed, step, ce.msg);
        CHECK_EQ_INT(rc, 0);
        break;
      }
    }
    for (int s = 0; s < R_SEQ; s++) {
      bat_kv_release(p, &t[s]);
      bat_kv_table_close(&t[s]);
    }
    CHECK_EQ_INT(bat_kv_used_blocks(p), 0);
    CHECK_EQ_INT(bat_kv_free_blocks(p), 20);
    bat_kv_destroy(p);
  }
  fprintf(stderr, "random: %ld prefix blocks hit, %ld evictions, %ld prompts refused\n", hits, evict, refused);
  CHECK(hits > 1000);
  CHECK(evict > 100);
  CHECK(refused > 100);
}

int main(void) {
  test_config();
  test_grow_and_release();
  test_prefix_sharing();
  test_eviction_order();
  test_collisions_exact();
  test_child_evicted_first();
  test_parent_incarnation();
  test_chain_broken();
  test_random();
  CHECK_DONE();
}
