// fuzz_rest.c: libFuzzer driver for the KServe v2 REST/JSON API
// (server/http/rest.c with its model-control routes, and rest_infer.c) of a
// whole inferd in this process (fixture.h: model "fuzz" of tests/fuzz/repo,
// region "r0", explicit model control). Where fuzz_http mutates the bytes
// of a connection (and so rarely gets past the HTTP parser to a JSON body),
// this driver writes a well-formed HTTP/1.1 request itself and lets the
// input be the route and the body, so the mutations land in the JSON:
// inference bodies (with and without Triton's binary tensor extension,
// Inference-Header-Content-Length), load bodies with config overrides,
// unload bodies, shared-memory register bodies, and any path under /v2.
//
// Input: [route][hl lo][hl hi][body...]; route % 8 picks the request line:
//   0 POST /v2/models/fuzz/infer                  (JSON body)
//   1 POST /v2/models/fuzz/infer                  (Inference-Header-Content-Length: hl)
//   2 POST /v2/models/fuzz/versions/1/infer       (Inference-Header-Content-Length: hl)
//   3 POST /v2/repository/models/fuzz/load
//   4 POST /v2/repository/models/fuzz/unload
//   5 POST /v2/systemsharedmemory/region/r1/register
//   6 GET  /v2/<the body's first line>            (the rest: body)
//   7 POST /v2/<the body's first line>            (the rest: body)
// The answer must be a complete HTTP/1.1 response, not 500 (a bad request
// is the client's fault: 4xx), and a JSON answer must parse and be UTF-8
// (RFC 8259), as must the JSON header of a binary answer (an empty body is
// allowed: Triton's answer to a register or unregister). After each input
// the fixture is put back: model "fuzz" loaded as the repository has it,
// no region but r0, so inputs do not depend on each other.
//
// Shared memory keys stay in a private namespace: a register body's "key"
// is rewritten to /inferd-fzr<pid>-<key> (the driver creates "a", 4096
// bytes, there), so no hostile key opens another process's object.
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"
#include "kernels/base/utf8.h"

#define MAX_ANSWER (8 << 20)

static fz_server g_fix;    // the driver's fixture: set once at start
static char g_prefix[64];  // "/inferd-fzr<pid>-"
static int g_verbose;      // FUZZ_VERBOSE=1: print each request line and answer's status (checking seeds)

static void fail(const char *msg, const char *answer) {
  fprintf(stderr, "fuzz_rest: %s\n%.2000s\n", msg, answer ? answer : "");
  abort();
}

static void unlink_object(void) {
  char key[128];
  snprintf(key, sizeof key, "%sa", g_prefix);
  shm_unlink(key);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_verbose = getenv("FUZZ_VERBOSE") != NULL;
  fz_serve(&g_fix, INFERD_FUZZ_REPO);
  fz_shm_sweep("inferd-fzr");
  snprintf(g_prefix, sizeof g_prefix, "/inferd-fzr%d-", (int)getpid());
  atexit(unlink_object);
  char key[128];
  snprintf(key, sizeof key, "%sa", g_prefix);
  int fd = shm_open(key, O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) fail("shm_open", NULL);
  close(fd);
  return 0;
}

// A register body whose "key" (when it has a string one) is moved into the
// driver's namespace; NULL when it is left as it is. malloc'ed.
static char *private_key(const uint8_t *body, size_t len, size_t *out_len) {
  cJSON *b = cJSON_ParseWithLength((const char *)body, len);
  cJSON *key = cJSON_GetObjectItemCaseSensitive(b, "key");
  char *out = NULL;
  if (cJSON_IsString(key)) {
    const char *k = key->valuestring;
    while (*k == '/') k++;
    size_t kl = strlen(g_prefix) + strlen(k) + 1;
    char *nk = malloc(kl);
    if (nk) {
      snprintf(nk, kl, "%s%s", g_prefix, k);
      cJSON_SetValuestring(key, nk);
      free(nk);
      out = cJSON_PrintUnformatted(b);
      if (out) *out_len = strlen(out);
    }
  }
  cJSON_Delete(b);
  return out;
}

// Sends the request on a new connection and reads the answer until the
// server closes; the answer (malloc'ed, NUL-terminated) and its length.
static char *exchange(const char *head, size_t head_len, const uint8_t *body, size_t body_len, size_t *len) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("socket", NULL);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_fix.http_port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {.tv_sec = 8};  // under libFuzzer's -timeout=10: a hang fails here, with a message
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  // closed with a reset once the answer is read: the server closes first, and
  // its side would otherwise sit in TIME_WAIT for a minute per input, which
  // runs out of loopback ports at a thousand inputs a second
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  // libFuzzer's SIGALRM (its -timeout watch) interrupts calls: a connect
  // interrupted goes on in the background, so wait for it and take its result
  int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  if (rc != 0 && errno == EINTR) {
    struct pollfd pw = {.fd = fd, .events = POLLOUT};
    int err_ = 0;
    socklen_t el = sizeof err_;
    while (poll(&pw, 1, 8000) < 0 && errno == EINTR) {
    }
    rc = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err_, &el) == 0 && err_ == 0 ? 0 : -1;
    if (err_) errno = err_;
  }
  if (rc != 0) {
    char why[128];
    snprintf(why, sizeof why, "connect to the fixture's HTTP port: %s", strerror(errno));
    fail(why, NULL);
  }
  const uint8_t *parts[2] = {(const uint8_t *)head, body};
  size_t lens[2] = {head_len, body_len};
  for (int p = 0; p < 2; p++)
    for (size_t off = 0; off < lens[p];) {
      ssize_t n = send(fd, parts[p] + off, lens[p] - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the server answered and closed first (e.g. 413): the answer says
      off += (size_t)n;
    }
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap + 1);
  for (;;) {
    if (n == cap) {
      if (cap >= MAX_ANSWER) fail("an answer over 8 MB", NULL);
      cap *= 2;
      buf = realloc(buf, cap + 1);
    }
    ssize_t r = recv(fd, buf + n, cap - n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) fail("no complete answer within 8 s", NULL);
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int json_ok(const char *s, size_t n) {
  if (!utf8_valid(s, n)) return 0;
  cJSON *j = cJSON_ParseWithLength(s, n);
  cJSON_Delete(j);
  return j != NULL;
}

// A header's value in the head [buf, end), case-insensitive name; NULL when absent.
static const char *header(const char *buf, const char *end, const char *name, size_t *vlen) {
  size_t nl = strlen(name);
  for (const char *p = strstr(buf, "\r\n"); p && p + 2 < end; p = strstr(p + 2, "\r\n")) {
    const char *h = p + 2;
    if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
      const char *v = h + nl + 1;
      while (*v == ' ') v++;
      const char *e = strstr(v, "\r\n");
      *vlen = e ? (size_t)(e - v) : strlen(v);
      return v;
    }
  }
  return NULL;
}

static void check(const char *ans, size_t n) {
  int status = 0;
  if (n < 12 || sscanf(ans, "HTTP/1.1 %3d", &status) != 1) fail("no HTTP/1.1 status line", ans);
  if (status >= 500 && status != 503) fail("a 5xx answer to a client's request", ans);
  const char *body = strstr(ans, "\r\n\r\n");
  if (!body) fail("an answer without the end of its head", ans);
  body += 4;
  size_t vl;
  const char *cl = header(ans, body, "Content-Length", &vl);
  size_t body_len = (size_t)(ans + n - body);
  if (!cl || strtoull(cl, NULL, 10) != body_len) fail("Content-Length does not match the body", ans);
  const char *ct = header(ans, body, "Content-Type", &vl);
  const char *ih = header(ans, body, "Inference-Header-Content-Length", &vl);
  size_t json_len = ih ? strtoull(ih, NULL, 10) : body_len;
  if (json_len > body_len) fail("Inference-Header-Content-Length past the body", ans);
  // an empty body is Triton's answer to a shared memory register or unregister
  int is_json = ih || (ct && strncmp(ct, "application/json", 16) == 0 && json_len > 0);
  if (is_json && !json_ok(body, json_len)) fail("a JSON answer that does not parse or is not UTF-8", ans);
  if (g_verbose) fprintf(stderr, "fuzz_rest:   -> %d %.*s\n", status, (int)(json_len < 300 ? json_len : 300), body);
}

// Puts the fixture back: model "fuzz" as the repository has it, no region but r0.
static void restore(int reload) {
  err e = {0};
  if (reload && srv_control_load(g_fix.srv.control, "fuzz", NULL, &e) != 0) fail(e.msg, "(reloading fuzz)");
  // the ensemble over fuzz too: an unload with unload_dependents takes it away (no engine: cheap)
  if (reload && srv_control_load(g_fix.srv.control, "fuzz_ens", NULL, &e) != 0) fail(e.msg, "(reloading fuzz_ens)");
  srv_shm_info *info;
  size_t n;
  if (srv_shm_status(g_fix.srv.shm, NULL, &info, &n, &e) != 0) return;
  for (size_t i = 0; i < n; i++)
    if (strcmp(info[i].name, "r0") != 0) srv_shm_unregister(g_fix.srv.shm, info[i].name);
  srv_shm_info_free(info, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int route = data[0] % 8;
  unsigned hl = (unsigned)data[1] | (unsigned)data[2] << 8;
  const uint8_t *body = data + 3;
  size_t body_len = size - 3;
  char path[1024];
  const char *method = route == 6 ? "GET" : "POST";
  static const char *const fixed[] = {"/v2/models/fuzz/infer", "/v2/models/fuzz/infer",
                                      "/v2/models/fuzz/versions/1/infer", "/v2/repository/models/fuzz/load",
                                      "/v2/repository/models/fuzz/unload",
                                      "/v2/systemsharedmemory/region/r1/register"};
  if (route < 6) {
    snprintf(path, sizeof path, "%s", fixed[route]);
  } else {  // the path is the body's first line; the HTTP parser refuses what a path cannot hold
    const uint8_t *nl = memchr(body, '\n', body_len);
    size_t pl = nl ? (size_t)(nl - body) : body_len;
    if (pl > sizeof path - 5) pl = sizeof path - 5;
    memcpy(path, "/v2/", 4);
    memcpy(path + 4, body, pl);
    path[4 + pl] = '\0';
    if (strpbrk(path, " \r\t") || strlen(path) != 4 + pl) return 0;  // not a request line at all: fuzz_http's ground
    body = nl ? nl + 1 : body + body_len;
    body_len = (size_t)(data + size - body);
  }
  char *moved = NULL;
  size_t moved_len = 0;
  if (route == 5 || (route == 7 && strstr(path, "/register"))) moved = private_key(body, body_len, &moved_len);
  if (moved) body = (const uint8_t *)moved, body_len = moved_len;
  char head[1400];
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n",
                   method, path, body_len);
  if (route == 1 || route == 2) n += snprintf(head + n, sizeof head - (size_t)n, "Inference-Header-Content-Length: %u\r\n", hl);
  n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
  if (g_verbose) fprintf(stderr, "fuzz_rest: %s %s (%zu bytes)\n", method, path, body_len);
  size_t alen;
  char *ans = exchange(head, (size_t)n, body, body_len, &alen);
  check(ans, alen);
  free(ans);
  free(moved);
  restore(route == 3 || route == 4 || (route == 7 && strstr(path, "repository")));
  return 0;
}
