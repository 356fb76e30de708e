// test_cuda_mem.c: the device arena and pinned pool (engine/cuda/cuda_mem.c):
// carving, alignment, freeing with merges, reset, exhaustion messages, and
// that 1000 request-path allocations make no real CUDA allocation.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_mem.h"

static void require_device(void) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n == 0) {
    printf("SKIP: no CUDA device (%s)\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "none visible");
    exit(77);
  }
}

#define MIB ((size_t)1 << 20)

static int overlaps(uintptr_t a, size_t an, uintptr_t b, size_t bn) { return a < b + bn && b < a + an; }

static void test_arena(void) {
  err e;
  eng_cuda_arena *a = NULL;
  CHECK_EQ_INT(eng_cuda_arena_create(&a, 0, MIB, 64, &e), 0);
  if (!a) return;
  eng_cuda_mem_stats s;
  eng_cuda_arena_stats(a, &s);
  CHECK_EQ_INT(s.capacity, MIB);
  CHECK_EQ_INT(s.real_allocs, 1);
  CHECK_EQ_INT(s.used, 0);
  CHECK_EQ_INT(s.largest_free, MIB);
  CHECK_EQ_INT(eng_cuda_arena_device(a), 0);

  // --- carving and alignment
  struct { size_t n, align; void *p; } req[] = {{100, 0, NULL}, {1, 4096, NULL}, {3000, 16, NULL},
                                                {17, 512, NULL}, {65536, 256, NULL}, {1, 1, NULL}};
  int nreq = (int)(sizeof req / sizeof req[0]);
  for (int i = 0; i < nreq; i++) {
    CHECK_EQ_INT(eng_cuda_arena_alloc(a, req[i].n, req[i].align, &req[i].p, &e), 0);
    size_t al = req[i].align ? req[i].align : ENG_CUDA_MEM_ALIGN;
    CHECK(req[i].p != NULL);
    CHECK_EQ_INT((uintptr_t)req[i].p % al, 0);
  }
  for (int i = 0; i < nreq; i++)
    for (int j = i + 1; j < nreq; j++)
      CHECK(!overlaps((uintptr_t)req[i].p, req[i].n, (uintptr_t)req[j].p, req[j].n));
  eng_cuda_arena_stats(a, &s);
  CHECK_EQ_INT(s.used, 100 + 1 + 3000 + 17 + 65536 + 1);
  CHECK_EQ_INT(s.live_blocks, nreq);
  CHECK_EQ_INT(s.allocs, nreq);

  // The blocks are real device memory: fill each with its own byte, read back.
  struct cudaPointerAttributes pa;
  CHECK_EQ_INT(cudaPointerGetAttributes(&pa, req[2].p), cudaSuccess);
  CHECK_EQ_INT(pa.type, cudaMemoryTypeDevice);
  for (int i = 0; i < nreq; i++) CHECK_EQ_INT(cudaMemset(req[i].p, 0x10 + i, req[i].n), cudaSuccess);
  for (int i = 0; i < nreq; i++) {
    unsigned char *h = malloc(req[i].n);
    CHECK_EQ_INT(cudaMemcpy(h, req[i].p, req[i].n, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t bad = 0;
    for (size_t k = 0; k < req[i].n; k++) bad += h[k] != (unsigned char)(0x10 + i);
    CHECK_EQ_INT(bad, 0);
    free(h);
  }

  // --- bad requests
  void *p = NULL;
  CHECK_EQ_INT(eng_cuda_arena_alloc(a, 0, 0, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_cuda_arena_alloc(a, 10, 3, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_cuda_arena_free(a, (char *)req[0].p + 16, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "not a live block");
  int stack_var = 0;
  CHECK_EQ_INT(eng_cuda_arena_free(a, &stack_var, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "not in the region");

  // --- exhaustion names the request and what is free
  CHECK_EQ_INT(eng_cuda_arena_alloc(a, 2 * MIB, 0, &p, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK(p == NULL);
  CHECK_CONTAINS(e.msg, "device arena (device 0)");
  CHECK_CONTAINS(e.msg, "cannot carve 2097152 bytes");
  CHECK_CONTAINS(e.msg, "of 1048576 bytes in use");
  printf("exhaustion: %s\n", e.msg);

  // --- free merges neighbours: after freeing everything (out of order) the
  // whole region is one block again.
  int order[] = {3, 0, 5, 1, 4, 2};
  for (int i = 0; i < nreq; i++) CHECK_EQ_INT(eng_cuda_arena_free(a, req[order[i]].p, &e), 0);
  CHECK_EQ_INT(eng_cuda_arena_free(a, req[0].p, &e), ERR_INVALID_ARGUMENT);  // double free
  eng_cuda_arena_stats(a, &s);
  CHECK_EQ_INT(s.used, 0);
  CHECK_EQ_INT(s.live_blocks, 0);
  CHECK_EQ_INT(s.largest_free, MIB);
  void *whole = NULL;
  CHECK_EQ_INT(eng_cuda_arena_alloc(a, MIB, 0, &whole, &e), 0);
  CHECK_EQ_INT(eng_cuda_arena_alloc(a, 1, 1, &p, &e), ERR_RESOURCE_EXHAUSTED);

  // --- reset returns everything at once
  eng_cuda_arena_reset(a);
  eng_cuda_arena_stats(a, &s);
  CHECK_EQ_INT(s.used, 0);
  CHECK_EQ_INT(s.resets, 1);
  CHECK_EQ_INT(s.high_water, MIB);
  void *again = NULL;
  CHECK_EQ_INT(eng_cuda_arena_alloc(a, MIB, 0, &again, &e), 0);
  CHECK(again == whole);
  eng_cuda_arena_reset(a);

  // --- block slots are bounded (64 here)
  int got = 0, rc = 0;
  for (int i = 0; i < 100 && rc == 0; i++) {
    rc = eng_cuda_arena_alloc(a, 64, 16, &p, &e);
    if (rc == 0) got++;
  }
  CHECK_EQ_INT(rc, ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "block slots");
  CHECK(got >= 60 && got <= 66);
  eng_cuda_arena_reset(a);

  // --- the request path: 1000 rounds of mixed allocations, frees and resets
  // make no real allocation, and the device's free memory does not move.
  size_t free0 = 0, free1 = 0, total = 0;
  CHECK_EQ_INT(cudaMemGetInfo(&free0, &total), cudaSuccess);
  eng_cuda_arena_stats(a, &s);
  uint64_t real0 = s.real_allocs;
  int fails = 0;
  for (int r = 0; r < 1000; r++) {
    void *x = NULL, *y = NULL, *z = NULL;
    fails += eng_cuda_arena_alloc(a, 1 + (size_t)(r * 37) % 5000, 0, &x, &e) != 0;
    fails += eng_cuda_arena_alloc(a, 4096, 1024, &y, &e) != 0;
    fails += eng_cuda_arena_alloc(a, 1 + (size_t)(r * 101) % 20000, 16, &z, &e) != 0;
    fails += eng_cuda_arena_free(a, y, &e) != 0;
    if (r % 10 == 9) eng_cuda_arena_reset(a);
    else {
      fails += eng_cuda_arena_free(a, x, &e) != 0;
      fails += eng_cuda_arena_free(a, z, &e) != 0;
    }
  }
  CHECK_EQ_INT(fails, 0);
  eng_cuda_arena_stats(a, &s);
  CHECK_EQ_INT(s.real_allocs, real0);
  CHECK_EQ_INT(s.live_blocks, 0);
  CHECK_EQ_INT(s.largest_free, MIB);
  CHECK_EQ_INT(cudaMemGetInfo(&free1, &total), cudaSuccess);
  CHECK_EQ_INT(free1, free0);
  eng_cuda_arena_destroy(a);

  // --- creation failures
  eng_cuda_arena *big = NULL;
  size_t huge = (size_t)1 << 50;  // 1 PiB
  CHECK_EQ_INT(eng_cuda_arena_create(&big, 0, huge, 0, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK(big == NULL);
  CHECK_CONTAINS(e.msg, "1125899906842624 bytes");
  CHECK_CONTAINS(e.msg, "cudaMalloc");
  printf("arena too big: %s\n", e.msg);
  CHECK_EQ_INT(eng_cuda_arena_create(&big, 9999, MIB, 0, &e), ERR_INTERNAL);
  CHECK_CONTAINS(e.msg, "cudaSetDevice(device)");
  CHECK_EQ_INT(eng_cuda_arena_create(&big, 0, 0, 0, &e), ERR_INVALID_ARGUMENT);
  int dev = -1;
  CHECK_EQ_INT(cudaGetDevice(&dev), cudaSuccess);
  CHECK_EQ_INT(dev, 0);  // create restores the caller's device
}

static void test_pinned(void) {
  err e;
  eng_cuda_pinned *p = NULL;
  CHECK_EQ_INT(eng_cuda_pinned_create(&p, 4 * MIB, 0, &e), 0);
  if (!p) return;
  eng_cuda_arena *a = NULL;
  CHECK_EQ_INT(eng_cuda_arena_create(&a, 0, 4 * MIB, 0, &e), 0);
  if (!a) {
    eng_cuda_pinned_destroy(p);
    return;
  }
  float *h_in = NULL, *h_out = NULL, *d = NULL;
  size_t n = 100000;
  CHECK_EQ_INT(eng_cuda_pinned_alloc(p, n * sizeof(float), 0, (void **)&h_in, &e), 0);
  CHECK_EQ_INT(eng_cuda_pinned_alloc(p, n * sizeof(float), 64, (void **)&h_out, &e), 0);
  CHECK_EQ_INT(eng_cuda_arena_alloc(a, n * sizeof(float), 0, (void **)&d, &e), 0);
  CHECK_EQ_INT((uintptr_t)h_in % ENG_CUDA_MEM_ALIGN, 0);
  CHECK_EQ_INT((uintptr_t)h_out % 64, 0);
  struct cudaPointerAttributes pa;
  CHECK_EQ_INT(cudaPointerGetAttributes(&pa, h_out), cudaSuccess);
  CHECK_EQ_INT(pa.type, cudaMemoryTypeHost);  // page-locked, known to CUDA
  // Staging round trip on a stream: pinned -> device -> pinned.
  for (size_t i = 0; i < n; i++) h_in[i] = (float)i * 0.5f;
  memset(h_out, 0, n * sizeof(float));
  cudaStream_t st;
  CHECK_EQ_INT(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  CHECK_EQ_INT(cudaMemcpyAsync(d, h_in, n * sizeof(float), cudaMemcpyHostToDevice, st), cudaSuccess);
  CHECK_EQ_INT(cudaMemcpyAsync(h_out, d, n * sizeof(float), cudaMemcpyDeviceToHost, st), cudaSuccess);
  CHECK_EQ_INT(cudaStreamSynchronize(st), cudaSuccess);
  CHECK_EQ_INT(cudaStreamDestroy(st), cudaSuccess);
  CHECK_EQ_INT(memcmp(h_in, h_out, n * sizeof(float)), 0);

  void *q = NULL;
  CHECK_EQ_INT(eng_cuda_pinned_alloc(p, 8 * MIB, 0, &q, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "pinned pool: cannot carve 8388608 bytes");

  eng_cuda_mem_stats s;
  eng_cuda_pinned_stats(p, &s);
  uint64_t real0 = s.real_allocs;
  CHECK_EQ_INT(real0, 1);
  int fails = 0;
  for (int r = 0; r < 1000; r++) {
    void *x = NULL, *y = NULL;
    fails += eng_cuda_pinned_alloc(p, 1 + (size_t)(r * 53) % 70000, 0, &x, &e) != 0;
    fails += eng_cuda_pinned_alloc(p, 128, 128, &y, &e) != 0;
    fails += eng_cuda_pinned_free(p, x, &e) != 0;
    fails += eng_cuda_pinned_free(p, y, &e) != 0;
  }
  CHECK_EQ_INT(fails, 0);
  eng_cuda_pinned_stats(p, &s);
  CHECK_EQ_INT(s.real_allocs, real0);
  CHECK_EQ_INT(s.live_blocks, 2);  // h_in, h_out
  CHECK_EQ_INT(s.allocs, 2002);
  CHECK_EQ_INT(s.frees, 2000);
  eng_cuda_pinned_reset(p);
  eng_cuda_pinned_stats(p, &s);
  CHECK_EQ_INT(s.live_blocks, 0);
  CHECK_EQ_INT(s.largest_free, 4 * MIB);
  eng_cuda_arena_destroy(a);
  eng_cuda_pinned_destroy(p);

  eng_cuda_pinned *big = NULL;
  CHECK_EQ_INT(eng_cuda_pinned_create(&big, (size_t)1 << 50, 0, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK(big == NULL);
  CHECK_CONTAINS(e.msg, "pinned pool of 1125899906842624 bytes");
  printf("pinned too big: %s\n", e.msg);
}

int main(void) {
  require_device();
  test_arena();
  test_pinned();
  CHECK_DONE();
}
