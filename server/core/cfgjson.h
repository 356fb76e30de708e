// cfgjson.h: a load request's JSON "config" override (Triton's form:
// protobuf's JSON mapping of ModelConfig, as tritonclient's load_model(...,
// config=...) sends it) turned into protobuf text format, which the
// repository's config.pbtxt parser (engine/repo/pbtxt.h) then reads like a
// file. One parser of configs stays: its limits, merge rules and messages
// hold for both forms; this module only maps JSON's shapes onto text.
#ifndef INFERD_SERVER_CFGJSON_H
#define INFERD_SERVER_CFGJSON_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "kernels/base/err.h"

// Deepest nesting of messages taken (ModelConfig's own is under 8).
#define SRV_CFGJSON_MAX_DEPTH 32

// Writes json[0, len) as text format of message type d into *text (NUL
// ended, the caller frees it). Field names as in the .proto or in
// lowerCamelCase; integers as numbers or decimal strings ("16", protobuf's
// JSON mapping for 64-bit ones, which Triton's example sends for
// max_batch_size too); enums by name or number; null as absent; maps as
// objects. Errors (ERR_INVALID_ARGUMENT) name the field path and what was
// wrong: not JSON (with the byte offset), an unknown field, a value of the
// wrong JSON type, a bytes field (ModelConfig has none).
int srv_cfgjson_to_text(const ProtobufCMessageDescriptor *d, const char *json, size_t len, char **text, err *e);

#endif
