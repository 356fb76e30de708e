// shm.c: the registered system shared memory regions: mappings of POSIX
// shared memory objects kept in a srv_shmtab (see shm.h for the lifetime
// rule, shmtab.h for the list and its references).
#include "server/sec/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/sec/shmtab.h"

struct srv_shm_region {
  srv_shmtab_entry ent;  // first: name, byte_size, refs (see shmtab.h)
  char *key;
  uint64_t offset;
  uint8_t *map;  // the page-aligned mapping
  size_t map_len;
  uint8_t *base;  // map + (offset within its first page): byte 0 of the region
};

struct srv_shm {
  srv_shmtab tab;
};

static void region_free(srv_shm_region *r) {
  if (r->map) munmap(r->map, r->map_len);
  srv_shmtab_entry_close(&r->ent);
  free(r->key);
  free(r);
}

static void free_entry(srv_shmtab_entry *e) {
  region_free((srv_shm_region *)e);
}

void srv_shm_release(srv_shm_region *r) {
  if (r && srv_shmtab_unref(&r->ent)) region_free(r);
}

int srv_shm_create(srv_shm **out, size_t max_regions, err *e) {
  srv_shm *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  srv_shmtab_init(&s->tab, max_regions, free_entry);
  *out = s;
  return 0;
}

void srv_shm_destroy(srv_shm *s) {
  if (!s) return;
  srv_shmtab_close(&s->tab);
  free(s);
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
  } else if ((uint64_t)st.st_size < r->offset || (uint64_t)st.st_size - r->offset < r->ent.byte_size) {
    // mapping past the object's end would fault on first touch
    rc = err_set(e, ERR_INVALID_ARGUMENT,
                 "shared memory object '%s' holds %" PRIu64 " bytes: offset %" PRIu64 " + byte_size %" PRIu64
                 " does not fit",
                 r->key, (uint64_t)st.st_size, r->offset, r->ent.byte_size);
  } else {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = r->offset / page * page;
    r->map_len = (size_t)(r->offset - start + r->ent.byte_size);
    void *p = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    if (p == MAP_FAILED)
      rc = err_set(e, ERR_INVALID_ARGUMENT, "cannot map %" PRIu64 " bytes of shared memory object '%s': %s",
                   r->ent.byte_size, r->key, strerror(errno));
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
  if (!r || srv_shmtab_entry_init(&r->ent, name, byte_size) != 0 || !(r->key = strdup(key))) {
    if (r) region_free(r);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  r->offset = offset;
  if (srv_shmtab_check_room(&s->tab, name, "shared memory", e) != 0) {  // before mapping: the map is the cost
    region_free(r);
    return (int)e->code;
  }
  // mapped outside the lock: opening and mapping may take a while
  if (map_region(r, e) != 0) {
    region_free(r);
    return (int)e->code;
  }
  if (srv_shmtab_add(&s->tab, &r->ent, "shared memory", e) != 0) {  // a concurrent register may have won
    region_free(r);
    return (int)e->code;
  }
  return 0;
}

size_t srv_shm_unregister(srv_shm *s, const char *name) {
  return srv_shmtab_unregister(&s->tab, name);
}

int srv_shm_has(srv_shm *s, const char *name) {
  return srv_shmtab_has(&s->tab, name);
}

void srv_shm_info_free(srv_shm_info *info, size_t n) {
  for (size_t i = 0; info && i < n; i++) {
    free(info[i].name);
    free(info[i].key);
  }
  free(info);
}

int srv_shm_status(srv_shm *s, const char *name, srv_shm_info **out, size_t *n_out, err *e) {
  srv_shmtab_entry **v;
  size_t n;
  *out = NULL;
  *n_out = 0;
  TRY(srv_shmtab_snapshot(&s->tab, name, &v, &n, e));
  if (n == 0 && name && *name)
    return err_set(e, ERR_NOT_FOUND, "no shared memory region named '%s' is registered", name);
  srv_shm_info *info = n ? calloc(n, sizeof *info) : NULL;
  size_t k = 0;
  int oom = n && !info;
  for (; !oom && k < n; k++) {
    const srv_shm_region *r = (const srv_shm_region *)v[k];
    info[k] = (srv_shm_info){
        .name = strdup(r->ent.name), .key = strdup(r->key), .offset = r->offset, .byte_size = r->ent.byte_size};
    oom = !info[k].name || !info[k].key;
  }
  srv_shmtab_snapshot_free(&s->tab, v, n);
  if (oom) {
    srv_shm_info_free(info, k);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  *out = info;
  *n_out = n;
  return 0;
}

int srv_shm_acquire(srv_shm *s, const char *name, uint64_t offset, uint64_t size, srv_shm_region **region,
                    uint8_t **ptr, err *e) {
  srv_shm_region *r = (srv_shm_region *)srv_shmtab_acquire(&s->tab, name);
  if (!r) return err_set(e, ERR_NOT_FOUND, "no shared memory region named '%s' is registered", name ? name : "");
  if (srv_shmtab_check_window(&r->ent, "shared memory", offset, size, e) != 0) {
    srv_shm_release(r);
    return (int)e->code;
  }
  *region = r;
  *ptr = r->base + offset;
  return 0;
}
