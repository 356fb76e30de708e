// engine/batch_sizes.h: which batch sizes a model version prepares at load
// (a GPU plan's CUDA graph captured, its cuDNN plans made and cuBLASLt
// algorithms chosen for that size), so that no batch the batcher can form
// pays for it on the request path (issue 32: ResNet-50 served 1.25k img/s
// in its first 6 s against 9.7k steady, tuning and capturing the sizes
// it met lazily).
//
// Every size 1..max_batch when the budget allows. Otherwise the sizes that
// must be there (1, the preferred sizes, max_batch) and, while the budget
// lasts, a ladder between them: powers of two, then ~1.25x steps, then the
// remaining sizes in bisection order (multiples of 64, 32, ... 2, then odd
// ones), so that stopping anywhere leaves the sizes spread evenly. A batch
// whose size was not prepared runs padded to the next prepared size (rows
// added, their answers dropped: eng_bsizes_bucket).
//
// Costs are measured: each size prepared reports its wall time
// (eng_bsizes_measured), and a size is taken only while the time spent so
// far plus its estimate (interpolated between the nearest measured sizes)
// stays within the budget. Pure: no clock, no device; the caller measures.
#ifndef INFERD_ENGINE_BATCH_SIZES_H
#define INFERD_ENGINE_BATCH_SIZES_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

// The default of --model-prepare-budget-s, in ms.
#define ENG_PREPARE_BUDGET_MS_DEFAULT 60000
// The most batch sizes one plan prepares: every size takes a CUDA graph per
// stream slot, and a slot keeps 512 (model_run.c's graph_cap); half of them
// stay free for batches whose inputs come from the device (their graphs are
// their own) and the other layout's trials.
#define ENG_PREPARE_MAX_SIZES 256

// Why a batch still prepared something on the request path once serving (a
// lazy prepare), counted apart so a figure that should be 0 says where to
// look: a graph for a signature never captured (a size or input placement
// not prepared), a graph captured again because the slot's buffers moved
// since (a re-layout: its older graphs are stale), a GEMM timed, a cuDNN
// plan made. One batch may count under several.
typedef enum eng_lazy_cause {
  ENG_LAZY_GRAPH = 0,
  ENG_LAZY_STALE_GRAPH,
  ENG_LAZY_GEMM,
  ENG_LAZY_CUDNN,
  ENG_LAZY_CAUSES
} eng_lazy_cause;

// "graph", "stale_graph", "gemm", "cudnn": the metric's cause label.
const char *eng_lazy_cause_str(eng_lazy_cause c);

// One preparation's bookkeeping (caller-allocated: eng_bsizes_init/close).
typedef struct eng_bsizes {
  int max_batch;
  int *order;       // every candidate size, in preparation order
  size_t n_order;
  size_t n_must;    // order[0..n_must) are prepared whatever the budget
  size_t next;      // the cursor into order
  int *rows;        // sizes measured (prepared), in the order they were
  uint64_t *ns;     // and what each cost
  size_t n_done;
  int64_t budget_ns;
} eng_bsizes;

// must: the sizes prepared whatever the budget (1, the preferred sizes and
// max_batch are added when missing; sizes outside 1..max_batch ignored).
// At most cap sizes in all (0: ENG_PREPARE_MAX_SIZES; never fewer than the
// must-haves). budget_ns < 0: unbounded. max_batch 0 (no batch dimension):
// the one size 1.
int eng_bsizes_init(eng_bsizes *b, int max_batch, const int *must, size_t n_must, int64_t budget_ns, size_t cap,
                    err *e);
void eng_bsizes_close(eng_bsizes *b);

// The next size to prepare, `elapsed_ns` into the preparation; 0 when done:
// each must-have, then each candidate whose estimate still fits the budget
// (those that do not are passed over: a smaller one later may fit).
int eng_bsizes_next(eng_bsizes *b, int64_t elapsed_ns);
// What preparing `rows` cost (it counts as prepared from here on).
void eng_bsizes_measured(eng_bsizes *b, int rows, uint64_t ns);
// The cost expected of `rows`: linear between the nearest measured sizes
// below and above, the nearest one's beyond them, 0 before any.
uint64_t eng_bsizes_estimate(const eng_bsizes *b, int rows);

// The prepared sizes ascending into out (room for b->n_done); their count.
size_t eng_bsizes_sorted(const eng_bsizes *b, int *out);
// The smallest of the n ascending sizes that is >= rows; 0 when none is.
int eng_bsizes_bucket(const int *sorted, size_t n, int rows);

// A list "1,4,16" (INFERD_PREPARE_SIZES, the tests' hook) into *out
// (malloc'ed); sizes outside 1..max_batch are refused.
int eng_bsizes_parse(const char *s, int max_batch, int **out, size_t *n_out, err *e);

#endif
