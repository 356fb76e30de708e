"""BYTES (TYPE_STRING) tensors through the real server (issue 33): Triton's simple_string model as
tests/triton_examples/gen_repo.py writes it (Cast STRING -> integer, Add, Sub, Cast back), its
simple_identity, and a model of the index ops on strings, served over gRPC (raw and typed
bytes_contents), REST (JSON and binary, both ways), system shared memory, and batched across
requests; every answer checked against onnxruntime running the same model file, and every malformed
BYTES tensor refused with INVALID_ARGUMENT / 400 naming it.

simple_string computes in INT64 here (gen_repo.py's probe form: the same answers for these values)
so that this file tests strings alone, whatever the state of INT32 arithmetic."""

import concurrent.futures as cf
import json
import os
import struct
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

import inferd_testlib as lib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "triton_examples"))
import gen_repo  # noqa: E402

STR = TensorProto.STRING


def _str_ops(out):
    """INPUT0 STRING [batch, 4] -> PICK = Gather(INPUT0, [3, 0], axis 1); JOINED = Concat(INPUT0, PICK)
    (the index ops on strings); ROUND = Cast(Cast(INPUT0, FLOAT), STRING) (numbers parsed and printed)."""
    idx = helper.make_tensor("idx", TensorProto.INT64, [2], [3, 0])
    nodes = [helper.make_node("Identity", ["INPUT0"], ["X"]),
             helper.make_node("Gather", ["X", "idx"], ["PICK"], axis=1),
             helper.make_node("Concat", ["X", "PICK"], ["JOINED"], axis=1),
             helper.make_node("Cast", ["X"], ["F"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["F"], ["ROUND"], to=STR)]
    cfg = gen_repo._config("str_ops", gen_repo.ONNX_PLATFORM, 8, [gen_repo._t("INPUT0", "TYPE_STRING", [4])],
                           [gen_repo._t("PICK", "TYPE_STRING", [2]), gen_repo._t("JOINED", "TYPE_STRING", [6]),
                            gen_repo._t("ROUND", "TYPE_STRING", [4])])
    gen_repo._save(out, "str_ops", nodes, [gen_repo._vi("INPUT0", STR, ["b", 4])],
                   [gen_repo._vi("PICK", STR, ["b", 2]), gen_repo._vi("JOINED", STR, ["b", 6]),
                    gen_repo._vi("ROUND", STR, ["b", 4])], cfg, inits=[idx])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("strings_repo"))
    gen_repo.add_sub(d, "simple_string", STR, "TYPE_STRING", probe=True)
    gen_repo.add_identity(d, "simple_identity", STR, "TYPE_STRING", gen_repo.ONNX_PLATFORM, [-1])
    with open(os.path.join(d, "simple_identity", "config.pbtxt"), "a") as f:  # warmed with empty strings
        f.write('model_warmup [ { name: "w" batch_size: 2 inputs { key: "INPUT0" value: '
                '{ data_type: TYPE_STRING dims: [ 3 ] zero_data: true } } } ]\n')
    _str_ops(d)
    # simple_string again, batching requests: a full batch of 4 rows, or whatever came in 2 s
    gen_repo.add_sub(d, "string_batched", STR, "TYPE_STRING", probe=True)
    cfg = os.path.join(d, "string_batched", "config.pbtxt")
    with open(cfg) as f:
        text = f.read().replace('"simple_string"', '"string_batched"')
    with open(cfg, "w") as f:
        f.write(text + "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 2000000 }\n")
    return d


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo, ["--allow-client-shm", "true"])


@pytest.fixture(scope="module")
def gc(srv):
    yield from lib.grpc_client(srv)


@pytest.fixture(scope="module")
def hc(srv):
    c = httpclient.InferenceServerClient(srv.http_url[len("http://"):])
    yield c
    c.close()


_sessions = {}


def ort(repo, model, feeds):
    """onnxruntime's answers for model's file: {output name: numpy array of bytes objects}."""
    s = lib.ort_session(_sessions, os.path.join(repo, model, "1", "model.onnx"))
    outs = s.run(None, {k: np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v) for k, v in feeds.items()})
    return {o.name: np.vectorize(lambda t: t.encode("utf-8"), otypes=[object])(x)
            for o, x in zip(s.get_outputs(), outs)}


def as_bytes(a):
    """A BYTES answer as an object array of bytes (tritonclient gives str for JSON answers)."""
    return np.vectorize(lambda x: x if isinstance(x, bytes) else x.encode("utf-8"), otypes=[object])(a)


def pair(rows, rng, width=16):
    """INPUT0/INPUT1 of simple_string: numbers as strings, some with blanks and signs (parsed as ORT does)."""
    a = rng.integers(-1000, 1000, size=(rows, width))
    b = rng.integers(-1000, 1000, size=(rows, width))
    fa = np.array([(" %d" if x % 3 == 0 else "%+d" if x % 3 == 1 else "%d") % x for x in a.flat], dtype=object)
    fb = np.array(["%d" % x for x in b.flat], dtype=object)
    return {"INPUT0": np.vectorize(str.encode, otypes=[object])(fa).reshape(rows, width),
            "INPUT1": np.vectorize(str.encode, otypes=[object])(fb).reshape(rows, width)}


def grpc_infer(gc, model, feeds, outputs=None):
    ins = []
    for name, v in feeds.items():
        t = grpcclient.InferInput(name, list(v.shape), "BYTES")
        t.set_data_from_numpy(v)
        ins.append(t)
    outs = [grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    return gc.infer(model, ins, outputs=outs)


def check(got, want, names):
    for n in names:
        g = as_bytes(got(n))
        assert g.shape == want[n].shape and (g == want[n]).all(), (n, g, want[n])


def test_grpc_raw(gc, repo, rng):
    for rows in (1, 3, 8):
        feeds = pair(rows, rng)
        r = grpc_infer(gc, "simple_string", feeds)
        check(r.as_numpy, ort(repo, "simple_string", feeds), ["OUTPUT0", "OUTPUT1"])


def test_grpc_typed_bytes_contents(srv, repo, rng):
    """bytes_contents (Triton's grpc_explicit_byte_content_client), with raw answers; an element count
    that does not match the shape is INVALID_ARGUMENT."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    feeds = pair(2, rng)
    feeds["INPUT0"][0, 0] = b"  7 and some words after the digits, longer than 24 bytes"
    req = service_pb2.ModelInferRequest(model_name="simple_string")
    for name, v in feeds.items():
        t = req.inputs.add(name=name, datatype="BYTES", shape=list(v.shape))
        t.contents.bytes_contents.extend(list(v.flat))
    with grpc.insecure_channel(srv.grpc_url) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        resp = stub.ModelInfer(req, timeout=30)
        want = ort(repo, "simple_string", feeds)
        for i, o in enumerate(resp.outputs):
            got = np.array(_split(resp.raw_output_contents[i]), dtype=object).reshape(list(o.shape))
            assert (got == want[o.name]).all(), (o.name, got, want[o.name])
        del req.inputs[1].contents.bytes_contents[-1]
        with pytest.raises(grpc.RpcError) as ei:
            stub.ModelInfer(req, timeout=30)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "got 31 bytes_contents values, expected 32" in ei.value.details(), ei.value.details()


def _split(raw):
    """The KServe BYTES wire layout into its elements."""
    out, off = [], 0
    while off < len(raw):
        (n,) = struct.unpack_from("<I", raw, off)
        out.append(bytes(raw[off + 4:off + 4 + n]))
        off += 4 + n
    assert off == len(raw)
    return out


@pytest.mark.parametrize("in_bin,out_bin", [(False, False), (True, True), (False, True), (True, False)])
def test_http(hc, repo, rng, in_bin, out_bin):
    feeds = pair(2, rng)
    ins = []
    for name, v in feeds.items():
        t = httpclient.InferInput(name, list(v.shape), "BYTES")
        t.set_data_from_numpy(v, binary_data=in_bin)
        ins.append(t)
    outs = [httpclient.InferRequestedOutput(o, binary_data=out_bin) for o in ("OUTPUT0", "OUTPUT1")]
    r = hc.infer("simple_string", ins, outputs=outs)
    check(r.as_numpy, ort(repo, "simple_string", feeds), ["OUTPUT0", "OUTPUT1"])


def test_http_nul_and_unicode(hc, srv):
    """A NUL inside BYTES data sent as JSON (\\u0000, as simple_http_string_infer_client sends) reaches
    the model and comes back, in JSON and in binary; non-ASCII UTF-8 too. Bytes that are not UTF-8
    cannot go back as JSON: 400 naming binary_data, and served as binary."""
    v = np.array([b"he\x00llo", "h\u00e9llo \u20ac".encode("utf-8"), b"", b'q"\\'], dtype=object).reshape(1, 4)
    for binary in (False, True):
        t = httpclient.InferInput("INPUT0", [1, 4], "BYTES")
        t.set_data_from_numpy(v, binary_data=binary)
        r = hc.infer("simple_identity", [t], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)])
        assert (as_bytes(r.as_numpy("OUTPUT0")) == v).all(), r.as_numpy("OUTPUT0")
    raw = np.array([b"\xff\xfe", b"ok"], dtype=object).reshape(1, 2)
    t = httpclient.InferInput("INPUT0", [1, 2], "BYTES")
    t.set_data_from_numpy(raw, binary_data=True)
    r = hc.infer("simple_identity", [t], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    assert (r.as_numpy("OUTPUT0") == raw).all()
    with pytest.raises(InferenceServerException) as ei:
        hc.infer("simple_identity", [t], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)])
    assert "not UTF-8" in str(ei.value) and "binary_data" in str(ei.value), str(ei.value)
    # a NUL anywhere but in BYTES data is still refused
    body = json.dumps({"id": "a\0b", "inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "BYTES",
                                                  "data": ["x\0y"]}]})
    status, _, text = lib.http_call(srv, "POST", "/v2/models/simple_identity/infer", body)
    text = text.decode()
    assert status == 400 and "must not contain NUL" in text, (status, text)


def test_shm(gc, repo, rng):
    """Inputs read from and outputs written to system shared memory regions in the wire layout."""
    feeds = pair(2, rng)
    want = ort(repo, "simple_string", feeds)
    b0, b1 = serialize_byte_tensor(feeds["INPUT0"]), serialize_byte_tensor(feeds["INPUT1"])
    n0, n1 = len(b0.item()), len(b1.item())
    size_in = n0 + n1
    out_cap = 4096
    pid = os.getpid()
    hin = shm.create_shared_memory_region("str_in", "/inferd_t_%d_str_in" % pid, size_in)
    hout = shm.create_shared_memory_region("str_out", "/inferd_t_%d_str_out" % pid, 2 * out_cap)
    try:
        shm.set_shared_memory_region(hin, [b0, b1])
        gc.register_system_shared_memory("str_in", "/inferd_t_%d_str_in" % pid, size_in)
        gc.register_system_shared_memory("str_out", "/inferd_t_%d_str_out" % pid, 2 * out_cap)
        ins = [grpcclient.InferInput("INPUT0", [2, 16], "BYTES"), grpcclient.InferInput("INPUT1", [2, 16], "BYTES")]
        ins[0].set_shared_memory("str_in", n0)
        ins[1].set_shared_memory("str_in", n1, offset=n0)
        outs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
        outs[0].set_shared_memory("str_out", out_cap)
        outs[1].set_shared_memory("str_out", out_cap, offset=out_cap)
        r = gc.infer("simple_string", ins, outputs=outs)
        for k, name in enumerate(("OUTPUT0", "OUTPUT1")):
            o = r.get_output(name)
            got = shm.get_contents_as_numpy(hout, np.object_, list(o.shape), offset=k * out_cap)
            assert (got == want[name]).all(), (name, got, want[name])
        # a byte_size that cuts the layout short is refused, naming the input
        ins[0].set_shared_memory("str_in", n0 - 1)
        with pytest.raises(InferenceServerException) as ei:
            gc.infer("simple_string", ins, outputs=outs)
        assert lib.status_name(ei.value) == "INVALID_ARGUMENT" and "input 'INPUT0'" in str(ei.value), str(ei.value)
    finally:
        gc.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(hin)
        shm.destroy_shared_memory_region(hout)


def test_batched_across_requests(gc, repo, rng):
    """Four requests of 1 row with strings of different lengths run as one batch of 4 rows (the rows
    concatenated); each gets its own rows back. Then 3 + 1 rows."""
    before = lib.model_stats(gc, "string_batched")
    for sizes in ([1, 1, 1, 1], [3, 1]):
        feeds = [pair(n, rng) for n in sizes]
        for k, f in enumerate(feeds):  # a long string in some rows: its bytes live in the input buffer
            f["INPUT0"][0, k] = (" " * (40 * k)).encode() + f["INPUT0"][0, k]
        with cf.ThreadPoolExecutor(len(sizes)) as ex:
            rs = list(ex.map(lambda f: grpc_infer(gc, "string_batched", f), feeds))
        for f, r in zip(feeds, rs):
            check(r.as_numpy, ort(repo, "string_batched", f), ["OUTPUT0", "OUTPUT1"])
    after = lib.model_stats(gc, "string_batched")
    assert after.inference_count - before.inference_count == 8
    assert after.execution_count - before.execution_count == 2, after


def test_string_ops(gc, hc, repo):
    """Identity, Gather and Concat move strings (long ones too); Cast to FLOAT and back prints as ORT."""
    v = np.array([[b"1.5", b" 0.1", b"1e20", b"-3"], [b"1e-7", b"3.14159265", b"1e40", b"123456789"],
                  [b"0x10", b"-0", b"inf", b"nan  but after the number, " * 2]], dtype=object)
    r = grpc_infer(gc, "str_ops", {"INPUT0": v})
    check(r.as_numpy, ort(repo, "str_ops", {"INPUT0": v}), ["PICK", "JOINED", "ROUND"])


def test_errors(gc, srv):
    """A raw BYTES tensor whose layout does not hold the shape's elements, and a string that holds no
    number for Cast: INVALID_ARGUMENT naming what is wrong. JSON data that is no string: 400."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    ok = serialize_byte_tensor(np.array([b"1"] * 16, dtype=object)).item()
    cases = [(ok[:-1], "ends inside an element"), (ok[:-3], "ends inside a length prefix"),
             (ok + b"\x00\x00\x00\x00", "has bytes after the last element"),
             (b"\xff\xff\xff\x7f" + ok[4:], "ends inside an element")]
    with grpc.insecure_channel(srv.grpc_url) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        for bad, why in cases:
            req = service_pb2.ModelInferRequest(model_name="simple_string")
            for name in ("INPUT0", "INPUT1"):
                req.inputs.add(name=name, datatype="BYTES", shape=[1, 16])
            req.raw_input_contents.extend([bad, ok])
            with pytest.raises(grpc.RpcError) as ei:
                stub.ModelInfer(req, timeout=30)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value
            assert "input 'INPUT0'" in ei.value.details() and why in ei.value.details(), ei.value.details()
    v = np.array([b"12"] * 15 + [b"twelve"], dtype=object).reshape(1, 16)
    with pytest.raises(InferenceServerException) as ei:
        grpc_infer(gc, "simple_string", {"INPUT0": v, "INPUT1": v})
    assert "element 15 ('twelve') is not a number" in str(ei.value), str(ei.value)
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "BYTES", "data": ["1", 2]}]})
    status, _, text = lib.http_call(srv, "POST", "/v2/models/simple_identity/infer", body)
    text = text.decode()
    assert status == 400 and "element 1 of data is not a string" in text, (status, text)
    # the server is still fine
    r = grpc_infer(gc, "simple_identity", {"INPUT0": v})
    assert (r.as_numpy("OUTPUT0") == v).all()
