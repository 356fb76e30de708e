"""The HTTP port under attack stays bounded (issue 31), each limit made small through its flag so the
mechanism shows at small scale: a connection cap (the extra connections get 503 and are closed, the gRPC
port and the HTTP port after some close still serve), a header deadline that trickling cannot extend,
a minimum body rate, a budget of body bytes in flight over all connections (later bodies get 503,
the server's RSS stays bounded), and JSON parse memory admitted before cJSON builds its tree."""

import gzip
import json
import os
import socket
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

DEADLINE_S = 20
MIB = 1 << 20


def _connect(srv, timeout=10):
    return socket.create_connection(("127.0.0.1", srv.http_port), timeout=timeout)


def _head(sock, timeout=10):
    """What sock receives up to the end of the response's headers (or EOF / a reset: b'')."""
    sock.settimeout(timeout)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    return got


def _vmrss_kib(srv):
    with open("/proc/%d/status" % srv.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _rest_infer_ok(srv, specs, rng):
    """A normal REST inference on mlp answers 200 with its outputs."""
    feeds = lib.random_inputs(specs["mlp"], rng, 1)
    body = json.dumps({"inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32", "data": a.ravel().tolist()}
                                  for n, a in feeds.items()]}).encode()
    s = _connect(srv)
    try:
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                  % (len(body), body))
        raw = lib.read_to_eof(s)
    finally:
        s.close()
    assert raw.startswith(b"HTTP/1.1 200"), raw[:300]
    assert b'"outputs"' in raw


def _metrics(srv):
    """/metrics over the HTTP port (or, past its connection cap, the --metrics-port one when given)."""
    port = srv.metrics_port or srv.http_port
    code, text = lib.http_get("http://127.0.0.1:%d/metrics" % port)
    assert code == 200, text
    return text


def _held_request(sock):
    """One keep-alive request answered on sock: the server has accepted and counts the connection."""
    sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    head = _head(sock)
    assert head.startswith(b"HTTP/1.1 200"), head


# --- connections

def _busy(sock):
    """sock answered once, then mid-request (half a request line): not idle, so never evicted at the cap."""
    _held_request(sock)
    sock.sendall(b"GET /v2/health/li")


def test_connection_cap_refuses_extra_connections_and_keeps_grpc(start_server):
    """Every connection at the cap is busy (mid-request): no idle one to give way, so new ones get 503."""
    cap, extra = 8, 6
    srv = start_server(["--http-max-connections", str(cap), "--metrics-port", "0"])
    held = []
    try:
        for _ in range(cap):
            s = _connect(srv)
            held.append(s)
            _busy(s)
        refused = 0
        for _ in range(extra):
            s = _connect(srv)
            got = _head(s)
            s.close()
            # told at once: a 503 (or, had the client's bytes crossed the close, a reset), never a hang
            assert got == b"" or got.startswith(b"HTTP/1.1 503"), got
            refused += got.startswith(b"HTTP/1.1 503")
        assert refused >= extra - 1, refused
        srv.await_stderr(lambda ls: any("at --http-max-connections (8)" in l for l in ls))
        samples = lib.parse_metrics(_metrics(srv))
        assert lib.metric_sum(samples, "inferd_http_refused_total", reason="connection_cap") >= refused
        # the gRPC port has its own share of descriptors and still takes a fresh connection
        c = grpcclient.InferenceServerClient(url=srv.grpc_url)
        assert c.is_server_live()
        c.close()
        # once some held connections go, the HTTP port serves again
        for s in held[:3]:
            s.close()
        held = held[3:]
        end = time.monotonic() + DEADLINE_S
        code = None
        while code != 200 and time.monotonic() < end:
            code = lib.http_get(srv.http_url + "/v2/health/live")[0]
            if code != 200:
                time.sleep(0.05)
        assert code == 200
    finally:
        for s in held:
            s.close()
    srv.stop()
    srv.assert_clean_exit()


def _eof_or_reset(sock, timeout=10):
    """True when the server ended sock (EOF or reset) within timeout."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_idle_connections_give_way_at_the_cap(start_server):
    """F14: a client holding the cap in idle sockets (connected and silent, or at rest between keep-alive
    requests) no longer locks others out: at the cap the longest idle connection is closed and the new one
    served, on the HTTP port (--http-max-connections) and on the --metrics-port one (64). Busy ones stay."""
    cap = 8
    srv = start_server(["--http-max-connections", str(cap), "--metrics-port", "0"])
    held = []
    try:
        busy = _connect(srv)
        _busy(busy)  # the oldest, but mid-request: never the one to go
        for i in range(cap - 1):
            s = _connect(srv)
            held.append(s)
            if i % 2:
                _held_request(s)  # at rest after an answer
        # the server has accepted them all: the silent ones too (a request on the last one proves the order)
        _held_request(held[-1])
        fresh = []
        for round_ in range(cap - 1):  # each new client is served, and then stays (idle) itself
            s = _connect(srv)
            fresh.append(s)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head = _head(s)
            assert head.startswith(b"HTTP/1.1 200"), (round_, head[:200])
        # the idle ones went, the oldest first; the busy one is still there and can finish its request
        assert all(_eof_or_reset(s) for s in held), "an idle connection was not closed"
        held += fresh
        busy.sendall(b"ve HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = lib.read_to_eof(busy)
        assert raw.startswith(b"HTTP/1.1 200"), raw[:200]
        samples = lib.parse_metrics(_metrics(srv))
        assert lib.metric_sum(samples, "inferd_http_refused_total", reason="idle_evicted") >= cap - 1
        assert lib.metric_sum(samples, "inferd_http_refused_total", reason="connection_cap") == 0
        srv.await_stderr(lambda ls: any("the longest idle connections closed for new ones" in l for l in ls))

        # the metrics port: 64 connections at most; 100 silent sockets, then GET /metrics is answered
        for s in held:
            s.close()
        held = [socket.create_connection(("127.0.0.1", srv.metrics_port), timeout=10) for _ in range(100)]
        code, text = lib.http_get("http://127.0.0.1:%d/metrics" % srv.metrics_port)
        assert code == 200 and "inferd_http_connections" in text, (code, text[:200])
    finally:
        busy.close()
        for s in held:
            s.close()
    srv.stop()
    srv.assert_clean_exit()


def test_http_listener_survives_running_out_of_descriptors(repo_dir):
    """A cap set above what the descriptors allow: accept fails with EMFILE, libuv's reserve-descriptor
    trick (src/unix/stream.c, uv__emfile_trick) drops the pending connections (silently: the callback
    sees an error only when the trick itself fails), nothing spins, and the port serves again once
    connections close."""
    srv = lib.ServerProcess(repo_dir, ["--strict-readiness", "false", "--http-max-connections", "1000"])
    srv.args = ["prlimit", "--nofile=128:128"] + srv.args
    srv.start()
    socks = []
    try:
        srv.await_stderr(lambda ls: any("can starve the gRPC port" in l for l in ls))
        for _ in range(200):
            try:
                socks.append(_connect(srv, timeout=5))
            except OSError:
                break
        end = time.monotonic() + DEADLINE_S  # the server holds every descriptor it may
        while len(os.listdir("/proc/%d/fd" % srv.proc.pid)) < 126 and time.monotonic() < end:
            time.sleep(0.05)
        assert len(os.listdir("/proc/%d/fd" % srv.proc.pid)) >= 126
        assert srv.alive()
        for s in socks:
            s.close()
        socks = []
        end = time.monotonic() + DEADLINE_S
        code = None
        while code != 200 and time.monotonic() < end:
            try:
                code = lib.http_get(srv.http_url + "/v2/health/live", timeout=5)[0]
            except OSError:  # dropped while descriptors are still short
                code = None
            if code != 200:
                time.sleep(0.05)
        assert code == 200
    finally:
        for s in socks:
            s.close()
        srv.stop()
    srv.assert_clean_exit()


def test_trickled_headers_end_at_the_header_deadline(start_server):
    srv = start_server(["--http-header-timeout", "2"])
    s = _connect(srv, timeout=30)
    stop = threading.Event()
    request = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 1000

    def trickle():
        for b in request:
            if stop.wait(0.3):
                return
            try:
                s.send(bytes([b]))
            except OSError:
                return

    t0 = time.monotonic()
    th = threading.Thread(target=trickle, daemon=True)
    th.start()
    try:
        got = _head(s, timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        stop.set()
        th.join(5)
        s.close()
    assert got.startswith(b"HTTP/1.1 408"), got
    # every byte came well within the 60 s idle limit: only the header deadline ends it
    assert 1.9 <= elapsed <= 8, elapsed
    srv.await_stderr(lambda ls: any("--http-header-timeout" in l for l in ls))
    assert lib.http_get(srv.http_url + "/v2/health/live")[0] == 200
    srv.stop()
    srv.assert_clean_exit()


def test_body_that_bursts_then_stalls_ends_below_the_minimum_rate(start_server):
    srv = start_server(["--http-body-min-rate", "100000"])
    s = _connect(srv, timeout=60)
    try:
        t0 = time.monotonic()
        # 3 MB at once (three times the first 10 s window's due), then nothing: its average since the
        # headers would stay above 100 kB/s for 30 s; the second window, empty, ends it at ~20 s
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n"
                  + b" " * 3_000_000)
        got = _head(s, timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        s.close()
    assert got.startswith(b"HTTP/1.1 408"), got
    assert 19 <= elapsed <= 27, elapsed  # two 10 s windows, then the next sweep
    samples = lib.parse_metrics(_metrics(srv))
    assert lib.metric_sum(samples, "inferd_http_refused_total", reason="slow_body") == 1
    srv.stop()
    srv.assert_clean_exit()


# --- bodies in flight

def test_body_budget_refuses_bodies_past_it_and_bounds_rss(start_server, specs, rng):
    body_len, n = 8_000_000, 12
    srv = start_server(["--http-max-infer-body-bytes", str(8 * MIB),
                        "--http-max-body-bytes-in-flight", str(16 * MIB)])
    _rest_infer_ok(srv, specs, rng)  # warm: what a first inference allocates is not counted below
    rss0 = _vmrss_kib(srv)
    socks = []
    try:
        admitted, refused = [], 0
        for _ in range(n):
            s = _connect(srv, timeout=30)
            socks.append(s)
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % body_len)
            s.settimeout(0.3)
            try:
                got = s.recv(65536)
            except socket.timeout:
                admitted.append(s)  # reading its body: no answer yet
                continue
            assert got.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in got, got
            refused += 1
        assert len(admitted) == 2 and refused == n - 2, (len(admitted), refused)
        chunk = b"7" * (body_len - 1000)  # all but the last bytes, then the client stalls
        for s in admitted:
            s.settimeout(30)
            s.sendall(chunk)
        # the server has read what was sent (its buffers fill as it reads)
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and _vmrss_kib(srv) - rss0 < 15 * 1024:
            time.sleep(0.05)
        grown = (_vmrss_kib(srv) - rss0) / 1024
        # two bodies reserved (16 MB), the ten others never buffered (80 MB without the budget)
        assert grown < 16 + 16, grown
        srv.await_stderr(lambda ls: any("--http-max-body-bytes-in-flight" in l for l in ls))
        samples = lib.parse_metrics(_metrics(srv))
        assert lib.metric_sum(samples, "inferd_http_refused_total", reason="body_budget") == n - 2
        assert lib.metric_sum(samples, "inferd_http_body_bytes_in_flight") == 2 * body_len
        # a chunked body (no length declared) is reserved as it grows: past what is left, 503 too
        s = _connect(srv, timeout=30)
        socks.append(s)
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + b"%x\r\n" % MIB + b"[" * MIB + b"\r\n")
        head = _head(s)
        assert head.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in head, head
    finally:
        for s in socks:
            s.close()
    # the reservations come back as the connections close: a normal inference goes through
    end = time.monotonic() + DEADLINE_S
    while True:
        try:
            _rest_infer_ok(srv, specs, rng)
            break
        except AssertionError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)
    srv.stop()
    srv.assert_clean_exit()


# --- JSON parse memory

def _vm_kib(srv, key):
    with open("/proc/%d/status" % srv.proc.pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no " + key)


def _post(srv, path, body, headers=()):
    s = _connect(srv, timeout=60)
    try:
        extra = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n"
                  % (path.encode(), len(body), extra) + body)
        raw = lib.read_to_eof(s)
    finally:
        s.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head, payload


def _heavy(unit, size):
    """An inference body whose inputs list is `unit` repeated to about `size` bytes."""
    n = size // (len(unit) + 1)
    return b'{"inputs": [' + b",".join([unit] * n) + b"]}"


def test_json_heavy_bodies_refused_before_parsing_at_the_default_budget(start_server, specs, rng):
    srv = start_server()
    _rest_infer_ok(srv, specs, rng)
    rss0 = _vm_kib(srv, "VmRSS")
    # 60 MB of {} in a 60 KB gzip body, then 60 MB of [] plain: 20 million values each, ~1.6 GB as cJSON trees
    bomb = gzip.compress(_heavy(b"{}", 60 * MIB), 9)
    assert len(bomb) < 200_000
    for body, headers in ((bomb, [("Content-Encoding", "gzip")]), (_heavy(b"[]", 60 * MIB), [])):
        status, _, payload = _post(srv, "/v2/models/mlp/infer", body, headers)
        assert status == 413, payload[:300]
        msg = lib.rest_error(payload)
        assert "--rest-json-max-memory" in msg and "binary data extension" in msg, msg
    # the peak held the 60 MB body (and its inflated copy), never the tree
    peak_growth_mib = (_vm_kib(srv, "VmHWM") - rss0) / 1024
    assert peak_growth_mib < 400, peak_growth_mib
    _rest_infer_ok(srv, specs, rng)
    srv.stop()
    srv.assert_clean_exit()


def test_json_budget_flag_refuses_small_heavy_bodies_and_serves_normal_ones(start_server, specs, rng):
    srv = start_server(["--rest-json-max-memory", str(8 * MIB)])
    for unit in (b"[]", b"{}", b"0"):
        body = _heavy(unit, 1_000_000)  # ~330k to 500k values: 26 to 40 MB as trees
        status, _, payload = _post(srv, "/v2/models/mlp/infer", body)
        assert status == 413, (unit, payload[:300])
        status, _, payload = _post(srv, "/v2/models/mlp/infer", gzip.compress(body), [("Content-Encoding", "gzip")])
        assert status == 413, (unit, payload[:300])
    # every other JSON route is admitted the same way (1 MiB bodies)
    status, _, payload = _post(srv, "/v2/repository/index", _heavy(b"[]", 1_000_000))
    assert status == 413, payload[:300]
    _rest_infer_ok(srv, specs, rng)
    status, _, payload = _post(srv, "/v2/repository/index", b'{"ready": true}')
    assert status == 200, payload
    srv.stop()
    srv.assert_clean_exit()


def test_bad_limit_flags_refused(repo_dir):
    for args, needle in ((["--http-max-connections", "0"], "--http-max-connections"),
                         (["--http-header-timeout", "-1"], "--http-header-timeout"),
                         (["--http-body-min-rate", "x"], "--http-body-min-rate"),
                         (["--rest-json-max-memory", "-5"], "--rest-json-max-memory"),
                         (["--http-max-body-bytes-in-flight", str(MIB)], "at least --http-max-infer-body-bytes")):
        err = lib.start_fails(repo_dir, args)
        assert needle in err, err
