// server/grpc/rapid_reset.c: see rapid_reset.h.
#include "server/grpc/rapid_reset.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define STRIPES 16
#define SLOTS 64  // per stripe: 1,024 connections counted at once
#define PROBE 8   // slots looked at for one key
#define WINDOW_US 1000000

// A client cancel closer than this to the call's deadline is taken for the
// deadline's own expiry (the client's cancel and the core's timer race).
#define DEADLINE_SLACK_US 1000

typedef struct conn_count {
  uint64_t key;  // 0: free
  int64_t window_us;  // start of the second being counted
  unsigned calls, cancels, expired;  // expired: of cancels, short deadlines
  int ended;
  char peer[SRV_RR_PEER_MAX];
} conn_count;

typedef struct stripe {
  pthread_mutex_t mu;
  conn_count slot[SLOTS];
} stripe;

struct srv_rr {
  unsigned limit;
  int64_t min_deadline_us;  // 0: no expiry counts
  stripe stripes[STRIPES];
};

int srv_rr_create(int limit, int min_deadline_ms, srv_rr **out, err *e) {
  *out = NULL;
  if (limit < 1) return err_set(e, ERR_INVALID_ARGUMENT, "rapid-reset limit must be >= 1, got %d", limit);
  if (min_deadline_ms < 0 || min_deadline_ms > 60000)
    return err_set(e, ERR_INVALID_ARGUMENT, "rapid-reset minimum deadline must be 0 to 60000 ms, got %d",
                   min_deadline_ms);
  srv_rr *rr = calloc(1, sizeof *rr);
  if (!rr) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for the rapid-reset counts");
  rr->limit = (unsigned)limit;
  rr->min_deadline_us = (int64_t)min_deadline_ms * 1000;
  for (int i = 0; i < STRIPES; i++) pthread_mutex_init(&rr->stripes[i].mu, NULL);
  *out = rr;
  return 0;
}

void srv_rr_destroy(srv_rr *rr) {
  if (!rr) return;
  for (int i = 0; i < STRIPES; i++) pthread_mutex_destroy(&rr->stripes[i].mu);
  free(rr);
}

// FNV-1a; never 0, which marks a free slot.
static uint64_t peer_key(const char *s, size_t *len) {
  uint64_t h = 1469598103934665603ull;
  size_t n = 0;
  for (; s[n]; n++) h = (h ^ (unsigned char)s[n]) * 1099511628211ull;
  *len = n;
  return h ? h : 1;
}

static stripe *stripe_of(srv_rr *rr, uint64_t key) { return &rr->stripes[(key >> 58) % STRIPES]; }

// The slot counting key, or NULL.
static conn_count *find(stripe *s, uint64_t key) {
  for (unsigned i = 0; i < PROBE; i++) {
    conn_count *c = &s->slot[(key + i) % SLOTS];
    if (c->key == key) return c;
  }
  return NULL;
}

uint64_t srv_rr_call(srv_rr *rr, const char *peer, int64_t now_us, int64_t *window) {
  size_t len;
  uint64_t key = peer_key(peer, &len);
  if (len >= SRV_RR_PEER_MAX) return 0;
  stripe *s = stripe_of(rr, key);
  pthread_mutex_lock(&s->mu);
  conn_count *c = find(s, key);
  if (!c) {  // a free slot, or one whose connection was quiet for a whole second (gone, or not abusive)
    for (unsigned i = 0; i < PROBE && !c; i++) {
      conn_count *x = &s->slot[(key + i) % SLOTS];
      if (x->key == 0 || now_us - x->window_us >= 2 * WINDOW_US) c = x;
    }
    if (c) {
      memset(c, 0, sizeof *c);
      c->key = key;
      c->window_us = now_us;
      memcpy(c->peer, peer, len + 1);
    }
  }
  if (c) {
    if (now_us - c->window_us >= WINDOW_US) {
      c->window_us = now_us;
      c->calls = c->cancels = c->expired = 0;
    }
    c->calls++;
    *window = c->window_us;
  }
  pthread_mutex_unlock(&s->mu);
  return c ? key : 0;
}

srv_rr_kind srv_rr_classify(const srv_rr *rr, int cancelled, int answered_expired, int64_t now_us,
                            int64_t deadline_us, int64_t left_us) {
  if (deadline_us == INT64_MAX) return cancelled ? SRV_RR_CANCEL : SRV_RR_ANSWERED;
  int expired = answered_expired || (cancelled && now_us >= deadline_us - DEADLINE_SLACK_US);
  if (!expired) return cancelled ? SRV_RR_CANCEL : SRV_RR_ANSWERED;
  return rr->min_deadline_us > 0 && left_us < rr->min_deadline_us ? SRV_RR_EXPIRED : SRV_RR_ANSWERED;
}

int srv_rr_cancelled(srv_rr *rr, uint64_t key, int64_t window, srv_rr_kind kind, srv_rr_verdict *v) {
  if (!key || kind == SRV_RR_ANSWERED) return 0;
  stripe *s = stripe_of(rr, key);
  int over = 0;
  pthread_mutex_lock(&s->mu);
  conn_count *c = find(s, key);
  if (c && !c->ended && c->window_us == window) {
    c->cancels++;
    if (kind == SRV_RR_EXPIRED) c->expired++;
    if (c->cancels >= rr->limit && 2 * (uint64_t)c->cancels >= c->calls) {
      c->ended = 1;
      over = 1;
      memcpy(v->peer, c->peer, sizeof v->peer);
      v->calls = c->calls;
      v->cancels = c->cancels;
      v->expired = c->expired;
    }
  }
  pthread_mutex_unlock(&s->mu);
  return over;
}

// ---------------------------------------------------------------- ending a connection

typedef struct tcp_addr {
  int v4;            // 1: addr[0..3] is an IPv4 address (v4-mapped IPv6 ones too)
  uint8_t addr[16];
  int port;
} tcp_addr;

// An IPv6 address's 16 bytes into a: a v4-mapped one (a dual-stack listener's
// IPv4 client) as the IPv4 address, which is how gRPC names it.
static void set_ipv6(tcp_addr *a, const uint8_t bytes[16]) {
  struct in6_addr in6;
  memcpy(&in6, bytes, sizeof in6);
  a->v4 = IN6_IS_ADDR_V4MAPPED(&in6);
  memcpy(a->addr, a->v4 ? bytes + 12 : bytes, a->v4 ? 4 : 16);
}

// gRPC's peer string: "ipv4:127.0.0.1:41234" or "ipv6:[::1]:41234", newer
// releases percent-encoding the brackets and colons ("ipv6:%5B%3A%3A1%5D:41234").
static int parse_peer(const char *peer, tcp_addr *a) {
  char buf[SRV_RR_PEER_MAX];
  size_t n = 0;
  for (const char *p = peer; *p && n + 1 < sizeof buf; p++) {
    unsigned x;
    if (p[0] == '%' && p[1] && p[2] && sscanf(p + 1, "%2x", &x) == 1) {
      buf[n++] = (char)x;
      p += 2;
    } else {
      buf[n++] = *p;
    }
  }
  buf[n] = 0;
  memset(a, 0, sizeof *a);
  char *colon = strrchr(buf, ':');
  if (!colon) return -1;
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port <= 0 || port > 65535) return -1;
  a->port = (int)port;
  *colon = 0;
  if (!strncmp(buf, "ipv4:", 5)) {
    a->v4 = 1;
    return inet_pton(AF_INET, buf + 5, a->addr) == 1 ? 0 : -1;
  }
  if (strncmp(buf, "ipv6:[", 6) || colon[-1] != ']') return -1;
  colon[-1] = 0;
  char *scope = strchr(buf + 6, '%');
  if (scope) *scope = 0;
  struct in6_addr in6;
  if (inet_pton(AF_INET6, buf + 6, &in6) != 1) return -1;
  set_ipv6(a, in6.s6_addr);
  return 0;
}

static int sockaddr_to_tcp(const struct sockaddr_storage *ss, tcp_addr *a) {
  memset(a, 0, sizeof *a);
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
    a->v4 = 1;
    memcpy(a->addr, &s4->sin_addr, 4);
    a->port = ntohs(s4->sin_port);
    return 0;
  }
  if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
    set_ipv6(a, s6->sin6_addr.s6_addr);
    a->port = ntohs(s6->sin6_port);
    return 0;
  }
  return -1;
}

static int same_addr(const tcp_addr *x, const tcp_addr *y) {
  return x->v4 == y->v4 && x->port == y->port && !memcmp(x->addr, y->addr, x->v4 ? 4 : 16);
}

// One address of /proc/self/net/tcp{,6}: "0100007F:1F91", each 32-bit word
// of the address in hex as the kernel holds it (network order bytes read as
// a host integer), the port in host order.
static int parse_proc_addr(const char *s, size_t words, tcp_addr *a) {
  uint8_t raw[16];
  for (size_t w = 0; w < words; w++) {
    char hex[9];
    memcpy(hex, s + 8 * w, 8);
    hex[8] = 0;
    char *end;
    uint32_t v = (uint32_t)strtoul(hex, &end, 16);
    if (*end) return -1;
    memcpy(raw + 4 * w, &v, 4);
  }
  if (s[8 * words] != ':') return -1;
  char *end;
  long port = strtol(s + 8 * words + 1, &end, 16);
  if (end == s + 8 * words + 1) return -1;
  memset(a, 0, sizeof *a);
  a->port = (int)port;
  if (words == 4) {
    set_ipv6(a, raw);
  } else {
    a->v4 = 1;
    memcpy(a->addr, raw, 4);
  }
  return 0;
}

// The inode of the established socket from `want` to local port `port`, from
// the kernel's table (file: /proc/self/net/tcp or tcp6); 0 when none.
static unsigned long find_inode(const char *file, size_t words, const tcp_addr *want, int port) {
  FILE *f = fopen(file, "r");
  if (!f) return 0;
  char line[512];
  unsigned long inode = 0;
  if (!fgets(line, sizeof line, f)) line[0] = 0;  // the header
  while (!inode && fgets(line, sizeof line, f)) {
    char local[64], remote[64];
    unsigned st;
    unsigned long ino;
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %*s %*s %lu", local, remote, &st, &ino) != 4) continue;
    tcp_addr l, r;
    if (st != 1 /* TCP_ESTABLISHED: one the client already closed is on its way out, its cancels the
                   transport's, not the client's */
        || parse_proc_addr(local, words, &l) != 0 || l.port != port || parse_proc_addr(remote, words, &r) != 0 ||
        !same_addr(&r, want))
      continue;
    inode = ino;
  }
  fclose(f);
  return inode;
}

int srv_rr_end_fd_connection(const char *peer, char *name, size_t name_len) {
  snprintf(name, name_len, "%s", peer);
  int fd;
  unsigned long ino;
  int used = 0;
  if (sscanf(peer, "fd:%d:%lu%n", &fd, &ino, &used) != 2 || peer[used] || fd < 0 || !ino) return 0;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || (unsigned long)st.st_ino != ino) return 0;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  tcp_addr r;
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && sockaddr_to_tcp(&ss, &r) == 0) {
    char ip[INET6_ADDRSTRLEN];
    if (r.v4 && inet_ntop(AF_INET, r.addr, ip, sizeof ip))
      snprintf(name, name_len, "ipv4:%s:%d", ip, r.port);
    else if (!r.v4 && inet_ntop(AF_INET6, ((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr, ip, sizeof ip))
      snprintf(name, name_len, "ipv6:[%s]:%d", ip, r.port);
  }
  return shutdown(fd, SHUT_RDWR) == 0;
}

int srv_rr_end_connection(const char *peer, int port, err *e) {
  tcp_addr want;
  if (parse_peer(peer, &want) != 0) return 0;
  // The socket is found by the kernel's tables and the descriptors' links,
  // without touching any descriptor but the one ended: the others belong to
  // other threads (gRPC's, the HTTP loop's), which may be closing them.
  unsigned long inode = find_inode("/proc/self/net/tcp", 1, &want, port);
  if (!inode) inode = find_inode("/proc/self/net/tcp6", 4, &want, port);
  if (!inode) return 0;
  char target[64];
  snprintf(target, sizeof target, "socket:[%lu]", inode);
  DIR *d = opendir("/proc/self/fd");
  if (!d) {
    err_set(e, ERR_INTERNAL, "cannot list /proc/self/fd: %s", strerror(errno));
    return -1;
  }
  int ended = 0;
  for (struct dirent *de; (de = readdir(d));) {
    char *end;
    long fd = strtol(de->d_name, &end, 10);
    if (*end || end == de->d_name || fd == dirfd(d)) continue;
    char path[64], link[64];
    snprintf(path, sizeof path, "/proc/self/fd/%ld", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = 0;
    if (strcmp(link, target) != 0) continue;
    // Still that connection: the descriptor may have been closed and reused since the tables were read.
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    tcp_addr remote;
    if (getpeername((int)fd, (struct sockaddr *)&ss, &sl) == 0 && sockaddr_to_tcp(&ss, &remote) == 0 &&
        same_addr(&remote, &want))
      ended = shutdown((int)fd, SHUT_RDWR) == 0;
    break;
  }
  closedir(d);
  return ended;
}
