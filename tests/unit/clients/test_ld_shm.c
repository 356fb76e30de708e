// test_ld_shm: clients/load/shm.c without a server. An object is created
// exclusively with mode 0600, holds exactly the bytes given (seen through a
// mapping of its own, as the server would), and leaves nothing in /dev/shm
// once destroyed or when any step fails; a set whose registration fails
// (no server listening) removes every object it made.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "clients/load/rpc.h"
#include "clients/load/shm.h"

static char prefix[64];  // unique to this process: tests may run side by side

// How many /dev/shm entries start with p.
static int count_objects(const char *p) {
  DIR *d = opendir("/dev/shm");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *de; (de = readdir(d));) n += strncmp(de->d_name, p, strlen(p)) == 0;
  closedir(d);
  return n;
}

static void test_create_destroy(void) {
  char name[96], key[100], path[128];
  snprintf(name, sizeof name, "%s_a", prefix);
  snprintf(key, sizeof key, "/%s", name);
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  uint8_t bytes[5000];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 7 + 3);
  ld_shm *s = NULL;
  err e = {0};
  CHECK_EQ_INT(ld_shm_create(name, key, sizeof bytes, bytes, &s, &e), 0);
  CHECK(s != NULL);
  if (!s) return;
  CHECK_EQ_STR(ld_shm_name(s), name);
  CHECK_EQ_STR(ld_shm_key(s), key);
  CHECK_EQ_INT(ld_shm_size(s), sizeof bytes);
  CHECK(memcmp(ld_shm_data(s), bytes, sizeof bytes) == 0);

  struct stat st;
  CHECK_EQ_INT(stat(path, &st), 0);
  CHECK_EQ_INT(st.st_size, sizeof bytes);
  CHECK_EQ_INT(st.st_mode & 0777, 0600);  // nobody else's to read

  // What another process (the server) sees through its own mapping.
  int fd = shm_open(key, O_RDONLY, 0);
  CHECK(fd >= 0);
  if (fd >= 0) {
    void *p = mmap(NULL, sizeof bytes, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    if (p != MAP_FAILED) {
      CHECK(memcmp(p, bytes, sizeof bytes) == 0);
      // and writes through ours are visible there (outputs come back this way)
      ld_shm_data(s)[4999] = 0xAB;
      CHECK_EQ_INT(((const uint8_t *)p)[4999], 0xAB);
      munmap(p, sizeof bytes);
    }
    close(fd);
  }
  ld_shm_destroy(s);
  errno = 0;
  CHECK(stat(path, &st) != 0 && errno == ENOENT);
  CHECK(shm_open(key, O_RDONLY, 0) < 0);
  ld_shm_destroy(NULL);

  // No init: zeros.
  CHECK_EQ_INT(ld_shm_create(name, key, 100000, NULL, &s, &e), 0);
  if (s) {
    size_t nz = 0;
    for (size_t i = 0; i < 100000; i++) nz += ld_shm_data(s)[i] != 0;
    CHECK_EQ_INT(nz, 0);
  }
  ld_shm_destroy(s);
  CHECK_EQ_INT(count_objects(prefix), 0);
}

static void test_failures_leave_nothing(void) {
  char name[96], key[100];
  snprintf(name, sizeof name, "%s_b", prefix);
  snprintf(key, sizeof key, "/%s", name);
  ld_shm *s = (ld_shm *)1;
  err e = {0};

  // An existing object is someone else's: refused, and left as it was.
  int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
  CHECK(fd >= 0);
  CHECK_EQ_INT(ld_shm_create(name, key, 64, NULL, &s, &e), ERR_ALREADY_EXISTS);
  CHECK(s == NULL);
  CHECK_CONTAINS(e.msg, key);
  CHECK_EQ_INT(count_objects(prefix), 1);
  if (fd >= 0) close(fd);
  shm_unlink(key);

  CHECK_EQ_INT(ld_shm_create(name, key, 0, NULL, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "size 0");
  CHECK_EQ_INT(ld_shm_create("", key, 8, NULL, &s, &e), ERR_INVALID_ARGUMENT);
  char bad[128];
  snprintf(bad, sizeof bad, "/%s_dir/x", prefix);  // shm_open names hold no inner '/'
  CHECK(ld_shm_create(name, bad, 8, NULL, &s, &e) != 0);
  CHECK_CONTAINS(e.msg, bad);
  CHECK(s == NULL);
  CHECK_EQ_INT(count_objects(prefix), 0);
}

static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static void test_set_without_server(void) {
  int port = closed_port();
  CHECK(port > 0);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  grpc_channel *ch = ld_channel_create(target, false);
  CHECK(ch != NULL);
  if (!ch) return;

  uint8_t a[16] = {1, 2, 3}, b[1];
  ld_tensor in[2] = {{.name = "A", .datatype = "FP32", .rank = 1, .shape = {4}, .data = a, .size = sizeof a},
                     {.name = "E", .datatype = "FP32", .rank = 1, .shape = {0}, .data = b, .size = 0}};
  ld_tensor_meta outs[1] = {{.name = "OUT", .datatype = "FP32"}};
  ld_model m = {.name = "fake", .outputs = outs, .n_outputs = 1};
  char p[96];
  snprintf(p, sizeof p, "%s_set", prefix);
  ld_shm_set *set = (ld_shm_set *)1;
  err e = {0};
  int rc = ld_shm_set_create(ch, 5000, p, in, 2, &m, 4096, NULL, &set, &e);
  CHECK(rc == ERR_UNAVAILABLE || rc == ERR_DEADLINE_EXCEEDED);
  CHECK(set == NULL);
  char want[320];
  snprintf(want, sizeof want, "cannot register shared memory region '%s_in0' (key '/%s_in0', 16 bytes)", p, p);
  CHECK_CONTAINS(e.msg, want);
  CHECK_EQ_INT(count_objects(prefix), 0);
  CHECK_EQ_INT(ld_shm_set_destroy(NULL, ch, 1000, &e), 0);
  grpc_channel_destroy(ch);
}

int main(void) {
  snprintf(prefix, sizeof prefix, "inferd_load_test_%ld", (long)getpid());
  grpc_init();
  test_create_destroy();
  test_failures_leave_nothing();
  test_set_without_server();
  grpc_shutdown();
  CHECK_DONE();
}
