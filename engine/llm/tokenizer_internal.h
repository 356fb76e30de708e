// engine/llm/tokenizer_internal.h: the tokenizer's parts, shared by its
// files: tokenizer_load.c (tokenizer.json -> this struct), tokenizer_pretok.c
// (added tokens, normalizers, pre-tokenizers), tokenizer_bpe.c (the model)
// and tokenizer_decode.c (decoders, streams). Nothing here is public.
#ifndef INFERD_ENGINE_LLM_TOKENIZER_INTERNAL_H
#define INFERD_ENGINE_LLM_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/llm/tokenizer.h"

// A growable byte string (the encode and decode scratch).
typedef struct tok_buf {
  char *b;
  size_t n, cap;
} tok_buf;

int tok__buf_put(tok_buf *b, const void *s, size_t n);  // 0, or -1 out of memory
void tok__buf_free(tok_buf *b);

// A compiled pattern: tokenizers' Regex (Oniguruma there, PCRE2 here in
// UTF + UCP mode) or a String pattern (matched literally).
typedef struct tok_re {
  pcre2_code *code;
} tok_re;

// All non-overlapping matches of re in s[0..n), as [start, end) byte pairs
// appended to *m (count *nm, capacity *cm); an empty match advances one
// character, as Oniguruma's find_iter does. 0, or -1 (out of memory or a
// match error).
int tok__re_find(const tok_re *re, const char *s, size_t n, size_t **m, size_t *nm, size_t *cm);

// --- added tokens (tokenizers' AddedVocabulary)

typedef struct tok_added {
  char *content;  // what is matched in the raw text (normalized = false)
  size_t len;
  char *norm;  // normalized = true: content run through the normalizer (what is matched, and decoded)
  size_t norm_len;
  int32_t id;
  bool special, single_word, lstrip, rstrip, normalized;
} tok_added;

// --- normalizers, pre-tokenizers, decoders: sequences flattened

typedef enum tok_norm_kind { TN_NFC, TN_NFD, TN_NFKC, TN_NFKD, TN_PREPEND, TN_REPLACE } tok_norm_kind;
typedef struct tok_norm {
  tok_norm_kind kind;
  tok_re re;      // TN_REPLACE
  char *content;  // TN_PREPEND's prefix, TN_REPLACE's replacement
  size_t content_len;
} tok_norm;

typedef enum tok_split_behavior {
  TS_REMOVED,
  TS_ISOLATED,
  TS_MERGED_WITH_PREVIOUS,
  TS_MERGED_WITH_NEXT,
  TS_CONTIGUOUS
} tok_split_behavior;
typedef enum tok_prepend { TP_ALWAYS, TP_FIRST, TP_NEVER } tok_prepend;

typedef enum tok_pre_kind { TP_SPLIT, TP_BYTELEVEL, TP_METASPACE, TP_DIGITS } tok_pre_kind;
typedef struct tok_pre {
  tok_pre_kind kind;
  tok_re re;  // TP_SPLIT; TP_BYTELEVEL with use_regex: GPT-2's pattern
  tok_split_behavior behavior;
  bool invert;            // TP_SPLIT
  bool add_prefix_space;  // TP_BYTELEVEL
  bool use_regex;         // TP_BYTELEVEL
  char repl[8];           // TP_METASPACE: the replacement character, UTF-8
  size_t repl_len;
  tok_prepend prepend;  // TP_METASPACE
  bool split;           // TP_METASPACE
  bool individual;      // TP_DIGITS
} tok_pre;

typedef enum tok_dec_kind { TD_BYTELEVEL, TD_METASPACE, TD_REPLACE, TD_BYTEFALLBACK, TD_FUSE, TD_STRIP } tok_dec_kind;
typedef struct tok_dec {
  tok_dec_kind kind;
  tok_re re;  // TD_REPLACE
  char *content;
  size_t content_len;
  char repl[8];  // TD_METASPACE; TD_STRIP's content character
  size_t repl_len;
  tok_prepend prepend;  // TD_METASPACE
  size_t start, stop;   // TD_STRIP
} tok_dec;

// --- the whole tokenizer

struct eng_tok {
  // the BPE model: id -> token text (NULL where no token has that id)
  char **vocab;
  uint32_t *vocab_len;
  int32_t n_vocab;  // ids [0, n_vocab)
  int32_t *vmap;    // open-addressing text -> id (-1 empty), vmap_cap a power of 2
  size_t vmap_cap;
  uint64_t *mkeys;  // merges: (left id << 32 | right id) -> rank, new id; key ~0 empty
  uint32_t *mrank;
  int32_t *mnew;
  size_t mcap;
  int32_t unk_id;  // -1: no unk token
  bool fuse_unk, byte_fallback, ignore_merges;
  char *cont_prefix, *word_suffix;  // continuing_subword_prefix, end_of_word_suffix (NULL: none)
  int32_t byte_ids[256];            // byte_fallback: <0xXX> ids (-1 missing)

  tok_added *added;
  size_t n_added;
  // the added tokens of each set (0: matched on the raw text, 1: on the
  // normalized text), indices into added grouped by first byte: set k's
  // tokens starting with byte c are afirst[k][aoff[k][c] .. aoff[k][c + 1])
  size_t *afirst[2];
  size_t aoff[2][257];
  tok_re word_re;     // ^\w: single_word's test of the characters around a match
  int32_t *added_of;  // id -> index into added (-1: not an added token), n_ids entries
  int32_t n_ids;      // max(n_vocab, largest added id + 1)

  tok_norm *norm;
  size_t n_norm;
  tok_pre *pre;
  size_t n_pre;
  tok_dec *dec;
  size_t n_dec;
  bool has_decoder;

  int32_t *tmpl;  // the single template: ids, with -1 where the sequence goes
  size_t n_tmpl;
  bool has_template;

  int32_t bos_id, eos_id;
};

// tokenizer_bpe.c
int32_t tok__vocab_find(const eng_tok *t, const char *s, size_t n);
int tok__vocab_build(eng_tok *t);                                                 // the text -> id map from t->vocab
int tok__merge_add(eng_tok *t, int32_t a, int32_t b, uint32_t rank, int32_t id);  // a later duplicate wins
int tok__merges_alloc(eng_tok *t, size_t n);
// Appends the ids of one pre-tokenized word (s[0..n), n > 0) to out.
int tok__bpe_word(const eng_tok *t, const char *s, size_t n, eng_tok_ids *out);
int tok__ids_put(eng_tok_ids *o, int32_t id);

// tokenizer_pretok.c: text -> ids before the template.
int tok__normalize(const eng_tok *t, const char *s, size_t n, tok_buf *out);
int tok__encode_text(const eng_tok *t, const char *s, size_t n, eng_tok_ids *out, err *e);
// Unicode normalization of s by kind (TN_NFC..TN_NFKD) appended to out.
int tok__unicode_norm(tok_norm_kind kind, const char *s, size_t n, tok_buf *out);

// The GPT-2 byte -> character table (UTF-8 of each), and its inverse.
void tok__bytelevel_char(uint8_t byte, char out[4], size_t *len);
int tok__bytelevel_byte(uint32_t cp);  // -1 when cp is no byte's character

// UTF-8: the code point at s[0..n) and its length (input already valid).
uint32_t tok__utf8_next(const char *s, size_t n, size_t *len);
size_t tok__utf8_put(uint32_t cp, char out[4]);
// Rust's String::from_utf8_lossy: every maximal invalid subpart -> U+FFFD.
int tok__utf8_lossy(const char *s, size_t n, tok_buf *out);

#endif
