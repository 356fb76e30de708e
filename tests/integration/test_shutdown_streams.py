"""SIGTERM under mixed load (issue 15): 8 ModelStreamInfer streams (tritonclient) that keep sending, unary
ModelInfer load and a storm of 1 ms-deadline calls (grpcio). Every stream must end with the documented
UNAVAILABLE "the server is shutting down" after its OK answers, never with a connection reset, and every
request the server counted as answered (its final counts) must have reached the client.

Two layouts, each checked by counting the server's connections: the streams on one connection and the unary
calls and the storm on another ("streams_apart"), and everything on one connection ("one_connection";
channels with the same arguments share it through gRPC's global subchannel pool). The race this hunts is
timing-dependent, so one test case is one server run, repeated (INFERD_SHUTDOWN_RUNS, default 5). Before the
fix (streams ended together with the GOAWAY) about one "streams_apart" run in eight failed on the 2-core dev
VM, every stream of it with UNAVAILABLE "Stream removed (sendmsg: Broken pipe)" or "(recvmsg: Connection
reset by peer)", and answers the server had counted were missing on the client; there the streams' statuses
were the last bytes written before the connection closed, while the client was still sending on them.
"""

import os
import signal
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

RUNS = int(os.environ.get("INFERD_SHUTDOWN_RUNS", "5"))
N_STREAMS = 8
STREAM_WINDOW = int(os.environ.get("INFERD_SD_WINDOW", "16"))   # requests in flight per stream
N_UNARY = 4         # threads of blocking unary calls
STORM_WINDOW = int(os.environ.get("INFERD_SD_STORM", "64"))  # 1 ms-deadline calls outstanding at a time
# The storm's calls a second at most (0: as fast as the client goes). On the ASan build it is capped: there the
# server's gRPC core falls behind a storm of ~5,000 calls/s on one connection and never catches up (issue 15;
# tests/bench/RESULTS.md "The 1 ms-deadline storm under ASan"): calls then reach it already expired, each costs
# one of gRPC's own threads (its default executor or its timer thread) more than an answered one, its socket's
# unread bytes grow to megabytes, and the unary calls queued behind them in the same TCP stream get no answer;
# inferd's queues stay empty. A bare gRPC echo server built with ASan (bench_echo_server: none of inferd's request
# path) starves the same way; uninstrumented, both keep up (unless held to a third of a core). Paced at 2,000/s the ASan server kept up on a loaded 2-core VM; 1,000/s still puts client frames on the
# wire every millisecond of the shutdown, which is what the storm is for.
STORM_RATE = float(os.environ.get("INFERD_SD_STORM_RATE", "1000" if lib.address_sanitized() else "0"))
MAX_MSG = 64 << 20
# channels with equal arguments share one connection; an argument gRPC ignores sets the streams apart
CHANNEL_ARGS = [("grpc.max_receive_message_length", MAX_MSG), ("grpc.max_send_message_length", MAX_MSG)]
LAYOUTS = {"streams_apart": CHANNEL_ARGS + [("inferd.test.connection", "streams")], "one_connection": CHANNEL_ARGS}


@pytest.fixture(scope="module")
def sd_repo(tmp_path_factory):
    """The seed mlp (what streams and unary calls ask for, so its success count is theirs alone) and a
    small linear model for the storm (whose calls the server may answer after the client gave up)."""
    g = lib.gen_models
    d = str(tmp_path_factory.mktemp("shutdown_repo"))
    repo = g.Repo(d)
    g.add_mlp(repo)
    repo.add("storm", 8, [g._io("V_X", "FP32", [8])], [g._out("V_Y", "FP32", [4])],
             {1: g._small_linear("storm", 700)}, config_extra=g._dyn())
    return d


def _request(pb, model, name, shape, rng, rid):
    r = pb.service.ModelInferRequest(model_name=model, id=rid)
    t = r.inputs.add()
    t.name, t.datatype = name, "FP32"
    t.shape.extend(shape)
    r.raw_input_contents.append(rng.standard_normal(shape).astype(np.float32).tobytes())
    return r


class Stream:
    """One tritonclient stream fed by its own thread, which keeps up to STREAM_WINDOW requests in flight and
    never half-closes: the client is still sending on it when the server ends it. tritonclient's clients
    with the same arguments share one connection (gRPC's global subchannel pool)."""

    def __init__(self, url, k, rng, channel_args, **client_kw):
        self.ok = 0
        self.errors = []        # error answers that are not the stream's end
        self.end = None         # (code name, details) once the stream ended
        self._k = k
        self._sent = 0
        self._cv = threading.Condition()
        self._x = rng.standard_normal((1, 1024)).astype(np.float32)
        self._client = grpcclient.InferenceServerClient(url, channel_args=channel_args, **client_kw)  # ssl=True...
        self._client.start_stream(callback=self._on_answer)
        self._sender = threading.Thread(target=self._send, daemon=True)
        self._sender.start()

    def _on_answer(self, result, error):
        with self._cv:
            if error is None:
                self.ok += 1
            elif result is None and self.end is None and not isinstance(error, str) and error.status():
                # the stream's end: tritonclient hands the RpcError's code and details over as an exception
                self.end = (error.status().replace("StatusCode.", ""), error.message() or "")
            else:
                self.errors.append(str(error))
            self._cv.notify_all()

    def _send(self):
        i = 0
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self.end is not None or self._sent - self.ok < STREAM_WINDOW, 1.0)
                if self.end is not None:
                    return
            inp = grpcclient.InferInput("INPUT0", [1, 1024], "FP32")
            inp.set_data_from_numpy(self._x)
            try:
                self._client.async_stream_infer("mlp", [inp], request_id="s%d-%d" % (self._k, i))
            except Exception:
                return  # the stream ended meanwhile; its end reached the callback
            with self._cv:
                self._sent += 1
            i += 1

    def join(self, timeout):
        with self._cv:
            ended = self._cv.wait_for(lambda: self.end is not None, timeout)
        self._sender.join(timeout)
        if self._client is not None:
            client, self._client = self._client, None
            try:
                client.stop_stream()
            finally:
                client.close()
        return ended

    def clean(self):
        """Ended as documented: the shutdown's UNAVAILABLE (it never half-closes, so OK cannot be its end)."""
        code, details = self.end or (None, None)
        return not self.errors and code == "UNAVAILABLE" and "shutting down" in details


def _unary_loop(stub, pb, rng, stop, counts, lock):
    reqs = [_request(pb, "mlp", "INPUT0", [1, 1024], rng, "") for _ in range(4)]
    i = 0
    while not stop.is_set():
        try:
            stub.ModelInfer(reqs[i % len(reqs)], timeout=30)
            with lock:
                counts["ok"] += 1
        except grpc.RpcError as e:
            with lock:
                key = "%s: %s" % (e.code().name, e.details())
                counts["errors"][key] = counts["errors"].get(key, 0) + 1
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                return  # the server is going: a new connection is refused from here on
        i += 1


def _storm(stub, pb, rng, stop):
    """1 ms deadlines: most expire on the wire or in the queue, and the client cancels them (RST_STREAM),
    so the connection carries frames from the client at every moment of the shutdown."""
    req = _request(pb, "storm", "V_X", [1, 8], rng, "")
    slots = threading.Semaphore(STORM_WINDOW)
    t0, sent = time.monotonic(), 0
    while not stop.is_set():
        if not slots.acquire(timeout=0.05):
            continue
        if STORM_RATE:  # paced: never ahead of STORM_RATE calls a second
            ahead = sent / STORM_RATE - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        sent += 1
        try:
            f = stub.ModelInfer.future(req, timeout=0.001)
        except Exception:
            slots.release()
            return
        f.add_done_callback(lambda _f: slots.release())


def _connections(port):
    """Established TCP connections whose local port is the server's (/proc/net/tcp{,6})."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                n += state == "01" and int(local.rsplit(":", 1)[1], 16) == port
    return n


def _final_success(srv, model):
    """The server's own tally, logged after every answer left."""
    import re
    want = re.compile(r"final counts: model '%s' version 1: (\d+) succeeded" % re.escape(model))
    lines = srv.await_stderr(lambda ls: any(want.search(l) for l in ls), timeout=30)
    return int(next(want.search(l).group(1) for l in lines if want.search(l)))


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sigterm_under_mixed_load(sd_repo, pb, layout, run):
    rng = np.random.default_rng(run)
    # the storm's 1 ms deadlines are what the rapid-reset guard counts since probe F7 (short deadlines that
    # expire): on one connection it would end the connection, streams and all, before the SIGTERM under test
    srv = lib.ServerProcess(sd_repo, ["--exit-timeout-secs", "30", "--grpc-rapid-reset-min-deadline-ms", "0"])
    srv.start()
    ch = grpc.insecure_channel(srv.grpc_url, options=CHANNEL_ARGS)
    stop = threading.Event()
    unary = {"ok": 0, "errors": {}}
    lock = threading.Lock()
    threads, streams = [], []
    try:
        grpc.channel_ready_future(ch).result(timeout=30)
        stub = pb.grpc.GRPCInferenceServiceStub(ch)
        for k in range(N_STREAMS):
            streams.append(Stream(srv.grpc_url, k, rng, LAYOUTS[layout]))
        threads = [threading.Thread(target=_unary_loop, args=(stub, pb, rng, stop, unary, lock), daemon=True)
                   for _ in range(N_UNARY)]
        threads.append(threading.Thread(target=_storm, args=(stub, pb, rng, stop), daemon=True))
        for t in threads:
            t.start()
        # load established: every stream and the unary loop answered a few
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (min(s.ok for s in streams) < 5 or unary["ok"] < 5):
            time.sleep(0.02)
        assert min(s.ok for s in streams) >= 5 and unary["ok"] >= 5, "load never got going"
        want = 2 if layout == "streams_apart" else 1
        assert _connections(srv.grpc_port) == want, "not the %d connection(s) of layout %s" % (want, layout)
        srv.send_signal(signal.SIGTERM)
        rc = srv.wait_exit(60)
        for s in streams:
            assert s.join(30), "a stream never ended after the server exited"
    finally:
        # the server first: every call and stream then ends, and the threads with them
        stop.set()
        if srv.alive():
            srv.stop()
        for s in streams:
            s.join(30)
        for t in threads:
            t.join(30)
        ch.close()
    assert rc == 0, srv.stderr_tail()
    srv.assert_clean_exit()
    bad = [(k, s.end, s.errors[:2]) for k, s in enumerate(streams) if not s.clean()]
    client_ok = sum(s.ok for s in streams) + unary["ok"]
    server_ok = _final_success(srv, "mlp")
    print("%s run %d: streams %s; unary ok %d errors %s; client ok %d, server ok %d" % (
        layout, run, [s.ok for s in streams], unary["ok"], unary["errors"], client_ok, server_ok))
    assert not bad, "%d of %d streams did not end with UNAVAILABLE 'shutting down': %s" % (
        len(bad), N_STREAMS, bad)
    assert client_ok == server_ok, "the server counted %d answered, the client received %d; unary errors %s" % (
        server_ok, client_ok, unary["errors"])


# --- the order on the wire, without timing: a raw HTTP/2 client

H2_DATA, H2_HEADERS, H2_SETTINGS, H2_PING, H2_GOAWAY, H2_WINDOW_UPDATE = 0, 1, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def _frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def _hpack_literal(name, value):
    """A header as HPACK's literal field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


class RawH2:
    """Just enough HTTP/2 to hold one gRPC stream open and log the frames the server sends, in order."""

    def __init__(self, port):
        import socket
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""
        self.frames = []  # (type, flags, stream id) as they arrived
        self.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(H2_SETTINGS, 0, 0))

    def open_stream(self, sid, path, authority):
        block = b"".join(_hpack_literal(n, v) for n, v in (
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", path), (b":authority", authority),
            (b"content-type", b"application/grpc"), (b"te", b"trailers")))
        self.sock.sendall(_frame(H2_HEADERS, END_HEADERS, sid, block))

    def send_message(self, sid, msg):
        self.sock.sendall(_frame(H2_DATA, 0, sid, b"\x00" + len(msg).to_bytes(4, "big") + msg))

    def next_frame(self):
        """The next frame (type, flags, stream, payload), answering SETTINGS and PING and returning the
        flow-control window it uses; None at the end of the connection (EOF or reset)."""
        while True:
            while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
                try:
                    chunk = self.sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    return None
                self.buf += chunk
            n = int.from_bytes(self.buf[:3], "big")
            ftype, flags, sid = self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
            self.frames.append((ftype, flags, sid))
            try:
                if ftype == H2_SETTINGS and not flags & ACK:
                    self.sock.sendall(_frame(H2_SETTINGS, ACK, 0))
                elif ftype == H2_PING and not flags & ACK:
                    self.sock.sendall(_frame(H2_PING, ACK, 0, payload))
                elif ftype == H2_DATA and n:
                    inc = n.to_bytes(4, "big")
                    self.sock.sendall(_frame(H2_WINDOW_UPDATE, 0, 0, inc) + _frame(H2_WINDOW_UPDATE, 0, sid, inc))
            except OSError:
                pass  # the server closed first: what it sent is still read
            return ftype, flags, sid, payload


def test_stream_status_is_written_before_the_goaway(sd_repo, pb):
    """The order the fix rests on, with no race to win: on SIGTERM an open stream's status (trailers: a
    HEADERS frame with END_STREAM) reaches the client before the GOAWAY. The core's GOAWAY comes with a PING
    and the connection closes only after its ack, so a client that acked it has read the status. Before the
    fix the GOAWAY came first and the status raced the close."""
    srv = lib.ServerProcess(sd_repo, ["--exit-timeout-secs", "30"])
    srv.start()
    try:
        h2 = RawH2(srv.grpc_port)
        sid = 1
        h2.open_stream(sid, b"/inference.GRPCInferenceService/ModelStreamInfer", srv.grpc_url.encode())
        req = _request(pb, "mlp", "INPUT0", [1, 1024], np.random.default_rng(0), "r").SerializeToString()
        for _ in range(3):
            h2.send_message(sid, req)
        got = b""  # the stream's gRPC messages: three answers (5-byte prefix + message each)
        answers = 0
        while answers < 3:
            f = h2.next_frame()
            assert f is not None, "the server closed the connection before answering: %r" % h2.frames
            if f[0] == H2_DATA and f[2] == sid:
                got += f[3]
                while len(got) >= 5 and len(got) >= 5 + int.from_bytes(got[1:5], "big"):
                    got = got[5 + int.from_bytes(got[1:5], "big"):]
                    answers += 1
        seen = len(h2.frames)
        srv.send_signal(signal.SIGTERM)
        while h2.next_frame() is not None:
            pass
        rc = srv.wait_exit(60)
    finally:
        if srv.alive():
            srv.stop()
    after = h2.frames[seen:]
    trailers = [i for i, (t, fl, s) in enumerate(after) if t == H2_HEADERS and fl & END_STREAM and s == sid]
    goaways = [i for i, (t, _, _) in enumerate(after) if t == H2_GOAWAY]
    assert trailers and goaways, "after SIGTERM: %r" % after
    assert trailers[0] < goaways[0], "the GOAWAY came before the stream's status: %r" % after
    assert rc == 0
    srv.assert_clean_exit()
