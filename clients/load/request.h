// request.h: serializes the ModelInferRequest that the load sends. Inputs
// travel as raw_input_contents (what inferd and Triton read fastest) and no
// outputs are named, so the server returns every output.
#ifndef INFERD_CLIENTS_LOAD_REQUEST_H
#define INFERD_CLIENTS_LOAD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "clients/load/inputs.h"
#include "engine/err.h"

// On success *buf is malloc'ed and owned by the caller.
int ld_request_encode(const char *model, const char *version, const ld_tensor *in, size_t n, uint8_t **buf, size_t *len,
                      err *e);

#endif
