// engine/plan_cuda.c: executes the CPU planner's plan (plan_internal.h) on a
// CUDA device. Values get device pointers from the layout (root + offset in
// a device arena), constants live in a second arena filled once at create,
// and each node runs through the CUDA op table below on the plan's stream.
// Inputs and outputs pass through pinned staging whose offsets are computed
// here; conversions at the edges (FP16/BF16/FP64) happen on the host, in
// the staging buffers, with the CPU plan's own functions.
#include "engine/plan_cuda.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda_check.h"
#include "engine/cuda_gemm.h"
#include "engine/cuda_mem.h"
#include "engine/plan_cuda_k.h"
#include "engine/plan_internal.h"
#include "kernels/k_cuda.h"

#define STAGE_ALIGN 256
// cuBLASLt workspace per plan: enough for Hopper's best FP32 kernels.
#define GEMM_WORKSPACE (32u << 20)

typedef struct cuda_ctx {
  cudaStream_t stream;
  eng_gemm_lt *gemm;
} cuda_ctx;

typedef int (*cuda_run_fn)(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                           eng_tensor *out, int n_out, err *e);

typedef struct cuda_op {
  const char *op_type;
  cuda_run_fn run;
} cuda_op;

struct eng_cuda_plan {
  eng_plan *pl;  // the shared analysis; its host arena is never allocated
  int device;
  cuda_ctx ctx;
  const cuda_op **ops;  // per node
  void **dptr;          // per value: device pointer for this run
  void **cdev;          // per value: constant's device copy (NULL if not a constant)
  eng_cuda_arena *consts;
  eng_cuda_arena *act;
  uint8_t *act_base;
  size_t act_cap;
  eng_cuda_pinned *pin;
  uint8_t *pin_base;
  size_t pin_cap;
  size_t *in_off;                // per input: pinned offset of its internal copy
  size_t *out_off, *edge_off;    // per output: internal copy, converted copy
  uint64_t retired_allocs;       // real allocations of pools since replaced
};

static size_t round_up(size_t n) { return (n + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN; }
static size_t numel(const eng_tensor *t) { return (size_t)eng_numel(t->ndims, t->dims); }
static size_t nbytes(const eng_tensor *t) { return numel(t) * dtype_size(t->dt); }

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t r = 1;
  for (int i = from; i < to; i++) r *= d[i];
  return r;
}

// --- ops. Tensors carry device pointers; shapes were checked by infer.

static int run_gemm(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int64_t m = out[0].dims[0], n = out[0].dims[1];
  int64_t k = p->trans_a ? in[0].dims[0] : in[0].dims[1];
  float *y = out[0].data;
  if (m == 0 || n == 0) return 0;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "Gemm [%lld x %lld x %lld] exceeds int range",
                   (long long)m, (long long)k, (long long)n);
  const eng_tensor *ct = n_in > 2 && in[2].dt != DT_INVALID && p->beta != 0.0f ? &in[2] : NULL;
  int64_t cr = 1, cc = 1;
  if (ct) {
    cr = ct->ndims == 2 ? ct->dims[0] : 1;
    cc = ct->ndims >= 1 ? ct->dims[ct->ndims - 1] : 1;
  }
  if (k == 0) {  // y = beta * C, as the CPU op
    CUDA_TRY(e, cudaMemsetAsync(y, 0, (size_t)(m * n) * sizeof(float), c->stream));
    return ct ? eng_pk_gemm_scale_cuda(y, ct->data, m, n, cr, cc, 1.0f, p->beta, c->stream, e) : 0;
  }
  // a per-column C with unit alpha and beta is a linear layer's bias: fused
  bool bias = ct && p->alpha == 1.0f && p->beta == 1.0f && cr == 1 && cc == n;
  TRY(eng_gemm_lt_run(c->gemm, y, in[0].data, in[1].data, bias ? ct->data : NULL, (int)m, (int)n,
                      (int)k, p->trans_a, p->trans_b, bias ? ENG_GEMM_EPI_BIAS : ENG_GEMM_EPI_NONE,
                      ENG_GEMM_FP32, c->stream, e));
  if (!bias && (ct || p->alpha != 1.0f))
    TRY(eng_pk_gemm_scale_cuda(y, ct ? ct->data : NULL, m, n, cr, cc, p->alpha, p->beta,
                               c->stream, e));
  return 0;
}

static int run_matmul(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                      eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  eng_mm_shape s;
  TRY(eng_ops__mm_analyse(&in[0], &in[1], &s, NULL, e));
  const float *a = in[0].data, *b = in[1].data;
  float *y = out[0].data;
  int64_t total = prod(s.batch, 0, s.nb), bcount = prod(s.bbatch, 0, s.nb);
  if (total == 0 || s.m == 0 || s.n == 0) return 0;
  if (s.k == 0) {
    CUDA_TRY(e, cudaMemsetAsync(y, 0, (size_t)(total * s.m * s.n) * sizeof(float), c->stream));
    return 0;
  }
  int a_full = 1;
  for (int i = 0; i < s.nb; i++) a_full &= s.abatch[i] == s.batch[i];
  if (bcount == 1 && a_full) {  // one weight matrix for every row: one product
    if (total * s.m > INT_MAX || s.n > INT_MAX || s.k > INT_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT, "MatMul exceeds int range");
    return eng_gemm_lt_run(c->gemm, y, a, b, NULL, (int)(total * s.m), (int)s.n, (int)s.k, false,
                           false, ENG_GEMM_EPI_NONE, ENG_GEMM_FP32, c->stream, e);
  }
  if (s.m > INT_MAX || s.n > INT_MAX || s.k > INT_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "MatMul exceeds int range");
  // broadcast batch dims: one product per output matrix (the shape cache
  // makes every call after the first a lookup)
  int64_t idx[ENG_MAX_DIMS] = {0};
  for (int64_t t = 0; t < total; t++) {
    int64_t ao = 0, bo = 0, as = 1, bs = 1;
    for (int i = s.nb - 1; i >= 0; i--) {
      if (s.abatch[i] != 1) ao += idx[i] * as;
      if (s.bbatch[i] != 1) bo += idx[i] * bs;
      as *= s.abatch[i];
      bs *= s.bbatch[i];
    }
    TRY(eng_gemm_lt_run(c->gemm, y + t * s.m * s.n, a + ao * s.m * s.k, b + bo * s.k * s.n, NULL,
                        (int)s.m, (int)s.n, (int)s.k, false, false, ENG_GEMM_EPI_NONE,
                        ENG_GEMM_FP32, c->stream, e));
    for (int i = s.nb - 1; i >= 0; i--) {
      if (++idx[i] < s.batch[i]) break;
      idx[i] = 0;
    }
  }
  return 0;
}

static int run_binary(cuda_ctx *c, const eng_tensor *in, eng_tensor *out, k_binop op, err *e) {
  int nd;
  int64_t y[ENG_MAX_DIMS], ad[ENG_MAX_DIMS], bd[ENG_MAX_DIMS];
  TRY(eng_ops__bcast(&in[0], &in[1], &nd, y, ad, bd, e));
  if (nd == 0) {
    nd = 1;
    y[0] = ad[0] = bd[0] = 1;
  }
  if (in[0].dt == DT_FP32)
    return k_binary_f32_cuda(out[0].data, in[0].data, in[1].data, nd, y, ad, bd, op, c->stream, e);
  return eng_pk_binary_i64_cuda(out[0].data, in[0].data, in[1].data, nd, y, ad, bd, op, c->stream,
                                e);
}

#define BINARY_RUN(name, op)                                                                   \
  static int name(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,         \
                  eng_tensor *out, int n_out, err *e) {                                        \
    (void)p, (void)n_in, (void)n_out;                                                          \
    return run_binary(c, in, out, op, e);                                                      \
  }
BINARY_RUN(run_add, K_ADD)
BINARY_RUN(run_sub, K_SUB)
BINARY_RUN(run_mul, K_MUL)
BINARY_RUN(run_div, K_DIV)

#define UNARY_RUN(name, call)                                                                  \
  static int name(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,         \
                  eng_tensor *out, int n_out, err *e) {                                        \
    (void)p, (void)n_in, (void)n_out;                                                          \
    float *y = out[0].data;                                                                    \
    const float *x = in[0].data;                                                               \
    size_t n = numel(&in[0]);                                                                  \
    return call;                                                                               \
  }
UNARY_RUN(run_relu, k_relu_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_leaky, k_leaky_relu_cuda(y, x, n, p->alpha, c->stream, e))
UNARY_RUN(run_sigmoid, k_sigmoid_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_tanh, k_tanh_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_erf, k_erf_cuda(y, x, n, c->stream, e))
UNARY_RUN(run_gelu, k_gelu_cuda(y, x, n, p->approximate, c->stream, e))

static int run_softmax_any(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in,
                           eng_tensor *out, int log, err *e) {
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (!o || !l || !i) return 0;
  return log ? k_log_softmax_cuda(out[0].data, in[0].data, o, l, i, c->stream, e)
             : k_softmax_cuda(out[0].data, in[0].data, o, l, i, c->stream, e);
}

static int run_softmax(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                       eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  return run_softmax_any(c, p, in, out, 0, e);
}

static int run_log_softmax(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                           eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  return run_softmax_any(c, p, in, out, 1, e);
}

// Views share their input's bytes by the layout; copy only if they do not.
static int run_view(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in;
  size_t bytes = nbytes(&out[0]);
  if (out[0].data != in[0].data && bytes)
    CUDA_TRY(e, cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice,
                                c->stream));
  if (n_out > 1 && out[1].dt != DT_INVALID && numel(&out[1]))  // Dropout's mask: all kept
    CUDA_TRY(e, cudaMemsetAsync(out[1].data, 1, numel(&out[1]), c->stream));
  return 0;
}

static int run_transpose(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int perm[ENG_MAX_DIMS], r = in[0].ndims;
  TRY(eng_ops__get_perm(p, r, perm, e));
  size_t n = numel(&in[0]), esz = dtype_size(in[0].dt);
  if (!n) return 0;
  if (r == 0) {
    CUDA_TRY(e, cudaMemcpyAsync(out[0].data, in[0].data, esz, cudaMemcpyDeviceToDevice, c->stream));
    return 0;
  }
  return k_transpose_cuda(out[0].data, in[0].data, esz, r, in[0].dims, perm, c->stream, e);
}

// Concat along ax: each input is a [outer, rows_i] block of bytes placed at
// its column offset of the [outer, sum rows_i] output, one 2-D copy each.
static int run_concat(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                      eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t esz = dtype_size(in[0].dt), inner = (size_t)prod(in[0].dims, ax + 1, r);
  size_t outer = (size_t)prod(in[0].dims, 0, ax);
  size_t pitch = (size_t)out[0].dims[ax] * inner * esz;
  if (!outer || !pitch) return 0;
  size_t col = 0;
  for (int i = 0; i < n_in; i++) {
    size_t w = (size_t)in[i].dims[ax] * inner * esz;
    if (w)
      CUDA_TRY(e, cudaMemcpy2DAsync((uint8_t *)out[0].data + col, pitch, in[i].data, w, w, outer,
                                    cudaMemcpyDeviceToDevice, c->stream));
    col += w;
  }
  return 0;
}

// Inside a CUDA plan FP16 values travel as FP32 (see run_cast), so the FP16
// element type is not one the cast kernel sees.
static int elem_of(dtype t, k_elem *k) { return t == DT_FP16 ? -1 : eng_ops_elem_of(t, k); }

static int run_cast(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  k_elem xk, yk;
  if (elem_of(in[0].dt, &xk) != 0 || elem_of(out[0].dt, &yk) != 0)
    return err_set(e, ERR_UNIMPLEMENTED, "Cast %s -> %s not supported on CUDA",
                   dtype_wire_name(in[0].dt), dtype_wire_name(out[0].dt));
  size_t n = numel(&in[0]);
  if (!n) return 0;
  TRY(eng_pk_cast_cuda(out[0].data, yk, in[0].data, xk, n, c->stream, e));
  // narrow float targets travel as FP32 with the narrow type's precision
  if (p->to == DT_FP16 || p->to == DT_BF16)
    TRY(eng_pk_round_narrow_cuda(out[0].data, n, p->to == DT_BF16, c->stream, e));
  return 0;
}

static int run_layernorm(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t rows = (size_t)prod(in[0].dims, 0, ax), cols = (size_t)prod(in[0].dims, ax, r);
  const float *bias = n_in > 2 && in[2].dt != DT_INVALID ? in[2].data : NULL;
  float *mean = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : NULL;
  float *istd = n_out > 2 && out[2].dt != DT_INVALID ? out[2].data : NULL;
  if (!rows || !cols) return 0;
  TRY(eng_pk_ln_stats_cuda(mean, istd, in[0].data, rows, cols, p->eps, c->stream, e));
  return k_layer_norm_cuda(out[0].data, in[0].data, in[1].data, bias, rows, cols, p->eps,
                           c->stream, e);
}

static int run_batchnorm(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                         eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  size_t n = (size_t)x->dims[0], ch = (size_t)x->dims[1];
  size_t sp = (size_t)prod(x->dims, 2, x->ndims);
  if (!n || !ch || !sp) return 0;
  return k_batch_norm_cuda(out[0].data, x->data, in[1].data, in[2].data, in[3].data, in[4].data, n,
                           ch, sp, p->eps, c->stream, e);
}

// Every op of the CPU table (ops_cpu.c) that runs; Constant is folded at load.
static const cuda_op cuda_ops[] = {
    {"Gemm", run_gemm},
    {"MatMul", run_matmul},
    {"Add", run_add},
    {"Sub", run_sub},
    {"Mul", run_mul},
    {"Div", run_div},
    {"Relu", run_relu},
    {"LeakyRelu", run_leaky},
    {"Sigmoid", run_sigmoid},
    {"Tanh", run_tanh},
    {"Erf", run_erf},
    {"Gelu", run_gelu},
    {"Softmax", run_softmax},
    {"LogSoftmax", run_log_softmax},
    {"Flatten", run_view},
    {"Reshape", run_view},
    {"Squeeze", run_view},
    {"Unsqueeze", run_view},
    {"Identity", run_view},
    {"Dropout", run_view},
    {"Transpose", run_transpose},
    {"Concat", run_concat},
    {"Cast", run_cast},
    {"LayerNormalization", run_layernorm},
    {"BatchNormalization", run_batchnorm},
};

static const cuda_op *find_op(const char *op_type) {
  for (size_t i = 0; i < sizeof cuda_ops / sizeof cuda_ops[0]; i++)
    if (strcmp(cuda_ops[i].op_type, op_type) == 0) return &cuda_ops[i];
  return NULL;
}

// --- memory

static uint64_t arena_allocs(const eng_cuda_arena *a) {
  if (!a) return 0;
  eng_cuda_mem_stats s;
  eng_cuda_arena_stats(a, &s);
  return s.real_allocs;
}

static uint64_t pinned_allocs(const eng_cuda_pinned *a) {
  if (!a) return 0;
  eng_cuda_mem_stats s;
  eng_cuda_pinned_stats(a, &s);
  return s.real_allocs;
}

// The activation arena holds at least need bytes (one block, carved once).
static int ensure_act(eng_cuda_plan *p, size_t need, err *e) {
  if (need <= p->act_cap && p->act) return 0;
  if (need == 0) need = STAGE_ALIGN;
  p->retired_allocs += arena_allocs(p->act);
  eng_cuda_arena_destroy(p->act);
  p->act = NULL;
  p->act_base = NULL;
  p->act_cap = 0;
  void *base = NULL;
  TRY(eng_cuda_arena_create(&p->act, p->device, need + ENG_CUDA_MEM_ALIGN, 8, e));
  TRY(eng_cuda_arena_alloc(p->act, need, 0, &base, e));
  p->act_base = base;
  p->act_cap = need;
  return 0;
}

// Pinned offsets for the shapes in pl->cur; grows the pool if they need more.
static int ensure_pinned(eng_cuda_plan *p, err *e) {
  const eng_plan *pl = p->pl;
  size_t total = 0;
  for (size_t i = 0; i < pl->n_inputs; i++) {
    p->in_off[i] = total;
    total += round_up(nbytes(&pl->cur[eng_graph_input_value(pl->g, i)]));
  }
  for (size_t j = 0; j < pl->n_outputs; j++) {
    const eng_tensor *t = &pl->cur[eng_graph_output_value(pl->g, j)];
    p->out_off[j] = total;
    total += round_up(nbytes(t));
    p->edge_off[j] = total;
    dtype od = eng_plan__out_dtype(pl, j);
    if (od != t->dt) total += round_up(numel(t) * dtype_size(od));
  }
  if (total <= p->pin_cap && p->pin) return 0;
  if (total == 0) total = STAGE_ALIGN;
  p->retired_allocs += pinned_allocs(p->pin);
  eng_cuda_pinned_destroy(p->pin);
  p->pin = NULL;
  p->pin_base = NULL;
  p->pin_cap = 0;
  void *base = NULL;
  TRY(eng_cuda_pinned_create(&p->pin, total + ENG_CUDA_MEM_ALIGN, 8, e));
  TRY(eng_cuda_pinned_alloc(p->pin, total, 0, &base, e));
  p->pin_base = base;
  p->pin_cap = total;
  return 0;
}

// Constants go to the device once: one arena, one block each.
static int upload_consts(eng_cuda_plan *p, err *e) {
  const eng_graph *g = p->pl->g;
  size_t total = 0, n = 0;
  for (size_t v = 0; v < p->pl->n_values; v++) {
    const eng_value *val = eng_graph_value(g, v);
    if (val->kind == ENG_VALUE_CONST && val->bytes) {
      total += round_up(val->bytes);
      n++;
    }
  }
  if (!n) return 0;
  // a block whose size is not a multiple of the alignment leaves a pad in
  // front of the next one: two bookkeeping slots per constant
  TRY(eng_cuda_arena_create(&p->consts, p->device, total + ENG_CUDA_MEM_ALIGN, 2 * (int)n + 4, e));
  for (size_t v = 0; v < p->pl->n_values; v++) {
    const eng_value *val = eng_graph_value(g, v);
    if (val->kind != ENG_VALUE_CONST || !val->bytes) continue;
    TRY(eng_cuda_arena_alloc(p->consts, val->bytes, 0, &p->cdev[v], e));
    CUDA_TRY(e, cudaMemcpy(p->cdev[v], val->data, val->bytes, cudaMemcpyHostToDevice));
  }
  return 0;
}

// --- create / destroy

int eng_cuda_plan_create(const eng_graph *g, int max_batch, int device, eng_cuda_plan **out,
                         err *e) {
  *out = NULL;
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || device < 0 || device >= count) {
    (void)cudaGetLastError();
    return err_set(e, ERR_UNAVAILABLE, "CUDA device %d not available (%s)", device,
                   rc != cudaSuccess ? cudaGetErrorString(rc) : "out of range");
  }
  eng_cuda_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  p->device = device;
  int ret = eng_plan__create(g, max_batch, 0, &p->pl, e);
  if (ret) goto fail;
  const eng_plan *pl = p->pl;
  p->ops = calloc(pl->n_nodes + 1, sizeof *p->ops);
  p->dptr = calloc(pl->n_values + 1, sizeof *p->dptr);
  p->cdev = calloc(pl->n_values + 1, sizeof *p->cdev);
  p->in_off = calloc(pl->n_inputs + 1, sizeof *p->in_off);
  p->out_off = calloc(pl->n_outputs + 1, sizeof *p->out_off);
  p->edge_off = calloc(pl->n_outputs + 1, sizeof *p->edge_off);
  if (!p->ops || !p->dptr || !p->cdev || !p->in_off || !p->out_off || !p->edge_off) {
    ret = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    p->ops[i] = find_op(n->op_type);
    if (!p->ops[i]) {
      ret = err_set(e, ERR_UNIMPLEMENTED, "node '%s': op %s not yet supported on CUDA", n->name,
                    n->op_type);
      goto fail;
    }
  }
  if ((ret = CUDA_OK(e, cudaSetDevice(device))) != 0) goto fail;
  if ((ret = CUDA_OK(e, cudaStreamCreateWithFlags(&p->ctx.stream, cudaStreamNonBlocking))) != 0)
    goto fail;
  if ((ret = eng_gemm_lt_create(&p->ctx.gemm, GEMM_WORKSPACE, 0, e)) != 0) goto fail;
  if ((ret = upload_consts(p, e)) != 0) goto fail;
  if (pl->have_layout) {  // every shape known: size for max_batch now
    if ((ret = ensure_act(p, pl->arena_need, e)) != 0) goto fail;
    if ((ret = ensure_pinned(p, e)) != 0) goto fail;
  }
  *out = p;
  return 0;
fail:
  eng_cuda_plan_destroy(p);
  return ret;
}

void eng_cuda_plan_destroy(eng_cuda_plan *p) {
  if (!p) return;
  if (p->ctx.stream) {
    (void)cudaSetDevice(p->device);
    (void)cudaStreamSynchronize(p->ctx.stream);
    (void)cudaStreamDestroy(p->ctx.stream);
  }
  eng_gemm_lt_destroy(p->ctx.gemm);
  eng_cuda_arena_destroy(p->act);
  eng_cuda_arena_destroy(p->consts);
  eng_cuda_pinned_destroy(p->pin);
  eng_plan_destroy(p->pl);
  free(p->ops);
  free(p->dptr);
  free(p->cdev);
  free(p->in_off);
  free(p->out_off);
  free(p->edge_off);
  free(p);
}

uint64_t eng_cuda_plan_real_allocs(const eng_cuda_plan *p) {
  return p->retired_allocs + arena_allocs(p->act) + arena_allocs(p->consts) + pinned_allocs(p->pin);
}

size_t eng_cuda_plan_arena_bytes(const eng_cuda_plan *p) {
  return p->pl->have_layout ? p->pl->arena_need : 0;
}

// --- run

static int run_nodes(eng_cuda_plan *p, const eng_tensor *inputs, size_t n_in, err *e) {
  eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  for (size_t v = 0; v < pl->n_values; v++) {
    int r = pl->root[v];
    bool is_const = eng_graph_value(g, (size_t)r)->kind == ENG_VALUE_CONST;
    p->dptr[v] = is_const ? p->cdev[r] : p->act_base + pl->off[r];
  }
  for (size_t i = 0; i < n_in; i++) {
    int v = eng_graph_input_value(g, i);
    const eng_tensor *t = &pl->cur[v];
    size_t n = numel(t);
    if (!n) continue;
    eng_plan__to_internal(p->pin_base + p->in_off[i], &inputs[i], n);
    CUDA_TRY(e, cudaMemcpyAsync(p->dptr[v], p->pin_base + p->in_off[i], nbytes(t),
                                cudaMemcpyHostToDevice, p->ctx.stream));
  }
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const eng_node *n = eng_graph_node(g, i);
    for (int k = 0; k < n->n_in; k++) {
      if (n->in[k] >= 0) {
        pl->tin[k] = pl->cur[n->in[k]];
        pl->tin[k].data = p->dptr[n->in[k]];
        pl->tin[k].bytes = nbytes(&pl->tin[k]);
      } else {
        memset(&pl->tin[k], 0, sizeof pl->tin[k]);
      }
    }
    for (int k = 0; k < n->n_out; k++) {
      if (n->out[k] >= 0) {
        pl->tout[k] = pl->cur[n->out[k]];
        pl->tout[k].data = p->dptr[n->out[k]];
        pl->tout[k].bytes = nbytes(&pl->tout[k]);
      } else {
        memset(&pl->tout[k], 0, sizeof pl->tout[k]);
      }
    }
    if (p->ops[i]->run(&p->ctx, &pl->params[i], pl->tin, n->n_in, pl->tout, n->n_out, e) != 0)
      return err_prefix(e, "node '%s' (op_type '%s'): ", n->name, n->op_type);
  }
  for (size_t j = 0; j < pl->n_outputs; j++) {
    int v = eng_graph_output_value(g, j);
    size_t b = nbytes(&pl->cur[v]);
    if (b)
      CUDA_TRY(e, cudaMemcpyAsync(p->pin_base + p->out_off[j], p->dptr[v], b,
                                  cudaMemcpyDeviceToHost, p->ctx.stream));
  }
  return 0;
}

int eng_cuda_plan_run(eng_cuda_plan *p, const eng_tensor *inputs, size_t n_in,
                      eng_tensor *outputs, size_t n_out, err *e) {
  eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  CUDA_TRY(e, cudaSetDevice(p->device));
  TRY(eng_plan__prepare(pl, inputs, n_in, n_out, e));
  TRY(ensure_act(p, pl->arena_need, e));
  TRY(ensure_pinned(p, e));
  int rc = run_nodes(p, inputs, n_in, e);
  // wait even after a failure: queued copies still read the staging buffers
  int sync = CUDA_OK(rc ? &(err){0} : e, cudaStreamSynchronize(p->ctx.stream));
  if (rc) return rc;
  if (sync) return sync;
  for (size_t j = 0; j < n_out; j++) {
    const eng_tensor *t = &pl->cur[eng_graph_output_value(g, j)];
    eng_tensor *o = &outputs[j];
    o->dt = eng_plan__out_dtype(pl, j);
    o->ndims = t->ndims;
    memcpy(o->dims, t->dims, sizeof o->dims);
    size_t n = numel(t);
    o->bytes = n * dtype_size(o->dt);
    o->data = p->pin_base + p->out_off[j];
    if (o->dt != t->dt) {
      eng_tensor src = *t;
      src.data = p->pin_base + p->out_off[j];
      o->data = p->pin_base + p->edge_off[j];
      if (n) eng_plan__to_edge(o->data, o->dt, &src, n);
    }
  }
  return 0;
}
