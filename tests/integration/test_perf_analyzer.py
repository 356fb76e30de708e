"""Triton's perf_analyzer (the tool users already have) against inferd over gRPC: it learns the model
from ModelMetadata/ModelConfig, drives ModelInfer, and reads ModelStatistics for its server-side
breakdown. Installed by deploy/install-perf-analyzer.sh (tritonclient 2.50.0's binary); the test
skips, saying so, where it is not installed."""

import csv
import os
import re
import shutil
import subprocess
import time

import pytest

import inferd_testlib as lib


def _perf_analyzer():
    p = os.environ.get("PERF_ANALYZER") or os.path.join(lib.REPO_ROOT, ".venv", "bin", "perf_analyzer")
    if os.access(p, os.X_OK):
        return p
    return shutil.which("perf_analyzer")


@pytest.fixture
def pa():
    path = _perf_analyzer()
    if not path:
        pytest.skip("perf_analyzer not installed (bash deploy/install-perf-analyzer.sh; CI installs it)")
    return path


def _run(pa, url, concurrency, *extra, protocol="grpc"):
    """One perf_analyzer level on mlp in time windows; returns (its output, the request count it measured).
    (--request-count runs go through _run_request_count.)"""
    cmd = [pa, "-m", "mlp", "-u", url, "-i", protocol, "--concurrency-range", "%d:%d" % (concurrency, concurrency),
           "--measurement-interval", "1000", "--stability-percentage", "1000",  # lenient: CI machines are small
           "--max-trials", "20"]
    cmd += list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, "perf_analyzer exit %d:\n%s" % (p.returncode, out[-4000:])
    m = re.search(r"Request count: (\d+)", out)
    assert m and int(m.group(1)) > 0, out[-4000:]
    return out, int(m.group(1))


def _stats(client):
    return client.get_inference_statistics("mlp", "1").model_stats[0].inference_stats


def test_perf_analyzer_drives_inferd(pa, server, client, tmp_path):
    before = _stats(client)
    out_csv = tmp_path / "pa.csv"
    out, requests = _run(pa, "127.0.0.1:%d" % server.grpc_port, 2, "-x", "1", "-f", str(out_csv))
    # server side: perf_analyzer's own reading of ModelStatistics
    assert "Server:" in out and re.search(r"Inference count: \d+", out), out[-4000:]
    sc = int(re.search(r"Successful request count: (\d+)", out).group(1))
    # perf_analyzer diffs ModelStatistics snapshots taken at the window's edges while it counts the
    # requests that completed inside the window on its side: the requests in flight at each edge, and
    # those the two streams complete while each snapshot RPC is on its way (on a busy machine several
    # ms, at thousands of requests/s), land in one count and not the other (Triton shows the same
    # skew). What the server guarantees is checked below: every measured request reached it and succeeded.
    assert abs(sc - requests) <= max(2, requests // 20), "server-side successes %d, client requests %d" % (sc, requests)
    rows = list(csv.DictReader(open(out_csv)))
    assert len(rows) == 1 and rows[0]["Concurrency"] == "2", rows
    assert float(rows[0]["Inferences/Second"]) > 0, rows
    after = _stats(client)
    # every measured request (and the warm-up ones) reached the server and succeeded
    assert after.success.count - before.success.count >= requests
    assert after.fail.count == before.fail.count
    print("perf_analyzer: %d requests, %s infer/s at concurrency 2" % (requests, rows[0]["Inferences/Second"]))


# perf_analyzer's --request-count race (issue 14; tests/bench/RESULTS.md, "perf_analyzer --request-count stalls"):
# it starts its workers, which send at once, and only then throws away the request records collected so far
# (InferenceProfiler::ProfileHelper's SwapRequestRecords); its Measure then waits in 1 s steps for --request-count
# records, but the workers stop after sending exactly that many, so one answer that arrived before the swap
# leaves it waiting forever. A busy 2-core machine preempting its main thread for a few ms is enough: one of two
# CI runs over HTTP; 12 of 150 HTTP runs and 0 of 50 gRPC runs of tests/bench/pa_http/stall_probe.py (a busy loop
# on one core), each with every answer sent and read. tests/bench/pa_http/pa_race_pipe.py holds the main thread
# there (a full stdout pipe): every run stalls, over both protocols, with the server's count complete. Until
# perf_analyzer changes, a run that stalls exactly so is told apart from a lost answer and run again: all its
# workers ended (a sync worker ends only once each of its requests has its answer), the server counted every
# request as a success, and perf_analyzer printed nothing after "Request concurrency". A lost answer leaves a
# worker waiting: that fails.
PA_RACE_QUIET_S = 5     # perf_analyzer's Measure polls every 1 s: a run past its workers this long is stuck
# 1 in 10 to 1 in 4 runs over HTTP stall on a loaded 2-core machine (neither --async nor SCHED_BATCH helps), and a
# loop of this test once saw 3 in a row: 8 attempts, each stall costing ~6 s
PA_RACE_ATTEMPTS = 8


def _pa_workers_left(pid):
    """perf_analyzer's threads other than its main one that carry its name (its workers; gRPC's own threads
    name themselves), or None once it is gone."""
    try:
        with open("/proc/%d/comm" % pid) as f:
            name = f.read()
        n = 0
        for tid in os.listdir("/proc/%d/task" % pid):
            if int(tid) != pid:
                with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                    n += f.read() == name
        return n
    except OSError:
        return None


def _run_request_count(pa, url, protocol, n, concurrency, client, tmp_path):
    """perf_analyzer --request-count n; returns (its output, the request count it measured, the server's
    statistics before the run that counted). Runs it again when it stalls in its --request-count race (above),
    with the server's count of that run checked first."""
    cmd = [pa, "-m", "mlp", "-u", url, "-i", protocol, "--concurrency-range", "%d:%d" % (concurrency, concurrency),
           "--request-count", str(n)]
    stalls = []
    for attempt in range(PA_RACE_ATTEMPTS):
        before = _stats(client)
        log = tmp_path / ("pa_%d.txt" % attempt)
        with open(log, "w") as f:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        quiet_since = None
        while p.poll() is None and time.monotonic() - t0 < 300:
            time.sleep(0.2)
            out = log.read_text(errors="replace")
            tail = out.split("Request concurrency: %d\n" % concurrency, 1)
            raced = (len(tail) == 2 and not tail[1].strip() and _pa_workers_left(p.pid) == 0
                     and _stats(client).success.count - before.success.count == n)
            quiet_since = (quiet_since or time.monotonic()) if raced else None
            if quiet_since and time.monotonic() - quiet_since > PA_RACE_QUIET_S:
                break
        if p.poll() is None:
            p.kill()
            p.wait()
            after = _stats(client)
            assert quiet_since, "perf_analyzer still running after %.0f s, %s of its workers waiting, the server " \
                "counted %d of %d:\n%s" % (time.monotonic() - t0, _pa_workers_left(p.pid),
                                          after.success.count - before.success.count, n, out[-4000:])
            assert after.success.count - before.success.count == n and after.fail.count == before.fail.count
            stalls.append("attempt %d: every worker answered, the server counted %d, perf_analyzer stuck" % (
                attempt, n))
            print("perf_analyzer's --request-count race (issue 14), running it again: " + stalls[-1])
            continue
        out = log.read_text(errors="replace")
        assert p.returncode == 0, "perf_analyzer exit %d:\n%s" % (p.returncode, out[-4000:])
        m = re.search(r"Request count: (\d+)", out)
        assert m, out[-4000:]
        if int(m.group(1)) < n:
            # The same race ending the other way (seen once in CI, 2026-12-02: 2999 of 3000 over HTTP): the
            # answers that arrived before the swap are lost to its count, and this build of perf_analyzer
            # ends once its workers have stopped instead of waiting. Told apart from a lost answer as above:
            # the server counted every request as a success.
            after = _stats(client)
            assert after.success.count - before.success.count == n and after.fail.count == before.fail.count, \
                "perf_analyzer measured %s of %d, the server counted %d successes:\n%s" % (
                    m.group(1), n, after.success.count - before.success.count, out[-4000:])
            stalls.append("attempt %d: perf_analyzer measured %s of %d, the server counted all %d" % (
                attempt, m.group(1), n, n))
            print("perf_analyzer's --request-count race (issue 14), running it again: " + stalls[-1])
            continue
        return out, int(m.group(1)), before
    pytest.fail("perf_analyzer stalled in its --request-count race %d times in a row: %s" % (
        PA_RACE_ATTEMPTS, stalls))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_perf_analyzer_request_count(pa, server, client, protocol, tmp_path):
    """--request-count, as tests/gpu/perf_analyzer_gpu.sh measures 64 streams and more: perf_analyzer's time
    windows never end above ~50,000 infer/s (its bookkeeping between windows grows faster than the windows,
    issue 14; tests/gpu/pa_hang_probe.sh), one window of exactly N requests does. It measures exactly N, and
    the server saw each succeed."""
    url = "127.0.0.1:%d" % (server.grpc_port if protocol == "grpc" else server.http_port)
    out, requests, before = _run_request_count(pa, url, protocol, 3000, 64, client, tmp_path)
    assert requests == 3000, out[-4000:]
    after = _stats(client)
    assert after.success.count - before.success.count == 3000
    assert after.fail.count == before.fail.count


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_perf_analyzer_system_shared_memory(pa, start_server, protocol):
    """perf_analyzer --shared-memory system, over gRPC and over the REST routes: it registers its own regions,
    sends every tensor through them, and inferd answers each request without the bytes in the messages."""
    srv = start_server(["--allow-client-shm", "true"])
    import tritonclient.grpc as grpcclient
    url = srv.grpc_url if protocol == "grpc" else srv.http_url[len("http://"):]
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        before = _stats(c)
        _, requests = _run(pa, url, 2, "--shared-memory", "system", "--output-shared-memory-size", "4096",
                           protocol=protocol)
        after = _stats(c)
        assert after.success.count - before.success.count >= requests
        assert after.fail.count == 0
        # it did register regions (the server logs each), and unregistered them when done
        assert re.search(r"shared memory region '[^']+' registered", srv.stderr_text()), srv.stderr_tail()
        assert c.get_system_shared_memory_status(as_json=True).get("regions", {}) == {}
    srv.stop()
    srv.assert_clean_exit()


def test_perf_analyzer_streaming(pa, server, client):
    """perf_analyzer --streaming: every request on ModelStreamInfer streams, answered one by one."""
    before = _stats(client)
    _, requests = _run(pa, "127.0.0.1:%d" % server.grpc_port, 4, "--streaming")
    after = _stats(client)
    assert after.success.count - before.success.count >= requests
    assert after.fail.count == before.fail.count


def test_perf_analyzer_http(pa, server, client):
    """perf_analyzer -i http: metadata, config and statistics from the REST routes, every request a
    REST inference with binary tensors; sync and --async."""
    url = server.http_url[len("http://"):]
    for extra in ((), ("--async",)):
        before = _stats(client)
        out, requests = _run(pa, url, 4, *extra, protocol="http")
        assert "Server:" in out and re.search(r"Inference count: \d+", out), out[-4000:]
        after = _stats(client)
        assert after.success.count - before.success.count >= requests, extra
        assert after.fail.count == before.fail.count, extra
