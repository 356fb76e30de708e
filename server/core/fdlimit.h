// server/core/fdlimit.h: the process's descriptor budget, split between the
// two ports so that neither can starve the other. Every connection holds one
// descriptor; an HTTP port that runs the process out of them made the next
// gRPC accept fail with EMFILE, and this gRPC core never accepts again
// (issue 31). Each port's connection cap is half of what is left after a
// reserve for everything else (model files, shared memory, eventfds, logs).
#ifndef INFERD_SERVER_FDLIMIT_H
#define INFERD_SERVER_FDLIMIT_H

#include <stdint.h>

// Descriptors kept for what is not a connection (at most a quarter of the limit).
#define SRV_FD_RESERVE 256
// No port's default cap exceeds this, however high the limit.
#define SRV_FD_PORT_CAP_MAX 10000

// Raises the soft RLIMIT_NOFILE to the hard one. Returns the limit now in
// effect (UINT64_MAX when unlimited); *was gets the soft limit before (equal
// to the result when nothing changed).
uint64_t srv_fd_raise_limit(uint64_t *was);

// The default connection caps of the HTTP and gRPC ports for a descriptor
// limit of nofile: each min(SRV_FD_PORT_CAP_MAX, (nofile - reserve) / 2), at
// least 1, so that the two caps plus the reserve never exceed nofile.
void srv_fd_plan(uint64_t nofile, int *http_cap, int *grpc_cap);

#endif
