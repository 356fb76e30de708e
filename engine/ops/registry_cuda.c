// engine/ops/registry_cuda.c: the CUDA side of the one op registry
// (registry.c): the families of engine/ops/families.h expanded into their
// CUDA tables (eng_cuda__<family>_ops, in <family>_cuda.c) and walked as the
// CPU's are (eng_ops__family_find). Built into the CUDA plan's library; the
// plan looks ops up here (eng_cuda__find_op, plan_cuda_internal.h).
#include <stddef.h>
#include <string.h>

#include "engine/cuda/plan_cuda_internal.h"
#include "engine/ops/families.h"

// eng_ops__family_find reads each entry's name as its first member.
_Static_assert(offsetof(cuda_op, op_type) == 0, "cuda_op must start with op_type");

#define CUDA_FAMILY(f) ENG_OPS_FAMILY(f, eng_cuda__##f##_ops, eng_cuda__n_##f##_ops),
static const eng_ops_family cuda_families[] = {ENG_OPS_FAMILIES(CUDA_FAMILY)};
#undef CUDA_FAMILY

const cuda_op *eng_cuda__find_op(const char *op_type) {
  return eng_ops__family_find(cuda_families, sizeof cuda_families / sizeof cuda_families[0], op_type);
}
