// numa.c: a GPU's NUMA node and the node's CPUs, from sysfs (numa.h). Plain
// file reads rather than libnuma: three small files say all inferd needs,
// and a root prefix lets the unit test build a two-socket host in a folder.
#include "engine/numa.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if INFERD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

// Reads the small text file at path into buf (NUL-terminated). *missing
// is set, and 0 returned, when it does not exist.
static int read_small(const char *path, char *buf, size_t cap, int *missing, err *e) {
  *missing = 0;
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT || errno == ENOTDIR) {
      *missing = 1;
      return 0;
    }
    return err_set(e, ERR_INTERNAL, "cannot read %s: %s", path, strerror(errno));
  }
  size_t n = fread(buf, 1, cap - 1, f);
  int bad = ferror(f);
  fclose(f);
  if (bad) return err_set(e, ERR_INTERNAL, "cannot read %s", path);
  buf[n] = '\0';
  return 0;
}

// Parses a decimal CPU or node number at *p, advancing it.
static int parse_num(const char **p, long *v) {
  if (!isdigit((unsigned char)**p)) return -1;
  char *end;
  errno = 0;
  *v = strtol(*p, &end, 10);
  if (errno || *v >= CPU_SETSIZE) return -1;
  *p = end;
  return 0;
}

int eng_numa_parse_cpulist(const char *s, cpu_set_t *set, err *e) {
  CPU_ZERO(set);
  const char *p = s;
  while (*p && isspace((unsigned char)*p)) p++;
  if (!*p) return 0;
  for (;;) {
    long a, b;
    if (parse_num(&p, &a)) return err_set(e, ERR_INVALID_ARGUMENT, "CPU list '%s': expected a number", s);
    b = a;
    if (*p == '-') {
      p++;
      if (parse_num(&p, &b) || b < a)
        return err_set(e, ERR_INVALID_ARGUMENT, "CPU list '%s': bad range after %ld", s, a);
    }
    for (long c = a; c <= b; c++) CPU_SET((int)c, set);
    if (*p == ',') {
      p++;
      continue;
    }
    while (*p && isspace((unsigned char)*p)) p++;
    if (*p) return err_set(e, ERR_INVALID_ARGUMENT, "CPU list '%s': unexpected '%c'", s, *p);
    return 0;
  }
}

void eng_numa_format_cpulist(const cpu_set_t *set, char *buf, size_t len) {
  size_t at = 0;
  if (len) buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int d = c;
    while (d + 1 < CPU_SETSIZE && CPU_ISSET(d + 1, set)) d++;
    int w = d > c ? snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", c, d)
                  : snprintf(buf + at, len - at, "%s%d", at ? "," : "", c);
    if (w < 0 || (size_t)w >= len - at) {  // keep the whole ranges that fit
      if (len) buf[at] = '\0';
      return;
    }
    at += (size_t)w;
    c = d;
  }
}

int eng_numa_online_nodes(const char *root, int *n, err *e) {
  char path[512], buf[4096];
  int missing;
  snprintf(path, sizeof path, "%s/devices/system/node/online", root);
  TRY(read_small(path, buf, sizeof buf, &missing, e));
  if (missing) {
    *n = 1;
    return 0;
  }
  cpu_set_t nodes;  // node numbers use the CPU list syntax, and fit one
  if (eng_numa_parse_cpulist(buf, &nodes, e)) return err_prefix(e, "%s: ", path);
  *n = CPU_COUNT(&nodes);
  if (*n == 0) *n = 1;  // an empty file says nothing more than a missing one
  return 0;
}

int eng_numa_pci_node(const char *root, const char *bus_id, int *node, err *e) {
  *node = -1;
  unsigned dom, bus, dev, fn;
  char tail;
  // sysfs names devices in lowercase with a 4-digit domain; CUDA writes
  // "0000:3B:00.0", NVML "00000000:3B:00.0"
  if (sscanf(bus_id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4)
    return err_set(e, ERR_INVALID_ARGUMENT, "PCI bus id '%s' is not domain:bus:device.function", bus_id);
  char path[512], buf[64];
  snprintf(path, sizeof path, "%s/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", root, dom, bus, dev, fn);
  int missing;
  TRY(read_small(path, buf, sizeof buf, &missing, e));
  if (missing) return 0;
  char *end;
  errno = 0;
  long v = strtol(buf, &end, 10);
  while (*end && isspace((unsigned char)*end)) end++;
  if (end == buf || *end || errno || v < -1 || v >= CPU_SETSIZE)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: '%s' is not a node number", path, buf);
  *node = (int)v;  // -1: the platform does not say (one node, or firmware without SRAT data)
  return 0;
}

int eng_numa_node_cpus(const char *root, int node, cpu_set_t *set, err *e) {
  char path[512], buf[4096];
  int missing;
  snprintf(path, sizeof path, "%s/devices/system/node/node%d/cpulist", root, node);
  TRY(read_small(path, buf, sizeof buf, &missing, e));
  if (missing) return err_set(e, ERR_NOT_FOUND, "%s does not exist", path);
  if (eng_numa_parse_cpulist(buf, set, e)) return err_prefix(e, "%s: ", path);
  return 0;
}

int eng_numa_place_for(const char *root, int device, const char *bus_id, const cpu_set_t *allowed,
                       eng_numa_place *out, err *e) {
  out->node = -1;
  CPU_ZERO(&out->cpus);
  int nodes;
  TRY(eng_numa_online_nodes(root, &nodes, e));
  if (nodes <= 1) {
    snprintf(out->desc, sizeof out->desc, "GPU %d: one NUMA node: no placement", device);
    return 0;
  }
  int node;
  TRY(eng_numa_pci_node(root, bus_id, &node, e));
  if (node < 0) {
    snprintf(out->desc, sizeof out->desc, "GPU %d: NUMA node unknown (%d nodes): no placement", device, nodes);
    return 0;
  }
  cpu_set_t cpus;
  TRY(eng_numa_node_cpus(root, node, &cpus, e));
  CPU_AND(&cpus, &cpus, allowed);
  if (CPU_COUNT(&cpus) == 0) {
    snprintf(out->desc, sizeof out->desc, "GPU %d: NUMA node %d has none of this process's CPUs: no placement",
             device, node);
    return 0;
  }
  char list[96];
  eng_numa_format_cpulist(&cpus, list, sizeof list);
  out->node = node;
  out->cpus = cpus;
  snprintf(out->desc, sizeof out->desc, "GPU %d: NUMA node %d, CPUs %s", device, node, list);
  return 0;
}

#if INFERD_HAVE_CUDA
int eng_numa_place_cuda(const char *root, int device, const cpu_set_t *allowed, eng_numa_place *out, err *e) {
  // one node (this VM, the lent GPU machines): decided without asking CUDA
  int nodes;
  TRY(eng_numa_online_nodes(root, &nodes, e));
  if (nodes <= 1) return eng_numa_place_for(root, device, "", allowed, out, e);
  char bus_id[32];
  cudaError_t ce = cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, device);
  if (ce != cudaSuccess)
    return err_set(e, ERR_INTERNAL, "GPU %d: cudaDeviceGetPCIBusId: %s", device, cudaGetErrorString(ce));
  return eng_numa_place_for(root, device, bus_id, allowed, out, e);
}
#endif
