"""Descriptors and the plaintext gRPC port (issue 31, item 2). inferd listens on the port itself
(server/grpc/grpc_accept.h) and hands each connection to gRPC, because Debian 12's gRPC 1.51 caps no
connections and its listener stops for good at the first EMFILE: 19,990 idle HTTP connections and one gRPC
connect used to leave the port deaf and the server not live (a remote denial of service).

At small scale, through the real server:
- --grpc-max-connections 4: four idle connections fill the port; more are reset at once (a gRPC call on a new
  connection fails fast with UNAVAILABLE, not at its deadline); one log line says so, not one per connection;
  once the idle ones close, ServerLive and ModelInfer succeed on new connections.
- a connection that never sends the HTTP/2 preface holds its slot 10 s at most, then is reset (one line).
- RLIMIT_NOFILE 128: idle connections until accept4 fails with EMFILE; connects made then are refused
  quickly; the server logs it once, stays live, and once the idle ones close the port accepts again by
  itself (ServerLive and ModelInfer on new connections)."""

import socket
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

DEADLINE_S = 30
CAP_LINE = "the --grpc-max-connections cap: refusing new ones"
SHORT_LINE = "accepting a connection failed: Too many open files"


def _refused_fast(port, within=5.0):
    """A new TCP connection is ended by the server (reset or EOF) within `within` seconds, unread."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=within)
    except (ConnectionResetError, ConnectionRefusedError):
        return time.monotonic() - t0 < within  # reset before the connect returned
    try:
        s.settimeout(within)
        try:
            data = s.recv(1)
        except ConnectionResetError:
            data = b""
        except socket.timeout:
            return False
        return data == b"" and time.monotonic() - t0 < within
    finally:
        s.close()


def _fresh_channel_call(srv, tag):
    """ServerLive on a connection of its own (a channel argument gRPC ignores keeps it off the others')."""
    ch = grpc.insecure_channel(srv.grpc_url, options=[("inferd.test.connection", tag)])
    try:
        from tritonclient.grpc import service_pb2, service_pb2_grpc
        return service_pb2_grpc.GRPCInferenceServiceStub(ch).ServerLive(service_pb2.ServerLiveRequest(),
                                                                        timeout=5).live
    finally:
        ch.close()


def _await_serving(srv, spec, oracle, rng):
    """Retries ServerLive, then ModelInfer, each on a new connection, until both succeed: the server sees the
    idle clients (and the previous try's connection) go at its own pace. Fails after DEADLINE_S."""
    end = time.monotonic() + DEADLINE_S
    k, last = 0, None
    feeds = lib.random_inputs(spec, rng, 2)
    while time.monotonic() < end:
        k += 1
        c = grpcclient.InferenceServerClient(url=srv.grpc_url, channel_args=[("inferd.test.connection", "t%d" % k)])
        try:
            assert c.is_server_live() is True
            _, got = lib.infer(c, "mlp", feeds)
            lib.check_outputs(got, oracle.run("mlp", feeds), spec, what="mlp after the port recovered")
            return
        except Exception as e:  # refused while the server still counts the connections that left
            if "UNAVAILABLE" not in str(e):
                raise
            last = e
            time.sleep(0.1)
        finally:
            c.close()
    raise AssertionError("the gRPC port never served again: %s" % last)


def test_connection_cap(start_server, specs, oracle, rng):
    srv = start_server(["--grpc-max-connections", "4"])
    idle = []
    try:
        for _ in range(4):
            idle.append(socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5))
        # the four are the server's once it has accepted them; the fifth and later are reset at once
        assert _refused_fast(srv.grpc_port)
        for _ in range(5):
            assert _refused_fast(srv.grpc_port)
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as ei:
            _fresh_channel_call(srv, "over")
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
        assert time.monotonic() - t0 < 4.5  # refused, not left to its 5 s deadline
        lines = srv.await_stderr(lambda ls: any(CAP_LINE in l for l in ls))
        assert sum(CAP_LINE in l for l in lines) == 1, [l for l in lines if CAP_LINE in l]
        for s in idle:
            s.close()
        idle = []
        _await_serving(srv, specs["mlp"], oracle, rng)
        assert sum(CAP_LINE in l for l in srv.stderr_text().splitlines()) == 1
    finally:
        for s in idle:
            s.close()
        srv.stop()
    srv.assert_clean_exit()


def test_silent_connection_is_closed(start_server, specs, oracle, rng):
    srv = start_server(["--grpc-max-connections", "1"])
    silent = socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5)
    try:
        t0 = time.monotonic()
        # it holds the only slot while it waits: another connection is refused
        assert _refused_fast(srv.grpc_port)
        silent.settimeout(30)
        try:
            assert silent.recv(1) == b""
        except ConnectionResetError:
            pass
        waited = time.monotonic() - t0
        assert 8 < waited < 25, waited
        srv.await_stderr(lambda ls: any("whose client sent nothing within 10000 ms" in l for l in ls))
        _await_serving(srv, specs["mlp"], oracle, rng)
    finally:
        silent.close()
        srv.stop()
    srv.assert_clean_exit()


def test_port_recovers_from_emfile(repo_dir, specs, oracle, rng):
    srv = lib.ServerProcess(repo_dir, ["--strict-readiness", "false", "--grpc-max-connections", "100000"])
    srv.args = ["prlimit", "--nofile=128:128"] + srv.args
    srv.start()
    socks = []
    try:
        assert lib.http_get(srv.http_url + "/v2/health/live")[0] == 200
        # idle connections until the server's descriptors run out (128, some already in use)
        for _ in range(300):
            try:
                socks.append(socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5))
            except ConnectionResetError:  # refused already: the descriptors ran out
                break
            if any(SHORT_LINE in l for l in srv.lines[-5:]):
                break
        srv.await_stderr(lambda ls: any(SHORT_LINE in l for l in ls), timeout=DEADLINE_S)
        # out of descriptors: a new connect is refused within the back-off, not left hanging
        assert _refused_fast(srv.grpc_port, within=5.0)
        with pytest.raises(grpc.RpcError) as ei:
            _fresh_channel_call(srv, "short")
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
        for s in socks:
            s.close()
        socks = []
        _await_serving(srv, specs["mlp"], oracle, rng)
        # still live: nothing for an orchestrator to restart
        assert lib.http_get(srv.http_url + "/v2/health/live")[0] == 200
        lines = srv.stderr_text().splitlines()
        assert sum(SHORT_LINE in l for l in lines) == 1, [l for l in lines if SHORT_LINE in l]
        assert not any("stopped accepting connections" in l for l in lines)
    finally:
        for s in socks:
            s.close()
        srv.stop()
    assert srv.returncode == 0, srv.stderr_tail()


@pytest.fixture(autouse=True)
def _need_prlimit():
    import shutil
    if not shutil.which("prlimit"):
        pytest.fail("prlimit (util-linux) is needed")


@pytest.mark.parametrize("flag,value", [("--grpc-max-connections", "0"), ("--grpc-max-connections", "x"),
                                        ("--grpc-stream-max-queued", "0"),
                                        ("--grpc-stream-max-queued-bytes", "100")])
def test_bad_limits_refused(repo_dir, flag, value):
    text = lib.start_fails(repo_dir, [flag, value])
    assert "%s expects an integer" % flag in text, text
