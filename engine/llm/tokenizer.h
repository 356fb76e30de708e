// engine/llm/tokenizer.h: text in, token ids out and back, as the Hugging
// Face `tokenizers` library does it from a checkpoint's tokenizer.json
// (issue 36): byte-level BPE (GPT-2, Llama 3, Qwen2, Mistral's Tekken) and
// SentencePiece-style BPE with byte fallback (Llama 2, Mistral 7B). The
// pipeline is tokenizers' own: added tokens split out first, then the
// normalizer, the pre-tokenizers (Split regexes run by PCRE2), the BPE model,
// the post-processor's template; decoding runs the decoder chain. Anything in
// tokenizer.json this code does not implement is refused at load by name,
// every such field at once, never silently tokenized some other way.
//
// A tokenizer is immutable once created: encode, decode and streams may run
// on any number of threads at once over one eng_tok.
#ifndef INFERD_ENGINE_LLM_TOKENIZER_H
#define INFERD_ENGINE_LLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct eng_tok eng_tok;

// Loads path: a checkpoint directory holding tokenizer.json (and, when
// present, tokenizer_config.json for the BOS/EOS tokens), or a tokenizer.json
// file itself. On success *out is the caller's (eng_tok_destroy); on failure
// *out is NULL and e names every unsupported type or field, or the broken one.
int eng_tok_create(const char *path, eng_tok **out, err *e);
void eng_tok_destroy(eng_tok *t);

// Ids one past the largest the tokenizer knows (model vocabulary and added tokens).
int32_t eng_tok_vocab_size(const eng_tok *t);
// tokenizer_config.json's bos_token / eos_token as ids; -1 when not named
// (or not in the vocabulary).
int32_t eng_tok_bos_id(const eng_tok *t);
int32_t eng_tok_eos_id(const eng_tok *t);
// Whether encoding with add_special puts tokens of the post-processor's
// template before the text (Llama's BOS).
bool eng_tok_adds_bos(const eng_tok *t);
// The id of a token's text (an added token or a vocabulary entry), -1 if none.
int32_t eng_tok_token_id(const eng_tok *t, const char *token);
// The text of id as tokenizer.json writes it (byte-level or "▁" form, not
// decoded; *len bytes), NULL for an id the tokenizer does not know. Whether
// it is a special added token in *special (when not NULL).
const char *eng_tok_id_text(const eng_tok *t, int32_t id, size_t *len, bool *special);

// A growable array of ids an encode appends to; zero-initialise it, free
// ids with free().
typedef struct eng_tok_ids {
  int32_t *ids;
  size_t n, cap;
} eng_tok_ids;

// Encodes text[0..len) (UTF-8; anything else is ERR_INVALID_ARGUMENT) and
// appends the ids to *out; add_special runs the post-processor's template
// (tokenizers' add_special_tokens). Equal to tokenizers' encode(...).ids.
// On an error *out may hold part of the ids (the caller still owns them).
int eng_tok_encode(const eng_tok *t, const char *text, size_t len, bool add_special, eng_tok_ids *out, err *e);

// Decodes ids as tokenizers' decode(ids, skip_special_tokens) does: ids the
// tokenizer does not know are dropped, as there. *text (NUL-terminated,
// *len bytes, valid UTF-8) is malloc'ed and the caller's.
int eng_tok_decode(const eng_tok *t, const int32_t *ids, size_t n, bool skip_special, char **text, size_t *len, err *e);

// Incremental detokenization for streaming (vLLM's and tokenizers'
// DecodeStream prefix/read offsets): ids are fed one at a time and each step
// gives the text they added, never ending inside a UTF-8 sequence or on a
// U+FFFD that a later byte could still complete. The deltas of every step and
// of eng_tok_stream_finish, concatenated, are eng_tok_decode of all ids.
typedef struct eng_tok_stream eng_tok_stream;

// NULL when out of memory. The tokenizer must outlive the stream.
eng_tok_stream *eng_tok_stream_create(const eng_tok *t, bool skip_special);
void eng_tok_stream_destroy(eng_tok_stream *s);
// Feeds one id; *delta (*len bytes, NUL-terminated, possibly empty) is the
// stream's until its next call.
int eng_tok_stream_step(eng_tok_stream *s, int32_t id, const char **delta, size_t *len, err *e);
// The text still held back (a trailing U+FFFD the ids really end with).
int eng_tok_stream_finish(eng_tok_stream *s, const char **delta, size_t *len, err *e);

#endif
