"""The HTTP front end runs on its own loop thread ("inferd-http", server/http/http_loop.h), apart from
the scheduler's loop, whose timer starts the dynamic batchers' delayed batches. Slow HTTP work (a REST
body's gzip inflation and JSON scan before its 413) must not delay another client's batches: before the
split, a gRPC client of another model waited for every JSON bomb (its max latency ~ the bomb's time,
0.3-1 s; tests/bench/RESULTS.md, issue 31's soak).

The victim model batches with a max_queue_delay and a preferred size one client never fills, so every
one of its batches is started by the scheduler's timer, the path the bombs used to stall."""

import gzip
import os
import statistics
import threading
import time
import http.client

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper

import inferd_testlib as lib

DELAY_US = 2000  # every victim batch waits for the scheduler's timer
N_BOMBS = 4
# Bound on the victim's slowest call while the bombs run: generous for a loaded 2-core machine, and
# well under a bomb's own time (each holds the HTTP thread ~0.3-1 s before its 413; checked below).
MAX_VICTIM_S = 0.15
# The bombs inflate to BOMB_BYTES under a raised --http-max-infer-body-bytes, so each holds the HTTP
# thread ~0.5-1 s on a 2-core machine (a 60 MB one took ~0.25 s: too close to the bound).
BOMB_BYTES = 150 << 20


def _add_model(repo, name):
    g = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "C"], ["OUTPUT0"])], "add",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor("C", TensorProto.FLOAT, [4], [1.0] * 4)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(os.path.join(repo, name, "1"))
    onnx.save(m, os.path.join(repo, name, "1", "model.onnx"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write('name: "%s"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
                'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                'dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: %d }\n'
                % (name, DELAY_US))


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("loop_isolation_repo"))
    _add_model(repo, "victim")
    _add_model(repo, "target")
    yield from lib.served(repo, ["--http-max-infer-body-bytes", str(BOMB_BYTES + (8 << 20))])


def _bomb():
    """A REST infer body of BOMB_BYTES of `[],` (under --http-max-infer-body-bytes once inflated),
    ~150 KB gzipped: inflated and scanned on the HTTP thread, then refused 413 by --rest-json-max-memory
    (its tree would take ~50M values x 80 bytes)."""
    head = b'{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":['
    n = BOMB_BYTES // 3
    return gzip.compress(head + b"[]," * n + b'[]]}]}', 6)


def _victim_call(client, x):
    inp = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(x)
    t = time.monotonic()
    r = client.infer("victim", [inp], client_timeout=30)
    dt = time.monotonic() - t
    np.testing.assert_allclose(r.as_numpy("OUTPUT0"), x + 1.0)
    return dt


def test_json_bombs_do_not_delay_another_models_batches(srv):
    bomb = _bomb()
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    for _ in range(20):  # warm the connection and the session
        _victim_call(client, x)
    base = [_victim_call(client, x) for _ in range(100)]

    bomb_s, statuses, failures = [], [], []

    def attack():
        try:
            for _ in range(N_BOMBS):
                conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=60)
                t = time.monotonic()
                conn.request("POST", "/v2/models/target/infer", body=bomb,
                             headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
                resp = conn.getresponse()
                body = resp.read()
                bomb_s.append(time.monotonic() - t)
                statuses.append((resp.status, body[:200]))
                conn.close()
        except Exception as e:  # reported below, not lost in the thread
            failures.append(repr(e))

    th = threading.Thread(target=attack)
    during = []
    th.start()
    while th.is_alive():
        during.append(_victim_call(client, x))
    th.join()
    client.close()

    assert not failures, failures
    assert [s for s, _ in statuses] == [413] * N_BOMBS, statuses
    assert all(b"rest-json-max-memory" in b for _, b in statuses), statuses
    base_p50 = statistics.median(base)
    worst = max(during)
    print("victim: base p50 %.2f ms max %.2f ms; during %d bombs (each %s s): %d calls, p50 %.2f ms, max %.2f ms"
          % (base_p50 * 1e3, max(base) * 1e3, N_BOMBS, ["%.2f" % b for b in bomb_s], len(during),
             statistics.median(during) * 1e3, worst * 1e3))
    assert worst < MAX_VICTIM_S, ("victim's slowest call %.3f s during the bombs (bombs took %s s): the HTTP "
                                  "work delayed the batcher" % (worst, bomb_s))
    # the victim kept being served through the bombs, not just after them
    assert len(during) >= 10, (len(during), bomb_s)
    assert srv.alive()
