"""Model control as Triton does it: --model-control-mode explicit/poll/none, --load-model,
RepositoryModelLoad/Unload over gRPC and HTTP, the index's states and reasons, a failed reload
leaving the old version serving, and an unload under load that loses no request.

Each model adds a constant to its input; the constant names the model and version, so an answer
says which generation served it."""

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

DEADLINE_S = 60


def _add_model(path, c):
    """[N,4] FP32 -> INPUT0 + c."""
    g = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "C"], ["OUTPUT0"])], "add",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor("C", TensorProto.FLOAT, [4], [float(c)] * 4)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


CONFIG = """name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: 200 }}
{extra}"""


def add_model(repo, name, versions, extra=""):
    """versions: {version: constant}."""
    d = os.path.join(repo, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(name=name, extra=extra))
    for v, c in versions.items():
        _add_model(os.path.join(d, str(v), "model.onnx"), c)


def infer(client, name, version=""):
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    inp = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(x)
    r = client.infer(name, [inp], model_version=version, client_timeout=30)
    return float(r.as_numpy("OUTPUT0")[0, 0] - x[0, 0])  # the constant


def index(client):
    return {(m["name"], m.get("version", "")): (m.get("state", ""), m.get("reason", ""))
            for m in client.get_model_repository_index(as_json=True).get("models", [])}


def await_index(client, pred, what):
    """Polls the index until pred(index) holds, failing after DEADLINE_S."""
    end = time.monotonic() + DEADLINE_S
    while True:
        ix = index(client)
        if pred(ix):
            return ix
        if time.monotonic() > end:
            pytest.fail(f"index never showed {what}: {ix}")
        time.sleep(0.05)


def code_of(exc):
    return exc.status() if hasattr(exc, "status") else str(exc)


@pytest.fixture
def repo(tmp_path):
    d = str(tmp_path / "repo")
    os.makedirs(d)
    add_model(d, "a", {1: 1.0})
    add_model(d, "b", {1: 10.0})
    return d


def test_explicit_load_infer_unload(start_server, repo):
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "a"], repo=repo, strict=True)
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    assert c.is_server_ready()  # b not loaded is not a failure
    assert infer(c, "a") == 1.0
    with pytest.raises(InferenceServerException):
        infer(c, "b")
    assert not c.is_model_ready("b")
    c.load_model("b")
    assert c.is_model_ready("b")
    assert infer(c, "b") == 10.0
    c.unload_model("a")
    with pytest.raises(InferenceServerException) as ei:
        infer(c, "a")
    assert code_of(ei.value) in ("StatusCode.UNAVAILABLE", "StatusCode.NOT_FOUND"), ei.value
    assert not c.is_model_ready("a")
    ix = index(c)
    assert ix[("a", "")] == ("UNAVAILABLE", "unloaded"), ix
    assert ix[("b", "1")][0] == "READY", ix
    assert c.is_server_ready()  # an unloaded model does not make the server unready
    # load again: a new generation, the same answers
    c.load_model("a")
    assert infer(c, "a") == 1.0
    # unknown models
    with pytest.raises(InferenceServerException) as ei:
        c.load_model("nope")
    assert "nope" in str(ei.value)
    with pytest.raises(InferenceServerException) as ei:
        c.unload_model("nope")
    assert "NOT_FOUND" in code_of(ei.value)
    # Triton's JSON config override: it replaces config.pbtxt, the graph completes the rest
    c.load_model("a", config=json.dumps({"max_batch_size": 4}))
    assert c.get_model_config("a").config.max_batch_size == 4 and infer(c, "a") == 1.0
    # HTTP routes
    base = f"http://localhost:{srv.http_port}/v2/repository/models"
    req = urllib.request.Request(f"{base}/b/unload", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
    assert not c.is_model_ready("b")
    req = urllib.request.Request(f"{base}/b/load", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200
    assert infer(c, "b") == 10.0
    req = urllib.request.Request(f"{base}/nope/load", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as he:
        urllib.request.urlopen(req, timeout=30)
    assert he.value.code in (400, 404, 503)
    assert "error" in json.loads(he.value.read())
    c.close()
    srv.stop()
    assert srv.returncode == 0


def test_reload_picks_up_new_version_and_failed_reload_keeps_old(start_server, repo):
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "*"], repo=repo, strict=True)
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    assert infer(c, "a") == 1.0 and infer(c, "b") == 10.0
    # a new version: the default policy (latest 1) serves it after a load of the loaded model
    _add_model(os.path.join(repo, "a", "2", "model.onnx"), 2.0)
    c.load_model("a")
    assert infer(c, "a") == 2.0
    # a config override (config.pbtxt text; Triton's JSON form has its own tests): back to version 1
    override = CONFIG.format(name="a", extra="version_policy: { specific: { versions: [ 1 ] } }").replace(
        "max_batch_size: 8", "max_batch_size: 4")
    c.load_model("a", config=override)
    assert infer(c, "a") == 1.0
    assert c.get_model_config("a").config.max_batch_size == 4
    with pytest.raises(InferenceServerException) as ei:
        c.load_model("a", config='{"max_batch_sise": 2}')
    assert "unknown field 'max_batch_sise'" in str(ei.value) and "INVALID_ARGUMENT" in code_of(ei.value)
    with pytest.raises(InferenceServerException) as ei:
        c.load_model("a", config="max_batch_sise: 2")
    assert "max_batch_sise" in str(ei.value)
    assert infer(c, "a") == 1.0  # the bad override left the overridden generation serving
    c.load_model("a")  # no override: the files again
    assert infer(c, "a") == 2.0
    # break version 3: the reload fails, version 2 keeps serving, the index says why
    os.makedirs(os.path.join(repo, "a", "3"))
    with open(os.path.join(repo, "a", "3", "model.onnx"), "wb") as f:
        f.write(b"not an onnx file")
    with pytest.raises(InferenceServerException) as ei:
        c.load_model("a")
    reason = str(ei.value)
    assert infer(c, "a") == 2.0
    ix = index(c)
    assert ix[("a", "2")][0] == "READY", ix
    assert "a/3/model.onnx" in ix[("a", "2")][1] and "not a valid ONNX model" in ix[("a", "2")][1], ix
    assert "a/3/model.onnx" in reason
    c.close()
    srv.stop()
    assert srv.returncode == 0


def test_http_load_with_config_override(start_server, repo):
    """The REST load route reads Triton's body: {"parameters": {"config": ...}} (tritonclient.http's load_model)."""
    import tritonclient.http as httpclient
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "a"], repo=repo, strict=True)
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    h = httpclient.InferenceServerClient(f"localhost:{srv.http_port}")
    override = CONFIG.format(name="a", extra="").replace("max_batch_size: 8", "max_batch_size: 2")
    h.load_model("a", config=override)
    assert c.get_model_config("a").config.max_batch_size == 2 and infer(c, "a") == 1.0
    h.load_model("a", config='{"max_batch_size": 3}')  # Triton's JSON form
    assert c.get_model_config("a").config.max_batch_size == 3 and infer(c, "a") == 1.0
    st, body = lib_post(srv, "/v2/repository/models/a/load", b"not json")
    assert st == 400 and "parameters" in body
    h.load_model("a")  # an empty body: the repository's config again
    assert c.get_model_config("a").config.max_batch_size == 8
    h.close()
    c.close()
    srv.stop()
    assert srv.returncode == 0


def test_load_instance_counts_past_int32_refused(start_server, repo):
    """Instance counts are int32 each: four groups of 2^30 once overflowed the sum (UBSan, fuzz_rest's
    seed load-instance-count-overflow). Refused with the total asked for; the loaded version keeps serving."""
    import tritonclient.http as httpclient
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "a"], repo=repo)
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    h = httpclient.InferenceServerClient(f"localhost:{srv.http_port}")
    groups = ", ".join(["{count: 1073741824 kind: KIND_CPU}"] * 4)
    override = CONFIG.format(name="a", extra="instance_group [%s]" % groups)
    with pytest.raises(InferenceServerException) as ei:
        h.load_model("a", config=override)
    assert "4294967296 instances requested (1..1024)" in str(ei.value)
    assert infer(c, "a") == 1.0
    h.close()
    c.close()
    srv.stop()
    assert srv.returncode == 0


def test_http_load_body_not_utf8_answers_valid_json(start_server, repo):
    """A config override with bytes that are not UTF-8 in a quoted token (cJSON does not check): refused
    before parsing (see test_config_override_not_utf8_refused), the JSON error stays UTF-8; the model keeps
    serving."""
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "a"], repo=repo, strict=True)
    body = b'{"parameters": {"config": "max_batch_size: \\"\xff\xfe\\""}}'  # a quoted token: errors quote it
    st, text = lib_post(srv, "/v2/repository/models/a/load", body)  # lib_post decodes strictly
    assert st == 400 and "not valid UTF-8" in json.loads(text)["error"], (st, text)
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    assert infer(c, "a") == 1.0
    c.close()
    srv.stop()
    assert srv.returncode == 0


def test_load_unload_name_not_utf8_refused(start_server, repo):
    """Found by tests/fuzz/fuzz_rest: a load or unload whose model name is not UTF-8 (a raw byte in the REST
    path, or the gRPC request's model_name) quoted the name in its error ("failed to load '..\xff/fuzz'"),
    which broke the JSON answer and the gRPC status details. Refused with INVALID_ARGUMENT / 400 without
    quoting it."""
    import socket

    import grpc
    from tritonclient.grpc import service_pb2
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "a"], repo=repo, strict=True)
    for op in ("Load", "Unload"):
        cls = getattr(service_pb2, "RepositoryModel%sRequest" % op)
        raw = cls(model_name="aZZZZ").SerializeToString().replace(b"ZZZZ", b"\xff\xfeZZ")
        with grpc.insecure_channel(f"localhost:{srv.grpc_port}") as ch:
            with pytest.raises(grpc.RpcError) as ei:
                ch.unary_unary("/inference.GRPCInferenceService/RepositoryModel" + op)(raw, timeout=10)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
        assert "not valid UTF-8" in ei.value.details()
    for op in (b"load", b"unload"):
        with socket.create_connection(("127.0.0.1", srv.http_port), timeout=10) as s:
            s.sendall(b"POST /v2/repository/models/a\xff\xfe/" + op +
                      b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            ans = b""
            while chunk := s.recv(65536):
                ans += chunk
        head, _, body = ans.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), ans
        assert "not valid UTF-8" in json.loads(body.decode("utf-8"))["error"]
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    assert infer(c, "a") == 1.0  # untouched
    c.close()
    srv.stop()
    assert srv.returncode == 0


def test_config_override_not_utf8_refused(start_server, repo):
    """Found by tests/fuzz/fuzz_rest (10-minute run): a config override whose strings are not UTF-8 (an input
    named 'INPUT0\x9b') was parsed, and the load's error quoted the name raw ("input 'INPUT0\x9b' in config is
    not an input of the model"): the JSON answer was not JSON, the gRPC details not UTF-8; a load that went
    through would have served the broken name in ModelConfig. Refused with INVALID_ARGUMENT / 400 before
    parsing, over both protocols; the loaded model keeps serving."""
    import grpc
    from tritonclient.grpc import service_pb2
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "a"], repo=repo, strict=True)
    cfg = CONFIG.format(name="a", extra="").replace('"INPUT0"', '"INPUT0ZZ"')
    body = json.dumps({"parameters": {"config": cfg}}).encode().replace(b"ZZ", b"\x9b\x9b")
    st, text = lib_post(srv, "/v2/repository/models/a/load", body)  # lib_post decodes strictly
    assert st == 400 and "not valid UTF-8" in json.loads(text)["error"], (st, text)
    q = service_pb2.RepositoryModelLoadRequest(model_name="a")
    q.parameters["config"].string_param = cfg
    raw = q.SerializeToString().replace(b"ZZ", b"\x9b\x9b")
    with grpc.insecure_channel(f"localhost:{srv.grpc_port}") as ch:
        with pytest.raises(grpc.RpcError) as ei:
            ch.unary_unary("/inference.GRPCInferenceService/RepositoryModelLoad")(raw, timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
    assert "not valid UTF-8" in ei.value.details()
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    assert infer(c, "a") == 1.0 and c.get_model_config("a").config.input[0].name == "INPUT0"
    c.close()
    srv.stop()
    assert srv.returncode == 0


def lib_post(srv, path, data):
    req = urllib.request.Request(srv.http_url + path, data=data, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_none_mode_refuses_control(start_server, repo):
    srv = start_server([], repo=repo, strict=True)
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    assert infer(c, "a") == 1.0 and infer(c, "b") == 10.0
    with pytest.raises(InferenceServerException) as ei:
        c.unload_model("a")
    assert "explicit" in str(ei.value)
    assert infer(c, "a") == 1.0
    c.close()
    srv.stop()


def test_load_model_needs_explicit(repo):
    import subprocess
    import inferd_testlib as lib
    p = subprocess.run([lib.inferd_bin(), "--model-repository", repo, "--load-model", "a"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "explicit" in p.stderr


def test_unload_and_reload_under_load_lose_no_request(start_server, repo):
    """Threads infer in a loop while the model is reloaded and unloaded: every call succeeds (on
    either generation) or gets a clean refusal, none hangs (client timeout), and the counts add up."""
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "a"], repo=repo, strict=True)
    ctl = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    stop = threading.Event()
    counts = {"sent": 0, "ok": 0, "refused": 0, "other": []}
    lock = threading.Lock()

    def worker():
        cl = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
        while not stop.is_set():
            with lock:
                counts["sent"] += 1
            try:
                v = infer(cl, "a")
                with lock:
                    counts["ok"] += 1
                    assert v == 1.0
            except InferenceServerException as e:
                with lock:
                    if code_of(e) in ("StatusCode.UNAVAILABLE", "StatusCode.NOT_FOUND"):
                        counts["refused"] += 1
                    else:
                        counts["other"].append(str(e))
        cl.close()

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()

    def await_ok(n):
        end = time.monotonic() + DEADLINE_S
        while True:
            with lock:
                if counts["ok"] >= n:
                    return
            assert time.monotonic() < end, counts
            time.sleep(0.01)

    await_ok(50)
    for _ in range(3):
        ctl.load_model("a")  # reload while serving
        with lock:
            n = counts["ok"]
        await_ok(n + 20)
    ctl.unload_model("a")
    with lock:
        before = counts["refused"]
    end = time.monotonic() + DEADLINE_S
    while True:  # await refusals after the unload
        with lock:
            if counts["refused"] >= before + 20:
                break
        assert time.monotonic() < end, counts
        time.sleep(0.01)
    ctl.load_model("a")
    with lock:
        n = counts["ok"]
    await_ok(n + 20)
    stop.set()
    for t in ts:
        t.join(timeout=DEADLINE_S)
        assert not t.is_alive(), "an infer call hung"
    assert counts["other"] == [], counts["other"][:5]
    assert counts["sent"] == counts["ok"] + counts["refused"], counts
    assert counts["refused"] >= 20
    ctl.close()
    srv.stop()
    assert srv.returncode == 0


def test_poll_mode_picks_up_new_and_removed_models(start_server, repo):
    srv = start_server(["--model-control-mode", "poll", "--repository-poll-secs", "1"], repo=repo, strict=True)
    c = grpcclient.InferenceServerClient(f"localhost:{srv.grpc_port}")
    assert infer(c, "a") == 1.0
    with pytest.raises(InferenceServerException) as ei:
        c.load_model("b")
    assert "poll" in str(ei.value)
    # a new model directory, written aside and moved in so the poll never sees half of it
    tmp = repo + "_staging"
    add_model(tmp, "c", {1: 100.0})
    shutil.move(os.path.join(tmp, "c"), os.path.join(repo, "c"))
    await_index(c, lambda ix: ix.get(("c", "1"), ("",))[0] == "READY", "c READY")
    assert infer(c, "c") == 100.0
    # a removed one
    shutil.rmtree(os.path.join(repo, "b"))
    await_index(c, lambda ix: ix.get(("b", ""), ("",))[0] == "UNAVAILABLE", "b unloaded")
    with pytest.raises(InferenceServerException):
        infer(c, "b")
    # a new version of a served one
    _add_model(os.path.join(tmp, "a2", "model.onnx"), 2.0)
    shutil.move(os.path.join(tmp, "a2"), os.path.join(repo, "a", "2"))
    await_index(c, lambda ix: ix.get(("a", "2"), ("",))[0] == "READY", "a version 2 READY")
    assert infer(c, "a") == 2.0
    assert infer(c, "c") == 100.0
    c.close()
    srv.stop()
    assert srv.returncode == 0
