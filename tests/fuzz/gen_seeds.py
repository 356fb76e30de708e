#!/usr/bin/env python3
"""tests/fuzz/gen_seeds.py: writes the fuzz drivers' fixed model repository
(tests/fuzz/repo/) and the ModelInferRequest seeds (corpus/infer/). Run once
by hand when the seeds change; its outputs are committed, so building and
running the fuzzers needs no Python.

The model has two inputs of different types and dynamic dims, so the
validation's type, rank, dim, batch and byte-size checks all have seeds:
  x   FP32  [-1, 4]   (batch dim + 4)
  ids INT64 [-1, -1]  (batch dim + any length)
  y = x + 1 (FP32 [-1, 4]), n = ReduceSum(Cast(ids)) (FP32 [-1, 1])
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
from tritonclient.grpc import service_pb2  # noqa: E402


def model():
    one = numpy_helper.from_array(np.ones((4,), np.float32), "one")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Add", ["x", "one"], ["y"]),
             helper.make_node("Cast", ["ids"], ["idsf"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["idsf", "axes"], ["n"], keepdims=1)]
    g = helper.make_graph(nodes, "fuzz", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "l"])], [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 4]),
        helper.make_tensor_value_info("n", TensorProto.FLOAT, ["b", 1])], initializer=[one, axes])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="inferd-fuzz")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    repo = os.path.join(HERE, "repo", "fuzz")
    write(os.path.join(repo, "1", "model.onnx"), model().SerializeToString())
    write(os.path.join(repo, "config.pbtxt"), b"""name: "fuzz"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "n" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { priority_levels: 2 default_priority_level: 1 }
""")
    out = os.path.join(HERE, "corpus", "infer")
    R = service_pb2.ModelInferRequest

    def tensor(req, name, dt, shape):
        t = req.inputs.add()
        t.name, t.datatype = name, dt
        t.shape.extend(shape)
        return t

    # raw contents, both outputs requested, parameters
    r = R(model_name="fuzz", id="raw")
    tensor(r, "x", "FP32", [2, 4])
    tensor(r, "ids", "INT64", [2, 3])
    r.raw_input_contents.append(np.arange(8, dtype=np.float32).tobytes())
    r.raw_input_contents.append(np.arange(6, dtype=np.int64).tobytes())
    r.outputs.add().name = "y"
    r.outputs.add().name = "n"
    r.parameters["priority"].uint64_param = 1
    r.parameters["timeout"].int64_param = 1000
    write(os.path.join(out, "raw"), r.SerializeToString())
    # typed contents, version given
    r = R(model_name="fuzz", model_version="1", id="typed")
    tensor(r, "x", "FP32", [1, 4]).contents.fp32_contents.extend([1, 2, 3, 4])
    tensor(r, "ids", "INT64", [1, 2]).contents.int64_contents.extend([5, 6])
    write(os.path.join(out, "typed"), r.SerializeToString())
    # shared memory: both inputs and one output in the driver's region "r0" (4096 bytes)
    r = R(model_name="fuzz", id="shm")
    for name, dt, shape, size, off in (("x", "FP32", [1, 4], 16, 0), ("ids", "INT64", [1, 2], 16, 64)):
        t = tensor(r, name, dt, shape)
        t.parameters["shared_memory_region"].string_param = "r0"
        t.parameters["shared_memory_byte_size"].uint64_param = size
        t.parameters["shared_memory_offset"].uint64_param = off
    o = r.outputs.add()
    o.name = "y"
    o.parameters["shared_memory_region"].string_param = "r0"
    o.parameters["shared_memory_byte_size"].int64_param = 16
    o.parameters["shared_memory_offset"].uint64_param = 128
    write(os.path.join(out, "shm"), r.SerializeToString())
    # invalid: a wrong datatype and a batch over max_batch_size
    r = R(model_name="fuzz")
    tensor(r, "x", "FP16", [9, 4])
    tensor(r, "ids", "INT64", [9, 0])
    write(os.path.join(out, "bad"), r.SerializeToString())


if __name__ == "__main__":
    main()
