#!/usr/bin/env python3
"""Writes stand-ins for Triton's example model repository, so Triton's own Python client examples
(fetched by fetch_examples.sh) can run unchanged against inferd.

    python gen_repo.py OUT             # the 8 models of Triton's docs/examples/model_repository
    python gen_repo.py --extras OUT    # the models some examples name that that repository lacks

Why our own generator: Triton's models and configs are Apache-2.0 but not ours to copy, and its
classifiers (inception, densenet) are large downloads. So every graph here is written node for node
with onnx.helper from what Triton's example models compute (read from its model docs and from what
the client examples check), and every config.pbtxt carries the same fields as Triton's: names,
types, dims, formats, reshape, label files, max_batch_size, sequence_batching, instance groups.

Where a Triton model cannot be ONNX, a stand-in that is ours takes its place and says so:
  simple_identity   Triton's is a python-backend model; here an ONNX Identity on STRING [-1].
  inception_onnx,   small random-weight conv nets with Triton's input/output names, shapes,
  densenet_onnx     formats and label_filename fields; the labels files are generated names,
                    so a classification's class is arbitrary but well formed.
--extras:
  preprocess_inception_ensemble  the ensemble ensemble_image_client.py calls: image_preprocess
                    (STRING image bytes -> FP32 [299, 299, 3]) then inception_classifier (the
                    inception stand-in, batched), joined by ensemble_scheduling. JPEG decoding has
                    no ONNX op, so image_preprocess gives a constant image of the request's batch.
  custom_identity_int32  Triton's QA identity model that memory_growth_test.py calls: Identity on
                    INT32 [-1].
  repeat_int32      the decoupled model simple_grpc_custom_repeat.py streams from: Triton's config for
                    its `repeat` backend (built into inferd: server/core/repeat.h), no model file.
Two folders, not one, because simple_*_model_control.py check that the repository index holds
exactly Triton's eight models.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17      # inside inferd's supported range (7-20); Triton's files say 21, nothing here needs it
IR_VERSION = 8  # the IR version that goes with opset 17

I32, I8, U64, F32, STR = TensorProto.INT32, TensorProto.INT8, TensorProto.UINT64, TensorProto.FLOAT, \
    TensorProto.STRING


# --- writing

def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _save(out, name, nodes, inputs, outputs, config, inits=(), files=None):
    """Writes OUT/name/config.pbtxt, OUT/name/1/model.onnx (unless nodes is None) and extra files."""
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    if nodes is not None:
        graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="inferd tests/triton_examples/gen_repo.py")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config)
    for fname, text in (files or {}).items():
        with open(os.path.join(d, fname), "w") as f:
            f.write(text)


def _io(kind, name, dtype, dims, extra=""):
    return '  {\n    name: "%s"\n    data_type: %s\n%s    dims: [ %s ]\n%s  }' % (
        name, dtype, kind, ", ".join(str(x) for x in dims), extra)


def _config(name, platform, max_batch, inputs, outputs, tail=""):
    """inputs/outputs: (name, TYPE_x, dims, extra-lines-after-dims, lines-before-dims)."""
    ins = ",\n".join(_io(b, n, t, d, e) for n, t, d, e, b in inputs)
    outs = ",\n".join(_io(b, n, t, d, e) for n, t, d, e, b in outputs)
    return ('name: "%s"\n%s\nmax_batch_size: %d\ninput [\n%s\n]\noutput [\n%s\n]\n%s'
            % (name, platform, max_batch, ins, outs, tail))


def _t(name, dtype, dims, extra="", before=""):
    return (name, dtype, dims, extra, before)


ONNX_PLATFORM = 'platform: "onnxruntime_onnx"'


# --- simple, simple_int8, simple_string: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1

def add_sub(out, name, elem, ttype, probe=False):
    """Triton's graphs: inputs cast (or passed) to INT32, Add and Sub, cast back to the model's type.
    probe: the arithmetic in INT64 instead (the same answers, for values in range), to see what an
    example meets after inferd's INT32 arithmetic."""
    nodes = []
    for i in ("0", "1"):
        if probe:
            nodes.append(helper.make_node("Cast", ["INPUT" + i], ["_INPUT" + i], to=TensorProto.INT64))
        elif elem == I32:
            nodes.append(helper.make_node("Identity", ["INPUT" + i], ["_INPUT" + i]))
        else:
            nodes.append(helper.make_node("Cast", ["INPUT" + i], ["_INPUT" + i], to=I32))
    nodes += [helper.make_node("Add", ["_INPUT0", "_INPUT1"], ["CAST0"]),
              helper.make_node("Sub", ["_INPUT0", "_INPUT1"], ["CAST1"]),
              helper.make_node("Cast", ["CAST0"], ["OUTPUT0"], to=elem),
              helper.make_node("Cast", ["CAST1"], ["OUTPUT1"], to=elem)]
    shape = ["batch", 16]
    cfg = _config(name, ONNX_PLATFORM, 8,
                  [_t("INPUT0", ttype, [16]), _t("INPUT1", ttype, [16])],
                  [_t("OUTPUT0", ttype, [16]), _t("OUTPUT1", ttype, [16])])
    _save(out, name, nodes, [_vi("INPUT0", elem, shape), _vi("INPUT1", elem, shape)],
          [_vi("OUTPUT0", elem, shape), _vi("OUTPUT1", elem, shape)], cfg)


def add_identity(out, name, elem, ttype, platform_line, dims):
    nodes = [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])]
    shape = ["batch"] + ["d%d" % i if x < 0 else x for i, x in enumerate(dims)]
    cfg = _config(name, platform_line, 8, [_t("INPUT0", ttype, dims)], [_t("OUTPUT0", ttype, dims)])
    _save(out, name, nodes, [_vi("INPUT0", elem, shape)], [_vi("OUTPUT0", elem, shape)], cfg)


# --- simple_sequence, simple_dyna_sequence

def _control(name, kind, body):
    return ('    {\n      name: "%s"\n      control [\n        {\n          kind: %s\n'
            '          %s\n        }\n      ]\n    }' % (name, kind, body))


def _seq_operands(names, probe):
    """Each INT32 operand as the graph computes with it: itself, or (probe) cast to INT64."""
    if not probe:
        return [helper.make_node("Identity", ["INPUT"], ["_INPUT"])], {n: n for n in names} | {"INPUT": "_INPUT"}
    nodes = [helper.make_node("Cast", [n], ["_" + n], to=TensorProto.INT64) for n in names]
    return nodes, {n: "_" + n for n in names}


def add_sequence(out, probe=False):
    """OUTPUT = READY * (INPUT + START): stateless, as the example clients expect (the first request
    of a sequence answers its input plus one, the others their input). probe: the arithmetic in
    INT64 (as add_sub's)."""
    nodes, v = _seq_operands(["INPUT", "START", "READY"], probe)
    nodes += [helper.make_node("Add", [v["INPUT"], v["START"]], ["add"]),
              helper.make_node("Mul", [v["READY"], "add"], ["CAST"]),
              helper.make_node("Cast", ["CAST"], ["OUTPUT"], to=I32)]
    shape = ["batch", 1]
    controls = ",\n".join([_control("START", "CONTROL_SEQUENCE_START", "int32_false_true: [ 0, 1 ]"),
                           _control("READY", "CONTROL_SEQUENCE_READY", "int32_false_true: [ 0, 1 ]")])
    seq = "sequence_batching {\n  control_input [\n%s\n  ]\n}\n" % controls
    cfg = ('name: "simple_sequence"\n%s\nmax_batch_size: 8\n%s'
           'input [\n%s\n]\noutput [\n%s\n]\ninstance_group [\n  {\n    kind: KIND_CPU\n  }\n]\n'
           % (ONNX_PLATFORM, seq, _io("", "INPUT", "TYPE_INT32", [1]), _io("", "OUTPUT", "TYPE_INT32", [1])))
    _save(out, "simple_sequence", nodes,
          [_vi(n, I32, shape) for n in ("INPUT", "START", "READY")], [_vi("OUTPUT", I32, shape)], cfg)


def add_dyna_sequence(out, probe=False):
    """OUTPUT = READY * (INPUT + START + END * CORRID): the last request of a sequence also adds its
    correlation ID, which the -d mode of the sequence clients checks. probe: INT64 arithmetic."""
    nodes, v = _seq_operands(["INPUT", "START", "END", "READY"], probe)
    nodes += [helper.make_node("Cast", ["CORRID"], ["corrid_i"], to=TensorProto.INT64 if probe else I32),
              helper.make_node("Add", [v["INPUT"], v["START"]], ["add0"]),
              helper.make_node("Mul", [v["END"], "corrid_i"], ["mul0"]),
              helper.make_node("Add", ["add0", "mul0"], ["sum0"]),
              helper.make_node("Mul", [v["READY"], "sum0"], ["CAST"]),
              helper.make_node("Cast", ["CAST"], ["OUTPUT"], to=I32)]
    shape = ["batch", 1]
    controls = ",\n".join([
        _control("START", "CONTROL_SEQUENCE_START", "int32_false_true: [ 0, 1 ]"),
        _control("END", "CONTROL_SEQUENCE_END", "int32_false_true: [ 0, 1 ]"),
        _control("READY", "CONTROL_SEQUENCE_READY", "int32_false_true: [ 0, 1 ]"),
        _control("CORRID", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_UINT64")])
    seq = ("sequence_batching {\n  max_sequence_idle_microseconds: 10000000\n"
           "  oldest {\n    max_candidate_sequences: 1024\n    max_queue_delay_microseconds: 10000\n  }\n"
           "  control_input [\n%s\n  ]\n}\n" % controls)
    cfg = ('name: "simple_dyna_sequence"\n%s\nmax_batch_size: 8\n%s'
           'input [\n%s\n]\noutput [\n%s\n]\n'
           'parameters [\n  {\n    key: "execute_delay_ms"\n    value: { string_value: "3" }\n  }\n]\n'
           'instance_group [\n  {\n    count: 2\n    kind: KIND_CPU\n  }\n]\n'
           % (ONNX_PLATFORM, seq, _io("", "INPUT", "TYPE_INT32", [1]), _io("", "OUTPUT", "TYPE_INT32", [1])))
    _save(out, "simple_dyna_sequence", nodes,
          [_vi(n, I32, shape) for n in ("INPUT", "START", "END", "READY")] + [_vi("CORRID", U64, shape)],
          [_vi("OUTPUT", I32, shape)], cfg)


# --- classifiers

def _labels(n, prefix):
    # Generated names, not ImageNet's: the stand-ins' classes mean nothing.
    return "".join("%s_%04d\n" % (prefix, i) for i in range(n))


def _conv_net(rng, x, nchw_in, classes, out_name, softmax, out_shape, channels=8):
    """x (NCHW or NHWC) -> [Transpose] -> Conv 3x3/4 -> Relu -> GlobalAveragePool -> Conv 1x1 to classes
    -> [Softmax] -> Reshape to out_shape. Small and random: only names, shapes and types matter."""
    nodes, inits = [], []
    cur = x
    if not nchw_in:
        nodes.append(helper.make_node("Transpose", [cur], ["nchw"], perm=[0, 3, 1, 2]))
        cur = "nchw"
    w1 = (rng.standard_normal((channels, 3, 3, 3)) / np.sqrt(27)).astype(np.float32)
    w2 = (rng.standard_normal((classes, channels, 1, 1)) / np.sqrt(channels)).astype(np.float32)
    inits += [numpy_helper.from_array(w1, "conv1_w"), numpy_helper.from_array(w2, "fc_w"),
              numpy_helper.from_array(np.asarray(out_shape, np.int64), "out_shape")]
    nodes += [helper.make_node("Conv", [cur, "conv1_w"], ["c1"], kernel_shape=[3, 3], strides=[4, 4]),
              helper.make_node("Relu", ["c1"], ["r1"]),
              helper.make_node("GlobalAveragePool", ["r1"], ["gap"]),
              helper.make_node("Conv", ["gap", "fc_w"], ["logits4"], kernel_shape=[1, 1])]
    last = "logits4"
    if softmax:
        nodes += [helper.make_node("Flatten", [last], ["logits"], axis=1),
                  helper.make_node("Softmax", ["logits"], ["probs"], axis=1)]
        last = "probs"
    nodes.append(helper.make_node("Reshape", [last, "out_shape"], [out_name]))
    return nodes, inits


INCEPTION_IN, INCEPTION_OUT = "input:0", "InceptionV3/Predictions/Softmax:0"


def add_inception(out):
    rng = np.random.default_rng(1)
    nodes, inits = _conv_net(rng, INCEPTION_IN, False, 1001, INCEPTION_OUT, True, [1, 1001])
    cfg = _config("inception_onnx", ONNX_PLATFORM, 0,
                  [_t(INCEPTION_IN, "TYPE_FP32", [299, 299, 3],
                      "    reshape { shape: [ 1, 299, 299, 3 ] }\n", "    format: FORMAT_NHWC\n")],
                  [_t(INCEPTION_OUT, "TYPE_FP32", [1001],
                      '    reshape { shape: [ 1, 1001 ] }\n    label_filename: "inception_labels.txt"\n')])
    _save(out, "inception_onnx", nodes, [_vi(INCEPTION_IN, F32, [1, 299, 299, 3])],
          [_vi(INCEPTION_OUT, F32, [1, 1001])], cfg, inits,
          {"inception_labels.txt": _labels(1001, "INCEPTION_STANDIN")})


def add_densenet(out):
    rng = np.random.default_rng(2)
    nodes, inits = _conv_net(rng, "data_0", True, 1000, "fc6_1", False, [1, 1000, 1, 1])
    cfg = _config("densenet_onnx", ONNX_PLATFORM, 0,
                  [_t("data_0", "TYPE_FP32", [3, 224, 224],
                      "    reshape { shape: [ 1, 3, 224, 224 ] }\n", "    format: FORMAT_NCHW\n")],
                  [_t("fc6_1", "TYPE_FP32", [1000],
                      '    reshape { shape: [ 1, 1000, 1, 1 ] }\n    label_filename: "densenet_labels.txt"\n')])
    _save(out, "densenet_onnx", nodes, [_vi("data_0", F32, [1, 3, 224, 224])],
          [_vi("fc6_1", F32, [1, 1000, 1, 1])], cfg, inits,
          {"densenet_labels.txt": _labels(1000, "DENSENET_STANDIN")})


# --- the ensemble (extras)

def add_ensemble(out):
    # image_preprocess: STRING [batch, 1] -> a constant FP32 [batch, 299, 299, 3] (no JPEG decoding in ONNX).
    inits = [numpy_helper.from_array(np.asarray([299, 299, 3], np.int64), "hwc"),
             numpy_helper.from_array(np.asarray([0], np.int64), "zero")]
    nodes = [helper.make_node("Shape", ["INPUT"], ["in_shape"]),
             helper.make_node("Gather", ["in_shape", "zero"], ["batch"], axis=0),
             helper.make_node("Concat", ["batch", "hwc"], ["out_shape"], axis=0),
             helper.make_node("ConstantOfShape", ["out_shape"], ["OUTPUT"],
                              value=numpy_helper.from_array(np.asarray([0.5], np.float32)))]
    cfg = _config("image_preprocess", ONNX_PLATFORM, 8, [_t("INPUT", "TYPE_STRING", [1])],
                  [_t("OUTPUT", "TYPE_FP32", [299, 299, 3])])
    _save(out, "image_preprocess", nodes, [_vi("INPUT", STR, ["batch", 1])],
          [_vi("OUTPUT", F32, ["batch", 299, 299, 3])], cfg, inits)

    # inception_classifier: the inception stand-in with a batch dimension, so the ensemble can batch.
    rng = np.random.default_rng(1)
    nodes, inits = _conv_net(rng, INCEPTION_IN, False, 1001, INCEPTION_OUT, True, [-1, 1001])
    cfg = _config("inception_classifier", ONNX_PLATFORM, 8,
                  [_t(INCEPTION_IN, "TYPE_FP32", [299, 299, 3], "", "    format: FORMAT_NHWC\n")],
                  [_t(INCEPTION_OUT, "TYPE_FP32", [1001], '    label_filename: "inception_labels.txt"\n')])
    _save(out, "inception_classifier", nodes, [_vi(INCEPTION_IN, F32, ["batch", 299, 299, 3])],
          [_vi(INCEPTION_OUT, F32, ["batch", 1001])], cfg, inits,
          {"inception_labels.txt": _labels(1001, "INCEPTION_STANDIN")})

    steps = ('ensemble_scheduling {\n  step [\n'
             '    {\n      model_name: "image_preprocess"\n      model_version: -1\n'
             '      input_map {\n        key: "INPUT"\n        value: "INPUT"\n      }\n'
             '      output_map {\n        key: "OUTPUT"\n        value: "preprocessed_image"\n      }\n    },\n'
             '    {\n      model_name: "inception_classifier"\n      model_version: -1\n'
             '      input_map {\n        key: "%s"\n        value: "preprocessed_image"\n      }\n'
             '      output_map {\n        key: "%s"\n        value: "OUTPUT"\n      }\n    }\n'
             '  ]\n}\n' % (INCEPTION_IN, INCEPTION_OUT))
    cfg = _config("preprocess_inception_ensemble", 'platform: "ensemble"', 8,
                  [_t("INPUT", "TYPE_STRING", [1])],
                  [_t("OUTPUT", "TYPE_FP32", [1001], '    label_filename: "inception_labels.txt"\n')], steps)
    _save(out, "preprocess_inception_ensemble", None, None, None, cfg,
          files={"inception_labels.txt": _labels(1001, "INCEPTION_STANDIN")})


# --- the two repositories

EXAMPLE_MODELS = ["simple", "simple_int8", "simple_string", "simple_identity", "simple_sequence",
                  "simple_dyna_sequence", "inception_onnx", "densenet_onnx"]
EXTRA_MODELS = ["preprocess_inception_ensemble", "image_preprocess", "inception_classifier",
                "custom_identity_int32", "repeat_int32"]


# --- repeat_int32 (extras): Triton's decoupled example, on its repeat backend

REPEAT_CONFIG = """name: "repeat_int32"
backend: "repeat"
max_batch_size: 0
model_transaction_policy {
  decoupled: True
}
input [
  {
    name: "IN"
    data_type: TYPE_INT32
    dims: [ -1 ]
  },
  {
    name: "DELAY"
    data_type: TYPE_UINT32
    dims: [ -1 ]
  },
  {
    name: "WAIT"
    data_type: TYPE_UINT32
    dims: [ 1 ]
  }
]
output [
  {
    name: "OUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  },
  {
    name: "IDX"
    data_type: TYPE_UINT32
    dims: [ 1 ]
  }
]
instance_group [
  {
    kind: KIND_CPU
  }
]
"""


def add_repeat(out, name="repeat_int32"):
    _save(out, name, None, None, None, REPEAT_CONFIG.replace('"repeat_int32"', '"%s"' % name))


def write_examples(out, probe=False):
    add_sub(out, "simple", I32, "TYPE_INT32", probe)
    add_sub(out, "simple_int8", I8, "TYPE_INT8", probe)
    add_sub(out, "simple_string", STR, "TYPE_STRING", probe)
    add_identity(out, "simple_identity", STR, "TYPE_STRING", ONNX_PLATFORM, [-1])
    add_sequence(out, probe)
    add_dyna_sequence(out, probe)
    add_inception(out)
    add_densenet(out)


def write_extras(out):
    add_ensemble(out)
    add_identity(out, "custom_identity_int32", I32, "TYPE_INT32", ONNX_PLATFORM, [-1])
    add_repeat(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the repository folder to write (created)")
    ap.add_argument("--extras", action="store_true",
                    help="write the models Triton's example repository lacks (ensemble, QA identity, repeat)")
    ap.add_argument("--probe", action="store_true",
                    help="simple, simple_int8, simple_string: the arithmetic in INT64, not Triton's INT32 "
                         "(to see what an example meets next where inferd lacks INT32 arithmetic)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.extras:
        write_extras(a.out)
    else:
        write_examples(a.out, a.probe)
    names = EXTRA_MODELS if a.extras else EXAMPLE_MODELS
    print("wrote %d models to %s: %s" % (len(names), a.out, " ".join(names)))


if __name__ == "__main__":
    main()
