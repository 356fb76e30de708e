// tests/gpu/cuda_die.h: the one abort-on-failure CUDA check that the GPU
// tests (tests/gpu) and the kernel benchmarks (tests/bench/kernels) wrap
// their own plumbing in (alloc, copy, sync, events, streams): after such a
// failure nothing they compare or time can be trusted, so the process names
// the call and exits 1. Not for the code under test: tests CHECK what a
// launcher returns, and the server turns CUDA failures into err values
// (engine/cuda/cuda_check.h).
#ifndef INFERD_TESTS_GPU_CUDA_DIE_H
#define INFERD_TESTS_GPU_CUDA_DIE_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_DIE(call)                                                                                 \
  do {                                                                                                 \
    cudaError_t cuda_die_rc_ = (call);                                                                 \
    if (cuda_die_rc_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(cuda_die_rc_)); \
      exit(1);                                                                                         \
    }                                                                                                  \
  } while (0)

#endif
