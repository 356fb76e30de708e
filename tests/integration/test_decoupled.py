"""Decoupled models (Triton's model_transaction_policy { decoupled: true }) through the real server, with
tritonclient.grpc's stream API as a Triton user drives them: Triton's `repeat` backend, built into inferd
(server/core/repeat.h), serving Triton's repeat_int32 config (tests/triton_examples/gen_repo.py).

One request on ModelStreamInfer gets one response per element of IN (OUT = IN[i], IDX = i), each after
DELAY[i] ms, then the final flag: an empty response carrying triton_final_response=true when the request
asked with triton_enable_empty_final_response, else nothing. Also: unary ModelInfer and REST refused in
Triton's words, a backend error as an error response on a stream that stays open, an ONNX model that asks
for decoupled refused at load naming why, a client that cancels mid-stream (the server lives and counts it),
many concurrent streams, and a client that does not read: the stream stops reading and the backend holds its
responses (flow control) instead of queueing them without bound."""

import os
import queue
import sys
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "triton_examples"))
import gen_repo  # noqa: E402  (Triton's repeat_int32 config, one source for the examples and this test)

MODEL = "repeat_int32"
WAIT_S = 30  # how long a test waits for a response before failing


@pytest.fixture(scope="module")
def dec_repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("decoupled_repo"))
    gen_repo.add_repeat(d)
    # an ONNX model that asks to be decoupled: refused at load, naming why
    gen_repo.add_identity(d, "onnx_decoupled", gen_repo.I32, "TYPE_INT32", gen_repo.ONNX_PLATFORM, [-1])
    with open(os.path.join(d, "onnx_decoupled", "config.pbtxt"), "a") as f:
        f.write("model_transaction_policy { decoupled: true }\n")
    # the repeat backend's own checks (Triton's ValidateModelConfig), every reason at once
    gen_repo.add_repeat(d, "repeat_bad")
    p = os.path.join(d, "repeat_bad", "config.pbtxt")
    text = open(p).read().replace("max_batch_size: 0", "max_batch_size: 8").replace('"IDX"', '"INDEX"')
    open(p, "w").write(text.replace("decoupled: True", "decoupled: False"))
    return d


@pytest.fixture(scope="module")
def dsrv(dec_repo):
    yield from lib.served(dec_repo, ["--strict-readiness", "false"])


@pytest.fixture
def gclient(dsrv):
    c = grpcclient.InferenceServerClient(dsrv.grpc_url.split("//")[-1])
    yield c
    c.close()


def _inputs(values, delays, wait_ms=0, mod=grpcclient):
    ins = [mod.InferInput("IN", [len(values)], "INT32"), mod.InferInput("DELAY", [len(delays)], "UINT32"),
           mod.InferInput("WAIT", [1], "UINT32")]
    ins[0].set_data_from_numpy(np.asarray(values, dtype=np.int32))
    ins[1].set_data_from_numpy(np.asarray(delays, dtype=np.uint32))
    ins[2].set_data_from_numpy(np.asarray([wait_ms], dtype=np.uint32))
    return ins


class Stream:
    """A tritonclient stream whose callback puts (result, error) on a queue."""

    def __init__(self, client):
        self.client, self.q = client, queue.Queue()
        client.start_stream(callback=lambda result, error: self.q.put((result, error)))

    def send(self, values, delays, wait_ms=0, rid="", empty_final=False, outputs=None):
        outs = [grpcclient.InferRequestedOutput(n) for n in outputs] if outputs else None
        self.client.async_stream_infer(MODEL, _inputs(values, delays, wait_ms), request_id=rid, outputs=outs,
                                       enable_empty_final_response=empty_final)

    def get(self):
        try:
            return self.q.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError("no response within %d s" % WAIT_S)

    def quiet(self, s=0.3):
        """Nothing more arrives within s (a response that should not exist)."""
        try:
            got = self.q.get(timeout=s)
        except queue.Empty:
            return
        raise AssertionError("unexpected response: %r" % (got,))


def _final(res):
    return res.get_response().parameters["triton_final_response"].bool_param


def _check(res, rid, value, idx):
    r = res.get_response()
    assert (r.model_name, r.model_version, r.id) == (MODEL, "1", rid)
    assert res.as_numpy("OUT").tolist() == [value] and res.as_numpy("OUT").dtype == np.int32
    assert res.as_numpy("IDX").tolist() == [idx] and res.as_numpy("IDX").dtype == np.uint32
    assert "triton_final_response" in r.parameters and not _final(res)


# --- responses

def test_one_response_per_element_then_the_empty_final(gclient):
    s = Stream(gclient)
    vals = [7, -3, 2**31 - 1, 0, 42]
    s.send(vals, [5, 0, 10, 0, 1], rid="a", empty_final=True)
    for i, v in enumerate(vals):
        res, err = s.get()
        assert err is None, err
        _check(res, "a", v, i)
    res, err = s.get()
    assert err is None, err
    r = res.get_response()
    assert _final(res) and len(r.outputs) == 0 and len(r.raw_output_contents) == 0
    assert (r.model_name, r.model_version, r.id) == (MODEL, "1", "a")
    s.quiet()
    gclient.stop_stream()


def test_without_the_parameter_no_final_response(gclient):
    s = Stream(gclient)
    s.send([1, 2, 3], [0, 0, 0], rid="b")
    got = [s.get() for _ in range(3)]
    assert [e for _, e in got] == [None] * 3
    assert [r.as_numpy("OUT")[0] for r, _ in got] == [1, 2, 3]
    assert not any(_final(r) for r, _ in got)  # the final flag travels alone: nothing is sent for it
    s.quiet()
    gclient.stop_stream()


def test_zero_length_in_gives_only_the_final(gclient):
    s = Stream(gclient)
    s.send([], [], rid="z0")  # nothing at all
    s.send([], [], rid="z1", empty_final=True)  # only the empty final response
    s.send([9], [0], rid="after")  # the stream goes on
    res, err = s.get()
    assert err is None and res.get_response().id == "z1" and _final(res) and not res.get_response().outputs
    res, err = s.get()
    _check(res, "after", 9, 0)
    s.quiet()
    gclient.stop_stream()


def test_requested_outputs_only(gclient):
    s = Stream(gclient)
    s.send([5, 6], [0, 0], rid="o", outputs=["IDX"])
    for i in range(2):
        res, err = s.get()
        assert err is None
        assert [o.name for o in res.get_response().outputs] == ["IDX"] and res.as_numpy("IDX")[0] == i
    gclient.stop_stream()


def test_delays_order_the_responses(gclient):
    # answers leave in the order they are given: a later request with shorter delays overtakes an
    # earlier one on the same stream (the model takes the second once the first is released: WAIT 0)
    s = Stream(gclient)
    s.send([1, 2], [400, 400], rid="slow")
    s.send([3], [0], rid="fast")
    ids = [s.get()[0].get_response().id for _ in range(3)]
    assert ids == ["fast", "slow", "slow"]
    gclient.stop_stream()


def test_wait_holds_the_next_request(dsrv):
    # one instance, BLOCKING as in Triton: request B (delay 0) starts only once A was released (WAIT
    # 400 ms), so A's later response (delay 100 ms) still comes before B's
    c = grpcclient.InferenceServerClient(dsrv.grpc_url.split("//")[-1])
    s = Stream(c)
    s.send([1, 2], [0, 100], wait_ms=400, rid="A")
    assert s.get()[0].get_response().id == "A"
    s.send([3], [0], rid="B")
    assert [s.get()[0].get_response().id for _ in range(2)] == ["A", "B"]
    c.stop_stream()
    c.close()


# --- refusals and errors

def test_unary_and_rest_refused_as_triton_refuses_them(dsrv, gclient):
    with pytest.raises(InferenceServerException) as ei:
        gclient.infer(MODEL, _inputs([1], [0]))
    assert ei.value.status() == "StatusCode.UNIMPLEMENTED"
    assert "ModelInfer RPC doesn't support models with decoupled transaction policy" in ei.value.message()
    hc = httpclient.InferenceServerClient(dsrv.http_url.split("//")[-1])
    with pytest.raises(InferenceServerException) as ei:
        hc.infer(MODEL, _inputs([1], [0], mod=httpclient))
    assert ei.value.status() == "501"
    assert "HTTP end point doesn't support models with decoupled transaction policy" in ei.value.message()
    hc.close()


def test_backend_error_on_the_stream_which_stays_open(dsrv, gclient):
    s = Stream(gclient)
    ins = _inputs([1, 2, 3], [0, 0])
    gclient.async_stream_infer(MODEL, ins, request_id="bad")
    res, err = s.get()
    assert res is None and "expected IN and DELAY shape to match, got [3] and [2]" in str(err)
    # tritonclient hands only the error to the callback; a raw stream shows the rest of the message
    ch = grpc.insecure_channel(dsrv.grpc_url.split("//")[-1])
    try:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        bad = _raw_request("bad-raw", 3)
        bad.inputs[1].shape[0] = 2
        bad.raw_input_contents[1] = np.zeros(2, np.uint32).tobytes()
        (resp,) = list(stub.ModelStreamInfer(iter([bad]), timeout=WAIT_S))
        assert "expected IN and DELAY shape to match, got [3] and [2]" in resp.error_message
        ir = resp.infer_response
        assert (ir.model_name, ir.id) == (MODEL, "bad-raw") and ir.parameters["triton_final_response"].bool_param
    finally:
        ch.close()
    s.send([4], [0], rid="good")
    res, err = s.get()
    assert err is None
    _check(res, "good", 4, 0)
    gclient.stop_stream()


def test_config_echoes_decoupled_and_bad_models_say_why(gclient):
    cfg = gclient.get_model_config(MODEL, as_json=True)["config"]
    assert cfg["model_transaction_policy"] == {"decoupled": True} and cfg["backend"] == "repeat"
    meta = gclient.get_model_metadata(MODEL, as_json=True)
    assert meta["platform"] == "repeat"
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [
        ("IN", "INT32", ["-1"]), ("DELAY", "UINT32", ["-1"]), ("WAIT", "UINT32", ["1"])]
    assert [(t["name"], t["datatype"]) for t in meta["outputs"]] == [("OUT", "INT32"), ("IDX", "UINT32")]
    idx = {m["name"]: m for m in gclient.get_model_repository_index(as_json=True)["models"]}
    assert idx[MODEL]["state"] == "READY"
    onnx = idx["onnx_decoupled"]
    assert onnx["state"] == "UNAVAILABLE"
    assert "model_transaction_policy.decoupled is not supported for ONNX models" in onnx["reason"], onnx
    bad = idx["repeat_bad"]["reason"]
    for why in ("max_batch_size == 0", "model_transaction_policy { decoupled: true }",
                "expected second output tensor name to be IDX, got INDEX"):
        assert why in bad, bad


# --- cancellation, statistics, concurrency

def test_cancel_mid_stream(dsrv):
    c = grpcclient.InferenceServerClient(dsrv.grpc_url.split("//")[-1])
    before = lib.model_stats(c, MODEL)
    s = Stream(c)
    # 40 responses 100 ms apart and a 60 s WAIT: cancelled long before either ends
    s.send(list(range(40)), [100] * 40, wait_ms=60000, rid="c")
    for i in range(2):
        res, err = s.get()
        _check(res, "c", i, i)
    c.stop_stream(cancel_requests=True)
    c.close()
    # the server drops what was left and counts the request as cancelled, not as a success
    c2 = grpcclient.InferenceServerClient(dsrv.grpc_url.split("//")[-1])
    deadline = time.monotonic() + WAIT_S
    while lib.model_stats(c2, MODEL).inference_stats.fail.count == before.inference_stats.fail.count:
        assert time.monotonic() < deadline, "the cancelled request was never counted"
        time.sleep(0.05)
    after = lib.model_stats(c2, MODEL)
    assert after.inference_stats.fail.count == before.inference_stats.fail.count + 1
    assert after.inference_stats.success.count == before.inference_stats.success.count
    # and it serves the next stream (the cancelled one's 60 s WAIT does not hold the model)
    s2 = Stream(c2)
    s2.send([11], [0], rid="next")
    _check(s2.get()[0], "next", 11, 0)
    c2.stop_stream()
    stats = lib.model_stats(c2, MODEL)
    assert stats.inference_stats.success.count == before.inference_stats.success.count + 1
    c2.close()
    assert dsrv.alive()


def test_statistics_count_each_request_once(gclient):
    before = lib.model_stats(gclient, MODEL)
    s = Stream(gclient)
    for k in range(3):
        s.send([k, k], [0, 0], rid="s%d" % k, empty_final=True)
    finals = 0
    while finals < 3:
        res, err = s.get()
        assert err is None
        finals += _final(res)
    gclient.stop_stream()
    after = lib.model_stats(gclient, MODEL)
    assert after.inference_stats.success.count == before.inference_stats.success.count + 3
    assert after.inference_count == before.inference_count + 3
    assert after.execution_count == before.execution_count + 3


def test_many_concurrent_streams(dsrv):
    n_streams, n_resp = 16, 25
    errors = []

    def one(k):
        try:
            c = grpcclient.InferenceServerClient(dsrv.grpc_url.split("//")[-1])
            s = Stream(c)
            vals = list(range(k * 1000, k * 1000 + n_resp))
            s.send(vals, [1] * n_resp, rid="t%d" % k, empty_final=True)
            for i, v in enumerate(vals):
                res, err = s.get()
                assert err is None, err
                _check(res, "t%d" % k, v, i)
            res, err = s.get()
            assert _final(res) and res.get_response().id == "t%d" % k
            c.stop_stream()
            c.close()
        except Exception as e:  # noqa: BLE001  (reported by the main thread)
            errors.append("stream %d: %r" % (k, e))

    ts = [threading.Thread(target=one, args=(k,)) for k in range(n_streams)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not errors, errors
    assert dsrv.alive()


# --- flow control

CAP = 16
# Every response echoes its request's id: one request with a 4 KB id and N_FLOOD elements means 40 MB of
# responses, which an unheld backend would queue at once for a client that does not read.
PAD = "x" * 4000
N_FLOOD = 10000
N_SMALL = 4000    # requests sent behind it, each with a 4 KB id: 16 MB, past what HTTP/2's windows hold


def _rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _raw_request(rid, n):
    r = service_pb2.ModelInferRequest(model_name=MODEL, id=rid)
    for name, dt, arr in (("IN", "INT32", np.arange(n, dtype=np.int32)), ("DELAY", "UINT32", np.zeros(n, np.uint32)),
                          ("WAIT", "UINT32", np.zeros(1, np.uint32))):
        t = r.inputs.add()
        t.name, t.datatype = name, dt
        t.shape.append(arr.size)
        r.raw_input_contents.append(arr.tobytes())
    return r


def test_unread_stream_pauses_instead_of_growing(dec_repo):
    srv = lib.ServerProcess(dec_repo, ["--strict-readiness", "false", "--grpc-stream-max-queued", str(CAP)]).start()
    ch = None
    try:
        ch = grpc.insecure_channel(srv.grpc_url.split("//")[-1], options=[("grpc.max_receive_message_length", -1)])
        grpc.channel_ready_future(ch).result(timeout=30)
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        rss0 = _rss(srv.proc.pid)
        t0 = time.monotonic()
        sent = []
        go = threading.Event()

        def requests():
            yield _raw_request("flood-" + PAD, N_FLOOD)
            for k in range(N_SMALL):  # small requests behind it (4 KB ids): the server stops taking them
                sent.append(k)
                yield _raw_request("small%d-%s" % (k, PAD), 1)
            go.wait(120)

        answers = stub.ModelStreamInfer(requests(), timeout=300)
        # the client reads nothing: its sends stall once the stream stopped reading
        last, since, end = -1, time.monotonic(), time.monotonic() + 60
        while time.monotonic() < end:
            if len(sent) != last:
                last, since = len(sent), time.monotonic()
            elif time.monotonic() - since > 1.5:
                break
            time.sleep(0.1)
        stalled = len(sent)
        print("stalled after %.1f s" % (time.monotonic() - t0))
        assert stalled < N_SMALL, "the sender never stalled"
        srv.await_stderr(lambda ls: any("stopped reading until their clients take their answers" in l for l in ls), timeout=10)
        grown = _rss(srv.proc.pid) - rss0
        print("sender stalled at %d small requests; server RSS grew %.1f MiB" % (stalled, grown / 2**20))
        # held back: far less than N_FLOOD queued responses would take. Unheld, the flood grows it by ~50 MiB;
        # ThreadSanitizer's shadow memory adds several bytes for every heap byte (CI: 26.6 MiB held), so its
        # build gets four times the room, still far below the ~250 MiB its unheld flood would take
        limit = (24 << 20) * (4 if lib.thread_sanitized() else 1)
        assert grown < limit, (grown, limit)
        # once the client reads, every response arrives, each request's in order
        n = 0
        t_read = time.monotonic()
        smalls = set()
        for resp in answers:
            assert not resp.error_message, resp.error_message
            ir = resp.infer_response
            if ir.id == "flood-" + PAD:
                assert np.frombuffer(ir.raw_output_contents[1], np.uint32)[0] == n
                assert np.frombuffer(ir.raw_output_contents[0], np.int32)[0] == n
                n += 1
            else:
                assert ir.id not in smalls and ir.id.endswith(PAD)
                smalls.add(ir.id)
                if len(smalls) == N_SMALL:
                    go.set()
        print("read in %.1f s" % (time.monotonic() - t_read))
        assert n == N_FLOOD and len(smalls) == N_SMALL
    finally:
        if ch:
            ch.close()
        srv.stop()
    srv.assert_clean_exit()


def test_sigterm_with_responses_pending(dec_repo):
    # a stream whose request still owes responses a minute away: past --exit-timeout-secs the drain
    # cancels it, the runner lets go of the job (nothing leaks: the sanitizer builds check at exit) and
    # the server exits 0
    srv = lib.ServerProcess(dec_repo, ["--strict-readiness", "false", "--exit-timeout-secs", "2"]).start()
    c = grpcclient.InferenceServerClient(srv.grpc_url.split("//")[-1])
    try:
        s = Stream(c)
        s.send([1, 2], [0, 60000], wait_ms=60000, rid="long")
        _check(s.get()[0], "long", 1, 0)
        t0 = time.monotonic()
        srv.stop()
        took = time.monotonic() - t0
        print("exited %.1f s after SIGTERM" % took)
        srv.assert_clean_exit()
        assert took < 30, "the pending responses held the exit past --exit-timeout-secs"
    finally:
        c.close()
