// test_cuda_dev.c: device discovery (engine/cuda/cuda_dev.c) and the error macros
// (engine/cuda/cuda_check.h). Runs everywhere: without a GPU or driver it checks
// the CPU fallback (zero devices, not an error, a reason for the log); with
// GPUs it checks and prints what the runtime reports.
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_dev.h"

static int try_bad_device(err *e) {
  CUDA_TRY(e, cudaSetDevice(-1));
  return 0;
}

static int try_cublas_status(err *e, cublasStatus_t st) {
  CUBLAS_TRY(e, st);
  return 0;
}

int main(void) {
  err e;
  memset(&e, 0, sizeof e);
  eng_cuda_dev devs[16];
  int n = -1;

  // --- arguments
  CHECK_EQ_INT(eng_cuda_devices(devs, 16, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_cuda_devices(NULL, 4, &n, &e), ERR_INVALID_ARGUMENT);

  // --- discovery
  int raw = 0;
  cudaError_t raw_rc = cudaGetDeviceCount(&raw);
  (void)cudaGetLastError();
  int rc = eng_cuda_devices(devs, 16, &n, &e);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(e.code, ERR_OK);
  if (raw_rc != cudaSuccess) {
    // The CPU-fallback case: zero devices and a reason, not an error.
    printf("no CUDA device: %s\n", e.msg);
    CHECK_EQ_INT(n, 0);
    CHECK_CONTAINS(e.msg, "no usable CUDA device");
    CHECK_CONTAINS(e.msg, cudaGetErrorName(raw_rc));
    if (raw_rc == cudaErrorInsufficientDriver) CHECK_CONTAINS(e.msg, "driver");
    // Counting alone (cap 0, no array) agrees.
    int n2 = -1;
    CHECK_EQ_INT(eng_cuda_devices(NULL, 0, &n2, &e), 0);
    CHECK_EQ_INT(n2, 0);
  } else {
    CHECK_EQ_INT(n, raw);
    CHECK_EQ_STR(e.msg, "");
    for (int i = 0; i < n && i < 16; i++) {
      char line[512];
      eng_cuda_dev_describe(&devs[i], line, sizeof line);
      printf("device %s\n", line);
      CHECK_EQ_INT(devs[i].ordinal, i);
      CHECK(devs[i].name[0] != '\0');
      CHECK_EQ_INT(strlen(devs[i].uuid), 40);
      CHECK(strncmp(devs[i].uuid, "GPU-", 4) == 0);
      CHECK(devs[i].total_mem > ((size_t)1 << 30));
      int sms = 0, major = 0, minor = 0;
      CHECK_EQ_INT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i), cudaSuccess);
      CHECK_EQ_INT(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i), cudaSuccess);
      CHECK_EQ_INT(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i), cudaSuccess);
      CHECK_EQ_INT(devs[i].sm_count, sms);
      CHECK_EQ_INT(devs[i].cc_major, major);
      CHECK_EQ_INT(devs[i].cc_minor, minor);
    }
    // cap smaller than the count: *n is still the count, only cap written.
    eng_cuda_dev one[2];
    memset(one, 0x5a, sizeof one);
    int n1 = -1;
    CHECK_EQ_INT(eng_cuda_devices(one, 1, &n1, &e), 0);
    CHECK_EQ_INT(n1, raw);
    CHECK_EQ_INT(one[0].ordinal, 0);
    CHECK_EQ_INT(one[1].ordinal, 0x5a5a5a5a);
    // A launch check with nothing launched reports nothing.
    CHECK_EQ_INT(K_CHECK_LAUNCH(&e, "nothing"), 0);
  }

  // --- CUDA_TRY / CUBLAS_TRY name the file, line and call
  memset(&e, 0, sizeof e);
  CHECK_EQ_INT(try_bad_device(&e), ERR_INTERNAL);
  CHECK_EQ_INT(e.code, ERR_INTERNAL);
  CHECK_CONTAINS(e.msg, "test_cuda_dev.c:");
  CHECK_CONTAINS(e.msg, "cudaSetDevice(-1) failed");
  printf("CUDA_TRY message: %s\n", e.msg);
  // The failure is not left behind for the next launch check (without a
  // driver every call reports the missing driver, so only with devices).
  if (raw_rc == cudaSuccess) CHECK_EQ_INT(cudaPeekAtLastError(), cudaSuccess);

  CHECK_EQ_INT(try_cublas_status(&e, CUBLAS_STATUS_SUCCESS), 0);
  CHECK_EQ_INT(try_cublas_status(&e, CUBLAS_STATUS_INVALID_VALUE), ERR_INTERNAL);
  CHECK_CONTAINS(e.msg, "test_cuda_dev.c:");
  CHECK_CONTAINS(e.msg, "st failed");
  CHECK_CONTAINS(e.msg, "CUBLAS_STATUS_INVALID_VALUE");
  CHECK_EQ_INT(try_cublas_status(&e, CUBLAS_STATUS_ALLOC_FAILED), ERR_RESOURCE_EXHAUSTED);
  CHECK_EQ_INT(CUDA_OK(&e, cudaErrorMemoryAllocation), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "cudaErrorMemoryAllocation");
  CHECK_EQ_INT(CUDA_OK(&e, cudaSuccess), 0);
  CHECK_DONE();
}
