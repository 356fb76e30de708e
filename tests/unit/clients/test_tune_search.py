"""inferd-tune's search logic (clients/tune/search.py) on synthetic landscapes, no server: a fake bench
answers each (configuration, load level) from a formula and advances a fake clock, so these checks
are exact and untimed. The search must find the grid's optimum while measuring far fewer points,
stop at the budget, skip what a failure rules out, and do the same thing twice."""

import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients"))
from tune import search as S  # noqa: E402

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)


class FakeBench:
    """A made-up server: an instance runs a batch of b rows in `setup + per_row * b` ms; instances beyond
    `cores` share them; the queue delay costs latency when batches do not fill; preferred sizes help a
    little at large batches. Closed loop at concurrency c: batch min(mbs, c / instances)."""

    def __init__(self, fail=None, cores=4, step_s=1.0):
        self.fail = fail or (lambda cfg: None)
        self.cores, self.step_s = cores, step_s
        self.now = 0.0
        self.calls = []

    def clock(self):
        return self.now

    def prepare(self, cfg):
        self.now += 0.5
        return self.fail(cfg)

    def measure(self, cfg, level):
        self.calls.append((cfg, level))
        self.now += self.step_s
        setup, per_row = (2.0, 0.05) if cfg.kind == "cpu" else (0.4, 0.004)
        if cfg.precision == "fp16":
            per_row /= 2
        inst = cfg.instances
        b = max(1.0, min(float(max(cfg.max_batch_size, 1)), level / inst))
        svc = setup + per_row * b
        share = min(1.0, self.cores / inst)           # oversubscribed instances slow each other
        svc /= share
        fill = b / max(cfg.max_batch_size, 1)
        wait = cfg.queue_delay_us / 1000.0 * (1.0 - fill)
        bonus = 1.05 if cfg.preferred == "max" and fill >= 1.0 else 1.0
        busy = min(level, inst * b)
        thr = busy * 1000.0 / (svc + wait) * bonus
        lat = level / thr * 1000.0
        return {"level": level, "throughput_rps": thr, "p99_ms": lat * 1.4 + wait, "errors": 0}


def _space(**kw):
    args = dict(kinds=("cpu",), max_batch_sizes=(1, 2, 4, 8, 16, 32, 64), instances=(1, 2, 3, 4, 6, 8),
                queue_delays_us=(0, 100, 500, 2000, 5000), preferred=("none", "max", "half"))
    args.update(kw)
    return S.Space(**args)


def _grid_best(space, obj, levels=LEVELS):
    """Every configuration swept with the same per-configuration rules: (best score, points measured)."""
    bench = FakeBench()
    search = S.Search(space, obj, bench, levels, budget_s=1e12, clock=bench.clock)
    search.t0 = bench.clock()
    best = None
    for cfg in space.grid():
        r = search.evaluate(cfg)
        if best is None or S.better(r.score, best.score, tol=0.0):
            best = r
    return best, len(bench.calls)


@pytest.mark.parametrize("p99_ms", [5.0, 20.0, 80.0])
def test_throughput_objective_finds_grid_optimum_with_few_points(p99_ms):
    space, obj = _space(), S.Objective("throughput", p99_ms=p99_ms)
    grid_best, grid_points = _grid_best(space, obj)
    bench = FakeBench()
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock)
    best = search.run()
    assert best is not None and best.score[0] == 1, best and best.score
    assert grid_best.score[0] == 1
    # within the descent's tolerance of the grid's best throughput
    assert best.score[1] >= grid_best.score[1] * (1 - S.TOLERANCE), (best.cfg, best.score, grid_best.cfg,
                                                                     grid_best.score)
    assert best.best_point["p99_ms"] <= p99_ms
    assert len(space.grid()) == 6 * 6 * 5 * 3 + 6   # mbs 1 has one preferred mode and one delay: 546
    assert len(bench.calls) * 5 < grid_points, (len(bench.calls), grid_points)
    measured = [r for r in search.results.values() if r.points]
    assert len(measured) * 10 < len(space.grid()), len(measured)


def test_latency_objective_finds_grid_optimum():
    # kinds and precisions too; preferred sizes left out (the latency optimum with them sits on a needle:
    # max batch size exactly the level / instances, which a descent across a plateau cannot see)
    space = _space(kinds=("cpu", "gpu"), precisions=("fp32", "tf32", "fp16"), preferred=("none",))
    obj = S.Objective("latency", min_rps=20000)
    grid_best, grid_points = _grid_best(space, obj)
    bench = FakeBench()
    best = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock).run()
    assert grid_best.score[0] == 1 and best.score[0] == 1
    assert best.best_point["throughput_rps"] >= 20000 * (1 - S.RATE_SLACK)
    assert -best.score[1] <= -grid_best.score[1] * (1 + S.TOLERANCE), (best.cfg, best.score, grid_best.cfg,
                                                                       grid_best.score)
    assert len(bench.calls) * 5 < grid_points


def test_level_sweep_stops_at_the_p99_target_and_at_saturation():
    space = _space(max_batch_sizes=(8,), instances=(1,), queue_delays_us=(0,), preferred=("none",))
    bench = FakeBench()
    obj = S.Objective("throughput", p99_ms=10.0)
    s = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock)
    s.t0 = 0.0
    r = s.evaluate(space.start())
    # the last measured level is the first over the target; none above it was measured
    assert r.points[-1]["p99_ms"] > 10.0 and all(p["p99_ms"] <= 10.0 for p in r.points[:-1])
    assert len(r.points) < len(LEVELS) and "over the target" in r.stop
    # a generous target: the sweep ends where throughput stops growing (mbs 8, one instance saturates by 8-16)
    s2 = S.Search(space, S.Objective("throughput", p99_ms=1e6), FakeBench(), LEVELS, budget_s=1e12,
                  clock=bench.clock)
    s2.t0 = 0.0
    r2 = s2.evaluate(space.start())
    assert "saturated" in r2.stop and len(r2.points) < len(LEVELS), (r2.stop, len(r2.points))


def test_failures_prune_bigger_configurations():
    # more than 2 instances of max batch 32 or more "do not fit"
    def fail(cfg):
        return "out of memory" if cfg.instances > 2 and cfg.max_batch_size >= 32 else None
    space, obj = _space(), S.Objective("throughput", p99_ms=80.0)
    bench = FakeBench(fail=fail)
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock)
    best = search.run()
    assert best.cfg.instances <= 2 or best.cfg.max_batch_size < 32
    failed = [r for r in search.results.values() if r.failed]
    skipped = [r for r in search.results.values() if r.skipped]
    assert failed, "the landscape's optimum lies past the failure line, so the descent must meet it"
    assert skipped, [r.cfg for r in search.results.values()]
    for r in skipped:   # every skipped configuration needed at least as much as one that failed
        assert any(r.cfg.instances >= f.cfg.instances and r.cfg.max_batch_size >= f.cfg.max_batch_size
                   for f in failed)
        assert not any(c == r.cfg for c, _ in bench.calls)


def test_budget_stops_the_search():
    space, obj = _space(), S.Objective("throughput", p99_ms=80.0)
    bench = FakeBench(step_s=1.0)
    search = S.Search(space, obj, bench, LEVELS, budget_s=30.0, clock=bench.clock)
    best = search.run()
    assert best is not None
    assert search.stopped and "budget" in search.stopped
    # it never starts a configuration it cannot expect to finish: at most one average configuration over
    per_cfg = bench.now / max(1, len([r for r in search.results.values() if r.points]))
    assert bench.now <= 30.0 + per_cfg + 1e-9, bench.now


def test_deterministic():
    space, obj = _space(), S.Objective("throughput", p99_ms=20.0)
    runs = []
    for _ in range(2):
        bench = FakeBench()
        S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock).run()
        runs.append(bench.calls)
    assert runs[0] == runs[1]


def test_normalize_and_grid():
    sp = S.Space(kinds=("cpu", "gpu"), precisions=("fp32", "fp16"), max_batch_sizes=(1, 8), instances=(1,),
                 queue_delays_us=(100, 0), preferred=("none", "max"))
    g = sp.grid()
    # cpu: fp32 only; mbs 1: preferred none and the smallest delay only -> cpu (1 + 2 x 2) + gpu 2 x (1 + 2 x 2)
    assert len(g) == 5 + 10 and len(set(g)) == len(g)
    assert all(c.queue_delay_us == 0 and c.preferred == "none" for c in g if c.max_batch_size == 1)
    assert all(c.precision == "fp32" for c in g if c.kind == "cpu")
    assert S.Config("gpu", "fp16", 8, 1, 0, "half").preferred_sizes() == [4, 8]
    assert S.Config("cpu", "fp32", 8, 1, 0, "max").preferred_sizes() == [8]
    with pytest.raises(ValueError):
        S.Objective("throughput")
    with pytest.raises(ValueError):
        S.Space(preferred=("bogus",))


def test_score_orders_infeasible_by_nearness():
    obj = S.Objective("throughput", p99_ms=1.0)
    a = obj.score([{"level": 1, "throughput_rps": 100, "p99_ms": 2.0, "errors": 0}])
    b = obj.score([{"level": 1, "throughput_rps": 50, "p99_ms": 1.5, "errors": 0}])
    c = obj.score([{"level": 1, "throughput_rps": 10, "p99_ms": 0.5, "errors": 0}])
    assert c[0] == 1 and a[0] == b[0] == 0
    assert S.better(c, b) and S.better(b, a)
    # errors make a point infeasible whatever its numbers
    d = obj.score([{"level": 1, "throughput_rps": 1000, "p99_ms": 0.1, "errors": 3}])
    assert d[0] == 0 and math.isfinite(d[1])
    # a window where no request completed (inferd-load says p99 0) is neither feasible nor near
    z = {"level": 2, "throughput_rps": 0.0, "p99_ms": 0.0, "errors": 0}
    assert not obj.feasible(z)
    e = obj.score([{"level": 1, "throughput_rps": 0.5, "p99_ms": 1869.0, "errors": 0}, z])
    assert e == (0, -1869.0, 0)
    assert obj.stop_after([z], [4]) == "no request completed at level 2"
    assert not S.Objective("latency", min_rps=0.001).feasible(z)


class LuckyBench(FakeBench):
    """FakeBench where the first measurement of one configuration at one level is 30% too good (a lucky
    window); measured again it is what it is."""

    def __init__(self, lucky, **kw):
        super().__init__(**kw)
        self.lucky, self.seen = lucky, set()

    def measure(self, cfg, level):
        p = super().measure(cfg, level)
        if cfg == self.lucky and (cfg, level) not in self.seen:
            p["throughput_rps"] *= 1.3
        self.seen.add((cfg, level))
        return p


def test_confirmation_stops_a_lucky_window_from_winning():
    space, obj = _space(), S.Objective("throughput", p99_ms=80.0)
    b0 = FakeBench()
    s0 = S.Search(space, obj, b0, LEVELS, budget_s=1e12, clock=b0.clock)
    truth = s0.run()
    # the first configuration the descent measures that a 30% lucky window would put first
    lucky = next(r.cfg for r in s0.results.values()
                 if r.points and r.cfg != truth.cfg and r.score[0] and r.score[1] * 1.3 > truth.score[1] * 1.01)
    fooled = S.Search(space, obj, LuckyBench(lucky), LEVELS, budget_s=1e12, clock=FakeBench().clock).run()
    assert fooled.cfg == lucky, "the landscape no longer puts the lucky configuration first; pick another"
    bench = LuckyBench(lucky)
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock, confirm=3)
    best = search.run()
    assert best.cfg != lucky

    def true_score(cfg):
        b = FakeBench()
        t = S.Search(space, obj, b, LEVELS, budget_s=1e12, clock=b.clock)
        t.t0 = 0.0
        return t.evaluate(cfg).score
    # the winner is truly the best finalist (the lucky window steered the descent elsewhere, so the
    # landscape's optimum may not be among them: confirming guards the choice, not the path)
    assert all(not S.better(true_score(r.cfg), true_score(best.cfg), tol=0.0) for r in search.confirmed)
    assert len(search.confirmed) == 3 and lucky in [r.cfg for r in search.confirmed]
    for r in search.confirmed:   # each finalist got exactly one more point, at its deciding level
        assert r.points[-1]["phase"] == "confirm" and r.points[-1]["level"] == r.best_point["level"]
        assert r.final[0] == 1 and r.final[2] == len(r.points) - 1
    # ranked by the worse of the two measurements: the lucky one by its true (second) throughput
    lr = search.results[lucky]
    assert lr.final[1] == pytest.approx(lr.points[-1]["throughput_rps"])


class FlakyBench(FakeBench):
    """FakeBench whose second measurement of the first `n` configurations measured again misses any
    p99 target (a stall during the confirmation)."""

    def __init__(self, n, **kw):
        super().__init__(**kw)
        self.n, self.seen, self.spoiled = n, set(), []

    def measure(self, cfg, level):
        p = super().measure(cfg, level)
        if (cfg, level) in self.seen and len(self.spoiled) < self.n:
            self.spoiled.append(cfg)
            p["p99_ms"] = 1e6
        self.seen.add((cfg, level))
        return p


def test_confirmation_goes_on_until_enough_hold():
    space, obj = _space(), S.Objective("throughput", p99_ms=80.0)
    bench = FlakyBench(2)
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock, confirm=2)
    best = search.run()
    assert len(bench.spoiled) == 2
    assert len(search.confirmed) == 4, [r.cfg for r in search.confirmed]
    held = [r for r in search.confirmed if r.final[0]]
    assert len(held) == 2 and best in held and best.cfg not in bench.spoiled
    assert all(r.final[0] == 0 for r in search.confirmed if r.cfg in bench.spoiled)
    # ranked by their confirmed scores: the held ones first
    assert search.confirmed[:2] == sorted(held, key=lambda r: -r.final[1])


def test_no_confirmation_holds_the_nearest_is_named():
    space, obj = _space(), S.Objective("throughput", p99_ms=80.0)
    bench = FlakyBench(10 ** 6)
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock, confirm=1)
    best = search.run()
    assert best is not None and best.final[0] == 0
    assert len(search.confirmed) == len([r for r in search.results.values() if r.score[0]])


class StallBench(FakeBench):
    """FakeBench where the first measurement of every (configuration, level) at concurrency 4 stalls
    (p99 far over any target); measured again it is what it is."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen = set()

    def measure(self, cfg, level):
        p = super().measure(cfg, level)
        if level == 4 and (cfg, level) not in self.seen:
            p["p99_ms"] = 1e6
        self.seen.add((cfg, level))
        return p


def test_a_stalled_level_is_measured_again_before_the_sweep_ends():
    space, obj = _space(), S.Objective("throughput", p99_ms=80.0)
    grid_best, _ = _grid_best(space, obj)
    stalled = S.Search(space, obj, StallBench(), LEVELS, budget_s=1e12, clock=FakeBench().clock).run()
    assert stalled.best_point["level"] < 4   # without a retry every sweep ends at the stall
    bench = StallBench()
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock, retry_miss=True)
    best = search.run()
    assert best.score[1] >= grid_best.score[1] * (1 - S.TOLERANCE)
    for r in search.results.values():
        if r.points:   # each stalled level was measured exactly twice, the second time marked
            at4 = [p for p in r.points if p["level"] == 4]
            assert len(at4) in (0, 2) and [p.get("phase") for p in at4] in ([], [None, "retry"]), at4


def test_refine_bisects_the_last_step_in_load():
    # at p99 <= 3 ms the best configuration's sweep ends between two rungs of the ladder (8 meets, 16 misses)
    space, obj = _space(), S.Objective("throughput", p99_ms=3.0)
    plain = S.Search(space, obj, FakeBench(), LEVELS, budget_s=1e12, clock=FakeBench().clock).run()
    bench = FakeBench()
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock, refine=3)
    best = search.run()
    lo, hi = plain.best_point["level"], 2 * plain.best_point["level"]
    assert (lo, hi) == (8, 16) and best.cfg == plain.cfg
    refined = [p for p in best.points if p.get("phase") == "refine"]
    # bisections: 12 (misses), then 10 (meets), then 11 (meets)
    assert [p["level"] for p in refined] == [12, 10, 11], refined
    assert [p["p99_ms"] <= 3.0 for p in refined] == [False, True, True]
    # the winner now stands between the ladder's rungs, with more throughput, still on target
    assert best.best_point["level"] == 11 and best.best_point["p99_ms"] <= 3.0
    assert best.score[1] > plain.score[1] * 1.2
    # the latency objective has no such step to bisect
    lat = S.Search(space, S.Objective("latency", min_rps=20000), FakeBench(), LEVELS, budget_s=1e12,
                   clock=FakeBench().clock, refine=3)
    lat.run()
    assert not [p for r in lat.results.values() for p in r.points if p.get("phase") == "refine"]
