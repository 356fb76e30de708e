// rpc.h: channels to the server and a blocking unary call for the control
// RPCs (metadata, config, statistics). The load itself goes through driver.h.
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

// "INVALID_ARGUMENT" for 3; same table as stats.h's ld_kind_name for 0..16.
const char *ld_status_name(int status);

#endif
