// alloc.c: see alloc.h.
#include "server/alloc.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Sanitizer builds leave jemalloc out (server/main.cmake); decided at compile
// time, since spelling the runtimes' symbol names here would mark every binary
// as sanitized to tools that search it for them
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

// jemalloc's control entry point (its <jemalloc/jemalloc.h> declares the same)
typedef int (*mallctl_fn)(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

// The file whose malloc every library's calls bind to (the first in the
// global lookup order): what decides, not merely which allocators are loaded.
static const char *malloc_origin(void) {
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info di;
  if (m && dladdr(m, &di) && di.dli_fname && di.dli_fname[0]) return di.dli_fname;
  return "?";
}

// jemalloc's mallctl when malloc is jemalloc's (linked into the executable or
// preloaded, it exports mallctl into the global scope), else NULL
static mallctl_fn jemalloc_ctl(void) {
  mallctl_fn ctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  return ctl && strstr(malloc_origin(), "jemalloc") ? ctl : NULL;
}

const char *srv_alloc_describe(char *buf, size_t n) {
  if (n == 0) return buf;
  const char *from = malloc_origin();
  mallctl_fn ctl = jemalloc_ctl();
  const char *ver = NULL;
  size_t len = sizeof ver;
  if (ctl && ctl("version", &ver, &len, NULL, 0) == 0 && ver)
    snprintf(buf, n, "jemalloc %s (malloc from %s)", ver, from);
  else if (ctl) snprintf(buf, n, "jemalloc (malloc from %s)", from);
  else if (SANITIZED) snprintf(buf, n, "a sanitizer's malloc (malloc from %s)", from);
  else snprintf(buf, n, "glibc malloc (malloc from %s)", from);
  return buf;
}

srv_alloc_stats srv_alloc_stats_read(void) {
  srv_alloc_stats st = {-1, -1};
  mallctl_fn ctl = jemalloc_ctl();
  if (ctl) {
    uint64_t epoch = 1;
    size_t v, len = sizeof v, elen = sizeof epoch;
    (void)ctl("epoch", &epoch, &elen, &epoch, sizeof epoch);  // the totals are cached until this
    if (ctl("stats.allocated", &v, &len, NULL, 0) == 0) st.allocated = (long long)v;
    len = sizeof v;
    if (ctl("stats.resident", &v, &len, NULL, 0) == 0) st.resident = (long long)v;
    return st;
  }
  if (SANITIZED) return st;  // the sanitizer's allocator is not glibc's: mallinfo2 would describe an idle heap
  struct mallinfo2 mi = mallinfo2();
  st.allocated = (long long)(mi.uordblks + mi.hblkhd);
  st.resident = (long long)(mi.arena + mi.hblkhd);
  return st;
}

const char *srv_alloc_release(void) {
  mallctl_fn ctl = jemalloc_ctl();
  // "arena.<MALLCTL_ARENAS_ALL>.purge": 4096 is MALLCTL_ARENAS_ALL in jemalloc 5
  if (ctl && ctl("arena.4096.purge", NULL, NULL, NULL, 0) == 0) return "jemalloc's purge";
  malloc_trim(0);
  return "malloc_trim";
}
