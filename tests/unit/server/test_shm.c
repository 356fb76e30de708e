// test_shm: server/sec/shm.c against real POSIX shared memory objects: bytes
// written through a region are the object's bytes (at unaligned offsets
// too), every refusal has its code and names the region or key, an
// unregistered region stays mapped for the request that holds it, and
// threads registering, acquiring and unregistering at once lose nothing
// (run under TSan).
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "server/sec/shm.h"

// A fresh object of `size` bytes filled with i & 0xff, mapped here too.
static uint8_t *make_object(const char *key, size_t size) {
  shm_unlink(key);
  int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
    perror("shm_open/ftruncate");
    exit(2);
  }
  uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  for (size_t i = 0; i < size; i++) p[i] = (uint8_t)i;
  return p;
}

static char key_a[64], key_b[64];

static void test_register_status_acquire(void) {
  size_t size = 3 * 4096 + 100;
  uint8_t *obj = make_object(key_a, size);
  srv_shm *s;
  err e = {0};
  CHECK_EQ_INT(srv_shm_create(&s, 0, &e), 0);
  // an offset inside the second page: the mapping starts at that page
  CHECK_EQ_INT(srv_shm_register(s, "in", key_a, 5000, 2000, &e), 0);
  CHECK_EQ_INT(srv_shm_register(s, "all", key_a, 0, size, &e), 0);

  srv_shm_info *info;
  size_t n;
  CHECK_EQ_INT(srv_shm_status(s, "", &info, &n, &e), 0);
  CHECK_EQ_INT(n, 2);
  if (n == 2) {  // sorted by name
    CHECK_EQ_STR(info[0].name, "all");
    CHECK_EQ_INT(info[0].offset, 0);
    CHECK_EQ_INT(info[0].byte_size, size);
    CHECK_EQ_STR(info[1].name, "in");
    CHECK_EQ_STR(info[1].key, key_a);
    CHECK_EQ_INT(info[1].offset, 5000);
    CHECK_EQ_INT(info[1].byte_size, 2000);
  }
  srv_shm_info_free(info, n);
  CHECK_EQ_INT(srv_shm_status(s, "in", &info, &n, &e), 0);
  CHECK_EQ_INT(n, 1);
  srv_shm_info_free(info, n);
  CHECK_EQ_INT(srv_shm_status(s, "nope", &info, &n, &e), ERR_NOT_FOUND);
  CHECK_CONTAINS(e.msg, "'nope'");

  // reads see the object's bytes at region offset + window offset
  srv_shm_region *r;
  uint8_t *p;
  CHECK_EQ_INT(srv_shm_acquire(s, "in", 10, 100, &r, &p, &e), 0);
  int same = 1;
  for (int i = 0; i < 100; i++) same &= p[i] == (uint8_t)(5010 + i);
  CHECK(same);
  // writes land in the object
  p[0] = 0xAB;
  CHECK_EQ_INT(obj[5010], 0xAB);
  srv_shm_release(r);
  // the window's last byte is the region's last byte; one more does not fit
  CHECK_EQ_INT(srv_shm_acquire(s, "in", 1999, 1, &r, &p, &e), 0);
  CHECK_EQ_INT(*p, (uint8_t)(5000 + 1999));
  srv_shm_release(r);
  CHECK_EQ_INT(srv_shm_acquire(s, "in", 1999, 2, &r, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "'in' holds 2000 bytes");
  CHECK_EQ_INT(srv_shm_acquire(s, "in", UINT64_MAX, 1, &r, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(srv_shm_acquire(s, "gone", 0, 1, &r, &p, &e), ERR_NOT_FOUND);
  CHECK_CONTAINS(e.msg, "'gone'");

  // unregistered while held: the name goes, the bytes stay readable
  CHECK_EQ_INT(srv_shm_acquire(s, "in", 0, 2000, &r, &p, &e), 0);
  CHECK_EQ_INT(srv_shm_unregister(s, "in"), 1);
  CHECK_EQ_INT(srv_shm_unregister(s, "in"), 0);  // unknown: no error, nothing done
  CHECK_EQ_INT(srv_shm_acquire(s, "in", 0, 1, &r, &p, &e) == 0, 0);
  CHECK_EQ_INT(p[1999], (uint8_t)(5000 + 1999));
  CHECK_EQ_INT(srv_shm_status(s, "", &info, &n, &e), 0);
  CHECK_EQ_INT(n, 1);
  srv_shm_info_free(info, n);
  srv_shm_release(r);  // the last reference: unmapped now (ASan would see a leak otherwise)

  // the same name may be registered again once free
  CHECK_EQ_INT(srv_shm_register(s, "in", key_a, 0, 16, &e), 0);
  CHECK_EQ_INT(srv_shm_unregister(s, ""), 2);
  CHECK_EQ_INT(srv_shm_status(s, NULL, &info, &n, &e), 0);
  CHECK_EQ_INT(n, 0);
  srv_shm_destroy(s);
  munmap(obj, size);
  shm_unlink(key_a);
}

static void test_refusals(void) {
  uint8_t *obj = make_object(key_a, 4096);
  srv_shm *s;
  err e = {0};
  CHECK_EQ_INT(srv_shm_create(&s, 0, &e), 0);
  CHECK_EQ_INT(srv_shm_register(s, "", key_a, 0, 16, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(srv_shm_register(s, "r", "", 0, 16, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "needs a key");
  CHECK_EQ_INT(srv_shm_register(s, "r", key_a, 0, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "byte_size 0");
  CHECK_EQ_INT(srv_shm_register(s, "r", key_b, 0, 16, &e), ERR_INVALID_ARGUMENT);  // no such object
  CHECK_CONTAINS(e.msg, key_b);
  CHECK_EQ_INT(srv_shm_register(s, "r", key_a, 4000, 97, &e), ERR_INVALID_ARGUMENT);  // past its end
  CHECK_CONTAINS(e.msg, "holds 4096 bytes");
  CHECK_EQ_INT(srv_shm_register(s, "r", key_a, 5000, 1, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(srv_shm_register(s, "r", key_a, 4000, 96, &e), 0);
  CHECK_EQ_INT(srv_shm_register(s, "r", key_a, 0, 16, &e), ERR_ALREADY_EXISTS);
  CHECK_CONTAINS(e.msg, "'r' is already registered");
  srv_shm_destroy(s);  // with a region still registered: unmapped here
  munmap(obj, 4096);
  shm_unlink(key_a);
}

// Threads race register / acquire+read / unregister on the same few names.
typedef struct worker {
  srv_shm *s;
  int id;
  long reads;
  int bad;
} worker;

static void *churn(void *arg) {
  worker *w = arg;
  char name[16];
  for (int i = 0; i < 3000; i++) {
    snprintf(name, sizeof name, "n%d", (i + w->id) % 4);
    err e = {0};
    switch ((i * 7 + w->id) % 3) {
      case 0:
        if (srv_shm_register(w->s, name, key_a, 64, 1024, &e) != 0 && e.code != ERR_ALREADY_EXISTS) w->bad++;
        break;
      case 1: {
        srv_shm_region *r;
        uint8_t *p;
        if (srv_shm_acquire(w->s, name, 0, 1024, &r, &p, &e) == 0) {
          // the mapping must stay valid however the others churn the names
          w->bad += p[0] != 64 || p[1023] != (uint8_t)(64 + 1023);
          w->reads++;
          srv_shm_release(r);
        } else if (e.code != ERR_NOT_FOUND) {
          w->bad++;
        }
        break;
      }
      default: srv_shm_unregister(w->s, name); break;
    }
  }
  return NULL;
}

static void test_threads(void) {
  uint8_t *obj = make_object(key_a, 4096);
  srv_shm *s;
  err e = {0};
  CHECK_EQ_INT(srv_shm_create(&s, 0, &e), 0);
  enum { N = 4 };
  worker w[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    w[i] = (worker){.s = s, .id = i};
    CHECK_EQ_INT(pthread_create(&t[i], NULL, churn, &w[i]), 0);
  }
  long reads = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ_INT(w[i].bad, 0);
    reads += w[i].reads;
  }
  CHECK(reads > 0);
  srv_shm_destroy(s);
  munmap(obj, 4096);
  shm_unlink(key_a);
}

int main(void) {
  snprintf(key_a, sizeof key_a, "/inferd_test_shm_a_%d", (int)getpid());
  snprintf(key_b, sizeof key_b, "/inferd_test_shm_b_%d", (int)getpid());
  shm_unlink(key_b);
  test_register_status_acquire();
  test_refusals();
  test_threads();
  CHECK_DONE();
}
