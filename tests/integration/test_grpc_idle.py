"""Idle and half-handshaken gRPC connections are closed (probe F5): 400 connections that sent only the
HTTP/2 preface stayed open for a minute and more, and so did 400 TLS connections stuck after a truncated
ClientHello on a --grpc-use-ssl port (gRPC's own listener, whose handshake deadline was gRPC's 120 s).

Now GRPC_ARG_MAX_CONNECTION_IDLE_MS (--grpc-max-connection-idle, 300 s by default) sends GOAWAY to a
connection with no call for that long and closes it, and GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS
(--grpc-handshake-timeout, 10 s by default) closes a connection whose handshake has not ended. Through the
real server with small values: both kinds are closed near their limit and not before; a real client whose
idle connection was closed makes its next call transparently; a connection with a call in flight is not
idle."""

import socket
import struct
import time

import grpc
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

import inferd_testlib as lib

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"  # a ClientHello cut short
N_CONNS = 20


def _read_until_closed(sock, timeout):
    """(seconds until the server closed the connection, bytes it sent); None for seconds if still open."""
    t0 = time.monotonic()
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                return time.monotonic() - t0, data
            data += d
    except socket.timeout:
        return None, data
    except ConnectionResetError:
        return time.monotonic() - t0, data


def _frame_types(data):
    """HTTP/2 frame types in the server's bytes (its side has no preface)."""
    types, pos = [], 0
    while pos + 9 <= len(data):
        length = struct.unpack(">I", b"\0" + data[pos:pos + 3])[0]
        types.append(data[pos + 3])
        pos += 9 + length
    return types


def _open(port, first_bytes, n=N_CONNS):
    socks = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(first_bytes)
        socks.append(c)
    return socks


def test_idle_preface_only_connections_get_goaway_and_close(start_server):
    srv = start_server(["--grpc-max-connection-idle", "2", "--grpc-handshake-timeout", "60"])
    t0 = time.monotonic()
    socks = _open(srv.grpc_port, PREFACE)
    try:
        for c in socks:
            closed, data = _read_until_closed(c, 30)
            assert closed is not None, "an idle connection was still open after 30 s"
            waited = time.monotonic() - t0
            assert 1.5 <= waited <= 20, waited  # near the idle limit, not at once
            assert 7 in _frame_types(data), ("no GOAWAY before the close", data)
    finally:
        for c in socks:
            c.close()
    # a real client on a connection the server closed for idleness calls again transparently
    ch = grpc.insecure_channel(srv.grpc_url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    assert stub.ServerLive(service_pb2.ServerLiveRequest(), timeout=10).live
    time.sleep(3.5)  # past the idle limit: the server has ended this connection meanwhile
    assert stub.ServerLive(service_pb2.ServerLiveRequest(), timeout=10).live
    ch.close()
    srv.stop()
    srv.assert_clean_exit()


def test_idle_never_with_zero(start_server):
    """0 turns the idle limit off: a preface-only connection is still open 3 s on (the plaintext port's
    own 10 s limit is on connections that send nothing at all)."""
    srv = start_server(["--grpc-max-connection-idle", "0"])
    socks = _open(srv.grpc_port, PREFACE, n=2)
    try:
        closed, _ = _read_until_closed(socks[0], 3)
        assert closed is None
    finally:
        for c in socks:
            c.close()
    srv.stop()
    srv.assert_clean_exit()


def test_stalled_tls_handshake_closed_by_deadline(start_server, certs):
    srv = start_server(["--grpc-use-ssl", "true", "--grpc-server-cert", certs["server_crt"],
                        "--grpc-server-key", certs["server_key"],
                        "--grpc-handshake-timeout", "2", "--grpc-max-connection-idle", "0"])
    t0 = time.monotonic()
    socks = _open(srv.grpc_port, PARTIAL_HELLO)
    try:
        for c in socks:
            closed, _ = _read_until_closed(c, 30)
            assert closed is not None, "a stalled TLS handshake was still open after 30 s"
            waited = time.monotonic() - t0
            assert 1.5 <= waited <= 20, waited
    finally:
        for c in socks:
            c.close()
    # the port still serves a real TLS client
    with open(certs["ca"], "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    ch = grpc.secure_channel("localhost:%d" % srv.grpc_port, creds)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    assert stub.ServerLive(service_pb2.ServerLiveRequest(), timeout=10).live
    ch.close()
    srv.stop()
    srv.assert_clean_exit()


@pytest.mark.parametrize("flag,bad", [("--grpc-max-connection-idle", "-1"), ("--grpc-max-connection-idle", "x"),
                                      ("--grpc-handshake-timeout", "0"), ("--grpc-handshake-timeout", "99999")])
def test_bad_values_refused(repo_dir, flag, bad):
    err = lib.start_fails(repo_dir, ["--strict-readiness", "false", flag, bad])
    assert flag in err, err
