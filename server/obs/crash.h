// server/obs/crash.h: a fatal signal's last words. When the server dies of
// SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT, stderr gets one line naming the
// signal, the faulting address and the thread, then the thread's backtrace as
// `binary(+offset)` frames (symbolize with `addr2line -f -C -e build/bin/inferd
// OFFSET...` against the unstripped build), and the process then dies of the
// same signal with the default action (a core where the system keeps one), so
// an orchestrator sees what it saw before. Only async-signal-safe calls run in
// the handler (write, prctl, backtrace preloaded at install).
#ifndef INFERD_SERVER_CRASH_H
#define INFERD_SERVER_CRASH_H

#include "kernels/base/err.h"

// Installs the handlers; main calls it once before any thread starts. A
// handler installed later for one of these signals (the shared-memory SIGBUS
// guard, server/sec/shmguard.c) takes over that signal and passes on the
// faults that are not its own by calling the handler it replaced.
int srv_crash_install(err *e);

#endif
