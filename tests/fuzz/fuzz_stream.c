// fuzz_stream.c: libFuzzer driver for ModelStreamInfer: each input is one
// bidi stream of up to 32 messages to a whole inferd in this process
// (fixture.h: model "fuzz" of tests/fuzz/repo, region "r0"), sent the way
// a client that does not wait sends them: every message, then the
// half-close, then read every answer. What the server runs on them is its
// own stream path: the front end's asynchronous stream (server/grpc/grpc_stream.c:
// reading ahead, the answer queue, the end once every message is answered),
// srv_infer_stream_handler (server/core/infer.c: the same decode and validation
// as ModelInfer, then the scheduler and a real batch on the CPU engine), the
// packed ModelStreamInferResponse or the stream's error answer.
//
// Input: records of [len lo][len hi][len bytes], each one message. Every
// message must get exactly one answer, each answer must parse as a
// ModelStreamInferResponse whose strings are UTF-8 (an error in
// error_message, else an infer_response), and the stream must end with OK:
// anything else aborts (a lost answer, a hang past 8 s, a broken answer).
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "grpc_service.pb-c.h"
#include "grpc_test_client.h"
#include "kernels/base/utf8.h"

#define MAX_MESSAGES 32
#define DEADLINE_MS 8000  // under libFuzzer's -timeout=10: a stuck stream fails here, with a message

static fz_server g_fix;  // the driver's fixture: set once at start
static grpc_channel *g_ch;
static int g_verbose;  // FUZZ_VERBOSE=1: say what each answer was (checking seeds)

static void fail(const char *msg) {
  fprintf(stderr, "fuzz_stream: %s\n", msg);
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_verbose = getenv("FUZZ_VERBOSE") != NULL;
  fz_serve(&g_fix, INFERD_FUZZ_REPO);
  grpc_init();  // the client side's own reference
  g_ch = tc_channel(g_fix.grpc_port, -1);
  if (!g_ch) fail("no channel");
  return 0;
}

// Runs one batch of ops on the call and waits for it; its success flag.
static int batch(grpc_call *call, grpc_completion_queue *cq, const grpc_op *ops, size_t n) {
  static char tag;
  if (grpc_call_start_batch(call, ops, n, &tag, NULL) != GRPC_CALL_OK) fail("grpc_call_start_batch refused a batch");
  grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  if (ev.type != GRPC_OP_COMPLETE || ev.tag != &tag) fail("unexpected completion queue event");
  return ev.success;
}

static int utf8(const char *s) { return !s || utf8_valid(s, strlen(s)); }

static void check_answer(grpc_byte_buffer *bb) {
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb)) fail("unreadable answer");
  grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  Inference__ModelStreamInferResponse *r =
      inference__model_stream_infer_response__unpack(NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
  grpc_slice_unref(all);
  if (!r) fail("an answer does not parse as ModelStreamInferResponse");
  const Inference__ModelInferResponse *ir = r->infer_response;
  if (!*r->error_message && !ir) fail("an answer has neither an error nor a response");
  if (!utf8(r->error_message) || (ir && (!utf8(ir->model_name) || !utf8(ir->model_version) || !utf8(ir->id))))
    fail("an answer carries a string that is not UTF-8");
  for (size_t i = 0; ir && i < ir->n_outputs; i++)
    if (!utf8(ir->outputs[i]->name) || !utf8(ir->outputs[i]->datatype)) fail("an output name is not UTF-8");
  if (g_verbose) fprintf(stderr, "fuzz_stream:   %s\n", *r->error_message ? r->error_message : "answered");
  inference__model_stream_infer_response__free_unpacked(r, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(DEADLINE_MS, GPR_TIMESPAN));
  grpc_call *call = grpc_channel_create_call(g_ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                             grpc_slice_from_static_string("/inference.GRPCInferenceService/ModelStreamInfer"),
                                             NULL, deadline, NULL);
  if (!call) fail("no call");
  grpc_metadata_array md_init, md_trail;
  grpc_metadata_array_init(&md_init);
  grpc_metadata_array_init(&md_trail);
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_SEND_INITIAL_METADATA;
  if (!batch(call, cq, &op, 1)) fail("the stream did not open");
  size_t off = 0, sent = 0;
  while (size - off >= 2 && sent < MAX_MESSAGES) {
    size_t n = (size_t)data[off] | (size_t)data[off + 1] << 8;
    off += 2;
    if (n > size - off) n = size - off;
    grpc_slice sl = grpc_slice_from_copied_buffer((const char *)data + off, n);
    off += n;
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = bb;
    int ok = batch(call, cq, &op, 1);
    grpc_byte_buffer_destroy(bb);
    if (!ok) break;  // the stream ended early: the status says why
    sent++;
  }
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[1].data.recv_initial_metadata.recv_initial_metadata = &md_init;
  batch(call, cq, ops, 2);
  size_t got = 0;
  for (;;) {
    grpc_byte_buffer *bb = NULL;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &bb;
    if (!batch(call, cq, &op, 1) || !bb) break;
    check_answer(bb);
    grpc_byte_buffer_destroy(bb);
    got++;
  }
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  op.data.recv_status_on_client.trailing_metadata = &md_trail;
  op.data.recv_status_on_client.status = &status;
  op.data.recv_status_on_client.status_details = &details;
  batch(call, cq, &op, 1);
  if (status != GRPC_STATUS_OK || got != sent) {
    fprintf(stderr, "fuzz_stream: %zu messages, %zu answers, status %d: %.*s\n", sent, got, (int)status,
            (int)GRPC_SLICE_LENGTH(details), (const char *)GRPC_SLICE_START_PTR(details));
    abort();
  }
  if (g_verbose) fprintf(stderr, "fuzz_stream: %zu messages, %zu answers, OK\n", sent, got);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&md_init);
  grpc_metadata_array_destroy(&md_trail);
  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  return 0;
}
