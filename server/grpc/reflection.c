// reflection.c: server reflection answers from an embedded FileDescriptorSet.
//
// At create time the set is split into its files, keeping each file's exact
// serialized bytes (clients get back what protoc wrote, not a re-encoding),
// and every fully-qualified name a client may ask about is indexed in one
// sorted table. Answering is then a lookup plus a walk over dependencies,
// with no state changed, so concurrent streams need no lock.
#include "server/grpc/reflection.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "google/protobuf/descriptor.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"

// gRPC status codes carried in ErrorResponse.error_code.
enum { STATUS_NOT_FOUND = 5, STATUS_UNIMPLEMENTED = 12 };

typedef struct file_entry {
  const uint8_t *bytes;  // into srv_reflection.blob
  size_t len;
  char *name;
  size_t n_deps;
  size_t *deps;  // indexes into srv_reflection.files
} file_entry;

typedef struct symbol {
  char *name;  // fully qualified, no leading dot
  size_t file;
} symbol;

typedef struct extension {
  char *extendee;  // fully qualified, no leading dot
  int32_t number;
  size_t file;
} extension;

struct srv_reflection {
  uint8_t *blob;  // copy of the whole set; file_entry.bytes point into it
  file_entry *files;
  size_t n_files;
  symbol *symbols;  // sorted by name
  size_t n_symbols, cap_symbols;
  extension *exts;
  size_t n_exts, cap_exts;
  char **services;  // also present in symbols; owned here
  size_t n_services, cap_services;
};

// --- wire scanning of the FileDescriptorSet

// Reads a base-128 varint; returns false on truncation or overlong encoding.
static bool read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v) {
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*pos >= len) return false;
    uint8_t b = p[(*pos)++];
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

// Skips a field of the given wire type; false when it runs past the end.
static bool skip_field(const uint8_t *p, size_t len, size_t *pos, unsigned wire_type) {
  uint64_t v;
  switch (wire_type) {
    case 0: return read_varint(p, len, pos, &v);
    case 1: if (len - *pos < 8) return false; *pos += 8; return true;
    case 2:
      if (!read_varint(p, len, pos, &v) || v > len - *pos) return false;
      *pos += (size_t)v;
      return true;
    case 5: if (len - *pos < 4) return false; *pos += 4; return true;
    default: return false;
  }
}

// --- building the index

static char *join_name(const char *scope, const char *name) {
  size_t a = scope ? strlen(scope) : 0, b = strlen(name);
  char *s = malloc(a + b + 2);
  if (!s) return NULL;
  if (a) {
    memcpy(s, scope, a);
    s[a] = '.';
    memcpy(s + a + 1, name, b + 1);
  } else {
    memcpy(s, name, b + 1);
  }
  return s;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem, err *e) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap * 2 : 64;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*arr, ncap * elem);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory growing index");
  *arr = p;
  *cap = ncap;
  return 0;
}

// Adds scope.name to the symbol table; takes ownership of nothing.
static int add_symbol(srv_reflection *r, const char *scope, const char *name, size_t file, err *e) {
  if (!name || !*name) return 0;
  TRY(grow((void **)&r->symbols, &r->cap_symbols, r->n_symbols + 1, sizeof *r->symbols, e));
  char *full = join_name(scope, name);
  if (!full) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  r->symbols[r->n_symbols++] = (symbol){full, file};
  return 0;
}

static int add_extension(srv_reflection *r, const Google__Protobuf__FieldDescriptorProto *f,
                         const char *scope, size_t file, err *e) {
  TRY(add_symbol(r, scope, f->name, file, e));
  if (!f->extendee || !f->has_number) return 0;
  TRY(grow((void **)&r->exts, &r->cap_exts, r->n_exts + 1, sizeof *r->exts, e));
  const char *t = f->extendee[0] == '.' ? f->extendee + 1 : f->extendee;
  char *copy = strdup(t);
  if (!copy) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  r->exts[r->n_exts++] = (extension){copy, f->number, file};
  return 0;
}

// Enum values live in the scope enclosing the enum (C++ scoping rules).
static int index_enum(srv_reflection *r, const Google__Protobuf__EnumDescriptorProto *en,
                      const char *scope, size_t file, err *e) {
  TRY(add_symbol(r, scope, en->name, file, e));
  for (size_t i = 0; i < en->n_value; i++) TRY(add_symbol(r, scope, en->value[i]->name, file, e));
  return 0;
}

static int index_message(srv_reflection *r, const Google__Protobuf__DescriptorProto *m,
                         const char *scope, size_t file, err *e) {
  if (!m->name) return 0;
  char *full = join_name(scope, m->name);
  if (!full) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  int rc = add_symbol(r, scope, m->name, file, e);
  for (size_t i = 0; rc == 0 && i < m->n_field; i++) rc = add_symbol(r, full, m->field[i]->name, file, e);
  for (size_t i = 0; rc == 0 && i < m->n_oneof_decl; i++)
    rc = add_symbol(r, full, m->oneof_decl[i]->name, file, e);
  for (size_t i = 0; rc == 0 && i < m->n_enum_type; i++) rc = index_enum(r, m->enum_type[i], full, file, e);
  for (size_t i = 0; rc == 0 && i < m->n_extension; i++) rc = add_extension(r, m->extension[i], full, file, e);
  for (size_t i = 0; rc == 0 && i < m->n_nested_type; i++)
    rc = index_message(r, m->nested_type[i], full, file, e);
  free(full);
  return rc;
}

static int index_file(srv_reflection *r, const Google__Protobuf__FileDescriptorProto *fd, size_t file,
                      err *e) {
  const char *pkg = (fd->package && *fd->package) ? fd->package : NULL;
  for (size_t i = 0; i < fd->n_message_type; i++) TRY(index_message(r, fd->message_type[i], pkg, file, e));
  for (size_t i = 0; i < fd->n_enum_type; i++) TRY(index_enum(r, fd->enum_type[i], pkg, file, e));
  for (size_t i = 0; i < fd->n_extension; i++) TRY(add_extension(r, fd->extension[i], pkg, file, e));
  for (size_t i = 0; i < fd->n_service; i++) {
    const Google__Protobuf__ServiceDescriptorProto *s = fd->service[i];
    if (!s->name) continue;
    TRY(add_symbol(r, pkg, s->name, file, e));
    TRY(grow((void **)&r->services, &r->cap_services, r->n_services + 1, sizeof *r->services, e));
    char *full = join_name(pkg, s->name);
    if (!full) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
    r->services[r->n_services++] = full;
    for (size_t j = 0; j < s->n_method; j++) TRY(add_symbol(r, full, s->method[j]->name, file, e));
  }
  return 0;
}

static ssize_t find_file(const srv_reflection *r, const char *name) {
  for (size_t i = 0; i < r->n_files; i++)
    if (strcmp(r->files[i].name, name) == 0) return (ssize_t)i;
  return -1;
}

// Resolves dependency names to indexes; a set built without --include_imports
// is refused here rather than producing answers clients cannot resolve.
static int link_deps(srv_reflection *r, size_t file, const Google__Protobuf__FileDescriptorProto *fd,
                     err *e) {
  file_entry *f = &r->files[file];
  if (fd->n_dependency == 0) return 0;
  f->deps = calloc(fd->n_dependency, sizeof *f->deps);
  if (!f->deps) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  for (size_t i = 0; i < fd->n_dependency; i++) {
    ssize_t d = find_file(r, fd->dependency[i]);
    if (d < 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "reflection: %s imports %s, which the descriptor set lacks (build it with --include_imports)",
                     f->name, fd->dependency[i]);
    f->deps[f->n_deps++] = (size_t)d;
  }
  return 0;
}

static int cmp_symbol(const void *a, const void *b) {
  return strcmp(((const symbol *)a)->name, ((const symbol *)b)->name);
}

// Splits the set into files, keeping each file's serialized bytes. The set
// has a single field (repeated FileDescriptorProto file = 1); anything else is
// skipped so a set written by a newer protoc still loads.
static int split_files(srv_reflection *r, size_t len, err *e) {
  const uint8_t *p = r->blob;
  size_t cap = 0, pos = 0;
  while (pos < len) {
    uint64_t tag;
    if (!read_varint(p, len, &pos, &tag))
      return err_set(e, ERR_INVALID_ARGUMENT, "reflection: descriptor set truncated at byte %zu", pos);
    unsigned field = (unsigned)(tag >> 3), wt = (unsigned)(tag & 7);
    if (field == 1 && wt == 2) {
      uint64_t flen;
      if (!read_varint(p, len, &pos, &flen) || flen > len - pos)
        return err_set(e, ERR_INVALID_ARGUMENT, "reflection: descriptor set truncated at byte %zu", pos);
      TRY(grow((void **)&r->files, &cap, r->n_files + 1, sizeof *r->files, e));
      r->files[r->n_files++] = (file_entry){.bytes = p + pos, .len = (size_t)flen};
      pos += (size_t)flen;
    } else if (!skip_field(p, len, &pos, wt)) {
      return err_set(e, ERR_INVALID_ARGUMENT, "reflection: descriptor set malformed at byte %zu", pos);
    }
  }
  if (r->n_files == 0) return err_set(e, ERR_INVALID_ARGUMENT, "reflection: descriptor set holds no files");
  return 0;
}

int srv_reflection_create(const uint8_t *protoset, size_t len, srv_reflection **out, err *e) {
  *out = NULL;
  if (!protoset || len == 0) return err_set(e, ERR_INVALID_ARGUMENT, "reflection: empty descriptor set");
  srv_reflection *r = calloc(1, sizeof *r);
  if (!r) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  r->blob = malloc(len);
  if (!r->blob) {
    free(r);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory copying %zu bytes", len);
  }
  memcpy(r->blob, protoset, len);

  int rc = split_files(r, len, e);
  Google__Protobuf__FileDescriptorProto **fds = NULL;
  if (rc == 0) {
    fds = calloc(r->n_files, sizeof *fds);
    if (!fds) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  }
  for (size_t i = 0; rc == 0 && i < r->n_files; i++) {
    fds[i] = google__protobuf__file_descriptor_proto__unpack(NULL, r->files[i].len, r->files[i].bytes);
    if (!fds[i]) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "reflection: file %zu of the descriptor set does not parse", i);
    } else if (!fds[i]->name || !*fds[i]->name) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "reflection: file %zu of the descriptor set has no name", i);
    } else if (!(r->files[i].name = strdup(fds[i]->name))) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
    }
  }
  for (size_t i = 0; rc == 0 && i < r->n_files; i++) rc = link_deps(r, i, fds[i], e);
  for (size_t i = 0; rc == 0 && i < r->n_files; i++) rc = index_file(r, fds[i], i, e);
  if (fds) {
    for (size_t i = 0; i < r->n_files; i++)
      if (fds[i]) google__protobuf__file_descriptor_proto__free_unpacked(fds[i], NULL);
    free(fds);
  }
  if (rc != 0) {
    srv_reflection_destroy(r);
    return rc;
  }
  if (r->n_symbols) qsort(r->symbols, r->n_symbols, sizeof *r->symbols, cmp_symbol);
  *out = r;
  return 0;
}

void srv_reflection_destroy(srv_reflection *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_files; i++) {
    free(r->files[i].name);
    free(r->files[i].deps);
  }
  for (size_t i = 0; i < r->n_symbols; i++) free(r->symbols[i].name);
  for (size_t i = 0; i < r->n_exts; i++) free(r->exts[i].extendee);
  for (size_t i = 0; i < r->n_services; i++) free(r->services[i]);
  free(r->files);
  free(r->symbols);
  free(r->exts);
  free(r->services);
  free(r->blob);
  free(r);
}

size_t srv_reflection_service_count(const srv_reflection *r) { return r->n_services; }

const char *srv_reflection_service_name(const srv_reflection *r, size_t i) {
  return i < r->n_services ? r->services[i] : NULL;
}

// --- answering

static const symbol *find_symbol(const srv_reflection *r, const char *name) {
  if (name[0] == '.') name++;  // tolerate the descriptor spelling ".pkg.Type"
  symbol key = {.name = (char *)name};
  return r->n_symbols ? bsearch(&key, r->symbols, r->n_symbols, sizeof *r->symbols, cmp_symbol) : NULL;
}

// Appends the file, then its imports depth-first, each once. The requested
// file comes first, as the C++ and Go servers send it; clients resolve the
// rest by name.
static void collect_files(const srv_reflection *r, size_t file, bool *seen, ProtobufCBinaryData *out,
                          size_t *n) {
  if (seen[file]) return;
  seen[file] = true;
  out[(*n)++] = (ProtobufCBinaryData){.len = r->files[file].len, .data = (uint8_t *)r->files[file].bytes};
  for (size_t i = 0; i < r->files[file].n_deps; i++) collect_files(r, r->files[file].deps[i], seen, out, n);
}

// Everything one response points at that is not in the request or the index.
typedef struct answer {
  Grpc__Reflection__V1__ServerReflectionResponse resp;
  Grpc__Reflection__V1__FileDescriptorResponse files;
  Grpc__Reflection__V1__ExtensionNumberResponse ext_numbers;
  Grpc__Reflection__V1__ListServiceResponse list;
  Grpc__Reflection__V1__ErrorResponse error;
  char error_msg[384];
  ProtobufCBinaryData *file_bytes;
  bool *seen;
  int32_t *numbers;
  Grpc__Reflection__V1__ServiceResponse *svc;
  Grpc__Reflection__V1__ServiceResponse **svc_ptrs;
} answer;

static void set_error(answer *a, int32_t code, const char *fmt, const char *arg) {
  snprintf(a->error_msg, sizeof a->error_msg, fmt, arg);
  a->error.error_code = code;
  a->error.error_message = a->error_msg;
  a->resp.message_response_case = GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
  a->resp.error_response = &a->error;
}

static int answer_files(const srv_reflection *r, answer *a, size_t file, err *e) {
  a->seen = calloc(r->n_files, sizeof *a->seen);
  a->file_bytes = calloc(r->n_files, sizeof *a->file_bytes);
  if (!a->seen || !a->file_bytes) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  size_t n = 0;
  collect_files(r, file, a->seen, a->file_bytes, &n);
  a->files.n_file_descriptor_proto = n;
  a->files.file_descriptor_proto = a->file_bytes;
  a->resp.message_response_case =
      GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
  a->resp.file_descriptor_response = &a->files;
  return 0;
}

static int answer_list(const srv_reflection *r, answer *a, err *e) {
  if (r->n_services) {
    a->svc = calloc(r->n_services, sizeof *a->svc);
    a->svc_ptrs = calloc(r->n_services, sizeof *a->svc_ptrs);
    if (!a->svc || !a->svc_ptrs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  }
  for (size_t i = 0; i < r->n_services; i++) {
    grpc__reflection__v1__service_response__init(&a->svc[i]);
    a->svc[i].name = r->services[i];
    a->svc_ptrs[i] = &a->svc[i];
  }
  a->list.n_service = r->n_services;
  a->list.service = a->svc_ptrs;
  a->resp.message_response_case =
      GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
  a->resp.list_services_response = &a->list;
  return 0;
}

static int answer_extension_numbers(const srv_reflection *r, answer *a, const char *type, err *e) {
  const char *t = type[0] == '.' ? type + 1 : type;
  if (!find_symbol(r, t)) {
    set_error(a, STATUS_NOT_FOUND, "type not found: %s", type);
    return 0;
  }
  size_t n = 0;
  if (r->n_exts) {
    a->numbers = calloc(r->n_exts, sizeof *a->numbers);
    if (!a->numbers) return err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory");
  }
  for (size_t i = 0; i < r->n_exts; i++)
    if (strcmp(r->exts[i].extendee, t) == 0) a->numbers[n++] = r->exts[i].number;
  a->ext_numbers.base_type_name = (char *)t;
  a->ext_numbers.n_extension_number = n;
  a->ext_numbers.extension_number = a->numbers;
  a->resp.message_response_case =
      GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE;
  a->resp.all_extension_numbers_response = &a->ext_numbers;
  return 0;
}

static int answer_extension(const srv_reflection *r, answer *a,
                            const Grpc__Reflection__V1__ExtensionRequest *x, err *e) {
  const char *t = (x && x->containing_type) ? x->containing_type : "";
  if (t[0] == '.') t++;
  for (size_t i = 0; x && i < r->n_exts; i++)
    if (r->exts[i].number == x->extension_number && strcmp(r->exts[i].extendee, t) == 0)
      return answer_files(r, a, r->exts[i].file, e);
  set_error(a, STATUS_NOT_FOUND, "extension not found on type %s", t);
  return 0;
}

int srv_reflection_answer(const srv_reflection *r, const uint8_t *req, size_t req_len, uint8_t **resp,
                          size_t *resp_len, err *e) {
  *resp = NULL;
  *resp_len = 0;
  static const uint8_t empty[1];
  Grpc__Reflection__V1__ServerReflectionRequest *rq =
      grpc__reflection__v1__server_reflection_request__unpack(NULL, req_len, req ? req : empty);
  if (!rq)
    return err_set(e, ERR_INVALID_ARGUMENT, "reflection: request of %zu bytes is not a ServerReflectionRequest",
                   req_len);

  answer a;
  memset(&a, 0, sizeof a);
  grpc__reflection__v1__server_reflection_response__init(&a.resp);
  grpc__reflection__v1__file_descriptor_response__init(&a.files);
  grpc__reflection__v1__extension_number_response__init(&a.ext_numbers);
  grpc__reflection__v1__list_service_response__init(&a.list);
  grpc__reflection__v1__error_response__init(&a.error);
  a.resp.valid_host = rq->host;
  a.resp.original_request = rq;

  int rc = 0;
  switch (rq->message_request_case) {
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME: {
      ssize_t f = find_file(r, rq->file_by_filename);
      if (f < 0)
        set_error(&a, STATUS_NOT_FOUND, "file not found: %s", rq->file_by_filename);
      else
        rc = answer_files(r, &a, (size_t)f, e);
      break;
    }
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL: {
      const symbol *s = find_symbol(r, rq->file_containing_symbol);
      if (!s)
        set_error(&a, STATUS_NOT_FOUND, "symbol not found: %s", rq->file_containing_symbol);
      else
        rc = answer_files(r, &a, s->file, e);
      break;
    }
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION:
      rc = answer_extension(r, &a, rq->file_containing_extension, e);
      break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE:
      rc = answer_extension_numbers(r, &a, rq->all_extension_numbers_of_type, e);
      break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
      rc = answer_list(r, &a, e);
      break;
    default:
      // No request kind set, or one newer than this server knows.
      set_error(&a, STATUS_UNIMPLEMENTED, "%s", "reflection request kind not supported");
      break;
  }

  if (rc == 0) {
    size_t n = grpc__reflection__v1__server_reflection_response__get_packed_size(&a.resp);
    uint8_t *buf = malloc(n ? n : 1);  // an empty response is legal; malloc(0) may return NULL
    if (!buf) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "reflection: out of memory for a %zu-byte response", n);
    } else {
      size_t w = grpc__reflection__v1__server_reflection_response__pack(&a.resp, buf);
      if (w != n) {
        free(buf);
        rc = err_set(e, ERR_INTERNAL, "reflection: packed %zu bytes, expected %zu", w, n);
      } else {
        *resp = buf;
        *resp_len = n;
      }
    }
  }
  free(a.file_bytes);
  free(a.seen);
  free(a.numbers);
  free(a.svc);
  free(a.svc_ptrs);
  grpc__reflection__v1__server_reflection_request__free_unpacked(rq, NULL);
  return rc;
}
