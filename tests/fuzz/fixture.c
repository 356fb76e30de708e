// fixture.c: see fixture.h. The order is main.c's.
#include "fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/repo/config.h"
#include "server/http/http.h"
#include "server/obs/log.h"
#include "server/http/rest.h"

static void die(const char *what, const err *e) {
  fprintf(stderr, "fuzz fixture: %s: %s\n", what, e ? e->msg : "failed");
  abort();
}

void fz_shm_sweep(const char *stem) {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  size_t sl = strlen(stem);
  for (struct dirent *de; (de = readdir(d));) {
    if (strncmp(de->d_name, stem, sl) != 0) continue;
    char *end;
    long pid = strtol(de->d_name + sl, &end, 10);
    if (end == de->d_name + sl || *end != '-' || pid <= 0) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    char key[300];
    snprintf(key, sizeof key, "/%s", de->d_name);
    shm_unlink(key);
  }
  closedir(d);
}

void fz_serve(fz_server *f, const char *repo) {
  srv_server *s = &f->srv;
  err e = {0};
  srv_log_set_level(SRV_LOG_WARN);  // loads and registers log at INFO: millions of lines otherwise
  const char *all[] = {"*"};
  srv_registry_opts ro = fz_registry_opts();
  if (srv_registry_create(repo, &ro, &s->reg, &e) != 0 ||
      srv_control_initial_load(s->reg, repo, all, 1, &e) != 0)
    die(repo, &e);
  if (srv_shm_create(&s->shm, 0, &e) != 0) die("srv_shm_create", &e);
  char key[64];
  snprintf(key, sizeof key, "/inferd-fzfix-%d", (int)getpid());
  int fd = shm_open(key, O_CREAT | O_RDWR | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) die("shm_open", NULL);
  close(fd);
  int rc = srv_shm_register(s->shm, "r0", key, 0, 4096, &e);
  shm_unlink(key);  // mapped now; nothing is left behind in /dev/shm
  if (rc != 0) die("srv_shm_register", &e);
  s->strict_readiness = 1;
  s->allow_metrics = 1;
  if (srv_sched_create(s->reg, s, &s->sched, &e) != 0) die("srv_sched_create", &e);
  if (srv_control_create(s->reg, s->sched, SRV_CONTROL_EXPLICIT, repo, 0, NULL, &s->control, &e) != 0)
    die("srv_control_create", &e);
  srv_http *http;
  if (srv_http_create(srv_sched_loop(s->sched), "127.0.0.1", 0, srv_http_routes, s, &http, &e) != 0)
    die("srv_http_create", &e);
  if (srv_rest_create(srv_sched_loop(s->sched), s, &s->rest, &e) != 0) die("srv_rest_create", &e);
  f->http_port = srv_http_port(http);
  srv_method methods[32];  // srv_grpc_create copies them; the paths are static
  size_t n = srv_methods(s, methods, sizeof methods / sizeof methods[0]);
  srv_grpc_opts go = {.addr = "127.0.0.1:0", .n_threads = 1};
  srv_grpc *grpc;
  if (srv_grpc_create(&go, methods, n, &grpc, &e) != 0) die("srv_grpc_create", &e);
  if (srv_sched_start(s->sched, &e) != 0) die("srv_sched_start", &e);
  if (srv_grpc_start(grpc, &e) != 0) die("srv_grpc_start", &e);
  f->grpc_port = srv_grpc_port(grpc);
}
