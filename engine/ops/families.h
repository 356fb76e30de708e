// engine/ops/families.h: every op family, listed once. Both backends expand
// the list: the CPU registry (engine/ops/registry.c, eng_ops_cpu_find) into the
// families' CPU tables, the CUDA one (engine/ops/registry_cuda.c,
// eng_cuda__find_op) into their CUDA tables, and both look an op up with
// the same walk (eng_ops__family_find). Adding a family is one line here,
// plus its folder engine/ops/<name>/ with:
//   <name>.c       const eng_op_def eng_ops__<name>[]; const size_t eng_ops__n_<name>;
//   <name>_cuda.c  const cuda_op eng_cuda__<name>_ops[]; const size_t eng_cuda__n_<name>_ops;
// and its files in engine/ops/ops.cmake. An op type belongs to one family.
#ifndef INFERD_ENGINE_OPS_FAMILIES_H
#define INFERD_ENGINE_OPS_FAMILIES_H

#include <stddef.h>

// X(name) once per family, in lookup order.
#define ENG_OPS_FAMILIES(X) \
  X(gemm)                   \
  X(elem)                   \
  X(norm)                   \
  X(index)                  \
  X(reduce)                 \
  X(resize)                 \
  X(conv)                   \
  X(attn)                   \
  X(ctrl)                   \
  X(select)                 \
  X(ml)

// One family's table as a backend lists it: *n entries of `stride` bytes,
// each starting with its `const char *op_type` (eng_op_def, cuda_op). n
// points at the family file's count, which is no constant expression here.
typedef struct eng_ops_family {
  const char *name;
  const void *ops;
  const size_t *n;
  size_t stride;
} eng_ops_family;

#define ENG_OPS_FAMILY(name, table, count) {#name, (table), &(count), sizeof (table)[0]}

// The entry whose op_type is op_type, searching the families in order; NULL when none has it.
const void *eng_ops__family_find(const eng_ops_family *fams, size_t n_fams, const char *op_type);

#endif
