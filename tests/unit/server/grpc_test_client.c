// grpc_test_client.c: blocking C-core client helpers for the gRPC server tests.
#include "grpc_test_client.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

grpc_channel *tc_channel(int port, int max_recv) {
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  grpc_arg arg = {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = max_recv}};
  grpc_channel_args args = {max_recv ? 1 : 0, &arg};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(target, creds, &args);
  grpc_channel_credentials_release(creds);
  return ch;
}

static gpr_timespec deadline_of(int timeout_ms) {
  if (timeout_ms <= 0) return gpr_inf_future(GPR_CLOCK_REALTIME);
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

// Waits for `tag` on cq; 0 when it completed with success.
static int wait_tag(grpc_completion_queue *cq, void *tag) {
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return -1;
    if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag) return ev.success ? 0 : -1;
  }
}

static void cq_destroy(grpc_completion_queue *cq) {
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
}

static uint8_t *bb_copy(grpc_byte_buffer *bb, size_t *len) {
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb)) return NULL;
  grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  *len = GRPC_SLICE_LENGTH(all);
  uint8_t *p = malloc(*len + 1);
  if (p) memcpy(p, GRPC_SLICE_START_PTR(all), *len);
  grpc_slice_unref(all);
  return p;
}

static char *slice_str(grpc_slice s) {
  size_t n = GRPC_SLICE_LENGTH(s);
  char *p = malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, GRPC_SLICE_START_PTR(s), n);
  p[n] = '\0';
  return p;
}

static grpc_byte_buffer *bb_of(const void *data, size_t len) {
  grpc_slice s = grpc_slice_from_copied_buffer(data, len);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

int tc_unary(grpc_channel *ch, const char *method, const void *req, size_t len, int timeout_ms,
             tc_result *out) {
  memset(out, 0, sizeof *out);
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  grpc_slice m = grpc_slice_from_static_string(method);
  grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
                                             deadline_of(timeout_ms), NULL);
  grpc_byte_buffer *send = req ? bb_of(req, len) : NULL;
  grpc_byte_buffer *recv = NULL;
  grpc_metadata_array md_init, md_trail;
  grpc_metadata_array_init(&md_init);
  grpc_metadata_array_init(&md_trail);
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (send) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = send;
  }
  ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[n++].data.recv_initial_metadata.recv_initial_metadata = &md_init;
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n++].data.recv_message.recv_message = &recv;
  ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[n].data.recv_status_on_client.trailing_metadata = &md_trail;
  ops[n].data.recv_status_on_client.status = &out->status;
  ops[n++].data.recv_status_on_client.status_details = &details;
  int rc = -1;
  if (call && grpc_call_start_batch(call, ops, n, (void *)1, NULL) == GRPC_CALL_OK) {
    wait_tag(cq, (void *)1);  // RECV_STATUS makes the batch complete even on failure
    rc = 0;
  }
  if (recv) {
    out->resp = bb_copy(recv, &out->resp_len);
    out->got_message = 1;
    grpc_byte_buffer_destroy(recv);
  }
  out->details = slice_str(details);
  grpc_slice_unref(details);
  if (send) grpc_byte_buffer_destroy(send);
  grpc_metadata_array_destroy(&md_init);
  grpc_metadata_array_destroy(&md_trail);
  if (call) grpc_call_unref(call);
  cq_destroy(cq);
  return rc;
}

void tc_result_free(tc_result *r) {
  free(r->details);
  free(r->resp);
  memset(r, 0, sizeof *r);
}

struct tc_stream {
  grpc_completion_queue *cq;
  grpc_call *call;
  grpc_metadata_array md_init, md_trail;
  grpc_status_code status;
  grpc_slice details;
  int md_recvd;
};

tc_stream *tc_stream_open(grpc_channel *ch, const char *method, int timeout_ms) {
  tc_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cq = grpc_completion_queue_create_for_next(NULL);
  s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                     grpc_slice_from_static_string(method), NULL,
                                     deadline_of(timeout_ms), NULL);
  grpc_metadata_array_init(&s->md_init);
  grpc_metadata_array_init(&s->md_trail);
  s->details = grpc_empty_slice();
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_SEND_INITIAL_METADATA;
  if (!s->call || grpc_call_start_batch(s->call, &op, 1, (void *)1, NULL) != GRPC_CALL_OK ||
      wait_tag(s->cq, (void *)1) != 0) {
    tc_result r;
    tc_stream_close(s, &r);
    tc_result_free(&r);
    return NULL;
  }
  return s;
}

int tc_stream_roundtrip(tc_stream *s, const void *req, size_t len, uint8_t **resp, size_t *resp_len) {
  *resp = NULL;
  *resp_len = 0;
  grpc_byte_buffer *send = bb_of(req, len), *recv = NULL;
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n].op = GRPC_OP_SEND_MESSAGE;
  ops[n++].data.send_message.send_message = send;
  if (!s->md_recvd) {
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->md_init;
    s->md_recvd = 1;
  }
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n++].data.recv_message.recv_message = &recv;
  int rc = -1;
  if (grpc_call_start_batch(s->call, ops, n, (void *)2, NULL) == GRPC_CALL_OK &&
      wait_tag(s->cq, (void *)2) == 0 && recv) {
    *resp = bb_copy(recv, resp_len);
    rc = *resp ? 0 : -1;
  }
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_byte_buffer_destroy(send);
  return rc;
}

int tc_stream_recv(tc_stream *s, uint8_t **resp, size_t *resp_len) {
  *resp = NULL;
  *resp_len = 0;
  grpc_byte_buffer *recv = NULL;
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  if (!s->md_recvd) {
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->md_init;
    s->md_recvd = 1;
  }
  ops[n].op = GRPC_OP_RECV_MESSAGE;
  ops[n++].data.recv_message.recv_message = &recv;
  int rc = -1;
  if (grpc_call_start_batch(s->call, ops, n, (void *)4, NULL) == GRPC_CALL_OK && wait_tag(s->cq, (void *)4) == 0 &&
      recv) {
    *resp = bb_copy(recv, resp_len);
    rc = *resp ? 0 : -1;
  }
  if (recv) grpc_byte_buffer_destroy(recv);
  return rc;
}

void tc_stream_close(tc_stream *s, tc_result *out) {
  memset(out, 0, sizeof *out);
  out->status = GRPC_STATUS_UNKNOWN;
  if (s->call) {
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (!s->md_recvd) {
      ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
      ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->md_init;
      s->md_recvd = 1;
    }
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &s->md_trail;
    ops[n].data.recv_status_on_client.status = &out->status;
    ops[n++].data.recv_status_on_client.status_details = &s->details;
    if (grpc_call_start_batch(s->call, ops, n, (void *)3, NULL) == GRPC_CALL_OK) wait_tag(s->cq, (void *)3);
    grpc_call_unref(s->call);
  }
  out->details = slice_str(s->details);
  grpc_slice_unref(s->details);
  grpc_metadata_array_destroy(&s->md_init);
  grpc_metadata_array_destroy(&s->md_trail);
  cq_destroy(s->cq);
  free(s);
}
