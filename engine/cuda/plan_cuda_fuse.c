// engine/cuda/plan_cuda_fuse.c: the nodes the CUDA plan folds into others.
// At create each op's fuse hook names its candidates (a Gemm/MatMul its bias
// Add, a MatMul's residual Add, an activation: engine/ops/gemm/gemm_cuda.c; a
// Conv its residual Add, Relu/Sigmoid/Tanh and a prologue activation:
// engine/ops/conv/conv_cuda.c). At every submit eng_cuda__settle_fusions
// keeps the candidates whose buffers the planner's layout lets the fusing
// node write, and eng_cuda__settle_prologues, once the NHWC layout is
// settled, the activations a consumer applies as it loads its input. The
// fused nodes are skipped: same buffers, same values, fewer kernels.
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "engine/cuda/plan_cuda_state.h"

void eng_cuda__find_fusions(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    cuda_fusion *f = &p->fz[i];
    *f = (cuda_fusion){.bias_node = -1, .act_node = -1, .bias_value = -1, .z_value = -1,
                       .mid_value = -1, .add_value = -1, .res_node = -1, .res_z = -1,
                       .res_value = -1, .act = 0, .pro_node = -1, .pro_value = -1, .pro_act = 0};
    if (p->ops[i] && p->ops[i]->fuse) p->ops[i]->fuse(pl, i, f);  // NULL: a folded or host node
    // a node without a CUDA op (one whose init refused it runs on the host) is absorbed by none
    if ((f->bias_node >= 0 && !p->ops[f->bias_node]) || (f->act_node >= 0 && !p->ops[f->act_node]) ||
        (f->res_node >= 0 && !p->ops[f->res_node]))
      f->mid_value = -1;
    if (f->pro_node >= 0 && !p->ops[f->pro_node]) f->pro_node = -1;
  }
}

static bool same_shape(const eng_tensor *a, const eng_tensor *b) {
  return a->dt == b->dt && a->ndims == b->ndims &&
         memcmp(a->dims, b->dims, (size_t)a->ndims * sizeof a->dims[0]) == 0;
}

// This run's fusions. The fused result is written where the last fused
// node's output lives, so that buffer must be one the fusing node may write
// while its inputs are still being read: the product's own (the planner ran
// the Add / activation in place), or the residual's when the Add ran in
// place on it (z == y is allowed; z is read elementwise before y is
// written), unless that residual is also the node's input. Otherwise the
// nodes run on their own.
void eng_cuda__settle_fusions(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  memset(p->skip, 0, pl->n_nodes);
  for (size_t i = 0; i < pl->n_nodes; i++) {
    p->run_act[i] = 0;
    p->run_bias[i] = -1;
    p->run_z[i] = -1;
    p->run_out[i] = -1;
  }
  for (size_t i = 0; i < pl->n_nodes; i++) {
    const cuda_fusion *f = &p->fz[i];
    if (f->mid_value < 0 || p->skip[i] || pl->folded[i]) continue;
    // an Add two products could absorb (Conv + Conv shortcut) goes to the first
    if ((f->bias_node >= 0 && p->skip[f->bias_node]) || (f->act_node >= 0 && p->skip[f->act_node]) ||
        (f->res_node >= 0 && p->skip[f->res_node]))
      continue;
    const eng_node *n = eng_graph_node(g, i);
    int r = pl->root[f->mid_value], out = f->mid_value;
    int xr = n->n_in > 0 && n->in[0] >= 0 ? pl->root[n->in[0]] : -1;
    if (f->bias_node >= 0) {
      if (f->z_value >= 0 && !same_shape(&pl->cur[f->z_value], &pl->cur[f->mid_value]))
        continue;  // a broadcast residual: the Add runs on its own
      int ra = pl->root[f->add_value];
      bool on_z = f->z_value >= 0 && ra == pl->root[f->z_value] && ra != xr;
      if (ra != r && !on_z) continue;
      r = ra;
      out = f->add_value;
      p->run_bias[i] = f->bias_value;
      p->run_z[i] = f->z_value;
      p->skip[f->bias_node] = 1;
    }
    // the residual (MatMul): same rules as above; the activation follows it, so it fuses
    // only if the residual did
    bool res_ok = true;
    if (f->res_node >= 0) {
      int rr = pl->root[f->res_value];
      bool on_z = rr == pl->root[f->res_z] && rr != xr;
      res_ok = same_shape(&pl->cur[f->res_z], &pl->cur[f->mid_value]) && (rr == r || on_z);
      if (res_ok) {
        r = rr;
        out = f->res_value;
        p->run_z[i] = f->res_z;
        p->skip[f->res_node] = 1;
      }
    }
    // The exact GELU through cuBLASLt's tanh form where the result is stored
    // as FP16 only: the two differ by at most 4.7e-4 (at x = 2.70, GELU 2.69),
    // under a quarter of FP16's spacing there (2^-9), so the stored halves
    // differ by at most one rounding step; in FP32 that is not noise.
    bool act_ok = f->act != K_ACT_GELU || (p->half && pl->cur[f->mid_value].dt == DT_FP32);
    if (f->act_node >= 0 && res_ok && act_ok) {
      const eng_node *na = eng_graph_node(g, (size_t)f->act_node);
      if (pl->root[na->out[0]] == r) {
        p->run_act[i] = f->act;
        p->skip[f->act_node] = 1;
        out = na->out[0];
      }
    }
    p->run_out[i] = out;
  }
  uint64_t fused = 0;
  for (size_t i = 0; i < pl->n_nodes; i++) fused += p->skip[i] != 0;
  atomic_store(&p->fused, fused);
  for (size_t i = 0; i < pl->n_nodes; i++)
    if (pl->folded[i]) p->skip[i] = 1;  // computed on the host while planning
}

// This run's prologues (cuda_fusion.pro_node), once the layout is settled:
// the activation node is skipped when it ran in place (its output's buffer
// holds its input, which the consumer then reads), is no fused node's
// already, needs no layout conversion, and the consumer runs NHWC reading
// input 0 as stored (the ops that take prologues do so on NHWC only: the
// depthwise kernel). Else both run as they are.
void eng_cuda__settle_prologues(eng_cuda_plan *p) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  uint64_t added = 0;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    p->run_in_act[i] = 0;
    const cuda_fusion *f = &p->fz[i];
    int h = f->pro_node;
    if (h < 0 || p->skip[i] || p->skip[h] || !p->lay.mode[i] || (p->lay.conv[i] & 1u) ||
        p->lay.conv[h])
      continue;
    int hv = eng_graph_node(g, (size_t)h)->out[0];
    if (pl->root[hv] != pl->root[f->pro_value] || p->ddt[hv] != p->ddt[f->pro_value]) continue;
    p->run_in_act[i] = f->pro_act;
    p->skip[h] = 1;
    added++;
  }
  atomic_fetch_add(&p->fused, added);
}

// Folded values (plan.c) are computed on the host for each signature (a
// transformer's position ids, causal and padding masks come from input
// shapes): the ones a kernel reads as device data travel with the inputs
// (eng_cuda__mark_uploads), the rest stay on the host (host_in: Reshape's shape...).
// Nodes without a CUDA kernel that are not folded run on the host
// (plan_cuda_host.c); that needs the op's CPU run. Checked for every
// signature.
int eng_cuda__check_folds(const eng_cuda_plan *p, err *e) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (pl->folded[i] || p->ops[i] || pl->defs[i]->run) continue;
    const eng_node *n = eng_graph_node(g, i);
    return err_set(e, ERR_UNIMPLEMENTED, "node '%s': op %s runs on neither the device nor the host", n->name,
                   n->op_type);
  }
  // outputs known on the host travel up and back (eng_cuda__mark_uploads)
  return 0;
}

