// request.h: serializes the ModelInferRequest that the load sends, and checks
// an answer's outputs for --validate-identity. Inputs travel as
// raw_input_contents (what inferd and Triton read fastest) unless they live in
// a registered shared memory region; with no outputs named the server returns
// every output.
#ifndef INFERD_CLIENTS_LOAD_REQUEST_H
#define INFERD_CLIENTS_LOAD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clients/load/inputs.h"
#include "kernels/base/err.h"

// A window of a region registered with SystemSharedMemoryRegister, sent as
// the tensor parameters shared_memory_region / _byte_size / _offset.
typedef struct ld_region_ref {
  const char *region;  // NULL: the tensor is not in shared memory
  uint64_t byte_size;
  uint64_t offset;  // 0 is left out of the message (the server's default)
} ld_region_ref;

// A requested output; shm.region NULL requests it in the response as usual.
typedef struct ld_output_req {
  const char *name;
  ld_region_ref shm;
} ld_output_req;

// Everything the request holds. Borrowed: only read while encoding.
typedef struct ld_request_spec {
  const char *model;
  const char *version;  // NULL or "": the server's choice
  const ld_tensor *in;
  size_t n_in;
  // NULL, or n_in entries: an input whose region is set carries no
  // raw_input_contents entry (the server reads it from the region).
  const ld_region_ref *in_shm;
  const ld_output_req *out;  // n_out outputs; none: the server returns all
  size_t n_out;
} ld_request_spec;

// On success *buf is malloc'ed and owned by the caller.
int ld_request_encode_spec(const ld_request_spec *spec, uint8_t **buf, size_t *len, err *e);

// --validate-identity: whether the encoded ModelInferResponse resp parses
// and its raw_output_contents are exactly expect[0..n)'s bytes, in order.
bool ld_response_matches(const uint8_t *resp, size_t len, const ld_tensor *expect, size_t n);

// Every input raw, no outputs named.
int ld_request_encode(const char *model, const char *version, const ld_tensor *in, size_t n, uint8_t **buf, size_t *len,
                      err *e);

#endif
