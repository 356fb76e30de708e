// kvblocks.c: the KV block pool's bookkeeping (see kvblocks.h for the
// model). Every per-block field is an array indexed by block id, sized at
// create: nothing is allocated after it, so a step can never fail for memory.
//
// A block is in exactly one of three states:
//   free:     no table holds it, no identity; on the free stack
//   cached:   no table holds it, registered; on the LRU list (evictable)
//   held:     refs > 0 (registered or private); on no list
#include "batcher/kvblocks.h"

#include <stdlib.h>
#include <string.h>

struct bat_kv_pool {
  int32_t n, bt;
  int caching;
  uint64_t hash_mask;
  int32_t *refs;
  uint64_t *gen;           // incarnation: bumped when a registered block loses its identity
  uint8_t *reg;            // registered (in a bucket)
  int32_t *par_id;         // registered: the parent's block id (-1: the first block of a sequence)
  uint64_t *par_gen;       // registered: the parent's incarnation
  uint64_t *hash;          // registered: the bucket hash
  int32_t *toks;           // registered: [n * bt] the block's token ids
  int32_t *lprev, *lnext;  // cached blocks: the LRU list (head evicted first)
  int32_t lru_head, lru_tail, n_lru;
  int32_t *bnext;    // registered: next block of its bucket
  int32_t *buckets;  // head block per bucket, -1 empty
  uint64_t bucket_mask;
  int32_t *free_stack;
  int32_t n_free;
  int32_t n_used, n_reg;
  uint64_t evictions;
};

// --- hashing: only picks a bucket; identity is compared exactly

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static uint64_t block_hash(const bat_kv_pool *p, int32_t pid, uint64_t pgen, const int32_t *toks) {
  uint64_t h = mix64(((uint64_t)(uint32_t)pid << 32 | 0x5bd1e995u) ^ mix64(pgen + 0x9e3779b97f4a7c15ULL));
  for (int32_t i = 0; i < p->bt; i += 2) {
    uint64_t w = (uint64_t)(uint32_t)toks[i];
    if (i + 1 < p->bt) w |= (uint64_t)(uint32_t)toks[i + 1] << 32;
    h = mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
  }
  return h & p->hash_mask;
}

static int32_t *bucket_of(const bat_kv_pool *p, uint64_t h) {
  return &p->buckets[h & p->bucket_mask];
}

static int32_t lookup(const bat_kv_pool *p, uint64_t h, int32_t pid, uint64_t pgen, const int32_t *toks) {
  for (int32_t b = *bucket_of(p, h); b >= 0; b = p->bnext[b])
    if (p->hash[b] == h && p->par_id[b] == pid && p->par_gen[b] == pgen &&
        memcmp(&p->toks[(size_t)b * (size_t)p->bt], toks, (size_t)p->bt * sizeof *toks) == 0)
      return b;
  return -1;
}

static void do_register(bat_kv_pool *p, int32_t b, uint64_t h, int32_t pid, uint64_t pgen, const int32_t *toks) {
  p->reg[b] = 1;
  p->hash[b] = h;
  p->par_id[b] = pid;
  p->par_gen[b] = pgen;
  memcpy(&p->toks[(size_t)b * (size_t)p->bt], toks, (size_t)p->bt * sizeof *toks);
  int32_t *head = bucket_of(p, h);
  p->bnext[b] = *head;
  *head = b;
  p->n_reg++;
}

static void unregister(bat_kv_pool *p, int32_t b) {
  int32_t *link = bucket_of(p, p->hash[b]);
  while (*link != b) link = &p->bnext[*link];
  *link = p->bnext[b];
  p->bnext[b] = -1;
  p->reg[b] = 0;
  p->gen[b]++;  // children registered under this incarnation can never be matched again
  p->n_reg--;
}

// --- the LRU list of cached blocks

static void lru_append(bat_kv_pool *p, int32_t b) {
  p->lprev[b] = p->lru_tail;
  p->lnext[b] = -1;
  if (p->lru_tail >= 0)
    p->lnext[p->lru_tail] = b;
  else
    p->lru_head = b;
  p->lru_tail = b;
  p->n_lru++;
}

static void lru_unlink(bat_kv_pool *p, int32_t b) {
  if (p->lprev[b] >= 0)
    p->lnext[p->lprev[b]] = p->lnext[b];
  else
    p->lru_head = p->lnext[b];
  if (p->lnext[b] >= 0)
    p->lprev[p->lnext[b]] = p->lprev[b];
  else
    p->lru_tail = p->lprev[b];
  p->lprev[b] = p->lnext[b] = -1;
  p->n_lru--;
}

// A block for a table: a free one first (no cached prefix is lost), else the
// least recently released cached one. The caller checked there is one.
static int32_t alloc_block(bat_kv_pool *p) {
  int32_t b;
  if (p->n_free > 0) {
    b = p->free_stack[--p->n_free];
  } else {
    b = p->lru_head;
    lru_unlink(p, b);
    unregister(p, b);
    p->evictions++;
  }
  p->refs[b] = 1;
  p->n_used++;
  return b;
}

static void ref_block(bat_kv_pool *p, int32_t b) {
  if (p->refs[b]++ == 0) {
    lru_unlink(p, b);  // a held block has refs > 0, so refs 0 here means cached
    p->n_used++;
  }
}

static void unref_block(bat_kv_pool *p, int32_t b) {
  if (--p->refs[b] > 0) return;
  p->n_used--;
  if (p->reg[b])
    lru_append(p, b);
  else
    p->free_stack[p->n_free++] = b;
}

// --- lifecycle

int bat_kv_create(const bat_kv_config *c, bat_kv_pool **out, err *e) {
  if (c->n_blocks <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "KV pool needs at least one block (n_blocks %d)", c->n_blocks);
  if (c->block_tokens <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "KV block size must be positive (block_tokens %d)", c->block_tokens);
  if (c->hash_bits < 0 || c->hash_bits > 64)
    return err_set(e, ERR_INVALID_ARGUMENT, "hash_bits %d is outside 0..64", c->hash_bits);
  bat_kv_pool *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  size_t n = (size_t)c->n_blocks;
  p->n = c->n_blocks;
  p->bt = c->block_tokens;
  p->caching = c->prefix_caching != 0;
  p->hash_mask = c->hash_bits == 0 || c->hash_bits == 64 ? ~(uint64_t)0 : ((uint64_t)1 << c->hash_bits) - 1;
  size_t nb = 1;
  while (nb < 2 * n) nb <<= 1;
  p->bucket_mask = nb - 1;
  p->refs = calloc(n, sizeof *p->refs);
  p->gen = calloc(n, sizeof *p->gen);
  p->reg = calloc(n, sizeof *p->reg);
  p->par_id = calloc(n, sizeof *p->par_id);
  p->par_gen = calloc(n, sizeof *p->par_gen);
  p->hash = calloc(n, sizeof *p->hash);
  p->lprev = malloc(n * sizeof *p->lprev);
  p->lnext = malloc(n * sizeof *p->lnext);
  p->bnext = malloc(n * sizeof *p->bnext);
  p->free_stack = malloc(n * sizeof *p->free_stack);
  p->buckets = p->caching ? malloc(nb * sizeof *p->buckets) : NULL;
  p->toks = p->caching ? malloc(n * (size_t)p->bt * sizeof *p->toks) : NULL;
  if (!p->refs || !p->gen || !p->reg || !p->par_id || !p->par_gen || !p->hash || !p->lprev || !p->lnext || !p->bnext ||
      !p->free_stack || (p->caching && (!p->buckets || !p->toks))) {
    bat_kv_destroy(p);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for a KV pool of %d blocks", c->n_blocks);
  }
  for (size_t i = 0; i < n; i++) {
    p->lprev[i] = p->lnext[i] = p->bnext[i] = -1;
    p->free_stack[i] = (int32_t)(n - 1 - i);  // block 0 is taken first: tables read in order in tests
  }
  if (p->buckets)
    for (size_t i = 0; i < nb; i++) p->buckets[i] = -1;
  p->n_free = p->n;
  p->lru_head = p->lru_tail = -1;
  *out = p;
  return 0;
}

void bat_kv_destroy(bat_kv_pool *p) {
  if (!p) return;
  free(p->refs);
  free(p->gen);
  free(p->reg);
  free(p->par_id);
  free(p->par_gen);
  free(p->hash);
  free(p->lprev);
  free(p->lnext);
  free(p->bnext);
  free(p->free_stack);
  free(p->buckets);
  free(p->toks);
  free(p);
}

static void table_reset(bat_kv_table *t) {
  t->n_blocks = 0;
  t->n_slots = 0;
  t->n_committed = 0;
  t->chain_id = -1;
  t->chain_gen = 0;
  t->chain_broken = 0;
}

int bat_kv_table_init(const bat_kv_pool *p, bat_kv_table *t, int64_t max_tokens, err *e) {
  memset(t, 0, sizeof *t);
  table_reset(t);
  int64_t cap = bat_kv_blocks_for(p, max_tokens);
  if (max_tokens < 0 || cap > p->n)
    return err_set(e, ERR_INVALID_ARGUMENT, "%lld tokens need %lld KV blocks; the pool has %d", (long long)max_tokens,
                   (long long)cap, p->n);
  t->blocks = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *t->blocks);
  if (!t->blocks) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  t->cap = (int32_t)cap;
  return 0;
}

void bat_kv_table_close(bat_kv_table *t) {
  free(t->blocks);
  t->blocks = NULL;
  t->cap = 0;
  table_reset(t);
}

// --- queries

int32_t bat_kv_block_tokens(const bat_kv_pool *p) {
  return p->bt;
}
int32_t bat_kv_n_blocks(const bat_kv_pool *p) {
  return p->n;
}
int64_t bat_kv_blocks_for(const bat_kv_pool *p, int64_t n_tokens) {
  return n_tokens <= 0 ? 0 : n_tokens / p->bt + (n_tokens % p->bt != 0);  // no overflow near INT64_MAX
}
int32_t bat_kv_free_blocks(const bat_kv_pool *p) {
  return p->n_free + p->n_lru;
}
int32_t bat_kv_used_blocks(const bat_kv_pool *p) {
  return p->n_used;
}
int32_t bat_kv_cached_blocks(const bat_kv_pool *p) {
  return p->n_reg;
}
uint64_t bat_kv_evictions(const bat_kv_pool *p) {
  return p->evictions;
}
int32_t bat_kv_block_refs(const bat_kv_pool *p, int32_t b) {
  return b >= 0 && b < p->n ? p->refs[b] : -1;
}
int bat_kv_block_registered(const bat_kv_pool *p, int32_t b) {
  return b >= 0 && b < p->n && p->reg[b];
}

int64_t bat_kv_blocks_needed(const bat_kv_pool *p, const bat_kv_table *t, int64_t n_more) {
  if (n_more > INT64_MAX - t->n_slots) return INT64_MAX;
  int64_t need = bat_kv_blocks_for(p, t->n_slots + n_more) - t->n_blocks;
  return need > 0 ? need : 0;
}

bat_kv_hit bat_kv_match(const bat_kv_pool *p, const int32_t *tokens, int64_t n_tokens) {
  bat_kv_hit hit = {0, 0};
  if (!p->caching) return hit;
  int32_t pid = -1;
  uint64_t pgen = 0;
  for (int64_t i = 0; i + p->bt <= n_tokens; i += p->bt) {
    const int32_t *tk = tokens + i;
    int32_t b = lookup(p, block_hash(p, pid, pgen, tk), pid, pgen, tk);
    if (b < 0) break;
    hit.blocks++;
    if (p->refs[b] == 0) hit.evictable++;
    pid = b;
    pgen = p->gen[b];
  }
  return hit;
}

int64_t bat_kv_prompt_need(const bat_kv_pool *p, const int32_t *tokens, int64_t n_tokens, bat_kv_hit *hit) {
  bat_kv_hit h = bat_kv_match(p, tokens, n_tokens - 1);
  if (hit) *hit = h;
  return bat_kv_blocks_for(p, n_tokens) - h.blocks;
}

// --- changes

int32_t bat_kv_acquire_prefix(bat_kv_pool *p, bat_kv_table *t, const int32_t *tokens, int32_t n_blocks) {
  if (!p->caching || t->n_blocks != 0) return 0;
  if (n_blocks > t->cap) n_blocks = t->cap;
  int32_t pid = -1;
  uint64_t pgen = 0;
  int32_t got = 0;
  for (; got < n_blocks; got++) {
    const int32_t *tk = tokens + (size_t)got * (size_t)p->bt;
    int32_t b = lookup(p, block_hash(p, pid, pgen, tk), pid, pgen, tk);
    if (b < 0) break;
    ref_block(p, b);
    t->blocks[got] = b;
    pid = b;
    pgen = p->gen[b];
  }
  t->n_blocks = got;
  t->n_slots = (int64_t)got * p->bt;
  t->n_committed = got;
  t->chain_id = pid;
  t->chain_gen = pgen;
  return got;
}

int bat_kv_reserve(bat_kv_pool *p, bat_kv_table *t, int64_t n_more, err *e) {
  if (n_more < 0) return err_set(e, ERR_INVALID_ARGUMENT, "cannot reserve %lld tokens", (long long)n_more);
  if (n_more > (int64_t)t->cap * p->bt - t->n_slots)
    return err_set(e, ERR_INVALID_ARGUMENT, "%lld more tokens exceed the sequence's %d KV blocks (%lld tokens held)",
                   (long long)n_more, t->cap, (long long)t->n_slots);
  int64_t want = bat_kv_blocks_for(p, t->n_slots + n_more);
  int64_t need = want - t->n_blocks;
  if (need > bat_kv_free_blocks(p))
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "KV cache full: %lld blocks needed, %d free", (long long)need,
                   bat_kv_free_blocks(p));
  while (t->n_blocks < want) t->blocks[t->n_blocks++] = alloc_block(p);
  t->n_slots += n_more;
  return 0;
}

void bat_kv_commit(bat_kv_pool *p, bat_kv_table *t, const int32_t *tokens, int64_t n_computed) {
  if (!p->caching) return;
  if (n_computed > t->n_slots) n_computed = t->n_slots;
  int64_t full = n_computed / p->bt;
  if (full > t->n_blocks) full = t->n_blocks;
  while (t->n_committed < full && !t->chain_broken) {
    int32_t i = t->n_committed, b = t->blocks[i];
    int32_t pid = i == 0 ? -1 : t->chain_id;
    uint64_t pgen = i == 0 ? 0 : t->chain_gen;
    if (pid >= 0 && !(p->reg[pid] && p->gen[pid] == pgen)) {
      // the registered copy this table's chain ran through was evicted: the
      // blocks after it cannot be named any more
      t->chain_broken = 1;
      break;
    }
    const int32_t *tk = tokens + (size_t)i * (size_t)p->bt;
    uint64_t h = block_hash(p, pid, pgen, tk);
    int32_t same = lookup(p, h, pid, pgen, tk);
    if (same < 0) {
      do_register(p, b, h, pid, pgen, tk);
      same = b;
    }
    t->chain_id = same;
    t->chain_gen = p->gen[same];
    t->n_committed++;
  }
}

void bat_kv_release(bat_kv_pool *p, bat_kv_table *t) {
  for (int32_t i = t->n_blocks - 1; i >= 0; i--) unref_block(p, t->blocks[i]);
  table_reset(t);
}

// --- self-check

int bat_kv_check(const bat_kv_pool *p, err *e) {
  int32_t used = 0, reg = 0, cached = 0, freeb = 0;
  for (int32_t b = 0; b < p->n; b++) {
    if (p->refs[b] < 0) return err_set(e, ERR_INTERNAL, "block %d has refs %d", b, p->refs[b]);
    if (p->refs[b] > 0) used++;
    if (p->reg[b]) {
      reg++;
      if (!p->caching) return err_set(e, ERR_INTERNAL, "block %d registered without prefix caching", b);
      int32_t x = *bucket_of(p, p->hash[b]);
      while (x >= 0 && x != b) x = p->bnext[x];
      if (x != b) return err_set(e, ERR_INTERNAL, "registered block %d is not in its bucket", b);
      if (p->refs[b] == 0) cached++;
    } else if (p->refs[b] == 0) {
      freeb++;
    }
  }
  if (used != p->n_used) return err_set(e, ERR_INTERNAL, "%d blocks held, counted %d", used, p->n_used);
  if (reg != p->n_reg) return err_set(e, ERR_INTERNAL, "%d blocks registered, counted %d", reg, p->n_reg);
  if (freeb != p->n_free) return err_set(e, ERR_INTERNAL, "%d blocks free, stack holds %d", freeb, p->n_free);
  for (int32_t i = 0; i < p->n_free; i++) {
    int32_t b = p->free_stack[i];
    if (p->refs[b] != 0 || p->reg[b])
      return err_set(e, ERR_INTERNAL, "free stack holds block %d (refs %d reg %d)", b, p->refs[b], p->reg[b]);
  }
  int32_t n = 0, prev = -1;
  for (int32_t b = p->lru_head; b >= 0; b = p->lnext[b]) {
    if (++n > p->n) return err_set(e, ERR_INTERNAL, "LRU list loops");
    if (p->lprev[b] != prev) return err_set(e, ERR_INTERNAL, "LRU links broken at block %d", b);
    if (p->refs[b] != 0 || !p->reg[b])
      return err_set(e, ERR_INTERNAL, "LRU holds block %d (refs %d reg %d)", b, p->refs[b], p->reg[b]);
    prev = b;
  }
  if (prev != p->lru_tail) return err_set(e, ERR_INTERNAL, "LRU tail is %d, walked to %d", p->lru_tail, prev);
  if (n != cached || n != p->n_lru)
    return err_set(e, ERR_INTERNAL, "LRU holds %d blocks, %d cached, counted %d", n, cached, p->n_lru);
  return 0;
}
