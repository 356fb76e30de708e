// cudart.h: the few CUDA runtime calls inferd-load's CUDA shared memory mode
// needs (--shared-memory cuda), loaded with dlopen at run time. inferd-load is
// built and shipped without CUDA (CI, hosts without a GPU); where the runtime
// or a device is missing, ld_cudart_open says which, and nothing else changes.
#ifndef INFERD_CLIENTS_LOAD_CUDART_H
#define INFERD_CLIENTS_LOAD_CUDART_H

#include <stddef.h>

#include "kernels/base/err.h"

// The size of cudaIpcMemHandle_t: what CudaSharedMemoryRegister's raw_handle carries.
#define LD_CUDA_IPC_HANDLE_SIZE 64

typedef struct ld_cudart ld_cudart;

// Loads libcudart (libcudart.so, .so.13, .so.12, in that order, from the
// library path) and checks that `device` exists. ERR_UNAVAILABLE when the
// library, its symbols or the device are missing; the message says which.
int ld_cudart_open(int device, ld_cudart **out, err *e);
// Unloads the library. NULL is fine. Every allocation must be freed first.
void ld_cudart_close(ld_cudart *c);

// cudaMalloc of size bytes on the device, filled with size bytes of init
// (NULL: zeros), and its IPC handle (LD_CUDA_IPC_HANDLE_SIZE bytes) for the
// server. On failure nothing is left allocated.
int ld_cudart_alloc(ld_cudart *c, size_t size, const void *init, void **dptr, unsigned char *handle, err *e);
// cudaFree. NULL is fine.
void ld_cudart_free(ld_cudart *c, void *dptr);
int ld_cudart_device(const ld_cudart *c);

#endif
