"""The TLS gRPC port behind inferd's own listener and TLS terminator (issue 31, item 2; server/grpc/grpc_tls.h).
A --grpc-use-ssl port used to be gRPC's own listener: no connection cap, and after one EMFILE it never accepted
again. Now inferd accepts, terminates TLS with OpenSSL and relays plaintext to gRPC over a socketpair.

Through the real server, with certificates from the openssl CLI (conftest's certs):
- --grpc-max-connections 3 on the TLS port: three TLS connections with calls fill it; a fourth TCP connection
  is reset at once and a fourth TLS client fails fast with UNAVAILABLE; the three keep working; once two
  close, new TLS clients infer again. One log line for the refusals.
- A client dribbling a ClientHello (a byte every 0.2 s) is closed at --grpc-handshake-timeout (2 s), with the
  terminator's line naming its TCP address, and its slot serves a real client afterwards.
- RLIMIT_NOFILE 128: idle connections until accept4 fails with EMFILE; a TLS connection made before keeps
  working, new connects are refused quickly, and once the idle ones close the port accepts TLS again by itself
  (still live, nothing for an orchestrator to restart).
- Relay correctness: an identity model echoes 8 MB tensors both ways on ModelStreamInfer streams over TLS,
  several streams and many unary calls at once on one connection plus a second connection, every answer
  compared byte for byte with its own request.
- A client offering ALPN without h2 (http/1.1 only) is refused in the handshake; one offering no ALPN is closed
  after it, before HTTP/2 (as gRPC's listener did).
- The rapid-reset guard ends an abusive TLS connection (the core sees the socketpair) and names its TCP client.
- SIGTERM: TLS streams end with the documented UNAVAILABLE "shutting down", every answer counted arrives."""

import concurrent.futures as cf
import os
import shutil
import socket
import ssl
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

import inferd_testlib as lib
import tls_certs
from test_grpc_fds import SHORT_LINE, CAP_LINE, _refused_fast

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl CLI is not installed")

DEADLINE_S = 30
BIG = 8 << 20  # bytes each way per streamed message
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32))  # a ClientHello, cut short


def _tls_args(certs, *extra):
    return tls_certs.server_args(certs, "grpc") + list(extra)


def _creds(certs):
    with open(certs["ca"], "rb") as f:
        return grpc.ssl_channel_credentials(root_certificates=f.read())


def _channel(srv, certs, tag):
    """A TLS channel on a connection of its own (a channel argument gRPC ignores keeps it off the others')."""
    return grpc.secure_channel("localhost:%d" % srv.grpc_port, _creds(certs),
                               options=[("inferd.test.connection", tag),
                                        ("grpc.max_send_message_length", -1),
                                        ("grpc.max_receive_message_length", -1)])


def _live(ch, timeout=5):
    return service_pb2_grpc.GRPCInferenceServiceStub(ch).ServerLive(service_pb2.ServerLiveRequest(),
                                                                    timeout=timeout).live


def _await_tls_serving(srv, certs, spec, oracle, rng):
    """ServerLive and ModelInfer over TLS, each try on a new connection, until both succeed (the acceptor sees
    closed connections go at its own pace); fails after DEADLINE_S."""
    end, k, last = time.monotonic() + DEADLINE_S, 0, None
    feeds = lib.random_inputs(spec, rng, 2)
    while time.monotonic() < end:
        k += 1
        c = grpcclient.InferenceServerClient("localhost:%d" % srv.grpc_port, ssl=True, root_certificates=certs["ca"],
                                             channel_args=[("inferd.test.connection", "t%d" % k)])
        try:
            assert c.is_server_live(client_timeout=5) is True
            _, got = lib.infer(c, "mlp", feeds)
            lib.check_outputs(got, oracle.run("mlp", feeds), spec, what="mlp over TLS after the port recovered")
            return
        except Exception as e:  # refused while the server still counts the connections that left
            if "UNAVAILABLE" not in str(e):
                raise
            last = e
            time.sleep(0.1)
        finally:
            c.close()
    raise AssertionError("the TLS gRPC port never served again: %s" % last)


# --- the cap

def test_tls_connection_cap(start_server, certs, specs, oracle, rng):
    srv = start_server(_tls_args(certs, "--grpc-max-connections", "3"))
    chans = [_channel(srv, certs, "c%d" % i) for i in range(3)]
    try:
        for ch in chans:
            assert _live(ch)
        # full: a fourth TCP connection is reset at once, a fourth TLS client fails fast
        assert _refused_fast(srv.grpc_port)
        t0 = time.monotonic()
        with _channel(srv, certs, "over") as ch:
            with pytest.raises(grpc.RpcError) as ei:
                _live(ch)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
        assert time.monotonic() - t0 < 4.5  # refused, not left to its 5 s deadline
        # the three held keep working
        for ch in chans:
            assert _live(ch)
        lines = srv.await_stderr(lambda ls: any(CAP_LINE in l for l in ls))
        assert sum(CAP_LINE in l for l in lines) == 1, [l for l in lines if CAP_LINE in l]
        for ch in chans[:2]:
            ch.close()
        _await_tls_serving(srv, certs, specs["mlp"], oracle, rng)
        assert _live(chans[2])
    finally:
        for ch in chans:
            ch.close()
    srv.stop()
    srv.assert_clean_exit()


# --- a dribbled ClientHello

def test_dribbled_client_hello_closed_at_handshake_timeout(start_server, certs, specs, oracle, rng):
    srv = start_server(_tls_args(certs, "--grpc-handshake-timeout", "2", "--grpc-max-connections", "1"))
    s = socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10)
    local = s.getsockname()
    t0 = time.monotonic()
    closed_after = None
    try:
        for b in PARTIAL_HELLO:
            try:
                s.sendall(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - t0
                break
            s.settimeout(0.2)
            try:
                if s.recv(4096) == b"":  # closed (an alert may come first)
                    closed_after = time.monotonic() - t0
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed_after = time.monotonic() - t0
                break
        assert closed_after is not None, "a ClientHello dribbled over %.1f s was not closed" % (time.monotonic() - t0)
        assert 1.5 <= closed_after <= 6, closed_after
    finally:
        s.close()
    line = "ipv4:%s:%d" % local
    lines = srv.await_stderr(lambda ls: any("did not finish within 2000 ms" in l and line in l for l in ls))
    assert any("--grpc-handshake-timeout" in l for l in lines)
    # its slot (the only one) serves a real client now
    _await_tls_serving(srv, certs, specs["mlp"], oracle, rng)
    srv.stop()
    srv.assert_clean_exit()


# --- ALPN

def test_client_without_h2_alpn_refused(start_server, certs):
    srv = start_server(_tls_args(certs))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    with socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10) as raw:
        with pytest.raises(ssl.SSLError) as ei:
            ctx.wrap_socket(raw, server_hostname="localhost")
    assert "no application protocol" in str(ei.value), ei.value
    srv.await_stderr(lambda ls: any("TLS handshake with ipv4:127.0.0.1:" in l and "failed" in l for l in ls))
    # no ALPN at all: the handshake completes and the connection is closed before HTTP/2 (gRPC's own listener
    # did the same: its peer check wants h2)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    with socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(9))
            try:
                assert s.recv(9) == b""
            except ConnectionResetError:
                pass
    # h2 is served
    with tls_certs.raw_tls(srv.grpc_port) as s:
        assert s.selected_alpn_protocol() == "h2"
        assert len(s.recv(9)) > 0  # the core's HTTP/2 SETTINGS through the relay
    srv.stop()
    srv.assert_clean_exit()


# --- EMFILE

def test_tls_port_recovers_from_emfile(repo_dir, certs, specs, oracle, rng):
    srv = lib.ServerProcess(repo_dir, _tls_args(certs, "--grpc-max-connections", "100000"))
    srv.args = ["prlimit", "--nofile=128:128"] + srv.args
    srv.start()
    socks = []
    held = _channel(srv, certs, "held")
    try:
        assert _live(held)  # made before the descriptors run out
        for _ in range(300):
            try:
                socks.append(socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5))
            except ConnectionResetError:
                break
            if any(SHORT_LINE in l for l in srv.lines[-5:]):
                break
        srv.await_stderr(lambda ls: any(SHORT_LINE in l for l in ls), timeout=DEADLINE_S)
        assert _refused_fast(srv.grpc_port, within=5.0)
        assert _live(held)  # its relay needs no new descriptor
        for s in socks:
            s.close()
        socks = []
        _await_tls_serving(srv, certs, specs["mlp"], oracle, rng)
        assert lib.http_get(srv.http_url + "/v2/health/live")[0] == 200
        assert _live(held)
        lines = srv.stderr_text().splitlines()
        assert sum(SHORT_LINE in l for l in lines) == 1, [l for l in lines if SHORT_LINE in l]
        assert not any("stopped accepting connections" in l for l in lines)
    finally:
        held.close()
        for s in socks:
            s.close()
        srv.stop()
    assert srv.returncode == 0, srv.stderr_tail()


# --- relay correctness: big messages both ways, many calls at once

@pytest.fixture(scope="module")
def ident_repo(tmp_path_factory):
    """`ident`: Identity over FP32 [-1], no batching: the answer is the request's bytes."""
    import onnx
    from onnx import TensorProto, helper
    d = str(tmp_path_factory.mktemp("identrepo"))
    g = helper.make_graph([helper.make_node("Identity", ["IN"], ["OUT"])], "ident",
                          [helper.make_tensor_value_info("IN", TensorProto.FLOAT, ["N"])],
                          [helper.make_tensor_value_info("OUT", TensorProto.FLOAT, ["N"])])
    os.makedirs(os.path.join(d, "ident", "1"))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "ident", "1", "model.onnx"))
    with open(os.path.join(d, "ident", "config.pbtxt"), "w") as f:
        f.write('name: "ident"\nbackend: "onnxruntime"\nmax_batch_size: 0\n'
                'input [{ name: "IN" data_type: TYPE_FP32 dims: [-1] }]\n'
                'output [{ name: "OUT" data_type: TYPE_FP32 dims: [-1] }]\n')
    return d


def _req(i, nbytes):
    a = np.random.default_rng(7000 + i).random(nbytes // 4, dtype=np.float32)
    q = service_pb2.ModelInferRequest(model_name="ident", id=str(i))
    t = q.inputs.add(name="IN", datatype="FP32")
    t.shape.append(a.size)
    q.raw_input_contents.append(a.tobytes())
    return q


def _check(resp, q):
    assert resp.id == q.id
    assert list(resp.outputs[0].shape) == list(q.inputs[0].shape)
    assert resp.raw_output_contents[0] == q.raw_input_contents[0], "answer %s differs from its request" % q.id


def test_big_streams_and_many_calls_over_tls(repo_dir, ident_repo, certs):
    srv = lib.ServerProcess(ident_repo, _tls_args(certs, "--grpc-max-message-bytes", str(64 << 20)))
    srv.start()
    try:
        one, two = _channel(srv, certs, "one"), _channel(srv, certs, "two")
        stubs = [service_pb2_grpc.GRPCInferenceServiceStub(one), service_pb2_grpc.GRPCInferenceServiceStub(two)]

        def stream(k, n_msgs=2):
            reqs = [_req(100 * k + j, BIG) for j in range(n_msgs)]
            got = list(stubs[k % 2].ModelStreamInfer(iter(reqs), timeout=120))
            assert len(got) == n_msgs
            for r, q in zip(got, reqs):
                assert r.error_message == "", r.error_message
                _check(r.infer_response, q)
            return n_msgs

        def unary(i):
            q = _req(10000 + i, 256 << 10)
            _check(stubs[i % 2].ModelInfer(q, timeout=120), q)
            return 1

        with cf.ThreadPoolExecutor(16) as ex:
            futs = [ex.submit(stream, k) for k in range(4)] + [ex.submit(unary, i) for i in range(48)]
            done = sum(f.result() for f in futs)
        assert done == 4 * 2 + 48
        one.close()
        two.close()
    finally:
        srv.stop()
    srv.assert_clean_exit()


# --- the rapid-reset guard: the core's connection is the terminator's socketpair now

def test_rapid_reset_over_tls_ends_the_connection_naming_the_client(start_server, certs):
    """Streams opened and cancelled at once on one TLS connection: the guard (keyed by the core's descriptor,
    the socketpair's end) ends the connection, and its line names the client's TCP address, which the
    terminator knows, not the socketpair."""
    import re
    import threading
    srv = start_server(_tls_args(certs, "--grpc-rapid-reset-limit", "20"))
    release = threading.Event()

    def never():  # a stream's requests that never come: the call stays open until cancelled
        release.wait(30)
        return
        yield

    ch = _channel(srv, certs, "attacker")
    try:
        assert _live(ch)
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        ended = re.compile(r"ended the connection from (ipv4:127\.0\.0\.1|ipv6:\[::1\]):\d+: its client cancelled \d+ of the "
                           r"\d+ calls")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20 and not any(ended.search(l) for l in srv.lines):
            calls = [stub.ModelStreamInfer(never()) for _ in range(50)]
            for c in calls:
                c.cancel()
        lines = srv.await_stderr(lambda ls: any(ended.search(l) for l in ls))
        assert not any("ended the connection from fd:" in l for l in lines)
        samples = lib.parse_metrics(lib.http_get(srv.http_url + "/metrics")[1])
        assert lib.metric_sum(samples, "inferd_grpc_connections_ended_total", reason="rapid_reset") >= 1
    finally:
        release.set()
        ch.close()
    # the port serves a new connection
    with _channel(srv, certs, "after") as ch2:
        assert _live(ch2)
    srv.stop()
    srv.assert_clean_exit()


# --- the drain over TLS: the core's last frames go out through the relay

def test_sigterm_ends_tls_streams_as_documented(repo_dir, certs):
    """SIGTERM with four TLS streams that keep sending on one connection: each ends with UNAVAILABLE "the server
    is shutting down" after its OK answers (the status and the GOAWAY pass the terminator before it closes),
    and the server's count of answers equals the client's."""
    import signal
    from test_shutdown_streams import Stream, _final_success
    srv = lib.ServerProcess(repo_dir, _tls_args(certs, "--exit-timeout-secs", "30"))
    srv.start()
    rng = np.random.default_rng(3)
    streams = []
    try:
        url = "localhost:%d" % srv.grpc_port
        streams = [Stream(url, k, rng, [("inferd.test.connection", "streams")], ssl=True,
                          root_certificates=certs["ca"]) for k in range(4)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and min(s.ok for s in streams) < 5:
            time.sleep(0.02)
        assert min(s.ok for s in streams) >= 5, "the streams never got going"
        srv.send_signal(signal.SIGTERM)
        rc = srv.wait_exit(60)
        for s in streams:
            assert s.join(30), "a stream never ended after the server exited"
    finally:
        if srv.alive():
            srv.stop()
        for s in streams:
            s.join(30)
    assert rc == 0, srv.stderr_tail()
    srv.assert_clean_exit()
    bad = [(k, s.end, s.errors[:2]) for k, s in enumerate(streams) if not s.clean()]
    assert not bad, bad
    assert sum(s.ok for s in streams) == _final_success(srv, "mlp")
