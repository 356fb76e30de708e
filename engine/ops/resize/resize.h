// engine/ops/resize/resize.h: the resize op family (engine/ops/resize/resize.c: Pad, Resize,
// Upsample) as the other backends reuse it: the ONNX rules that turn the
// operands read at planning (pads, axes, scales, sizes; host_in) into the
// numbers the kernels take, one definition for the CPU op and its CUDA
// side (engine/ops/resize/resize_cuda.c). The parse functions leave p->mode (a k_padmode
// for Pad, an eng_resize_mode for Resize/Upsample), p->coord (k_coord) and
// p->nearest (k_nearest). Not a public header.
#ifndef INFERD_ENGINE_OPS_RESIZE_H
#define INFERD_ENGINE_OPS_RESIZE_H

#include <stdint.h>

#include "engine/ops/ops.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"

typedef enum eng_resize_mode { ENG_RESIZE_NEAREST, ENG_RESIZE_LINEAR, ENG_RESIZE_CUBIC } eng_resize_mode;

// Pad: begin pads b and end pads en per dim of in[0] (negative ones crop),
// and the result shape y; in[1] (pads) and in[3] (axes) must be readable
// host bytes when given (opset 11+), else the attribute's pads are used.
int eng_ops__pad_dims(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *b,
                      int64_t *en, int64_t *y, err *e);

// Resize/Upsample: per-dim scales of the resize of in[0] to the shape y
// (the inferred output shape): out / in when sizes gave it, else the scales
// input (host bytes) or Upsample's attribute.
int eng_ops__resize_scales(const eng_op_params *p, const eng_tensor *in, int n_in,
                           const int64_t *y, float *scales, err *e);

// CenterCropPad, AffineGrid and RoiAlign (resize_grid.c), listed in resize.c's table.
// CenterCropPad's parse is op_parse_node (ops_common.h: axes read from the
// node); AffineGrid's keeps align_corners in p->coord.
int eng_ops__parse_affine_grid(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_center_crop_pad(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                   int n_out, err *e);
int eng_ops__run_center_crop_pad(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                 int n_out, err *e);
int eng_ops__infer_affine_grid(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                               err *e);
int eng_ops__parse_roi_align(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_roi_align(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e);
int eng_ops__run_roi_align(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e);
int eng_ops__run_affine_grid(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e);

#endif
