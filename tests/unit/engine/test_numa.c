// Tests engine/numa.c against fake sysfs trees built in a temporary folder:
// a two-socket host (GPUs on node 0, node 1, and one whose node the
// firmware does not say), a one-node host, a host without NUMA files, CPU
// list parsing and formatting, and malformed files.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "engine/numa.h"

static char g_root[256];

// mkdir -p for the folders of root/rel, then writes text there.
static void put(const char *root, const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(g_root) + 1; *p; p++) {  // g_root exists; root may not
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) fprintf(stderr, "mkdir %s: %s\n", path, strerror(errno));
    *p = '/';
  }
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static void sub(char *out, size_t len, const char *name) { snprintf(out, len, "%s/%s", g_root, name); }

static void all_cpus(cpu_set_t *s, int n) {
  CPU_ZERO(s);
  for (int c = 0; c < n; c++) CPU_SET(c, s);
}

static void test_cpulist(void) {
  cpu_set_t s;
  err e = {0};
  CHECK_EQ_INT(eng_numa_parse_cpulist("0-3,8-11\n", &s, &e), 0);
  CHECK_EQ_INT(CPU_COUNT(&s), 8);
  CHECK(CPU_ISSET(0, &s) && CPU_ISSET(3, &s) && CPU_ISSET(8, &s) && CPU_ISSET(11, &s));
  CHECK(!CPU_ISSET(4, &s) && !CPU_ISSET(7, &s) && !CPU_ISSET(12, &s));
  CHECK_EQ_INT(eng_numa_parse_cpulist("5", &s, &e), 0);
  CHECK_EQ_INT(CPU_COUNT(&s), 1);
  CHECK(CPU_ISSET(5, &s));
  CHECK_EQ_INT(eng_numa_parse_cpulist("", &s, &e), 0);
  CHECK_EQ_INT(CPU_COUNT(&s), 0);
  CHECK_EQ_INT(eng_numa_parse_cpulist("\n", &s, &e), 0);
  CHECK_EQ_INT(CPU_COUNT(&s), 0);

  char buf[64];
  CHECK_EQ_INT(eng_numa_parse_cpulist("0-3,8-11,13,15-15", &s, &e), 0);
  eng_numa_format_cpulist(&s, buf, sizeof buf);
  CHECK_EQ_STR(buf, "0-3,8-11,13,15");
  CPU_ZERO(&s);
  eng_numa_format_cpulist(&s, buf, sizeof buf);
  CHECK_EQ_STR(buf, "");
  CHECK_EQ_INT(eng_numa_parse_cpulist("0-3,8-11,13,15", &s, &e), 0);
  eng_numa_format_cpulist(&s, buf, 6);  // truncated to the ranges that fit
  CHECK_EQ_STR(buf, "0-3");

  const char *bad[] = {"a", "1-", "3-1", "1,,2", "1 2", "-1", "0-99999", "1:2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    e = (err){0};
    CHECK_EQ_INT(eng_numa_parse_cpulist(bad[i], &s, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, bad[i]);
  }
}

// Two sockets: node 0 CPUs 0-3,8-11, node 1 CPUs 4-7,12-15; GPU 0 at
// 0000:1b:00.0 on node 0, GPU 1 at 0000:9a:00.0 on node 1, a third at
// 0000:c3:00.0 whose firmware gives no node (-1), and no entry for a fourth.
static void two_socket(const char *root) {
  put(root, "devices/system/node/online", "0-1\n");
  put(root, "devices/system/node/node0/cpulist", "0-3,8-11\n");
  put(root, "devices/system/node/node1/cpulist", "4-7,12-15\n");
  put(root, "bus/pci/devices/0000:1b:00.0/numa_node", "0\n");
  put(root, "bus/pci/devices/0000:9a:00.0/numa_node", "1\n");
  put(root, "bus/pci/devices/0000:c3:00.0/numa_node", "-1\n");
}

static void test_two_sockets(void) {
  char root[512];
  sub(root, sizeof root, "two");
  two_socket(root);
  err e = {0};
  int n = 0, node = 7;
  CHECK_EQ_INT(eng_numa_online_nodes(root, &n, &e), 0);
  CHECK_EQ_INT(n, 2);
  // CUDA's spelling (upper case), NVML's (8-digit domain), sysfs's own
  CHECK_EQ_INT(eng_numa_pci_node(root, "0000:9A:00.0", &node, &e), 0);
  CHECK_EQ_INT(node, 1);
  CHECK_EQ_INT(eng_numa_pci_node(root, "00000000:9A:00.0", &node, &e), 0);
  CHECK_EQ_INT(node, 1);
  CHECK_EQ_INT(eng_numa_pci_node(root, "0000:1b:00.0", &node, &e), 0);
  CHECK_EQ_INT(node, 0);
  CHECK_EQ_INT(eng_numa_pci_node(root, "0000:C3:00.0", &node, &e), 0);
  CHECK_EQ_INT(node, -1);
  CHECK_EQ_INT(eng_numa_pci_node(root, "0000:de:00.0", &node, &e), 0);  // no such device file
  CHECK_EQ_INT(node, -1);
  e = (err){0};
  CHECK_EQ_INT(eng_numa_pci_node(root, "GPU-1234", &node, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "GPU-1234");

  cpu_set_t cpus;
  CHECK_EQ_INT(eng_numa_node_cpus(root, 1, &cpus, &e), 0);
  CHECK_EQ_INT(CPU_COUNT(&cpus), 8);
  CHECK(CPU_ISSET(4, &cpus) && CPU_ISSET(15, &cpus) && !CPU_ISSET(0, &cpus));
  e = (err){0};
  CHECK_EQ_INT(eng_numa_node_cpus(root, 5, &cpus, &e), ERR_NOT_FOUND);
  CHECK_CONTAINS(e.msg, "node5/cpulist");

  // placement: the node's CPUs among the allowed ones
  cpu_set_t allowed;
  all_cpus(&allowed, 16);
  eng_numa_place p;
  CHECK_EQ_INT(eng_numa_place_for(root, 1, "0000:9A:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, 1);
  CHECK_EQ_INT(CPU_COUNT(&p.cpus), 8);
  CHECK_EQ_STR(p.desc, "GPU 1: NUMA node 1, CPUs 4-7,12-15");
  CHECK_EQ_INT(eng_numa_place_for(root, 0, "0000:1B:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, 0);
  CHECK_EQ_STR(p.desc, "GPU 0: NUMA node 0, CPUs 0-3,8-11");
  // a cpuset (taskset, a container) that leaves node 1 only CPUs 6 and 7
  all_cpus(&allowed, 8);
  CPU_CLR(4, &allowed);
  CPU_CLR(5, &allowed);
  CHECK_EQ_INT(eng_numa_place_for(root, 1, "0000:9A:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, 1);
  CHECK_EQ_INT(CPU_COUNT(&p.cpus), 2);
  CHECK_EQ_STR(p.desc, "GPU 1: NUMA node 1, CPUs 6-7");
  // ... or none of node 1: no placement
  all_cpus(&allowed, 4);
  CHECK_EQ_INT(eng_numa_place_for(root, 1, "0000:9A:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, -1);
  CHECK_EQ_INT(CPU_COUNT(&p.cpus), 0);
  CHECK_CONTAINS(p.desc, "none of this process's CPUs");
  // unknown node
  all_cpus(&allowed, 16);
  CHECK_EQ_INT(eng_numa_place_for(root, 2, "0000:C3:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, -1);
  CHECK_EQ_STR(p.desc, "GPU 2: NUMA node unknown (2 nodes): no placement");
  CHECK_EQ_INT(eng_numa_place_for(root, 3, "0000:de:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, -1);
}

static void test_one_node(void) {
  char root[512];
  sub(root, sizeof root, "one");
  put(root, "devices/system/node/online", "0\n");
  put(root, "devices/system/node/node0/cpulist", "0-1\n");
  put(root, "bus/pci/devices/0000:1b:00.0/numa_node", "0\n");
  err e = {0};
  int n = 0;
  CHECK_EQ_INT(eng_numa_online_nodes(root, &n, &e), 0);
  CHECK_EQ_INT(n, 1);
  cpu_set_t allowed;
  all_cpus(&allowed, 2);
  eng_numa_place p;
  CHECK_EQ_INT(eng_numa_place_for(root, 0, "0000:1B:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, -1);
  CHECK_EQ_STR(p.desc, "GPU 0: one NUMA node: no placement");
  // the bus id is not even read on one node
  CHECK_EQ_INT(eng_numa_place_for(root, 0, "", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, -1);

  // a kernel without NUMA: no node folder at all is one node
  sub(root, sizeof root, "nonuma");
  put(root, "bus/pci/devices/0000:1b:00.0/numa_node", "-1\n");
  CHECK_EQ_INT(eng_numa_online_nodes(root, &n, &e), 0);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(eng_numa_place_for(root, 0, "0000:1b:00.0", &allowed, &p, &e), 0);
  CHECK_EQ_INT(p.node, -1);
  CHECK_EQ_STR(p.desc, "GPU 0: one NUMA node: no placement");

  // node numbers are a list too: nodes 0 and 2 online (1 offline) are two
  sub(root, sizeof root, "sparse");
  put(root, "devices/system/node/online", "0,2\n");
  CHECK_EQ_INT(eng_numa_online_nodes(root, &n, &e), 0);
  CHECK_EQ_INT(n, 2);
}

static void test_malformed(void) {
  char root[512];
  sub(root, sizeof root, "bad");
  put(root, "devices/system/node/online", "0-1\n");
  put(root, "devices/system/node/node1/cpulist", "4-x\n");
  put(root, "bus/pci/devices/0000:9a:00.0/numa_node", "one\n");
  put(root, "bus/pci/devices/0000:9b:00.0/numa_node", "1\n");
  err e = {0};
  int node = 0;
  CHECK_EQ_INT(eng_numa_pci_node(root, "0000:9a:00.0", &node, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "0000:9a:00.0/numa_node");
  CHECK_EQ_INT(node, -1);
  cpu_set_t allowed;
  all_cpus(&allowed, 16);
  eng_numa_place p;
  e = (err){0};
  CHECK_EQ_INT(eng_numa_place_for(root, 1, "0000:9b:00.0", &allowed, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "node1/cpulist");
  CHECK_EQ_INT(p.node, -1);

  sub(root, sizeof root, "badonline");
  put(root, "devices/system/node/online", "zero\n");
  int n = 0;
  e = (err){0};
  CHECK_EQ_INT(eng_numa_online_nodes(root, &n, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "online");
}

// The real /sys of whatever runs the test: any answer but a crash, and a
// consistent one (a placement only with more than one node).
static void test_this_host(void) {
  err e = {0};
  int n = 0;
  CHECK_EQ_INT(eng_numa_online_nodes(ENG_NUMA_SYSFS, &n, &e), 0);
  CHECK(n >= 1);
  cpu_set_t allowed;
  CHECK_EQ_INT(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  eng_numa_place p;
  if (eng_numa_place_for(ENG_NUMA_SYSFS, 0, "0000:00:00.0", &allowed, &p, &e) == 0) {
    if (n == 1) CHECK_EQ_INT(p.node, -1);
  }
}

int main(void) {
  snprintf(g_root, sizeof g_root, "%s/inferd-numa-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(g_root)) {
    perror("mkdtemp");
    return 1;
  }
  test_cpulist();
  test_two_sockets();
  test_one_node();
  test_malformed();
  test_this_host();
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_root);
  CHECK_DONE();
}
