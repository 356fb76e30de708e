#!/usr/bin/env python3
"""Writes small image classifiers whose inputs arrive the way camera and preprocessing pipelines
send them, with the model's own front doing the normalisation (the vision issue: "Images arrive as
FP32, FP16 or UINT8 tensors"):

  camera_uint8  image UINT8 [N,H,W,3] (NHWC, as a camera frame is laid out)
                -> Transpose to NCHW -> Cast to float -> Div 255 -> Sub mean -> Div std -> net
  camera_uint8_hwc  the same input normalised before the Transpose: Cast -> Mul 1/255 -> Sub/Div by
                [3]-shaped mean/std (broadcast along the channel-last axis) -> Transpose -> net
  camera_fp16   image FP16 [N,3,H,W] (a GPU preprocessing stage's half-precision planes)
                -> Cast to float -> Sub mean -> Div std -> net -> Cast the logits to FP16

net: Conv(3->8, 3x3, pad 1) Relu MaxPool 2 / Conv(8->16, 3x3, pad 1) Relu / GlobalAveragePool
Flatten Gemm(16->10). H != W so a transposed layout cannot pass by symmetry. Built with the onnx
helper (CI has no torch), weights seeded, no config.pbtxt: the server auto-completes them.

    python camera.py --out REPO
"""

import argparse
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

H, W = 40, 56
CLASSES = 10
OPSET = 17
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)  # the ImageNet normalisation
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name=name)


def _net(rng, x, nodes, inits):
    """Appends the small conv net reading NCHW float x; returns the logits' value name."""
    def w(name, *shape):
        fan = int(np.prod(shape[1:]))
        inits.append(_init(name, (rng.standard_normal(shape) * np.sqrt(2.0 / fan)).astype(np.float32)))

    w("c1_w", 8, 3, 3, 3)
    inits.append(_init("c1_b", rng.normal(0, 0.1, 8).astype(np.float32)))
    w("c2_w", 16, 8, 3, 3)
    inits.append(_init("c2_b", rng.normal(0, 0.1, 16).astype(np.float32)))
    inits.append(_init("fc_w", (rng.standard_normal((CLASSES, 16)) / 4).astype(np.float32)))
    inits.append(_init("fc_b", rng.normal(0, 0.1, CLASSES).astype(np.float32)))
    nodes += [
        helper.make_node("Conv", [x, "c1_w", "c1_b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2_w", "c2_b"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits_f32"], transB=1),
    ]
    return "logits_f32"


def _model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="inferd-camera")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def uint8_nhwc(seed=0):
    rng = np.random.default_rng(seed)
    inits = [_init("k255", np.array(255, np.float32)), _init("mean", MEAN), _init("std", STD)]
    nodes = [
        helper.make_node("Transpose", ["image"], ["nchw_u8"], perm=[0, 3, 1, 2]),
        helper.make_node("Cast", ["nchw_u8"], ["nchw"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["nchw", "k255"], ["unit"]),
        helper.make_node("Sub", ["unit", "mean"], ["centred"]),
        helper.make_node("Div", ["centred", "std"], ["x"]),
    ]
    y = _net(rng, "x", nodes, inits)
    nodes.append(helper.make_node("Identity", [y], ["logits"]))
    return _model("camera_uint8", nodes, [helper.make_tensor_value_info("image", TensorProto.UINT8, ["N", H, W, 3])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])], inits)


def uint8_nhwc_norm_first(seed=2):
    rng = np.random.default_rng(seed)
    inits = [_init("inv255", np.array([1 / 255], np.float32)), _init("mean", MEAN.reshape(3)),
             _init("std", STD.reshape(3))]
    nodes = [
        helper.make_node("Cast", ["image"], ["nhwc"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["nhwc", "inv255"], ["unit"]),
        helper.make_node("Sub", ["unit", "mean"], ["centred"]),
        helper.make_node("Div", ["centred", "std"], ["norm"]),
        helper.make_node("Transpose", ["norm"], ["x"], perm=[0, 3, 1, 2]),
    ]
    y = _net(rng, "x", nodes, inits)
    nodes.append(helper.make_node("Identity", [y], ["logits"]))
    return _model("camera_uint8_hwc", nodes, [helper.make_tensor_value_info("image", TensorProto.UINT8, ["N", H, W, 3])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])], inits)


def fp16_nchw(seed=1):
    rng = np.random.default_rng(seed)
    inits = [_init("mean", MEAN), _init("std", STD)]
    nodes = [
        helper.make_node("Cast", ["image"], ["nchw"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["nchw", "mean"], ["centred"]),
        helper.make_node("Div", ["centred", "std"], ["x"]),
    ]
    y = _net(rng, "x", nodes, inits)
    nodes.append(helper.make_node("Cast", [y], ["logits"], to=TensorProto.FLOAT16))
    return _model("camera_fp16", nodes, [helper.make_tensor_value_info("image", TensorProto.FLOAT16, ["N", 3, H, W])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT16, ["N", CLASSES])], inits)


# name -> (builder, input name, numpy dtype, per-item shape, output numpy dtype)
MODELS = {
    "camera_uint8": (uint8_nhwc, "image", np.uint8, [H, W, 3], np.float32),
    "camera_uint8_hwc": (uint8_nhwc_norm_first, "image", np.uint8, [H, W, 3], np.float32),
    "camera_fp16": (fp16_nchw, "image", np.float16, [3, H, W], np.float16),
}


def images(name, rng, rows):
    """A batch of inputs the way the pipeline would send them: whole-range bytes, or [0,1] halves."""
    _, _, dt, shape, _ = MODELS[name]
    if dt == np.uint8:
        return rng.integers(0, 256, [rows] + shape, dtype=np.uint8)
    return rng.random([rows] + shape).astype(dt)


def write_repo(out, names=None):
    """REPO/<name>/1/model.onnx for each model, no config.pbtxt; returns the MODELS entries written."""
    names = names or list(MODELS)
    for n in names:
        d = os.path.join(out, n, "1")
        os.makedirs(d, exist_ok=True)
        onnx.save(MODELS[n][0](), os.path.join(d, "model.onnx"))
    return {n: MODELS[n] for n in names}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    print(json.dumps(sorted(write_repo(a.out))))


if __name__ == "__main__":
    main()
