// test_shmguard: server/sec/shmguard.c: a copy from or into a shared memory
// object that was truncated under its mapping returns -1 (the SIGBUS is
// caught) and the process goes on, copies work again once the object has
// its size back, and two threads faulting at once each get their own -1.
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "server/sec/shmguard.h"

enum { PAGES = 4 };

static int make_object(size_t size, uint8_t **map) {
  int fd = memfd_create("shmguard", 0);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
    perror("memfd_create/ftruncate");
    exit(2);
  }
  *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (*map == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  return fd;
}

static void test_read_write(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), size = PAGES * page;
  uint8_t *map, *buf = malloc(size);
  int fd = make_object(size, &map);
  memset(map, 7, size);
  CHECK_EQ_INT(srv_shmguard_read(buf, map, size), 0);
  CHECK_EQ_INT(buf[size - 1], 7);
  CHECK_EQ_INT(srv_shmguard_write(map, buf, size), 0);

  CHECK_EQ_INT(ftruncate(fd, (off_t)page), 0);  // the client shrinks it to one page
  CHECK_EQ_INT(srv_shmguard_read(buf, map, page), 0);  // what is left still reads
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(srv_shmguard_read(buf, map, size), -1);
    CHECK_EQ_INT(srv_shmguard_write(map + page, buf, page), -1);
  }
  CHECK_EQ_INT(ftruncate(fd, (off_t)size), 0);  // back: the pages read as zeros
  CHECK_EQ_INT(srv_shmguard_read(buf, map, size), 0);
  CHECK_EQ_INT(buf[size - 1], 0);
  CHECK_EQ_INT(srv_shmguard_read(buf, map, 0), 0);  // nothing to copy
  munmap(map, size);
  close(fd);
  free(buf);
}

typedef struct worker {
  uint8_t *map;
  size_t size;
  int failed, ok;
} worker;

static void *fault_loop(void *arg) {
  worker *w = arg;
  uint8_t *buf = malloc(w->size);
  for (int i = 0; i < 200; i++) {
    if (srv_shmguard_read(buf, w->map, w->size) != 0) w->failed++;
    if (srv_shmguard_read(buf, w->map, 16) == 0) w->ok++;  // the first page is still there
  }
  free(buf);
  return NULL;
}

static void test_threads(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), size = PAGES * page;
  uint8_t *map;
  int fd = make_object(size, &map);
  CHECK_EQ_INT(ftruncate(fd, (off_t)page), 0);
  worker w[2] = {{map, size, 0, 0}, {map, size, 0, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(pthread_create(&t[i], NULL, fault_loop, &w[i]), 0);
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ_INT(w[i].failed, 200);
    CHECK_EQ_INT(w[i].ok, 200);
  }
  munmap(map, size);
  close(fd);
}

int main(void) {
  err e = {0};
  CHECK_EQ_INT(srv_shmguard_install(&e), 0);
  test_read_write();
  test_threads();
  CHECK_DONE();
}
