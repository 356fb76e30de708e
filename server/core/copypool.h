// server/core/copypool.h: a few threads that share the host copies of a big
// batch with the thread that owns it. The instance thread (a GPU instance's
// submit thread, a CPU instance's thread) gathers a batch's inputs row by
// row into one buffer (pinned staging on a GPU), and the thread that
// finishes it (a GPU instance's done thread) packs each request's slice of
// the outputs into its answer: one thread per instance moving every byte.
// On an H200 serving ResNet-50 over gRPC, 24 FP32 images (14 MB) took that
// thread 4.1 ms per batch, 34 BERT-base answers (13 MB) 3.0 ms, while the
// GPU waited (issue 32). One core's memcpy is far below the memory's
// bandwidth; several cores copying disjoint pieces come closer to it.
//
// One pool per server (--copy-threads, shared by every instance: a batch
// big enough to split is rare enough that a pool per instance would sleep),
// apart from OpenMP's, which the CPU plan's ops use. The caller always
// works too: it takes pieces of its own job until none is left, then waits
// only for the pieces a helper already took. So a busy pool never makes a
// copy slower than the caller alone would be (less the wakeup), and two
// instances splitting at once share the helpers. Below --copy-min-bytes a
// job runs on the caller alone: waking a thread costs more than it saves.
//
// docs/copies.md lists every host copy of a request's bytes and which of
// them go through here.
#ifndef INFERD_SERVER_COPYPOOL_H
#define INFERD_SERVER_COPYPOOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct srv_copypool srv_copypool;

// n_threads helpers (>= 1); jobs of fewer than min_bytes stay on the caller.
int srv_copypool_create(int n_threads, size_t min_bytes, srv_copypool **out, err *e);

// Joins the threads. No job may be running. NULL is a no-op.
void srv_copypool_destroy(srv_copypool *p);

// Helpers (0 for NULL) and the split threshold (SIZE_MAX for NULL: never).
int srv_copypool_threads(const srv_copypool *p);
size_t srv_copypool_min_bytes(const srv_copypool *p);

// Runs fn(ctx, i) once for every i in [0, n), on the calling thread and on
// up to all the helpers at once, and returns when every call has returned.
// fn must be safe to run concurrently for different i. With p NULL or n < 2
// the caller runs them all, in order.
typedef void (*srv_copypool_fn)(void *ctx, size_t i);
void srv_copypool_for(srv_copypool *p, size_t n, srv_copypool_fn fn, void *ctx);

// --- copy lists

// One copy of a list. `guarded`: src lies in client system shared memory,
// read under the SIGBUS guard (server/sec/shmguard.h); a fault there sets
// `faulted` (dst then holds part of the bytes) and the caller fails the
// request it belongs to (`tag` is the caller's, to find it).
typedef struct srv_copy_seg {
  void *dst;
  const void *src;
  size_t n;
  int guarded;
  atomic_int faulted;
  uintptr_t tag;
} srv_copy_seg;

// Copies every segment: on the caller alone when their bytes add up to less
// than the pool's min_bytes (or p is NULL), else split into pieces of about
// equal bytes (a piece may end inside a segment and the next begin there,
// so one big request is spread too) run through srv_copypool_for.
void srv_copypool_copy(srv_copypool *p, srv_copy_seg *segs, size_t n_segs);

// The split itself, exposed for the tests: piece k of `parts` over the
// segments' `total` bytes (their sum) calls span(ctx, seg, offset, bytes)
// for each run of one segment it covers, in order. Pieces cover the bytes
// once, in list order; their boundaries fall on 64-byte multiples of the
// list's running offset (no two threads write one cache line of a
// contiguous destination) except at the ends, so sizes differ by < 128.
typedef void (*srv_copy_span_fn)(void *ctx, srv_copy_seg *seg, size_t offset, size_t bytes);
void srv_copy_piece(srv_copy_seg *segs, size_t n_segs, size_t total, size_t parts, size_t k, srv_copy_span_fn span,
                    void *ctx);

// How many pieces srv_copypool_copy makes of `total` bytes on p: 1 below
// min_bytes, else one per thread (caller included), but none under
// SRV_COPY_PIECE_MIN bytes.
#define SRV_COPY_PIECE_MIN ((size_t)128 << 10)
size_t srv_copy_parts(const srv_copypool *p, size_t total);

#endif
