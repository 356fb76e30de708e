// fdlimit.c: the descriptor limit and its split between the ports (fdlimit.h).
#include "server/core/fdlimit.h"

#include <sys/resource.h>

uint64_t srv_fd_raise_limit(uint64_t *was) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
    *was = UINT64_MAX;
    return UINT64_MAX;
  }
  uint64_t cur = r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_cur;
  *was = cur;
  if (r.rlim_cur >= r.rlim_max) return cur;
  r.rlim_cur = r.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &r) != 0) return cur;
  return r.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_max;
}

void srv_fd_plan(uint64_t nofile, int *http_cap, int *grpc_cap) {
  uint64_t reserve = nofile / 4 < SRV_FD_RESERVE ? nofile / 4 : SRV_FD_RESERVE;
  uint64_t half = (nofile - reserve) / 2;
  if (half > SRV_FD_PORT_CAP_MAX) half = SRV_FD_PORT_CAP_MAX;
  if (half < 1) half = 1;
  *http_cap = (int)half;
  *grpc_cap = (int)half;
}
