// test_cuda_shm: server/sec/cuda_shm.c where no region can be opened: CI's
// machine (no GPU) or a build without CUDA. Register refuses with the
// message clients see, Status lists nothing and names an unknown region as
// Triton does, Unregister of anything succeeds, Acquire finds nothing. On a
// machine with a device, a handle no process exported is refused by the
// runtime and the argument checks speak first (regions that really open are
// checked on the device by tests/gpu/cuda_shm_check.py).
#include <stdlib.h>

#include "check.h"
#include "server/sec/cuda_shm.h"

static void test_refusals(srv_cuda_shm *s) {
  uint8_t handle[SRV_CUDA_IPC_HANDLE_SIZE];
  for (int i = 0; i < SRV_CUDA_IPC_HANDLE_SIZE; i++) handle[i] = (uint8_t)i;
  err e = {0};
  int have = srv_cuda_shm_n_devices(s) > 0;
  CHECK_EQ_INT(srv_cuda_shm_register(s, "r", handle, sizeof handle, 0, 4096, &e), ERR_INVALID_ARGUMENT);
  if (have)
    CHECK(strstr(e.msg, "failed to open CUDA IPC handle") != NULL);
  else
    CHECK_EQ_STR(e.msg, SRV_CUDA_SHM_NO_DEVICE_MSG);
  struct {
    const char *name;
    size_t len;
    int64_t dev;
    uint64_t size;
    const char *why;
  } cases[] = {{"r", 10, 0, 64, "raw_handle has 10 bytes"},
               {"r", 64, 9999, 64, "device_id 9999"},
               {"r", 64, -1, 64, "device_id -1"},
               {"r", 64, 0, 0, "byte_size 0"},
               {"", 64, 0, 64, "needs a name"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    e = (err){0};
    CHECK_EQ_INT(srv_cuda_shm_register(s, cases[i].name, handle, cases[i].len, cases[i].dev, cases[i].size, &e),
                 ERR_INVALID_ARGUMENT);
    if (have)
      CHECK(strstr(e.msg, cases[i].why) != NULL);
    else
      CHECK_EQ_STR(e.msg, SRV_CUDA_SHM_NO_DEVICE_MSG);
  }
}

static void test_empty_registry(srv_cuda_shm *s) {
  srv_cuda_shm_info *info = (srv_cuda_shm_info *)1;
  size_t n = 7;
  err e = {0};
  CHECK_EQ_INT(srv_cuda_shm_status(s, NULL, &info, &n, &e), 0);
  CHECK_EQ_INT(n, 0);
  CHECK(info == NULL);
  CHECK_EQ_INT(srv_cuda_shm_status(s, "", &info, &n, &e), 0);
  CHECK_EQ_INT(n, 0);
  CHECK_EQ_INT(srv_cuda_shm_status(s, "nope", &info, &n, &e), ERR_NOT_FOUND);
  CHECK_EQ_STR(e.msg, "Unable to find cuda shared memory region: 'nope'");
  CHECK_EQ_INT(srv_cuda_shm_unregister(s, "nope"), 0);
  CHECK_EQ_INT(srv_cuda_shm_unregister(s, NULL), 0);
  CHECK(!srv_cuda_shm_has(s, "nope"));
  CHECK(!srv_cuda_shm_has(s, ""));
  CHECK(!srv_cuda_shm_has(NULL, "nope"));
  srv_cuda_shm_region *r = NULL;
  e = (err){0};
  CHECK_EQ_INT(srv_cuda_shm_acquire(s, "nope", 0, 4, &r, &e), ERR_NOT_FOUND);
  CHECK(r == NULL);
  CHECK(strstr(e.msg, "'nope'") != NULL);
  srv_cuda_shm_release(NULL);  // a no-op, as srv_shm_release
}

int main(void) {
  srv_cuda_shm *s = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_cuda_shm_create(&s, 0, &e), 0);
  CHECK(s != NULL);
  fprintf(stderr, "devices: %d\n", srv_cuda_shm_n_devices(s));
  CHECK_EQ_INT(srv_cuda_shm_n_devices(NULL), 0);
  test_refusals(s);
  test_empty_registry(s);
  srv_cuda_shm_destroy(s);
  srv_cuda_shm_destroy(NULL);
  CHECK_DONE();
}
