"""Client system shared memory (Triton's system_shared_memory extension) through tritonclient's own
helpers (tritonclient.utils.shared_memory) and raw grpc: register / status / unregister, inputs read from
and outputs written to regions (alone, mixed with raw tensors, at offsets, batched together), every
refusal with its status code, and the extension off by default (Triton's --allow-client-shm)."""

import concurrent.futures as cf
import os

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib


@pytest.fixture(scope="module")
def shm_repo(tmp_path_factory):
    """The seed mlp, the two-input elementwise model and the batching models (bt_pref4 batches by four)."""
    g = lib.gen_models
    return lib.generated_repo(tmp_path_factory, "shm_repo", (g.add_mlp, g.add_ops_elementwise, g.add_batching))


@pytest.fixture(scope="module")
def sspecs(shm_repo):
    return shm_repo[1]


@pytest.fixture(scope="module")
def soracle(shm_repo):
    return lib.Oracle(*shm_repo)


@pytest.fixture(scope="module")
def shm_server(shm_repo):
    yield from lib.served(shm_repo[0], ["--allow-client-shm", "true"])


@pytest.fixture(scope="module")
def sc(shm_server):
    yield from lib.grpc_client(shm_server)


@pytest.fixture
def regions(sc):
    """Creates regions on demand (name -> handle); unregisters and destroys them all afterwards."""
    made = []

    def _make(name, byte_size, register=True, offset=0):
        key = "/inferd_t_%d_%s" % (os.getpid(), name)
        h = shm.create_shared_memory_region(name, key, byte_size)
        made.append(h)
        if register:
            sc.register_system_shared_memory(name, key, byte_size - offset, offset=offset)
        return h, key

    yield _make
    sc.unregister_system_shared_memory()
    for h in made:
        shm.destroy_shared_memory_region(h)


def _err(fn):
    with pytest.raises(InferenceServerException) as ei:
        fn()
    return lib.status_name(ei.value), lib.error_message(ei.value)


def _shm_input(name, shape, dt, region, nbytes, offset=0):
    x = grpcclient.InferInput(name, list(shape), dt)
    x.set_shared_memory(region, nbytes, offset=offset)
    return x


def _shm_output(name, region, nbytes, offset=0):
    o = grpcclient.InferRequestedOutput(name)
    o.set_shared_memory(region, nbytes, offset=offset)
    return o


def test_disabled_by_default(server, client, stub, pb):
    """The shared server runs without --allow-client-shm: no extension, every use refused and explained."""
    assert "system_shared_memory" not in client.get_server_metadata().extensions
    status, msg = _err(lambda: client.register_system_shared_memory("r", "/inferd_nope", 64))
    assert status == "FAILED_PRECONDITION" and "--allow-client-shm" in msg, (status, msg)
    status, msg = _err(lambda: client.get_system_shared_memory_status())
    assert status == "FAILED_PRECONDITION", (status, msg)
    x = _shm_input("INPUT0", [1, 1024], "FP32", "r", 4096)
    status, msg = _err(lambda: client.infer("mlp", [x]))
    assert status == "FAILED_PRECONDITION" and "INPUT0" in msg and "--allow-client-shm" in msg, (status, msg)
    assert client.is_server_ready()


def test_register_status_unregister(sc, regions):
    assert "system_shared_memory" in sc.get_server_metadata().extensions
    _, key_a = regions("reg_a", 4096)
    _, key_b = regions("reg_b", 8192, offset=4096)
    st = sc.get_system_shared_memory_status(as_json=True)["regions"]
    assert st["reg_a"] == {"name": "reg_a", "key": key_a, "byte_size": "4096"}, st
    assert st["reg_b"] == {"name": "reg_b", "key": key_b, "offset": "4096", "byte_size": "4096"}, st
    one = sc.get_system_shared_memory_status("reg_b", as_json=True)["regions"]
    assert list(one) == ["reg_b"], one
    status, msg = _err(lambda: sc.get_system_shared_memory_status("nope"))
    assert status == "NOT_FOUND" and "'nope'" in msg, (status, msg)
    status, msg = _err(lambda: sc.register_system_shared_memory("reg_a", key_a, 16))
    assert status == "ALREADY_EXISTS" and "'reg_a'" in msg, (status, msg)
    sc.unregister_system_shared_memory("reg_a")
    sc.unregister_system_shared_memory("reg_a")  # unknown now: not an error (Triton's behaviour)
    assert list(sc.get_system_shared_memory_status(as_json=True)["regions"]) == ["reg_b"]
    sc.unregister_system_shared_memory()
    assert sc.get_system_shared_memory_status(as_json=True).get("regions", {}) == {}


def test_register_refusals(sc, regions):
    _, key = regions("small", 4096, register=False)
    status, msg = _err(lambda: sc.register_system_shared_memory("r", "/inferd_no_such_key_%d" % os.getpid(), 64))
    assert status == "INVALID_ARGUMENT" and "inferd_no_such_key" in msg, (status, msg)
    status, msg = _err(lambda: sc.register_system_shared_memory("r", key, 4097))
    assert status == "INVALID_ARGUMENT" and "holds 4096 bytes" in msg, (status, msg)
    status, msg = _err(lambda: sc.register_system_shared_memory("r", key, 100, offset=4000))
    assert status == "INVALID_ARGUMENT", (status, msg)
    status, msg = _err(lambda: sc.register_system_shared_memory("r", key, 0))
    assert status == "INVALID_ARGUMENT" and "byte_size 0" in msg, (status, msg)
    status, msg = _err(lambda: sc.register_system_shared_memory("", key, 64))
    assert status == "INVALID_ARGUMENT", (status, msg)
    assert sc.get_system_shared_memory_status(as_json=True).get("regions", {}) == {}


def test_mlp_in_and_out_of_shared_memory(sc, regions, sspecs, soracle, rng):
    """Input and output both in regions, at offsets: the answer is onnxruntime's, nothing in the response."""
    feeds = lib.random_inputs(sspecs["mlp"], rng, 3)
    want = soracle.run("mlp", feeds)["OUTPUT0"]
    x = feeds["INPUT0"]
    h_in, _ = regions("mlp_in", 256 + x.nbytes)
    h_out, _ = regions("mlp_out", 512 + want.nbytes)
    shm.set_shared_memory_region(h_in, [x], offset=256)
    res = sc.infer("mlp", [_shm_input("INPUT0", x.shape, "FP32", "mlp_in", x.nbytes, offset=256)],
                   outputs=[_shm_output("OUTPUT0", "mlp_out", want.nbytes, offset=512)])
    resp = res.get_response()
    out = resp.outputs[0]
    assert out.name == "OUTPUT0" and list(out.shape) == [3, 10] and out.datatype == "FP32"
    assert [len(b) for b in resp.raw_output_contents] == [0], "output bytes must not travel in the response"
    got = shm.get_contents_as_numpy(h_out, np.float32, [3, 10], offset=512)
    lib.assert_close(got, want, sspecs["mlp"]["rtol"], what="mlp output from shared memory")


def test_mixed_inputs_and_outputs(sc, regions, sspecs, soracle, rng):
    """One input in shared memory and one sent raw; some outputs to a region, the others in the response
    (whose raw_output_contents keeps an empty entry per shared-memory output, so indexes line up)."""
    spec = sspecs["ops_elementwise"]
    feeds = lib.random_inputs(spec, rng, 2)
    want = soracle.run("ops_elementwise", feeds)
    b = feeds["ELT_B"]
    h, _ = regions("elt", b.nbytes + 2 * want["ELT_MUL"].nbytes)
    shm.set_shared_memory_region(h, [b])
    a_in = grpcclient.InferInput("ELT_A", list(feeds["ELT_A"].shape), "FP32")
    a_in.set_data_from_numpy(feeds["ELT_A"])
    nb = want["ELT_MUL"].nbytes
    outs = [grpcclient.InferRequestedOutput("ELT_ADD"), _shm_output("ELT_MUL", "elt", nb, offset=b.nbytes),
            grpcclient.InferRequestedOutput("ELT_RELU"), _shm_output("ELT_TANH", "elt", nb, offset=b.nbytes + nb)]
    for order in ([a_in, _shm_input("ELT_B", b.shape, "FP32", "elt", b.nbytes)],
                  [_shm_input("ELT_B", b.shape, "FP32", "elt", b.nbytes), a_in]):
        res = sc.infer("ops_elementwise", order, outputs=outs)
        lib.assert_close(res.as_numpy("ELT_ADD"), want["ELT_ADD"], spec["rtol"], what="ELT_ADD (response)")
        lib.assert_close(res.as_numpy("ELT_RELU"), want["ELT_RELU"], spec["rtol"], what="ELT_RELU (response)")
        assert [o.name for o in res.get_response().outputs] == ["ELT_ADD", "ELT_MUL", "ELT_RELU", "ELT_TANH"]
        for name, off in (("ELT_MUL", b.nbytes), ("ELT_TANH", b.nbytes + nb)):
            got = shm.get_contents_as_numpy(h, np.float32, [2, 4, 6], offset=off)
            lib.assert_close(got, want[name], spec["rtol"], what="%s (shared memory)" % name)


def test_batched_requests_each_in_their_own_window(shm_server, sc, regions, sspecs, soracle, rng):
    """bt_pref4 waits for four requests: four shared-memory requests form one batch, each request's
    rows are read from its window and its answer written to its own window of one output region."""
    spec = sspecs["bt_pref4"]
    feeds = [lib.random_inputs(spec, rng, 1) for _ in range(4)]
    wants = [soracle.run("bt_pref4", f)["V_Y"] for f in feeds]
    nin, nout = feeds[0]["V_X"].nbytes, wants[0].nbytes
    h_in, _ = regions("bt_in", 4 * nin)
    h_out, _ = regions("bt_out", 4 * nout)
    for i, f in enumerate(feeds):
        shm.set_shared_memory_region(h_in, [f["V_X"]], offset=i * nin)
    before = sc.get_inference_statistics("bt_pref4").model_stats[0]

    def one(i):
        with grpcclient.InferenceServerClient(url=shm_server.grpc_url) as c:
            return c.infer("bt_pref4", [_shm_input("V_X", [1, 8], "FP32", "bt_in", nin, offset=i * nin)],
                           outputs=[_shm_output("V_Y", "bt_out", nout, offset=i * nout)])

    with cf.ThreadPoolExecutor(4) as ex:
        list(ex.map(one, range(4)))
    after = sc.get_inference_statistics("bt_pref4").model_stats[0]
    assert after.execution_count - before.execution_count == 1, "the four requests did not form one batch"
    assert after.inference_count - before.inference_count == 4
    for i in range(4):
        got = shm.get_contents_as_numpy(h_out, np.float32, [1, 4], offset=i * nout)
        lib.assert_close(got, wants[i], spec["rtol"], what="request %d" % i)


def test_infer_refusals(sc, regions, sspecs, rng):
    """Each bad use of a region is INVALID_ARGUMENT (or NOT_FOUND) naming the tensor; the server goes on."""
    feeds = lib.random_inputs(sspecs["mlp"], rng, 1)
    x = feeds["INPUT0"]
    h, _ = regions("bad", x.nbytes)
    shm.set_shared_memory_region(h, [x])
    cases = [
        # (inputs, outputs, status, words in the message)
        ([_shm_input("INPUT0", x.shape, "FP32", "nope", x.nbytes)], None, "NOT_FOUND", ["INPUT0", "'nope'"]),
        ([_shm_input("INPUT0", x.shape, "FP32", "bad", x.nbytes - 4)], None, "INVALID_ARGUMENT",
         ["INPUT0", "shared_memory_byte_size 4092", "4096"]),
        ([_shm_input("INPUT0", x.shape, "FP32", "bad", x.nbytes, offset=4)], None, "INVALID_ARGUMENT",
         ["INPUT0", "does not fit"]),
        ([_shm_input("INPUT0", x.shape, "FP32", "bad", x.nbytes)], [_shm_output("OUTPUT0", "bad", 39)],
         "INVALID_ARGUMENT", ["OUTPUT0", "40 bytes", "39"]),
        ([_shm_input("INPUT0", x.shape, "FP32", "bad", x.nbytes)], [_shm_output("OUTPUT0", "gone", 40)],
         "NOT_FOUND", ["OUTPUT0", "'gone'"]),
    ]
    for inputs, outputs, want_status, words in cases:
        status, msg = _err(lambda: sc.infer("mlp", inputs, outputs=outputs))
        assert status == want_status and all(w in msg for w in words), (status, msg, words)
    # a region without its byte size, and contents beside a region: raw grpc, tritonclient cannot send them
    from tritonclient.grpc import service_pb2
    req = service_pb2.ModelInferRequest(model_name="mlp")
    t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1024])
    t.parameters["shared_memory_region"].string_param = "bad"
    status, msg = _err(lambda: _raw_infer(sc, req))
    assert status == "INVALID_ARGUMENT" and "together" in msg, (status, msg)
    t.parameters["shared_memory_byte_size"].int64_param = x.nbytes
    t.contents.fp32_contents.extend([0.0] * 1024)
    status, msg = _err(lambda: _raw_infer(sc, req))
    assert status == "INVALID_ARGUMENT" and "contents given with shared_memory_region" in msg, (status, msg)
    # and a good request still works
    res = sc.infer("mlp", [_shm_input("INPUT0", x.shape, "FP32", "bad", x.nbytes)])
    assert res.as_numpy("OUTPUT0").shape == (1, 10)


def _raw_infer(sc, req):
    """Sends a hand-built ModelInferRequest through tritonclient's channel, errors as tritonclient raises them."""
    import grpc
    try:
        return sc._client_stub.ModelInfer(req, timeout=30)
    except grpc.RpcError as e:
        raise InferenceServerException(msg=e.details(), status=str(e.code()))


def test_unregister_while_requests_hold_the_region(sc, regions, sspecs, soracle, rng):
    """Unregistering a region its in-flight requests use: those requests still read valid memory (the
    mapping lives until they finish) and later requests are refused with NOT_FOUND."""
    feeds = lib.random_inputs(sspecs["mlp"], rng, 1)
    want = soracle.run("mlp", feeds)["OUTPUT0"]
    x = feeds["INPUT0"]
    h, key = regions("churn", x.nbytes)
    shm.set_shared_memory_region(h, [x])
    inp = [_shm_input("INPUT0", x.shape, "FP32", "churn", x.nbytes)]
    ok = refused = 0
    with cf.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(sc.infer, "mlp", inp) for _ in range(64)]
        sc.unregister_system_shared_memory("churn")
        for f in futs:
            try:
                lib.assert_close(f.result().as_numpy("OUTPUT0"), want, sspecs["mlp"]["rtol"], what="in flight")
                ok += 1
            except InferenceServerException as e:
                assert lib.status_name(e) == "NOT_FOUND", e
                refused += 1
    assert ok + refused == 64
    status, _ = _err(lambda: sc.infer("mlp", inp))
    assert status == "NOT_FOUND"
    sc.register_system_shared_memory("churn", key, x.nbytes)  # and back
    lib.assert_close(sc.infer("mlp", inp).as_numpy("OUTPUT0"), want, sspecs["mlp"]["rtol"], what="re-registered")


@pytest.mark.parametrize("field", ["name", "key"])
def test_register_refuses_broken_utf8(shm_server, sc, regions, field):
    """Found by tests/fuzz/fuzz_shm: a region name (or key) that is not UTF-8 was registered and then echoed in
    every Status answer, which clients cannot parse (proto3 strings must be UTF-8). It is refused now, and
    Status stays readable."""
    import grpc
    from tritonclient.grpc import service_pb2

    _, key = regions("utf8", 4096, register=False)
    req = service_pb2.SystemSharedMemoryRegisterRequest(name="ZZZZ" if field == "name" else "ok",
                                                        key=key if field == "name" else key + "ZZZZ",
                                                        byte_size=64).SerializeToString()
    raw = req.replace(b"ZZZZ", b"\xff\xfeZZ")  # same length: the length prefixes stay right
    with grpc.insecure_channel(shm_server.grpc_url) as ch:
        with pytest.raises(grpc.RpcError) as ei:
            ch.unary_unary("/inference.GRPCInferenceService/SystemSharedMemoryRegister")(raw, timeout=10)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
        assert "not valid UTF-8" in ei.value.details()
        st = service_pb2.SystemSharedMemoryStatusResponse.FromString(
            ch.unary_unary("/inference.GRPCInferenceService/SystemSharedMemoryStatus")(
                service_pb2.SystemSharedMemoryStatusRequest().SerializeToString(), timeout=10))
    assert dict(st.regions) == {}
