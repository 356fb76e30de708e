// test_fdlimit.c: the ports' default connection caps (server/core/fdlimit.h)
// plus the reserve never exceed the descriptor limit, neither port gets more
// than the other, and raising the soft limit reports what it did.
#include <stdint.h>
#include <sys/resource.h>

#include "check.h"
#include "server/core/fdlimit.h"

static void test_plan(void) {
  const uint64_t limits[] = {1, 2, 8, 96, 1024, 4096, 20000, 65536, 1048576, UINT64_MAX};
  for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
    int http = 0, grpc = 0;
    srv_fd_plan(limits[i], &http, &grpc);
    CHECK_EQ_INT(http, grpc);
    CHECK(http >= 1 && http <= SRV_FD_PORT_CAP_MAX);
    uint64_t reserve = limits[i] / 4 < SRV_FD_RESERVE ? limits[i] / 4 : SRV_FD_RESERVE;
    if (limits[i] >= 8) CHECK((uint64_t)http + (uint64_t)grpc + reserve <= limits[i]);
  }
  int http = 0, grpc = 0;
  srv_fd_plan(20000, &http, &grpc);  // issue 31's machine: 19,990 idle HTTP connections took all
  CHECK_EQ_INT(http, (20000 - SRV_FD_RESERVE) / 2);
  srv_fd_plan(1024, &http, &grpc);
  CHECK_EQ_INT(http, (1024 - 256) / 2);
  srv_fd_plan(96, &http, &grpc);  // a reserve of a quarter when the limit is small
  CHECK_EQ_INT(http, (96 - 24) / 2);
  srv_fd_plan(1 << 20, &http, &grpc);
  CHECK_EQ_INT(http, SRV_FD_PORT_CAP_MAX);
}

static void test_raise(void) {
  struct rlimit r;
  CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &r), 0);
  uint64_t was = 0, now = srv_fd_raise_limit(&was);
  uint64_t hard = r.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_max;
  CHECK(now == hard || now == was);  // raised to the hard limit, or left where it was
  CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &r), 0);
  CHECK((r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_cur) == now);
  uint64_t again = 0;
  CHECK(srv_fd_raise_limit(&again) == now && again == now);  // nothing left to raise
}

int main(void) {
  test_plan();
  test_raise();
  CHECK_DONE();
}
