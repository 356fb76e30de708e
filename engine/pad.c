// pad.c: the pad_to_longest / pad_max_ratio parameters, and the copies that
// pad a request's input into its batch and crop its outputs back. See pad.h.
#include "engine/pad.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/k_ref.h"

#define P_PAD "pad_to_longest"
#define P_RATIO "pad_max_ratio"

// --- parsing

static int find_input(const eng_io *in, size_t n_in, const char *name, size_t len) {
  for (size_t i = 0; i < n_in; i++)
    if (strlen(in[i].name) == len && strncmp(in[i].name, name, len) == 0) return (int)i;
  return -1;
}

// The pad value text (trimmed, NUL-terminated) in the input's dtype.
static int parse_value(const eng_io *io, const char *s, eng_pad_input *pi, err *e) {
  char *end = NULL;
  errno = 0;
  uint8_t *v = pi->value;
  memset(v, 0, sizeof pi->value);
  switch (io->dt) {
    case DT_FP32: case DT_FP64: case DT_FP16: case DT_BF16: {
      double d = strtod(s, &end);
      if (end == s || *end) break;
      float f = (float)d;
      if (io->dt == DT_FP64) memcpy(v, &d, 8);
      else if (io->dt == DT_FP32) memcpy(v, &f, 4);
      else if (io->dt == DT_FP16) k_f32_to_f16((uint16_t *)(void *)v, &f, 1);
      else {  // bf16: the high half of the float, rounded to nearest even
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = isnan(f) ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
        memcpy(v, &h, 2);
      }
      goto done;
    }
    case DT_BOOL:
      if (!strcmp(s, "0") || !strcasecmp(s, "false")) v[0] = 0;
      else if (!strcmp(s, "1") || !strcasecmp(s, "true")) v[0] = 1;
      else break;
      goto done;
    case DT_INT8: case DT_INT16: case DT_INT32: case DT_INT64: {
      long long x = strtoll(s, &end, 10);
      if (end == s || *end || errno) break;
      size_t sz = dtype_size(io->dt);
      long long lim = sz == 8 ? 0 : 1LL << (8 * sz - 1);
      if (sz < 8 && (x < -lim || x >= lim)) break;
      int8_t i8 = (int8_t)x;
      int16_t i16 = (int16_t)x;
      int32_t i32 = (int32_t)x;
      int64_t i64 = x;
      memcpy(v, sz == 1 ? (void *)&i8 : sz == 2 ? (void *)&i16 : sz == 4 ? (void *)&i32 : (void *)&i64, sz);
      goto done;
    }
    case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64: {
      if (*s == '-') break;
      unsigned long long x = strtoull(s, &end, 10);
      if (end == s || *end || errno) break;
      size_t sz = dtype_size(io->dt);
      if (sz < 8 && x >> (8 * sz)) break;
      uint8_t u8 = (uint8_t)x;
      uint16_t u16 = (uint16_t)x;
      uint32_t u32 = (uint32_t)x;
      uint64_t u64 = x;
      memcpy(v, sz == 1 ? (void *)&u8 : sz == 2 ? (void *)&u16 : sz == 4 ? (void *)&u32 : (void *)&u64, sz);
      goto done;
    }
    default:
      return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD ": input '%s' is %s, which cannot be padded",
                     io->name, dtype_wire_name(io->dt));
  }
  return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD ": pad value '%s' of input '%s' is not a %s value", s,
                 io->name, dtype_wire_name(io->dt));
done:
  pi->value_zero = 1;
  for (size_t b = 0; b < sizeof pi->value; b++) pi->value_zero &= v[b] == 0;
  return 0;
}

static int has_reshape(const eng_model_config *cfg, const char *name) {
  for (size_t i = 0; i < cfg->n_inputs; i++)
    if (strcmp(cfg->inputs[i].name, name) == 0) return cfg->inputs[i].has_reshape;
  return 0;
}

// One "name[:value]" item, trimmed; a name that is an input as a whole
// (exporters write names such as "input_ids:0") takes the default value.
static int parse_item(const eng_model_config *cfg, const eng_io *in, size_t n_in, const char *s, size_t len,
                      eng_pad *p, err *e) {
  while (len && isspace((unsigned char)*s)) s++, len--;
  while (len && isspace((unsigned char)s[len - 1])) len--;
  if (len == 0) return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD ": an entry is empty");
  size_t name_len = len;
  const char *val = "0";
  char vbuf[64];
  int k = find_input(in, n_in, s, len);
  if (k < 0) {
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
      if (s[i] == ':') colon = s + i;
    if (colon) {
      name_len = (size_t)(colon - s);
      while (name_len && isspace((unsigned char)s[name_len - 1])) name_len--;
      const char *v = colon + 1;
      size_t vl = len - (size_t)(v - s);
      while (vl && isspace((unsigned char)*v)) v++, vl--;
      if (vl == 0 || vl >= sizeof vbuf)
        return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD ": entry '%.*s' has no usable pad value",
                       (int)len, s);
      memcpy(vbuf, v, vl);
      vbuf[vl] = 0;
      val = vbuf;
      k = find_input(in, n_in, s, name_len);
    }
  }
  if (k < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD ": '%.*s' is not an input of the model",
                   (int)name_len, s);
  const eng_io *io = &in[k];
  eng_pad_input *pi = &p->in[k];
  if (pi->on) return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD ": input '%s' is listed twice", io->name);
  if (has_reshape(cfg, io->name))
    return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD ": input '%s' has a reshape; padding needs none",
                   io->name);
  int var = -1, n_var = 0;
  for (int d = 0; d < io->ndims; d++)
    if (io->dims[d] < 0) var = d, n_var++;
  if (n_var != 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "parameters: " P_PAD ": input '%s' has %d variable (-1) dims in the config; exactly one (the "
                   "sequence dim) can be padded",
                   io->name, n_var);
  TRY(parse_value(io, val, pi, e));
  pi->on = 1;
  pi->dim = var + 1;  // the batch dim comes first in tensors as sent
  snprintf(pi->name, sizeof pi->name, "%s", io->name);
  return 0;
}

static int parse_ratio(const char *s, double *out, err *e) {
  char *end = NULL;
  double r = strtod(s, &end);
  while (end && isspace((unsigned char)*end)) end++;
  if (end == s || !end || *end || !isfinite(r) || (r != 0 && r < 1))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "parameters: " P_RATIO " '%s' must be 0 (unbounded) or a number >= 1 (longest / shortest "
                   "sequence in a batch)",
                   s);
  *out = r;
  return 0;
}

static int parse_all(const eng_model_config *cfg, const char *spec, const eng_io *in, size_t n_in,
                     const eng_io *out, size_t n_out, eng_pad *p, err *e) {
  if (cfg->max_batch_size <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_PAD " needs max_batch_size > 0");
  if (!cfg->batching.on)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "parameters: " P_PAD " needs dynamic_batching (without it every request runs alone)");
  p->n_in = n_in;
  p->n_out = n_out;
  p->in = calloc(n_in ? n_in : 1, sizeof *p->in);
  p->out_var = calloc(n_out ? n_out : 1, sizeof *p->out_var);
  if (!p->in || !p->out_var) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (const char *s = spec;;) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    TRY(parse_item(cfg, in, n_in, s, len, p, e));
    if (!comma) break;
    s = comma + 1;
  }
  for (size_t k = 0; k < n_out; k++)
    for (int d = 0; d < out[k].ndims && d + 1 < 32; d++)
      if (out[k].dims[d] < 0) p->out_var[k] |= 1u << (d + 1);
  const char *ratio = eng_model_config_param(cfg, P_RATIO);
  if (ratio) TRY(parse_ratio(ratio, &p->max_ratio, e));
  return 0;
}

int eng_pad_parse(const eng_model_config *cfg, const eng_io *in, size_t n_in, const eng_io *out, size_t n_out,
                  eng_pad *p, err *e) {
  memset(p, 0, sizeof *p);
  const char *spec = eng_model_config_param(cfg, P_PAD);
  if (!spec) {
    if (eng_model_config_param(cfg, P_RATIO))
      return err_set(e, ERR_INVALID_ARGUMENT, "parameters: " P_RATIO " is set but " P_PAD " is not");
    return 0;
  }
  int rc = parse_all(cfg, spec, in, n_in, out, n_out, p, e);
  if (rc) eng_pad_free(p);
  return rc;
}

void eng_pad_free(eng_pad *p) {
  if (!p) return;
  free(p->in);
  free(p->out_var);
  memset(p, 0, sizeof *p);
}

// --- per request

int eng_pad_seq_len(const eng_pad *p, const eng_tensor *t, int64_t *len, err *e) {
  int first = -1;
  *len = 0;
  for (size_t i = 0; p->in && i < p->n_in; i++) {
    const eng_pad_input *pi = &p->in[i];
    if (!pi->on) continue;
    if (pi->dim >= t[i].ndims)
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': has no dim %d to pad", pi->name, pi->dim);
    int64_t l = t[i].dims[pi->dim];
    if (first < 0) {
      first = (int)i;
      *len = l;
    } else if (l != *len) {
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': sequence length %lld differs from input '%s''s %lld (the inputs of "
                     "pad_to_longest must agree)",
                     pi->name, (long long)l, p->in[first].name, (long long)*len);
    }
  }
  return 0;
}

// --- copies

size_t eng_pad_bytes(const eng_tensor *t, int dim, int64_t len) {
  size_t n = dtype_size(t->dt);
  for (int d = 0; d < t->ndims; d++) n *= (size_t)(d == dim ? len : t->dims[d]);
  return n;
}

size_t eng_pad_copy(uint8_t *dst, const eng_tensor *t, int dim, int64_t len, const uint8_t *value) {
  size_t esize = dtype_size(t->dt), outer = 1, inner = esize;
  for (int d = 0; d < dim; d++) outer *= (size_t)t->dims[d];
  for (int d = dim + 1; d < t->ndims; d++) inner *= (size_t)t->dims[d];
  size_t have = (size_t)t->dims[dim] * inner, want = (size_t)len * inner;
  const uint8_t *src = t->data;
  int zero = 1;
  for (size_t b = 0; b < esize; b++) zero &= value[b] == 0;
  for (size_t o = 0; o < outer; o++) {
    uint8_t *row = dst + o * want;
    memcpy(row, src + o * have, have);
    if (zero) {
      memset(row + have, 0, want - have);
    } else {
      for (size_t b = have; b < want; b += esize) memcpy(row + b, value, esize);
    }
  }
  return outer * want;
}

size_t eng_pad_crop(uint8_t *dst, const uint8_t *src, int n, const int64_t *have, const int64_t *want, size_t esize) {
  // the trailing dims kept whole form one contiguous chunk, plus the first
  // cropped dim from the end: copy runs of `chunk` bytes
  int k = n;
  size_t chunk = esize;
  while (k > 0 && want[k - 1] == have[k - 1]) chunk *= (size_t)have[--k];
  if (k == 0) {
    memcpy(dst, src, chunk);
    return chunk;
  }
  size_t stride_k = chunk;  // bytes of one step of dim k-1 in src
  chunk *= (size_t)want[k - 1];
  // strides of the outer dims 0..k-2 in src
  size_t stride[ENG_MAX_DIMS];
  size_t s = stride_k * (size_t)have[k - 1];
  for (int d = k - 2; d >= 0; d--) {
    stride[d] = s;
    s *= (size_t)have[d];
  }
  size_t runs = 1;
  for (int d = 0; d < k - 1; d++) runs *= (size_t)want[d];
  int64_t idx[ENG_MAX_DIMS] = {0};
  size_t written = 0;
  for (size_t r = 0; r < runs; r++) {
    size_t off = 0;
    for (int d = 0; d < k - 1; d++) off += (size_t)idx[d] * stride[d];
    memcpy(dst + written, src + off, chunk);
    written += chunk;
    for (int d = k - 2; d >= 0; d--) {
      if (++idx[d] < want[d]) break;
      idx[d] = 0;
    }
  }
  return written;
}
