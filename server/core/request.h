// server/core/request.h: one ModelInfer request on its way through the server.
// Created on a CQ thread (parsed and validated: server/core/infer.c), queued
// by the scheduler on that thread (sched.c), executed on an engine instance
// thread, answered there (reply.c, through order.c when the model preserves
// ordering) or wherever the scheduler drops it when it never runs, and
// freed once its answer is sent (request.c).
#ifndef INFERD_SERVER_REQUEST_H
#define INFERD_SERVER_REQUEST_H

#include <stdint.h>

#include "batcher/batcher.h"
#include "batcher/sequence.h"
#include "engine/tensor.h"
#include "grpc_service.pb-c.h"
#include "server/grpc/grpc_front.h"
#include "server/core/registry.h"
#include "server/sec/cuda_shm.h"
#include "server/sec/shm.h"

// The most classes one requested output may ask for (the classification
// extension), and the most elements per row it ranks (Triton's bound too).
#define SRV_CLASSIFICATION_MAX 1000000u

// A requested output that goes to client shared memory: system (ptr) or
// CUDA (cuda, offset; written with a copy to the device).
typedef struct srv_shm_out {
  uint8_t *ptr;               // byte 0 of the window, held through srv_request.shm_held
  srv_cuda_shm_region *cuda;  // or the CUDA region, held through srv_request.cuda_held
  uint64_t offset;            // the window's start in the CUDA region
  uint64_t cap;               // the window's size
  const char *region;         // its name, for messages (points into the request)
} srv_shm_out;

// A config input left in a CUDA region at parse time, for the batch's
// assembly to take device to device on a GPU instance (or read to the
// host where the instance cannot take it: server/core/sched.c's gather).
typedef struct srv_cuda_in {
  srv_cuda_shm_region *region;  // NULL: the input's bytes are on the host (inputs[i].data)
  uint64_t offset;              // the window's start in the region
} srv_cuda_in;

// A tensor's bytes in several runs: the received message's pieces it spans
// (infer_pieces.c), read by the batch's gather (sched.c) without a copy first.
typedef struct srv_pieces {
  const srv_piece *v;
  size_t n;
} srv_pieces;

typedef struct srv_request {
  bat_item item;  // item.payload points back here
  bat_seq_item seq;  // for a model with sequence_batching (its correlation ID and flags); seq.payload too
  srv_call *call;      // a unary ModelInfer, or
  srv_stream *stream;  // one request of a ModelStreamInfer stream
  srv_model *model;
  srv_version *version;
  srv_registry *reg;  // set while the request holds a reference on model (released when freed)
  struct srv_arena *arena;            // server/core/arena.h: holds msg and inputs, freed with the request
  Inference__ModelInferRequest *msg;  // unpacked into arena; owns the raw input bytes
  eng_tensor *inputs;                 // config input order (in arena), pointing into msg or typed_buf
  // per raw_input_contents entry of a message received in pieces, the pieces
  // of an entry that spans several (its data NULL in msg; n 0 otherwise);
  // NULL when none does (in arena)
  srv_pieces *raw_pieces;
  // per config input, the pieces the batch's gather reads it from (its data
  // NULL; n 0 when none); NULL when no input stays in pieces (in arena)
  srv_pieces *in_pieces;
  void *typed_buf;                    // typed contents converted to raw bytes
  uint64_t outputs_mask;              // requested config outputs (bit i = output i)
  // Triton's classification extension: class_count[k] > 0 answers config
  // output k as its top class_count[k] classes per row (reply.c); NULL when
  // no output asks (in arena)
  uint32_t *class_count;
  // client shared memory: every region the request reads or writes, held
  // until it is freed; shm_out[k] (NULL when none) is where config output k
  // goes instead of the response
  srv_shm_region **shm_held;
  size_t n_shm_held;
  srv_shm_out *shm_out;
  // per config input, the system region it is read from (NULL when none; in
  // arena): such inputs are copied through the SIGBUS guard
  // (server/sec/shmguard.h), never read in place by the engine
  const char **shm_in;
  // set when a guarded copy from or into a region faulted (the client
  // shrank its object under it): the request fails with that, the rest of
  // its batch goes on. Both point into msg or the model's config.
  const char *shm_fault_region, *shm_fault_tensor;
  // CUDA regions held the same way; the host copies of the inputs read from
  // them at parse time; per config input (NULL when none), the inputs left
  // in their region (inputs[i].data NULL then) for the batch to copy device
  // to device
  srv_cuda_shm_region **cuda_held;
  size_t n_cuda_held;
  void **cuda_copies;
  size_t n_cuda_copies;
  srv_cuda_in *cuda_in;
  // pad_to_longest: the length the request's batch padded it to (item.seq_len
  // is its own); set by the scheduler, read when answering
  int64_t padded_len;
  int64_t t_recv_us, t_enqueue_us;
  int traced;  // sampled for the trace file
  // preserve_ordering: its place in the version's order (server/core/order.c), where
  // its answer waits until every earlier request's has gone; NULL otherwise
  struct srv_order_entry *ord;
  // the bytes charged to the server's in-flight budget (srv_server.inflight_bytes,
  // which budget points to) when it was admitted; given back by srv_infer_request_free
  _Atomic long long *budget;
  long long charged;
  // bytes of BYTES inputs copied out of system shared memory at parse time
  // (infer_validate.c), held until the request is freed: charged to the
  // budget with the message
  size_t shm_copied;
} srv_request;

static inline int srv_request_cancelled(const srv_request *r) {
  return r->stream ? srv_stream_cancelled(r->stream) : srv_call_cancelled(r->call);
}

struct srv_server;

// Unpacks `len` bytes of a ModelInferRequest into r (calloc'd, call/stream set
// or both NULL), checks its strings are UTF-8, finds the model and version
// (r then holds a registry reference) and validates every input and output
// against the model's config, as ModelInfer and ModelStreamInfer do before
// queueing (infer.c). The same function a live call runs, callable without gRPC (the
// fuzz driver tests/fuzz/fuzz_infer.c). On failure e says why (the code is
// the RPC status); either way r is released with srv_infer_request_free.
int srv_infer_prepare(struct srv_server *s, srv_request *r, const uint8_t *req, size_t len, err *e);
// The same for a message received in n pieces of len bytes in all
// (srv_unary_sliced_fn; infer_pieces.c): the same answers, its tensors left
// in the pieces where they span several (the pieces must outlive r).
int srv_infer_prepare_pieces(struct srv_server *s, srv_request *r, const srv_piece *v, size_t n, size_t len, err *e);
// ModelInfer on a request already built as a message rather than packed
// (server/core/ensemble.c's steps: their tensors point at the run's, which
// are not copied): as srv_infer_handler from the model lookup on, answered
// through call, which must be a local call. msg and what it points to are
// the caller's and must stay until the call is answered; bytes, its
// tensors' size, is charged to --max-inflight-request-bytes.
void srv_infer_msg_handler(struct srv_server *s, srv_call *call, Inference__ModelInferRequest *msg, size_t bytes);
// Releases everything r holds (shared memory regions, its arena, its model
// reference) and r itself (request.c). NULL is a no-op.
void srv_infer_request_free(srv_request *r);

// One response of a decoupled model to r (repeat.c, llm_grpc.c): a
// ModelStreamInferResponse with r's model name, version and id, the outputs
// outs[0..n) whose bytes are raw[0..n), and triton_final_response = final,
// which Triton's gRPC server sets on every decoupled response. malloc'ed,
// *len bytes (the caller sends or frees it); NULL when out of memory.
uint8_t *srv_request_pack_decoupled(const srv_request *r, int final, size_t n,
                                    Inference__ModelInferResponse__InferOutputTensor **outs,
                                    ProtobufCBinaryData *raw, size_t *len);

// The end of a request (server/core/request.c): every answer leaves through
// these, whichever part of the request path gives it.
//
// Sends r's answer now: resp (malloc'ed, taken), or NULL with code and msg
// (a unary call's status; a stream's error message). r stays the caller's.
void srv_request_answer(const srv_request *r, uint8_t *resp, size_t len, int code, const char *msg);
// The same, then frees r and counts it out of the server's ModelInfer calls
// in flight: a request's last step (after it, r must not be touched).
void srv_request_send(struct srv_server *s, srv_request *r, uint8_t *resp, size_t len, int code, const char *msg);
// The same, for a caller that holds a lock while it sends (order.c sends an
// ordered version's answers under its mutex, itself taken inside the
// scheduler's): while it runs, srv_request_sending_locked is 1 on this
// thread, so a local call's done callback (an ensemble's step answered)
// knows not to start new requests here, which would take the scheduler's
// lock against that order.
void srv_request_send_locked(struct srv_server *s, srv_request *r, uint8_t *resp, size_t len, int code,
                             const char *msg);
int srv_request_sending_locked(void);

#endif
