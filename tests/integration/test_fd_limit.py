"""Running out of file descriptors (issue 15). The soft RLIMIT_NOFILE is raised to the hard limit at start.
The gRPC port, plaintext or TLS, is inferd's own listener and survives EMFILE (test_grpc_fds.py,
test_grpc_tls_front.py); a TLS port used to keep gRPC's listener, which stopped accepting for good after one
failed accept4 and made the server report itself not live."""

import pytest

import inferd_testlib as lib


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


@pytest.fixture(autouse=True)
def _need_prlimit():
    import shutil
    if not shutil.which("prlimit"):
        pytest.fail("prlimit (util-linux) is needed")
