// cudart.c: libcudart through dlopen for inferd-load (see cudart.h). The
// signatures below are the CUDA runtime's, with its enums and handle as ints
// and bytes: cudaError_t is an int, cudaSuccess 0, cudaMemcpyHostToDevice 1,
// cudaIpcMemHandle_t 64 bytes passed by pointer to the getter.
#include "clients/load/cudart.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fn_count)(int *);
typedef int (*fn_set)(int);
typedef int (*fn_malloc)(void **, size_t);
typedef int (*fn_free)(void *);
typedef int (*fn_memcpy)(void *, const void *, size_t, int);
typedef int (*fn_memset)(void *, int, size_t);
typedef int (*fn_ipc)(void *, void *);
typedef int (*fn_sync)(void);
typedef const char *(*fn_str)(int);

struct ld_cudart {
  void *lib;
  int device;
  fn_count get_device_count;
  fn_set set_device;
  fn_malloc malloc_;
  fn_free free_;
  fn_memcpy memcpy_;
  fn_memset memset_;
  fn_ipc ipc_get_mem_handle;
  fn_sync synchronize;
  fn_str error_string;
};

static const char *cuda_str(const ld_cudart *c, int rc) {
  const char *s = c->error_string ? c->error_string(rc) : NULL;
  return s ? s : "unknown CUDA error";
}

int ld_cudart_open(int device, ld_cudart **out, err *e) {
  *out = NULL;
  static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12"};
  ld_cudart *c = calloc(1, sizeof *c);
  if (!c) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  // RTLD_NODELETE: the runtime stays mapped after dlclose; it keeps threads
  // and exit handlers of its own once a context exists
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !c->lib; i++)
    c->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!c->lib) {
    free(c);
    return err_set(e, ERR_UNAVAILABLE,
                   "CUDA shared memory needs the CUDA runtime: none of libcudart.so, .so.13, .so.12 could be loaded "
                   "(is the CUDA toolkit's lib64 on LD_LIBRARY_PATH?)");
  }
  struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"cudaGetDeviceCount", (void **)&c->get_device_count}, {"cudaSetDevice", (void **)&c->set_device},
      {"cudaMalloc", (void **)&c->malloc_},                  {"cudaFree", (void **)&c->free_},
      {"cudaMemcpy", (void **)&c->memcpy_},                  {"cudaMemset", (void **)&c->memset_},
      {"cudaIpcGetMemHandle", (void **)&c->ipc_get_mem_handle}, {"cudaDeviceSynchronize", (void **)&c->synchronize},
      {"cudaGetErrorString", (void **)&c->error_string},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(c->lib, syms[i].name);
    if (!*syms[i].slot) {
      err_set(e, ERR_UNAVAILABLE, "the CUDA runtime that was loaded has no %s", syms[i].name);
      ld_cudart_close(c);
      return (int)ERR_UNAVAILABLE;
    }
  }
  int n = 0, rc = c->get_device_count(&n);
  if (rc != 0 || n == 0) {
    err_set(e, ERR_UNAVAILABLE, "CUDA shared memory needs a GPU: %s", rc ? cuda_str(c, rc) : "no CUDA device found");
    ld_cudart_close(c);
    return (int)ERR_UNAVAILABLE;
  }
  if (device < 0 || device >= n) {
    err_set(e, ERR_INVALID_ARGUMENT, "CUDA device %d does not exist (this host has %d)", device, n);
    ld_cudart_close(c);
    return (int)ERR_INVALID_ARGUMENT;
  }
  if ((rc = c->set_device(device)) != 0) {
    err_set(e, ERR_UNAVAILABLE, "cannot use CUDA device %d: %s", device, cuda_str(c, rc));
    ld_cudart_close(c);
    return (int)ERR_UNAVAILABLE;
  }
  c->device = device;
  *out = c;
  return 0;
}

void ld_cudart_close(ld_cudart *c) {
  if (!c) return;
  if (c->lib) dlclose(c->lib);
  free(c);
}

int ld_cudart_device(const ld_cudart *c) {
  return c->device;
}

int ld_cudart_alloc(ld_cudart *c, size_t size, const void *init, void **dptr, unsigned char *handle, err *e) {
  *dptr = NULL;
  // the runtime keeps the current device per thread: the caller's may not be ours
  int rc = c->set_device(c->device);
  void *p = NULL;
  if (rc == 0 && (rc = c->malloc_(&p, size)) != 0) {
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cudaMalloc of %zu bytes on device %d: %s", size, c->device,
                   cuda_str(c, rc));
  }
  if (rc == 0) rc = init ? c->memcpy_(p, init, size, 1 /* cudaMemcpyHostToDevice */) : c->memset_(p, 0, size);
  if (rc == 0) rc = c->synchronize();  // the bytes are there before the server reads them
  unsigned char h[LD_CUDA_IPC_HANDLE_SIZE];
  if (rc == 0) rc = c->ipc_get_mem_handle(h, p);
  if (rc != 0) {
    if (p) c->free_(p);
    return err_set(e, ERR_INTERNAL, "preparing %zu bytes of CUDA memory on device %d: %s", size, c->device,
                   cuda_str(c, rc));
  }
  memcpy(handle, h, sizeof h);
  *dptr = p;
  return 0;
}

void ld_cudart_free(ld_cudart *c, void *dptr) {
  if (c && dptr) {
    c->set_device(c->device);
    c->free_(dptr);
  }
}
