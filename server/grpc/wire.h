// server/grpc/wire.h: reading protobuf wire bytes without unpacking them:
// one field at a time (ModelInfer's zero-copy unpack, server/core/infer.c)
// and the check that no string field holds a NUL byte, which protobuf-c
// cannot report (it copies a string into a NUL-terminated buffer, so
// "mlp\0junk" would be read as "mlp").
#ifndef INFERD_SERVER_GRPC_WIRE_H
#define INFERD_SERVER_GRPC_WIRE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct srv_wire_field {
  size_t start, end;  // the field's bytes, tag included
  size_t data, n;     // a length-delimited field's payload
  uint32_t number, type;
} srv_wire_field;

// The field at *pos of b[0, len), *pos moved past it; -1 where protobuf-c is
// left to judge (truncated, groups, unknown wire types, tags and lengths
// past 32 bits).
int srv_wire_next(const uint8_t *b, size_t len, size_t *pos, srv_wire_field *f);

// 1 when a string field of the message of type d in buf[0, len) (nested
// messages and map entries included) holds a NUL byte, its dotted path
// ("parameters.key") in path (cap bytes, cut when longer), else 0. Bytes
// the walk cannot follow end it with 0: protobuf-c then decides whether the
// message parses at all.
int srv_wire_strings_nul(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len, char *path, size_t cap);

// INVALID_ARGUMENT naming the first string field of buf (a message of type
// d) that holds a NUL byte (its bytes are not quoted), else 0.
int srv_wire_strings_no_nul(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len, err *e);

#endif
