// rpc.h: channels to the server and a blocking unary call for the control
// RPCs (metadata, config, statistics); the ops and the end state (metadata,
// status, details) every client call here shares. The load itself goes
// through driver.h.
#ifndef INFERD_CLIENTS_LOAD_RPC_H
#define INFERD_CLIENTS_LOAD_RPC_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>

#include "kernels/base/err.h"

#define LD_SVC "/inference.GRPCInferenceService/"

// An insecure channel with no message size limits. private_conn: its own TCP
// connection (a local subchannel pool); otherwise gRPC shares one connection
// among channels to the same target, and --connections would mean nothing.
grpc_channel *ld_channel_create(const char *target, bool private_conn);

// Calls LD_SVC method with req and unpacks the reply as resp_desc (free it
// with protobuf_c_message_free_unpacked(*resp, NULL)). Fails with the call's
// gRPC status as the code (same numbering as err_code) and its details.
int ld_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
             const ProtobufCMessageDescriptor *resp_desc, int timeout_ms, ProtobufCMessage **resp, err *e);

// What every client call here receives besides its messages: both metadata
// arrays and the status with its details (the unary calls, the driver's, the
// streams', generate mode's).
typedef struct ld_call_end {
  grpc_metadata_array md_init, md_trail;
  grpc_status_code status;
  grpc_slice details;
} ld_call_end;

// Empty arrays, GRPC_STATUS_UNKNOWN, empty details: before the call starts.
void ld_call_end_init(ld_call_end *c);

// Makes *recv_md a RECV_INITIAL_METADATA and *recv_status a
// RECV_STATUS_ON_CLIENT op, both received into c.
void ld_call_end_ops(ld_call_end *c, grpc_op *recv_md, grpc_op *recv_status);

// Frees what init and the call put in c.
void ld_call_end_destroy(ld_call_end *c);

// A request's half of a call into ops[0..3): initial metadata, the one
// message send, the close.
void ld_call_send_ops(grpc_op ops[3], grpc_byte_buffer *send);

// "INVALID_ARGUMENT" for 3; same table as stats.h's ld_kind_name for 0..16.
const char *ld_status_name(int status);

#endif
