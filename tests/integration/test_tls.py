"""TLS and mutual TLS on the gRPC port (issue 15), against the real server with certificates made by the
`openssl` CLI in a temporary folder: a CA, a server certificate for localhost and 127.0.0.1 (SAN), a client
certificate, and a second CA with its own client certificate.

TLS: tritonclient with ssl=True infers and the outputs match onnxruntime; health and reflection answer over
TLS; a plaintext client gets no answer. Mutual TLS: a client without a certificate, or with one from the
other CA, is refused; the right one works. Wrong files fail the start with a message naming the file."""

import os
import shutil
import subprocess

import grpc
import pytest
import tritonclient.grpc as grpcclient
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl CLI is not installed")

CALL_TIMEOUT_S = 10


# --- certificates

@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """{name: path}: ca, server, client (signed by ca), other_ca and other_client (signed by other_ca)."""
    return lib.make_tls_certs(str(tmp_path_factory.mktemp("tls")))


def _tls_args(certs, mutual=False):
    a = ["--strict-readiness", "false", "--grpc-use-ssl", "true",
         "--grpc-server-cert", certs["server_crt"], "--grpc-server-key", certs["server_key"]]
    if mutual:
        a += ["--grpc-use-ssl-mutual", "true", "--grpc-root-cert", certs["ca"]]
    return a


@pytest.fixture(scope="module")
def tls_server(repo_dir, certs):
    yield from lib.served(repo_dir, _tls_args(certs))


@pytest.fixture(scope="module")
def mtls_server(repo_dir, certs):
    yield from lib.served(repo_dir, _tls_args(certs, mutual=True))


def _infer_mlp(client, specs, oracle, rng):
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, 2)
    _, got = lib.infer(client, "mlp", feeds)
    lib.check_outputs(got, oracle.run("mlp", feeds), spec, what="mlp over TLS")


def _refused(client):
    with pytest.raises(InferenceServerException) as ei:
        client.is_server_live(client_timeout=CALL_TIMEOUT_S)
    return ei.value


def _secure_channel(certs, server, with_client_cert=False):
    creds = grpc.ssl_channel_credentials(
        root_certificates=open(certs["ca"], "rb").read(),
        private_key=open(certs["client_key"], "rb").read() if with_client_cert else None,
        certificate_chain=open(certs["client_crt"], "rb").read() if with_client_cert else None)
    return grpc.secure_channel(server.grpc_url, creds)


# --- TLS

def test_tls_infer_matches_onnxruntime(tls_server, certs, specs, oracle, rng):
    c = grpcclient.InferenceServerClient(tls_server.grpc_url, ssl=True, root_certificates=certs["ca"])
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
    c = grpcclient.InferenceServerClient(tls_server.grpc_url)
    err = _refused(c)
    assert err.status() == "StatusCode.UNAVAILABLE", err
    c.close()


def test_tls_client_trusting_another_ca_refused(tls_server, certs):
    c = grpcclient.InferenceServerClient(tls_server.grpc_url, ssl=True, root_certificates=certs["other_ca"])
    assert _refused(c).status() == "StatusCode.UNAVAILABLE"
    c.close()


def test_tls_health_and_reflection(tls_server, certs):
    with _secure_channel(certs, tls_server) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT_S)
        assert r.status == health_pb2.HealthCheckResponse.SERVING
        services = ProtoReflectionDescriptorDatabase(ch).get_services()
        assert "inference.GRPCInferenceService" in services
        assert "grpc.health.v1.Health" in services


# --- mutual TLS

def test_mtls_right_client_cert_works(mtls_server, certs, specs, oracle, rng):
    c = grpcclient.InferenceServerClient(mtls_server.grpc_url, ssl=True, root_certificates=certs["ca"],
                                         private_key=certs["client_key"], certificate_chain=certs["client_crt"])
    assert c.is_server_live(client_timeout=CALL_TIMEOUT_S)
    _infer_mlp(c, specs, oracle, rng)
    c.close()
    with _secure_channel(certs, mtls_server, with_client_cert=True) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT_S)
        assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_mtls_client_without_cert_refused(mtls_server, certs):
    c = grpcclient.InferenceServerClient(mtls_server.grpc_url, ssl=True, root_certificates=certs["ca"])
    assert _refused(c).status() == "StatusCode.UNAVAILABLE"
    c.close()
    with _secure_channel(certs, mtls_server) as ch:
        with pytest.raises(grpc.RpcError) as ei:
            health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=CALL_TIMEOUT_S)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE


def test_mtls_client_cert_from_another_ca_refused(mtls_server, certs):
    c = grpcclient.InferenceServerClient(mtls_server.grpc_url, ssl=True, root_certificates=certs["ca"],
                                         private_key=certs["other_client_key"],
                                         certificate_chain=certs["other_client_crt"])
    assert _refused(c).status() == "StatusCode.UNAVAILABLE"
    c.close()


def test_mtls_plaintext_client_refused(mtls_server):
    c = grpcclient.InferenceServerClient(mtls_server.grpc_url)
    assert _refused(c).status() == "StatusCode.UNAVAILABLE"
    c.close()


# --- bad flags and files fail the start, naming the file

def _start_fails(repo_dir, args):
    srv = lib.ServerProcess(repo_dir, args)
    with pytest.raises(RuntimeError):
        srv.start()
    rc = srv.wait_exit()
    assert rc not in (0, "timeout"), rc
    assert not srv.sanitizer_lines(), srv.stderr_tail()
    return srv.stderr_text()


def test_missing_key_file_fails_start_naming_it(repo_dir, certs):
    missing = os.path.join(certs["dir"], "no_such.key")
    args = _tls_args(certs)
    args[args.index(certs["server_key"])] = missing
    text = _start_fails(repo_dir, args)
    assert "--grpc-server-key" in text and missing in text and "No such file" in text, text


def test_key_of_another_certificate_fails_start(repo_dir, certs):
    args = _tls_args(certs)
    args[args.index(certs["server_key"])] = certs["client_key"]
    text = _start_fails(repo_dir, args)
    assert "is not the private key of the certificate" in text and certs["client_key"] in text, text


def test_certificate_file_not_pem_fails_start(repo_dir, certs):
    bad = os.path.join(certs["dir"], "garbage.crt")
    with open(bad, "w") as f:
        f.write("this is not a certificate\n")
    args = _tls_args(certs)
    args[args.index(certs["server_crt"])] = bad
    text = _start_fails(repo_dir, args)
    assert "--grpc-server-cert" in text and bad in text and "no valid PEM certificate" in text, text


def test_missing_root_cert_for_mutual_fails_start(repo_dir, certs):
    args = _tls_args(certs, mutual=True)
    args[args.index(certs["ca"])] = os.path.join(certs["dir"], "no_ca.crt")
    text = _start_fails(repo_dir, args)
    assert "--grpc-root-cert" in text and "no_ca.crt" in text, text


@pytest.mark.parametrize("args,msg", [
    (["--grpc-use-ssl", "true"], "needs --grpc-server-cert FILE and --grpc-server-key FILE"),
    (["--grpc-server-cert", "x.crt"], "need --grpc-use-ssl"),
    (["--grpc-use-ssl-mutual", "--grpc-server-cert", "a", "--grpc-server-key", "b"], "needs --grpc-root-cert"),
    (["--grpc-use-ssl", "maybe"], "expects true or false"),
])
def test_inconsistent_tls_flags_refused(repo_dir, args, msg):
    r = subprocess.run([lib.inferd_bin(), "--model-repository", repo_dir] + args, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and msg in r.stderr, (r.returncode, r.stderr)
