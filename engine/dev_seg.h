// engine/dev_seg.h: input bytes that already live on a GPU. A batch's input
// is one contiguous run of bytes (its rows one after the other); some of
// those byte ranges may be device segments (a request's input in a client's
// CUDA shared memory region) that a GPU plan copies device to device into
// its input buffer, while the rest comes from host memory as usual. This
// module says which ranges are which: checks a batch's segments and walks
// one input as alternating host runs and device segments, in order. Pure C,
// no CUDA: the copies are the plan's (plan_cuda_slot.c).
#ifndef INFERD_ENGINE_DEV_SEG_H
#define INFERD_ENGINE_DEV_SEG_H

#include <stddef.h>

#include "kernels/base/err.h"

// [offset, offset + bytes) of input `input` lives at device address ptr of
// CUDA device `device` (the host bytes of that range are not read).
typedef struct eng_dev_seg {
  size_t input;   // index into the inputs given with the segments
  size_t offset;  // bytes into that input's data
  size_t bytes;
  int device;       // CUDA ordinal the bytes live on
  const void *ptr;  // their device address
} eng_dev_seg;

// Checks segments against inputs of total[i] bytes (n_inputs of them):
// sorted by (input, offset), non-empty, not overlapping, within their
// input, on a device >= 0 with a pointer. INVALID_ARGUMENT naming the
// first segment that is not.
int eng_dev_seg_check(const eng_dev_seg *segs, size_t n_segs, const size_t *total, size_t n_inputs, err *e);

// One piece of an input's copy-in: a host run (seg NULL) or a device segment.
typedef struct eng_copy_run {
  size_t offset, bytes;
  const eng_dev_seg *seg;
} eng_copy_run;

// Walks input `input` of `total` bytes over checked segments (all inputs'
// segments may be passed: the others are skipped).
typedef struct eng_seg_walk {
  const eng_dev_seg *segs;
  size_t n_segs, k;
  size_t input, total, at;
} eng_seg_walk;

void eng_seg_walk_init(eng_seg_walk *w, const eng_dev_seg *segs, size_t n_segs, size_t input, size_t total);
// The next run in offset order; 0 when the input is covered. Empty host
// runs (between adjacent segments) are not produced.
int eng_seg_walk_next(eng_seg_walk *w, eng_copy_run *run);

#endif
