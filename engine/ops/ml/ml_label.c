// engine/ops/ml/ml_label.c: the lookups: OneHotEncoder (below) and
// LabelEncoder (ai.onnx.ml opsets 1 to 4): each
// element of X looked up among the keys and replaced by the value at the
// same position, or by the default. Keys and values are strings, integers
// or floats, from their list attributes or (opset 4) their tensor forms.
// Strings travel as the plan's k_str views (kernels/str/k_str.h): an output
// string longer than the inline bytes points at the node's attribute,
// which the graph keeps for as long as any plan of it runs.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ml/ml.h"
#include "engine/ops/ops_common.h"
#include "kernels/str/k_str.h"

typedef enum { LK_STR, LK_INT, LK_FLOAT } lk_kind;

// One side (keys or values) as the attributes give it.
typedef struct lside {
  lk_kind kind;
  dtype dt;  // the tensor's type inside a plan (DT_STRING, an integer type, DT_FP32)
  size_t n;
  char *const *s;
  const int64_t *i;
  const float *f;
  const void *t;  // an integer tensor's data, of type dt
} lside;

static int64_t side_int(const lside *s, size_t k) {
  if (s->i) return s->i[k];
  switch (s->dt) {
    case DT_INT8: return ((const int8_t *)s->t)[k];
    case DT_INT16: return ((const int16_t *)s->t)[k];
    case DT_INT32: return ((const int32_t *)s->t)[k];
    case DT_UINT8: return ((const uint8_t *)s->t)[k];
    case DT_UINT16: return ((const uint16_t *)s->t)[k];
    case DT_UINT32: return ((const uint32_t *)s->t)[k];
    case DT_UINT64: return (int64_t)((const uint64_t *)s->t)[k];
    default: return ((const int64_t *)s->t)[k];
  }
}

static int read_side(const eng_node *n, const char *pfx, lside *s, err *e) {
  memset(s, 0, sizeof *s);
  char nm[40];
  const eng_attr *a;
  snprintf(nm, sizeof nm, "%s_strings", pfx);
  if ((a = eng_node_attr(n, nm)) != NULL) {
    *s = (lside){LK_STR, DT_STRING, a->n_strings, a->strings, NULL, NULL, NULL};
    return 0;
  }
  snprintf(nm, sizeof nm, "%s_int64s", pfx);
  if ((a = eng_node_attr(n, nm)) != NULL) {
    *s = (lside){LK_INT, DT_INT64, a->n_ints, NULL, a->ints, NULL, NULL};
    return 0;
  }
  snprintf(nm, sizeof nm, "%s_floats", pfx);
  if ((a = eng_node_attr(n, nm)) != NULL) {
    *s = (lside){LK_FLOAT, DT_FP32, a->n_floats, NULL, NULL, a->floats, NULL};
    return 0;
  }
  snprintf(nm, sizeof nm, "%s_tensor", pfx);
  if ((a = eng_node_attr(n, nm)) != NULL) {
    if (!a->t) {  // a STRING tensor: its strings (load.c)
      *s = (lside){LK_STR, DT_STRING, a->n_strings, a->strings, NULL, NULL, NULL};
      return 0;
    }
    dtype dt = a->t->dt;
    size_t cnt = (size_t)eng_numel(a->t->ndims, a->t->dims);
    if (dt == DT_FP32) *s = (lside){LK_FLOAT, DT_FP32, cnt, NULL, NULL, a->t->data, NULL};
    else if (dt != DT_BOOL && dt != DT_FP16 && dt != DT_BF16 && dt != DT_FP64 && dtype_size(dt))
      *s = (lside){LK_INT, dt, cnt, NULL, NULL, NULL, a->t->data};
    else return err_set(e, ERR_INVALID_ARGUMENT, "%s of type %s is not supported", nm, dtype_wire_name(dt));
    return 0;
  }
  return err_set(e, ERR_INVALID_ARGUMENT, "no %s_strings, %s_int64s, %s_floats or %s_tensor", pfx, pfx, pfx, pfx);
}

typedef struct lenc {
  lside keys, vals;
  // the default, of the values' kind
  const char *ds;
  int64_t di;
  float df;
} lenc;

static int read_enc(const eng_node *n, lenc *L, err *e) {
  TRY(read_side(n, "keys", &L->keys, e));
  TRY(read_side(n, "values", &L->vals, e));
  if (L->keys.n != L->vals.n)
    return err_set(e, ERR_INVALID_ARGUMENT, "%zu keys and %zu values", L->keys.n, L->vals.n);
  const eng_attr *dt = eng_node_attr(n, "default_tensor");
  L->ds = op_attr_str(n, "default_string", "_Unused");
  L->di = op_attr_int(n, "default_int64", -1);
  L->df = op_attr_float(n, "default_float", -0.0f);
  if (dt) {
    if (!dt->t && dt->n_strings) {
      L->ds = dt->strings[0];
    } else if (dt->t && eng_numel(dt->t->ndims, dt->t->dims) >= 1) {
      lside d = {L->vals.kind, dt->t->dt, 1, NULL, NULL, NULL, dt->t->data};
      if (dt->t->dt == DT_FP32) L->df = *(const float *)dt->t->data;
      else L->di = side_int(&d, 0);
    } else {
      return err_set(e, ERR_INVALID_ARGUMENT, "default_tensor holds no element");
    }
  }
  return 0;
}

int eng_ml__parse_label(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  lenc L;
  TRY(read_enc(n, &L, e));
  p->node = n;
  return 0;
}

static int keys_take(const lside *k, dtype in) {
  if (k->kind == LK_STR) return in == DT_STRING;
  if (k->kind == LK_FLOAT) return in == DT_FP32;
  return in == k->dt || (k->i && (in == DT_INT64 || in == DT_INT32 || in == DT_INT16 || in == DT_INT8));
}

int eng_ml__infer_label(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  lenc L;
  TRY(read_enc(p->node, &L, e));
  if (!keys_take(&L.keys, in[0].dt))
    return err_set(e, ERR_INVALID_ARGUMENT, "X of type %s does not match the keys' type", dtype_wire_name(in[0].dt));
  op_set_out(&out[0], eng_ops_cpu_internal_dtype(L.vals.dt), in[0].ndims, in[0].dims);
  return 0;
}

static int str_eq(const k_str *x, const char *key) {
  size_t n = strlen(key);
  return x->n == n && memcmp(k_str_data(x), key, n) == 0;
}

static double in_num(const eng_tensor *x, size_t i) {
  switch (x->dt) {
    case DT_FP32: return ((const float *)x->data)[i];
    case DT_INT64: return (double)((const int64_t *)x->data)[i];
    case DT_INT32: return ((const int32_t *)x->data)[i];
    case DT_INT16: return ((const int16_t *)x->data)[i];
    case DT_INT8: return ((const int8_t *)x->data)[i];
    case DT_UINT8: return ((const uint8_t *)x->data)[i];
    case DT_UINT16: return ((const uint16_t *)x->data)[i];
    case DT_UINT32: return ((const uint32_t *)x->data)[i];
    default: return (double)((const uint64_t *)x->data)[i];
  }
}

static int64_t in_int(const eng_tensor *x, size_t i) {
  return x->dt == DT_INT64 ? ((const int64_t *)x->data)[i] : (int64_t)in_num(x, i);
}

static void put_str(k_str *y, const char *s) {
  size_t n = strlen(s);
  memset(y, 0, sizeof *y);
  y->n = n;
  if (n <= K_STR_INLINE) memcpy(y->u.in, s, n);
  else y->u.ptr = (const uint8_t *)s;
}

static void put_int(const eng_tensor *y, size_t i, int64_t v) {
  switch (y->dt) {
    case DT_INT8: ((int8_t *)y->data)[i] = (int8_t)v; break;
    case DT_INT16: ((int16_t *)y->data)[i] = (int16_t)v; break;
    case DT_INT32: ((int32_t *)y->data)[i] = (int32_t)v; break;
    case DT_UINT8: ((uint8_t *)y->data)[i] = (uint8_t)v; break;
    case DT_UINT16: ((uint16_t *)y->data)[i] = (uint16_t)v; break;
    case DT_UINT32: ((uint32_t *)y->data)[i] = (uint32_t)v; break;
    case DT_UINT64: ((uint64_t *)y->data)[i] = (uint64_t)v; break;
    default: ((int64_t *)y->data)[i] = v; break;
  }
}

int eng_ml__run_label(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  lenc L;
  TRY(read_enc(p->node, &L, e));
  size_t n = op_numel(&in[0]);
  for (size_t i = 0; i < n; i++) {
    long hit = -1;
    for (size_t k = 0; k < L.keys.n && hit < 0; k++) {
      int eq;
      if (L.keys.kind == LK_STR) {
        eq = str_eq(&((const k_str *)in[0].data)[i], L.keys.s[k]);
      } else if (L.keys.kind == LK_FLOAT) {
        float x = ((const float *)in[0].data)[i], kf = L.keys.f[k];
        eq = x == kf || (isnan(x) && isnan(kf));  // NaN finds a NaN key (opset 4)
      } else {
        eq = in_int(&in[0], i) == side_int(&L.keys, k);
      }
      if (eq) hit = (long)k;
    }
    switch (L.vals.kind) {
      case LK_STR: put_str(&((k_str *)out[0].data)[i], hit >= 0 ? L.vals.s[hit] : L.ds); break;
      case LK_FLOAT: ((float *)out[0].data)[i] = hit >= 0 ? L.vals.f[hit] : L.df; break;
      case LK_INT: put_int(&out[0], i, hit >= 0 ? side_int(&L.vals, (size_t)hit) : L.di); break;
    }
  }
  (void)e;
  return 0;
}


// --- OneHotEncoder: X's shape + [categories], 1.0 where the element is the
// category (cats_int64s: numbers compared as integers; cats_strings);
// an element in no category is all zeros, or an error with zeros=0.

int eng_ml__parse_onehot(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_attr *ci = eng_node_attr(n, "cats_int64s"), *cs = eng_node_attr(n, "cats_strings");
  size_t k = ci ? ci->n_ints : cs ? cs->n_strings : 0;
  if (!k) return err_set(e, ERR_INVALID_ARGUMENT, "cats_int64s or cats_strings must list the categories");
  p->node = n;
  p->n_ints = (int)k;
  p->has_ints = cs != NULL && !ci;  // string categories
  p->keepdims = (int)op_attr_int(n, "zeros", 1);
  return 0;
}

int eng_ml__infer_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int str = in[0].dt == DT_STRING;
  if (str != p->has_ints)
    return err_set(e, ERR_INVALID_ARGUMENT, "X of type %s with %s categories", dtype_wire_name(in[0].dt),
                   p->has_ints ? "string" : "integer");
  if (!str && (in[0].dt == DT_BOOL || !dtype_size(in[0].dt) || in[0].dt == DT_FP16 || in[0].dt == DT_BF16))
    return err_set(e, ERR_INVALID_ARGUMENT, "X of type %s is not supported", dtype_wire_name(in[0].dt));
  if (in[0].ndims + 1 > ENG_MAX_DIMS) return err_set(e, ERR_INVALID_ARGUMENT, "X has rank %d", in[0].ndims);
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  out[0].ndims = in[0].ndims + 1;
  out[0].dims[in[0].ndims] = p->n_ints;
  return 0;
}

int eng_ml__run_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const eng_attr *ci = eng_node_attr(p->node, "cats_int64s"), *cs = eng_node_attr(p->node, "cats_strings");
  size_t n = op_numel(&in[0]), k = (size_t)p->n_ints;
  float *y = out[0].data;
  memset(y, 0, n * k * sizeof *y);
  for (size_t i = 0; i < n; i++) {
    long hit = -1;
    if (p->has_ints) {
      const k_str *x = &((const k_str *)in[0].data)[i];
      for (size_t c = 0; c < k && hit < 0; c++)
        if (str_eq(x, cs->strings[c])) hit = (long)c;
    } else {
      int64_t v = in[0].dt == DT_FP32 ? (int64_t)((const float *)in[0].data)[i] : in_int(&in[0], i);
      for (size_t c = 0; c < k && hit < 0; c++)
        if (ci->ints[c] == v) hit = (long)c;
    }
    if (hit >= 0) y[i * k + (size_t)hit] = 1.0f;
    else if (!p->keepdims)
      return err_set(e, ERR_INVALID_ARGUMENT, "element %zu is in no category (zeros is 0)", i);
  }
  return 0;
}
