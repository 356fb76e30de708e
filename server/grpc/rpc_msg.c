// server/grpc/rpc_msg.c: packing answers and unpacking requests for every
// RPC handler (server.h: srv_reply_msg, srv_unpack_or_fail), wherever the
// handler lives (rpc.c, core/control.c, obs/settings.c). It calls none of
// them, so they depend on it and not on each other.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/utf8.h"
#include "server/core/server.h"
#include "server/grpc/wire.h"

// Packs any message and answers the call with it.
void srv_reply_msg(srv_call *call, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    srv_call_fail(call, ERR_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  protobuf_c_message_pack(m, buf);
  srv_call_reply(call, buf, len);
}

// The first string field of m (nested messages and map entries included)
// that is not UTF-8: 1 with its dotted path ("parameters.key") in path,
// else 0. protobuf-c does not check what proto3 requires, and handlers
// quote names back ("unknown model '...'", a Status answer's keys), which
// clients then cannot decode (found by fuzzing, issue 15).
static int bad_string_field(const ProtobufCMessage *m, int depth, char *path, size_t cap) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  const uint8_t *base = (const uint8_t *)m;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_STRING && (f->type != PROTOBUF_C_TYPE_MESSAGE || depth >= 16)) continue;
    if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(const uint32_t *)(base + f->quantifier_offset) != f->id)
      continue;  // another member of the oneof is set: this one's bytes are not a pointer
    size_t n = 1;
    void *const *vals = (void *const *)(base + f->offset);
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      n = *(const size_t *)(base + f->quantifier_offset);
      vals = *(void *const *const *)(base + f->offset);
    }
    for (size_t j = 0; j < n; j++) {
      const void *v = vals[j];
      if (!v) continue;
      char sub[128] = "";
      if (f->type == PROTOBUF_C_TYPE_STRING ? utf8_valid(v, strlen(v)) : !bad_string_field(v, depth + 1, sub, sizeof sub))
        continue;
      // a path longer than cap is cut: it only names the field in a message
      if (snprintf(path, cap, "%s%s%s", f->name, sub[0] ? "." : "", sub) >= (int)cap) path[cap - 1] = '\0';
      return 1;
    }
  }
  return 0;
}

// INVALID_ARGUMENT naming m's first string field that is not UTF-8 (its
// bytes are not quoted), else 0.
int srv_strings_utf8(const ProtobufCMessage *m, err *e) {
  char path[128];
  if (!bad_string_field(m, 0, path, sizeof path)) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT, "%s: field '%s' is not valid UTF-8 (proto3 string fields must be)",
                 m->descriptor->name, path);
}

// Unpacks the request or answers INVALID_ARGUMENT; returns NULL then. A
// string field that is not UTF-8 is refused here, so no handler can echo
// it; so is one holding a NUL byte, found in the wire bytes since the
// unpacked string ends at it (a key "/secret\0junk" would open /secret).
ProtobufCMessage *srv_unpack_or_fail(srv_call *call, const ProtobufCMessageDescriptor *d, const uint8_t *req,
                                        size_t len) {
  err e;
  if (srv_wire_strings_no_nul(d, req, len, &e) != 0) {
    srv_call_fail(call, (int)e.code, e.msg);
    return NULL;
  }
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, req);
  if (!m) {
    char msg[256];
    snprintf(msg, sizeof msg, "malformed %s: the message does not parse", d->name);
    srv_call_fail(call, ERR_INVALID_ARGUMENT, msg);
  } else if (srv_strings_utf8(m, &e) != 0) {
    srv_call_fail(call, (int)e.code, e.msg);
    protobuf_c_message_free_unpacked(m, NULL);
    m = NULL;
  }
  return m;
}
