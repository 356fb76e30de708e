// shm.c: the registered system shared memory regions: a mutex-guarded list
// of reference-counted mappings (see shm.h for the lifetime rule).
#include "server/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct srv_shm_region {
  srv_shm_region *next;  // in the registered list; unlinked at unregister
  char *name, *key;
  uint64_t offset, byte_size;
  uint8_t *map;     // the page-aligned mapping
  size_t map_len;
  uint8_t *base;    // map + (offset within its first page): byte 0 of the region
  atomic_int refs;  // the registry's (while registered) plus one per holder
};

struct srv_shm {
  pthread_mutex_t mu;
  srv_shm_region *head;
};

static void region_free(srv_shm_region *r) {
  if (r->map) munmap(r->map, r->map_len);
  free(r->name);
  free(r->key);
  free(r);
}

void srv_shm_release(srv_shm_region *r) {
  if (r && atomic_fetch_sub(&r->refs, 1) == 1) region_free(r);
}

int srv_shm_create(srv_shm **out, err *e) {
  srv_shm *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  pthread_mutex_init(&s->mu, NULL);
  *out = s;
  return 0;
}

void srv_shm_destroy(srv_shm *s) {
  if (!s) return;
  srv_shm_unregister(s, NULL);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static srv_shm_region *find_locked(srv_shm *s, const char *name) {
  for (srv_shm_region *r = s->head; r; r = r->next)
    if (strcmp(r->name, name) == 0) return r;
  return NULL;
}

// Opens and maps the window; on failure *e says why, naming the key.
static int map_region(srv_shm_region *r, err *e) {
  int fd = shm_open(r->key, O_RDWR, 0);
  if (fd < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "cannot open shared memory object '%s': %s", r->key, strerror(errno));
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    rc = err_set(e, ERR_INVALID_ARGUMENT, "cannot stat shared memory object '%s': %s", r->key, strerror(errno));
  } else if ((uint64_t)st.st_size < r->offset || (uint64_t)st.st_size - r->offset < r->byte_size) {
    // mapping past the object's end would fault on first touch
    rc = err_set(e, ERR_INVALID_ARGUMENT,
                 "shared memory object '%s' holds %" PRIu64 " bytes: offset %" PRIu64 " + byte_size %" PRIu64
                 " does not fit",
                 r->key, (uint64_t)st.st_size, r->offset, r->byte_size);
  } else {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = r->offset / page * page;
    r->map_len = (size_t)(r->offset - start + r->byte_size);
    void *p = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    if (p == MAP_FAILED)
      rc = err_set(e, ERR_INVALID_ARGUMENT, "cannot map %" PRIu64 " bytes of shared memory object '%s': %s",
                   r->byte_size, r->key, strerror(errno));
    else {
      r->map = p;
      r->base = r->map + (r->offset - start);
    }
  }
  close(fd);
  return rc;
}

int srv_shm_register(srv_shm *s, const char *name, const char *key, uint64_t offset, uint64_t byte_size, err *e) {
  if (!name || !*name) return err_set(e, ERR_INVALID_ARGUMENT, "a shared memory region needs a name");
  if (!key || !*key) return err_set(e, ERR_INVALID_ARGUMENT, "shared memory region '%s' needs a key", name);
  if (byte_size == 0) return err_set(e, ERR_INVALID_ARGUMENT, "shared memory region '%s' has byte_size 0", name);
  if (byte_size > SIZE_MAX / 2 || offset > INT64_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "shared memory region '%s': offset or byte_size out of range", name);
  srv_shm_region *r = calloc(1, sizeof *r);
  if (!r || !(r->name = strdup(name)) || !(r->key = strdup(key))) {
    if (r) region_free(r);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  r->offset = offset;
  r->byte_size = byte_size;
  atomic_init(&r->refs, 1);
  pthread_mutex_lock(&s->mu);
  int taken = find_locked(s, name) != NULL;
  pthread_mutex_unlock(&s->mu);
  if (taken) {
    region_free(r);
    return err_set(e, ERR_ALREADY_EXISTS, "shared memory region '%s' is already registered", name);
  }
  // mapped outside the lock: opening and mapping may take a while
  if (map_region(r, e) != 0) {
    region_free(r);
    return (int)e->code;
  }
  pthread_mutex_lock(&s->mu);
  taken = find_locked(s, name) != NULL;  // a concurrent register may have won
  if (!taken) {
    r->next = s->head;
    s->head = r;
  }
  pthread_mutex_unlock(&s->mu);
  if (taken) {
    region_free(r);
    return err_set(e, ERR_ALREADY_EXISTS, "shared memory region '%s' is already registered", name);
  }
  return 0;
}

size_t srv_shm_unregister(srv_shm *s, const char *name) {
  int all = !name || !*name;
  srv_shm_region *gone = NULL;
  size_t n = 0;
  pthread_mutex_lock(&s->mu);
  for (srv_shm_region **pp = &s->head; *pp;) {
    srv_shm_region *r = *pp;
    if (all || strcmp(r->name, name) == 0) {
      *pp = r->next;
      r->next = gone;
      gone = r;
      n++;
      if (!all) break;
    } else {
      pp = &r->next;
    }
  }
  pthread_mutex_unlock(&s->mu);
  while (gone) {
    srv_shm_region *next = gone->next;
    srv_shm_release(gone);  // the registry's reference; holders keep theirs
    gone = next;
  }
  return n;
}

static int cmp_info(const void *a, const void *b) {
  return strcmp(((const srv_shm_info *)a)->name, ((const srv_shm_info *)b)->name);
}

void srv_shm_info_free(srv_shm_info *info, size_t n) {
  for (size_t i = 0; info && i < n; i++) {
    free(info[i].name);
    free(info[i].key);
  }
  free(info);
}

int srv_shm_status(srv_shm *s, const char *name, srv_shm_info **out, size_t *n_out, err *e) {
  int all = !name || !*name;
  *out = NULL;
  *n_out = 0;
  pthread_mutex_lock(&s->mu);
  size_t n = 0;
  for (srv_shm_region *r = s->head; r; r = r->next) n += all || strcmp(r->name, name) == 0;
  srv_shm_info *info = n ? calloc(n, sizeof *info) : NULL;
  size_t k = 0;
  int oom = n && !info;
  for (srv_shm_region *r = s->head; !oom && r; r = r->next) {
    if (!all && strcmp(r->name, name) != 0) continue;
    info[k] = (srv_shm_info){.name = strdup(r->name), .key = strdup(r->key), .offset = r->offset,
                             .byte_size = r->byte_size};
    oom = !info[k].name || !info[k].key;
    k++;
  }
  pthread_mutex_unlock(&s->mu);
  if (oom) {
    srv_shm_info_free(info, k);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (!all && n == 0) return err_set(e, ERR_NOT_FOUND, "no shared memory region named '%s' is registered", name);
  if (n > 1) qsort(info, n, sizeof *info, cmp_info);
  *out = info;
  *n_out = n;
  return 0;
}

int srv_shm_acquire(srv_shm *s, const char *name, uint64_t offset, uint64_t size, srv_shm_region **region,
                    uint8_t **ptr, err *e) {
  pthread_mutex_lock(&s->mu);
  srv_shm_region *r = find_locked(s, name ? name : "");
  if (r) atomic_fetch_add(&r->refs, 1);
  pthread_mutex_unlock(&s->mu);
  if (!r) return err_set(e, ERR_NOT_FOUND, "no shared memory region named '%s' is registered", name ? name : "");
  if (offset > r->byte_size || size > r->byte_size - offset) {
    err_set(e, ERR_INVALID_ARGUMENT,
            "shared memory region '%s' holds %" PRIu64 " bytes: offset %" PRIu64 " + %" PRIu64 " bytes does not fit",
            r->name, r->byte_size, offset, size);
    srv_shm_release(r);
    return (int)e->code;
  }
  *region = r;
  *ptr = r->base + offset;
  return 0;
}
