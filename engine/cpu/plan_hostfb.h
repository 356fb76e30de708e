// engine/cpu/plan_hostfb.h: the host fallback's device-free half (issue 34
// item 3): which nodes of a device plan run on the host, which values cross
// between device and host around them, the host memory they use, and the
// snapshot of operands the host runs read. A device plan (the CUDA plan,
// engine/cuda/plan_cuda_host.h) does the copies and the launches through
// eng_hostfb_io; everything else lives here, built in every configuration,
// so CI exercises it without a GPU (tests/unit/engine/test_plan_hostfb.c runs
// it with host memory as the "device").
//
// The rules:
//   - a host node: a node with no device op, not folded by the planner for
//     this signature; it runs with its op's CPU run (eng_op_def.run);
//   - an input of a host node comes down once per run (before its first host
//     reader), unless it is a constant (read from the plan's host copy), a
//     folded value (staged from the planner's memory into the host buffer), or
//     made on the host by an earlier host node;
//   - an output of a host node goes up after it only where a device node or a
//     graph output reads it: host nodes feeding host nodes keep their
//     intermediates on the host, so a chain of them makes one round trip;
//   - values stored narrow on the device (FP32 as FP16 in half plans) come down
//     as stored and are widened into an FP32 twin inside the host run, whose
//     outputs are narrowed back before they go up.
// Host memory (one region per value, offsets from eng_hostfb_staging) is the
// caller's: pinned memory for the CUDA plan.
//
// Not a public header: the planner's backends only.
#ifndef INFERD_ENGINE_PLAN_HOSTFB_H
#define INFERD_ENGINE_PLAN_HOSTFB_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cpu/plan_internal.h"
#include "kernels/base/err.h"

typedef struct eng_hostfb eng_hostfb;
typedef struct eng_hostfb_run eng_hostfb_run;
typedef struct eng_hostfb_job eng_hostfb_job;

// Per value: computable from constants, parameters given as graph inputs and
// input shapes alone, so folded on the host for every signature (the
// planner's foldable, less its size cap). NULL when out of memory; free() it.
uint8_t *eng_hostfb_derived(const eng_plan *pl);

// At create, once the planner ran and each node's device op is known
// (dev_op[i] nonzero: node i has one). derived: eng_hostfb_derived's. why[i]:
// the device path's refusal of node i at init, or NULL (none at all; why
// itself may be NULL). half: the device stores FP32 values as FP16. Finds the
// host nodes at load (no device op, not derived: each gets a load log line)
// and refuses (ERR_UNIMPLEMENTED) a node that neither side runs. The plan
// borrows pl, which must outlive it. On failure *out is NULL.
int eng_hostfb_create(const eng_plan *pl, const uint8_t *dev_op, const uint8_t *derived, char *const *why, int half,
                      eng_hostfb **out, err *e);
void eng_hostfb_destroy(eng_hostfb *h);

// Host nodes found at load, and the k-th one's line: "node 'X' (op_type
// 'DFT'): no CUDA path, runs on the host (N bytes in, M out per batch)"
// (borrowed; NULL past the count).
size_t eng_hostfb_n_host(const eng_hostfb *h);
const char *eng_hostfb_line(const eng_hostfb *h, size_t k);
// Nodes with no device op (host nodes and those folded): a snapshot's capacity; 0: no fallback at all.
size_t eng_hostfb_n_noop(const eng_hostfb *h);
// Whether node i runs on the host this run (no device op, not folded).
int eng_hostfb_is_host(const eng_hostfb *h, size_t i);
// Whether value v is read on the device (by a device node or as a graph output).
int eng_hostfb_dev_read(const eng_hostfb *h, int v);

// --- per run, after the planner prepared this run's shapes

// The host regions of this run's values, placed from byte `total` in
// `align`-byte steps: hv_off[v] where v is kept as stored on the device,
// hv32_off[v] its FP32 twin (half plans). Returns the new total.
size_t eng_hostfb_staging(eng_hostfb *h, size_t *hv_off, size_t *hv32_off, size_t total, size_t align);
// The folded values host nodes read, copied into their regions of base.
void eng_hostfb_stage(const eng_hostfb *h, uint8_t *base, const size_t *hv_off);

// A snapshot of one launch's host runs: what each reads (shapes,
// parameters, host pointers), fixed while enqueueing. A captured graph keeps
// its own; NULL: out of memory. Free with eng_hostfb_run_free (NULL is fine).
eng_hostfb_run *eng_hostfb_run_new(const eng_hostfb *h);
void eng_hostfb_run_free(eng_hostfb_run *r);
// Before a launch of r: its error cleared.
void eng_hostfb_run_reset(eng_hostfb_run *r);
// After the launch completed: the first host run's error, prefixed with its node; 0 if none.
int eng_hostfb_run_check(const eng_hostfb_run *r, err *e);
// The host function of one job: widen, the CPU kernel, narrow. Makes no device call.
void eng_hostfb_job_run(void *job);

// What the device side does for eng_hostfb_node, in stream order. Each returns 0 or an error in e.
typedef struct eng_hostfb_io {
  void *ctx;
  // input k (value v) of node i, `bytes` as stored on the device, copied into host memory dst
  int (*down)(void *ctx, size_t i, int k, int v, void *dst, size_t bytes, err *e);
  // the job's host run, after the copies down and before the copies up
  int (*launch)(void *ctx, eng_hostfb_job *job, err *e);
  // value v, made on the host (src, `bytes` as stored on the device), copied up to its device buffer
  int (*up)(void *ctx, int v, const void *src, size_t bytes, err *e);
} eng_hostfb_io;

// This run's crossings so far (since eng_hostfb_begin): tests and stats.
typedef struct eng_hostfb_counts {
  size_t nodes;     // host nodes enqueued
  size_t down, up;  // values copied down and up
  size_t down_bytes, up_bytes;
} eng_hostfb_counts;

// At the start of an enqueue into r (NULL: nothing to fill): nothing is on the host yet.
void eng_hostfb_begin(eng_hostfb *h, eng_hostfb_run *r);
// Host node i into r, its host memory at base (offsets of eng_hostfb_staging):
// copies down, the job, copies up, through io. ERR_INTERNAL when r has no room
// (capacity or operand count).
int eng_hostfb_node(eng_hostfb *h, eng_hostfb_run *r, size_t i, uint8_t *base, const size_t *hv_off,
                    const size_t *hv32_off, const eng_hostfb_io *io, err *e);
void eng_hostfb_counts_get(const eng_hostfb *h, eng_hostfb_counts *c);

#endif
