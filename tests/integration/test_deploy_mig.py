"""deploy/mig/inferd-mig.sh: one inferd per MIG slice (or whole GPU), from `nvidia-smi -L`.

With --dry-run against the listings in tests/deploy/smi/ (H100 without MIG, two H100s, 7 x 1g.10gb,
3g.40gb + 2 x 2g.20gb, H200 7 x 1g.18gb, a MIG GPU next to a whole one, R450-style MIG UUIDs, no GPU,
empty output): the exact commands (CUDA_VISIBLE_DEVICES = the MIG or GPU UUID, ports BASE+2k) and
the exact upstream file, which deploy/lb/render.sh turns into a config nginx -t accepts. Without a
device it fails with a clear message. Without --dry-run (on this GPU-less machine the servers fall
back to the CPU) it really starts one server per listed device with its CUDA_VISIBLE_DEVICES,
nginx balances over them, and SIGTERM to the script drains every server: all exit 0.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "deploy"))
import deploylib as dl  # noqa: E402

SCRIPT = os.path.join(lib.REPO_ROOT, "deploy", "mig", "inferd-mig.sh")
BIN = "/opt/inferd/bin/inferd"
REPO = "/models"

H100 = "NVIDIA H100 80GB HBM3"
# fixture -> [(uuid, slice description)], written out by hand (not parsed by the test) as the oracle
EXPECTED = {
    "h100-no-mig.txt": [
        ("GPU-6513270e-269e-4d37-b2a7-4de452e6b438", "GPU 0 (%s), whole GPU" % H100)],
    "2x-h100-no-mig.txt": [
        ("GPU-d23f0824-128b-4f33-8c5c-7fd0a6a3a450", "GPU 0 (%s), whole GPU" % H100),
        ("GPU-9531985d-5d9d-49f8-9818-e811892f902b", "GPU 1 (%s), whole GPU" % H100)],
    "h100-mig-7x1g.10gb.txt": [(u, "GPU 0 (%s), MIG 1g.10gb device %d" % (H100, i)) for i, u in enumerate([
        "MIG-6b0d549b-6f03-475a-9600-a35a099950d8", "MIG-8d116ece-1738-47d9-bd9c-172411e20b8f",
        "MIG-90c192cf-d3ac-44af-8f21-ddb66cad4a26", "MIG-a170b338-3926-4059-b28c-105d1fb17c23",
        "MIG-0fd630f1-f29d-4da9-953f-48f1a09f76b5", "MIG-0cb1e29c-658c-4a14-95e6-0af593bd04cf",
        "MIG-8e81973e-0bec-47b0-b898-d190f9ebdacc"])],
    "h100-mig-3g.40gb-2x2g.20gb.txt": [
        ("MIG-92276658-1e27-41c0-8a6a-63ec24ede6a4", "GPU 0 (%s), MIG 3g.40gb device 0" % H100),
        ("MIG-ae97ba94-d0ed-482f-8f6d-05584ef8aa38", "GPU 0 (%s), MIG 2g.20gb device 1" % H100),
        ("MIG-923a7369-94e3-4f91-9a61-dbe22e44158b", "GPU 0 (%s), MIG 2g.20gb device 2" % H100)],
    "h200-mig-7x1g.18gb.txt": [(u, "GPU 0 (NVIDIA H200), MIG 1g.18gb device %d" % i) for i, u in enumerate([
        "MIG-907a70c3-1012-4037-b64c-e4228c38fb29", "MIG-7f150524-34b9-45df-9e77-69b10f4205b4",
        "MIG-c6f87718-6d76-407e-881e-d162ae2eb154", "MIG-ec66a787-95e7-41d1-b731-af10506bf2ef",
        "MIG-3f98e277-4cbd-47ad-9c90-a9587403e430", "MIG-c7a2ea20-b2f1-4c94-ae05-319acb5c7427",
        "MIG-4cdd2055-930d-4eaf-94f4-733f3e7d1bfb"])],
    "2x-h100-mig-on-gpu0-only.txt": [
        ("MIG-5e2a9c14-8b7d-4f31-a6e0-3c9d2b1f7a48", "GPU 0 (%s), MIG 4g.40gb device 0" % H100),
        ("MIG-b73f0d62-1c9e-4a85-8e27-6f4a0c3d2e19", "GPU 0 (%s), MIG 3g.40gb device 1" % H100),
        ("GPU-f48a2b90-6e1c-4d37-b5f2-8c0e7d9a3b61", "GPU 1 (%s), whole GPU" % H100)],
    "a100-mig-legacy-uuid.txt": [
        ("MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0", "GPU 0 (A100-SXM4-40GB), MIG 3g.20gb device 0"),
        ("MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/2/0", "GPU 0 (A100-SXM4-40GB), MIG 3g.20gb device 1")],
}


def run_script(*args, timeout=60):
    return subprocess.run(["bash", SCRIPT] + list(args), capture_output=True, text=True, timeout=timeout)


def expected_upstreams(slices, base_grpc=8001, base_http=8000, host="127.0.0.1"):
    lines = ["# inferd-mig.sh: %d server(s); GRPC_HOST:PORT HTTP_HOST:PORT (deploy/lb/render.sh --upstreams)"
             % len(slices)]
    for k, (uuid, desc) in enumerate(slices):
        lines.append("# %d: %s %s" % (k, desc, uuid))
        lines.append("%s:%d %s:%d" % (host, base_grpc + 2 * k, host, base_http + 2 * k))
    return "\n".join(lines) + "\n"


def test_smi_fixtures_all_covered():
    files = sorted(f for f in os.listdir(dl.SMI_DIR) if f.endswith(".txt"))
    assert sorted(list(EXPECTED) + ["empty.txt", "no-gpu.txt"]) == files


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_dry_run_commands_and_upstreams(fixture, tmp_path):
    up = tmp_path / "upstreams.txt"
    r = run_script("--dry-run", "--smi-output", os.path.join(dl.SMI_DIR, fixture), "--repo", REPO, "--bin", BIN,
                   "--upstreams-out", str(up))
    assert r.returncode == 0, r.stderr
    slices = EXPECTED[fixture]
    want = ["CUDA_VISIBLE_DEVICES=%s %s --model-repository %s --grpc-port %d --http-port %d"
            % (uuid, BIN, REPO, 8001 + 2 * k, 8000 + 2 * k) for k, (uuid, _) in enumerate(slices)]
    assert r.stdout.splitlines() == want
    assert up.read_text() == expected_upstreams(slices)


def test_dry_run_base_ports_host_and_extra_args(tmp_path):
    up = tmp_path / "up.txt"
    r = run_script("--dry-run", "--smi-output", os.path.join(dl.SMI_DIR, "h100-mig-3g.40gb-2x2g.20gb.txt"),
                   "--repo", "/srv/my models", "--bin", BIN, "--base-grpc-port", "9001", "--base-http-port", "9100",
                   "--host", "10.1.2.3", "--upstreams-out", str(up), "--", "--exit-timeout-secs", "45")
    assert r.returncode == 0, r.stderr
    slices = EXPECTED["h100-mig-3g.40gb-2x2g.20gb.txt"]
    # printed shell-quoted, so the lines can be pasted into a shell
    want = ["CUDA_VISIBLE_DEVICES=%s %s --model-repository /srv/my\\ models --grpc-port %d --http-port %d "
            "--exit-timeout-secs 45" % (uuid, BIN, 9001 + 2 * k, 9100 + 2 * k) for k, (uuid, _) in enumerate(slices)]
    assert r.stdout.splitlines() == want
    assert up.read_text() == expected_upstreams(slices, 9001, 9100, "10.1.2.3")


def test_dry_run_port_clash_is_refused():
    r = run_script("--dry-run", "--smi-output", os.path.join(dl.SMI_DIR, "h100-mig-7x1g.10gb.txt"), "--repo", REPO,
                   "--base-grpc-port", "9000", "--base-http-port", "9004")
    assert r.returncode == 2 and "would be used twice" in r.stderr, r.stderr
    r = run_script("--dry-run", "--smi-output", os.path.join(dl.SMI_DIR, "h100-mig-7x1g.10gb.txt"), "--repo", REPO,
                   "--base-grpc-port", "65531")
    assert r.returncode == 2 and "above 65535" in r.stderr, r.stderr


@pytest.mark.parametrize("fixture,first", [("no-gpu.txt", "No devices found."), ("empty.txt", "<empty>")])
def test_no_device_fails_clearly(fixture, first, tmp_path):
    up = tmp_path / "up.txt"
    r = run_script("--dry-run", "--smi-output", os.path.join(dl.SMI_DIR, fixture), "--repo", REPO,
                   "--upstreams-out", str(up))
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "no GPU or MIG device found in 'nvidia-smi -L' output" in r.stderr and first in r.stderr, r.stderr
    assert r.stdout == "" and not up.exists()


def test_usage_errors():
    r = run_script("--dry-run", "--smi-output", os.path.join(dl.SMI_DIR, "h100-no-mig.txt"))
    assert r.returncode == 2 and "--repo DIR is required" in r.stderr
    r = run_script("--repo", REPO, "--smi-output", "/nonexistent/smi.txt")
    assert r.returncode == 2 and "cannot read --smi-output" in r.stderr
    r = run_script("--repo", REPO, "--frobnicate")
    assert r.returncode == 2 and "unknown argument" in r.stderr


def test_script_never_changes_the_mig_layout(tmp_path):
    """Its only nvidia-smi call is the read-only `nvidia-smi -L`: a fake nvidia-smi on PATH records every call
    (the admin's -mig / mig -cgi commands are in the header comment only)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "calls.txt"
    (fake / "nvidia-smi").write_text('#!/bin/sh\necho "$*" >> %s\ncat %s\n' % (
        calls, os.path.join(dl.SMI_DIR, "h100-mig-7x1g.10gb.txt")))
    os.chmod(fake / "nvidia-smi", 0o755)
    env = dict(os.environ, PATH="%s:%s" % (fake, os.environ["PATH"]))
    r = subprocess.run(["bash", SCRIPT, "--dry-run", "--repo", REPO, "--bin", BIN], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert calls.read_text() == "-L\n"
    assert [l.split()[0] for l in r.stdout.splitlines()] == [
        "CUDA_VISIBLE_DEVICES=" + u for u, _ in EXPECTED["h100-mig-7x1g.10gb.txt"]]
    text = open(SCRIPT).read()
    code = "\n".join(l.split("#", 1)[0] for l in text.splitlines())
    assert re.findall(r"(?:^|\$\(|;|&&|\|\|)\s*nvidia-smi\b([^)\n]*)", code, re.M) == [" -L 2>&1"]
    for admin in ("nvidia-smi -i 0 -mig 1", "nvidia-smi mig -i 0 -cgi", " -C"):
        assert admin in text


@pytest.mark.skipif(dl.nginx_bin() is None, reason="nginx not installed (deploy/install-deps.sh installs it)")
def test_upstreams_file_renders_a_valid_nginx_config(tmp_path):
    up = tmp_path / "up.txt"
    r = run_script("--dry-run", "--smi-output", os.path.join(dl.SMI_DIR, "h200-mig-7x1g.18gb.txt"), "--repo", REPO,
                   "--upstreams-out", str(up))
    assert r.returncode == 0, r.stderr
    conf = tmp_path / "nginx.conf"
    r = subprocess.run(["sh", dl.LB_RENDER, "--upstreams", str(up), "--run-dir", str(tmp_path), "--out", str(conf)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    text = conf.read_text()
    for k in range(7):
        assert "server 127.0.0.1:%d max_fails=1 fail_timeout=10s;" % (8001 + 2 * k) in text
        assert "server 127.0.0.1:%d max_fails=1 fail_timeout=10s;" % (8000 + 2 * k) in text
    rc, out = dl.nginx_test_config(str(conf), str(tmp_path))
    assert rc == 0, out


def _free_base_pair(n):
    """(base_grpc, base_http) with base_grpc odd, base_http even and all 2n ports free on loopback."""
    for _ in range(200):
        base = 20000 + 2 * (int.from_bytes(os.urandom(2), "little") % 15000)
        gp, hp = base + 1, base + 2 * n + 10
        ports = [gp + 2 * k for k in range(n)] + [hp + 2 * k for k in range(n)]
        socks = []
        try:
            for p in ports:
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return gp, hp
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def _wait_ready(log_dir, n, proc, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        logs = [os.path.join(log_dir, "inferd-%d.log" % k) for k in range(n)]
        if all(os.path.exists(l) and "inferd ready:" in open(l).read() for l in logs):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def _environ(pid):
    return dict(kv.split("=", 1) for kv in open("/proc/%d/environ" % pid).read().split("\0") if "=" in kv)


def _server_pids(script_pid, binary):
    """The script's children that are inferd (it also runs short-lived helpers)."""
    kids = [int(x) for x in open("/proc/%d/task/%d/children" % (script_pid, script_pid)).read().split()]
    out = []
    for c in kids:
        try:
            if os.path.realpath(os.readlink("/proc/%d/exe" % c)) == os.path.realpath(binary):
                out.append(c)
        except OSError:
            pass
    return out


def test_real_run_one_server_per_device_then_sigterm(tmp_path):
    """Not a dry run: two servers from the two-H100 listing (no GPU here, so each logs that and serves on the
    CPU), each with its own CUDA_VISIBLE_DEVICES; through nginx when installed; SIGTERM to the script
    drains both (exit 0 each, and 0 for the script)."""
    binary = lib.inferd_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail("inferd binary missing: %s" % binary)
    repo = dl.write_identity_repo(str(tmp_path / "repo"))
    slices = EXPECTED["2x-h100-no-mig.txt"]
    gp, hp = _free_base_pair(len(slices))
    up, logs = tmp_path / "up.txt", tmp_path / "logs"
    proc = subprocess.Popen(["bash", SCRIPT, "--smi-output", os.path.join(dl.SMI_DIR, "2x-h100-no-mig.txt"),
                             "--repo", repo, "--bin", binary, "--base-grpc-port", str(gp), "--base-http-port", str(hp),
                             "--upstreams-out", str(up), "--log-dir", str(logs), "--", "--exit-timeout-secs", "5"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    nginx = None
    try:
        assert _wait_ready(str(logs), len(slices), proc), "servers not ready; script exit %r" % proc.poll()
        for k, (uuid, _) in enumerate(slices):
            st, _ = lib.http_get("http://127.0.0.1:%d/v2/health/ready" % (hp + 2 * k))
            assert st == 200
            log = open(os.path.join(str(logs), "inferd-%d.log" % k)).read()
            assert "inferd ready: grpc=%d http=%d" % (gp + 2 * k, hp + 2 * k) in log, log
        # each server got its own device pinned
        envs = sorted(_environ(c).get("CUDA_VISIBLE_DEVICES", "<unset>") for c in _server_pids(proc.pid, binary))
        assert envs == sorted(u for u, _ in slices), envs
        assert up.read_text() == expected_upstreams(slices, gp, hp)
        if dl.nginx_bin():
            prefix = tmp_path / "nginx"
            prefix.mkdir()
            lg = dl.free_port()
            conf = str(prefix / "nginx.conf")
            r = subprocess.run(["sh", dl.LB_RENDER, "--upstreams", str(up), "--listen-addr", "127.0.0.1",
                                "--listen-grpc", str(lg), "--listen-http", str(dl.free_port()),
                                "--run-dir", str(prefix), "--out", conf], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            nginx = dl.NginxProcess(conf, str(prefix)).start(lg)
            import numpy as np
            import tritonclient.grpc as grpcclient
            c = grpcclient.InferenceServerClient("127.0.0.1:%d" % lg)
            for i in range(20):
                x = np.full((1, dl.IDENTITY_DIMS), i, np.float32)
                inp = grpcclient.InferInput("INPUT0", [1, dl.IDENTITY_DIMS], "FP32")
                inp.set_data_from_numpy(x)
                np.testing.assert_array_equal(c.infer("identity", [inp]).as_numpy("OUTPUT0"), x)
            c.close()
            counts = []
            for k in range(len(slices)):
                st, body = lib.http_get("http://127.0.0.1:%d/metrics" % (hp + 2 * k))
                counts.append(lib.metric_sum(lib.parse_metrics(body), "nv_inference_request_success", model="identity"))
            assert counts == [10, 10], "round robin over the two servers: %s" % counts
            assert nginx.stop() == 0
            nginx = None
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        for k in range(len(slices)):
            assert "[%d] exited with 0" % k in out, out
            assert "stopped" in open(os.path.join(str(logs), "inferd-%d.log" % k)).read()
    finally:
        if nginx:
            nginx.stop()
        if proc.poll() is None:
            for c in _server_pids(proc.pid, binary):
                os.kill(c, signal.SIGKILL)
            proc.kill()
            proc.communicate()
