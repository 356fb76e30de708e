"""clients/example_client.py runs against the shared server: exit 0, the lines it promises,
and the argmax onnxruntime gives for the same input."""

import os
import re
import subprocess
import sys

import numpy as np

import inferd_testlib as lib

SCRIPT = os.path.join(lib.REPO_ROOT, "clients", "example_client.py")


def test_example_client(server, oracle):
    seed = 5
    r = subprocess.run([sys.executable, SCRIPT, "--url", server.grpc_url, "--seed", str(seed)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr)
    out = r.stdout.splitlines()
    for line in ("server live: True", "server ready: True", "model mlp ready: True",
                 "input INPUT0 FP32 [-1, 1024]", "output OUTPUT0 FP32 [-1, 10]"):
        assert line in out, "missing %r in:\n%s" % (line, r.stdout)

    x = np.random.default_rng(seed).standard_normal((1, 1024)).astype(np.float32)
    want = int(np.argmax(oracle.run("mlp", {"INPUT0": x})["OUTPUT0"][0]))
    assert "OUTPUT0 shape [1, 10], argmax %d" % want in out, r.stdout

    m = re.search(r"^statistics for mlp: (\d+) inferences in (\d+) executions$", r.stdout, re.M)
    assert m and int(m.group(1)) >= 1 and 1 <= int(m.group(2)) <= int(m.group(1)), r.stdout
    assert re.search(r"^  success \d+ \(avg [\d.]+ us\), queue avg [\d.]+ us, compute input/infer/output avg "
                     r"[\d.]+/[\d.]+/[\d.]+ us$", r.stdout, re.M), r.stdout
