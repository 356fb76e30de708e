"""Strings that are not UTF-8 in every gRPC method but ModelInfer (issue 15; ModelInfer's are in
test_hostile_strings.py): model names, versions, load parameters, trace and log settings, shared-memory
names and keys, the health service name and reflection requests are refused with INVALID_ARGUMENT naming
the field, before any handler quotes them ("unknown model '...'"): proto3 string fields must be UTF-8 and
protobuf-c does not check, and a client decodes the status details as UTF-8. Each case also sends the same
request with the placeholder left in, to show the refused bytes would otherwise have been echoed (or that
the request is otherwise served), and the server keeps answering throughout."""

import grpc
import pytest

import inferd_testlib as lib

SVC = "/inference.GRPCInferenceService/"
MARK = b"ZZZZ"  # replaced by broken bytes after serialisation (Python's protobuf refuses them)
BROKEN = [b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"ok\xe2\x82"]  # not UTF-8, overlong, surrogate, cut


@pytest.fixture(scope="module")
def userver(repo_dir, tmp_path_factory):
    """Every extension on, so each handler gets as far as it can: explicit model control (loads echo the
    name), shared memory (names and keys), a trace file (trace settings are parsed)."""
    trace = tmp_path_factory.mktemp("utf8") / "trace.json"
    yield from lib.served(repo_dir, ["--strict-readiness", "false", "--model-control-mode", "explicit",
                                     "--load-model", "mlp", "--allow-client-shm", "true",
                                     "--trace-file", str(trace)])


@pytest.fixture(scope="module")
def uch(userver):
    ch = grpc.insecure_channel(userver.grpc_url)
    grpc.channel_ready_future(ch).result(timeout=30)
    yield ch
    ch.close()


def broken(raw, bad):
    assert raw.count(MARK) == 1, raw
    return raw.replace(MARK, (bad + b"x" * 4)[:4])  # same length keeps every length prefix right


def _s(pb, cls, **kw):
    return getattr(pb.service, cls)(**kw)


def _load_param_key(pb):
    r = pb.service.RepositoryModelLoadRequest(model_name="mlp")
    r.parameters["ZZZZ"].string_param = "x"
    return r


def _load_config(pb):
    r = pb.service.RepositoryModelLoadRequest(model_name="nosuch")
    r.parameters["config"].string_param = 'max_batch_size: 4 name: "ZZZZ"'
    return r


def _unload_param_key(pb):
    r = pb.service.RepositoryModelUnloadRequest(model_name="nosuch")
    r.parameters["ZZZZ"].bool_param = True
    return r


def _trace_key(pb):
    r = pb.service.TraceSettingRequest()
    r.settings["ZZZZ"].value.append("1")
    return r


def _trace_value(pb):
    r = pb.service.TraceSettingRequest()
    r.settings["trace_rate"].value.append("ZZZZ")
    return r


def _log_key(pb):
    r = pb.service.LogSettingsRequest()
    r.settings["ZZZZ"].bool_param = True
    return r


def _log_value(pb):
    r = pb.service.LogSettingsRequest()
    r.settings["log_format"].string_param = "ZZZZ"
    return r


# (method, request with the placeholder, the field named in the refusal, what the unbroken request gets:
#  None when it is served, else words of its error, the placeholder where the handler quotes it)
CASES = [
    ("ModelReady", lambda pb: _s(pb, "ModelReadyRequest", name="ZZZZ"), "name", None),
    ("ModelReady", lambda pb: _s(pb, "ModelReadyRequest", name="mlp", version="ZZZZ"), "version", None),
    ("ModelMetadata", lambda pb: _s(pb, "ModelMetadataRequest", name="ZZZZ"), "name", "Request for unknown model: 'ZZZZ' is not found"),
    ("ModelMetadata", lambda pb: _s(pb, "ModelMetadataRequest", name="mlp", version="ZZZZ"), "version", "ZZZZ"),
    ("ModelConfig", lambda pb: _s(pb, "ModelConfigRequest", name="ZZZZ"), "name", "Request for unknown model: 'ZZZZ' is not found"),
    ("ModelStatistics", lambda pb: _s(pb, "ModelStatisticsRequest", name="ZZZZ"), "name", "Request for unknown model: 'ZZZZ' is not found"),
    ("ModelStatistics", lambda pb: _s(pb, "ModelStatisticsRequest", name="mlp", version="ZZZZ"), "version",
     "ZZZZ"),
    ("RepositoryIndex", lambda pb: _s(pb, "RepositoryIndexRequest", repository_name="ZZZZ"), "repository_name",
     None),
    ("RepositoryModelLoad", lambda pb: _s(pb, "RepositoryModelLoadRequest", model_name="ZZZZ"), "model_name",
     "failed to load 'ZZZZ'"),
    ("RepositoryModelLoad", _load_param_key, "parameters.key", "other than 'config'"),
    ("RepositoryModelLoad", _load_config, "parameters.value.string_param", "nosuch"),
    ("RepositoryModelUnload", lambda pb: _s(pb, "RepositoryModelUnloadRequest", model_name="ZZZZ"), "model_name",
     "failed to unload 'ZZZZ'"),
    ("RepositoryModelUnload", _unload_param_key, "parameters.key", "failed to unload 'nosuch'"),
    ("TraceSetting", lambda pb: _s(pb, "TraceSettingRequest", model_name="ZZZZ"), "model_name", "(model 'ZZZZ')"),
    ("TraceSetting", _trace_key, "settings.key", "unknown trace setting 'ZZZZ'"),
    ("TraceSetting", _trace_value, "settings.value.value", "'ZZZZ' is not a whole number"),
    ("LogSettings", _log_key, "settings.key", "unknown log setting 'ZZZZ'"),
    ("LogSettings", _log_value, "settings.value.string_param", "log_format 'ZZZZ'"),
    ("SystemSharedMemoryRegister",
     lambda pb: _s(pb, "SystemSharedMemoryRegisterRequest", name="ZZZZ", key="/inferd_utf8_none", byte_size=16),
     "name", "/inferd_utf8_none"),
    ("SystemSharedMemoryRegister",
     lambda pb: _s(pb, "SystemSharedMemoryRegisterRequest", name="r", key="/ZZZZ", byte_size=16), "key", "ZZZZ"),
    ("SystemSharedMemoryStatus", lambda pb: _s(pb, "SystemSharedMemoryStatusRequest", name="ZZZZ"), "name", "ZZZZ"),
    ("SystemSharedMemoryUnregister", lambda pb: _s(pb, "SystemSharedMemoryUnregisterRequest", name="ZZZZ"), "name",
     None),
    ("CudaSharedMemoryRegister",
     lambda pb: _s(pb, "CudaSharedMemoryRegisterRequest", name="ZZZZ", raw_handle=b"h" * 64, byte_size=16),
     "name", ""),
    ("CudaSharedMemoryStatus", lambda pb: _s(pb, "CudaSharedMemoryStatusRequest", name="ZZZZ"), "name", "ZZZZ"),
    ("CudaSharedMemoryUnregister", lambda pb: _s(pb, "CudaSharedMemoryUnregisterRequest", name="ZZZZ"), "name",
     None),
]


def _assert_refused(e, field, cls):
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.code(), e.details())
    d = e.details()
    assert isinstance(d, str) and "\ufffd" not in d, repr(d)
    assert "not valid UTF-8" in d and ("'%s'" % field) in d and cls in d, d
    assert "xx" not in d  # the padding after the broken bytes: nothing of the value is quoted


@pytest.mark.parametrize("method,make,field,control", CASES,
                         ids=["%s-%s" % (c[0], c[2]) for c in CASES])
def test_broken_utf8_refused_naming_the_field(uch, pb, method, make, field, control):
    req = make(pb)
    raw = req.SerializeToString()
    call = uch.unary_unary(SVC + method)
    for bad in BROKEN:
        with pytest.raises(grpc.RpcError) as ei:
            call(broken(raw, bad), timeout=10)
        _assert_refused(ei.value, field, req.DESCRIPTOR.full_name)
    # the same request unbroken: served, or refused for what it asks, quoting the placeholder where the
    # handler quotes client strings (the echo the UTF-8 check keeps broken bytes from)
    try:
        call(raw, timeout=30)
        assert control is None, "served; expected an error naming %r" % control
    except grpc.RpcError as e:
        assert control is not None, (e.code(), e.details())
        assert "not valid UTF-8" not in e.details() and control in e.details(), (e.code(), e.details())


def test_requests_without_strings_ignore_broken_unknown_fields(uch, pb):
    """ServerLive, ServerReady and ServerMetadata take no strings: an unknown field holding broken bytes is
    skipped (proto3), nothing of it is echoed, and the answers parse."""
    junk = b"\x0a\x04\xff\xfexx"  # field 1, length 4
    for method, resp in (("ServerLive", "ServerLiveResponse"), ("ServerReady", "ServerReadyResponse"),
                         ("ServerMetadata", "ServerMetadataResponse")):
        out = getattr(pb.service, resp).FromString(uch.unary_unary(SVC + method)(junk, timeout=10))
        if method == "ServerMetadata":
            assert out.name == "inferd" and "model_repository" in out.extensions
        else:
            assert out.ListFields()[0][1] is True


def test_health_check_service_name(uch):
    call = uch.unary_unary("/grpc.health.v1.Health/Check")
    with pytest.raises(grpc.RpcError) as ei:
        call(b"\x0a\x04\xff\xfexx", timeout=10)
    _assert_refused(ei.value, "service", "grpc.health.v1.HealthCheckRequest")
    with pytest.raises(grpc.RpcError) as ei:
        call(b"\x0a\x04ZZZZ", timeout=10)
    assert ei.value.code() == grpc.StatusCode.NOT_FOUND and "'ZZZZ'" in ei.value.details()
    assert call(b"", timeout=10) == b"\x08\x01"  # status SERVING


@pytest.mark.parametrize("path", ["/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                  "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"],
                         ids=["v1", "v1alpha"])
@pytest.mark.parametrize("field,raw", [("file_containing_symbol", b"\x22\x04ZZZZ"),
                                       ("file_by_filename", b"\x1a\x04ZZZZ"),
                                       ("host", b"\x0a\x04ZZZZ\x3a\x00")],
                         ids=["symbol", "filename", "host"])
def test_reflection_request_strings(uch, path, field, raw):
    """A reflection answer echoes its request (original_request, valid_host) and quotes unknown names."""
    from grpc_reflection.v1alpha import reflection_pb2
    call = uch.stream_stream(path)
    with pytest.raises(grpc.RpcError) as ei:
        list(call(iter([broken(raw, b"\xff\xfe")]), timeout=10))
    _assert_refused(ei.value, field, "grpc.reflection.v1.ServerReflectionRequest")
    answers = [reflection_pb2.ServerReflectionResponse.FromString(a) for a in call(iter([raw]), timeout=10)]
    assert len(answers) == 1 and "ZZZZ" in str(answers[0])  # the unbroken one is answered, echoing it


@pytest.mark.parametrize("bad", BROKEN)
def test_stream_error_message_is_utf8_and_the_stream_goes_on(uch, pb, bad):
    """ModelStreamInfer: a message with a broken model name or parameter key gets an error_message (UTF-8,
    naming the field), and the next message on the stream is served."""
    named = pb.service.ModelInferRequest(model_name="ZZZZ", id="a")
    keyed = pb.service.ModelInferRequest(model_name="mlp", id="b")
    keyed.parameters["ZZZZ"].bool_param = True
    good = pb.service.ModelInferRequest(model_name="nosuch", id="c")
    msgs = [broken(named.SerializeToString(), bad), broken(keyed.SerializeToString(), bad),
            good.SerializeToString()]
    answers = [pb.service.ModelStreamInferResponse.FromString(a)
               for a in uch.stream_stream(SVC + "ModelStreamInfer")(iter(msgs), timeout=20)]
    assert len(answers) == 3
    for a, words in zip(answers[:2], ("model_name is not valid UTF-8", "parameter is not valid UTF-8")):
        assert words in a.error_message and "\ufffd" not in a.error_message, a.error_message
    assert answers[1].infer_response.id == "b" and answers[1].infer_response.model_name == "mlp"
    assert "nosuch" in answers[2].error_message and answers[2].infer_response.id == "c"


def test_server_still_serves_after_the_refusals(uch, pb, userver):
    stub = pb.grpc.GRPCInferenceServiceStub(uch)
    assert stub.ServerLive(pb.service.ServerLiveRequest(), timeout=10).live
    assert stub.ModelReady(pb.service.ModelReadyRequest(name="mlp"), timeout=10).ready
    assert stub.ModelMetadata(pb.service.ModelMetadataRequest(name="mlp"), timeout=10).name == "mlp"
    assert not userver.sanitizer_lines()
