"""Big messages over ONE gRPC connection at concurrency still come back right (issue 32, item 3).

perf_analyzer-like load on one HTTP/2 connection: 600 KB requests (ResNet-50's FP32 [1,3,224,224]) and 393 KB
answers (BERT-base s128's FP32 [1,128,768]), 32 calls in flight on one channel, each answer checked against
its own request's values, so frames of concurrent streams interleaved on the connection are never mixed up.
The models are the trivial ones of tests/bench/conn/conn.py. Once with gRPC's defaults, once with the
--grpc-max-frame-bytes / --grpc-stream-window-bytes tuning (large frames and windows), and the flags' bad
values are refused at startup. No timing asserts."""

import concurrent.futures as cf
import os
import sys

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

import inferd_testlib as lib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench", "conn"))
import conn  # noqa: E402  (the bench's model generator)

N_CALLS = 96
IN_FLIGHT = 32


@pytest.fixture(scope="module")
def repo_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("bigrepo"))
    conn.models(d)
    return d


@pytest.fixture(params=[(), ("--grpc-max-frame-bytes", "1048576", "--grpc-stream-window-bytes", "8388608")],
                ids=["defaults", "tuned"])
def big_server(request, repo_dir):
    yield from lib.served(repo_dir, request.param)


def _request(model, i):
    name, dt, dims, _, _ = conn.SHAPES[model]
    rng = np.random.default_rng(1000 + i)
    a = (rng.random((1,) + dims, dtype=np.float32) if dt == "FP32"
         else rng.integers(0, 30000, (1,) + dims, dtype=np.int64))
    q = service_pb2.ModelInferRequest(model_name=model, id=str(i))
    t = q.inputs.add(name=name, datatype=dt)
    t.shape.extend(a.shape)
    q.raw_input_contents.append(a.tobytes())
    return q, a


def _expected(model, a):
    if model == "bigin":  # the first 1000 values of the flattened image
        return a.reshape(1, -1)[:, :1000]
    return np.broadcast_to(a.astype(np.float32)[:, :, None], (1, 128, 768))  # ids broadcast over 768


def test_big_messages_one_connection(big_server):
    opts = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
    with grpc.insecure_channel(big_server.grpc_url, options=opts) as ch:  # one channel: one connection
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        calls = []
        for i in range(N_CALLS):
            model = "bigin" if i % 2 == 0 else "bigout"
            q, a = _request(model, i)
            calls.append((model, a, q))
        done = {}
        # at most IN_FLIGHT at once on the one connection, both directions big at the same time
        with cf.ThreadPoolExecutor(IN_FLIGHT) as ex:
            futs = {ex.submit(stub.ModelInfer, q, timeout=120): i for i, (_, _, q) in enumerate(calls)}
            for f in cf.as_completed(futs):
                done[futs[f]] = f.result()
    assert len(done) == N_CALLS
    for i, (model, a, _) in enumerate(calls):
        r = done[i]
        assert r.id == str(i) and r.model_name == model
        assert len(r.raw_output_contents) == 1
        want = _expected(model, a)
        assert list(r.outputs[0].shape) == list(want.shape)
        got = np.frombuffer(r.raw_output_contents[0], dtype=np.float32).reshape(want.shape)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("flag,bad", [("--grpc-max-frame-bytes", "16383"), ("--grpc-max-frame-bytes", "16777216"),
                                      ("--grpc-stream-window-bytes", "1000"), ("--grpc-stream-window-bytes", "-1"),
                                      ("--grpc-stream-window-bytes", "2000000000")])
def test_bad_values_refused(repo_dir, flag, bad):
    err = lib.start_fails(repo_dir, [flag, bad])
    assert flag in err
