// engine/ops/ops_common.c: what the op families share on the CPU: the
// attribute, axis and shape helpers declared in ops_common.h. The families
// call these and nothing calls back, so they depend on this file and it on
// none of them; the registry that lists the families is registry.c.
#include "engine/ops/ops.h"

#include <stddef.h>
#include <string.h>

#include "engine/ops/families.h"
#include "engine/ops/ops_common.h"
#include "engine/ops/ops_table.h"

// --- helpers (declared in ops_common.h)

int eng_ops__norm_axis(int64_t axis, int rank, int64_t *out, err *e) {
  if (axis < -rank || axis >= rank)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld out of range for rank %d", (long long)axis,
                   rank);
  *out = axis < 0 ? axis + rank : axis;
  return 0;
}

int eng_ops__need_f32(const eng_tensor *t, const char *what, err *e) {
  if (t->dt != DT_FP32)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s must be a float tensor, got %s", what,
                   dtype_wire_name(t->dt));
  return 0;
}

int eng_ops__need_elem(const eng_tensor *t, const char *what, err *e) {
  if (eng_elem_size(t->dt) == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s has unsupported element type %s", what,
                   dtype_wire_name(t->dt));
  return 0;
}

int eng_ops__checked_numel(int nd, const int64_t *dims, const char *what, err *e) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) {
    if (dims[i] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim %lld", what, (long long)dims[i]);
    if (dims[i] && n > ENG_MAX_NUMEL / dims[i])
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: more than %lld elements", what,
                     (long long)ENG_MAX_NUMEL);
    n *= dims[i];
  }
  return 0;
}

int eng_ops__attr_ints(const eng_node *n, const char *name, int64_t *out, int max, int *cnt,
                       err *e) {
  const eng_attr *a = eng_node_attr(n, name);
  *cnt = -1;
  if (!a) return 0;
  if (a->n_ints > (size_t)max)
    return err_set(e, ERR_INVALID_ARGUMENT, "attribute '%s' has %zu values, at most %d", name,
                   a->n_ints, max);
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  *cnt = (int)a->n_ints;
  return 0;
}

int eng_ops__enum(const char *s, const char *const *names, const char *attr, int *out, err *e) {
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = i;
      return 0;
    }
  return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %s '%s'", attr, s);
}

static int read_known(const eng_tensor *t, const char *what, int max, int *cnt, err *e) {
  if (!t->data && op_numel(t))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s is not known when planning (it depends on the input data)", what);
  if (t->ndims > 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s must be 1-D, got rank %d", what, t->ndims);
  size_t n = op_numel(t);
  if (n > (size_t)max)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s has %zu values, at most %d supported", what, n,
                   max);
  *cnt = (int)n;
  return 0;
}

int eng_ops__read_ints(const eng_tensor *t, const char *what, int64_t *out, int max, int *cnt,
                       err *e) {
  if (t->dt != DT_INT64 && t->dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s must be int64, got %s", what,
                   dtype_wire_name(t->dt));
  TRY(read_known(t, what, max, cnt, e));
  for (int i = 0; i < *cnt; i++)
    out[i] = t->dt == DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
  return 0;
}

int eng_ops__read_floats(const eng_tensor *t, const char *what, float *out, int max, int *cnt,
                         err *e) {
  TRY(eng_ops__need_f32(t, what, e));
  TRY(read_known(t, what, max, cnt, e));
  if (*cnt) memcpy(out, t->data, (size_t)*cnt * sizeof *out);
  return 0;
}

double eng_ops__scalar(const eng_tensor *t) {
  switch (t->dt) {
    case DT_FP32: return ((const float *)t->data)[0];
    case DT_INT64: return (double)((const int64_t *)t->data)[0];
    case DT_INT32: return ((const int32_t *)t->data)[0];
    default: return 0;
  }
}

dtype eng_ops_cpu_internal_dtype(dtype t) {
  return t == DT_FP16 || t == DT_FP64 || t == DT_BF16 ? DT_FP32 : t;
}

// Unary float ops (the activations, Softmax): one FP32 output of the input's shape.
int eng_ops__infer_same_f32(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                            int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(eng_ops__need_f32(&in[0], "input", e));
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

int eng_ops__bcast(const eng_tensor *a, const eng_tensor *b, int *nd, int64_t *y, int64_t *ad,
                   int64_t *bd, err *e) {
  int r = a->ndims > b->ndims ? a->ndims : b->ndims;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->ndims), ib = i - (r - b->ndims);
    ad[i] = ia >= 0 ? a->dims[ia] : 1;
    bd[i] = ib >= 0 ? b->dims[ib] : 1;
    if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
      return err_set(e, ERR_INVALID_ARGUMENT, "shapes do not broadcast at dim %d: %lld vs %lld",
                     i, (long long)ad[i], (long long)bd[i]);
    y[i] = ad[i] == 1 ? bd[i] : ad[i];
  }
  *nd = r;
  return 0;
}

// The kernels' element type of a tensor dtype (ops.h); here, below every family's files.
int eng_ops_elem_of(dtype t, k_elem *k) {
  switch (t) {
    case DT_FP32: *k = K_F32; return 0;
    case DT_FP64: *k = K_F64; return 0;
    case DT_FP16: *k = K_F16; return 0;
    case DT_INT64: *k = K_I64; return 0;
    case DT_INT32: *k = K_I32; return 0;
    case DT_INT16: *k = K_I16; return 0;
    case DT_INT8: *k = K_I8; return 0;
    case DT_UINT8: *k = K_U8; return 0;
    case DT_UINT16: *k = K_U16; return 0;
    case DT_UINT32: *k = K_U32; return 0;
    case DT_UINT64: *k = K_U64; return 0;
    case DT_BOOL: *k = K_BOOL; return 0;
    default: return -1;
  }
}
