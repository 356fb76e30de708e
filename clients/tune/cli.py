"""inferd-tune: find the best fixed config.pbtxt for one model on this server and machine.

  inferd-tune --model-repository DIR -m MODEL --objective throughput --p99-ms 10 [bounds] [--out DIR]
  inferd-tune --model-repository DIR -m MODEL --objective latency --min-throughput 2000 [bounds]

It starts inferd (explicit model-control mode, free ports), then for each configuration the search
picks loads the model with that config as a JSON override (no restart), warms it, and measures load
levels with inferd-load (closed loop at each --concurrency level; for the latency objective open
loop at the --min-throughput rate by default), reading the server's /metrics before and after each.
The search (clients/tune/search.py) is a coordinate descent with pruning, not a grid, bounded by
--budget-s. Writes into --out: config.pbtxt (the best configuration: the model's config with the
tuned fields changed), points.csv (every measured point) and report.html (self-contained: plot,
table, per-configuration details), and server.log. Exit status: 0 when a configuration met the
objective, 3 when none did (the nearest is written), 1 on errors, 2 on usage errors.
"""

import argparse
import os
import shutil
import sys
import time

from . import modelcfg, report
from .bench import Bench, LoadError
from .search import PREFERRED_MODES, Objective, Search, Space
from .server import Server, ServerError

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def _ints(s):
    try:
        v = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("want comma-separated integers, got %r" % s)
    if not v or any(x < 0 for x in v):
        raise argparse.ArgumentTypeError("want non-negative integers, got %r" % s)
    return v


def _words(allowed):
    def parse(s):
        v = [x.strip() for x in s.split(",") if x.strip()]
        bad = [x for x in v if x not in allowed]
        if not v or bad:
            raise argparse.ArgumentTypeError("%r: want a comma-separated list of %s" % (s, ", ".join(allowed)))
        return v
    return parse


def _find_bin(name, given, argv0):
    if given:
        return given
    env = os.environ.get("INFERD_BIN" if name == "inferd" else "INFERD_LOAD_BIN")
    if env:
        return env
    dirs = [os.environ.get("INFERD_TUNE_BINDIR"), os.path.dirname(os.path.abspath(argv0)),
            os.path.join(REPO_ROOT, "build", "bin")]
    for d in filter(None, dirs):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def parser():
    ap = argparse.ArgumentParser(prog="inferd-tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("model and objective")
    g.add_argument("--model-repository", required=True, help="the repository holding the model")
    g.add_argument("-m", "--model-name", required=True)
    g.add_argument("--objective", choices=["throughput", "latency"], default="throughput")
    g.add_argument("--p99-ms", type=float, help="throughput objective: the p99 latency target in ms")
    g.add_argument("--min-throughput", type=float, help="latency objective: the throughput to sustain, infer/s")
    g = ap.add_argument_group("the space (comma-separated lists)")
    g.add_argument("--kinds", type=_words(("auto", "cpu", "gpu")), default=["auto"],
                   help="instance kinds (default auto: gpu where /dev/nvidiactl exists, else cpu)")
    g.add_argument("--precisions", type=_words(("fp32", "tf32", "fp16")), default=["fp32", "fp16"],
                   help="GPU precisions (CPU instances always run fp32; default fp32,fp16)")
    g.add_argument("--instances", type=_ints, default=[1, 2, 4], help="instance counts (default 1,2,4)")
    g.add_argument("--max-batch-sizes", type=_ints, default=[1, 4, 16, 64], help="default 1,4,16,64")
    g.add_argument("--queue-delays-us", type=_ints, default=[0, 100, 500, 2000], help="default 0,100,500,2000")
    g.add_argument("--preferred", type=_words(PREFERRED_MODES), default=["none", "max"],
                   help="preferred batch sizes: none, max ([mbs]), half ([mbs/2, mbs]); default none,max")
    g.add_argument("--gpu-memory-gib", type=float, help="a configuration using more GPU memory than this "
                   "(nv_gpu_memory_used_bytes after its load) counts as failed, and larger ones are skipped")
    g = ap.add_argument_group("load")
    g.add_argument("--load", choices=["concurrency", "rate"],
                   help="closed loop at --concurrency levels (default for the throughput objective) or open loop "
                   "at the --min-throughput rate (default for the latency objective)")
    g.add_argument("--concurrency", type=_ints, default=[1, 2, 4, 8, 16, 32, 64],
                   help="closed-loop levels, tried from low to high (default 1,2,4,8,16,32,64)")
    g.add_argument("--duration-s", type=float, default=2.0, help="measured seconds per level (default 2)")
    g.add_argument("--warmup-s", type=float, default=1.0, help="load before measuring each configuration (default 1)")
    g.add_argument("--threads", type=int, help="inferd-load --threads")
    g.add_argument("--load-arg", action="append", default=[], help="one more inferd-load argument (repeatable)")
    g.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget of the search (default 600)")
    g.add_argument("--no-retry", action="store_true", help="end a configuration's sweep at the first level over "
                   "the p99 target without measuring it once more")
    g.add_argument("--refine", type=int, default=2, help="throughput objective: bisections of the finalists' "
                   "concurrency between their best level and the next, which missed the target (default 2; 0: none)")
    g.add_argument("--confirm", type=int, default=2, help="at the end the best configurations are measured again, "
                   "best first, until this many still meet the objective; each is ranked by the worse of its two "
                   "measurements (default 2; 0: none)")
    g = ap.add_argument_group("server and output")
    g.add_argument("--out", help="output folder (default tune_<model>)")
    g.add_argument("--inferd", help="the inferd binary (default: $INFERD_BIN, beside build/bin/inferd-tune, "
                   "build/bin, PATH)")
    g.add_argument("--inferd-load", help="the inferd-load binary (default: $INFERD_LOAD_BIN, then as --inferd)")
    g.add_argument("--server-arg", action="append", default=[], help="one more inferd argument (repeatable)")
    g.add_argument("--url", help="use a running server's gRPC host:port instead of starting one "
                   "(explicit model-control mode; needs --http-url)")
    g.add_argument("--http-url", help="with --url: its HTTP base URL, e.g. http://localhost:8000")
    g.add_argument("--metrics-url", help="with --url: its /metrics URL (default <http-url>/metrics)")
    return ap


def main(argv=None):
    ap = parser()
    a = ap.parse_args(argv)
    try:
        obj = Objective(a.objective, p99_ms=a.p99_ms, min_rps=a.min_throughput)
    except ValueError as e:
        ap.error(str(e))
    if a.url and not a.http_url:
        ap.error("--url needs --http-url")
    if a.duration_s <= 0 or a.budget_s <= 0:
        ap.error("--duration-s and --budget-s must be positive")
    mode = a.load or ("rate" if a.objective == "latency" else "concurrency")
    if mode == "rate" and not a.min_throughput:
        ap.error("--load rate measures at --min-throughput: give it")
    levels = [a.min_throughput] if mode == "rate" else sorted(set(x for x in a.concurrency if x > 0))
    if not levels:
        ap.error("--concurrency needs a level above 0")
    kinds = ["gpu" if os.path.exists("/dev/nvidiactl") else "cpu"] if a.kinds == ["auto"] else \
        [k for k in a.kinds if k != "auto"]
    out = a.out or "tune_%s" % a.model_name
    os.makedirs(out, exist_ok=True)
    inferd = _find_bin("inferd", a.inferd, sys.argv[0])
    load_bin = _find_bin("inferd-load", a.inferd_load, sys.argv[0])
    if not load_bin or not os.access(load_bin, os.X_OK):
        print("inferd-tune: inferd-load not found (give --inferd-load)", file=sys.stderr)
        return 1
    model_dir = os.path.join(a.model_repository, a.model_name)
    if not a.url and not os.path.isdir(model_dir):
        print("inferd-tune: no model %r in %s" % (a.model_name, a.model_repository), file=sys.stderr)
        return 1

    def log(s):
        print("[%6.1fs] %s" % (time.monotonic() - t0, s), flush=True)
    t0 = time.monotonic()
    srv = Server(repo=a.model_repository, binary=inferd, extra_args=a.server_arg,
                 log_path=os.path.join(out, "server.log"), grpc_url=a.url, http_url=a.http_url,
                 metrics_url=a.metrics_url)
    search, failure = None, None
    try:
        srv.start()
        log("server ready: grpc %s, http %s" % (srv.grpc_url, srv.http_url))
        if os.path.exists(os.path.join(model_dir, "config.pbtxt")):
            base = modelcfg.read_base(a.model_repository, a.model_name)
        else:   # no config.pbtxt: start from the one the server completes from the ONNX file
            why = srv.load(a.model_name)
            if why:
                raise ServerError("%s does not load as it is: %s" % (a.model_name, why))
            base = modelcfg.read_base(None, a.model_name, srv.model_config(a.model_name))
        mbs = a.max_batch_sizes
        delays, pref = a.queue_delays_us, a.preferred
        if base.max_batch_size == 0:
            log("%s does not batch (max_batch_size 0): only instances%s are tuned" % (
                a.model_name, " and precision" if "gpu" in kinds else ""))
            mbs, delays, pref = [0], [0], ["none"]
        space = Space(kinds=kinds, precisions=a.precisions if "gpu" in kinds else ["fp32"], max_batch_sizes=mbs,
                      instances=[i for i in a.instances if i > 0] or [1], queue_delays_us=delays, preferred=pref)
        bench = Bench(srv, a.model_name, base, load_bin, duration_s=a.duration_s, warmup_s=a.warmup_s, mode=mode,
                      gpu_memory_gib=a.gpu_memory_gib, threads=a.threads, load_args=a.load_arg, log=log,
                      workdir=out)
        bench.levels_hint = levels[0] if mode == "rate" else min(levels[-1], max(levels[0], 8))
        log("objective: %s; load: %s %s, %g s each; space: %s (a grid of %d); budget %g s" % (
            obj.describe(), mode, ",".join("%g" % x for x in levels), a.duration_s,
            "; ".join("%s %s" % (d, ",".join(map(str, v))) for d, v in space.values.items()), len(space.grid()),
            a.budget_s))
        search = Search(space, obj, bench, levels, budget_s=a.budget_s, log=log, confirm=max(0, a.confirm),
                        retry_miss=not a.no_retry, refine=max(0, a.refine))
        best = search.run()
    except (ServerError, LoadError, OSError) as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure = "interrupted"
    elapsed = time.monotonic() - t0
    if a.url and failure is None:
        srv.load(a.model_name)   # the repository's own config back
    rc = srv.stop()
    for f in ("warmup.json", "level.json"):
        try:
            os.remove(os.path.join(out, f))
        except OSError:
            pass
    if failure and (search is None or search.t0 is None):
        print("inferd-tune: %s" % failure, file=sys.stderr)
        return 1
    if failure:   # what was measured before it still gets written
        search.stopped = "failed: " + failure
        best = search.best()
    best_text = None
    if best is not None:
        best_text = modelcfg.to_pbtxt(modelcfg.apply(base, best.cfg))
        with open(os.path.join(out, "config.pbtxt"), "w") as f:
            f.write(best_text)
    rows = report.rows_of(search, mode, best)
    report.write_csv(os.path.join(out, "points.csv"), rows)
    not_measured = sum(1 for r in search.results.values() if not r.points)
    report.write_html(os.path.join(out, "report.html"), rows, search, best, {
        "model": a.model_name, "elapsed_s": elapsed, "grid": len(space.grid()), "not_measured": not_measured,
        "load": "%s %s" % (mode, ",".join("%g" % x for x in levels)), "duration_s": a.duration_s}, best_text)
    n_cfg = len({r["config"] for r in rows})
    print("measured %d points over %d configurations (%d skipped or failed; a grid has %d) in %.0f s%s" % (
        len(rows), n_cfg, not_measured, len(space.grid()), elapsed,
        "; stopped early: " + search.stopped if search.stopped else ""))
    if rc not in (None, 0):
        print("inferd-tune: the server exited with status %s (see %s)" % (rc, os.path.join(out, "server.log")),
              file=sys.stderr)
    if failure:
        print("inferd-tune: %s" % failure, file=sys.stderr)
        return 1
    if best is None:
        print("no configuration could be measured; see %s" % os.path.join(out, "report.html"))
        return 1
    bp = best.worse or best.best_point
    met = (best.final or best.score)[0]
    print("%s: %s at level %g: %.1f infer/s, p99 %.3f ms%s" % (
        "best" if met else "NONE met the objective; nearest", best.cfg.label(), bp["level"],
        bp["throughput_rps"], bp["p99_ms"], " (confirmed: the worse of two measurements, %.1f and %.1f infer/s, "
        "p99 %.3f and %.3f ms)" % (best.best_point["throughput_rps"], best.points[-1]["throughput_rps"],
                                   best.best_point["p99_ms"], best.points[-1]["p99_ms"]) if best.worse else ""))
    print("wrote %s, %s, %s" % tuple(os.path.join(out, f) for f in ("config.pbtxt", "points.csv", "report.html")))
    return 0 if met else 3


if __name__ == "__main__":
    sys.exit(main())
