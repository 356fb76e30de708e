"""inferd-tune's search: which configurations and load levels to measure, and which one wins.

Pure logic, no server: a `Bench` (prepare a configuration, measure one load level) and a
clock are injected, so tests/unit/clients/test_tune_search.py drives it with synthetic
landscapes. Deterministic given the measurements.

The space is a few dimensions (`Space.dims`, in search order): kind, precision, max batch
size, instances, queue delay, preferred sizes. The search is coordinate descent: from a
start point, one dimension at a time, the values next to the current one are tried
(ordered dimensions walk outward, across plateaus, and stop at the first value worse than the best;
categorical ones try every value); the best becomes current; passes repeat until one
changes nothing or the budget ends. So the max batch size and instance count are found at
one delay first, then the delay and preferred sizes are refined around them, then the
first ones again if the later changed the picture.

Pruning on top of that:
- per configuration, load levels run from low to high and stop as soon as the next level
  cannot help the objective: p99 over the target (throughput objective; more load only
  adds latency; with `retry_miss` such a level is measured once more first, so one stall does
  not end the sweep), errors, or throughput saturated (under `SATURATION` gain over the last
  two levels);
- a configuration that failed to load or went over the GPU memory bound makes every
  configuration needing at least as much (same kind and precision, at least as many
  instances and as large a max batch size) skipped unmeasured;
- before a new configuration starts, the remaining budget must cover what one costs on
  average so far (and the confirmations' time).

At the end, for the throughput objective, the finalists' deciding level is bisected towards the
next level up, which missed the target (`refine`); then the best that meet the objective are
measured once more at their deciding level, in
order until `confirm` of them still meet it, and ranked by the worse of their two measurements, so
one lucky window cannot win.
"""

import collections
import math

SATURATION = 0.05   # a level adding under 5% throughput over the one before, twice, ends the sweep
TOLERANCE = 0.02    # a score must beat the incumbent by 2% to replace it (measurement noise)
# The latency objective's throughput counts as sustained within 2% of the target: an open loop at R
# requests/s measures R less the few requests still in flight at its window's end.
RATE_SLACK = 0.02

# Dimension names, in search order.
DIMS = ("kind", "precision", "max_batch_size", "instances", "queue_delay_us", "preferred")
ORDERED = ("max_batch_size", "instances", "queue_delay_us")
# A categorical dimension whose values are also tried one step either side along another: preferred
# sizes are a function of the max batch size ([mbs] is only reached when batches fill), so the pair moves
# together.
JOINT = {"preferred": "max_batch_size"}


class Config(collections.namedtuple("Config", DIMS)):
    """One point of the configuration space (no load level)."""

    def label(self):
        s = "%s x%d mbs=%d delay=%dus pref=%s" % (self.kind, self.instances, self.max_batch_size,
                                                  self.queue_delay_us, self.preferred)
        if self.kind == "gpu":
            s += " " + self.precision
        return s

    def preferred_sizes(self):
        """The preferred_batch_size list this configuration's preferred mode means."""
        m = self.max_batch_size
        if self.preferred == "none" or m <= 1:
            return []
        if self.preferred == "max":
            return [m]
        if self.preferred == "half":
            return [m // 2, m]
        raise ValueError("unknown preferred mode %r" % self.preferred)


PREFERRED_MODES = ("none", "max", "half")


class Space:
    """The values each dimension may take. Invalid combinations are normalised, not listed:
    CPU instances run FP32 (so precision is fixed for them), and a max batch size of 0 or 1 has no
    dynamic batching, so no preferred sizes and no queue delay (the smallest stands for it)."""

    def __init__(self, kinds=("cpu",), precisions=("fp32",), max_batch_sizes=(1, 8, 64), instances=(1, 2),
                 queue_delays_us=(0, 100, 1000), preferred=("none",)):
        self.values = {
            "kind": tuple(kinds),
            "precision": tuple(precisions),
            "max_batch_size": tuple(sorted(set(max_batch_sizes))),
            "instances": tuple(sorted(set(instances))),
            "queue_delay_us": tuple(sorted(set(queue_delays_us))),
            "preferred": tuple(preferred),
        }
        for d, v in self.values.items():
            if not v:
                raise ValueError("dimension %s has no values" % d)
        for p in self.values["preferred"]:
            if p not in PREFERRED_MODES:
                raise ValueError("preferred mode %r: want one of %s" % (p, ", ".join(PREFERRED_MODES)))
        self.batching = max(self.values["max_batch_size"]) > 0

    def normalize(self, cfg):
        """The canonical form of cfg (equal configurations compare equal)."""
        d = cfg._asdict()
        if d["kind"] != "gpu":
            d["precision"] = "fp32"
        if d["max_batch_size"] <= 1:   # no dynamic batching: no preferred sizes, the delay means nothing
            d["preferred"] = "none"
            d["queue_delay_us"] = self.values["queue_delay_us"][0]
        return Config(**d)

    def start(self):
        """Where the descent begins: the first kind and precision, the largest max batch size (dynamic
        batching usually pays), one instance (the fewest), the smallest delay, the first preferred mode."""
        v = self.values
        return self.normalize(Config(kind=v["kind"][0], precision=v["precision"][0],
                                     max_batch_size=v["max_batch_size"][-1], instances=v["instances"][0],
                                     queue_delay_us=v["queue_delay_us"][0], preferred=v["preferred"][0]))

    def grid(self):
        """Every distinct configuration (what a full grid would measure)."""
        out, seen = [], set()

        def rec(i, cur):
            if i == len(DIMS):
                c = self.normalize(Config(**cur))
                if c not in seen:
                    seen.add(c)
                    out.append(c)
                return
            for val in self.values[DIMS[i]]:
                cur[DIMS[i]] = val
                rec(i + 1, cur)
        rec(0, {})
        return out

    def active_dims(self):
        """The dimensions with more than one value."""
        return [d for d in DIMS if len(self.values[d]) > 1]


# --- objectives

class Objective:
    """`throughput`: the most requests/s at p99 <= p99_ms (no errors). `latency`: the lowest p99 at
    throughput >= min_rps (less RATE_SLACK; no errors)."""

    def __init__(self, kind, p99_ms=None, min_rps=None):
        if kind == "throughput" and not (p99_ms and p99_ms > 0):
            raise ValueError("--objective throughput needs --p99-ms > 0")
        if kind == "latency" and not (min_rps and min_rps > 0):
            raise ValueError("--objective latency needs --min-throughput > 0")
        if kind not in ("throughput", "latency"):
            raise ValueError("objective %r: want throughput or latency" % kind)
        self.kind, self.p99_ms, self.min_rps = kind, p99_ms, min_rps

    def describe(self):
        if self.kind == "throughput":
            return "max throughput with p99 <= %g ms" % self.p99_ms
        return "min p99 latency at throughput >= %g infer/s" % self.min_rps

    def feasible(self, p):
        # a window in which no request completed has no latency to judge (inferd-load reports p99 0 there)
        if p["errors"] or not p["throughput_rps"] > 0:
            return False
        if self.kind == "throughput":
            return p["p99_ms"] <= self.p99_ms
        return p["throughput_rps"] >= self.min_rps * (1 - RATE_SLACK)

    def score(self, points):
        """(feasible, value, index of the deciding point); larger is better. Infeasible configurations
        are ordered by how near they came (lower p99, or more throughput) so the descent still moves."""
        if not points:
            return (0, -math.inf, None)
        ok = [(i, p) for i, p in enumerate(points) if self.feasible(p)]
        if self.kind == "throughput":
            if ok:
                i, p = max(ok, key=lambda ip: (ip[1]["throughput_rps"], -ip[0]))
                return (1, p["throughput_rps"], i)
            i, p = min(enumerate(points), key=lambda ip: (_p99_or_inf(ip[1]), ip[0]))
            return (0, -_p99_or_inf(p), i)
        if ok:
            i, p = min(ok, key=lambda ip: (ip[1]["p99_ms"], ip[0]))
            return (1, -p["p99_ms"], i)
        i, p = max(enumerate(points), key=lambda ip: (ip[1]["throughput_rps"], -ip[0]))
        return (0, p["throughput_rps"], i)

    def over_target(self, p):
        """p missed the p99 target of the throughput objective (what a stall in one window can cause)."""
        return self.kind == "throughput" and not p["errors"] and p["p99_ms"] > self.p99_ms

    def stop_after(self, points, levels_left):
        """Why the level sweep of one configuration ends after `points` (None: go on)."""
        p = points[-1]
        if p["errors"]:
            return "errors at level %g" % p["level"]
        if not p["throughput_rps"] > 0:
            return "no request completed at level %g" % p["level"]
        if self.kind == "throughput" and p["p99_ms"] > self.p99_ms:
            return "p99 %.3g ms over the target at level %g" % (p["p99_ms"], p["level"])
        if self.kind == "latency" and p["throughput_rps"] >= self.min_rps * (1 - RATE_SLACK):
            return "throughput reached at level %g" % p["level"]
        if len(points) >= 3:
            a, b, c = (q["throughput_rps"] for q in points[-3:])
            if b < a * (1 + SATURATION) and c < b * (1 + SATURATION):
                return "throughput saturated by level %g" % p["level"]
        if not levels_left:
            return "last level"
        return None


def _p99_or_inf(p):
    """A point's p99, infinite where no request completed in its window (nothing was measured)."""
    return p["p99_ms"] if p["throughput_rps"] > 0 else math.inf


def better(a, b, tol=TOLERANCE):
    """Score a beats score b by more than the tolerance."""
    if a[0] != b[0]:
        return a[0] > b[0]
    if b[1] == -math.inf:
        return a[1] > b[1]
    return a[1] > b[1] + tol * abs(b[1])


# --- the search

class Result:
    """One configuration's outcome: its measured points (dicts) or why it was not measured."""

    def __init__(self, cfg, points=(), failed=None, skipped=None, stop=None, score=(0, -math.inf, None)):
        self.cfg, self.points, self.failed, self.skipped, self.stop, self.score = \
            cfg, list(points), failed, skipped, stop, score
        self.final = None        # a finalist's score after its confirmation (Search.confirm)
        self.worse = None        # and the point it counts with: the worse of its two measurements

    @property
    def best_point(self):
        """The point that decided the descent's score."""
        i = self.score[2]
        return None if i is None else self.points[i]

    @property
    def chosen_index(self):
        """The point that stands for this configuration: its confirmation where it has one."""
        return (self.final or self.score)[2]


class Search:
    """Coordinate descent over `space` for `objective`.

    bench.prepare(cfg) -> None or a reason the configuration cannot serve (load failed, over the
    memory bound); bench.measure(cfg, level) -> dict with at least level, throughput_rps, p99_ms,
    errors. `levels`: the load levels, ascending. `clock()`: seconds; `budget_s`: the wall-clock
    budget for the whole search. `log(str)`: progress lines.
    """

    def __init__(self, space, objective, bench, levels, budget_s=600.0, clock=None, log=None, max_passes=3,
                 confirm=0, retry_miss=False, refine=0):
        import time
        self.space, self.obj, self.bench = space, objective, bench
        self.levels = sorted(set(levels))
        self.budget_s, self.clock = budget_s, clock or time.monotonic
        self.log = log or (lambda s: None)
        self.max_passes = max_passes
        self.results = collections.OrderedDict()   # cfg -> Result, in measuring order
        self.failures = []                         # cfgs that failed to prepare
        self.t0 = None
        self.stopped = None                        # why the search ended early (budget), else None
        self.confirm = confirm                     # finalists measured again at the end
        self.retry_miss = retry_miss               # a level over the p99 target is measured once more
        self.refine = refine                       # bisections of the finalists' last step in load
        self.confirmed = []                        # their Results, best first

    # -- budget

    def _elapsed(self):
        return self.clock() - self.t0

    def _can_afford_another(self):
        """Another configuration (one of average cost so far) still fits, with the confirmations' time
        (a configuration load and one level each, reckoned as two average points) kept aside."""
        measured = [r for r in self.results.values() if r.points or r.failed]
        avg = self._elapsed() / len(measured) if measured else 0.0
        n_points = sum(len(r.points) for r in measured)
        reserve = self.confirm * 2 * self._elapsed() / n_points if n_points else 0.0
        return self._elapsed() + avg + reserve <= self.budget_s

    # -- pruning by failures

    def _needs_more_than_failed(self, cfg):
        for f in self.failures:
            if (f.kind, f.precision) == (cfg.kind, cfg.precision) and cfg.instances >= f.instances \
                    and cfg.max_batch_size >= f.max_batch_size:
                return f
        return None

    # -- one configuration

    def evaluate(self, cfg):
        cfg = self.space.normalize(cfg)
        if cfg in self.results:
            return self.results[cfg]
        if self.stopped:
            return None
        f = self._needs_more_than_failed(cfg)
        if f is not None:
            r = Result(cfg, skipped="needs at least what %s needed, which failed" % f.label())
            self.results[cfg] = r
            self.log("skip  %s: %s" % (cfg.label(), r.skipped))
            return r
        if not self._can_afford_another():
            self.stopped = "budget of %gs reached after %d configurations" % (
                self.budget_s, sum(1 for r in self.results.values() if r.points))
            self.log("stop: " + self.stopped)
            return None
        why = self.bench.prepare(cfg)
        if why:
            self.failures.append(cfg)
            r = Result(cfg, failed=why)
            self.results[cfg] = r
            self.log("fail  %s: %s" % (cfg.label(), why))
            return r
        points = []
        stop = None
        for k, level in enumerate(self.levels):
            p = dict(self.bench.measure(cfg, level))
            p.setdefault("level", level)
            points.append(p)
            stop = self.obj.stop_after(points, self.levels[k + 1:])
            if stop and self.retry_miss and self.obj.over_target(p):
                q = dict(self.bench.measure(cfg, level))   # one stall must not end the sweep
                q.setdefault("level", level)
                q["phase"] = "retry"
                points.append(q)
                stop = self.obj.stop_after(points, self.levels[k + 1:])
            if stop:
                break
            if self._elapsed() > self.budget_s:
                stop = "budget reached"
                break
        r = Result(cfg, points, stop=stop, score=self.obj.score(points))
        self.results[cfg] = r
        bp = r.best_point
        self.log("%s %s: %s; best %s at level %g (%.1f infer/s, p99 %.3g ms); %s" % (
            "ok   " if r.score[0] else "miss ", cfg.label(),
            ", ".join("%g:%.0f/s,%.3gms" % (p["level"], p["throughput_rps"], p["p99_ms"]) for p in points),
            "meets the objective" if r.score[0] else "misses the objective",
            bp["level"], bp["throughput_rps"], bp["p99_ms"], stop))
        return r

    def _score(self, cfg):
        r = self.evaluate(cfg)
        if r is None or not r.points:
            return None
        return r.score

    # -- moves along one dimension

    def _with(self, cfg, dim, val):
        return self.space.normalize(cfg._replace(**{dim: val}))

    def _line(self, cur, dim):
        """The best configuration along `dim` through `cur` (cur itself when nothing beats it)."""
        vals = self.space.values[dim]
        best, best_s = cur, self._score(cur)
        if best_s is None:
            best_s = (0, -math.inf, None)
        if dim not in ORDERED:
            cands = [self._with(cur, dim, v) for v in vals]
            partner = JOINT.get(dim)
            if partner:           # each value also one step either side along its partner dimension
                pv = self.space.values[partner]
                k = pv.index(getattr(cur, partner))
                for v in vals:
                    for j in (k - 1, k + 1):
                        if 0 <= j < len(pv) and v != getattr(cur, dim):
                            cands.append(self._with(cur._replace(**{partner: pv[j]}), dim, v))
            for c in cands:
                s = self._score(c)
                if s is not None and better(s, best_s):
                    best, best_s = c, s
            return best
        i = vals.index(getattr(cur, dim))
        for step in (1, -1):      # outward from the current value: up first, then down if up gained nothing
            j = i + step
            moved = False
            while 0 <= j < len(vals):
                c = self._with(cur, dim, vals[j])
                s = self._score(c)
                if s is None or better(best_s, s):
                    break         # the first value worse than the best ends this direction
                if better(s, best_s):
                    best, best_s, moved = c, s, True
                j += step         # better or level (a plateau): walk on
            if moved:
                break
        return best

    def run(self):
        """Runs the descent; returns the best Result (None when nothing could be measured)."""
        self.t0 = self.clock()
        cur = self.space.start()
        self.evaluate(cur)
        dims = self.space.active_dims()
        for n in range(self.max_passes):
            before = cur
            for d in dims:
                if self.stopped:
                    break
                cur = self._line(cur, d)
            if cur == before or self.stopped:
                break
        if self.refine:
            self._refine()
        if self.confirm:
            self._confirm()
        return self.best()

    def _refine(self):
        """For the throughput objective, the best configurations' deciding level is bisected towards the
        next level, which missed the p99 target: up to `refine` levels in between (concurrency is an
        integer), each kept where it meets the target, so the winner is not held to the coarse ladder."""
        if self.obj.kind != "throughput":
            return
        for r in [r for r in self._ranked(lambda r: r.score) if r.score[0]][:max(1, self.confirm)]:
            for _ in range(self.refine):
                if self._elapsed() > self.budget_s:
                    return
                lo = r.best_point["level"]
                above = sorted(p["level"] for p in r.points if p["level"] > lo)
                if not above or not all(self.obj.over_target(p) for p in r.points if p["level"] == above[0]):
                    break     # nothing above it was measured, or the next level up did not miss the target
                mid = (lo + above[0]) // 2
                if mid <= lo:
                    break
                if self.bench.prepare(r.cfg):
                    break
                p = dict(self.bench.measure(r.cfg, mid))
                p.setdefault("level", mid)
                p["phase"] = "refine"
                r.points.append(p)
                r.score = self.obj.score(r.points)
                self.log("refine %s at level %g: %.1f infer/s, p99 %.3g ms" % (
                    r.cfg.label(), mid, p["throughput_rps"], p["p99_ms"]))

    def _ranked(self, key, results=None):
        """Measured results (by default all), best first by key(result) (a score), ties in measuring order."""
        out = []
        for r in (self.results.values() if results is None else results):
            if r.points:
                k = 0
                while k < len(out) and not better(key(r), key(out[k]), tol=0.0):
                    k += 1
                out.insert(k, r)
        return out

    def _confirm(self):
        """The best configurations that meet the objective are loaded again and measured once more at
        their deciding level, in order, until `confirm` of them still meet it (or none is left, or the
        budget is spent); each then counts with the worse of its two measurements (the lower throughput,
        the higher p99, the errors of both), so one lucky window cannot win."""
        candidates = [r for r in self._ranked(lambda r: r.score) if r.score[0]]
        finalists = []
        for r in candidates:
            held = sum(1 for f in finalists if f.final[0])
            if held >= self.confirm or (finalists and self._elapsed() > self.budget_s):
                break     # enough hold, or the budget is spent (one confirmation is always made)
            finalists.append(r)
            bp = r.best_point
            why = self.bench.prepare(r.cfg)
            if why:
                r.final = (0, -math.inf, r.score[2])
                self.log("confirm %s: %s" % (r.cfg.label(), why))
                continue
            p = dict(self.bench.measure(r.cfg, bp["level"]))
            p.setdefault("level", bp["level"])
            p["phase"] = "confirm"
            r.points.append(p)
            worse = dict(p, throughput_rps=min(p["throughput_rps"], bp["throughput_rps"]),
                         p99_ms=max(p["p99_ms"], bp["p99_ms"]), errors=p["errors"] + bp["errors"])
            s = self.obj.score([worse])
            r.final, r.worse = (s[0], s[1], len(r.points) - 1), worse
            self.log("confirm %s at level %g: %.1f infer/s, p99 %.3g ms (first %.1f infer/s, p99 %.3g ms); %s" % (
                r.cfg.label(), bp["level"], p["throughput_rps"], p["p99_ms"], bp["throughput_rps"], bp["p99_ms"],
                "holds" if s[0] else "no longer meets the objective"))
        self.confirmed = self._ranked(lambda r: r.final, finalists)

    def best(self):
        """The winner: among the confirmed finalists by their confirmed score where there are any, else
        the best descent score."""
        ranked = self.confirmed or self._ranked(lambda r: r.score)
        return ranked[0] if ranked else None

    def measured_points(self):
        return sum(len(r.points) for r in self.results.values())
