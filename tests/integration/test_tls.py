"""TLS and mutual TLS on the gRPC port (issue 15), against the real server with certificates made by the
`openssl` CLI in a temporary folder: a CA, a server certificate for localhost and 127.0.0.1 (SAN), a client
certificate, and a second CA with its own client certificate.

TLS: tritonclient with ssl=True infers and the outputs match onnxruntime; health and reflection answer over
TLS; a plaintext client gets no answer. Mutual TLS: a client without a certificate, or with one from the
other CA, or an expired one, is refused; the right one works. Optional client certificates: a client
without one is served, one from the other CA is refused. Wrong files (on the gRPC and the HTTP port), and
an expired server certificate, fail the start with a message naming the flag and the file.

Reload: the server starts with certificate A; after the files are replaced with B and SIGHUP, a new
connection is handed B and infers, while a stream opened before the reload still answers on its old
connection; a bad replacement (garbage, a key of another certificate) keeps B in service and logs why,
naming the file; a replacement with C without a signal is picked up from the files' change."""

import os
import queue
import shutil
import signal
import ssl
import subprocess
import time

import grpc
import pytest
import tritonclient.grpc as grpcclient
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib
import tls_certs

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl CLI is not installed")

CALL_TIMEOUT_S = 10


# --- servers (the certificates: conftest's certs fixture)

def _tls_args(certs, mutual=False):
    return tls_certs.server_args(certs, "grpc", mutual)


@pytest.fixture(scope="module")
def tls_server(repo_dir, certs):
    yield from lib.served(repo_dir, _tls_args(certs))


@pytest.fixture(scope="module")
def mtls_server(repo_dir, certs):
    yield from lib.served(repo_dir, _tls_args(certs, mutual=True))


@pytest.fixture(scope="module")
def optional_server(repo_dir, certs):
    yield from lib.served(repo_dir, _tls_args(certs) + ["--grpc-ssl-client-cert", "optional",
                                                       "--grpc-root-cert", certs["ca"]])


def _infer_mlp(client, specs, oracle, rng):
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, 2)
    _, got = lib.infer(client, "mlp", feeds)
    lib.check_outputs(got, oracle.run("mlp", feeds), spec, what="mlp over TLS")


def _tls_client(server, certs, client=None, ca="ca"):
    """tritonclient over TLS trusting certs[ca]; client names the certificate to present, if any."""
    return grpcclient.InferenceServerClient(server.grpc_url, ssl=True, root_certificates=certs[ca],
                                            private_key=certs[client + "_key"] if client else None,
                                            certificate_chain=certs[client + "_crt"] if client else None)


def _refused(client):
    with pytest.raises(InferenceServerException) as ei:
        client.is_server_live(client_timeout=CALL_TIMEOUT_S)
    return ei.value


def _assert_refused(client):
    """The server refuses client's connection (UNAVAILABLE); closes the client."""
    err = _refused(client)
    assert err.status() == "StatusCode.UNAVAILABLE", err
    client.close()


def _secure_channel(certs, server, with_client_cert=False):
    creds = grpc.ssl_channel_credentials(
        root_certificates=open(certs["ca"], "rb").read(),
        private_key=open(certs["client_key"], "rb").read() if with_client_cert else None,
        certificate_chain=open(certs["client_crt"], "rb").read() if with_client_cert else None)
    return grpc.secure_channel(server.grpc_url, creds)


# --- TLS

def test_tls_infer_matches_onnxruntime(tls_server, certs, specs, oracle, rng):
    c = _tls_client(tls_server, certs)
    assert c.is_server_live(client_timeout=CALL_TIMEOUT_S)
    assert c.is_model_ready("mlp", client_timeout=CALL_TIMEOUT_S)
    _infer_mlp(c, specs, oracle, rng)
    c.close()


def test_tls_localhost_name_verifies(tls_server, certs):
    # the SAN holds DNS:localhost as well as IP:127.0.0.1
    c = grpcclient.InferenceServerClient("localhost:%d" % tls_server.grpc_port, ssl=True,
                                         root_certificates=certs["ca"])
    assert c.is_server_live(client_timeout=CALL_TIMEOUT_S)
    c.close()


def test_tls_plaintext_client_refused(tls_server):
    _assert_refused(grpcclient.InferenceServerClient(tls_server.grpc_url))


def test_tls_client_trusting_another_ca_refused(tls_server, certs):
    _assert_refused(_tls_client(tls_server, certs, ca="other_ca"))


def test_tls_health_and_reflection(tls_server, certs):
    with _secure_channel(certs, tls_server) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT_S)
        assert r.status == health_pb2.HealthCheckResponse.SERVING
        services = ProtoReflectionDescriptorDatabase(ch).get_services()
        assert "inference.GRPCInferenceService" in services
        assert "grpc.health.v1.Health" in services


# --- mutual TLS

def test_mtls_right_client_cert_works(mtls_server, certs, specs, oracle, rng):
    c = _tls_client(mtls_server, certs, client="client")
    assert c.is_server_live(client_timeout=CALL_TIMEOUT_S)
    _infer_mlp(c, specs, oracle, rng)
    c.close()
    with _secure_channel(certs, mtls_server, with_client_cert=True) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT_S)
        assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_mtls_client_without_cert_refused(mtls_server, certs):
    _assert_refused(_tls_client(mtls_server, certs))
    with _secure_channel(certs, mtls_server) as ch:
        with pytest.raises(grpc.RpcError) as ei:
            health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT_S)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE


def test_mtls_client_cert_from_another_ca_refused(mtls_server, certs):
    _assert_refused(_tls_client(mtls_server, certs, client="other_client"))


def test_mtls_plaintext_client_refused(mtls_server):
    _assert_refused(grpcclient.InferenceServerClient(mtls_server.grpc_url))


def test_mtls_expired_client_cert_refused(mtls_server, certs):
    _assert_refused(_tls_client(mtls_server, certs, client="expired_client"))
    # the TLS layer refuses it: the connection is closed before HTTP/2 starts (not a later RPC check),
    # where the right certificate gets the server's HTTP/2 SETTINGS
    assert not _server_speaks_h2(mtls_server.grpc_port, (certs["expired_client_crt"], certs["expired_client_key"]))
    assert _server_speaks_h2(mtls_server.grpc_port, (certs["client_crt"], certs["client_key"]))


# --- optional client certificates (--grpc-ssl-client-cert optional)

def test_optional_client_without_cert_served(optional_server, certs, specs, oracle, rng):
    c = _tls_client(optional_server, certs)
    assert c.is_server_live(client_timeout=CALL_TIMEOUT_S)
    _infer_mlp(c, specs, oracle, rng)
    c.close()


def test_optional_client_with_right_cert_served(optional_server, certs, specs, oracle, rng):
    c = _tls_client(optional_server, certs, client="client")
    assert c.is_server_live(client_timeout=CALL_TIMEOUT_S)
    _infer_mlp(c, specs, oracle, rng)
    c.close()


@pytest.mark.parametrize("who", ["other_client", "expired_client"])
def test_optional_client_with_bad_cert_refused(optional_server, certs, who):
    _assert_refused(_tls_client(optional_server, certs, client=who))


# --- certificates reloaded while serving

_raw_tls = tls_certs.raw_tls
_peer_cert_der = tls_certs.peer_cert_der


def _server_speaks_h2(port, client):
    """Whether the server, after the handshake, sends its HTTP/2 SETTINGS (True) or closes the connection
    (False). Under TLS 1.3 the server judges the client certificate after the client's side of the
    handshake completed, so a refusal shows only when reading."""
    try:
        with _raw_tls(port, client) as s:
            return len(s.recv(9)) > 0  # an HTTP/2 frame header
    except (ssl.SSLError, ConnectionResetError):
        return False


_der = tls_certs.der


_install = tls_certs.install


@pytest.fixture()
def reload_server(repo_dir, certs, live):
    yield from lib.served(repo_dir, tls_certs.server_args(certs, "grpc", crt=live["crt"], key=live["key"]))


def _reloads(srv, n, what="TLS certificates reloaded"):
    return lambda lines: sum(what in l for l in lines) >= n


def _stream_infer(c, q, specs, oracle, rng, rid):
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, 1)
    c.async_stream_infer("mlp", lib.triton_inputs(feeds), request_id=rid)
    result, error = q.get(timeout=CALL_TIMEOUT_S)
    assert error is None, error
    assert result.get_response().id == rid
    got = {o.name: result.as_numpy(o.name) for o in result.get_response().outputs}
    lib.check_outputs(got, oracle.run("mlp", feeds), spec, what="mlp on a stream across a reload")


def test_reload_on_sighup_keeps_open_connections(reload_server, certs, live, specs, oracle, rng):
    srv = reload_server
    assert _peer_cert_der(srv.grpc_port) == _der(certs["server_crt"])
    # a stream opened before the reload: it lives and dies with its connection
    old = _tls_client(srv, certs)
    q = queue.Queue()
    old.start_stream(callback=lambda result, error: q.put((result, error)))
    _stream_infer(old, q, specs, oracle, rng, "before")

    _install(certs["server_b_crt"], certs["server_b_key"], live)
    srv.send_signal(signal.SIGHUP)
    lines = srv.await_stderr(_reloads(srv, 1))
    assert any("(SIGHUP)" in l and "subject /CN=localhost, serial " in l for l in lines), lines[-5:]
    assert _peer_cert_der(srv.grpc_port) == _der(certs["server_b_crt"])
    new = _tls_client(srv, certs)
    assert new.is_server_live(client_timeout=CALL_TIMEOUT_S)
    _infer_mlp(new, specs, oracle, rng)
    new.close()
    # the old stream still answers: its connection (made with A) was not dropped
    _stream_infer(old, q, specs, oracle, rng, "after")
    old.stop_stream()
    old.close()
    assert srv.alive()


@pytest.mark.parametrize("bad", tls_certs.BAD_RELOADS)
def test_bad_reload_keeps_certificates_in_service(reload_server, certs, live, specs, oracle, rng, bad):
    srv = reload_server
    _install(certs["server_b_crt"], certs["server_b_key"], live)
    srv.send_signal(signal.SIGHUP)
    srv.await_stderr(_reloads(srv, 1))
    want, f = tls_certs.install_bad(certs, live, bad)
    named = live[f]
    srv.send_signal(signal.SIGHUP)
    lines = srv.await_stderr(_reloads(srv, 1, "TLS certificates not reloaded"))
    why = [l for l in lines if "TLS certificates not reloaded" in l][0]
    assert want in why and named in why and "previous ones stay in service" in why, why
    assert _peer_cert_der(srv.grpc_port) == _der(certs["server_b_crt"])
    c = _tls_client(srv, certs)
    _infer_mlp(c, specs, oracle, rng)
    c.close()
    # a good set afterwards is taken again
    _install(certs["server_c_crt"], certs["server_c_key"], live)
    srv.send_signal(signal.SIGHUP)
    srv.await_stderr(_reloads(srv, 2))
    assert _peer_cert_der(srv.grpc_port) == _der(certs["server_c_crt"])


def test_reload_when_files_change_without_signal(reload_server, certs, live, specs, oracle, rng):
    srv = reload_server
    assert _peer_cert_der(srv.grpc_port) == _der(certs["server_crt"])
    _install(certs["server_c_crt"], certs["server_c_key"], live)
    # the change is looked for at most once a second, at a handshake: new connections until C comes
    want, deadline, got = _der(certs["server_c_crt"]), time.monotonic() + 10, None
    while got != want and time.monotonic() < deadline:
        got = _peer_cert_der(srv.grpc_port)
    assert got == want
    lines = srv.stderr_text()
    assert "TLS certificates reloaded (the files changed)" in lines, srv.stderr_tail()
    c = _tls_client(srv, certs)
    _infer_mlp(c, specs, oracle, rng)
    c.close()


def test_sighup_without_tls_is_harmless(repo_dir):
    srv = lib.ServerProcess(repo_dir, ["--strict-readiness", "false"]).start()
    try:
        srv.send_signal(signal.SIGHUP)
        srv.await_stderr(lambda lines: any("SIGHUP: no TLS certificates to reload" in l for l in lines))
        c = grpcclient.InferenceServerClient(srv.grpc_url)
        assert c.is_server_live(client_timeout=CALL_TIMEOUT_S)
        c.close()
    finally:
        srv.stop()
    srv.assert_clean_exit()


# --- bad flags and files fail the start, naming the file (on either port: the HTTP port's files go through
# the same server/sec/tls.c checks, and its messages name the --http-* flag)

PORTS = ["grpc", "http"]


@pytest.mark.parametrize("port", PORTS)
def test_missing_key_file_fails_start_naming_it(repo_dir, certs, port):
    missing = os.path.join(certs["dir"], "no_such_%s.key" % port)
    args = tls_certs.server_args(certs, port)
    args[args.index(certs["server_key"])] = missing
    text = lib.start_fails(repo_dir, args)
    assert "--%s-server-key" % port in text and missing in text and "No such file" in text, text
    other = "--http-" if port == "grpc" else "--grpc-"
    assert other not in text, text


@pytest.mark.parametrize("port", PORTS)
def test_key_of_another_certificate_fails_start(repo_dir, certs, port):
    args = tls_certs.server_args(certs, port)
    args[args.index(certs["server_key"])] = certs["client_key"]
    text = lib.start_fails(repo_dir, args)
    assert "--%s-server-key" % port in text and "is not the private key of the certificate" in text, text
    assert certs["client_key"] in text, text


@pytest.mark.parametrize("port", PORTS)
def test_certificate_file_not_pem_fails_start(repo_dir, certs, port):
    bad = os.path.join(certs["dir"], "garbage_%s.crt" % port)
    with open(bad, "w") as f:
        f.write("this is not a certificate\n")
    args = tls_certs.server_args(certs, port)
    args[args.index(certs["server_crt"])] = bad
    text = lib.start_fails(repo_dir, args)
    assert "--%s-server-cert" % port in text and bad in text and "no valid PEM certificate" in text, text


@pytest.mark.parametrize("port", PORTS)
def test_missing_root_cert_for_mutual_fails_start(repo_dir, certs, port):
    args = tls_certs.server_args(certs, port, mutual=True)
    args[args.index(certs["ca"])] = os.path.join(certs["dir"], "no_%s_ca.crt" % port)
    text = lib.start_fails(repo_dir, args)
    assert "--%s-root-cert" % port in text and "no_%s_ca.crt" % port in text, text


def test_expired_server_cert_fails_start(repo_dir, certs):
    args = _tls_args(certs)
    args[args.index(certs["server_crt"])] = certs["expired_server_crt"]
    args[args.index(certs["server_key"])] = certs["expired_server_key"]
    text = lib.start_fails(repo_dir, args)
    assert ("--grpc-server-cert: '%s' expired (notAfter Jan  2 00:00:00 2020 GMT)" % certs["expired_server_crt"]
            in text), text


@pytest.mark.parametrize("args,msg", [
    (["--grpc-use-ssl", "true"], "needs --grpc-server-cert FILE and --grpc-server-key FILE"),
    (["--grpc-server-cert", "x.crt"], "need --grpc-use-ssl"),
    (["--grpc-use-ssl-mutual", "--grpc-server-cert", "a", "--grpc-server-key", "b"], "needs --grpc-root-cert"),
    (["--grpc-use-ssl", "maybe"], "expects true or false"),
    (["--grpc-ssl-client-cert", "sometimes"], "expects none, optional or required"),
    (["--grpc-ssl-client-cert", "optional", "--grpc-server-cert", "a", "--grpc-server-key", "b"],
     "--grpc-ssl-client-cert optional needs --grpc-root-cert"),
    (["--grpc-use-ssl-mutual", "--grpc-ssl-client-cert", "optional"], "means --grpc-ssl-client-cert required"),
])
def test_inconsistent_tls_flags_refused(repo_dir, args, msg):
    r = subprocess.run([lib.inferd_bin(), "--model-repository", repo_dir] + args, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and msg in r.stderr, (r.returncode, r.stderr)
