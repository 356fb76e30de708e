// gen_http.c: blocking HTTP/1.1 POSTs over one keep-alive connection (gen_http.h).
#include "clients/load/gen_http.h"

#include <errno.h>
#include <http_parser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kernels/base/clock.h"

struct ld_http {
  char host[256], port[16];
  int fd;  // -1: not connected
};

ld_http *ld_http_create(const char *target) {
  if (strncmp(target, "http://", 7) == 0) target += 7;
  const char *colon = strrchr(target, ':');
  if (!colon || colon == target || !colon[1] || (size_t)(colon - target) >= 256 || strlen(colon + 1) >= 16)
    return NULL;
  ld_http *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  memcpy(c->host, target, (size_t)(colon - target));
  snprintf(c->port, sizeof c->port, "%s", colon + 1);
  size_t pl = strlen(c->port);
  if (pl && c->port[pl - 1] == '/') c->port[pl - 1] = '\0';
  c->fd = -1;
  return c;
}

static void disconnect(ld_http *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

void ld_http_destroy(ld_http *c) {
  if (!c) return;
  disconnect(c);
  free(c);
}

static int connect_to(ld_http *c, char *errbuf, size_t cap) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int g = getaddrinfo(c->host, c->port, &hints, &res);
  if (g != 0) {
    snprintf(errbuf, cap, "cannot resolve %s:%s: %s", c->host, c->port, gai_strerror(g));
    return -1;
  }
  int err = 0;
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      int one = 1;  // the request goes in one write; Nagle would only delay it
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      c->fd = fd;
      freeaddrinfo(res);
      return 0;
    }
    err = errno;
    close(fd);
  }
  freeaddrinfo(res);
  snprintf(errbuf, cap, "cannot connect to %s:%s: %s", c->host, c->port, strerror(err));
  return -1;
}

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

typedef struct resp {
  int *status;
  ld_http_on_body cb;
  void *ctx;
  int cb_rc;
  bool done, keep_alive;
} resp;

static int on_headers(http_parser *p) {
  resp *r = p->data;
  *r->status = (int)p->status_code;
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  resp *r = p->data;
  r->cb_rc = r->cb ? r->cb(r->ctx, at, len) : 0;
  return r->cb_rc ? -1 : 0;
}

static int on_complete(http_parser *p) {
  resp *r = p->data;
  r->done = true;
  r->keep_alive = http_should_keep_alive(p) != 0;
  http_parser_pause(p, 1);  // nothing after this message belongs to this request
  return 0;
}

// 0 read a whole response; 1 the connection was closed before any byte (a stale keep-alive); else as ld_http_post.
static int exchange(ld_http *c, const char *req, size_t req_len, const char *body, size_t len, uint64_t deadline_ns,
                    resp *r, char *errbuf, size_t cap) {
  if (send_all(c->fd, req, req_len) != 0 || send_all(c->fd, body, len) != 0) return 1;
  http_parser p;
  http_parser_init(&p, HTTP_RESPONSE);
  p.data = r;
  http_parser_settings s;
  http_parser_settings_init(&s);
  s.on_headers_complete = on_headers;
  s.on_body = on_body;
  s.on_message_complete = on_complete;
  char buf[16384];
  size_t got = 0;
  while (!r->done) {
    int wait_ms = -1;
    if (deadline_ns) {
      uint64_t now = clock_mono_ns();
      if (now >= deadline_ns) {
        snprintf(errbuf, cap, "timed out waiting for the response");
        return -1;
      }
      wait_ms = (int)((deadline_ns - now + 999999) / 1000000);
    }
    struct pollfd pf = {.fd = c->fd, .events = POLLIN};
    int pr = poll(&pf, 1, wait_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;  // the deadline check above ends it
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && got == 0 && (errno == ECONNRESET || errno == EPIPE)) return 1;
    if (n < 0) {
      snprintf(errbuf, cap, "reading the response: %s", strerror(errno));
      return -1;
    }
    if (n == 0 && got == 0) return 1;
    got += (size_t)n;
    size_t used = http_parser_execute(&p, &s, buf, (size_t)n);  // n == 0 tells it the connection ended
    if (r->cb_rc) return r->cb_rc;
    enum http_errno he = HTTP_PARSER_ERRNO(&p);
    if (he != HPE_OK && he != HPE_PAUSED) {
      snprintf(errbuf, cap, "bad HTTP response: %s", http_errno_description(he));
      return -1;
    }
    if (n == 0 && !r->done) {
      snprintf(errbuf, cap, "the server closed the connection mid-response");
      return -1;
    }
    (void)used;
  }
  return 0;
}

int ld_http_post(ld_http *c, const char *path, const char *body, size_t len, int timeout_ms, int *status,
                 ld_http_on_body cb, void *ctx, char *errbuf, size_t cap) {
  *status = 0;
  char req[1024];
  int rl = snprintf(req, sizeof req,
                    "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                    "Accept: application/json, text/event-stream\r\nContent-Length: %zu\r\n\r\n",
                    path, c->host, c->port, len);
  if (rl < 0 || (size_t)rl >= sizeof req) {
    snprintf(errbuf, cap, "path too long");
    return -1;
  }
  uint64_t deadline = timeout_ms > 0 ? clock_mono_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    bool reused = c->fd >= 0;
    if (!reused && connect_to(c, errbuf, cap) != 0) return -1;
    resp r = {.status = status, .cb = cb, .ctx = ctx};
    int rc = exchange(c, req, (size_t)rl, body, len, deadline, &r, errbuf, cap);
    if (rc == 1) {  // closed before any byte of the response
      disconnect(c);
      if (reused) continue;
      snprintf(errbuf, cap, "the server closed the connection without answering");
      return -1;
    }
    if (rc != 0 || !r.keep_alive) disconnect(c);
    return rc;
  }
  snprintf(errbuf, cap, "the server closed the connection without answering");
  return -1;
}
