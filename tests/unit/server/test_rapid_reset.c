// Tests server/grpc/rapid_reset.c: the counts (a connection over the limit only
// when its client's cancels are also half of its calls in that second, once
// per connection, calls of an earlier second not counted as this second's
// cancels, each connection on its own), which ended calls count (cancels
// before the deadline; expiries of deadlines shorter than the minimum, those
// the server refused on arrival too), and ending a real TCP connection by
// gRPC's name for its peer: IPv4, IPv6, percent-encoded and v4-mapped forms;
// the other connection to the same port stays open; an unknown peer, a
// closed connection and names gRPC does not write end nothing.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "server/grpc/rapid_reset.h"

#define SEC 1000000

static void test_counts(void) {
  srv_rr *rr;
  err e = {0};
  CHECK_EQ_INT(srv_rr_create(0, 10, &rr, &e), ERR_INVALID_ARGUMENT);
  CHECK(rr == NULL && strstr(e.msg, ">= 1"));
  CHECK_EQ_INT(srv_rr_create(10, 10, &rr, &e), 0);
  srv_rr_verdict v;
  int64_t t0 = 5 * SEC;

  // 30 calls, 9 cancelled (30 %): past the count, under half: kept
  uint64_t keys[40];
  int64_t wins[40];
  for (int i = 0; i < 30; i++) keys[i] = srv_rr_call(rr, "ipv4:10.0.0.1:1000", t0 + i, &wins[i]);
  CHECK(keys[0] != 0);
  for (int i = 1; i < 30; i++) CHECK(keys[i] == keys[0] && wins[i] == wins[0]);
  int over = 0;
  for (int i = 0; i < 9; i++) over += srv_rr_cancelled(rr, keys[i], wins[i], SRV_RR_CANCEL, &v);
  CHECK_EQ_INT(over, 0);
  // a second connection cancelling all of its 12 calls: the 10th cancel ends it, and only once
  uint64_t k2[12];
  int64_t w2[12];
  for (int i = 0; i < 12; i++) k2[i] = srv_rr_call(rr, "ipv6:[::1]:2000", t0 + 100 + i, &w2[i]);
  CHECK(k2[0] != keys[0]);
  int at = -1;
  for (int i = 0; i < 12; i++)
    if (srv_rr_cancelled(rr, k2[i], w2[i], SRV_RR_CANCEL, &v)) {
      CHECK_EQ_INT(at, -1);
      at = i;
    }
  CHECK_EQ_INT(at, 9);
  CHECK_EQ_STR(v.peer, "ipv6:[::1]:2000");
  CHECK_EQ_INT(v.calls, 12);
  CHECK_EQ_INT(v.cancels, 10);
  // the first connection's remaining cancels take it to 15 of 30: half, over the count: ended now
  at = -1;
  for (int i = 9; i < 15; i++)
    if (srv_rr_cancelled(rr, keys[i], wins[i], SRV_RR_CANCEL, &v)) at = i;
  CHECK_EQ_INT(at, 14);
  CHECK_EQ_STR(v.peer, "ipv4:10.0.0.1:1000");
  CHECK_EQ_INT(v.cancels, 15);

  // a new second: calls of the last one cancelled now do not count toward it
  int64_t t1 = t0 + 3 * SEC;
  for (int i = 0; i < 20; i++) keys[i] = srv_rr_call(rr, "ipv4:10.0.0.2:3000", t0 + i, &wins[i]);
  int64_t wnew;
  uint64_t knew = srv_rr_call(rr, "ipv4:10.0.0.2:3000", t0 + SEC + 5, &wnew);  // opens the next second
  CHECK(knew == keys[0] && wnew != wins[0]);
  over = 0;
  for (int i = 0; i < 20; i++) over += srv_rr_cancelled(rr, keys[i], wins[i], SRV_RR_CANCEL, &v);
  CHECK_EQ_INT(over, 0);
  // the same connection later, all its calls of one second cancelled: over the limit
  int64_t wl = 0;
  uint64_t kl = 0;
  for (int i = 0; i < 10; i++) kl = srv_rr_call(rr, "ipv4:10.0.0.2:3000", t1 + i, &wl);
  over = 0;
  for (int i = 0; i < 10; i++) over += srv_rr_cancelled(rr, kl, wl, SRV_RR_CANCEL, &v);
  CHECK_EQ_INT(over, 1);
  // untracked calls and peers too long to count
  CHECK_EQ_INT(srv_rr_cancelled(rr, 0, 0, SRV_RR_CANCEL, &v), 0);
  char longpeer[SRV_RR_PEER_MAX + 8];
  memset(longpeer, 'a', sizeof longpeer - 1);
  longpeer[sizeof longpeer - 1] = 0;
  int64_t w;
  CHECK(srv_rr_call(rr, longpeer, t1, &w) == 0);
  srv_rr_destroy(rr);
  srv_rr_destroy(NULL);
}

// Which ended calls count (srv_rr_classify), and a connection of short
// deadlines ended like one of cancels, under the same half-of-the-calls rule.
static void test_short_deadlines(void) {
  srv_rr *rr;
  err e = {0};
  CHECK_EQ_INT(srv_rr_create(10, -1, &rr, &e), ERR_INVALID_ARGUMENT);
  CHECK(rr == NULL && strstr(e.msg, "0 to 60000"));
  CHECK_EQ_INT(srv_rr_create(10, 60001, &rr, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(srv_rr_create(10, 10, &rr, &e), 0);  // 10 ms
  const int64_t now = 100 * SEC, none = INT64_MAX;
  // answered: nothing counts, whatever its deadline
  CHECK_EQ_INT(srv_rr_classify(rr, 0, 0, now, none, none), SRV_RR_ANSWERED);
  CHECK_EQ_INT(srv_rr_classify(rr, 0, 0, now, now - 5, 3000), SRV_RR_ANSWERED);
  // a client cancel: without a deadline, or well before it
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, none, none), SRV_RR_CANCEL);
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now + 5000, 3000), SRV_RR_CANCEL);
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now + 5 * SEC, 6 * SEC), SRV_RR_CANCEL);
  // at (within 1 ms of) or past its deadline: an expiry, counted only when the deadline was short on arrival
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now + 999, 3000), SRV_RR_EXPIRED);
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now - 1, 3000), SRV_RR_EXPIRED);
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now - 1, 9999), SRV_RR_EXPIRED);
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now - 1, 10000), SRV_RR_ANSWERED);  // 10 ms: an honest budget
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now - 1, 2 * SEC), SRV_RR_ANSWERED);
  // expired on arrival (left <= 0) and refused by the server with DEADLINE_EXCEEDED: its status was sent, so
  // the core does not report it cancelled
  CHECK_EQ_INT(srv_rr_classify(rr, 0, 1, now, now - 20, -20), SRV_RR_EXPIRED);
  CHECK_EQ_INT(srv_rr_classify(rr, 0, 1, now, now - 20, -20 - 30 * SEC), SRV_RR_EXPIRED);
  // dropped from a queue at its deadline: short or not
  CHECK_EQ_INT(srv_rr_classify(rr, 0, 1, now, now - 20, 4000), SRV_RR_EXPIRED);
  CHECK_EQ_INT(srv_rr_classify(rr, 0, 1, now, now - 20, 50000), SRV_RR_ANSWERED);

  srv_rr_verdict v;
  int64_t t0 = 7 * SEC, w;
  // 10 % short deadlines, all expiring, over 200 calls: 20 counted (twice the limit), under half: kept
  uint64_t k = 0;
  for (int i = 0; i < 200; i++) k = srv_rr_call(rr, "ipv4:10.0.0.3:4000", t0 + i, &w);
  int over = 0;
  for (int i = 0; i < 20; i++) over += srv_rr_cancelled(rr, k, w, SRV_RR_EXPIRED, &v);
  for (int i = 0; i < 50; i++) over += srv_rr_cancelled(rr, k, w, SRV_RR_ANSWERED, &v);  // counts nothing
  CHECK_EQ_INT(over, 0);
  // with the soak's 30 % cancels on top: 40 % in all, still kept
  for (int i = 0; i < 60; i++) over += srv_rr_cancelled(rr, k, w, SRV_RR_CANCEL, &v);
  CHECK_EQ_INT(over, 0);
  // every call a short deadline that expires: ended at the limit's 10th, and the verdict tells them apart
  for (int i = 0; i < 12; i++) k = srv_rr_call(rr, "ipv4:10.0.0.4:4000", t0 + i, &w);
  int at = -1;
  for (int i = 0; i < 12; i++)
    if (srv_rr_cancelled(rr, k, w, i < 3 ? SRV_RR_CANCEL : SRV_RR_EXPIRED, &v)) at = i;
  CHECK_EQ_INT(at, 9);
  CHECK_EQ_STR(v.peer, "ipv4:10.0.0.4:4000");
  CHECK_EQ_INT(v.calls, 12);
  CHECK_EQ_INT(v.cancels, 10);
  CHECK_EQ_INT(v.expired, 7);
  srv_rr_destroy(rr);

  // 0: no expiry counts, not even one refused on arrival
  CHECK_EQ_INT(srv_rr_create(10, 0, &rr, &e), 0);
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now - 1, 3000), SRV_RR_ANSWERED);
  CHECK_EQ_INT(srv_rr_classify(rr, 0, 1, now, now - 20, -20), SRV_RR_ANSWERED);
  CHECK_EQ_INT(srv_rr_classify(rr, 1, 0, now, now + 5000, 3000), SRV_RR_CANCEL);
  srv_rr_destroy(rr);
}

// A listening socket on the loopback of `family` and two connections to it;
// the accepted (server-side) ends are srv[0..1], the clients cli[0..1].
typedef struct pair2 {
  int lst, port, cli[2], srv[2];
  int cport[2];
} pair2;

static int open_pair(int family, const char *addr, pair2 *p) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t sl;
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &a->sin_addr);
    sl = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &a->sin6_addr);
    sl = sizeof *a;
  }
  p->lst = socket(family, SOCK_STREAM, 0);
  if (p->lst < 0 || bind(p->lst, (struct sockaddr *)&ss, sl) != 0 || listen(p->lst, 4) != 0) return -1;
  socklen_t ll = sizeof ss;
  getsockname(p->lst, (struct sockaddr *)&ss, &ll);
  p->port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
  for (int i = 0; i < 2; i++) {
    p->cli[i] = socket(family, SOCK_STREAM, 0);
    if (p->cli[i] < 0 || connect(p->cli[i], (struct sockaddr *)&ss, sl) != 0) return -1;
    p->srv[i] = accept(p->lst, NULL, NULL);
    if (p->srv[i] < 0) return -1;
    struct sockaddr_storage cs;
    socklen_t cl = sizeof cs;
    getsockname(p->cli[i], (struct sockaddr *)&cs, &cl);
    p->cport[i] = ntohs(family == AF_INET ? ((struct sockaddr_in *)&cs)->sin_port
                                          : ((struct sockaddr_in6 *)&cs)->sin6_port);
  }
  return 0;
}

static void close_pair(pair2 *p) {
  for (int i = 0; i < 2; i++) {
    close(p->cli[i]);
    close(p->srv[i]);
  }
  close(p->lst);
}

// 1 when the client end reads end-of-file (or a reset) within a second: its server end was shut down.
static int client_sees_end(int fd) {
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  if (poll(&pf, 1, 1000) != 1) return 0;
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

static int client_still_open(int fd) {
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  return poll(&pf, 1, 0) == 0;
}

static void test_end_connection(void) {
  err e = {0};
  char peer[SRV_RR_PEER_MAX];
  pair2 p;
  CHECK_EQ_INT(open_pair(AF_INET, "127.0.0.1", &p), 0);
  snprintf(peer, sizeof peer, "ipv4:127.0.0.1:%d", p.cport[0]);
  CHECK_EQ_INT(srv_rr_end_connection(peer, p.port + 1 == 65536 ? 1 : p.port + 1, &e), 0);  // another local port
  CHECK(client_still_open(p.cli[0]));
  CHECK_EQ_INT(srv_rr_end_connection(peer, p.port, &e), 1);
  CHECK(client_sees_end(p.cli[0]));
  CHECK(client_still_open(p.cli[1]));
  // the client already gone: its server end is not established any more
  close(p.cli[1]);
  p.cli[1] = -1;
  snprintf(peer, sizeof peer, "ipv4:127.0.0.1:%d", p.cport[1]);
  struct pollfd pf = {.fd = p.srv[1], .events = POLLIN};
  CHECK_EQ_INT(poll(&pf, 1, 1000), 1);  // the FIN arrived
  CHECK_EQ_INT(srv_rr_end_connection(peer, p.port, &e), 0);
  // names gRPC does not write for TCP, or no such peer
  CHECK_EQ_INT(srv_rr_end_connection("unix:/tmp/x.sock", p.port, &e), 0);
  CHECK_EQ_INT(srv_rr_end_connection("ipv4:127.0.0.1", p.port, &e), 0);
  CHECK_EQ_INT(srv_rr_end_connection("ipv4:127.0.0.1:99999", p.port, &e), 0);
  CHECK_EQ_INT(srv_rr_end_connection("ipv4:127.0.0.2:1", p.port, &e), 0);
  CHECK_EQ_INT(srv_rr_end_connection("", p.port, &e), 0);
  close_pair(&p);

  // IPv6, written plain and percent-encoded, where the loopback has it
  pair2 q;
  if (open_pair(AF_INET6, "::1", &q) == 0) {
    snprintf(peer, sizeof peer, "ipv6:%%5B%%3A%%3A1%%5D:%d", q.cport[1]);
    CHECK_EQ_INT(srv_rr_end_connection(peer, q.port, &e), 1);
    CHECK(client_sees_end(q.cli[1]));
    CHECK(client_still_open(q.cli[0]));
    snprintf(peer, sizeof peer, "ipv6:[::1]:%d", q.cport[0]);
    CHECK_EQ_INT(srv_rr_end_connection(peer, q.port, &e), 1);
    CHECK(client_sees_end(q.cli[0]));
    close_pair(&q);
    // a dual-stack listener's IPv4 client: the kernel says ::ffff:127.0.0.1, gRPC says ipv4:127.0.0.1
    pair2 m;
    if (open_pair(AF_INET6, "::", &m) == 0) {
      close(m.cli[0]);
      close(m.srv[0]);
      close(m.cli[1]);
      close(m.srv[1]);
      struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)m.port)};
      inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
      int c = socket(AF_INET, SOCK_STREAM, 0);
      CHECK_EQ_INT(connect(c, (struct sockaddr *)&a, sizeof a), 0);
      int s = accept(m.lst, NULL, NULL);
      struct sockaddr_in ca;
      socklen_t cl = sizeof ca;
      getsockname(c, (struct sockaddr *)&ca, &cl);
      snprintf(peer, sizeof peer, "ipv4:127.0.0.1:%d", ntohs(ca.sin_port));
      CHECK_EQ_INT(srv_rr_end_connection(peer, m.port, &e), 1);
      CHECK(client_sees_end(c));
      close(c);
      close(s);
      close(m.lst);
    }
  } else {
    fprintf(stderr, "no IPv6 loopback here: the IPv6 cases are skipped\n");
  }
}

// A connection of inferd's own listener, named "fd:<n>:<inode>": ended by its
// descriptor only while that descriptor is still the same socket.
static void test_end_fd_connection(void) {
  pair2 p;
  CHECK_EQ_INT(open_pair(AF_INET, "127.0.0.1", &p), 0);
  struct stat st;
  CHECK_EQ_INT(fstat(p.srv[0], &st), 0);
  char peer[SRV_RR_PEER_MAX], name[SRV_RR_PEER_MAX], want[SRV_RR_PEER_MAX];
  // another inode under that number (the descriptor reused for another socket): not touched
  snprintf(peer, sizeof peer, "fd:%d:%lu", p.srv[0], (unsigned long)st.st_ino + 1);
  CHECK_EQ_INT(srv_rr_end_fd_connection(peer, name, sizeof name), 0);
  CHECK(client_still_open(p.cli[0]));
  snprintf(peer, sizeof peer, "fd:%d:%lu", p.srv[0], (unsigned long)st.st_ino);
  CHECK_EQ_INT(srv_rr_end_fd_connection(peer, name, sizeof name), 1);
  snprintf(want, sizeof want, "ipv4:127.0.0.1:%d", p.cport[0]);
  CHECK_EQ_STR(name, want);
  CHECK(client_sees_end(p.cli[0]));
  CHECK(client_still_open(p.cli[1]));
  // malformed, closed or not a socket
  CHECK_EQ_INT(srv_rr_end_fd_connection("fd:3", name, sizeof name), 0);
  CHECK_EQ_STR(name, "fd:3");
  CHECK_EQ_INT(srv_rr_end_fd_connection("fd:x:1", name, sizeof name), 0);
  CHECK_EQ_INT(srv_rr_end_fd_connection("fd:999999:1", name, sizeof name), 0);
  CHECK_EQ_INT(srv_rr_end_fd_connection("ipv4:127.0.0.1:1", name, sizeof name), 0);
  CHECK_EQ_INT(fstat(0, &st), 0);
  snprintf(peer, sizeof peer, "fd:0:%lu", (unsigned long)st.st_ino);
  CHECK_EQ_INT(srv_rr_end_fd_connection(peer, name, sizeof name), 0);
  close_pair(&p);
}

int main(void) {
  test_counts();
  test_short_deadlines();
  test_end_connection();
  test_end_fd_connection();
  CHECK_DONE();
}
