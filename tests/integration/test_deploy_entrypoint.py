"""deploy/entrypoint.sh (the containers' ENTRYPOINT) run outside a container against build/bin/inferd:

- it exec's the server: the process it started as *is* inferd (same PID, /proc/PID/exe is the binary),
  with the flags mapped from INFERD_MODEL_REPOSITORY / INFERD_GRPC_PORT / INFERD_HTTP_PORT /
  INFERD_EXTRA_ARGS plus the container's arguments; it is ready on the configured ports, serves
  ModelInfer, /v2/health/ready answers 200 (also through the Dockerfile's HEALTHCHECK command, run
  as written), and SIGTERM makes it exit 0;
- as PID 1 of a fresh PID namespace (what a container gives it; unshare, skipped where not allowed)
  SIGTERM still reaches it and it exits 0;
- bad settings fail at once with a message naming the variable.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "deploy"))
import deploylib as dl  # noqa: E402

ENTRYPOINT = os.path.join(lib.REPO_ROOT, "deploy", "entrypoint.sh")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return dl.write_identity_repo(str(tmp_path_factory.mktemp("entry_repo")))


def _env(repo, grpc_port, http_port, extra=""):
    env = dict(os.environ, INFERD_BIN=lib.inferd_bin(), INFERD_MODEL_REPOSITORY=repo,
               INFERD_GRPC_PORT=str(grpc_port), INFERD_HTTP_PORT=str(http_port), INFERD_EXTRA_ARGS=extra)
    return env


class Proc:
    """A child whose stderr is drained by a thread; ready() waits for inferd's ready line."""

    def __init__(self, argv, env):
        self.lines = []
        self.ready_evt = threading.Event()
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if lib.READY_RE.search(line):
                self.ready_evt.set()
        self.ready_evt.set()

    def ready(self, timeout=lib.START_TIMEOUT_S):
        self.ready_evt.wait(timeout)
        for l in self.lines:
            m = lib.READY_RE.search(l)
            if m:
                return int(m.group(1)), int(m.group(2))
        raise AssertionError("no ready line (exit %r):\n%s" % (self.proc.poll(), self.tail()))

    def tail(self, n=40):
        return "\n".join(self.lines[-n:])

    def wait(self, timeout=lib.STOP_TIMEOUT_S):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "timeout"
        self.t.join(10)
        return rc


def _healthcheck_command():
    """The CMD of deploy/Dockerfile's HEALTHCHECK (shell form), as the container runs it."""
    text = open(os.path.join(lib.REPO_ROOT, "deploy", "Dockerfile")).read().replace("\\\n", " ")
    m = re.search(r"^HEALTHCHECK\b.*?\bCMD\s+(.*)$", text, re.M)
    assert m, "deploy/Dockerfile has no HEALTHCHECK ... CMD"
    return m.group(1).strip()


def _infer_identity(grpc_port):
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient("127.0.0.1:%d" % grpc_port)
    x = np.arange(2 * dl.IDENTITY_DIMS, dtype=np.float32).reshape(2, dl.IDENTITY_DIMS)
    inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    y = c.infer("identity", [inp]).as_numpy("OUTPUT0")
    c.close()
    np.testing.assert_array_equal(y, x)


def test_entrypoint_execs_inferd_and_drains_on_sigterm(repo):
    gp, hp = dl.free_port(), dl.free_port()
    p = Proc([ENTRYPOINT, "--strict-readiness", "true"],
             _env(repo, gp, hp, extra="--exit-timeout-secs 7  --log-level info"))
    try:
        assert p.ready() == (gp, hp), "ready on other ports than INFERD_GRPC_PORT/INFERD_HTTP_PORT"
        pid = p.proc.pid
        # exec, not fork: the PID we started is the server itself
        assert os.path.realpath(os.readlink("/proc/%d/exe" % pid)) == os.path.realpath(lib.inferd_bin())
        argv = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")[:-1]
        argv = [a.decode() for a in argv]
        assert argv[1:] == ["--model-repository", repo, "--grpc-port", str(gp), "--http-port", str(hp),
                            "--exit-timeout-secs", "7", "--log-level", "info", "--strict-readiness", "true"], argv
        st, _ = lib.http_get("http://127.0.0.1:%d/v2/health/ready" % hp)
        assert st == 200
        st, _ = lib.http_get("http://127.0.0.1:%d/v2/health/live" % hp)
        assert st == 200
        _infer_identity(gp)
        if shutil.which("curl"):
            hc = subprocess.run(["sh", "-c", _healthcheck_command()], env=dict(os.environ, INFERD_HTTP_PORT=str(hp)),
                                capture_output=True, text=True, timeout=30)
            assert hc.returncode == 0, "the Dockerfile's HEALTHCHECK failed on a ready server: %s" % hc.stderr
        os.kill(pid, signal.SIGTERM)
        rc = p.wait()
        assert rc == 0, "exit %r after SIGTERM:\n%s" % (rc, p.tail())
        assert any("SIGTERM: draining" in l for l in p.lines), p.tail()
        # gone: the HEALTHCHECK now fails
        if shutil.which("curl"):
            hc = subprocess.run(["sh", "-c", _healthcheck_command()], env=dict(os.environ, INFERD_HTTP_PORT=str(hp)),
                                capture_output=True, text=True, timeout=30)
            assert hc.returncode != 0
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
            p.wait()


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def test_entrypoint_as_pid1_gets_sigterm(repo):
    """In a new PID namespace the server is PID 1, as in a container; SIGTERM (sent from outside, as the
    container runtime does) must still reach it: the kernel drops signals PID 1 has no handler for."""
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("unshare (util-linux) not installed")
    probe = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "sh", "-c", "echo $$"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        probe = subprocess.run([unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "sh", "-c",
                                "echo $$"], capture_output=True, text=True, timeout=30)
        if probe.returncode != 0 or probe.stdout.strip() != "1":
            pytest.skip("cannot create a PID namespace here: %s" % probe.stderr.strip())
        ns = [unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    else:
        ns = [unshare, "--pid", "--fork", "--mount-proc"]
    gp, hp = dl.free_port(), dl.free_port()
    p = Proc(ns + [ENTRYPOINT], _env(repo, gp, hp, extra="--exit-timeout-secs 5"))
    try:
        assert p.ready() == (gp, hp)
        kids = _children(p.proc.pid)
        assert len(kids) == 1, "unshare's children: %r" % kids
        server = kids[0]
        # the same file, compared by device and inode: the path /proc shows for a process in another
        # mount namespace may be spelt from that namespace's root (seen in a chroot)
        exe, want = os.stat("/proc/%d/exe" % server), os.stat(lib.inferd_bin())
        assert (exe.st_dev, exe.st_ino) == (want.st_dev, want.st_ino), (os.readlink("/proc/%d/exe" % server),
                                                                        lib.inferd_bin())
        status = open("/proc/%d/status" % server).read()
        nspid = re.search(r"^NSpid:\s+(.*)$", status, re.M).group(1).split()
        assert nspid[-1] == "1", "the server is not PID 1 in its namespace: NSpid %s" % nspid
        _infer_identity(gp)
        t0 = time.time()
        os.kill(server, signal.SIGTERM)
        rc = p.wait()
        assert rc == 0, "exit %r (unshare passes the child's status on):\n%s" % (rc, p.tail())
        assert time.time() - t0 < 5, "SIGTERM did not stop PID 1 promptly"
        assert any("SIGTERM: draining" in l for l in p.lines), p.tail()
    finally:
        if p.proc.poll() is None:
            for k in _children(p.proc.pid):
                os.kill(k, signal.SIGKILL)
            p.proc.kill()
            p.wait()


@pytest.mark.parametrize("var,value,message", [
    ("INFERD_MODEL_REPOSITORY", "/nonexistent/models", "is not a directory"),
    ("INFERD_GRPC_PORT", "80x", "INFERD_GRPC_PORT must be a port number"),
    ("INFERD_HTTP_PORT", "http", "INFERD_HTTP_PORT must be a port number"),
    ("INFERD_BIN", "/nonexistent/inferd", "inferd binary not found"),
])
def test_entrypoint_rejects_bad_settings(repo, var, value, message):
    env = _env(repo, dl.free_port(), dl.free_port())
    env[var] = value
    r = subprocess.run([ENTRYPOINT], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr)
