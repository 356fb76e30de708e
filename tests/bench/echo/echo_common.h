// echo_common.h: what the two transport yardsticks (echo_server.c,
// fixed_server.c) share: stop signals, the server and its port, an integer
// flag, and a call's answer as one four-op batch.
#ifndef INFERD_TESTS_BENCH_ECHO_COMMON_H
#define INFERD_TESTS_BENCH_ECHO_COMMON_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <signal.h>

// Blocks SIGINT and SIGTERM (filling *stop with them) and ignores SIGPIPE;
// called before any thread exists (gRPC's included), so only a sigwait on
// *stop sees the stop signals. Returns pthread_sigmask's error, 0 when none.
int echo_block_stop_signals(sigset_t *stop);

// A server whose messages may be max_msg bytes each way; a busy port is an
// error, not a silent share. NULL when the core refuses.
grpc_server *echo_server_create(int max_msg);

// Listens on addr ("host:port") in plaintext: the port bound; 0 when it
// cannot, -1 when the core gives no plaintext credentials.
int echo_listen(grpc_server *s, const char *addr);

// The integer in v (flag name, for the message) within [lo, hi] into *out;
// -1 with a line on stderr, prog its first word, when it is none.
int echo_parse_int(const char *prog, const char *name, const char *v, long lo, long hi, int *out);

// Answers call in one batch: initial metadata, send (NULL: no message), the
// status with details (NULL: none), the close (*cancelled written by the
// core), tagged tag. Begun under mu and only while *closed is 0: the core
// aborts on a batch begun on a shut-down queue. *was_closed (may be
// NULL): whether it was.
grpc_call_error echo_reply(grpc_call *call, grpc_byte_buffer *send, grpc_status_code code, grpc_slice *details,
                           int *cancelled, void *tag, pthread_mutex_t *mu, const int *closed, int *was_closed);

#endif
