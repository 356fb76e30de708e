// engine/pad.h: requests of different sequence lengths in one batch. A
// model's config may let the dynamic batcher mix them (an inferd extension:
// Triton's own ragged batching hands the model a 1-D concatenation instead,
// and otherwise leaves padding to the client):
//
//   parameters { key: "pad_to_longest"
//                value { string_value: "input_ids:0,attention_mask:0" } }
//   parameters { key: "pad_max_ratio" value { string_value: "2" } }
//
// Each listed input (name, optionally ":" and the pad value, default 0) has
// exactly one variable (-1) dim in the config, its sequence dim; a request's
// listed inputs share one length there. In a batch every request is padded
// with the pad value to the longest length in the batch; pad_max_ratio
// (default 0: unbounded) keeps the longest at most that many times the
// shortest. Outputs are cropped back to each request's length in every
// variable (-1) config dim whose extent in the batch equals the padded
// length. Padding must not change a request's answers: that holds for
// models that mask padded positions (an attention mask padded with 0).
#ifndef INFERD_ENGINE_PAD_H
#define INFERD_ENGINE_PAD_H

#include <stddef.h>
#include <stdint.h>

#include "engine/repo/model_config.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"

typedef struct eng_pad_input {
  int on;            // listed in pad_to_longest
  int dim;           // its sequence dim in the tensor as sent (batch dim first: config dim + 1)
  uint8_t value[8];  // the pad value in the input's dtype (dtype_size bytes)
  int value_zero;    // every byte of value is 0 (padding is a memset)
  char name[ENG_NAME_MAX];
} eng_pad_input;

typedef struct eng_pad {
  eng_pad_input *in;  // per config input; NULL when the model does not pad
  size_t n_in;
  uint32_t *out_var;  // per config output: bit d set when tensor dim d (batch dim first) is variable
  size_t n_out;
  double max_ratio;   // 0: unbounded, else >= 1
} eng_pad;

// Reads pad_to_longest and pad_max_ratio from cfg's parameters against the
// config's inputs and outputs as the client sees them (no batch dim). With
// no pad_to_longest, *p is zeroed (p->in NULL) and pad_max_ratio must be
// absent. Errors (INVALID_ARGUMENT, naming the parameter and input): an
// unknown or repeated input, an input without exactly one -1 dim or with a
// reshape, a value that does not parse in the input's data type or a
// BYTES input, max_batch_size 0, no dynamic_batching, a bad ratio. On
// failure nothing is left to free.
int eng_pad_parse(const eng_model_config *cfg, const eng_io *in, size_t n_in, const eng_io *out, size_t n_out,
                  eng_pad *p, err *e);
void eng_pad_free(eng_pad *p);

// The sequence length of the padded inputs of one request (t: its inputs in
// config order, batch dim first). Every padded input must agree; otherwise
// INVALID_ARGUMENT naming both inputs.
int eng_pad_seq_len(const eng_pad *p, const eng_tensor *t, int64_t *len, err *e);

// Bytes of t with its dim `dim` stretched to len.
size_t eng_pad_bytes(const eng_tensor *t, int dim, int64_t len);

// Copies t into dst with its dim `dim` (len_t = t->dims[dim] <= len)
// stretched to len, the new positions filled with value (dtype_size(t->dt)
// bytes). Returns the bytes written (eng_pad_bytes).
size_t eng_pad_copy(uint8_t *dst, const eng_tensor *t, int dim, int64_t len, const uint8_t *value);

// Copies the leading box want[0..n) of a row-major tensor of extents
// have[0..n) (want[d] <= have[d]) at src densely into dst; esize bytes per
// element. Returns the bytes written.
size_t eng_pad_crop(uint8_t *dst, const uint8_t *src, int n, const int64_t *have, const int64_t *want, size_t esize);

#endif
