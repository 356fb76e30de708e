// engine/ops/attn/attn_cuda.c: the fused attention (attn.h) on the CUDA plan, through
// k_attn_cuda (kernels/attn/k_attn.cu): FP32 or FP16 storage as the plan keeps
// its values, head sizes up to K_ATTN_MAX_HEAD, batch dims that merge into
// [B, H] (attn.c's eng_attn__kernel_args). Registered into the CUDA
// plan through engine/ops/families.h.
//
// The divisor (GPT's sqrt of the head size) is known when planning and
// lives on the host (a folded value has no device copy), so prepare, which
// runs outside capture for every submit, reads it there and settles the
// kernel's arguments; run only enqueues the kernel (capturable). So do a
// packed node's head shapes (attn.h: inputs 5..7), and with them the
// operands' offsets into the one projection they share.
#include <stdlib.h>
#include <string.h>

#include "engine/ops/attn/attn.h"
#include "engine/ops/ops_common.h"
#include "engine/cuda/plan_cuda_internal.h"

typedef struct attn_node {
  const eng_plan *pl;  // the plan that owns this state (for the divisor's host bytes)
  size_t node;
  k_attn_args args;    // this submit's, from prepare
  int64_t off[3];      // elements into Q's, Kt's, V's data (packed Q/K/V), from prepare
} attn_node;

static int attn_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  attn_node *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->pl = pl;
  s->node = i;
  *state = s;
  return 0;
}

static int attn_prepare(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                        const eng_tensor *out, int n_out, cuda_prep *r, err *e) {
  (void)out, (void)n_out;
  attn_node *s = c->node;
  eng_tensor t[8];
  int n = n_in < 8 ? n_in : 8;
  memcpy(t, in, (size_t)n * sizeof *t);
  for (int k = 4; k < n; k++) {  // the divisor's and the head shapes' bytes, on the host
    if (t[k].dt == DT_INVALID) continue;
    int v = eng_graph_node(s->pl->g, s->node)->in[k];
    t[k].data = v >= 0 && s->pl->known[v] ? s->pl->cur[v].data : NULL;
    if (k == 4) t[k].dt = DT_FP32;
  }
  for (int k = 0; k < n && k < 4; k++)  // analysed as the FP32 values they stand for
    if (t[k].dt == DT_FP16) t[k].dt = DT_FP32;
  eng_attn_shape sh;
  TRY(eng_attn__analyse(p, t, n, &sh, NULL, e));
  TRY(eng_attn__kernel_args(&sh, &s->args, e));
  memcpy(s->off, sh.off, sizeof s->off);
  s->args.nan_zero = p->nan_zero;
  if (s->args.d > K_ATTN_MAX_HEAD || s->args.dv > K_ATTN_MAX_HEAD)
    return err_set(e, ERR_UNIMPLEMENTED,
                   "attention with head sizes %lld, %lld on CUDA: at most %d (parameters { key: "
                   "\"fuse_attention\" value: { string_value: \"0\" } } runs it unfused)",
                   (long long)s->args.d, (long long)s->args.dv, K_ATTN_MAX_HEAD);
  r->ws_need = 0;
  return 0;
}

static int attn_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_out;
  attn_node *s = c->node;
  k_elem et = in[0].dt == DT_FP16 ? K_F16 : K_F32;
  for (int k = 1; k < 4 && k < n_in; k++)
    if (in[k].dt != DT_INVALID && in[k].dt != in[0].dt)
      return err_set(e, ERR_INTERNAL, "attention: operand %d is %s, Q is %s", k,
                     dtype_wire_name(in[k].dt), dtype_wire_name(in[0].dt));
  const void *mask = op_given(in, n_in, 3) ? in[3].data : NULL;
  size_t es = et == K_F16 ? 2 : 4;
  const char *q = (const char *)in[0].data + (size_t)s->off[0] * es;
  const char *kt = (const char *)in[1].data + (size_t)s->off[1] * es;
  const char *v = (const char *)in[2].data + (size_t)s->off[2] * es;
  return k_attn_cuda(out[0].data, q, kt, v, mask, NULL, K_F32, et, &s->args, c->stream, e);
}

const cuda_op eng_cuda__attn_ops[] = {
    {.op_type = ENG_ATTN_OP, .run = attn_run, .half = eng_cuda__half_always, .init = attn_init,
     .prepare = attn_prepare, .destroy = free},
};
const size_t eng_cuda__n_attn_ops = sizeof eng_cuda__attn_ops / sizeof eng_cuda__attn_ops[0];
