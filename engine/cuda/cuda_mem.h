// cuda_mem.h: memory sized once at model load, carved on the request path.
// A device arena (one cudaMalloc) and a pinned host pool (one cudaHostAlloc)
// hand out aligned blocks from their region with a first-fit carver, so no
// cudaMalloc/cudaHostAlloc (which synchronise the device and take locks)
// happens while serving. Each object counts its real allocations, so a test
// can prove the request path makes none.
//
// Neither object is thread-safe: each model instance owns its own, used from
// its one thread. Blocks are host-side bookkeeping only; freeing a block does
// not wait for work on any stream, so free or reset only after the streams
// that use the blocks have been synchronised (or ordered by an event).
#ifndef INFERD_ENGINE_CUDA_MEM_H
#define INFERD_ENGINE_CUDA_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// Alignment used when _alloc is passed 0: enough for any vector load and for
// cuBLASLt's preferred 256-byte alignment.
#define ENG_CUDA_MEM_ALIGN 256
// Block bookkeeping slots when _create is passed max_blocks 0.
#define ENG_CUDA_MEM_BLOCKS 4096

typedef struct eng_cuda_mem_stats {
  size_t capacity;       // bytes in the region
  size_t used;           // bytes in live blocks (alignment padding excluded)
  size_t high_water;     // most bytes ever live at once
  size_t largest_free;   // largest block that could still be carved (before alignment)
  size_t live_blocks;
  uint64_t allocs, frees, resets, failed;
  uint64_t real_allocs;  // cudaMalloc / cudaHostAlloc calls this object made (1 after create)
} eng_cuda_mem_stats;

// --- device arena

typedef struct eng_cuda_arena eng_cuda_arena;

// Reserves bytes of device memory on device with one cudaMalloc. max_blocks
// bounds how many blocks (live and free) can exist at once (0: default).
// Out of device memory: ERR_RESOURCE_EXHAUSTED naming the size.
int eng_cuda_arena_create(eng_cuda_arena **out, int device, size_t bytes, int max_blocks, err *e);
void eng_cuda_arena_destroy(eng_cuda_arena *a);

// Carves bytes (> 0) aligned to align (a power of two; 0 = ENG_CUDA_MEM_ALIGN)
// into *ptr. No room: ERR_RESOURCE_EXHAUSTED naming the request and what is free.
int eng_cuda_arena_alloc(eng_cuda_arena *a, size_t bytes, size_t align, void **ptr, err *e);
// Returns one block; ptr must come from _alloc on this arena and be live.
int eng_cuda_arena_free(eng_cuda_arena *a, void *ptr, err *e);
// Returns every block at once (end of a batch).
void eng_cuda_arena_reset(eng_cuda_arena *a);
void eng_cuda_arena_stats(const eng_cuda_arena *a, eng_cuda_mem_stats *s);
int eng_cuda_arena_device(const eng_cuda_arena *a);

// --- pinned (page-locked) host pool, for staging copies to and from the device

typedef struct eng_cuda_pinned eng_cuda_pinned;

// Reserves bytes of pinned host memory with one cudaHostAlloc (portable:
// pinned for every device). Out of memory: ERR_RESOURCE_EXHAUSTED naming the size.
int eng_cuda_pinned_create(eng_cuda_pinned **out, size_t bytes, int max_blocks, err *e);
void eng_cuda_pinned_destroy(eng_cuda_pinned *p);
int eng_cuda_pinned_alloc(eng_cuda_pinned *p, size_t bytes, size_t align, void **ptr, err *e);
int eng_cuda_pinned_free(eng_cuda_pinned *p, void *ptr, err *e);
void eng_cuda_pinned_reset(eng_cuda_pinned *p);
void eng_cuda_pinned_stats(const eng_cuda_pinned *p, eng_cuda_mem_stats *s);

#ifdef __cplusplus
}
#endif

#endif
