// server/sec/shmguard.h: copies from and into client shared memory that
// survive the client shrinking its object. A registered region is a
// MAP_SHARED mapping of the client's /dev/shm object; when the client
// ftruncates the object below the window, touching the lost pages raises
// SIGBUS, which would kill the server. Every read or write of a mapping's
// bytes goes through these calls instead: a SIGBUS inside the guarded range
// jumps back out and the call returns -1, and the caller fails that one
// request (issue 31, item 8).
//
// srv_shmguard_install, once in main before any thread starts, sets the
// process's SIGBUS handler; the guard's state is one thread-local pointer,
// set only for the length of a guarded copy. A SIGBUS outside a guarded
// range (a real bug) still ends the process with the default action.
// Without the handler installed (unit tests of other modules, fuzz
// drivers), the calls are plain copies.
#ifndef INFERD_SERVER_SHMGUARD_H
#define INFERD_SERVER_SHMGUARD_H

#include <stddef.h>

#include "kernels/base/err.h"

int srv_shmguard_install(err *e);

// Runs fn(arg), which touches only the shared memory bytes [lo, lo + len)
// (and memory of its own): 0 when it ran through, -1 when a fault in that
// range cut it short. fn must take no locks and allocate nothing: it may be
// left midway.
int srv_shmguard_run(const void *lo, size_t len, void (*fn)(void *arg), void *arg);

// memcpy from shared memory (src) and into it (dst): 0, or -1 when the
// object shrank under the copy (dst then holds part of the bytes).
int srv_shmguard_read(void *dst, const void *src, size_t n);
int srv_shmguard_write(void *dst, const void *src, size_t n);

#endif
