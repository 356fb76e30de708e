// tests/unit/server/test_grpc_accept.c: server/grpc/grpc_accept.c without
// gRPC: connections are handed to a recorder instead of the core. The cap
// resets the connection past it, a descriptor the "core" closed frees its
// slot, the inodes are those of the sockets handed over, a busy or bad
// address fails.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "server/grpc/grpc_accept.h"

typedef struct recorder {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fds[16];
  int n;
} recorder;

static void on_hand(void *arg, int fd) {
  recorder *r = arg;
  pthread_mutex_lock(&r->mu);
  if (r->n < 16) r->fds[r->n++] = fd;
  else close(fd);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

// Waits up to 5 s for n hand-overs.
static int await_handed(recorder *r, int n) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&r->mu);
  while (r->n < n && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0) {
  }
  int got = r->n;
  pthread_mutex_unlock(&r->mu);
  return got;
}

// A client that connects and, with say, sends its first byte (a preface stand-in).
static int connect_say(int port, int say) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
    close(c);
    return -1;
  }
  if (c >= 0 && say && send(c, "P", 1, MSG_NOSIGNAL) != 1) {
    close(c);
    return -1;
  }
  return c;
}

static int connect_to(int port) { return connect_say(port, 1); }

// The server ended the connection (EOF or reset) within 5 s.
static int ended(int c) {
  struct pollfd pf = {.fd = c, .events = POLLIN};
  if (poll(&pf, 1, 5000) != 1) return 0;
  char b;
  return recv(c, &b, 1, 0) <= 0;
}

static void test_cap_and_hand_over(void) {
  err e = {0};
  srv_gacc *a = NULL;
  CHECK_EQ_INT(srv_gacc_create("127.0.0.1:0", 2, 300, &a, &e), 0);
  if (!a) return;
  int port = srv_gacc_port(a);
  CHECK(port > 0);
  recorder r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  CHECK_EQ_INT(srv_gacc_start(a, on_hand, &r, &e), 0);
  int c1 = connect_to(port), c2 = connect_to(port);
  CHECK(c1 >= 0 && c2 >= 0);
  CHECK_EQ_INT(await_handed(&r, 2), 2);
  for (int i = 0; i < 2; i++) {
    struct stat st;
    CHECK_EQ_INT(fstat(r.fds[i], &st), 0);
    CHECK(srv_gacc_inode(a, r.fds[i]) == (unsigned long)st.st_ino);
  }
  CHECK(srv_gacc_inode(a, 0) == 0);
  CHECK(srv_gacc_inode(a, -1) == 0);
  // at the cap: the third is reset, not handed over
  int c3 = connect_to(port);
  CHECK(c3 < 0 || ended(c3));
  if (c3 >= 0) close(c3);
  CHECK_EQ_INT(await_handed(&r, 2), 2);
  // the "core" closes one: after the recheck interval a new one takes its slot
  int gone = r.fds[0];
  close(gone);
  usleep(60 * 1000);
  int c4 = connect_to(port);
  CHECK(c4 >= 0);
  CHECK_EQ_INT(await_handed(&r, 3), 3);
  CHECK(srv_gacc_inode(a, r.fds[2]) != 0);
  // one that never speaks holds a slot only until the wait (300 ms here) ends, off the core
  close(r.fds[1]);
  usleep(60 * 1000);
  int silent = connect_say(port, 0);
  CHECK(silent >= 0);
  CHECK(ended(silent));  // reset at its deadline
  close(silent);
  CHECK_EQ_INT(await_handed(&r, 3), 3);
  // and one that speaks late, within the wait, is handed over then
  int late = connect_say(port, 0);
  usleep(100 * 1000);
  CHECK(send(late, "P", 1, MSG_NOSIGNAL) == 1);
  CHECK_EQ_INT(await_handed(&r, 4), 4);
  srv_gacc_stop(a);
  CHECK(connect_to(port) < 0);  // the listener is closed
  close(late);
  srv_gacc_destroy(a);
  close(c1);
  close(c2);
  if (c4 >= 0) close(c4);
  for (int i = 2; i < r.n; i++) close(r.fds[i]);
}

static void test_addresses(void) {
  err e = {0};
  srv_gacc *a = NULL, *b = NULL;
  CHECK_EQ_INT(srv_gacc_create("127.0.0.1:0", 1, 1000, &a, &e), 0);
  if (!a) return;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", srv_gacc_port(a));
  CHECK_EQ_INT(srv_gacc_create(addr, 1, 1000, &b, &e), ERR_UNAVAILABLE);  // busy: no silent sharing
  CHECK(b == NULL);
  CHECK_CONTAINS(e.msg, addr);
  srv_gacc_destroy(a);
  CHECK_EQ_INT(srv_gacc_create("no-port-here", 1, 1000, &b, &e), ERR_UNAVAILABLE);
  CHECK_EQ_INT(srv_gacc_create("127.0.0.1:70000", 1, 1000, &b, &e), ERR_UNAVAILABLE);
  CHECK_EQ_INT(srv_gacc_create("127.0.0.1:0", 0, 1000, &b, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(srv_gacc_create("127.0.0.1:0", 1, 0, &b, &e), ERR_INVALID_ARGUMENT);
  // the wildcard forms gRPC takes, and a bracketed IPv6 literal where the loopback has IPv6
  CHECK_EQ_INT(srv_gacc_create("0.0.0.0:0", 1, 1000, &b, &e), 0);
  srv_gacc_destroy(b);
  b = NULL;
  CHECK_EQ_INT(srv_gacc_create("[::]:0", 1, 1000, &b, &e), 0);
  srv_gacc_destroy(b);
  b = NULL;
  if (srv_gacc_create("[::1]:0", 1, 1000, &b, &e) == 0) srv_gacc_destroy(b);
  else fprintf(stderr, "no IPv6 loopback here: [::1] skipped (%s)\n", e.msg);
  CHECK(srv_gacc_default_max_conns() >= 1 && srv_gacc_default_max_conns() <= 10000);
}

int main(void) {
  test_cap_and_hand_over();
  test_addresses();
  CHECK_DONE();
}
