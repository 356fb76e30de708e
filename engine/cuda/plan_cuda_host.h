// engine/cuda/plan_cuda_host.h: host fallback inside the CUDA plan (issue 34
// item 3), as onnxruntime's execution providers fall back to their CPU
// provider. A node whose op has no CUDA path (no entry in its family's CUDA
// table, or an init that refuses the node's mode with ERR_UNIMPLEMENTED)
// runs on the host, in the middle of the GPU plan, with the op's CPU run
// function (the same registry entry's eng_op_def.run). Which nodes, which
// values cross and the operands each host run reads are decided by the
// device-free engine/cpu/plan_hostfb.h (unit-tested without a GPU); here is
// the CUDA side of it:
//   - its device inputs are copied to pinned host buffers of the slot
//     (cudaMemcpyAsync D2H on the slot's stream; an NHWC-stored operand
//     transposed back to NCHW on the device first), constants read from
//     the plan's host copy, folded values staged with the inputs;
//   - the CPU kernel runs from a host callback (cudaLaunchHostFunc, which a
//     stream capture records as a host node, so CUDA graphs keep working);
//     an FP16 plan's operands are widened and its results narrowed there;
//   - its outputs are copied back H2D only where a device node or the
//     graph's outputs read them: a host node feeding host nodes keeps its
//     intermediates on the host, so consecutive host nodes share one round
//     trip.
// The pinned buffers are offsets in the slot's one pinned pool, sized with
// the rest of its staging for each run's shapes (eng_cuda__ensure_staging:
// at create for static shapes, so no allocation per run). What a callback
// reads (shapes, parameters, pointers) is a snapshot taken while enqueueing
// (a host_run): one per captured graph, kept with it, so a replay runs with
// the shapes of the signature it was captured for; one per slot for plain
// launches. A failing CPU kernel records its error there; finish returns it.
// Runtime shapes (per-signature plans) work as for the device nodes: the
// snapshot and the offsets follow each signature.
//
// Not a public header: the CUDA plan's files only.
#ifndef INFERD_ENGINE_PLAN_CUDA_HOST_H
#define INFERD_ENGINE_PLAN_CUDA_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cpu/plan_hostfb.h"
#include "kernels/base/err.h"

typedef struct eng_cuda_plan eng_cuda_plan;
typedef struct cuda_op cuda_op;
typedef struct eng_plan eng_plan;
typedef struct slot slot;
typedef eng_hostfb_run host_run;

// At create, after each node's CUDA op is known and the CPU planner ran:
// the host fallback's plan (p->hf, plan_hostfb.h) and the load log's lines
// for the host nodes. why[i]: the op's init refusal for node i, or NULL.
// Refuses (ERR_UNIMPLEMENTED) a node that neither backend can run.
// Each node's CUDA op's init, at create (on the plan's device): a node whose init refuses its
// mode or element types (ERR_UNIMPLEMENTED; eng_cuda__load_dt says what the load knows) and that
// has a CPU path loses its op (ops[i] NULL) and gets why[i] (strdup'ed: the caller frees it), the
// reason its host line gives; eng_cuda__host_plan then runs it on the host. Another error fails
// the load, naming the node. Touches no device itself, so tests/unit/engine/test_cuda_init.c
// runs it without a GPU.
int eng_cuda__init_ops(const eng_plan *pl, int half, const cuda_op **ops, void **nstate, char **why, err *e);
int eng_cuda__host_plan(eng_cuda_plan *p, const uint8_t *derived, char *const *why, err *e);
void eng_cuda__host_free(eng_cuda_plan *p);
// Nodes with no CUDA op (host and folded): 0 means no snapshots are needed.
size_t eng_cuda__host_noop(const eng_cuda_plan *p);

// A snapshot for one launch (NULL: out of memory); freed with host_run_free (NULL is fine).
host_run *eng_cuda__host_run_new(const eng_cuda_plan *p);
void eng_cuda__host_run_free(host_run *r);
// Before a launch of r (the slot idle): its error cleared.
void eng_cuda__host_run_reset(host_run *r);
// After the launch's end event: the first CPU kernel error of that launch, prefixed with its node.
int eng_cuda__host_run_check(const host_run *r, err *e);

// ensure_staging's share: the pinned offsets of this run's host copies,
// placed from byte `total` of the slot's pool; returns the new total.
size_t eng_cuda__host_staging(eng_cuda_plan *p, slot *s, size_t total);
// At submit, after staging's offsets: folded values host nodes read, copied into their pinned places.
void eng_cuda__host_stage(eng_cuda_plan *p, slot *s);
// At the start of an enqueue into s->hrun: nothing is on the host yet.
void eng_cuda__host_begin(eng_cuda_plan *p, slot *s);
// Enqueues host node i on the slot's stream: copies down, the callback, copies up.
int eng_cuda__host_node(eng_cuda_plan *p, slot *s, size_t i, err *e);

#endif
