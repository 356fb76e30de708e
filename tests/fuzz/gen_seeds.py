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
    if not os.path.exists(os.path.join(out, "raw")):  # map order varies between runs: keep the committed one
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
    if not os.path.exists(os.path.join(out, "shm")):  # map order varies between runs: keep the committed one
        write(os.path.join(out, "shm"), r.SerializeToString())
    # invalid: a wrong datatype and a batch over max_batch_size
    r = R(model_name="fuzz")
    tensor(r, "x", "FP16", [9, 4])
    tensor(r, "ids", "INT64", [9, 0])
    write(os.path.join(out, "bad"), r.SerializeToString())
    shm_seeds(open(os.path.join(out, "shm"), "rb").read())  # the committed bytes: map order varies
    stream_seeds(out)
    rest_seeds()
    string_seeds()
    ensemble_seeds()


def string_seeds():
    """A second model, fuzz_str (BYTES: s STRING [-1, -1], n = Cast(Cast(s, INT64), STRING), t = s), and
    seeds that reach the BYTES wire layout's checks: raw, typed bytes_contents, a layout cut short, a
    length past the end; REST (route 7: the path on the body's first line) JSON strings with a NUL."""
    import json
    repo = os.path.join(HERE, "repo", "fuzz_str")
    nodes = [helper.make_node("Cast", ["s"], ["i"], to=TensorProto.INT64),
             helper.make_node("Cast", ["i"], ["n"], to=TensorProto.STRING),
             helper.make_node("Identity", ["s"], ["t"])]
    vi = lambda name: helper.make_tensor_value_info(name, TensorProto.STRING, ["b", "l"])  # noqa: E731
    g = helper.make_graph(nodes, "fuzz_str", [vi("s")], [vi("n"), vi("t")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="inferd-fuzz")
    m.ir_version = 8
    onnx.checker.check_model(m)
    write(os.path.join(repo, "1", "model.onnx"), m.SerializeToString())
    write(os.path.join(repo, "config.pbtxt"), b"""name: "fuzz_str"
max_batch_size: 8
input [ { name: "s" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "n" data_type: TYPE_STRING dims: [ -1 ] },
         { name: "t" data_type: TYPE_STRING dims: [ -1 ] } ]
dynamic_batching { }
""")
    out = os.path.join(HERE, "corpus", "infer")
    R = service_pb2.ModelInferRequest

    def wire(*elems):
        return b"".join(len(x).to_bytes(4, "little") + x for x in elems)

    def req(name, shape, raw=None, typed=None):
        r = R(model_name="fuzz_str", id=name)
        t = r.inputs.add()
        t.name, t.datatype = "s", "BYTES"
        t.shape.extend(shape)
        if typed is not None:
            t.contents.bytes_contents.extend(typed)
        if raw is not None:
            r.raw_input_contents.append(raw)
        write(os.path.join(out, "str_" + name), r.SerializeToString())

    long = b" 12" + b" " * 40
    req("raw", [2, 2], raw=wire(b"1", b"-2", long, b"+30"))
    req("typed", [1, 3], typed=[b"7", b"", b"x"])
    req("cut", [1, 2], raw=wire(b"1", b"2")[:-1])
    req("past_end", [1, 1], raw=b"\xff\xff\xff\x7f1")
    req("extra", [1, 1], raw=wire(b"1") + b"\0")
    rest = os.path.join(HERE, "corpus", "rest")
    body = json.dumps({"inputs": [{"name": "s", "shape": [1, 3], "datatype": "BYTES", "data": [["1", "he\0llo", "3"]]}],
                       "outputs": [{"name": "t"}]}, separators=(",", ":")).encode()
    write(os.path.join(rest, "str_json"), bytes([7, 0, 0]) + b"models/fuzz_str/infer\n" + body)


def records(*ops):
    """fuzz_shm's input: [op][len lo][len hi][bytes] per request (op 0
    Register, 1 Unregister, 2 Status, 3 ModelInfer)."""
    out = b""
    for op, msg in ops:
        b = msg if isinstance(msg, bytes) else msg.SerializeToString()
        out += bytes([op, len(b) & 255, len(b) >> 8]) + b
    return out


def shm_seeds(infer_shm):
    """corpus/shm: the driver's objects are a (4096 bytes), b (1), big (3
    pages) and empty (0); keys are moved under its private prefix."""
    out = os.path.join(HERE, "corpus", "shm")
    Reg = service_pb2.SystemSharedMemoryRegisterRequest
    Unreg = service_pb2.SystemSharedMemoryUnregisterRequest
    Status = service_pb2.SystemSharedMemoryStatusRequest
    reg_r0 = Reg(name="r0", key="/a", offset=0, byte_size=4096)
    # the life of a region: register, status, use, unregister, use again (NOT_FOUND)
    write(os.path.join(out, "lifecycle"), records(
        (0, reg_r0), (2, Status(name="r0")), (3, infer_shm), (1, Unreg(name="r0")), (3, infer_shm),
        (2, Status())))
    # windows at the edges: a page-aligned offset into big, the last byte of a, all of b
    write(os.path.join(out, "windows"), records(
        (0, Reg(name="r0", key="big", offset=4096, byte_size=8192)), (0, Reg(name="last", key="/a", offset=4095,
                                                                             byte_size=1)),
        (0, Reg(name="one", key="/b", byte_size=1)), (2, Status()), (3, infer_shm), (1, Unreg()), (2, Status())))
    # refused: past the end, zero size, the empty object, no key, no name, a
    # missing object, a name taken twice, a huge offset, a key with a slash
    write(os.path.join(out, "refused"), records(
        (0, Reg(name="x", key="/a", offset=1, byte_size=4096)), (0, Reg(name="x", key="/a", byte_size=0)),
        (0, Reg(name="x", key="/empty", byte_size=1)), (0, Reg(name="x", byte_size=1)),
        (0, Reg(key="/a", byte_size=1)), (0, Reg(name="x", key="/nothere", byte_size=1)),
        (0, Reg(name="d", key="/a", byte_size=16)), (0, Reg(name="d", key="/b", byte_size=1)),
        (0, Reg(name="x", key="/a", offset=2**63 + 5, byte_size=2**64 - 1)),
        (0, Reg(name="x", key="/../a", byte_size=1)), (2, Status(name="x")), (1, Unreg(name="nothere")),
        (2, Status())))
    # names a client should not be able to send back: control characters, long
    write(os.path.join(out, "names"), records(
        (0, Reg(name="line\nbreak\x1b[31m", key="/a", byte_size=8)), (0, Reg(name="n" * 300, key="/a", byte_size=8)),
        (0, Reg(name="k", key="k" * 300, byte_size=8)), (2, Status()), (1, Unreg(name="n" * 300)), (2, Status())))
    # a name that is not UTF-8 (protobuf's Python refuses to build it: by hand,
    # name = 1, key = 2, byte_size = 4), registered and then asked for
    bad_name = b"\x0a\x03\xff\xfe\x41" + b"\x12\x02/a" + b"\x20\x08"
    write(os.path.join(out, "not_utf8"), bytes([0, len(bad_name), 0]) + bad_name +
          records((2, Status())))
    # bytes that are no message at all
    write(os.path.join(out, "garbage"), bytes([0, 4, 0, 0xff, 0xff, 0xff, 0xff, 2, 2, 0, 0x0a, 0x7f, 1, 1, 0, 0x08]))


def stream_seeds(infer_dir):
    """corpus/stream: fuzz_stream's input is one stream, [len lo][len hi][bytes]
    per ModelInferRequest; the infer seeds are its messages."""
    out = os.path.join(HERE, "corpus", "stream")
    seed = {n: open(os.path.join(infer_dir, n), "rb").read() for n in ("raw", "typed", "shm", "bad")}
    R = service_pb2.ModelInferRequest

    def stream(*msgs):
        return b"".join(bytes([len(m) & 255, len(m) >> 8]) + m for m in msgs)

    write(os.path.join(out, "mixed"), stream(seed["raw"], seed["typed"], seed["shm"], seed["bad"], seed["raw"]))
    write(os.path.join(out, "one"), stream(seed["typed"]))
    many = []
    for i in range(32):  # enough to batch: answers come back in any order, every one exactly once
        r = R(model_name="fuzz", id="m%d" % i)
        t = r.inputs.add()
        t.name, t.datatype = "x", "FP32"
        t.shape.extend([1, 4])
        t.contents.fp32_contents.extend([i, 1, 2, 3])
        t = r.inputs.add()
        t.name, t.datatype = "ids", "INT64"
        t.shape.extend([1, 1 + i % 3])
        t.contents.int64_contents.extend(range(1 + i % 3))
        if i % 4 == 0:
            r.outputs.add().name = "n"
        many.append(r.SerializeToString())
    write(os.path.join(out, "many"), stream(*many))
    # errors the stream answers in error_message and goes on: nothing parses, an
    # empty message (no model), an unknown model, an id that is not UTF-8, an
    # unknown output, then a valid one
    r = R(model_name="nope", id="unknown model")
    broken = R(model_name="fuzz", id="ZZZZ").SerializeToString().replace(b"ZZZZ", b"\xff\xfeZZ")
    r2 = R.FromString(seed["typed"])
    r2.outputs.add().name = "nothere"
    write(os.path.join(out, "errors"), stream(b"\xff\x00\x01", b"", r.SerializeToString(), broken,
                                              r2.SerializeToString(), seed["typed"]))


def ensemble_seeds():
    """An ensemble over fuzz (fuzz_ens: X -> x, IDS -> ids, y -> Y), so a request to an ensemble is checked
    against its config's tensors (server/core/ensemble_plan.h) and the REST unload_dependents form has a seed."""
    import json
    write(os.path.join(HERE, "repo", "fuzz_ens", "1", ".keep"), b"")
    write(os.path.join(HERE, "repo", "fuzz_ens", "config.pbtxt"), b"""name: "fuzz_ens"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "IDS" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ { model_name: "fuzz" model_version: -1
  input_map { key: "x" value: "X" } input_map { key: "ids" value: "IDS" }
  output_map { key: "y" value: "Y" } } ] }
""")
    R = service_pb2.ModelInferRequest
    r = R(model_name="fuzz_ens", id="ens")
    for name, dt, shape, arr in (("X", "FP32", [2, 4], np.arange(8, dtype=np.float32)),
                                 ("IDS", "INT64", [2, 3], np.arange(6, dtype=np.int64))):
        t = r.inputs.add()
        t.name, t.datatype = name, dt
        t.shape.extend(shape)
        r.raw_input_contents.append(arr.tobytes())
    r.outputs.add().name = "Y"
    write(os.path.join(HERE, "corpus", "infer", "ensemble"), r.SerializeToString())
    body = json.dumps({"parameters": {"unload_dependents": True}}, separators=(",", ":")).encode()
    write(os.path.join(HERE, "corpus", "rest", "unload_dependents"), bytes([4, 0, 0]) + body)


def rest_seeds():
    """corpus/rest: fuzz_rest's input is [route][hl lo][hl hi][body] (routes: see
    fuzz_rest.c; hl: Inference-Header-Content-Length for routes 1 and 2)."""
    import json
    out = os.path.join(HERE, "corpus", "rest")

    def seed(name, route, body, hl=0):
        if not isinstance(body, bytes):
            body = json.dumps(body, separators=(",", ":")).encode()
        write(os.path.join(out, name), bytes([route, hl & 255, hl >> 8]) + body)

    x = {"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [[1, 2, 3, 4], [5, 6, 7, 8.5]]}
    ids = {"name": "ids", "shape": [2, 3], "datatype": "INT64", "data": [1, 2, 3, 4, 5, -6]}
    seed("infer_json", 0, {"id": "j1", "inputs": [x, ids], "outputs": [{"name": "y"}, {"name": "n"}],
                           "parameters": {"priority": 1, "timeout": 100000}})
    seed("infer_no_outputs", 0, {"inputs": [x, ids]})
    seed("infer_binary_output", 0, {"id": "b", "inputs": [x, ids],
                                    "outputs": [{"name": "y", "parameters": {"binary_data": True}},
                                                {"name": "n", "parameters": {"classification": 1}}]})
    seed("infer_binary_output_all", 0, {"inputs": [x, ids], "parameters": {"binary_data_output": True}})
    # Triton's binary tensor extension: the JSON header, then the tensors' bytes
    hdr = json.dumps({"id": "bin", "inputs": [
        {"name": "x", "shape": [2, 4], "datatype": "FP32", "parameters": {"binary_data_size": 32}},
        {"name": "ids", "shape": [2, 3], "datatype": "INT64", "parameters": {"binary_data_size": 48}}],
        "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}, separators=(",", ":")).encode()
    tensors = np.arange(8, dtype=np.float32).tobytes() + np.arange(6, dtype=np.int64).tobytes()
    seed("infer_binary", 1, hdr + tensors, len(hdr))
    seed("infer_binary_v1", 2, hdr + tensors, len(hdr))
    mixed = json.dumps({"inputs": [
        {"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}},
        {"name": "ids", "shape": [1, 2], "datatype": "INT64", "data": [7, 8]}]}, separators=(",", ":")).encode()
    seed("infer_binary_mixed", 1, mixed + np.ones(4, np.float32).tobytes(), len(mixed))
    seed("infer_binary_short", 1, hdr + tensors[:40], len(hdr))  # the bytes end before the sizes do
    seed("infer_header_past_body", 1, hdr, len(hdr) + 100)
    # shared memory inputs and output in the fixture's region r0
    seed("infer_shm", 0, {"inputs": [
        {"name": "x", "shape": [1, 4], "datatype": "FP32",
         "parameters": {"shared_memory_region": "r0", "shared_memory_byte_size": 16}},
        {"name": "ids", "shape": [1, 2], "datatype": "INT64",
         "parameters": {"shared_memory_region": "r0", "shared_memory_byte_size": 16, "shared_memory_offset": 64}}],
        "outputs": [{"name": "y", "parameters": {"shared_memory_region": "r0", "shared_memory_byte_size": 16,
                                                  "shared_memory_offset": 128}}]})
    # refusals: wrong type, shape and count, data that does not fit, BYTES, nesting
    seed("infer_bad_shape", 0, {"inputs": [dict(x, shape=[3, 4]), ids]})
    seed("infer_bad_type", 0, {"inputs": [dict(x, datatype="FP16"), dict(ids, data=["a", "b", "c", "d", "e", "f"])]})
    seed("infer_bad_data", 0, {"inputs": [dict(x, data=[[1, 2], [3, [4, [5]]], None, True]), ids]})
    seed("infer_huge_shape", 0, {"inputs": [dict(x, shape=[4611686018427387904, 4]), dict(ids, shape=[-1, 3])]})
    seed("infer_not_json", 0, b'{"inputs": [{"name": "x", "shape": [1,')
    seed("infer_empty", 0, b"")
    seed("infer_unicode", 0, {"id": "r\u00e9sum\u00e9-\u65e5\u672c", "inputs": [x, ids]})
    # model control: the repository's config, overrides that change it, refusals
    seed("load_plain", 3, b"")
    seed("load_override", 3, {"parameters": {"config": 'name: "fuzz" max_batch_size: 4 input [ { name: "x" '
                                             'data_type: TYPE_FP32 dims: [ 4 ] }, { name: "ids" data_type: '
                                             'TYPE_INT64 dims: [ -1 ] } ] output [ { name: "y" data_type: '
                                             'TYPE_FP32 dims: [ 4 ] } ] instance_group [ { count: 2 kind: '
                                             'KIND_CPU } ]'}})
    seed("load_override_bad", 3, {"parameters": {"config": 'max_batch_size: "many" input [ {'}})
    seed("load_override_json", 3, {"parameters": {"config": '{"max_batch_size": 4}'}})
    seed("load_not_object", 3, {"parameters": ["config"]})
    seed("unload", 4, {})
    # shared memory: a register body (keys are moved under the driver's prefix)
    seed("shm_register", 5, {"key": "/a", "offset": 0, "byte_size": 4096})
    seed("shm_register_past_end", 5, {"key": "a", "offset": 4000, "byte_size": 200})
    seed("shm_register_bad", 5, {"key": 7, "offset": -1, "byte_size": 1e300})
    # any path under /v2 (route 6: GET, 7: POST; first line the path, the rest the body)
    seed("get_meta", 6, b"models/fuzz")
    seed("get_config", 6, b"models/fuzz/versions/1/config")
    seed("get_ready", 6, b"models/fuzz/ready")
    seed("get_stats", 6, b"models/stats")
    seed("get_shm_status", 6, b"systemsharedmemory/region/r0/status")
    seed("get_percent", 6, b"models/fu%7Az%00/ready")
    seed("get_broken_name", 6, b"models/%ff%fe/config")
    seed("post_index", 7, b'repository/index\n{"ready": true}')
    seed("post_unload_all_shm", 7, b"systemsharedmemory/unregister\n")
    seed("post_register_other", 7, b'systemsharedmemory/region/r2/register\n{"key": "/a", "byte_size": 16}')
    seed("post_load_traversal", 7, b"repository/models/../fuzz/load\n")


if __name__ == "__main__":
    main()
