// harness.h: fake clock, fake requests and batch recording shared by the
// batcher tests. Batches are recorded as "id id id" strings and counted per
// row total, as Triton's L0_batcher counts executions per batch size.
#ifndef INFERD_TESTS_BATCHER_HARNESS_H
#define INFERD_TESTS_BATCHER_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "batcher/batcher.h"
#include "check.h"

#define H_MAX_REQS 128
#define H_MAX_ROWS 64

typedef struct req {
  int id;
  int cancelled;
} req;

typedef struct harness {
  int64_t now;
  bat_batcher *b;
  req r[H_MAX_REQS];
  bat_item it[H_MAX_REQS];
  int n;
  int execs[H_MAX_ROWS + 1];  // executions per batch row count
  int n_execs;
  char last[512];  // ids of the last batch
  int last_exec;
  int64_t last_rows;
  int64_t last_seq;  // the last batch's seq_len (padded length)
} harness;

static int64_t h_clock(void *ctx) { return ((harness *)ctx)->now; }
static int h_cancelled(void *p) { return ((req *)p)->cancelled; }

static bat_config h_config(harness *h, int max_batch, int executors) {
  return (bat_config){.max_batch_size = max_batch, .n_executors = executors, .dynamic = 1,
                      .default_policy = {.timeout_action = BAT_TIMEOUT_REJECT},
                      .now = h_clock, .clock_ctx = h, .cancelled = h_cancelled};
}

static void h_init(harness *h, const bat_config *c) {
  memset(h, 0, sizeof *h);
  bat_config cc = *c;
  cc.clock_ctx = h;
  err e;
  int rc = bat_create(&cc, &h->b, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "bat_create: %s\n", e.msg);
}

// Enqueues request id = h->n; returns bat_enqueue's code.
static int h_enq_full(harness *h, int64_t rows, uint32_t prio, uint64_t shape, int64_t deadline, int64_t timeout,
                      err *e) {
  int id = h->n;
  h->r[id] = (req){id, 0};
  h->it[id] = (bat_item){.rows = rows, .priority = prio, .shape_key = shape, .deadline_us = deadline,
                         .timeout_us = timeout, .payload = &h->r[id]};
  int rc = bat_enqueue(h->b, &h->it[id], e);
  h->n++;
  return rc;
}

static int h_enq(harness *h, int64_t rows) {
  err e;
  int rc = h_enq_full(h, rows, 0, 0, INT64_MAX, 0, &e);
  CHECK_EQ_INT(rc, 0);
  return h->n - 1;
}

// Enqueues request id = h->n with a sequence length (padding tests).
static int h_enq_seq(harness *h, int64_t rows, uint64_t shape, int64_t seq, err *e) {
  int id = h->n;
  h->r[id] = (req){id, 0};
  h->it[id] = (bat_item){.rows = rows, .shape_key = shape, .seq_len = seq, .deadline_us = INT64_MAX,
                         .payload = &h->r[id]};
  int rc = bat_enqueue(h->b, &h->it[id], e);
  h->n++;
  return rc;
}

// One bat_next_batch call; records the batch. Returns 1 when one ran.
static int h_next(harness *h) {
  bat_batch bt;
  if (!bat_next_batch(h->b, &bt)) return 0;
  h->last[0] = 0;
  size_t n = 0;
  int64_t rows = 0;
  for (bat_item *it = bt.items; it; it = it->next) {
    size_t len = strlen(h->last);
    snprintf(h->last + len, sizeof h->last - len, "%s%d", len ? " " : "", ((req *)it->payload)->id);
    CHECK_EQ_INT(it->drop_reason, BAT_DROP_NONE);
    rows += it->rows;
    n++;
  }
  CHECK_EQ_INT(n, bt.n_items);
  CHECK_EQ_INT(rows, bt.rows);
  if (bt.rows <= H_MAX_ROWS) h->execs[bt.rows]++;
  h->n_execs++;
  h->last_exec = bt.executor;
  h->last_rows = bt.rows;
  h->last_seq = bt.seq_len;
  return 1;
}

// The dropped items as "id:R" with R = C(ancelled) D(eadline) T(imeout) S(hutdown).
static const char *h_drops(harness *h, char *buf, size_t cap) {
  buf[0] = 0;
  for (bat_item *it = bat_take_dropped(h->b); it; it = it->next) {
    size_t len = strlen(buf);
    char r = "NCDTS"[it->drop_reason];
    snprintf(buf + len, cap - len, "%s%d:%c", len ? " " : "", ((req *)it->payload)->id, r);
  }
  return buf;
}

#endif
