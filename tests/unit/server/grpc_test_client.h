// grpc_test_client.h: a small blocking gRPC C-core client for the server
// tests: unary calls and a ping-pong bidi stream, each on its own CQ.
#ifndef INFERD_TESTS_GRPC_TEST_CLIENT_H
#define INFERD_TESTS_GRPC_TEST_CLIENT_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tc_result {
  grpc_status_code status;
  char *details;   // malloc'ed, NUL-terminated (possibly empty)
  uint8_t *resp;   // malloc'ed reply bytes, NULL when no message came
  size_t resp_len;
  int got_message;
} tc_result;

// An insecure channel to 127.0.0.1:port; max_recv 0 keeps the default.
grpc_channel *tc_channel(int port, int max_recv);

// One blocking unary call. req NULL sends no message at all; timeout_ms <= 0
// means no deadline. Returns 0 when the call ran (whatever its status).
int tc_unary(grpc_channel *ch, const char *method, const void *req, size_t len, int timeout_ms,
             tc_result *out);

void tc_result_free(tc_result *r);

// A bidi stream driven one message at a time.
typedef struct tc_stream tc_stream;
tc_stream *tc_stream_open(grpc_channel *ch, const char *method, int timeout_ms);
// Sends one message and waits for one reply; returns 0 when one came.
int tc_stream_roundtrip(tc_stream *s, const void *req, size_t len, uint8_t **resp, size_t *resp_len);
// Half-closes, reads the status and frees the stream.
// Receives the next message alone (a handler that answers one message several times); -1 when none.
int tc_stream_recv(tc_stream *s, uint8_t **resp, size_t *resp_len);
void tc_stream_close(tc_stream *s, tc_result *out);

#endif
