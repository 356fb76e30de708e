// numa.h: which NUMA node a GPU hangs off, and which CPUs that node has, read
// from sysfs, so a GPU instance's threads and pinned staging can sit on the
// GPU's own socket of a multi-socket host (issue 16). Every function takes
// the sysfs root ("/sys" for real use) so tests can point it at a fake tree.
// "Unknown" (no NUMA, no numa_node file, "-1" in it) is a value, not an
// error; errors are unreadable or malformed files.
#ifndef INFERD_ENGINE_NUMA_H
#define INFERD_ENGINE_NUMA_H

#include <sched.h>
#include <stddef.h>

#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENG_NUMA_SYSFS "/sys"
#define ENG_NUMA_DESC_MAX 160

// Parses a kernel CPU list ("0-3,8-11", "5", "" with an optional trailing
// newline) into *set. Empty is the empty set; anything else that is not a
// list of numbers and ascending ranges below CPU_SETSIZE is
// ERR_INVALID_ARGUMENT.
int eng_numa_parse_cpulist(const char *s, cpu_set_t *set, err *e);

// "0-3,8-11" for *set into buf (truncated to len); "" for the empty set.
void eng_numa_format_cpulist(const cpu_set_t *set, char *buf, size_t len);

// How many NUMA nodes are online (<root>/devices/system/node/online). A
// kernel without NUMA has no such file: that is one node.
int eng_numa_online_nodes(const char *root, int *n, err *e);

// The NUMA node of the PCI device bus_id (as CUDA or NVML write it,
// "0000:3B:00.0" or "00000000:3B:00.0"), from
// <root>/bus/pci/devices/<0000:3b:00.0>/numa_node; -1 when unknown.
int eng_numa_pci_node(const char *root, const char *bus_id, int *node, err *e);

// The CPUs of node (<root>/devices/system/node/node<N>/cpulist).
int eng_numa_node_cpus(const char *root, int node, cpu_set_t *set, err *e);

// Where a GPU's host-side work should run.
typedef struct eng_numa_place {
  int node;         // -1: no placement (one node, node unknown, no usable CPU)
  cpu_set_t cpus;   // the node's CPUs among those allowed, when node >= 0
  char desc[ENG_NUMA_DESC_MAX];  // for the log: "GPU 1: NUMA node 1, CPUs 16-31" or why not
} eng_numa_place;

// Decides the placement of GPU `device` (PCI bus_id) for a process allowed
// to run on *allowed: its node's CPUs intersected with *allowed, when the
// host has more than one node, the GPU's node is known and the
// intersection is not empty; otherwise node -1 and desc says why.
int eng_numa_place_for(const char *root, int device, const char *bus_id, const cpu_set_t *allowed,
                       eng_numa_place *out, err *e);

// The same for CUDA device `device`, its bus id from cudaDeviceGetPCIBusId
// (ERR_INTERNAL when the runtime cannot say). Only in CUDA builds.
int eng_numa_place_cuda(const char *root, int device, const cpu_set_t *allowed, eng_numa_place *out, err *e);

#ifdef __cplusplus
}
#endif

#endif
