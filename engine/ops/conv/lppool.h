// engine/ops/conv/lppool.h: LpPool (lppool.c), listed in conv.c's table. Not a public header.
#ifndef INFERD_ENGINE_OPS_CONV_LPPOOL_H
#define INFERD_ENGINE_OPS_CONV_LPPOOL_H

#include "engine/ops/ops.h"

int eng_ops__parse_lppool(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_lppool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e);
int eng_ops__run_lppool(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e);

#endif
