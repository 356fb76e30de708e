"""Client CUDA shared memory (Triton's cuda_shared_memory extension) where CI runs: a machine without a GPU,
so a CUDA-enabled or a CUDA-less build answers every call: Register refuses with a clear error, Status lists
nothing, Unregister of any name succeeds, over tritonclient.grpc, tritonclient.http and raw REST. On a machine
with a GPU (the device suite) a made-up handle is refused by the runtime instead; tests/gpu/cuda_shm_check.py
checks real regions there."""

import base64
import json

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

NO_DEVICE = "CUDA shared memory needs a CUDA device; this server has none"
HANDLE = bytes(range(64))  # the size of a cudaIpcMemHandle_t; no process exported it


@pytest.fixture(scope="module")
def cs_server(repo_dir):
    yield from lib.served(repo_dir, ["--allow-client-shm", "true"])


@pytest.fixture(scope="module")
def cc(cs_server):
    yield from lib.grpc_client(cs_server)


@pytest.fixture(scope="module")
def hc(cs_server):
    c = httpclient.InferenceServerClient(url=cs_server.http_url[len("http://"):])
    yield c
    c.close()


@pytest.fixture(scope="module")
def has_gpu(cc):
    return "cuda_shared_memory" in cc.get_server_metadata().extensions


def _err(fn):
    with pytest.raises(InferenceServerException) as ei:
        fn()
    return lib.status_name(ei.value), lib.error_message(ei.value)


def _http(server, method, path, body=None):
    status, _, raw = lib.http_call(server, method, path, body)
    return status, raw



def _assert_refused(status, msg, has_gpu):
    assert status == "INVALID_ARGUMENT", (status, msg)
    if has_gpu:  # the runtime's refusal of a handle no process exported
        assert "failed to open CUDA IPC handle" in msg, msg
    else:
        assert msg == NO_DEVICE, msg


def test_disabled_by_default(client):
    """Behind --allow-client-shm as system shared memory: refused and explained."""
    assert "cuda_shared_memory" not in client.get_server_metadata().extensions
    b64 = base64.b64encode(HANDLE)
    for fn in (lambda: client.register_cuda_shared_memory("r", b64, 0, 64),
               lambda: client.get_cuda_shared_memory_status(),
               lambda: client.unregister_cuda_shared_memory("r")):
        status, msg = _err(fn)
        assert status == "FAILED_PRECONDITION" and "--allow-client-shm" in msg, (status, msg)


def test_grpc_register_refused_status_empty(cc, has_gpu):
    status, msg = _err(lambda: cc.register_cuda_shared_memory("r", base64.b64encode(HANDLE), 0, 4096))
    _assert_refused(status, msg, has_gpu)
    assert cc.get_cuda_shared_memory_status(as_json=True).get("regions", {}) == {}
    status, msg = _err(lambda: cc.get_cuda_shared_memory_status("r"))
    assert status == "NOT_FOUND" and msg == "Unable to find cuda shared memory region: 'r'", (status, msg)
    cc.unregister_cuda_shared_memory("r")  # unknown: not an error (Triton's behaviour)
    cc.unregister_cuda_shared_memory()
    assert cc.is_server_live()


def test_grpc_register_argument_checks(cc, has_gpu):
    """A wrong handle size, device, size or name is refused with what is wrong (on a GPU machine; without one
    the missing device is the first thing said)."""
    cases = [(("r", base64.b64encode(HANDLE[:10]), 0, 64), "raw_handle has 10 bytes"),
             (("r", base64.b64encode(HANDLE), 4096, 64), "device_id 4096"),
             (("r", base64.b64encode(HANDLE), 0, 0), "byte_size 0"),
             (("", base64.b64encode(HANDLE), 0, 64), "needs a name")]
    for args, why in cases:
        status, msg = _err(lambda: cc.register_cuda_shared_memory(*args))
        assert status == "INVALID_ARGUMENT", (args, status, msg)
        assert (why in msg) if has_gpu else msg == NO_DEVICE, (args, msg)


def test_one_namespace_with_system_regions(cc):
    """A name held by a system region is not a CUDA region: Status says which kind it is."""
    h = shm.create_shared_memory_region("sys_r", "/inferd_cshm_%d" % id(cc), 64)
    try:
        cc.register_system_shared_memory("sys_r", "/inferd_cshm_%d" % id(cc), 64)
        status, msg = _err(lambda: cc.get_cuda_shared_memory_status("sys_r"))
        assert status == "NOT_FOUND" and "registered as system shared memory" in msg, (status, msg)
        assert cc.get_cuda_shared_memory_status(as_json=True).get("regions", {}) == {}
        cc.unregister_cuda_shared_memory("sys_r")  # not a CUDA region: nothing happens to the system one
        assert list(cc.get_system_shared_memory_status(as_json=True)["regions"]) == ["sys_r"]
    finally:
        cc.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(h)


def test_infer_naming_an_unregistered_region(cc):
    x = grpcclient.InferInput("INPUT0", [1, 1024], "FP32")
    x.set_shared_memory("no_such_cuda_region", 4096)
    status, msg = _err(lambda: cc.infer("mlp", [x]))
    assert status == "NOT_FOUND" and "INPUT0" in msg and "no_such_cuda_region" in msg, (status, msg)


def test_http_client(hc, has_gpu):
    status, msg = _err(lambda: hc.register_cuda_shared_memory("r", base64.b64encode(HANDLE).decode(), 0, 4096))
    assert "failed to open CUDA IPC handle" in msg if has_gpu else msg == NO_DEVICE, msg
    assert hc.get_cuda_shared_memory_status() == []
    hc.unregister_cuda_shared_memory("r")
    hc.unregister_cuda_shared_memory()
    with pytest.raises(InferenceServerException) as ei:
        hc.get_cuda_shared_memory_status("r")
    assert "Unable to find cuda shared memory region: 'r'" in str(ei.value)


def test_raw_rest_routes(cs_server, has_gpu):
    body = json.dumps({"raw_handle": {"b64": base64.b64encode(HANDLE).decode()}, "device_id": 0, "byte_size": 64})
    status, raw = _http(cs_server, "POST", "/v2/cudasharedmemory/region/r/register", body)
    assert status == 400, (status, raw)
    assert "failed to open CUDA IPC handle" in lib.rest_error(raw) if has_gpu else lib.rest_error(raw) == NO_DEVICE
    status, raw = _http(cs_server, "GET", "/v2/cudasharedmemory/status")
    assert status == 200 and json.loads(raw) == [], (status, raw)
    status, raw = _http(cs_server, "GET", "/v2/cudasharedmemory/region/r/status")
    assert status == 404 and lib.rest_error(raw) == "Unable to find cuda shared memory region: 'r'", (status, raw)
    status, raw = _http(cs_server, "POST", "/v2/cudasharedmemory/region/r/unregister")
    assert status == 200, (status, raw)
    status, raw = _http(cs_server, "POST", "/v2/cudasharedmemory/unregister")
    assert status == 200, (status, raw)
    # malformed bodies: a clear 400 before any device is asked
    for bad in ('{"raw_handle": {"b64": "@@@@"}, "device_id": 0, "byte_size": 64}',
                '{"raw_handle": "AAAA", "device_id": 0, "byte_size": 64}',
                '{"raw_handle": {"b64": "AAAA"}, "byte_size": 64}',
                '{"raw_handle": {"b64": "AAAA"}, "device_id": 1e30, "byte_size": 64}',
                '{"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 1e30}',
                'not json'):
        status, raw = _http(cs_server, "POST", "/v2/cudasharedmemory/region/r/register", bad)
        assert status == 400, (bad, status, raw)
        assert "base64" in lib.rest_error(raw) or "raw_handle" in lib.rest_error(raw), (bad, raw)
    status, raw = _http(cs_server, "GET", "/v2/cudasharedmemory/region/r/register")
    assert status == 405, (status, raw)
    status, raw = _http(cs_server, "GET", "/v2/cudasharedmemory/region/r/bogus")
    assert status == 405 or status == 404, (status, raw)


def test_rest_base64_as_libb64_writes_it(cs_server, has_gpu):
    """Triton's C++ client (libb64: perf_analyzer --shared-memory cuda -i http) breaks the handle's base64 into
    lines of 72 characters and ends it with a newline: the route reads it as the plain form (the device is
    asked, or without one the same 'no device' answer), and a digit after the padding is still refused."""
    b64 = base64.b64encode(HANDLE).decode()
    wrapped = "\n".join(b64[i:i + 72] for i in range(0, len(b64), 72)) + "\n"
    assert "\n" in wrapped[:-1]
    body = json.dumps({"raw_handle": {"b64": wrapped}, "device_id": 0, "byte_size": 64})
    status, raw = _http(cs_server, "POST", "/v2/cudasharedmemory/region/r/register", body)
    assert status == 400, (status, raw)
    assert "failed to open CUDA IPC handle" in lib.rest_error(raw) if has_gpu else lib.rest_error(raw) == NO_DEVICE
    for bad in (b64[:-4] + "=" + b64[-4:], b64 + "\n@"):
        body = json.dumps({"raw_handle": {"b64": bad}, "device_id": 0, "byte_size": 64})
        status, raw = _http(cs_server, "POST", "/v2/cudasharedmemory/region/r/register", body)
        assert status == 400 and "not valid base64" in lib.rest_error(raw), (bad, status, raw)


def test_rest_base64_decodes_exactly(cs_server, has_gpu):
    """A 64-byte handle without '=' padding decodes to 64 bytes (the size check passes on a GPU machine, so
    the runtime is asked), one of 63 bytes is refused for its size."""
    if not has_gpu:
        pytest.skip("without a device the size check is not reached")
    for handle, want in ((HANDLE, "failed to open CUDA IPC handle"), (HANDLE[:63], "raw_handle has 63 bytes")):
        b64 = base64.b64encode(handle).decode().rstrip("=")
        body = json.dumps({"raw_handle": {"b64": b64}, "device_id": 0, "byte_size": 64})
        status, raw = _http(cs_server, "POST", "/v2/cudasharedmemory/region/r/register", body)
        assert status == 400 and want in lib.rest_error(raw), (status, raw)
