"""Fixtures for inferd's integration suite: a generated model repository, one shared server
process for the session, clients on it, the onnxruntime oracle, and a factory for tests that
need their own server (drain, message limits).

Run: /tmp/venv/bin/python -m pytest tests/integration -q     (INFERD_BIN overrides the binary;
INFERD_TEST_SEED fixes the random inputs; INFERD_START_TIMEOUT / INFERD_STOP_TIMEOUT in seconds).
"""

import os

import grpc
import numpy as np
import pytest

import inferd_testlib as lib
import tls_certs


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory):
    """(repository dir, {model: spec}) generated fresh for this run."""
    d = str(tmp_path_factory.mktemp("model_repo"))
    specs = lib.gen_models.generate(d, "test")
    return d, specs


@pytest.fixture(scope="session")
def repo_dir(model_repo):
    return model_repo[0]


@pytest.fixture(scope="session")
def specs(model_repo):
    return model_repo[1]


@pytest.fixture(scope="session")
def oracle(model_repo):
    return lib.Oracle(*model_repo)


# The test repository holds models that must fail to load; with Triton's default strict readiness the
# server would then never be ready, so the shared server relaxes it (test_lifecycle checks the default).
SHARED_SERVER_ARGS = ["--strict-readiness", "false"]


@pytest.fixture(scope="session")
def server(repo_dir):
    """The shared server. Teardown: SIGTERM, exit code 0, no sanitizer report."""
    yield from lib.served(repo_dir, SHARED_SERVER_ARGS)


@pytest.fixture(autouse=True)
def _server_still_up(request):
    """Names the test during which the shared server died, instead of letting later tests fail vaguely."""
    yield
    if "server" in request.fixturenames:
        srv = request.getfixturevalue("server")
        assert srv.alive(), "inferd exited (code %r) during this test; stderr tail:\n%s" % (
            srv.proc.poll(), srv.stderr_tail())


@pytest.fixture(scope="session")
def client(server):
    yield from lib.grpc_client(server)


@pytest.fixture(scope="session")
def channel(server):
    ch = grpc.insecure_channel(server.grpc_url, options=[("grpc.max_send_message_length", -1),
                                                         ("grpc.max_receive_message_length", -1)])
    grpc.channel_ready_future(ch).result(timeout=30)
    yield ch
    ch.close()


@pytest.fixture(scope="session")
def pb():
    """Triton's own generated protos, bundled with tritonclient (the wire-compatibility reference)."""
    from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc

    class PB:
        service = service_pb2
        grpc = service_pb2_grpc
        config = model_config_pb2
    return PB


@pytest.fixture(scope="session")
def stub(channel, pb):
    return pb.grpc.GRPCInferenceServiceStub(channel)


@pytest.fixture
def rng(request):
    """Fresh random inputs every run; the seed is printed so a failure can be replayed (INFERD_TEST_SEED)."""
    seed = lib.seed_from_env()
    print("random seed for %s: %d (INFERD_TEST_SEED=%d to replay)" % (request.node.name, seed, seed))
    return np.random.default_rng(seed)


@pytest.fixture
def start_server(repo_dir):
    """Factory for a private server: start_server(extra_args=[...], repo=None, strict=False) -> ServerProcess.

    strict=False adds SHARED_SERVER_ARGS (readiness not tied to the failing test models).

    Teardown stops any that are still running; the test itself asserts how they exited.
    """
    started = []

    def _start(extra_args=(), repo=None, strict=False):
        args = list(extra_args) if strict else SHARED_SERVER_ARGS + list(extra_args)
        srv = lib.ServerProcess(repo or repo_dir, args)
        started.append(srv)
        try:
            return srv.start()
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)

    yield _start
    for srv in started:
        if srv.alive():
            srv.stop()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """The TLS tests' certificate set (tls_certs.make_certs), made afresh for each module that asks (it may
    add files of its own to certs["dir"])."""
    return tls_certs.make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture()
def live(tmp_path, certs):
    """Live certificate files a reload test's server starts on and the test replaces (tls_certs.install)."""
    return tls_certs.live_files(str(tmp_path), certs)


def pytest_report_header(config):
    b = lib.inferd_bin()
    return "inferd binary: %s (%s)" % (b, "present" if os.access(b, os.X_OK) else "MISSING")
