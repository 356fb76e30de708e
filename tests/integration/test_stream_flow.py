"""Flow control of ModelStreamInfer answers (issue 31, item 5): a client that sends many requests on one
stream and never reads the answers used to grow the server without bound (2.2 GB in 8 s), because the server
kept reading and queued every answer. Now a stream stops reading once it holds --grpc-stream-max-queued
messages not yet answered on the wire (or --grpc-stream-max-queued-bytes of answers), and reads again at half;
HTTP/2 flow control then holds the client's sends.

Through the real server, at small scale (a cap of 16, 64 KiB requests and answers): the sender blocks well
short of what it means to send, the server's RSS stays bounded, another connection is served meanwhile, and
once the client reads, every answer arrives in order with its id and the stream ends OK. Also: a client
that cancels while its stream is paused, and a SIGTERM drain while paused, both end the stream cleanly."""

import os
import signal
import threading
import time

import grpc
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from tritonclient.grpc import service_pb2, service_pb2_grpc

import inferd_testlib as lib

WIDTH = 16384        # FP32 elements: 64 KiB a request, 64 KiB an answer
CAP = 16             # --grpc-stream-max-queued for these servers
# requests the client means to send: ~190 MiB of answers unread without flow control (fewer under a sanitizer,
# where the model runs ~50x slower; the sender still stalls at ~110-140 of them)
TOTAL = 800 if lib.thread_sanitized() or lib.address_sanitized() else 3000
RSS_GROWTH_MAX = 96 << 20  # generous: the cap holds ~1 MiB of answers, HTTP/2 and socket buffers a few more
STALL_S = 1.5        # the sender counts as blocked when it has sent nothing more for this long
DEADLINE_S = 60
SERVER_ARGS = ["--strict-readiness", "false", "--grpc-stream-max-queued", str(CAP)]


@pytest.fixture(scope="module")
def flow_repo(tmp_path_factory):
    g = lib.gen_models
    d = str(tmp_path_factory.mktemp("flow_repo"))
    repo = g.Repo(d)
    m = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "relu_big",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", WIDTH])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", WIDTH])]),
        opset_imports=[helper.make_opsetid("", g.DEFAULT_OPSET)])
    m.ir_version = g.IR_FOR_OPSET[g.DEFAULT_OPSET]
    onnx.checker.check_model(m)
    repo.add("relu_big", 8, [g._io("X", "FP32", [WIDTH])], [g._out("Y", "FP32", [WIDTH])], {1: m},
             config_extra=g._dyn())
    return d


def _rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for %d" % pid)


def _request(k, x):
    r = service_pb2.ModelInferRequest(model_name="relu_big", id="r%d" % k)
    t = r.inputs.add()
    t.name, t.datatype = "X", "FP32"
    t.shape.extend([1, WIDTH])
    r.raw_input_contents.append(x.tobytes())
    return r


class Sender:
    """A request iterator for a raw grpcio stream that counts what grpcio has taken from it: grpcio takes
    the next request only once the previous one's send completed, so the count stalls when the server
    stops reading and HTTP/2's windows are full."""

    def __init__(self, total, x):
        self.total, self.x = total, x
        self.sent = 0
        self.stop = threading.Event()

    def __iter__(self):
        for k in range(self.total):
            if self.stop.is_set():
                return
            self.sent = k + 1
            yield _request(k, self.x)

    def await_stall(self):
        """Waits until the count has not moved for STALL_S; returns it."""
        end = time.monotonic() + DEADLINE_S
        last, since = -1, time.monotonic()
        while time.monotonic() < end:
            n = self.sent
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since >= STALL_S:
                return n
            time.sleep(0.1)
        raise AssertionError("the sender never stalled (sent %d)" % self.sent)


def _channel(srv, tag):
    # an argument gRPC ignores keeps the channel off the others' connection (global subchannel pool)
    ch = grpc.insecure_channel(srv.grpc_url, options=[("grpc.max_receive_message_length", -1),
                                                      ("inferd.test.connection", tag)])
    grpc.channel_ready_future(ch).result(timeout=30)
    return ch


def _unary_ok(srv, x):
    ch = _channel(srv, "unary")
    try:
        resp = service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelInfer(_request(0, x), timeout=30)
        got = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32)
        np.testing.assert_array_equal(got, np.maximum(x.ravel(), 0))
    finally:
        ch.close()


def _blocked_stream(srv, rng):
    """A stream whose client sends and does not read, once the sender has stalled. Returns the pieces."""
    x = rng.standard_normal((1, WIDTH)).astype(np.float32)
    ch = _channel(srv, "stream")
    sender = Sender(TOTAL, x)
    answers = service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelStreamInfer(iter(sender), timeout=DEADLINE_S * 4)
    stalled = sender.await_stall()
    return x, ch, sender, answers, stalled


def test_unread_stream_is_held_by_flow_control(flow_repo, rng):
    srv = lib.ServerProcess(flow_repo, SERVER_ARGS).start()
    ch = None
    try:
        x0 = rng.standard_normal((1, WIDTH)).astype(np.float32)
        _unary_ok(srv, x0)  # warm: the model ran once, the allocator has its pools
        rss0 = _rss(srv.proc.pid)
        t0 = time.monotonic()
        x, ch, sender, answers, stalled = _blocked_stream(srv, rng)
        rss1 = _rss(srv.proc.pid)
        print("sender stalled at %d of %d requests; server RSS %.1f -> %.1f MiB"
              % (stalled, TOTAL, rss0 / 2**20, rss1 / 2**20))
        assert stalled < TOTAL // 2, "the client sent %d requests without reading an answer" % stalled
        assert rss1 - rss0 < RSS_GROWTH_MAX, "server RSS grew by %.1f MiB" % ((rss1 - rss0) / 2**20)
        srv.await_stderr(lambda ls: any("stopped reading until their clients take their answers" in l
                                        for l in ls))
        _unary_ok(srv, x0)  # another connection is served meanwhile
        # now read: every answer, in order, with its id and values; the rest of the requests go through
        want = np.maximum(x.ravel(), 0)
        n = 0
        for resp in answers:
            assert resp.error_message == "", resp.error_message
            assert resp.infer_response.id == "r%d" % n
            got = np.frombuffer(resp.infer_response.raw_output_contents[0], dtype=np.float32)
            np.testing.assert_array_equal(got, want)
            n += 1
        assert n == TOTAL and sender.sent == TOTAL
        assert answers.code() == grpc.StatusCode.OK
        pause_lines = [l for l in srv.stderr_text().splitlines() if "stopped reading until" in l]
        # rate-limited (one line per 10 s), not one per pause: it paused again and again as it was read
        assert 1 <= len(pause_lines) <= 2 + (time.monotonic() - t0) / 10, pause_lines
    finally:
        if ch is not None:
            ch.close()
        srv.stop()
    srv.assert_clean_exit()


def test_cancel_while_paused(flow_repo, rng):
    srv = lib.ServerProcess(flow_repo, SERVER_ARGS).start()
    try:
        x, ch, sender, answers, stalled = _blocked_stream(srv, rng)
        assert stalled < TOTAL // 2
        answers.cancel()
        sender.stop.set()
        ch.close()
        _unary_ok(srv, x)
    finally:
        srv.stop()
    srv.assert_clean_exit()


def test_drain_while_paused(flow_repo, rng):
    """SIGTERM while the stream is paused: the server stops reading for good, writes the answers of what
    it took once the client reads, then ends the stream UNAVAILABLE, and exits 0."""
    srv = lib.ServerProcess(flow_repo, SERVER_ARGS + ["--exit-timeout-secs", "30"]).start()
    try:
        x, ch, sender, answers, stalled = _blocked_stream(srv, rng)
        assert stalled < TOTAL // 2
        srv.send_signal(signal.SIGTERM)
        srv.await_stderr(lambda ls: any("shutting down" in l.lower() or "drain" in l.lower() for l in ls))
        n = 0
        want = np.maximum(x.ravel(), 0)
        with pytest.raises(grpc.RpcError) as ei:
            for resp in answers:
                assert resp.infer_response.id == "r%d" % n
                np.testing.assert_array_equal(
                    np.frombuffer(resp.infer_response.raw_output_contents[0], dtype=np.float32), want)
                n += 1
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
        assert "shutting down" in ei.value.details()
        assert 0 < n <= stalled
        sender.stop.set()
        ch.close()
        assert srv.wait_exit() == 0
    finally:
        srv.stop()
    srv.assert_clean_exit()
