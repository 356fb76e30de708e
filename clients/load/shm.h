// shm.h: the client side of Triton's system and CUDA shared memory extensions
// for inferd-load (--shared-memory system|cuda). inferd-load creates POSIX
// shared memory objects (or cudaMalloc's device memory with its IPC handle),
// copies the inputs in, registers them with the server and names them in the
// request, so tensors cross through memory instead of over gRPC. The server
// opens the same objects by key (or handle): it must run on the same host
// (and see the same /dev/shm, or the same GPU).
#ifndef INFERD_CLIENTS_LOAD_SHM_H
#define INFERD_CLIENTS_LOAD_SHM_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/load/cudart.h"
#include "clients/load/inputs.h"
#include "clients/load/model.h"
#include "clients/load/request.h"
#include "kernels/base/err.h"

// --- one object, mapped here, to be registered under a region name

typedef struct ld_shm ld_shm;

// Creates the object `key` (shm_open's name, "/..."), sizes it to size > 0
// bytes, maps it and copies size bytes of init in (NULL: zeros). The object
// is created exclusively: an existing one (someone else's) is never taken
// over nor removed, and is ERR_ALREADY_EXISTS. On failure nothing is left
// in /dev/shm. name is the region name it will be registered under.
int ld_shm_create(const char *name, const char *key, size_t size, const void *init, ld_shm **out, err *e);
// The same in CUDA memory: cudaMalloc of size bytes on cuda's device (the
// runtime is borrowed and must outlive the region), init copied in (NULL:
// zeros), its IPC handle kept for CudaSharedMemoryRegister. Key is "".
int ld_shm_create_cuda(const char *name, ld_cudart *cuda, size_t size, const void *init, ld_shm **out, err *e);
// Unmaps and unlinks the object (CUDA: frees the memory) (the server's mapping, if any, stays valid
// until it unregisters). NULL is fine.
void ld_shm_destroy(ld_shm *s);

const char *ld_shm_name(const ld_shm *s);
const char *ld_shm_key(const ld_shm *s);
size_t ld_shm_size(const ld_shm *s);
uint8_t *ld_shm_data(const ld_shm *s);  // NULL for CUDA memory

// SystemSharedMemoryRegister (CUDA: CudaSharedMemoryRegister with the IPC
// handle and device) of the whole object under its name; the err's code is
// the call's gRPC status, its message the server's.
int ld_shm_register(grpc_channel *ch, const ld_shm *s, int timeout_ms, err *e);
// System- (or Cuda)SharedMemoryUnregister of its name alone.
int ld_shm_unregister(grpc_channel *ch, const ld_shm *s, int timeout_ms, err *e);

// --- every region of one run

typedef struct ld_shm_set ld_shm_set;

// One region per input ("<prefix>_in<i>", key "/<prefix>_in<i>") holding its
// bytes, and one of out_size bytes per model output ("<prefix>_out<k>"), all
// registered on ch; in CUDA memory when cuda is not NULL (borrowed: it must
// outlive the set). An empty input has nothing to map and stays in the
// message. On failure whatever was registered is unregistered, every object
// is removed, *out is NULL and the err names the region.
int ld_shm_set_create(grpc_channel *ch, int timeout_ms, const char *prefix, const ld_tensor *in, size_t n_in,
                      const ld_model *m, size_t out_size, ld_cudart *cuda, ld_shm_set **out, err *e);
// Unregisters the regions (by name, one at a time: "" would take other
// clients' regions too) and removes every object, even when an unregister
// fails; returns the first such failure. NULL is fine.
int ld_shm_set_destroy(ld_shm_set *s, grpc_channel *ch, int timeout_ms, err *e);

// For ld_request_spec: n_in references (region NULL for an input in the
// message) and one requested output per model output. Owned by the set.
const ld_region_ref *ld_shm_set_inputs(const ld_shm_set *s);
const ld_output_req *ld_shm_set_outputs(const ld_shm_set *s, size_t *n);
// How many objects the set holds (inputs in shared memory plus outputs).
size_t ld_shm_set_count(const ld_shm_set *s);

#endif
