"""The KServe v2 HTTP/REST API through real clients: tritonclient.http (sync and aio), curl (the
README's example, run as written) and raw HTTP for the error cases. Results are checked against
onnxruntime; statistics counted after N inferences; errors are {"error": ...} with Triton's statuses.
REST requests run through the gRPC path (same validation and scheduler), so values and messages
must agree with what the gRPC suite checks."""

import asyncio
import json
import os
import re
import subprocess
import threading
import urllib.parse

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient

import inferd_testlib as lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (model, batch) pairs covering batching and non-batching models, several inputs and outputs, an INT64 output
MODELS = [("mlp", 3), ("ops_gemm", 2), ("ops_elementwise", 2), ("ops_matmul", 1), ("ops_shape", 2),
          ("ops_norm", None), ("versioned", 1)]
MODES = [(False, False), (True, True), (False, True), (True, False)]  # (binary inputs, binary outputs)


@pytest.fixture(scope="module")
def hclient(server):
    c = httpclient.InferenceServerClient(url=server.http_url[len("http://"):], concurrency=4)
    yield c
    c.close()


# --- health, metadata, config, index

def test_health_and_server_metadata(hclient, server):
    assert hclient.is_server_live()
    assert hclient.is_server_ready()
    md = hclient.get_server_metadata()
    assert md["name"] == "inferd"
    assert "model_configuration" in md["extensions"] and "statistics" in md["extensions"]
    assert "binary_tensor_data" in md["extensions"]


def test_model_metadata_matches_grpc(hclient, client, specs):
    for name in ("mlp", "ops_shape", "versioned"):
        got = hclient.get_model_metadata(name)
        want = client.get_model_metadata(name, as_json=True)
        assert got["name"] == want["name"] == name
        assert got["versions"] == want["versions"]
        for key in ("inputs", "outputs"):
            assert [(t["name"], t["datatype"], t["shape"]) for t in got[key]] == \
                [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in want[key]], (name, key)
    # a specific version, and the version list
    assert hclient.get_model_metadata("versioned", "2")["versions"] == ["2", "3"]


def test_model_ready_and_unknown_model(hclient, server):
    assert hclient.is_model_ready("mlp")
    assert hclient.is_model_ready("versioned", "2")
    assert not hclient.is_model_ready("no_such_model")
    status, _, body = lib.http_call(server, "GET", "/v2/models/no_such_model/ready")
    assert status == 404 and "no_such_model" in lib.rest_error(body)
    status, _, body = lib.http_call(server, "GET", "/v2/models/no_such_model")
    assert status == 404 and "no_such_model" in lib.rest_error(body)
    status, _, body = lib.http_call(server, "GET", "/v2/models/versioned/versions/99")
    assert status == 404, body
    lib.rest_error(body)
    # a model that failed to load
    status, _, body = lib.http_call(server, "GET", "/v2/models/bad_config/ready")
    assert status in (503, 404), body


def test_model_config(hclient, specs):
    cfg = hclient.get_model_config("ops_elementwise")
    spec = specs["ops_elementwise"]
    assert cfg["name"] == "ops_elementwise"
    assert cfg["max_batch_size"] == spec["max_batch_size"]
    assert [i["name"] for i in cfg["input"]] == [i["name"] for i in spec["inputs"]]
    assert [i["data_type"] for i in cfg["input"]] == ["TYPE_FP32", "TYPE_FP32"]
    # int64 fields as protobuf's JSON mapping (and Triton) print them: strings
    assert [[int(d) for d in i["dims"]] for i in cfg["input"]] == [i["dims"] for i in spec["inputs"]]
    assert cfg["instance_group"][0]["kind"] == "KIND_CPU"


def test_repository_index(server):
    status, _, body = lib.http_call(server, "POST", "/v2/repository/index", body=b"{}")
    assert status == 200, body
    idx = json.loads(body)
    states = {(m["name"], m.get("version")): m["state"] for m in idx}
    assert states[("mlp", "1")] == "READY"
    assert states[("versioned", "2")] == "READY" and states[("versioned", "3")] == "READY"
    bad = [m for m in idx if m["name"] == "bad_config"]
    assert bad and bad[0]["state"] == "UNAVAILABLE" and bad[0]["reason"]
    status, _, body = lib.http_call(server, "POST", "/v2/repository/index", body=b'{"ready": true}')
    assert status == 200
    ready = json.loads(body)
    assert all(m["state"] == "READY" for m in ready) and len(ready) < len(idx)


# --- inference

@pytest.mark.parametrize("name,batch", MODELS)
def test_infer_matches_onnxruntime(hclient, specs, oracle, rng, name, batch):
    spec = specs[name]
    for bin_in, bin_out in MODES:
        feeds = lib.random_inputs(spec, rng, batch or 1)
        outs = [httpclient.InferRequestedOutput(o["name"], binary_data=bin_out) for o in spec["outputs"]]
        res = hclient.infer(name, lib.http_infer_inputs(feeds, bin_in), outputs=outs, request_id="rq-%s" % name)
        resp = res.get_response()
        assert resp["model_name"] == name and resp["id"] == "rq-%s" % name
        assert resp["model_version"] == str(spec["default_version"])
        for o in resp["outputs"]:
            # binary outputs say their size and carry no data; JSON ones the reverse
            assert ("data" in o) != bin_out, (name, o)
        got = {o["name"]: res.as_numpy(o["name"]) for o in resp["outputs"]}
        lib.check_outputs(got, oracle.run(name, feeds), spec,
                          what="%s batch %s binary in/out %s/%s" % (name, batch, bin_in, bin_out))


def test_infer_requested_subset_version_and_default_binary(hclient, specs, oracle, rng):
    spec = specs["ops_shape"]
    feeds = lib.random_inputs(spec, rng, 2)
    want = oracle.run("ops_shape", feeds)
    # a subset, INT64 among them, as JSON
    outs = [httpclient.InferRequestedOutput("SHP_I64", binary_data=False),
            httpclient.InferRequestedOutput("SHP_FLAT", binary_data=False)]
    res = hclient.infer("ops_shape", lib.http_infer_inputs(feeds, False), outputs=outs)
    got = {o["name"]: res.as_numpy(o["name"]) for o in res.get_response()["outputs"]}
    lib.check_outputs(got, want, spec, names=["SHP_I64", "SHP_FLAT"], what="ops_shape subset")
    assert got["SHP_I64"].dtype == np.int64
    # no outputs named: every output, binary by request parameter (tritonclient's default)
    res = hclient.infer("ops_shape", lib.http_infer_inputs(feeds, True))
    got = {o["name"]: res.as_numpy(o["name"]) for o in res.get_response()["outputs"]}
    lib.check_outputs(got, want, spec, what="ops_shape all outputs")
    # a specific version
    vspec = specs["versioned"]
    vfeeds = lib.random_inputs(vspec, rng, 1)
    res = hclient.infer("versioned", lib.http_infer_inputs(vfeeds, False), model_version="2")
    assert res.get_response()["model_version"] == "2"
    lib.check_outputs({"V_Y": res.as_numpy("V_Y")}, oracle.run("versioned", vfeeds, version="2"), vspec,
                      what="versioned v2")


def test_fp16_binary_only(hclient, server, specs, oracle, rng):
    spec = specs["fp16_io"]
    feeds = lib.random_inputs(spec, rng, 2)
    res = hclient.infer("fp16_io", lib.http_infer_inputs(feeds, True),
                        outputs=[httpclient.InferRequestedOutput("Y16", binary_data=True)])
    lib.check_outputs({"Y16": res.as_numpy("Y16")}, oracle.run("fp16_io", feeds), spec, what="fp16_io binary")
    # FP16 as JSON is refused with a reason, in both directions
    body = json.dumps({"inputs": [{"name": "X16", "shape": [1, 64], "datatype": "FP16", "data": [0.5] * 64}]})
    status, _, raw = lib.http_call(server, "POST", "/v2/models/fp16_io/infer", body=body)
    assert status == 400 and "binary_data_size" in lib.rest_error(raw)
    x = feeds["X16"][:1]
    hdr = json.dumps({"inputs": [{"name": "X16", "shape": [1, 64], "datatype": "FP16",
                                  "parameters": {"binary_data_size": x.nbytes}}],
                      "outputs": [{"name": "Y16", "parameters": {"binary_data": False}}]}).encode()
    status, _, raw = lib.http_call(server, "POST", "/v2/models/fp16_io/infer", body=hdr + x.tobytes(),
                           headers={"Inference-Header-Content-Length": str(len(hdr))})
    assert status == 400 and "binary_data" in lib.rest_error(raw)


def test_nested_data_and_raw_binary_response(server, specs, oracle, rng):
    """Nested JSON data, request parameters, and the binary answer's layout read by hand."""
    spec = specs["ops_elementwise"]
    feeds = lib.random_inputs(spec, rng, 2)
    body = {"id": "nested", "parameters": {"binary_data_output": True, "priority": 0},
            "inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32", "data": a.tolist()}
                       for n, a in feeds.items()]}
    status, headers, raw = lib.http_call(server, "POST", "/v2/models/ops_elementwise/infer", body=json.dumps(body))
    assert status == 200, raw
    hlen = int(headers["Inference-Header-Content-Length"])
    head = json.loads(raw[:hlen])
    assert head["id"] == "nested"
    want = oracle.run("ops_elementwise", feeds)
    off = hlen
    for o in head["outputs"]:
        n = o["parameters"]["binary_data_size"]
        got = np.frombuffer(raw[off:off + n], np.float32).reshape(o["shape"])
        lib.assert_close(got, want[o["name"]], spec["rtol"], what=o["name"])
        off += n
    assert off == len(raw)


def test_curl_readme_example(server, specs, oracle):
    readme = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(r"<!-- rest-curl-example[^\n]*\n```sh\n(.*?)```", readme, re.S)
    assert m, "README lost its REST curl example"
    script = m.group(1).replace("localhost:8000", server.http_url[len("http://"):])
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    meta, res = json.loads(lines[0]), json.loads(lines[-1])
    assert meta["name"] == "mlp" and meta["inputs"][0]["shape"] == [-1, 1024]
    assert res["id"] == "1" and res["outputs"][0]["shape"] == [1, 10]
    x = np.arange(-512, 512, dtype=np.float32).reshape(1, 1024)
    got = np.array(res["outputs"][0]["data"], np.float32).reshape(1, 10)
    lib.assert_close(got, oracle.run("mlp", {"INPUT0": x})["OUTPUT0"], specs["mlp"]["rtol"], what="curl mlp")


def test_statistics_count_rest_inferences(hclient, specs, rng):
    name = "ops_gemm"
    spec = specs[name]

    def counts():
        st = hclient.get_inference_statistics(name)["model_stats"]
        assert len(st) == 1 and st[0]["name"] == name
        return st[0]["inference_stats"]["success"]["count"], st[0]["inference_count"]

    ok0, rows0 = counts()
    n, batch = 7, 3
    for _ in range(n):
        hclient.infer(name, lib.http_infer_inputs(lib.random_inputs(spec, rng, batch), True))
    ok1, rows1 = counts()
    assert ok1 - ok0 == n
    assert rows1 - rows0 == n * batch
    # the all-models route lists it too
    all_stats = hclient.get_inference_statistics()["model_stats"]
    assert any(s["name"] == name and s["inference_stats"]["success"]["count"] >= ok1 for s in all_stats)


def test_concurrent_and_async_requests(server, specs, oracle, rng):
    """Many requests in flight on several connections (answers completed later on the loop thread),
    through tritonclient's async_infer and its aio client."""
    spec = specs["mlp"]
    feeds = [lib.random_inputs(spec, rng, 1 + i % 4) for i in range(24)]
    c = httpclient.InferenceServerClient(url=server.http_url[len("http://"):], concurrency=8)
    try:
        handles = [c.async_infer("mlp", lib.http_infer_inputs(f, i % 2 == 0), request_id=str(i)) for i, f in enumerate(feeds)]
        for i, (h, f) in enumerate(zip(handles, feeds)):
            res = h.get_result(timeout=60)
            assert res.get_response()["id"] == str(i)
            lib.check_outputs({"OUTPUT0": res.as_numpy("OUTPUT0")}, oracle.run("mlp", f), spec, what="async %d" % i)
    finally:
        c.close()

    async def run_aio():
        ac = aioclient.InferenceServerClient(url=server.http_url[len("http://"):])
        try:
            assert await ac.is_server_ready()
            assert (await ac.get_model_metadata("mlp"))["name"] == "mlp"
            outs = []
            for f in feeds[:8]:
                x = aioclient.InferInput("INPUT0", list(f["INPUT0"].shape), "FP32")
                x.set_data_from_numpy(f["INPUT0"])
                outs.append(ac.infer("mlp", [x]))
            return await asyncio.gather(*outs)
        finally:
            await ac.close()

    results = asyncio.run(run_aio())
    for res, f in zip(results, feeds[:8]):
        lib.check_outputs({"OUTPUT0": res.as_numpy("OUTPUT0")}, oracle.run("mlp", f), spec, what="aio")


def test_pipelined_requests_answered_in_order(server, specs):
    """Two inference requests written at once on one connection: answered in order, the second
    parsed only after the first's deferred answer went out."""
    import socket
    u = urllib.parse.urlparse(server.http_url)
    reqs = b""
    for rid in ("p1", "p2"):
        body = json.dumps({"id": rid, "inputs": [{"name": "V_X", "shape": [1, 8], "datatype": "FP32",
                                                  "data": [1.0] * 8}]}).encode()
        reqs += b"POST /v2/models/versioned/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body), body)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(reqs)
        s.shutdown(socket.SHUT_WR)
        data = lib.read_to_eof(s)
    ids = re.findall(rb'"id":"(p\d)"', data)
    assert ids == [b"p1", b"p2"], data[:500]
    assert data.count(b"HTTP/1.1 200 OK") == 2


# --- errors

@pytest.mark.parametrize("path,body,headers,status,needle", [
    ("/v2/models/mlp/infer", b"{not json", {}, 400, "not valid JSON"),
    ("/v2/models/mlp/infer", b"", {}, 400, "no JSON body"),
    ("/v2/models/mlp/infer", b"[]", {}, 400, "JSON object"),
    ("/v2/models/no_such_model/infer",
     json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}), {}, 404,
     "no_such_model"),
    ("/v2/models/versioned/infer",
     json.dumps({"inputs": [{"name": "V_X", "shape": [1, 7], "datatype": "FP32", "data": [1] * 7}]}), {}, 400,
     "shape [1,7]"),
    ("/v2/models/versioned/infer",
     json.dumps({"inputs": [{"name": "V_X", "shape": [1, 8], "datatype": "FP32", "data": [1] * 9}]}), {}, 400,
     "9 elements"),
    ("/v2/models/versioned/infer",
     json.dumps({"inputs": [{"name": "V_X", "shape": [1, 8], "datatype": "INT64", "data": [1] * 8}]}), {}, 400,
     "datatype"),
    ("/v2/models/versioned/infer",
     json.dumps({"inputs": [{"name": "NOPE", "shape": [1, 8], "datatype": "FP32", "data": [1] * 8}]}), {}, 400,
     "NOPE"),
    ("/v2/models/versioned/infer",
     json.dumps({"inputs": [{"name": "V_X", "shape": [1, 8], "datatype": "FP32", "data": ["a"] * 8}]}), {}, 400,
     "not a number"),
    ("/v2/models/versioned/infer",
     json.dumps({"inputs": [{"name": "V_X", "shape": [1, 8], "datatype": "FP32",
                             "parameters": {"binary_data_size": 32}}]}), {}, 400, "binary_data_size"),
    ("/v2/models/versioned/infer",
     b'{"inputs":[{"name":"V_X","shape":[1,8],"datatype":"FP32","data":[1,1,1,1,1,1,1,1]}]}',
     {"Inference-Header-Content-Length": "999999"}, 400, "Inference-Header-Content-Length"),
    ("/v2/models/versioned/versions/99/infer",
     json.dumps({"inputs": [{"name": "V_X", "shape": [1, 8], "datatype": "FP32", "data": [1] * 8}]}), {}, 404,
     "99"),
])
def test_bad_requests(server, path, body, headers, status, needle):
    got, h, raw = lib.http_call(server, "POST", path, body=body, headers=headers)
    assert got == status, raw
    assert h["Content-Type"] == "application/json"
    assert needle in lib.rest_error(raw)


def test_methods_and_routes(server):
    status, _, raw = lib.http_call(server, "GET", "/v2/models/mlp/infer")
    assert status == 405
    lib.rest_error(raw)
    status, _, raw = lib.http_call(server, "POST", "/v2/models/mlp")
    assert status == 405
    status, _, raw = lib.http_call(server, "GET", "/v2/models/mlp/nothing_here")
    assert status == 404
    lib.rest_error(raw)
    # model control is another piece of work: a clear answer until then
    status, _, raw = lib.http_call(server, "POST", "/v2/repository/models/mlp/load", body=b"{}")
    # server/core/control.c answers load/unload; the shared server runs in none mode, as Triton refuses them there
    assert status == 503 and "--model-control-mode" in lib.rest_error(raw)
    # health and metrics still answered by the plain endpoint
    assert lib.http_call(server, "GET", "/v2/health/ready")[0] == 200
    assert lib.http_call(server, "GET", "/metrics")[0] == 200


def test_failed_rest_request_is_counted(server, hclient):
    def fails():
        st = hclient.get_inference_statistics("versioned", "3")["model_stats"][0]
        return st["inference_stats"]["fail"]["count"]
    f0 = fails()
    body = json.dumps({"inputs": [{"name": "V_X", "shape": [1, 3], "datatype": "FP32", "data": [1] * 3}]})
    assert lib.http_call(server, "POST", "/v2/models/versioned/infer", body=body)[0] == 400
    assert fails() - f0 == 1


# --- large bodies

def test_large_json_body(hclient, server, specs, oracle, rng):
    """A JSON request larger than the 1 MiB limit of other routes (64 x 1024 floats as JSON text)."""
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, spec["max_batch_size"])
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": list(feeds["INPUT0"].shape), "datatype": "FP32",
                                   "data": feeds["INPUT0"].ravel().tolist()}]}).encode()
    assert len(body) > (1 << 20)
    status, _, raw = lib.http_call(server, "POST", "/v2/models/mlp/infer", body=body)
    assert status == 200, raw[:300]
    res = json.loads(raw)
    got = np.array(res["outputs"][0]["data"], np.float32).reshape(res["outputs"][0]["shape"])
    lib.assert_close(got, oracle.run("mlp", feeds)["OUTPUT0"], spec["rtol"], what="large JSON")
    # the plain routes keep 1 MiB
    status, _, _ = lib.http_call(server, "POST", "/v2/repository/index", body=b" " * ((1 << 20) + 1))
    assert status == 413


def test_infer_body_limit_is_configurable(start_server, specs, rng):
    srv = start_server(["--http-max-infer-body-bytes", str(2 << 20)])
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, spec["max_batch_size"])
    x = feeds["INPUT0"]
    big = json.dumps({"inputs": [{"name": "INPUT0", "shape": list(x.shape), "datatype": "FP32",
                                  "data": x.ravel().tolist()}] * 1}).encode()
    assert (1 << 20) < len(big) < (2 << 20)
    assert lib.http_call(srv, "POST", "/v2/models/mlp/infer", body=big)[0] == 200
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "shape": list(x.shape), "datatype": "FP32",
                                  "parameters": {"binary_data_size": x.nbytes * 9}}]}).encode()
    status, _, _ = lib.http_call(srv, "POST", "/v2/models/mlp/infer", body=hdr + np.tile(x, (9, 1)).tobytes(),
                         headers={"Inference-Header-Content-Length": str(len(hdr))})
    assert status == 413
    assert srv.alive()


def test_refused_body_is_read_before_close(start_server):
    """A body refused for its declared length (2.3 MB at a 2 MB limit) is read and dropped before the
    connection closes, so a client still sending it reads the 413 instead of a reset: with a 16 KB send
    buffer the client is still sending long after the server answered."""
    import socket
    srv = start_server(["--http-max-infer-body-bytes", str(2 << 20)])
    u = urllib.parse.urlparse(srv.http_url)
    body = b"x" * 2400000
    for _ in range(3):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        s.settimeout(30)
        s.connect((u.hostname, u.port))
        try:
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
            s.sendall(body)
            got = lib.read_to_eof(s)
        finally:
            s.close()
        assert got.startswith(b"HTTP/1.1 413 "), got[:80]
    assert srv.alive()


# --- INT64 and BOOL inputs (a model of their own: the test repository's inputs are all float)

def _typed_repo(tmp_path):
    import onnx
    from onnx import TensorProto as T, helper
    g = helper.make_graph(
        [helper.make_node("Add", ["I", "I"], ["I2"]), helper.make_node("Not", ["B"], ["NB"])], "typed",
        [helper.make_tensor_value_info("I", T.INT64, ["N", 4]), helper.make_tensor_value_info("B", T.BOOL, ["N", 4])],
        [helper.make_tensor_value_info("I2", T.INT64, ["N", 4]), helper.make_tensor_value_info("NB", T.BOOL, ["N", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    os.makedirs(tmp_path / "typed" / "1")
    onnx.save(m, str(tmp_path / "typed" / "1" / "model.onnx"))
    (tmp_path / "typed" / "config.pbtxt").write_text('name: "typed"\nbackend: "onnxruntime"\nmax_batch_size: 8\n')
    return str(tmp_path / "typed" / "1" / "model.onnx")


def test_int64_and_bool(start_server, tmp_path, rng):
    import onnxruntime as ort
    path = _typed_repo(tmp_path)
    srv = start_server(repo=str(tmp_path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    c = httpclient.InferenceServerClient(url=srv.http_url[len("http://"):])
    try:
        for bin_in, bin_out in MODES:
            i = rng.integers(-(2 ** 40), 2 ** 40, size=(3, 4)).astype(np.int64)
            if bin_in:
                i[0, 0] = 2 ** 62 + 1  # exact only as binary: JSON numbers are doubles
            b = rng.integers(0, 2, size=(3, 4)).astype(bool)
            xi = httpclient.InferInput("I", [3, 4], "INT64")
            xi.set_data_from_numpy(i, binary_data=bin_in)
            xb = httpclient.InferInput("B", [3, 4], "BOOL")
            xb.set_data_from_numpy(b, binary_data=bin_in)
            outs = [httpclient.InferRequestedOutput(n, binary_data=bin_out) for n in ("I2", "NB")]
            res = c.infer("typed", [xi, xb], outputs=outs)
            want = dict(zip(["I2", "NB"], sess.run(["I2", "NB"], {"I": i, "B": b})))
            for n in ("I2", "NB"):
                got = res.as_numpy(n)
                assert got.dtype == want[n].dtype and got.shape == want[n].shape, (n, got.dtype, got.shape)
                np.testing.assert_array_equal(got, want[n], err_msg="%s binary in/out %s/%s" % (n, bin_in, bin_out))
        # a bool input given numbers is refused
        body = json.dumps({"inputs": [{"name": "I", "shape": [1, 4], "datatype": "INT64", "data": [1, 2, 3, 4]},
                                      {"name": "B", "shape": [1, 4], "datatype": "BOOL", "data": [1, 0, 1, 0]}]})
        status, _, raw = lib.http_call(srv, "POST", "/v2/models/typed/infer", body=body)
        assert status == 400 and "not a bool" in lib.rest_error(raw)
    finally:
        c.close()
    srv.stop()
    srv.assert_clean_exit()


# --- system shared memory over REST (Triton's /v2/systemsharedmemory routes)

def test_system_shared_memory(start_server, server, specs, oracle, rng):
    import tritonclient.utils.shared_memory as shm
    # off by default: a clear refusal
    status, _, raw = lib.http_call(server, "POST", "/v2/systemsharedmemory/region/r/register",
                           body=json.dumps({"key": "/inferd_nope", "offset": 0, "byte_size": 64}))
    assert status == 400 and "--allow-client-shm" in lib.rest_error(raw)

    srv = start_server(["--allow-client-shm", "true"])
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, 2)
    x = feeds["INPUT0"]
    out_bytes = 2 * 10 * 4
    key_in, key_out = "/inferd_rest_in_%d" % os.getpid(), "/inferd_rest_out_%d" % os.getpid()
    h_in = shm.create_shared_memory_region("rest_in", key_in, x.nbytes)
    h_out = shm.create_shared_memory_region("rest_out", key_out, out_bytes + 64)
    c = httpclient.InferenceServerClient(url=srv.http_url[len("http://"):])
    try:
        shm.set_shared_memory_region(h_in, [x])
        c.register_system_shared_memory("rest_in", key_in, x.nbytes)
        c.register_system_shared_memory("rest_out", key_out, out_bytes, offset=64)
        st = {r["name"]: r for r in c.get_system_shared_memory_status()}
        assert st["rest_out"] == {"name": "rest_out", "key": key_out, "offset": 64, "byte_size": out_bytes}
        assert [r["name"] for r in c.get_system_shared_memory_status("rest_in")] == ["rest_in"]
        i = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
        i.set_shared_memory("rest_in", x.nbytes)
        o = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
        o.set_shared_memory("rest_out", out_bytes)
        res = c.infer("mlp", [i], outputs=[o])
        out = res.get_output("OUTPUT0")
        assert out["shape"] == [2, 10] and "data" not in out
        got = shm.get_contents_as_numpy(h_out, np.float32, [2, 10], offset=64)
        lib.assert_close(got, oracle.run("mlp", feeds)["OUTPUT0"], spec["rtol"], what="mlp via REST shm")
        c.unregister_system_shared_memory("rest_in")
        assert [r["name"] for r in c.get_system_shared_memory_status()] == ["rest_out"]
        c.unregister_system_shared_memory()
        assert c.get_system_shared_memory_status() == []
    finally:
        c.close()
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)
    srv.stop()
    srv.assert_clean_exit()


@pytest.mark.parametrize("method,path", [
    ("GET", "/v2/models/%ff%fe/config"), ("GET", "/v2/models/%c0%af"), ("GET", "/v2/models/%ed%a0%80/stats"),
    ("GET", "/v2/models/mlp/versions/%ff/config"), ("POST", "/v2/models/%ffmlp/infer"),
    ("GET", "/v2/systemsharedmemory/region/%ff/status")])
def test_broken_utf8_in_the_path_answers_valid_json(server, method, path):
    """Found by tests/fuzz/fuzz_rest: a percent-encoded name that is not UTF-8 was echoed raw into the JSON
    error ("unknown model '\\xff\\xfe'"), which is then not JSON (RFC 8259: UTF-8) and breaks the client's parser.
    Any 4xx is right; the body must decode as UTF-8 and parse."""
    body = json.dumps({"inputs": []}) if method == "POST" else None
    status, _, raw = lib.http_call(server, method, path, body=body)
    assert 400 <= status < 500, (status, raw)
    lib.rest_error(raw.decode("utf-8"))  # strict: raises on a broken byte


@pytest.mark.parametrize("where", ["datatype", "name", "id", "parameter"])
def test_broken_utf8_in_the_json_body_answers_valid_json(server, where):
    """Found by tests/fuzz/fuzz_rest: strings of the JSON body that are not UTF-8 (cJSON does not check) were
    echoed raw into the error ("unknown datatype 'FP3\\xff...'"), which is then not JSON. The body is refused
    with 400 and a UTF-8 answer."""
    req = {"id": "r", "inputs": [{"name": "INPUT0", "shape": [1, 1024], "datatype": "FP32", "data": [0.0] * 1024}],
           "parameters": {"priority": 1}}
    raw = json.dumps(req).encode()
    mark = {"datatype": b'"FP32"', "name": b'"INPUT0"', "id": b'"r"', "parameter": b'"priority"'}[where]
    raw = raw.replace(mark, mark[:-1] + b'\xff\xfe"', 1)
    status, _, body = lib.http_call(server, "POST", "/v2/models/mlp/infer", body=raw)
    assert status == 400, (status, body)
    assert "UTF-8" in lib.rest_error(body.decode("utf-8"))


@pytest.mark.parametrize("field,value", [("offset", 4.001e110), ("byte_size", 1e300), ("byte_size", 18446744073709551616),
                                         ("offset", 1.5), ("byte_size", 64.25), ("byte_size", -1)])
def test_shm_register_numbers_out_of_range(server, field, value):
    """Found by tests/fuzz/fuzz_rest (UBSan): an offset of 4e110 was converted to uint64 (undefined behaviour, a
    garbage value in release builds); fractions were truncated. Offsets and sizes must be integers in
    [0, 2^64): anything else is refused with 400 before the request goes anywhere."""
    body = {"key": "/inferd_nope", "offset": 0, "byte_size": 64}
    body[field] = value
    status, _, raw = lib.http_call(server, "POST", "/v2/systemsharedmemory/region/r/register", body=json.dumps(body))
    assert status == 400, (status, raw)
    assert "integer" in lib.rest_error(raw), raw


@pytest.mark.parametrize("datatype,value", [("UINT8", -6), ("INT8", 300), ("INT64", 1e300), ("INT32", 1.5),
                                            ("UINT64", -1), ("UINT16", 65536), ("FP32", 1e300)])
def test_json_data_out_of_range_for_its_datatype(server, datatype, value):
    """Found by tests/fuzz/fuzz_rest (UBSan): a JSON element out of range for the input's datatype (-6 as UINT8,
    1e300 as INT64) was converted anyway, which is undefined behaviour in C (garbage in release builds), and a
    fraction for an integer type was cut. Refused with 400 naming the element, before any other check."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": datatype,
                                   "data": [0, 1, value, 2]}]})
    status, _, raw = lib.http_call(server, "POST", "/v2/models/mlp/infer", body=body)
    assert status == 400, (status, raw)
    msg = lib.rest_error(raw)
    assert "element 2" in msg and datatype in msg, msg
