// Tests batcher/sequence.c with a fake clock: which items run together and
// on which instance (Direct's slots), that a sequence never has two items in
// flight, the backlog, idle expiry, Oldest's batching, the refusals with
// Triton's wording, and the control values.
#include <stdio.h>
#include <string.h>

#include "batcher/sequence.h"
#include "check.h"

#define MAX_ITEMS 256

typedef struct fix {
  int64_t now;
  bat_seq *b;
  bat_seq_item it[MAX_ITEMS];
  int cancelled[MAX_ITEMS];
  int n;
  char last[256];  // "id id id" of the last batch (id = index in it[])
  int last_exec;
  err e;
} fix;

static int64_t f_clock(void *ctx) { return ((fix *)ctx)->now; }
static int f_cancelled(void *p) { return *(int *)p; }

static bat_seq_config f_config(fix *f, bat_seq_strategy st, int max_batch, int n_exec, const int *inst, int n_inst) {
  return (bat_seq_config){.strategy = st, .max_batch_size = max_batch, .n_executors = n_exec,
                          .exec_instance = inst, .n_instances = n_inst, .max_idle_us = 1000,
                          .now = f_clock, .clock_ctx = f, .cancelled = f_cancelled};
}

static void f_init(fix *f, const bat_seq_config *c) {
  memset(f, 0, sizeof *f);
  bat_seq_config cc = *c;
  cc.clock_ctx = f;
  err e;
  int rc = bat_seq_create(&cc, &f->b, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "bat_seq_create: %s\n", e.msg);
}

// Enqueues item f->n for numeric ID id; returns the code.
static int f_enq(fix *f, uint64_t id, unsigned flags) {
  int k = f->n;
  f->it[k] = (bat_seq_item){.id = {.num = id}, .flags = flags, .rows = 1, .deadline_us = INT64_MAX,
                            .payload = &f->cancelled[k]};
  int rc = bat_seq_enqueue(f->b, &f->it[k], "m", &f->e);
  if (rc == 0) f->n++;
  return rc;
}

static int f_enq_str(fix *f, const char *id, unsigned flags) {
  int k = f->n;
  f->it[k] = (bat_seq_item){.id = {.str = id, .len = strlen(id)}, .flags = flags, .rows = 1,
                            .deadline_us = INT64_MAX, .payload = &f->cancelled[k]};
  int rc = bat_seq_enqueue(f->b, &f->it[k], "m", &f->e);
  if (rc == 0) f->n++;
  return rc;
}

static int f_next(fix *f) {
  bat_seq_batch bb;
  if (!bat_seq_next_batch(f->b, &bb)) return 0;
  size_t o = 0;
  f->last[0] = 0;
  size_t n = 0;
  for (bat_seq_item *it = bb.items; it; it = it->next, n++)
    o += (size_t)snprintf(f->last + o, sizeof f->last - o, "%s%d", o ? " " : "", (int)(it - f->it));
  CHECK_EQ_INT(n, bb.n_items);
  CHECK_EQ_INT(bb.rows, (int64_t)n);
  f->last_exec = bb.executor;
  return 1;
}

static const char *f_drops(fix *f, char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = 0;
  for (bat_seq_item *it = bat_seq_take_dropped(f->b); it; it = it->next)
    o += (size_t)snprintf(buf + o, cap - o, "%s%d:%d", o ? " " : "", (int)(it - f->it), (int)it->drop_reason);
  return buf;
}

// --- refusals

static void test_refusals(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 4, 1, inst, 1);
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 0, BAT_SEQ_START), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(f.e.msg, "inference request to model 'm' must specify a non-zero or non-empty correlation ID");
  CHECK_EQ_INT(f_enq_str(&f, "", BAT_SEQ_START), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(f_enq(&f, 7, 0), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(f.e.msg,
               "inference request for sequence 7 to model 'm' must specify the START flag on the first request of "
               "the sequence");
  CHECK_EQ_INT(f_enq_str(&f, "abc", BAT_SEQ_END), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(f.e.msg,
               "inference request for sequence abc to model 'm' must specify the START flag on the first request of "
               "the sequence");
  f.it[f.n] = (bat_seq_item){.id = {.num = 9}, .flags = BAT_SEQ_START, .rows = 2, .deadline_us = INT64_MAX};
  CHECK_EQ_INT(bat_seq_enqueue(f.b, &f.it[f.n], "m", &f.e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(f.e.msg, "inference request to model 'm' must specify batch-size 1 due to requirements of sequence batcher");
  // after END, the ID is unknown again (once the END ran)
  CHECK_EQ_INT(f_enq(&f, 7, BAT_SEQ_START | BAT_SEQ_END), 0);
  CHECK_EQ_INT(f_enq(&f, 7, 0), ERR_INVALID_ARGUMENT);  // already ended: a new one needs START
  CHECK_EQ_INT(bat_seq_sequences(f.b), 1);
  CHECK_EQ_INT(f_next(&f), 1);
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(bat_seq_sequences(f.b), 0);
  CHECK_EQ_INT(f_enq(&f, 7, 0), ERR_INVALID_ARGUMENT);
  bat_seq_destroy(f.b);
}

// --- Direct

// Two interleaved sequences on one instance: each batch takes one item of
// each, in slot order, and a sequence's next item waits for the previous.
static void test_direct_interleaved(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 4, 1, inst, 1);
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 1000, BAT_SEQ_START), 0);  // 0
  CHECK_EQ_INT(f_enq(&f, 1001, BAT_SEQ_START), 0);  // 1
  CHECK_EQ_INT(f_enq(&f, 1000, 0), 0);              // 2
  CHECK_EQ_INT(f_enq(&f, 1001, 0), 0);              // 3
  CHECK_EQ_INT(f_enq(&f, 1000, BAT_SEQ_END), 0);    // 4
  CHECK_EQ_INT(f_enq(&f, 1001, BAT_SEQ_END), 0);    // 5
  CHECK_EQ_INT(bat_seq_queued(f.b), 6);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0 1");
  CHECK_EQ_INT(f_next(&f), 0);  // the executor is busy
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "2 3");
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "4 5");
  CHECK_EQ_INT(bat_seq_sequences(f.b), 2);  // held until their END items complete
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(bat_seq_sequences(f.b), 0);
  CHECK_EQ_INT(bat_seq_next_wakeup(f.b), INT64_MAX);
  bat_seq_destroy(f.b);
}

// Two instances, one executor each: sequences spread over the instances and
// stay there; with two executors on one instance a sequence's second item
// still waits for its first.
static void test_direct_instances(void) {
  fix f;
  int inst[3] = {0, 1, 0};  // instance 0 pipelines two batches
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 2, 3, inst, 2);
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 0 -> instance 0
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);  // 1 -> instance 1 (fewest held)
  CHECK_EQ_INT(f_enq(&f, 3, BAT_SEQ_START), 0);  // 2 -> instance 0
  CHECK_EQ_INT(f_enq(&f, 1, 0), 0);              // 3
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0 2");
  CHECK_EQ_INT(f.last_exec, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "1");
  CHECK_EQ_INT(f.last_exec, 1);
  // executor 2 (instance 0) is free, but sequence 1's item 3 waits for item 0
  CHECK_EQ_INT(f_next(&f), 0);
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "3");
  CHECK_EQ_INT(f.last_exec, 2);  // instance 0's other executor: the sequence stays on instance 0
  // a fifth sequence: every slot (2 instances x 2) holds one but one
  CHECK_EQ_INT(f_enq(&f, 4, BAT_SEQ_START), 0);  // 4 -> instance 1
  CHECK_EQ_INT(f_enq(&f, 5, BAT_SEQ_START), 0);  // 5 -> backlog
  CHECK_EQ_INT(bat_seq_backlog(f.b), 1);
  CHECK_EQ_INT(f_next(&f), 0);  // instance 1's executor still runs item 1
  bat_seq_release_executor(f.b, 1, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "4");
  CHECK_EQ_INT(f.last_exec, 1);
  // sequence 3 idles out (since 0): 5 takes its slot on instance 0
  f.now = 1000;
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "5");
  CHECK_EQ_INT(f.last_exec, 0);  // instance 0's free executor
  CHECK_EQ_INT(bat_seq_backlog(f.b), 0);
  CHECK_EQ_INT(bat_seq_sequences(f.b), 3);  // 1, 4, 5: sequence 2 idled out too
  bat_seq_destroy(f.b);
}

// The backlog: a sixth sequence waits for a slot, takes the one freed by
// an END, and runs on that slot's instance.
static void test_direct_backlog(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 2, 1, inst, 1);
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 0
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);  // 1
  CHECK_EQ_INT(f_enq(&f, 3, BAT_SEQ_START), 0);  // 2: backlog
  CHECK_EQ_INT(f_enq(&f, 3, 0), 0);              // 3: queues behind it
  CHECK_EQ_INT(bat_seq_backlog(f.b), 1);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0 1");
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_END), 0);  // 4
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "4");
  CHECK_EQ_INT(bat_seq_backlog(f.b), 1);
  bat_seq_release_executor(f.b, 0, 0);  // sequence 1 ends: 3 takes its slot
  CHECK_EQ_INT(bat_seq_backlog(f.b), 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "2");
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "3");
  bat_seq_release_executor(f.b, 0, 0);
  bat_seq_destroy(f.b);
}

// Idle expiry: a sequence with nothing queued or running for max_idle_us
// frees its slot; a later item without START is refused; the wakeup says when.
static void test_idle(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 1, 1, inst, 1);
  f_init(&f, &c);
  f.now = 100;
  CHECK_EQ_INT(f_enq(&f, 5, BAT_SEQ_START), 0);  // 0
  CHECK_EQ_INT(f_enq(&f, 6, BAT_SEQ_START), 0);  // 1: backlog (one slot)
  CHECK_EQ_INT(f_next(&f), 1);
  f.now = 150;
  bat_seq_release_executor(f.b, 0, 0);  // 5 idles from 150
  CHECK_EQ_INT(f_next(&f), 0);          // 6 waits for the slot
  CHECK_EQ_INT(bat_seq_next_wakeup(f.b), 1150);
  f.now = 1149;
  CHECK_EQ_INT(f_enq(&f, 5, 0), 0);  // 2: in time; the sequence is busy again
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "2");
  CHECK_EQ_INT(bat_seq_next_wakeup(f.b), 100 + 100000);  // no idle sequence: only the backlog sweep
  f.now = 1200;
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(bat_seq_next_wakeup(f.b), 2200);
  f.now = 2199;
  CHECK_EQ_INT(f_next(&f), 0);
  CHECK_EQ_INT(bat_seq_sequences(f.b), 2);
  f.now = 2200;  // inclusive, as the dynamic batcher's boundaries
  CHECK_EQ_INT(f_next(&f), 1);  // 5 expired: 6 took its slot
  CHECK_EQ_STR(f.last, "1");
  CHECK_EQ_INT(bat_seq_sequences(f.b), 1);
  CHECK_EQ_INT(f_enq(&f, 5, 0), ERR_INVALID_ARGUMENT);
  CHECK(strstr(f.e.msg, "sequence 5 to model 'm' must specify the START flag") != NULL);
  bat_seq_release_executor(f.b, 0, 0);
  bat_seq_destroy(f.b);
}

// A START for an ID still held queues behind its items (back-to-back
// sequences of one ID); cancelled and expired items leave at the head.
static void test_restart_cancel_deadline(void) {
  fix f;
  char buf[128];
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 4, 1, inst, 1);
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 8, BAT_SEQ_START), 0);  // 0
  CHECK_EQ_INT(f_enq(&f, 8, BAT_SEQ_END), 0);    // 1
  CHECK_EQ_INT(f_enq(&f, 8, BAT_SEQ_START), 0);  // 2: a new sequence of ID 8
  CHECK_EQ_INT(f_enq(&f, 8, 0), 0);              // 3
  CHECK_EQ_INT(f_enq(&f, 9, BAT_SEQ_START), 0);  // 4
  f.cancelled[4] = 1;
  f.it[3].deadline_us = 50;
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0");
  CHECK_EQ_STR(f_drops(&f, buf, sizeof buf), "4:1");  // cancelled
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "1");
  bat_seq_release_executor(f.b, 0, 0);
  // 8 goes on (its new START is queued); 9 lost its START but is held until it idles out
  CHECK_EQ_INT(bat_seq_sequences(f.b), 2);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "2");
  f.now = 60;
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 0);
  CHECK_EQ_STR(f_drops(&f, buf, sizeof buf), "3:2");  // deadline
  bat_seq_destroy(f.b);
}

// An instance that failed for good (its executors retired): the sequences
// bound to it end with their queued items; new ones go elsewhere.
static void test_instance_retired(void) {
  fix f;
  char buf[128];
  int inst[2] = {0, 1};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 2, 2, inst, 2);
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 0 -> instance 0
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);  // 1 -> instance 1
  CHECK_EQ_INT(f_enq(&f, 3, BAT_SEQ_START), 0);  // 2 -> instance 0
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0 2");
  CHECK_EQ_INT(f_enq(&f, 1, 0), 0);  // 3
  CHECK_EQ_INT(f_enq(&f, 3, 0), 0);  // 4
  bat_seq_release_executor(f.b, 0, 1);  // instance 0 is dead
  CHECK_EQ_STR(f_drops(&f, buf, sizeof buf), "3:5 4:5");
  CHECK_EQ_INT(bat_seq_sequences(f.b), 1);
  CHECK_EQ_INT(f_enq(&f, 1, 0), ERR_INVALID_ARGUMENT);  // its sequences ended
  CHECK_EQ_INT(f_enq(&f, 4, BAT_SEQ_START), 0);          // 5 -> instance 1, the live one
  CHECK_EQ_INT(f_enq(&f, 5, BAT_SEQ_START), 0);          // 6 -> backlog: instance 1 holds 2 of 2
  CHECK_EQ_INT(bat_seq_backlog(f.b), 1);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "1 5");
  CHECK_EQ_INT(f.last_exec, 1);
  bat_seq_release_executor(f.b, 1, 0);
  bat_seq_flush(f.b);
  f_drops(&f, buf, sizeof buf);
  bat_seq_destroy(f.b);
}

// The backlog is swept for cancelled and expired items every 100 ms while
// it holds any (its sequences may wait long: an idle one keeps its slot).
static void test_backlog_sweep(void) {
  fix f;
  char buf[128];
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 1, 1, inst, 1);
  c.max_idle_us = 10000000;
  f_init(&f, &c);
  f.now = 1000;
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 0: holds the one slot
  CHECK_EQ_INT(f_next(&f), 1);
  bat_seq_release_executor(f.b, 0, 0);            // 1 idles, keeping the slot
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);  // 1: backlog
  CHECK_EQ_INT(f_enq(&f, 2, 0), 0);              // 2
  CHECK_EQ_INT(f_enq(&f, 3, BAT_SEQ_START), 0);  // 3: backlog
  f.it[2].deadline_us = 1500;
  CHECK_EQ_INT(f_next(&f), 0);  // the first sweep, at once: nothing to drop yet
  CHECK_EQ_INT(bat_seq_next_wakeup(f.b), 1000 + 100000);
  f.cancelled[3] = 1;
  f.now = 50000;
  CHECK_EQ_INT(f_next(&f), 0);  // not before the next sweep
  CHECK_EQ_STR(f_drops(&f, buf, sizeof buf), "");
  f.now = 101000;
  CHECK_EQ_INT(f_next(&f), 0);
  CHECK_EQ_STR(f_drops(&f, buf, sizeof buf), "2:2 3:1");
  CHECK_EQ_INT(bat_seq_backlog(f.b), 1);     // 3 had nothing left: forgotten
  CHECK_EQ_INT(bat_seq_sequences(f.b), 2);
  CHECK_EQ_INT(bat_seq_queued(f.b), 1);
  CHECK_EQ_INT(f_enq(&f, 3, 0), ERR_INVALID_ARGUMENT);
  bat_seq_destroy(f.b);
}

// --- Oldest

// Candidates oldest first, one item per sequence per batch; a batch short
// of the preferred size waits the queue delay.
static void test_oldest(void) {
  fix f;
  int inst[2] = {0, 0};  // one instance running two batches at once
  int pref[1] = {3};
  bat_seq_config c = f_config(&f, BAT_SEQ_OLDEST, 4, 2, inst, 1);
  c.max_candidates = 3;
  c.max_queue_delay_us = 100;
  c.preferred = pref;
  c.n_preferred = 1;
  f_init(&f, &c);
  f.now = 10;
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 0
  f.now = 11;
  CHECK_EQ_INT(f_enq(&f, 1, 0), 0);  // 1: sequence 1's second item
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);  // 2
  CHECK_EQ_INT(f_next(&f), 0);  // two candidates < preferred 3: held
  CHECK_EQ_INT(bat_seq_next_wakeup(f.b), 110);
  CHECK_EQ_INT(f_enq(&f, 3, BAT_SEQ_START), 0);  // 3
  CHECK_EQ_INT(f_enq(&f, 4, BAT_SEQ_START), 0);  // 4: backlog (3 candidates)
  CHECK_EQ_INT(f_next(&f), 1);                    // the preferred size: at once
  CHECK_EQ_STR(f.last, "0 2 3");
  CHECK_EQ_INT(f.last_exec, 0);
  CHECK_EQ_INT(f_next(&f), 0);  // item 1 waits for item 0; 4 waits for a slot
  f.now = 20;
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 0);  // one candidate: held until 11 + 100
  CHECK_EQ_INT(bat_seq_next_wakeup(f.b), 111);
  f.now = 111;
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "1");
  CHECK_EQ_INT(f.last_exec, 1);  // round robin over the executors
  bat_seq_release_executor(f.b, 1, 0);
  bat_seq_destroy(f.b);
}

// Oldest keeps a sequence on one instance too (Triton's docs: "all
// inference requests in a sequence are routed to the same model
// instance"), with max_candidate_sequences per instance.
static void test_oldest_instances(void) {
  fix f;
  int inst[2] = {0, 1};
  bat_seq_config c = f_config(&f, BAT_SEQ_OLDEST, 4, 2, inst, 2);
  c.max_candidates = 2;
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 0 -> instance 0
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);  // 1 -> instance 1
  CHECK_EQ_INT(f_enq(&f, 3, BAT_SEQ_START), 0);  // 2 -> instance 0
  CHECK_EQ_INT(f_enq(&f, 4, BAT_SEQ_START), 0);  // 3 -> instance 1
  CHECK_EQ_INT(f_enq(&f, 5, BAT_SEQ_START), 0);  // 4 -> backlog (2 x 2 candidates)
  CHECK_EQ_INT(bat_seq_backlog(f.b), 1);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0 2");
  CHECK_EQ_INT(f.last_exec, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "1 3");
  CHECK_EQ_INT(f.last_exec, 1);
  CHECK_EQ_INT(f_enq(&f, 1, 0), 0);  // 5: sequence 1 stays on instance 0
  bat_seq_release_executor(f.b, 1, 0);
  CHECK_EQ_INT(f_next(&f), 0);  // instance 1's executor is free, but 5 is instance 0's
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "5");
  CHECK_EQ_INT(f.last_exec, 0);
  bat_seq_release_executor(f.b, 0, 0);
  bat_seq_destroy(f.b);
}

// Oldest without a delay sends what is ready at once, up to max_batch_size.
static void test_oldest_no_delay(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_OLDEST, 2, 1, inst, 1);
  c.max_candidates = 8;
  f_init(&f, &c);
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(f_enq(&f, (uint64_t)(10 + i), BAT_SEQ_START | BAT_SEQ_END), 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0 1");
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "2");
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(bat_seq_sequences(f.b), 0);
  bat_seq_destroy(f.b);
}

// String IDs are their bytes: "12" and 12 are two sequences.
static void test_string_ids(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 4, 1, inst, 1);
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq_str(&f, "12", BAT_SEQ_START), 0);
  CHECK_EQ_INT(f_enq(&f, 12, 0), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(f_enq_str(&f, "12", 0), 0);
  CHECK_EQ_INT(bat_seq_sequences(f.b), 1);
  bat_seq_flush(f.b);
  char buf[64];
  CHECK_EQ_STR(f_drops(&f, buf, sizeof buf), "0:4 1:4");
  bat_seq_destroy(f.b);
}

// Many sequences: the hash grows, every one is found again.
static void test_many(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_OLDEST, 8, 1, inst, 1);
  c.max_candidates = 4;
  f_init(&f, &c);
  for (int i = 0; i < 200; i++) CHECK_EQ_INT(f_enq(&f, (uint64_t)(i + 1), BAT_SEQ_START), 0);
  CHECK_EQ_INT(bat_seq_sequences(f.b), 200);
  CHECK_EQ_INT(bat_seq_backlog(f.b), 196);
  for (int i = 0; i < 50; i++) CHECK_EQ_INT(f_enq(&f, (uint64_t)(i + 1), BAT_SEQ_END), 0);
  int runs = 0;
  while (f_next(&f)) {
    runs++;
    bat_seq_release_executor(f.b, 0, 0);
  }
  // 1..50 ran and ended; 51..54 ran their START and hold the 4 slots (idle);
  // 55..200 wait in the backlog with their START
  CHECK_EQ_INT(bat_seq_queued(f.b), 146);
  CHECK_EQ_INT(bat_seq_backlog(f.b), 146);
  // 48 sequences in 12 rounds of 2 batches (STARTs, ENDs), then 49-52 STARTs, 49-50 ENDs, 53-54 STARTs
  CHECK_EQ_INT(runs, 24 + 3);
  bat_seq_flush(f.b);
  char buf[4096];
  f_drops(&f, buf, sizeof buf);
  CHECK(runs > 0);
  bat_seq_destroy(f.b);
}

// Implicit state: each sequence's bytes, zeros at START (also when an ID
// starts again back to back), handed with its items.
static void test_state(void) {
  fix f;
  int inst[1] = {0};
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 4, 1, inst, 1);
  c.state_bytes = 8;
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 0
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);  // 1
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_END), 0);    // 2
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START), 0);  // 3: ID 1 again
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0 1");
  CHECK(f.it[0].state != NULL && f.it[1].state != NULL && f.it[0].state != f.it[1].state);
  if (!f.it[0].state || !f.it[1].state) return;
  for (int i = 0; i < 8; i++) CHECK_EQ_INT(f.it[0].state[i], 0);
  memset(f.it[0].state, 7, 8);  // the model's next state, written by the caller
  memset(f.it[1].state, 9, 8);
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "2");
  CHECK(f.it[2].state == f.it[0].state);
  CHECK_EQ_INT(f.it[2].state[5], 7);  // kept from the previous request
  bat_seq_release_executor(f.b, 0, 0);
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "3");
  CHECK_EQ_INT(f.it[3].state[5], 0);  // a START begins from zeros
  bat_seq_release_executor(f.b, 0, 0);
  bat_seq_destroy(f.b);

  // one slot: a backlogged sequence has no state until it takes the slot,
  // then the slot's bytes, zeroed, even when its START was cancelled
  c = f_config(&f, BAT_SEQ_DIRECT, 1, 1, inst, 1);
  c.state_bytes = 8;
  f_init(&f, &c);
  CHECK_EQ_INT(f_enq(&f, 1, BAT_SEQ_START | BAT_SEQ_END), 0);  // 0
  CHECK_EQ_INT(f_enq(&f, 2, BAT_SEQ_START), 0);                // 1: backlog
  CHECK_EQ_INT(f_enq(&f, 2, 0), 0);                            // 2
  f.cancelled[1] = 1;
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "0");
  unsigned char *slot0 = f.it[0].state;
  if (slot0) memset(slot0, 5, 8);
  bat_seq_release_executor(f.b, 0, 0);  // 1 ends: 2 takes the slot
  CHECK_EQ_INT(f_next(&f), 1);
  CHECK_EQ_STR(f.last, "2");  // its START was cancelled at the head
  CHECK(f.it[2].state == slot0);
  if (f.it[2].state) CHECK_EQ_INT(f.it[2].state[3], 0);
  char buf[32];
  CHECK_EQ_STR(f_drops(&f, buf, sizeof buf), "1:1");
  bat_seq_release_executor(f.b, 0, 0);
  bat_seq_destroy(f.b);
}

// --- control values

static void test_controls(void) {
  err e;
  int32_t i32;
  float f32;
  uint8_t b;
  double ft[2] = {0, 1};
  CHECK_EQ_INT(bat_seq_control_flag(DT_INT32, ft, 1, &i32, &e), 0);
  CHECK_EQ_INT(i32, 1);
  double ft2[2] = {-1.5, 2.5};
  CHECK_EQ_INT(bat_seq_control_flag(DT_FP32, ft2, 0, &f32, &e), 0);
  CHECK(f32 == -1.5f);
  double ftb[2] = {1, 0};
  CHECK_EQ_INT(bat_seq_control_flag(DT_BOOL, ftb, 1, &b, &e), 0);
  CHECK_EQ_INT(b, 0);
  CHECK_EQ_INT(bat_seq_control_flag(DT_INT64, ft, 1, &b, &e), ERR_INVALID_ARGUMENT);

  uint64_t u64;
  int32_t c32;
  bat_seq_id id = {.num = 1000};
  CHECK_EQ_INT(bat_seq_control_corrid(DT_UINT64, &id, &u64, &e), 0);
  CHECK_EQ_INT(u64, 1000);
  bat_seq_id sid = {.str = "1002", .len = 4};
  CHECK_EQ_INT(bat_seq_control_corrid(DT_INT32, &sid, &c32, &e), 0);
  CHECK_EQ_INT(c32, 1002);
  bat_seq_id big = {.num = (uint64_t)INT32_MAX + 1};
  CHECK_EQ_INT(bat_seq_control_corrid(DT_INT32, &big, &c32, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "correlation ID 2147483648 does not fit the model's CORRID control (INT32)");
  bat_seq_id uuid = {.str = "6f1c-aa", .len = 7};
  CHECK_EQ_INT(bat_seq_control_corrid(DT_UINT64, &uuid, &u64, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "correlation ID '6f1c-aa' is a string, but the model's CORRID control takes a number (UINT64)");
  bat_seq_id over = {.str = "18446744073709551616", .len = 20};  // 2^64
  CHECK_EQ_INT(bat_seq_control_corrid(DT_UINT64, &over, &u64, &e), ERR_INVALID_ARGUMENT);
}

static void test_create_errors(void) {
  bat_seq *b = NULL;
  err e;
  int inst[1] = {3};
  fix f;
  bat_seq_config c = f_config(&f, BAT_SEQ_DIRECT, 4, 1, inst, 1);
  CHECK_EQ_INT(bat_seq_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "executor 0 runs on instance 3, outside 0..0");
  inst[0] = 0;
  c.max_idle_us = 0;
  CHECK_EQ_INT(bat_seq_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  c.max_idle_us = 1;
  int pref[1] = {5};
  c.preferred = pref;
  c.n_preferred = 1;
  CHECK_EQ_INT(bat_seq_create(&c, &b, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "preferred_batch_size 5 is outside 1..4");
}

int main(void) {
  test_refusals();
  test_direct_interleaved();
  test_direct_instances();
  test_direct_backlog();
  test_idle();
  test_restart_cancel_deadline();
  test_backlog_sweep();
  test_instance_retired();
  test_oldest();
  test_oldest_instances();
  test_oldest_no_delay();
  test_string_ids();
  test_many();
  test_state();
  test_controls();
  test_create_errors();
  CHECK_DONE();
}
