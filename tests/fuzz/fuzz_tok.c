// fuzz_tok.c: libFuzzer driver for the tokenizer's untrusted input, the text
// and ids of requests (engine/llm/tokenizer.h), over the committed fixtures
// tests/llm/tok/fixtures/{llama3,llama2,metaspace} (byte-level BPE with a
// Split pattern, byte-fallback BPE with its decoder chain, Metaspace). The
// first byte picks the tokenizer (bits 0-1) and the surface (bit 2):
//   encode: the rest is text (any bytes: not UTF-8 must be an error value),
//           encoded with and without the template, and the ids decoded back;
//   decode: the rest is little-endian 16-bit ids (some unknown), decoded
//           both ways and streamed; the stream's deltas must be valid UTF-8
//           and add up to the decode.
// A crash, leak, UB report or a broken rule (abort) is a finding.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/tokenizer.h"
#include "kernels/base/utf8.h"

static eng_tok *toks[3];

static void fail(const char *why) {
  fprintf(stderr, "fuzz_tok: %s\n", why);
  abort();
}

static eng_tok *tok(int k) {
  static const char *const names[3] = {"llama3", "llama2", "metaspace"};
  if (!toks[k]) {
    char p[4096];
    err e = {0};
    snprintf(p, sizeof p, "%s/%s", INFERD_TOK_FIXTURES, names[k]);
    if (eng_tok_create(p, &toks[k], &e)) {
      fprintf(stderr, "fuzz_tok: %s\n", e.msg);
      abort();
    }
  }
  return toks[k];
}

static void check_decode(const eng_tok *t, const int32_t *ids, size_t n) {
  err e = {0};
  for (int skip = 0; skip < 2; skip++) {
    char *text;
    size_t len;
    if (eng_tok_decode(t, ids, n, skip, &text, &len, &e)) continue;
    if (!utf8_valid(text, len)) fail("decode is not UTF-8");
    eng_tok_stream *s = eng_tok_stream_create(t, skip);
    size_t at = 0;
    for (size_t i = 0; i <= n && s; i++) {
      const char *d;
      size_t dl;
      if (i < n ? eng_tok_stream_step(s, ids[i], &d, &dl, &e) : eng_tok_stream_finish(s, &d, &dl, &e)) fail(e.msg);
      if (!utf8_valid(d, dl)) fail("a delta is not UTF-8");
      if (at + dl > len || memcmp(text + at, d, dl)) fail("the deltas differ from the decode");
      at += dl;
    }
    if (s && at != len) fail("the deltas fall short of the decode");
    eng_tok_stream_destroy(s);
    free(text);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  eng_tok *t = tok((data[0] & 3) % 3);
  err e = {0};
  if (!(data[0] & 4)) {
    for (int special = 0; special < 2; special++) {
      eng_tok_ids ids = {0};
      int rc = eng_tok_encode(t, (const char *)data + 1, size - 1, special, &ids, &e);
      if (rc == 0)
        check_decode(t, ids.ids, ids.n);
      else if (utf8_valid((const char *)data + 1, size - 1))
        fail(e.msg);
      free(ids.ids);
    }
    return 0;
  }
  size_t n = (size - 1) / 2;
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  if (!ids) return 0;
  for (size_t i = 0; i < n; i++) ids[i] = data[1 + 2 * i] | data[2 + 2 * i] << 8;
  check_decode(t, ids, n);
  free(ids);
  return 0;
}
