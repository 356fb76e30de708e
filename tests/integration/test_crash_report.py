"""A fatal signal's last words (server/obs/crash.c): the server that dies of SIGSEGV, SIGABRT or SIGBUS
says so on stderr with the signal, the thread and a backtrace of binary(+offset) frames, then dies of that
same signal (not exit 0, not a hang), so an orchestrator and a core see what they saw before. SIGBUS also
passes through the shared-memory guard (server/sec/shmguard.c), which hands faults not its own to this
reporter. Sanitizer builds keep their own handlers (a better report), so these tests skip there."""

import signal

import pytest

import inferd_testlib as lib

pytestmark = pytest.mark.skipif(lib.address_sanitized() or lib.thread_sanitized(),
                                reason="sanitizer builds keep the sanitizer's own fatal-signal report")


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS])
def test_fatal_signal_reports_and_dies_of_it(start_server, sig):
    srv = start_server()
    rc = srv.stop(sig)
    assert rc == -sig, "exit %r, stderr tail:\n%s" % (rc, srv.stderr_tail())
    lines = srv.stderr_text().splitlines()
    head = [l for l in lines if l.startswith("inferd: fatal %s (%d, code " % (sig.name, sig))]
    assert len(head) == 1, srv.stderr_tail()
    assert "in thread '" in head[0] and "backtrace:" in head[0]
    frames = lines[lines.index(head[0]) + 1:]
    frames = frames[:next((i for i, l in enumerate(frames) if l.startswith("inferd: frames as")), len(frames))]
    # the handler's own frame, the signal trampoline, the interrupted code: at least three
    assert len(frames) >= 3 and all("(" in f and "[0x" in f for f in frames), "\n".join(frames)
    assert any(l.startswith("inferd: frames as binary(+offset)") for l in lines)
