"""Triton's perf_analyzer (the tool users already have) against inferd over gRPC: it learns the model
from ModelMetadata/ModelConfig, drives ModelInfer, and reads ModelStatistics for its server-side
breakdown. Installed by deploy/install-perf-analyzer.sh (tritonclient 2.50.0's binary); the test
skips, saying so, where it is not installed."""

import csv
import os
import re
import shutil
import subprocess

import pytest

import inferd_testlib as lib


def _perf_analyzer():
    p = os.environ.get("PERF_ANALYZER") or os.path.join(lib.REPO_ROOT, ".venv", "bin", "perf_analyzer")
    if os.access(p, os.X_OK):
        return p
    return shutil.which("perf_analyzer")


def test_perf_analyzer_drives_inferd(server, client, tmp_path):
    pa = _perf_analyzer()
    if not pa:
        pytest.skip("perf_analyzer not installed (bash deploy/install-perf-analyzer.sh; CI installs it)")
    before = client.get_inference_statistics("mlp", "1").model_stats[0]
    out_csv = tmp_path / "pa.csv"
    cmd = [pa, "-m", "mlp", "-x", "1", "-u", "127.0.0.1:%d" % server.grpc_port, "-i", "grpc",
           "--concurrency-range", "2:2", "--measurement-interval", "1000", "--stability-percentage", "1000",
           "--max-trials", "20", "-f", str(out_csv)]  # lenient: CI machines are small and shared
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, "perf_analyzer exit %d:\n%s" % (p.returncode, out[-4000:])
    # client side: requests counted, throughput positive
    m = re.search(r"Request count: (\d+)", out)
    assert m and int(m.group(1)) > 0, out[-4000:]
    requests = int(m.group(1))
    # server side: perf_analyzer's own reading of ModelStatistics
    assert "Server:" in out and re.search(r"Inference count: \d+", out), out[-4000:]
    sc = int(re.search(r"Successful request count: (\d+)", out).group(1))
    # perf_analyzer diffs ModelStatistics snapshots taken at the window's edges while it counts the
    # requests that completed inside the window on its side: up to `concurrency` requests in flight at
    # each edge land in one count and not the other (Triton shows the same skew)
    assert abs(sc - requests) <= 2, "server-side successes %d, client requests %d" % (sc, requests)
    rows = list(csv.DictReader(open(out_csv)))
    assert len(rows) == 1 and rows[0]["Concurrency"] == "2", rows
    assert float(rows[0]["Inferences/Second"]) > 0, rows
    after = client.get_inference_statistics("mlp", "1").model_stats[0]
    # every measured request (and the warm-up ones) reached the server and succeeded
    assert after.inference_stats.success.count - before.inference_stats.success.count >= requests
    assert after.inference_stats.fail.count == before.inference_stats.fail.count
    print("perf_analyzer: %d requests, %s infer/s at concurrency 2" % (requests, rows[0]["Inferences/Second"]))


def test_perf_analyzer_system_shared_memory(start_server, tmp_path):
    """perf_analyzer --shared-memory system: it registers its own regions, sends every tensor through them,
    and inferd answers each request without the bytes in the messages."""
    pa = _perf_analyzer()
    if not pa:
        pytest.skip("perf_analyzer not installed (bash deploy/install-perf-analyzer.sh; CI installs it)")
    srv = start_server(["--allow-client-shm", "true"])
    import tritonclient.grpc as grpcclient
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        before = c.get_inference_statistics("mlp", "1").model_stats[0].inference_stats.success.count
        cmd = [pa, "-m", "mlp", "-u", srv.grpc_url, "-i", "grpc", "--shared-memory", "system",
               "--output-shared-memory-size", "4096", "--concurrency-range", "2:2", "--measurement-interval", "1000",
               "--stability-percentage", "1000", "--max-trials", "20"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        assert p.returncode == 0, "perf_analyzer exit %d:\n%s" % (p.returncode, out[-4000:])
        m = re.search(r"Request count: (\d+)", out)
        assert m and int(m.group(1)) > 0, out[-4000:]
        st = c.get_inference_statistics("mlp", "1").model_stats[0].inference_stats
        assert st.success.count - before >= int(m.group(1))
        assert st.fail.count == 0
        # it did register regions (the server logs each), and unregistered them when done
        assert re.search(r"shared memory region '[^']+' registered", srv.stderr_text()), srv.stderr_tail()
        assert c.get_system_shared_memory_status(as_json=True).get("regions", {}) == {}
    srv.stop()
    srv.assert_clean_exit()


def test_perf_analyzer_streaming(server, client):
    """perf_analyzer --streaming: every request on ModelStreamInfer streams, answered one by one."""
    pa = _perf_analyzer()
    if not pa:
        pytest.skip("perf_analyzer not installed (bash deploy/install-perf-analyzer.sh; CI installs it)")
    before = client.get_inference_statistics("mlp", "1").model_stats[0].inference_stats
    cmd = [pa, "-m", "mlp", "-u", "127.0.0.1:%d" % server.grpc_port, "-i", "grpc", "--streaming",
           "--concurrency-range", "4:4", "--measurement-interval", "1000", "--stability-percentage", "1000",
           "--max-trials", "20"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, "perf_analyzer exit %d:\n%s" % (p.returncode, out[-4000:])
    m = re.search(r"Request count: (\d+)", out)
    assert m and int(m.group(1)) > 0, out[-4000:]
    after = client.get_inference_statistics("mlp", "1").model_stats[0].inference_stats
    assert after.success.count - before.success.count >= int(m.group(1))
    assert after.fail.count == before.fail.count
