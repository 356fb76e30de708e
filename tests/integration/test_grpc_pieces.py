"""Big gRPC messages read where they arrived (issue 32, docs/copies.md I1): a ModelInferRequest of 64 KiB or more
comes in several slices (HTTP/2 frames it), and its tensors are no longer copied into one run on the CQ thread.
infer_pieces.c walks the fields across the slices; an input that spans slices is copied from them straight into
the batch (sched.c's gather) or, where it must be read whole (BYTES, an ensemble's input, a padded input), joined
into one run first. /metrics counts both paths (inferd_grpc_inputs_in_pieces_total{path=gathered|joined}).

Through the real server with tritonclient: every answer equal to its request's bytes (identity models, so every
byte of every input is checked), alone and batched, one and two big inputs, each path counted exactly; small
messages, REST and CPU-plan batches untouched by it; malformed and NUL-bearing big messages refused with the
contiguous path's words."""

import concurrent.futures as cf
import os
import sys

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.grpc import service_pb2, service_pb2_grpc

import inferd_testlib as lib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "triton_examples"))
import gen_repo  # noqa: E402

PIECES = "inferd_grpc_inputs_in_pieces_total"


def _two_inputs(out):
    """fid2: A, B FP32 [batch, -1] -> OA = Identity(A), OB = Identity(B): two big inputs of one request."""
    nodes = [helper.make_node("Identity", ["A"], ["OA"]), helper.make_node("Identity", ["B"], ["OB"])]
    vi = [gen_repo._vi(n, TensorProto.FLOAT, ["batch", "d" + n]) for n in ("A", "B")]
    vo = [gen_repo._vi(n, TensorProto.FLOAT, ["batch", "d" + n[1]]) for n in ("OA", "OB")]
    cfg = gen_repo._config("fid2", gen_repo.ONNX_PLATFORM, 8, [gen_repo._t("A", "TYPE_FP32", [-1]),
                                                                gen_repo._t("B", "TYPE_FP32", [-1])],
                           [gen_repo._t("OA", "TYPE_FP32", [-1]), gen_repo._t("OB", "TYPE_FP32", [-1])])
    gen_repo._save(out, "fid2", nodes, vi, vo, cfg)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pieces"))
    gen_repo.add_identity(d, "fid", TensorProto.FLOAT, "TYPE_FP32", gen_repo.ONNX_PLATFORM, [-1])
    # concurrent requests wait up to 200 ms to be batched together (the gather of several in pieces)
    with open(os.path.join(d, "fid", "config.pbtxt"), "a") as f:
        f.write("dynamic_batching { max_queue_delay_microseconds: 200000 preferred_batch_size: [ 4 ] }\n")
    gen_repo.add_identity(d, "sid", TensorProto.STRING, "TYPE_STRING", gen_repo.ONNX_PLATFORM, [-1])
    _two_inputs(d)
    return d


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo)


@pytest.fixture(scope="module")
def gc(srv):
    yield from lib.grpc_client(srv)


def counts(srv, model):
    m = lib.scrape_metrics(srv)
    assert lib.metric_present(m, PIECES, model=model, path="gathered"), m
    return (lib.metric_sum(m, PIECES, model=model, path="gathered"),
            lib.metric_sum(m, PIECES, model=model, path="joined"))


def infer(gc, model, arrays, dtype="FP32"):
    ins = []
    for i, a in enumerate(arrays):
        t = grpcclient.InferInput(["INPUT0", "A", "B"][i if model != "fid2" else i + 1], list(a.shape), dtype)
        t.set_data_from_numpy(a)
        ins.append(t)
    return gc.infer(model, ins)


def test_big_input_alone_gathered(srv, gc):
    rng = np.random.default_rng(1)
    before = counts(srv, "fid")
    for cols in (100_000, 16_385, 300_001):  # 400 KB, just past 64 KiB, 1.2 MB
        a = rng.standard_normal((1, cols)).astype(np.float32)
        np.testing.assert_array_equal(infer(gc, "fid", [a]).as_numpy("OUTPUT0"), a)
    assert counts(srv, "fid") == (before[0] + 3, before[1])


def test_big_inputs_batched_gathered(srv, gc):
    """Eight concurrent requests of 1 to 3 rows: batched (preferred size 4, 200 ms to wait), each answer its own."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((1 + i % 3, 50_000)).astype(np.float32) for i in range(8)]
    before = counts(srv, "fid")
    stats0 = lib.model_stats(gc, "fid")
    with cf.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda a: infer(gc, "fid", [a]).as_numpy("OUTPUT0"), arrays))
    for g, a in zip(got, arrays):
        np.testing.assert_array_equal(g, a)
    assert counts(srv, "fid") == (before[0] + 8, before[1])
    stats1 = lib.model_stats(gc, "fid")
    # fewer executions than requests: some batch held several requests in pieces
    assert stats1.execution_count - stats0.execution_count < 8, (stats0, stats1)


def test_two_big_inputs_and_a_small_one(srv, gc):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 40_000)).astype(np.float32)  # 320 KB
    b = rng.standard_normal((2, 30)).astype(np.float32)  # small, but in the same big message
    before = counts(srv, "fid2")
    r = infer(gc, "fid2", [a, b])
    np.testing.assert_array_equal(r.as_numpy("OA"), a)
    np.testing.assert_array_equal(r.as_numpy("OB"), b)
    g, j = counts(srv, "fid2")
    # A spans slices; B (240 bytes) may lie in one slice (read in place) or straddle two (gathered)
    assert j == before[1] and before[0] + 1 <= g <= before[0] + 2
    c = rng.standard_normal((2, 40_000)).astype(np.float32)
    r = infer(gc, "fid2", [a, c])
    np.testing.assert_array_equal(r.as_numpy("OA"), a)
    np.testing.assert_array_equal(r.as_numpy("OB"), c)
    assert counts(srv, "fid2")[0] >= g + 2


def test_small_message_and_rest_untouched(srv, gc):
    rng = np.random.default_rng(4)
    before = counts(srv, "fid")
    a = rng.standard_normal((1, 1000)).astype(np.float32)  # 4 KB: one slice
    np.testing.assert_array_equal(infer(gc, "fid", [a]).as_numpy("OUTPUT0"), a)
    big = rng.standard_normal((1, 100_000)).astype(np.float32)
    hc = httpclient.InferenceServerClient(url=srv.http_url.split("//")[-1])
    t = httpclient.InferInput("INPUT0", list(big.shape), "FP32")
    t.set_data_from_numpy(big, binary_data=True)
    np.testing.assert_array_equal(hc.infer("fid", [t]).as_numpy("OUTPUT0"), big)  # REST: one body, no slices
    hc.close()
    assert counts(srv, "fid") == before


def test_big_string_joined(srv, gc):
    rng = np.random.default_rng(5)
    s = np.array([[rng.bytes(200_000), b"x", rng.bytes(70_000)]], dtype=np.object_)
    before = counts(srv, "sid")
    t = grpcclient.InferInput("INPUT0", [1, 3], "BYTES")
    t.set_data_from_numpy(s)
    got = gc.infer("sid", [t]).as_numpy("OUTPUT0")
    assert got.shape == (1, 3) and [bytes(x) for x in got[0]] == list(s[0])
    assert counts(srv, "sid") == (before[0], before[1] + 1)


def _raw_call(srv, payload):
    opts = [("grpc.max_send_message_length", 64 << 20)]
    with grpc.insecure_channel(srv.grpc_url, options=opts) as ch:
        f = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer", request_serializer=None,
                           response_deserializer=None)
        with pytest.raises(grpc.RpcError) as ei:
            f(payload, timeout=30)
    return ei.value


def _fid_request(model, raw_cols):
    """A serialized request for model: input INPUT0 FP32 [1, 50000] with raw_cols zeros as its bytes."""
    q = service_pb2.ModelInferRequest(model_name=model)
    t = q.inputs.add(name="INPUT0", datatype="FP32")
    t.shape.extend([1, 50_000])
    q.raw_input_contents.append(np.zeros((1, raw_cols), np.float32).tobytes())
    return q.SerializeToString()


def test_malformed_and_nul_big_messages_refused(srv, gc):
    rng = np.random.default_rng(6)
    # a valid start, then bytes no walk and no protobuf parser can follow (wire type 7)
    bad = service_pb2.ModelInferRequest(model_name="fid").SerializeToString() + b"\x0f" + rng.bytes(300_000)
    e = _raw_call(srv, bad)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "does not parse" in e.details(), e.details()
    # a raw entry longer than the message
    q = service_pb2.ModelInferRequest(model_name="fid")
    q.raw_input_contents.append(rng.bytes(200_000))
    trunc = q.SerializeToString()[:-1000]
    e = _raw_call(srv, trunc)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "does not parse" in e.details(), e.details()
    # a NUL in the model's name of a big message: refused naming the field, as a small one is
    e = _raw_call(srv, _fid_request("fid\x00junk", 50_000))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "model_name" in e.details(), e.details()
    # raw bytes of the wrong size for the shape: the contiguous path's words
    e = _raw_call(srv, _fid_request("fid", 50_001))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "got 200004 bytes of raw data, expected 200000" in e.details()
    assert srv.alive()
    a = rng.standard_normal((1, 100_000)).astype(np.float32)  # and it still serves
    np.testing.assert_array_equal(infer(gc, "fid", [a]).as_numpy("OUTPUT0"), a)
