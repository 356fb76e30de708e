// engine/cpu/par.c: see par.h. Built with OpenMP where the compiler has it
// (GCC's libgomp, oneDNN's runtime on Debian); serial otherwise.
#include "engine/cpu/par.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void eng_par_for(size_t n, size_t grain, eng_par_fn fn, void *ctx) {
  if (grain < 1) grain = 1;
  size_t parts = n / grain;
#ifdef _OPENMP
  size_t nt = (size_t)omp_get_max_threads();
  if (parts > nt) parts = nt;
  if (parts >= 2 && !omp_in_parallel()) {
#pragma omp parallel num_threads((int)parts)
    {
      size_t t = (size_t)omp_get_thread_num(), k = (size_t)omp_get_num_threads();
      fn(ctx, n * t / k, n * (t + 1) / k);
    }
    return;
  }
#endif
  (void)parts;
  if (n) fn(ctx, 0, n);
}
