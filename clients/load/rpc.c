// rpc.c: channel creation and blocking unary calls on the gRPC C core.
#include "clients/load/rpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/load/stats.h"

const char *ld_status_name(int status) {
  return status >= 0 && status <= 16 ? ld_kind_name(status) : "UNKNOWN";
}

void ld_call_end_init(ld_call_end *c) {
  grpc_metadata_array_init(&c->md_init);
  grpc_metadata_array_init(&c->md_trail);
  c->status = GRPC_STATUS_UNKNOWN;
  c->details = grpc_empty_slice();
}

void ld_call_end_ops(ld_call_end *c, grpc_op *recv_md, grpc_op *recv_status) {
  memset(recv_md, 0, sizeof *recv_md);
  recv_md->op = GRPC_OP_RECV_INITIAL_METADATA;
  recv_md->data.recv_initial_metadata.recv_initial_metadata = &c->md_init;
  memset(recv_status, 0, sizeof *recv_status);
  recv_status->op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  recv_status->data.recv_status_on_client.trailing_metadata = &c->md_trail;
  recv_status->data.recv_status_on_client.status = &c->status;
  recv_status->data.recv_status_on_client.status_details = &c->details;
}

void ld_call_send_ops(grpc_op ops[3], grpc_byte_buffer *send) {
  memset(ops, 0, 3 * sizeof ops[0]);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
}

void ld_call_end_destroy(ld_call_end *c) {
  grpc_metadata_array_destroy(&c->md_init);
  grpc_metadata_array_destroy(&c->md_trail);
  grpc_slice_unref(c->details);
}

grpc_channel *ld_channel_create(const char *target, bool private_conn) {
  grpc_arg args[5];
  size_t n = 0;
  args[n++] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}};
  args[n++] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = -1}};
  // A load generator never retries (a retried call would be a second request the server counts), yet the core's
  // retry filter, on by default, keeps a copy of every call's metadata and message until it ends; channelz counts
  // every call and message under the channel's locks for a debugging view nobody reads here. Both off: the
  // per-call cost of the client is what limits a soak's rate (tests/bench/soak/client_cost.py).
  args[n++] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_RETRIES, {.integer = 0}};
  args[n++] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_CHANNELZ, {.integer = 0}};
  if (private_conn) args[n++] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, {.integer = 1}};
  grpc_channel_args ca = {n, args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(target, creds, &ca);
  grpc_channel_credentials_release(creds);
  return ch;
}

static char *slice_str(grpc_slice s) {
  size_t n = GRPC_SLICE_LENGTH(s);
  char *p = malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, GRPC_SLICE_START_PTR(s), n);
  p[n] = '\0';
  return p;
}

int ld_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
             const ProtobufCMessageDescriptor *resp_desc, int timeout_ms, ProtobufCMessage **resp, err *e) {
  *resp = NULL;
  char path[128];
  snprintf(path, sizeof path, "%s%s", LD_SVC, method);
  size_t len = protobuf_c_message_get_packed_size(req);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  protobuf_c_message_pack(req, buf);
  grpc_slice body = grpc_slice_new(buf, len, free);  // the slice owns buf now
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
  grpc_slice_unref(body);

  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  gpr_timespec deadline =
      timeout_ms > 0 ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN))
                     : gpr_inf_future(GPR_CLOCK_REALTIME);
  grpc_slice mslice = grpc_slice_from_copied_string(path);
  grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL, deadline, NULL);
  grpc_slice_unref(mslice);
  grpc_byte_buffer *recv = NULL;
  ld_call_end end;
  ld_call_end_init(&end);
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ld_call_send_ops(ops, send);
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv;
  ld_call_end_ops(&end, &ops[3], &ops[5]);
  int rc = 0;
  if (!call || grpc_call_start_batch(call, ops, 6, call, NULL) != GRPC_CALL_OK) {
    rc = err_set(e, ERR_INTERNAL, "could not start the %s call", method);
  } else {
    // RECV_STATUS_ON_CLIENT makes the batch complete whatever happens (deadline included).
    for (;;) {
      grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
      if (ev.type == GRPC_OP_COMPLETE && ev.tag == call) break;
      if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    }
    if (end.status != GRPC_STATUS_OK) {
      char *d = slice_str(end.details);
      rc = err_set(e, (err_code)end.status, "%s: %s", ld_status_name((int)end.status), d ? d : "");
      free(d);
    } else if (!recv) {
      rc = err_set(e, ERR_INTERNAL, "%s returned OK without a message", method);
    } else {
      grpc_byte_buffer_reader rd;
      if (!grpc_byte_buffer_reader_init(&rd, recv)) {
        rc = err_set(e, ERR_INTERNAL, "cannot read the %s reply", method);
      } else {
        grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        *resp = protobuf_c_message_unpack(resp_desc, NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
        grpc_slice_unref(all);
        if (!*resp) rc = err_set(e, ERR_INTERNAL, "the %s reply does not parse as %s", method, resp_desc->name);
      }
    }
  }
  if (recv) grpc_byte_buffer_destroy(recv);
  grpc_byte_buffer_destroy(send);
  ld_call_end_destroy(&end);
  if (call) grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  return rc;
}
