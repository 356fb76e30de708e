// shmtab.c: the named, reference-counted region list both shared memory
// registries keep (see shmtab.h).
#include "server/sec/shmtab.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void srv_shmtab_init(srv_shmtab *t, size_t max, void (*free_region)(srv_shmtab_entry *e)) {
  pthread_mutex_init(&t->mu, NULL);
  t->head = NULL;
  memset(t->buckets, 0, sizeof t->buckets);
  t->count = 0;
  t->max = max;
  t->free_region = free_region;
}

void srv_shmtab_close(srv_shmtab *t) {
  srv_shmtab_unregister(t, NULL);
  pthread_mutex_destroy(&t->mu);
}

int srv_shmtab_entry_init(srv_shmtab_entry *e, const char *name, uint64_t byte_size) {
  e->next = e->prev = e->hnext = NULL;
  e->byte_size = byte_size;
  atomic_init(&e->refs, 1);
  return (e->name = strdup(name)) ? 0 : -1;
}

void srv_shmtab_entry_close(srv_shmtab_entry *e) {
  free(e->name);
  e->name = NULL;
}

int srv_shmtab_unref(srv_shmtab_entry *e) {
  return e && atomic_fetch_sub(&e->refs, 1) == 1;
}

void srv_shmtab_release(srv_shmtab *t, srv_shmtab_entry *e) {
  if (srv_shmtab_unref(e)) t->free_region(e);
}

// FNV-1a: names are short and client-chosen; a client colliding its own
// names only lengthens its own chains, bounded by --shm-max-regions.
static srv_shmtab_entry **bucket(srv_shmtab *t, const char *name) {
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
  return &t->buckets[h % SRV_SHMTAB_BUCKETS];
}

srv_shmtab_entry *srv_shmtab_find_locked(srv_shmtab *t, const char *name) {
  for (srv_shmtab_entry *e = *bucket(t, name); e; e = e->hnext)
    if (strcmp(e->name, name) == 0) return e;
  return NULL;
}

// Takes e out of the list and its bucket (t->mu held).
static void unlink_locked(srv_shmtab *t, srv_shmtab_entry *e) {
  if (e->prev) e->prev->next = e->next;
  else t->head = e->next;
  if (e->next) e->next->prev = e->prev;
  for (srv_shmtab_entry **pp = bucket(t, e->name); *pp; pp = &(*pp)->hnext)
    if (*pp == e) {
      *pp = e->hnext;
      break;
    }
  e->next = e->prev = e->hnext = NULL;
  t->count--;
}

int srv_shmtab_check_room_locked(srv_shmtab *t, const char *name, const char *kind, err *err) {
  if (srv_shmtab_find_locked(t, name))
    return err_set(err, ERR_ALREADY_EXISTS, "%s region '%s' is already registered", kind, name);
  if (t->max && t->count >= t->max)
    return err_set(err, ERR_RESOURCE_EXHAUSTED,
                   "%zu %s regions are registered, the most --shm-max-regions allows: unregister one first", t->count,
                   kind);
  return 0;
}

int srv_shmtab_check_room(srv_shmtab *t, const char *name, const char *kind, err *err) {
  pthread_mutex_lock(&t->mu);
  int rc = srv_shmtab_check_room_locked(t, name, kind, err);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int srv_shmtab_add_locked(srv_shmtab *t, srv_shmtab_entry *e, const char *kind, err *err) {
  TRY(srv_shmtab_check_room_locked(t, e->name, kind, err));
  e->prev = NULL;
  e->next = t->head;
  if (t->head) t->head->prev = e;
  t->head = e;
  srv_shmtab_entry **b = bucket(t, e->name);
  e->hnext = *b;
  *b = e;
  t->count++;
  return 0;
}

int srv_shmtab_add(srv_shmtab *t, srv_shmtab_entry *e, const char *kind, err *err) {
  pthread_mutex_lock(&t->mu);
  int rc = srv_shmtab_add_locked(t, e, kind, err);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int srv_shmtab_has(srv_shmtab *t, const char *name) {
  if (!name || !*name) return 0;
  pthread_mutex_lock(&t->mu);
  int has = srv_shmtab_find_locked(t, name) != NULL;
  pthread_mutex_unlock(&t->mu);
  return has;
}

size_t srv_shmtab_unregister(srv_shmtab *t, const char *name) {
  int all = !name || !*name;
  srv_shmtab_entry *gone = NULL;  // chained through next once unlinked
  size_t n = 0;
  pthread_mutex_lock(&t->mu);
  for (srv_shmtab_entry *e = all ? t->head : srv_shmtab_find_locked(t, name), *next; e; e = all ? next : NULL) {
    next = e->next;
    unlink_locked(t, e);
    e->next = gone;
    gone = e;
    n++;
  }
  pthread_mutex_unlock(&t->mu);
  // released outside the lock: a registry's free function may take it (cuda_shm.c does)
  while (gone) {
    srv_shmtab_entry *next = gone->next;
    srv_shmtab_release(t, gone);  // the table's reference; holders keep theirs
    gone = next;
  }
  return n;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp((*(srv_shmtab_entry *const *)a)->name, (*(srv_shmtab_entry *const *)b)->name);
}

int srv_shmtab_snapshot(srv_shmtab *t, const char *name, srv_shmtab_entry ***out, size_t *n_out, err *e) {
  int all = !name || !*name;
  *out = NULL;
  *n_out = 0;
  pthread_mutex_lock(&t->mu);
  size_t n = 0;
  for (srv_shmtab_entry *r = t->head; r; r = r->next) n += all || strcmp(r->name, name) == 0;
  srv_shmtab_entry **v = n ? calloc(n, sizeof *v) : NULL;
  size_t k = 0;
  for (srv_shmtab_entry *r = t->head; v && r; r = r->next) {
    if (!all && strcmp(r->name, name) != 0) continue;
    atomic_fetch_add(&r->refs, 1);
    v[k++] = r;
  }
  pthread_mutex_unlock(&t->mu);
  if (n && !v) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (n > 1) qsort(v, n, sizeof *v, cmp_name);
  *out = v;
  *n_out = n;
  return 0;
}

void srv_shmtab_snapshot_free(srv_shmtab *t, srv_shmtab_entry **v, size_t n) {
  for (size_t i = 0; v && i < n; i++) srv_shmtab_release(t, v[i]);
  free(v);
}

srv_shmtab_entry *srv_shmtab_acquire(srv_shmtab *t, const char *name) {
  pthread_mutex_lock(&t->mu);
  srv_shmtab_entry *r = srv_shmtab_find_locked(t, name ? name : "");
  if (r) atomic_fetch_add(&r->refs, 1);
  pthread_mutex_unlock(&t->mu);
  return r;
}

int srv_shmtab_check_window(const srv_shmtab_entry *r, const char *kind, uint64_t offset, uint64_t size, err *e) {
  if (offset <= r->byte_size && size <= r->byte_size - offset) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT,
                 "%s region '%s' holds %" PRIu64 " bytes: offset %" PRIu64 " + %" PRIu64 " bytes does not fit", kind,
                 r->name, r->byte_size, offset, size);
}
