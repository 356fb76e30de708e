// engine/ops/index/index.h: what the index family's two paths share
// (engine/ops/index/index.c on the CPU, index_cuda.c on the CUDA plan). Not
// a public header.
#ifndef INFERD_ENGINE_OPS_INDEX_H
#define INFERD_ENGINE_OPS_INDEX_H

#include "engine/ops/ops.h"
#include "kernels/base/err.h"

// Transpose's permutation for rank r (reversed when no perm is given).
int eng_ops__get_perm(const eng_op_params *p, int r, int *perm, err *e);

// ScatterElements, Scatter, ScatterND (index_scatter.c), listed in index.c's table.
int eng_ops__parse_scatter(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_scatter_elements(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                    int n_out, err *e);
int eng_ops__run_scatter_elements(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                  int n_out, err *e);
int eng_ops__infer_scatter_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                              err *e);
int eng_ops__run_scatter_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                            err *e);
// DepthToSpace, SpaceToDepth, EyeLike (index_space.c), listed in index.c's table.
int eng_ops__parse_space(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_space(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_space(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__parse_eyelike(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_eyelike(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e);
int eng_ops__run_eyelike(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                         err *e);
int eng_ops__parse_revseq(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_revseq(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e);
int eng_ops__run_revseq(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e);
// Tile and OneHot (index_space.c, CPU only)
int eng_ops__infer_tile(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__parse_onehot(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e);
int eng_ops__run_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

#endif
