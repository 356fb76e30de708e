// engine/batch_sizes.c: the batch sizes prepared at load, in the order they
// are prepared, within a budget (batch_sizes.h says why and how).
#include "engine/batch_sizes.h"

#include <stdlib.h>
#include <string.h>

// --- the order

typedef struct builder {
  int *order;
  size_t n, cap;
  uint8_t *taken;  // per size 0..max
  int max;
} builder;

static void add(builder *o, int s) {
  if (s < 1 || s > o->max || o->taken[s] || o->n >= o->cap) return;
  o->taken[s] = 1;
  o->order[o->n++] = s;
}

int eng_bsizes_init(eng_bsizes *b, int max_batch, const int *must, size_t n_must, int64_t budget_ns, size_t cap,
                    err *e) {
  memset(b, 0, sizeof *b);
  if (max_batch < 0) return err_set(e, ERR_INVALID_ARGUMENT, "max_batch_size %d is negative", max_batch);
  int max = max_batch > 0 ? max_batch : 1;
  if (cap == 0) cap = ENG_PREPARE_MAX_SIZES;
  if (cap > (size_t)max) cap = (size_t)max;
  size_t room = cap + n_must + 2;  // the must-haves go in whatever the cap
  builder o = {.order = malloc(room * sizeof *o.order), .cap = room, .taken = calloc((size_t)max + 1, 1), .max = max};
  b->rows = malloc(room * sizeof *b->rows);
  b->ns = malloc(room * sizeof *b->ns);
  if (!o.order || !o.taken || !b->rows || !b->ns) {
    free(o.order);
    free(o.taken);
    free(b->rows);
    free(b->ns);
    memset(b, 0, sizeof *b);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  // 1 and the largest first: the smallest and the most expensive size
  // bound every estimate between them
  add(&o, 1);
  add(&o, max);
  for (size_t i = 0; i < n_must; i++) add(&o, must[i]);
  b->n_must = o.n;
  size_t want = o.n > cap ? o.n : cap;
  o.cap = want;
  for (int s = 2; s < max; s *= 2) add(&o, s);  // powers of two
  for (int s = 1; s < max;) {  // ~1.25x steps
    int nx = s + s / 4;
    s = nx > s ? nx : s + 1;
    add(&o, s);
  }
  // the rest in bisection order: multiples of 2^k for k down to 1, then odd sizes
  int top = 1;
  while (top * 2 <= max) top *= 2;
  for (int step = top; step >= 1 && o.n < o.cap; step /= 2)
    for (int s = step; s <= max && o.n < o.cap; s += step) add(&o, s);
  free(o.taken);
  b->order = o.order;
  b->n_order = o.n;
  b->max_batch = max_batch;
  b->budget_ns = budget_ns;
  return 0;
}

void eng_bsizes_close(eng_bsizes *b) {
  free(b->order);
  free(b->rows);
  free(b->ns);
  memset(b, 0, sizeof *b);
}

// --- choosing within the budget

uint64_t eng_bsizes_estimate(const eng_bsizes *b, int rows) {
  int lo = 0, hi = 0;
  uint64_t lo_ns = 0, hi_ns = 0;
  for (size_t i = 0; i < b->n_done; i++) {
    int r = b->rows[i];
    if (r == rows) return b->ns[i];
    if (r < rows && r > lo) lo = r, lo_ns = b->ns[i];
    if (r > rows && (!hi || r < hi)) hi = r, hi_ns = b->ns[i];
  }
  if (!lo && !hi) return 0;
  if (!hi) return lo_ns;
  if (!lo) return hi_ns;
  double f = (double)(rows - lo) / (double)(hi - lo);
  return (uint64_t)((double)lo_ns + f * ((double)hi_ns - (double)lo_ns));
}

int eng_bsizes_next(eng_bsizes *b, int64_t elapsed_ns) {
  while (b->next < b->n_order) {
    size_t i = b->next++;
    int s = b->order[i];
    if (i < b->n_must) return s;
    if (b->budget_ns < 0) return s;
    if (elapsed_ns >= b->budget_ns) {  // nothing more fits
      b->next = b->n_order;
      return 0;
    }
    if (elapsed_ns + (int64_t)eng_bsizes_estimate(b, s) <= b->budget_ns) return s;
  }
  return 0;
}

void eng_bsizes_measured(eng_bsizes *b, int rows, uint64_t ns) {
  for (size_t i = 0; i < b->n_done; i++)
    if (b->rows[i] == rows) {
      b->ns[i] = ns;
      return;
    }
  if (b->n_done >= b->n_order) return;  // room for every size of the order once
  b->rows[b->n_done] = rows;
  b->ns[b->n_done++] = ns;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

size_t eng_bsizes_sorted(const eng_bsizes *b, int *out) {
  memcpy(out, b->rows, b->n_done * sizeof *out);
  qsort(out, b->n_done, sizeof *out, cmp_int);
  return b->n_done;
}

int eng_bsizes_bucket(const int *sorted, size_t n, int rows) {
  size_t lo = 0, hi = n;  // the first >= rows
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (sorted[mid] < rows) lo = mid + 1;
    else hi = mid;
  }
  return lo < n ? sorted[lo] : 0;
}

int eng_bsizes_parse(const char *s, int max_batch, int **out, size_t *n_out, err *e) {
  *out = NULL;
  *n_out = 0;
  size_t cap = 1;
  for (const char *c = s; *c; c++) cap += *c == ',';
  int *v = malloc(cap * sizeof *v);
  if (!v) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  size_t n = 0;
  const char *c = s;
  for (;;) {
    char *end = NULL;
    long x = strtol(c, &end, 10);
    if (end == c || (*end && *end != ',') || x < 1 || x > (max_batch > 0 ? max_batch : 1)) {
      free(v);
      return err_set(e, ERR_INVALID_ARGUMENT, "batch size list '%s': each entry must be a size 1..%d", s,
                     max_batch > 0 ? max_batch : 1);
    }
    v[n++] = (int)x;
    if (!*end) break;
    c = end + 1;
  }
  *out = v;
  *n_out = n;
  return 0;
}

const char *eng_lazy_cause_str(eng_lazy_cause c) {
  static const char *const names[ENG_LAZY_CAUSES] = {"graph", "stale_graph", "gemm", "cudnn"};
  return (unsigned)c < ENG_LAZY_CAUSES ? names[c] : "?";
}
