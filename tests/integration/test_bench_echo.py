"""bench_echo_server (tests/bench/echo): the transport-ceiling server answers the Triton protocol
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
