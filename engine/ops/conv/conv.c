// engine/ops/conv/conv.c: Conv, ConvTranspose and the pools (see engine/ops/conv/conv.h).
// One parser, one geometry function and one runner serve the whole family;
// the ops differ only in the window rule and the oneDNN primitive kind.
// Shape arithmetic is checked for overflow: a hostile model's huge dims or
// attributes fail the load with a message instead of wrapping around.
#include "engine/ops/conv/conv.h"
#include "engine/ops/ops_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/conv_dnnl.h"
#include "engine/ops/ops.h"

// Attribute values beyond this are refused outright: no real kernel, stride
// or pad is near it, and it keeps every product of two of them in int64.
#define ATTR_MAX ((int64_t)1 << 31)
// Tensor dims beyond this are refused (2^40 floats along one axis is far
// past any memory), so sums and products below stay checked but rare.
#define DIM_MAX ((int64_t)1 << 40)

struct eng_op_ctx {
  eng_dnnl_ctx *dnnl;
};

void eng_op_ctx_destroy(eng_op_ctx *c) {
  if (!c) return;
  eng_dnnl_ctx_destroy(c->dnnl);
  free(c);
}

// --- checked arithmetic: an overflow sets *ovf and the caller reports it

static int64_t ck_add(int64_t a, int64_t b, int *ovf) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) *ovf = 1;
  return r;
}

static int64_t ck_mul(int64_t a, int64_t b, int *ovf) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) *ovf = 1;
  return r;
}

// --- parse

// Reads an ints attribute of exactly `want` values in [lo, ATTR_MAX) into
// dst; absent leaves dst as it is.
static int ints_attr(const eng_node *n, const char *name, int want, int64_t lo, int64_t *dst,
                     int *present, err *e) {
  const eng_attr *a = eng_node_attr(n, name);
  if (present) *present = a != NULL;
  if (!a) return 0;
  if ((int64_t)a->n_ints != want)
    return err_set(e, ERR_INVALID_ARGUMENT, "attribute '%s' has %zu values, expected %d", name,
                   a->n_ints, want);
  for (int i = 0; i < want; i++) {
    if (a->ints[i] < lo || a->ints[i] >= ATTR_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT, "attribute '%s'[%d] = %lld is out of range [%lld, %lld)",
                     name, i, (long long)a->ints[i], (long long)lo, (long long)ATTR_MAX);
    dst[i] = a->ints[i];
  }
  return 0;
}

static int parse_auto_pad(const eng_node *n, eng_auto_pad *out, err *e) {
  const eng_attr *a = eng_node_attr(n, "auto_pad");
  const char *s = a && a->s ? a->s : "NOTSET";
  if (strcmp(s, "NOTSET") == 0 || *s == '\0') *out = ENG_PAD_NOTSET;
  else if (strcmp(s, "SAME_UPPER") == 0) *out = ENG_PAD_SAME_UPPER;
  else if (strcmp(s, "SAME_LOWER") == 0) *out = ENG_PAD_SAME_LOWER;
  else if (strcmp(s, "VALID") == 0) *out = ENG_PAD_VALID;
  else return err_set(e, ERR_INVALID_ARGUMENT, "unknown auto_pad '%s'", s);
  return 0;
}

// The window's attributes after the kernel: strides, dilations, pads,
// auto_pad, ConvTranspose's output_padding and output_shape, the pools'.
static int parse_window(const eng_node *n, eng_conv_attrs *a, err *e) {
  for (int i = 0; i < a->nsp; i++) a->strides[i] = a->dils[i] = 1;
  TRY(ints_attr(n, "strides", a->nsp, 1, a->strides, NULL, e));
  TRY(ints_attr(n, "dilations", a->nsp, 1, a->dils, NULL, e));
  int has_pads = 0;
  TRY(ints_attr(n, "pads", 2 * a->nsp, 0, a->pads, &has_pads, e));
  TRY(parse_auto_pad(n, &a->auto_pad, e));
  if (has_pads && a->auto_pad != ENG_PAD_NOTSET) {
    for (int i = 0; i < 2 * a->nsp; i++)
      if (a->pads[i] != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "pads cannot be used together with auto_pad");
  }
  if (a->kind == ENG_CONV_TRANSPOSE) {
    TRY(ints_attr(n, "output_padding", a->nsp, 0, a->out_pad, NULL, e));
    const eng_attr *os = eng_node_attr(n, "output_shape");
    if (os) {
      // Exporters write either the spatial dims or the whole shape.
      int skip = os->n_ints == (size_t)a->nsp + 2 ? 2 : 0;
      if (os->n_ints != (size_t)a->nsp && !skip)
        return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'output_shape' has %zu values, expected %d",
                       os->n_ints, a->nsp);
      for (int i = 0; i < a->nsp; i++) {
        int64_t v = os->ints[skip + i];
        if (v < 1 || v >= ATTR_MAX)
          return err_set(e, ERR_INVALID_ARGUMENT, "output_shape[%d] = %lld is out of range", i,
                         (long long)v);
        a->out_shape[i] = v;
      }
      a->has_out_shape = 1;
    }
  }
  if (a->kind == ENG_POOL_MAX || a->kind == ENG_POOL_AVG) {
    const eng_attr *cm = eng_node_attr(n, "ceil_mode");
    a->ceil_mode = cm && cm->i != 0;
  }
  if (a->kind == ENG_POOL_AVG) {
    const eng_attr *cip = eng_node_attr(n, "count_include_pad");
    a->count_include_pad = cip && cip->i != 0;
  }
  if (a->kind == ENG_POOL_MAX) {
    if (n->n_out > 1 && n->out[1] >= 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: MaxPool's Indices output");
    const eng_attr *so = eng_node_attr(n, "storage_order");
    if (so && so->i != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: storage_order %lld", (long long)so->i);
  }
  return 0;
}

// Conv/ConvTranspose whose W is a graph input or computed (ONNX's node
// tests give W as an input; causal convolutions compute it): the spatial
// rank from kernel_shape or W's declared rank, the kernel from W's shape in
// each run (eng_conv_window), and the reference kernel, since oneDNN's
// cached weights reorder (eng_conv_run) would go stale; nothing fused into
// it and plain layouts around it.
static int parse_runtime_w(const eng_node *n, const eng_value *w, eng_op_params *p, err *e) {
  eng_conv_attrs *a = &p->conv;
  a->w_runtime = 1;
  p->fusable = 0;
  p->layouts = 0;
  const eng_attr *ks = eng_node_attr(n, "kernel_shape");
  if (ks) a->nsp = (int)ks->n_ints;
  else if (w->kind == ENG_VALUE_INPUT && w->ndims >= 3) a->nsp = w->ndims - 2;
  else
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "unsupported: W '%s' is computed at run time and no kernel_shape gives the spatial rank", w->name);
  if (a->nsp < 1 || a->nsp > K_CONV_MAX_SP)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %d spatial dims (1 to %d)", a->nsp, K_CONV_MAX_SP);
  if (ks) TRY(ints_attr(n, "kernel_shape", a->nsp, 1, a->kernel, &a->has_kernel, e));
  const eng_attr *gr = eng_node_attr(n, "group");
  a->group = gr ? gr->i : 1;
  if (a->group < 1 || a->group >= ATTR_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "group %lld must be >= 1", (long long)a->group);
  return parse_window(n, a, e);
}

int eng_conv_parse(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)opset;
  eng_conv_attrs *a = &p->conv;
  memset(a, 0, sizeof *a);
  const char *op = n->op_type;
  int wi = 1;  // W's input: QLinearConv's comes after x, x_scale and x_zero_point
  if (strcmp(op, "Conv") == 0 || strcmp(op, "ConvInteger") == 0) a->kind = ENG_CONV;
  else if (strcmp(op, "QLinearConv") == 0) a->kind = ENG_CONV, wi = 3;
  else if (strcmp(op, "ConvTranspose") == 0) a->kind = ENG_CONV_TRANSPOSE;
  else if (strcmp(op, "MaxPool") == 0) a->kind = ENG_POOL_MAX;
  else if (strcmp(op, "AveragePool") == 0) a->kind = ENG_POOL_AVG;
  else if (strcmp(op, "GlobalAveragePool") == 0) a->kind = ENG_POOL_GLOBAL_AVG;
  else if (strcmp(op, "GlobalMaxPool") == 0) a->kind = ENG_POOL_GLOBAL_MAX;
  else return err_set(e, ERR_INTERNAL, "op '%s' is not of the conv family", op);
  p->layouts = 1;  // oneDNN reads and writes any activation layout
  if (a->kind == ENG_POOL_GLOBAL_AVG || a->kind == ENG_POOL_GLOBAL_MAX) return 0;

  int conv = a->kind == ENG_CONV || a->kind == ENG_CONV_TRANSPOSE;
  p->fusable = conv;  // oneDNN post-ops: sum, then ReLU
  if (conv) {
    // The weights decide the spatial rank and are reordered once into
    // oneDNN's layout when they are known at load.
    if (n->n_in <= wi || n->in[wi] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "the W input is required");
    const eng_value *w = eng_graph_value(g, (size_t)n->in[wi]);
    if (w->kind != ENG_VALUE_CONST) return parse_runtime_w(n, w, p, e);
    if (w->ndims < 3 || w->ndims > 2 + K_CONV_MAX_SP)
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: W has rank %d (1 to %d spatial dims)",
                     w->ndims, K_CONV_MAX_SP);
    a->nsp = w->ndims - 2;
    const eng_attr *ks = eng_node_attr(n, "kernel_shape");
    if (ks) {
      TRY(ints_attr(n, "kernel_shape", a->nsp, 1, a->kernel, &a->has_kernel, e));
      for (int i = 0; i < a->nsp; i++)
        if (a->kernel[i] != w->dims[2 + i])
          return err_set(e, ERR_INVALID_ARGUMENT,
                         "kernel_shape[%d] = %lld but W's spatial dim is %lld", i,
                         (long long)a->kernel[i], (long long)w->dims[2 + i]);
    }
    for (int i = 0; i < a->nsp; i++) {
      if (w->dims[2 + i] < 1 || w->dims[2 + i] >= ATTR_MAX)
        return err_set(e, ERR_INVALID_ARGUMENT, "W's spatial dim %d is %lld", i,
                       (long long)w->dims[2 + i]);
      a->kernel[i] = w->dims[2 + i];
    }
    a->has_kernel = 1;
    const eng_attr *gr = eng_node_attr(n, "group");
    a->group = gr ? gr->i : 1;
    if (a->group < 1 || a->group >= ATTR_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT, "group %lld must be >= 1", (long long)a->group);
  } else {
    const eng_attr *ks = eng_node_attr(n, "kernel_shape");
    if (!ks) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'kernel_shape' is required");
    if (ks->n_ints < 1 || ks->n_ints > K_CONV_MAX_SP)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "unsupported: kernel_shape has %zu values (1 to %d spatial dims)", ks->n_ints,
                     K_CONV_MAX_SP);
    a->nsp = (int)ks->n_ints;
    TRY(ints_attr(n, "kernel_shape", a->nsp, 1, a->kernel, &a->has_kernel, e));
  }
  return parse_window(n, a, e);
}

// --- geometry

// One spatial dim of a forward window op (Conv, pools): y and the pads.
static int fwd_dim(const eng_conv_attrs *a, int i, int64_t x, int64_t *y, int64_t *pl,
                   int64_t *pr, err *e) {
  int64_t k = a->kernel[i], s = a->strides[i], span = (k - 1) * a->dils[i] + 1;
  if (a->auto_pad == ENG_PAD_SAME_UPPER || a->auto_pad == ENG_PAD_SAME_LOWER) {
    *y = (x + s - 1) / s;
    int64_t total = (*y - 1) * s + span - x;
    if (total < 0) total = 0;
    *pl = a->auto_pad == ENG_PAD_SAME_UPPER ? total / 2 : total - total / 2;
    *pr = total - *pl;
    return 0;
  }
  *pl = a->auto_pad == ENG_PAD_VALID ? 0 : a->pads[i];
  *pr = a->auto_pad == ENG_PAD_VALID ? 0 : a->pads[a->nsp + i];
  int64_t room = x + *pl + *pr - span;
  if (room < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "spatial dim %d: the kernel spans %lld but the padded input has %lld", i,
                   (long long)span, (long long)(x + *pl + *pr));
  *y = room / s + 1;
  if (a->ceil_mode && room % s != 0) {
    (*y)++;
    // onnxruntime's (and PyTorch's) rule: a window may not start in the
    // right padding
    if ((*y - 1) * s >= x + *pl) (*y)--;
  }
  return 0;
}

// One spatial dim of ConvTranspose, by the ONNX spec: output_shape or
// SAME_* fix y and split the total padding (the odd unit goes to the end
// for SAME_UPPER, to the beginning otherwise).
static int tr_dim(const eng_conv_attrs *a, int i, int64_t x, int64_t *y, int64_t *pl, int64_t *pr,
                  err *e) {
  int64_t s = a->strides[i], span = (a->kernel[i] - 1) * a->dils[i] + 1;
  int64_t full = s * (x - 1) + a->out_pad[i] + span;  // x, s < 2^40, 2^31: no overflow
  if (a->has_out_shape || a->auto_pad == ENG_PAD_SAME_UPPER || a->auto_pad == ENG_PAD_SAME_LOWER) {
    *y = a->has_out_shape ? a->out_shape[i] : x * s;
    int64_t total = full - *y;
    if (total < 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "unsupported: spatial dim %d: output size %lld exceeds the %lld the input covers",
                     i, (long long)*y, (long long)full);
    *pl = a->auto_pad == ENG_PAD_SAME_UPPER ? total / 2 : total - total / 2;
    *pr = total - *pl;
    return 0;
  }
  *pl = a->auto_pad == ENG_PAD_VALID ? 0 : a->pads[i];
  *pr = a->auto_pad == ENG_PAD_VALID ? 0 : a->pads[a->nsp + i];
  *y = full - *pl - *pr;
  if (*y < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "spatial dim %d: output size %lld after padding", i,
                   (long long)*y);
  return 0;
}

int eng_conv_window(const eng_conv_attrs *a, const eng_tensor *x, const eng_tensor *w,
                    k_window *g, err *e) {
  memset(g, 0, sizeof *g);
  eng_conv_attrs wa;
  if (a->w_runtime) {  // this run's W gives the kernel
    if (!w || w->ndims != a->nsp + 2)
      return err_set(e, ERR_INVALID_ARGUMENT, "W has rank %d, expected %d", w ? w->ndims : 0, a->nsp + 2);
    wa = *a;
    for (int i = 0; i < a->nsp; i++) {
      int64_t k = w->dims[2 + i];
      if (k < 1 || k >= ATTR_MAX)
        return err_set(e, ERR_INVALID_ARGUMENT, "W's spatial dim %d is %lld", i, (long long)k);
      if (a->has_kernel && a->kernel[i] != k)
        return err_set(e, ERR_INVALID_ARGUMENT, "kernel_shape[%d] = %lld but W's spatial dim is %lld", i,
                       (long long)a->kernel[i], (long long)k);
      wa.kernel[i] = k;
    }
    a = &wa;
  }
  int global = a->kind == ENG_POOL_GLOBAL_AVG || a->kind == ENG_POOL_GLOBAL_MAX;
  int nsp = global ? x->ndims - 2 : a->nsp;
  if (nsp < 1 || nsp > K_CONV_MAX_SP || x->ndims != nsp + 2)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   global ? "X has rank %d, expected 3 to %d (N, C, 1 to 3 spatial dims)"
                          : "X has rank %d, expected %d (N, C and the kernel's spatial dims)",
                   x->ndims, global ? 2 + K_CONV_MAX_SP : nsp + 2);
  for (int i = 0; i < x->ndims; i++)
    if (x->dims[i] < 0 || x->dims[i] > DIM_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT, "X's dim %d is %lld", i, (long long)x->dims[i]);
  for (int i = 1; i < x->ndims; i++)
    if (x->dims[i] == 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: X's dim %d is 0", i);
  g->nsp = nsp;
  g->n = x->dims[0];
  g->c = x->dims[1];
  g->m = g->c;
  g->group = 1;
  if (a->kind == ENG_CONV || a->kind == ENG_CONV_TRANSPOSE) {
    int64_t gr = a->group;
    if (w->ndims != nsp + 2)
      return err_set(e, ERR_INVALID_ARGUMENT, "W has rank %d, expected %d", w->ndims, nsp + 2);
    if (g->c % gr != 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "X has %lld channels, not a multiple of group %lld",
                     (long long)g->c, (long long)gr);
    if (a->kind == ENG_CONV) {
      if (w->dims[1] * gr != g->c || w->dims[0] < 1 || w->dims[0] % gr != 0)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "W [%lld, %lld, ...] does not fit X's %lld channels in %lld groups",
                       (long long)w->dims[0], (long long)w->dims[1], (long long)g->c,
                       (long long)gr);
      g->m = w->dims[0];
    } else {
      if (w->dims[0] != g->c || w->dims[1] < 1 || w->dims[1] > DIM_MAX)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "W [%lld, %lld, ...] does not fit X's %lld channels", (long long)w->dims[0],
                       (long long)w->dims[1], (long long)g->c);
      g->m = w->dims[1] * gr;
    }
    g->group = gr;
  }
  for (int i = 0; i < nsp; i++) {
    int64_t xi = x->dims[2 + i];
    g->x[i] = xi;
    if (global) {
      g->k[i] = xi;
      g->stride[i] = g->dil[i] = g->y[i] = 1;
      continue;
    }
    g->k[i] = a->kernel[i];
    g->stride[i] = a->strides[i];
    g->dil[i] = a->dils[i];
    if (a->kind == ENG_CONV_TRANSPOSE) TRY(tr_dim(a, i, xi, &g->y[i], &g->pad_l[i], &g->pad_r[i], e));
    else TRY(fwd_dim(a, i, xi, &g->y[i], &g->pad_l[i], &g->pad_r[i], e));
    if (g->y[i] > DIM_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT, "spatial dim %d: output size %lld is too large", i,
                     (long long)g->y[i]);
  }
  // Both tensors' element counts (and so byte sizes) must fit.
  int ovf = 0;
  int64_t ny = ck_mul(g->n, g->m, &ovf), nx = ck_mul(g->n, g->c, &ovf);
  for (int i = 0; i < nsp; i++) {
    ny = ck_mul(ny, g->y[i], &ovf);
    nx = ck_mul(nx, g->x[i], &ovf);
  }
  ck_mul(ck_add(ny, nx, &ovf), 8, &ovf);
  if (ovf) return err_set(e, ERR_INVALID_ARGUMENT, "the output's size overflows");
  return 0;
}

// --- infer

int eng_conv_infer(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e) {
  (void)n_out;
  const eng_conv_attrs *a = &p->conv;
  if (in[0].dt != DT_FP32)
    return err_set(e, ERR_INVALID_ARGUMENT, "X must be a float tensor, got %s",
                   dtype_wire_name(in[0].dt));
  int conv = a->kind == ENG_CONV || a->kind == ENG_CONV_TRANSPOSE;
  if (conv && in[1].dt != DT_FP32)
    return err_set(e, ERR_INVALID_ARGUMENT, "W must be a float tensor, got %s",
                   dtype_wire_name(in[1].dt));
  k_window g;
  TRY(eng_conv_window(a, &in[0], conv ? &in[1] : NULL, &g, e));
  if (conv && n_in > 2 && in[2].dt != DT_INVALID) {
    if (in[2].dt != DT_FP32 || in[2].ndims != 1 || in[2].dims[0] != g.m)
      return err_set(e, ERR_INVALID_ARGUMENT, "B must be a float vector of %lld (output channels)",
                     (long long)g.m);
  }
  out[0].dt = DT_FP32;
  out[0].ndims = g.nsp + 2;
  out[0].dims[0] = g.n;
  out[0].dims[1] = g.m;
  for (int i = 0; i < g.nsp; i++) out[0].dims[2 + i] = g.y[i];
  return 0;
}

// --- run

int eng_conv_dnnl_ctx(eng_op_state *st, eng_dnnl_ctx **out, err *e) {
  if (!*st->ctx) {
    eng_op_ctx *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    int rc = eng_dnnl_ctx_create(&c->dnnl, e);
    if (rc) {
      free(c);
      return rc;
    }
    *st->ctx = c;
  }
  *out = (*st->ctx)->dnnl;
  return 0;
}

static const float *bias_of(const eng_conv_attrs *a, const eng_tensor *in, int n_in) {
  int conv = a->kind == ENG_CONV || a->kind == ENG_CONV_TRANSPOSE;
  return conv && n_in > 2 && in[2].dt != DT_INVALID ? in[2].data : NULL;
}

int eng_conv_run_ref(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_out;
  const eng_conv_attrs *a = &p->conv;
  k_window g;
  TRY(eng_conv_window(a, &in[0], n_in > 1 ? &in[1] : NULL, &g, e));
  if (g.n == 0) return 0;
  float *y = out[0].data;
  const float *x = in[0].data;
  switch (a->kind) {
    case ENG_CONV: k_conv_ref(y, x, in[1].data, bias_of(a, in, n_in), &g); break;
    case ENG_CONV_TRANSPOSE: k_conv_transpose_ref(y, x, in[1].data, bias_of(a, in, n_in), &g); break;
    case ENG_POOL_MAX:
    case ENG_POOL_GLOBAL_MAX: k_pool_ref(y, x, &g, K_POOL_MAX); break;
    case ENG_POOL_AVG:
      k_pool_ref(y, x, &g, a->count_include_pad ? K_POOL_AVG_INCLUDE : K_POOL_AVG_EXCLUDE);
      break;
    case ENG_POOL_GLOBAL_AVG: k_pool_ref(y, x, &g, K_POOL_AVG_EXCLUDE); break;
  }
  return 0;
}

// Taps of window o along one dim that lie before x + pad_r: what
// count_include_pad divides by (oneDNN divides by all k).
static int64_t taps_in(const k_window *g, int i, int64_t o) {
  int64_t start = o * g->stride[i] - g->pad_l[i], lim = g->x[i] + g->pad_r[i];
  if (start >= lim) return 0;
  int64_t t = (lim - start + g->dil[i] - 1) / g->dil[i];
  return t < g->k[i] ? t : g->k[i];
}

// ceil_mode can make the last windows overhang even the declared end pad;
// oneDNN's include-padding average divides those by the whole kernel too,
// so they are rescaled to divide by the taps inside [-pad_l, x + pad_r).
static void fix_avg_overhang(float *y, const k_window *g) {
  int over = 0;
  for (int i = 0; i < g->nsp; i++) over |= taps_in(g, i, g->y[i] - 1) < g->k[i];
  if (!over) return;
  int64_t yd[3] = {1, 1, 1}, kk = 1;
  int off = 3 - g->nsp;
  for (int i = 0; i < g->nsp; i++) {
    yd[off + i] = g->y[i];
    kk *= g->k[i];
  }
  int64_t ysz = yd[0] * yd[1] * yd[2];
  for (int64_t o0 = 0; o0 < yd[0]; o0++)
    for (int64_t o1 = 0; o1 < yd[1]; o1++)
      for (int64_t o2 = 0; o2 < yd[2]; o2++) {
        int64_t o[3] = {o0, o1, o2}, cnt = 1;
        for (int i = 0; i < g->nsp; i++) cnt *= taps_in(g, i, o[off + i]);
        if (cnt == kk || cnt == 0) continue;
        float scale = (float)kk / (float)cnt;
        int64_t at = (o0 * yd[1] + o1) * yd[2] + o2;
        for (int64_t nc = 0; nc < g->n * g->c; nc++) y[nc * ysz + at] *= scale;
      }
}

int eng_conv_run(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in,
                 eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  const eng_conv_attrs *a = &p->conv;
  if (a->w_runtime) return eng_conv_run_ref(p, in, n_in, out, n_out, e);  // no weights to cache
  k_window g;
  TRY(eng_conv_window(a, &in[0], n_in > 1 ? &in[1] : NULL, &g, e));
  if (g.n == 0) return 0;
  eng_dnnl_ctx *dnnl = NULL;  // set by eng_conv_dnnl_ctx on success; GCC -O3 cannot see that
  TRY(eng_conv_dnnl_ctx(st, &dnnl, e));
  // oneDNN wants the end pad that makes y exact: ceil_mode windows may
  // reach past the declared pad (and ConvTranspose's output_padding is
  // extra output on the end, i.e. less end padding).
  k_window dg = g;
  eng_dnnl_kind kind = ENG_DNNL_CONV;
  for (int i = 0; i < g.nsp; i++) {
    int64_t span = (g.k[i] - 1) * g.dil[i] + 1;
    if (a->kind == ENG_CONV_TRANSPOSE)
      dg.pad_r[i] = (g.x[i] - 1) * g.stride[i] + span - g.pad_l[i] - g.y[i];
    else if (a->kind != ENG_POOL_GLOBAL_AVG && a->kind != ENG_POOL_GLOBAL_MAX) {
      int64_t need = (g.y[i] - 1) * g.stride[i] + span - g.x[i] - g.pad_l[i];
      if (need > dg.pad_r[i]) dg.pad_r[i] = need;
    }
  }
  switch (a->kind) {
    case ENG_CONV: kind = ENG_DNNL_CONV; break;
    case ENG_CONV_TRANSPOSE: kind = ENG_DNNL_DECONV; break;
    case ENG_POOL_MAX:
    case ENG_POOL_GLOBAL_MAX: kind = ENG_DNNL_POOL_MAX; break;
    case ENG_POOL_AVG:
      kind = a->count_include_pad ? ENG_DNNL_POOL_AVG_INCLUDE : ENG_DNNL_POOL_AVG_EXCLUDE;
      break;
    case ENG_POOL_GLOBAL_AVG: kind = ENG_DNNL_POOL_AVG_EXCLUDE; break;
  }
  int conv = a->kind == ENG_CONV || a->kind == ENG_CONV_TRANSPOSE;
  eng_dnnl_post post = {st->post_act, st->act_alpha, st->act_beta, NULL};
  if (st->post_add) {
    const eng_tensor *t = st->post_add;
    int same = conv && t->dt == DT_FP32 && t->ndims == out[0].ndims && t->data != out[0].data;
    for (int i = 0; same && i < t->ndims; i++) same = t->dims[i] == out[0].dims[i];
    if (!same) return err_set(e, ERR_INTERNAL, "the fused addend does not match Y");
    post.add = t->data;
  }
  if ((post.act != ENG_DNNL_ACT_NONE || post.add) && !conv) return err_set(e, ERR_INTERNAL, "fused work on a pool");
  // fix_avg_overhang below works on the plain layout
  eng_dnnl_io io = {st->in_fmt, st->add_fmt, st->out_keep && kind != ENG_DNNL_POOL_AVG_INCLUDE,
                    NULL};
  st->out_fmt = NULL;
  TRY(eng_dnnl_run(dnnl, (eng_dnnl_node **)&st->node, kind, &dg,
                   conv ? in[1].data : NULL, bias_of(a, in, n_in), &post, &io, out[0].data,
                   in[0].data, e));
  st->out_fmt = io.y_fmt;
  if (kind == ENG_DNNL_POOL_AVG_INCLUDE) fix_avg_overhang(out[0].data, &g);
  return 0;
}

void eng_conv_state_destroy(void *node_state) { eng_dnnl_node_destroy(node_state); }

// --- LpPool (CPU only): the p-th root of the sum of |x|^p over each window
// (padding adds nothing), as ONNX's node tests compute it. The window
// (kernel_shape, strides, pads, auto_pad, dilations, ceil_mode) is
// AveragePool's, so the node is parsed, shaped and pooled as an AveragePool
// (padding counted) of |x|^p through the reference path, times the kernel size.

// p->beta: the exponent p.
int eng_ops__parse_lppool(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  eng_node avg = *n;  // AveragePool's attributes, read as AveragePool's
  avg.op_type = (char *)"AveragePool";
  TRY(eng_conv_parse(g, &avg, opset, p, e));
  p->layouts = 0;  // plain activations in and out: the reference path
  p->fusable = 0;
  p->conv.count_include_pad = 1;  // padding counts as zeros: kernel size x that average is the plain sum
  int64_t pw = op_attr_int(n, "p", 2);
  if (pw < 1) return err_set(e, ERR_INVALID_ARGUMENT, "p must be positive, got %lld", (long long)pw);
  p->beta = (float)pw;
  return 0;
}

int eng_ops__infer_lppool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  TRY(eng_ops__need_f32(&in[0], "X", e));
  return eng_conv_infer(p, in, n_in, out, n_out, e);
}

int eng_ops__run_lppool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  size_t n = op_numel(&in[0]), ny = op_numel(&out[0]);
  float *pw = malloc((n ? n : 1) * sizeof *pw);
  if (!pw) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  const float *x = in[0].data;
  double pe = p->beta;
  for (size_t i = 0; i < n; i++) pw[i] = (float)pow(fabs((double)x[i]), pe);
  eng_tensor t = in[0];
  t.data = pw;
  int rc = eng_conv_run_ref(p, &t, n_in, out, n_out, e);
  free(pw);
  TRY(rc);
  double k = 1.0;
  for (int d = 0; d < p->conv.nsp; d++) k *= (double)p->conv.kernel[d];
  float *y = out[0].data;
  for (size_t i = 0; i < ny; i++) y[i] = (float)pow(k * y[i], 1.0 / pe);
  return 0;
}
