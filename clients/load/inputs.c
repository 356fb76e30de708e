// inputs.c: input shapes and bytes for the load generator.
#include "clients/load/inputs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clients/load/rng.h"
#include "kernels/base/dtype.h"

#define MAX_TENSOR_BYTES ((size_t)1 << 31)

const char *ld_shape_str(const int64_t *shape, size_t rank, char *buf, size_t cap) {
  size_t off = 0;
  if (cap == 0) return buf;
  buf[0] = '\0';
  off += (size_t)snprintf(buf + off, cap - off, "[");
  for (size_t i = 0; i < rank && off < cap; i++)
    off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? "," : "", (long long)shape[i]);
  if (off < cap) snprintf(buf + off, cap - off, "]");
  return buf;
}

void ld_inputs_free(ld_tensor *t, size_t n) {
  for (size_t i = 0; t && i < n; i++) free(t[i].name), free(t[i].datatype), free(t[i].data);
  free(t);
}

// --- random bytes per element type

static void fill_random(uint8_t *p, size_t n_elem, dtype dt, uint64_t *rng) {
  for (size_t i = 0; i < n_elem; i++) {
    uint64_t r = ld_rng_next(rng);
    switch (dt) {
      case DT_FP32: {
        float f = (float)(ld_rng_uniform(rng) * 2.0 - 1.0);
        memcpy(p + 4 * i, &f, 4);
        break;
      }
      case DT_FP64: {
        double d = ld_rng_uniform(rng) * 2.0 - 1.0;
        memcpy(p + 8 * i, &d, 8);
        break;
      }
      case DT_FP16: {
        // Normal halves of magnitude [2^-8, 1): exponent field 7..14, any
        // mantissa, either sign; no NaN, Inf or subnormal to trip a model.
        uint16_t h = (uint16_t)(((r & 1) << 15) | ((7 + (r >> 1) % 8) << 10) | ((r >> 8) & 0x3ff));
        memcpy(p + 2 * i, &h, 2);
        break;
      }
      case DT_BF16: {
        float f = (float)(ld_rng_uniform(rng) * 2.0 - 1.0);
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t b = (uint16_t)(u >> 16);
        memcpy(p + 2 * i, &b, 2);
        break;
      }
      case DT_BOOL:
        p[i] = (uint8_t)(r & 1);
        break;
      default: {
        // Integers: small and non-negative, so index-like inputs (embeddings,
        // gathers) stay in range.
        uint64_t v = r % 100;
        size_t sz = dtype_size(dt);
        for (size_t b = 0; b < sz; b++) p[sz * i + b] = (uint8_t)(v >> (8 * b));  // little-endian on any host
        break;
      }
    }
  }
}

static int read_file(const char *path, uint8_t **data, size_t *size, err *e) {
  FILE *f = fopen(path, "rb");
  if (!f) return err_set(e, ERR_INVALID_ARGUMENT, "--input-data: cannot open '%s': %s", path, strerror(errno));
  int rc = 0;
  if (fseek(f, 0, SEEK_END) != 0) rc = -1;
  long len = rc ? -1 : ftell(f);
  if (len < 0 || (size_t)len > MAX_TENSOR_BYTES || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return err_set(e, ERR_INVALID_ARGUMENT, "--input-data: cannot read '%s' (or it is over 2 GiB)", path);
  }
  *size = (size_t)len;
  *data = malloc(*size ? *size : 1);
  if (!*data) {
    fclose(f);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for '%s'", path);
  }
  if (*size && fread(*data, 1, *size, f) != *size) rc = err_set(e, ERR_INVALID_ARGUMENT, "short read on '%s'", path);
  fclose(f);
  return rc;
}

// --- shapes

static const ld_shape_opt *shape_for(const ld_input_cfg *cfg, const char *name) {
  for (size_t i = 0; i < cfg->n_shapes; i++)
    if (strcmp(cfg->shapes[i].name, name) == 0) return &cfg->shapes[i];
  return NULL;
}

static int resolve_shape(const ld_model *m, const ld_tensor_meta *tm, const ld_input_cfg *cfg, FILE *log, ld_tensor *t,
                         err *e) {
  char buf[256];
  const int64_t *dims = tm->shape + (m->batching ? 1 : 0);
  size_t rank = tm->rank - (m->batching ? 1 : 0);
  const ld_shape_opt *so = shape_for(cfg, tm->name);
  t->rank = 0;
  if (m->batching) t->shape[t->rank++] = cfg->rows;
  if (so) {
    if (so->rank != rank && log)
      fprintf(log, "inferd-load: note: --shape %s has %zu dims, the model says %s\n", tm->name, so->rank,
              ld_shape_str(dims, rank, buf, sizeof buf));
    for (size_t i = 0; i < so->rank; i++) {
      if (i < rank && dims[i] != -1 && dims[i] != so->dims[i] && log)
        fprintf(log, "inferd-load: note: --shape %s overrides fixed dim %zu (%lld -> %lld)\n", tm->name, i,
                (long long)dims[i], (long long)so->dims[i]);
      t->shape[t->rank++] = so->dims[i];
    }
    return 0;
  }
  if (rank > LD_MAX_RANK)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' has %zu dims, more than %d", tm->name, rank, LD_MAX_RANK);
  for (size_t i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s' has a variable dim (shape %s%s); give it with --shape %s:D1,D2,...", tm->name,
                     ld_shape_str(dims, rank, buf, sizeof buf), m->batching ? " after the batch dim" : "", tm->name);
    t->shape[t->rank++] = dims[i];
  }
  return 0;
}

int ld_inputs_build(const ld_model *m, const ld_input_cfg *cfg, FILE *log, ld_tensor **out, size_t *n, err *e) {
  *out = NULL;
  *n = 0;
  for (size_t i = 0; i < cfg->n_shapes; i++) {
    bool found = false;
    for (size_t j = 0; j < m->n_inputs; j++) found = found || strcmp(m->inputs[j].name, cfg->shapes[i].name) == 0;
    if (!found)
      return err_set(e, ERR_INVALID_ARGUMENT, "--shape names '%s', not an input of model '%s'", cfg->shapes[i].name,
                     m->name);
  }
  if (!m->batching && cfg->rows != 1 && log)
    fprintf(log, "inferd-load: note: model '%s' does not batch; --rows %d ignored\n", m->name, cfg->rows);
  bool dir = false;
  if (cfg->data == LD_DATA_PATH) {
    struct stat st;
    if (stat(cfg->path, &st) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "--input-data: '%s': %s", cfg->path, strerror(errno));
    dir = S_ISDIR(st.st_mode);
    if (!dir && m->n_inputs != 1)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "--input-data '%s' is a file but model '%s' has %zu inputs: give a directory with one "
                     "file per input name",
                     cfg->path, m->name, m->n_inputs);
  }
  ld_tensor *ts = calloc(m->n_inputs, sizeof *ts);
  if (!ts) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < m->n_inputs; i++) {
    const ld_tensor_meta *tm = &m->inputs[i];
    ld_tensor *t = &ts[i];
    t->name = strdup(tm->name);
    t->datatype = strdup(tm->datatype);
    if (!t->name || !t->datatype) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    if ((rc = resolve_shape(m, tm, cfg, log, t, e)) != 0) break;
    dtype dt = dtype_from_wire(tm->datatype);
    if (dt == DT_INVALID) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s' has datatype '%s', which inferd-load does not know", tm->name,
                   tm->datatype);
      break;
    }
    size_t elems = 1;
    for (size_t k = 0; k < t->rank; k++) {
      if (t->shape[k] > 0 && elems > MAX_TENSOR_BYTES / (size_t)t->shape[k])
        elems = MAX_TENSOR_BYTES + 1;
      else
        elems *= (size_t)t->shape[k];
    }
    size_t esz = dtype_size(dt);
    if (elems > MAX_TENSOR_BYTES || (esz && elems * esz > MAX_TENSOR_BYTES)) {
      char buf[256];
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s' with shape %s is over 2 GiB", tm->name,
                   ld_shape_str(t->shape, t->rank, buf, sizeof buf));
      break;
    }
    if (cfg->data == LD_DATA_PATH) {
      char path[4096];
      if (dir)
        snprintf(path, sizeof path, "%s/%s", cfg->path, tm->name);
      else
        snprintf(path, sizeof path, "%s", cfg->path);
      if ((rc = read_file(path, &t->data, &t->size, e)) != 0) break;
      // BYTES elements carry their own 4-byte length prefixes: the file is taken as it is.
      if (dt != DT_STRING && t->size != elems * esz) {
        char buf[256];
        rc = err_set(e, ERR_INVALID_ARGUMENT, "--input-data '%s' holds %zu bytes; input '%s' %s %s needs %zu", path,
                     t->size, tm->name, tm->datatype, ld_shape_str(t->shape, t->rank, buf, sizeof buf), elems * esz);
      }
      continue;
    }
    if (dt == DT_STRING) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is BYTES: give its serialized elements with --input-data PATH",
                   tm->name);
      break;
    }
    t->size = elems * esz;
    t->data = calloc(t->size ? t->size : 1, 1);
    if (!t->data) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for input '%s'", tm->name);
      break;
    }
    // One stream per input, so adding an input does not change another's bytes.
    uint64_t rng = cfg->seed * 0x100000001b3ull + i;
    if (cfg->data == LD_DATA_RANDOM) fill_random(t->data, elems, dt, &rng);
  }
  if (rc) {
    ld_inputs_free(ts, m->n_inputs);
    return rc;
  }
  *out = ts;
  *n = m->n_inputs;
  return 0;
}

// --- the invalid kind of --mix

int ld_inputs_widen_first(const ld_tensor *in, size_t n, ld_tensor **out, err *e) {
  *out = NULL;
  if (n == 0) return err_set(e, ERR_INVALID_ARGUMENT, "the model has no input to make an invalid request from");
  const ld_tensor *f = &in[0];
  dtype dt = dtype_from_wire(f->datatype);
  if (f->rank == 0 || dt == DT_STRING || dtype_size(dt) == 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "input '%s' (%s, rank %zu): an invalid request needs a first input with dims and a fixed "
                   "element size",
                   f->name, f->datatype, f->rank);
  size_t esz = dtype_size(dt), rows = 1, last = (size_t)f->shape[f->rank - 1];
  for (size_t d = 0; d + 1 < f->rank; d++) rows *= (size_t)f->shape[d];
  if (rows * last * esz != f->size)
    return err_set(e, ERR_INTERNAL, "input '%s' holds %zu bytes, not its shape's", f->name, f->size);
  ld_tensor *t = calloc(n, sizeof *t);
  if (!t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    t[i] = in[i];
    t[i].name = strdup(in[i].name);
    t[i].datatype = strdup(in[i].datatype);
    t[i].size = i ? in[i].size : rows * (last + 1) * esz;
    t[i].data = calloc(1, t[i].size ? t[i].size : 1);  // zeros: the appended elements
    if (!t[i].name || !t[i].datatype || !t[i].data) {
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    if (i) {
      memcpy(t[i].data, in[i].data, in[i].size);
      continue;
    }
    t[i].shape[t[i].rank - 1] = (int64_t)last + 1;
    for (size_t r = 0; r < rows; r++) memcpy(t[i].data + r * (last + 1) * esz, in[i].data + r * last * esz, last * esz);
  }
  if (rc) {
    ld_inputs_free(t, n);
    return rc;
  }
  *out = t;
  return 0;
}
