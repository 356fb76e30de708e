// fuzz_llm.c: libFuzzer driver for the decoder checkpoint files a model
// folder hands engine/llm/: the first byte picks the surface, the rest is
//   even: a config.json (eng_llm_config_parse, with no generation config);
//   odd:  a model.safetensors beside a fixed tiny GPT-2 config.json, loaded
//         whole (eng_llm_model_create: the header checks, then every tensor
//         checked by name, shape and dtype and converted).
// Every input must end in success or an error value; a crash, leak or UB
// report is a finding.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/llm/llm_config.h"
#include "engine/llm/llm_model.h"

// the folder the safetensors inputs are written to, made once
static const char *folder(void) {
  static char dir[] = "/tmp/fuzz_llm_XXXXXX";
  static int made;
  if (!made) {
    if (!mkdtemp(dir)) abort();
    char p[64];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) abort();
    fputs("{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":4,\"n_layer\":1,\"n_head\":2,\"n_positions\":4,"
          "\"vocab_size\":8,\"n_inner\":8}",
          f);
    fclose(f);
    made = 1;
  }
  return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  err e = {0};
  if (!(data[0] & 1)) {
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    eng_llm_config c;
    (void)eng_llm_config_parse(s, NULL, &c, &e);
    free(s);
    return 0;
  }
  const char *dir = folder();
  char p[64];
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  FILE *f = fopen(p, "wb");
  if (!f) return 0;
  fwrite(data + 1, 1, size - 1, f);
  fclose(f);
  eng_llm_model *m = NULL;
  if (eng_llm_model_create(dir, &m, &e) == 0) eng_llm_model_destroy(m);
  return 0;
}
