"""clients/plot_load.py on made-up inferd-load results (CSV and JSON): the PNGs it promises are
written and are real images; bad input fails cleanly. Skipped without matplotlib."""

import csv
import json
import os
import subprocess
import sys

import pytest

import inferd_testlib as lib

pytest.importorskip("matplotlib")

SCRIPT = os.path.join(lib.REPO_ROOT, "clients", "plot_load.py")
COLUMNS = ["mode", "level", "throughput_rps", "rows_per_s", "avg_us", "p50_us", "p90_us", "p95_us", "p99_us",
           "p999_us", "errors", "server_queue_us", "server_compute_input_us", "server_compute_infer_us",
           "server_compute_output_us", "server_avg_batch"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_rows(scale, levels=(1, 8, 32, 128), mode="concurrency"):
    rows = []
    for lv in levels:
        p50 = 200.0 * scale * (1 + lv / 64)
        rows.append({"mode": mode, "level": lv, "throughput_rps": lv * 1e6 / p50, "rows_per_s": lv * 1e6 / p50,
                     "avg_us": p50 * 1.1, "p50_us": p50, "p90_us": p50 * 1.6, "p95_us": p50 * 2, "p99_us": p50 * 3,
                     "p999_us": p50 * 5, "errors": 3 if lv == 128 else 0, "server_queue_us": p50 * 0.3,
                     "server_compute_input_us": 5.0, "server_compute_infer_us": 40.0,
                     "server_compute_output_us": 3.0, "server_avg_batch": min(lv, 64)})
    return rows


def write_csv(path, rows, blank_server=False):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            r = dict(r)
            if blank_server:  # a server without statistics: empty cells
                for k in COLUMNS:
                    if k.startswith("server_"):
                        r[k] = ""
            w.writerow(r)


def write_json(path, rows):
    out = []
    for r in rows:
        r = dict(r)
        r["cdf"] = [[r["p50_us"] * f, q] for f, q in ((0.5, 0.0), (0.8, 0.2), (1, 0.5), (1.6, 0.9), (3, 0.99),
                                                     (5, 0.999), (6, 1.0))]
        out.append(r)
    with open(path, "w") as f:
        json.dump(out, f)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=120)


def assert_png(path):
    assert os.path.isfile(path), "missing %s" % path
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000, path


def test_plots_from_csv_and_json(tmp_path):
    a, b = tmp_path / "inferd.csv", tmp_path / "peer.json"
    write_csv(a, fake_rows(1.0) + fake_rows(1.2, levels=(100, 1000), mode="rate"), blank_server=True)
    write_json(b, fake_rows(2.5))
    out = tmp_path / "plots"
    r = run(a, b, "--out", out)
    assert r.returncode == 0, r.stderr
    for name in ("throughput_p99.png", "cdf_inferd.png", "cdf_peer.png"):
        assert_png(out / name)
        assert str(out / name) in r.stdout

    # Labels, and one CDF per file at a chosen level.
    r = run(a, b, "--out", out, "--labels", "inferd,python peer", "--level", "32", "--mode", "concurrency")
    assert r.returncode == 0, r.stderr
    assert_png(out / "cdf_level_32.png")


def test_same_stem_files_get_distinct_cdfs(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    write_json(tmp_path / "x" / "run.json", fake_rows(1.0))
    write_json(tmp_path / "y" / "run.json", fake_rows(2.0))
    out = tmp_path / "plots"
    r = run(tmp_path / "x" / "run.json", tmp_path / "y" / "run.json", "--out", out)
    assert r.returncode == 0, r.stderr
    assert_png(out / "cdf_run.png")
    assert_png(out / "cdf_run_2.png")


def test_bad_input(tmp_path):
    a = tmp_path / "a.csv"
    write_csv(a, fake_rows(1.0))
    out = tmp_path / "plots"
    r = run(a, "--out", out, "--labels", "one,two")
    assert r.returncode == 2 and "--labels" in r.stderr
    r = run(a, "--out", out, "--level", "7")
    assert r.returncode == 1 and "no result at level 7" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    r = run(bad, "--out", out)
    assert r.returncode == 1 and "expected a JSON list" in r.stderr
    empty = tmp_path / "empty.csv"
    empty.write_text(",".join(COLUMNS) + "\n")
    r = run(empty, "--out", out)
    assert r.returncode == 1 and "no result rows" in r.stderr
