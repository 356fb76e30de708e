"""tests/bench/soak/soak.py as a smoke: six seconds of its mixed load (inferd-load --mix 55:5:30:10, open loop at
80 % of the probed maximum) against a server it starts on this run's test repository (model mlp). The count bounds
and the SIGTERM exit must pass on any machine; the latency, schedule and drift bounds are printed, not asserted
(a shared 2-core VM misses them; the device soak is the record). inferd-load is found as test_load.py finds it.
"""

import json
import os
import subprocess
import sys

import inferd_testlib as lib
from test_load import load_bin

SOAK = os.path.join(lib.REPO_ROOT, "tests", "bench", "soak", "soak.py")


def test_soak_smoke_counts_exact(repo_dir, tmp_path):
    out = str(tmp_path / "soak")
    cmd = [sys.executable, SOAK, "--repo", repo_dir, "--model", "mlp", "--inferd", lib.inferd_bin(),
           "--load-bin", load_bin(), "--minutes", "0.1", "--period-s", "2", "--warmup-s", "2", "--probe-s", "1",
           "--probe-concurrency", "4", "--threads", "1", "--server-args", "--strict-readiness false", "--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    why = "exit %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout, p.stderr[-4000:])
    assert p.returncode in (0, 1), why
    (line,) = [x for x in p.stdout.splitlines() if x.startswith("{")]
    s = json.loads(line)
    print(line)
    verdicts = [x for x in p.stderr.splitlines() if x.startswith(("PASS ", "FAIL "))]
    print("\n".join(verdicts))
    assert len([v for v in verdicts if " counts: " in v]) == 6, why
    assert not [f for f in s["failed"] if f.startswith(("counts", "exit"))], why
    assert s["exit"] == 0 and s["max_rps"] > 0, s
    assert s["connections_ended"] == 0 and "no connection ended by the rapid-reset guard" not in s["failed"], s
    k = s["kinds"]
    assert all(k[name]["sent"] > 0 for name in ("valid", "invalid", "cancel", "expire")), k
    assert k["valid"]["OK"] == k["valid"]["sent"] and k["invalid"]["INVALID_ARGUMENT"] == k["invalid"]["sent"], k
    assert s["server_success"] >= s["client_ok"] and s["never_reached_inference"] >= 0, s
    assert len(s["p99_ms_per_period"]) == 3, s
    with open(os.path.join(out, "soak_mlp.json")) as f:
        rec = json.load(f)
    assert len(rec["samples"]) >= 4 and all(r > 0 and n > 0 for _, r, n in rec["samples"]), rec["samples"]
    # the server's view per period: requests computed, where their time went, which threads ran
    views = rec["server_periods"]
    print("\n".join(x for x in p.stderr.splitlines() if x.startswith("server, period")))
    assert 2 <= len(views) <= 3, views
    assert sum(v["computed"] for v in views) > 0, views
    for v in views:
        assert v["request_us"] >= v["queue_us"] >= 0 and v["compute_us"] >= 0, v
        assert v["cores"] and all(c >= 0 for c in v["cores"].values()), v
    # the server's own percentiles (its Prometheus histograms, bucket deltas per period) and the client's CPU
    judged = [v for v in views if v["computed"] > 0]
    assert judged, views
    for v in judged:
        lo, hi = v["request_p99_bucket_us"]
        assert 0 <= lo <= v["request_p99_us"] and (hi is None or v["request_p99_us"] <= hi), v
        assert hi is None or hi < 60e6, v  # under the last finite bound: nothing on this VM waits a minute
        assert 0 <= v["request_p50_us"] <= v["request_p99_us"], v
        qlo, qhi = v["queue_p99_bucket_us"]
        assert 0 <= qlo <= v["queue_p99_us"] and (qhi is None or v["queue_p99_us"] <= qhi), v
    ran = [v for v in views if v["client_cores"]]
    assert ran, views
    for v in ran:
        assert all(c >= 0 for c in v["client_cores"].values()), v
        assert v["client_cores_total"] == round(sum(v["client_cores"].values()), 2), v
    # inferd-load's worker threads are named, so its own CPU shows apart from gRPC's threads; one thread, one core
    assert any(v["client_cores"].get("ld-worker", 0) > 0 for v in ran), ran
    assert all(v["client_cores"].get("ld-worker", 0) <= 1.05 for v in ran), ran
    # the client headroom bound is judged (printed, not asserted: a shared VM may miss it) on the same figures
    assert len([x for x in verdicts if " client headroom: " in x]) == 1, verdicts
    assert s["client_busy_per_period"] == [round(v["client_cores"].get("ld-worker", 0), 2) for v in ran], s


def test_hist_quantile_buckets():
    """soak.py's percentile from two reads of a cumulative histogram: the bucket it falls in, interpolated inside."""
    sys.path.insert(0, os.path.dirname(SOAK))
    import soak

    inf = float("inf")
    b0 = [(0.0001, 10), (0.001, 10), (0.01, 10), (inf, 10)]
    # between the reads: 50 in (0, 100 us], 40 in (100 us, 1 ms], 10 in (1 ms, 10 ms]
    b1 = [(0.0001, 60), (0.001, 100), (0.01, 110), (inf, 110)]
    assert soak.hist_quantile(b0, b1, 0.5) == (0.0, 100.0, 100.0)
    lo, hi, est = soak.hist_quantile(b0, b1, 0.99)
    assert (lo, hi) == (1000.0, 10000.0) and est == 9100.0  # rank 99 of 100: 9 of the bucket's 10
    assert soak.hist_quantile(b0, b1, 0.9)[:2] == (100.0, 1000.0)
    # past the last finite bound: the bound is all that is known
    b2 = [(0.0001, 60), (0.001, 100), (0.01, 100), (inf, 110)]
    assert soak.hist_quantile(b0, b2, 0.99) == (10000.0, None, 10000.0)  # beyond 10 ms, the last finite bound
    assert soak.hist_quantile(b0, b0, 0.99) is None  # nothing counted in the period
