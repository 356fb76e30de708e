// pbtxt.c: protobuf text format -> protobuf-c message, generic over the
// descriptors. Memory is laid out exactly as protobuf_c_message_unpack does
// (malloc'ed messages, strings, byte buffers and repeated arrays; untouched
// fields keep the values of the descriptor's init), so the caller releases it
// with protobuf_c_message_free_unpacked. The message under construction is
// kept consistent after every step, so on any error it is simply freed.
#include "engine/repo/pbtxt.h"
#include "kernels/base/rfile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// Deep enough for any real config; bounds recursion on hostile input.
#define PBTXT_MAX_DEPTH 64
#define PBTXT_MAX_FILE (16u << 20)
#define PBTXT_NAME_MAX 128

#define MEMBER(T, msg, off) (*(T *)((char *)(msg) + (off)))

// --- tokens

typedef enum tok_kind { TOK_EOF, TOK_IDENT, TOK_NUM, TOK_STR, TOK_PUNCT } tok_kind;

typedef struct tok {
  tok_kind kind;
  const char *p;
  size_t n;
  int line;
} tok;

typedef struct parser {
  const char *cur, *end;
  int line;
  const char *file;
  tok t;  // the lookahead token
  err *e;
} parser;

static int fail(parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *p, int line, const char *fmt, ...) {
  char msg[ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return err_set(p->e, ERR_INVALID_ARGUMENT, "%s:%d: %s", p->file, line, msg);
}

static int oom(parser *p) { return err_set(p->e, ERR_RESOURCE_EXHAUSTED, "%s: out of memory", p->file); }

// A printable excerpt of a token for error messages.
static const char *tok_show(const tok *t, char *buf, size_t cap) {
  if (t->kind == TOK_EOF) return "end of input";
  size_t n = t->n < cap - 4 ? t->n : cap - 4;
  for (size_t i = 0; i < n; i++) buf[i] = isprint((unsigned char)t->p[i]) ? t->p[i] : '?';
  if (n < t->n) {
    memcpy(buf + n, "...", 3);
    n += 3;
  }
  buf[n] = '\0';
  return buf;
}

static int lex(parser *p) {
  while (p->cur < p->end) {
    char c = *p->cur;
    if (c == '\n') {
      p->line++;
      p->cur++;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      p->cur++;
    } else if (c == '#') {
      while (p->cur < p->end && *p->cur != '\n') p->cur++;
    } else {
      break;
    }
  }
  tok *t = &p->t;
  t->line = p->line;
  t->p = p->cur;
  t->n = 0;
  if (p->cur >= p->end) {
    t->kind = TOK_EOF;
    return 0;
  }
  const char *s = p->cur, *end = p->end;
  unsigned char c = (unsigned char)*s;
  if (isalpha(c) || c == '_') {
    while (s < end && (isalnum((unsigned char)*s) || *s == '_')) s++;
    t->kind = TOK_IDENT;
  } else if (isdigit(c) || (c == '.' && s + 1 < end && isdigit((unsigned char)s[1]))) {
    // Take the whole number-like run; conversion decides later whether it is valid.
    int hex = c == '0' && s + 1 < end && (s[1] == 'x' || s[1] == 'X');
    s++;
    while (s < end) {
      unsigned char d = (unsigned char)*s;
      if (isalnum(d) || d == '_' || d == '.')
        s++;
      else if ((d == '+' || d == '-') && !hex && (s[-1] == 'e' || s[-1] == 'E'))
        s++;
      else
        break;
    }
    t->kind = TOK_NUM;
  } else if (c == '"' || c == '\'') {
    s++;
    for (;;) {
      if (s >= end || *s == '\n') return fail(p, p->line, "unterminated string");
      if (*s == '\\') {
        s++;
        if (s >= end || *s == '\n') return fail(p, p->line, "unterminated string");
        s++;
        continue;
      }
      if ((unsigned char)*s == c) {
        s++;
        break;
      }
      s++;
    }
    t->kind = TOK_STR;
  } else if (c != '\0' && strchr("{}<>[]:,;-", c)) {
    s++;
    t->kind = TOK_PUNCT;
  } else {
    if (isprint(c)) return fail(p, p->line, "unexpected character '%c'", c);
    return fail(p, p->line, "unexpected byte 0x%02x", c);
  }
  t->n = (size_t)(s - p->cur);
  p->cur = s;
  return 0;
}

static int is_punct(const parser *p, char ch) { return p->t.kind == TOK_PUNCT && p->t.p[0] == ch; }

static int ident_is(const tok *t, const char *word) {
  return t->kind == TOK_IDENT && strlen(word) == t->n && memcmp(t->p, word, t->n) == 0;
}

static int ident_is_ci(const tok *t, const char *word) {
  return t->kind == TOK_IDENT && strlen(word) == t->n && strncasecmp(t->p, word, t->n) == 0;
}

// Consumes the lookahead when it is the punctuation ch; *rc gets lex errors.
static int accept(parser *p, char ch, int *rc) {
  if (!is_punct(p, ch)) return 0;
  *rc = lex(p);
  return 1;
}

// --- field layout helpers

static const char *type_name(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT32: return "int32";
    case PROTOBUF_C_TYPE_SINT32: return "sint32";
    case PROTOBUF_C_TYPE_SFIXED32: return "sfixed32";
    case PROTOBUF_C_TYPE_INT64: return "int64";
    case PROTOBUF_C_TYPE_SINT64: return "sint64";
    case PROTOBUF_C_TYPE_SFIXED64: return "sfixed64";
    case PROTOBUF_C_TYPE_UINT32: return "uint32";
    case PROTOBUF_C_TYPE_FIXED32: return "fixed32";
    case PROTOBUF_C_TYPE_UINT64: return "uint64";
    case PROTOBUF_C_TYPE_FIXED64: return "fixed64";
    case PROTOBUF_C_TYPE_FLOAT: return "float";
    case PROTOBUF_C_TYPE_DOUBLE: return "double";
    case PROTOBUF_C_TYPE_BOOL: return "bool";
    case PROTOBUF_C_TYPE_ENUM: return "enum";
    case PROTOBUF_C_TYPE_STRING: return "string";
    case PROTOBUF_C_TYPE_BYTES: return "bytes";
    case PROTOBUF_C_TYPE_MESSAGE: return "message";
  }
  return "?";
}

static size_t elem_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM: return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
  }
  return 0;
}

static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *d) {
  ProtobufCMessage *m = malloc(d->sizeof_message);
  if (m) d->message_init(m);
  return m;
}

// The name of the oneof member currently set in msg (sharing fd's case slot).
static const char *oneof_member_name(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd) {
  uint32_t cur = MEMBER(uint32_t, msg, fd->quantifier_offset);
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++)
    if ((d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && d->fields[i].quantifier_offset == fd->quantifier_offset &&
        d->fields[i].id == cur)
      return d->fields[i].name;
  return "?";
}

// The elements a repeated array of n holds room for. The message has no
// capacity field (protobuf_c_message_free_unpacked only frees the array), so
// it is implied: arrays start empty (message_init) and grow only in
// field_slot, to 4 and then by doubling; a map's dedupe only lowers n, which
// leaves at least implicit_cap(n) allocated.
static size_t implicit_cap(size_t n) {
  if (n == 0) return 0;
  size_t cap = 4;
  while (cap < n) cap *= 2;
  return cap;
}

// Where the next value of fd goes: a fresh zeroed element appended to a
// repeated field (counted at once, so the message stays freeable), or the
// singular member, with its has_/oneof case set. *fresh tells whether the
// slot holds no previous value that would need freeing or merging.
static int field_slot(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd, int line, void **slot,
                      int *fresh) {
  size_t es = elem_size(fd->type);
  *fresh = 1;
  if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
    size_t *n = &MEMBER(size_t, msg, fd->quantifier_offset);
    void **arr = &MEMBER(void *, msg, fd->offset);
    if (*n >= PBTXT_MAX_ENTRIES)
      return fail(p, line, "field '%s' has more than %u entries", fd->name, (unsigned)PBTXT_MAX_ENTRIES);
    if (*n == implicit_cap(*n)) {  // full: double (one realloc per entry made a 300k-entry map quadratic)
      size_t cap = *n ? 2 * *n : 4;
      if (cap > SIZE_MAX / es) return oom(p);
      void *grown = realloc(*arr, cap * es);
      if (!grown) return oom(p);
      *arr = grown;
    }
    *slot = (char *)*arr + *n * es;
    memset(*slot, 0, es);
    (*n)++;
    return 0;
  }
  *slot = (char *)msg + fd->offset;
  if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    uint32_t *cs = &MEMBER(uint32_t, msg, fd->quantifier_offset);
    if (*cs != 0 && *cs != fd->id)
      return fail(p, line, "field '%s' conflicts with '%s': both are members of one oneof", fd->name,
                  oneof_member_name(msg, fd));
    if (*cs != fd->id) {
      // Another member's bytes (or init's zero) live here: nothing to free.
      memset(*slot, 0, es);
      *cs = fd->id;
      return 0;
    }
    *fresh = 0;
    return 0;
  }
  if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->type != PROTOBUF_C_TYPE_STRING &&
      fd->type != PROTOBUF_C_TYPE_MESSAGE && fd->quantifier_offset != 0)
    MEMBER(protobuf_c_boolean, msg, fd->quantifier_offset) = 1;
  *fresh = 0;
  return 0;
}

// --- scalar values

typedef struct sbuf {
  char *p;
  size_t n, cap;
} sbuf;

static int sbuf_put(sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 32;
    while (cap < b->n + n + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) return -1;
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static size_t utf8_encode(uint32_t cp, char *o) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

// Appends the decoded contents of one quoted string token.
static int decode_string(parser *p, const tok *t, sbuf *b, const char *field) {
  const char *s = t->p + 1, *end = t->p + t->n - 1;  // inside the quotes
  while (s < end) {
    const char *run = s;
    while (s < end && *s != '\\') s++;
    if (s > run && sbuf_put(b, run, (size_t)(s - run))) return oom(p);
    if (s >= end) break;
    s++;  // the backslash; the lexer guarantees a character follows
    char c = *s++, out[4];
    size_t n = 1;
    switch (c) {
      case 'n': out[0] = '\n'; break;
      case 'r': out[0] = '\r'; break;
      case 't': out[0] = '\t'; break;
      case 'a': out[0] = '\a'; break;
      case 'b': out[0] = '\b'; break;
      case 'f': out[0] = '\f'; break;
      case 'v': out[0] = '\v'; break;
      case '\\': case '\'': case '"': case '?': out[0] = c; break;
      case 'x': case 'X': {
        int v = 0, k = 0;
        while (k < 2 && s < end && hexval(*s) >= 0) v = v * 16 + hexval(*s++), k++;
        if (k == 0) return fail(p, t->line, "invalid escape '\\%c' in string for field '%s'", c, field);
        out[0] = (char)v;
        break;
      }
      case 'u': case 'U': {
        int want = c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int k = 0; k < want; k++, s++) {
          if (s >= end || hexval(*s) < 0)
            return fail(p, t->line, "invalid escape '\\%c' in string for field '%s'", c, field);
          cp = cp * 16 + (uint32_t)hexval(*s);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
          return fail(p, t->line, "invalid unicode escape U+%X in string for field '%s'", cp, field);
        n = utf8_encode(cp, out);
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0', k = 1;
          while (k < 3 && s < end && *s >= '0' && *s <= '7') v = v * 8 + (*s++ - '0'), k++;
          if (v > 255) return fail(p, t->line, "octal escape out of range in string for field '%s'", field);
          out[0] = (char)v;
          break;
        }
        if (isprint((unsigned char)c))
          return fail(p, t->line, "invalid escape '\\%c' in string for field '%s'", c, field);
        return fail(p, t->line, "invalid escape in string for field '%s'", field);
    }
    if (sbuf_put(b, out, n)) return oom(p);
  }
  return 0;
}

typedef struct scalar {
  int64_t i;
  uint64_t u;
  double d;
  sbuf s;  // string and bytes values (owned until stored)
} scalar;

// Parses the magnitude of an integer token (decimal, 0x hex or 0 octal).
static int parse_magnitude(const tok *t, uint64_t *out) {
  char buf[72];
  if (t->kind != TOK_NUM || t->n >= sizeof buf) return -1;
  memcpy(buf, t->p, t->n);
  buf[t->n] = '\0';
  int base = 10;
  const char *digits = buf;
  if (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) {
    base = 16;
    digits = buf + 2;
    if (hexval(*digits) < 0) return -1;
  } else if (buf[0] == '0' && buf[1] != '\0') {
    base = 8;
  }
  if (!isalnum((unsigned char)digits[0])) return -1;
  char *endp;
  errno = 0;
  unsigned long long v = strtoull(digits, &endp, base);
  if (*endp != '\0') return -1;
  if (errno == ERANGE) return -2;
  *out = (uint64_t)v;
  return 0;
}

static int parse_int(parser *p, const ProtobufCFieldDescriptor *fd, int neg, int64_t lo, uint64_t hi, scalar *v) {
  char show[64];
  const char *sign = neg ? "-" : "";
  uint64_t mag = 0;
  int rc = parse_magnitude(&p->t, &mag);
  if (rc == -1)
    return fail(p, p->t.line, "invalid value '%s%s' for %s field '%s'", sign, tok_show(&p->t, show, sizeof show),
                type_name(fd->type), fd->name);
  uint64_t lo_mag = lo < 0 ? (uint64_t)(-(lo + 1)) + 1 : 0;
  if (rc == -2 || (neg && mag > lo_mag) || (!neg && mag > hi))
    return fail(p, p->t.line, "value '%s%s' out of range for %s field '%s'", sign, tok_show(&p->t, show, sizeof show),
                type_name(fd->type), fd->name);
  if (neg)
    v->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
  else
    v->i = (int64_t)mag;  // the unsigned types use v->u
  v->u = mag;
  return lex(p);
}

static int parse_float(parser *p, const ProtobufCFieldDescriptor *fd, int neg, scalar *v) {
  char show[64];
  const tok *t = &p->t;
  double d;
  if (ident_is_ci(t, "inf") || ident_is_ci(t, "infinity")) {
    d = INFINITY;
  } else if (ident_is_ci(t, "nan")) {
    d = NAN;
  } else {
    char buf[128];
    int ok = t->kind == TOK_NUM && t->n < sizeof buf && !(t->n > 1 && t->p[0] == '0' && (t->p[1] == 'x' || t->p[1] == 'X'));
    if (ok) {
      size_t n = t->n;
      if (t->p[n - 1] == 'f' || t->p[n - 1] == 'F') n--;
      memcpy(buf, t->p, n);
      buf[n] = '\0';
      char *endp;
      d = strtod(buf, &endp);
      ok = n > 0 && *endp == '\0';
    }
    if (!ok)
      return fail(p, t->line, "invalid value '%s%s' for %s field '%s'", neg ? "-" : "", tok_show(t, show, sizeof show),
                  type_name(fd->type), fd->name);
  }
  v->d = neg ? -d : d;
  return lex(p);
}

static int parse_bool(parser *p, const ProtobufCFieldDescriptor *fd, scalar *v) {
  char show[64];
  const tok *t = &p->t;
  if (ident_is(t, "true") || ident_is(t, "True") || ident_is(t, "t") || (t->kind == TOK_NUM && t->n == 1 && t->p[0] == '1'))
    v->i = 1;
  else if (ident_is(t, "false") || ident_is(t, "False") || ident_is(t, "f") ||
           (t->kind == TOK_NUM && t->n == 1 && t->p[0] == '0'))
    v->i = 0;
  else
    return fail(p, t->line, "invalid value '%s' for bool field '%s'", tok_show(t, show, sizeof show), fd->name);
  return lex(p);
}

static int parse_enum(parser *p, const ProtobufCFieldDescriptor *fd, int neg, scalar *v) {
  char show[64];
  const ProtobufCEnumDescriptor *ed = fd->descriptor;
  const tok *t = &p->t;
  if (t->kind == TOK_IDENT && !neg) {
    char name[PBTXT_NAME_MAX];
    const ProtobufCEnumValue *ev = NULL;
    if (t->n < sizeof name) {
      memcpy(name, t->p, t->n);
      name[t->n] = '\0';
      ev = protobuf_c_enum_descriptor_get_value_by_name(ed, name);
    }
    if (!ev)
      return fail(p, t->line, "unknown value '%s' for enum field '%s' (%s)", tok_show(t, show, sizeof show), fd->name,
                  ed->name);
    v->i = ev->value;
    return lex(p);
  }
  if (t->kind == TOK_NUM) return parse_int(p, fd, neg, INT32_MIN, INT32_MAX, v);  // proto3 enums are open
  return fail(p, t->line, "invalid value '%s%s' for enum field '%s' (%s)", neg ? "-" : "", tok_show(t, show, sizeof show),
              fd->name, ed->name);
}

static int parse_strings(parser *p, const ProtobufCFieldDescriptor *fd, scalar *v) {
  char show[64];
  if (p->t.kind != TOK_STR)
    return fail(p, p->t.line, "invalid value '%s' for %s field '%s': expected a quoted string",
                tok_show(&p->t, show, sizeof show), type_name(fd->type), fd->name);
  if (sbuf_put(&v->s, "", 0)) return oom(p);  // "" must still allocate
  // Adjacent literals concatenate, as in C.
  while (p->t.kind == TOK_STR) {
    TRY(decode_string(p, &p->t, &v->s, fd->name));
    TRY(lex(p));
  }
  if (fd->type == PROTOBUF_C_TYPE_STRING && strlen(v->s.p) != v->s.n)
    return fail(p, p->t.line, "string field '%s' contains a NUL byte", fd->name);
  return 0;
}

// Reads one value of scalar field fd from the lookahead into v.
static int parse_scalar(parser *p, const ProtobufCFieldDescriptor *fd, scalar *v) {
  int rc = 0;
  if (p->t.kind == TOK_EOF || (p->t.kind == TOK_PUNCT && !is_punct(p, '-')))
    return fail(p, p->t.line, "missing value for field '%s'", fd->name);
  int neg = 0;
  switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_ENUM:
      if (accept(p, '-', &rc)) {
        if (rc) return rc;
        neg = 1;
      }
      break;
    default:
      break;
  }
  switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return parse_int(p, fd, neg, INT32_MIN, INT32_MAX, v);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return parse_int(p, fd, neg, INT64_MIN, INT64_MAX, v);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return parse_int(p, fd, neg, 0, UINT32_MAX, v);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return parse_int(p, fd, neg, 0, UINT64_MAX, v);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: return parse_float(p, fd, neg, v);
    case PROTOBUF_C_TYPE_BOOL: return parse_bool(p, fd, v);
    case PROTOBUF_C_TYPE_ENUM: return parse_enum(p, fd, neg, v);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES: return parse_strings(p, fd, v);
    case PROTOBUF_C_TYPE_MESSAGE: break;
  }
  return fail(p, p->t.line, "internal: field '%s' is not a scalar", fd->name);
}

// Writes v into slot; takes ownership of v->s.
static void store_scalar(const ProtobufCFieldDescriptor *fd, void *slot, int fresh, scalar *v) {
  switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM: *(int32_t *)slot = (int32_t)v->i; break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: *(uint32_t *)slot = (uint32_t)v->u; break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: *(int64_t *)slot = v->i; break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: *(uint64_t *)slot = v->u; break;
    case PROTOBUF_C_TYPE_FLOAT: *(float *)slot = (float)v->d; break;
    case PROTOBUF_C_TYPE_DOUBLE: *(double *)slot = v->d; break;
    case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)slot = v->i != 0; break;
    case PROTOBUF_C_TYPE_STRING: {
      char **sp = slot;
      // The init value is the descriptor's default (a static string): never freed.
      if (!fresh && *sp && *sp != (const char *)fd->default_value) free(*sp);
      *sp = v->s.p;
      v->s.p = NULL;
      break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
      ProtobufCBinaryData *bd = slot;
      const ProtobufCBinaryData *def = fd->default_value;
      if (!fresh && bd->data && (!def || def->data != bd->data)) free(bd->data);
      bd->len = v->s.n;
      bd->data = (uint8_t *)v->s.p;
      if (bd->len == 0) {
        free(bd->data);
        bd->data = NULL;
      }
      v->s.p = NULL;
      break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: break;
  }
}

static int parse_scalar_field(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd, int line) {
  scalar v = {0};
  void *slot;
  int fresh;
  int rc = parse_scalar(p, fd, &v);
  if (!rc) rc = field_slot(p, msg, fd, line, &slot, &fresh);
  if (!rc) store_scalar(fd, slot, fresh, &v);
  free(v.s.p);
  return rc;
}

// --- messages

static int parse_body(parser *p, ProtobufCMessage *msg, char open, int open_line, int depth);

// protobuf-c has no map flag: a map<K,V> is a repeated nested "<Name>Entry"
// message with fields key = 1 and value = 2.
static int is_map_entry(const ProtobufCMessageDescriptor *d) {
  size_t sl = strlen(d->short_name);
  return d->n_fields == 2 && sl > 5 && strcmp(d->short_name + sl - 5, "Entry") == 0 && d->fields[0].id == 1 &&
         strcmp(d->fields[0].name, "key") == 0 && d->fields[1].id == 2 && strcmp(d->fields[1].name, "value") == 0;
}

static int map_keys_equal(const ProtobufCFieldDescriptor *kd, const ProtobufCMessage *a, const ProtobufCMessage *b) {
  if (kd->type == PROTOBUF_C_TYPE_STRING)
    return strcmp(MEMBER(const char *, a, kd->offset), MEMBER(const char *, b, kd->offset)) == 0;
  return memcmp((const char *)a + kd->offset, (const char *)b + kd->offset, elem_size(kd->type)) == 0;
}

static uint64_t map_key_hash(const ProtobufCFieldDescriptor *kd, const ProtobufCMessage *m) {
  const unsigned char *b = (const unsigned char *)m + kd->offset;
  size_t n = elem_size(kd->type);
  if (kd->type == PROTOBUF_C_TYPE_STRING) {
    b = (const unsigned char *)MEMBER(const char *, m, kd->offset);
    n = strlen((const char *)b);
  }
  uint64_t h = 1469598103934665603u;  // FNV-1a
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211u;
  return h ^ (h >> 29);
}

// A map key given again replaces the earlier entry, as protobuf does: of
// each key only the last entry stays, the survivors in the order of their
// last occurrence. Once per map field after the parse (dedupe_tree), through
// a hash set of the keys: deduping as each entry came scanned all the earlier
// ones, quadratic in the entries (40k entries took 3.6 s, 300k minutes).
static int map_dedupe(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd) {
  size_t *n = &MEMBER(size_t, msg, fd->quantifier_offset);
  ProtobufCMessage **arr = MEMBER(ProtobufCMessage **, msg, fd->offset);
  if (*n < 2) return 0;
  const ProtobufCFieldDescriptor *kd = &((const ProtobufCMessageDescriptor *)fd->descriptor)->fields[0];
  size_t cap = 4;
  while (cap < 2 * *n) cap *= 2;  // load at most 1/2
  size_t *set = malloc(cap * sizeof *set);  // indices into arr; SIZE_MAX empty
  if (!set) return oom(p);
  memset(set, 0xff, cap * sizeof *set);
  for (size_t i = *n; i-- > 0;) {  // from the last: the first seen of a key is the one kept
    size_t h = (size_t)map_key_hash(kd, arr[i]) & (cap - 1);
    while (set[h] != SIZE_MAX && !map_keys_equal(kd, arr[set[h]], arr[i])) h = (h + 1) & (cap - 1);
    if (set[h] == SIZE_MAX) {
      set[h] = i;
    } else {  // a later entry has this key
      protobuf_c_message_free_unpacked(arr[i], NULL);
      arr[i] = NULL;
    }
  }
  free(set);
  size_t k = 0;
  for (size_t i = 0; i < *n; i++)
    if (arr[i]) arr[k++] = arr[i];
  *n = k;
  return 0;
}

// Dedupes the map fields of msg and of every message under it, once the
// whole text is parsed: a message given again merges into the same one, so
// deduping where each body closed redid a whole map for every body
// (`dynamic_batching { }` 30k times after a 17k-entry map: quadratic again).
// Nesting is at most PBTXT_MAX_DEPTH deep (parse_body).
static int dedupe_tree(parser *p, ProtobufCMessage *msg) {
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *fd = &d->fields[i];
    if (fd->type != PROTOBUF_C_TYPE_MESSAGE) continue;
    if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
      if (MEMBER(size_t, msg, fd->quantifier_offset) > 1 && is_map_entry(fd->descriptor)) TRY(map_dedupe(p, msg, fd));
      size_t n = MEMBER(size_t, msg, fd->quantifier_offset);
      ProtobufCMessage **arr = MEMBER(ProtobufCMessage **, msg, fd->offset);
      for (size_t k = 0; k < n; k++)
        if (arr[k]) TRY(dedupe_tree(p, arr[k]));
      continue;
    }
    // a oneof's members share their bytes: only the one set holds a message
    if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && MEMBER(uint32_t, msg, fd->quantifier_offset) != fd->id) continue;
    ProtobufCMessage *sub = MEMBER(ProtobufCMessage *, msg, fd->offset);
    if (sub) TRY(dedupe_tree(p, sub));
  }
  return 0;
}

// Parses `{ ... }` or `< ... >` into field fd of msg (appending when repeated).
static int parse_message_field(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd, int line,
                               int depth) {
  char show[64];
  if (!is_punct(p, '{') && !is_punct(p, '<')) {
    if (p->t.kind == TOK_EOF || is_punct(p, '}') || is_punct(p, '>') || is_punct(p, ',') || is_punct(p, ';'))
      return fail(p, p->t.line, "missing value for field '%s'", fd->name);
    return fail(p, p->t.line, "expected '{' for message field '%s', got '%s'", fd->name,
                tok_show(&p->t, show, sizeof show));
  }
  char open = p->t.p[0];
  int open_line = p->t.line;
  void *slot;
  int fresh;
  TRY(field_slot(p, msg, fd, line, &slot, &fresh));
  ProtobufCMessage **mp = slot;
  if (fresh || !*mp) {
    *mp = new_message(fd->descriptor);
    if (!*mp) return oom(p);
  }
  TRY(lex(p));
  return parse_body(p, *mp, open, open_line, depth + 1);
}

// After `field:` or `field` came '[': a list of values or messages.
static int parse_list(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd, int line, int depth) {
  char show[64];
  int rc = 0;
  if (fd->label != PROTOBUF_C_LABEL_REPEATED)
    return fail(p, p->t.line, "field '%s' is not repeated: a [list] is not allowed", fd->name);
  int open_line = p->t.line;
  TRY(lex(p));
  if (accept(p, ']', &rc)) return rc;
  for (;;) {
    if (fd->type == PROTOBUF_C_TYPE_MESSAGE)
      TRY(parse_message_field(p, msg, fd, line, depth));
    else
      TRY(parse_scalar_field(p, msg, fd, line));
    if (accept(p, ',', &rc)) {
      if (rc) return rc;
      continue;
    }
    if (accept(p, ']', &rc)) return rc;
    if (p->t.kind == TOK_EOF)
      return fail(p, p->t.line, "unexpected end of input: list for field '%s' opened at line %d is not closed",
                  fd->name, open_line);
    return fail(p, p->t.line, "expected ',' or ']' in list for field '%s', got '%s'", fd->name,
                tok_show(&p->t, show, sizeof show));
  }
}

// Fields until the closing bracket matching `open` ('\0' = top level, until end of input).
static int parse_body(parser *p, ProtobufCMessage *msg, char open, int open_line, int depth) {
  char show[64];
  char close = open == '{' ? '}' : open == '<' ? '>' : '\0';
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  int rc = 0;
  if (depth > PBTXT_MAX_DEPTH) return fail(p, p->t.line, "messages nested deeper than %d", PBTXT_MAX_DEPTH);
  for (;;) {
    if (p->t.kind == TOK_EOF) {
      if (!close) return 0;
      return fail(p, p->t.line, "unexpected end of input: '%c' opened at line %d for %s is not closed", open,
                  open_line, d->name);
    }
    if (close && is_punct(p, close)) return lex(p);
    if (p->t.kind != TOK_IDENT) {
      if (is_punct(p, '['))
        return fail(p, p->t.line, "extension and Any field names are not supported (in %s)", d->name);
      return fail(p, p->t.line, "expected a field name in %s, got '%s'", d->name, tok_show(&p->t, show, sizeof show));
    }
    char name[PBTXT_NAME_MAX];
    const ProtobufCFieldDescriptor *fd = NULL;
    if (p->t.n < sizeof name) {
      memcpy(name, p->t.p, p->t.n);
      name[p->t.n] = '\0';
      fd = protobuf_c_message_descriptor_get_field_by_name(d, name);
    }
    int line = p->t.line;
    if (!fd) return fail(p, line, "unknown field '%s' in %s", tok_show(&p->t, show, sizeof show), d->name);
    TRY(lex(p));
    int colon = accept(p, ':', &rc);
    if (rc) return rc;
    if (is_punct(p, '[')) {
      if (!colon && fd->type != PROTOBUF_C_TYPE_MESSAGE)
        return fail(p, p->t.line, "expected ':' after field '%s'", fd->name);
      TRY(parse_list(p, msg, fd, line, depth));
    } else if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
      TRY(parse_message_field(p, msg, fd, line, depth));
    } else {
      if (!colon) return fail(p, p->t.line, "expected ':' after field '%s'", fd->name);
      TRY(parse_scalar_field(p, msg, fd, line));
    }
    if (accept(p, ',', &rc) || accept(p, ';', &rc)) {
      if (rc) return rc;
    }
  }
}

// --- entry points

int pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len, const char *filename,
                ProtobufCMessage **out, err *e) {
  if (out) *out = NULL;
  if (!desc || desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || !out || (!text && len))
    return err_set(e, ERR_INVALID_ARGUMENT, "pbtxt_parse: bad arguments");
  parser p = {.cur = text, .end = text + len, .line = 1, .file = filename ? filename : "<text>", .e = e};
  ProtobufCMessage *m = new_message(desc);
  if (!m) return oom(&p);
  int rc = lex(&p);
  if (!rc) rc = parse_body(&p, m, '\0', 0, 0);
  if (!rc) rc = dedupe_tree(&p, m);
  if (rc) {
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
  }
  *out = m;
  return 0;
}

int pbtxt_parse_file(const ProtobufCMessageDescriptor *desc, const char *path, ProtobufCMessage **out, err *e) {
  if (out) *out = NULL;
  uint8_t *buf = NULL;
  size_t n = 0;
  // a regular file only: a FIFO named config.pbtxt would block the scan until written (rfile.h)
  TRY(rfile_read_all(path, "config", PBTXT_MAX_FILE, &buf, &n, e));
  int rc = pbtxt_parse(desc, (const char *)buf, n, path, out, e);
  free(buf);
  return rc;
}
