// test_shmtab: server/sec/shmtab.c, the region list both shared memory
// registries share: a taken name is refused, status snapshots are sorted
// and hold references, a region is freed exactly once and only with its
// last reference (the table's or a holder's, whichever goes last), and the
// window check names the kind and the region.
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "server/sec/shmtab.h"

// A registry's region as shm.c and cuda_shm.c lay theirs out: the entry first.
typedef struct region {
  srv_shmtab_entry ent;
  int *freed;  // counts this region's frees
} region;

static void free_region(srv_shmtab_entry *e) {
  region *r = (region *)e;
  (*r->freed)++;
  srv_shmtab_entry_close(&r->ent);
  free(r);
}

static region *make(const char *name, uint64_t size, int *freed) {
  region *r = calloc(1, sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(srv_shmtab_entry_init(&r->ent, name, size), 0);
  r->freed = freed;
  return r;
}

static void test_names_and_snapshot(void) {
  srv_shmtab t;
  srv_shmtab_init(&t, 0, free_region);
  int freed[3] = {0};
  region *b = make("b", 10, &freed[0]), *a = make("a", 20, &freed[1]), *b2 = make("b", 30, &freed[2]);
  // added in name order: the list keeps the newest first, so the snapshot must sort
  err ae = {0};
  CHECK_EQ_INT(srv_shmtab_add(&t, &a->ent, "test", NULL), 0);
  CHECK_EQ_INT(srv_shmtab_add(&t, &b->ent, "test", NULL), 0);
  // the name is taken: not listed, still the caller's
  CHECK_EQ_INT(srv_shmtab_add(&t, &b2->ent, "test", &ae), ERR_ALREADY_EXISTS);
  free_region(&b2->ent);
  CHECK_EQ_INT(freed[2], 1);
  CHECK_EQ_INT(srv_shmtab_has(&t, "a"), 1);
  CHECK_EQ_INT(srv_shmtab_has(&t, "c"), 0);
  CHECK_EQ_INT(srv_shmtab_has(&t, ""), 0);
  CHECK_EQ_INT(srv_shmtab_has(&t, NULL), 0);

  err e = {0};
  srv_shmtab_entry **v;
  size_t n;
  CHECK_EQ_INT(srv_shmtab_snapshot(&t, NULL, &v, &n, &e), 0);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_STR(v[0]->name, "a");  // sorted by name, not in the list's order
  CHECK_EQ_STR(v[1]->name, "b");
  CHECK_EQ_INT(v[1]->byte_size, 10);
  // the snapshot holds its own references: unregistering frees nothing yet
  CHECK_EQ_INT(srv_shmtab_unregister(&t, "a"), 1);
  CHECK_EQ_INT(freed[1], 0);
  CHECK_EQ_STR(v[0]->name, "a");
  srv_shmtab_snapshot_free(&t, v, n);
  CHECK_EQ_INT(freed[1], 1);
  CHECK_EQ_INT(freed[0], 0);

  CHECK_EQ_INT(srv_shmtab_snapshot(&t, "b", &v, &n, &e), 0);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_STR(v[0]->name, "b");
  srv_shmtab_snapshot_free(&t, v, n);
  CHECK_EQ_INT(srv_shmtab_snapshot(&t, "a", &v, &n, &e), 0);  // unknown: no entries, no error
  CHECK_EQ_INT(n, 0);
  CHECK(v == NULL);

  CHECK_EQ_INT(srv_shmtab_unregister(&t, "a"), 0);  // already gone
  srv_shmtab_close(&t);                              // unregisters "b"
  CHECK_EQ_INT(freed[0], 1);
  CHECK_EQ_INT(freed[1], 1);
  CHECK_EQ_INT(freed[2], 1);
}

// --shm-max-regions: the table refuses past max and counts unregistered
// names back, so a freed slot is usable again.
static void test_max_regions(void) {
  srv_shmtab t;
  srv_shmtab_init(&t, 2, free_region);
  int freed[4] = {0};
  err e = {0};
  CHECK_EQ_INT(srv_shmtab_add(&t, &make("a", 1, &freed[0])->ent, "test", &e), 0);
  CHECK_EQ_INT(srv_shmtab_add(&t, &make("b", 1, &freed[1])->ent, "test", &e), 0);
  CHECK_EQ_INT(srv_shmtab_check_room(&t, "c", "test", &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "--shm-max-regions");
  CHECK_EQ_INT(srv_shmtab_check_room(&t, "a", "test", &e), ERR_ALREADY_EXISTS);  // the name first
  region *c = make("c", 1, &freed[2]);
  CHECK_EQ_INT(srv_shmtab_add(&t, &c->ent, "test", &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_EQ_INT(srv_shmtab_has(&t, "c"), 0);
  CHECK_EQ_INT(srv_shmtab_unregister(&t, "a"), 1);
  CHECK_EQ_INT(srv_shmtab_add(&t, &c->ent, "test", &e), 0);  // room again
  CHECK_EQ_INT(srv_shmtab_unregister(&t, NULL), 2);
  CHECK_EQ_INT(srv_shmtab_add(&t, &make("d", 1, &freed[3])->ent, "test", &e), 0);
  srv_shmtab_close(&t);
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(freed[i], 1);
}

// Many names: every one found through its bucket, unregistering one by name
// leaves the others (list and buckets stay consistent), the count follows.
static void test_many_names(void) {
  enum { N = 3000 };
  static int freed[N];
  memset(freed, 0, sizeof freed);
  srv_shmtab t;
  srv_shmtab_init(&t, 0, free_region);
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "region-%d", i);
    CHECK_EQ_INT(srv_shmtab_add(&t, &make(name, 1, &freed[i])->ent, "test", NULL), 0);
  }
  CHECK_EQ_INT(t.count, N);
  for (int i = 0; i < N; i += 2) {
    snprintf(name, sizeof name, "region-%d", i);
    CHECK_EQ_INT(srv_shmtab_unregister(&t, name), 1);
  }
  CHECK_EQ_INT(t.count, N / 2);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "region-%d", i);
    CHECK_EQ_INT(srv_shmtab_has(&t, name), i % 2);
    CHECK_EQ_INT(freed[i], !(i % 2));
  }
  srv_shmtab_entry **v;
  size_t n;
  err e = {0};
  CHECK_EQ_INT(srv_shmtab_snapshot(&t, NULL, &v, &n, &e), 0);
  CHECK_EQ_INT(n, N / 2);
  srv_shmtab_snapshot_free(&t, v, n);
  CHECK_EQ_INT(srv_shmtab_unregister(&t, NULL), N / 2);
  CHECK_EQ_INT(t.count, 0);
  srv_shmtab_close(&t);
  for (int i = 0; i < N; i++) CHECK_EQ_INT(freed[i], 1);
}

static void test_holder_outlives_name(void) {
  srv_shmtab t;
  srv_shmtab_init(&t, 0, free_region);
  int freed[2] = {0};
  CHECK_EQ_INT(srv_shmtab_add(&t, &make("x", 100, &freed[0])->ent, "test", NULL), 0);
  CHECK_EQ_INT(srv_shmtab_add(&t, &make("y", 100, &freed[1])->ent, "test", NULL), 0);
  CHECK(srv_shmtab_acquire(&t, "nope") == NULL);
  CHECK(srv_shmtab_acquire(&t, NULL) == NULL);
  srv_shmtab_entry *x = srv_shmtab_acquire(&t, "x");
  CHECK(x != NULL);
  CHECK_EQ_INT(srv_shmtab_unregister(&t, NULL), 2);  // every name
  CHECK_EQ_INT(srv_shmtab_has(&t, "x"), 0);
  CHECK_EQ_INT(freed[1], 1);  // nobody held y
  CHECK_EQ_INT(freed[0], 0);  // the holder still has x
  CHECK_EQ_STR(x->name, "x");
  CHECK_EQ_INT(srv_shmtab_unref(x), 1);  // the last reference: the holder frees it
  free_region(x);
  CHECK_EQ_INT(freed[0], 1);
  srv_shmtab_close(&t);
  CHECK_EQ_INT(freed[0], 1);
  CHECK_EQ_INT(freed[1], 1);
}

static void test_window(void) {
  srv_shmtab_entry ent;
  CHECK_EQ_INT(srv_shmtab_entry_init(&ent, "w", 64), 0);
  err e = {0};
  CHECK_EQ_INT(srv_shmtab_check_window(&ent, "shared memory", 0, 64, &e), 0);
  CHECK_EQ_INT(srv_shmtab_check_window(&ent, "shared memory", 64, 0, &e), 0);
  CHECK_EQ_INT(srv_shmtab_check_window(&ent, "shared memory", 60, 8, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "shared memory region 'w' holds 64 bytes: offset 60 + 8 bytes does not fit");
  // no wrap-around: a huge size past a small offset is refused too
  CHECK_EQ_INT(srv_shmtab_check_window(&ent, "cuda shared memory", 1, UINT64_MAX, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "cuda shared memory region 'w' holds 64 bytes");
  CHECK_EQ_INT(srv_shmtab_check_window(&ent, "cuda shared memory", 65, 0, &e), ERR_INVALID_ARGUMENT);
  srv_shmtab_entry_close(&ent);
}

int main(void) {
  test_names_and_snapshot();
  test_holder_outlives_name();
  test_max_regions();
  test_many_names();
  test_window();
  CHECK_DONE();
}
