// engine/cuda/plan_cuda_layout.c: which 4-D activations the CUDA plan keeps
// NHWC (channels last), decided per input-shape signature, and the
// conversions at the edges of those regions.
//
// Why: cuDNN's FP16/TF32 convolutions run on tensor cores in NHWC; in NCHW
// they transpose internally or fall back to slower kernels (2.6x slower
// than PyTorch channels_last on ResNet-50 at batch 128 before this pass).
// Every other op of the plan assumes NCHW, so the pass keeps a value NHWC
// only where its producer and consumers can take it:
//   - ops with CUDA_OP_NHWC (Conv, the pools, ReduceMean with keepdims)
//     run natively on NHWC when cuda_ctx.nhwc is set. Conv always asks
//     for it (its point); the others follow their input.
//   - ops with CUDA_OP_ELEMWISE (Add, Mul, Relu, HardSwish, ...) are blind
//     to layout once their operands' dims are presented in memory order
//     (N, H, W, C); they run NHWC when an operand is NHWC.
//   - every other op reads NCHW: an NHWC operand is transposed into the
//     slot's scratch before it runs, as is a graph output before copy-out
//     and an operand of a host node (plan_cuda_host.c) before it goes down.
// A 4-D value with C == 1 or H * W == 1 has the same bytes in both layouts
// ("neutral", e.g. a squeeze-excitation's [N, C, 1, 1] scale or a global
// pool's output): it never needs a transpose, and broadcasting operands of
// lower rank are presented the same way when they are neutral.
//
// Decided at every submit from this run's shapes (cheap: one pass over the
// nodes); a signature always gets the same decision, so captured graphs
// stay valid.
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/plan_cuda_internal.h"

int eng_cuda__layout_alloc(cuda_layout *L, size_t n_nodes, size_t n_values, err *e) {
  memset(L, 0, sizeof *L);
  L->lay = calloc(n_values + 1, 1);
  L->mode = calloc(n_nodes + 1, 1);
  L->conv = calloc(n_nodes + 1, sizeof *L->conv);
  if (!L->lay || !L->mode || !L->conv) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  return 0;
}

void eng_cuda__layout_free(cuda_layout *L) {
  free(L->lay);
  free(L->mode);
  free(L->conv);
  memset(L, 0, sizeof *L);
}

// t's dims aligned right to rank 4 (numpy broadcasting); false above rank 4.
static bool as4(const eng_tensor *t, int64_t d[4]) {
  if (t->ndims > 4) return false;
  int pad = 4 - t->ndims;
  for (int i = 0; i < 4; i++) d[i] = i < pad ? 1 : t->dims[i - pad];
  return true;
}

static bool neutral_dims(const int64_t d[4]) { return d[1] == 1 || d[2] * d[3] == 1; }

bool eng_cuda__layout_neutral(const eng_tensor *t) {
  int64_t d[4];
  return as4(t, d) && neutral_dims(d);
}

static size_t bytes_of(const eng_tensor *t, dtype dt) {
  return (size_t)eng_numel(t->ndims, t->dims) * dtype_size(dt);
}

void eng_cuda__layout_settle(cuda_layout *L, const eng_plan *pl, const cuda_op *const *ops,
                             const void *const *nstate, const char *skip, const int *run_out,
                             const int *run_z, const dtype *ddt, bool on) {
  const eng_graph *g = pl->g;
  memset(L->lay, 0, pl->n_values);
  memset(L->mode, 0, pl->n_nodes);
  memset(L->conv, 0, pl->n_nodes * sizeof *L->conv);
  L->node_scr = 0;
  L->out_scr = 0;
  L->any = false;
  L->n_nhwc = 0;
  L->n_conv = 0;
  if (!on) return;
  const eng_tensor *cur = pl->cur;
  for (size_t i = 0; i < pl->n_nodes; i++) {
    if (skip[i]) continue;
    const eng_node *n = eng_graph_node(g, i);
    if (!ops[i]) {  // a host node (plan_cuda_host.c): reads NCHW, its NHWC operands transposed before going down
      size_t need = 0;
      for (int k = 0; k < n->n_in && k < 31; k++)
        if (eng_cuda__stored_nhwc(L, pl, n->in[k])) {
          L->conv[i] |= 1u << k;
          L->n_conv++;
          need += eng_cuda__round_up(bytes_of(&cur[n->in[k]], ddt[n->in[k]]));
        }
      if (need > L->node_scr) L->node_scr = need;
      continue;
    }
    const cuda_op *op = ops[i];
    int x = n->n_in > 0 ? n->in[0] : -1;
    bool nhwc = false;
    if ((op->flags & CUDA_OP_NHWC) && x >= 0 && cur[x].ndims == 4 && n->n_out >= 1 && n->out[0] >= 0 &&
        cur[n->out[0]].ndims == 4 && (!op->nhwc || op->nhwc(pl, i, nstate[i]))) {
      // Conv leads into NHWC; pools and reductions follow their input
      nhwc = strcmp(n->op_type, "Conv") == 0 || L->lay[x];
    } else if ((op->flags & CUDA_OP_ELEMWISE) && n->n_out == 1 && n->out[0] >= 0 &&
               cur[n->out[0]].ndims == 4) {
      bool some = false, presentable = true;
      for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (v < 0) continue;
        if (eng_cuda__stored_nhwc(L, pl, v)) some = true;
        int64_t d[4];
        if (!as4(&cur[v], d) || (cur[v].ndims < 4 && !neutral_dims(d))) presentable = false;
      }
      nhwc = some && presentable;
    }
    L->mode[i] = nhwc;
    size_t need = 0;
    // a native op's other inputs are weights, bias, axes: its own business (a Conv packs
    // its weights KRSC once), never transposed per run
    int n_act = (op->flags & CUDA_OP_NHWC) ? 1 : n->n_in;
    for (int k = 0; k < n_act && k < 31; k++) {
      int v = n->in[k];
      if (v < 0 || cur[v].ndims != 4 || eng_cuda__layout_neutral(&cur[v])) continue;
      if ((bool)L->lay[v] != nhwc) {
        L->conv[i] |= 1u << k;
        L->n_conv++;
        need += eng_cuda__round_up(bytes_of(&cur[v], ddt[v]));
      }
    }
    int z = run_z[i];
    if (z >= 0 && cur[z].ndims == 4 && !eng_cuda__layout_neutral(&cur[z]) && (bool)L->lay[z] != nhwc) {
      L->conv[i] |= CUDA_LAYOUT_CONV_Z;
      L->n_conv++;
      need += eng_cuda__round_up(bytes_of(&cur[z], ddt[z]));
    }
    if (need > L->node_scr) L->node_scr = need;
    if (nhwc) {
      L->any = true;
      L->n_nhwc++;
      for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0 && cur[n->out[k]].ndims == 4) L->lay[n->out[k]] = 1;
      if (run_out[i] >= 0 && cur[run_out[i]].ndims == 4) L->lay[run_out[i]] = 1;
    }
  }
  for (size_t j = 0; j < pl->n_outputs; j++) {
    int v = eng_graph_output_value(g, j);
    if (eng_cuda__stored_nhwc(L, pl, v)) {
      L->out_scr += eng_cuda__round_up(bytes_of(&cur[v], ddt[v]));
      L->n_conv++;
    }
  }
}

bool eng_cuda__stored_nhwc(const cuda_layout *L, const eng_plan *pl, int v) {
  return v >= 0 && L->lay[v] && pl->cur[v].ndims == 4 && !eng_cuda__layout_neutral(&pl->cur[v]);
}

void eng_cuda__layout_present(eng_tensor *t) {
  int64_t d[4];
  if (!as4(t, d)) return;
  t->ndims = 4;
  t->dims[0] = d[0];
  t->dims[1] = d[2];
  t->dims[2] = d[3];
  t->dims[3] = d[1];
}

int eng_cuda__relayout(eng_tensor *t, void *dst, bool to_nhwc, cudaStream_t st, err *e) {
  static const int to_cl[4] = {0, 2, 3, 1}, to_cf[4] = {0, 3, 1, 2};
  int64_t phys[4];  // t's dims in its current memory order
  if (to_nhwc) {
    memcpy(phys, t->dims, sizeof phys);
  } else {
    phys[0] = t->dims[0], phys[1] = t->dims[2], phys[2] = t->dims[3], phys[3] = t->dims[1];
  }
  TRY(k_transpose_cuda(dst, t->data, dtype_size(t->dt), 4, phys, to_nhwc ? to_cl : to_cf, st, e));
  t->data = dst;
  return 0;
}
