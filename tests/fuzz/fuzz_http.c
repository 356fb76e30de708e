// fuzz_http.c: libFuzzer driver for the bytes of an HTTP connection: the
// endpoint's transport (server/http/http_*.c: http-parser callbacks, header and
// body limits, URL splitting, keep-alive, pipelining, half-close) and its
// routes (server/http/endpoints.c: health, /metrics, /dashboard.json against the
// registry of tests/fuzz/repo). Each input is one client connection over
// loopback: connect, send the bytes, half-close, read until the server
// closes (or a bound passes), then close; the loop runs on this thread as in
// the server. Not covered here: /v2/repository/models/*/load|unload (model
// control needs its own thread; those paths get 404 from the driver) and the
// REST API (no srv_rest here): fuzz_rest drives both, on a whole server.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/repo/config.h"
#include "fixture.h"
#include "server/http/http.h"
#include "server/core/server.h"

#define MAX_SPINS 4000  // ~1 ms each: a connection the server never ends fails the input as a hang

static srv_server g_server;  // the driver's fixture: set once at start
static uv_loop_t g_loop;
static srv_http *g_http;
static int g_verbose;  // FUZZ_VERBOSE=1: print the status line of the first answer (checking seeds)

static void routes(void *ctx, const srv_http_request *req, srv_http_response *resp) {
  if (strncmp(req->path, "/v2/repository/", 15) == 0) {
    resp->status = 404;
    return;
  }
  srv_http_routes(ctx, req, resp);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_verbose = getenv("FUZZ_VERBOSE") != NULL;
  err e = {0};
  srv_registry_opts ro = fz_registry_opts();
  if (srv_registry_load(INFERD_FUZZ_REPO, &ro, &g_server.reg, &e) != 0 ||
      uv_loop_init(&g_loop) != 0 || srv_http_create(&g_loop, "127.0.0.1", 0, routes, &g_server, &g_http, &e) != 0) {
    fprintf(stderr, "fuzz_http: setup: %s\n", e.msg);
    abort();
  }
  g_server.strict_readiness = 1;
  g_server.allow_metrics = 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv_http_port(g_http))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return 0;
  }
  fcntl(fd, F_SETFL, O_NONBLOCK);
  size_t off = 0;
  int eof = 0;
  char buf[65536];
  int said = 0;
  for (int spin = 0; !eof; spin++) {
    if (spin > MAX_SPINS) {
      fprintf(stderr, "fuzz_http: the server neither answered nor closed a half-closed connection\n");
      abort();
    }
    if (off < size) {
      ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
      if (n > 0)
        off += (size_t)n;
      else if (n < 0 && errno != EAGAIN)
        off = size;  // the server closed first (e.g. 431): fine
      if (off == size) shutdown(fd, SHUT_WR);
    } else if (size == 0 && spin == 0) {
      shutdown(fd, SHUT_WR);
    }
    uv_run(&g_loop, UV_RUN_NOWAIT);
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0)
      if (g_verbose && !said++) {
        const char *cr = memchr(buf, '\r', (size_t)n);
        fprintf(stderr, "fuzz_http: %.*s\n", (int)(cr ? cr - buf : n), buf);
      }
    if (n == 0 || (n < 0 && errno != EAGAIN))
      eof = 1;
    else
      poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 1);
  }
  close(fd);
  // let the server side finish closing, so connections do not pile up across inputs
  for (int spin = 0; srv_http_connections(g_http) > 0 && spin < MAX_SPINS; spin++) uv_run(&g_loop, UV_RUN_NOWAIT);
  return 0;
}
