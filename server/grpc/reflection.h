// gRPC server reflection (grpc.reflection.v1 and v1alpha ServerReflectionInfo)
// answered from a FileDescriptorSet, so ghz, grpcurl and grpcio-reflection can
// discover inferd's services without .proto files. gRPC C core ships no
// reflection service; the front end owns the bidi stream and calls
// srv_reflection_answer once per received message. v1 and v1alpha messages
// are wire-identical, so one function serves both paths.
#ifndef INFERD_SERVER_REFLECTION_H
#define INFERD_SERVER_REFLECTION_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct srv_reflection srv_reflection;

// Indexes a serialized google.protobuf.FileDescriptorSet (e.g. inferd_protoset
// from proto/protoset.h, built with --include_imports). The bytes are copied;
// the caller keeps ownership of `protoset`. Fails with ERR_INVALID_ARGUMENT
// when the set does not parse or a file's dependency is missing from it.
int srv_reflection_create(const uint8_t *protoset, size_t len, srv_reflection **out, err *e);

void srv_reflection_destroy(srv_reflection *r);

// Turns one serialized ServerReflectionRequest into one serialized
// ServerReflectionResponse (valid_host and original_request echoed). Lookups
// that fail are answered in-band with error_response (NOT_FOUND = 5, ...) and
// return 0; only bytes that are not a request return ERR_INVALID_ARGUMENT
// (the stream should then end with that status). On success *resp is
// malloc'ed and the caller frees it. `r` is read-only here, so any number of
// threads may answer concurrently.
int srv_reflection_answer(const srv_reflection *r, const uint8_t *req, size_t req_len,
                          uint8_t **resp, size_t *resp_len, err *e);

// The fully-qualified service names in the set, in file order, e.g. for the
// front end to log or to cross-check against registered methods.
size_t srv_reflection_service_count(const srv_reflection *r);
const char *srv_reflection_service_name(const srv_reflection *r, size_t i);

#endif
