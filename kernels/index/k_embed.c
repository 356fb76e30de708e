// kernels/index/k_embed.c: the C reference of a decoder's token embedding
// (k_ref.h: k_embed): a row gather from the embedding matrix, plus GPT-2's
// learned position rows. engine/llm/llm_step.c does the same inline on the
// CPU; this is the oracle of kernels/index/k_embed.cu.
#include <string.h>

#include "kernels/k_ref.h"

void k_embed(float *y, const float *table, const float *pos_table, const int32_t *tokens, const int32_t *pos,
             size_t n_tok, size_t hidden) {
  for (size_t t = 0; t < n_tok; t++) {
    float *yt = y + t * hidden;
    memcpy(yt, table + (size_t)tokens[t] * hidden, hidden * sizeof(float));
    if (pos_table)
      for (size_t c = 0; c < hidden; c++) yt[c] += pos_table[(size_t)pos[t] * hidden + c];
  }
}
