// engine/ops/gemm/gemm.h: the shape rule the matrix products' two paths
// share (engine/ops/gemm/gemm.c on the CPU, gemm_cuda.c on the CUDA plan).
// Not a public header.
#ifndef INFERD_ENGINE_OPS_GEMM_H
#define INFERD_ENGINE_OPS_GEMM_H

#include <stdint.h>

#include "engine/tensor.h"
#include "kernels/base/err.h"

// MatMul with numpy semantics: [batch..., m, k] x [batch..., k, n].
typedef struct eng_mm_shape {
  int64_t m, k, n;
  int nb;  // batch rank
  int64_t batch[ENG_MAX_DIMS], abatch[ENG_MAX_DIMS], bbatch[ENG_MAX_DIMS];
} eng_mm_shape;

// a x b's shape in *s, and y's type and dims when y is not NULL; an error when they do not multiply.
int eng_ops__mm_analyse(const eng_tensor *a, const eng_tensor *b, eng_mm_shape *s, eng_tensor *y,
                        err *e);

// Einsum (einsum.c), listed in gemm.c's table.
typedef struct eng_op_params eng_op_params;
typedef struct eng_graph eng_graph;
typedef struct eng_node eng_node;
int eng_ops__parse_einsum(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_einsum(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_einsum(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
// DFT (dft.c), listed in gemm.c's table.
int eng_ops__parse_dft(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_dft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_dft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
// STFT (dft.c), listed in gemm.c's table.
int eng_ops__parse_stft(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_stft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_stft(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
// HannWindow, HammingWindow, BlackmanWindow (window.c), listed in gemm.c's table.
int eng_ops__parse_window(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_window(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_window(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
// Det (det.c), listed in gemm.c's table.
int eng_ops__infer_det(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_det(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
// RNN, GRU, LSTM (rnn.c), listed in gemm.c's table.
int eng_ops__parse_rnn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_rnn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_rnn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

#endif
