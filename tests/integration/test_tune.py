"""inferd-tune (clients/inferd-tune) against the real server on the CPU example model `mlp` with a tiny
space and budget: its exit status and what it printed, points.csv (every row, every column, numbers
that hold together: percentiles ordered, batch sizes within the configuration's max batch size,
exactly one chosen point on the Pareto front), the written config.pbtxt (it loads in inferd, serves
onnxruntime's numbers, and carries the chosen instance count and max batch size), and report.html in
headless Chromium (one mark in the plot and one table row per point, the Pareto front and the
chosen point drawn). The screenshot is kept in $INFERD_ARTIFACTS (default tests/artifacts) as
tune_report.png."""

import csv
import os
import shutil
import subprocess
import sys

import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

TUNE = os.path.join(lib.REPO_ROOT, "clients", "inferd-tune")
sys.path.insert(0, os.path.join(lib.REPO_ROOT, "clients"))
from tune import report as tune_report  # noqa: E402
from tune.modelcfg import parse_pbtxt  # noqa: E402

# 2 instance counts x (max batch 1, or 8 with 2 delays x 2 preferred modes) = 10 configurations
SPACE = ["--instances", "1,2", "--max-batch-sizes", "1,8", "--queue-delays-us", "0,200", "--preferred", "none,max"]
GRID = 2 * (1 + 2 * 2)


@pytest.fixture(scope="module")
def example_repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tune_repo"))
    specs = lib.gen_models.generate(d, "example")
    return d, specs


@pytest.fixture(scope="module")
def tuned(example_repo, tmp_path_factory):
    """One inferd-tune run: (completed process, output folder)."""
    repo, _ = example_repo
    out = str(tmp_path_factory.mktemp("tune_out"))
    load_bin = os.path.join(os.path.dirname(lib.inferd_bin()), "inferd-load")
    # a generous p99 target: CI's shared cores make latencies jumpy, and this test is about the
    # tool's plumbing, not this machine's numbers; the budget bounds the run on a loaded machine
    # (about 15 s when the 2-core dev VM is busy)
    cmd = [sys.executable, TUNE, "--model-repository", repo, "-m", "mlp", "--objective", "throughput",
           "--p99-ms", "2000", "--concurrency", "1,4", "--duration-s", "0.5", "--warmup-s", "0.2",
           "--budget-s", "45", "--kinds", "cpu", "--inferd", lib.inferd_bin(), "--inferd-load", load_bin,
           "--out", out] + SPACE
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    print(p.stdout[-4000:])
    return p, out


def _rows(out):
    with open(os.path.join(out, "points.csv"), newline="") as f:
        r = csv.DictReader(f)
        assert r.fieldnames == tune_report.COLUMNS
        return list(r)


def test_tune_runs_and_says_what_it_chose(tuned):
    p, out = tuned
    assert p.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    assert "best: cpu x" in p.stdout and "(confirmed: the worse of two measurements" in p.stdout, p.stdout[-2000:]
    assert "a grid has %d" % GRID in p.stdout, p.stdout[-2000:]
    for f in ("config.pbtxt", "points.csv", "report.html", "server.log"):
        assert os.path.getsize(os.path.join(out, f)) > 0, f
    assert not os.path.exists(os.path.join(out, "level.json"))
    # the server it started stopped cleanly on SIGTERM (and, in the ASan run, reported nothing)
    assert "the server exited with status" not in p.stderr, p.stderr[-2000:]
    log = open(os.path.join(out, "server.log")).read()
    assert "inferd ready:" in log and "stopped" in log.splitlines()[-1], log[-2000:]
    assert not [m for m in lib.SANITIZER_MARKERS if m in log], log[-3000:]


def test_points_csv(tuned):
    p, out = tuned
    rows = _rows(out)
    configs = {r["config"] for r in rows}
    assert 2 <= len(configs) <= GRID, configs
    assert len(rows) >= len(configs)
    assert [int(r["point"]) for r in rows] == list(range(1, len(rows) + 1))
    for r in rows:
        what = "point %s (%s, level %s)" % (r["point"], r["label"], r["level"])
        assert r["kind"] == "cpu" and r["precision"] == "fp32", what
        assert r["load_mode"] == "concurrency" and r["level"] in ("1", "2", "4"), what   # 2: a refinement
        assert r["phase"] in ("search", "retry", "refine", "confirm"), what
        thr, p50, p90, p99 = (float(r[k]) for k in ("throughput_rps", "p50_ms", "p90_ms", "p99_ms"))
        assert thr > 0 and 0 < p50 <= p90 <= p99, what
        assert int(r["errors"]) == 0 and int(r["requests"]) > 0, what
        assert float(r["queue_ms"]) >= 0 and float(r["compute_infer_ms"]) > 0, what
        mbs = int(r["max_batch_size"])
        assert 1 <= float(r["avg_batch"]) <= mbs, what
        # every execution's batch fits the configuration (inferd's histogram upper bounds)
        hist = [(float(k), int(n)) for k, n in (x.rsplit(":", 1) for x in r["batch_hist"].split(";"))]
        assert hist and all(n > 0 for _, n in hist), what
        # inferd's buckets are powers of two up to the max batch size, so with max batch 1 or 8 none lies past it
        assert max(k for k, _ in hist) <= mbs, (what, hist)
        # the executions hold the requests: at most mbs rows each (the window around inferd-load's own run
        # also holds its few unmeasured requests, hence the slack)
        execs, reqs = sum(n for _, n in hist), int(r["requests"])
        assert reqs / mbs <= execs * 1.05 + 2 and execs <= reqs * 1.2 + 20, (what, execs, reqs)
        if mbs == 1:
            assert hist[0][0] == 1 and len(hist) == 1 and r["preferred"] == "none", (what, hist)
            assert r["queue_delay_us"] == "0", what
        if r["preferred"] == "max":
            assert r["preferred_sizes"] == str(mbs), what
        assert r["gpu_busy"] == "" and r["gpu_util"] == "", what   # no GPU here
        assert r["feasible"] == ("1" if p99 <= 2000 else "0"), what
    chosen = [r for r in rows if r["chosen"] == "1"]
    assert len(chosen) == 1, [r["point"] for r in chosen]
    c = chosen[0]
    assert c["feasible"] == "1" and c["phase"] == "confirm"
    # the finalists (until --confirm 2 of them hold) were measured again at their deciding level; each
    # counts with the worse of its two measurements, and the chosen one has the most throughput so counted
    confirms = [r for r in rows if r["phase"] == "confirm"]
    assert confirms and len({r["config"] for r in confirms}) == len(confirms)

    def worse(conf):
        # the deciding point: the configuration's feasible point of most throughput before the confirmation
        first = max((r for r in rows if r["config"] == conf["config"] and r["phase"] != "confirm"
                     and r["feasible"] == "1"), key=lambda r: float(r["throughput_rps"]))
        assert first["level"] == conf["level"], (first, conf)
        return min(float(conf["throughput_rps"]), float(first["throughput_rps"])), \
            max(float(conf["p99_ms"]), float(first["p99_ms"]))
    ok = [(worse(r)[0], r["point"]) for r in confirms if worse(r)[1] <= 2000]
    assert max(ok)[1] == c["point"], (ok, c["point"])
    front = [r for r in rows if r["pareto"] == "1"]
    for a in front:   # nothing dominates a point of the front
        assert not any(float(b["throughput_rps"]) > float(a["throughput_rps"]) and
                       float(b["p99_ms"]) < float(a["p99_ms"]) for b in rows), a["point"]


def test_best_config_loads_and_serves(tuned, example_repo, tmp_path, rng):
    p, out = tuned
    repo, specs = example_repo
    c = [r for r in _rows(out) if r["chosen"] == "1"][0]
    text = open(os.path.join(out, "config.pbtxt")).read()
    m = parse_pbtxt(text)   # Triton's own ModelConfig message parses it
    assert m.name == "mlp" and m.max_batch_size == int(c["max_batch_size"])
    assert len(m.instance_group) == 1 and m.instance_group[0].count == int(c["instances"])
    assert [i.name for i in m.input] == ["INPUT0"] and [o.name for o in m.output] == ["OUTPUT0"]
    if m.max_batch_size > 1:
        assert m.dynamic_batching.max_queue_delay_microseconds == int(c["queue_delay_us"])
        assert " ".join(map(str, m.dynamic_batching.preferred_batch_size)) == c["preferred_sizes"]
    d = tmp_path / "repo"
    shutil.copytree(os.path.join(repo, "mlp"), d / "mlp")
    (d / "mlp" / "config.pbtxt").write_text(text)
    srv = lib.ServerProcess(str(d), ["--strict-readiness", "true"])
    try:
        srv.start()
        with grpcclient.InferenceServerClient(url=srv.grpc_url) as cl:
            assert cl.is_model_ready("mlp")
            cfg = cl.get_model_config("mlp", as_json=True)["config"]
            assert int(cfg["max_batch_size"]) == int(c["max_batch_size"])
            assert int(cfg["instance_group"][0]["count"]) == int(c["instances"])
            oracle = lib.Oracle(str(d), specs)
            rows = min(2, int(c["max_batch_size"]))
            feeds = lib.random_inputs(specs["mlp"], rng, rows)
            _, got = lib.infer(cl, "mlp", feeds)
            lib.check_outputs(got, oracle.run("mlp", feeds), specs["mlp"], what="tuned mlp")
    finally:
        srv.stop()
    srv.assert_clean_exit()


def test_report_in_headless_chromium(tuned):
    chromium, driver_bin = lib.headless_chromium()   # skips (fails under INFERD_REQUIRE_BROWSER=1) without them
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    p, out = tuned
    rows = _rows(out)
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(driver_bin), options=opts)
    try:
        drv.get("file://" + os.path.abspath(os.path.join(out, "report.html")))
        svg = drv.find_element(By.CSS_SELECTOR, "svg#scatter")
        assert svg.size["width"] > 300 and svg.size["height"] > 200, svg.size
        marks = drv.find_elements(By.CSS_SELECTOR, "svg#scatter circle.pt")
        assert len(marks) == len(rows)
        assert sorted(int(e.get_attribute("data-point")) for e in marks) == [int(r["point"]) for r in rows]
        # every mark lies inside the plot
        box = drv.execute_script("var b = document.getElementById('scatter').getBoundingClientRect();"
                                 "return [b.left, b.top, b.right, b.bottom];")
        for e in marks:
            r = drv.execute_script("var b = arguments[0].getBoundingClientRect();"
                                   "return [(b.left + b.right) / 2, (b.top + b.bottom) / 2];", e)
            assert box[0] <= r[0] <= box[2] and box[1] <= r[1] <= box[3], (e.get_attribute("data-point"), r, box)
        assert len(drv.find_elements(By.CSS_SELECTOR, "svg#scatter circle.pt.chosen")) == 1
        assert len(drv.find_elements(By.CSS_SELECTOR, "svg#scatter circle.chosen-ring")) == 1
        assert len(drv.find_elements(By.CSS_SELECTOR, "svg#scatter circle.chosen-first-ring")) == 1
        assert len(drv.find_elements(By.CSS_SELECTOR, "svg#scatter circle.pt.pareto")) == sum(
            r["pareto"] == "1" for r in rows)
        assert drv.find_elements(By.CSS_SELECTOR, "svg#scatter polyline.pareto-front")
        trs = drv.find_elements(By.CSS_SELECTOR, "table#points tbody tr")
        assert len(trs) == len(rows)
        for tr, r in zip(trs, rows):
            cells = tr.find_elements(By.TAG_NAME, "td")
            assert cells[0].text == r["point"] and cells[1].text == r["label"], (cells[0].text, cells[1].text)
        # one section per configuration, each with its batch-size histogram
        sections = drv.find_elements(By.CSS_SELECTOR, "div.cfg")
        assert len(sections) == len({r["config"] for r in rows})
        assert len(drv.find_elements(By.CSS_SELECTOR, "div.cfg svg.hist")) == len(sections)
        assert "meets the objective" in drv.find_element(By.ID, "chosen").text
        art = os.environ.get("INFERD_ARTIFACTS", os.path.join(lib.REPO_ROOT, "tests", "artifacts"))
        os.makedirs(art, exist_ok=True)
        shot = os.path.join(art, "tune_report.png")
        drv.save_screenshot(shot)
        assert os.path.getsize(shot) > 10000, shot
    finally:
        drv.quit()


def test_usage_errors(example_repo, tmp_path):
    repo, _ = example_repo
    base = [sys.executable, TUNE, "--model-repository", repo, "--out", str(tmp_path / "o")]
    for extra, words in (([ "-m", "mlp"], "--p99-ms"),
                         (["-m", "mlp", "--objective", "latency"], "--min-throughput"),
                         (["-m", "mlp", "--p99-ms", "5", "--instances", "x"], "comma-separated integers"),
                         (["-m", "mlp", "--p99-ms", "5", "--preferred", "some"], "none, max, half")):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and words in p.stderr, (extra, p.returncode, p.stderr)
    p = subprocess.run(base + ["-m", "nosuch", "--p99-ms", "5", "--inferd", lib.inferd_bin(), "--inferd-load",
                               os.path.join(os.path.dirname(lib.inferd_bin()), "inferd-load")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "no model 'nosuch'" in p.stderr, p.stderr


def test_tune_a_running_server(example_repo, tmp_path):
    """--url/--http-url: a server already running in explicit mode is tuned in place (one configuration
    here), and left serving the repository's own config afterwards."""
    repo, _ = example_repo
    srv = lib.ServerProcess(repo, ["--model-control-mode", "explicit", "--load-model", "mlp"])
    try:
        srv.start()
        out = tmp_path / "o"
        p = subprocess.run([sys.executable, TUNE, "--model-repository", repo, "-m", "mlp", "--p99-ms", "2000",
                            "--url", srv.grpc_url, "--http-url", srv.http_url, "--kinds", "cpu",
                            "--instances", "2", "--max-batch-sizes", "4", "--queue-delays-us", "0",
                            "--preferred", "none", "--concurrency", "2", "--duration-s", "0.3", "--warmup-s", "0",
                            "--inferd-load", os.path.join(os.path.dirname(lib.inferd_bin()), "inferd-load"),
                            "--out", str(out)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        rows = _rows(str(out))
        assert [(r["instances"], r["max_batch_size"], r["phase"]) for r in rows] == [
            ("2", "4", "search"), ("2", "4", "confirm")]
        assert not os.path.exists(out / "server.log") or os.path.getsize(out / "server.log") == 0
        with grpcclient.InferenceServerClient(url=srv.grpc_url) as cl:
            cfg = cl.get_model_config("mlp", as_json=True)["config"]
            assert int(cfg["max_batch_size"]) == 64, cfg   # the repository's config.pbtxt again
        assert srv.alive()
    finally:
        srv.stop()
    srv.assert_clean_exit()


def test_nothing_loads(example_repo, tmp_path):
    """Only GPU configurations on a machine without a GPU: each one tried fails to load with the server's
    reason, larger ones are skipped unloaded, inferd-tune exits 1 and its report says why for each."""
    if lib.gpu_skip_reason() is None:
        pytest.skip("a GPU is visible here: KIND_GPU configurations would load")
    repo, _ = example_repo
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, TUNE, "--model-repository", repo, "-m", "mlp", "--p99-ms", "10",
                        "--kinds", "gpu", "--precisions", "fp32", "--instances", "1,2", "--max-batch-sizes", "8,16",
                        "--queue-delays-us", "0", "--preferred", "none", "--inferd", lib.inferd_bin(),
                        "--inferd-load", os.path.join(os.path.dirname(lib.inferd_bin()), "inferd-load"),
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "no configuration could be measured" in p.stdout
    assert "KIND_GPU but no CUDA device is visible" in p.stdout
    assert "measured 0 points over 0 configurations (3 skipped or failed; a grid has 4)" in p.stdout, p.stdout
    assert not (out / "config.pbtxt").exists()
    assert _rows(str(out)) == []
    page = (out / "report.html").read_text()
    # max batch 16 and 8 at one instance fail with the server's reason (the descent walks down from 16);
    # two instances of max batch 16 need at least what failed, so they are skipped unloaded
    assert page.count("KIND_GPU but no CUDA device is visible") == 2 and page.count("which failed") == 1, page
    assert "gpu x2 mbs=16 delay=0us pref=none fp32: needs at least what gpu x1 mbs=16" in page


def test_load_generator_failure_ends_the_run_with_what_was_written(example_repo, tmp_path):
    """inferd-load refusing its arguments ends the run: exit 1 naming its message, the server stopped,
    points.csv and report.html still written (empty here) saying why the search stopped."""
    repo, _ = example_repo
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, TUNE, "--model-repository", repo, "-m", "mlp", "--p99-ms", "1000",
                        "--kinds", "cpu", "--instances", "2", "--max-batch-sizes", "8", "--queue-delays-us", "0",
                        "--preferred", "none", "--concurrency", "2", "--duration-s", "0.3", "--load-arg=--bogus",
                        "--inferd", lib.inferd_bin(),
                        "--inferd-load", os.path.join(os.path.dirname(lib.inferd_bin()), "inferd-load"),
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "inferd-load exited 2" in p.stderr and "unknown option '--bogus'" in p.stderr, p.stderr
    assert _rows(str(out)) == [] and not (out / "config.pbtxt").exists()
    assert "Stopped early: failed: inferd-load exited 2" in (out / "report.html").read_text()
    assert "stopped" in (out / "server.log").read_text().splitlines()[-1]


def test_build_wrapper():
    """The build writes bin/inferd-tune beside inferd: it runs the tool with the project's Python."""
    wrapper = os.path.join(os.path.dirname(lib.inferd_bin()), "inferd-tune")
    assert os.access(wrapper, os.X_OK), wrapper
    p = subprocess.run([wrapper, "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "usage: inferd-tune" in p.stdout and "--p99-ms" in p.stdout, p.stderr


def test_latency_objective_runs_open_loop_at_the_rate(example_repo, tmp_path):
    """--objective latency: each configuration is measured open loop at the --min-throughput rate; the
    winner has the lowest p99 (the worse of its two measurements) among the finalists that sustain it."""
    repo, _ = example_repo
    out = tmp_path / "o"
    p = subprocess.run([sys.executable, TUNE, "--model-repository", repo, "-m", "mlp", "--objective", "latency",
                        "--min-throughput", "100", "--kinds", "cpu", "--instances", "1,2", "--max-batch-sizes", "8",
                        "--queue-delays-us", "0", "--preferred", "none", "--duration-s", "0.5", "--warmup-s", "0.2",
                        "--budget-s", "45", "--inferd", lib.inferd_bin(),
                        "--inferd-load", os.path.join(os.path.dirname(lib.inferd_bin()), "inferd-load"),
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "load: rate 100," in p.stdout, p.stdout
    rows = _rows(str(out))
    assert rows and all(r["load_mode"] == "rate" and r["level"] == "100" for r in rows), rows
    for r in rows:
        assert r["feasible"] == ("1" if float(r["throughput_rps"]) >= 98 and r["errors"] == "0" else "0"), r
        assert float(r["throughput_rps"]) <= 110, r   # an open loop at 100/s sends 100/s, whatever the answers
    confirms = [r for r in rows if r["phase"] == "confirm"]
    chosen = [r for r in rows if r["chosen"] == "1"]
    assert len(chosen) == 1 and chosen[0] in confirms and chosen[0]["feasible"] == "1"

    def worse_p99(conf):
        first = [r for r in rows if r["config"] == conf["config"] and r["phase"] == "search"]
        return max(float(conf["p99_ms"]), float(first[0]["p99_ms"]))
    held = [c for c in confirms if c["feasible"] == "1" and all(
        r["feasible"] == "1" for r in rows if r["config"] == c["config"])]
    assert min(held, key=worse_p99)["point"] == chosen[0]["point"]
