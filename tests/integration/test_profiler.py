"""The profiler through the real server: latency and batch-size histograms on /metrics, the
/dashboard page and its /dashboard.json data, and sampled Chrome traces (--trace-file, --trace-rate).

Counts are exact deltas over what each test sent, one request at a time from one client (so every
execution holds exactly one request of one row), compared with ModelStatistics for the same model.
Latencies are bounded by what the client measured around each call: the server cannot report a
request as slower than the round trip that contained it.
"""

import json
import math
import os
import subprocess
import time

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

K = 7  # requests per metrics/dashboard test
STAGES = ("request", "queue", "compute_input", "compute_infer", "compute_output")
LATENCY_HISTS = ["inferd_%s_duration_seconds" % s for s in STAGES]
BATCH_HIST = "inferd_batch_size"
MLP = {"model": "mlp", "version": "1"}
HIST_SLACK = 1.01  # log-linear histograms are within 0.4% of the sample; bounds below allow 1%


# --- helpers

def _metrics_text(server):
    status, text = lib.http_get(server.http_url + "/metrics")
    assert status == 200, text[:500]
    return text


def _le(s):
    return math.inf if s == "+Inf" else float(s)


def _hist(samples, name, **labels):
    """{'buckets': [(le, count)] in page order, 'sum': float, 'count': float} for one label set
    (le and sum of a latency histogram in microseconds)."""
    want = {k: str(v) for k, v in labels.items()}

    def match(l):
        return {k: v for k, v in l.items() if k != "le"} == want
    # latency histograms are exported in seconds; the tests reason in microseconds
    us = 1e6 if name.endswith("_seconds") else 1
    buckets = [(round(_le(l["le"]) * us, 6), v) for n, l, v in samples if n == name + "_bucket" and match(l)]
    sums = [v * us for n, l, v in samples if n == name + "_sum" and match(l)]
    counts = [v for n, l, v in samples if n == name + "_count" and match(l)]
    assert buckets, "no %s_bucket for %s" % (name, want)
    assert len(sums) == 1 and len(counts) == 1, "%s: _sum %r _count %r for %s" % (name, sums, counts, want)
    return {"buckets": buckets, "sum": sums[0], "count": counts[0]}


def _check_hist_shape(h, name):
    les = [le for le, _ in h["buckets"]]
    counts = [c for _, c in h["buckets"]]
    assert les[-1] == math.inf, "%s: last bucket le=%r, want +Inf" % (name, les[-1])
    assert all(a < b for a, b in zip(les, les[1:])), "%s: le bounds not ascending: %r" % (name, les)
    assert all(a <= b for a, b in zip(counts, counts[1:])), "%s: buckets not cumulative: %r" % (name, counts)
    assert counts[-1] == h["count"], "%s: +Inf bucket %r != _count %r" % (name, counts[-1], h["count"])
    assert all(c == int(c) and c >= 0 for c in counts), "%s: non-integer bucket counts %r" % (name, counts)
    assert h["sum"] >= 0


def _bucket(h, le):
    for b, c in h["buckets"]:
        if b == le:
            return c
    raise AssertionError("no bucket le=%r in %r" % (le, [b for b, _ in h["buckets"]]))


def _send_one_at_a_time(client, specs, oracle, rng, n, ids=None):
    """n single-row mlp requests in turn, each checked against onnxruntime; returns client wall times in us."""
    walls = []
    for i in range(n):
        feeds = lib.random_inputs(specs["mlp"], rng, 1)
        t0 = time.monotonic()
        _, got = lib.infer(client, "mlp", feeds, request_id=ids[i] if ids else "")
        walls.append((time.monotonic() - t0) * 1e6)
        lib.check_outputs(got, oracle.run("mlp", feeds), specs["mlp"], what="request %d" % i)
    return walls


def _dashboard(server):
    status, body = lib.http_get(server.http_url + "/dashboard.json")
    assert status == 200, body[:500]
    return json.loads(body)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _dash_entry(d, model, version):
    es = [m for m in d["models"] if m["name"] == model and str(m["version"]) == version]
    assert len(es) == 1, "dashboard entries for %s v%s: %r" % (model, version, es)
    return es[0]


def _batch_map(entry):
    out = {}
    for pair in entry["batch_sizes"]:
        assert isinstance(pair, list) and len(pair) == 2 and _is_int(pair[0]) and _is_int(pair[1]), pair
        assert pair[0] >= 1 and pair[1] >= 0, pair
        assert pair[0] not in out, "batch size %d listed twice: %r" % (pair[0], entry["batch_sizes"])
        out[pair[0]] = pair[1]
    return out


# --- /metrics histograms

def test_metrics_histogram_format(server):
    text = _metrics_text(server)
    samples = lib.parse_metrics(text)
    for name in LATENCY_HISTS + [BATCH_HIST]:
        assert "# TYPE %s histogram" % name in text, "no '# TYPE %s histogram' line" % name
        for n, l, _ in samples:
            if n in (name + "_bucket", name + "_sum", name + "_count"):
                assert "model" in l and "version" in l, "%s without model/version labels: %r" % (n, l)
                assert ("le" in l) == n.endswith("_bucket"), (n, l)
        h = _hist(samples, name, **MLP)
        _check_hist_shape(h, name)
    # Batch sizes: le = 1, 2, 4, ... up to the first power of two >= mlp's max_batch_size (64), then +Inf.
    les = [le for le, _ in _hist(samples, BATCH_HIST, **MLP)["buckets"]]
    assert les == [1, 2, 4, 8, 16, 32, 64, math.inf], les


def test_metrics_histogram_deltas(server, client, specs, oracle, rng):
    st0, m0 = lib.model_stats(client, "mlp"), lib.parse_metrics(_metrics_text(server))
    walls = _send_one_at_a_time(client, specs, oracle, rng, K)
    m1, st1 = lib.parse_metrics(_metrics_text(server)), lib.model_stats(client, "mlp")
    execs = st1.execution_count - st0.execution_count
    infers = st1.inference_count - st0.inference_count
    assert execs == K and infers == K, "ModelStatistics: %d executions, %d inferences for %d requests" % (
        execs, infers, K)

    for name in LATENCY_HISTS:
        h0, h1 = _hist(m0, name, **MLP), _hist(m1, name, **MLP)
        _check_hist_shape(h1, name)
        assert [b for b, _ in h0["buckets"]] == [b for b, _ in h1["buckets"]], "%s: bounds changed" % name
        assert h1["count"] - h0["count"] == K, "%s_count grew by %r, want %d" % (
            name, h1["count"] - h0["count"], K)
        deltas = [c1 - c0 for (_, c0), (_, c1) in zip(h0["buckets"], h1["buckets"])]
        assert all(d >= 0 for d in deltas), "%s: a bucket went down: %r" % (name, deltas)
        assert all(a <= b for a, b in zip(deltas, deltas[1:])), "%s: bucket deltas not cumulative %r" % (
            name, deltas)
        assert deltas[-1] == K
        # Every stage lies inside the client's round trip: all K fall at or below the bucket that
        # covers the slowest round trip, and the sum is at most the summed round trips.
        cover = min(b for b, _ in h1["buckets"] if b >= max(walls) * HIST_SLACK)
        idx = [b for b, _ in h1["buckets"]].index(cover)
        assert deltas[idx] == K, "%s: only %r of %d requests at or below le=%r (slowest round trip %.0f us)" % (
            name, deltas[idx], K, cover, max(walls))
        dsum = h1["sum"] - h0["sum"]
        assert 0 <= dsum <= sum(walls) * HIST_SLACK, "%s_sum grew by %r us, round trips took %.0f us" % (
            name, dsum, sum(walls))
    req = _hist(m1, "inferd_request_duration_seconds", **MLP)["sum"] - _hist(m0, "inferd_request_duration_seconds", **MLP)["sum"]
    inf = _hist(m1, "inferd_compute_infer_duration_seconds", **MLP)["sum"] - \
        _hist(m0, "inferd_compute_infer_duration_seconds", **MLP)["sum"]
    # Microseconds, not milliseconds: a 1024x512 GEMV takes well over 1 us; and a request contains its compute.
    assert inf >= K, "compute_infer sum grew by %r us for %d requests" % (inf, K)
    assert req >= inf, "request duration sum %r < compute_infer sum %r" % (req, inf)

    b0, b1 = _hist(m0, BATCH_HIST, **MLP), _hist(m1, BATCH_HIST, **MLP)
    _check_hist_shape(b1, BATCH_HIST)
    assert b1["count"] - b0["count"] == execs, "batch_size_count grew by %r, executions %d" % (
        b1["count"] - b0["count"], execs)
    assert b1["sum"] - b0["sum"] == infers, "batch_size_sum grew by %r, inferences %d" % (
        b1["sum"] - b0["sum"], infers)
    assert _bucket(b1, 1) - _bucket(b0, 1) == K, "le=1 bucket grew by %r" % (_bucket(b1, 1) - _bucket(b0, 1))
    # Totals agree with ModelStatistics.
    assert b1["count"] == st1.execution_count and b1["sum"] == st1.inference_count, (b1, st1)


def test_metrics_batch_size_multi_row(server, client, specs, oracle, rng):
    """One request of R rows is one execution of size R: the le=R bucket moves, le=R/2 does not."""
    m0, st0 = lib.parse_metrics(_metrics_text(server)), lib.model_stats(client, "mlp")
    feeds = lib.random_inputs(specs["mlp"], rng, 4)
    _, got = lib.infer(client, "mlp", feeds)
    lib.check_outputs(got, oracle.run("mlp", feeds), specs["mlp"])
    m1, st1 = lib.parse_metrics(_metrics_text(server)), lib.model_stats(client, "mlp")
    assert st1.execution_count - st0.execution_count == 1
    b0, b1 = _hist(m0, BATCH_HIST, **MLP), _hist(m1, BATCH_HIST, **MLP)
    assert b1["count"] - b0["count"] == 1
    assert b1["sum"] - b0["sum"] == 4
    assert _bucket(b1, 2) - _bucket(b0, 2) == 0
    assert _bucket(b1, 4) - _bucket(b0, 4) == 1
    assert _bucket(b1, math.inf) - _bucket(b0, math.inf) == 1
    h0, h1 = _hist(m0, "inferd_request_duration_seconds", **MLP), _hist(m1, "inferd_request_duration_seconds", **MLP)
    assert h1["count"] - h0["count"] == 1


# --- /dashboard and /dashboard.json

def test_dashboard_page(server):
    import urllib.request
    with urllib.request.urlopen(server.http_url + "/dashboard", timeout=10) as r:
        assert r.status == 200
        ctype = r.headers.get("Content-Type", "")
        body = r.read().decode("utf-8", "replace")
    assert ctype.startswith("text/html"), ctype
    assert "http://" not in body and "https://" not in body, "dashboard page loads something from outside"
    assert "dashboard.json" in body
    assert "<html" in body.lower()


def test_dashboard_json_shape(server, client, specs):
    import urllib.request
    with urllib.request.urlopen(server.http_url + "/dashboard.json", timeout=10) as r:
        assert r.status == 200
        ctype = r.headers.get("Content-Type", "")
        d = json.loads(r.read().decode("utf-8"))
    assert ctype.startswith("application/json"), ctype
    assert _is_int(d["time_ms"]) and d["time_ms"] > 0, d.get("time_ms")
    if "CUDA device 0:" in server.stderr_text():
        assert [g["index"] for g in d["gpus"]] == list(range(len(d["gpus"]))) and d["gpus"], d["gpus"]
        for g in d["gpus"]:
            assert g["uuid"] and g["name"], g
            assert _is_num(g["busy_fraction"]) and 0 <= g["busy_fraction"] <= 1, g
            assert _is_num(g["busy_seconds"]) and g["busy_seconds"] >= 0, g
    else:
        assert d["gpus"] == [], d["gpus"]  # a CPU-only server lists none
    assert _is_int(d["throughput_window_s"]) and d["throughput_window_s"] >= 1, d.get("throughput_window_s")
    assert isinstance(d["models"], list)
    got = sorted((m["name"], str(m["version"])) for m in d["models"])
    want = sorted((n, str(v)) for n, s in specs.items() if s["expect"] == "READY" for v in s["ready_versions"])
    assert got == want, "dashboard models %r, ready model versions %r" % (got, want)
    for m in d["models"]:
        what = "%s v%s" % (m["name"], m["version"])
        assert _is_num(m["throughput_rps"]) and m["throughput_rps"] >= 0, (what, m["throughput_rps"])
        assert _is_num(m["rows_per_s"]) and m["rows_per_s"] >= m["throughput_rps"], (what, m["rows_per_s"])
        assert _is_int(m["queue_depth"]) and m["queue_depth"] == 0, (what, m["queue_depth"])  # nothing in flight
        st = lib.model_stats(client, m["name"], str(m["version"]))
        assert _is_int(m["success"]) and m["success"] == st.inference_stats.success.count, (
            what, m["success"], st.inference_stats.success.count)
        assert _is_int(m["failure"]) and m["failure"] == st.inference_stats.fail.count, (
            what, m["failure"], st.inference_stats.fail.count)
        assert sorted(m["latency_us"]) == sorted(STAGES), (what, sorted(m["latency_us"]))
        for stage, ps in m["latency_us"].items():
            assert sorted(ps) == ["p50", "p90", "p99", "p999"], (what, stage, ps)
            if m["success"] > 0:
                assert all(_is_num(ps[k]) and ps[k] >= 0 for k in ps), (what, stage, ps)
                assert ps["p50"] <= ps["p90"] <= ps["p99"] <= ps["p999"], (what, stage, ps)
        bs = _batch_map(m)
        assert sum(bs.values()) == st.execution_count, (what, m["batch_sizes"], st.execution_count)
        assert sum(k * v for k, v in bs.items()) == st.inference_count, (what, m["batch_sizes"], st.inference_count)
        mbs = specs[m["name"]]["max_batch_size"]
        assert all(k <= max(mbs, 1) for k in bs), (what, m["batch_sizes"], mbs)


def test_dashboard_json_deltas(server, client, specs, oracle, rng):
    d0, st0 = _dashboard(server), lib.model_stats(client, "mlp")
    _send_one_at_a_time(client, specs, oracle, rng, K)
    d1, st1 = _dashboard(server), lib.model_stats(client, "mlp")
    e0, e1 = _dash_entry(d0, "mlp", "1"), _dash_entry(d1, "mlp", "1")
    assert d1["time_ms"] >= d0["time_ms"]
    assert e1["success"] - e0["success"] == K
    assert e1["success"] == st1.inference_stats.success.count
    assert e1["failure"] == e0["failure"]
    assert e1["queue_depth"] == 0
    assert _is_num(e1["throughput_rps"]) and e1["throughput_rps"] >= 0, e1["throughput_rps"]
    b0, b1 = _batch_map(e0), _batch_map(e1)
    assert b1.get(1, 0) - b0.get(1, 0) == K, (e0["batch_sizes"], e1["batch_sizes"])
    assert sum(b1.values()) - sum(b0.values()) == st1.execution_count - st0.execution_count == K
    lat = e1["latency_us"]
    for stage in STAGES:
        ps = lat[stage]
        assert ps["p50"] <= ps["p90"] <= ps["p99"] <= ps["p999"], (stage, ps)
    # A request contains its compute, so every percentile of request latency is at least compute_infer's.
    for p in ("p50", "p90", "p99", "p999"):
        assert lat["request"][p] * HIST_SLACK >= lat["compute_infer"][p], (p, lat["request"], lat["compute_infer"])
    assert lat["compute_infer"]["p50"] > 0


def test_dashboard_json_private_server_exact_latency_bounds(start_server, specs, oracle, rng):
    """On a fresh server every served request is one of ours: each percentile lies within our round trips."""
    srv = start_server()
    d0 = _dashboard(srv)
    e0 = _dash_entry(d0, "mlp", "1")
    assert e0["success"] == 0 and e0["failure"] == 0 and sum(_batch_map(e0).values()) == 0, e0
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        walls = _send_one_at_a_time(c, specs, oracle, rng, K)
        d1 = _dashboard(srv)
        st = lib.model_stats(c, "mlp")
    e1 = _dash_entry(d1, "mlp", "1")
    assert e1["success"] == K == st.inference_stats.success.count
    assert _batch_map(e1) == {1: K}, e1["batch_sizes"]
    for stage in STAGES:
        ps = e1["latency_us"][stage]
        assert ps["p50"] <= ps["p90"] <= ps["p99"] <= ps["p999"] <= max(walls) * HIST_SLACK, (
            stage, ps, max(walls))
    assert e1["latency_us"]["request"]["p50"] > 0
    assert srv.stop() == 0
    srv.assert_clean_exit()


# --- Chrome traces

def _traced_run(start_server, tmp_path, specs, oracle, rng, rate, n):
    path = tmp_path / "trace.json"
    srv = start_server(["--trace-file", str(path), "--trace-rate", str(rate)])
    ids = ["r%d" % i for i in range(n)]
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        walls = _send_one_at_a_time(c, specs, oracle, rng, n, ids=ids)
    assert srv.stop() == 0
    srv.assert_clean_exit()
    assert path.exists(), "no trace file at %s" % path
    with open(path) as f:
        events = json.load(f)  # valid JSON once the server exited
    assert isinstance(events, list), type(events)
    # the seed mlp is KIND_AUTO: on the GPU where the server saw one
    device = 0 if "CUDA device 0:" in srv.stderr_text() else -1
    return events, walls, device


def _check_trace(events, want_ids, device):
    xs = [e for e in events if e.get("ph") == "X"]
    by_id = {}
    for e in xs:
        a = e.get("args", {})
        by_id.setdefault(a.get("request_id"), []).append(e)
    assert sorted(by_id) == sorted(want_ids), "traced request ids %r, want %r" % (sorted(by_id), sorted(want_ids))
    assert len(xs) == len(STAGES) * len(want_ids), "%d X events for %d requests" % (len(xs), len(want_ids))
    for rid, evs in by_id.items():
        names = sorted(e["name"] for e in evs)
        assert names == sorted(STAGES), "%s: events %r" % (rid, names)
        ev = {e["name"]: e for e in evs}
        for e in evs:
            assert _is_num(e["ts"]) and _is_num(e["dur"]) and e["dur"] >= 0, (rid, e)
            a = e["args"]
            for k in ("model", "version", "request_id", "batch_size", "instance", "device"):
                assert k in a, "%s %s: no args.%s in %r" % (rid, e["name"], k, a)
            assert a["model"] == "mlp" and str(a["version"]) == "1", (rid, a)
            assert a["batch_size"] == 1, (rid, e["name"], a["batch_size"])
            assert a["device"] == device, (rid, e["name"], a["device"], device)
            if e["name"] in ("compute_input", "compute_infer", "compute_output"):
                # a GPU instance names its stream slot; the CPU has none
                assert (a["stream"] == -1) if device < 0 else a["stream"] in (0, 1, 2), (rid, e["name"], a)
        # One request in one execution: every stage names the same batch.
        assert len({(e["args"]["batch_size"], e["args"].get("batch_id")) for e in evs}) == 1, (rid, evs)
        r = ev["request"]
        r_end = r["ts"] + r["dur"]
        for s in STAGES[1:]:
            e = ev[s]
            assert r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r_end, (
                "%s: %s [%r, %r] outside request [%r, %r]" % (rid, s, e["ts"], e["ts"] + e["dur"], r["ts"], r_end))
        for s in ("compute_input", "compute_infer", "compute_output"):
            assert _is_int(ev[s]["args"]["instance"]) and ev[s]["args"]["instance"] >= 0, (rid, s, ev[s]["args"])
        # Stages follow each other: queue, then input, infer, output (1 us for rounding to microseconds).
        order = [ev[s] for s in STAGES[1:]]
        for a, b in zip(order, order[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1, (rid, a["name"], b["name"], a, b)
    # Requests were sent one after another, so their request spans do not overlap and come in id order.
    ordered = [e for i in want_ids for e in by_id[i] if e["name"] == "request"]
    for a, b in zip(ordered, ordered[1:]):
        assert a["ts"] + a["dur"] <= b["ts"], ("request spans overlap or out of order", a, b)
    return by_id


def test_trace_rate_3_samples_every_third(start_server, tmp_path, specs, oracle, rng):
    events, walls, device = _traced_run(start_server, tmp_path, specs, oracle, rng, rate=3, n=9)
    by_id = _check_trace(events, ["r0", "r3", "r6"], device)
    for rid, evs in by_id.items():
        r = [e for e in evs if e["name"] == "request"][0]
        assert r["dur"] <= max(walls) * HIST_SLACK, (rid, r["dur"], max(walls))


def test_trace_rate_1_samples_all(start_server, tmp_path, specs, oracle, rng):
    events, _, device = _traced_run(start_server, tmp_path, specs, oracle, rng, rate=1, n=9)
    _check_trace(events, ["r%d" % i for i in range(9)], device)


def test_trace_file_in_missing_directory_fails_fast(tmp_path, repo_dir):
    bad = str(tmp_path / "no_such_dir" / "trace.json")
    args = [lib.inferd_bin(), "--model-repository", repo_dir, "--grpc-port", "0", "--http-port", "0",
            "--strict-readiness", "false", "--trace-file", bad, "--trace-rate", "1"]
    p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, errors="replace", timeout=60)
    assert p.returncode != 0, "exit code 0 with an unwritable trace file; stderr:\n%s" % p.stderr[-2000:]
    assert "inferd ready" not in p.stderr
    assert bad in p.stderr, p.stderr[-2000:]
    assert not any(m in p.stderr for m in lib.SANITIZER_MARKERS), p.stderr[-4000:]
    assert not os.path.exists(os.path.dirname(bad))


# --- sliding-window throughput

WINDOW_S = 5  # the server's throughput window (dashboard.json's throughput_window_s)


def _window_rates(server):
    m = lib.parse_metrics(_metrics_text(server))
    return (lib.metric_sum(m, "inferd_throughput_requests_per_second", **MLP),
            lib.metric_sum(m, "inferd_throughput_rows_per_second", **MLP))


def test_throughput_window_counts_then_slides_out(start_server, specs, oracle, rng):
    """K requests of 3 rows on a private server: once their second is whole, the 5-second window reads
    exactly K/5 requests and 3K/5 rows per second; WINDOW_S seconds later it reads 0 again."""
    srv = start_server()
    assert _dashboard(srv)["throughput_window_s"] == WINDOW_S
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        for i in range(K):
            feeds = lib.random_inputs(specs["mlp"], rng, 3)
            _, got = lib.infer(c, "mlp", feeds)
            lib.check_outputs(got, oracle.run("mlp", feeds), specs["mlp"], what="request %d" % i)
    # Bounded polls (the window moves in whole seconds): first the full count, then nothing.
    end, seen = time.monotonic() + 3 * WINDOW_S, None
    while time.monotonic() < end:
        seen = _window_rates(srv)
        if seen[0] * WINDOW_S > K - 0.5:
            break
        time.sleep(0.05)
    assert seen is not None and math.isclose(seen[0] * WINDOW_S, K, abs_tol=1e-6), seen
    assert math.isclose(seen[1] * WINDOW_S, 3 * K, abs_tol=1e-6), seen
    while time.monotonic() < end:
        seen = _window_rates(srv)
        if seen == (0.0, 0.0):
            break
        time.sleep(0.05)
    assert seen == (0.0, 0.0), "the window still counts %r after %d s" % (seen, WINDOW_S)


# --- promtool accepts /metrics

def test_promtool_check_metrics(server, client, specs, oracle, rng):
    """prometheus' own linter (Debian package prometheus) on /metrics after some load."""
    import shutil
    promtool = shutil.which("promtool")
    if promtool is None:
        import pytest
        pytest.skip("promtool not installed (apt-get install prometheus; CI installs it)")
    _send_one_at_a_time(client, specs, oracle, rng, 3)
    text = _metrics_text(server)
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    # Exit 1 is a parse error; 3 means lint remarks, one per line "<metric> <advice>". Triton's names
    # (nv_*: counters without _total, _us units), which perf_analyzer and dashboards expect verbatim,
    # draw remarks by design; every other metric must draw none.
    out = (p.stdout + p.stderr).strip()
    assert p.returncode in (0, 3), "promtool check metrics: exit %d\n%s" % (p.returncode, out[-3000:])
    remarks = [l for l in out.splitlines() if l.strip()]
    ours = [l for l in remarks if not l.startswith("nv_")]
    assert not ours, "promtool remarks on inferd's own metrics:\n%s" % "\n".join(ours)
    assert (p.returncode == 0) == (not remarks), (p.returncode, remarks)


# --- the dashboard in a real browser

def _dash_number(text):
    """The page's number format (fmtNum: 12, 3.4, 12.3k, 1.2M) back to a float; 0 for a dash or nothing."""
    t = text.strip()
    scale = {"k": 1e3, "M": 1e6}.get(t[-1:], 1)
    try:
        return float(t[:-1] if scale != 1 else t) * scale
    except ValueError:
        return 0.0


def test_dashboard_in_headless_chromium(server, client, specs, oracle, rng, tmp_path):
    """Headless Chromium (Debian's chromium + chromium-driver, driven by selenium) opens /dashboard
    during a load; the page's throughput cell shows a non-zero number. The screenshot is kept in
    $INFERD_ARTIFACTS (default tests/artifacts) as dashboard.png."""
    import threading
    chromium, driver_bin = lib.headless_chromium()   # skips (fails under INFERD_REQUIRE_BROWSER=1) without them
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        opts.add_argument(a)
    stop = threading.Event()

    def load():
        with grpcclient.InferenceServerClient(url=server.grpc_url) as c:
            while not stop.is_set():
                lib.infer(c, "mlp", lib.random_inputs(specs["mlp"], rng_load, 1))

    import numpy as np
    rng_load = np.random.default_rng(5)
    th = threading.Thread(target=load, daemon=True)
    drv = webdriver.Chrome(service=Service(driver_bin), options=opts)
    try:
        th.start()
        drv.get(server.http_url + "/dashboard")
        # The page polls /dashboard.json every second; wait (bounded) for the mlp row's throughput.
        end, cell = time.monotonic() + 30, ""
        while time.monotonic() < end:
            # read in one script: the page re-renders its table every second
            cell = drv.execute_script(
                "for (const r of document.querySelectorAll('#latency tr.model'))"
                "  if (r.innerText.startsWith('mlp ')) return r.cells[6].innerText;"  # name, stage, 4 percentiles
                "return '';")
            if _dash_number(cell) > 0:
                break
            time.sleep(0.2)
        art = os.environ.get("INFERD_ARTIFACTS", os.path.join(lib.REPO_ROOT, "tests", "artifacts"))
        os.makedirs(art, exist_ok=True)
        shot = os.path.join(art, "dashboard.png")
        drv.save_screenshot(shot)
        assert _dash_number(cell) > 0, "dashboard throughput cell %r; page text:\n%s" % (
            cell, drv.find_element(By.TAG_NAME, "body").text[:2000])
        assert os.path.getsize(shot) > 10000, shot
        print("dashboard screenshot: %s (throughput cell %s)" % (shot, cell))
    finally:
        stop.set()
        th.join(timeout=30)
        drv.quit()


def test_trace_concurrent_requests_get_their_own_lanes(start_server, tmp_path, specs, oracle, rng):
    """Every request sampled while 8 clients run at once: on each (pid, tid) track the spans nest or
    follow each other, never partially overlap (what Perfetto needs), and each request's five spans
    share one lane track named "requests N"."""
    import concurrent.futures as cf
    path = tmp_path / "trace.json"
    srv = start_server(["--trace-file", str(path), "--trace-rate", "1"])
    work = [lib.random_inputs(specs["mlp"], rng, 1) for _ in range(32)]

    def one(k):
        with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
            for i in range(k, len(work), 8):
                _, got = lib.infer(c, "mlp", work[i], request_id="c%d" % i)
                lib.check_outputs(got, oracle.run("mlp", work[i]), specs["mlp"], what="request %d" % i)
    with cf.ThreadPoolExecutor(8) as ex:
        for f in [ex.submit(one, k) for k in range(8)]:
            f.result(timeout=120)
    assert srv.stop() == 0
    events = json.load(open(path))
    xs = [e for e in events if e.get("ph") == "X"]
    assert len(xs) == len(STAGES) * len(work), len(xs)
    by_req, by_track = {}, {}
    for e in xs:
        by_req.setdefault(e["args"]["request_id"], set()).add((e["pid"], e["tid"]))
        by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    assert all(len(t) == 1 for t in by_req.values()), by_req
    assert all(tid >= 1000 for _, tid in by_track), sorted(by_track)
    for track, spans in by_track.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for a, b in spans:
            while open_ends and open_ends[-1] <= a:
                open_ends.pop()
            assert not open_ends or b <= open_ends[-1], "partial overlap on %r: [%r, %r] vs end %r" % (
                track, a, b, open_ends[-1])
            open_ends.append(b)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for track in by_track:
        assert names.get(track, "").startswith("requests "), (track, names.get(track))
    print("%d requests on %d lane(s)" % (len(work), len(by_track)))


def test_metrics_port_and_allow_metrics(start_server, specs, oracle, rng):
    """--metrics-port (Triton's 8002, where perf_analyzer --collect-metrics looks by default) serves /metrics
    alone, with the same counts as the HTTP port; --allow-metrics false turns /metrics off everywhere."""
    import tritonclient.grpc as grpcclient
    srv = start_server(["--metrics-port", "0"])
    assert srv.metrics_port and srv.metrics_port not in (srv.http_port, srv.grpc_port)
    murl = "http://127.0.0.1:%d" % srv.metrics_port
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        for _ in range(3):
            lib.infer(c, "mlp", lib.random_inputs(specs["mlp"], rng, 1))
    status, text = lib.http_get(murl + "/metrics")
    assert status == 200
    assert lib.metric_sum(lib.parse_metrics(text), "nv_inference_request_success", model="mlp") == 3
    _, main_text = lib.http_get(srv.http_url + "/metrics")
    assert lib.metric_sum(lib.parse_metrics(main_text), "nv_inference_request_success", model="mlp") == 3
    for path in ("/v2/health/ready", "/dashboard", "/"):
        assert lib.http_get(murl + path)[0] == 404, path
    srv.stop()
    srv.assert_clean_exit()

    off = start_server(["--allow-metrics", "false", "--metrics-port", "0"])
    assert off.metrics_port is None, "no metrics listener when metrics are off"
    status, text = lib.http_get(off.http_url + "/metrics")
    assert status == 404 and "--allow-metrics" in text
    assert lib.http_get(off.http_url + "/v2/health/ready")[0] == 200
    off.stop()
    off.assert_clean_exit()


def test_trace_setting_changes_sampling_while_serving(start_server, tmp_path, specs, oracle, rng):
    """Triton's TraceSetting through tritonclient: read back, then rate 1 (every request traced), OFF
    (none), a count of 2 (two, then none); the trace file shows exactly those requests. Refusals change
    nothing."""
    path = tmp_path / "trace.json"
    srv = start_server(["--trace-file", str(path), "--trace-rate", "1000"])
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        assert "trace" in c.get_server_metadata().extensions
        st = c.get_trace_settings(as_json=True)["settings"]
        assert st["trace_file"]["value"] == [str(path)] and st["trace_level"]["value"] == ["TIMESTAMPS"]
        assert st["trace_rate"]["value"] == ["1000"] and st["trace_count"]["value"] == ["-1"]
        # rate 1000: the first request is traced (a new count starts at every change)
        _send_one_at_a_time(c, specs, oracle, rng, 2, ids=["a0", "a1"])
        st = c.update_trace_settings(settings={"trace_rate": "1"}, as_json=True)["settings"]
        assert st["trace_rate"]["value"] == ["1"]
        _send_one_at_a_time(c, specs, oracle, rng, 3, ids=["b0", "b1", "b2"])
        c.update_trace_settings(settings={"trace_level": ["OFF"]})
        _send_one_at_a_time(c, specs, oracle, rng, 3, ids=["c0", "c1", "c2"])
        c.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_count": "2"})
        _send_one_at_a_time(c, specs, oracle, rng, 4, ids=["d0", "d1", "d2", "d3"])
        st = c.get_trace_settings(as_json=True)["settings"]
        assert st["trace_count"]["value"] == ["0"] and st["trace_level"]["value"] == ["TIMESTAMPS"]
        for bad, words in [({"trace_level": ["TENSORS"]}, "TIMESTAMPS"), ({"trace_rate": "0"}, "trace_rate"),
                           ({"trace_rate": "x"}, "whole number"), ({"trace_file": "/tmp/other.json"}, "fixed"),
                           ({"log_frequency": "5"}, "log_frequency"), ({"trace_mode": "opentelemetry"}, "unknown"),
                           ({"trace_count": "5", "trace_rate": "0"}, "trace_rate")]:
            with pytest.raises(InferenceServerException) as ei:
                c.update_trace_settings(settings=bad)
            assert lib.status_name(ei.value) == "INVALID_ARGUMENT" and words in lib.error_message(ei.value), bad
        with pytest.raises(InferenceServerException) as ei:
            c.update_trace_settings(model_name="mlp", settings={"trace_rate": "1"})
        assert lib.status_name(ei.value) == "INVALID_ARGUMENT" and "per-model" in lib.error_message(ei.value)
        assert c.get_trace_settings(as_json=True)["settings"]["trace_count"]["value"] == ["0"]  # untouched
        # cleared: back to the start rate and no count
        st = c.update_trace_settings(settings={"trace_rate": None, "trace_count": None}, as_json=True)["settings"]
        assert st["trace_rate"]["value"] == ["1000"] and st["trace_count"]["value"] == ["-1"]
    assert srv.stop() == 0
    srv.assert_clean_exit()
    with open(path) as f:
        events = json.load(f)
    device = 0 if "CUDA device 0:" in srv.stderr_text() else -1
    _check_trace(events, ["a0", "b0", "b1", "b2", "d0", "d1"], device)


def test_trace_setting_without_a_trace_file(server, client):
    st = client.get_trace_settings(as_json=True)["settings"]
    assert st["trace_level"]["value"] == ["OFF"] and st["trace_file"]["value"] == [""]
    assert "trace" not in client.get_server_metadata().extensions
    with pytest.raises(InferenceServerException) as ei:
        client.update_trace_settings(settings={"trace_rate": "1"})
    assert lib.status_name(ei.value) == "FAILED_PRECONDITION" and "--trace-file" in lib.error_message(ei.value)
