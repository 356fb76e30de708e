// cfgjson.c: a JSON config override written as protobuf text format (see
// cfgjson.h). The walk follows the message descriptor, so each JSON value is
// checked against its field's type here and its range by pbtxt_parse later.
#include "server/core/cfgjson.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct out {
  char *buf;
  size_t len, cap;
  int oom;
  err *e;
  char path[256];  // the field being written, for messages: "input[0].dims"
} out;

static void put(out *o, const char *s, size_t n) {
  if (o->oom) return;
  if (o->len + n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + n + 1) cap *= 2;
    char *g = realloc(o->buf, cap);
    if (!g) {
      o->oom = 1;
      return;
    }
    o->buf = g;
    o->cap = cap;
  }
  memcpy(o->buf + o->len, s, n);
  o->len += n;
  o->buf[o->len] = 0;
}

static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }

static int fail(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(out *o, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return err_set(o->e, ERR_INVALID_ARGUMENT, "the 'config' override: %s%s%s", o->path[0] ? o->path : "",
                 o->path[0] ? ": " : "", what);
}

// A text-format string literal: quotes, backslashes and bytes below 0x20 or
// DEL escaped in octal; UTF-8 passes as is (the override was checked UTF-8).
static void put_quoted(out *o, const char *s) {
  put(o, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    if (*p == '"' || *p == '\\') {
      esc[0] = '\\', esc[1] = (char)*p;
      put(o, esc, 2);
    } else if (*p < 0x20 || *p == 0x7f) {
      snprintf(esc, sizeof esc, "\\%03o", *p);
      put(o, esc, 4);
    } else {
      put(o, (const char *)p, 1);
    }
  }
  put(o, "\"", 1);
}

// "maxBatchSize" -> "max_batch_size"; 0 when it does not fit.
static int snake(const char *s, char *dst, size_t cap) {
  size_t n = 0;
  for (; *s; s++) {
    if (isupper((unsigned char)*s)) {
      if (n + 2 >= cap) return 0;
      dst[n++] = '_';
      dst[n++] = (char)tolower((unsigned char)*s);
    } else {
      if (n + 1 >= cap) return 0;
      dst[n++] = *s;
    }
  }
  dst[n] = 0;
  return 1;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d, const char *key) {
  const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
  char sn[128];
  if (!f && snake(key, sn, sizeof sn)) f = protobuf_c_message_descriptor_get_field_by_name(d, sn);
  return f;
}

static int is_map_entry(const ProtobufCFieldDescriptor *f) {
  if (f->type != PROTOBUF_C_TYPE_MESSAGE) return 0;
  const ProtobufCMessageDescriptor *d = f->descriptor;
  size_t n = strlen(d->name);
  return d->n_fields == 2 && strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0 &&
         n > 5 && strcmp(d->name + n - 5, "Entry") == 0;
}

// An integer as JSON gives it: a number with no fraction, or a string of an
// optional '-' and digits (protobuf's JSON mapping writes 64-bit ones so).
static int put_int(out *o, const cJSON *v) {
  char num[32];
  if (cJSON_IsNumber(v)) {
    double x = v->valuedouble;
    if (!isfinite(x) || x != floor(x) || fabs(x) >= 9.2e18) return fail(o, "%g is not an integer", x);
    snprintf(num, sizeof num, "%.0f", x);
    puts_(o, num);
    return 0;
  }
  if (cJSON_IsString(v)) {
    const char *s = v->valuestring;
    size_t i = s[0] == '-';
    if (!s[i] || strlen(s) > 24) return fail(o, "\"%.40s\" is not an integer", s);
    for (size_t k = i; s[k]; k++)
      if (!isdigit((unsigned char)s[k])) return fail(o, "\"%.40s\" is not an integer", s);
    puts_(o, s);
    return 0;
  }
  return fail(o, "an integer (number or decimal string) is expected");
}

static int put_scalar(out *o, const ProtobufCFieldDescriptor *f, const cJSON *v) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return put_int(o, v);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
      char num[40];
      if (cJSON_IsNumber(v)) {
        snprintf(num, sizeof num, "%.17g", v->valuedouble);
        puts_(o, num);
        return 0;
      }
      if (cJSON_IsString(v)) {  // protobuf's JSON mapping: "NaN", "Infinity", "-Infinity", or a number as text
        const char *s = v->valuestring;
        if (strcmp(s, "NaN") == 0) return puts_(o, "nan"), 0;
        if (strcmp(s, "Infinity") == 0) return puts_(o, "inf"), 0;
        if (strcmp(s, "-Infinity") == 0) return puts_(o, "-inf"), 0;
        char *end;
        double x = strtod(s, &end);
        if (end == s || *end || !isfinite(x)) return fail(o, "\"%.40s\" is not a number", s);
        snprintf(num, sizeof num, "%.17g", x);
        puts_(o, num);
        return 0;
      }
      return fail(o, "a number is expected");
    }
    case PROTOBUF_C_TYPE_BOOL:
      if (!cJSON_IsBool(v)) return fail(o, "true or false is expected");
      puts_(o, cJSON_IsTrue(v) ? "true" : "false");
      return 0;
    case PROTOBUF_C_TYPE_ENUM:
      if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        if (!protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, s))
          return fail(o, "'%.60s' is not a value of %s", s, ((const ProtobufCEnumDescriptor *)f->descriptor)->name);
        puts_(o, s);
        return 0;
      }
      return put_int(o, v);
    case PROTOBUF_C_TYPE_STRING:
      if (!cJSON_IsString(v)) return fail(o, "a string is expected");
      put_quoted(o, v->valuestring);
      return 0;
    default: return fail(o, "bytes fields are not taken in a JSON override");
  }
}

static int put_message(out *o, const ProtobufCMessageDescriptor *d, const cJSON *obj, int depth);

// `name: value` or `name { ... }` for one value of field f.
static int put_value(out *o, const ProtobufCFieldDescriptor *f, const cJSON *v, int depth) {
  puts_(o, f->name);
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    puts_(o, " { ");
    if (put_message(o, f->descriptor, v, depth + 1)) return -1;
    puts_(o, "} ");
    return 0;
  }
  puts_(o, ": ");
  if (put_scalar(o, f, v)) return -1;
  puts_(o, " ");
  return 0;
}

// A map entry's key, from the JSON object's member name.
static int put_map_key(out *o, const ProtobufCFieldDescriptor *kf, const char *key) {
  puts_(o, "key: ");
  if (kf->type == PROTOBUF_C_TYPE_STRING) {
    put_quoted(o, key);
  } else if (kf->type == PROTOBUF_C_TYPE_BOOL) {
    if (strcmp(key, "true") != 0 && strcmp(key, "false") != 0) return fail(o, "map key '%.40s' is not a bool", key);
    puts_(o, key);
  } else {
    cJSON s = {.type = cJSON_String, .valuestring = (char *)key};
    if (put_int(o, &s)) return -1;
  }
  puts_(o, " ");
  return 0;
}

static int put_field(out *o, const ProtobufCFieldDescriptor *f, const cJSON *v, int depth) {
  size_t at = strlen(o->path);
  snprintf(o->path + at, sizeof o->path - at, "%s%s", at ? "." : "", f->name);
  int rc = 0;
  if (cJSON_IsNull(v)) {  // proto3 JSON: the field's default
  } else if (is_map_entry(f)) {
    if (!cJSON_IsObject(v)) {
      rc = fail(o, "an object (a map) is expected");
    } else {
      const ProtobufCFieldDescriptor *kf = &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[0];
      const ProtobufCFieldDescriptor *vf = &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[1];
      for (const cJSON *m = v->child; rc == 0 && m; m = m->next) {
        puts_(o, f->name);
        puts_(o, " { ");
        rc = put_map_key(o, kf, m->string);
        if (rc == 0 && !cJSON_IsNull(m)) rc = put_value(o, vf, m, depth);
        puts_(o, "} ");
      }
    }
  } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    if (!cJSON_IsArray(v)) {
      rc = fail(o, "an array is expected");
    } else {
      size_t i = 0, at2 = strlen(o->path);
      for (const cJSON *x = v->child; rc == 0 && x; x = x->next, i++) {
        snprintf(o->path + at2, sizeof o->path - at2, "[%zu]", i);
        rc = put_value(o, f, x, depth);
      }
    }
  } else {
    rc = put_value(o, f, v, depth);
  }
  o->path[at] = 0;
  return rc;
}

static int put_message(out *o, const ProtobufCMessageDescriptor *d, const cJSON *obj, int depth) {
  if (depth > SRV_CFGJSON_MAX_DEPTH) return fail(o, "nested deeper than %d messages", SRV_CFGJSON_MAX_DEPTH);
  if (!cJSON_IsObject(obj)) return fail(o, "an object (%s) is expected", d->name);
  for (const cJSON *m = obj->child; m; m = m->next) {
    const ProtobufCFieldDescriptor *f = find_field(d, m->string);
    if (!f) return fail(o, "unknown field '%.80s' in %s", m->string, d->name);
    if (put_field(o, f, m, depth)) return -1;
  }
  return 0;
}

int srv_cfgjson_to_text(const ProtobufCMessageDescriptor *d, const char *json, size_t len, char **text, err *e) {
  *text = NULL;
  const char *end = NULL;
  // Not through the REST JSON budget (server/http/jsonmem.h): the override
  // is at most SRV_CONFIG_OVERRIDE_MAX bytes and the control thread parses
  // one at a time, so its tree is bounded (about 30 times its size).
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  size_t at = end && end >= json ? (size_t)(end - json) : 0;
  while (root && at < len && (json[at] == ' ' || json[at] == '\t' || json[at] == '\n' || json[at] == '\r')) at++;
  if (root && at < len) {  // one value, then only blanks: '"a": {...}' is not an object followed by more
    cJSON_Delete(root);
    root = NULL;
  }
  if (!root) return err_set(e, ERR_INVALID_ARGUMENT, "the 'config' override is not valid JSON (at byte %zu)", at);
  out o = {.e = e};
  int rc = put_message(&o, d, root, 0);
  cJSON_Delete(root);
  if (rc == 0 && o.oom) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (rc == 0 && !o.buf) put(&o, "", 0);  // "{}": an empty config
  if (rc == 0 && o.oom) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (rc) {
    free(o.buf);
    return rc;
  }
  *text = o.buf;
  return 0;
}
