// Tests server/core/copypool.c: the split of a copy list covers every byte
// once, in order, in pieces of about equal size with cache-line boundaries,
// for many segment sizes, counts and piece counts; pooled copies land every
// byte where the serial copy would, for one caller and for several callers
// sharing the pool at once; srv_copypool_for runs each index exactly once;
// a guarded segment over a truncated shared memory object is reported
// faulted and the others still copy. Run under ThreadSanitizer by
// tests/run.sh.
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "server/core/copypool.h"
#include "server/sec/shmguard.h"

// A small deterministic generator: the same cases on every run (one per
// thread: test_callers makes lists on several).
static _Thread_local uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

// Segment sizes of one case: zeros, odd tails, some big ones.
static size_t seg_size(int shape) {
  switch (shape) {
    case 0: return next() % 5;                      // tiny and empty
    case 1: return next() % 3000;                   // rows of a small model
    case 2: return (size_t)150528 * 4;              // one ResNet-50 image (602,112 bytes)
    default: return next() % ((size_t)1 << 20) + 1;  // anything up to 1 MiB
  }
}

// --- the split

typedef struct cover {
  srv_copy_seg *segs;
  size_t *seg_at;  // each segment's running offset
  size_t expect;   // the running offset the next span must start at
  size_t bytes;    // of this piece
  int bad;
} cover;

static void record(void *ctx, srv_copy_seg *seg, size_t offset, size_t bytes) {
  cover *c = ctx;
  size_t at = c->seg_at[seg - c->segs] + offset;
  if (at != c->expect || bytes == 0 || offset + bytes > seg->n) c->bad++;
  c->expect = at + bytes;
  c->bytes += bytes;
}

static void check_split(size_t n_segs, int shape, size_t parts) {
  srv_copy_seg *segs = calloc(n_segs ? n_segs : 1, sizeof *segs);
  size_t *seg_at = calloc(n_segs ? n_segs : 1, sizeof *seg_at);
  size_t total = 0;
  for (size_t i = 0; i < n_segs; i++) {
    segs[i].n = seg_size(shape);
    seg_at[i] = total;
    total += segs[i].n;
  }
  cover c = {.segs = segs, .seg_at = seg_at};
  for (size_t k = 0; k < parts; k++) {
    size_t start = c.expect;
    c.bytes = 0;
    srv_copy_piece(segs, n_segs, total, parts, k, record, &c);
    // the next piece starts where this one ended, on a 64-byte boundary inside the list
    if (k + 1 < parts && c.expect % 64) c.bad++;
    if (k + 1 < parts && start + c.bytes != c.expect) c.bad++;
    size_t fair = total / parts;
    if (c.bytes + 128 < fair || c.bytes > fair + 128) c.bad++;
  }
  if (c.bad || c.expect != total) {
    fprintf(stderr, "split of %zu segments (shape %d, %zu bytes) in %zu parts: %d bad, covered %zu\n", n_segs, shape,
            total, parts, c.bad, c.expect);
  }
  CHECK_EQ_INT(c.bad, 0);
  CHECK(c.expect == total);
  free(segs);
  free(seg_at);
}

static void test_split(void) {
  static const size_t counts[] = {0, 1, 2, 3, 7, 24, 34, 128};
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
    for (int shape = 0; shape < 4; shape++)
      for (size_t parts = 1; parts <= 17; parts++) check_split(counts[ci], shape, parts);
  // a piece past the last, or no parts, covers nothing
  srv_copy_seg one = {.n = 100};
  cover c = {.segs = &one, .seg_at = (size_t[]){0}};
  srv_copy_piece(&one, 1, 100, 4, 4, record, &c);
  srv_copy_piece(&one, 1, 100, 0, 0, record, &c);
  CHECK(c.bytes == 0);
}

static void test_parts(void) {
  err e = {0};
  srv_copypool *p = NULL;
  CHECK_EQ_INT(srv_copypool_create(3, (size_t)1 << 20, &p, &e), 0);
  CHECK(srv_copy_parts(NULL, (size_t)1 << 30) == 1);
  CHECK(srv_copy_parts(p, ((size_t)1 << 20) - 1) == 1);  // below the threshold
  CHECK(srv_copy_parts(p, (size_t)1 << 20) == 4);        // three helpers and the caller
  CHECK(srv_copy_parts(p, (size_t)1 << 30) == 4);
  srv_copypool_destroy(p);
  CHECK_EQ_INT(srv_copypool_create(8, 0, &p, &e), 0);
  CHECK(srv_copy_parts(p, 3 * SRV_COPY_PIECE_MIN) == 3);  // no piece under the minimum
  CHECK(srv_copy_parts(p, 100) == 1);
  srv_copypool_destroy(p);
}

// --- copies

typedef struct list {
  srv_copy_seg *segs;
  size_t n;
  uint8_t *src, *dst, *want;
  size_t total;
} list;

// Segments over one source buffer, into one destination with gaps between
// them (a gather writes one contiguous run: the gaps check nothing spills).
static void list_make(list *l, size_t n, int shape) {
  l->n = n;
  l->segs = calloc(n ? n : 1, sizeof *l->segs);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    l->segs[i].n = seg_size(shape);
    total += l->segs[i].n;
  }
  l->total = total;
  l->src = malloc(total + 1);
  l->dst = calloc(1, 2 * total + 1);
  l->want = calloc(1, 2 * total + 1);
  uint64_t seed = next();  // distinct nonzero bytes, cheap to make (TSan runs this too)
  for (size_t i = 0; i < total; i++) l->src[i] = (uint8_t)((i * 131 + seed) % 255 + 1);
  size_t so = 0, doff = 0;
  for (size_t i = 0; i < n; i++) {
    doff += next() % 3;  // a gap before each destination
    l->segs[i].src = l->src + so;
    l->segs[i].dst = l->dst + doff;
    memcpy(l->want + doff, l->src + so, l->segs[i].n);
    so += l->segs[i].n;
    doff += l->segs[i].n;
  }
}

static void list_free(list *l) {
  free(l->segs);
  free(l->src);
  free(l->dst);
  free(l->want);
}

static int list_ok(const list *l) { return memcmp(l->dst, l->want, 2 * l->total + 1) == 0; }

static void test_copy(int threads, size_t min_bytes) {
  err e = {0};
  srv_copypool *p = NULL;
  CHECK_EQ_INT(srv_copypool_create(threads, min_bytes, &p, &e), 0);
  CHECK_EQ_INT(srv_copypool_threads(p), threads);
  CHECK(srv_copypool_min_bytes(p) == min_bytes);
  static const size_t counts[] = {0, 1, 2, 5, 24, 34, 100};
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
    for (int shape = 0; shape < 4; shape++) {
      if (shape >= 2 && counts[ci] > 34) continue;  // 34 big rows are enough, and quick under TSan
      list l;
      list_make(&l, counts[ci], shape);
      srv_copypool_copy(p, l.segs, l.n);
      if (!list_ok(&l)) fprintf(stderr, "copy of %zu segments, shape %d: wrong bytes\n", counts[ci], shape);
      CHECK(list_ok(&l));
      for (size_t i = 0; i < l.n; i++) CHECK_EQ_INT(atomic_load(&l.segs[i].faulted), 0);
      list_free(&l);
    }
  srv_copypool_destroy(p);
}

// Several instance threads copying through one pool at once.
typedef struct caller {
  srv_copypool *p;
  int rounds, wrong;
} caller;

static void *call_many(void *arg) {
  caller *c = arg;
  for (int r = 0; r < c->rounds; r++) {
    list l;
    list_make(&l, 24, r % 2 ? 2 : 3);
    srv_copypool_copy(c->p, l.segs, l.n);
    c->wrong += !list_ok(&l);
    list_free(&l);
  }
  return NULL;
}

static void test_callers(void) {
  err e = {0};
  srv_copypool *p = NULL;
  CHECK_EQ_INT(srv_copypool_create(2, 0, &p, &e), 0);
  enum { CALLERS = 4 };
  caller cs[CALLERS];
  pthread_t th[CALLERS];
  for (int i = 0; i < CALLERS; i++) cs[i] = (caller){.p = p, .rounds = 4};
  for (int i = 0; i < CALLERS; i++) CHECK(pthread_create(&th[i], NULL, call_many, &cs[i]) == 0);
  for (int i = 0; i < CALLERS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < CALLERS; i++) CHECK_EQ_INT(cs[i].wrong, 0);
  srv_copypool_destroy(p);
}

// --- srv_copypool_for

typedef struct counts {
  atomic_int *runs;
  atomic_int foreign;  // indices run on a helper
  pthread_t caller;
} counts;

static void count_one(void *ctx, size_t i) {
  counts *c = ctx;
  atomic_fetch_add(&c->runs[i], 1);
  if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->foreign, 1);
}

static void test_for(void) {
  err e = {0};
  srv_copypool *p = NULL;
  CHECK_EQ_INT(srv_copypool_create(3, 0, &p, &e), 0);
  for (size_t n = 0; n <= 70; n += n < 8 ? 1 : 9) {
    atomic_int runs[80];
    for (size_t i = 0; i < 80; i++) atomic_store(&runs[i], 0);
    counts c = {.runs = runs, .caller = pthread_self()};
    srv_copypool_for(p, n, count_one, &c);
    int once = 0;
    for (size_t i = 0; i < n; i++) once += atomic_load(&runs[i]) == 1;
    CHECK_EQ_INT(once, (int)n);
    for (size_t i = n; i < 80; i++) CHECK_EQ_INT(atomic_load(&runs[i]), 0);
  }
  // without a pool, all on the caller
  atomic_int runs[5] = {0};
  counts c = {.runs = runs, .caller = pthread_self()};
  srv_copypool_for(NULL, 5, count_one, &c);
  CHECK_EQ_INT(atomic_load(&c.foreign), 0);
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(atomic_load(&runs[i]), 1);
  srv_copypool_destroy(p);
  srv_copypool_destroy(NULL);
  CHECK_EQ_INT(srv_copypool_threads(NULL), 0);
  CHECK(srv_copypool_min_bytes(NULL) == SIZE_MAX);
  CHECK_EQ_INT(srv_copypool_create(0, 0, &p, &e), ERR_INVALID_ARGUMENT);
}

// --- a guarded segment over an object the client truncated

static void test_guarded(void) {
  err e = {0};
  CHECK_EQ_INT(srv_shmguard_install(&e), 0);
  size_t size = (size_t)1 << 20;
  int fd = memfd_create("copypool", 0);
  CHECK(fd >= 0 && ftruncate(fd, (off_t)size) == 0);
  uint8_t *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(map != MAP_FAILED);
  memset(map, 5, size);
  uint8_t *src = malloc(size), *dst = malloc(3 * size);
  memset(src, 9, size);
  srv_copypool *p = NULL;
  CHECK_EQ_INT(srv_copypool_create(3, 0, &p, &e), 0);
  srv_copy_seg segs[3];
  memset(segs, 0, sizeof segs);
  segs[0].dst = dst, segs[0].src = src, segs[0].n = size;
  segs[1].dst = dst + size, segs[1].src = map, segs[1].n = size, segs[1].guarded = 1;
  segs[2].dst = dst + 2 * size, segs[2].src = src, segs[2].n = size;
  srv_copypool_copy(p, segs, 3);  // intact: copied like the others
  CHECK_EQ_INT(atomic_load(&segs[1].faulted), 0);
  CHECK_EQ_INT(dst[size + size / 2], 5);
  CHECK_EQ_INT(ftruncate(fd, (off_t)(size / 4)), 0);  // the client shrinks it
  memset(dst, 0, 3 * size);
  srv_copypool_copy(p, segs, 3);
  CHECK_EQ_INT(atomic_load(&segs[0].faulted), 0);
  CHECK_EQ_INT(atomic_load(&segs[1].faulted), 1);
  CHECK_EQ_INT(atomic_load(&segs[2].faulted), 0);
  CHECK_EQ_INT(dst[size - 1], 9);  // the others still arrived whole
  CHECK_EQ_INT(dst[2 * size], 9);
  CHECK_EQ_INT(dst[3 * size - 1], 9);
  srv_copypool_destroy(p);
  munmap(map, size);
  close(fd);
  free(src);
  free(dst);
}

int main(void) {
  test_split();
  test_parts();
  test_copy(1, 0);
  test_copy(3, 0);
  test_copy(3, (size_t)1 << 20);  // small lists on the caller, big ones split
  test_for();
  test_guarded();
  test_callers();
  CHECK_DONE();
}
