"""Strings a hostile client sends (issue 15): bytes that are not UTF-8 in ModelInfer's string fields are
refused with INVALID_ARGUMENT instead of being echoed into a response the client's parser then chokes on
(proto3 string fields must be UTF-8; protobuf-c does not check), on a stream too, where the error response
echoes only the fields that are valid; and names carrying newlines, terminal escapes or broken bytes reach
the debug log escaped, so a client cannot forge a log line. A NUL byte in any string (gRPC field, REST JSON
or path) is refused too, naming the field (issue 31)."""

import grpc
import numpy as np
import pytest

import inferd_testlib as lib

SVC = "/inference.GRPCInferenceService/"
MARK = "ZZZZ"  # replaced by broken bytes after serialisation (Python's protobuf refuses them)
BROKEN = [b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"ok\xe2\x82"]  # not UTF-8, overlong, surrogate, cut


def mlp_request(pb, rng, model="mlp", rid="r", in_name="INPUT0"):
    req = pb.service.ModelInferRequest(model_name=model, id=rid)
    t = req.inputs.add()
    t.name, t.datatype = in_name, "FP32"
    t.shape.extend([1, 1024])
    req.raw_input_contents.append(rng.standard_normal((1, 1024)).astype(np.float32).tobytes())
    return req


def with_broken(req, bad):
    raw = req.SerializeToString()
    assert raw.count(MARK.encode()) == 1
    # same length keeps every enclosing length prefix right
    return raw.replace(MARK.encode(), (bad + b"x" * 4)[:4])


@pytest.mark.parametrize("field", ["id", "model_name", "input name"])
@pytest.mark.parametrize("bad", BROKEN)
def test_unary_refuses_broken_utf8(channel, pb, rng, field, bad):
    kw = {"id": {"rid": MARK}, "model_name": {"model": MARK}, "input name": {"in_name": MARK}}[field]
    raw = with_broken(mlp_request(pb, rng, **kw), bad)
    with pytest.raises(grpc.RpcError) as ei:
        channel.unary_unary(SVC + "ModelInfer")(raw, timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
    assert "not valid UTF-8" in ei.value.details()


def test_valid_utf8_still_served(stub, pb, rng):
    resp = stub.ModelInfer(mlp_request(pb, rng, rid="résumé-日本-😀"), timeout=10)
    assert resp.id == "résumé-日本-😀" and resp.model_name == "mlp"


def test_stream_error_echoes_only_valid_fields(channel, pb, rng):
    good = mlp_request(pb, rng, rid="after").SerializeToString()
    bad = with_broken(mlp_request(pb, rng, rid=MARK), b"\xff\xfe")
    call = channel.stream_stream(SVC + "ModelStreamInfer")
    answers = list(call(iter([bad, good]), timeout=20))
    assert len(answers) == 2
    first = pb.service.ModelStreamInferResponse.FromString(answers[0])  # parses: nothing broken was echoed
    assert "not valid UTF-8" in first.error_message
    assert first.infer_response.id == "" and first.infer_response.model_name == "mlp"
    second = pb.service.ModelStreamInferResponse.FromString(answers[1])
    assert second.error_message == "" and second.infer_response.id == "after"


def test_debug_log_escapes_client_strings(start_server, pb):
    srv = start_server(["--log-level", "debug"])
    forged = "E1125 00:00:00.000000 inferd] forged"
    ch = grpc.insecure_channel(srv.grpc_url)
    try:
        req = pb.service.ModelInferRequest(model_name="nope\n" + forged + "\x1b[31m\\", id="x")
        with pytest.raises(grpc.RpcError) as ei:
            ch.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        raw = with_broken(pb.service.ModelInferRequest(model_name="mlp", id=MARK), b"\xff\xfe")
        with pytest.raises(grpc.RpcError):
            ch.unary_unary(SVC + "ModelInfer")(raw, timeout=10)
        lines = srv.await_stderr(lambda ls: any("forged" in l for l in ls)
                                 and any("not valid UTF-8" in l for l in ls))
    finally:
        ch.close()
    assert not any(l.startswith(forged) for l in lines), "a client forged a log line"
    hit = [l for l in lines if "forged" in l]
    assert hit and all("\\nE1125 00:00:00.000000 inferd] forged\\x1b[31m\\\\" in l for l in hit), hit
    assert not any("\x1b" in l for l in lines), "a terminal escape reached the log raw"
    srv.stop()
    srv.assert_clean_exit()


# --- limits a hostile client cannot get around (docs/flags.md, "Limits")

def test_name_and_id_limits(channel, pb, rng):
    call = channel.unary_unary(SVC + "ModelInfer")
    for kw, words in (({"in_name": "n" * 1025}, "an input name of 1025 bytes exceeds the limit of 1024"),
                      ({"model": "m" * 100000}, "model_name of 100000 bytes exceeds the limit of 1024"),
                      ({"rid": "i" * 4097}, "id of 4097 bytes exceeds the limit of 4096")):
        with pytest.raises(grpc.RpcError) as ei:
            call(mlp_request(pb, rng, **kw).SerializeToString(), timeout=10)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in ei.value.details(), \
            ei.value.details()[:300]
        assert len(ei.value.details()) < 400  # the oversized name is not quoted back
    resp = pb.service.ModelInferResponse.FromString(
        call(mlp_request(pb, rng, rid="i" * 4096).SerializeToString(), timeout=10))
    assert len(resp.id) == 4096  # at the limit: served


def test_more_inputs_or_outputs_than_the_model_has(channel, pb, rng):
    req = mlp_request(pb, rng)
    for k in range(5000):
        t = req.inputs.add()
        t.name, t.datatype = "X%d" % k, "FP32"
        t.shape.extend([1, 1])
    del req.raw_input_contents[:]
    with pytest.raises(grpc.RpcError) as ei:
        channel.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
    # refused at the first input that cannot be (INPUT0 without data, else X0): 5,000 more cost no more
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and len(ei.value.details()) < 300
    req.raw_input_contents.append(np.zeros(1024, np.float32).tobytes())
    with pytest.raises(grpc.RpcError) as ei:
        channel.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
    req = mlp_request(pb, rng)
    for k in range(3):
        req.outputs.add().name = "OUTPUT0"
    with pytest.raises(grpc.RpcError) as ei:
        channel.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "output 'OUTPUT0' is requested twice" in ei.value.details()


def test_concurrent_streams_per_connection(start_server, pb):
    """--grpc-max-concurrent-streams 4: a fifth call on the same connection waits for a free stream."""
    import queue
    srv = start_server(["--grpc-max-concurrent-streams", "4"])
    ch = grpc.insecure_channel(srv.grpc_url)
    stub = pb.grpc.GRPCInferenceServiceStub(ch)
    feeds = [queue.Queue() for _ in range(4)]

    def gen(q):
        while True:
            item = q.get()
            if item is None:
                return
            yield item
    streams = [stub.ModelStreamInfer(gen(q), timeout=60) for q in feeds]
    live = pb.service.ServerLiveRequest()
    try:
        # the four streams are open (each answered one request), so a fifth call cannot start
        for q, st in zip(feeds, streams):
            q.put(pb.service.ModelInferRequest(model_name="nope"))
            assert next(st).error_message
        with pytest.raises(grpc.RpcError) as ei:
            stub.ServerLive(live, timeout=1)
        assert ei.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        feeds[0].put(None)  # one stream ends: the call gets its stream
        assert list(streams[0]) == []
        assert stub.ServerLive(live, timeout=10).live
    finally:
        for q in feeds:
            q.put(None)
        ch.close()
    srv.stop()
    srv.assert_clean_exit()


# --- NUL bytes (issue 31): protobuf-c and cJSON hand strings over NUL-terminated, so "mlp\0junk" was read as
# "mlp": served by mlp, a key "/victim\0junk" opened /victim, and a proxy's allow-list in front of inferd
# compared other bytes than inferd used. Every such string is refused, naming its field, never quoting it.

def _shm_register(pb, key, name="r"):
    return pb.service.SystemSharedMemoryRegisterRequest(name=name, key=key, byte_size=64).SerializeToString()


@pytest.mark.parametrize("field,where", [("model_name", "model_name"), ("input name", "inputs.name"),
                                         ("datatype", "inputs.datatype"), ("id", "'id'")])
def test_unary_refuses_nul(channel, pb, rng, field, where):
    req = mlp_request(pb, rng, rid="abc\0def" if field == "id" else "r",
                      model="mlp\0junk" if field == "model_name" else "mlp",
                      in_name="INPUT0\0junk" if field == "input name" else "INPUT0")
    if field == "datatype":
        req.inputs[0].datatype = "FP32\0zz"
    with pytest.raises(grpc.RpcError) as ei:
        channel.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
    assert "NUL byte" in ei.value.details() and where in ei.value.details(), ei.value.details()
    assert "junk" not in ei.value.details() and "zz" not in ei.value.details()  # named, not quoted


def test_nul_in_parameters_and_other_methods(channel, pb, rng):
    req = mlp_request(pb, rng)
    req.parameters["pri\0ority"].int64_param = 1
    with pytest.raises(grpc.RpcError) as ei:
        channel.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'parameters.key'" in ei.value.details()
    req = mlp_request(pb, rng)
    req.inputs[0].parameters["k"].string_param = "v\0w"
    with pytest.raises(grpc.RpcError) as ei:
        channel.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
    assert "'inputs.parameters.value.string_param'" in ei.value.details(), ei.value.details()
    for method, msg in (("ModelMetadata", pb.service.ModelMetadataRequest(name="mlp\0junk")),
                        ("ModelReady", pb.service.ModelReadyRequest(name="mlp\0junk")),
                        ("ModelConfig", pb.service.ModelConfigRequest(name="mlp", version="1\0"))):
        with pytest.raises(grpc.RpcError) as ei:
            channel.unary_unary(SVC + method)(msg.SerializeToString(), timeout=10)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "NUL byte" in ei.value.details(), method
    # the control: the same requests without the NUL are served
    assert pb.service.ModelMetadataResponse.FromString(channel.unary_unary(SVC + "ModelMetadata")(
        pb.service.ModelMetadataRequest(name="mlp").SerializeToString(), timeout=10)).name == "mlp"
    req = mlp_request(pb, rng, rid="abcdef")
    req.parameters["priority"].int64_param = 1
    req.inputs[0].parameters["k"].string_param = "vw"
    resp = pb.service.ModelInferResponse.FromString(
        channel.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10))
    assert resp.id == "abcdef" and resp.model_name == "mlp"


def test_stream_refuses_nul_model_name(channel, pb, rng):
    bad = mlp_request(pb, rng, model="mlp\0junk", rid="first").SerializeToString()
    good = mlp_request(pb, rng, rid="after").SerializeToString()
    answers = list(channel.stream_stream(SVC + "ModelStreamInfer")(iter([bad, good]), timeout=20))
    assert len(answers) == 2
    first = pb.service.ModelStreamInferResponse.FromString(answers[0])
    assert "NUL byte" in first.error_message and "model_name" in first.error_message, first.error_message
    second = pb.service.ModelStreamInferResponse.FromString(answers[1])
    assert second.error_message == "" and second.infer_response.id == "after"


def _rest(srv, method, path, body=None):
    status, _, raw = lib.http_call(srv, method, path, body, {"Content-Type": "application/json"} if body else None)
    return status, raw


def test_rest_refuses_nul(server, rng):
    import json
    x = rng.standard_normal(1024).astype(np.float32).tolist()

    def body(model_field=None, **over):
        inp = {"name": "INPUT0", "shape": [1, 1024], "datatype": "FP32", "data": x}
        inp.update({k: v for k, v in over.items() if k in inp})
        b = {"id": over.get("id", "r"), "inputs": [inp]}
        if "param" in over:
            b["parameters"] = {over["param"]: 1}
        return json.dumps(b)  # a NUL goes out as \u0000

    status, raw = _rest(server, "POST", "/v2/models/mlp%00junk/infer", body())
    assert status == 400, raw
    for kw in ({"name": "INPUT0\0junk"}, {"datatype": "FP32\0zz"}, {"id": "abc\0def"}, {"param": "pri\0ority"}):
        b = body(**kw)
        assert "\\u0000" in b
        status, raw = _rest(server, "POST", "/v2/models/mlp/infer", b)
        assert status == 400 and b"must not contain NUL" in json.loads(raw)["error"].encode(), (kw, raw)
    # the control: the same requests without the NUL are served ("\\u0000" as text is no NUL)
    status, raw = _rest(server, "POST", "/v2/models/mlp/infer", body(id="abc\\u0000def"))
    assert status == 200 and json.loads(raw)["id"] == "abc\\u0000def", raw
    status, raw = _rest(server, "POST", "/v2/models/mlp/infer", body(id="abcdef"))
    assert status == 200 and json.loads(raw)["id"] == "abcdef", raw


def test_shm_key_with_nul(start_server, pb):
    import json
    import os
    import tritonclient.utils.shared_memory as shm
    srv = start_server(["--allow-client-shm", "true"])
    key = "/inferd_t_%d_victim" % os.getpid()
    h = shm.create_shared_memory_region("victim", key, 64)
    ch = grpc.insecure_channel(srv.grpc_url)
    try:
        reg = ch.unary_unary(SVC + "SystemSharedMemoryRegister")
        with pytest.raises(grpc.RpcError) as ei:
            reg(_shm_register(pb, key + "\0junk"), timeout=10)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
        assert "'key'" in ei.value.details() and "NUL byte" in ei.value.details()
        assert "victim" not in ei.value.details()
        status, raw = _rest(srv, "POST", "/v2/systemsharedmemory/region/r2/register",
                            json.dumps({"key": key + "\0junk", "byte_size": 64}))
        assert status == 400 and b"must not contain NUL" in raw, raw
        st = pb.service.SystemSharedMemoryStatusResponse.FromString(ch.unary_unary(SVC + "SystemSharedMemoryStatus")(
            pb.service.SystemSharedMemoryStatusRequest().SerializeToString(), timeout=10))
        assert dict(st.regions) == {}
        # the control: the key itself registers, over both
        reg(_shm_register(pb, key), timeout=10)
        status, raw = _rest(srv, "POST", "/v2/systemsharedmemory/region/r2/register",
                            json.dumps({"key": key, "byte_size": 64}))
        assert status == 200, raw
        ch.unary_unary(SVC + "SystemSharedMemoryUnregister")(
            pb.service.SystemSharedMemoryUnregisterRequest().SerializeToString(), timeout=10)
    finally:
        ch.close()
        shm.destroy_shared_memory_region(h)
    srv.stop()
    srv.assert_clean_exit()


# --- F12: Unicode line separators and bidi controls, control characters in region names, errors that quote
# a client's string

HIDDEN = "\u2028\u2029\u202a\u202e\u2066\u2069\x85"  # separators, bidi embed/override/isolate, C1 NEL
HIDDEN_ESC = "\\xe2\\x80\\xa8\\xe2\\x80\\xa9\\xe2\\x80\\xaa\\xe2\\x80\\xae\\xe2\\x81\\xa6\\xe2\\x81\\xa9\\xc2\\x85"


def test_log_and_errors_escape_separators_and_bidi(start_server, pb):
    srv = start_server(["--log-level", "debug"])
    ch = grpc.insecure_channel(srv.grpc_url)
    try:
        req = pb.service.ModelInferRequest(model_name="nope" + HIDDEN + "\x1b[31mend", id="x")
        with pytest.raises(grpc.RpcError) as ei:
            ch.unary_unary(SVC + "ModelInfer")(req.SerializeToString(), timeout=10)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        d = ei.value.details()
        # the error quotes the name escaped: no ESC, separator or bidi control comes back raw
        assert not any(c in d for c in HIDDEN + "\x1b"), repr(d)
        assert "nope" + HIDDEN_ESC + "\\x1b[31mend" in d, repr(d)
        # on a stream, the error_message too
        call = ch.stream_stream(SVC + "ModelStreamInfer")
        answers = list(call(iter([req.SerializeToString()]), timeout=20))
        first = pb.service.ModelStreamInferResponse.FromString(answers[0])
        assert "nope" + HIDDEN_ESC + "\\x1b[31mend" in first.error_message, repr(first.error_message)
        # the same through REST (the JSON decodes to the escaped text, not to raw controls)
        status, raw = _rest(srv, "GET", "/v2/models/nope%1b%e2%80%ae/ready")
        assert status in (400, 404), raw
        lines = srv.await_stderr(lambda ls: any("nope\\xe2\\x80\\xa8" in l for l in ls))
    finally:
        ch.close()
    joined = "\n".join(lines)
    assert not any(c in joined for c in HIDDEN + "\x1b"), "a separator, bidi control or ESC reached the log raw"
    assert any("nope" + HIDDEN_ESC in l for l in lines), lines[-5:]
    # ordinary non-ASCII text stays as it is
    with pytest.raises(grpc.RpcError) as ei:
        c2 = grpc.insecure_channel(srv.grpc_url)
        try:
            c2.unary_unary(SVC + "ModelInfer")(
                pb.service.ModelInferRequest(model_name="résumé-日本", id="x").SerializeToString(), timeout=10)
        finally:
            c2.close()
    assert "résumé-日本" in ei.value.details()
    srv.stop()
    srv.assert_clean_exit()


def test_region_names_with_control_characters_refused(start_server, pb):
    import json
    import os
    import tritonclient.utils.shared_memory as shm
    srv = start_server(["--allow-client-shm", "true"])
    key = "/inferd_t_%d_ctl" % os.getpid()
    h = shm.create_shared_memory_region("ctl", key, 64)
    ch = grpc.insecure_channel(srv.grpc_url)
    try:
        reg = ch.unary_unary(SVC + "SystemSharedMemoryRegister")
        creg = ch.unary_unary(SVC + "CudaSharedMemoryRegister")
        for name in ("r\nE1202 forged", "r\x1b[31m", "r\x7f", "r\x85"):
            with pytest.raises(grpc.RpcError) as ei:
                reg(_shm_register(pb, key, name=name), timeout=10)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
            assert "region name contains control characters" in ei.value.details()
            assert "forged" not in ei.value.details()
            with pytest.raises(grpc.RpcError) as ei:
                creg(pb.service.CudaSharedMemoryRegisterRequest(name=name, raw_handle=b"\0" * 64, device_id=0,
                                                                 byte_size=64).SerializeToString(), timeout=10)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
            assert "region name contains control characters" in ei.value.details()
        status, raw = _rest(srv, "POST", "/v2/systemsharedmemory/region/r%1b/register",
                            json.dumps({"key": key, "byte_size": 64}))
        assert status == 400 and b"control characters" in raw, raw
        st = pb.service.SystemSharedMemoryStatusResponse.FromString(ch.unary_unary(SVC + "SystemSharedMemoryStatus")(
            pb.service.SystemSharedMemoryStatusRequest().SerializeToString(), timeout=10))
        assert dict(st.regions) == {}
        # the control: a name with ordinary non-ASCII letters registers
        reg(_shm_register(pb, key, name="région-日本"), timeout=10)
        ch.unary_unary(SVC + "SystemSharedMemoryUnregister")(
            pb.service.SystemSharedMemoryUnregisterRequest().SerializeToString(), timeout=10)
    finally:
        ch.close()
        shm.destroy_shared_memory_region(h)
    srv.stop()
    srv.assert_clean_exit()
