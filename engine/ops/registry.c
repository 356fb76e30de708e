// engine/ops/registry.c: the one registry both backends read. The families
// live in engine/ops/<family>/ (attributes, shape rule and CPU path in
// <family>.c, the CUDA path in <family>_cuda.c); engine/ops/families.h lists
// them once. Here: the family walk (eng_ops__family_find) that
// eng_ops_cpu_find and the CUDA lookup (registry_cuda.c) both use, the CPU
// lookup itself, Constant (folded at load, no run), constant folding's run
// (eng_ops_cpu_fold) and the loader's question (eng_ops_supported).
#include "engine/ops/ops.h"

#include <stddef.h>
#include <string.h>

#include "engine/ops/families.h"
#include "engine/ops/ops_common.h"
#include "engine/ops/ops_table.h"

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
