// engine/ops/index/index.h: what the index family's files share (index.c and
// its table with index_gather.c, index_shape.c, index_scatter.c and
// index_space.c on the CPU; index_cuda.c on the CUDA plan). Not a public
// header.
#ifndef INFERD_ENGINE_OPS_INDEX_H
#define INFERD_ENGINE_OPS_INDEX_H

#include "engine/ops/ops.h"
#include "kernels/base/err.h"

// Transpose's permutation for rank r (reversed when no perm is given).
int eng_ops__get_perm(const eng_op_params *p, int r, int *perm, err *e);

// Gather, GatherElements, GatherND (index_gather.c), listed in index.c's table.
int eng_ops__parse_gather(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_gather(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_gather(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__infer_gather_elements(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                   int n_out, err *e);
int eng_ops__run_gather_elements(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                 int n_out, err *e);
int eng_ops__parse_gather_nd(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_gather_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e);
int eng_ops__run_gather_nd(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e);
// Shape, Size, Slice, ConstantOfShape, Range, Expand (index_shape.c), listed in index.c's table.
int eng_ops__parse_shape(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__infer_size(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_size(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__parse_slice(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_slice(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_slice(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
// Slice per dim of the data (in[1..4] read on the host): first index, step and result length; the CPU
// path's and the CUDA path's (index_cuda.c) one rule.
int eng_ops__slice_dims(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *first, int64_t *steps,
                        int64_t *y, err *e);
int eng_ops__parse_const_of_shape(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_const_of_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                  int n_out, err *e);
int eng_ops__run_const_of_shape(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                                err *e);
int eng_ops__infer_range(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_range(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__infer_expand(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e);
int eng_ops__run_expand(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
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
// Tile (its CUDA path in index_cuda.c) and OneHot (CPU only), in index_space.c
int eng_ops__infer_tile(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_tile(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__parse_onehot(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e);
int eng_ops__run_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

#endif
