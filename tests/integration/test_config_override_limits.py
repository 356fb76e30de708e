"""What a load request's config override and model name may ask, through the real server: the
override's size cap (1 MiB), a many-entry override parsed in linear time (map keys were deduped by
scanning every earlier entry: 40k entries took 3.6 s, 300k minutes), loads of names that cannot be
a repository directory refused without an index entry (they used to be listed UNAVAILABLE, which
made a strictly ready server NOT READY), REST passing every load parameter through (a "file:"
override was answered 200 and ignored), a uint64 queue delay past what inferd takes refused saying
so (not "negative"), and the classification extension answered over gRPC and REST.

One server for the module (explicit model control, strict readiness): each case leaves the
repository as it found it."""

import base64
import http.client
import json
import os
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib
from test_model_control import CONFIG, add_model, index, infer

OVERRIDE_MAX = 1 << 20  # SRV_CONFIG_OVERRIDE_MAX (server/core/control.h)
GENEROUS_S = 20  # the linear parse takes ~0.03 s for 25k entries; the quadratic one took seconds


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("repo"))
    add_model(repo, "a", {1: 1.0})
    s = lib.ServerProcess(repo, ["--model-control-mode", "explicit", "--load-model", "*"]).start()
    yield s
    s.stop()
    s.assert_clean_exit()


@pytest.fixture
def client(srv):
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    assert c.is_server_ready()
    yield c
    # every case leaves "a" serving its files and the server ready
    c.load_model("a")
    assert infer(c, "a") == 1.0
    assert c.is_server_ready()
    c.close()


def config(extra=""):
    return CONFIG.format(name="a", extra=extra)


def rest(srv, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def load_error(c, name, **kw):
    with pytest.raises(InferenceServerException) as ei:
        c.load_model(name, client_timeout=GENEROUS_S, **kw)
    return lib.status_name(ei.value), lib.error_message(ei.value)


def test_override_size_cap(client):
    base = config()
    pad = "#" + "x" * (OVERRIDE_MAX - len(base) - 2) + "\n"
    assert len(base + pad) == OVERRIDE_MAX
    client.load_model("a", config=base + pad, client_timeout=GENEROUS_S)  # exactly the cap: loads
    assert infer(client, "a") == 1.0
    code, msg = load_error(client, "a", config=base + pad + " ")
    assert code == "INVALID_ARGUMENT" and "larger than 1048576 bytes" in msg, (code, msg)
    code, msg = load_error(client, "a", config=base + "#" + "y" * (12 << 20))  # the probe's 12 MB: refused at once
    assert code == "INVALID_ARGUMENT" and "1048576" in msg, (code, msg)
    assert infer(client, "a") == 1.0  # the overridden generation kept serving


def test_many_entries_parse_linear(client):
    # 23k parameters entries (just under the cap), every 10th key given again later: the last value wins
    n = 21000
    ents = [f'{{key:"k{i}" value{{string_value:"v{i}"}}}}' for i in range(n)]
    ents += [f'{{key:"k{i}" value{{string_value:"again"}}}}' for i in range(0, n, 10)]
    cfg = config("parameters [ " + ",".join(ents) + " ]\n")
    assert len(cfg) <= OVERRIDE_MAX
    t = time.monotonic()
    client.load_model("a", config=cfg, client_timeout=GENEROUS_S)
    took = time.monotonic() - t
    params = client.get_model_config("a", as_json=True)["config"]["parameters"]
    assert len(params) == n, len(params)
    assert params["k0"]["string_value"] == "again" and params["k1"]["string_value"] == "v1"
    assert took < GENEROUS_S, took
    # warmup inputs as a map of 25k entries: the load fails (no such inputs) at once, not after a quadratic parse
    ins = ",".join(f'{{key:"i{i}" value{{zero_data:true}}}}' for i in range(25000))
    cfg = config(f'model_warmup [{{ name: "w" batch_size: 1 inputs [ {ins} ] }}]\n')
    assert len(cfg) <= OVERRIDE_MAX
    t = time.monotonic()
    code, msg = load_error(client, "a", config=cfg)
    assert code == "INVALID_ARGUMENT", (code, msg)
    assert time.monotonic() - t < GENEROUS_S


BAD_NAMES = ["a/b", "..", ".", "/etc/passwd", ".hidden", "x" * 256, "y" * 1024]


def test_invalid_names_leave_index_and_readiness(srv, client):
    before = index(client)
    log_at = len(srv.stderr_text())
    for name in BAD_NAMES:
        code, msg = load_error(client, name)
        assert code == "INVALID_ARGUMENT" and "model name" in msg, (name[:20], code, msg)
    # unknown but valid: NOT_FOUND, no entry either
    code, msg = load_error(client, "nope")
    assert code == "NOT_FOUND", (code, msg)
    # REST: the name percent-encoded in the path
    for name in ["a%2Fb", "..%2F..%2Fetc", "%2Eh", "z" * 300]:
        status, body = rest(srv, "POST", f"/v2/repository/models/{name}/load", {})
        assert status == 400, (name[:20], status, body)
        assert lib.rest_error(body)
    assert index(client) == before
    assert client.is_server_ready()
    status, _ = rest(srv, "GET", "/v2/health/ready")
    assert status == 200
    # one rate-limited line for all these refusals, not lines per name (the refusal is the client's answer)
    log = srv.stderr_text()[log_at:]
    assert log.count("model loads refused for their name") <= 1, log
    assert "failed to load" not in log and "is not ready" not in log, log
    # a flood of them: still at most one line in this 10 s period
    for i in range(200):
        load_error(client, f"flood{i}/x" if i % 2 else f"flood{i}")
    assert index(client) == before
    log = srv.stderr_text()[log_at:]
    assert log.count("model loads refused for their name") <= 1, log


def test_rest_passes_every_load_parameter(srv, client):
    files = {"file:1/model.onnx": base64.b64encode(b"not an onnx file").decode()}
    # model files sent with the load: Triton's code and words for files it could not write (its clients test them)
    code, grpc_msg = load_error(client, "a", config=config(), files={"file:1/model.onnx": b"not an onnx file"})
    assert code == "INTERNAL" and "failed to poll from model repository" in grpc_msg, (code, grpc_msg)
    status, body = rest(srv, "POST", "/v2/repository/models/a/load", {"parameters": {"config": config(), **files}})
    assert status == 500, (status, body)
    assert lib.rest_error(body) == grpc_msg
    # a bare unknown parameter too, and the config alone still loads
    status, body = rest(srv, "POST", "/v2/repository/models/a/load", {"parameters": {"poll": True}})
    assert status == 400 and "not supported" in lib.rest_error(body), (status, body)
    status, body = rest(srv, "POST", "/v2/repository/models/a/load", {"parameters": {"config": config()}})
    assert status == 200, (status, body)
    assert infer(client, "a") == 1.0


def test_uint64_queue_delay_too_large(srv, client):
    cfg = config().replace("max_queue_delay_microseconds: 200", "max_queue_delay_microseconds: 18446744073709551615")
    code, msg = load_error(client, "a", config=cfg)
    assert code == "INVALID_ARGUMENT", (code, msg)
    assert "18446744073709551615 is too large" in msg and "negative" not in msg, msg
    status, body = rest(srv, "POST", "/v2/repository/models/a/load", {"parameters": {"config": cfg}})
    assert status == 400 and "too large" in lib.rest_error(body), (status, body)
    assert infer(client, "a") == 1.0  # the failed reload left the loaded version serving


def test_classification_answered(srv, client):
    """An output asked for its top classes answers them (Triton's classification extension; labels and the
    details: test_triton_repo.py), over gRPC and REST, instead of the tensor silently."""
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    inp = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(x)
    out = grpcclient.InferRequestedOutput("OUTPUT0", class_count=2)
    r = client.infer("a", [inp], outputs=[out], client_timeout=30)
    assert r.as_numpy("OUTPUT0").tolist() == [[b"4.000000:3", b"3.000000:2"]]  # x + 1
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [0, 1, 2, 3]}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}]}
    status, resp = rest(srv, "POST", "/v2/models/a/infer", body)
    assert status == 200, (status, resp)
    assert json.loads(resp)["outputs"][0]["data"] == ["4.000000:3", "3.000000:2"], resp
