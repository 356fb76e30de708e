// server/grpc/wire.c: reading protobuf wire bytes field by field (see
// wire.h). A string field holding a NUL byte is refused from the wire
// bytes, before protobuf-c's unpack would cut it at the NUL: "mlp\0junk"
// served by mlp, a shared memory key "/victim\0junk" opening /victim and a
// proxy's allow-list in front of the server passed by the bytes it
// compared (issue 31).
#include "server/grpc/wire.h"

#include <stdio.h>
#include <string.h>

// A varint of at most `max` bytes at *pos.
static int wire_varint(const uint8_t *b, size_t len, size_t *pos, int max, uint64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < max && *pos < len; i++) {
    uint8_t c = b[(*pos)++];
    v |= (uint64_t)(c & 0x7f) << (7 * i);
    if (!(c & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

int srv_wire_next(const uint8_t *b, size_t len, size_t *pos, srv_wire_field *f) {
  uint64_t tag, n;
  f->start = *pos;
  if (wire_varint(b, len, pos, 5, &tag) || tag > UINT32_MAX || (tag >> 3) == 0) return -1;
  f->number = (uint32_t)(tag >> 3);
  f->type = (uint32_t)(tag & 7);
  f->data = *pos;
  f->n = 0;
  switch (f->type) {
    case 0:
      if (wire_varint(b, len, pos, 10, &n)) return -1;
      break;
    case 1:
      if (len - *pos < 8) return -1;
      *pos += 8;
      break;
    case 5:
      if (len - *pos < 4) return -1;
      *pos += 4;
      break;
    case 2:
      if (wire_varint(b, len, pos, 5, &n) || n > len - *pos) return -1;
      f->data = *pos;
      f->n = (size_t)n;
      *pos += (size_t)n;
      break;
    default:
      return -1;
  }
  f->end = *pos;
  return 0;
}

// Deeper than any message of our protos (ModelInferRequest's deepest
// string is inputs.parameters.value.string_param, four levels).
#define WIRE_MAX_DEPTH 16

static int strings_nul(const ProtobufCMessageDescriptor *d, const uint8_t *b, size_t len, int depth, char *path,
                       size_t cap) {
  size_t pos = 0;
  srv_wire_field f;
  while (pos < len) {
    if (srv_wire_next(b, len, &pos, &f)) return 0;
    if (f.type != 2) continue;  // strings and messages are length-delimited
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(d, f.number);
    if (!fd) continue;  // an unknown field: kept as bytes, never read as a string
    char sub[128] = "";
    if (fd->type == PROTOBUF_C_TYPE_STRING) {
      if (!memchr(b + f.data, 0, f.n)) continue;
    } else if (fd->type == PROTOBUF_C_TYPE_MESSAGE && depth < WIRE_MAX_DEPTH) {
      if (!strings_nul(fd->descriptor, b + f.data, f.n, depth + 1, sub, sizeof sub)) continue;
    } else {
      continue;
    }
    // a path longer than cap is cut: it only names the field in a message
    if (snprintf(path, cap, "%s%s%s", fd->name, sub[0] ? "." : "", sub) >= (int)cap) path[cap - 1] = '\0';
    return 1;
  }
  return 0;
}

int srv_wire_strings_nul(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len, char *path, size_t cap) {
  if (cap) path[0] = '\0';
  return buf && cap ? strings_nul(d, buf, len, 0, path, cap) : 0;
}

int srv_wire_strings_no_nul(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len, err *e) {
  char path[128];
  if (!srv_wire_strings_nul(d, buf, len, path, sizeof path)) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT, "%s: field '%s' contains a NUL byte (string fields must not)", d->name, path);
}
