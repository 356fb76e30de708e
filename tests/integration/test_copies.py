"""Big batches' host copies shared with the copy threads (--copy-threads, --copy-min-bytes; issue 32,
docs/copies.md): a batch of 16 rows (4 MiB of inputs, 4 MiB of outputs) over a threshold of 64 KiB is
gathered and packed in pieces by the pool, and every request still gets its own rows back: from raw
gRPC contents, from system shared memory (the guarded copy, split) with outputs written into the
client's regions by the pool's threads, and with requests of one and two rows mixed. The same through a
server without copy threads gives the same bytes. Bad flag values are refused at start."""

import concurrent.futures as cf
import os

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from onnx import TensorProto, helper
from tritonclient.grpc import service_pb2, service_pb2_grpc

import grpc
import inferd_testlib as lib

MODEL = "addsub"
WIDTH = 32768          # FP32 elements a row: 128 KiB a row of each tensor
MAX_BATCH = 16
DELAY_US = 5_000_000   # the batch leaves when full (16 rows), long before this
ROWS = [1, 2, 1, 1, 2, 1, 1, 2, 1, 1, 2, 1]  # 16 rows in 12 requests
WAIT_S = 60


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    g = lib.gen_models
    d = str(tmp_path_factory.mktemp("copies_repo"))
    r = g.Repo(d)
    vi = helper.make_tensor_value_info
    m = helper.make_model(
        helper.make_graph([helper.make_node("Add", ["X", "Z"], ["S"]), helper.make_node("Sub", ["X", "Z"], ["D"])],
                          MODEL, [vi("X", TensorProto.FLOAT, ["N", WIDTH]), vi("Z", TensorProto.FLOAT, ["N", WIDTH])],
                          [vi("S", TensorProto.FLOAT, ["N", WIDTH]), vi("D", TensorProto.FLOAT, ["N", WIDTH])]),
        opset_imports=[helper.make_opsetid("", g.DEFAULT_OPSET)])
    m.ir_version = g.IR_FOR_OPSET[g.DEFAULT_OPSET]
    onnx.checker.check_model(m)
    r.add(MODEL, MAX_BATCH, [g._io("X", "FP32", [WIDTH]), g._io("Z", "FP32", [WIDTH])],
          [g._out("S", "FP32", [WIDTH]), g._out("D", "FP32", [WIDTH])], {1: m},
          config_extra=g._dyn("max_queue_delay_microseconds: %d" % DELAY_US))
    return d


@pytest.fixture(scope="module")
def pooled(repo):
    yield from lib.served(repo, ["--copy-threads", "3", "--copy-min-bytes", "65536", "--allow-client-shm", "true"])


def _feeds(k, rows):
    rng = np.random.default_rng(1000 + k)
    x = rng.standard_normal((rows, WIDTH), dtype=np.float32)
    z = rng.standard_normal((rows, WIDTH), dtype=np.float32)
    return x, z


def _request(k, rows):
    x, z = _feeds(k, rows)
    r = service_pb2.ModelInferRequest(model_name=MODEL, id="r%d" % k)
    for name, a in (("X", x), ("Z", z)):
        t = r.inputs.add()
        t.name, t.datatype = name, "FP32"
        t.shape.extend(a.shape)
        r.raw_input_contents.append(a.tobytes())
    return r


def _executions(stub):
    st = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=MODEL)).model_stats[0]
    return {b.batch_size: b.compute_infer.count for b in st.batch_stats if b.compute_infer.count}


def _send_all(srv):
    """All requests at once (one full batch); returns {k: (S, D)} from the answers."""
    with grpc.insecure_channel(srv.grpc_url, options=[("grpc.max_receive_message_length", 64 << 20),
                                                      ("grpc.max_send_message_length", 64 << 20)]) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        before = _executions(stub)
        futs = [stub.ModelInfer.future(_request(k, rows), timeout=WAIT_S) for k, rows in enumerate(ROWS)]
        got = {}
        for k, f in enumerate(futs):
            resp = f.result()
            assert resp.id == "r%d" % k
            outs = {o.name: np.frombuffer(raw, np.float32).reshape(list(o.shape))
                    for o, raw in zip(resp.outputs, resp.raw_output_contents)}
            got[k] = (outs["S"], outs["D"])
        after = _executions(stub)
    delta = {b: after.get(b, 0) - before.get(b, 0) for b in after if after.get(b, 0) != before.get(b, 0)}
    return got, delta


def _check(got):
    for k, rows in enumerate(ROWS):
        x, z = _feeds(k, rows)
        s, d = got[k]
        assert s.shape == (rows, WIDTH) and d.shape == (rows, WIDTH), (k, s.shape, d.shape)
        np.testing.assert_array_equal(s, x + z, err_msg="request %d: S" % k)
        np.testing.assert_array_equal(d, x - z, err_msg="request %d: D" % k)


def test_raw_contents_split(pooled):
    """gRPC raw contents: one batch of 16 rows, gathered and packed by the pool; each answer its own."""
    got, delta = _send_all(pooled)
    _check(got)
    assert delta == {MAX_BATCH: 1}, delta  # the 12 requests ran as one batch: the split path ran


def test_same_bytes_without_pool(repo, start_server):
    """The same batch through a server that copies on the instance thread alone."""
    srv = start_server(["--copy-threads", "0"], repo=repo)
    got, delta = _send_all(srv)
    _check(got)
    assert delta == {MAX_BATCH: 1}, delta
    srv.stop()
    srv.assert_clean_exit()


def test_shm_inputs_and_outputs_split(pooled):
    """Inputs in system shared memory (the guarded copy, split over the pool) and outputs written into
    the client's regions (packed on the pool's threads): every region holds its request's answer."""
    c = grpcclient.InferenceServerClient(url=pooled.grpc_url)
    handles = []
    try:
        done = {}
        futs = []
        with cf.ThreadPoolExecutor(len(ROWS)) as ex:
            for k, rows in enumerate(ROWS):
                x, z = _feeds(k, rows)
                n = x.nbytes
                key = "/inferd_copies_%d_%d" % (os.getpid(), k)
                h = shm.create_shared_memory_region("cp%d" % k, key, 4 * n)
                handles.append(h)
                shm.set_shared_memory_region(h, [x, z])
                c.register_system_shared_memory("cp%d" % k, key, 4 * n)
                ins = [grpcclient.InferInput("X", [rows, WIDTH], "FP32"), grpcclient.InferInput("Z", [rows, WIDTH], "FP32")]
                ins[0].set_shared_memory("cp%d" % k, n, offset=0)
                ins[1].set_shared_memory("cp%d" % k, n, offset=n)
                outs = [grpcclient.InferRequestedOutput("S"), grpcclient.InferRequestedOutput("D")]
                outs[0].set_shared_memory("cp%d" % k, n, offset=2 * n)
                outs[1].set_shared_memory("cp%d" % k, n, offset=3 * n)
                futs.append(ex.submit(c.infer, MODEL, ins, outputs=outs, client_timeout=WAIT_S))
            for k, f in enumerate(futs):
                f.result()
        for k, rows in enumerate(ROWS):
            x, z = _feeds(k, rows)
            n = x.nbytes
            s = shm.get_contents_as_numpy(handles[k], np.float32, [rows, WIDTH], offset=2 * n)
            d = shm.get_contents_as_numpy(handles[k], np.float32, [rows, WIDTH], offset=3 * n)
            np.testing.assert_array_equal(s, x + z, err_msg="request %d: S" % k)
            np.testing.assert_array_equal(d, x - z, err_msg="request %d: D" % k)
    finally:
        c.unregister_system_shared_memory()
        for h in handles:
            shm.destroy_shared_memory_region(h)
        c.close()


@pytest.mark.parametrize("args,what", [
    (["--copy-threads", "65"], "--copy-threads"),
    (["--copy-threads", "-1"], "--copy-threads"),
    (["--copy-min-bytes", "100"], "--copy-min-bytes"),
    (["--copy-min-bytes", "lots"], "--copy-min-bytes"),
])
def test_bad_flags_refused(repo, args, what):
    err = lib.start_fails(repo, args)
    assert what in err, err
