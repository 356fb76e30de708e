// engine/cpu/plan.h: an execution plan for one eng_graph on the CPU: per-node
// attributes parsed once, shapes inferred, and every intermediate given a
// fixed offset in one arena, shared between tensors whose lifetimes do not
// overlap (views such as Reshape take no memory, elementwise ops write in
// place when their input dies there). The arena is sized at creation for
// max_batch rows, so runs up to that batch allocate nothing.
//
// One plan is used by one thread at a time; any number of plans may share
// one graph concurrently.
#ifndef INFERD_ENGINE_PLAN_H
#define INFERD_ENGINE_PLAN_H

#include <stddef.h>

#include "engine/graph/graph.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"

typedef struct eng_plan eng_plan;

// max_batch > 0: dimension 0 of every graph input is the batch dimension
// (whatever its declared value) and the arena is sized for max_batch rows.
// max_batch == 0: the declared shapes are used as they are.
// Graph inputs with other dynamic (-1) dims are planned at the first run
// with their concrete shapes. The plan borrows g, which must outlive it.
int eng_plan_create(const eng_graph *g, int max_batch, eng_plan **out, err *e);
void eng_plan_destroy(eng_plan *p);

// inputs: one per graph input, in graph order, with the declared dtype
// (FP16/FP64 inputs are converted to FP32 at the edge) and a concrete shape
// (dim 0 = rows, 1..max_batch, when batching). outputs: n_out ==
// eng_graph_n_outputs; each is filled with the declared dtype, the shape
// and a pointer into plan-owned memory valid until the next run or destroy.
// A run whose shapes do not fit the current layout re-plans (growing the
// arena if needed) and keeps the new layout for later runs.
int eng_plan_run(eng_plan *p, const eng_tensor *inputs, size_t n_in, eng_tensor *outputs,
                 size_t n_out, err *e);

// Shape inference alone, for a subgraph's plan (engine/ops/ctrl/): inputs
// as eng_plan_run's but their data may be NULL where unknown (an error when
// the graph reads those bytes while inferring shapes); outputs get the
// internal type (FP32 for floats) and shape each computes, and data where
// their bytes are known when planning (constants, folded values, inputs
// passed through), else NULL. Lays nothing out, allocates no arena.
int eng_plan_infer(eng_plan *p, const eng_tensor *inputs, size_t n_in, eng_tensor *outputs,
                   size_t n_out, err *e);

// Bytes of the arena the current layout needs (0 before any layout), and
// the sum of every node output's bytes for the same shapes, i.e. what the
// arena would need without reuse. For tests and metrics.
size_t eng_plan_arena_bytes(const eng_plan *p);
size_t eng_plan_naive_bytes(const eng_plan *p);

#endif
