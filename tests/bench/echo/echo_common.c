// echo_common.c: what bench_echo_server and bench_fixed_server share (echo_common.h).
#include "tests/bench/echo/echo_common.h"

#include <errno.h>
#include <grpc/grpc_security.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int echo_block_stop_signals(sigset_t *stop) {
  sigemptyset(stop);
  sigaddset(stop, SIGINT);
  sigaddset(stop, SIGTERM);
  int rc = pthread_sigmask(SIG_BLOCK, stop, NULL);
  signal(SIGPIPE, SIG_IGN);
  return rc;
}

grpc_server *echo_server_create(int max_msg) {
  grpc_arg args[3] = {
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, .value.integer = max_msg},
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, .value.integer = max_msg},
      {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0},
  };
  grpc_channel_args ch = {3, args};
  return grpc_server_create(&ch, NULL);
}

int echo_listen(grpc_server *s, const char *addr) {
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  if (!creds) return -1;
  int port = grpc_server_add_http2_port(s, addr, creds);
  grpc_server_credentials_release(creds);
  return port;
}

int echo_parse_int(const char *prog, const char *name, const char *v, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    fprintf(stderr, "%s: %s: '%s' is not an integer in [%ld, %ld]\n", prog, name, v, lo, hi);
    return -1;
  }
  *out = (int)x;
  return 0;
}

grpc_call_error echo_reply(grpc_call *call, grpc_byte_buffer *send, grpc_status_code code, grpc_slice *details,
                           int *cancelled, void *tag, pthread_mutex_t *mu, const int *closed, int *was_closed) {
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (send) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = send;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = code;
  ops[n++].data.send_status_from_server.status_details = details;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = cancelled;
  pthread_mutex_lock(mu);
  int shut = *closed;
  grpc_call_error rc =
      shut ? GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN : grpc_call_start_batch(call, ops, n, tag, NULL);
  pthread_mutex_unlock(mu);
  if (was_closed) *was_closed = shut;
  return rc;
}
