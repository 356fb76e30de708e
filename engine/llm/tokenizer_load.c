// engine/llm/tokenizer_load.c: tokenizer.json (and tokenizer_config.json's
// BOS/EOS) -> eng_tok, and the public entry points that are not decoding.
// Every component is read by its "type" with the fields tokenizers
// serializes for it; a type or a field this code does not implement, or a
// value it cannot honour (BPE dropout, truncation, padding), is a problem
// named in the load error, all of them at once.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/llm/tokenizer_internal.h"
#include "kernels/base/rfile.h"
#include "kernels/base/utf8.h"

#define JSON_MAX ((size_t)512 << 20)

typedef struct ld {
  eng_tok *t;
  err_list bad;
  int unsup;  // problems that are missing features (ERR_UNIMPLEMENTED) rather than broken files
} ld;

#define UNSUP(l, ...) ((l)->unsup++, err_list_add(&(l)->bad, __VA_ARGS__))

static const cJSON *get(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

// Fields of o outside names (NULL-terminated) are refused: tokenizers would
// act on them and this code would not.
static void only_fields(ld *l, const cJSON *o, const char *what, const char *const *names) {
  for (const cJSON *c = o->child; c; c = c->next) {
    bool ok = !strcmp(c->string, "type");
    for (const char *const *n = names; *n && !ok; n++) ok = !strcmp(c->string, *n);
    if (!ok) UNSUP(l, "%s: field '%s' is not supported", what, c->string);
  }
}

static bool get_bool(ld *l, const cJSON *o, const char *k, const char *what, bool def) {
  const cJSON *v = get(o, k);
  if (!v) return def;
  if (!cJSON_IsBool(v)) {
    err_list_add(&l->bad, "%s.%s must be true or false", what, k);
    return def;
  }
  return cJSON_IsTrue(v);
}

static const char *get_str(ld *l, const cJSON *o, const char *k, const char *what, bool required) {
  const cJSON *v = get(o, k);
  if (!v) {
    if (required) err_list_add(&l->bad, "%s.%s is missing", what, k);
    return NULL;
  }
  if (!cJSON_IsString(v)) {
    err_list_add(&l->bad, "%s.%s must be a string", what, k);
    return NULL;
  }
  return v->valuestring;
}

static char *dup(const char *s, size_t *len) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  if (len) *len = n;
  return d;
}

// One character as a string (Metaspace's replacement, Strip's content).
static void one_char(ld *l, const cJSON *o, const char *k, const char *what, char out[8], size_t *len) {
  const char *s = get_str(l, o, k, what, true);
  size_t n = s ? strlen(s) : 0, cl = 0;
  if (n) tok__utf8_next(s, n, &cl);
  if (!s || !n || cl != n) {
    if (s) err_list_add(&l->bad, "%s.%s must be one character", what, k);
    memcpy(out, " ", 2), *len = 1;
    return;
  }
  memcpy(out, s, n + 1), *len = n;
}

// Oniguruma's shorthand classes (what tokenizers runs) where PCRE2's differ:
// \s is White_Space there (PCRE2's UCP \s also takes U+180E and others),
// \w is letters, marks, decimal digits and connector punctuation (PCRE2's
// is letters, numbers and _), \h a hex digit (PCRE2: horizontal space).
#define ONIG_S \
  "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define ONIG_W "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"
#define ONIG_H "0-9a-fA-F"

// pat rewritten for PCRE2 into out; -1 with *why when a construct cannot be
// (a negated shorthand inside a class).
static int onig_to_pcre2(const char *pat, tok_buf *out, const char **why) {
  bool in_class = false;
  size_t class_start = 0;
  for (size_t i = 0; pat[i];) {
    char c = pat[i];
    if (c == '\\' && pat[i + 1]) {
      char e = pat[i + 1];
      const char *set = e == 's' || e == 'S'   ? ONIG_S
                        : e == 'w' || e == 'W' ? ONIG_W
                        : e == 'h' || e == 'H' ? ONIG_H
                                               : NULL;
      bool neg = e == 'S' || e == 'W' || e == 'H';
      if (set && in_class && neg) {
        *why = "a negated class shorthand (\\S, \\W, \\H) inside [...]";
        return -1;
      }
      int rc;
      if (set && in_class)
        rc = tok__buf_put(out, set, strlen(set));
      else if (set) {
        rc = tok__buf_put(out, neg ? "[^" : "[", neg ? 2 : 1);
        if (!rc) rc = tok__buf_put(out, set, strlen(set));
        if (!rc) rc = tok__buf_put(out, "]", 1);
      } else
        rc = tok__buf_put(out, pat + i, 2);
      if (rc) return *why = "out of memory", -1;
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      class_start = out->n + 1 + (pat[i + 1] == '^');
    } else if (in_class && c == '[' && pat[i + 1] == ':') {  // [:alpha:]
      const char *end = strstr(pat + i + 2, ":]");
      if (end) {
        size_t n = (size_t)(end + 2 - (pat + i));
        if (tok__buf_put(out, pat + i, n)) return *why = "out of memory", -1;
        i += n;
        continue;
      }
    } else if (in_class && c == ']' && out->n > class_start) {
      in_class = false;
    }
    if (tok__buf_put(out, &c, 1)) return *why = "out of memory", -1;
    i++;
  }
  return tok__buf_put(out, "", 0);
}

static int re_compile(ld *l, tok_re *re, const char *pat, bool literal, const char *what) {
  int ec;
  PCRE2_SIZE eo;
  uint32_t opt = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);  // UCP is not allowed with LITERAL
  tok_buf tr = {0};
  const char *why = NULL;
  if (!literal && onig_to_pcre2(pat, &tr, &why)) {
    UNSUP(l, "%s: pattern '%.60s' has %s", what, pat, why);
    tok__buf_free(&tr);
    return -1;
  }
  re->code = pcre2_compile((PCRE2_SPTR)(literal ? pat : tr.b), PCRE2_ZERO_TERMINATED, opt, &ec, &eo, NULL);
  tok__buf_free(&tr);
  if (!re->code) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(ec, msg, sizeof msg);
    UNSUP(l, "%s: pattern '%.60s' does not compile with PCRE2 at offset %zu: %s", what, pat, (size_t)eo, msg);
    return -1;
  }
  pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);  // the interpreter still runs it if the JIT cannot
  return 0;
}

// {"String": s} or {"Regex": r}
static void pattern(ld *l, const cJSON *o, const char *what, tok_re *re) {
  const cJSON *p = get(o, "pattern");
  const cJSON *s = p ? get(p, "String") : NULL, *r = p ? get(p, "Regex") : NULL;
  if (s && cJSON_IsString(s))
    re_compile(l, re, s->valuestring, true, what);
  else if (r && cJSON_IsString(r))
    re_compile(l, re, r->valuestring, false, what);
  else
    err_list_add(&l->bad, "%s.pattern must be {\"String\": ...} or {\"Regex\": ...}", what);
}

static void *grow(void *p, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return p;
  size_t c = *cap ? *cap * 2 : 4;
  void *q = realloc(p, c * elem);
  if (q) *cap = c;
  return q;
}

// --- normalizer

static void normalizer(ld *l, const cJSON *o, size_t *cap) {
  eng_tok *t = l->t;
  const char *type = get_str(l, o, "type", "normalizer", true);
  if (!type) return;
  if (!strcmp(type, "Sequence")) {
    only_fields(l, o, "normalizer Sequence", (const char *const[]){"normalizers", NULL});
    const cJSON *a = get(o, "normalizers");
    if (!cJSON_IsArray(a))
      err_list_add(&l->bad, "normalizer Sequence.normalizers must be an array");
    else
      for (const cJSON *c = a->child; c; c = c->next) normalizer(l, c, cap);
    return;
  }
  tok_norm z = {0};
  static const char *const kinds[] = {"NFC", "NFD", "NFKC", "NFKD"};
  bool known = true;
  if (!strcmp(type, "Prepend")) {
    z.kind = TN_PREPEND;
    only_fields(l, o, "normalizer Prepend", (const char *const[]){"prepend", NULL});
    const char *p = get_str(l, o, "prepend", "normalizer Prepend", true);
    z.content = dup(p ? p : "", &z.content_len);
  } else if (!strcmp(type, "Replace")) {
    z.kind = TN_REPLACE;
    only_fields(l, o, "normalizer Replace", (const char *const[]){"pattern", "content", NULL});
    pattern(l, o, "normalizer Replace", &z.re);
    const char *c = get_str(l, o, "content", "normalizer Replace", true);
    z.content = dup(c ? c : "", &z.content_len);
  } else {
    known = false;
    for (int k = 0; k < 4; k++)
      if (!strcmp(type, kinds[k])) {
        z.kind = (tok_norm_kind)(TN_NFC + k), known = true;
        only_fields(l, o, "normalizer", (const char *const[]){NULL});
      }
    if (!known) UNSUP(l, "normalizer type '%s' is not supported", type);
  }
  if (!known) return;
  tok_norm *n = grow(t->norm, cap, t->n_norm, sizeof *n);
  if (!n) {
    err_list_add(&l->bad, "out of memory");
    return;
  }
  t->norm = n;
  t->norm[t->n_norm++] = z;
}

// --- pre-tokenizer

static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static tok_prepend prepend_scheme(ld *l, const cJSON *o, const char *what) {
  const char *p = get_str(l, o, "prepend_scheme", what, false);
  tok_prepend r = TP_ALWAYS;
  if (p && !strcmp(p, "first"))
    r = TP_FIRST;
  else if (p && !strcmp(p, "never"))
    r = TP_NEVER;
  else if (p && strcmp(p, "always"))
    err_list_add(&l->bad, "%s.prepend_scheme '%s' is not always, first or never", what, p);
  const cJSON *aps = get(o, "add_prefix_space");
  if (aps && cJSON_IsFalse(aps)) {
    if (r != TP_NEVER && p) err_list_add(&l->bad, "%s: add_prefix_space does not match declared prepend_scheme", what);
    r = TP_NEVER;
  }
  return r;
}

static void pre_tokenizer(ld *l, const cJSON *o, size_t *cap) {
  eng_tok *t = l->t;
  const char *type = get_str(l, o, "type", "pre_tokenizer", true);
  if (!type) return;
  tok_pre p = {0};
  if (!strcmp(type, "Sequence")) {
    only_fields(l, o, "pre_tokenizer Sequence", (const char *const[]){"pretokenizers", NULL});
    const cJSON *a = get(o, "pretokenizers");
    if (!cJSON_IsArray(a))
      err_list_add(&l->bad, "pre_tokenizer Sequence.pretokenizers must be an array");
    else
      for (const cJSON *c = a->child; c; c = c->next) pre_tokenizer(l, c, cap);
    return;
  } else if (!strcmp(type, "Split")) {
    p.kind = TP_SPLIT;
    only_fields(l, o, "pre_tokenizer Split", (const char *const[]){"pattern", "behavior", "invert", NULL});
    pattern(l, o, "pre_tokenizer Split", &p.re);
    const char *b = get_str(l, o, "behavior", "pre_tokenizer Split", true);
    static const char *const bs[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    bool found = false;
    for (int k = 0; k < 5 && b; k++)
      if (!strcmp(b, bs[k])) p.behavior = (tok_split_behavior)k, found = true;
    if (b && !found) UNSUP(l, "pre_tokenizer Split.behavior '%s' is not supported", b);
    p.invert = get_bool(l, o, "invert", "pre_tokenizer Split", false);
  } else if (!strcmp(type, "ByteLevel")) {
    p.kind = TP_BYTELEVEL;
    only_fields(l, o, "pre_tokenizer ByteLevel",
                (const char *const[]){"add_prefix_space", "trim_offsets", "use_regex", NULL});
    p.add_prefix_space = get_bool(l, o, "add_prefix_space", "pre_tokenizer ByteLevel", true);
    p.use_regex = get_bool(l, o, "use_regex", "pre_tokenizer ByteLevel", true);
    if (p.use_regex) re_compile(l, &p.re, GPT2_PATTERN, false, "pre_tokenizer ByteLevel");
  } else if (!strcmp(type, "Metaspace")) {
    p.kind = TP_METASPACE;
    only_fields(l, o, "pre_tokenizer Metaspace",
                (const char *const[]){"replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL});
    one_char(l, o, "replacement", "pre_tokenizer Metaspace", p.repl, &p.repl_len);
    p.prepend = prepend_scheme(l, o, "pre_tokenizer Metaspace");
    p.split = get_bool(l, o, "split", "pre_tokenizer Metaspace", true);
  } else if (!strcmp(type, "Digits")) {
    p.kind = TP_DIGITS;
    only_fields(l, o, "pre_tokenizer Digits", (const char *const[]){"individual_digits", NULL});
    // char::is_numeric is \p{N}; one match per digit, joined unless individual
    p.behavior = get_bool(l, o, "individual_digits", "pre_tokenizer Digits", false) ? TS_ISOLATED : TS_CONTIGUOUS;
    re_compile(l, &p.re, "\\p{N}", false, "pre_tokenizer Digits");
  } else {
    UNSUP(l, "pre_tokenizer type '%s' is not supported", type);
    return;
  }
  tok_pre *n = grow(t->pre, cap, t->n_pre, sizeof *n);
  if (!n) {
    err_list_add(&l->bad, "out of memory");
    return;
  }
  t->pre = n;
  t->pre[t->n_pre++] = p;
}

// --- decoder

static void decoder(ld *l, const cJSON *o, size_t *cap) {
  eng_tok *t = l->t;
  const char *type = get_str(l, o, "type", "decoder", true);
  if (!type) return;
  tok_dec d = {0};
  if (!strcmp(type, "Sequence")) {
    only_fields(l, o, "decoder Sequence", (const char *const[]){"decoders", NULL});
    const cJSON *a = get(o, "decoders");
    if (!cJSON_IsArray(a))
      err_list_add(&l->bad, "decoder Sequence.decoders must be an array");
    else
      for (const cJSON *c = a->child; c; c = c->next) decoder(l, c, cap);
    return;
  } else if (!strcmp(type, "ByteLevel")) {
    d.kind = TD_BYTELEVEL;
    only_fields(l, o, "decoder ByteLevel",
                (const char *const[]){"add_prefix_space", "trim_offsets", "use_regex", NULL});
  } else if (!strcmp(type, "Metaspace")) {
    d.kind = TD_METASPACE;
    only_fields(l, o, "decoder Metaspace",
                (const char *const[]){"replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL});
    one_char(l, o, "replacement", "decoder Metaspace", d.repl, &d.repl_len);
    d.prepend = prepend_scheme(l, o, "decoder Metaspace");
  } else if (!strcmp(type, "Replace")) {
    d.kind = TD_REPLACE;
    only_fields(l, o, "decoder Replace", (const char *const[]){"pattern", "content", NULL});
    pattern(l, o, "decoder Replace", &d.re);
    const char *c = get_str(l, o, "content", "decoder Replace", true);
    d.content = dup(c ? c : "", &d.content_len);
  } else if (!strcmp(type, "ByteFallback")) {
    d.kind = TD_BYTEFALLBACK;
    only_fields(l, o, "decoder ByteFallback", (const char *const[]){NULL});
  } else if (!strcmp(type, "Fuse")) {
    d.kind = TD_FUSE;
    only_fields(l, o, "decoder Fuse", (const char *const[]){NULL});
  } else if (!strcmp(type, "Strip")) {
    d.kind = TD_STRIP;
    only_fields(l, o, "decoder Strip", (const char *const[]){"content", "start", "stop", NULL});
    one_char(l, o, "content", "decoder Strip", d.repl, &d.repl_len);
    const cJSON *a = get(o, "start"), *b = get(o, "stop");
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble < 0 || b->valuedouble < 0 || a->valuedouble > 1e6 ||
        b->valuedouble > 1e6)
      err_list_add(&l->bad, "decoder Strip.start and .stop must be counts");
    else
      d.start = (size_t)a->valuedouble, d.stop = (size_t)b->valuedouble;
  } else {
    UNSUP(l, "decoder type '%s' is not supported", type);
    return;
  }
  tok_dec *n = grow(t->dec, cap, t->n_dec, sizeof *n);
  if (!n) {
    err_list_add(&l->bad, "out of memory");
    return;
  }
  t->dec = n;
  t->dec[t->n_dec++] = d;
}

// --- post-processor: the single-sequence template (pair templates are never used here)

static void post_processor(ld *l, const cJSON *o) {
  eng_tok *t = l->t;
  const char *type = get_str(l, o, "type", "post_processor", true);
  if (!type) return;
  if (!strcmp(type, "Sequence")) {
    only_fields(l, o, "post_processor Sequence", (const char *const[]){"processors", NULL});
    const cJSON *a = get(o, "processors");
    if (!cJSON_IsArray(a))
      err_list_add(&l->bad, "post_processor Sequence.processors must be an array");
    else
      for (const cJSON *c = a->child; c; c = c->next) post_processor(l, c);
    return;
  }
  if (!strcmp(type, "ByteLevel")) {  // offsets only: the ids are left as they are
    only_fields(l, o, "post_processor ByteLevel",
                (const char *const[]){"add_prefix_space", "trim_offsets", "use_regex", NULL});
    return;
  }
  if (strcmp(type, "TemplateProcessing")) {
    UNSUP(l, "post_processor type '%s' is not supported", type);
    return;
  }
  only_fields(l, o, "post_processor TemplateProcessing",
              (const char *const[]){"single", "pair", "special_tokens", NULL});
  if (t->has_template) UNSUP(l, "post_processor: two TemplateProcessing in one Sequence are not supported");
  const cJSON *single = get(o, "single"), *sp = get(o, "special_tokens");
  if (!cJSON_IsArray(single) || (sp && !cJSON_IsObject(sp))) {
    err_list_add(&l->bad, "post_processor TemplateProcessing: single must be an array, special_tokens an object");
    return;
  }
  t->has_template = true;
  size_t cap = 0;
  int seqs = 0;
  for (const cJSON *it = single->child; it; it = it->next) {
    const cJSON *st = get(it, "SpecialToken"), *sq = get(it, "Sequence");
    const char *id = st   ? get_str(l, st, "id", "TemplateProcessing SpecialToken", true)
                     : sq ? get_str(l, sq, "id", "TemplateProcessing Sequence", true)
                          : NULL;
    if (!id) {
      if (!st && !sq)
        err_list_add(&l->bad, "post_processor TemplateProcessing.single: an item is neither SpecialToken nor Sequence");
      continue;
    }
    if (sq) {
      if (strcmp(id, "A"))
        err_list_add(&l->bad, "post_processor TemplateProcessing.single names sequence '%s', not A", id);
      int32_t *n = grow(t->tmpl, &cap, t->n_tmpl, sizeof *n);
      if (!n) return;
      t->tmpl = n, t->tmpl[t->n_tmpl++] = -1, seqs++;
      continue;
    }
    const cJSON *def = sp ? get(sp, id) : NULL, *ids = def ? get(def, "ids") : NULL;
    if (!cJSON_IsArray(ids)) {
      err_list_add(&l->bad, "post_processor TemplateProcessing: special token '%s' has no ids in special_tokens", id);
      continue;
    }
    for (const cJSON *x = ids->child; x; x = x->next) {
      if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 2147483647.0) {
        err_list_add(&l->bad, "post_processor TemplateProcessing: special token '%s' has an id out of range", id);
        continue;
      }
      int32_t *n = grow(t->tmpl, &cap, t->n_tmpl, sizeof *n);
      if (!n) return;
      t->tmpl = n, t->tmpl[t->n_tmpl++] = (int32_t)x->valuedouble;
    }
  }
  if (seqs != 1) err_list_add(&l->bad, "post_processor TemplateProcessing.single must hold sequence A once");
}

// --- the BPE model

static void model(ld *l, const cJSON *m) {
  eng_tok *t = l->t;
  const char *type = get_str(l, m, "type", "model", false);
  if (type && strcmp(type, "BPE")) {
    UNSUP(l, "model type '%s' is not supported (only BPE)", type);
    return;
  }
  only_fields(l, m, "model BPE",
              (const char *const[]){"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                                    "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges", NULL});
  const cJSON *dr = get(m, "dropout");
  if (dr && !(cJSON_IsNumber(dr) && dr->valuedouble == 0.0))
    UNSUP(l, "model BPE.dropout is not supported (it makes encoding random)");
  t->fuse_unk = get_bool(l, m, "fuse_unk", "model", false);
  t->byte_fallback = get_bool(l, m, "byte_fallback", "model", false);
  t->ignore_merges = get_bool(l, m, "ignore_merges", "model", false);
  const char *cp = get_str(l, m, "continuing_subword_prefix", "model", false);
  const char *ws = get_str(l, m, "end_of_word_suffix", "model", false);
  if (cp) t->cont_prefix = dup(cp, NULL);
  if (ws) t->word_suffix = dup(ws, NULL);
  const cJSON *v = get(m, "vocab"), *mg = get(m, "merges");
  if (!cJSON_IsObject(v) || !cJSON_IsArray(mg)) {
    err_list_add(&l->bad, "model: vocab must be an object and merges an array");
    return;
  }
  int32_t max = -1;
  for (const cJSON *c = v->child; c; c = c->next) {
    if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble >= 2147483647.0 ||
        c->valuedouble != (double)(int32_t)c->valuedouble) {
      err_list_add(&l->bad, "model.vocab: the id of '%.40s' is not an integer in [0, 2^31 - 1)", c->string);
      continue;
    }
    if ((int32_t)c->valuedouble > max) max = (int32_t)c->valuedouble;
  }
  t->n_vocab = max + 1;
  t->vocab = calloc((size_t)t->n_vocab + 1, sizeof *t->vocab);
  t->vocab_len = calloc((size_t)t->n_vocab + 1, sizeof *t->vocab_len);
  if (!t->vocab || !t->vocab_len) {
    err_list_add(&l->bad, "model.vocab: out of memory for %d ids", (int)t->n_vocab);
    return;
  }
  for (const cJSON *c = v->child; c; c = c->next) {
    if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble >= 2147483647.0) continue;
    int32_t id = (int32_t)c->valuedouble;
    if (t->vocab[id]) {
      err_list_add(&l->bad, "model.vocab: id %d is given to both '%.40s' and '%.40s'", (int)id, t->vocab[id],
                   c->string);
      continue;
    }
    size_t len;
    t->vocab[id] = dup(c->string, &len);
    t->vocab_len[id] = (uint32_t)len;
  }
  if (tok__vocab_build(t)) {
    err_list_add(&l->bad, "model.vocab: out of memory");
    return;
  }
  const char *unk = get_str(l, m, "unk_token", "model", false);
  t->unk_id = -1;
  if (unk && (t->unk_id = tok__vocab_find(t, unk, strlen(unk))) < 0)
    err_list_add(&l->bad, "model.unk_token '%.40s' is not in the vocabulary", unk);
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_ids[b] = tok__vocab_find(t, name, 6);
  }
  if (tok__merges_alloc(t, (size_t)cJSON_GetArraySize(mg))) {
    err_list_add(&l->bad, "model.merges: out of memory");
    return;
  }
  size_t pl = t->cont_prefix ? strlen(t->cont_prefix) : 0;
  tok_buf nb = {0};
  uint32_t rank = 0;
  for (const cJSON *c = mg->child; c; c = c->next, rank++) {
    const char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    if (cJSON_IsString(c)) {  // legacy "a b"
      const char *sp = strchr(c->valuestring, ' ');
      if (sp && !strchr(sp + 1, ' ')) a = c->valuestring, al = (size_t)(sp - a), b = sp + 1, bl = strlen(b);
    } else if (cJSON_IsArray(c) && cJSON_GetArraySize(c) == 2 && cJSON_IsString(c->child) &&
               cJSON_IsString(c->child->next)) {
      a = c->child->valuestring, al = strlen(a), b = c->child->next->valuestring, bl = strlen(b);
    }
    if (!a) {
      err_list_add(&l->bad, "model.merges[%u] is neither \"a b\" nor [a, b]", rank);
      continue;
    }
    int32_t ia = tok__vocab_find(t, a, al), ib = tok__vocab_find(t, b, bl);
    nb.n = 0;
    if (bl < pl || tok__buf_put(&nb, a, al) || tok__buf_put(&nb, b + pl, bl - pl)) {
      err_list_add(&l->bad, "model.merges[%u]: bad pair", rank);
      continue;
    }
    int32_t in = tok__vocab_find(t, nb.b, nb.n);
    if (ia < 0 || ib < 0 || in < 0) {
      err_list_add(&l->bad, "model.merges[%u]: '%.30s' is not in the vocabulary", rank, ia < 0 ? a : ib < 0 ? b : nb.b);
      continue;
    }
    tok__merge_add(t, ia, ib, rank, in);
  }
  tok__buf_free(&nb);
}

// --- added tokens

static void added_tokens(ld *l, const cJSON *a) {
  eng_tok *t = l->t;
  int n = cJSON_GetArraySize(a);
  t->added = calloc((size_t)n + 1, sizeof *t->added);
  if (!t->added) return;
  for (const cJSON *c = a->child; c; c = c->next) {
    only_fields(
        l, c, "added_tokens",
        (const char *const[]){"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special", NULL});
    const cJSON *id = get(c, "id");
    const char *content = get_str(l, c, "content", "added_tokens", true);
    if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= 2147483647.0 || !content) {
      err_list_add(&l->bad, "added_tokens: an entry lacks a valid id or content");
      continue;
    }
    if (!*content) continue;  // tokenizers ignores empty ones
    tok_added *x = &t->added[t->n_added++];
    x->id = (int32_t)id->valuedouble;
    x->content = dup(content, &x->len);
    x->special = get_bool(l, c, "special", "added_tokens", false);
    x->single_word = get_bool(l, c, "single_word", "added_tokens", false);
    x->lstrip = get_bool(l, c, "lstrip", "added_tokens", false);
    x->rstrip = get_bool(l, c, "rstrip", "added_tokens", false);
    x->normalized = get_bool(l, c, "normalized", "added_tokens", !x->special);
  }
}

// After the normalizer is read: the normalized forms, the by-first-byte
// index of both sets, the id -> added token table.
static int index_added(eng_tok *t) {
  int32_t top = t->n_vocab;
  for (size_t i = 0; i < t->n_added; i++) {
    tok_added *x = &t->added[i];
    if (x->id + 1 > top) top = x->id + 1;
    tok_buf nb = {0};
    if (x->normalized && t->n_norm) {
      if (tok__normalize(t, x->content, x->len, &nb)) return -1;
      x->norm = nb.b ? nb.b : dup("", NULL), x->norm_len = nb.n;
    } else {
      x->norm = dup(x->content, &x->norm_len);
    }
    if (!x->norm) return -1;
  }
  t->n_ids = top;
  t->added_of = malloc((size_t)top * sizeof *t->added_of + 1);
  if (!t->added_of) return -1;
  memset(t->added_of, 0xff, (size_t)top * sizeof *t->added_of);
  for (size_t i = 0; i < t->n_added; i++) t->added_of[t->added[i].id] = (int32_t)i;  // a later one wins, as there
  for (int k = 0; k < 2; k++) {
    t->afirst[k] = malloc((t->n_added + 1) * sizeof *t->afirst[k]);
    if (!t->afirst[k]) return -1;
    size_t cnt[257] = {0}, m = 0;
    for (size_t i = 0; i < t->n_added; i++) {
      const tok_added *x = &t->added[i];
      if (t->added_of[x->id] != (int32_t)i || x->normalized != (k == 1) || (k ? x->norm_len : x->len) == 0) continue;
      cnt[(unsigned char)(k ? x->norm[0] : x->content[0])]++;
    }
    for (int c = 0; c < 256; c++) t->aoff[k][c] = m, m += cnt[c];
    t->aoff[k][256] = m;
    size_t fill[256];
    memcpy(fill, t->aoff[k], sizeof fill);
    for (size_t i = 0; i < t->n_added; i++) {
      const tok_added *x = &t->added[i];
      if (t->added_of[x->id] != (int32_t)i || x->normalized != (k == 1) || (k ? x->norm_len : x->len) == 0) continue;
      t->afirst[k][fill[(unsigned char)(k ? x->norm[0] : x->content[0])]++] = i;
    }
  }
  return 0;
}

// single_word's test: Rust's regex \w (Alphabetic, marks, decimal digits,
// connector punctuation, Join_Control) at the start of the text.
#define WORD_CHAR "^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]"

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
static int32_t config_token(const eng_tok *t, const cJSON *cfg, const char *k) {
  const cJSON *v = get(cfg, k);
  if (v && cJSON_IsObject(v)) v = get(v, "content");
  return v && cJSON_IsString(v) ? eng_tok_token_id(t, v->valuestring) : -1;
}

static int read_json(const char *path, const char *what, cJSON **out, err *e) {
  uint8_t *buf;
  size_t len;
  TRY(rfile_read_all(path, what, JSON_MAX, &buf, &len, e));
  *out = cJSON_ParseWithLength((const char *)buf, len);
  free(buf);
  if (!*out) return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' is not valid JSON", what, path);
  return 0;
}

int eng_tok_create(const char *path, eng_tok **out, err *e) {
  *out = NULL;
  char file[4096], dir[4096];
  struct stat st;
  bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  snprintf(dir, sizeof dir, "%s", path);
  if (!is_dir) {
    char *slash = strrchr(dir, '/');
    if (slash)
      *slash = 0;
    else
      snprintf(dir, sizeof dir, ".");
  }
  if (is_dir)
    snprintf(file, sizeof file, "%s/tokenizer.json", path);
  else
    snprintf(file, sizeof file, "%s", path);
  cJSON *root;
  TRY(read_json(file, "tokenizer.json", &root, e));
  eng_tok *t = calloc(1, sizeof *t);
  if (!t) {
    cJSON_Delete(root);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "tokenizer: out of memory");
  }
  t->unk_id = t->bos_id = t->eos_id = -1;
  ld l = {.t = t};
  only_fields(&l, root, "tokenizer.json",
              (const char *const[]){"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                                    "model", "post_processor", "decoder", NULL});
  if (get(root, "truncation")) UNSUP(&l, "tokenizer.json: truncation is not supported (it must be null)");
  if (get(root, "padding")) UNSUP(&l, "tokenizer.json: padding is not supported (it must be null)");
  size_t cap_n = 0, cap_p = 0, cap_d = 0;
  const cJSON *m = get(root, "model");
  if (!m || !cJSON_IsObject(m))
    err_list_add(&l.bad, "tokenizer.json: model is missing");
  else
    model(&l, m);
  const cJSON *x;
  if ((x = get(root, "normalizer"))) normalizer(&l, x, &cap_n);
  if ((x = get(root, "pre_tokenizer"))) pre_tokenizer(&l, x, &cap_p);
  if ((x = get(root, "post_processor"))) post_processor(&l, x);
  if ((x = get(root, "decoder"))) t->has_decoder = true, decoder(&l, x, &cap_d);
  x = get(root, "added_tokens");
  if (x && !cJSON_IsArray(x))
    err_list_add(&l.bad, "tokenizer.json: added_tokens must be an array");
  else if (x)
    added_tokens(&l, x);
  cJSON_Delete(root);
  if (l.bad.n == 0) {
    if (re_compile(&l, &t->word_re, WORD_CHAR, false, "single_word") == 0 && index_added(t) != 0)
      err_list_add(&l.bad, "out of memory indexing the added tokens");
    for (int32_t i = 0; i < (int32_t)t->n_tmpl && !l.bad.n; i++)
      if (t->tmpl[i] >= t->n_ids)
        err_list_add(&l.bad, "post_processor: template id %d is not a token", (int)t->tmpl[i]);
  }
  if (l.bad.n) {
    err_list_set(&l.bad, e, l.unsup ? ERR_UNIMPLEMENTED : ERR_INVALID_ARGUMENT, "problems in tokenizer.json");
    err_prefix(e, "tokenizer '%s': ", file);
    eng_tok_destroy(t);
    return e ? e->code : ERR_INVALID_ARGUMENT;
  }
  // tokenizer_config.json is optional; a broken one is an error
  char cfgp[4200];
  snprintf(cfgp, sizeof cfgp, "%s/tokenizer_config.json", dir);
  if (stat(cfgp, &st) == 0) {
    cJSON *cfg;
    int rc = read_json(cfgp, "tokenizer_config.json", &cfg, e);
    if (rc) {
      eng_tok_destroy(t);
      return rc;
    }
    t->bos_id = config_token(t, cfg, "bos_token");
    t->eos_id = config_token(t, cfg, "eos_token");
    cJSON_Delete(cfg);
  }
  *out = t;
  return 0;
}

static void re_free(tok_re *re) {
  if (re->code) pcre2_code_free(re->code);
}

void eng_tok_destroy(eng_tok *t) {
  if (!t) return;
  for (int32_t i = 0; i < t->n_vocab; i++) free(t->vocab[i]);
  free(t->vocab);
  free(t->vocab_len);
  free(t->vmap);
  free(t->mkeys);
  free(t->mrank);
  free(t->mnew);
  free(t->cont_prefix);
  free(t->word_suffix);
  for (size_t i = 0; i < t->n_added; i++) free(t->added[i].content), free(t->added[i].norm);
  free(t->added);
  free(t->added_of);
  free(t->afirst[0]);
  free(t->afirst[1]);
  re_free(&t->word_re);
  for (size_t i = 0; i < t->n_norm; i++) re_free(&t->norm[i].re), free(t->norm[i].content);
  free(t->norm);
  for (size_t i = 0; i < t->n_pre; i++) re_free(&t->pre[i].re);
  free(t->pre);
  for (size_t i = 0; i < t->n_dec; i++) re_free(&t->dec[i].re), free(t->dec[i].content);
  free(t->dec);
  free(t->tmpl);
  free(t);
}

int32_t eng_tok_vocab_size(const eng_tok *t) {
  return t->n_ids;
}
int32_t eng_tok_bos_id(const eng_tok *t) {
  return t->bos_id;
}
int32_t eng_tok_eos_id(const eng_tok *t) {
  return t->eos_id;
}
bool eng_tok_adds_bos(const eng_tok *t) {
  return t->has_template && t->n_tmpl > 0 && t->tmpl[0] >= 0;
}

const char *eng_tok_id_text(const eng_tok *t, int32_t id, size_t *len, bool *special) {
  if (special) *special = false;
  if (id < 0 || id >= t->n_ids) return NULL;
  if (t->added_of[id] >= 0) {
    const tok_added *x = &t->added[t->added_of[id]];
    if (special) *special = x->special;
    return *len = x->normalized ? x->norm_len : x->len, x->normalized ? x->norm : x->content;
  }
  if (id >= t->n_vocab || !t->vocab[id]) return NULL;
  return *len = t->vocab_len[id], t->vocab[id];
}

int32_t eng_tok_token_id(const eng_tok *t, const char *token) {
  size_t n = strlen(token);
  for (size_t i = 0; i < t->n_added; i++)
    if (t->added[i].len == n && !memcmp(t->added[i].content, token, n)) return t->added[i].id;
  return tok__vocab_find(t, token, n);
}

int eng_tok_encode(const eng_tok *t, const char *text, size_t len, bool add_special, eng_tok_ids *out, err *e) {
  if (!utf8_valid(text, len)) return err_set(e, ERR_INVALID_ARGUMENT, "tokenizer: the text is not valid UTF-8");
  if (!add_special || !t->has_template) return tok__encode_text(t, text, len, out, e);
  for (size_t i = 0; i < t->n_tmpl; i++) {
    if (t->tmpl[i] < 0)
      TRY(tok__encode_text(t, text, len, out, e));
    else if (tok__ids_put(out, t->tmpl[i]))
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "tokenizer: out of memory");
  }
  return 0;
}
