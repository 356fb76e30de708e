// server/sec/shm.h: client system shared memory (Triton's system_shared_memory
// extension). A client creates a POSIX shared memory object, registers a
// window of it under a name, and then names that window in a ModelInfer
// input or requested output instead of sending the bytes over gRPC.
//
// Each registered region is one mmap, reference counted: a request that
// reads or writes a region holds a reference from parse to answer, so a
// concurrent Unregister takes the name away at once but the mapping stays
// until the last such request is done (never a dangling pointer).
// Thread-safe: every call may come from any CQ or instance thread.
#ifndef INFERD_SERVER_SHM_H
#define INFERD_SERVER_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct srv_shm srv_shm;
typedef struct srv_shm_region srv_shm_region;

typedef struct srv_shm_info {
  char *name, *key;
  uint64_t offset, byte_size;
} srv_shm_info;

// max_regions: the most regions registered at once (0: no limit; main
// passes --shm-max-regions): each is one mapping of the process's
// vm.max_map_count.
int srv_shm_create(srv_shm **out, size_t max_regions, err *e);
// Unmaps every region no request holds; held ones go with their last release.
void srv_shm_destroy(srv_shm *s);

// Maps [offset, offset + byte_size) of the shared memory object `key`
// (shm_open's name) under `name`. INVALID_ARGUMENT for an empty name or
// key, a zero size, an object that cannot be opened read-write or is
// smaller than offset + byte_size; ALREADY_EXISTS when the name is taken;
// RESOURCE_EXHAUSTED when max_regions are registered.
int srv_shm_register(srv_shm *s, const char *name, const char *key, uint64_t offset, uint64_t byte_size, err *e);

// Takes the name away ("" or NULL: every name); an unknown name is not an
// error (Triton's behaviour). Returns how many regions were unregistered.
size_t srv_shm_unregister(srv_shm *s, const char *name);

// 1 when `name` is registered here (for the one-namespace rule with CUDA
// shared memory).
int srv_shm_has(srv_shm *s, const char *name);

// The named region's status, or every region's ("" or NULL), sorted by
// name, in *out (free with srv_shm_info_free); NOT_FOUND for an unknown name.
int srv_shm_status(srv_shm *s, const char *name, srv_shm_info **out, size_t *n, err *e);
void srv_shm_info_free(srv_shm_info *info, size_t n);

// The bytes [offset, offset + size) of the named region, with a reference
// that keeps them mapped until srv_shm_release. NOT_FOUND for an unknown
// region, INVALID_ARGUMENT when the window does not fit in it.
int srv_shm_acquire(srv_shm *s, const char *name, uint64_t offset, uint64_t size, srv_shm_region **region,
                    uint8_t **ptr, err *e);
void srv_shm_release(srv_shm_region *region);

#endif
