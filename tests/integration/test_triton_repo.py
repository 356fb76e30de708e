"""Triton's clients against a repository shaped like Triton's example one (issue 33), through gRPC and HTTP as
tritonclient users do: the model repository extension in explicit mode (an index of every model, loaded or
not; load, JSON config override, unload, unknown names), the error words Triton's clients test for, and models
inferd cannot serve (a Python model) refused for what it is while the others keep serving, and an ensemble
loaded with its composing model as Triton loads one in explicit mode.

The steps follow what Triton's simple_{grpc,http}_model_control.py examples check; the models are our own."""

import os

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

# the eight models of the repository; "simple", "simple_sequence" and "ensemble_add" (over simple) can load
MODELS = ["densenet_onnx", "ensemble_add", "inception_onnx", "simple", "simple_identity", "simple_int8",
          "simple_sequence", "simple_string"]

SIMPLE = """name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: {t} dims: [ 16 ] }}, {{ name: "INPUT1" data_type: {t} dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: {t} dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: {t} dims: [ 16 ] }} ]
"""


def _save(path, nodes, ins, outs):
    g = helper.make_graph(nodes, "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _addsub(repo, name, t, tname):
    """INPUT0 + INPUT1 -> OUTPUT0, INPUT0 - INPUT1 -> OUTPUT1, [N,16] each."""
    vi = helper.make_tensor_value_info
    _save(os.path.join(repo, name, "1", "model.onnx"),
          [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
           helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
          [vi("INPUT0", t, ["N", 16]), vi("INPUT1", t, ["N", 16])],
          [vi("OUTPUT0", t, ["N", 16]), vi("OUTPUT1", t, ["N", 16])])
    _write(os.path.join(repo, name, "config.pbtxt"), SIMPLE.format(t=tname).replace('"simple"', f'"{name}"'))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("triton_repo"))
    vi = helper.make_tensor_value_info
    _addsub(d, "simple", TensorProto.FLOAT, "TYPE_FP32")
    _addsub(d, "simple_int8", TensorProto.INT8, "TYPE_INT8")
    # a sequence model whose graph takes the control inputs, which the config names only under
    # sequence_batching: once refused as "model input 'START' is missing from the config's inputs", then
    # by name; now served (test_sequence_model_serves). OUTPUT = INPUT + START + READY, in INT64 inside.
    _save(os.path.join(d, "simple_sequence", "1", "model.onnx"),
          [helper.make_node("Cast", [n], [n + "64"], to=TensorProto.INT64) for n in ("INPUT", "START", "READY")] +
          [helper.make_node("Add", ["INPUT64", "START64"], ["S"]), helper.make_node("Add", ["S", "READY64"], ["O"]),
           helper.make_node("Cast", ["O"], ["OUTPUT"], to=TensorProto.INT32)],
          [vi("INPUT", TensorProto.INT32, ["N", 1]), vi("START", TensorProto.INT32, ["N", 1]),
           vi("READY", TensorProto.INT32, ["N", 1])], [vi("OUTPUT", TensorProto.INT32, ["N", 1])])
    _write(os.path.join(d, "simple_sequence", "config.pbtxt"), """name: "simple_sequence"
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
}
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
""")
    _write(os.path.join(d, "simple_identity", "1", "model.py"), "# a Python backend model\n")
    _write(os.path.join(d, "simple_identity", "config.pbtxt"), """name: "simple_identity"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
""")
    os.makedirs(os.path.join(d, "ensemble_add", "1"))
    _write(os.path.join(d, "ensemble_add", "config.pbtxt"), """name: "ensemble_add"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] } ]
ensemble_scheduling { step [ { model_name: "simple" model_version: -1
  input_map { key: "INPUT0" value: "IN" } input_map { key: "INPUT1" value: "IN" }
  output_map { key: "OUTPUT0" value: "OUT" } } ] }
""")
    # a classifier standing in for densenet_onnx: fc6_1 = 2 * data_0, six classes, labels for five
    _save(os.path.join(d, "densenet_onnx", "1", "model.onnx"), [helper.make_node("Mul", ["data_0", "two"], ["fc6_1"])],
          [vi("data_0", TensorProto.FLOAT, ["N", 6])], [vi("fc6_1", TensorProto.FLOAT, ["N", 6])])
    m = onnx.load(os.path.join(d, "densenet_onnx", "1", "model.onnx"))
    m.graph.initializer.append(helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0]))
    onnx.save(m, os.path.join(d, "densenet_onnx", "1", "model.onnx"))
    _write(os.path.join(d, "densenet_onnx", "config.pbtxt"), """name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "data_0" data_type: TYPE_FP32 dims: [ 6 ] } ]
output [ { name: "fc6_1" data_type: TYPE_FP32 dims: [ 6 ] label_filename: "densenet_labels.txt" } ]
""")
    _write(os.path.join(d, "densenet_onnx", "densenet_labels.txt"), "tench\ngoldfish\r\nshark\nhen\nostrich\n")
    for name in ("inception_onnx", "simple_string"):  # their files not fetched
        os.makedirs(os.path.join(d, name, "1"))
    return d


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo, ["--model-control-mode", "explicit"])


@pytest.fixture(scope="module")
def gc(srv):
    yield from lib.grpc_client(srv)


@pytest.fixture(scope="module")
def hc(srv):
    c = httpclient.InferenceServerClient(f"localhost:{srv.http_port}")
    yield c
    c.close()


def _ready_index(srv):
    """The index's `ready` filter (tritonclient does not pass it): the names, from gRPC and from HTTP."""
    import json

    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    with grpc.insecure_channel(srv.grpc_url) as ch:
        r = service_pb2_grpc.GRPCInferenceServiceStub(ch).RepositoryIndex(
            service_pb2.RepositoryIndexRequest(ready=True), timeout=30)
    status, _, body = lib.http_call(srv, "POST", "/v2/repository/index", body=json.dumps({"ready": True}))
    assert status == 200, (status, body)
    return [m.name for m in r.models], [m["name"] for m in json.loads(body)]


def _raises(fn, *a, **kw):
    with pytest.raises(InferenceServerException) as ei:
        fn(*a, **kw)
    return ei.value


def _pair(t=np.float32):
    a = np.arange(16, dtype=t).reshape(1, 16)
    return a, np.ones((1, 16), dtype=t)


def _grpc_infer(gc, version=""):
    a, b = _pair()
    ins = [grpcclient.InferInput("INPUT0", [1, 16], "FP32"), grpcclient.InferInput("INPUT1", [1, 16], "FP32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    r = gc.infer("simple", ins, model_version=version, client_timeout=30)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


def _http_infer(hc, version=""):
    a, b = _pair()
    ins = [httpclient.InferInput("INPUT0", [1, 16], "FP32"), httpclient.InferInput("INPUT1", [1, 16], "FP32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    r = hc.infer("simple", ins, model_version=version, timeout=30)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)


def test_grpc_model_control(srv, gc):
    """What simple_grpc_model_control.py does, step by step, in explicit mode with nothing loaded."""
    ix = gc.get_model_repository_index()
    assert len(ix.models) == len(MODELS), ix
    # never loaded: the name alone, as Triton answers
    assert sorted(m.name for m in ix.models) == MODELS
    assert all(m.version == "" and m.state == "" and m.reason == "" for m in ix.models), ix
    assert _ready_index(srv) == ([], [])

    gc.load_model("simple")
    assert gc.is_model_ready("simple")
    _grpc_infer(gc)
    ix = {(m.name, m.version): (m.state, m.reason) for m in gc.get_model_repository_index().models}
    assert ix[("simple", "1")] == ("READY", ""), ix
    assert len(ix) == len(MODELS)
    assert _ready_index(srv) == (["simple"], ["simple"])

    # a malformed override: refused, "failed to load", the loaded generation keeps serving
    e = _raises(gc.load_model, "simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert "failed to load" in e.message(), e
    _grpc_infer(gc)
    # Triton's JSON form: it replaces config.pbtxt, the graph completes the rest
    gc.load_model("simple", config='{"max_batch_size":"16"}')
    cfg = gc.get_model_config("simple").config
    assert cfg.max_batch_size == 16 and [i.name for i in cfg.input] == ["INPUT0", "INPUT1"], cfg
    _grpc_infer(gc)
    e = _raises(gc.load_model, "simple", config='{"max_batch_sise": 16}')
    assert e.status() == "StatusCode.INVALID_ARGUMENT" and "failed to load 'simple'" in e.message(), e
    assert "unknown field 'max_batch_sise'" in e.message(), e

    gc.unload_model("simple")
    assert not gc.is_model_ready("simple")
    ix = {m.name: (m.state, m.reason) for m in gc.get_model_repository_index().models}
    assert ix["simple"] == ("UNAVAILABLE", "unloaded") and len(ix) == len(MODELS), ix

    # model files sent with the load: Triton's code and words for files it could not write
    e = _raises(gc.load_model, "simple", config="{}", files={"file:" + "A" * 256: b"a"})
    assert e.status() == "StatusCode.INTERNAL", e
    assert "failed to poll from model repository" in e.message(), e
    assert gc.is_server_live()

    e = _raises(gc.load_model, "wrong_model_name")
    assert "failed to load" in e.message(), e
    assert len(gc.get_model_repository_index().models) == len(MODELS)  # no entry for it


def test_http_model_control(hc):
    """What simple_http_model_control.py does, and the index's JSON: a model never loaded is its name alone."""
    ix = hc.get_model_repository_index()
    assert len(ix) == len(MODELS), ix
    assert {"name": "densenet_onnx"} in ix, ix
    hc.load_model("simple")
    assert hc.is_model_ready("simple")
    _http_infer(hc)
    ix = hc.get_model_repository_index()
    assert {"name": "simple", "version": "1", "state": "READY"} in ix, ix
    e = _raises(hc.load_model, "simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert "failed to load" in e.message(), e
    hc.load_model("simple", config='{"max_batch_size":"16"}')
    assert hc.get_model_config("simple")["max_batch_size"] == 16
    _http_infer(hc)
    hc.unload_model("simple")
    assert not hc.is_model_ready("simple")
    e = _raises(hc.load_model, "wrong_model_name")
    assert "failed to load" in e.message(), e
    hc.load_model("simple")  # as the repository has it
    assert hc.get_model_config("simple")["max_batch_size"] == 8


UNSUPPORTED = {
    "simple_identity": "backend 'python' is not supported",
}


@pytest.mark.parametrize("model", sorted(UNSUPPORTED))
def test_unsupported_models_named(gc, hc, model):
    """Each fails alone, saying what it needs, over both protocols; simple keeps serving."""
    gc.load_model("simple")
    e = _raises(gc.load_model, model)
    assert UNSUPPORTED[model] in e.message() and "failed to load" in e.message(), e
    assert "not found" not in e.message() and "missing" not in e.message(), e
    e = _raises(hc.load_model, model)
    assert UNSUPPORTED[model] in e.message(), e
    entries = [m for m in gc.get_model_repository_index().models if m.name == model]
    assert len(entries) == 1 and entries[0].state == "UNAVAILABLE", entries
    assert UNSUPPORTED[model] in entries[0].reason, entries
    assert not gc.is_model_ready(model)
    _grpc_infer(gc)
    _http_infer(hc)


def test_sequence_model_serves(gc, hc):
    """simple_sequence loads in explicit mode and answers a sequence over both protocols: the server fills
    START and READY (batcher/sequence.c; tests/integration/test_sequence.py has the rest)."""
    gc.load_model("simple_sequence")
    assert gc.is_model_ready("simple_sequence")
    for c, mod in ((gc, grpcclient), (hc, httpclient)):
        for i, (start, end) in enumerate(((True, False), (False, True))):
            x = mod.InferInput("INPUT", [1, 1], "INT32")
            x.set_data_from_numpy(np.array([[10]], np.int32))
            r = c.infer("simple_sequence", [x], sequence_id=900, sequence_start=start, sequence_end=end)
            assert int(r.as_numpy("OUTPUT")[0][0]) == 10 + int(start) + 1, (mod.__name__, i)
    gc.unload_model("simple_sequence")


def test_unknown_model_and_version_words(gc, hc):
    """The words Triton's clients test for, inferd's detail after them, over both protocols."""
    gc.load_model("simple")
    for call in (lambda: gc.get_model_metadata("wrong_model_name"), lambda: hc.get_model_metadata("wrong_model_name"),
                 lambda: gc.get_model_config("wrong_model_name"), lambda: hc.get_model_config("wrong_model_name")):
        e = _raises(call)
        assert e.message().startswith("Request for unknown model: 'wrong_model_name' is not found"), e
    e = _raises(_grpc_infer, gc, "wrong_specification")
    assert lib.status_name(e) == "INVALID_ARGUMENT", e
    assert "failed to get model version from specified version string 'wrong_specification'" in e.message(), e
    e = _raises(_http_infer, hc, "wrong_specification")
    assert "failed to get model version from specified version string 'wrong_specification'" in e.message(), e
    e = _raises(_grpc_infer, gc, "7")
    assert lib.status_name(e) == "NOT_FOUND", e
    assert e.message().startswith("Request for unknown model: 'simple' version 7 is not found"), e
    _grpc_infer(gc, "01")  # an integer, as Triton reads it
    gc.unload_model("simple")
    e = _raises(_grpc_infer, gc)  # unloaded: Triton's words for a model with no version to serve
    assert e.message().startswith("Request for unknown model: 'simple' has no available versions"), e
    assert lib.status_name(e) == "UNAVAILABLE", e
    gc.load_model("simple")


def test_raw_and_typed_contents_words(srv, gc):
    """raw_input_contents with typed contents in one request: Triton's words, checked before the entry count."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    gc.load_model("simple")
    a, b = _pair()
    req = service_pb2.ModelInferRequest(model_name="simple")
    for name in ("INPUT0", "INPUT1"):
        t = req.inputs.add(name=name, datatype="FP32", shape=[1, 16])
        t.contents.fp32_contents.extend((a if name == "INPUT0" else b).ravel().tolist())
    req.raw_input_contents.append(a[:, :8].tobytes())  # one raw entry for two inputs
    with grpc.insecure_channel(srv.grpc_url) as ch:
        with pytest.raises(grpc.RpcError) as ei:
            service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelInfer(req, timeout=30)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value
    assert ("contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'simple'"
            in ei.value.details()), ei.value.details()


def test_classification(srv, gc, hc):
    """Triton's classification extension: an output's top classes as BYTES "value:index[:label]", highest first,
    labels from label_filename (none past its last line), per batch row, over gRPC and HTTP (JSON and binary)."""
    import json
    gc.load_model("densenet_onnx")
    x = np.array([[0.5, 3.0, -1.0, 3.0, 2.0, 7.25], [1, 2, 3, 4, 5, 6]], dtype=np.float32)
    want = [[b"14.500000:5", b"6.000000:1:goldfish", b"6.000000:3:hen"],  # a tie: the lower index first
            [b"12.000000:5", b"10.000000:4:ostrich", b"8.000000:3:hen"]]
    inp = grpcclient.InferInput("data_0", [2, 6], "FP32")
    inp.set_data_from_numpy(x)
    r = gc.infer("densenet_onnx", [inp], outputs=[grpcclient.InferRequestedOutput("fc6_1", class_count=3)],
                 client_timeout=30)
    out = r.get_output("fc6_1")
    assert out.datatype == "BYTES" and list(out.shape) == [2, 3], out
    assert r.as_numpy("fc6_1").tolist() == want
    # more classes than the output has: all of them
    r = gc.infer("densenet_onnx", [inp], outputs=[grpcclient.InferRequestedOutput("fc6_1", class_count=50)],
                 client_timeout=30)
    assert r.as_numpy("fc6_1").shape == (2, 6) and r.as_numpy("fc6_1")[0, 5] == b"-2.000000:2:shark"
    for binary in (True, False):
        hin = httpclient.InferInput("data_0", [2, 6], "FP32")
        hin.set_data_from_numpy(x, binary_data=binary)
        r = hc.infer("densenet_onnx", [hin], timeout=30,
                     outputs=[httpclient.InferRequestedOutput("fc6_1", binary_data=binary, class_count=3)])
        assert r.as_numpy("fc6_1").astype(bytes).tolist() == want, binary
    # the JSON as Triton writes it
    body = {"inputs": [{"name": "data_0", "shape": [1, 6], "datatype": "FP32", "data": x[0].tolist()}],
            "outputs": [{"name": "fc6_1", "parameters": {"classification": 1}}]}
    status, _, raw = lib.http_call(srv, "POST", "/v2/models/densenet_onnx/infer", body=json.dumps(body))
    assert status == 200, raw
    (o,) = json.loads(raw)["outputs"]
    assert o == {"name": "fc6_1", "datatype": "BYTES", "shape": [1, 1], "data": ["14.500000:5"]}, o
    # refused with why: a count of 0 or below, a type with no order
    for bad, words in ((0, "classification 0 must be in 1..1000000"), (-2, "must be a non-negative integer")):
        body["outputs"][0]["parameters"]["classification"] = bad
        status, _, raw = lib.http_call(srv, "POST", "/v2/models/densenet_onnx/infer", body=json.dumps(body))
        assert status == 400 and words in lib.rest_error(raw), (status, raw)
    md = gc.get_server_metadata()
    assert "classification" in md.extensions, md


def test_ensemble_loads_its_member(gc, hc):
    """Loading the ensemble alone loads its composing model too (Triton's explicit mode); IN feeds both of
    simple's inputs, so OUT = 2 * IN, over both protocols; the index lists both ready."""
    gc.unload_model("simple")
    assert not gc.is_model_ready("simple")
    gc.load_model("ensemble_add")
    assert gc.is_model_ready("ensemble_add") and gc.is_model_ready("simple")
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    i = grpcclient.InferInput("IN", [1, 16], "FP32")
    i.set_data_from_numpy(x)
    np.testing.assert_array_equal(gc.infer("ensemble_add", [i]).as_numpy("OUT"), 2 * x)
    h = httpclient.InferInput("IN", [1, 16], "FP32")
    h.set_data_from_numpy(x)
    np.testing.assert_array_equal(hc.infer("ensemble_add", [h]).as_numpy("OUT"), 2 * x)
    assert gc.get_model_metadata("ensemble_add").platform == "ensemble"
    ix = {(m.name, m.version): m.state for m in gc.get_model_repository_index().models}
    assert ix[("ensemble_add", "1")] == "READY" and ix[("simple", "1")] == "READY", ix
    gc.unload_model("ensemble_add")
    assert not gc.is_model_ready("ensemble_add") and gc.is_model_ready("simple")
