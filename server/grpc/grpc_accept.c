// server/grpc/grpc_accept.c: see grpc_accept.h.
#include "server/grpc/grpc_accept.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTENERS 4
#define BACKLOG 4096             // the kernel trims it to net.core.somaxconn
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 1000
#define RECHECK_EVERY_US 50000   // fstat sweeps of the table, at most this often (only at the cap)
#define LOG_EVERY_US 10000000LL  // one line per incident class this often, counting the rest
#define DRAIN_MAX 1024           // connections refused in one go while descriptors are short
#define TABLE_MAX (1u << 22)     // descriptors tracked at most (the table is indexed by descriptor)
#define DEFAULT_CAP 10000
#define DEFAULT_RESERVE 256

#define LOG(...)                                  \
  do {                                            \
    fprintf(stderr, "inferd grpc: " __VA_ARGS__); \
    fputc('\n', stderr);                          \
  } while (0)

struct srv_gacc {
  int lfd[MAX_LISTENERS];
  int n_lfd;
  int port;
  int stop_fd;   // eventfd: written once to stop the thread
  int spare_fd;  // /dev/null, given up to refuse connections while descriptors are short
  int max_conns;
  // Socket inode of each descriptor handed over, indexed by descriptor; 0: none. Written by the acceptor
  // thread only; read by any (srv_gacc_inode).
  atomic_ulong *ino;
  size_t n_ino;
  int count;  // nonzero entries
  int hi;     // entries at or above hi are 0
  int64_t checked_us;
  int64_t cap_log_us, short_log_us;  // when the last line of each class was written
  unsigned long cap_refused, short_refused;  // since that line
  srv_gacc_hand_fn hand;
  void *arg;
  pthread_t th;
  int started;
};

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int srv_gacc_default_max_conns(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return DEFAULT_CAP;
  long n = (long)r.rlim_cur;
  long reserve = n < 4 * DEFAULT_RESERVE ? n / 4 : DEFAULT_RESERVE;
  long per = (n - reserve) / 2;
  return per < 1 ? 1 : per > DEFAULT_CAP ? DEFAULT_CAP : (int)per;
}

// ---------------------------------------------------------------- listening

static int is_wildcard(const char *host) {
  return !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*");
}

// A socket bound to sa and listening, or -1 with errno.
static int listen_on(const struct sockaddr *sa, socklen_t len, int dual) {
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1, zero = 0;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (sa->sa_family == AF_INET6) (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? &zero : &one, sizeof one);
  if (bind(fd, sa, len) != 0 || listen(fd, BACKLOG) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

static int bound_port(int fd) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) return -1;
  return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                  : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void set_port(struct sockaddr *sa, int port) {
  if (sa->sa_family == AF_INET6) ((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
  else ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
}

// Binds every address `addr` names, as gRPC's listener does: a wildcard on
// one dual-stack IPv6 socket (IPv4 alone where IPv6 is missing), a name on
// each address it resolves to, all on the port the first one got.
static int bind_all(srv_gacc *a, const char *addr, err *e) {
  char host[256];
  const char *colon = strrchr(addr, ':');
  char *end;
  long port = colon ? strtol(colon + 1, &end, 10) : -1;
  size_t hl = colon ? (size_t)(colon - addr) : 0;
  if (!colon || end == colon + 1 || *end || port < 0 || port > 65535 || hl >= sizeof host)
    return err_set(e, ERR_UNAVAILABLE, "gRPC front end: cannot listen on '%s' (address in use or invalid)", addr);
  memcpy(host, addr, hl);
  host[hl] = 0;
  if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = 0;
  }
  int saved = 0;
  if (is_wildcard(host)) {
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT, .sin6_port = htons((uint16_t)port)};
    int fd = listen_on((struct sockaddr *)&s6, sizeof s6, 1);
    if (fd < 0 && errno != EADDRINUSE && errno != EACCES) {  // no IPv6 here: IPv4 alone
      struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY), .sin_port = htons((uint16_t)port)};
      fd = listen_on((struct sockaddr *)&s4, sizeof s4, 0);
    }
    saved = errno;
    if (fd >= 0) a->lfd[a->n_lfd++] = fd;
  } else {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%ld", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0)
      return err_set(e, ERR_UNAVAILABLE, "gRPC front end: cannot listen on '%s' (%s)", addr, gai_strerror(rc));
    int got = (int)port;
    for (struct addrinfo *ai = res; ai && a->n_lfd < MAX_LISTENERS; ai = ai->ai_next) {
      if (got) set_port(ai->ai_addr, got);
      int fd = listen_on(ai->ai_addr, ai->ai_addrlen, 0);
      if (fd < 0) {
        saved = errno;
        continue;
      }
      a->lfd[a->n_lfd++] = fd;
      if (!got) got = bound_port(fd);
    }
    freeaddrinfo(res);
  }
  if (a->n_lfd == 0)
    return err_set(e, ERR_UNAVAILABLE, "gRPC front end: cannot listen on '%s' (address in use or invalid: %s)", addr,
                   strerror(saved));
  a->port = bound_port(a->lfd[0]);
  return 0;
}

int srv_gacc_create(const char *addr, int max_conns, srv_gacc **out, err *e) {
  *out = NULL;
  if (max_conns < 1) return err_set(e, ERR_INVALID_ARGUMENT, "gRPC connection cap must be >= 1, got %d", max_conns);
  srv_gacc *a = calloc(1, sizeof *a);
  if (!a) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: out of memory");
  a->stop_fd = a->spare_fd = -1;
  a->max_conns = max_conns;
  struct rlimit r;
  rlim_t n = getrlimit(RLIMIT_NOFILE, &r) == 0 ? r.rlim_cur : 1024;
  a->n_ino = n == RLIM_INFINITY || n > TABLE_MAX ? TABLE_MAX : (size_t)n;
  a->ino = calloc(a->n_ino, sizeof *a->ino);  // untouched pages cost no memory
  if (!a->ino) {
    free(a);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: out of memory for the connection table");
  }
  if (bind_all(a, addr, e) != 0) {
    srv_gacc_destroy(a);
    return e ? (int)e->code : ERR_UNAVAILABLE;
  }
  a->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (a->stop_fd < 0 || a->spare_fd < 0) {
    err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: cannot open the acceptor's descriptors: %s", strerror(errno));
    srv_gacc_destroy(a);
    return ERR_RESOURCE_EXHAUSTED;
  }
  *out = a;
  return 0;
}

int srv_gacc_port(const srv_gacc *a) { return a->port; }

unsigned long srv_gacc_inode(const srv_gacc *a, int fd) {
  if (!a || fd < 0 || (size_t)fd >= a->n_ino) return 0;
  return atomic_load_explicit(&a->ino[fd], memory_order_relaxed);
}

// ---------------------------------------------------------------- the acceptor thread

// Closes with a reset, so the client learns at once that it was refused.
static void refuse(int fd) {
  struct linger l = {.l_onoff = 1, .l_linger = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

// Forgets the descriptors the core has closed since they were handed over:
// closed (EBADF), or reused for something else (another inode).
static void recheck(srv_gacc *a) {
  int hi = 0;
  for (int fd = 0; fd < a->hi; fd++) {
    unsigned long ino = atomic_load_explicit(&a->ino[fd], memory_order_relaxed);
    if (!ino) continue;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || (unsigned long)st.st_ino != ino) {
      atomic_store_explicit(&a->ino[fd], 0, memory_order_relaxed);
      a->count--;
    } else {
      hi = fd + 1;
    }
  }
  a->hi = hi;
  a->checked_us = now_us();
}

static void take(srv_gacc *a, int fd) {
  struct stat st;
  if ((size_t)fd >= a->n_ino || fstat(fd, &st) != 0) {  // past the limit read at start: not trackable
    refuse(fd);
    return;
  }
  // fd's number was free when accepted, so a connection counted under it is gone
  int fresh = atomic_load_explicit(&a->ino[fd], memory_order_relaxed) == 0;
  if (fresh && a->count >= a->max_conns && now_us() - a->checked_us >= RECHECK_EVERY_US) recheck(a);
  if (fresh && a->count >= a->max_conns) {
    refuse(fd);
    a->cap_refused++;
    int64_t now = now_us();
    if (!a->cap_log_us || now - a->cap_log_us >= LOG_EVERY_US) {
      LOG("%d connections open, the --grpc-max-connections cap: refusing new ones (%lu refused since the last "
          "line; one line per %lld s)", a->count, a->cap_refused, LOG_EVERY_US / 1000000);
      a->cap_log_us = now;
      a->cap_refused = 0;
    }
    return;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  atomic_store_explicit(&a->ino[fd], (unsigned long)st.st_ino, memory_order_relaxed);
  if (fresh) a->count++;
  if (fd >= a->hi) a->hi = fd + 1;
  a->hand(a->arg, fd);
}

// Descriptors are short: the connections waiting on lfd are accepted on the
// spare descriptor and reset one by one, so their clients fail now instead of
// waiting in the backlog; then the spare is taken again.
static void refuse_pending(srv_gacc *a, int lfd, int why) {
  unsigned long n = 0;
  if (a->spare_fd >= 0) {
    close(a->spare_fd);
    a->spare_fd = -1;
    for (int fd; n < DRAIN_MAX && (fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0; n++) refuse(fd);
  }
  if (a->spare_fd < 0) a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);  // another thread may hold it: later
  a->short_refused += n;
  int64_t now = now_us();
  if (!a->short_log_us || now - a->short_log_us >= LOG_EVERY_US) {
    LOG("accepting a connection failed: %s; %lu waiting connection(s) refused since the last line; accepting "
        "again after a back-off of up to %d ms (one line per %lld s)", strerror(why), a->short_refused,
        BACKOFF_MAX_MS, LOG_EVERY_US / 1000000);
    a->short_log_us = now;
    a->short_refused = 0;
  }
}

static void *acceptor_main(void *arg) {
  srv_gacc *a = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-accept");
  struct pollfd pf[MAX_LISTENERS + 1];
  for (int i = 0; i < a->n_lfd; i++) pf[i] = (struct pollfd){.fd = a->lfd[i], .events = POLLIN};
  pf[a->n_lfd] = (struct pollfd){.fd = a->stop_fd, .events = POLLIN};
  int backoff_ms = 0;
  for (;;) {
    if (backoff_ms) {  // wait out the back-off, listening only for the stop
      if (poll(&pf[a->n_lfd], 1, backoff_ms) > 0) break;
    }
    int rc = poll(pf, (nfds_t)a->n_lfd + 1, -1);
    if (rc < 0 && errno != EINTR) {
      LOG("acceptor: poll failed: %s; retrying", strerror(errno));
      backoff_ms = BACKOFF_MAX_MS;
      continue;
    }
    if (rc <= 0) continue;
    if (pf[a->n_lfd].revents) break;
    for (int i = 0; i < a->n_lfd; i++) {
      if (!pf[i].revents) continue;
      for (int k = 0; k < 64; k++) {  // a burst, then the other listeners' turn
        int fd = accept4(a->lfd[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          backoff_ms = 0;
          take(a, fd);
          continue;
        }
        int why = errno;
        if (why == EAGAIN || why == EWOULDBLOCK) break;
        if (why == EINTR || why == ECONNABORTED || why == EPROTO || why == EPERM) continue;  // that client's
        // out of descriptors or memory (or anything else): refuse what waits, back off, and try again; never give up
        refuse_pending(a, a->lfd[i], why);
        backoff_ms = backoff_ms ? (backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2) : BACKOFF_FIRST_MS;
        break;
      }
    }
  }
  return NULL;
}

int srv_gacc_start(srv_gacc *a, srv_gacc_hand_fn hand, void *arg, err *e) {
  if (a->started || a->n_lfd == 0) return err_set(e, ERR_FAILED_PRECONDITION, "gRPC acceptor: already started or stopped");
  a->hand = hand;
  a->arg = arg;
  int rc = pthread_create(&a->th, NULL, acceptor_main, a);
  if (rc != 0) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: cannot start the acceptor: %s", strerror(rc));
  a->started = 1;
  return 0;
}

void srv_gacc_stop(srv_gacc *a) {
  if (!a) return;
  if (a->started) {
    uint64_t one = 1;
    while (write(a->stop_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
    pthread_join(a->th, NULL);
    a->started = 0;
  }
  for (int i = 0; i < a->n_lfd; i++) close(a->lfd[i]);
  a->n_lfd = 0;
}

void srv_gacc_destroy(srv_gacc *a) {
  if (!a) return;
  srv_gacc_stop(a);
  if (a->stop_fd >= 0) close(a->stop_fd);
  if (a->spare_fd >= 0) close(a->spare_fd);
  free(a->ino);
  free(a);
}
