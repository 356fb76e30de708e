"""The suite's own process harness can fail: a fake server that prints the ready line and then a
sanitizer report, exits non-zero, dies on SIGTERM or never gets ready must each be caught."""

import os
import stat

import pytest

import inferd_testlib as lib

FAKE = """#!/bin/sh
trap '%s' TERM
echo "some log line" >&2
echo "inferd ready: grpc=12345 http=23456" >&2
while :; do sleep 0.05; done
"""


def _fake(tmp_path, on_term):
    p = tmp_path / "fake_inferd"
    p.write_text(FAKE % on_term)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def test_ready_line_parsed_and_clean_exit(tmp_path):
    srv = lib.ServerProcess(str(tmp_path), binary=_fake(tmp_path, "exit 0")).start()
    assert (srv.grpc_port, srv.http_port) == (12345, 23456)
    assert srv.stop() == 0
    srv.assert_clean_exit()
    assert "some log line" in srv.stderr_text()


@pytest.mark.parametrize("on_term", [
    'echo "==1==ERROR: AddressSanitizer: heap-use-after-free" >&2; exit 0',
    'echo "x.c:3:5: runtime error: signed integer overflow" >&2; exit 0',
    "exit 3",
])
def test_bad_exit_is_reported(tmp_path, on_term):
    srv = lib.ServerProcess(str(tmp_path), binary=_fake(tmp_path, on_term)).start()
    srv.stop()
    with pytest.raises(AssertionError):
        srv.assert_clean_exit()


def test_never_ready_is_reported(tmp_path, monkeypatch):
    p = tmp_path / "dies"
    p.write_text("#!/bin/sh\necho 'cannot load' >&2\nexit 1\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(RuntimeError, match="cannot load"):
        lib.ServerProcess(str(tmp_path), binary=str(p)).start()


def test_missing_binary_is_reported(tmp_path):
    with pytest.raises(RuntimeError, match="INFERD_BIN"):
        lib.ServerProcess(str(tmp_path), binary=os.path.join(str(tmp_path), "nope")).start()
