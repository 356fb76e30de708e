// server/core/arena.c: a request's memory: see arena.h. A bump region in
// the arena's first block, further bump chunks when it runs out, and pieces
// over SRV_ARENA_BIG in blocks of their own on a list, so protobuf-c's free
// of one really frees it.
#include "server/core/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct arena_block {
  struct arena_block *prev, *next;  // next only, for the bump chunks
  max_align_t mem[];
} arena_block;

struct srv_arena {
  ProtobufCAllocator pa;  // allocator_data points back here
  uint8_t *cur, *end;     // the bump region: the first block's tail, or the newest chunk's
  arena_block *chunks;    // further bump chunks
  arena_block *big;       // pieces over SRV_ARENA_BIG, newest first
  max_align_t mem[];
};

static void *arena_alloc(void *data, size_t n) {
  srv_arena *a = data;
  const size_t align = sizeof(max_align_t);
  if (n > SIZE_MAX / 2) return NULL;
  n = (n + align - 1) & ~(align - 1);
  if (n > SRV_ARENA_BIG) {
    arena_block *b = malloc(sizeof *b + n);
    if (!b) return NULL;
    b->prev = NULL;
    b->next = a->big;
    if (a->big) a->big->prev = b;
    a->big = b;
    return b->mem;
  }
  if ((size_t)(a->end - a->cur) < n) {
    size_t cap = n < SRV_ARENA_BIG / 4 ? SRV_ARENA_BIG / 4 : n;
    arena_block *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->prev = NULL;
    c->next = a->chunks;
    a->chunks = c;
    a->cur = (uint8_t *)c->mem;
    a->end = a->cur + cap;
  }
  void *p = a->cur;
  a->cur += n;
  return p;
}

// Bump pieces go with the arena; big ones now.
static void arena_free(void *data, void *p) {
  srv_arena *a = data;
  if (!p) return;
  for (arena_block *b = a->big; b; b = b->next)
    if ((void *)b->mem == p) {
      if (b->prev) b->prev->next = b->next;
      else a->big = b->next;
      if (b->next) b->next->prev = b->prev;
      free(b);
      return;
    }
}

// An arena whose first block holds `hint` bytes of small pieces.
srv_arena *srv_arena_create(size_t hint) {
  hint = (hint + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
  srv_arena *a = malloc(sizeof *a + hint);
  if (!a) return NULL;
  a->pa = (ProtobufCAllocator){.alloc = arena_alloc, .free = arena_free, .allocator_data = a};
  a->cur = (uint8_t *)a->mem;
  a->end = a->cur + hint;
  a->chunks = a->big = NULL;
  return a;
}

void srv_arena_destroy(srv_arena *a) {
  if (!a) return;
  for (arena_block *b = a->chunks, *next; b; b = next) next = b->next, free(b);
  for (arena_block *b = a->big, *next; b; b = next) next = b->next, free(b);
  free(a);
}

void *srv_arena_calloc(srv_arena *a, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = arena_alloc(a, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void *srv_arena_alloc(srv_arena *a, size_t n) { return arena_alloc(a, n); }

ProtobufCAllocator *srv_arena_protobuf(srv_arena *a) { return &a->pa; }
