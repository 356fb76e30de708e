// stream_msg.h: the bytes of inferd-load's ModelStreamInfer messages, with
// no gRPC in sight. Every request of a run is the same serialized
// ModelInferRequest, so each message is those bytes plus an id field
// appended (protobuf takes fields in any order and a later one wins): no
// re-encoding and no copy of the tensors per send. Answers are scanned for
// the two things matching needs (the echoed id and error_message) without
// unpacking their outputs.
#ifndef INFERD_CLIENTS_LOAD_STREAM_MSG_H
#define INFERD_CLIENTS_LOAD_STREAM_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Tag, one-byte length and the 20 digits of the largest uint64.
#define LD_ID_FIELD_MAX 22

// Writes ModelInferRequest.id = id[0..n) as a field (tag 0x1a, varint
// length, bytes) into out when it fits in cap; returns the field's length
// either way, so a caller may ask with cap 0 first.
size_t ld_id_field(const char *id, size_t n, uint8_t *out, size_t cap);

// The id field of the decimal seq; out holds LD_ID_FIELD_MAX bytes.
size_t ld_id_field_seq(uint64_t seq, uint8_t *out);

// seq from the decimal id bytes; false when they are not one (empty, a
// non-digit, a leading zero, more than uint64): not an id this client sent.
bool ld_id_parse(const uint8_t *id, size_t n, uint64_t *seq);

// A ModelStreamInferResponse as spans into the scanned buffer.
typedef struct ld_answer {
  const char *error;  // error_message, not NUL-terminated; error_len 0: none
  size_t error_len;
  const uint8_t *resp;  // infer_response's encoded ModelInferResponse; NULL: absent
  size_t resp_len;
  const uint8_t *id;  // infer_response.id; id_len 0: none
  size_t id_len;
} ld_answer;

// 0, or -1 when buf is not a well-formed message (truncated, bad wire type,
// infer_response not a message, or given twice: protobuf would merge the two,
// which no server does and this scan does not).
int ld_answer_scan(const uint8_t *buf, size_t len, ld_answer *a);

// The error kind (stats.h) an answer's error_message stands for. A stream
// answer carries no status code, so: a message that starts with a status
// name ("NOT_FOUND: ...") counts as that status; otherwise the phrase of a
// small table (inferd's and Triton's wording: "unknown model" NOT_FOUND,
// "not ready" UNAVAILABLE, "input '" INVALID_ARGUMENT, ...) found earliest in
// the message decides, since messages state their cause before quoting names;
// with none of them, LD_KIND_STREAM_ERROR.
int ld_kind_from_message(const char *msg, size_t len);

#endif
