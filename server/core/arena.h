// server/core/arena.h: the memory of one ModelInfer request: its unpacked
// message and everything validation adds to it, freed in one go with the
// request (server/core/request.c).
//
// protobuf-c's default unpack makes one malloc per submessage, string, array
// and bytes field (about fifteen for a one-input request), each freed alone
// on the thread that answers; on a loaded server malloc and free were about
// a tenth of a CQ thread's CPU (tests/bench/RESULTS.md, issue 13). A
// request's arena takes them from one block sized from the message instead,
// and is freed whole with the request. A piece over SRV_ARENA_BIG (a large
// tensor's bytes, protobuf-c's scan slabs for messages of many fields) gets
// a block of its own that protobuf-c's free really frees, so a message of
// many tiny fields does not keep its parse scratch for the request's life.
#ifndef INFERD_SERVER_ARENA_H
#define INFERD_SERVER_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#define SRV_ARENA_BIG ((size_t)64 << 10)
#define SRV_ARENA_SLACK ((size_t)1024)  // beside the bytes: the tree's structs, names and arrays

typedef struct srv_arena srv_arena;

// An arena whose first block holds `hint` bytes of small pieces; NULL when out of memory.
srv_arena *srv_arena_create(size_t hint);
// n bytes, aligned for any type; NULL when out of memory. Freed with the arena.
void *srv_arena_alloc(srv_arena *a, size_t n);
// n * size zeroed bytes; NULL when out of memory or when the product overflows.
void *srv_arena_calloc(srv_arena *a, size_t n, size_t size);
// The arena as protobuf-c's allocator, for unpacking a message into it.
ProtobufCAllocator *srv_arena_protobuf(srv_arena *a);
// Frees every piece. NULL is a no-op.
void srv_arena_destroy(srv_arena *a);

#endif
