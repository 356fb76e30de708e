// server/obs/crash.c: a fatal signal's last words (see crash.h).
#include "server/obs/crash.h"

#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_FRAMES 64

// --- async-signal-safe formatting: a fixed buffer, no stdio, no malloc

typedef struct line {
  char b[256];
  size_t n;
} line;

static void put(line *l, const char *s) {
  while (*s && l->n < sizeof l->b - 1) l->b[l->n++] = *s++;
}

static void put_hex(line *l, uintptr_t v) {
  char t[2 + 2 * sizeof v + 1];
  size_t i = sizeof t - 1;
  t[i] = 0;
  do {
    t[--i] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v && i > 2);
  t[--i] = 'x';
  t[--i] = '0';
  put(l, t + i);
}

static void put_dec(line *l, long v) {
  char t[24];
  size_t i = sizeof t - 1;
  t[i] = 0;
  unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
  do {
    t[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u && i > 1);
  if (v < 0) t[--i] = '-';
  put(l, t + i);
}

static const char *sig_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

static void write_all(const char *b, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    b += w, n -= (size_t)w;
  }
}

// --- the handler

static void on_fatal(int sig, siginfo_t *si, void *uctx) {
  (void)uctx;
  int saved = errno;
  char name[17] = {0};
  (void)prctl(PR_GET_NAME, name, 0, 0, 0);
  line l = {.n = 0};
  put(&l, "inferd: fatal ");
  put(&l, sig_name(sig));
  put(&l, " (");
  put_dec(&l, sig);
  put(&l, ", code ");
  put_dec(&l, si ? si->si_code : 0);
  if (si && si->si_code <= 0) {  // sent (kill, raise, abort): no faulting address
    put(&l, ") sent by pid ");
    put_dec(&l, (long)si->si_pid);
  } else {
    put(&l, ") at address ");
    put_hex(&l, si ? (uintptr_t)si->si_addr : 0);
  }
  put(&l, " in thread '");
  put(&l, name);
  put(&l, "' (tid ");
  put_dec(&l, (long)gettid());
  put(&l, "); backtrace:\n");
  write_all(l.b, l.n);
  void *frames[MAX_FRAMES];
  int n = backtrace(frames, MAX_FRAMES);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  static const char tail[] = "inferd: frames as binary(+offset): addr2line -f -C -e <unstripped binary> OFFSET...\n";
  write_all(tail, sizeof tail - 1);
  // die of the same signal, by default: raised now for a sent signal, and for
  // a fault the faulting instruction runs again on return and ends it
  signal(sig, SIG_DFL);
  errno = saved;
  if (!si || si->si_code <= 0 || sig == SIGABRT) raise(sig);
}

int srv_crash_install(err *e) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // a sanitizer's own report names the bad access and both threads: better
  // than these frames, so its handler stays
  (void)e;
  return 0;
#endif
  // backtrace() loads libgcc on its first call (malloc, dlopen): done here,
  // never inside a handler
  void *warm[2];
  (void)backtrace(warm, 2);
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: a fault inside the handler itself ends the process at once
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
    if (sigaction(sigs[i], &sa, NULL) != 0)
      return err_set(e, ERR_INTERNAL, "cannot install the %s handler: %s", sig_name(sigs[i]), strerror(errno));
  return 0;
}
