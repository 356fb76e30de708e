"""Control flow (If, Loop, Scan: engine/ops/ctrl/) and an op whose shapes are values (NonMaxSuppression:
engine/ops/select/) through the real server on the CPU, each answer equal to onnxruntime's: a Loop whose
body reads an outer-scope value computed from a request input and holds an If reading two scopes up
(tritonclient gRPC and HTTP, new values request after request); an If with branches of different shapes in
a batched model (max_batch_size 8), its cond from the input's shape; a Scan. A model whose subgraph reads a
name no scope defines fails its load alone, naming it, and the server keeps serving the others."""

import threading

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, et, dims):
    return helper.make_tensor_value_info(name, et, dims)


def _io(name, dt, dims):
    return '  { name: "%s" data_type: %s dims: [ %s ] }' % (name, dt, ", ".join(str(d) for d in dims))


def _write(repo, name, graph, inputs, outputs, mbs=0, opset=17, batching=False):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    d = repo / name
    (d / "1").mkdir(parents=True)
    onnx.save(m, str(d / "1" / "model.onnx"))
    cfg = 'name: "%s"\nmax_batch_size: %d\ninput [\n%s\n]\noutput [\n%s\n]\ninstance_group [ { kind: KIND_CPU count: 1 } ]\n' % (
        name, mbs, ",\n".join(_io(*i) for i in inputs), ",\n".join(_io(*o) for o in outputs))
    if batching:
        cfg += "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
    (d / "config.pbtxt").write_text(cfg)
    return m


def loop_model():
    """Loop(M = 4) over s [3]: w = a * 2 in the outer graph; the body adds w, and through If(i > 1) adds
    big (an outermost initializer) or x's mean; scan outputs stack every s and i."""
    then_g = helper.make_graph([helper.make_node("Add", ["s1", "big"], ["r"])], "then", [], [_vi("r", F, [3])])
    else_g = helper.make_graph([helper.make_node("Add", ["s1", "xm"], ["r2"])], "else", [], [_vi("r2", F, [3])])
    body = helper.make_graph([
        helper.make_node("Add", ["s_in", "w"], ["s1"]),
        helper.make_node("Greater", ["i", "one"], ["late"]),
        helper.make_node("If", ["late"], ["s_out"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Identity", ["c"], ["c_out"]),
        helper.make_node("Identity", ["s_out"], ["s_scan"]),
        helper.make_node("Identity", ["i"], ["i_scan"]),
    ], "body", [_vi("i", I64, []), _vi("c", B, []), _vi("s_in", F, [3])],
        [_vi("c_out", B, []), _vi("s_out", F, [3]), _vi("s_scan", F, [3]), _vi("i_scan", I64, [])])
    g = helper.make_graph([
        helper.make_node("Mul", ["a", "two"], ["w"]),
        helper.make_node("ReduceMean", ["x"], ["xm"], keepdims=1),
        helper.make_node("Loop", ["M", "", "x"], ["sf", "ss", "is"], body=body),
    ], "loop", [_vi("x", F, [3]), _vi("a", F, [3])],
        [_vi("sf", F, [3]), _vi("ss", F, [4, 3]), _vi("is", I64, [4])],
        initializer=[helper.make_tensor("M", I64, [], [4]), helper.make_tensor("one", I64, [], [1]),
                     helper.make_tensor("two", F, [1], [2.0]), helper.make_tensor("big", F, [1], [10.0])])
    return g


def if_shapes_model():
    """x [B, n]: n > 3 gives the rows' sums [B, 1], else 2x [B, n]: cond from the shape, branches of
    different shapes, served batched."""
    then_g = helper.make_graph([helper.make_node("ReduceSum", ["x", "ax1"], ["t"], keepdims=1)], "then", [],
                               [_vi("t", F, ["b", "o"])])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["e"])], "else", [], [_vi("e", F, ["b", "o"])])
    g = helper.make_graph([
        helper.make_node("Shape", ["x"], ["sh"]),
        helper.make_node("Gather", ["sh", "one"], ["n"], axis=0),
        helper.make_node("Greater", ["n", "three"], ["wide"]),
        helper.make_node("If", ["wide"], ["y"], then_branch=then_g, else_branch=else_g),
    ], "ifshapes", [_vi("x", F, ["b", "n"])], [_vi("y", F, ["b", "o"])],
        initializer=[helper.make_tensor("one", I64, [], [1]), helper.make_tensor("three", I64, [], [3]),
                     helper.make_tensor("two", F, [], [2.0]), helper.make_tensor("ax1", I64, [1], [1])])
    return g


def scan_model():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "xi"], ["s_out"]),
                              helper.make_node("Mul", ["s_out", "xi"], ["y"])], "body",
                             [_vi("s_in", F, [2]), _vi("xi", F, [2])], [_vi("s_out", F, [2]), _vi("y", F, [2])])
    return helper.make_graph([helper.make_node("Scan", ["s0", "xs"], ["sf", "ys"], body=body, num_scan_inputs=1,
                                               scan_input_directions=[1], scan_output_axes=[1])],
                             "scan", [_vi("s0", F, [2]), _vi("xs", F, [5, 2])], [_vi("sf", F, [2]), _vi("ys", F, [2, 5])])


def bad_model():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "nowhere"], ["s_out"]),
                              helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [_vi("i", I64, []), _vi("c", B, []), _vi("s_in", F, [3])],
                             [_vi("c_out", B, []), _vi("s_out", F, [3])])
    return helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["sf"], body=body, name="the_loop")], "bad",
                             [_vi("x", F, [3])], [_vi("sf", F, [3])], initializer=[helper.make_tensor("M", I64, [], [2])])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    r = tmp_path_factory.mktemp("control_flow")
    models = {
        "loop": _write(r, "loop", loop_model(), [("x", "TYPE_FP32", [3]), ("a", "TYPE_FP32", [3])],
                       [("sf", "TYPE_FP32", [3]), ("ss", "TYPE_FP32", [4, 3]), ("is", "TYPE_INT64", [4])]),
        "ifshapes": _write(r, "ifshapes", if_shapes_model(), [("x", "TYPE_FP32", [-1])], [("y", "TYPE_FP32", [-1])],
                           mbs=8, batching=True),
        "scan": _write(r, "scan", scan_model(), [("s0", "TYPE_FP32", [2]), ("xs", "TYPE_FP32", [5, 2])],
                       [("sf", "TYPE_FP32", [2]), ("ys", "TYPE_FP32", [2, 5])], opset=11),
    }
    _write(r, "bad", bad_model(), [("x", "TYPE_FP32", [3])], [("sf", "TYPE_FP32", [3])])
    return r, models


@pytest.fixture(scope="module")
def server(repo):
    yield from lib.served(str(repo[0]), ["--strict-readiness", "false"])


@pytest.fixture(scope="module")
def client(server):
    yield from lib.grpc_client(server)


def _ort(model, feeds):
    import onnxruntime as ort
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in model.graph.output], s.run(None, feeds)))


def _check(got, want):
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (k, got[k].dtype, got[k].shape)
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_loop_outer_scope_and_nested_if(repo, server, client):
    rng = np.random.default_rng(3)
    http = httpclient.InferenceServerClient("localhost:%d" % server.http_port)
    try:
        for k in range(4):  # new values every request, through both protocols
            feeds = {"x": rng.standard_normal(3).astype(np.float32), "a": rng.standard_normal(3).astype(np.float32)}
            want = _ort(repo[1]["loop"], feeds)
            _, got = lib.infer(client, "loop", feeds)
            _check(got, want)
            ins = []
            for n, v in feeds.items():
                x = httpclient.InferInput(n, list(v.shape), "FP32")
                x.set_data_from_numpy(v, binary_data=k % 2 == 0)
                ins.append(x)
            res = http.infer("loop", ins)
            _check({n: res.as_numpy(n) for n in want}, want)
    finally:
        http.close()


def test_if_branch_shapes_batched(repo, server, client):
    """Concurrent requests of 4 and of 2 columns: each batch takes its branch by its shape."""
    rng = np.random.default_rng(4)
    reqs = [rng.standard_normal((1 + i % 3, 4 if i % 2 else 2)).astype(np.float32) for i in range(12)]
    got = [None] * len(reqs)

    def send(i):
        got[i] = lib.infer(client, "ifshapes", {"x": reqs[i]})[1]

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, x in enumerate(reqs):
        _check(got[i], _ort(repo[1]["ifshapes"], {"x": x}))
        assert got[i]["y"].shape == ((x.shape[0], 1) if x.shape[1] > 3 else x.shape)


def test_scan(repo, client):
    rng = np.random.default_rng(5)
    feeds = {"s0": rng.standard_normal(2).astype(np.float32), "xs": rng.standard_normal((5, 2)).astype(np.float32)}
    _check(lib.infer(client, "scan", feeds)[1], _ort(repo[1]["scan"], feeds))


def test_bad_subgraph_fails_alone(client):
    with pytest.raises(InferenceServerException) as e:
        lib.infer(client, "bad", {"x": np.zeros(3, np.float32)})
    assert "bad" in lib.error_message(e.value)
    ready = client.is_model_ready("bad")
    assert not ready
    idx = {m.name: m for m in client.get_model_repository_index().models}
    assert "input 'nowhere' is not defined" in idx["bad"].reason, idx["bad"].reason
    assert "the_loop" in idx["bad"].reason
    assert client.is_model_ready("loop")
