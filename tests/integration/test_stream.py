"""ModelStreamInfer (the bidi stream tritonclient's start_stream / async_stream_infer and perf_analyzer
--streaming use): many requests in flight on one stream, each answered once with onnxruntime's values;
errors arrive as error_message without ending the stream; requests of one stream batch together; the
stream ends OK after the client half-closes and every answer has gone; a cancelled stream leaves the
server serving."""

import concurrent.futures as cf
import queue
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

import inferd_testlib as lib


@pytest.fixture(scope="module")
def st_repo(tmp_path_factory):
    """The seed mlp and the batching models (bt_pref4 batches by four, slow_* take a while)."""
    g = lib.gen_models
    return lib.generated_repo(tmp_path_factory, "stream_repo", (g.add_mlp, g.add_batching))


@pytest.fixture(scope="module")
def sspecs(st_repo):
    return st_repo[1]


@pytest.fixture(scope="module")
def soracle(st_repo):
    return lib.Oracle(*st_repo)


@pytest.fixture(scope="module")
def st_server(st_repo):
    yield from lib.served(st_repo[0])


def _client(srv):
    return grpcclient.InferenceServerClient(url=srv.grpc_url)


def _stream(c):
    """Starts a stream on c; returns the queue its callback fills with (result, error)."""
    q = queue.Queue()
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    return q


def _drain(q, n, timeout=60):
    out = []
    for _ in range(n):
        out.append(q.get(timeout=timeout))
    return out


def _success(c, model):
    return c.get_inference_statistics(model).model_stats[0].inference_stats.success.count


def test_many_requests_on_one_stream(st_server, sspecs, soracle, rng):
    spec = sspecs["mlp"]
    feeds = {"r%d" % k: lib.random_inputs(spec, rng, 1 + k % 4) for k in range(40)}
    with _client(st_server) as c:
        before = _success(c, "mlp")
        q = _stream(c)
        for rid, f in feeds.items():
            c.async_stream_infer("mlp", lib.triton_inputs(f), request_id=rid)
        got = _drain(q, len(feeds))
        c.stop_stream()
        assert q.empty(), "more answers than requests"
        seen = set()
        for result, error in got:
            assert error is None, error
            rid = result.get_response().id
            assert rid in feeds and rid not in seen, rid
            seen.add(rid)
            lib.assert_close(result.as_numpy("OUTPUT0"), soracle.run("mlp", feeds[rid])["OUTPUT0"], spec["rtol"],
                             what="stream request %s" % rid)
        assert _success(c, "mlp") - before == len(feeds)


def test_errors_travel_on_the_stream_and_it_goes_on(st_server, sspecs, soracle, rng):
    spec = sspecs["mlp"]
    good = lib.random_inputs(spec, rng, 2)
    bad_shape = grpcclient.InferInput("INPUT0", [2, 7], "FP32")
    bad_shape.set_data_from_numpy(np.zeros((2, 7), np.float32))
    with _client(st_server) as c:
        q = _stream(c)
        c.async_stream_infer("no_such_model", lib.triton_inputs(good), request_id="a")
        c.async_stream_infer("mlp", [bad_shape], request_id="b")
        c.async_stream_infer("mlp", lib.triton_inputs(good), request_id="c")
        got = _drain(q, 3)
        c.stop_stream()
    errors = sorted(str(e) for r, e in got if e is not None)
    results = [r for r, e in got if e is None]
    assert len(errors) == 2 and len(results) == 1, got
    assert "no_such_model" in errors[1] or "no_such_model" in errors[0], errors
    assert any("INPUT0" in e and "[2,7]" in e for e in errors), errors
    assert results[0].get_response().id == "c"
    lib.assert_close(results[0].as_numpy("OUTPUT0"), soracle.run("mlp", good)["OUTPUT0"], spec["rtol"])


def test_requests_of_one_stream_batch_together(st_server, sspecs, soracle, rng):
    """bt_pref4 waits (5 s at most) for four requests: four on one stream run as one execution."""
    spec = sspecs["bt_pref4"]
    feeds = [lib.random_inputs(spec, rng, 1) for _ in range(4)]
    with _client(st_server) as c:
        st0 = c.get_inference_statistics("bt_pref4").model_stats[0]
        q = _stream(c)
        for k, f in enumerate(feeds):
            c.async_stream_infer("bt_pref4", lib.triton_inputs(f), request_id=str(k))
        got = _drain(q, 4)
        c.stop_stream()
        st1 = c.get_inference_statistics("bt_pref4").model_stats[0]
    assert st1.execution_count - st0.execution_count == 1
    assert st1.inference_count - st0.inference_count == 4
    for result, error in got:
        assert error is None, error
        k = int(result.get_response().id)
        lib.assert_close(result.as_numpy("V_Y"), soracle.run("bt_pref4", feeds[k])["V_Y"], spec["rtol"])


def _raw_stream(srv, messages):
    """Raw grpc: sends the byte strings, half-closes, returns (decoded answers, final status code)."""
    with grpc.insecure_channel(srv.grpc_url) as ch:
        call = ch.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                response_deserializer=service_pb2.ModelStreamInferResponse.FromString)
        it = call(iter(messages), timeout=60)
        answers = list(it)
        return answers, it.code()


def test_half_close_answers_everything_then_ok(st_server, sspecs, rng):
    """The client sends all its requests and half-closes at once: every request is still answered (the
    malformed one with an error), then the stream ends OK."""
    spec = sspecs["mlp"]
    msgs = []
    for k in range(12):
        x = lib.random_inputs(spec, rng, 1)["INPUT0"]
        req = service_pb2.ModelInferRequest(model_name="mlp", id="h%d" % k)
        req.inputs.add(name="INPUT0", datatype="FP32", shape=list(x.shape))
        req.raw_input_contents.append(x.tobytes())
        msgs.append(req.SerializeToString())
    msgs.insert(5, b"\xff\xff\xff")  # not a ModelInferRequest
    answers, code = _raw_stream(st_server, msgs)
    assert code == grpc.StatusCode.OK
    assert len(answers) == 13, len(answers)
    errs = [a for a in answers if a.error_message]
    assert len(errs) == 1 and "malformed ModelInferRequest" in errs[0].error_message, errs
    ids = sorted(a.infer_response.id for a in answers if not a.error_message)
    assert ids == sorted("h%d" % k for k in range(12))
    assert all(len(a.infer_response.raw_output_contents[0]) == 40 for a in answers if not a.error_message)


def test_empty_stream_ends_ok(st_server):
    answers, code = _raw_stream(st_server, [])
    assert answers == [] and code == grpc.StatusCode.OK


def test_streams_beside_unary_calls(st_server, sspecs, soracle, rng):
    """Four streams and unary calls at once, each answer right."""
    spec = sspecs["mlp"]
    work = [[lib.random_inputs(spec, rng, 1 + (s + k) % 3) for k in range(15)] for s in range(4)]
    unary = [lib.random_inputs(spec, rng, 2) for _ in range(20)]

    def one_stream(s):
        with _client(st_server) as c:
            q = _stream(c)
            for k, f in enumerate(work[s]):
                c.async_stream_infer("mlp", lib.triton_inputs(f), request_id=str(k))
            got = _drain(q, len(work[s]))
            c.stop_stream()
        for result, error in got:
            assert error is None, error
            k = int(result.get_response().id)
            lib.assert_close(result.as_numpy("OUTPUT0"), soracle.run("mlp", work[s][k])["OUTPUT0"], spec["rtol"])
        return len(got)

    def one_unary(f):
        with _client(st_server) as c:
            _, got = lib.infer(c, "mlp", f)
        lib.assert_close(got["OUTPUT0"], soracle.run("mlp", f)["OUTPUT0"], spec["rtol"])
        return 1

    with cf.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(one_stream, s) for s in range(4)] + [ex.submit(one_unary, f) for f in unary]
        assert sum(f.result() for f in futs) == 4 * 15 + 20


def test_cancelled_stream_leaves_the_server_serving(st_server, sspecs, soracle, rng):
    """A stream cancelled with requests still queued (bt_pref4 holds them up to 5 s waiting for a fourth):
    the server drops or answers them, its pending count returns to zero and it goes on serving."""
    spec = sspecs["bt_pref4"]
    f = lib.random_inputs(spec, rng, 1)
    with _client(st_server) as c:
        q = _stream(c)
        for k in range(3):  # three of the four bt_pref4 waits for
            c.async_stream_infer("bt_pref4", lib.triton_inputs(f), request_id=str(k))
        deadline = time.monotonic() + 30
        while _pending(st_server, "bt_pref4") < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _pending(st_server, "bt_pref4") == 3
        c.stop_stream(cancel_requests=True)
        deadline = time.monotonic() + 30
        while _pending(st_server, "bt_pref4") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _pending(st_server, "bt_pref4") == 0
        # and a full set of four still runs
        results = []
        done = threading.Event()

        def cb(result, error):
            results.append((result, error))
            if len(results) == 4:
                done.set()
        c.start_stream(callback=cb)
        for k in range(4):
            c.async_stream_infer("bt_pref4", lib.triton_inputs(f), request_id=str(k))
        assert done.wait(30)
        c.stop_stream()
    assert all(e is None for _, e in results), results
    want = soracle.run("bt_pref4", f)["V_Y"]
    for r, _ in results:
        lib.assert_close(r.as_numpy("V_Y"), want, spec["rtol"])


def _pending(srv, model):
    return lib.metric_sum(lib.scrape_metrics(srv), "nv_inference_pending_request_count", model=model)


def test_sigterm_ends_open_streams(st_repo, sspecs, soracle, rng):
    """A client that keeps its stream open does not hold the exit up to --exit-timeout-secs: on SIGTERM the
    stream's accepted requests are answered, then it ends with UNAVAILABLE and the server exits 0."""
    import signal
    spec = sspecs["mlp"]
    f = lib.random_inputs(spec, rng, 1)
    srv = lib.ServerProcess(st_repo[0], ["--exit-timeout-secs", "60"])
    srv.start()
    try:
        with _client(srv) as c:
            q = _stream(c)
            for k in range(3):
                c.async_stream_infer("mlp", lib.triton_inputs(f), request_id=str(k))
            got = _drain(q, 3)
            assert all(e is None for _, e in got), got
            t0 = time.monotonic()
            srv.send_signal(signal.SIGTERM)
            rc = srv.wait_exit(30)
            took = time.monotonic() - t0
            # the stream's end reaches the callback as an error naming the shutdown
            result, error = q.get(timeout=30)
            assert result is None and "shutting down" in str(error), (result, error)
    finally:
        if srv.alive():
            srv.stop()
    assert rc == 0 and took < 15, (rc, took)
    srv.assert_clean_exit()
