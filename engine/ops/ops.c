// engine/ops/ops.c: what the op families share on the CPU, and the one
// registry both backends read. The families live in engine/ops/<family>/
// (attributes, shape rule and CPU path in <family>.c, the CUDA path in
// <family>_cuda.c); engine/ops/families.h lists them once. Here: the
// attribute, axis and shape helpers of ops_common.h, the family walk
// (eng_ops__family_find) that eng_ops_cpu_find and the CUDA plan's lookup
// (engine/cuda/plan_cuda_util.c) both use, Constant (folded at load, no
// run) and constant folding's run (eng_ops_cpu_fold).
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

// --- the registry

const void *eng_ops__family_find(const eng_ops_family *fams, size_t n_fams, const char *op_type) {
  for (size_t f = 0; f < n_fams; f++) {
    const char *entry = fams[f].ops;
    for (size_t i = 0; i < *fams[f].n; i++, entry += fams[f].stride)
      if (strcmp(*(const char *const *)entry, op_type) == 0) return entry;
  }
  return NULL;
}

// eng_ops__family_find reads each entry's name as its first member.
_Static_assert(offsetof(eng_op_def, op_type) == 0, "eng_op_def must start with op_type");

// Constant is folded at load (graph_pass.c) and never runs: listed so that a
// model naming it loads, in no family since no backend runs it.
static const eng_op_def load_ops[] = {
    {"Constant", 0, 0, 1, 1, 0, NULL, NULL, NULL, 0, NULL, NULL},
};
static const size_t n_load_ops = sizeof load_ops / sizeof load_ops[0];

#define CPU_FAMILY(f) ENG_OPS_FAMILY(f, eng_ops__##f, eng_ops__n_##f),
static const eng_ops_family cpu_families[] = {ENG_OPS_FAMILIES(CPU_FAMILY) ENG_OPS_FAMILY(load, load_ops, n_load_ops)};
#undef CPU_FAMILY

const eng_op_def *eng_ops_cpu_find(const char *op_type) {
  return eng_ops__family_find(cpu_families, sizeof cpu_families / sizeof cpu_families[0], op_type);
}

int eng_ops_cpu_fold(const eng_op_def *d, const eng_op_params *p, const eng_tensor *in, int n_in,
                     eng_tensor *out, int n_out, eng_fold_buf_fn buf, void *ctx, err *e) {
  for (int k = 0; k < n_out; k++) {
    if (out[k].dt == DT_INVALID) continue;
    out[k].bytes = eng_tensor_bytes(&out[k]);
    out[k].data = buf(ctx, k, out[k].bytes);
    if (!out[k].data)
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory folding (%zu bytes for output %d)",
                     out[k].bytes, k);
  }
  return d->run(p, in, n_in, out, n_out, e);
}

// Internal ops (inferd.*) are made by the load-time passes only: a model
// that names one is refused like any unknown op.
int eng_ops_supported(const char *op_type) {
  return strncmp(op_type, "inferd.", 7) != 0 && eng_ops_cpu_find(op_type) != NULL;
}
