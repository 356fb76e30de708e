// server/grpc/grpc_accept.c: see grpc_accept.h.
#include "server/grpc/grpc_accept.h"

#include "server/core/fdlimit.h"

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
#include <sys/epoll.h>
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
#define DEFAULT_CAP SRV_FD_PORT_CAP_MAX  // when the limit cannot be read
#define EPOLL_BATCH 64

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
  int64_t preface_us;  // a new connection's client must speak within this
  // Socket inode of each descriptor handed over, indexed by descriptor; 0: none. Written by the acceptor
  // thread only; read by any (srv_gacc_inode).
  atomic_ulong *ino;
  size_t n_ino;
  int count;  // nonzero entries
  int hi;     // entries at or above hi are 0
  int64_t checked_us;
  int64_t cap_log_us, short_log_us;  // when the last line of each class was written
  unsigned long cap_refused, short_refused;  // since that line
  // Connections accepted whose client has sent nothing yet, oldest first (all wait the same time, so the
  // ring is ordered by deadline), each in the epoll set `ep` under its sequence number; fd -1 once gone.
  int ep;
  struct pend {
    int fd;
    int64_t deadline_us;
  } *ring;
  uint64_t head, tail;  // sequence numbers: entries head..tail-1, at [seq & (ring_cap - 1)]
  size_t ring_cap;      // a power of two
  int n_pending;
  int64_t silent_log_us;
  unsigned long silent_closed;
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
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return DEFAULT_CAP;
  int http_cap = 0, grpc_cap = 0;  // the split both ports take their defaults from
  srv_fd_plan(r.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r.rlim_cur, &http_cap, &grpc_cap);
  return grpc_cap;
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

int srv_gacc_create(const char *addr, int max_conns, int preface_ms, srv_gacc **out, err *e) {
  *out = NULL;
  if (max_conns < 1) return err_set(e, ERR_INVALID_ARGUMENT, "gRPC connection cap must be >= 1, got %d", max_conns);
  if (preface_ms < 1) return err_set(e, ERR_INVALID_ARGUMENT, "gRPC preface wait must be >= 1 ms, got %d", preface_ms);
  srv_gacc *a = calloc(1, sizeof *a);
  if (!a) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: out of memory");
  a->stop_fd = a->spare_fd = a->ep = -1;
  a->max_conns = max_conns;
  a->preface_us = (int64_t)preface_ms * 1000;
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
  a->ep = epoll_create1(EPOLL_CLOEXEC);
  a->ring_cap = 64;
  a->ring = calloc(a->ring_cap, sizeof *a->ring);
  if (a->stop_fd < 0 || a->spare_fd < 0 || a->ep < 0 || !a->ring) {
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
  return atomic_load_explicit(&a->ino[fd], memory_order_acquire);
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

static void log_cap(srv_gacc *a) {
  a->cap_refused++;
  int64_t now = now_us();
  if (!a->cap_log_us || now - a->cap_log_us >= LOG_EVERY_US) {
    LOG("%d connections open, the --grpc-max-connections cap: refusing new ones (%lu refused since the last "
        "line; one line per %lld s)", a->count + a->n_pending, a->cap_refused, LOG_EVERY_US / 1000000);
    a->cap_log_us = now;
    a->cap_refused = 0;
  }
}

// A connection whose client has spoken goes to the core, counted under its
// descriptor and socket inode.
static void hand_over(srv_gacc *a, int fd) {
  struct stat st;
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || fstat(fd, &st) != 0) {
    close(fd);  // it left already (a TCP probe): nothing for the core
    return;
  }
  a->count++;  // take() cleared any entry under fd
  // release: a thread that reads this inode (acquire) sees the socket as this thread made it, which
  // ThreadSanitizer cannot see through gRPC's hand-over (uninstrumented)
  atomic_store_explicit(&a->ino[fd], (unsigned long)st.st_ino, memory_order_release);
  if (fd >= a->hi) a->hi = fd + 1;
  a->hand(a->arg, fd);
}

// Makes room for one more waiting connection, keeping each at its sequence number.
static int ring_grow(srv_gacc *a) {
  if (a->tail - a->head < a->ring_cap) return 0;
  size_t cap = a->ring_cap * 2;
  struct pend *r = calloc(cap, sizeof *r);
  if (!r) return -1;
  for (uint64_t q = a->head; q < a->tail; q++) r[q & (cap - 1)] = a->ring[q & (a->ring_cap - 1)];
  free(a->ring);
  a->ring = r;
  a->ring_cap = cap;
  return 0;
}

static void take(srv_gacc *a, int fd) {
  if ((size_t)fd >= a->n_ino) {  // past the limit read at start: not trackable
    refuse(fd);
    return;
  }
  if (atomic_load_explicit(&a->ino[fd], memory_order_relaxed)) {
    // fd's number was free when accepted, so the connection counted under it is gone
    atomic_store_explicit(&a->ino[fd], 0, memory_order_relaxed);
    a->count--;
  }
  if (a->count + a->n_pending >= a->max_conns && now_us() - a->checked_us >= RECHECK_EVERY_US) recheck(a);
  if (a->count + a->n_pending >= a->max_conns) {
    refuse(fd);
    log_cap(a);
    return;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // An HTTP/2 client speaks first (its preface): usually its bytes are here already. Otherwise the
  // connection waits, off the core, until they come or PREFACE_WAIT_US passes, so connections that
  // never speak cannot hold the port's slots long (gRPC's listener closed them after 120 s).
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n != 0 && !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
    hand_over(a, fd);
    return;
  }
  if (n == 0) {
    close(fd);
    return;
  }
  if (ring_grow(a) != 0) {
    refuse(fd);
    return;
  }
  uint64_t seq = a->tail;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = seq};
  if (epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
    hand_over(a, fd);
    return;
  }
  a->ring[seq & (a->ring_cap - 1)] = (struct pend){.fd = fd, .deadline_us = now_us() + a->preface_us};
  a->tail++;
  a->n_pending++;
}

// Waiting connections whose client spoke (or left).
static void on_spoken(srv_gacc *a) {
  struct epoll_event evs[EPOLL_BATCH];
  int n = epoll_wait(a->ep, evs, EPOLL_BATCH, 0);
  for (int i = 0; i < n; i++) {
    uint64_t seq = evs[i].data.u64;
    if (seq < a->head || seq >= a->tail) continue;
    struct pend *p = &a->ring[seq & (a->ring_cap - 1)];
    if (p->fd < 0) continue;
    int fd = p->fd;
    p->fd = -1;
    a->n_pending--;
    epoll_ctl(a->ep, EPOLL_CTL_DEL, fd, NULL);
    hand_over(a, fd);
  }
}

// Closes the waiting connections past their deadline; returns the ms until
// the next one's (-1: none waits).
static int expire_silent(srv_gacc *a) {
  int64_t now = now_us();
  while (a->head < a->tail) {
    struct pend *p = &a->ring[a->head & (a->ring_cap - 1)];
    if (p->fd >= 0) {
      if (p->deadline_us > now) return (int)((p->deadline_us - now + 999) / 1000);
      epoll_ctl(a->ep, EPOLL_CTL_DEL, p->fd, NULL);
      refuse(p->fd);
      p->fd = -1;
      a->n_pending--;
      a->silent_closed++;
      if (!a->silent_log_us || now - a->silent_log_us >= LOG_EVERY_US) {
        LOG("closed %lu connection(s) whose client sent nothing within %lld ms of connecting (one line per %lld s)",
            a->silent_closed, (long long)(a->preface_us / 1000), LOG_EVERY_US / 1000000);
        a->silent_log_us = now;
        a->silent_closed = 0;
      }
    }
    a->head++;
  }
  return -1;
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
  struct pollfd pf[MAX_LISTENERS + 2];
  for (int i = 0; i < a->n_lfd; i++) pf[i] = (struct pollfd){.fd = a->lfd[i], .events = POLLIN};
  pf[a->n_lfd] = (struct pollfd){.fd = a->stop_fd, .events = POLLIN};
  pf[a->n_lfd + 1] = (struct pollfd){.fd = a->ep, .events = POLLIN};
  int backoff_ms = 0;
  for (;;) {
    if (backoff_ms) {  // wait out the back-off, listening only for the stop and the waiting connections
      int64_t until = now_us() + (int64_t)backoff_ms * 1000;
      int stop = 0;
      for (int64_t left; !stop && (left = until - now_us()) > 0;) {
        int next = expire_silent(a);
        int ms = (int)((left + 999) / 1000);
        if (poll(&pf[a->n_lfd], 2, next >= 0 && next < ms ? next : ms) > 0) {
          if (pf[a->n_lfd].revents) stop = 1;
          else on_spoken(a);
        }
      }
      if (stop) break;
    }
    int rc = poll(pf, (nfds_t)a->n_lfd + 2, expire_silent(a));
    if (rc < 0 && errno != EINTR) {
      LOG("acceptor: poll failed: %s; retrying", strerror(errno));
      backoff_ms = BACKOFF_MAX_MS;
      continue;
    }
    if (rc <= 0) continue;
    if (pf[a->n_lfd].revents) break;
    if (pf[a->n_lfd + 1].revents) on_spoken(a);
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
  for (; a->head < a->tail; a->head++) {  // connections still waiting to speak: never the core's
    struct pend *p = &a->ring[a->head & (a->ring_cap - 1)];
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
  }
  a->n_pending = 0;
  for (int i = 0; i < a->n_lfd; i++) close(a->lfd[i]);
  a->n_lfd = 0;
}

void srv_gacc_destroy(srv_gacc *a) {
  if (!a) return;
  srv_gacc_stop(a);
  if (a->stop_fd >= 0) close(a->stop_fd);
  if (a->spare_fd >= 0) close(a->spare_fd);
  if (a->ep >= 0) close(a->ep);
  free(a->ring);
  free(a->ino);
  free(a);
}
