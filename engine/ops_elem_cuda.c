// engine/ops_elem_cuda.c: the elementwise op family (ops_elem.c) on the CUDA
// plan: HardSigmoid, HardSwish, Sqrt, Exp, Neg, Abs and Reciprocal through
// the k_unop kernels (k_unop.cu), one launcher for FP32 and FP16 storage.
// Clip is not among them: its bounds are inputs, read on the host (the CPU
// plan has them; the GPU copy of a constant is on the device), so it runs
// on the CPU fallback. Registered into plan_cuda.c's op table through
// plan_cuda_internal.h.
#include "engine/plan_cuda_internal.h"

// ops_elem.c's parse put the k_unop code in p->mode and its two
// parameters (HardSigmoid's alpha and beta) in p->alpha and p->beta.
static int unop_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  if (in[0].dt != DT_FP32 && in[0].dt != DT_FP16)
    return err_set(e, ERR_UNIMPLEMENTED, "%s tensors have no CUDA kernel for this op",
                   dtype_wire_name(in[0].dt));
  return k_unop_cuda(out[0].data, in[0].data, (size_t)eng_numel(in[0].ndims, in[0].dims),
                     in[0].dt == DT_FP16 ? K_F16 : K_F32, (k_unop)p->mode, p->alpha, p->beta,
                     c->stream, e);
}

#define UNOP(name) {.op_type = name, .run = unop_run, .half = eng_cuda__half_always}

// FP16 operands run as they are (the kernel widens each to float).
const cuda_op eng_cuda__elem_ops[] = {
    UNOP("HardSigmoid"),
    UNOP("HardSwish"),
    UNOP("Sqrt"),
    UNOP("Exp"),
    UNOP("Neg"),
    UNOP("Abs"),
    UNOP("Reciprocal"),
};
const size_t eng_cuda__n_elem_ops = sizeof eng_cuda__elem_ops / sizeof eng_cuda__elem_ops[0];
