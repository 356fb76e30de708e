// server/obs/gpumon.h: per-GPU figures for /metrics and the dashboard.
//  - NVML (utilization, memory, power), loaded at run time with dlopen so a
//    machine without the driver's libnvidia-ml runs on without them;
//  - the engine-measured busy time: the union, over every batch that ran on
//    the device, of [start, end] of its copies and compute as CUDA events
//    timed them (the engine stamps each batch; this aggregates at
//    completion), so it also works on a MIG slice, where NVML reports no
//    utilization.
#ifndef INFERD_SERVER_GPUMON_H
#define INFERD_SERVER_GPUMON_H

#include <stdint.h>

#include "kernels/base/err.h"

typedef struct prof_gpus prof_gpus;

typedef struct prof_gpu_info {
  char uuid[48];   // "GPU-..." (or a MIG instance's)
  char name[256];
} prof_gpu_info;

typedef struct prof_gpu_sample {
  int nvml;                 // 1: NVML answered for this device
  double utilization;       // 0..1 (NVML); -1 where it gives none (MIG)
  double mem_total, mem_used;    // bytes (NVML); -1 unknown
  double power_w, power_limit_w;  // watts (NVML); -1 unknown
  double busy_s;            // engine-measured busy seconds since start
  double busy_fraction;     // the same over the last 5 whole seconds, 0..1
} prof_gpu_sample;

// n devices in CUDA runtime order (n may be 0). Never fails for want of
// NVML; prof_gpus_nvml_status says what happened.
int prof_gpus_create(const prof_gpu_info *devs, int n, prof_gpus **out, err *e);
void prof_gpus_destroy(prof_gpus *g);
int prof_gpus_n(const prof_gpus *g);
const prof_gpu_info *prof_gpus_info(const prof_gpus *g, int dev);
const char *prof_gpus_nvml_status(const prof_gpus *g);

// A batch kept device dev busy over [start_us, end_us] (CLOCK_MONOTONIC).
// Batches arrive roughly in end order from several threads; overlaps with
// the intervals already counted are counted once.
void prof_gpus_busy(prof_gpus *g, int dev, int64_t start_us, int64_t end_us);

void prof_gpus_sample(prof_gpus *g, int dev, int64_t now_us, prof_gpu_sample *s);

#endif
