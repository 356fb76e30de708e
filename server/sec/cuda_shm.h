// server/sec/cuda_shm.h: client CUDA shared memory (Triton's cuda_shared_memory
// extension). A client allocates device memory, exports it with
// cudaIpcGetMemHandle, registers the 64-byte handle under a name with the
// device it lives on and its size, and then names that region in a
// ModelInfer input or requested output instead of sending the bytes.
//
// Lifetime as server/sec/shm.h: each region is reference counted; a request
// holds a reference from parse to answer, so Unregister takes the name away
// at once while the mapping stays until the last such request is done.
// Mappings are kept one per (handle, device): two regions registered from
// the same allocation share one cudaIpcOpenMemHandle, closed with the last
// of them (the runtime refcounts repeated opens in one context today, but
// older drivers refused a second open with "already mapped"; one mapping
// per handle works with both).
//
// In a build without CUDA, or on a machine without a device, every call
// works but Register refuses (INVALID_ARGUMENT, saying why): Status lists
// nothing, Unregister of any name succeeds.
// Thread-safe: every call may come from any CQ or instance thread.
#ifndef INFERD_SERVER_CUDA_SHM_H
#define INFERD_SERVER_CUDA_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

#define SRV_CUDA_IPC_HANDLE_SIZE 64  // sizeof(cudaIpcMemHandle_t)
#define SRV_CUDA_SHM_NO_DEVICE_MSG "CUDA shared memory needs a CUDA device; this server has none"

typedef struct srv_cuda_shm srv_cuda_shm;
typedef struct srv_cuda_shm_region srv_cuda_shm_region;

typedef struct srv_cuda_shm_info {
  char *name;
  int64_t device_id;
  uint64_t byte_size;
} srv_cuda_shm_info;

// Counts the visible devices once (none is not an error: see above).
// max_regions: the most regions registered at once (0: no limit; past it
// RESOURCE_EXHAUSTED); main passes --shm-max-regions.
int srv_cuda_shm_create(srv_cuda_shm **out, size_t max_regions, err *e);
// Closes every mapping no request holds; held ones go with their last release.
void srv_cuda_shm_destroy(srv_cuda_shm *s);
// How many CUDA devices regions may live on (0: Register always refuses).
int srv_cuda_shm_n_devices(const srv_cuda_shm *s);

// Opens `handle` (handle_len must be SRV_CUDA_IPC_HANDLE_SIZE) on device
// `device_id` and registers its first byte_size bytes under `name`.
// INVALID_ARGUMENT for an empty name, a zero size, a handle of another
// length, an unknown device, a handle the runtime cannot open, or a size
// beyond the allocation; ALREADY_EXISTS when the name is taken.
int srv_cuda_shm_register(srv_cuda_shm *s, const char *name, const uint8_t *handle, size_t handle_len,
                          int64_t device_id, uint64_t byte_size, err *e);

// Takes the name away ("" or NULL: every name); an unknown name is not an
// error (Triton's behaviour). Returns how many regions were unregistered.
size_t srv_cuda_shm_unregister(srv_cuda_shm *s, const char *name);

// 1 when `name` is registered here (for the one-namespace rule with system
// shared memory).
int srv_cuda_shm_has(srv_cuda_shm *s, const char *name);

// The named region's status, or every region's ("" or NULL), sorted by
// name, in *out (free with srv_cuda_shm_info_free); NOT_FOUND for an
// unknown name, with Triton's message.
int srv_cuda_shm_status(srv_cuda_shm *s, const char *name, srv_cuda_shm_info **out, size_t *n, err *e);
void srv_cuda_shm_info_free(srv_cuda_shm_info *info, size_t n);

// A reference on the named region that keeps it mapped until
// srv_cuda_shm_release, after checking [offset, offset + size) fits in it.
// NOT_FOUND for an unknown region, INVALID_ARGUMENT (naming the region)
// when the window does not fit.
int srv_cuda_shm_acquire(srv_cuda_shm *s, const char *name, uint64_t offset, uint64_t size,
                         srv_cuda_shm_region **region, err *e);
void srv_cuda_shm_release(srv_cuda_shm_region *region);

// The device the region lives on, and its device address at `offset`
// (for a consumer on that device that reads it in place).
int srv_cuda_shm_device(const srv_cuda_shm_region *region);
void *srv_cuda_shm_dev_ptr(const srv_cuda_shm_region *region, uint64_t offset);

// Synchronous copies between host memory and [offset, offset + size) of an
// acquired region (the window was checked at acquire). INTERNAL with the
// runtime's message when a copy fails.
int srv_cuda_shm_read(const srv_cuda_shm_region *region, uint64_t offset, void *dst, size_t size, err *e);
int srv_cuda_shm_write(const srv_cuda_shm_region *region, uint64_t offset, const void *src, size_t size, err *e);

#endif
