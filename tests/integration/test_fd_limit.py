"""Running out of file descriptors (issue 15). The soft RLIMIT_NOFILE is raised to the hard limit at start.
The plaintext gRPC port is inferd's own listener and survives EMFILE (test_grpc_fds.py). A TLS port keeps
gRPC's listener, and this gRPC core (Debian 12's 1.51) stops accepting on it for good after one failed
accept4 (EMFILE) while HTTP recovers: the server then reports itself not live (/v2/health/live 503,
ServerLive false on connections it still holds, health NOT_SERVING) and says why in its log, so an
orchestrator's liveness probe restarts it instead of leaving a deaf process that looks healthy."""

import socket
import time

import grpc
import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib
import tls_certs

DEADLINE_S = 30


def limited_server(repo_dir, soft, hard, extra=()):
    srv = lib.ServerProcess(repo_dir, ["--strict-readiness", "false"] + list(extra))
    srv.args = ["prlimit", "--nofile=%d:%d" % (soft, hard)] + srv.args
    return srv


def test_soft_limit_raised_to_hard(repo_dir):
    srv = limited_server(repo_dir, 256, 4096).start()
    try:
        srv.await_stderr(lambda ls: any("open files limit raised from 256 to 4096" in l for l in ls))
    finally:
        srv.stop()
    srv.assert_clean_exit()


def test_exhausted_descriptors_make_a_tls_server_not_live(repo_dir, certs):
    srv = limited_server(repo_dir, 96, 96, tls_certs.server_args(certs, "grpc", False)).start()
    socks = []
    try:
        # connected before the descriptors run out
        c = grpcclient.InferenceServerClient(url=srv.grpc_url, ssl=True, root_certificates=certs["ca"])
        assert c.is_server_live()
        assert lib.http_get(srv.http_url + "/v2/health/live")[0] == 200
        # idle TCP connections until accept4 fails (96 descriptors, a fraction already in use)
        for _ in range(200):
            try:
                socks.append(socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5))
            except OSError:
                break
        lines = srv.await_stderr(lambda ls: any("stopped accepting connections" in l for l in ls), timeout=DEADLINE_S)
        assert any("Too many open files" in l for l in lines)
        for s in socks:
            s.close()
        socks = []
        # descriptors come free as the server sees the clients go (later under a sanitizer): until then
        # libuv may accept and drop an HTTP connection (its EMFILE recovery); then HTTP answers, and says
        # the process must go
        end = time.monotonic() + DEADLINE_S
        code = None
        while code != 503 and time.monotonic() < end:
            try:
                code, _ = lib.http_get(srv.http_url + "/v2/health/live")
            except OSError:  # dropped while descriptors are still short
                code = None
            if code != 503:
                time.sleep(0.05)
        assert code == 503
        assert lib.http_get(srv.http_url + "/v2/health/ready")[0] == 503
        assert c.is_server_live() is False  # the connection made before still works and tells the truth
        assert c.is_server_ready() is False
        c.close()
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
