// engine/ops/ops_table.h: what the graph loader asks of the op tables, and no
// more: whether an op type (default domain) is supported at all. load.c
// includes this instead of engine/ops/ops.h, so the dependency between the two runs
// one way: the ops (engine/ops/ops.h, whose parse functions read eng_nodes) build on
// the graph's representation, while the graph knows ops only by name.
#ifndef INFERD_ENGINE_OPS_TABLE_H
#define INFERD_ENGINE_OPS_TABLE_H

// Nonzero when op_type has an entry in the CPU registry (engine/ops/registry.c's
// walk over the families of engine/ops/families.h, the reference path every
// model can run on). Constant is listed.
int eng_ops_supported(const char *op_type);

#endif
