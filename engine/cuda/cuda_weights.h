// engine/cuda/cuda_weights.h: a model's weights on each device once.
//
// Every GPU instance of a model runs its own plan (engine/cuda/plan_cuda.h), but
// the weights are the graph's constants and never change: one device copy per
// (device, storage precision) serves every plan of that graph on that device.
// A store belongs to one graph (the model's); plans acquire the copy for
// their device (the first one uploads it, the later ones share it) and
// release it when they go; the last release frees the device memory.
//
// Derived copies (a Conv's weights packed KRSC for NHWC, engine/ops/conv/conv_cuda.c)
// are made once per copy as well, keyed by the constant's device pointer and a
// kind, and freed with the copy.
//
// Threads: any number of threads may acquire, release and ask for derived
// copies at once (one lock per store; uploads and derived copies are made under
// it, at load time or a plan's first run of a shape, never per batch).
#ifndef INFERD_ENGINE_CUDA_WEIGHTS_H
#define INFERD_ENGINE_CUDA_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/graph/graph.h"
#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_cuda_weights eng_cuda_weights;  // one graph's copies over devices and precisions
typedef struct eng_cuda_wset eng_cuda_wset;        // one (device, precision) copy

// The store borrows g, which must outlive it. Allocates nothing on a device.
int eng_cuda_weights_create(const eng_graph *g, eng_cuda_weights **out, err *e);
// After every acquired copy was released (a copy still held is freed anyway).
void eng_cuda_weights_destroy(eng_cuda_weights *w);

// The copy of the graph's constants on device: half = FP32 constants stored
// as FP16 (an FP16 plan's storage; FP32 and TF32 plans share the FP32 copy).
// Uploaded by the first caller for (device, half); later callers get the same
// copy. *uploaded (may be NULL) says which this call did. Out of device memory:
// ERR_RESOURCE_EXHAUSTED naming the size.
int eng_cuda_weights_acquire(eng_cuda_weights *w, int device, bool half, eng_cuda_wset **out, bool *uploaded,
                             err *e);
// Drops one hold of s (NULL: nothing); the last frees its device memory.
void eng_cuda_weights_release(eng_cuda_weights *w, eng_cuda_wset *s);

// Value v's device copy; NULL where v is not a constant with bytes.
void *eng_cuda_wset_ptr(const eng_cuda_wset *s, size_t v);
// Device bytes held by s: the constants and every derived copy.
uint64_t eng_cuda_wset_bytes(const eng_cuda_wset *s);
// How many plans hold s now.
int eng_cuda_wset_holders(const eng_cuda_wset *s);

// A copy of bytes derived from one of s's constants (src, its device
// pointer), identified by (src, kind): the first caller allocates it on s's
// device and make fills it (on a stream of its own choosing, finished before
// it returns 0); later callers get the same pointer. *made (may be NULL) is
// 1 where this call allocated it. The copy lives as long as s.
typedef int (*eng_cuda_wset_make_fn)(void *dst, const void *src, void *ctx, err *e);
int eng_cuda_wset_derived(eng_cuda_wset *s, const void *src, int kind, size_t bytes, eng_cuda_wset_make_fn make,
                          void *ctx, void **out, int *made, err *e);

#ifdef __cplusplus
}
#endif

#endif
