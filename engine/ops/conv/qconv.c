// engine/ops/conv/qconv.c: the integer convolutions, QLinearConv and
// ConvInteger, in the conv family: Conv's attributes, parser and window
// (conv.c) with 8-bit x and w, int32 sums and, for QLinearConv, the
// requantization to y's 8-bit type (k_requantize, FP32 as onnxruntime).
// The load-time pass of graph_pass_qdq.c turns onnxruntime's QDQ form
// (DequantizeLinear -> Conv -> QuantizeLinear) into QLinearConv, so
// quantized models run here too.
// Fast path (run_state): UINT8/INT8 x with INT8 constant weights whose zero
// points are 0 (what onnxruntime's quantizer writes: symmetric weights) run
// as a oneDNN int8 convolution with int32 output (engine/cpu/qconv_dnnl.c),
// except layers of fewer than NARROW_C input channels per group, which
// oneDNN's FP32 kernel sums exactly and faster (narrow_fp32); the rest, and
// every run of the stateless reference, through kernels/conv/k_qconv.c.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/qconv_dnnl.h"
#include "engine/ops/conv/conv.h"
#include "engine/ops/ops_common.h"

// Inputs of each op (p->mode: QLINEAR or INTEGER); -1: the op has none.
enum { QLINEAR = 1, INTEGER = 2 };
typedef struct qio {
  int x, xs, xz, w, ws, wz, ys, yz, b;
} qio;
static const qio QLINEAR_IO = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const qio INTEGER_IO = {0, -1, 2, 1, -1, 3, -1, -1, -1};

static const qio *io_of(const eng_op_params *p) { return p->mode == QLINEAR ? &QLINEAR_IO : &INTEGER_IO; }

// Sums of up to this many 8-bit products fit int32 (255 * 255 * 33025 < 2^31).
#define MAX_TAPS 33025

int eng_qconv_parse(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  TRY(eng_conv_parse(g, n, opset, p, e));
  p->mode = strcmp(n->op_type, "QLinearConv") == 0 ? QLINEAR : INTEGER;
  p->fusable = 0;  // integer in, integer out: no float post-ops
  p->layouts = 0;
  return 0;
}

static int elem8(const eng_tensor *t, const char *what, k_elem *k, err *e) {
  if (t->dt == DT_UINT8) *k = K_U8;
  else if (t->dt == DT_INT8) *k = K_I8;
  else return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %s of type %s (UINT8 or INT8)", what, dtype_wire_name(t->dt));
  return 0;
}

// A per-tensor (one element) or per-output-channel (m elements, 1-D) parameter.
static int per_m(const eng_tensor *t, int64_t m, const char *what, int *per_ch, err *e) {
  int64_t ne = eng_numel(t->ndims, t->dims);
  if (ne == 1 && t->ndims <= 1) *per_ch = 0;
  else if (t->ndims == 1 && ne == m) *per_ch = 1;
  else return err_set(e, ERR_INVALID_ARGUMENT, "%s must be one element or one per output channel (%lld)", what, (long long)m);
  return 0;
}

static int one_elem(const eng_tensor *t, const char *what, err *e) {
  if (eng_numel(t->ndims, t->dims) != 1 || t->ndims > 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %s must be a scalar (per tensor)", what);
  return 0;
}

int eng_qconv_infer(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  const qio *io = io_of(p);
  k_elem kx, kw, ky = K_I32;
  TRY(elem8(&in[io->x], "x", &kx, e));
  TRY(elem8(&in[io->w], "w", &kw, e));
  k_window g;
  TRY(eng_conv_window(&p->conv, &in[io->x], &in[io->w], &g, e));
  int64_t taps = g.c / g.group;
  for (int i = 0; i < g.nsp; i++) taps *= g.k[i];
  if (taps > MAX_TAPS)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: %lld products per output (int32 sums hold %d)", (long long)taps,
                   MAX_TAPS);
  int pc;
  if (op_given(in, n_in, io->xz)) {
    if (in[io->xz].dt != in[io->x].dt) return err_set(e, ERR_INVALID_ARGUMENT, "x_zero_point's type differs from x's");
    TRY(one_elem(&in[io->xz], "x_zero_point", e));
  }
  if (op_given(in, n_in, io->wz)) {
    if (in[io->wz].dt != in[io->w].dt) return err_set(e, ERR_INVALID_ARGUMENT, "w_zero_point's type differs from w's");
    TRY(per_m(&in[io->wz], g.m, "w_zero_point", &pc, e));
  }
  dtype yt = DT_INT32;
  if (p->mode == QLINEAR) {
    TRY(eng_ops__need_f32(&in[io->xs], "x_scale", e));
    TRY(one_elem(&in[io->xs], "x_scale", e));
    TRY(eng_ops__need_f32(&in[io->ws], "w_scale", e));
    TRY(per_m(&in[io->ws], g.m, "w_scale", &pc, e));
    TRY(eng_ops__need_f32(&in[io->ys], "y_scale", e));
    TRY(one_elem(&in[io->ys], "y_scale", e));
    yt = in[io->x].dt;
    if (op_given(in, n_in, io->yz)) {
      TRY(elem8(&in[io->yz], "y_zero_point", &ky, e));
      TRY(one_elem(&in[io->yz], "y_zero_point", e));
      yt = in[io->yz].dt;
    }
    if (op_given(in, n_in, io->b) &&
        (in[io->b].dt != DT_INT32 || in[io->b].ndims != 1 || in[io->b].dims[0] != g.m))
      return err_set(e, ERR_INVALID_ARGUMENT, "B must be an INT32 vector of %lld (output channels)", (long long)g.m);
  }
  out[0].dt = yt;
  out[0].ndims = g.nsp + 2;
  out[0].dims[0] = g.n;
  out[0].dims[1] = g.m;
  for (int i = 0; i < g.nsp; i++) out[0].dims[2 + i] = g.y[i];
  return 0;
}

// --- run

static int32_t int8_at(const eng_tensor *t, size_t i) {
  return t->dt == DT_INT8 ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
}

// What one run needs besides the tensors: x's zero point, w's (NULL when
// all are 0), and QLinearConv's multipliers x_scale * w_scale / y_scale
// (FP32, as onnxruntime) and y's zero point. wz and mul hold m values
// (per_ch) or one.
typedef struct qparams {
  int32_t xz, yz;
  int32_t *wz;
  int wz_per_m, wz_any;
  float *mul;
  int mul_per_m;
} qparams;

static void qparams_free(qparams *q) {
  free(q->wz);
  free(q->mul);
  memset(q, 0, sizeof *q);
}

static int qparams_of(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t m, qparams *q, err *e) {
  memset(q, 0, sizeof *q);
  const qio *io = io_of(p);
  if (op_given(in, n_in, io->xz)) q->xz = int8_at(&in[io->xz], 0);
  size_t nm = (size_t)m;
  q->wz = calloc(nm, sizeof *q->wz);
  q->mul = calloc(nm, sizeof *q->mul);
  if (!q->wz || !q->mul) {
    qparams_free(q);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (op_given(in, n_in, io->wz)) {
    const eng_tensor *t = &in[io->wz];
    q->wz_per_m = op_numel(t) > 1;
    for (size_t i = 0; i < (q->wz_per_m ? nm : 1); i++) q->wz_any |= (q->wz[i] = int8_at(t, i)) != 0;
  }
  if (p->mode == QLINEAR) {
    const eng_tensor *ws = &in[io->ws];
    float xs = *(const float *)in[io->xs].data, ys = *(const float *)in[io->ys].data;
    q->mul_per_m = op_numel(ws) > 1;
    for (size_t i = 0; i < (q->mul_per_m ? nm : 1); i++) {
      q->mul[i] = xs * ((const float *)ws->data)[i] / ys;
      if (!isfinite(q->mul[i])) {
        qparams_free(q);
        return err_set(e, ERR_INVALID_ARGUMENT, "x_scale * w_scale / y_scale is not a finite number (channel %zu)", i);
      }
    }
    if (op_given(in, n_in, io->yz)) q->yz = int8_at(&in[io->yz], 0);
  }
  return 0;
}

// y from the int32 sums: QLinearConv requantizes (acc is its own buffer),
// ConvInteger's sums are y already.
// cl: acc is channels-last ([n, spatial, m]; QLinearConv's oneDNN path).
static int finish(const eng_op_params *p, const eng_tensor *in, int n_in, const k_window *g, const qparams *q,
                  const int32_t *acc, int cl, eng_tensor *y, err *e) {
  if (p->mode != QLINEAR) return 0;
  const qio *io = io_of(p);
  size_t inner = 1;
  for (int i = 0; i < g->nsp; i++) inner *= (size_t)g->y[i];
  const int32_t *b = op_given(in, n_in, io->b) ? in[io->b].data : NULL;
  if ((cl ? k_requantize_cl : k_requantize)(y->data, y->dt == DT_INT8 ? K_I8 : K_U8, acc, b, q->mul, q->mul_per_m,
                                             q->yz, (size_t)g->n, (size_t)g->m, inner) != 0)
    return err_set(e, ERR_INTERNAL, "no requantization to %s", dtype_wire_name(y->dt));
  return 0;
}

int eng_qconv_run_ref(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  const qio *io = io_of(p);
  k_window g;
  TRY(eng_conv_window(&p->conv, &in[io->x], &in[io->w], &g, e));
  if (g.n == 0) return 0;
  qparams q;
  TRY(qparams_of(p, in, n_in, g.m, &q, e));
  int32_t *acc = out[0].data;
  if (p->mode == QLINEAR && !(acc = malloc(op_numel(&out[0]) * sizeof *acc))) {
    qparams_free(&q);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  k_elem kx = in[io->x].dt == DT_INT8 ? K_I8 : K_U8, kw = in[io->w].dt == DT_INT8 ? K_I8 : K_U8;
  int rc = k_conv_int_ref(acc, in[io->x].data, kx, q.xz, in[io->w].data, kw, q.wz_any ? q.wz : NULL, q.wz_per_m, &g);
  if (rc) rc = err_set(e, ERR_INTERNAL, "no integer convolution of these types");
  else rc = finish(p, in, n_in, &g, &q, acc, 0, &out[0], e);
  if (acc != out[0].data) free(acc);
  qparams_free(&q);
  return rc;
}

// The node's fast-path state: the oneDNN primitives and the sums' buffer.
typedef struct qconv_node {
  eng_dnnl_qnode *dnnl;
  // the narrow path (see narrow_fp32): the weights as floats, the FP32 primitives, x and y as floats
  eng_dnnl_node *fnode;
  float *wf, *xf, *yf;
  size_t xcap, ycap;
  int32_t *acc;
  size_t cap;
  int ref_only;  // oneDNN had no int8 kernel for it
} qconv_node;

void eng_qconv_state_destroy(void *node_state) {
  qconv_node *s = node_state;
  if (!s) return;
  eng_dnnl_qnode_destroy(s->dnnl);
  eng_dnnl_node_destroy(s->fnode);
  free(s->wf), free(s->xf), free(s->yf);
  free(s->acc);
  free(s);
}

// Fewer than this many input channels per group (an image's first layer):
// oneDNN's int8 kernels pad the channels to their block and ran 4 to 6
// times slower than its FP32 kernel (tests/bench/kernels/bench_qconv.c, 3
// channels, dev VM's AVX2), so such layers take the narrow path.
#define NARROW_C 4
// Sums of at most this many products of 8-bit values stay below 2^24
// (255 * 128 * 514 < 2^24), so FP32 adds them exactly.
#define NARROW_TAPS 514

static int grow_f(float **p, size_t *cap, size_t n, err *e) {
  if (*cap >= n) return 0;
  free(*p);
  *cap = 0;
  if (!(*p = malloc((n ? n : 1) * sizeof **p))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  *cap = n;
  return 0;
}

// The narrow path: the integers (x - x_zp) and w as floats through the FP32
// oneDNN convolution, whose sums are exact here (NARROW_TAPS), so acc is
// the integer path's to the bit.
static int narrow_fp32(eng_dnnl_ctx *dnnl, qconv_node *s, const k_window *dg, const eng_tensor *x, int32_t xz,
                       const int8_t *w, int32_t *acc, size_t ny, err *e) {
  size_t nx = op_numel(x), nw = (size_t)(dg->m * (dg->c / dg->group));
  for (int i = 0; i < dg->nsp; i++) nw *= (size_t)dg->k[i];
  if (!s->wf) {
    if (!(s->wf = malloc(nw * sizeof *s->wf))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t i = 0; i < nw; i++) s->wf[i] = (float)w[i];
  }
  TRY(grow_f(&s->xf, &s->xcap, nx, e));
  TRY(grow_f(&s->yf, &s->ycap, ny, e));
  if (x->dt == DT_INT8)
    for (size_t i = 0; i < nx; i++) s->xf[i] = (float)(((const int8_t *)x->data)[i] - xz);
  else
    for (size_t i = 0; i < nx; i++) s->xf[i] = (float)(((const uint8_t *)x->data)[i] - xz);
  TRY(eng_dnnl_run(dnnl, &s->fnode, ENG_DNNL_CONV, dg, s->wf, NULL, NULL, NULL, s->yf, s->xf, e));
  for (size_t i = 0; i < ny; i++) acc[i] = (int32_t)s->yf[i];
  return 0;
}

int eng_qconv_run(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                  int n_out, err *e) {
  const qio *io = io_of(p);
  // oneDNN's int8 convolutions take INT8 weights with no zero point; the weights are
  // reordered once, so they must be constant
  if (p->conv.w_runtime || in[io->w].dt != DT_INT8) return eng_qconv_run_ref(p, in, n_in, out, n_out, e);
  k_window g;
  TRY(eng_conv_window(&p->conv, &in[io->x], &in[io->w], &g, e));
  if (g.n == 0) return 0;
  qparams q;
  TRY(qparams_of(p, in, n_in, g.m, &q, e));
  if (q.wz_any) {
    qparams_free(&q);
    return eng_qconv_run_ref(p, in, n_in, out, n_out, e);
  }
  int rc = 0;
  if (!st->node && !(st->node = calloc(1, sizeof(qconv_node)))) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  qconv_node *s = st->node;
  size_t ny = op_numel(&out[0]);
  int32_t *acc = out[0].data;
  if (!rc && p->mode == QLINEAR) {
    if (s->cap < ny) {
      free(s->acc);
      s->cap = 0;
      if (!(s->acc = malloc(ny * sizeof *s->acc))) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      else s->cap = ny;
    }
    acc = s->acc;
  }
  eng_dnnl_ctx *dnnl = NULL;
  if (!rc) rc = eng_conv_dnnl_ctx(st, &dnnl, e);
  // oneDNN wants the end pad that makes y exact (as eng_conv_run)
  k_window dg = g;
  for (int i = 0; i < g.nsp; i++) {
    int64_t need = (g.y[i] - 1) * g.stride[i] + (g.k[i] - 1) * g.dil[i] + 1 - g.x[i] - g.pad_l[i];
    if (need > dg.pad_r[i]) dg.pad_r[i] = need;
  }
  int64_t cg = g.c / g.group, taps = cg;
  for (int i = 0; i < g.nsp; i++) taps *= g.k[i];
  if (!rc && !s->ref_only && cg < NARROW_C && taps <= NARROW_TAPS) {
    rc = narrow_fp32(dnnl, s, &dg, &in[io->x], q.xz, in[io->w].data, acc, ny, e);
    if (!rc) rc = finish(p, in, n_in, &g, &q, acc, 0, &out[0], e);
  } else if (!rc && !s->ref_only) {
    int cl = 0;  // QLinearConv requantizes from channels-last sums; ConvInteger's are its plain output
    rc = eng_dnnl_qconv_run(dnnl, &s->dnnl, &dg, in[io->x].dt == DT_INT8, q.xz, in[io->w].data, acc,
                            p->mode == QLINEAR ? &cl : NULL, in[io->x].data, e);
    if (rc == ERR_UNIMPLEMENTED) s->ref_only = 1, rc = 0, *e = (err){0};  // this node runs on the reference from now on
    else if (!rc) rc = finish(p, in, n_in, &g, &q, acc, cl, &out[0], e);
  }
  qparams_free(&q);
  if (!rc && s->ref_only) return eng_qconv_run_ref(p, in, n_in, out, n_out, e);
  return rc;
}
