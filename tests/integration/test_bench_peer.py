"""The Python comparison server of benchmark 3 (tests/bench/peers/peer_server.py), on its numpy
backend (torch is only on the GPU machine): answers match onnxruntime, 32 concurrent clients are
all answered correctly, batches form, errors are clean and SIGTERM exits 0.
"""

import os
import re
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import inferd_testlib as lib

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

PEER = os.path.join(lib.REPO_ROOT, "tests", "bench", "peers", "peer_server.py")
READY_RE = re.compile(r"peer ready: grpc=(\d+)")
MEAN_RE = re.compile(r"in (\d+) batch\(es\): mean batch size ([\d.]+) requests \(([\d.]+) rows\)")
K, H1, H2, N = 64, 48, 32, 10


def make_mlp(path, seed=7):
    """Gemm(transB=1)/Relu/Gemm(transB=0, alpha, beta)/Relu/MatMul+Add: every form the peer reads."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((H1, K)) / np.sqrt(K)).astype(np.float32)
    b1 = (rng.standard_normal(H1) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((H1, H2)) / np.sqrt(H1)).astype(np.float32)   # [K, N]: transB=0
    b2 = (rng.standard_normal((1, H2)) * 0.1).astype(np.float32)
    w3 = (rng.standard_normal((H2, N)) / np.sqrt(H2)).astype(np.float32)    # MatMul layout
    b3 = (rng.standard_normal(N) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["INPUT0", "W1", "B1"], ["h1"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
        helper.make_node("Gemm", ["a1", "W2", "B2"], ["h2"], alpha=0.5, beta=2.0, name="fc2"),
        helper.make_node("Relu", ["h2"], ["a2"], name="relu2"),
        helper.make_node("MatMul", ["a2", "W3"], ["h3"], name="fc3"),
        helper.make_node("Add", ["h3", "B3"], ["OUTPUT0"], name="fc3_bias"),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((w1, "W1"), (b1, "B1"), (w2, "W2"), (b2, "B2"), (w3, "W3"), (b3, "B3"))]
    g = helper.make_graph(nodes, "peer_mlp",
                          [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [None, K])],
                          [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [None, N])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


class Peer:
    def __init__(self, model, extra=()):
        self.proc = subprocess.Popen(
            [sys.executable, PEER, "--model", model, "--model-name", "peer_mlp", "--port", "0",
             "--backend", "numpy", "--device", "cpu"] + list(extra),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            errors="replace")
        self.lines, self.port = [], None
        ready = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line.rstrip("\n"))
                m = READY_RE.search(line)
                if m and not ready.is_set():
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not ready.wait(60) or self.port is None:
            self.kill()
            raise RuntimeError("peer_server did not become ready; stderr:\n" + self.text())
        self.url = "127.0.0.1:%d" % self.port

    def text(self):
        return "\n".join(self.lines)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        self.reader.join(10)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("peer") / "peer_mlp.onnx")
    make_mlp(p)
    return p


@pytest.fixture(scope="module")
def ort_sess(mlp_path):
    return ort.InferenceSession(mlp_path, providers=["CPUExecutionProvider"])


@pytest.fixture
def peer(mlp_path):
    # A long delay so the concurrent clients below are certain to share batches.
    p = Peer(mlp_path, ["--max-batch", "64", "--max-delay-us", "5000"])
    yield p
    p.kill()


def _infer(client, x, **kw):
    import tritonclient.grpc as grpcclient
    inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return client.infer("peer_mlp", [inp], **kw)


def test_peer_matches_onnxruntime_and_batches(peer, ort_sess, rng):
    import tritonclient.grpc as grpcclient

    c = grpcclient.InferenceServerClient(url=peer.url)
    try:
        assert c.is_server_live() and c.is_server_ready()
        assert c.is_model_ready("peer_mlp") and not c.is_model_ready("other")
        md = c.get_model_metadata("peer_mlp")
        assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == [("INPUT0", "FP32", [-1, K])]
        assert [(t.name, t.datatype, list(t.shape)) for t in md.outputs] == [("OUTPUT0", "FP32", [-1, N])]
        cfg = c.get_model_config("peer_mlp").config
        assert cfg.max_batch_size == 64 and list(cfg.input[0].dims) == [K]

        for rows in (1, 5, 64):
            x = rng.standard_normal((rows, K)).astype(np.float32)
            res = _infer(c, x, request_id="r%d" % rows)
            want = ort_sess.run(None, {"INPUT0": x})[0]
            got = res.as_numpy("OUTPUT0")
            assert got.shape == (rows, N) and res.get_response().id == "r%d" % rows
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

        # Clean errors: unknown model, wrong shape, too many rows, unknown output.
        import tritonclient.utils as tu
        x = rng.standard_normal((1, K)).astype(np.float32)
        inp = grpcclient.InferInput("INPUT0", [1, K], "FP32")
        inp.set_data_from_numpy(x)
        with pytest.raises(tu.InferenceServerException, match="unknown model"):
            c.infer("nope", [inp])
        bad = grpcclient.InferInput("INPUT0", [1, K + 1], "FP32")
        bad.set_data_from_numpy(np.zeros((1, K + 1), np.float32))
        with pytest.raises(tu.InferenceServerException, match="shape"):
            c.infer("peer_mlp", [bad])
        with pytest.raises(tu.InferenceServerException, match="exceeds max batch"):
            _infer(c, np.zeros((65, K), np.float32))
        with pytest.raises(tu.InferenceServerException, match="unexpected inference output"):
            c.infer("peer_mlp", [inp], outputs=[grpcclient.InferRequestedOutput("OUT")])
    finally:
        c.close()

    # 32 concurrent clients, several requests each, every answer checked against onnxruntime.
    n_clients, per_client = 32, 8
    failures = []
    inputs = [[rng.standard_normal((1 + (i + j) % 3, K)).astype(np.float32) for j in range(per_client)]
              for i in range(n_clients)]
    wants = [[ort_sess.run(None, {"INPUT0": x})[0] for x in xs] for xs in inputs]
    start = threading.Barrier(n_clients)

    def client_main(i):
        cl = grpcclient.InferenceServerClient(url=peer.url)
        try:
            start.wait(30)
            for x, want in zip(inputs[i], wants[i]):
                got = _infer(cl, x).as_numpy("OUTPUT0")
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        except Exception as e:  # noqa: BLE001
            failures.append("client %d: %r" % (i, e))
        finally:
            cl.close()

    threads = [threading.Thread(target=client_main, args=(i,)) for i in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, "\n".join(failures)

    c = grpcclient.InferenceServerClient(url=peer.url)
    try:
        st = c.get_inference_statistics("peer_mlp").model_stats[0]
    finally:
        c.close()
    n_requests = 3 + n_clients * per_client
    assert st.inference_stats.success.count == n_requests
    assert st.execution_count < n_requests, "no batching: %d executions for %d requests" % (
        st.execution_count, n_requests)

    rc = peer.stop()
    assert rc == 0, "exit code %r; stderr:\n%s" % (rc, peer.text())
    m = MEAN_RE.search(peer.text())
    assert m, "no batch summary at exit; stderr:\n" + peer.text()
    batches, mean_req = int(m.group(1)), float(m.group(2))
    print("peer: %d batches, mean batch size %.2f requests" % (batches, mean_req))
    assert batches == st.execution_count and mean_req > 1.0


def test_peer_rejects_unsupported_model(tmp_path):
    g = helper.make_graph([helper.make_node("Sigmoid", ["X"], ["Y"])], "g",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 4])])
    p = str(tmp_path / "sig.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    r = subprocess.run([sys.executable, PEER, "--model", p, "--port", "0", "--backend", "numpy", "--device", "cpu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Sigmoid is not supported" in r.stderr, r.stderr
