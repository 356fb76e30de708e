// classify.h: Triton's classification extension on one output's rows: the
// top n classes of each row as BYTES strings "value:index[:label]", highest
// value first (ties: the lower index first), the value written as Triton
// writes it (std::to_string: "%f" for FP32/FP64, decimal for integers).
#ifndef INFERD_SERVER_CLASSIFY_H
#define INFERD_SERVER_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/dtype.h"
#include "kernels/base/err.h"
#include "server/core/labels.h"

// data: rows x per_row elements of dt. Writes rows x min(count, per_row)
// strings in KServe's BYTES layout (each a 4-byte little-endian length, then
// its bytes) into *out (malloc'ed, the caller frees it; *out_len bytes) and
// the strings per row into *n_classes. Labels from labels' entry for output
// (may be NULL). ERR_INVALID_ARGUMENT for a type that has no order (BOOL,
// FP16, BF16, BYTES) or more than max_per_row elements per row.
int srv_classify(const void *data, dtype dt, size_t rows, size_t per_row, uint32_t count, size_t max_per_row,
                 const srv_labels *labels, const char *output, uint8_t **out, size_t *out_len, size_t *n_classes,
                 err *e);

#endif
