// cuda_mem.c: the device arena and the pinned host pool. Both are one region
// reserved at create plus a first-fit carver over it; the carver keeps a
// sorted array of blocks (offset, size, live) that tiles the region, so
// freeing merges with free neighbours and reset is one step.
#include "engine/cuda/cuda_mem.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"

// --- carver

typedef struct block {
  size_t off, size;
  size_t req;  // bytes asked for (live blocks), for the "used" statistic
  bool live;
} block;

typedef struct carver {
  const char *what;  // "device arena (device 0)" / "pinned pool", for messages
  char what_buf[48];
  uintptr_t base;
  size_t cap;
  block *b;
  int n, max;
  size_t used, high_water;
  size_t live;
  uint64_t allocs, frees, resets, failed, real_allocs;
} carver;

static void carver_reset(carver *c) {
  c->b[0] = (block){.off = 0, .size = c->cap, .req = 0, .live = false};
  c->n = 1;
  c->used = 0;
  c->live = 0;
}

static int carver_init(carver *c, size_t cap, int max_blocks, err *e) {
  // Every block split can add two (the alignment pad and the tail), so the
  // array needs a little headroom beyond the live-block bound.
  c->max = (max_blocks > 0 ? max_blocks : ENG_CUDA_MEM_BLOCKS) + 2;
  c->b = calloc((size_t)c->max, sizeof *c->b);
  if (!c->b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: no host memory for %d block slots", c->what, c->max);
  c->cap = cap;
  carver_reset(c);
  return 0;
}

static size_t carver_largest_free(const carver *c) {
  size_t m = 0;
  for (int i = 0; i < c->n; i++)
    if (!c->b[i].live && c->b[i].size > m) m = c->b[i].size;
  return m;
}

static void carver_insert(carver *c, int at, block v) {
  memmove(&c->b[at + 1], &c->b[at], (size_t)(c->n - at) * sizeof *c->b);
  c->b[at] = v;
  c->n++;
}

static void carver_remove(carver *c, int at) {
  memmove(&c->b[at], &c->b[at + 1], (size_t)(c->n - at - 1) * sizeof *c->b);
  c->n--;
}

static int carver_alloc(carver *c, size_t bytes, size_t align, void **ptr, err *e) {
  if (!ptr) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL result pointer", c->what);
  *ptr = NULL;
  if (align == 0) align = ENG_CUDA_MEM_ALIGN;
  if (bytes == 0 || (align & (align - 1)) != 0) {
    c->failed++;
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: bad request of %zu bytes aligned to %zu", c->what,
                   bytes, align);
  }
  // Sizes are kept in 16-byte units so neighbouring blocks never share a vector.
  size_t size = (bytes + 15) & ~(size_t)15;
  if (size < bytes) size = SIZE_MAX;  // wrapped: cannot fit
  for (int i = 0; i < c->n; i++) {
    block *f = &c->b[i];
    if (f->live || f->size < size) continue;
    uintptr_t addr = c->base + f->off;
    size_t pad = (size_t)(((addr + (align - 1)) & ~(uintptr_t)(align - 1)) - addr);
    if (pad > f->size || f->size - pad < size) continue;
    int need = (pad > 0) + (f->size - pad > size);
    if (c->n + need > c->max) {
      c->failed++;
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "%s: all %d block slots in use (%zu live blocks)",
                     c->what, c->max - 2, c->live);
    }
    size_t off = f->off, fsize = f->size;
    int at = i;
    if (pad > 0) {  // the pad stays a free block in front
      c->b[at].size = pad;
      at++;
      carver_insert(c, at, (block){.off = off + pad, .size = fsize - pad});
    }
    block *u = &c->b[at];
    size_t tail = u->size - size;
    u->size = size;
    u->req = bytes;
    u->live = true;
    if (tail > 0) carver_insert(c, at + 1, (block){.off = u->off + size, .size = tail});
    u = &c->b[at];
    c->used += bytes;
    if (c->used > c->high_water) c->high_water = c->used;
    c->live++;
    c->allocs++;
    *ptr = (void *)(c->base + u->off);
    return 0;
  }
  c->failed++;
  return err_set(e, ERR_RESOURCE_EXHAUSTED,
                 "%s: cannot carve %zu bytes aligned to %zu: %zu of %zu bytes in use in %zu "
                 "blocks, largest free block %zu bytes",
                 c->what, bytes, align, c->used, c->cap, c->live, carver_largest_free(c));
}

static int carver_free(carver *c, void *ptr, err *e) {
  uintptr_t p = (uintptr_t)ptr;
  if (!ptr || p < c->base || p >= c->base + c->cap)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: free of %p, which is not in the region", c->what, ptr);
  size_t off = (size_t)(p - c->base);
  int lo = 0, hi = c->n - 1, i = -1;
  while (lo <= hi) {  // blocks are sorted by offset and tile the region
    int mid = lo + (hi - lo) / 2;
    if (c->b[mid].off == off) {
      i = mid;
      break;
    }
    if (c->b[mid].off < off) lo = mid + 1;
    else hi = mid - 1;
  }
  if (i < 0 || !c->b[i].live)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: free of %p, which is not a live block", c->what, ptr);
  c->used -= c->b[i].req;
  c->live--;
  c->frees++;
  c->b[i].live = false;
  c->b[i].req = 0;
  if (i + 1 < c->n && !c->b[i + 1].live) {
    c->b[i].size += c->b[i + 1].size;
    carver_remove(c, i + 1);
  }
  if (i > 0 && !c->b[i - 1].live) {
    c->b[i - 1].size += c->b[i].size;
    carver_remove(c, i);
  }
  return 0;
}

static void carver_stats(const carver *c, eng_cuda_mem_stats *s) {
  memset(s, 0, sizeof *s);
  s->capacity = c->cap;
  s->used = c->used;
  s->high_water = c->high_water;
  s->largest_free = carver_largest_free(c);
  s->live_blocks = c->live;
  s->allocs = c->allocs;
  s->frees = c->frees;
  s->resets = c->resets;
  s->failed = c->failed;
  s->real_allocs = c->real_allocs;
}

// --- device arena

struct eng_cuda_arena {
  carver c;
  int device;
};

int eng_cuda_arena_create(eng_cuda_arena **out, int device, size_t bytes, int max_blocks, err *e) {
  if (!out || bytes == 0 || max_blocks < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "device arena: bad arguments (%zu bytes)", bytes);
  *out = NULL;
  eng_cuda_arena *a = calloc(1, sizeof *a);
  if (!a) return err_set(e, ERR_RESOURCE_EXHAUSTED, "device arena: out of host memory");
  a->device = device;
  snprintf(a->c.what_buf, sizeof a->c.what_buf, "device arena (device %d)", device);
  a->c.what = a->c.what_buf;
  int prev = 0, rc;
  void *p = NULL;
  if ((rc = carver_init(&a->c, bytes, max_blocks, e)) != 0) goto fail;
  if ((rc = CUDA_OK(e, cudaGetDevice(&prev))) != 0) goto fail;
  if ((rc = CUDA_OK(e, cudaSetDevice(device))) != 0) goto fail;
  rc = CUDA_OK(e, cudaMalloc(&p, bytes));
  a->c.real_allocs++;
  (void)cudaSetDevice(prev);
  if (rc != 0) {
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      err_prefix(e, "device arena of %zu bytes on device %d (%zu of %zu bytes free): ", bytes,
                 device, free_b, total_b);
    else
      err_prefix(e, "device arena of %zu bytes on device %d: ", bytes, device);
    (void)cudaGetLastError();
    (void)cudaSetDevice(prev);
    goto fail;
  }
  a->c.base = (uintptr_t)p;
  *out = a;
  return 0;
fail:
  free(a->c.b);
  free(a);
  return rc;
}

void eng_cuda_arena_destroy(eng_cuda_arena *a) {
  if (!a) return;
  int prev = 0;
  // cudaFree synchronises the device; destroy only runs at unload.
  if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(a->device) == cudaSuccess) {
    (void)cudaFree((void *)a->c.base);
    (void)cudaSetDevice(prev);
  }
  (void)cudaGetLastError();
  free(a->c.b);
  free(a);
}

int eng_cuda_arena_alloc(eng_cuda_arena *a, size_t bytes, size_t align, void **ptr, err *e) {
  return carver_alloc(&a->c, bytes, align, ptr, e);
}

int eng_cuda_arena_free(eng_cuda_arena *a, void *ptr, err *e) { return carver_free(&a->c, ptr, e); }

void eng_cuda_arena_reset(eng_cuda_arena *a) {
  carver_reset(&a->c);
  a->c.resets++;
}

void eng_cuda_arena_stats(const eng_cuda_arena *a, eng_cuda_mem_stats *s) { carver_stats(&a->c, s); }

int eng_cuda_arena_device(const eng_cuda_arena *a) { return a->device; }

// --- pinned host pool

struct eng_cuda_pinned {
  carver c;
};

int eng_cuda_pinned_create(eng_cuda_pinned **out, size_t bytes, int max_blocks, err *e) {
  if (!out || bytes == 0 || max_blocks < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "pinned pool: bad arguments (%zu bytes)", bytes);
  *out = NULL;
  eng_cuda_pinned *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "pinned pool: out of host memory");
  p->c.what = "pinned pool";
  void *mem = NULL;
  int rc = carver_init(&p->c, bytes, max_blocks, e);
  if (rc != 0) goto fail;
  rc = CUDA_OK(e, cudaHostAlloc(&mem, bytes, cudaHostAllocPortable));
  p->c.real_allocs++;
  if (rc != 0) {
    err_prefix(e, "pinned pool of %zu bytes: ", bytes);
    goto fail;
  }
  p->c.base = (uintptr_t)mem;
  *out = p;
  return 0;
fail:
  free(p->c.b);
  free(p);
  return rc;
}

void eng_cuda_pinned_destroy(eng_cuda_pinned *p) {
  if (!p) return;
  (void)cudaFreeHost((void *)p->c.base);
  (void)cudaGetLastError();
  free(p->c.b);
  free(p);
}

int eng_cuda_pinned_alloc(eng_cuda_pinned *p, size_t bytes, size_t align, void **ptr, err *e) {
  return carver_alloc(&p->c, bytes, align, ptr, e);
}

int eng_cuda_pinned_free(eng_cuda_pinned *p, void *ptr, err *e) { return carver_free(&p->c, ptr, e); }

void eng_cuda_pinned_reset(eng_cuda_pinned *p) {
  carver_reset(&p->c);
  p->c.resets++;
}

void eng_cuda_pinned_stats(const eng_cuda_pinned *p, eng_cuda_mem_stats *s) { carver_stats(&p->c, s); }
