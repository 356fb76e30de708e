// cuda_dev.h: which CUDA devices this process can use. The runtime already
// applies CUDA_VISIBLE_DEVICES (GPU or MIG UUIDs, ordinals); this only reports
// what it exposes. A machine without a GPU or without a driver is not an
// error: it lists no devices and says why, so inferd falls back to the CPU.
#ifndef INFERD_ENGINE_CUDA_DEV_H
#define INFERD_ENGINE_CUDA_DEV_H

#include <stddef.h>

#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_cuda_dev {
  int ordinal;         // runtime device number, as cudaSetDevice takes it
  char name[256];      // "NVIDIA H100 80GB HBM3"
  char uuid[48];       // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (a MIG instance's own UUID under MIG)
  size_t total_mem;    // bytes of device memory
  int sm_count;        // multiprocessors
  int cc_major, cc_minor;  // compute capability, 9.0 for Hopper
} eng_cuda_dev;

// Lists the visible devices. *n receives how many there are; the first
// min(*n, cap) are written to out (out may be NULL when cap is 0).
// No device and no (or too old a) driver are not errors: the call returns 0
// with *n == 0, e->code == ERR_OK and e->msg saying why, for the log.
// Any other runtime failure returns ERR_INTERNAL.
int eng_cuda_devices(eng_cuda_dev *out, int cap, int *n, err *e);

// "NVIDIA H100 80GB HBM3 (GPU-..., sm_90, 132 SMs, 79.6 GiB)" into buf.
void eng_cuda_dev_describe(const eng_cuda_dev *d, char *buf, size_t len);

// "runtime 13.0, driver 13.0, cuBLASLt 130100 (/usr/local/cuda/lib64/libcublasLt.so.13), cuDNN 91900"
// into buf: which libraries this process runs, for the start-up log (a cuBLASLt build has shown a
// device fault the next one did not: tests/bench/RESULTS.md, "BERT's sticky launch failure").
void eng_cuda_libs_describe(char *buf, size_t len);

// 1 when `device`'s context in this process is poisoned by a sticky error
// (an illegal address, a launch failure or trap in a kernel, an uncorrectable
// ECC error...): the runtime then returns that error from every later call,
// cudaGetLastError cannot clear it, and nothing runs on the device again
// until the process exits. 0 when the device still works (a recoverable
// error such as out of memory or a bad launch configuration). Probes with a
// device synchronize, so call it only after a failure.
int eng_cuda_context_fatal(int device);

#ifdef __cplusplus
}
#endif

#endif
