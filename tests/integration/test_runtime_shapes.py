"""Parameters given as graph inputs (engine/cpu/plan_values.c) through the real server: a Reshape whose
shape, a Slice whose starts/ends/axes and a Pad whose pads and constant value are model inputs, sent by
tritonclient over gRPC and HTTP with new values request after request, each answer equal to
onnxruntime's; bad values (a shape whose product does not match, a dim below -1, an axis out of range,
negative pads beyond the data) fail that request alone with INVALID_ARGUMENT and the op's message, and
the model keeps serving. A batching config for such a model is refused at load, naming the input."""

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

CONFIG = """name: "{name}"
max_batch_size: {mbs}
input [
{inputs}
]
output [
  {{ name: "y" data_type: TYPE_FP32 dims: [ {ydims} ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def _io(name, dt, dims):
    return '  { name: "%s" data_type: %s dims: [ %s ] }' % (name, dt, ", ".join(str(d) for d in dims))


def _write(repo, name, graph, inputs, ydims, mbs=0, opset=18, full_check=True):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=full_check)
    d = repo / name
    (d / "1").mkdir(parents=True)
    onnx.save(m, str(d / "1" / "model.onnx"))
    (d / "config.pbtxt").write_text(CONFIG.format(name=name, mbs=mbs, inputs=",\n".join(_io(*i) for i in inputs),
                                                  ydims=", ".join(str(x) for x in ydims)))
    return str(d / "1" / "model.onnx")


def _vi(name, et, dims):
    return helper.make_tensor_value_info(name, et, dims)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    r = tmp_path_factory.mktemp("runtime_shapes")
    paths = {}
    paths["reshape"] = _write(r, "reshape", helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "reshape",
        [_vi("x", TensorProto.FLOAT, [-1, -1]), _vi("shape", TensorProto.INT64, [3])],
        [_vi("y", TensorProto.FLOAT, ["a", "b", "c"])]),
        [("x", "TYPE_FP32", [-1, -1]), ("shape", "TYPE_INT64", [3])], [-1, -1, -1])
    paths["slice"] = _write(r, "slice", helper.make_graph(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="slice")], "slice",
        [_vi("x", TensorProto.FLOAT, [4, 5]), _vi("starts", TensorProto.INT64, [1]),
         _vi("ends", TensorProto.INT64, [1]), _vi("axes", TensorProto.INT64, [1])],
        [_vi("y", TensorProto.FLOAT, [-1, -1])]),
        [("x", "TYPE_FP32", [4, 5]), ("starts", "TYPE_INT64", [1]), ("ends", "TYPE_INT64", [1]),
         ("axes", "TYPE_INT64", [1])], [-1, -1])
    paths["pad"] = _write(r, "pad", helper.make_graph(
        [helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="pad")], "pad",
        [_vi("x", TensorProto.FLOAT, [2, 3]), _vi("pads", TensorProto.INT64, [4]),
         _vi("value", TensorProto.FLOAT, [])],
        [_vi("y", TensorProto.FLOAT, [-1, -1])]),
        [("x", "TYPE_FP32", [2, 3]), ("pads", "TYPE_INT64", [4]), ("value", "TYPE_FP32", [])], [-1, -1])
    # the same Reshape under a batching config (the batch dim first, which ONNX's
    # shape inference refuses for Reshape's shape): its shapes would mix in a batch
    _write(r, "reshape_batched", helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "reshape_batched",
        [_vi("x", TensorProto.FLOAT, [-1, 6]), _vi("shape", TensorProto.INT64, [-1, 2])],
        [_vi("y", TensorProto.FLOAT, ["a", "b"])]),
        [("x", "TYPE_FP32", [6]), ("shape", "TYPE_INT64", [2])], [-1], mbs=4, full_check=False)
    return str(r), paths


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo[0], ["--model-control-mode", "explicit", "--load-model", "reshape",
                                    "--load-model", "slice", "--load-model", "pad"])


@pytest.fixture(scope="module")
def client(srv):
    yield from lib.grpc_client(srv)


@pytest.fixture(scope="module")
def ort(repo):
    import onnxruntime as rt
    return {k: rt.InferenceSession(p, providers=["CPUExecutionProvider"]) for k, p in repo[1].items()}


def _grpc(client, model, feeds):
    res = client.infer(model, lib.triton_inputs(feeds), client_timeout=30)
    return res.as_numpy("y")


def _bad(client, model, feeds, *needles):
    with pytest.raises(InferenceServerException) as ei:
        _grpc(client, model, feeds)
    msg = lib.error_message(ei.value)
    assert lib.status_name(ei.value) == "INVALID_ARGUMENT", (lib.status_name(ei.value), msg)
    for n in needles:
        assert n in msg, msg


def test_reshape_shape_input_each_request(client, ort):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    # the rank is the config's (3); the dims are the request's
    for shape in ([2, 3, 4], [4, -1, 2], [0, 2, 3], [1, 24, 1], [2, 3, 4], [-1, 1, 6], [0, 0, 1]):
        feeds = {"x": x, "shape": np.array(shape, np.int64)}
        got = _grpc(client, "reshape", feeds)
        want = ort["reshape"].run(None, feeds)[0]
        assert got.shape == want.shape, (shape, got.shape, want.shape)
        np.testing.assert_array_equal(got, want)
    # another data shape with the same parameter
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "shape": np.array([3, -1, 2], np.int64)}
    np.testing.assert_array_equal(_grpc(client, "reshape", feeds), ort["reshape"].run(None, feeds)[0])


def test_reshape_bad_values_fail_alone(client):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _bad(client, "reshape", {"x": x, "shape": np.array([4, 4, 1], np.int64)}, "node 'reshape' (op_type 'Reshape')")
    _bad(client, "reshape", {"x": x, "shape": np.array([-3, 2, 1], np.int64)}, "Reshape")
    _bad(client, "reshape", {"x": x, "shape": np.array([-1, -1, 1], np.int64)}, "Reshape")
    _bad(client, "reshape", {"x": x, "shape": np.array([2 ** 62, 2 ** 62, 4], np.int64)}, "Reshape")
    _bad(client, "reshape", {"x": x, "shape": np.array([0, 0, 0], np.int64)}, "Reshape")
    # the model keeps serving, with the values before the bad ones and new ones
    np.testing.assert_array_equal(_grpc(client, "reshape", {"x": x, "shape": np.array([3, 2, 1], np.int64)}),
                                  x.reshape(3, 2, 1))
    np.testing.assert_array_equal(_grpc(client, "reshape", {"x": x, "shape": np.array([1, 6, 1], np.int64)}),
                                  x.reshape(1, 6, 1))


def test_reshape_over_http(srv):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with httpclient.InferenceServerClient("localhost:%d" % srv.http_port) as c:
        ins = []
        for name, a in (("x", x), ("shape", np.array([1, 3, 2], np.int64))):  # shape as JSON
            i = httpclient.InferInput(name, list(a.shape), lib.np_to_wire(a.dtype))
            i.set_data_from_numpy(a, binary_data=name == "x")
            ins.append(i)
        np.testing.assert_array_equal(c.infer("reshape", ins).as_numpy("y"), x.reshape(1, 3, 2))
        ins[1] = httpclient.InferInput("shape", [3], "INT64")
        ins[1].set_data_from_numpy(np.array([5, 5, 1], np.int64), binary_data=False)
        with pytest.raises(InferenceServerException) as ei:
            c.infer("reshape", ins)
        assert "Reshape" in str(ei.value), str(ei.value)
        assert "400" in str(ei.value.status()), ei.value.status()


def test_slice_and_pad_inputs(client, ort):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for st, en, ax in ((1, 3, 0), (-2, 100, 1), (0, -1, 0), (3, 1, 1)):
        feeds = {"x": x, "starts": np.array([st], np.int64), "ends": np.array([en], np.int64),
                 "axes": np.array([ax], np.int64)}
        got = _grpc(client, "slice", feeds)
        want = ort["slice"].run(None, feeds)[0]
        assert got.shape == want.shape, (st, en, ax, got.shape, want.shape)
        np.testing.assert_array_equal(got, want)
    _bad(client, "slice", {"x": x, "starts": np.array([0], np.int64), "ends": np.array([2], np.int64),
                           "axes": np.array([2], np.int64)}, "axis")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for pads, v in (([1, 0, 0, 2], 7.5), ([0, 1, 1, 0], -1.0), ([0, -1, 0, 0], 0.0)):
        feeds = {"x": x, "pads": np.array(pads, np.int64), "value": np.array(v, np.float32)}
        got = _grpc(client, "pad", feeds)
        want = ort["pad"].run(None, feeds)[0]
        assert got.shape == want.shape, (pads, got.shape, want.shape)
        np.testing.assert_array_equal(got, want)
    _bad(client, "pad", {"x": x, "pads": np.array([0, -4, 0, 0], np.int64), "value": np.array(0, np.float32)},
         "node 'pad' (op_type 'Pad')")


def test_batching_config_refused_naming_the_input(client):
    with pytest.raises(InferenceServerException) as ei:
        client.load_model("reshape_batched")
    msg = lib.error_message(ei.value)
    assert "input 'shape'" in msg and "cannot be batched" in msg and "max_batch_size 0" in msg, msg
    assert client.is_model_ready("reshape")
