// gen_grpc.c: a generate request on its own ModelStreamInfer call (gen_grpc.h).
#include "clients/load/gen_grpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/load/inputs.h"
#include "clients/load/request.h"
#include "clients/load/rpc.h"
#include "clients/load/stats.h"
#include "clients/load/stream_msg.h"
#include "grpc_service.pb-c.h"

int ld_gen_grpc_encode(const char *model, const char *version, const int32_t *ids, int64_t n_ids, int64_t out_len,
                       bool streaming, bool batched, uint8_t **buf, size_t *len, err *e) {
  int32_t n32 = (int32_t)n_ids, o32 = (int32_t)out_len;
  uint8_t st = streaming ? 1 : 0;
  ld_tensor in[4];
  memset(in, 0, sizeof in);
  const char *names[4] = {"input_ids", "input_lengths", "request_output_len", "streaming"};
  const char *types[4] = {"INT32", "INT32", "INT32", "BOOL"};
  void *data[4] = {(void *)ids, &n32, &o32, &st};
  size_t sizes[4] = {(size_t)n_ids * sizeof(int32_t), sizeof n32, sizeof o32, 1};
  for (int k = 0; k < 4; k++) {
    in[k].name = (char *)names[k];
    in[k].datatype = (char *)types[k];
    if (batched) in[k].shape[in[k].rank++] = 1;
    in[k].shape[in[k].rank++] = k == 0 ? n_ids : 1;
    in[k].data = data[k];
    in[k].size = sizes[k];
  }
  ld_request_spec spec = {.model = model, .version = version, .in = in, .n_in = 4};
  return ld_request_encode_spec(&spec, buf, len, e);
}

static grpc_event pluck(grpc_completion_queue *cq, void *tag) {
  return grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
}

// The tokens of one response; -1 when it is not a readable answer.
static int64_t count_tokens(const Inference__ModelInferResponse *r) {
  for (size_t k = 0; k < r->n_outputs; k++)
    if (strcmp(r->outputs[k]->name, "output_ids") == 0) {
      if (k >= r->n_raw_output_contents) return -1;
      return (int64_t)(r->raw_output_contents[k].len / sizeof(int32_t));
    }
  return 0;  // a response without output_ids (the final flag alone) adds no token
}

int ld_gen_grpc_call(grpc_channel *ch, grpc_completion_queue *cq, const uint8_t *req, size_t len, int timeout_ms,
                     ld_gen_on_tokens cb, void *ctx, err *e) {
  gpr_timespec deadline =
      timeout_ms > 0 ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN))
                     : gpr_inf_future(GPR_CLOCK_REALTIME);
  grpc_slice method = grpc_slice_from_static_string(LD_SVC "ModelStreamInfer");
  grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL, deadline, NULL);
  if (!call) return err_set(e, (err_code)LD_KIND_CLIENT, "could not create the ModelStreamInfer call");
  grpc_slice body = grpc_slice_from_copied_buffer((const char *)req, len);
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
  grpc_slice_unref(body);
  ld_call_end end;
  ld_call_end_init(&end);
  int tags[3];  // their addresses tag the three batches
  int kind = 0;
  grpc_op ops[4];
  ld_call_send_ops(ops, send);
  grpc_op sop;
  ld_call_end_ops(&end, &ops[3], &sop);
  bool status_started = false;
  if (grpc_call_start_batch(call, ops, 4, &tags[0], NULL) != GRPC_CALL_OK) {
    kind = err_set(e, (err_code)LD_KIND_CLIENT, "could not start the ModelStreamInfer call");
    goto out;
  }
  status_started = grpc_call_start_batch(call, &sop, 1, &tags[1], NULL) == GRPC_CALL_OK;
  pluck(cq, &tags[0]);  // fails only when the call does; the status says why
  for (;;) {
    grpc_byte_buffer *recv = NULL;
    grpc_op rop;
    memset(&rop, 0, sizeof rop);
    rop.op = GRPC_OP_RECV_MESSAGE;
    rop.data.recv_message.recv_message = &recv;
    if (grpc_call_start_batch(call, &rop, 1, &tags[2], NULL) != GRPC_CALL_OK) break;
    pluck(cq, &tags[2]);
    if (!recv) break;  // the stream ended (its status follows)
    grpc_byte_buffer_reader rd;
    Inference__ModelStreamInferResponse *sr = NULL;
    if (grpc_byte_buffer_reader_init(&rd, recv)) {
      grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
      grpc_byte_buffer_reader_destroy(&rd);
      sr = inference__model_stream_infer_response__unpack(NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
      grpc_slice_unref(all);
    }
    grpc_byte_buffer_destroy(recv);
    int64_t n = -1;
    if (sr && sr->error_message && *sr->error_message) {
      // the first error response decides; the stream still ends by itself (half-closed, nothing else pending)
      if (!kind) kind = err_set(e, (err_code)ld_kind_from_message(sr->error_message, strlen(sr->error_message)), "%s",
                                sr->error_message);
    } else if (sr && sr->infer_response && (n = count_tokens(sr->infer_response)) >= 0) {
      if (!kind) cb(ctx, n);
    } else if (!kind) {
      kind = err_set(e, (err_code)LD_KIND_STREAM_ERROR, "a ModelStreamInfer response could not be read");
    }
    if (sr) inference__model_stream_infer_response__free_unpacked(sr, NULL);
  }
  if (status_started) pluck(cq, &tags[1]);
  if (!kind && end.status != GRPC_STATUS_OK) {
    char *d = grpc_slice_to_c_string(end.details);
    kind = err_set(e, (err_code)ld_kind_from_status((int)end.status), "%s: %s", ld_status_name((int)end.status),
                   d ? d : "");
    gpr_free(d);
  }
out:
  grpc_byte_buffer_destroy(send);
  ld_call_end_destroy(&end);
  grpc_call_unref(call);
  return kind;
}
