// engine/llm/tokenizer_pretok.c: text -> ids, the steps before and around
// the BPE model, in tokenizers' order (tokenizer/added_vocabulary.rs'
// extract_and_normalize, then the pre-tokenizers, then the model):
//   1. the added tokens with normalized = false are split out of the raw
//      text (leftmost, longest first; single_word, lstrip, rstrip);
//   2. each piece left is normalized (NFC..NFKD by utf8proc, Prepend,
//      Replace) and the added tokens with normalized = true split out of it;
//   3. the pre-tokenizers split the pieces further (Split by a PCRE2
//      pattern with its five behaviours, ByteLevel with GPT-2's pattern and
//      its byte -> character mapping, Metaspace, Digits);
//   4. every piece goes through BPE.
// Pieces carry whether they start at the original text's offset 0: that is
// Metaspace's prepend_scheme "first".
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "engine/llm/tokenizer_internal.h"

typedef struct piece {
  size_t off, len;  // in the list's text
  int32_t tok;      // >= 0: an added token, finished
  bool origin;      // starts at offset 0 of the original text
} piece;

typedef struct plist {
  tok_buf text;
  piece *p;
  size_t n, cap;
} plist;

static int plist_add(plist *l, const char *s, size_t n, int32_t tok, bool origin) {
  if (n == 0 && tok < 0) return 0;  // tokenizers drops empty splits
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    piece *p = realloc(l->p, cap * sizeof *p);
    if (!p) return -1;
    l->p = p, l->cap = cap;
  }
  l->p[l->n++] = (piece){l->text.n, n, tok, origin};
  return tok__buf_put(&l->text, s, n);
}

static void plist_free(plist *l) {
  tok__buf_free(&l->text);
  free(l->p);
  memset(l, 0, sizeof *l);
}

// --- regular expressions

int tok__re_find(const tok_re *re, const char *s, size_t n, size_t **m, size_t *nm, size_t *cm) {
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
  if (!md) return -1;
  size_t at = 0;
  int rc = 0;
  while (at <= n) {
    int r = pcre2_match(re->code, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
    if (r == PCRE2_ERROR_NOMATCH) break;
    if (r < 0) {
      rc = -1;
      break;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (*nm + 2 > *cm) {
      size_t cap = *cm ? *cm * 2 : 64;
      size_t *p = realloc(*m, cap * sizeof *p);
      if (!p) {
        rc = -1;
        break;
      }
      *m = p, *cm = cap;
    }
    (*m)[(*nm)++] = ov[0];
    (*m)[(*nm)++] = ov[1];
    if (ov[1] > ov[0])
      at = ov[1];
    else {
      if (ov[1] >= n) break;
      size_t cl;
      tok__utf8_next(s + ov[1], n - ov[1], &cl);
      at = ov[1] + cl;
    }
  }
  pcre2_match_data_free(md);
  return rc;
}

// Rust's char::is_whitespace (White_Space): the added tokens' lstrip and rstrip.
static bool is_ws(uint32_t c) {
  return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool is_word_at(const eng_tok *t, const char *s, size_t n) {
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->word_re.code, NULL);
  if (!md) return false;
  int r = pcre2_match(t->word_re.code, (PCRE2_SPTR)s, n, 0, PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, md, NULL);
  pcre2_match_data_free(md);
  return r >= 0;
}

// The start of the character ending at s[n) (s[0..n) valid UTF-8, n > 0).
static size_t char_before(const char *s, size_t n) {
  size_t i = n - 1;
  while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
  return i;
}

// --- 1, 2: added tokens

// Splits s[0..n) on the added tokens of set k into out (AddedVocabulary's
// find_matches): pieces between matches keep origin when they start at 0.
static int split_added(const eng_tok *t, int k, const char *s, size_t n, bool origin, plist *out) {
  size_t start_offset = 0, pos = 0;
  while (pos < n) {
    size_t ms = n, ml = 0, mi = 0;
    for (size_t i = pos; i < n && ml == 0; i++) {
      unsigned char c = (unsigned char)s[i];
      for (size_t j = t->aoff[k][c]; j < t->aoff[k][c + 1]; j++) {
        const tok_added *a = &t->added[t->afirst[k][j]];
        const char *pat = k ? a->norm : a->content;
        size_t pl = k ? a->norm_len : a->len;
        if (pl > ml && pl <= n - i && memcmp(s + i, pat, pl) == 0) ms = i, ml = pl, mi = t->afirst[k][j];
      }
    }
    if (ml == 0) break;
    const tok_added *a = &t->added[mi];
    size_t start = ms, stop = ms + ml;
    pos = stop;
    if (a->single_word) {
      bool start_space = start == 0 || !is_word_at(t, s + char_before(s, start), start - char_before(s, start));
      bool stop_space = stop == n || !is_word_at(t, s + stop, n - stop);
      if (!start_space || !stop_space) continue;
    }
    if (a->lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t b = char_before(s, ns), cl;
        if (!is_ws(tok__utf8_next(s + b, ns - b, &cl))) break;
        ns = b;
      }
      start = ns > start_offset ? ns : start_offset;
    }
    if (a->rstrip) {
      while (stop < n) {
        size_t cl;
        if (!is_ws(tok__utf8_next(s + stop, n - stop, &cl))) break;
        stop += cl;
      }
    }
    if (start_offset < start && plist_add(out, s + start_offset, start - start_offset, -1, origin && start_offset == 0))
      return -1;
    if (plist_add(out, s + start, stop - start, a->id, false)) return -1;
    start_offset = stop;
  }
  if (start_offset < n && plist_add(out, s + start_offset, n - start_offset, -1, origin && start_offset == 0))
    return -1;
  return 0;
}

// --- normalizers

int tok__unicode_norm(tok_norm_kind kind, const char *s, size_t n, tok_buf *out) {
  int opt = UTF8PROC_STABLE;
  if (kind == TN_NFC)
    opt |= UTF8PROC_COMPOSE;
  else if (kind == TN_NFD)
    opt |= UTF8PROC_DECOMPOSE;
  else if (kind == TN_NFKC)
    opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  else
    opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  utf8proc_uint8_t *r = NULL;
  utf8proc_ssize_t len = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r, (utf8proc_option_t)opt);
  if (len < 0) return -1;
  int rc = tok__buf_put(out, r, (size_t)len);
  free(r);
  return rc;
}

static int replace_all(const tok_re *re, const char *with, size_t wl, const char *s, size_t n, tok_buf *out) {
  size_t *m = NULL, nm = 0, cm = 0, last = 0;
  int rc = tok__re_find(re, s, n, &m, &nm, &cm);
  for (size_t i = 0; i < nm && !rc; i += 2) {
    rc = tok__buf_put(out, s + last, m[i] - last);
    if (!rc) rc = tok__buf_put(out, with, wl);
    last = m[i + 1];
  }
  if (!rc) rc = tok__buf_put(out, s + last, n - last);
  free(m);
  return rc;
}

int tok__normalize(const eng_tok *t, const char *s, size_t n, tok_buf *out) {
  tok_buf a = {0}, b = {0};
  int rc = tok__buf_put(&a, s, n);
  for (size_t i = 0; i < t->n_norm && !rc; i++) {
    const tok_norm *z = &t->norm[i];
    b.n = 0;
    switch (z->kind) {
      case TN_PREPEND:
        if (a.n) rc = tok__buf_put(&b, z->content, z->content_len);
        if (!rc) rc = tok__buf_put(&b, a.b, a.n);
        break;
      case TN_REPLACE:
        rc = replace_all(&z->re, z->content, z->content_len, a.b, a.n, &b);
        break;
      default:
        rc = a.n ? tok__unicode_norm(z->kind, a.b, a.n, &b) : tok__buf_put(&b, "", 0);
        break;
    }
    tok_buf x = a;
    a = b, b = x;
  }
  if (!rc) rc = tok__buf_put(out, a.b, a.n);
  tok__buf_free(&a);
  tok__buf_free(&b);
  return rc;
}

// --- 3: pre-tokenizers

// NormalizedString::split: the pattern's (range, is_match) cover of s,
// grouped by behaviour, the pieces kept appended to out.
static int split_pattern(const tok_re *re, bool invert, tok_split_behavior beh, const char *s, size_t n, bool origin,
                         plist *out) {
  size_t *m = NULL, nm = 0, cm = 0;
  if (tok__re_find(re, s, n, &m, &nm, &cm)) return free(m), -1;
  // the cover: (start, end, is_match), empty matches included as tokenizers lists them
  typedef struct rng {
    size_t a, b;
    bool match;
  } rng;
  rng *cv = malloc((nm + 1) * sizeof *cv), *sp = malloc((nm + 1) * sizeof *sp);
  size_t nc = 0, ns = 0, prev = 0;
  int rc = 0;
  if (!cv || !sp) rc = -1;
  for (size_t i = 0; i < nm && !rc; i += 2) {
    if (prev != m[i]) cv[nc++] = (rng){prev, m[i], invert};
    cv[nc++] = (rng){m[i], m[i + 1], !invert};
    prev = m[i + 1];
  }
  if (!rc && prev != n) cv[nc++] = (rng){prev, n, invert};
  bool pm = false;
  for (size_t i = 0; i < nc && !rc; i++) {
    rng r = cv[i];
    switch (beh) {
      case TS_ISOLATED:
        sp[ns++] = (rng){r.a, r.b, false};
        break;
      case TS_REMOVED:
        sp[ns++] = r;
        break;
      case TS_CONTIGUOUS:
        if (r.match == pm && ns)
          sp[ns - 1].b = r.b;
        else
          sp[ns++] = (rng){r.a, r.b, false};
        pm = r.match;
        break;
      case TS_MERGED_WITH_PREVIOUS:
        if (r.match && !pm && ns)
          sp[ns - 1].b = r.b;
        else
          sp[ns++] = (rng){r.a, r.b, false};
        pm = r.match;
        break;
      case TS_MERGED_WITH_NEXT:
        break;
    }
  }
  if (beh == TS_MERGED_WITH_NEXT && !rc) {
    // right to left: a match joins the piece after it
    for (size_t i = nc; i-- > 0;) {
      rng r = cv[i];
      if (r.match && !pm && ns)
        sp[ns - 1].a = r.a;
      else
        sp[ns++] = (rng){r.a, r.b, false};
      pm = r.match;
    }
    for (size_t i = 0; i < ns / 2; i++) {
      rng x = sp[i];
      sp[i] = sp[ns - 1 - i], sp[ns - 1 - i] = x;
    }
  }
  for (size_t i = 0; i < ns && !rc; i++)
    if (!sp[i].match) rc = plist_add(out, s + sp[i].a, sp[i].b - sp[i].a, -1, origin && sp[i].a == 0);
  free(m);
  free(cv);
  free(sp);
  return rc;
}

static int pre_one(const tok_pre *p, const char *s, size_t n, bool origin, plist *out) {
  tok_buf b = {0};
  int rc = 0;
  switch (p->kind) {
    case TP_SPLIT:
    case TP_DIGITS:
      return split_pattern(&p->re, p->invert, p->behavior, s, n, origin, out);
    case TP_BYTELEVEL: {
      if (p->add_prefix_space && s[0] != ' ') rc = tok__buf_put(&b, " ", 1);
      if (!rc) rc = tok__buf_put(&b, s, n);
      plist mid = {0};
      if (!rc)
        rc = p->use_regex ? split_pattern(&p->re, false, TS_ISOLATED, b.b, b.n, origin, &mid)
                          : plist_add(&mid, b.b, b.n, -1, origin);
      for (size_t i = 0; i < mid.n && !rc; i++) {
        tok_buf m = {0};
        for (size_t k = 0; k < mid.p[i].len && !rc; k++) {
          char c[4];
          size_t cl;
          tok__bytelevel_char((uint8_t)mid.text.b[mid.p[i].off + k], c, &cl);
          rc = tok__buf_put(&m, c, cl);
        }
        if (!rc) rc = plist_add(out, m.b, m.n, -1, mid.p[i].origin);
        tok__buf_free(&m);
      }
      plist_free(&mid);
      break;
    }
    case TP_METASPACE: {
      // spaces become the replacement first, so a leading space counts as one
      bool starts = s[0] == ' ' || (n >= p->repl_len && memcmp(s, p->repl, p->repl_len) == 0);
      if (!starts && (p->prepend == TP_ALWAYS || (p->prepend == TP_FIRST && origin)))
        rc = tok__buf_put(&b, p->repl, p->repl_len);
      for (size_t i = 0; i < n && !rc; i++)
        rc = s[i] == ' ' ? tok__buf_put(&b, p->repl, p->repl_len) : tok__buf_put(&b, s + i, 1);
      if (rc) break;
      if (!p->split) {
        rc = plist_add(out, b.b, b.n, -1, origin);
        break;
      }
      // split on the replacement, each joined to the piece after it
      size_t st = 0;
      for (size_t i = 0; i <= b.n && !rc; i++) {
        bool at = i < b.n && b.n - i >= p->repl_len && memcmp(b.b + i, p->repl, p->repl_len) == 0;
        if ((at && i > st) || i == b.n) {
          if (i > st) rc = plist_add(out, b.b + st, i - st, -1, origin && st == 0);
          st = i;
        }
        if (at) i += p->repl_len - 1;
      }
      break;
    }
  }
  tok__buf_free(&b);
  return rc;
}

// --- the pipeline

int tok__encode_text(const eng_tok *t, const char *s, size_t n, eng_tok_ids *out, err *e) {
  plist a = {0}, b = {0};
  int rc = split_added(t, 0, s, n, true, &a);
  // 2: normalize what is not a token yet, then the normalized added tokens
  for (size_t i = 0; i < a.n && !rc; i++) {
    piece p = a.p[i];
    if (p.tok >= 0) {
      rc = plist_add(&b, a.text.b + p.off, p.len, p.tok, false);
      continue;
    }
    tok_buf nb = {0};
    rc = tok__normalize(t, a.text.b + p.off, p.len, &nb);
    if (!rc && nb.n) rc = split_added(t, 1, nb.b, nb.n, p.origin, &b);
    tok__buf_free(&nb);
  }
  for (size_t k = 0; k < t->n_pre && !rc; k++) {
    plist x = a;
    a = b, b = x;
    b.n = 0, b.text.n = 0;
    for (size_t i = 0; i < a.n && !rc; i++) {
      piece p = a.p[i];
      if (p.tok >= 0)
        rc = plist_add(&b, a.text.b + p.off, p.len, p.tok, false);
      else
        rc = pre_one(&t->pre[k], a.text.b + p.off, p.len, p.origin, &b);
    }
  }
  for (size_t i = 0; i < b.n && !rc; i++) {
    piece p = b.p[i];
    rc = p.tok >= 0 ? tok__ids_put(out, p.tok) : tok__bpe_word(t, b.text.b + p.off, p.len, out);
  }
  plist_free(&a);
  plist_free(&b);
  if (rc)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "tokenizer: out of memory (or a pattern failed) encoding %zu bytes", n);
  return 0;
}
