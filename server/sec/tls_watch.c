// tls_watch.c: the certificate set in service, its generation, and the
// reloads that replace it (see tls_watch.h). The mutex is held across a
// reload, so two reloads (SIGHUP on main, a changed file seen by a handshake)
// never race; a reload reads three small files, so a handshake waits at most
// that long.
#include "server/sec/tls_watch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

// A change on disk is looked for at most this often: a stat of three files,
// on the handshake path.
#define CHECK_EVERY_NS 1000000000LL

// What identifies a file's content without reading it. A Kubernetes Secret
// volume swaps a symlink (stat follows it: a new inode); cp and editors
// change mtime and usually size.
typedef struct stamp {
  int exists;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime, ctime;
} stamp;

struct srv_tlsw {
  pthread_mutex_t mu;
  char *paths[3];  // cert, key, root (NULL when none)
  srv_tls_client client;
  srv_tlsw_note note;
  void *note_ctx;
  srv_tls *cur;               // in service; never NULL
  unsigned long long gen;     // of cur; 1 for the set loaded at start
  stamp seen[3];              // at the last load attempt, good or bad
  long long checked_ns;       // monotonic time of the last look at the stamps
};

static long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void take_stamp(const char *path, stamp *s) {
  memset(s, 0, sizeof *s);
  struct stat st;
  if (!path || stat(path, &st) != 0) return;
  s->exists = 1;
  s->dev = st.st_dev;
  s->ino = st.st_ino;
  s->size = st.st_size;
  s->mtime = st.st_mtim;
  s->ctime = st.st_ctim;
}

static int same_stamp(const stamp *a, const stamp *b) {
  return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
         a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static int load(srv_tlsw *w, srv_tls **out, err *e) {
  return srv_tls_load(w->paths[0], w->paths[1], w->paths[2], w->client != SRV_TLS_CLIENT_NONE, out, e);
}

// With w->mu held. `why` says what prompted it, for the log.
static int reload_locked(srv_tlsw *w, const char *why, err *e) {
  // stamps first: a file rewritten while being read shows as changed again next time
  for (int i = 0; i < 3; i++) take_stamp(w->paths[i], &w->seen[i]);
  srv_tls *t = NULL;
  char msg[1024];
  if (load(w, &t, e) != 0) {
    snprintf(msg, sizeof msg, "TLS certificates not reloaded (%s), the previous ones stay in service: %s", why,
             e->msg);
    if (w->note) w->note(w->note_ctx, 1, msg);
    return (int)e->code;
  }
  srv_tls_destroy(w->cur);
  w->cur = t;
  w->gen++;
  snprintf(msg, sizeof msg, "TLS certificates reloaded (%s): new connections get %s", why, srv_tls_describe(t));
  if (w->note) w->note(w->note_ctx, 0, msg);
  return 0;
}

// --- lifecycle

int srv_tlsw_create(const char *cert_path, const char *key_path, const char *root_path, srv_tls_client client,
                    srv_tlsw_note note, void *note_ctx, srv_tlsw **out, err *e) {
  *out = NULL;
  srv_tlsw *w = calloc(1, sizeof *w);
  if (!w) return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS: out of memory");
  w->client = client;
  w->note = note;
  w->note_ctx = note_ctx;
  const char *p[3] = {cert_path, key_path, root_path};
  for (int i = 0; i < 3; i++) {
    if (p[i] && !(w->paths[i] = strdup(p[i]))) {
      srv_tlsw_destroy(w);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "TLS: out of memory");
    }
    take_stamp(w->paths[i], &w->seen[i]);
  }
  int rc = load(w, &w->cur, e);
  if (rc) {
    srv_tlsw_destroy(w);
    return rc;
  }
  w->gen = 1;
  w->checked_ns = mono_ns();
  pthread_mutex_init(&w->mu, NULL);
  *out = w;
  return 0;
}

void srv_tlsw_destroy(srv_tlsw *w) {
  if (!w) return;
  if (w->cur) pthread_mutex_destroy(&w->mu);  // initialised only once loaded
  srv_tls_destroy(w->cur);
  for (int i = 0; i < 3; i++) free(w->paths[i]);
  free(w);
}

srv_tls_client srv_tlsw_client(const srv_tlsw *w) { return w->client; }

// --- reloads

int srv_tlsw_reload(srv_tlsw *w, err *e) {
  pthread_mutex_lock(&w->mu);
  int rc = reload_locked(w, "SIGHUP", e);
  w->checked_ns = mono_ns();
  pthread_mutex_unlock(&w->mu);
  return rc;
}

int srv_tlsw_if_newer(srv_tlsw *w, unsigned long long *seen, void (*use)(void *ctx, const srv_tls *t), void *ctx) {
  pthread_mutex_lock(&w->mu);
  long long now = mono_ns();
  if (now - w->checked_ns >= CHECK_EVERY_NS) {
    w->checked_ns = now;
    int changed = 0;
    for (int i = 0; i < 3; i++) {
      stamp s;
      take_stamp(w->paths[i], &s);
      changed |= !same_stamp(&s, &w->seen[i]);
    }
    err e = {0};
    if (changed) (void)reload_locked(w, "the files changed", &e);  // a failure was noted
  }
  int newer = w->gen > *seen;
  if (newer) {
    use(ctx, w->cur);
    *seen = w->gen;
  }
  pthread_mutex_unlock(&w->mu);
  return newer;
}
