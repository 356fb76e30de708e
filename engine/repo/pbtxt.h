// pbtxt: a protobuf text-format parser (config.pbtxt) driven entirely by
// protobuf-c's descriptors, so every message type parses with the same code
// and the result is indistinguishable from what protobuf_c_message_unpack
// would have built.
#ifndef INFERD_ENGINE_PBTXT_H
#define INFERD_ENGINE_PBTXT_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "kernels/base/err.h"

// The most values one repeated or map field may be given in one text (map
// entries counted before a repeated key replaces an earlier one): past it
// the parse fails naming the field. Far above any real config (a 16 MiB
// config.pbtxt of one-digit dims holds about 2M); with parsing linear it
// bounds the memory one field's arrays take, not the time.
#define PBTXT_MAX_ENTRIES (1u << 20)

// Parses `len` bytes of text format into a new message of type `desc`.
// `filename` only names the input in error messages (NULL -> "<text>").
// On success *out owns a message the caller frees with
// protobuf_c_message_free_unpacked(*out, NULL); on failure *out is NULL and
// e holds ERR_INVALID_ARGUMENT with "<file>:<line>: <problem>", the problem
// naming the field, e.g. "config.pbtxt:7: unknown field 'max_batch_sise' in
// inference.ModelConfig".
// Semantics follow proto3 text format with merge rules: a singular scalar
// given twice keeps the last value, a singular message given twice is merged,
// a map key given twice keeps the last entry, setting two members of one
// oneof is an error.
int pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                const char *filename, ProtobufCMessage **out, err *e);

// Reads the file at `path` and parses it as above (errors name `path`;
// an unreadable file is ERR_NOT_FOUND or ERR_INTERNAL).
int pbtxt_parse_file(const ProtobufCMessageDescriptor *desc, const char *path,
                     ProtobufCMessage **out, err *e);

#endif
