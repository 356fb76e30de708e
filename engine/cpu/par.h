// engine/cpu/par.h: splitting the CPU plan's elementwise loops over the
// OpenMP threads that oneDNN already runs on (libdnnl is built against
// libgomp, so this is the same pool and the same OMP_NUM_THREADS, not a
// second one competing for the cores). Small ranges stay on the calling
// thread: a parallel region costs microseconds.
#ifndef INFERD_ENGINE_PAR_H
#define INFERD_ENGINE_PAR_H

#include <stddef.h>

// Elements per part at least: an elementwise op on fewer than two grains
// (32768 floats, 128 KiB) is not worth a parallel region.
#define ENG_PAR_GRAIN 16384

// Runs fn(ctx, lo, hi) over disjoint parts [lo, hi) covering [0, n), each
// of at least `grain` items (grain >= 1), in parallel where that gives two
// parts or more and the caller is not already inside a parallel region;
// else fn(ctx, 0, n) here. fn must only write what its part owns, so the
// result does not depend on the split.
typedef void (*eng_par_fn)(void *ctx, size_t lo, size_t hi);
void eng_par_for(size_t n, size_t grain, eng_par_fn fn, void *ctx);

#endif
