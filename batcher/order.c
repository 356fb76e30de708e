// order.c: a growable ring of completion flags indexed by sequence number
// from the oldest not yet popped. begin, complete and pop are O(1)
// (amortised for begin, which may double the ring).
#include "batcher/order.h"

#include <stdlib.h>

struct bat_order {
  unsigned char *done;  // ring, cap a power of two; done[seq & (cap-1)]
  size_t cap;
  uint64_t base;  // oldest number not popped
  uint64_t next;  // next number to give out
};

int bat_order_create(bat_order **out, err *e) {
  bat_order *o = calloc(1, sizeof *o);
  if (!o) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  o->cap = 64;
  o->done = calloc(o->cap, 1);
  if (!o->done) {
    free(o);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  *out = o;
  return 0;
}

void bat_order_destroy(bat_order *o) {
  if (!o) return;
  free(o->done);
  free(o);
}

static int grow(bat_order *o) {
  size_t cap = o->cap * 2;
  unsigned char *d = calloc(cap, 1);
  if (!d) return -1;
  // re-index the outstanding window under the new mask
  for (uint64_t s = o->base; s < o->next; s++) d[s & (cap - 1)] = o->done[s & (o->cap - 1)];
  free(o->done);
  o->done = d;
  o->cap = cap;
  return 0;
}

int bat_order_begin(bat_order *o, uint64_t *seq, err *e) {
  if (o->next - o->base == o->cap && grow(o) != 0) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  o->done[o->next & (o->cap - 1)] = 0;
  *seq = o->next++;
  return 0;
}

int bat_order_complete(bat_order *o, uint64_t seq, err *e) {
  if (seq < o->base || seq >= o->next)
    return err_set(e, ERR_INVALID_ARGUMENT, "sequence number %llu is not outstanding", (unsigned long long)seq);
  unsigned char *f = &o->done[seq & (o->cap - 1)];
  if (*f) return err_set(e, ERR_INVALID_ARGUMENT, "sequence number %llu completed twice", (unsigned long long)seq);
  *f = 1;
  return 0;
}

int bat_order_pop(bat_order *o, uint64_t *seq) {
  if (o->base == o->next || !o->done[o->base & (o->cap - 1)]) return 0;
  o->done[o->base & (o->cap - 1)] = 0;
  *seq = o->base++;
  return 1;
}

size_t bat_order_outstanding(const bat_order *o) { return (size_t)(o->next - o->base); }
