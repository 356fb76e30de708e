// fuzz_gen_sse.c: libFuzzer driver for what inferd-load's generate mode reads
// from a server it does not trust (clients/load/gen_sse.c): an event stream
// fed in the splits the input's first byte picks, each event read as a
// generate answer and as an OpenAI chunk. Every input must end in values; a
// crash, leak or UB report is a finding.
#include <stdint.h>
#include <string.h>

#include "clients/load/gen_sse.h"

static int on_event(void *ctx, const char *data, size_t len) {
  (void)ctx;
  int64_t n;
  char msg[256];
  ld_gen_parse_tokens_event(data, len, &n, msg, sizeof msg);
  ld_oai_chunk c;
  ld_gen_parse_openai_chunk(data, len, &c, msg, sizeof msg);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t step = (size_t)data[0] % 17 + 1;  // feeds of 1..17 bytes: events split anywhere
  ld_sse *p = ld_sse_create(on_event, NULL);
  if (!p) return 0;
  for (size_t i = 1; i < size; i += step) ld_sse_feed(p, (const char *)data + i, size - i < step ? size - i : step);
  ld_sse_destroy(p);
  return 0;
}
