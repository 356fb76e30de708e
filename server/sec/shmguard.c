// shmguard.c: the SIGBUS guard around copies from and into client shared
// memory (see shmguard.h).
#include "server/sec/shmguard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef struct guard {
  sigjmp_buf jb;
  uintptr_t lo, hi;  // the shared memory bytes the guarded code may touch
} guard;

// This thread's guarded copy in progress, NULL outside one. Thread-local,
// so each thread's handler sees only its own copy (a SIGBUS from touching
// memory is delivered to the thread that touched it).
static _Thread_local guard *active;

// The SIGBUS action before the guard's, set once by srv_shmguard_install
// before any thread runs a guarded copy, read only by the handler after.
static struct sigaction prev;

static void on_sigbus(int sig, siginfo_t *si, void *uctx) {
  guard *g = active;
  uintptr_t a = (uintptr_t)si->si_addr;
  if (g && a >= g->lo && a < g->hi) {
    // SA_NODEFER leaves SIGBUS unblocked here, but a runtime that wraps
    // handlers (ThreadSanitizer's) may block it anyway; sigsetjmp saved no
    // mask, so unblock it before jumping or the next fault kills the process.
    // A system call on the fault path only.
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
    siglongjmp(g->jb, 1);
  }
  // not ours: the handler this guard replaced (the crash reporter,
  // server/obs/crash.h, which resets SIGBUS to its default), else the default
  // action; either way the fault repeats when the handler returns and now
  // ends the process with a core, as without the guard
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, si, uctx);
    return;
  }
  signal(sig, SIG_DFL);
}

int srv_shmguard_install(err *e) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sigemptyset(&sa.sa_mask);
  // SA_NODEFER: SIGBUS stays unblocked while the handler runs, so jumping
  // out of it leaves the thread's mask as it was and sigsetjmp need not
  // save the mask (no system call per copy).
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  struct sigaction old;
  if (sigaction(SIGBUS, &sa, &old) != 0)
    return err_set(e, ERR_INTERNAL, "cannot install the SIGBUS handler: %s", strerror(errno));
  if (old.sa_sigaction != on_sigbus) prev = old;  // installed twice: keep the first predecessor
  return 0;
}

int srv_shmguard_run(const void *lo, size_t len, void (*fn)(void *arg), void *arg) {
  if (len == 0) {
    fn(arg);
    return 0;
  }
  guard g;
  g.lo = (uintptr_t)lo;
  g.hi = g.lo + len;
  guard *volatile prev = active;  // a guarded fn does not nest another, but keep it correct
  if (sigsetjmp(g.jb, 0) != 0) {
    active = prev;
    return -1;
  }
  active = &g;
  // the handler reads `active` on this thread: keep the stores on their side of fn
  atomic_signal_fence(memory_order_seq_cst);
  fn(arg);
  atomic_signal_fence(memory_order_seq_cst);
  active = prev;
  return 0;
}

typedef struct copy_args {
  void *dst;
  const void *src;
  size_t n;
} copy_args;

static void do_copy(void *arg) {
  copy_args *c = arg;
  memcpy(c->dst, c->src, c->n);
}

int srv_shmguard_read(void *dst, const void *src, size_t n) {
  copy_args c = {dst, src, n};
  return srv_shmguard_run(src, n, do_copy, &c);
}

int srv_shmguard_write(void *dst, const void *src, size_t n) {
  copy_args c = {dst, src, n};
  return srv_shmguard_run(dst, n, do_copy, &c);
}
