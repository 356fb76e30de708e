// batcher.c: FIFO scheduling, one request per execution, over a set of
// engine instances. See batcher.h for the contract.
#include "batcher/batcher.h"

#include <stdlib.h>

struct bat_batcher {
  bat_config cfg;
  bat_item *head, *tail;
  size_t queued;
  bat_item *dropped;  // LIFO is fine: each gets its own status
  unsigned char *busy;  // per instance
  int n_free;
};

int bat_create(const bat_config *c, bat_batcher **out, err *e) {
  if (c->n_instances <= 0) return err_set(e, ERR_INVALID_ARGUMENT, "batcher needs at least one instance");
  if (!c->now) return err_set(e, ERR_INVALID_ARGUMENT, "batcher needs a clock");
  bat_batcher *b = calloc(1, sizeof *b);
  if (!b) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  b->busy = calloc((size_t)c->n_instances, 1);
  if (!b->busy) {
    free(b);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  b->cfg = *c;
  b->n_free = c->n_instances;
  *out = b;
  return 0;
}

void bat_destroy(bat_batcher *b) {
  if (!b) return;
  free(b->busy);
  free(b);
}

int bat_enqueue(bat_batcher *b, bat_item *it, err *e) {
  if (it->rows < 1 || (b->cfg.max_batch_size > 0 && it->rows > b->cfg.max_batch_size))
    return err_set(e, ERR_INVALID_ARGUMENT, "batch size %lld is outside 1..max_batch_size %d",
                   (long long)it->rows, b->cfg.max_batch_size);
  if (b->cfg.max_queue_size && b->queued >= b->cfg.max_queue_size)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "queue is full (max_queue_size %zu)", b->cfg.max_queue_size);
  it->arrival_us = b->cfg.now(b->cfg.clock_ctx);
  it->next = NULL;
  if (b->tail) b->tail->next = it;
  else b->head = it;
  b->tail = it;
  b->queued++;
  return 0;
}

static bat_item *pop(bat_batcher *b) {
  bat_item *it = b->head;
  if (!it) return NULL;
  b->head = it->next;
  if (!b->head) b->tail = NULL;
  it->next = NULL;
  b->queued--;
  return it;
}

// Moves every queued item that is past its deadline or cancelled to the
// dropped list, so it gets its status even while all instances are busy.
static void sweep(bat_batcher *b, int64_t now) {
  bat_item **link = &b->head, *prev = NULL;
  while (*link) {
    bat_item *it = *link;
    int gone = it->deadline_us <= now || (b->cfg.cancelled && b->cfg.cancelled(it->payload));
    if (!gone) {
      prev = it;
      link = &it->next;
      continue;
    }
    *link = it->next;
    if (b->tail == it) b->tail = prev;
    b->queued--;
    it->next = b->dropped;
    b->dropped = it;
  }
}

int bat_next_batch(bat_batcher *b, bat_batch *out) {
  sweep(b, b->cfg.now(b->cfg.clock_ctx));
  if (b->n_free == 0) return 0;
  bat_item *it = pop(b);
  if (!it) return 0;
  int inst = 0;
  while (b->busy[inst]) inst++;
  b->busy[inst] = 1;
  b->n_free--;
  out->items = it;
  out->n_items = 1;
  out->rows = it->rows;
  out->instance = inst;
  return 1;
}

bat_item *bat_take_dropped(bat_batcher *b) {
  bat_item *d = b->dropped;
  b->dropped = NULL;
  return d;
}

void bat_release_instance(bat_batcher *b, int instance) {
  if (instance < 0 || instance >= b->cfg.n_instances || !b->busy[instance]) return;
  b->busy[instance] = 0;
  b->n_free++;
}

int64_t bat_next_wakeup(const bat_batcher *b) {
  // Queued requests with deadlines must be dropped on time even while every
  // instance is busy: wake at the earliest one.
  int64_t w = INT64_MAX;
  for (const bat_item *it = b->head; it; it = it->next)
    if (it->deadline_us < w) w = it->deadline_us;
  return w;
}

size_t bat_queued(const bat_batcher *b) { return b->queued; }
int bat_free_instances(const bat_batcher *b) { return b->n_free; }
