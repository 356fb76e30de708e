"""Server-level surface: liveness/readiness over gRPC and HTTP, ServerMetadata, grpc.health.v1,
server reflection (v1alpha through grpcio-reflection's descriptor database, and a raw v1 stream),
and UNIMPLEMENTED for every method inferd does not serve."""

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

import inferd_testlib as lib

INFER_SVC = "inference.GRPCInferenceService"
HEALTH_SVC = "grpc.health.v1.Health"


def test_server_live_and_ready(client, stub, pb):
    assert client.is_server_live() is True
    assert client.is_server_ready() is True
    assert stub.ServerLive(pb.service.ServerLiveRequest(), timeout=10).live is True
    assert stub.ServerReady(pb.service.ServerReadyRequest(), timeout=10).ready is True


def test_server_metadata(client):
    md = client.get_server_metadata()
    assert md.name == "inferd"
    assert md.version, "ServerMetadata.version is empty"
    ext = list(md.extensions)
    assert isinstance(ext, list)
    assert all(isinstance(e, str) and e for e in ext), ext
    assert "logging" in ext and "model_repository" in ext and "binary_tensor_data" in ext, ext
    for unimplemented in ("system_shared_memory", "cuda_shared_memory", "sequence",
                          "model_repository(unload_dependents)", "trace", "schedule_policy"):
        assert unimplemented not in ext, "extensions %s claim unimplemented %r" % (ext, unimplemented)


def test_grpc_health_check(channel):
    h = health_pb2_grpc.HealthStub(channel)
    r = h.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_http_health_and_404(server):
    assert lib.http_get(server.http_url + "/v2/health/live")[0] == 200
    assert lib.http_get(server.http_url + "/v2/health/ready")[0] == 200
    assert lib.http_get(server.http_url + "/no/such/path")[0] == 404
    assert lib.http_get(server.http_url + "/v2/health/nope")[0] == 404
    # still answering after the 404s
    assert lib.http_get(server.http_url + "/v2/health/live")[0] == 200


def test_reflection_descriptor_database(channel):
    db = ProtoReflectionDescriptorDatabase(channel)
    services = db.get_services()
    assert INFER_SVC in services, services
    assert HEALTH_SVC in services, services
    pool = descriptor_pool.DescriptorPool(db)
    svc = pool.FindServiceByName(INFER_SVC)
    methods = {m.name for m in svc.methods}
    for m in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
              "ModelConfig", "ModelStatistics", "RepositoryIndex"):
        assert m in methods, (m, methods)
    infer = svc.methods_by_name["ModelInfer"]
    assert infer.input_type.full_name == "inference.ModelInferRequest"
    req = pool.FindMessageTypeByName("inference.ModelInferRequest")
    # Field numbers are the wire contract with Triton's clients.
    assert req.fields_by_name["model_name"].number == 1
    assert req.fields_by_name["inputs"].number == 5
    assert req.fields_by_name["raw_input_contents"].number == 7
    hs = pool.FindServiceByName(HEALTH_SVC)
    assert "Check" in {m.name for m in hs.methods}


def _raw_reflection(channel, path, request):
    call = channel.stream_stream(path, request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                 response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
    return list(call(iter([request]), timeout=10))


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_raw_list_services(channel, client, version):
    # v1 and v1alpha share every message and field number; only the service path differs.
    path = "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version
    resps = _raw_reflection(channel, path, reflection_pb2.ServerReflectionRequest(list_services=""))
    assert len(resps) == 1
    assert resps[0].WhichOneof("message_response") == "list_services_response"
    names = [s.name for s in resps[0].list_services_response.service]
    assert INFER_SVC in names and HEALTH_SVC in names, names
    resps = _raw_reflection(channel, path, reflection_pb2.ServerReflectionRequest(
        file_containing_symbol=INFER_SVC))
    assert resps[0].WhichOneof("message_response") == "file_descriptor_response"
    assert len(resps[0].file_descriptor_response.file_descriptor_proto) >= 1
    resps = _raw_reflection(channel, path, reflection_pb2.ServerReflectionRequest(
        file_containing_symbol="no.such.Symbol"))
    assert resps[0].WhichOneof("message_response") == "error_response"
    assert resps[0].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert client.is_server_live()


def _expect_unimplemented(fn):
    with pytest.raises(grpc.RpcError) as ei:
        fn()
    assert ei.value.code() == grpc.StatusCode.UNIMPLEMENTED, (ei.value.code(), ei.value.details())


def test_unimplemented_methods(channel, stub, pb, client):
    # CUDA shared memory exists now, behind --allow-client-shm as system shared memory (test_cuda_shm.py)
    with pytest.raises(grpc.RpcError) as ei:
        stub.CudaSharedMemoryStatus(pb.service.CudaSharedMemoryStatusRequest(), timeout=10)
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION, ei.value
    assert "--allow-client-shm" in ei.value.details(), ei.value
    # model control exists now; the shared server runs in none mode, where Triton refuses it with UNAVAILABLE
    with pytest.raises(grpc.RpcError) as ei:
        stub.RepositoryModelLoad(pb.service.RepositoryModelLoadRequest(model_name="mlp"), timeout=10)
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE and "explicit" in ei.value.details(), ei.value
    for path in ("/inference.GRPCInferenceService/NoSuchMethod", "/no.such.Service/Call", "/x"):
        call = channel.unary_unary(path)  # no serializers: bytes go out as they are
        _expect_unimplemented(lambda: call(b"", timeout=10))
    assert client.is_server_ready()
