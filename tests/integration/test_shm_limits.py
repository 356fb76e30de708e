"""Shared memory registrations are bounded (--shm-max-regions): each system region is one mapping of the
process, and with no limit a client registering tens of thousands of regions on one 4 KB object ran the
server into vm.max_map_count (mmap failed everywhere, a new client's call got a connection reset). At the
limit, a register gets RESOURCE_EXHAUSTED (gRPC) / 429 (REST) naming the flag, nothing more is mapped,
other clients keep being served, and unregistering makes room again."""

import http.client
import json
import os

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg

import inferd_testlib as lib

CAP = 8


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("shm_limits_repo"))
    lib.gen_models.add_mlp(lib.gen_models.Repo(d))
    return d


@pytest.fixture(scope="module")
def server(repo):
    yield from lib.served(repo, ["--allow-client-shm", "true", "--shm-max-regions", str(CAP)])


@pytest.fixture
def obj(server):
    """One 4 KB shared memory object; every region of the test maps it."""
    key = "/inferd_t_%d_lim" % os.getpid()
    h = shm.create_shared_memory_region("lim", key, 4096)
    yield key
    ch = grpc.insecure_channel(server.grpc_url)
    pbg.GRPCInferenceServiceStub(ch).SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name=""))
    ch.close()
    shm.destroy_shared_memory_region(h)


def _maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return sum(1 for _ in f)


def test_register_past_cap_refused_and_room_comes_back(server, obj):
    ch = grpc.insecure_channel(server.grpc_url)
    st = pbg.GRPCInferenceServiceStub(ch)
    reg = lambda name: st.SystemSharedMemoryRegister(
        pb.SystemSharedMemoryRegisterRequest(name=name, key=obj, offset=0, byte_size=4096))
    maps0 = _maps(server.proc.pid)
    for i in range(CAP):
        reg("r%d" % i)
    maps_full = _maps(server.proc.pid)
    for i in range(3):  # refused again and again, each mapping nothing
        with pytest.raises(grpc.RpcError) as ei:
            reg("extra%d" % i)
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, ei.value
        assert "--shm-max-regions" in ei.value.details() and str(CAP) in ei.value.details(), ei.value.details()
    assert _maps(server.proc.pid) <= maps_full + 2, (maps0, maps_full, _maps(server.proc.pid))
    # a taken name still says so first
    with pytest.raises(grpc.RpcError) as ei:
        reg("r0")
    assert ei.value.code() == grpc.StatusCode.ALREADY_EXISTS, ei.value

    # the REST route says 429 with the same words
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    status, _, body = lib.http_request(conn, "POST", "/v2/systemsharedmemory/region/viarest/register",
                                       json.dumps({"key": obj, "offset": 0, "byte_size": 4096}))
    assert status == 429 and "--shm-max-regions" in lib.rest_error(body), (status, body)

    # the status lists exactly the cap
    got = st.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(name=""))
    assert sorted(got.regions) == sorted("r%d" % i for i in range(CAP))

    # another client is served all along
    c = grpcclient.InferenceServerClient(url=server.grpc_url)
    x = grpcclient.InferInput("INPUT0", [4, 1024], "FP32")
    x.set_data_from_numpy(np.random.rand(4, 1024).astype(np.float32))
    assert c.infer("mlp", [x]).as_numpy("OUTPUT0").shape[0] == 4
    c.close()

    # unregistering one makes room for one
    st.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="r3"))
    reg("again")
    with pytest.raises(grpc.RpcError) as ei:
        reg("again2")
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    ch.close()


def test_bad_cap_refused_at_start(repo):
    err = lib.start_fails(repo, ["--shm-max-regions", "-1"])
    assert "--shm-max-regions" in err, err
