// server/alloc.h: which malloc the process runs on, and handing memory it
// no longer uses back to the kernel.
//
// The server links jemalloc when the build found it (server/main.cmake,
// docs/dependencies.md): under a cancel-heavy soak glibc's per-thread arenas
// kept growing (+21 % RSS in 4 minutes, still climbing) where jemalloc stayed
// flat at the same throughput. Both are looked up at run time (dlsym of
// jemalloc's mallctl), so an LD_PRELOADed jemalloc counts too and nothing
// here needs jemalloc's headers.
#ifndef INFERD_SERVER_ALLOC_H
#define INFERD_SERVER_ALLOC_H

#include <stddef.h>

// Writes "jemalloc <version>", "a sanitizer's malloc" or "glibc malloc", and
// the file that supplies malloc, into buf (always NUL-terminated when n > 0)
// and returns buf.
const char *srv_alloc_describe(char *buf, size_t n);

// Returns freed pages to the kernel: jemalloc purges every arena's unused
// dirty pages, glibc trims its arenas (malloc_trim). Costs a walk of the
// allocator's state: for idle moments, not the request path. Returns what
// ran ("jemalloc's purge" or "malloc_trim"), a static string.
const char *srv_alloc_release(void);

// What the allocator holds, in bytes: `allocated` in live allocations (what
// the program asked for and has not freed: a leak or growing state shows
// here), `resident` in pages it holds that are backed by memory (the rest of
// RSS is code, stacks, CUDA's and gRPC's own mappings). jemalloc's stats
// (refreshed by its "epoch"), else glibc's mallinfo2 (its main heap, arenas
// and mmapped chunks). -1 where the allocator does not say. For a scrape, not
// the request path.
typedef struct srv_alloc_stats {
  long long allocated, resident;
} srv_alloc_stats;
srv_alloc_stats srv_alloc_stats_read(void);

#endif
