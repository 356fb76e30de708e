// engine/cpu/plan_values.c: parameters given as graph inputs. An op reads
// some operands while inferring shapes (host_in: Reshape's shape, Slice's
// starts, Pad's pads, Resize's scales, TopK's K...); exporters usually
// write them as constants, but a graph may take them as inputs. Such an
// input's bytes are then part of what the shapes depend on: the plan reads
// them at every run, and a run whose values differ from the last inferred
// ones reruns shape inference (and folding) and re-lays-out, exactly as a
// run with new input shapes does. Bad values fail that run's inference
// with the op's own INVALID_ARGUMENT message; the plan stays usable.
// A plan with no such input keeps its static fast path untouched.
#include "engine/cpu/plan_internal.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/k_ref.h"

// A run's input in the plan's internal type (FP16, BF16 and FP64 widened or narrowed to FP32,
// STRING from its wire layout): the bytes a run brings, here beside the parameters read from them.
void eng_plan__to_internal(void *dst, const eng_tensor *src, size_t n) {
  if (src->dt == DT_STRING) k_str_from_wire(dst, src->data, n);  // checked by check_input
  else if (src->dt == DT_FP16) k_f16_to_f32(dst, src->data, n);
  else if (src->dt == DT_FP64) k_cast(dst, K_F32, src->data, K_F64, n);
  else if (src->dt == DT_BF16)
    for (size_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)((const uint16_t *)src->data)[i] << 16;
      memcpy((float *)dst + i, &u, 4);
    }
  else memcpy(dst, src->data, n * dtype_size(src->dt));
}

// Whether graph input i carries bytes a plan can read on the host (STRING
// inputs are wire layouts; no op reads them while inferring shapes).
static int readable(const eng_plan *p, size_t i) {
  dtype dt = eng_graph_input(p->g, i)->dt;
  if (dt == DT_INVALID) return 1;  // a subgraph's outer input: checked at load (not a STRING)
  return dt != DT_STRING && dtype_size(dt) > 0;
}

int eng_plan__find_value_inputs(eng_plan *p, err *e) {
  const eng_graph *g = p->g;
  uint8_t *need = calloc(p->n_values + 1, 1);
  p->val_in = calloc(p->n_inputs + 1, 1);
  p->sig_raw = calloc(p->n_inputs + 1, sizeof *p->sig_raw);
  p->sig_raw_cap = calloc(p->n_inputs + 1, sizeof *p->sig_raw_cap);
  p->sig_raw_bytes = calloc(p->n_inputs + 1, sizeof *p->sig_raw_bytes);
  if (!need || !p->val_in || !p->sig_raw || !p->sig_raw_cap || !p->sig_raw_bytes) {
    free(need);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  // backwards over the sorted nodes: a host_in operand is needed on the
  // host, and so is every operand of a node whose output is needed (it
  // must fold), but a shape-only op's (Shape reads no bytes)
  for (size_t i = p->n_nodes; i-- > 0;) {
    const eng_node *n = eng_graph_node(g, i);
    const eng_op_def *d = p->defs[i];
    int out_needed = 0;
    for (int k = 0; k < n->n_out; k++) out_needed |= n->out[k] >= 0 && need[n->out[k]];
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0) continue;
      if ((d->host_in & ENG_IN(k)) || (out_needed && !(d->flags & ENG_OP_SHAPE_ONLY))) need[v] = 1;
      // bytes that settle shapes where known: wanted from graph inputs, unless batching
      if (p->max_batch == 0 && (d->flags & (k == 0 ? ENG_OP_HOST_PREF0 : k == 1 ? ENG_OP_HOST_PREF1 : 0))) need[v] = 1;
    }
  }
  p->n_val_in = 0;
  for (size_t i = 0; i < p->n_inputs; i++) {
    p->val_in[i] = (uint8_t)(need[eng_graph_input_value(g, i)] && readable(p, i));
    p->n_val_in += p->val_in[i];
  }
  free(need);
  if (p->n_val_in && p->max_batch > 0) {
    err_list bad = {0};
    for (size_t i = 0; i < p->n_inputs; i++)
      if (p->val_in[i]) err_list_add(&bad, "input '%s'", eng_graph_input(g, i)->name);
    err_list_set(&bad, e, ERR_INVALID_ARGUMENT,
                 "graph input(s) read as shape parameters (a shape, axes, pads, scales... given as an input) "
                 "cannot be batched: requests batched together would mix their values (serve the model with "
                 "max_batch_size 0)");
    return ERR_INVALID_ARGUMENT;
  }
  return 0;
}

// Grows *buf to hold `bytes` (contents not kept); -1 when out of memory.
static int reserve(void **buf, size_t *cap, size_t bytes) {
  if (*buf && bytes <= *cap) return 0;
  free(*buf);
  *cap = 0;
  *buf = malloc(bytes ? bytes : 1);
  if (!*buf) return -1;
  *cap = bytes;
  return 0;
}

int eng_plan__load_value_inputs(eng_plan *p, const eng_tensor *inputs, err *e) {
  const eng_graph *g = p->g;
  if (!p->n_val_in) return 0;
  for (size_t i = 0; i < p->n_inputs; i++) {
    if (!p->val_in[i]) continue;
    int v = eng_graph_input_value(g, i);
    eng_tensor *t = &p->cur[v];
    if (inputs[i].dt == DT_STRING)
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': STRING bytes cannot be read while inferring shapes",
                     eng_graph_input(g, i)->name);
    size_t n = (size_t)eng_numel(t->ndims, t->dims);
    size_t raw = n * dtype_size(inputs[i].dt);  // check_input: the caller's bytes hold that much
    size_t internal = n * dtype_size(t->dt);
    int same = p->sig_raw[i] && p->sig_raw_bytes[i] == raw && (!raw || memcmp(p->sig_raw[i], inputs[i].data, raw) == 0);
    if (!same) {
      if (reserve(&p->sig_raw[i], &p->sig_raw_cap[i], raw) != 0 ||
          reserve(&p->fold_buf[v], &p->fold_cap[v], internal) != 0) {
        p->sig_raw_bytes[i] = 0;
        p->val_dirty = 1;
        return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for input '%s' (%zu bytes)",
                       eng_graph_input(g, i)->name, raw);
      }
      if (raw) memcpy(p->sig_raw[i], inputs[i].data, raw);
      p->sig_raw_bytes[i] = raw;
      if (n) eng_plan__to_internal(p->fold_buf[v], &inputs[i], n);
      p->val_dirty = 1;
    }
    t->data = p->fold_buf[v];
    t->bytes = internal;
  }
  return 0;
}

void eng_plan__free_value_inputs(eng_plan *p) {
  for (size_t i = 0; p->sig_raw && i < p->n_inputs; i++) free(p->sig_raw[i]);
  free(p->sig_raw);
  free(p->sig_raw_cap);
  free(p->sig_raw_bytes);
  free(p->val_in);
}
