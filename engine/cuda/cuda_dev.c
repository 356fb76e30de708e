// cuda_dev.c: device discovery through the CUDA runtime, with the no-GPU and
// no-driver cases reported as "zero devices" so the server falls back to CPU.
#include "engine/cuda/cuda_dev.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <stdio.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv.h"

static void format_uuid(char *out, size_t len, const cudaUUID_t *u) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  // nvidia-smi's spelling, so the log can be matched against it.
  snprintf(out, len,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int eng_cuda_devices(eng_cuda_dev *out, int cap, int *n, err *e) {
  if (!n || cap < 0 || (cap > 0 && !out))
    return err_set(e, ERR_INVALID_ARGUMENT, "eng_cuda_devices: bad arguments (cap %d)", cap);
  *n = 0;
  if (e) {
    e->code = ERR_OK;
    e->msg[0] = '\0';
  }
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver) {
    // A failed initialisation is sticky for this call only; clear it so a
    // later, unrelated check does not report it.
    (void)cudaGetLastError();
    err_set(e, ERR_OK, "no usable CUDA device: %s (%s)%s", cudaGetErrorString(rc),
            cudaGetErrorName(rc),
            rc == cudaErrorInsufficientDriver ? "; no NVIDIA driver is loaded, or it is older than the CUDA runtime"
                                              : "; CUDA_VISIBLE_DEVICES may hide them");
    return 0;
  }
  TRY(CUDA_OK(e, rc));
  for (int i = 0; i < count && i < cap; i++) {
    struct cudaDeviceProp p;
    CUDA_TRY(e, cudaGetDeviceProperties(&p, i));
    eng_cuda_dev *d = &out[i];
    memset(d, 0, sizeof *d);
    d->ordinal = i;
    snprintf(d->name, sizeof d->name, "%s", p.name);
    format_uuid(d->uuid, sizeof d->uuid, &p.uuid);
    d->total_mem = p.totalGlobalMem;
    d->sm_count = p.multiProcessorCount;
    d->cc_major = p.major;
    d->cc_minor = p.minor;
  }
  *n = count;
  return 0;
}

void eng_cuda_dev_describe(const eng_cuda_dev *d, char *buf, size_t len) {
  snprintf(buf, len, "%d: %s (%s, sm_%d%d, %d SMs, %.1f GiB)", d->ordinal, d->name, d->uuid,
           d->cc_major, d->cc_minor, d->sm_count, (double)d->total_mem / (1024.0 * 1024 * 1024));
}

// The errors the runtime documents as leaving the context unusable ("the
// process must be terminated and relaunched"): cuda_runtime_api.h's
// cudaError enum for each.
static int sticky_code(cudaError_t rc) {
  switch (rc) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
      return 1;
    default:
      return 0;
  }
}

int eng_cuda_context_fatal(int device) {
  if (cudaSetDevice(device) != cudaSuccess) return 1;  // the context cannot even be made current
  cudaError_t first = cudaDeviceSynchronize();
  (void)cudaGetLastError();  // clears a recoverable error; a sticky one stays
  cudaError_t again = cudaDeviceSynchronize();
  if (again == cudaSuccess) return 0;
  // still failing after the clear: sticky, by the code or by behaviour
  return sticky_code(again) || again == first;
}

// --- the libraries loaded

void eng_cuda_libs_describe(char *buf, size_t len) {
  int rt = 0, drv = 0;
  (void)cudaRuntimeGetVersion(&rt);
  (void)cudaDriverGetVersion(&drv);
  Dl_info di;
  const char *lt_path = dladdr((void *)cublasLtGetVersion, &di) && di.dli_fname ? di.dli_fname : "?";
  size_t dnn = eng_cudnn_version();
  int k = snprintf(buf, len, "runtime %d.%d, driver %d.%d, cuBLASLt %zu (%s)", rt / 1000, rt % 1000 / 10,
                   drv / 1000, drv % 1000 / 10, cublasLtGetVersion(), lt_path);
  if (k <= 0 || (size_t)k >= len) return;
  if (dnn) snprintf(buf + k, len - (size_t)k, ", cuDNN %zu", dnn);
  else snprintf(buf + k, len - (size_t)k, ", no cuDNN");
}
