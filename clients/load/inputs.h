// inputs.h: the tensors every request carries. Shapes come from the model's
// metadata (batch dim = --rows, variable dims from --shape) and the bytes are
// made once (seeded random, zeros, or read from files), so one serialized
// request can be reused for the whole run.
#ifndef INFERD_CLIENTS_LOAD_INPUTS_H
#define INFERD_CLIENTS_LOAD_INPUTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clients/load/cli.h"
#include "clients/load/model.h"
#include "kernels/base/err.h"

typedef struct ld_tensor {
  char *name;
  char *datatype;
  int64_t shape[LD_MAX_RANK + 1];  // batch dim included when the model batches
  size_t rank;
  uint8_t *data;  // raw little-endian bytes
  size_t size;
} ld_tensor;

typedef struct ld_input_cfg {
  int rows;
  const ld_shape_opt *shapes;
  size_t n_shapes;
  ld_data data;
  const char *path;  // LD_DATA_PATH: a file (one input) or a directory (one file per input name)
  uint64_t seed;
} ld_input_cfg;

// One tensor per model input, in metadata order. Notes that are not errors
// (a --shape overriding a fixed dim, --rows on a model that does not batch)
// go to log when it is not NULL: the request may then be rejected by the
// server, which is a legitimate thing to measure. Errors are the user's
// (ERR_INVALID_ARGUMENT: unknown input, missing dim, wrong file size).
int ld_inputs_build(const ld_model *m, const ld_input_cfg *cfg, FILE *log, ld_tensor **out, size_t *n, err *e);
void ld_inputs_free(ld_tensor *t, size_t n);

// --mix's invalid request: a copy of in[0..n) whose first input is one
// element longer in its last dim (its bytes: the original's rows, each with a
// zero element appended). ERR_INVALID_ARGUMENT when that input has no dims or
// no fixed element size (BYTES). On success *out (n tensors) is the caller's:
// ld_inputs_free.
int ld_inputs_widen_first(const ld_tensor *in, size_t n, ld_tensor **out, err *e);

// "[1,1024]" into buf.
const char *ld_shape_str(const int64_t *shape, size_t rank, char *buf, size_t cap);

#endif
