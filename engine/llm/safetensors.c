// engine/llm/safetensors.c: safetensors files mapped and their headers
// checked. The format: 8 bytes little-endian header length N, N bytes of
// JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}, then the data, offsets counted from its start.
#include "engine/llm/safetensors.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/base/rfile.h"
#include "kernels/k_ref.h"

#define MAX_SHARDS 4096
#define MAX_HEADER ((uint64_t)100 << 20)  // the format's own limit

typedef struct shard {
  char *name;
  void *map;
  size_t len;
} shard;

struct eng_llm_st {
  shard *files;
  size_t n_files;
  eng_llm_tensor *t;
  size_t n, cap;
  size_t bytes;
};

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const eng_llm_tensor *)a)->name, ((const eng_llm_tensor *)b)->name);
}

static dtype dtype_of(const char *s) {
  if (!strcmp(s, "F32")) return DT_FP32;
  if (!strcmp(s, "F16")) return DT_FP16;
  if (!strcmp(s, "BF16")) return DT_BF16;
  return DT_INVALID;
}

static size_t elem_size(const char *s) {
  static const struct {
    const char *n;
    size_t z;
  } sz[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
            {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
    if (!strcmp(s, sz[i].n)) return sz[i].z;
  return 0;
}

// Maps one shard and appends its tensors; every header problem is listed.
static int map_shard(eng_llm_st *s, const char *dir, const char *name, err_list *bad, err *e) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = rfile_open_regular(path, 0, name, e);
  if (fd < 0) return e->code;
  struct stat st;
  if (fstat(fd, &st) || st.st_size < 8) {
    close(fd);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: shorter than a safetensors header", name);
  }
  size_t len = (size_t)st.st_size;
  void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return err_set(e, ERR_INTERNAL, "%s: mmap failed", name);
  shard *f = &s->files[s->n_files++];
  f->name = strdup(name);
  f->map = map;
  f->len = len;
  if (!f->name) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  const uint8_t *b = map;
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];
  if (hl > MAX_HEADER || hl > len - 8)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: header length %llu does not fit the file (%zu bytes)", name,
                   (unsigned long long)hl, len);
  cJSON *h = cJSON_ParseWithLength((const char *)b + 8, (size_t)hl);
  if (!h || !cJSON_IsObject(h)) {
    cJSON_Delete(h);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: the header is not a JSON object", name);
  }
  const uint8_t *data = b + 8 + hl;
  size_t data_len = len - 8 - (size_t)hl;
  int rc = 0;
  for (const cJSON *it = h->child; it; it = it->next) {
    if (!strcmp(it->string, "__metadata__")) continue;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
    const cJSON *shp = cJSON_GetObjectItemCaseSensitive(it, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shp) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        cJSON_GetArraySize(shp) > ENG_LLM_ST_MAX_DIMS) {
      err_list_add(bad, "%s: tensor '%s' has no valid dtype, shape and data_offsets", name, it->string);
      continue;
    }
    if (s->n == s->cap) {
      size_t nc = s->cap ? s->cap * 2 : 256;
      eng_llm_tensor *nt = realloc(s->t, nc * sizeof *nt);
      if (!nt) {
        rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      s->t = nt, s->cap = nc;
    }
    eng_llm_tensor *t = &s->t[s->n];
    memset(t, 0, sizeof *t);
    snprintf(t->dt_name, sizeof t->dt_name, "%s", dt->valuestring);
    t->dt = dtype_of(dt->valuestring);
    t->file = (int)(s->n_files - 1);
    uint64_t count = 1;
    int ok = 1;
    for (const cJSON *d = shp->child; d; d = d->next) {
      if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e15)
        ok = 0;
      else {
        t->shape[t->ndim++] = (int64_t)d->valuedouble;
        if (count && (uint64_t)d->valuedouble > UINT64_MAX / count / 8)
          ok = 0;
        else
          count *= (uint64_t)d->valuedouble;
      }
    }
    double ob = cJSON_GetArrayItem(off, 0)->valuedouble, oe = cJSON_GetArrayItem(off, 1)->valuedouble;
    size_t esz = elem_size(dt->valuestring);
    if (!ok || !cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)) || ob < 0 ||
        oe < ob || oe > (double)data_len) {
      err_list_add(bad, "%s: tensor '%s' has a bad shape or data_offsets outside the file", name, it->string);
      continue;
    }
    if (esz && (uint64_t)(oe - ob) != count * esz) {
      err_list_add(bad, "%s: tensor '%s' holds %.0f bytes, its shape and %s need %llu", name, it->string, oe - ob,
                   dt->valuestring, (unsigned long long)(count * esz));
      continue;
    }
    t->data = data + (size_t)ob;
    t->nbytes = (size_t)(oe - ob);
    if (!(t->name = strdup(it->string))) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    s->n++;
    s->bytes += t->nbytes;
  }
  cJSON_Delete(h);
  return rc;
}

static char *read_index(const char *dir, err *e, int *rc) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  uint8_t *buf = NULL;
  size_t len = 0;
  err e2 = {0};
  *rc = rfile_read_all(path, "model.safetensors.index.json", (size_t)64 << 20, &buf, &len, &e2);
  if (*rc) {
    if (e2.code == ERR_NOT_FOUND)
      *rc = 0;
    else
      *e = e2;
    return NULL;
  }
  char *t = malloc(len + 1);
  if (t)
    memcpy(t, buf, len), t[len] = 0;
  else
    *rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  free(buf);
  return t;
}

int eng_llm_st_open(const char *dir, eng_llm_st **out, err *e) {
  *out = NULL;
  eng_llm_st *s = calloc(1, sizeof *s);
  if (!s || !(s->files = calloc(MAX_SHARDS, sizeof *s->files))) {
    free(s);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  err_list bad = {0};
  int rc = 0;
  char *idx = read_index(dir, e, &rc);
  cJSON *ij = NULL;
  if (rc) goto fail;
  if (!idx) {
    rc = map_shard(s, dir, "model.safetensors", &bad, e);
    if (rc) goto fail;
  } else {
    ij = cJSON_Parse(idx);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(ij, "weight_map");
    if (!cJSON_IsObject(wm)) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "model.safetensors.index.json has no weight_map object");
      goto fail;
    }
    // each distinct file once, in the order first named
    for (const cJSON *it = wm->child; it; it = it->next) {
      if (!cJSON_IsString(it) || strchr(it->valuestring, '/') || !strcmp(it->valuestring, "..") || !*it->valuestring) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "model.safetensors.index.json: tensor '%s' names no file of the folder",
                     it->string);
        goto fail;
      }
      size_t f = 0;
      while (f < s->n_files && strcmp(s->files[f].name, it->valuestring)) f++;
      if (f < s->n_files) continue;
      if (s->n_files == MAX_SHARDS) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "more than %d shards", MAX_SHARDS);
        goto fail;
      }
      rc = map_shard(s, dir, it->valuestring, &bad, e);
      if (rc) goto fail;
    }
  }
  if (s->n) qsort(s->t, s->n, sizeof *s->t, cmp_name);  // t is NULL when there are none
  for (size_t i = 1; i < s->n; i++)
    if (!strcmp(s->t[i].name, s->t[i - 1].name)) err_list_add(&bad, "tensor '%s' is in two places", s->t[i].name);
  if (ij) {
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(ij, "weight_map");
    for (const cJSON *it = wm->child; it; it = it->next) {
      const eng_llm_tensor *t = eng_llm_st_find(s, it->string);
      if (!t)
        err_list_add(&bad, "the index names tensor '%s' that %s lacks", it->string, it->valuestring);
      else if (strcmp(s->files[t->file].name, it->valuestring))
        err_list_add(&bad, "the index puts tensor '%s' in %s, it is in %s", it->string, it->valuestring,
                     s->files[t->file].name);
    }
  }
  if ((rc = err_list_set(&bad, e, ERR_INVALID_ARGUMENT, "problems in the safetensors files"))) goto fail;
  cJSON_Delete(ij);
  free(idx);
  *out = s;
  return 0;
fail:
  cJSON_Delete(ij);
  free(idx);
  eng_llm_st_close(s);
  return rc;
}

void eng_llm_st_close(eng_llm_st *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) free(s->t[i].name);
  free(s->t);
  for (size_t i = 0; i < s->n_files; i++) {
    if (s->files[i].map) munmap(s->files[i].map, s->files[i].len);
    free(s->files[i].name);
  }
  free(s->files);
  free(s);
}

size_t eng_llm_st_count(const eng_llm_st *s) {
  return s->n;
}
const eng_llm_tensor *eng_llm_st_at(const eng_llm_st *s, size_t i) {
  return i < s->n ? &s->t[i] : NULL;
}
size_t eng_llm_st_files(const eng_llm_st *s) {
  return s->n_files;
}
size_t eng_llm_st_bytes(const eng_llm_st *s) {
  return s->bytes;
}

const eng_llm_tensor *eng_llm_st_find(const eng_llm_st *s, const char *name) {
  eng_llm_tensor key = {.name = (char *)name};
  return s->n ? bsearch(&key, s->t, s->n, sizeof key, cmp_name) : NULL;
}

void eng_llm_st_to_f32(float *dst, const eng_llm_tensor *t, size_t off, size_t n) {
  // the data may sit at any byte offset: read elements through memcpy
  if (t->dt == DT_FP32) {
    memcpy(dst, (const float *)t->data + off, n * sizeof(float));
  } else if (t->dt == DT_FP16) {
    const uint8_t *p = (const uint8_t *)t->data + off * 2;
    for (size_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      k_f16_to_f32(dst + i, &h, 1);
    }
  } else if (t->dt == DT_BF16) {
    // bfloat16 is the top half of a float: exact
    const uint8_t *p = (const uint8_t *)t->data + off * 2;
    for (size_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      uint32_t u = (uint32_t)h << 16;
      memcpy(dst + i, &u, 4);
    }
  }
}

// float -> bfloat16, round to nearest even (NaN kept a quiet NaN).
static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void eng_llm_st_convert(void *dst, dtype dt, const eng_llm_tensor *t, size_t off, size_t n) {
  if (dt == t->dt) {  // the stored bits, as they are
    size_t z = dtype_size(dt);
    memcpy(dst, (const uint8_t *)t->data + off * z, n * z);
    return;
  }
  if (dt == DT_FP32) {
    eng_llm_st_to_f32(dst, t, off, n);
    return;
  }
  // another 16-bit type: through float, a chunk at a time
  float buf[256];
  uint16_t *d = dst;
  for (size_t i = 0; i < n; i += 256) {
    size_t k = n - i < 256 ? n - i : 256;
    eng_llm_st_to_f32(buf, t, off + i, k);
    if (dt == DT_FP16)
      k_f32_to_f16(d + i, buf, k);
    else
      for (size_t j = 0; j < k; j++) d[i + j] = f32_to_bf16(buf[j]);
  }
}
