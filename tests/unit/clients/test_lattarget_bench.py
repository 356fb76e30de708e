"""The latency-target bench's choices (tests/bench/lattarget/pick.py, table.py) on synthetic measurements, no
server: the best fixed configuration of a (target, streams) cell is the one of most throughput among those
measured at those streams whose worse measurement meets the target without errors; table.py's verdict is PASS
only with the target's p99 met and its throughput >= 0.9 of the stricter fixed figure, and it exits 1 otherwise."""

import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench", "lattarget")
sys.path.insert(0, BENCH)
import pick  # noqa: E402


def row(config, level, rps, p99, errors=0):
    return {"config": str(config), "level": str(level), "throughput_rps": str(rps), "p99_ms": str(p99),
            "errors": str(errors)}


def test_cells_pick_the_best_worse_measurement_per_streams():
    rows = [row(1, 64, 1000, 4), row(1, 512, 3000, 40),
            row(2, 64, 2000, 15), row(2, 64, 1500, 18),     # confirmed: counts as 1500 at 18 ms
            row(3, 64, 2500, 12), row(3, 64, 2600, 25),     # its confirmation missed 20 ms: 2500 at 25 ms
            row(4, 64, 9000, 1, errors=3),                  # errors never win
            row(5, 512, 3500, 60),
            row(6, 512, 0, 0)]                              # nothing completed in its window: p99 reads 0
    c = pick.cells(rows, [5, 20, 50], [64, 512])
    assert c[(5, 64)] == ("1", 1000, 4, 1)
    assert c[(20, 64)] == ("2", 1500, 18, 2)
    assert c[(50, 64)] == ("3", 2500, 25, 2)
    assert c[(5, 512)] is None and c[(20, 512)] is None
    assert c[(50, 512)] == ("1", 3000, 40, 1)


def _csv(path, rps, p99_ms, errors=0):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "level", "throughput_rps", "p99_us", "errors", "server_queue_us", "server_avg_batch"])
        w.writerow(["conc", "64", rps, p99_ms * 1000, errors, 100, 12.5])


def test_table_verdicts(tmp_path):
    out = tmp_path
    (out / "load").mkdir()
    cells = [{"target_ms": 20.0, "streams": 64, "fixed_model": "m_f1", "label": "gpu x2", "tune_rps": 1000.0,
              "tune_p99_ms": 15.0, "tune_points": 2},
             {"target_ms": 50.0, "streams": 64, "fixed_model": "m_f1", "label": "gpu x2", "tune_rps": 1000.0,
              "tune_p99_ms": 15.0, "tune_points": 2},
             {"target_ms": 5.0, "streams": 64, "fixed_model": None}]
    (out / "cells.json").write_text(json.dumps({"model": "m", "cells": cells, "fixed": {"m_f1": "gpu x2"},
                                                "target_config": {"from": "gpu x2", "max_batch_size": 64}}))
    _csv(out / "load" / "m_f1.s64.csv", 1200, 16)     # measured again: 1200 met 20 ms, the stricter yardstick
    _csv(out / "load" / "m_t20.s64.csv", 1100, 19)    # 1100 / 1200 = 0.917: PASS
    _csv(out / "load" / "m_t50.s64.csv", 1300, 60)    # p99 over 50 ms: FAIL whatever the ratio
    _csv(out / "load" / "m_t5.s64.csv", 900, 9)       # no fixed one meets 5 ms: reported, not judged
    p = subprocess.run([sys.executable, os.path.join(BENCH, "table.py"), str(out)], capture_output=True, text=True)
    lines = {ln.split("|")[2].strip(): ln for ln in p.stdout.splitlines() if ln.startswith("| 64 ")}
    assert "| 0.917 | PASS |" in lines["20 ms"], p.stdout
    assert "**FAIL** (p99)" in lines["50 ms"], p.stdout
    assert "none meets it" in lines["5 ms"] and "target not met" in lines["5 ms"], p.stdout
    assert p.returncode == 1
    _csv(out / "load" / "m_t50.s64.csv", 1150, 30)
    p = subprocess.run([sys.executable, os.path.join(BENCH, "table.py"), str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout
