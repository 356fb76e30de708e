// engine/plan_cuda.h: the same execution plan as engine/plan.h, run on a
// CUDA device. The planning (node order, shapes, dtypes, arena layout,
// aliases, constants) is the CPU plan's own (engine/plan_internal.h); this
// backend places the arena in device memory, uploads the constants once and
// runs every node on one stream of its own.
//
// Memory is sized at create for max_batch rows: one device arena for the
// activations, one for the constants, one pinned host pool that stages
// inputs and outputs. A run within the planned shapes allocates nothing
// (no cudaMalloc/cudaHostAlloc); a run whose shapes need more re-plans and
// grows the pools, which eng_cuda_plan_real_allocs counts.
//
// FP32 arithmetic throughout (TF32 off). One plan is used by one thread at
// a time; any number of plans (on any devices) may share one graph.
#ifndef INFERD_ENGINE_PLAN_CUDA_H
#define INFERD_ENGINE_PLAN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "engine/err.h"
#include "engine/graph.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_cuda_plan eng_cuda_plan;

// max_batch as eng_plan_create. device: a runtime ordinal (eng_cuda_devices).
// A node whose op has no CUDA implementation fails with ERR_UNIMPLEMENTED,
// "op X not yet supported on CUDA". No usable device: ERR_UNAVAILABLE. The
// plan borrows g, which must outlive it.
int eng_cuda_plan_create(const eng_graph *g, int max_batch, int device, eng_cuda_plan **out,
                         err *e);
void eng_cuda_plan_destroy(eng_cuda_plan *p);

// The contract of eng_plan_run: host inputs (declared dtypes, FP16/BF16/FP64
// converted at the edge), outputs filled with declared dtype, shape and a
// pointer into the plan's pinned host memory, valid until the next run or
// destroy. Returns after the device finished.
int eng_cuda_plan_run(eng_cuda_plan *p, const eng_tensor *inputs, size_t n_in,
                      eng_tensor *outputs, size_t n_out, err *e);

// cudaMalloc + cudaHostAlloc calls made for this plan's arenas and staging
// since create (create's own included), and the bytes of the activation
// arena the current layout uses. For tests and metrics.
uint64_t eng_cuda_plan_real_allocs(const eng_cuda_plan *p);
size_t eng_cuda_plan_arena_bytes(const eng_cuda_plan *p);

#ifdef __cplusplus
}
#endif

#endif
