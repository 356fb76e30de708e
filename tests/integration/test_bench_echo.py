"""bench_echo_server and bench_fixed_server (tests/bench/echo): the transport yardsticks answer the Triton protocol
the way an identity model would, and stops cleanly on SIGTERM. Skipped when it is not built
(cmake --build build --target bench_echo_server); BENCH_ECHO_BIN overrides the path.
"""

import os
import re
import signal
import subprocess
import threading

import numpy as np
import pytest

import inferd_testlib as lib

ECHO_BIN = os.environ.get("BENCH_ECHO_BIN", os.path.join(lib.REPO_ROOT, "build", "bin", "bench_echo_server"))
READY_RE = re.compile(r"echo ready: grpc=(\d+)")


@pytest.fixture
def echo():
    if not os.access(ECHO_BIN, os.X_OK):
        pytest.skip("bench_echo_server not built: %s" % ECHO_BIN)
    proc = subprocess.Popen([ECHO_BIN, "--port", "0", "--threads", "2", "--datatype", "FP32", "--shape", "-1,16"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    lines, ready = [], threading.Event()
    port = []

    def read():
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            m = READY_RE.search(line)
            if m and not ready.is_set():
                port.append(int(m.group(1)))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(30) or not port:
        proc.kill()
        proc.wait()
        pytest.fail("bench_echo_server did not print 'echo ready: grpc=<port>'; stderr:\n%s" % "\n".join(lines))
    proc.url = "127.0.0.1:%d" % port[0]
    proc.lines = lines
    proc.reader = reader
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_echo_server(echo, rng):
    import tritonclient.grpc as grpcclient

    c = grpcclient.InferenceServerClient(url=echo.url)
    try:
        assert c.is_server_live()
        assert c.is_server_ready()
        assert c.is_model_ready("anything")

        md = c.get_model_metadata("identity_fp32")
        assert md.name == "identity_fp32"
        assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == [("INPUT0", "FP32", [-1, 16])]
        assert [(t.name, t.datatype, list(t.shape)) for t in md.outputs] == [("OUTPUT0", "FP32", [-1, 16])]

        x = rng.standard_normal((1, 16)).astype(np.float32)
        inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        res = c.infer("identity_fp32", [inp], request_id="req-7")
        out = res.as_numpy("OUTPUT0")
        assert out.dtype == np.float32 and out.shape == (1, 16)
        np.testing.assert_array_equal(out, x)
        resp = res.get_response()
        assert resp.model_name == "identity_fp32" and resp.id == "req-7"

        # Several inputs of other types come back in order, each as OUTPUT<i>.
        y = rng.integers(-9, 9, size=(2, 3)).astype(np.int64)
        iy = grpcclient.InferInput("whatever", list(y.shape), "INT64")
        iy.set_data_from_numpy(y)
        res = c.infer("m", [inp, iy], outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
        assert [o.name for o in res.get_response().outputs] == ["OUTPUT1"]
        np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), y)

        # Anything outside the echo's methods is UNIMPLEMENTED, not a hang or a crash.
        with pytest.raises(Exception) as ei:
            c.get_inference_statistics("m")
        assert "UNIMPLEMENTED" in str(ei.value)
    finally:
        c.close()

    echo.send_signal(signal.SIGTERM)
    rc = echo.wait(30)
    echo.reader.join(10)
    assert rc == 0, "exit code %r; stderr:\n%s" % (rc, "\n".join(echo.lines))


# --- bench_fixed_server (tests/bench/echo/fixed_server.c): perf_analyzer's yardstick

FIXED_BIN = os.environ.get("BENCH_FIXED_BIN", os.path.join(lib.REPO_ROOT, "build", "bin", "bench_fixed_server"))


def run_fixed(*args):
    if not os.access(FIXED_BIN, os.X_OK):
        pytest.skip("bench_fixed_server not built: %s" % FIXED_BIN)
    proc = subprocess.Popen([FIXED_BIN, "--port", "0", "--threads", "2", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    line = proc.stderr.readline()  # the ready line, or the usage error before exit
    m = re.search(r"fixed ready: grpc=(\d+)", line)
    return proc, ("127.0.0.1:%s" % m.group(1)) if m else None, line


def test_fixed_server_describes_the_model_and_answers_its_output_size():
    import tritonclient.grpc as grpcclient

    proc, url, line = run_fixed("--model", "bert", "--max-batch", "64", "--input", "input_ids:TYPE_INT64:128",
                                "--input", "attention_mask:INT64:128", "--output", "last_hidden_state:FP32:128,768")
    assert url, line
    c = grpcclient.InferenceServerClient(url=url)
    try:
        md = c.get_model_metadata("bert")
        assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == [
            ("input_ids", "INT64", [-1, 128]), ("attention_mask", "INT64", [-1, 128])]
        assert [(t.name, t.datatype, list(t.shape)) for t in md.outputs] == [
            ("last_hidden_state", "FP32", [-1, 128, 768])]
        cfg = c.get_model_config("bert").config
        assert cfg.max_batch_size == 64 and [list(i.dims) for i in cfg.input] == [[128], [128]]
        ins = []
        for name in ("input_ids", "attention_mask"):
            i = grpcclient.InferInput(name, [1, 128], "INT64")
            i.set_data_from_numpy(np.ones((1, 128), np.int64))
            ins.append(i)
        for k in range(3):
            res = c.infer("bert", ins, request_id="r%d" % k)
            out = res.as_numpy("last_hidden_state")
            assert out.shape == (1, 128, 768) and out.dtype == np.float32 and not out.any()
            assert res.get_response().id == "r%d" % k  # perf_analyzer --async matches answers by id
        assert c.infer("bert", ins).get_response().id == ""
        st = c.get_inference_statistics("bert").model_stats
        assert [(s.name, s.inference_count, s.inference_stats.success.count) for s in st] == [("bert", 4, 4)]
        with pytest.raises(Exception) as ei:  # outside its methods: UNIMPLEMENTED, not a hang
            c.load_model("bert")
        assert "UNIMPLEMENTED" in str(ei.value)
    finally:
        c.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert "stopped after 4 ModelInfer calls" in proc.stderr.read()


@pytest.mark.parametrize("args, msg", [
    (["--model", "m", "--input", "x:FP32:4"], "at least one --input and one --output"),
    (["--model", "m", "--input", "x:FP99:4", "--output", "y:FP32:4"], "is not NAME:TYPE:D,D"),
    (["--model", "m", "--input", "x:FP32:0", "--output", "y:FP32:4"], "is not NAME:TYPE:D,D"),
    (["--model", "m", "--input", "x:FP32:4", "--output", "y:FP32:4", "--max-batch", "-2"], "--max-batch"),
])
def test_fixed_server_usage_errors(args, msg):
    proc, url, line = run_fixed(*args)
    rest = proc.stderr.read()
    assert proc.wait(10) == 2 and url is None
    assert msg in line + rest, line + rest
