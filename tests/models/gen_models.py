#!/usr/bin/env python3
"""Writes the ONNX model repositories that inferd's examples and integration tests serve.

Why a generator rather than checked-in .onnx files: the weights are random but
seeded, so the repository is reproducible, reviewable as code, and the tests can
build a fresh one in a temporary directory on every run.

    python gen_models.py --out DIR [--set example|test|batching] [--spec-out FILE]

`--set example` writes only the models a README run command needs; `--set test`
(the default) writes every model, including the ones that must fail to load;
`--set batching` writes the dynamic-batching models (complete configs with
their own schedulers, a deliberately slow model) that test_batching.py serves.
The spec (one entry per model: inputs, outputs, versions, tolerances, expected
state) is returned by generate() and, with --spec-out, written as JSON, so tests
can draw random inputs of the right shape and dtype without guessing.
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_OPSET = 17
GELU_OPSET = 20  # Gelu entered the default domain in opset 20
# IR versions that match the opsets, so older readers (and ours) accept the files.
IR_FOR_OPSET = {17: 8, 20: 9}

NP_TO_ONNX = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64}
WIRE_OF_ONNX = {TensorProto.FLOAT: "FP32", TensorProto.FLOAT16: "FP16", TensorProto.INT64: "INT64",
                TensorProto.INT32: "INT32"}
TRITON_OF_WIRE = {"FP32": "TYPE_FP32", "FP16": "TYPE_FP16", "INT64": "TYPE_INT64", "INT32": "TYPE_INT32"}

# Every op the op-coverage models must contain between them (checked by the tests).
REQUIRED_OPS = [
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu",
    "Softmax", "LogSoftmax", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Concat",
    "Identity", "Dropout", "Cast", "Constant", "LayerNormalization", "BatchNormalization",
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
    # vision exporters (ops_vision_misc, ops_shape_fold)
    "Clip", "HardSigmoid", "HardSwish", "Sqrt", "Exp", "Neg", "Abs", "Reciprocal", "Pow", "Max", "Min",
    "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "Pad", "Resize", "Shape", "Gather", "Slice",
    "ConstantOfShape", "Range", "Equal", "Where", "Expand",
]


# --- small helpers

def _w(rng, *shape, fan_in=None, dtype=np.float32):
    """Random weights scaled ~1/sqrt(fan_in) so activations stay O(1) through the layers."""
    fan = fan_in if fan_in is not None else (shape[-1] if shape else 1)
    return (rng.standard_normal(shape) / np.sqrt(max(fan, 1))).astype(dtype)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name=name)


def _vi(name, elem, dims):
    """Value info; a None in dims becomes the symbolic batch dimension 'N'."""
    return helper.make_tensor_value_info(name, elem, ["N" if d is None else d for d in dims])


def _model(graph_name, nodes, inputs, outputs, inits, opset=DEFAULT_OPSET):
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="inferd-gen_models")
    m.ir_version = IR_FOR_OPSET[opset]
    onnx.checker.check_model(m, full_check=True)
    return m


def _tensor_cfg(kind, name, wire, dims):
    return ("  {\n    name: \"%s\"\n    data_type: %s\n    dims: [ %s ]\n  }"
            % (name, TRITON_OF_WIRE[wire], ", ".join(str(d) for d in dims)))


def _config(name, mbs, inputs, outputs, extra="", backend_line='backend: "onnxruntime"'):
    """Triton-style config.pbtxt text; dims exclude the batch dim when mbs > 0."""
    parts = ['name: "%s"' % name, backend_line, "max_batch_size: %d" % mbs]
    parts.append("input [\n%s\n]" % ",\n".join(_tensor_cfg("input", i["name"], i["datatype"], i["dims"])
                                              for i in inputs))
    parts.append("output [\n%s\n]" % ",\n".join(_tensor_cfg("output", o["name"], o["datatype"], o["dims"])
                                               for o in outputs))
    if extra:
        parts.append(extra.strip())
    return "\n".join(parts) + "\n"


def _io(name, wire, dims, low=-1.0, high=1.0):
    return {"name": name, "datatype": wire, "dims": list(dims), "low": low, "high": high}


def _out(name, wire, dims):
    return {"name": name, "datatype": wire, "dims": list(dims)}


def _write(path, text_or_bytes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(text_or_bytes, bytes) else "w"
    with open(path, mode) as f:
        f.write(text_or_bytes)


class Repo:
    """Collects models into DIR and their specs into a dict."""

    def __init__(self, out):
        self.out = out
        self.specs = {}

    def add(self, name, mbs, inputs, outputs, versions, *, config=None, config_extra="", filename="model.onnx",
            ready_versions=None, default_version=None, rtol=1e-5, expect="READY", reason=None,
            backend_line='backend: "onnxruntime"', external_data=False, opset=DEFAULT_OPSET):
        """versions: {int version: onnx.ModelProto or None (empty version dir)}."""
        mdir = os.path.join(self.out, name)
        os.makedirs(mdir, exist_ok=True)
        for v, model in versions.items():
            vdir = os.path.join(mdir, str(v))
            os.makedirs(vdir, exist_ok=True)
            if model is None:
                continue
            path = os.path.join(vdir, filename)
            if external_data:
                onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                                location="weights.bin", size_threshold=0)
            else:
                onnx.save_model(model, path)
        if config is None:  # False means: write no config.pbtxt
            config = _config(name, mbs, inputs, outputs, config_extra, backend_line)
        if config:
            _write(os.path.join(mdir, "config.pbtxt"), config)
        if ready_versions is None:
            ready_versions = [max(versions)] if expect == "READY" else []
        self.specs[name] = {
            "name": name,
            "max_batch_size": mbs,
            "inputs": inputs,
            "outputs": outputs,
            "versions": sorted(versions),
            "ready_versions": sorted(ready_versions),
            "default_version": default_version if default_version is not None else
            (max(ready_versions) if ready_versions else None),
            "filename": filename,
            "rtol": rtol,
            "expect": expect,
            "reason": reason,
            "has_config": bool(config),
            "opset": opset,
        }


# --- the models

def add_mlp(repo):
    rng = np.random.default_rng(1234)
    w1, b1 = _w(rng, 512, 1024), _w(rng, 512, fan_in=1024)
    w2, b2 = _w(rng, 10, 512), _w(rng, 10, fan_in=512)
    nodes = [
        helper.make_node("Gemm", ["INPUT0", "W1", "B1"], ["h1"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
        helper.make_node("Gemm", ["a1", "W2", "B2"], ["OUTPUT0"], transB=1, name="fc2"),
    ]
    m = _model("mlp", nodes, [_vi("INPUT0", TensorProto.FLOAT, [None, 1024])],
               [_vi("OUTPUT0", TensorProto.FLOAT, [None, 10])],
               [_init("W1", w1), _init("B1", b1), _init("W2", w2), _init("B2", b2)])
    repo.add("mlp", 64, [_io("INPUT0", "FP32", [1024])], [_out("OUTPUT0", "FP32", [10])], {1: m},
             config_extra="dynamic_batching { }", backend_line='platform: "onnxruntime_onnx"')


def add_ops_gemm(repo):
    """Gemm with alpha/beta and every transA/transB combination; Transpose feeds the transA forms."""
    rng = np.random.default_rng(11)
    K = 16
    nodes = [
        helper.make_node("Gemm", ["GEMM_X", "G1_B", "G1_C"], ["GEMM_NN"], alpha=0.5, beta=2.0),
        helper.make_node("Gemm", ["GEMM_X", "G2_B", "G2_C"], ["GEMM_NT"], transB=1, alpha=1.5, beta=0.25),
        helper.make_node("Transpose", ["GEMM_X"], ["xt"], perm=[1, 0]),
        helper.make_node("Gemm", ["xt", "G3_B"], ["GEMM_TN"], transA=1),
        helper.make_node("Gemm", ["xt", "G4_B", "G4_C"], ["GEMM_TT"], transA=1, transB=1, alpha=-0.75, beta=1.0),
    ]
    inits = [
        _init("G1_B", _w(rng, K, 12, fan_in=K)), _init("G1_C", _w(rng, 12, fan_in=1)),
        _init("G2_B", _w(rng, 8, K)), _init("G2_C", _w(rng, 1, 8, fan_in=1)),
        _init("G3_B", _w(rng, K, 6, fan_in=K)),
        _init("G4_B", _w(rng, 5, K)), _init("G4_C", np.array(0.3, dtype=np.float32)),  # scalar C broadcasts
    ]
    outs = [("GEMM_NN", 12), ("GEMM_NT", 8), ("GEMM_TN", 6), ("GEMM_TT", 5)]
    m = _model("ops_gemm", nodes, [_vi("GEMM_X", TensorProto.FLOAT, [None, K])],
               [_vi(n, TensorProto.FLOAT, [None, d]) for n, d in outs], inits)
    repo.add("ops_gemm", 8, [_io("GEMM_X", "FP32", [K])], [_out(n, "FP32", [d]) for n, d in outs], {1: m},
             config_extra="dynamic_batching { }\ninstance_group [\n  {\n    count: 1\n    kind: KIND_CPU\n  }\n]")


def add_ops_elementwise(repo):
    """Binary ops with broadcasting ([N,4,6] with [N,1,6] and with a constant [6]) and the unary activations."""
    rng = np.random.default_rng(12)
    one = helper.make_tensor("one_val", TensorProto.FLOAT, [], [1.0])
    nodes = [
        helper.make_node("Add", ["ELT_A", "ELT_B"], ["ELT_ADD"]),
        helper.make_node("Sub", ["ELT_A", "ELT_C"], ["ELT_SUB"]),
        helper.make_node("Mul", ["ELT_A", "ELT_B"], ["ELT_MUL"]),
        # Denominator B*B + 1 >= 1, so any random input divides safely; the 1 comes from a Constant node.
        helper.make_node("Constant", [], ["one"], value=one),
        helper.make_node("Mul", ["ELT_B", "ELT_B"], ["bb"]),
        helper.make_node("Add", ["bb", "one"], ["den"]),
        helper.make_node("Div", ["ELT_A", "den"], ["ELT_DIV"]),
        helper.make_node("Relu", ["ELT_A"], ["ELT_RELU"]),
        helper.make_node("LeakyRelu", ["ELT_A"], ["ELT_LEAKY"], alpha=0.1),
        helper.make_node("Sigmoid", ["ELT_A"], ["ELT_SIGMOID"]),
        helper.make_node("Tanh", ["ELT_A"], ["ELT_TANH"]),
        helper.make_node("Erf", ["ELT_A"], ["ELT_ERF"]),
        helper.make_node("Dropout", ["ELT_A", "drop_ratio"], ["dropped"]),  # inference: identity
        helper.make_node("Identity", ["dropped"], ["ELT_IDENT"]),
    ]
    inits = [_init("ELT_C", _w(rng, 6, fan_in=1)), _init("drop_ratio", np.array(0.5, dtype=np.float32))]
    out_names = ["ELT_ADD", "ELT_SUB", "ELT_MUL", "ELT_DIV", "ELT_RELU", "ELT_LEAKY", "ELT_SIGMOID",
                 "ELT_TANH", "ELT_ERF", "ELT_IDENT"]
    m = _model("ops_elementwise", nodes,
               [_vi("ELT_A", TensorProto.FLOAT, [None, 4, 6]), _vi("ELT_B", TensorProto.FLOAT, [None, 1, 6])],
               [_vi(n, TensorProto.FLOAT, [None, 4, 6]) for n in out_names], inits)
    repo.add("ops_elementwise", 8, [_io("ELT_A", "FP32", [4, 6], -3, 3), _io("ELT_B", "FP32", [1, 6], -2, 2)],
             [_out(n, "FP32", [4, 6]) for n in out_names], {1: m})


def add_ops_matmul(repo):
    """Batched MatMul 3-D x 3-D, broadcasting 3-D x 2-D, Softmax on the last axis, LogSoftmax on axis 1."""
    rng = np.random.default_rng(13)
    nodes = [
        helper.make_node("MatMul", ["MM_A", "MM_B"], ["MM_BMM"]),
        helper.make_node("Softmax", ["MM_BMM"], ["MM_SOFTMAX"], axis=-1),
        helper.make_node("MatMul", ["MM_A", "MM_W"], ["MM_BCAST"]),
        helper.make_node("LogSoftmax", ["MM_BCAST"], ["MM_LOGSOFTMAX"], axis=1),
    ]
    m = _model("ops_matmul", nodes,
               [_vi("MM_A", TensorProto.FLOAT, [None, 5, 7]), _vi("MM_B", TensorProto.FLOAT, [None, 7, 4])],
               [_vi("MM_BMM", TensorProto.FLOAT, [None, 5, 4]), _vi("MM_SOFTMAX", TensorProto.FLOAT, [None, 5, 4]),
                _vi("MM_BCAST", TensorProto.FLOAT, [None, 5, 6]),
                _vi("MM_LOGSOFTMAX", TensorProto.FLOAT, [None, 5, 6])],
               [_init("MM_W", _w(rng, 7, 6, fan_in=7))])
    repo.add("ops_matmul", 4, [_io("MM_A", "FP32", [5, 7]), _io("MM_B", "FP32", [7, 4])],
             [_out("MM_BMM", "FP32", [5, 4]), _out("MM_SOFTMAX", "FP32", [5, 4]),
              _out("MM_BCAST", "FP32", [5, 6]), _out("MM_LOGSOFTMAX", "FP32", [5, 6])], {1: m},
             config_extra="dynamic_batching { }")


def add_ops_shape(repo):
    """Flatten, Reshape (0 and -1, shape from a Constant node), Unsqueeze/Squeeze, Transpose, Concat, Casts."""
    shape = helper.make_tensor("shape_val", TensorProto.INT64, [3], [0, -1, 4])
    ten = helper.make_tensor("ten_val", TensorProto.FLOAT, [], [10.0])
    nodes = [
        helper.make_node("Flatten", ["SHP_X"], ["SHP_FLAT"], axis=1),
        helper.make_node("Constant", [], ["shape"], value=shape),
        helper.make_node("Reshape", ["SHP_X", "shape"], ["SHP_RESHAPE"]),
        helper.make_node("Unsqueeze", ["SHP_X", "axes1"], ["SHP_UNSQ"]),
        helper.make_node("Squeeze", ["SHP_UNSQ", "axes1"], ["SHP_SQ"]),
        helper.make_node("Transpose", ["SHP_SQ"], ["SHP_TRANSPOSE"], perm=[0, 3, 1, 2]),
        helper.make_node("Flatten", ["SHP_TRANSPOSE"], ["flat_t"], axis=1),
        helper.make_node("Concat", ["SHP_FLAT", "flat_t"], ["SHP_CONCAT"], axis=1),
        helper.make_node("Cast", ["SHP_X"], ["x16"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["x16"], ["SHP_FP16_RT"], to=TensorProto.FLOAT),
        helper.make_node("Constant", [], ["ten"], value=ten),
        helper.make_node("Mul", ["SHP_X", "ten"], ["x10"]),
        helper.make_node("Cast", ["x10"], ["SHP_I64"], to=TensorProto.INT64),  # truncates toward zero
        helper.make_node("Cast", ["SHP_I64"], ["SHP_I64_RT"], to=TensorProto.FLOAT),
    ]
    outs = [("SHP_FLAT", TensorProto.FLOAT, [24]), ("SHP_RESHAPE", TensorProto.FLOAT, [6, 4]),
            ("SHP_UNSQ", TensorProto.FLOAT, [1, 2, 3, 4]), ("SHP_TRANSPOSE", TensorProto.FLOAT, [4, 2, 3]),
            ("SHP_CONCAT", TensorProto.FLOAT, [48]), ("SHP_FP16_RT", TensorProto.FLOAT, [2, 3, 4]),
            ("SHP_I64", TensorProto.INT64, [2, 3, 4]), ("SHP_I64_RT", TensorProto.FLOAT, [2, 3, 4])]
    m = _model("ops_shape", nodes, [_vi("SHP_X", TensorProto.FLOAT, [None, 2, 3, 4])],
               [_vi(n, t, [None] + d) for n, t, d in outs], [_init("axes1", np.array([1], dtype=np.int64))])
    repo.add("ops_shape", 8, [_io("SHP_X", "FP32", [2, 3, 4], -4, 4)],
             [_out(n, WIRE_OF_ONNX[t], d) for n, t, d in outs], {1: m})


def add_ops_vision_misc(repo):
    """The elementwise, reduction and spatial ops of vision classifiers on one NCHW input, each output
    checked against onnxruntime: activations (Clip as ReLU6, HardSigmoid, HardSwish), unary math,
    Pow, variadic Max/Min, Reduce*, Pad in three modes, Resize nearest/linear, Equal/Where, Gather,
    Slice and Expand."""
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    f32 = lambda *v: np.array(v, dtype=np.float32)  # noqa: E731
    n = helper.make_node
    nodes = [
        n("Clip", ["VM_X", "zero", "six"], ["VM_RELU6"], name="relu6"),
        n("HardSigmoid", ["VM_X"], ["VM_HSIG"], alpha=0.25, beta=0.4, name="hsig"),
        n("HardSwish", ["VM_X"], ["VM_HSWISH"], name="hswish"),
        n("Abs", ["VM_X"], ["ax"], name="abs"),
        n("Sqrt", ["ax"], ["sq"], name="sqrt"),
        n("Neg", ["ax"], ["nax"], name="neg"),
        n("Exp", ["nax"], ["ex"], name="exp"),
        n("Add", ["ax", "one"], ["ax1"], name="add1"),
        n("Reciprocal", ["ax1"], ["rc"], name="recip"),
        n("Pow", ["VM_X", "two"], ["pw"], name="pow"),
        n("Max", ["sq", "ex", "rc"], ["VM_MAX"], name="max3"),
        n("Min", ["pw", "row"], ["VM_MIN"], name="min_bcast"),
        n("ReduceMean", ["VM_X"], ["VM_MEAN"], axes=[2, 3], keepdims=1, name="gap"),
        n("ReduceMax", ["VM_X"], ["VM_RMAX"], axes=[1], keepdims=0, name="rmax"),
        n("ReduceMin", ["VM_X"], ["VM_RMIN"], axes=[-1], keepdims=1, name="rmin"),
        n("ReduceSum", ["VM_X", "axes23"], ["VM_RSUM"], keepdims=0, name="rsum"),
        n("Pad", ["VM_X", "pads", "padval"], ["VM_PAD_C"], mode="constant", name="pad_c"),
        n("Pad", ["VM_X", "pads"], ["VM_PAD_R"], mode="reflect", name="pad_r"),
        n("Pad", ["VM_X", "pads"], ["VM_PAD_E"], mode="edge", name="pad_e"),
        n("Resize", ["VM_X", "", "scales2"], ["VM_UP_NEAREST"], mode="nearest",
          coordinate_transformation_mode="asymmetric", nearest_mode="floor", name="up_nearest"),
        n("Resize", ["VM_X", "", "scales2"], ["VM_UP_LINEAR"], mode="linear",
          coordinate_transformation_mode="half_pixel", name="up_linear"),
        n("Resize", ["VM_X", "", "scales_half"], ["VM_DOWN_AC"], mode="linear",
          coordinate_transformation_mode="align_corners", name="down_ac"),
        n("Resize", ["VM_X", "", "scales15"], ["VM_UP_PT"], mode="nearest",
          coordinate_transformation_mode="pytorch_half_pixel", nearest_mode="round_prefer_ceil", name="up_pt"),
        n("Equal", ["sign_i", "one_i"], ["pos"], name="eq"),
        n("Where", ["pos", "VM_X", "pw"], ["VM_WHERE"], name="where"),
        n("Gather", ["VM_X", "gidx"], ["VM_GATHER"], axis=1, name="gather_c"),
        n("Slice", ["VM_X", "sl_s", "sl_e", "sl_a", "sl_st"], ["VM_SLICE"], name="slice"),
        n("Expand", ["VM_MEAN", "exp_shape"], ["VM_EXPAND"], name="expand"),
    ]
    # sign_i: 1 where x > 1e-6, else 0, as Cast(Clip(x * 1e6, 0, 1)) to int64 (truncating)
    nodes[0:0] = [
        n("Mul", ["VM_X", "big"], ["xb"], name="scale_sign"),
        n("Clip", ["xb", "zero", "onef"], ["xb01"], name="clip01"),
        n("Cast", ["xb01"], ["sign_i"], to=TensorProto.INT64, name="sign"),
    ]
    inits = [_init("zero", f32(0)), _init("six", f32(0.6)), _init("one", f32(1)), _init("two", f32(2)),
             _init("row", np.linspace(-0.5, 0.5, 8, dtype=np.float32)), _init("axes23", i64(2, 3)),
             _init("pads", i64(0, 0, 1, 2, 0, 0, 2, 1)), _init("padval", f32(0.5)),
             _init("scales2", f32(1, 1, 2, 2)), _init("scales_half", f32(1, 1, 0.5, 0.75)),
             _init("scales15", f32(1, 1, 1.5, 1.5)), _init("one_i", i64(1)), _init("gidx", i64(2, -3)),
             _init("sl_s", i64(-1, 1)), _init("sl_e", i64(-9, 7)), _init("sl_a", i64(3, 2)),
             _init("sl_st", i64(-2, 2)), _init("exp_shape", i64(1, 3, 1, 2)), _init("big", f32(1e6)),
             _init("onef", f32(1))]
    outs = [("VM_RELU6", [3, 8, 8]), ("VM_HSIG", [3, 8, 8]), ("VM_HSWISH", [3, 8, 8]), ("VM_MAX", [3, 8, 8]),
            ("VM_MIN", [3, 8, 8]), ("VM_MEAN", [3, 1, 1]), ("VM_RMAX", [8, 8]), ("VM_RMIN", [3, 8, 1]),
            ("VM_RSUM", [3]), ("VM_PAD_C", [3, 11, 11]), ("VM_PAD_R", [3, 11, 11]), ("VM_PAD_E", [3, 11, 11]),
            ("VM_UP_NEAREST", [3, 16, 16]), ("VM_UP_LINEAR", [3, 16, 16]), ("VM_DOWN_AC", [3, 4, 6]),
            ("VM_UP_PT", [3, 12, 12]), ("VM_WHERE", [3, 8, 8]), ("VM_GATHER", [2, 8, 8]),
            ("VM_SLICE", [3, 3, 4]), ("VM_EXPAND", [3, 1, 2])]
    m = _model("ops_vision_misc", nodes, [_vi("VM_X", TensorProto.FLOAT, [None, 3, 8, 8])],
               [_vi(o, TensorProto.FLOAT, [None] + d) for o, d in outs], inits)
    repo.add("ops_vision_misc", 4, [_io("VM_X", "FP32", [3, 8, 8], -2, 2)],
             [_out(o, "FP32", d) for o, d in outs], {1: m}, rtol=1e-4)


def add_ops_shape_fold(repo):
    """An exporter-style graph whose shape operands are computed from the input's shape at run
    time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Resize sizes from Shape -> Slice -> Mul,
    ConstantOfShape and Range over the batch): the server folds them per batch size."""
    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    n = helper.make_node
    nodes = [
        n("Shape", ["FX"], ["s"], name="/shape"),
        n("Gather", ["s", "zero_i"], ["nb"], axis=0, name="/gather_n"),
        n("Unsqueeze", ["nb", "ax0"], ["nb1"], name="/unsqueeze_n"),
        n("Concat", ["nb1", "minus1"], ["flat_shape"], axis=0, name="/concat_target"),
        n("Clip", ["FX", "lo", "hi"], ["c"], name="/clip"),
        n("HardSigmoid", ["c"], ["hs"], name="/hsig"),
        n("HardSwish", ["hs"], ["hw"], name="/hswish"),
        n("Pad", ["hw", "pads"], ["pd"], mode="reflect", name="/pad"),
        n("Shape", ["pd"], ["ps"], name="/shape_p"),
        n("Slice", ["ps", "s2", "e4"], ["hw_dims"], name="/slice_hw"),
        n("Mul", ["hw_dims", "two_i"], ["hw2"], name="/mul_hw"),
        n("Slice", ["ps", "s0", "s2"], ["nc_dims"], name="/slice_nc"),
        n("Concat", ["nc_dims", "hw2"], ["sizes"], axis=0, name="/concat_sizes"),
        n("Resize", ["pd", "", "", "sizes"], ["up"], mode="nearest",
          coordinate_transformation_mode="asymmetric", nearest_mode="floor", name="/resize"),
        n("Reshape", ["up", "flat_shape"], ["FOLD_FLAT"], name="/reshape"),
        n("ReduceMean", ["up"], ["gap"], axes=[2, 3], keepdims=0, name="/gap"),
        n("Concat", ["nb1", "four"], ["bias_shape"], axis=0, name="/concat_bias"),
        n("ConstantOfShape", ["bias_shape"], ["bias"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.25]),
          name="/const_of_shape"),
        n("Add", ["gap", "bias"], ["FOLD_POOLED"], name="/add_bias"),
        n("Range", ["zero_s", "nb", "one_s"], ["rows"], name="/range"),
        n("Cast", ["rows"], ["rows_f"], to=TensorProto.FLOAT, name="/cast_rows"),
        n("Unsqueeze", ["rows_f", "ax1"], ["rows_col"], name="/unsqueeze_rows"),
        n("Add", ["FOLD_POOLED", "rows_col"], ["FOLD_ROWS"], name="/add_rows"),
    ]
    inits = [_init("zero_i", np.array(0, np.int64)), _init("ax0", i64(0)), _init("ax1", i64(1)), _init("minus1", i64(-1)),
             _init("lo", np.array(-3, np.float32)), _init("hi", np.array(3, np.float32)),
             _init("pads", i64(0, 0, 1, 1, 0, 0, 1, 1)), _init("s0", i64(0)), _init("s2", i64(2)),
             _init("e4", i64(4)), _init("two_i", i64(2)), _init("four", i64(4)),
             _init("zero_s", np.array(0, np.int64)), _init("one_s", np.array(1, np.int64))]
    outs = [("FOLD_FLAT", [4 * 16 * 16]), ("FOLD_POOLED", [4]), ("FOLD_ROWS", [4])]
    m = _model("ops_shape_fold", nodes, [_vi("FX", TensorProto.FLOAT, [None, 4, 6, 6])],
               [_vi(o, TensorProto.FLOAT, [None] + d) for o, d in outs], inits)
    repo.add("ops_shape_fold", 8, [_io("FX", "FP32", [4, 6, 6], -4, 4)],
             [_out(o, "FP32", d) for o, d in outs], {1: m}, rtol=1e-4)


def add_ops_norm(repo):
    """LayerNormalization and BatchNormalization on a fixed-shape, non-batching (max_batch_size 0) model."""
    rng = np.random.default_rng(14)
    nodes = [
        helper.make_node("LayerNormalization", ["NORM_X", "ln_scale", "ln_bias"], ["NORM_LN"], axis=-1,
                         epsilon=1e-5),
        helper.make_node("BatchNormalization", ["NORM_X", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
                         ["NORM_BN"], epsilon=1e-5),
    ]
    inits = [
        _init("ln_scale", (1 + 0.1 * rng.standard_normal(8)).astype(np.float32)),
        _init("ln_bias", (0.1 * rng.standard_normal(8)).astype(np.float32)),
        _init("bn_scale", (1 + 0.1 * rng.standard_normal(5)).astype(np.float32)),
        _init("bn_bias", (0.1 * rng.standard_normal(5)).astype(np.float32)),
        _init("bn_mean", (0.2 * rng.standard_normal(5)).astype(np.float32)),
        _init("bn_var", rng.uniform(0.5, 2.0, 5).astype(np.float32)),
    ]
    m = _model("ops_norm", nodes, [_vi("NORM_X", TensorProto.FLOAT, [2, 5, 8])],
               [_vi("NORM_LN", TensorProto.FLOAT, [2, 5, 8]), _vi("NORM_BN", TensorProto.FLOAT, [2, 5, 8])], inits)
    repo.add("ops_norm", 0, [_io("NORM_X", "FP32", [2, 5, 8], -2, 2)],
             [_out("NORM_LN", "FP32", [2, 5, 8]), _out("NORM_BN", "FP32", [2, 5, 8])], {1: m})


def add_ops_gelu(repo):
    nodes = [
        helper.make_node("Gelu", ["GELU_X"], ["GELU_ERF"], approximate="none"),
        helper.make_node("Gelu", ["GELU_X"], ["GELU_TANH"], approximate="tanh"),
    ]
    m = _model("ops_gelu", nodes, [_vi("GELU_X", TensorProto.FLOAT, [None, 32])],
               [_vi("GELU_ERF", TensorProto.FLOAT, [None, 32]), _vi("GELU_TANH", TensorProto.FLOAT, [None, 32])],
               [], opset=GELU_OPSET)
    repo.add("ops_gelu", 8, [_io("GELU_X", "FP32", [32], -4, 4)],
             [_out("GELU_ERF", "FP32", [32]), _out("GELU_TANH", "FP32", [32])], {1: m}, opset=GELU_OPSET)


def add_ops_conv(repo):
    """The convolution/pooling family on a batching model (dynamic batch dim): a ResNet-like stem
    (7x7 stride 2 conv, 3x3 stride 2 max pool), a depthwise conv with dilation 2, a grouped conv with
    asymmetric pads and no bias, SAME_UPPER/SAME_LOWER/VALID convs, a 1x1 conv, a transposed conv with
    output_padding, pools with ceil_mode and count_include_pad both ways, a 1-D conv, and the global pools."""
    rng = np.random.default_rng(19)
    c = lambda o, i, *k: _w(rng, o, i, *k, fan_in=i * int(np.prod(k)))
    inits = [
        _init("cv_w_stem", c(8, 3, 7, 7)), _init("cv_b_stem", _w(rng, 8, fan_in=1)),
        _init("cv_w_dw", c(8, 1, 3, 3)), _init("cv_b_dw", _w(rng, 8, fan_in=1)),
        _init("cv_w_grp", c(8, 4, 3, 2)),
        _init("cv_w_su", c(6, 8, 4, 4)), _init("cv_b_su", _w(rng, 6, fan_in=1)),
        _init("cv_w_sl", c(6, 8, 2, 3)),
        _init("cv_w_valid", c(4, 6, 3, 3)), _init("cv_b_valid", _w(rng, 4, fan_in=1)),
        _init("cv_w_1x1", c(8, 4, 1, 1)), _init("cv_b_1x1", _w(rng, 8, fan_in=1)),
        _init("cv_w_t", c(8, 3, 3, 3)), _init("cv_b_t", _w(rng, 6, fan_in=1)),
        _init("cv_w_1d", c(4, 3, 5)), _init("cv_b_1d", _w(rng, 4, fan_in=1)),
        _init("cv_shape_1d", np.array([0, 3, 32 * 32], dtype=np.int64)),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["CONV_X", "cv_w_stem", "cv_b_stem"], ["stem"], name="stem", kernel_shape=[7, 7], strides=[2, 2],
          pads=[3, 3, 3, 3]),  # 32 -> 16
        n("Relu", ["stem"], ["stem_r"]),
        n("MaxPool", ["stem_r"], ["pool"], name="stem_pool", kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1]),  # 16 -> 8
        n("Conv", ["pool", "cv_w_dw", "cv_b_dw"], ["dw"], name="depthwise", group=8, dilations=[2, 2],
          pads=[2, 2, 2, 2]),  # 8 -> 8
        n("Conv", ["dw", "cv_w_grp"], ["grp"], name="grouped", group=2, pads=[1, 0, 0, 1], strides=[1, 2]),  # 8x8 -> 7x4
        n("Conv", ["pool", "cv_w_su", "cv_b_su"], ["su"], name="same_upper", auto_pad="SAME_UPPER",
          strides=[2, 2]),  # 8 -> 4
        n("Conv", ["pool", "cv_w_sl"], ["sl"], name="same_lower", auto_pad="SAME_LOWER"),  # 8 -> 8
        n("Conv", ["sl", "cv_w_valid", "cv_b_valid"], ["CONV_VALID"], name="valid", auto_pad="VALID",
          strides=[2, 1]),  # 8x8 -> 3x6
        n("Conv", ["CONV_VALID", "cv_w_1x1", "cv_b_1x1"], ["c1x1"], name="pointwise"),
        n("GlobalAveragePool", ["c1x1"], ["CONV_GAP"]),
        n("ConvTranspose", ["grp", "cv_w_t", "cv_b_t"], ["CONV_T"], name="up", group=2, strides=[2, 2],
          pads=[1, 1, 1, 1], output_padding=[1, 1]),  # 7x4 -> 14x8
        n("MaxPool", ["su"], ["CONV_MAXCEIL"], kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1),  # 4x4 -> 2x2
        n("AveragePool", ["CONV_T"], ["CONV_AVG_INC"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 0],
          ceil_mode=1, count_include_pad=1),  # 14x8 -> 8x4
        n("AveragePool", ["CONV_T"], ["CONV_AVG_EXC"], kernel_shape=[2, 3], strides=[3, 2], pads=[0, 1, 1, 1],
          count_include_pad=0),
        n("GlobalMaxPool", ["dw"], ["CONV_GMP"]),
        n("Reshape", ["CONV_X", "cv_shape_1d"], ["x1d"]),
        n("Conv", ["x1d", "cv_w_1d", "cv_b_1d"], ["CONV_1D"], name="conv1d", strides=[4], dilations=[2],
          pads=[4, 3]),
    ]
    outs = [("CONV_VALID", [4, 3, 6]), ("CONV_GAP", [8, 1, 1]), ("CONV_T", [6, 14, 8]),
            ("CONV_MAXCEIL", [6, 2, 2]), ("CONV_AVG_INC", [6, 8, 4]), ("CONV_AVG_EXC", [6, 5, 4]),
            ("CONV_GMP", [8, 1, 1]), ("CONV_1D", [4, 256])]
    m = _model("ops_conv", nodes, [_vi("CONV_X", TensorProto.FLOAT, [None, 3, 32, 32])],
               [_vi(name, TensorProto.FLOAT, [None] + d) for name, d in outs], inits)
    repo.add("ops_conv", 8, [_io("CONV_X", "FP32", [3, 32, 32])], [_out(name, "FP32", d) for name, d in outs],
             {1: m}, config_extra="dynamic_batching { }", rtol=1e-4)


def add_fp16_io(repo):
    rng = np.random.default_rng(15)
    nodes = [
        helper.make_node("Cast", ["X16"], ["x32"], to=TensorProto.FLOAT),
        helper.make_node("Gemm", ["x32", "F_W", "F_B"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Cast", ["r"], ["Y16"], to=TensorProto.FLOAT16),
    ]
    m = _model("fp16_io", nodes, [_vi("X16", TensorProto.FLOAT16, [None, 64])],
               [_vi("Y16", TensorProto.FLOAT16, [None, 16])],
               [_init("F_W", _w(rng, 16, 64)), _init("F_B", _w(rng, 16, fan_in=1))])
    repo.add("fp16_io", 8, [_io("X16", "FP16", [64])], [_out("Y16", "FP16", [16])], {1: m}, rtol=1e-3)


def add_external_data(repo):
    rng = np.random.default_rng(16)
    nodes = [
        helper.make_node("Gemm", ["EXT_X", "E_W1", "E_B1"], ["h"], transB=1),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("Gemm", ["t", "E_W2", "E_B2"], ["EXT_Y"], transB=1),
    ]
    m = _model("external_data", nodes, [_vi("EXT_X", TensorProto.FLOAT, [None, 256])],
               [_vi("EXT_Y", TensorProto.FLOAT, [None, 32])],
               [_init("E_W1", _w(rng, 512, 256)), _init("E_B1", _w(rng, 512, fan_in=256)),
                _init("E_W2", _w(rng, 32, 512)), _init("E_B2", _w(rng, 32, fan_in=512))])
    repo.add("external_data", 16, [_io("EXT_X", "FP32", [256])], [_out("EXT_Y", "FP32", [32])], {1: m},
             external_data=True)


def add_autocomplete(repo):
    rng = np.random.default_rng(17)
    nodes = [helper.make_node("Gemm", ["AC_X", "AC_W", "AC_B"], ["h"], transB=1),
             helper.make_node("Sigmoid", ["h"], ["AC_Y"])]
    m = _model("autocomplete", nodes, [_vi("AC_X", TensorProto.FLOAT, [None, 20])],
               [_vi("AC_Y", TensorProto.FLOAT, [None, 3])],
               [_init("AC_W", _w(rng, 3, 20)), _init("AC_B", _w(rng, 3, fan_in=1))])
    # The server must fill in inputs/outputs and max_batch_size (default 4) from the ONNX file.
    repo.add("autocomplete", 4, [_io("AC_X", "FP32", [20])], [_out("AC_Y", "FP32", [3])], {1: m}, config=False)


def _small_linear(name, seed):
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Gemm", ["V_X", "V_W", "V_B"], ["V_Y"], transB=1)]
    return _model(name, nodes, [_vi("V_X", TensorProto.FLOAT, [None, 8])], [_vi("V_Y", TensorProto.FLOAT, [None, 4])],
                  [_init("V_W", _w(rng, 4, 8)), _init("V_B", _w(rng, 4, fan_in=1))])


def add_versioned(repo):
    io_in, io_out = [_io("V_X", "FP32", [8])], [_out("V_Y", "FP32", [4])]
    repo.add("versioned", 8, io_in, io_out, {v: _small_linear("versioned", 100 + v) for v in (1, 2, 3)},
             config_extra="version_policy: { latest: { num_versions: 2 } }", ready_versions=[2, 3])
    repo.add("versioned_specific", 8, io_in, io_out,
             {v: _small_linear("versioned_specific", 200 + v) for v in (1, 2)},
             config_extra="version_policy: { specific: { versions: [ 1 ] } }", ready_versions=[1])
    repo.add("default_filename", 8, io_in, io_out, {1: _small_linear("default_filename", 300)},
             config_extra='default_model_filename: "net.onnx"', filename="net.onnx")


def add_failing(repo):
    io_in, io_out = [_io("V_X", "FP32", [8])], [_out("V_Y", "FP32", [4])]
    # A syntax error: the input list is never closed.
    bad = 'name: "bad_config"\nbackend: "onnxruntime"\nmax_batch_size: 8\ninput [\n  {\n    name: "V_X"\n' \
          '    data_type: TYPE_FP32\n    dims: [ 8 \n'
    repo.add("bad_config", 8, io_in, io_out, {1: _small_linear("bad_config", 400)}, config=bad,
             expect="UNAVAILABLE", reason=None)

    # Bernoulli: a real ONNX op (so the checker passes) that the engine does not implement (random
    # sampling has no deterministic answer to serve; Hardmax was the example until it was implemented).
    hm = helper.make_node("Bernoulli", ["UO_X"], ["UO_Y"], name="bernoulli_1")
    m = _model("unsupported_op", [hm], [_vi("UO_X", TensorProto.FLOAT, [None, 8])],
               [_vi("UO_Y", TensorProto.FLOAT, [None, 8])], [])
    repo.add("unsupported_op", 8, [_io("UO_X", "FP32", [8])], [_out("UO_Y", "FP32", [8])], {1: m},
             expect="UNAVAILABLE", reason="bernoulli_1")

    # several unsupported nodes, one in a foreign domain: the load error lists every one
    many = [helper.make_node("GlobalLpPool", ["UM_X"], ["a"], name="lppool_a"),
            helper.make_node("Relu", ["a"], ["b"], name="relu_ok"),
            helper.make_node("Bernoulli", ["b"], ["c"], name="bernoulli_b"),
            helper.make_node("FancyOp", ["c"], ["UM_Y"], name="custom_c", domain="com.example")]
    g = helper.make_graph(many, "unsupported_many", [_vi("UM_X", TensorProto.FLOAT, [None, 1, 4, 4])],
                          [_vi("UM_Y", TensorProto.FLOAT, [None, 1, 1, 1])])
    mm = helper.make_model(g, opset_imports=[helper.make_opsetid("", DEFAULT_OPSET),
                                             helper.make_opsetid("com.example", 1)])
    mm.ir_version = IR_FOR_OPSET[DEFAULT_OPSET]
    repo.add("unsupported_many", 8, [_io("UM_X", "FP32", [1, 4, 4])], [_out("UM_Y", "FP32", [1, 1, 1])], {1: mm},
             expect="UNAVAILABLE", reason="3 unsupported nodes")

    repo.add("missing_file", 8, io_in, io_out, {1: None}, expect="UNAVAILABLE")

    cfg = _config("bad_dtype", 8, [_io("V_X", "INT32", [8])], io_out)
    repo.add("bad_dtype", 8, io_in, io_out, {1: _small_linear("bad_dtype", 500)}, config=cfg,
             expect="UNAVAILABLE", reason=None)


# --- the dynamic-batching set (tests/integration/test_batching.py serves it from a private server
# started with --disable-auto-complete-config, so every config here names its scheduler itself)

SLOW_WIDTH = 512  # each MatMul of bt_slow costs 2*L*512*512 flops per row: cost follows the request's L
SLOW_DEPTH = 64


def _instances(n):
    return "instance_group [\n  {\n    count: %d\n    kind: KIND_CPU\n  }\n]" % n


def _dyn(body=""):
    return "dynamic_batching {\n  %s\n}" % body.strip() if body.strip() else "dynamic_batching { }"


def _slow_model(name):
    """Y = X @ Q @ Q ... (SLOW_DEPTH times) on X [N, L, 512], Q orthogonal so the scale stays 1.

    L is free per request, so one file gives cheap requests (L=1) and deliberately slow ones
    (L=512) whose cost does not depend on anything but their own rows; different L never share
    a batch, which the shape tests use too."""
    rng = np.random.default_rng(21)
    q, _ = np.linalg.qr(rng.standard_normal((SLOW_WIDTH, SLOW_WIDTH)))
    nodes, prev = [], "SLOW_X"
    for i in range(SLOW_DEPTH):
        out = "SLOW_Y" if i == SLOW_DEPTH - 1 else "s%d" % i
        nodes.append(helper.make_node("MatMul", [prev, "SLOW_Q"], [out], name="mm%d" % i))
        prev = out
    return _model(name, nodes, [_vi("SLOW_X", TensorProto.FLOAT, [None, "L", SLOW_WIDTH])],
                  [_vi("SLOW_Y", TensorProto.FLOAT, [None, "L", SLOW_WIDTH])],
                  [_init("SLOW_Q", q.astype(np.float32))])


def add_batching(repo):
    io_in, io_out = [_io("V_X", "FP32", [8])], [_out("V_Y", "FP32", [4])]
    one = _instances(1)
    lin = {
        # name: dynamic_batching body (None: no dynamic_batching at all)
        "bt_pref4": "preferred_batch_size: [ 4 ]\n  max_queue_delay_microseconds: 5000000",
        "bt_pref5": "preferred_batch_size: [ 5 ]\n  max_queue_delay_microseconds: 5000000",
        "bt_delay": "preferred_batch_size: [ 4 ]\n  max_queue_delay_microseconds: 200000",
        "bt_nodyn": None,
    }
    for i, (name, body) in enumerate(lin.items()):
        sched = "" if body is None else _dyn(body) + "\n"
        repo.add(name, 8, io_in, io_out, {1: _small_linear(name, 600 + i)}, config_extra=sched + one)

    # The seed MLP's weights with no scheduler: under --disable-auto-complete-config every request runs alone.
    mlp = Repo(os.path.join(repo.out, ".mlp_tmp"))
    add_mlp(mlp)
    m = onnx.load(os.path.join(mlp.out, "mlp", "1", "model.onnx"))
    m.graph.name = "bt_mlp_nodyn"
    repo.add("bt_mlp_nodyn", 64, [_io("INPUT0", "FP32", [1024])], [_out("OUTPUT0", "FP32", [10])], {1: m})
    import shutil
    shutil.rmtree(mlp.out)

    s_in = [_io("SLOW_X", "FP32", [-1, SLOW_WIDTH])]
    s_out = [_out("SLOW_Y", "FP32", [-1, SLOW_WIDTH])]
    reject = "default_queue_policy {\n    timeout_action: %s\n    default_timeout_microseconds: %d\n" \
             "    allow_timeout_override: %s\n  }"
    slow = {
        # name: (max_batch_size, dynamic_batching body, instances)
        "bt_slow": (8, "", 1),
        "bt_slow_pref24": (8, "preferred_batch_size: [ 2, 4 ]\n  max_queue_delay_microseconds: 30000000", 1),
        "bt_slow_prio": (1, "priority_levels: 2\n  default_priority_level: 2", 1),
        "bt_slow_full": (1, "default_queue_policy {\n    max_queue_size: 2\n  }", 1),
        "bt_slow_reject": (1, reject % ("REJECT", 100000, "false"), 1),
        "bt_slow_delayact": (1, reject % ("DELAY", 100000, "false"), 1),
        "bt_slow_override": (1, reject % ("REJECT", 60000000, "true"), 1),
        "bt_slow_nooverride": (1, reject % ("REJECT", 60000000, "false"), 1),
        "bt_order": (8, "preserve_ordering: true", 2),
        "bt_noorder": (8, "", 2),
    }
    for name, (mbs, body, n) in slow.items():
        repo.add(name, mbs, s_in, s_out, {1: _slow_model(name)}, config_extra=_dyn(body) + "\n" + _instances(n),
                 rtol=1e-4)


def generate(out, which="test"):
    """Writes the repository into `out` and returns {model name: spec}."""
    os.makedirs(out, exist_ok=True)
    repo = Repo(out)
    if which == "batching":
        add_batching(repo)
        return repo.specs
    add_mlp(repo)
    if which == "example":
        add_ops_gemm(repo)
        return repo.specs
    for add in (add_ops_gemm, add_ops_elementwise, add_ops_matmul, add_ops_shape, add_ops_norm, add_ops_gelu,
                add_ops_conv, add_ops_vision_misc, add_ops_shape_fold,
                add_fp16_io, add_external_data, add_autocomplete, add_versioned, add_failing):
        add(repo)
    return repo.specs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="model repository directory to write")
    ap.add_argument("--set", choices=["example", "test", "batching"], default="test")
    ap.add_argument("--spec-out", help="also write the models' spec as JSON here (keep it outside --out)")
    args = ap.parse_args(argv)
    specs = generate(args.out, args.set)
    if args.spec_out:
        with open(args.spec_out, "w") as f:
            json.dump(specs, f, indent=2, sort_keys=True)
    for name, s in sorted(specs.items()):
        print("%-20s %-11s versions=%s" % (name, s["expect"], s["versions"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
